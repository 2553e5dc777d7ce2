"""Range COUNTs on a large real-valued view: the prefix table against the level tables.

A range ``[lo, hi)`` over a view's last attribute, with both bounds on the leaf-bin grid,
is answered from the view's prefix table as cum[b1] − cum[b0] (two rows) instead of a
sum over the nodes of a level (every node overlapping the range, for bounds that only
the leaves align with). Integer views (InfTDA) always took that shortcut; real-valued
views (Cascade, b-ary and Gaussian/Laplace trees) take it since their counts are on the
release's dyadic grid, where the prefix sums are exact (``dpsql.planner.rewrite_query
.exact_prefix``: the same double as the level path, ``==``).

Both paths are measured in the same run, on the same release file, interleaved query by
query: "before" is a copy of the file without ``count_grid`` in its views' info, which
the planner answers from the level tables, as it answered every real-valued view
before. Reported, each the median over ``QUERIES`` random leaf-aligned ranges of the
best of ``REPEAT`` runs (the least noisy figure on a shared machine):

* ``end_to_end``: ``cursor.execute`` + ``fetchall`` through :func:`dpsql.connect` (plan
  cache off: every run parses, plans and rewrites), before / after;
* ``exec``: the planned SQL alone run on DuckDB, before / after;

with ``ratio`` = before / after (> 1: the shortcut is faster; ``ratio_min`` and
``ratio_max`` over the queries) and its inverse ``time_after_over_before`` (the README
row: the prefix read's time as a share of the level path's). Every answer is checked ``==`` between the two paths.

What to expect: the prefix read costs about a millisecond at any size (DuckDB scans the
one or two row groups, of 122,880 rows, that hold bins b0 and b1: the release has no
index on ``bin``), while the level path costs about a millisecond plus the rows of the
range at the coarsest level its bounds align with. So the shortcut wins on large views
and long ranges and breaks even (or loses a tenth of a millisecond) on small ones.

Views of 2^12, 2^16 and 2^20 bins (:data:`SIZES`), one release each. Run:
``.venv/bin/python benchmarks/prefix_ranges.py`` (about half a minute on 2 cores);
``--quick`` runs 2^16 bins alone and writes ``prefix_ranges_quick.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

import dpsql  # noqa: E402
from dpsql import duck  # noqa: E402
from dpsql.dbapi import SeededReleaseWarning  # noqa: E402

N_ROWS = 1_000_000
QUERIES = 20
REPEAT = 7
SIZES = (2 ** 12, 2 ** 16, 2 ** 20)


def build(base: Path, bins: int) -> tuple[Path, Path]:
    """A release with a Cascade view of ``bins`` leaves over a real x, and its copy
    without ``count_grid`` (the level path). Returns (after, before)."""
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    g = np.random.default_rng(1)
    pq.write_table(pa.table({"x": g.gamma(2.0, bins / 8, N_ROWS).clip(0, bins - 1e-3)}),
                   base / "x.parquet")
    spec = {"name": "r", "source": "x.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"x": {"kind": "range", "lower": 0, "upper": bins, "bins": bins}},
            "views": [{"name": "casc", "levels": ["x"], "mechanism": "cascade"}]}
    after = base / "after.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), after, seed=3, progress=False)
    before = base / "before.duckdb"
    shutil.copy(after, before)
    with duckdb.connect(str(before)) as con:
        for name, info in con.execute("SELECT name, info FROM dpsql_views").fetchall():
            info = json.loads(info)
            info.pop("count_grid")
            con.execute("UPDATE dpsql_views SET info = ? WHERE name = ?",
                        [json.dumps(info), name])
    return after, before


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(bins: int) -> dict:
    g = np.random.default_rng(7)
    edges = np.sort(g.integers(1, bins, (QUERIES, 2)), axis=1)
    edges[:, 1] = np.maximum(edges[:, 1], edges[:, 0] + 1)
    queries = [f"SELECT COUNT(*) FROM r WHERE x >= {lo} AND x < {hi}" for lo, hi in edges]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        after, before = build(Path(tmp), bins)
        build_s = time.perf_counter() - t0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeededReleaseWarning)
            cons = {"after": dpsql.connect(after, plan_cache_size=0),
                    "before": dpsql.connect(before, plan_cache_size=0)}
        raw = {}
        for side, path in (("after", after), ("before", before)):
            raw[side] = duckdb.connect()
            duck.attach(raw[side], str(path))
        e2e = {"after": [], "before": []}
        exe = {"after": [], "before": []}
        read = {}
        for q in queries:
            planned = {side: duck.plan(raw[side], q) for side in raw}
            read = {side: planned[side].info["read_table"] for side in raw}
            answers = {}
            times = {"after": [], "before": []}
            exec_times = {"after": [], "before": []}
            for _ in range(REPEAT):  # interleaved: drift hits both sides alike
                for side in ("after", "before"):
                    cur = cons[side].cursor()
                    dt, rows = _timed(lambda: cur.execute(q).fetchall())
                    times[side].append(dt)
                    answers[side] = rows
                    dt, _ = _timed(lambda: raw[side].execute(planned[side].sql).fetchall())
                    exec_times[side].append(dt)
            if answers["after"] != answers["before"]:
                raise SystemExit(f"answers differ on {q}: {answers}")
            for side in times:  # best of REPEAT: the least noisy on a shared machine
                e2e[side].append(min(times[side]))
                exe[side].append(min(exec_times[side]))
        for c in (*cons.values(), *raw.values()):
            c.close()

    def summary(t: dict) -> dict:
        a, b = statistics.median(t["after"]) * 1e3, statistics.median(t["before"]) * 1e3
        ratios = [x / y for x, y in zip(t["before"], t["after"])]
        return {"after_ms": round(a, 3), "before_ms": round(b, 3),
                "ratio": round(statistics.median(ratios), 2),
                "ratio_min": round(min(ratios), 2), "ratio_max": round(max(ratios), 2),
                "time_after_over_before": round(statistics.median(
                    [y / x for x, y in zip(t["before"], t["after"])]), 3)}

    return {"bins": bins, "rows": N_ROWS, "queries": QUERIES, "repeat": REPEAT,
            "build_s": round(build_s, 1), "read_table": read,
            "end_to_end": summary(e2e), "exec": summary(exe)}


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = (2 ** 16,) if args.quick else SIZES
    out = {"sizes": [run(bins) for bins in sizes]}
    path = write("prefix_ranges_quick" if args.quick else "prefix_ranges", out)
    print(json.dumps(out, indent=2))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
