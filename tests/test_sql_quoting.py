"""dpsql._sql: the one pair of quoting functions for the SQL dpsql writes. Checked by
DuckDB itself: any text, quoted, comes back unchanged as a column name or a value."""

from __future__ import annotations

import duckdb
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpsql._sql import quote_ident, quote_literal

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(TEXT)
@example('a"b')
@example('"')
@example("it's")
def test_any_name_survives_as_an_identifier(name):
    con = duckdb.connect()
    cur = con.execute(f"SELECT 1 AS {quote_ident(name)}")
    assert cur.description[0][0] == name
    con.execute(f"CREATE TABLE {quote_ident(name)} (x INTEGER)")
    assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [(name,)]
    con.close()


@settings(max_examples=150, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=30))
@example("O'Hare")
@example("'")
@example("")
def test_any_text_survives_as_a_literal(value):
    con = duckdb.connect()
    assert con.execute(f"SELECT {quote_literal(value)}").fetchone()[0] == value
    con.close()


def test_an_injection_stays_inside_its_quotes():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x INTEGER)")
    name = 't"; DROP TABLE t; --'
    cur = con.execute(f"SELECT 1 AS {quote_ident(name)}, {quote_literal(name)} AS v")
    assert cur.fetchone() == (1, name)
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 1
