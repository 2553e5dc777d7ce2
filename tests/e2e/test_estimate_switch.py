"""A bias-dominated InfTDA answer gets the unbiased estimate's interval
(dpsql.accuracy.inftda_answers.switched_offsets), through SQL.

On the trips release, every answer of ``GROUP BY mode`` (a sum across the 60 cities) and
of ``WHERE mode IN ('bike', 'walk') GROUP BY region`` is checked against its error model,
recomputed here from the release file: where the bootstrap's bias exceeds the count's
standard error and the measurements' sum is at least as precise as the count is accurate
by that account, ``dp_ci_low/high`` are ``dp_estimate() ∓ k`` at whole counts (k = ⌈z·se −
½⌉ for a whole estimate); elsewhere they are the count's own interval. Both kinds occur,
so the test fails if the switch is dropped or if it fires everywhere.
"""

from __future__ import annotations

import json
import math
import warnings

import duckdb
import numpy as np
import pytest

from dpsql import duck
from dpsql.accuracy import load
from dpsql.accuracy.base import count_interval, z_value
from dpsql.accuracy.inftda_answers import count_offsets
from dpsql.dbapi import SeededReleaseWarning
from dpsql.duck_udfs import _offsets
from dpsql.planner.level_rows import dense_nodes_sql
from dpsql.release_file import read_catalog, read_support

QUERIES = {
    "SELECT mode, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95), dp_estimate(), "
    "dp_estimate_stderr() FROM geo_mode GROUP BY mode": "mode",
    "SELECT region, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95), dp_estimate(), "
    "dp_estimate_stderr() FROM geo_mode WHERE mode IN ('bike', 'walk') GROUP BY region":
    "region",
}


@pytest.fixture(scope="module")
def geo_mode(trips_release):
    """(connection, error model, support, each group's leaf codes per query)."""
    with duckdb.connect(str(trips_release), read_only=True) as raw:
        view = read_catalog(raw, str(trips_release)).views["geo_mode"]
        support = read_support(raw, view)
        params = raw.execute("SELECT error_model FROM dpsql_views WHERE name = "
                             "'geo_mode'").fetchone()[0]
    con = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        duck.attach(con, str(trips_release))
    release = duck.catalog_of(con).releases[0]
    (v,) = [x for x in release.views if x.meta.name == "geo_mode"]
    leaves = dense_nodes_sql(v, 4, release.attributes, release.size)
    codes = {
        "mode": dict(con.execute(f"SELECT mode, list(dp_row) FROM ({leaves}) "
                                 "GROUP BY mode").fetchall()),
        "region": dict(con.execute(f"SELECT region, list(dp_row) FROM ({leaves}) WHERE "
                                   "mode IN ('bike', 'walk') GROUP BY region").fetchall()),
    }
    yield con, load(json.loads(params)), support, codes
    con.close()


def test_a_bias_dominated_sum_gets_the_estimates_interval(geo_mode):
    con, model, support, codes = geo_mode
    switched = kept = 0
    for sql, key in QUERIES.items():
        for group, n, lo, hi, est, est_se in duck.sql(con, sql).fetchall():
            count = count_offsets(support, model.calibration, model.sigma2,
                                  model.root_sigma2, 4, sorted(codes[key][group]), 0.95)
            if count.bias ** 2 > count.var and est_se ** 2 <= count.var + count.bias ** 2:
                assert est == int(est)  # whole measurements: a whole estimate
                k = math.ceil(z_value(0.95) * est_se - 0.5)
                assert (lo, hi) == (max(est - k, 0), est + k), (sql, group)
                switched += 1
            else:
                assert (lo, hi) == count_interval(n, count.below, count.above), (sql, group)
                kept += 1
    assert switched >= 2 and kept >= 2, (switched, kept)


def test_the_switch_is_taken_only_around_the_nodes_own_released_sum(geo_mode):
    """The error columns take an interval around the count the query asks for. Where it
    is not the sum of the group's released nodes (an interpolated range's low end, from
    the bins wholly inside; ``COUNT(attr)``, without the NULL category's nodes), the
    estimate of every node would be off by the difference, so the count's interval is
    kept (duck_udfs._offsets' ``count``)."""
    con, model, support, codes = geo_mode
    st = duck._state(con)
    (v,) = [x for x in duck.catalog_of(con).releases[0].views if x.meta.name == "geo_mode"]
    switched = 0
    for ids in codes["mode"].values():
        ids = np.asarray(sorted(ids), dtype=np.int64)
        count = count_offsets(support, model.calibration, model.sigma2, model.root_sigma2,
                              4, ids, 0.95)
        own = _offsets(st, v, 4, ids, 0.95, count=count.y)
        other = _offsets(st, v, 4, ids, 0.95, count=count.y - 3)
        assert other == (count.below, count.above)
        if own != other:
            switched += 1
    assert switched >= 2
