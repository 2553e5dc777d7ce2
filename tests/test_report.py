"""`dpsql report`: the HTML accuracy report, built from real seeded releases.

The report is parsed with :mod:`html.parser`; every embedded PNG is decoded and read back
by matplotlib; its numbers are checked against the release tables (never the raw data),
and the untrusted strings of a tampered release file must come out escaped.
"""

from __future__ import annotations

import math
import base64
import io
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import numpy as np
import pytest

from dpsql._install import install_hint
from dpsql.cli import main
from dpsql.errors import NotSupportedError
from dpsql.release import build_release, open_release
from dpsql.report import build_report, first_level_counts, level_rows, range_curves
from dpsql.spec import ReleaseSpec
from conftest import connect_seeded

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCRIPT_CATEGORY = "<script>alert('x')</script>"
MODES = ["car", "train", "bus", "bike", "walk", "plane"]


# ----------------------------------------------------------------------------- parsing

class _Report(HTMLParser):
    """Sections of the report: id, class, headings, images, tables (cell texts)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict] = []
        self.title = ""
        self._in: list[str] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def _sec(self) -> dict:
        return self.sections[-1]

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._in.append(tag)
        if tag == "section":
            self.sections.append({"id": a.get("id"), "class": a.get("class"), "h2": "",
                                  "h3": [], "imgs": [], "tables": [], "text": ""})
        elif tag == "img" and self.sections:
            self._sec()["imgs"].append((a.get("alt"), a.get("src")))
            self._in.pop()  # void element
        elif tag == "table" and self.sections:
            self._sec()["tables"].append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self.sections:
            self._sec()["tables"][-1].append(self._row)
            self._row = None
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if "title" in self._in:
            self.title += data
        if not self.sections or "section" not in self._in:
            return
        sec = self._sec()
        sec["text"] += data
        if self._in[-1] == "h2":
            sec["h2"] += data
        elif self._in[-1] == "h3":
            sec["h3"].append(data)


def _parse(page: str) -> _Report:
    parser = _Report()
    parser.feed(page)
    parser.close()
    return parser


def _views(parsed: _Report) -> dict[str, dict]:
    return {s["id"][len("view-"):]: s for s in parsed.sections if s["class"] == "view"}


def _png(src: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    return base64.b64decode(src[len(prefix):], validate=True)


def _check_images(parsed: _Report) -> int:
    import matplotlib.image

    n = 0
    for sec in parsed.sections:
        for alt, src in sec["imgs"]:
            data = _png(src)
            assert data.startswith(PNG_SIGNATURE), alt
            pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
            assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 500, alt
            assert float(pixels[..., :3].std()) > 0.05, f"{alt}: a blank image"
            n += 1
    return n


# ----------------------------------------------------------------------------- releases

@pytest.fixture(scope="module")
def trips_report(trips_release) -> tuple[str, _Report]:
    page = build_report(trips_release)
    return page, _parse(page)


def _range_spec(base: Path) -> dict:
    return {
        "name": "ranges", "source": str(base / "trips.parquet"),
        "neighbouring": "add_remove", "budget": {"rho": 1.0},
        "attributes": {
            "mode": {"kind": "categorical", "domain": MODES + [SCRIPT_CATEGORY]},
            "distance": {"kind": "range", "lower": 0, "upper": 256, "bins": 64,
                         "on_out_of_bounds": "clamp"},
            "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100},
        },
        "views": [
            {"name": "dist_cascade", "levels": ["distance"], "mechanism": "cascade"},
            {"name": "age_btree", "levels": ["age"], "mechanism": "btree"},
            {"name": "dist_laplace", "levels": ["distance"], "mechanism": "laplace_tree"},
            {"name": "age_gauss", "levels": ["age"], "mechanism": "gaussian_tree"},
            {"name": "age_inftda", "levels": ["age"], "mechanism": "inftda"},
            {"name": "mode_dist", "levels": ["mode", "distance"],
             "mechanism": "gaussian_tree"},
        ],
    }


@pytest.fixture(scope="module")
def ranges_release(trips_data, tmp_path_factory) -> Path:
    """A range view of every mechanism, plus a categorical level with a `<script>` value."""
    out = tmp_path_factory.mktemp("report") / "ranges.duckdb"
    spec = ReleaseSpec.from_dict(_range_spec(trips_data), base_dir=trips_data)
    build_release(spec, out, seed=5, progress=False)
    return out


@pytest.fixture(scope="module")
def ranges_analyst(ranges_release):
    """A cursor of dpsql.connect on ranges_release: the InfTDA bands are what SQL gives."""
    con = connect_seeded(ranges_release)
    cur = con.cursor()
    cur.warn_notices = False
    yield cur
    con.close()


@pytest.fixture(scope="module")
def ranges_report(ranges_release) -> tuple[str, _Report]:
    page = build_report(ranges_release)
    return page, _parse(page)


# ----------------------------------------------------------------------------- structure

def test_trips_report_has_every_section(trips_release, trips_report):
    page, parsed = trips_report
    release = open_release(trips_release)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    assert parsed.title == "Accuracy report: trips"
    by_id = {s["id"]: s for s in parsed.sections}
    guarantee = by_id["guarantee"]
    forms = {row[0]: row[1] for row in guarantee["tables"][0][1:]}
    assert forms["ρ-zCDP"] == "ρ = 1"
    assert forms["(ε, δ)-DP"] == f"ε = {release.epsilon:.6g} at δ = 1e-09"
    assert forms["as declared"] == "ρ=1 (zCDP)"
    assert "δ = 1e-05" in forms["(ε, δ)-DP implied by ρ"]
    assert forms["privacy unit"] == "one row" and forms["neighbouring"].startswith("add/remove")
    assert "Not private" in guarantee["text"]  # the fixture is seeded
    budget = by_id["budget"]["tables"][0]
    assert [r[0] for r in budget[1:-1]] == list(release.views)
    assert budget[-1][0] == "total" and float(budget[-1][-1]) == pytest.approx(1.0)
    shares = {r[0]: r[3] for r in budget[1:-1]}
    assert shares["geo_mode"] == "33.3%" and shares["dist"] == "16.7%"  # weights 2:1:1:1:1

    views = _views(parsed)
    assert list(views) == list(release.views)
    range_views = {"dist", "age_tree", "mode_dist"}
    for name, view in release.views.items():
        sec = views[name]
        assert sec["h2"] == f"View {name}"
        levels = sec["tables"][0]
        assert [r[0] for r in levels[1:]] == [str(k) for k in range(1, view.depth + 1)]
        alts = [alt for alt, _ in sec["imgs"]]
        assert alts[0] == f"per-level error of view {name}"
        first = view.levels[0]
        counts = ([f"Released counts by {first.columns[-1]}"] if first.kind != "range"
                  else [])
        if name in range_views:
            attr = view.attributes[-1]
            assert sec["h3"] == counts + [f"Range attribute {attr}"]
            assert alts[1:] == [f"released CDF of {attr} in view {name}",
                                f"released counts per bin of {attr} in view {name}"]
        else:
            assert len(alts) == 1 and sec["h3"] == counts
    # InfTDA states its bound for what it is; variance views say σ
    assert "Per answer" in views["geo_mode"]["text"]  # InfTDA: both kinds of error
    assert "Simultaneous" in views["geo_mode"]["text"]
    assert "Unbiased: dp_estimate()" in views["geo_mode"]["text"]  # and its companion
    assert "InfTDA's calibrated per-answer interval" in views["mode_dist"]["text"]
    assert "exact variance" in views["dist"]["text"]
    assert _check_images(parsed) == len(release.views) + 2 * len(range_views)


def test_range_views_of_every_kind(ranges_release, ranges_report):
    page, parsed = ranges_report
    views = _views(parsed)
    assert set(views) == {"dist_cascade", "age_btree", "dist_laplace", "age_gauss",
                          "age_inftda", "mode_dist"}
    for name, sec in views.items():
        assert len(sec["imgs"]) == 3, name
        assert sec["h3"][-1].startswith("Range attribute"), name
    assert "InfTDA's calibrated per-answer interval" in views["age_inftda"]["text"]
    for name in ("dist_cascade", "age_btree", "dist_laplace", "age_gauss", "mode_dist"):
        assert "±1.96 σ from the exact variance" in views[name]["text"], name
    assert "Summed over the 7 nodes of the levels above distance" in views["mode_dist"]["text"]
    assert _check_images(parsed) == 18


def test_pure_dp_release_states_its_guarantee(trips_data, tmp_path):
    spec = {
        "name": "ages", "source": str(trips_data / "trips.parquet"),
        "neighbouring": "substitute", "privacy_unit": {"column": "traveller", "max_rows": 2},
        "budget": {"epsilon": 1.0},
        "attributes": {"age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100}},
        "views": [{"name": "age_btree", "levels": ["age"], "mechanism": "btree", "weight": 3},
                  {"name": "age_laplace", "levels": ["age"], "mechanism": "laplace_tree"}],
    }
    out = tmp_path / "ages.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=trips_data), out, seed=3,
                  progress=False)
    parsed = _parse(build_report(out))
    by_id = {s["id"]: s for s in parsed.sections}
    forms = {row[0]: row[1] for row in by_id["guarantee"]["tables"][0][1:]}
    assert forms["guarantee"] == "ε=1 pure DP; ρ=0.5-zCDP"
    assert forms["pure DP"] == "ε = 1 (δ = 0)" and forms["ρ-zCDP"] == "ρ = 0.5"
    assert forms["as declared"] == "ε=1 (pure DP)"
    assert forms["neighbouring"].startswith("substitute")
    assert forms["privacy unit"] == ("all rows with the same traveller (at most 2); how many "
                                     "rows each keeps is public (substitute)")
    budget = by_id["budget"]["tables"][0]
    assert [(r[0], r[3]) for r in budget[1:]] == [
        ("age_btree", "75.0%"), ("age_laplace", "25.0%"), ("total", "100%")]
    assert budget[1][4] == "ε=0.75 (pure DP)" and budget[-1][-1] == "0.5"
    assert _check_images(parsed) == 6


# ----------------------------------------------------------------------------- numbers

def _release_levels(con, view) -> list[tuple[int, int, int]]:
    out = []
    for lv in view.levels:
        stored, zeros, neg = con.execute(
            f'SELECT count(*), count(*) FILTER (dp_count = 0), count(*) FILTER (dp_count < 0) '
            f'FROM "{lv.table}"').fetchall()[0]
        out.append((stored, lv.n_nodes - stored + zeros, neg))
    return out


def test_level_tables_come_from_the_release(trips_release, trips_report, trips_data):
    _, parsed = trips_report
    release = open_release(trips_release)
    views = _views(parsed)
    con = duckdb.connect(str(trips_release), read_only=True)
    try:
        for name, view in release.views.items():
            table = views[name]["tables"][0]
            head = table[0]
            col = {h: i for i, h in enumerate(head)}
            for row, lv, (stored, zeros, neg) in zip(table[1:], view.levels,
                                                      _release_levels(con, view)):
                assert row[col["public nodes"]] == f"{lv.n_nodes:,}"
                assert row[col["stored rows"]] == f"{stored:,}"
                assert row[col["zeros"]] == f"{zeros:,}"
                assert row[col["negative"]] == f"{neg:,}"
            total = con.execute(f'SELECT sum(dp_count) FROM "{view.levels[0].table}"'
                                ).fetchall()[0][0]
            summary = view.error_model.level_summary()
            if view.mechanism == "inftda":  # integer counts; only positive nodes stored
                assert f"Released total: {int(total):,} (95% interval " in \
                    views[name]["text"]
                # per answer: the calibrated σ of one node; simultaneous: Theorem 1
                assert table[1][col["σ (one node)"]] == f"{summary[0]['stderr']:.3g}"
                assert table[1][col["95% bound (every node of the level at once)"]] == \
                    f"{summary[0]['bound95']:.3g}"
            else:
                assert table[1][col["σ (one node)"]] == f"{summary[0]['stderr']:.3g}"
        # The InfTDA root is noisy under add/remove (its model has a root variance): the
        # report shows the released total, never the true one. A seed's noise can leave
        # the two equal (P ~ 0.1; it does with seed 11 since the sampler's stream changed),
        # and then the text cannot tell them apart.
        true_total = duckdb.connect().execute(
            f"SELECT count(*) FROM '{trips_data / 'trips.parquet'}'").fetchall()[0][0]
        inftda_total = con.execute("SELECT sum(dp_count) FROM geo_mode__l1").fetchall()[0][0]
        assert release.views["geo_mode"].error_model.root_sigma2 > 0
        assert f"Released total: {inftda_total:,} (95% interval " in \
            views["geo_mode"]["text"]
        if inftda_total != true_total:
            assert f"Released total: {true_total:,} (95% interval " not in \
                views["geo_mode"]["text"]
    finally:
        con.close()
    # the public domain is listed, and only the public domain
    modes = views["geo_mode"]["tables"][0][-1][-1]
    assert modes == "car, train, bus, bike, walk, plane"


def _true_age_cdf(trips_data: Path) -> np.ndarray:
    hist = np.zeros(100)
    for age, n in duckdb.connect().execute(
            f"SELECT age, count(*) FROM '{trips_data / 'trips.parquet'}' GROUP BY age"
    ).fetchall():
        hist[int(age)] = n
    return np.concatenate([[0.0], np.cumsum(hist)])


def test_curves_equal_the_stored_prefix_sums(ranges_release, ranges_analyst, trips_data):
    release = open_release(ranges_release)
    con = duckdb.connect(str(ranges_release), read_only=True)
    try:
        for view in release.views.values():
            (curve,) = range_curves(con, release, view, ranges_analyst)
            K = len(curve.counts)
            lead = [c for lv in view.levels if lv.kind != "range" for c in lv.columns]
            cum = np.array([r[0] for r in con.execute(
                f'SELECT sum(cum) FROM "{view.prefix_table}" GROUP BY bin ORDER BY bin'
            ).fetchall()])
            assert cum.shape == (K + 1,)
            np.testing.assert_allclose(curve.cdf, cum, rtol=1e-9, atol=1e-6)
            assert curve.groups == (7 if lead else 1)
            assert curve.edges[0] == release.attributes[curve.attribute].lower
            assert curve.edges[-1] == release.attributes[curve.attribute].upper
            if curve.attribute == "age":  # noise is there: the report is not the truth
                assert not np.allclose(curve.cdf, _true_age_cdf(trips_data), atol=0.5)
    finally:
        con.close()


def test_bands_follow_the_error_model(ranges_release, ranges_analyst):
    release = open_release(ranges_release)
    con = duckdb.connect(str(ranges_release), read_only=True)
    try:
        curves = {v.name: range_curves(con, release, v, ranges_analyst)[0]
                  for v in release.views.values()}
    finally:
        con.close()
    # Cascade and the b-ary tree: range_variance, checked against sum_variance of the
    # leaves (a second code path of the model)
    for name in ("dist_cascade", "age_btree"):
        c, model = curves[name], release.views[name].error_model
        depth = model.depth
        assert c.band_kind == "variance" and len(c.band_at) == len(c.edges)
        for b in (1, 7, len(c.counts) // 2, len(c.counts)):
            v = model.sum_variance(depth, np.arange(b))
            assert c.band[b] == pytest.approx(1.959964 * v.stderr, rel=1e-6)
        assert c.band[0] == 0.0
    # tree counts over groups: the prefix of every mode
    c, model = curves["mode_dist"], release.views["mode_dist"].error_model
    i = int(np.searchsorted(c.band_at, 10))
    ids = np.add.outer(np.arange(7) * 64, np.arange(c.band_at[i])).ravel()
    assert c.band[i] == pytest.approx(1.959964 * model.sum_variance(c.level, ids).stderr, rel=1e-6)
    assert c.bin_half[3] == pytest.approx(
        1.959964 * model.sum_variance(c.level, np.arange(7) * 64 + 3).stderr, rel=1e-6)
    # InfTDA: half the width of the interval SQL gives for the prefix and for each bin
    # (the band was computed from the leaf level's released rows alone, without the
    # released zeros and the coarser levels SQL reads: ±57.7 for the whole range of a
    # trips release, whose SQL interval, the released root's, is ±2.5)
    c = curves["age_inftda"]
    assert c.band_kind == "calibrated"
    edges = release.attributes["age"]
    for i in (3, len(c.band_at) // 2, len(c.band_at) - 1):
        _, lo, hi = ranges_analyst.execute(
            "SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM age_inftda "
            "WHERE age < ?", [float(c.edges[c.band_at[i]])]).fetchone()
        assert c.band[i] == (hi - lo) / 2
    root = ranges_analyst.execute(
        "SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM age_inftda").fetchone()
    assert c.edges[-1] == edges.upper and c.band[-1] == (root[2] - root[1]) / 2
    _, lo, hi = ranges_analyst.execute(
        "SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM age_inftda "
        "WHERE age >= 50 AND age < 51").fetchone()
    assert c.bin_half[50] == (hi - lo) / 2


@pytest.mark.statistical
def test_bands_cover_the_true_cdf(ranges_release, ranges_analyst, trips_data):
    """Seeded: the true CDF lies within 5 standard errors at every edge (variance views
    and InfTDA's calibrated intervals)."""
    release = open_release(ranges_release)
    truth = _true_age_cdf(trips_data)
    con = duckdb.connect(str(ranges_release), read_only=True)
    try:
        for name in ("age_btree", "age_gauss", "age_inftda"):
            c = range_curves(con, release, release.views[name], ranges_analyst)[0]
            err = np.abs(c.cdf[c.band_at] - truth[c.band_at])
            scale = c.band / 1.959964 * 5 if c.band_kind in ("variance", "calibrated") \
                else c.band
            assert np.all(err <= scale + 1e-9), name
            assert np.any(err > 0), name
    finally:
        con.close()


def test_level_rows_count_unstored_inftda_nodes_as_zeros(trips_release):
    release = open_release(trips_release)
    view = release.views["mode_dist"]
    con = duckdb.connect(str(trips_release), read_only=True)
    try:
        rows = level_rows(con, release, view)
        leaves = con.execute('SELECT count(*) FROM "mode_dist__l3"').fetchall()[0][0]
    finally:
        con.close()
    assert rows[-1].public_nodes == 384 and rows[-1].stored_rows == leaves
    assert rows[-1].zeros == 384 - leaves > 0  # InfTDA stores only positive nodes
    assert rows[-1].negatives == 0


def test_level_widths_of_dates_and_timestamps_are_calendar_lengths(typed_release):
    """A timestamp view's levels read "time_hour (width 2.21184e+07)": the axis's
    seconds. They now read in the attribute's unit, or the largest unit that divides."""
    release = open_release(typed_release)
    con = duckdb.connect(str(typed_release), read_only=True)
    try:
        widths = {a: [r.width_text for r in level_rows(con, release, release.views[f"v{a}"])]
                  for a in ("ts", "d", "n")}
    finally:
        con.close()
    assert widths["ts"][-1] == "1 hour" and all(w.endswith("hours") for w in widths["ts"][:-1])
    assert widths["d"][-1] == "1 day" and widths["n"][-1] == "1", widths


# ----------------------------------------------------------------------------- untrusted input

def test_release_strings_are_escaped(ranges_report, ranges_release, tmp_path):
    page, parsed = ranges_report
    assert "<script" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    levels = _views(parsed)["mode_dist"]["tables"][0]
    assert SCRIPT_CATEGORY in levels[1][-1]  # shown (as text) among the public values

    # A tampered file: names with markup, quotes and mathtext must come out as text.
    bad = tmp_path / "tampered.duckdb"
    shutil.copy(ranges_release, bad)
    view_name = "<script>alert(1)</script>\"' $x^$"
    con = duckdb.connect(str(bad))
    con.execute("UPDATE dpsql_views SET name = ? WHERE name = 'age_inftda'", [view_name])
    con.execute("UPDATE dpsql_release SET name = ?, rng = ?",
                ["<img src=x onerror=alert(1)>", "<b>seeded</b>"])
    con.close()
    page = build_report(bad)
    low = page.lower()
    assert "<script" not in low and "<img src=x" not in low and "<b>" not in low
    parsed = _parse(page)
    assert parsed.title == "Accuracy report: <img src=x onerror=alert(1)>"
    views = _views(parsed)
    assert view_name in views
    assert views[view_name]["h2"] == f"View {view_name}"
    assert views[view_name]["imgs"][0][0] == f"per-level error of view {view_name}"
    assert _check_images(parsed) == 18  # "$x^$" did not reach mathtext


# ----------------------------------------------------------------------------- CLI, deps

def test_cli_report(trips_release, tmp_path, capsys):
    release = tmp_path / "r.duckdb"
    shutil.copy(trips_release, release)
    out = tmp_path / "notes" / "accuracy.html"
    out.parent.mkdir()
    assert main(["report", str(release), "-o", str(out), "--quiet"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert page == build_report(release)  # same release, same report (byte for byte)
    assert main(["report", str(release), "--quiet"]) == 0  # default: next to the release
    assert release.with_suffix(".html").read_text(encoding="utf-8") == page

    assert main(["report", str(tmp_path / "missing.duckdb")]) == 1
    assert "does not exist" in capsys.readouterr().err
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).close()
    assert main(["report", str(plain)]) == 1
    assert "not a dpsql release" in capsys.readouterr().err


def test_missing_matplotlib_names_the_extra(trips_release, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(NotSupportedError, match=re.escape(install_hint("report"))):
        build_report(trips_release, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


def test_no_pyplot_and_rcparams_untouched(trips_release, tmp_path):
    """In a fresh interpreter: the report never imports pyplot and leaves rcParams as
    they were (the caller's matplotlib state is theirs)."""
    code = f"""
import json, sys
import matplotlib
before = {{k: repr(v) for k, v in dict.items(matplotlib.rcParams)}}
from dpsql.report import build_report
build_report({str(trips_release)!r}, {str(tmp_path / 'r.html')!r})
after = {{k: repr(v) for k, v in dict.items(matplotlib.rcParams)}}
print(json.dumps({{"pyplot": "matplotlib.pyplot" in sys.modules,
                  "changed": sorted(k for k in before if before[k] != after.get(k))}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"pyplot": False, "changed": []}


def test_first_level_counts_carry_their_per_answer_intervals(trips_release):
    """The counts table of an InfTDA view: every released region with its calibrated
    interval around it (never below 0); the same table of a Gaussian-tree view uses
    ±1.96 σ of each node's exact variance."""
    release = open_release(trips_release)
    con = duckdb.connect(str(trips_release), read_only=True)
    try:
        inftda_rows = first_level_counts(con, release.views["geo_mode"])
        released = dict(con.execute("SELECT region, dp_count FROM geo_mode__l1").fetchall())
        gauss = release.views["geo_gauss"]
        gauss_rows = first_level_counts(con, gauss)
    finally:
        con.close()
    assert {r[0] for r in inftda_rows} == set(released)
    for label, count, lo, hi in inftda_rows:
        assert count == released[label] and 0 <= lo < hi
        assert hi - lo < 0.05 * count  # per answer: a few units on thousands
    assert [r[1] for r in inftda_rows] == sorted((r[1] for r in inftda_rows), reverse=True)
    for i, (label, count, lo, hi) in enumerate(sorted(gauss_rows, key=lambda r: r[0])):
        half = 1.959964 * gauss.error_model.sum_variance(1, np.array([i])).stderr
        # the whole counts inside count ± 1.96 σ (a true count is a whole number)
        assert (lo, hi) == (max(math.ceil(count - half), 0), math.floor(count + half))
