"""Bin edges are the correctly rounded decimals ``lower + b·(upper − lower)/K``
(:mod:`dpsql.domains.bin_edges`): a bound written as an edge's decimal is that edge.

With bins of 0.1 edge 3 used to be ``3 · 0.1 = 0.30000000000000004``: ``x < 0.3`` was
interpolated (4e-16 of bin 3 off the exact leaf sum, flagged ``uniform``), and a real
value 0.3 in the data was counted in bin 2 (``floor(0.3 / 0.1) = 2``), 30 rows off
DuckDB's ``x < 0.3``. End to end on real releases: SQL in, answers out, DuckDB on the
raw table as the oracle (ρ = 1e10: the counts are the raw ones)."""

from __future__ import annotations

import warnings
from contextlib import closing
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql
from dpsql import duck
from dpsql.dbapi import SeededReleaseWarning
from dpsql.domains.bin_edges import (DECIMAL, PRODUCT, all_edges, bin_edge, edge_mode,
                                      edge_sql)
from dpsql.planner.choose_view import grid_index
from dpsql.release_file import AttributeMeta

from conftest import _build


@pytest.fixture(scope="module")
def tenths(tmp_path_factory):
    """A real x over [0, 1) in bins of 0.1 with point masses on edges 3 and 7, and the
    exact release of it; (release path, raw parquet path)."""
    base = tmp_path_factory.mktemp("tenths")
    g = np.random.default_rng(3)
    x = g.uniform(0, 1, 3000)
    x[:30], x[30:50] = 0.3, 0.7
    pq.write_table(pa.table({"x": x}), base / "t.parquet")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e10"},
            "attributes": {"x": {"kind": "range", "lower": 0, "upper": 1, "bins": 10}},
            "views": [{"name": "vx", "levels": ["x"], "mechanism": "gaussian_tree"}]}
    return _build(base, spec, "t.duckdb", seed=1), base / "t.parquet"


def _answer(path, sql):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        con = dpsql.connect(path)
    with closing(con), closing(con.cursor()) as cur:
        cur.execute(sql)
        return cur.fetchall()[0][0]


def _info(path, sql):
    con = duckdb.connect()
    duck.attach(con, str(path))
    try:
        return duck.plan(con, sql).info
    finally:
        con.close()


def _raw(parquet, where):
    return duckdb.sql(f"SELECT COUNT(*) FROM '{parquet}' WHERE {where}").fetchall()[0][0]


def _leaves(path, table, attr, where):
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(f"SELECT SUM(dp_count) FROM {table} WHERE {attr}_bin_lo {where}"
                       ).fetchall()[0][0]


@pytest.mark.parametrize("where, leaves", [("x < 0.3", "< 3"), ("x >= 0.3", ">= 3"),
                                           ("x < 0.7", "< 7"), ("x >= 0.6", ">= 6"),
                                           ("x >= 0.3 AND x < 0.7", "BETWEEN 3 AND 6")])
def test_a_bound_on_a_tenth_edge_is_the_edge(tenths, where, leaves):
    path, raw = tenths
    got = _answer(path, f"SELECT COUNT(*) FROM t WHERE {where}")
    assert got == _leaves(path, "vx__l1", "x", leaves)  # exactly: no interpolation
    assert got == _raw(raw, where)  # and the rows at 0.3 / 0.7 are in the bin above
    assert _info(path, f"SELECT COUNT(*) FROM t WHERE {where}")["interpolation"] \
        == "none (bounds on the bin grid)"


def test_stored_edges_are_the_literals(tenths):
    path, _ = tenths
    with duckdb.connect(str(path), read_only=True) as con:
        los = [r[0] for r in con.sql("SELECT x_lo FROM vx__l1 ORDER BY x_bin_lo").fetchall()]
        dom = [r[0] for r in con.sql("SELECT x_lo FROM dpsql_domain__x ORDER BY bin").fetchall()]
    assert los == dom == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def test_dp_range_count_is_exact_on_the_edges(tenths):
    path, raw = tenths
    got = _answer(path, "SELECT dp_range_count('vx', 'x', 0.3, 0.7)")
    assert got == _raw(raw, "x >= 0.3 AND x < 0.7")


@pytest.mark.parametrize("where", ["p < 0.35", "p >= 0.41", "p BETWEEN 0.47 AND 0.82"])
def test_decimal_grid_edges(typed_release, typed_data, where):
    """DECIMAL(6,2) over [0, 5) in 500 bins: edge 35 used to be 0.35000000000000003."""
    got = _answer(typed_release, f"SELECT COUNT(*) FROM t WHERE {where}")
    assert got == _raw(typed_data / "t.parquet", where)
    assert _info(typed_release, f"SELECT COUNT(*) FROM t WHERE {where}")["interpolation"] \
        == "none (bounds on the bin grid)"


def test_an_older_release_keeps_its_product_edges(tenths, tmp_path):
    """A release file written before ``edge_mode`` stored ``lower + b·width``: read with
    that formula, 0.30000000000000004 is its edge 3 and 0.3 interpolates (as it did)."""
    import shutil

    path = tmp_path / "old.duckdb"
    shutil.copy(tenths[0], path)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE dpsql_release SET attributes = json(replace(CAST(attributes AS "
                    "VARCHAR), ', \"edge_mode\": \"decimal\"', ''))")
        assert "edge_mode" not in con.sql("SELECT attributes FROM dpsql_release").fetchall()[0][0]
        con.execute("UPDATE vx__l1 SET x_lo = CAST(0.0 AS DOUBLE) + x_bin_lo * "
                    "CAST(0.1 AS DOUBLE), x_hi = CASE WHEN x_bin_hi >= 10 THEN 1.0 ELSE "
                    "CAST(0.0 AS DOUBLE) + x_bin_hi * CAST(0.1 AS DOUBLE) END")
    old_edge = 0.30000000000000004
    assert _info(path, f"SELECT COUNT(*) FROM t WHERE x < {old_edge!r}")["interpolation"] \
        == "none (bounds on the bin grid)"
    assert _answer(path, f"SELECT COUNT(*) FROM t WHERE x < {old_edge!r}") == \
        _leaves(path, "vx__l1", "x", "< 3")
    assert _info(path, "SELECT COUNT(*) FROM t WHERE x < 0.3")["interpolation"] == "uniform"


def _meta(lower, upper, bins, mode=DECIMAL):
    return AttributeMeta("x", "range", ("x_lo", "x_hi"), "d", lower, upper, bins, "real",
                         None, edge_mode=mode)


def test_long_whole_grids_keep_decimal_edges():
    """Ten years of timestamps by the second: p·K is 4e17 > 2⁵³, but the common factor
    K leaves lower + b seconds, exact; bounds of 17 digits fall back to product edges."""
    lower, bins = 1.3e9, 315_360_000
    assert edge_mode(lower, lower + bins, bins) == DECIMAL
    assert bin_edge(lower, lower + bins, bins, 123_456_789) == lower + 123_456_789
    assert edge_mode(0.12345678901234567, 1.0, 1000) == PRODUCT


def test_old_meta_reads_product_edges():
    old = AttributeMeta.from_json({"name": "x", "kind": "range", "columns": ["x_lo", "x_hi"],
                                   "domain_table": "d", "lower": 0.0, "upper": 1.0,
                                   "bins": 10})
    assert old.edge_mode == PRODUCT
    assert grid_index(old, 0.3) is None and grid_index(old, 0.30000000000000004) == 3
    assert grid_index(_meta(0.0, 1.0, 10), 0.3) == 3
    assert grid_index(_meta(0.0, 1.0, 10), 0.30000000000000004) is None


_decimals = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False,
                        allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(_decimals, _decimals, st.integers(1, 2000), st.data())
def test_every_edge_literal_reads_as_that_edge(a, b, bins, data):
    """For any bounds (decimals of up to 3 places) and bins, the literal of every edge
    (its repr, and its exact decimal when that is short) is read by the planner as that
    edge; Python, numpy and DuckDB give the same bits."""
    lower, upper = float(min(a, b)), float(max(a, b))
    if lower == upper:
        return
    k = data.draw(st.integers(0, bins))
    e = bin_edge(lower, upper, bins, k)
    exact = Fraction(repr(lower)) + k * (Fraction(repr(upper)) - Fraction(repr(lower))) / bins
    assert e == float(exact) == all_edges(lower, upper, bins)[k]
    assert grid_index(_meta(lower, upper, bins), float(repr(e))) == k
    got = duckdb.sql(f"SELECT {edge_sql(lower, upper, bins, str(k))}").fetchall()[0][0]
    assert got == e or k == bins  # the callers write upper at b = K
