"""The sqlglot versions dpsql accepts (28.10+) plan DuckDB's ``~`` alike or refuse it
(dpsql.planner._sqlglot_compat): up to 30.26 sqlglot reads ``~`` as a whole-string
match, which is not what DuckDB 2 runs. CI runs this file on sqlglot 30+ (the test venv) and on
Superset 6.1's sqlglot 28 (.ci/run's compatibility venv), so both branches are checked."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

import dpsql
from dpsql.errors import UnsupportedQueryError
from dpsql.planner import _sqlglot_compat

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

TILDE = "SELECT city, COUNT(*) FROM geo_gauss WHERE city {op} 'P2-C' GROUP BY city ORDER BY city"
NAMED = ("SELECT city, COUNT(*) FROM geo_gauss WHERE {neg}regexp_matches(city, 'P2-C') "
         "GROUP BY city ORDER BY city")


def test_the_flag_matches_this_sqlglot():
    version = tuple(int(p) for p in sqlglot.__version__.split(".")[:2])
    assert _sqlglot_compat.TILDE_IS_FULL_MATCH == (version < (30, 27))
    assert duckdb.sql("SELECT 'R1-P2-C1' ~ 'P2-C'").fetchall() == [(True,)]  # DuckDB: partial


@pytest.mark.parametrize("op, neg", [("~", ""), ("!~", "NOT ")])
def test_tilde_means_what_duckdb_means_or_is_refused(trips_release, op, neg):
    with dpsql.connect(trips_release) as con:
        named = con.execute(NAMED.format(neg=neg)).fetchall()
        assert named  # regexp_matches plans on every version
        if _sqlglot_compat.TILDE_IS_FULL_MATCH:
            with pytest.raises(UnsupportedQueryError, match=r"regexp_matches\(x, 'pattern'\)"):
                con.execute(TILDE.format(op=op))
        else:
            assert con.execute(TILDE.format(op=op)).fetchall() == named


def test_a_tilde_inside_a_string_is_not_the_operator(trips_release):
    with dpsql.connect(trips_release) as con:
        assert con.execute("SELECT '~' AS t, COUNT(*) > 0 FROM trips").fetchall() == [
            ("~", True)]


# Predicates as ROLLUP / CUBE / GROUPING SETS items: DuckDB takes them, sqlglot 28 and 30
# stop an item at a bitwise operator ("Expecting )"); wrap_grouping_items parenthesises
# them in the token list. Each is parsed as its parenthesised form, which sqlglot reads.
WRAPPED = [
    ("SELECT c IS NULL, COUNT(*) FROM t GROUP BY ROLLUP (c IS NULL)",
     "SELECT c IS NULL, COUNT(*) FROM t GROUP BY ROLLUP ((c IS NULL))"),
    ("SELECT 1 FROM t GROUP BY CUBE (name LIKE 'A%', c)",
     "SELECT 1 FROM t GROUP BY CUBE ((name LIKE 'A%'), c)"),
    ("SELECT 1 FROM t GROUP BY GROUPING SETS (c IS NULL, (), (c, d = 1), ROLLUP (a = 1, b))",
     "SELECT 1 FROM t GROUP BY GROUPING SETS ((c IS NULL), (), (c, d = 1), ROLLUP ((a = 1), b))"),
    ("SELECT 1 FROM t GROUP BY ROLLUP (NOT c IS NOT NULL, c BETWEEN 1 AND 2, c IN (1, 2), "
     "a > 1 AND b < 2 OR c, c ISNULL, s ILIKE 'x', a <> f(b = 1))",
     "SELECT 1 FROM t GROUP BY ROLLUP ((NOT c IS NOT NULL), (c BETWEEN 1 AND 2), (c IN (1, 2)), "
     "(a > 1 AND b < 2 OR c), (c ISNULL), (s ILIKE 'x'), (a <> f(b = 1)))"),
    ("SELECT 1 FROM t GROUP BY x, ROLLUP (CASE WHEN a = 1 THEN 2 END = 2, [1] = y)",
     "SELECT 1 FROM t GROUP BY x, ROLLUP ((CASE WHEN a = 1 THEN 2 END = 2), ([1] = y))"),
]


@pytest.mark.parametrize("sql,same", WRAPPED)
def test_a_predicate_in_a_grouping_is_read_as_duckdb_reads_it(sql, same):
    with pytest.raises(sqlglot.errors.ParseError):
        sqlglot.parse_one(sql, read="duckdb")  # what the planner met before
    assert _sqlglot_compat.parse_duckdb(sql)[0] == sqlglot.parse_one(same, read="duckdb")


UNTOUCHED = [  # no item to wrap: the very same token list
    "SELECT 'ROLLUP (a = 1)', $$ CUBE (b IS NULL) $$ FROM t -- GROUPING SETS (c = 1)",
    "SELECT 1 FROM t /* ROLLUP (a = 1) */ GROUP BY ROLLUP (a, (b, c)), CUBE (f(a = 1))",
    "SELECT 1 FROM t GROUP BY GROUPING SETS ((a IS NULL), (b, c = 1), ()), ROLLUP (a + 1)",
    'SELECT "rollup" FROM t WHERE a = 1 AND b IS NULL GROUP BY "rollup"',
    "SELECT 1 FROM t GROUP BY ROLLUP (CASE WHEN a = 1 THEN b END, (SELECT 1 WHERE x = 2))",
]


@pytest.mark.parametrize("sql", UNTOUCHED)
def test_sql_without_a_predicate_item_is_left_as_it_is(sql):
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    assert _sqlglot_compat.wrap_grouping_items(tokens) == tokens
    assert _sqlglot_compat.parse_duckdb(sql)[0] == sqlglot.parse_one(sql, read="duckdb")


@pytest.mark.parametrize("sql,at", [
    ("SELECT mode, COUNT(*) FROM trips GROUP BY ROLLUP (mode LIKE 'b%') HAVING COUNT(*) > )",
     ")"),
    ("SELECT mode, COUNT(*) FROM trips GROUP BY ROLLUP (mode LIKE 'b%', region IS NULL) "
     "ORDR BY 1", "ORDR BY 1"),
])
def test_a_syntax_error_after_a_wrapped_item_is_where_it_was_written(trips_release, sql, at):
    with dpsql.connect(trips_release) as con:
        with pytest.raises(dpsql.SqlSyntaxError) as err:
            con.execute(sql)
    assert (err.value.line, sql[err.value.col - 1:]) == (1, at)


def test_a_predicate_in_a_rollup_is_answered_as_duckdb_answers_it(trips_release):
    """The planned query groups as DuckDB does (the noisy release: the groups and the
    totals' consistency; tests/e2e/test_sql_matrix.py compares counts with the data)."""
    with dpsql.connect(trips_release) as con:
        rows = con.execute("SELECT mode LIKE 'b%' AS b, COUNT(*) FROM trips "
                           "GROUP BY ROLLUP (mode LIKE 'b%') ORDER BY b NULLS LAST").fetchall()
    assert [r[0] for r in rows] == [False, True, None]
    assert rows[2][1] == pytest.approx(rows[0][1] + rows[1][1])
