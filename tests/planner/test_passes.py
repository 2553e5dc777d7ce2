"""Planner fixture tests: ``input;expected;`` SQL fixtures per pass (STYLE §5b) and
snapshots of the generated DuckDB SQL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
import sqlglot

from dpsql import duck
from dpsql.planner import plan_query
from dpsql.planner.bind_params import bind_params
from dpsql.planner.parse_sql import parse_sql

FIXTURES = Path(__file__).parent / "fixtures"


def _cases(name: str) -> list[list[str]]:
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.strip() and not line.startswith("--"):
            out.append([p.strip() for p in line.rstrip(";").split(";")])
    return out


@pytest.fixture(scope="module")
def catalog(trips_release):
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    yield duck.catalog_of(c)
    c.close()


@pytest.mark.parametrize("case", _cases("bind_params.sql"))
def test_bind_params(case):
    query, params, expected = case
    got = bind_params(parse_sql(query), json.loads(params)).sql("duckdb")
    assert got == sqlglot.parse_one(expected, dialect="duckdb").sql("duckdb")


@pytest.mark.parametrize("query", ["SELECT COUNT(*) FROM trips WHERE mode = $a AND region = $b",
                                   "SELECT COUNT(*) FROM trips WHERE mode = :a"])
def test_named_placeholders_are_refused(query):
    """A positional list cannot bind names: refused, never bound in some walk order."""
    from dpsql.errors import ProgrammingError

    with pytest.raises(ProgrammingError, match="named placeholders"):
        bind_params(parse_sql(query), ["car", "R1"][:query.count("$") or 1])


@pytest.mark.parametrize("case", _cases("choose_view.sql"))
def test_choose_view(catalog, case):
    query, expected = case
    info = plan_query(catalog, query).info
    assert f"{info['view']}:{info['level']}:{info['interpolation']}" == expected


@pytest.mark.parametrize("case", _cases("rewrite_query.sql"))
def test_rewrite_snapshot(catalog, case):
    query, expected = case
    assert plan_query(catalog, query).sql == expected


def test_generated_sql_does_not_depend_on_earlier_queries(catalog):
    """The per-thread generator is reused across queries; the made-up alias names it
    invents (``_t0``...) restart for every query, so a plan is a function of its query."""
    q = "SELECT a FROM (VALUES (1)) AS (a)"
    first = plan_query(catalog, q).sql
    assert "_t0" in first
    for _ in range(3):
        assert plan_query(catalog, q).sql == first


def test_planning_from_several_threads_gives_the_same_sql(catalog):
    from concurrent.futures import ThreadPoolExecutor

    queries = [c[0] for c in _cases("rewrite_query.sql")]
    expected = [plan_query(catalog, q).sql for q in queries]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(lambda q: plan_query(catalog, q).sql, queries)) == expected


@pytest.mark.parametrize("columns", [("region", "province", "city"),
                                     ("city", "province", "region"),
                                     ("province", "city", "region")])
def test_prediction_of_nested_group_columns_is_that_of_the_finest(catalog, columns):
    """Grouping by several columns of one hierarchy makes as many groups as its finest
    column: the prediction must not depend on the order the columns are met in (it
    once took whichever column a frozenset yielded last, which varies with the hash
    seed between processes)."""
    import dataclasses

    from dpsql.planner.choose_view import _predict, choose_view
    from dpsql.planner.find_references import find_references

    def ref_of(q):
        return find_references(parse_sql(q), catalog)[0]

    finest = ref_of("SELECT city, COUNT(*) FROM trips GROUP BY city")
    choice = choose_view(finest)
    ref = ref_of(f"SELECT {', '.join(columns)}, COUNT(*) FROM trips GROUP BY ALL")
    ordered = dataclasses.replace(ref, columns=columns)  # iterated in exactly this order
    assert _predict(choice.view, choice.level, ordered).half == choice.predicted


def test_memoized_view_choice_is_the_choice(catalog):
    """choose_view memoizes by the reference's signature (candidate views, grouped
    columns, measured attributes, range filters); after every fixture query has filled
    the memo, each memoized answer must equal a fresh computation."""
    from dpsql.planner.choose_view import _choose, choose_view
    from dpsql.planner.find_references import find_references

    queries = [c[0] for name in ("choose_view.sql", "rewrite_query.sql") for c in _cases(name)]
    queries += [f"SELECT COUNT(*) FROM dist WHERE distance >= {lo} AND distance < {hi}"
                for lo, hi in ((0, 4), (0, 4.5), (3, 4), (4, 8), (0, 256), (250, 256))]
    for q in queries:
        plan_query(catalog, q)
    assert catalog.releases[0].choices  # the memo is in use
    for q in reversed(queries):
        for ref in find_references(parse_sql(q), catalog):
            assert choose_view(ref) == _choose(ref), q


def test_walk_sorts_selects_and_their_own_nodes():
    """One walk: SELECTs outermost first, CTE bodies before the body, nested ones after
    the part of the text that holds them; each scope holds only its own columns and
    calls, and is ``nested`` when a query or WITH sits inside it."""
    from dpsql.errors import UnsupportedQueryError
    from dpsql.planner.parse_sql import parse_walked

    tree, walked = parse_walked(
        "WITH a AS (SELECT s, COUNT(*) FROM t1 GROUP BY s) "
        "SELECT (SELECT MAX(u) FROM t3) AS z, SUM(v) FROM a WHERE x IN (SELECT y FROM t2) "
        "AND w = ?")
    assert [s.sql() for s in walked.selects] == [
        tree.sql(), "SELECT s, COUNT(*) FROM t1 GROUP BY s", "SELECT MAX(u) FROM t3",
        "SELECT y FROM t2"]
    scopes = [walked.scopes[id(s)] for s in walked.selects]
    assert [sorted(c.sql() for c in sc.columns) for sc in scopes] == [
        ["v", "w", "x"], ["s", "s"], ["u"], ["y"]]
    assert [[c.sql() for c in sc.calls] for sc in scopes] == [
        ["SUM(v)"], ["COUNT(*)"], ["MAX(u)"], []]
    assert [sc.nested for sc in scopes] == [True, False, False, False]
    assert sorted(t.name for t in walked.tables) == ["a", "t1", "t2", "t3"]
    assert [c.alias for c in walked.ctes] == ["a"]
    assert len(walked.placeholders) == 1
    with pytest.raises(UnsupportedQueryError, match="INSERT"):
        parse_walked("WITH a AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM a")


@pytest.mark.parametrize("k", ["1.5", "'1'", "NULL", "1 + 1", "-1", "2.0", "CAST(1 AS INT)"])
def test_dp_level_takes_a_whole_number_level(catalog, k):
    """dp_level('dist', 1.5) read level 1 (int(float('1.5'))); '1', NULL and expressions
    got a message about literals that named neither the value nor the levels."""
    from dpsql.errors import UnsupportedQueryError

    with pytest.raises(UnsupportedQueryError, match=(
            rf"dp_level\('dist', .*\): the level k of dp_level\(view, k\) must be a "
            rf"whole-number literal, got {re.escape(k)}; the levels of 'dist' are 1 to 6")):
        plan_query(catalog, f"SELECT COUNT(*) FROM dp_level('dist', {k})")
    assert "dist__l2" in plan_query(catalog, "SELECT COUNT(*) FROM dp_level('dist', 2)").sql


@pytest.mark.parametrize("case", _cases("inline_subqueries.sql"))
def test_inline_subqueries(catalog, case):
    """The SQL after :mod:`~dpsql.planner.inline_subqueries` (a derived table that only
    picks, renames and filters the private table's columns is the table), and what it
    leaves as it is."""
    from dpsql.planner.inline_subqueries import inline_subqueries
    from dpsql.planner.parse_sql import parse_walked
    from dpsql.planner.resolve_helpers import resolve_helpers

    query, expected = case
    tree, walked = parse_walked(query)
    resolve_helpers(walked, catalog)
    inline_subqueries(tree, walked, catalog)
    assert tree.sql("duckdb") == sqlglot.parse_one(expected, dialect="duckdb").sql("duckdb")
