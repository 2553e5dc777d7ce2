"""Bounded work per statement in ``dpsql serve``: limits checked before parsing (54000
statement too long, 54001 too complex), long statements planned in planning processes
under the statement timeout and the cancel request, and a protocol message cap. No
assertion here depends on how fast the machine is (benchmarks/serve.py measures that)."""

from __future__ import annotations

import socket
import struct

import psycopg
import pytest

import dpsql
from dpsql.server import serve
from dpsql.server._bounds import (INLINE_BYTES, MAX_DEPTH, MAX_IN_LIST,
                                  StatementTooComplexError, StatementTooLongError,
                                  check_max_statement_size, check_statement, max_message)
from tests.bi.pg_client import (SYNC, cancelled_errors, connected, fields, kinds, parse,
                                read_message, startup_packet, until_ready)
from tests.bi.test_serve import _dsn

# Seeded on purpose; some queries name values outside the domains (answered 0, noticed:
# tests/e2e/test_pg_like_results.py checks the notices).
pytestmark = [pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning"),
              pytest.mark.filterwarnings("ignore::dpsql.dbapi.PublicDomainWarning")]

PAD = " -- " + "x" * (INLINE_BYTES + 100)  # makes any statement a long one


def _hostile(n: int) -> str:
    """A chain of ``n`` ORs: about 19 bytes an OR, and (measured) 4 us a byte to parse and
    plan; far more than any machine parses in the 0.1 s (or 0.5 s) the tests allow."""
    return "SELECT COUNT(*) FROM trips WHERE " + " OR ".join(
        f"mode = 'm{i}'" for i in range(n))


HOSTILE = _hostile(50_000)  # 0.9 MB: under the 1 MiB limit


@pytest.fixture(scope="module")
def server(trips_release):
    # a generous server limit: a loaded 2-core machine must not time out ordinary
    # statements (the test of the limit sets its own 100 ms)
    srv = serve(trips_release, port=0, statement_timeout=30.0, max_statement_size=1 << 20)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def pg(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        # the planning processes start on the first long statement: not under a timeout
        assert server._conn.planning.start(wait=120)
        yield con


@pytest.fixture(scope="module")
def local(trips_release):
    with dpsql.connect(trips_release) as con:
        yield con


# -- the pre-check, on text -----------------------------------------------------------

def test_bounds_on_text():
    check_statement("SELECT '" + "(" * 1000 + "' -- ((((", 4096)  # strings, comments
    check_statement("SELECT " + "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH, 1 << 20)
    with pytest.raises(StatementTooComplexError, match=f"more than {MAX_DEPTH} deep"):
        check_statement("SELECT " + "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
                        1 << 20)
    items = ", ".join(["1"] * (MAX_IN_LIST - 1))
    check_statement(f"SELECT 1 WHERE x IN ({items}) AND f({items}, {items})", 1 << 20)
    with pytest.raises(StatementTooComplexError, match="IN list"):
        check_statement(f"SELECT 1 WHERE x iN ({items}, 2, 3)", 1 << 20)
    with pytest.raises(StatementTooComplexError, match="IN list"):  # a nested list
        check_statement(f"SELECT 1 WHERE x IN (SELECT 1 WHERE y IN ({items}, 2, 3))", 1 << 20)
    with pytest.raises(StatementTooLongError, match="max-statement-size"):
        check_statement("SELECT 1 -- " + "é" * 3000, 4096)  # bytes, not characters
    assert max_message(1 << 20) > 2 << 20
    with pytest.raises(dpsql.ProgrammingError, match="at least 1024"):
        check_max_statement_size(10)


# -- over the wire --------------------------------------------------------------------

def test_limits_give_their_sqlstate_and_the_session_goes_on(pg):
    with pytest.raises(psycopg.Error) as info:
        pg.execute("SELECT 1 -- " + "x" * (1 << 20))
    assert info.value.sqlstate == "54000" and "max-statement-size" in str(info.value)
    with pytest.raises(psycopg.Error) as info:
        pg.execute("SELECT " + "(" * 300 + "1" + ")" * 300)
    assert info.value.sqlstate == "54001"
    values = ", ".join(f"'c{i}'" for i in range(MAX_IN_LIST + 1))
    with pytest.raises(psycopg.Error) as info:
        pg.execute(f"SELECT COUNT(*) FROM trips WHERE city IN ({values})")
    assert info.value.sqlstate == "54001" and "IN list" in str(info.value)
    assert pg.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)


@pytest.mark.parametrize("sql", [
    "SELECT region, COUNT(*) FROM trips GROUP BY region ORDER BY region",
    "SELECT COUNT(*) FROM trips WHERE city IN ({cities})",
    "SELECT mode, COUNT(*), dp_ci_low(0.9) FROM trips WHERE distance < 50 GROUP BY mode "
    "ORDER BY mode",
])
def test_long_statements_answer_as_in_process(pg, local, sql):
    cities = ", ".join(f"'c{i}'" for i in range(300)) + ", 'C1'"
    text = sql.format(cities=cities) + PAD
    assert len(text) > INLINE_BYTES
    expected = local.execute(text).fetchall()
    assert [tuple(r) for r in pg.execute(text).fetchall()] == expected
    with pg.cursor() as cur:  # extended protocol, with a parameter
        cur.execute(sql.format(cities=cities) + " LIMIT %s" + PAD, [1000])
        assert [tuple(r) for r in cur.fetchall()] == expected


@pytest.mark.parametrize("sql,state", [
    ("SELECT * FROM trips", "0A000"),
    ("SELECT COUNT(*) FROM trips WHERE", "42601"),
    ("DROP TABLE trips", "25006"),
    ("SELECT 1; DROP TABLE trips", "25006"),
    ("SELECT * FROM read_csv('/etc/passwd')", "0A000"),
    ("SELECT * FROM query('SELECT 1')", "0A000"),
])
def test_long_statements_are_refused_as_in_process(pg, sql, state):
    with pytest.raises(psycopg.Error) as info:
        pg.execute(sql + PAD)
    assert info.value.sqlstate == state, info.value
    assert "root:" not in str(info.value)


def test_long_catalog_statements_run(pg):
    rows = pg.execute("SELECT table_name FROM information_schema.tables ORDER BY 1" + PAD
                      ).fetchall()
    assert ("trips",) in rows


def test_a_long_statements_syntax_error_is_answered_to_the_parse(server, pg):
    """A statement over 1 KiB is syntax-checked at Parse too (42601 with its place, as
    PostgreSQL and as for a short one), in a planning process: it was accepted
    (ParseComplete) and its syntax error came at Execute."""
    with connected(server.port) as s:
        s.sendall(parse("bad", "SELEC COUNT(*) FROM trips" + PAD)
                  + parse("ok", "SELECT COUNT(*) FROM trips WHERE age < $1" + PAD) + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "42601", got
        assert fields(got[0][1])["P"] == "1"
        s.sendall(parse("ok", "SELECT COUNT(*) FROM trips WHERE age < $1" + PAD) + SYNC)
        assert kinds(until_ready(s)) == "1Z"


def test_planning_counts_against_the_timeout(server, pg):
    """A statement whose planning alone takes seconds is stopped by the limit (the
    client's own 100 ms here: 57014), its planning process is replaced, and the session
    goes on."""
    pg.execute("SET statement_timeout = 100")
    try:
        for _ in range(2):
            with pytest.raises(psycopg.errors.QueryCanceled) as info:
                pg.execute(HOSTILE)
            assert "statement timeout" in str(info.value)
    finally:
        pg.execute("RESET statement_timeout")
    assert server._conn.planning.start(wait=120)  # the killed processes were replaced
    assert pg.execute("SELECT COUNT(*) > 0 FROM trips" + PAD).fetchone() == (True,)


def test_planning_can_be_cancelled(trips_release):
    with serve(trips_release, port=0, statement_timeout=0, max_statement_size=8 << 20) as srv:
        assert srv._conn.planning.start(wait=120)
        with psycopg.connect(_dsn(srv), autocommit=True) as con:
            errors = cancelled_errors(con, _hostile(300_000))  # 5.7 MB: seconds
            assert len(errors) == 1 and isinstance(errors[0], psycopg.errors.QueryCanceled)
            assert "user request" in str(errors[0])
            assert con.execute("SELECT COUNT(*) > 0 FROM trips" + PAD).fetchone() == (True,)


def test_oversized_message_is_refused_before_it_is_read(trips_release):
    with serve(trips_release, port=0, max_statement_size=4096) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(startup_packet())
            while read_message(s)[0] != b"Z":
                pass
            s.sendall(b"Q" + struct.pack("!I", max_message(4096) + 100))
            kind, body = read_message(s)
            assert kind == b"E" and b"C54000\x00" in body
        with psycopg.connect(_dsn(srv), autocommit=True) as con:
            with pytest.raises(psycopg.Error) as info:
                con.execute("SELECT 1 -- " + "x" * 5000)
            assert info.value.sqlstate == "54000"
            assert con.execute("SELECT 1").fetchone() == (1,)
