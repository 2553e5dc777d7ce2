"""dp_quantile_low / dp_quantile_high through SQL: what they answer, where they come from,
and what they refuse (the coverage is measured in test_quantile_ci_coverage.py)."""

from __future__ import annotations

import json
import warnings

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import duck
from dpsql.accuracy import load
from dpsql.dbapi import SeededReleaseWarning
from dpsql.errors import UnsupportedQueryError
from dpsql.quantile_ci import edge_half_widths, quantile_interval
from dpsql.spec import ReleaseSpec

from conftest import seeded_cursor

PS = (0.1, 0.5, 0.9)


@pytest.fixture(scope="module")
def grouped(trips_data, tmp_path_factory):
    """A noisy release with a Gaussian tree over mode → age (ρ = 0.005: intervals a few
    years wide) and a b-ary tree over age, and a cursor on it."""
    spec = ReleaseSpec.from_dict({
        "name": "trips", "source": "trips.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 0.005},
        "attributes": {
            "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100},
            "mode": {"kind": "categorical",
                     "domain": ["car", "train", "bus", "bike", "walk", "plane"]}},
        "views": [{"name": "mode_age", "levels": ["mode", "age"],
                   "mechanism": "gaussian_tree"},
                  {"name": "ages", "levels": ["age"], "mechanism": "btree"}],
    }, base_dir=trips_data)
    path = tmp_path_factory.mktemp("qci") / "grouped.duckdb"
    cur = seeded_cursor(spec, path, seed=3)
    yield path, cur
    cur.connection.close()


def _released(path, view: str, where: str = "TRUE"):
    """The leaf rows of ``view`` read straight from the release file (node id = row
    order), and its stored error model: the oracle's inputs."""
    with duckdb.connect(str(path), read_only=True) as c:
        depth, params = c.execute("SELECT depth, error_model FROM dpsql_views WHERE name = ?",
                                  [view]).fetchone()
        rows = c.execute(f"SELECT rowid, dp_count, age_lo, age_hi FROM {view}__l{depth} "
                         f"WHERE {where} ORDER BY rowid").fetchall()
    ids, counts, lo, hi = (np.asarray(x) for x in zip(*rows))
    return load(json.loads(params)), depth, ids.astype(np.int64), counts, lo, hi


def _oracle(model, level, ids, counts, lo, hi, p, conf):
    def halves(row_bin, bins, D):
        return edge_half_widths(model, level, ids, row_bin, bins, p, conf)
    return quantile_interval(counts, lo, hi, halves, p, step=1.0)


def test_sql_answers_are_the_inverted_band_of_the_released_nodes(grouped):
    """Per group: the SQL ends equal dpsql.quantile_ci on the view's leaf rows read from
    the file, and bracket the point estimate."""
    path, cur = grouped
    cur.execute("SELECT mode, " + ", ".join(
        f"dp_quantile({p}), dp_quantile_low(age, {p}, 0.9), dp_quantile_high(age, {p}, 0.9)"
        .replace(f"dp_quantile({p})", f"dp_quantile(age, {p})") for p in PS)
        + " FROM mode_age WHERE mode <> 'plane' GROUP BY mode ORDER BY mode")
    rows = cur.fetchall()
    assert len(rows) == 5 and cur.dp_info["view"] == "mode_age"
    widths = []
    for mode, *vals in rows:
        model, depth, ids, counts, lo, hi = _released(path, "mode_age", f"mode = '{mode}'")
        for i, p in enumerate(PS):
            point, low, high = vals[3 * i:3 * i + 3]
            assert (low, high) == _oracle(model, depth, ids, counts, lo, hi, p, 0.9)
            assert low <= point <= high and low == int(low) and high == int(high)
            widths.append(high - low)
    assert max(widths) >= 2  # the noise is visible: not every interval is one value


def test_btree_answer_matches_the_oracle_and_the_duckdb_udf_path(grouped):
    path, cur = grouped
    q = ("SELECT MEDIAN(age), dp_quantile_low(age, 0.5, 0.95), "
         "dp_quantile_high(age, 0.5, 0.95) FROM ages")
    cur.execute(q)
    got = cur.fetchone()
    model, depth, ids, counts, lo, hi = _released(path, "ages")
    assert got[1:] == _oracle(model, depth, ids, counts, lo, hi, 0.5, 0.95)
    con = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        duck.attach(con, str(path))
    res, info = duck.execute(con, q)
    assert res.fetchone() == got
    assert info["quantile_intervals"] == [
        {"attribute": "age", "p": 0.5, "confidence": 0.95, "end": "low"},
        {"attribute": "age", "p": 0.5, "confidence": 0.95, "end": "high"}]
    assert any("dp_quantile_low/dp_quantile_high" in n for n in info["notes"])


def test_wider_at_higher_confidence(grouped):
    _, cur = grouped
    cur.execute("SELECT mode, dp_quantile_low(age, 0.5, 0.5), dp_quantile_high(age, 0.5, 0.5),"
                " dp_quantile_low(age, 0.5, 0.99), dp_quantile_high(age, 0.5, 0.99) "
                "FROM mode_age WHERE mode <> 'plane' GROUP BY mode")
    for _, lo50, hi50, lo99, hi99 in cur.fetchall():
        assert lo99 <= lo50 <= hi50 <= hi99


@pytest.mark.parametrize("p", PS)
def test_exact_release_brackets_the_true_quantile_within_one_value(exact_con, trips_data, p):
    """No noise: the integer ages' interval is the true quantile_disc (or that value and
    the next when its cumulative count is exactly p·N: a comparison of exactly 0 cannot
    tell the sides apart); the real-valued distance's is the bin that holds it."""
    src = f"'{trips_data / 'trips.parquet'}'"
    age, dist = duckdb.connect().execute(
        f"SELECT quantile_disc(age, {p}), quantile_disc(LEAST(distance, 256), {p}) FROM {src}"
    ).fetchone()
    cur = exact_con.cursor()
    cur.execute(f"SELECT dp_quantile_low(age, {p}, 0.95), dp_quantile_high(age, {p}, 0.95) "
                "FROM age_tree")
    low, high = cur.fetchone()
    assert low == age and high - low <= 1, (low, high, age)
    cur.execute(f"SELECT dp_quantile_low(distance, {p}, 0.95), "
                f"dp_quantile_high(distance, {p}, 0.95) FROM dist")
    low, high = cur.fetchone()
    assert low <= dist <= high and high - low <= 8.0, (low, high, dist)  # bins of 4


def test_a_bound_inside_a_bin_widens_the_interval_by_that_bins_rows(exact_con, trips_data):
    """The rows of a bin that a range bound cuts may lie anywhere inside it, so the
    interval spans their share from none to all (as dp_ci_low/high do). It covered the
    uniform guess only: distance >= 13 on bins of 4 gave the median's [20, 24] where the
    data's is 24.19, p = 0.1 of distance >= 30 [30, 32] against 32.07."""
    src = f"'{trips_data / 'trips.parquet'}'"
    for p, t in [(0.5, 13), (0.1, 30), (0.9, 47)]:
        truth = duckdb.connect().execute(
            f"SELECT quantile_cont(distance, {p}) FROM {src} WHERE distance >= {t}"
        ).fetchone()[0]
        for view in ("dist", "mode_dist"):
            low, high = exact_con.execute(
                f"SELECT dp_quantile_low(distance, {p}, 0.95), dp_quantile_high(distance, "
                f"{p}, 0.95) FROM {view} WHERE distance >= {t}").fetchone()
            assert low <= truth <= high and high - low <= 8.0, (view, p, t, low, high, truth)


@pytest.mark.parametrize("query,message", [
    ("SELECT dp_quantile_high(age, 0.5) FROM trips",
     "dp_quantile_high(attr, p, conf) takes three arguments (the binned attribute, the "
     "quantile probability and the confidence, as in dp_quantile_high(x, 0.5, 0.95)), got 2"),
    ("SELECT dp_quantile_low(age, 0.5, 95) FROM trips",
     "the confidence of dp_quantile_low() must be in (0, 1), as in 0.95, got 95.0"),
    ("SELECT dp_quantile_low(age, 1.5, 0.95) FROM trips",
     "the quantile probability must be in [0, 1], got 1.5"),
    ("SELECT dp_quantile_low(mode, 0.5, 0.95) FROM trips",
     "quantiles of 'mode' are not supported: it is not a binned attribute"),
])
def test_refusals_say_what_and_what_to_do(trips_release, query, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        con = dpsql.connect(trips_release)
    with pytest.raises(UnsupportedQueryError) as err:
        con.cursor().execute(query)
    con.close()
    assert message in str(err.value)


def test_cli_query_shows_the_interval_without_denying_error_columns(capsys, grouped):
    """``dpsql query`` with dp_quantile_low/high: the footer used to say "no error
    columns for this query" although the query had asked for its interval."""
    from dpsql.cli import main

    path, _ = grouped
    code = main(["query", str(path), "SELECT MEDIAN(age) AS m, dp_quantile_low(age, 0.5, "
                 "0.95) AS lo, dp_quantile_high(age, 0.5, 0.95) AS hi FROM ages"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert " lo " in out and " hi " in out and "no error columns" not in out


def test_prefix_variances_equal_the_general_carry():
    """The O(n·depth) prefix carry-up of a Gaussian tree equals the general weighted
    variances of the same comparisons, on random trees and partial node sets."""
    from dpsql.accuracy.tree_counts import TreeCountsErrorModel

    g = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        parents, sizes = [], [1]
        for _ in range(int(g.integers(1, 4))):
            fan = g.integers(1, 6, sizes[-1])
            parents.append(np.repeat(np.arange(sizes[-1]), fan))
            sizes.append(int(fan.sum()))
        var = list(g.uniform(0.1, 5.0, len(sizes)))
        var[0] = 0.0 if g.random() < 0.3 else var[0]  # a public total sometimes
        model = TreeCountsErrorModel.from_parents(parents, var)
        level = int(g.integers(1, len(sizes)))
        if sizes[level] < 2:
            continue
        ids = np.sort(g.choice(sizes[level], int(g.integers(2, sizes[level] + 1)),
                               replace=False))
        p = float(g.uniform())
        rows = np.array([np.where(np.arange(ids.size) < j, 1 - p, -p)
                         for j in range(1, ids.size)])
        fast = model.prefix_linear_variances(level, ids, p)
        assert np.allclose(fast, model.linear_variances(level, ids, rows), rtol=1e-10,
                           atol=1e-12)
        checked += 1
    assert checked > 100


def test_laplace_window_decides_as_every_edge_exactly(grouped):
    """A Laplace-family view evaluates its exact half-widths only at the edges whose
    released comparison is within a bound of it: the ends are those of evaluating every
    edge (the release's b-ary view is reconciled with the Gaussian tree on age: its
    weighted cumulants are the base's at the reconciled variance)."""
    path, _ = grouped
    model, depth, ids, counts, lo, hi = _released(path, "ages")
    assert type(model).__name__ == "ReconciledErrorModel"
    assert model.linear_cumulants(depth, ids[:3], np.array([0.5, -0.5, 0.5])) is not None
    for p in (0.05, 0.3, 0.5, 0.9):
        for conf in (0.5, 0.95, 0.999):
            def windowed(row_bin, bins, D):
                return edge_half_widths(model, depth, ids, row_bin, bins, p, conf, D)

            def every(row_bin, bins, D):
                return edge_half_widths(model, depth, ids, row_bin, bins, p, conf)
            assert quantile_interval(counts, lo, hi, windowed, p, 1.0) == \
                quantile_interval(counts, lo, hi, every, p, 1.0)
