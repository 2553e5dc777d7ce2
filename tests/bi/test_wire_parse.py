"""The protocol's Parse on ``dpsql serve`` as PostgreSQL answers it (raw frontend
messages on a socket, :mod:`tests.bi.pg_client`; each expectation was checked against a
PostgreSQL 15 server):

* a Parse naming a prepared statement that exists is 42P05 (duplicate_prepared_statement)
  and leaves the existing one as it was; the unnamed statement is replaced silently;
* a syntax error is reported in answer to the Parse (42601), not at Bind or Execute: a
  client that prepares (asyncpg's ``prepare``, psycopg's ``prepare=True``, JDBC) learns
  there, and the statement is not kept; what follows up to Sync is skipped."""

from __future__ import annotations

import psycopg
import pytest

from tests.bi.pg_client import (SYNC, bind, close, connected, data_rows, describe, execute,
                                fields, kinds, parse, query, until_ready)
from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

COUNT = "SELECT COUNT(*) > 1000 AS ok FROM trips"


def _run(sock, statement: str) -> list[list[str | None]]:  # noqa: ANN001
    sock.sendall(bind("", statement) + execute("") + SYNC)
    got = until_ready(sock)
    assert kinds(got)[0] == "2" and kinds(got)[-2:] == "CZ", got
    return data_rows(got)


def test_a_parse_of_an_existing_name_is_42P05_and_keeps_the_statement(server):
    """It replaced the statement: a client whose two statements got one name ran the
    second text where it expected the first's columns."""
    with connected(server.port) as s:
        s.sendall(parse("s1", "SELECT 1 AS one") + SYNC)
        assert kinds(until_ready(s)) == "1Z"
        s.sendall(parse("s1", "SELECT 2 AS two") + bind("", "s1") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and got[-1][1] == b"I"
        assert fields(got[0][1])["C"] == "42P05"
        assert 'prepared statement "s1" already exists' in fields(got[0][1])["M"]
        assert _run(s, "s1") == [["1"]]  # the first statement, untouched
        s.sendall(close(b"S", "s1") + parse("s1", "SELECT 2 AS two") + SYNC)
        assert kinds(until_ready(s)) == "31Z"  # closed first: the name is free
        assert _run(s, "s1") == [["2"]]
        s.sendall(parse("", "SELECT 3") + parse("", "SELECT 4") + SYNC)
        assert kinds(until_ready(s)) == "11Z"  # the unnamed statement: replaced
        assert _run(s, "") == [["4"]]


def test_a_duplicate_parse_in_a_block_fails_the_block(server):
    with connected(server.port) as s:
        s.sendall(query("BEGIN") + parse("s1", "SELECT 1") + SYNC)
        assert kinds(until_ready(s) + until_ready(s)) == "CZ1Z"
        s.sendall(parse("s1", "SELECT 1") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and got[-1][1] == b"E"  # in a failed block, as PostgreSQL
        s.sendall(query("ROLLBACK"))
        assert kinds(until_ready(s)) == "CZ"


def test_psycopg_prepared_statements_reuse_names_after_closing_them(server):
    """psycopg prepares statements under names it deallocates before it reuses them
    (its cache of ``prepared_max`` statements): with the names checked, it still runs
    more statements than its cache holds, each answering its own query."""
    with psycopg.connect(_dsn(server), autocommit=True, prepare_threshold=0) as con:
        con.prepared_max = 2
        for age in (20, 30, 40, 50, 20, 60):
            sql = f"SELECT COUNT(*) > 0, {age} AS age FROM trips WHERE age < %s"
            assert con.execute(sql, [age]).fetchone() == (True, age)


@pytest.mark.parametrize("sql", ["SELEC 1", "SELECT COUNT(*) FROM trips WHERE",
                                 "DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM",
                                 "SELECT region FROM trips GROUP BY region ORDER",
                                 "SELECT * FROM pg_class WHERE relname = 'x' AND"])
def test_a_syntax_error_is_answered_to_the_parse(server, sql):
    """PostgreSQL answers ErrorResponse 42601 to the Parse itself; the Parse was
    accepted (ParseComplete), the Bind too, a Describe answered NoData, and the error
    came at Execute. The statement is not kept (26000 after Sync), and the session goes
    on."""
    with connected(server.port) as s:
        s.sendall(parse("bad", sql) + bind("", "bad") + describe(b"S", "bad") + execute("")
                  + SYNC + query("SELECT 1"))
        got = until_ready(s)
        assert kinds(got) == "EZ", got
        assert fields(got[0][1])["C"] == "42601", fields(got[0][1])
        assert kinds(until_ready(s)) == "TDCZ"
        s.sendall(describe(b"S", "bad") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "26000"


def test_a_syntax_error_in_a_block_fails_the_block(server):
    with connected(server.port) as s:
        s.sendall(query("BEGIN") + parse("", "SELEC 1") + bind("", "") + execute("")
                  + SYNC)
        got = until_ready(s) + until_ready(s)
        assert kinds(got) == "CZEZ" and got[-1][1] == b"E"
        s.sendall(query("SELECT 1"))
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "25P02"
        s.sendall(query("ROLLBACK"))
        assert kinds(until_ready(s)) == "CZ"


@pytest.mark.parametrize("sql", [
    COUNT, "SELECT region, COUNT(*) FROM trips WHERE age < $1 GROUP BY region",
    "SHOW TimeZone", "BEGIN", "SET application_name = 'x'", "DEALLOCATE ALL",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1", "FETCH 1 FROM c", "CLOSE c",
    # PostgreSQL spellings the catalog route rewrites before DuckDB reads them
    "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) "
    "'^(trips)$' COLLATE pg_catalog.default",
    "SELECT 'trips'::regclass::oid",
    # refused, but not a syntax error: PostgreSQL says so at Execute
    "DELETE FROM trips", "EXPLAIN SELECT COUNT(*) FROM trips"])
def test_statements_that_parse_are_parse_complete(server, sql):
    with connected(server.port) as s:
        s.sendall(parse("ok", sql) + SYNC)
        assert kinds(until_ready(s)) == "1Z"


@pytest.mark.parametrize("prepared", [False, True], ids=["simple", "extended"])
def test_a_syntax_error_says_where_it_is(server, prepared):
    """The ErrorResponse of a syntax error carries its place in the query string (field
    P, 1-based), as PostgreSQL's do: psql draws its caret there, psycopg reads
    ``diag.statement_position``. It had none."""
    sql = "/* q */ SELECT COUNT(*)\nFROM trips WHERE"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.SyntaxError) as err:
            con.execute(sql, prepare=prepared)
        assert err.value.diag.statement_position == str(sql.index("WHERE") + 1)
        if not prepared:  # a later statement of a string: its place in the whole string
            with pytest.raises(psycopg.errors.SyntaxError) as err:
                con.execute("SELECT 1; SELEC 2")
            assert err.value.diag.statement_position == "11"


def test_a_table_that_does_not_exist_is_42P01_at_parse(server):
    """PostgreSQL answers the Parse of a statement naming a table that does not exist
    with 42P01 (undefined_table) and where the name is (field P; checked against
    PostgreSQL 15: 43 here); the Parse was accepted and the error came at Execute. A
    CTE, a catalog relation and a logical table spelt with its schema are found. A
    simple query says the same, with the place in its string (it had none)."""
    sql = '/* c */ SELECT COUNT(*)\nFROM trips t JOIN "Nosuch" n ON true'
    with connected(server.port) as s:
        s.sendall(parse("bad", sql) + bind("", "bad") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ", got
        err = fields(got[0][1])
        assert (err["C"], err["P"]) == ("42P01", str(sql.index('"Nosuch"') + 1)), err
        assert 'relation "Nosuch" does not exist' in err["M"]
        s.sendall(parse("", "SELECT COUNT(*) FROM trip") + SYNC)
        assert 'did you mean "trips"?' in fields(until_ready(s)[0][1])["M"]
        s.sendall(parse("", "WITH c AS (SELECT 1 AS x) SELECT x FROM c, pg_class LIMIT 1")
                  + parse("p", "SELECT COUNT(*) FROM public.trips") + SYNC)
        assert kinds(until_ready(s)) == "11Z"
        # a simple query: each statement as it comes to run, the place in the whole string
        s.sendall(query("SELECT 1; SELECT COUNT(*) FROM nosuch"))
        got = until_ready(s)
        assert kinds(got) == "TDCEZ" and fields(got[3][1])["P"] == "32", got
        # a query in parentheses with clauses outside: its tables are looked for too
        sql = "(SELECT * FROM nosuch) ORDER BY 1"
        s.sendall(parse("", sql) + SYNC)
        err = fields(until_ready(s)[0][1])
        assert (err["C"], err["P"]) == ("42P01", str(sql.index("nosuch") + 1)), err
