"""A simple-protocol query string with several statements runs them one by one, as
PostgreSQL does; each is routed and checked on its own (exactly one SELECT by DuckDB's
parser, the same planner and refusals), and the first error ends the string.

Npgsql (Power BI's and Excel's PostgreSQL connectors) loads the server's types on every
new connection with one such string (``SELECT version(); <types>; <composites>;
<enums>``): it was refused as a whole ("several statements in one query string"), and
its types query found no type (DuckDB files them outside pg_catalog) nor pg_range, so no
.NET client could connect."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

NPGSQL = json.loads((Path(__file__).parent / "fixtures" / "npgsql.json").read_text())


def _results(con: psycopg.Connection, sql: str) -> list[list[tuple]]:
    """Every result set of the simple query ``sql``."""
    out = []
    with con.cursor() as cur:
        cur.execute(sql)
        while True:
            out.append(cur.fetchall() if cur.description else [])
            if not cur.nextset():
                return out


def test_npgsql_loads_the_types_on_connect(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        version, types, composites, enums = _results(con, NPGSQL["statements"][0]["sql"])
    assert version[0][0].startswith("PostgreSQL 15.0 (dpsql")
    by_oid = {int(oid): (ns, name, kind) for ns, oid, name, kind, _, _ in types}
    for oid, name in ((16, "bool"), (20, "int8"), (23, "int4"), (25, "text"),
                      (701, "float8"), (1043, "varchar"), (1082, "date"), (1114, "timestamp"),
                      (1700, "numeric")):
        assert by_oid[oid] == ("pg_catalog", name, "b")
    assert all(notnull in (False, "f") for *_, notnull, _ in types)  # never NULL
    assert composites == [] and enums == []


def test_statements_run_in_turn_and_the_first_error_ends_the_string(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        got = _results(con, "BEGIN; SELECT COUNT(*) > 1000 FROM trips; SELECT ';' AS a, "
                            "'x;y' AS b; COMMIT")
        assert got == [[], [(True,)], [(";", "x;y")], []]
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="SELECT \\*"):
            con.execute("SET application_name = 'first'; SELECT * FROM trips; "
                        "SET application_name = 'never'")
        # one implicit transaction, as in PostgreSQL: the error rolls back its SET (it
        # kept 'first'); a COMMIT in the string commits what came before it
        assert con.execute("SHOW application_name").fetchone()[0] == ""
        assert con.info.parameter_status("application_name") == ""
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            con.execute("BEGIN; SET application_name = 'kept'; COMMIT; "
                        "SET application_name = 'undone'; SELECT * FROM trips")
        assert con.execute("SHOW application_name").fetchone()[0] == "kept"
        for sql, state in (("SELECT 1; DROP TABLE trips", "25006"),
                           ("SELECT 1; SELECT * FROM read_text('/etc/hostname')", "0A000"),
                           ("SELECT 1; SET threads = 64", "42501")):
            with pytest.raises(psycopg.Error) as err:
                con.execute(sql)
            assert err.value.sqlstate == state, (sql, err.value)
        assert con.execute("SELECT COUNT(*) > 1000 FROM trips").fetchone() == (True,)


SPLITS = [
    ("SELECT 1; SELECT 2", ["SELECT 1", " SELECT 2"]),
    ("SELECT $$;$$; SELECT 2", ["SELECT $$;$$", " SELECT 2"]),
    ("SELECT $a$ ; $b$ ; $a$; SELECT 3", ["SELECT $a$ ; $b$ ; $a$", " SELECT 3"]),
    ("SELECT E'\\\\';' AS x; SELECT 1 --'", ["SELECT E'\\\\'", "' AS x; SELECT 1 --'"]),
    ("SELECT E'\\';' AS x; SELECT 2", ["SELECT E'\\';' AS x", " SELECT 2"]),
    ("SELECT 'a;b'; SELECT \"x;y\"", ["SELECT 'a;b'", ' SELECT "x;y"']),
    ("/* a; /* b; */ c; */ SELECT 1; -- x; y\n SELECT 2",
     ["/* a; /* b; */ c; */ SELECT 1", " -- x; y\n SELECT 2"]),
    ("SELECT 1; SELECT 'abc", ["SELECT 1; SELECT 'abc"]),  # unclosed: one statement
    ("SELECT 1 /* unclosed; SELECT 2", ["SELECT 1 /* unclosed; SELECT 2"]),
    ("SELECT $t$ unclosed; SELECT 2", ["SELECT $t$ unclosed; SELECT 2"]),
    ("SELECT 1;;; ; -- c\n;", ["SELECT 1"]),
    ("SELECT $1, $2; SELECT 3", ["SELECT $1, $2", " SELECT 3"]),
    ("-- only a comment", []),
    ("/* c */ 'a'; /* d */", ["/* c */ 'a'"]),
]


@pytest.mark.parametrize("sql, pieces", SPLITS)
def test_the_split_follows_postgresqls_quoting(sql, pieces):
    from dpsql.server._guard import split_simple_query

    assert split_simple_query(sql) == pieces


@pytest.mark.parametrize("name, sql", [
    ("unclosed dollar tags", '"SELECT 1 " + " ".join(f"$t{i}$" for i in range(130_000))'),
    ("nested comment openers", '"SELECT 1 /*" + "/*" * 500_000 + "*/" * 9'),
    ("comment openers in a string", '"SELECT \'" + "/*" * 500_000 + "\'"'),
    ("a run of statements", '"SELECT 1;" * 200_000'),
])
def test_the_split_is_linear_in_the_text(name, sql):
    """The split runs on the whole simple-query message (up to twice the statement size
    limit) before any limit is checked, in the session's thread, where no statement
    timeout or cancel reaches. It looked for each ``$tag$``'s closing tag to the end of
    the text, and for each ``/*``'s ``*/``: about 1 MB of distinct unclosed tags
    ``$t1$ $t2$ ...`` cost ~8 minutes of a core (18.7 s measured for 214 KB, quadratic),
    and any client could send it. Now each opening is scanned once (a few hundredths of
    a second for each text here). It runs in a child process (a thread could not be
    timed: the regex holds the GIL), with a bound four orders of magnitude above that."""
    import subprocess
    import sys

    code = ("from dpsql.server._guard import split_simple_query; "
            f"print(len(split_simple_query({sql})))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: the split took more than 120 s")
    assert out.stdout.strip() in ("1", "200000"), out


def test_a_huge_unclosed_dollar_quote_is_answered_and_the_session_goes_on(server):
    sql = "SELECT 1 " + " ".join(f"$t{i}$" for i in range(110_000))  # just under 1 MiB
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            con.execute(sql.encode())
        assert err.value.sqlstate in ("42601", "54000", "0A000"), err.value
        assert con.execute("SELECT COUNT(*) > 1000 FROM trips").fetchone() == (True,)


def test_a_syntax_error_anywhere_in_the_string_runs_none_of_it(server):
    """PostgreSQL parses the whole string first: a syntax error in a later statement is
    the only answer, and the statements before it never run. They ran: ``BEGIN; SELECT
    1; SELEC 2`` began a block, answered a row, then failed the block (25P02 after), where
    PostgreSQL leaves the session idle."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.SyntaxError):
            con.execute("BEGIN; SET application_name = 'ran'; SELEC 2; SELECT 3")
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert con.execute("SHOW application_name").fetchone() == ("",)
        con.execute("BEGIN")
        with pytest.raises(psycopg.errors.SyntaxError):
            con.execute("SELECT 1; SELECT COUNT(*) FROM trips WHERE")
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        con.execute("ROLLBACK")
        assert _results(con, "SELECT 1; SELECT COUNT(*) > 1000 FROM trips") == [
            [(1,)], [(True,)]]
