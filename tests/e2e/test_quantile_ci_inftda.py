"""dp_quantile_low / dp_quantile_high on calibrated InfTDA views (:func:`dpsql.quantile_ci.
sum_band`): answered through every entry point, and the vectorised intervals of the
nested sums (:mod:`dpsql.quantile_ci_inftda`) are the model's own at every edge. The
coverage is measured in benchmarks/quantiles.py (a release per run: too slow for a
test)."""

from __future__ import annotations

import json
import math
import warnings

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import duck
from dpsql.accuracy import load
from dpsql.accuracy.base import count_interval
from dpsql.accuracy.inftda_answers import interval_offsets
from dpsql.accuracy.inftda_support import DEEP_ZERO, zero_code
from dpsql.dbapi import SeededReleaseWarning
from dpsql.quantile_ci import quantile_interval, sum_band, whole_ends
from dpsql.quantile_ci_inftda import nested_offsets
from dpsql.release_file import read_catalog, read_support

PS = (0.1, 0.5, 0.9)
QUERY = ("SELECT mode, " + ", ".join(
    f"dp_quantile(distance, {p}), dp_quantile_low(distance, {p}, 0.95), "
    f"dp_quantile_high(distance, {p}, 0.95)" for p in PS)
    + " FROM trips GROUP BY mode ORDER BY mode")


@pytest.fixture(scope="module")
def mode_dist(trips_release):
    """The InfTDA view mode → distance of the trips release: its error model, support and
    leaf level."""
    with duckdb.connect(str(trips_release), read_only=True) as con:
        view = read_catalog(con, str(trips_release)).views["mode_dist"]
        support = read_support(con, view)
        params = con.execute("SELECT error_model FROM dpsql_views WHERE name = "
                             "'mode_dist'").fetchone()[0]
    model = load(json.loads(params))
    return model, support, model.depth


def test_sql_answers_on_an_inftda_view_through_every_entry_point(trips_release, capsys):
    """Was refused ("not supported on the view 'mode_dist' (inftda)"). Now: the ends are
    bin edges (4 km bins), low ≤ estimate ≤ high, NULL where the quantile is (no plane
    trips released), the same through dbapi and duck.attach, and the CLI prints them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        con = dpsql.connect(trips_release)
    cur = con.cursor()
    cur.execute(QUERY)
    rows = cur.fetchall()
    info = cur.dp_info
    con.close()
    assert info["view"] == "mode_dist" and info["error_family"] == "calibrated"
    assert any("union bound" in n for n in info["notes"])
    answered = 0
    for mode, *vals in rows:
        for i in range(len(PS)):
            point, low, high = vals[3 * i:3 * i + 3]
            if point is None:
                assert low is None and high is None
                continue
            assert low <= point <= high and low % 4 == 0 and high % 4 == 0, (mode, vals)
            answered += 1
    assert answered >= 12
    raw = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        duck.attach(raw, str(trips_release))
    res, _ = duck.execute(raw, QUERY)
    assert res.fetchall() == rows
    from dpsql.cli import main
    code = main(["query", str(trips_release), "SELECT dp_quantile_low(distance, 0.5, 0.9) "
                 "AS lo, dp_quantile_high(distance, 0.5, 0.9) AS hi FROM trips WHERE "
                 "mode = 'car' GROUP BY mode"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert " lo " in out and " hi " in out


def _group_codes(support, level, g):
    """Row codes of a shuffled group of ``level``: released rows, released zeros (one
    code per missing child of a released parent) and deep zeros, as the planner passes
    them (:mod:`dpsql.accuracy.inftda_support`)."""
    k = level - 1
    released = np.arange(support.parent[level].size)
    missing = support.fanout[k] - support.active[k]
    zeros = np.array([zero_code(u, j) for u in range(missing.size)
                      for j in range(int(missing[u]))], dtype=np.int64)
    codes = np.concatenate([released, zeros, np.full(3, DEEP_ZERO)])
    return codes[g.permutation(codes.size)]


def test_nested_offsets_are_the_models_at_every_prefix(mode_dist):
    """Every prefix of a group's codes gets interval_offsets' (below, above), the whole
    level included (left to it: flagged), and a group whose codes repeat a node gets
    None (the multiset path)."""
    model, support, level = mode_dist
    g = np.random.default_rng(0)
    cal = model.calibration
    checked = flagged = 0
    mixed = _group_codes(support, level, g)
    zeros_first = np.r_[mixed[mixed < 0][:60], mixed[mixed >= 0][:60]]  # sums of zeros only
    for codes in (mixed, mixed[:150], zeros_first):
        sizes = np.arange(1, codes.size + 1)
        for conf in (0.975, 0.6):
            below, above, exact = nested_offsets(support, cal, model.sigma2,
                                                 model.root_sigma2, level, codes, sizes,
                                                 conf)
            for m in range(1, codes.size + 1, 3 if conf == 0.6 else 1):
                _, b, a = interval_offsets(support, cal, model.sigma2, model.root_sigma2,
                                           level, codes[:m], conf)
                if exact[m - 1]:
                    flagged += 1
                    continue
                assert below[m - 1] == pytest.approx(b, rel=1e-9, abs=1e-9), m
                assert above[m - 1] == pytest.approx(a, rel=1e-9, abs=1e-9), m
                checked += 1
    assert checked > 600 and flagged >= 1  # the whole level (every code) is flagged
    twice = np.concatenate([np.arange(5), [3]])
    assert nested_offsets(support, cal, model.sigma2, model.root_sigma2, level, twice,
                          np.arange(1, 7), 0.95) is None


def test_vectorised_band_decides_as_edge_by_edge(mode_dist):
    """sum_band with the nested offsets gives the ends of evaluating each edge's two
    sums through interval_offsets, on groups with random bins and counts."""
    model, support, level = mode_dist
    cal = model.calibration
    g = np.random.default_rng(1)

    def offsets(part, at):
        return interval_offsets(support, cal, model.sigma2, model.root_sigma2, level,
                                part, at)[1:]

    def nested(codes, sizes, at):
        return nested_offsets(support, cal, model.sigma2, model.root_sigma2, level,
                              codes, sizes, at)
    for _ in range(4):
        codes = _group_codes(support, level, g)[:int(g.integers(40, 200))]
        bins = int(g.integers(5, 30))
        row_bin = np.sort(np.r_[np.arange(bins), g.integers(0, bins, codes.size - bins)])
        counts = np.where(codes >= 0, support.count[level][np.maximum(codes, 0)], 0.0)
        lo = row_bin.astype(float)
        for p in PS:
            for conf in (0.95, 0.7):
                fast = quantile_interval(counts, lo, lo + 1, lambda rb, b, D: sum_band(
                    offsets, codes, counts, rb, b, p, conf, nested), p, 1.0)
                slow = quantile_interval(counts, lo, lo + 1, lambda rb, b, D: sum_band(
                    offsets, codes, counts, rb, b, p, conf), p, 1.0)
                assert fast == slow and (fast is None or fast[0] <= fast[1])


def test_whole_ends_is_count_interval_of_arrays():
    g = np.random.default_rng(2)
    count = np.r_[np.floor(g.uniform(0, 50, 150)), g.uniform(0, 50, 150), 1e9, 0.0]
    below = np.r_[g.uniform(-2, 6, 300), 0.0, 0.1]
    above = np.r_[g.uniform(-2, 6, 300), 3.0, 0.1]
    lo, hi = whole_ends(count, below, above)
    want = [count_interval(*x) for x in zip(count, below, above)]
    assert [(float(a), float(b)) for a, b in zip(lo, hi)] == want
    assert not any(math.isnan(a) for a in lo)
