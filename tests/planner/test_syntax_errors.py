"""Syntax errors point at the word to fix (dpsql.planner._syntax_error): sqlglot stops one
token past a misspelt keyword, and the error names the misspelt word, its first column
and the keyword meant."""

from __future__ import annotations

import pytest

from dpsql.errors import SqlSyntaxError
from dpsql.planner.parse_sql import parse_sql


@pytest.mark.parametrize("sql, line, col, near, says", [
    # the first word of a statement that no query starts with
    ("SELEC 1", 1, 1, "SELEC", "'SELEC' does not start a query; did you mean SELECT?"),
    ("SELEC mode, COUNT(*) FROM trips GROUP BY mode", 1, 1, "SELEC", "did you mean SELECT?"),
    ("WIHT a AS (SELECT 1) SELECT * FROM a", 1, 1, "WIHT", "did you mean WITH?"),
    ("SELECT 1;\n  SELCT 2", 2, 3, "SELCT", "did you mean SELECT?"),
    ("BLAH x y", 1, 1, "BLAH", "a query starts with SELECT, WITH or FROM"),
    # a clause keyword misspelt into a name (an alias to sqlglot)
    ("SELECT mode FORM trips", 1, 13, "FORM", "did you mean FROM?"),
    ("SELECT mode, COUNT(*) FROM trips GRUOP BY mode", 1, 34, "GRUOP",
     "did you mean GROUP?"),
    ("SELECT mode,\n  COUNT(*) FROM trips\n WHRE mode = 'car'", 3, 2, "WHRE",
     "did you mean WHERE?"),
    # no misspelt word: where the parser stopped, at the first column of that token
    ("SELECT COUNT(*) FROM trips WHERE mode IN ('a',", 1, 46, ",", "Expect"),
    ("SELECT 1 +", 1, 10, "+", "missing"),
])
def test_the_error_points_at_the_word_to_fix(sql, line, col, near, says):
    with pytest.raises(SqlSyntaxError) as info:
        parse_sql(sql)
    err = info.value
    assert (err.line, err.col, err.highlight) == (line, col, near), str(err)
    assert str(err).startswith(f"syntax error at line {line}, column {col} near {near!r}")
    assert says in str(err)
    # the column is the blamed word's own first character
    assert sql.splitlines()[line - 1][col - 1:].startswith(near)


def test_a_name_that_is_no_keyword_typo_is_not_blamed():
    # `mode COUNT` reads as a column and its alias; the parser stops at '(' and nothing
    # before it looks like a misspelt keyword
    with pytest.raises(SqlSyntaxError) as info:
        parse_sql("SELECT mode COUNT(*) FROM trips")
    assert (info.value.col, info.value.highlight) == (18, "(")
    assert "did you mean" not in str(info.value)


def test_an_interval_duckdb_does_not_parse_is_a_syntax_error():
    """sqlglot reads INTERVAL -3 MONTH as INTERVAL '-3' MONTH, and the planner answered
    it (d < DATE '2013-06-01' + INTERVAL -3 MONTH: 1,031 rows of the fuzz data), where
    DuckDB's parser fails ("syntax error at or near "MONTH""); the forms DuckDB parses
    still parse (dpsql/planner/refuse_loose_syntax.py)."""
    import duckdb

    con = duckdb.connect()
    head = "SELECT DATE '2013-06-01' + "
    for bad, near in (("INTERVAL -3 MONTH", "-"), ("INTERVAL +3 MONTH", "+"),
                      ("INTERVAL NULL DAY", "NULL"), ("INTERVAL 1 + 2 MONTH", None),
                      ("INTERVAL 3::INT MONTH", None)):
        with pytest.raises(duckdb.ParserException):
            con.execute(head + bad)
        with pytest.raises(SqlSyntaxError, match="DuckDB's INTERVAL takes one number or "
                                                 "string, or an expression in parentheses"
                           ) as info:
            parse_sql(head + bad)
        assert info.value.highlight == near, str(info.value)
    for good in ("INTERVAL '-3' MONTH", "- INTERVAL 3 MONTH", "INTERVAL (-3) MONTH",
                 "INTERVAL (1 + 2) MONTH", "INTERVAL 3 MONTHS", "INTERVAL '3 months'",
                 "INTERVAL 1 DAY - CAST('1 day' AS INTERVAL) - '1 day'::INTERVAL",
                 # INTERVAL as a nested type beside an INTERVAL literal (review finding)
                 "INTERVAL 1 DAY + CAST(NULL AS STRUCT(a INTERVAL)).a",
                 "INTERVAL 1 DAY + CAST(NULL AS MAP(VARCHAR, INTERVAL))['x']"):
        con.execute(head + good)
        parse_sql(head + good)
