"""A release's InfTDA measurements, as stored and as the error columns read them
(dpsql.release.measured, dpsql.release_file.read_support).

* Every released zero the run measured is stored under the very code the planner gives
  that zero (``dense_nodes_sql``'s ``dp_row``), on the trips (spines, bins) and the O/D
  commutes (two interleaved hierarchies) releases.
* Through SQL, ``dp_estimate()`` of an answer across parents (GROUP BY mode over all 60
  cities) is the sum of the stored measurements, recomputed here from the level and
  measured tables with plain DuckDB, and ``dp_estimate_stderr()`` is σ of the level
  times √(nodes); a ROLLUP total sums its rows' measurements; a real-valued view's
  estimate is its count; a public total is its own exact estimate.
* A release written before the measurements were stored (the table dropped) answers
  with the same counts and standard errors and a NULL estimate; its intervals are the
  count's, where the release that keeps them gives a bias-dominated sum the estimate's
  (tests/e2e/test_estimate_switch.py).
"""

from __future__ import annotations

import json
import math
import shutil
import warnings

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import duck
from dpsql.accuracy import load
from dpsql.accuracy.base import z_value
from dpsql.accuracy.inftda_answers import CountOffsets, switched_offsets
from dpsql.dbapi import SeededReleaseWarning
from dpsql.planner.level_rows import dense_nodes_sql
from dpsql.release_file import open_release, read_catalog, read_support
from conftest import connect_seeded


@pytest.mark.parametrize("fixture", ["trips_release", "commutes_release"])
def test_measured_zeros_carry_the_planners_codes(request, fixture):
    c = duckdb.connect()
    duck.attach(c, str(request.getfixturevalue(fixture)))
    release = duck.catalog_of(c).releases[0]
    checked = 0
    for view in release.views:
        if not view.model.reads_support:
            continue
        for lv in view.meta.levels:
            sql = dense_nodes_sql(view, lv.k, release.attributes, release.size)
            dense = {r[0] for r in c.execute(
                f"SELECT dp_row FROM ({sql}) WHERE dp_row <= -2").fetchall()}
            stored = [r[0] for r in c.execute(
                f'SELECT dp_code FROM "{view.alias}"."{view.meta.name}__measured" '
                f"WHERE dp_level = {lv.k}").fetchall()]
            assert len(stored) == len(set(stored))
            if "reconciled" in view.meta.info:  # a node reconciliation made positive
                assert set(stored) <= dense  # under a pruned parent has unmeasured zeros
            else:
                assert set(stored) == dense, (view.meta.name, lv.k)
            checked += bool(dense)
    assert checked >= 3  # levels with released zeros
    c.close()


def _measured_by_mode(path) -> dict[str, tuple[float, int]]:
    """mode → (Σ measurement, number of measured nodes) over geo_mode's leaves, released
    and zero, by plain DuckDB on the release file (a zero's code carries its mode's
    domain code)."""
    raw = duckdb.connect(str(path), read_only=True)
    rows = raw.execute(
        "SELECT mode, sum(dp_measured), count(dp_measured) FROM ("
        " SELECT mode, dp_measured FROM geo_mode__l4 UNION ALL"
        " SELECT d.mode, z.dp_measured FROM geo_mode__measured z"
        " JOIN dpsql_domain__mode d ON d.code = (-2 - z.dp_code) >> 32"
        " WHERE z.dp_level = 4) GROUP BY mode").fetchall()
    raw.close()
    return {m: (x, n) for m, x, n in rows}


def test_dp_estimate_is_the_sum_of_the_stored_measurements(trips_release):
    want = _measured_by_mode(trips_release)
    sigma2 = open_release(trips_release).views["geo_mode"].error_model.sigma2
    con = connect_seeded(str(trips_release))
    rows = con.execute("SELECT mode, COUNT(*), dp_estimate(), dp_estimate_stderr() "
                       "FROM geo_mode GROUP BY mode").fetchall()
    assert len(rows) == len(want) >= 4
    for mode, n, est, se in rows:
        x, nodes = want[mode]
        assert nodes == 60  # every city's leaf of this mode was measured
        assert est == x and se == pytest.approx((nodes * sigma2[3]) ** 0.5, rel=1e-12)
        assert abs(est - n) < 5 * se  # the same truth, estimated two ways
    # a ROLLUP's grand total is every region: the root's own measurement (trips is
    # add_remove: a noisy total), more precise than the four regions' sum
    rows = con.execute("SELECT region, COUNT(*), dp_estimate(), dp_estimate_stderr() FROM "
                       "geo_mode GROUP BY ROLLUP (region)").fetchall()
    regions = [r for r in rows if r[0] is not None]
    (total,) = [r for r in rows if r[0] is None]
    assert len(regions) == 4 and all(r[3] == pytest.approx(sigma2[0] ** 0.5) for r in regions)
    raw = duckdb.connect(str(trips_release), read_only=True)
    root = raw.execute("SELECT dp_measured FROM geo_mode__measured WHERE dp_level = 0"
                       ).fetchone()[0]
    raw.close()
    root_sigma2 = open_release(trips_release).views["geo_mode"].error_model.root_sigma2
    assert root_sigma2 < 4 * sigma2[0]
    assert (total[2], total[3]) == (root, pytest.approx(root_sigma2 ** 0.5))
    # a real-valued view's count is already unbiased: its estimate is the count itself
    n, se0, est, se1 = con.execute("SELECT COUNT(*), dp_stderr(), dp_estimate(), "
                                   "dp_estimate_stderr() FROM geo_gauss").fetchone()
    assert (est, se1) == (n, se0)
    con.close()


def test_a_release_without_measurements_keeps_its_intervals_and_has_no_estimate(
        trips_release, tmp_path):
    old = tmp_path / "old.duckdb"
    shutil.copy(trips_release, old)
    raw = duckdb.connect(str(old))
    for (name,) in raw.execute("SELECT table_name FROM duckdb_tables() WHERE table_name "
                               "LIKE '%\\_\\_measured' ESCAPE '\\'").fetchall():
        raw.execute(f'DROP TABLE "{name}"')
    raw.close()
    query = ("SELECT mode, COUNT(*), dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95), "
             "dp_estimate(), dp_estimate_stderr() FROM geo_mode GROUP BY mode ORDER BY mode")
    got = {}
    for path in (trips_release, old):
        con = connect_seeded(str(path))
        got[path] = con.execute(query).fetchall()
        con.close()
    assert [r[:3] for r in got[old]] == [r[:3] for r in got[trips_release]]
    assert all(r[5] is None and r[6] is None for r in got[old])
    assert all(r[5] is not None and r[6] > 0 for r in got[trips_release])
    assert _switched(got[old], got[trips_release], 3) >= 1


def _switched(without: list, kept: list, at: int) -> int:
    """How many rows of ``kept`` (a release that keeps its measurements) have another
    interval (columns ``at``, ``at`` + 1, then the estimate and its standard error) than
    the same rows of ``without``: each must be the estimate's, at whole counts."""
    n = 0
    for a, b in zip(without, kept):
        if a[at:at + 2] != b[at:at + 2]:
            est, se = b[at + 2], b[at + 3]
            k = math.ceil(z_value(0.95) * se - 0.5)
            assert b[at:at + 2] == (max(est - k, 0), est + k), (a, b)
            n += 1
    return n


@pytest.mark.parametrize("query, message", [
    ("SELECT dp_estimate(0.5), COUNT(*) FROM geo_mode", "takes 0 argument"),
    ("SELECT dp_estimate_stderr(1), COUNT(*) FROM geo_mode", "takes 0 argument"),
    ("SELECT region, dp_estimate() FROM geo_mode GROUP BY region", "add COUNT"),
])
def test_estimate_functions_are_checked_like_the_error_columns(trips_release, query,
                                                               message):
    con = connect_seeded(str(trips_release))
    with pytest.raises(dpsql.NotSupportedError, match=message):
        con.execute(query)
    con.close()


def test_a_public_total_is_its_own_exact_estimate(commutes_release):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        con = dpsql.connect(str(commutes_release))  # neighbouring = substitute
    n, est, se = con.execute("SELECT COUNT(*), dp_estimate(), dp_estimate_stderr() "
                             "FROM work_first").fetchone()
    con.close()
    assert (est, se) == (n, 0)


def test_a_view_with_too_many_measurements_keeps_none(trips_data, tmp_path, monkeypatch):
    """Above MAX_MEASUREMENTS a view stores no measurements (the Italian O/D tree draws
    tens of millions): the release is otherwise the same, and dp_estimate() is NULL."""
    from dpsql.datasets import trips_spec
    from dpsql.release import build, build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict(trips_spec(1.0), base_dir=trips_data)
    default = build.MAX_MEASUREMENTS
    paths = {}
    for cap in (default, 50):
        monkeypatch.setattr(build, "MAX_MEASUREMENTS", cap)
        paths[cap] = tmp_path / f"r{cap}.duckdb"
        build_release(spec, paths[cap], seed=4, progress=False)
    query = ("SELECT mode, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95), dp_estimate(), "
             "dp_estimate_stderr() FROM geo_mode GROUP BY mode ORDER BY mode")
    got = {}
    for cap, path in paths.items():
        con = connect_seeded(str(path))
        got[cap] = con.execute(query).fetchall()
        con.close()
    assert [r[:2] for r in got[50]] == [r[:2] for r in got[default]]
    assert all(r[4] is None for r in got[50]) and all(r[4] is not None for r in got[default])
    _switched(got[50], got[default], 2)  # the count's intervals, or the estimate's
    raw = duckdb.connect(str(paths[50]), read_only=True)
    tables = {t for (t,) in raw.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    info = raw.execute("SELECT info FROM dpsql_views WHERE name = 'geo_mode'").fetchone()[0]
    raw.close()
    assert "geo_mode__measured" not in tables and '"measurements_kept": false' in info
    # the report says which views have the unbiased companion, and why one has none
    from dpsql.release import open_release
    from dpsql.report import _estimate_note
    notes = {cap: _estimate_note(open_release(path).views["geo_mode"])
             for cap, path in paths.items()}
    assert "dp_estimate_stderr()" in notes[default] and "Unbiased" in notes[default]
    assert "no unbiased estimate" in notes[50]


def test_dp_estimate_of_a_range_cut_inside_a_bin_weighs_the_cut_bin(exact_con):
    """A bound inside a bin counts that bin's fraction (uniform interpolation), and the
    estimate weighs the measurement alike. It summed the touched bins whole: on the
    exact release (distance bins of 4), distance < 10 counted 7,328 and estimated 9,006
    (the rows below 12; the data hold 7,446), and distance BETWEEN 9 AND 10 of cars 385
    against 1,540."""
    rows = exact_con.execute(
        "SELECT mode, COUNT(*), dp_estimate(), dp_estimate_stderr() FROM mode_dist "
        "WHERE distance BETWEEN 9 AND 10 GROUP BY ROLLUP (mode)").fetchall()
    assert len(rows) == 7 and sum(r[1] for r in rows) > 1000
    for _, n, est, se in rows:
        assert est is None or abs(est - n) < 0.5 and se < 0.1, rows
    n, est, whole = exact_con.execute(
        "SELECT COUNT(*), dp_estimate(), (SELECT COUNT(*) FROM mode_dist "
        "WHERE distance < 12) FROM mode_dist WHERE distance < 10").fetchone()
    assert abs(est - n) < 0.5 and n < whole - 1000, (n, est, whole)


def test_nodes_reconciliation_made_positive_stand_in_with_their_calibrated_count(
        trips_data, tmp_path):
    """Two InfTDA views over one geography at a small ρ: reconciliation makes distance
    bins positive under cities geo_dist's run pruned, which it never measured. Every
    answer holding one used to have a NULL estimate (here 8 of the 43 cities with a
    positive count of WHERE distance < 40 GROUP BY city); such nodes now stand in with
    their calibrated count (count − dp_bias), their variance at least the measurement's
    they stand in for. Coverage over 30 releases: benchmarks/estimate_stand_ins.py."""
    from dpsql.datasets import trips_spec
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = trips_spec(5e-4)
    spec["views"] = [
        {"name": "geo_mode", "levels": ["geo", "mode"], "mechanism": "inftda", "weight": 2},
        {"name": "geo_dist", "levels": ["geo", "distance"], "mechanism": "inftda"}]
    path = tmp_path / "two_views.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=trips_data), path, seed=1,
                  progress=False)
    raw = duckdb.connect(str(path), read_only=True)
    # a city whose first two distance bins are released and were never measured
    city, want, nodes = raw.execute(
        "SELECT city, sum(dp_count - dp_bias), count(*) FROM geo_dist__l5 "
        "WHERE distance_bin_lo < 2 AND dp_measured IS NULL GROUP BY city "
        "HAVING count(*) = 2 ORDER BY city LIMIT 1").fetchone()
    raw.close()
    sigma2 = open_release(path).views["geo_dist"].error_model.sigma2
    con = connect_seeded(str(path))
    rows = con.execute("SELECT city, COUNT(*), dp_estimate(), dp_estimate_stderr() "
                       "FROM trips WHERE distance < 40 GROUP BY city").fetchall()
    held = [r for r in rows if r[1] > 0]  # the others hold only deep zeros: no estimate
    assert len(held) >= 40
    assert all(est is not None and se > 0 for _, _, est, se in held)
    n, est, se = con.execute("SELECT COUNT(*), dp_estimate(), dp_estimate_stderr() FROM "
                             "trips WHERE city = ? AND distance < 8", [city]).fetchone()
    con.close()
    assert est == pytest.approx(want, rel=1e-12)
    assert se >= (nodes * sigma2[4]) ** 0.5 * (1 - 1e-12)
    # the error columns never switch to an estimate that stands such nodes in: it is
    # neither unbiased nor of exact variance (inftda_answers.switched_offsets)
    raw = duckdb.connect(str(path), read_only=True)
    view = read_catalog(raw, str(path)).views["geo_dist"]
    support = read_support(raw, view)
    model = load(json.loads(raw.execute("SELECT error_model FROM dpsql_views WHERE name "
                                        "= 'geo_dist'").fetchone()[0]))
    unmeasured, measured = (raw.execute(
        f"SELECT rowid, dp_count FROM geo_dist__l5 WHERE dp_measured IS {t} NULL "
        "ORDER BY rowid LIMIT 1").fetchone() for t in ("", "NOT"))
    raw.close()
    for (code, y), switches in ((unmeasured, False), (measured, True)):
        biased = CountOffsets(1.0, 2.0, 3.0, bias=1e6, var=1.0, y=float(y))
        got = switched_offsets(support, model.calibration, model.sigma2, model.root_sigma2,
                               5, np.array([code]), 0.95, biased)
        assert (got != (1.0, 2.0, 3.0)) == switches, (code, got)
