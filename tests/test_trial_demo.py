"""A new user's trial of `dpsql demo`: its seeded release puts 2 of its 12 true counts
outside their 95% intervals (R1's 10,971 above [10,962, 10,969], R1-P2's 5,211 above
[5,203, 5,210]), shown without a word, which reads as intervals that are too narrow. Over
30 other seeds of the same demo, 95.8% of the region and 96.4% of the province intervals
hold the truth: chance. The demo now marks each miss and says how many there are."""

from __future__ import annotations

import io
import re

from rich.console import Console

from dpsql.demo import run_demo


def test_demo_marks_truths_outside_their_interval_and_counts_them(tmp_path):
    out = io.StringIO()
    assert run_demo(Console(file=out, width=200, color_system=None),
                    workdir=str(tmp_path)) == 0
    text = out.getvalue()
    header, marked, checked = [], 0, 0
    for line in text.splitlines():
        if line.startswith("┃"):
            header = [c.strip() for c in line.split("┃")[1:-1]]
        elif line.startswith("│") and {"lo", "hi"} <= set(header):
            row = dict(zip(header, (c.strip() for c in line.split("│")[1:-1])))
            number = lambda v: float(v.split(" ")[0].replace(",", ""))  # noqa: E731
            truth = row["truth (demo only)"]
            outside = not number(row["lo"]) <= number(truth) <= number(row["hi"])
            assert ("(outside)" in truth) == outside, row
            checked += 1
            marked += outside
    match = re.search(r"(\d+) of (\d+) true values lie outside their 95% interval", text)
    assert match, text
    # 12 counts and the median's interval
    assert (int(match.group(1)), int(match.group(2))) == (marked, checked) and checked == 13
