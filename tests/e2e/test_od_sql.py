"""SQL in, answers out for origin/destination flows: a release with the destination tree
(``work_first``) and the origin tree (``home_first``) of home → work commutes.

* With zero noise, answers equal DuckDB over the raw rows (cells with no commuter are
  groups with count 0: every public cell is a group).
* The planner reads the shallowest level that holds every column a query names, in the
  view whose predicted error is smaller: a coarse-home / fine-work question from the
  destination tree, its mirror from the origin tree (od_topdown.md §1).
* On the noisy release, an answer is the sum of the chosen level's nodes, and its error
  columns are the view's InfTDA bound for exactly that many nodes.
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.release import open_release

from conftest import COMMUTES_SHAPE

QUERIES = [
    "SELECT home_region, work_region, COUNT(*) AS n FROM {t} GROUP BY ALL",
    "SELECT home_region, COUNT(*) AS n FROM {t} GROUP BY ALL",
    "SELECT home_region, work_province, COUNT(*) AS n FROM {t} WHERE home_region = 'R1' "
    "GROUP BY ALL",
    "SELECT work_municipality, COUNT(*) AS n FROM {t} WHERE home_municipality = 'M3' "
    "GROUP BY ALL",
    "SELECT home_province, work_province, COUNT(*) AS n FROM {t} WHERE home_province IN "
    "('P1', 'P2') AND work_region = 'R0' GROUP BY ROLLUP (home_province, work_province)",
    "SELECT work_region, COUNT(*) AS n FROM {t} WHERE home_region = work_region GROUP BY ALL",
    "SELECT COUNT(*) AS n FROM {t} WHERE home_municipality = 'M7' AND work_province = 'P0'",
    "WITH f AS (SELECT home_region, work_region, COUNT(*) AS n FROM {t} GROUP BY ALL) "
    "SELECT home_region, SUM(n) FILTER (WHERE home_region <> work_region) AS outbound "
    "FROM f GROUP BY ALL",
]


def _connect(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        return dpsql.connect(path)


def _as_dict(rows):
    """Rows keyed by their labels; a count of 0 is the same as no row."""
    return {tuple(r[:-1]): r[-1] for r in rows if r[-1]}


@pytest.mark.parametrize("query", QUERIES)
def test_zero_noise_answers_equal_duckdb_on_the_raw_rows(commutes_exact, commutes_data,
                                                         query):
    con = _connect(commutes_exact)
    ours = con.execute(query.format(t="commutes")).fetchall()
    raw = duckdb.connect()
    truth = raw.execute(query.format(t=f"'{commutes_data / 'commutes.parquet'}'")).fetchall()
    assert ours and _as_dict(ours) == _as_dict(truth)


@pytest.mark.parametrize("query,view,level", [
    ("SELECT work_region, COUNT(*) FROM commutes GROUP BY ALL", "work_first", 1),
    ("SELECT home_region, COUNT(*) FROM commutes GROUP BY ALL", "home_first", 1),
    ("SELECT home_region, work_province, COUNT(*) FROM commutes GROUP BY ALL",
     "work_first", 3),
    ("SELECT work_region, home_province, COUNT(*) FROM commutes GROUP BY ALL",
     "home_first", 3),
    ("SELECT home_province, work_municipality, COUNT(*) FROM commutes GROUP BY ALL",
     "work_first", 5),
    ("SELECT COUNT(*) FROM commutes WHERE home_municipality = 'M7' AND work_province = 'P0'",
     "home_first", 5),
    ("SELECT home_region, COUNT(*) FROM work_first GROUP BY ALL", "work_first", 2),
])
def test_the_planner_reads_the_shallowest_covering_level_of_the_better_tree(
        commutes_release, query, view, level):
    cur = _connect(commutes_release).execute(query)
    assert (cur.dp_info["view"], cur.dp_info["level"]) == (view, level)
    # the choice is the smallest predicted error among the candidates
    best = min(c["predicted_error95"] for c in cur.dp_info["candidates"])
    assert cur.dp_info["predicted_error95"] == best


def test_answers_are_sums_of_the_level_and_bounds_are_the_model_for_that_many_nodes(
        commutes_release):
    """``FROM work_first`` names the destination tree: home-region totals are then sums
    of one node per work region at level 2, and their bound is the model's for that
    many nodes (no sibling set is whole, so the minimal cover cannot shorten it); the
    same question of the origin tree reads one node per row. The per-answer intervals
    are far narrower than the simultaneous bound, and never below 0."""
    con = _connect(commutes_release)
    raw = duckdb.connect(str(commutes_release), read_only=True)
    models = {v.name: v.error_model for v in open_release(commutes_release).views.values()}
    n_regions = COMMUTES_SHAPE["n_regions"]
    for view, level, nodes in (("work_first", 2, n_regions), ("home_first", 1, 1)):
        got = con.execute(f"SELECT home_region, COUNT(*), dp_bound(0.05), dp_ci_low(0.95), "
                          f"dp_ci_high(0.95) FROM {view} GROUP BY ALL ORDER BY 1").fetchall()
        sums = dict(raw.execute(f"SELECT home_region, sum(dp_count) FROM {view}__l{level} "
                                "GROUP BY ALL").fetchall())
        bound = models[view].sum_bound(level, np.arange(nodes), 0.05)
        assert len(got) == n_regions
        for region, n, b, lo, hi in got:
            assert n == sums.get(region, 0)
            assert b == pytest.approx(bound, rel=1e-12)
            assert 0 <= lo < hi and hi - lo < bound


def test_without_node_tables_answers_and_bounds_are_the_same(commutes_release):
    """A read-only DuckDB instance cannot hold node tables, so every sparse level is read
    per query (unordered, keyed nodes: filters reach the domains). Same answers, same
    bounds as with the node tables."""
    from dpsql import duck

    queries = [q.format(t="commutes").replace("COUNT(*) AS n", "COUNT(*) AS n, "
                                              "dp_bound(0.05) AS b") + " ORDER BY ALL"
               for q in QUERIES if "WITH" not in q]
    with_tables = _connect(commutes_release)
    ro = duckdb.connect(str(commutes_release), read_only=True)
    duck.attach(ro, str(commutes_release), name="again")
    assert all(v.node_table(6) == "" for v in duck.catalog_of(ro).releases[0].views)
    for query in queries:
        want = with_tables.execute(query).fetchall()
        got = duck.sql(ro, query.replace("FROM commutes", "FROM again.commutes")).fetchall()
        assert got == want, query
