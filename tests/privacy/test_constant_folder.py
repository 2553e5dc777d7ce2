"""Red team of the planner's constant folder (:mod:`dpsql.planner.fold_constants`): a
bound written as a constant expression is valued by one locked, empty DuckDB per process.

What reaches it is an allow-list of literals, casts, intervals and operators
(tests/e2e/test_fuzz_regressions.py checks that functions, subqueries, columns and
parameters never do). Here: what it remembers, the special calendar values and time
zones it must refuse however they are spelled, and the dates at the end of Python's
calendar, each answered as DuckDB answers the same SQL on the raw data, or refused.
"""

from __future__ import annotations

import warnings

import duckdb
import pytest
import sqlglot

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.planner import fold_constants as fc


@pytest.fixture(scope="module")
def cons(typed_release):
    """(dpsql connection on the exact typed release, DuckDB on its raw parquet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        dp = dpsql.connect(typed_release)
    raw = duckdb.connect()
    raw.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet("
                f"'{typed_release.parent / 't.parquet'}')")
    yield dp, raw
    dp.close()
    raw.close()


def test_a_long_constant_expression_is_valued_but_not_remembered():
    """The folder's cache kept every distinct expression it valued, 1,024 of them,
    whatever their length: a bound ``CAST('<1 MB of spaces>5' AS INT)`` (the server
    accepts a 1 MiB statement) kept its megabyte, and 150 such bounds grew the process
    by 315 MB (1,024 of them: about 2 GB in a planning process of ``dpsql serve``, which
    lives as long as the server, outside every session's memory limit). A long
    expression is now valued each time, a short one once."""
    fc._fold_cached.cache_clear()
    long = fc.fold_constant(sqlglot.parse_one(
        "CAST('" + " " * 100_000 + "5' AS INT)", read="duckdb"), "the bound")
    assert (long.value, long.type) == (5, "INTEGER")
    assert fc._fold_cached.cache_info().currsize == 0
    short = fc.fold_constant(sqlglot.parse_one("10 + 5", read="duckdb"), "the bound")
    assert short.value == 15 and fc._fold_cached.cache_info().currsize == 1


@pytest.mark.parametrize("bound", [
    "CAST(CAST('infinity' AS TEXT) AS DATE)",
    "CAST(('infinity') AS DATE)",
    "CAST(CAST('-infinity' AS VARCHAR) AS TIMESTAMP)",
    "CAST(CAST('epoch' AS TEXT) AS DATE)",
    "CAST(CAST('2013-01-02 05:30+02' AS TEXT) AS TIMESTAMP)",
    "CAST(CAST('2013-01-02 05:30 America/New_York' AS TEXT) AS TIMESTAMP) + INTERVAL 1 HOUR",
])
def test_a_special_or_zoned_calendar_string_is_refused_however_it_is_cast(cons, bound):
    """``d < 'infinity'`` and ``ts < '2013-01-02 05:30+02'`` are refused (a special
    value; a time zone, which DuckDB drops); the same strings cast to text first, or in
    parentheses, reached the folder: ``ts = CAST(CAST('infinity' AS TEXT) AS TIMESTAMP)``
    failed with a bare Python OverflowError, and the zoned timestamp was read without
    its offset. Both are the same refusal now."""
    dp, _ = cons
    column = "d" if "DATE" in bound else "ts"
    for op in ("<", "=", ">="):
        with pytest.raises(dpsql.UnsupportedQueryError,
                           match="is not a plain date or timestamp"):
            dp.execute(f"SELECT COUNT(*) FROM t WHERE {column} {op} {bound}")


@pytest.mark.parametrize("where", [
    "d = DATE '9999-12-31'", "d <= DATE '9999-12-31'", "d > DATE '9999-12-31'",
    "d BETWEEN DATE '0001-01-01' AND DATE '9999-12-31'", "d IN (DATE '9999-12-31')",
    "ts <= TIMESTAMP '9999-12-31 23:59:59.999999'", "ts < TIMESTAMP '9999-12-31 23:59:59'",
])
def test_a_bound_at_the_end_of_the_calendar_is_answered(cons, where):
    """``d = DATE '9999-12-31'`` is the interval [9999-12-31, 10000-01-01), whose end
    Python's dates cannot hold: the planner raised a bare OverflowError ("date value out
    of range") where DuckDB answers 0 (2,000 for ``d <=``). Answered as DuckDB answers."""
    dp, raw = cons
    sql = f"SELECT COUNT(*) FROM t WHERE {where}"
    got = dp.execute(sql).fetchall()[0][0]
    want = raw.execute(sql).fetchall()[0][0]
    assert abs(got - want) <= 0.5, (got, want)
