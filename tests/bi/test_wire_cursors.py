"""SQL cursors on ``dpsql serve`` (:mod:`dpsql.server._cursors`): ``DECLARE``, ``FETCH``,
``MOVE``, ``CLOSE``, as psycopg's server-side cursors (and SQLAlchemy's
``stream_results``, pandas' ``chunksize`` through them) and psqlODBC's
``UseDeclareFetch`` send them. They were refused as a syntax error ("'DECLARE' does not
start a query"), so a named psycopg cursor could not read anything.

Every answer is compared with the same query read whole (the cursor adds nothing and
loses nothing)."""

from __future__ import annotations

import psycopg
import pytest

from dpsql.server._bounds import MAX_HELD
from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

QUERY = "SELECT province, COUNT(*) AS n FROM trips GROUP BY province ORDER BY province"


def _whole(server) -> list[tuple]:  # noqa: ANN001
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        return con.execute(QUERY).fetchall()


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_server_side_cursor_in_a_transaction(server, binary):
    whole = _whole(server)
    assert len(whole) > 5
    with psycopg.connect(_dsn(server)) as con:  # not autocommit: psycopg sends BEGIN
        with con.cursor("big", binary=binary) as cur:
            cur.execute(QUERY)
            assert [d.name for d in cur.description] == ["province", "n"]
            got = cur.fetchmany(2) + [cur.fetchone()]
            got += cur.fetchall()
        assert got == whole
        with con.cursor("filtered") as cur:  # parameters bound in the DECLARE
            cur.execute("SELECT COUNT(*) FROM trips WHERE distance < %s AND mode = %s",
                        [40, "bus"])
            assert cur.fetchall() == con.execute(
                "SELECT COUNT(*) FROM trips WHERE distance < %s AND mode = %s",
                [40, "bus"]).fetchall()
        con.rollback()


def test_psycopg_server_side_cursor_with_hold_in_autocommit(server):
    whole = _whole(server)
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with con.cursor("held", withhold=True) as cur:
            cur.execute(QUERY)
            assert cur.fetchmany(3) == whole[:3]
            assert con.execute("SELECT 1").fetchone() == (1,)  # another statement between
            assert cur.fetchall() == whole[3:]
        # WITHOUT HOLD outside a block: PostgreSQL's 25P01
        with pytest.raises(psycopg.Error) as err:
            with con.cursor("loose") as cur:
                cur.execute(QUERY)
        assert err.value.sqlstate == "25P01"


def test_sql_cursor_commands(server):
    whole = _whole(server)
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("BEGIN")
        cur = con.execute(f'DECLARE "C1" NO SCROLL CURSOR FOR {QUERY}')
        assert cur.statusmessage == "DECLARE CURSOR"
        cur = con.execute('FETCH 2 FROM "C1"')
        assert cur.fetchall() == whole[:2] and cur.statusmessage == "FETCH 2"
        assert con.execute('FETCH NEXT IN "C1"').fetchall() == whole[2:3]
        assert con.execute('MOVE FORWARD 1 FROM "C1"').statusmessage == "MOVE 1"
        assert con.execute('FETCH FORWARD ALL FROM "C1"').fetchall() == whole[4:]
        assert con.execute('FETCH ALL FROM "C1"').fetchall() == []
        con.execute("DECLARE c2 CURSOR FOR SELECT COUNT(*) FROM trips")
        assert con.execute("FETCH c2").fetchall() == con.execute(
            "SELECT COUNT(*) FROM trips").fetchall()
        for sql, code in [("FETCH c1", "34000"),  # "C1" is quoted: c1 is another name
                          ("FETCH PRIOR FROM c2", "55000"),
                          ("DECLARE c2 CURSOR FOR SELECT 1", "42P03"),
                          ("DECLARE c3 SCROLL CURSOR FOR SELECT 1", "55000"),
                          ("DECLARE c6 BINARY CURSOR FOR SELECT 1", "0A000"),
                          ("DECLARE c4 CURSOR FOR SELECT * FROM trips", "0A000"),
                          ("DECLARE c5 CURSOR FOR DROP TABLE trips", "25006"),
                          ("CLOSE nope", "34000")]:
            with pytest.raises(psycopg.Error) as err:
                con.execute(sql)
            assert err.value.sqlstate == code, sql
            con.execute("ROLLBACK")
            con.execute("BEGIN")
            con.execute("DECLARE c2 CURSOR FOR SELECT COUNT(*) FROM trips")
        assert con.execute("CLOSE c2").statusmessage == "CLOSE CURSOR"
        assert con.execute("CLOSE ALL").statusmessage == "CLOSE CURSOR ALL"
        con.execute("COMMIT")
        con.execute("DECLARE h CURSOR WITH HOLD FOR SELECT 42")
        assert con.execute("FETCH ALL FROM h").fetchall() == [(42,)]
        con.execute("CLOSE h")


def test_cursors_end_with_their_transaction_and_are_bounded(server):
    """A cursor WITHOUT HOLD is gone after COMMIT (34000); cursors count as portals
    against the session's bound (1,000): past it, 54000."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("BEGIN")
        con.execute("DECLARE c CURSOR FOR SELECT 1")
        con.execute("COMMIT")
        with pytest.raises(psycopg.Error) as err:
            con.execute("FETCH c")
        assert err.value.sqlstate == "34000"
        con.execute("; ".join(f"DECLARE h{i} CURSOR WITH HOLD FOR SELECT {i}"
                              for i in range(MAX_HELD)))
        with pytest.raises(psycopg.Error) as err:
            con.execute("DECLARE one_more CURSOR WITH HOLD FOR SELECT 1")
        assert err.value.sqlstate == "54000"
        con.execute("CLOSE ALL")
        con.execute("DECLARE one_more CURSOR WITH HOLD FOR SELECT 1")


def test_psycopg_closes_a_named_cursor_it_never_executed(server):
    """psycopg asks pg_catalog.pg_cursors before closing a named cursor it did not
    describe; the table did not exist, and the error failed the transaction."""
    with psycopg.connect(_dsn(server)) as con:
        con.execute("SELECT 1")
        with con.cursor("unused"):
            pass
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
        assert con.execute("SELECT name FROM pg_catalog.pg_cursors").fetchall() == []


def test_describe_of_a_fetch_statement_is_the_cursors_shape(server):
    """A driver that prepares ``FETCH n FROM c`` (Parse, Describe statement, then Bind and
    Execute: JDBC's PreparedStatement) gets the cursor's columns from the Describe, not
    NoData followed by rows it cannot decode; the Describe reads no row."""
    from tests.bi.pg_client import SYNC, bind, connected, data_rows, describe, execute
    from tests.bi.pg_client import kinds, parse, query, until_ready

    whole = _whole(server)
    with connected(server.port) as s:
        s.sendall(query(f"DECLARE c CURSOR WITH HOLD FOR {QUERY}"))
        assert kinds(until_ready(s)) == "CZ"
        s.sendall(parse("f", "FETCH 2 FROM c") + describe(b"S", "f") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1tTZ" and b"province" in got[2][1]
        s.sendall(bind("", "f") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "2DDCZ" and got[3][1] == b"FETCH 2\x00"
        assert data_rows(got) == [[p, str(n)] for p, n in whole[:2]]
        s.sendall(parse("m", "MOVE 1 FROM c") + describe(b"S", "m") + SYNC)
        assert kinds(until_ready(s)) == "1tnZ"


def test_rows_held_by_cursors_count_against_the_memory_limit(trips_release):
    """Each result is capped at the session's memory limit when it is fetched; the rows
    that open cursors (and suspended portals) keep were not counted together, so 1,000
    WITH HOLD cursors could keep 1,000 such results in the server's memory. Under a
    50 MB limit, cursors of 100,000 rows (about 13 MB each) are now refused (53200) once
    they would hold more than 50 MB together; CLOSE frees their share."""
    from dpsql.server import serve

    big = "SELECT range, range::VARCHAR FROM range(100000)"
    with serve(trips_release, port=0, memory_limit="50MB") as srv, \
            psycopg.connect(_dsn(srv), autocommit=True) as con:
        held = 0
        with pytest.raises(psycopg.errors.OutOfMemory) as err:
            for held in range(10):
                con.execute(f"DECLARE c{held} CURSOR WITH HOLD FOR {big}")
        assert 2 <= held <= 5, held
        assert "cursors" in str(err.value) and "50MB" in str(err.value)
        con.execute("CLOSE c0")
        con.execute(f"DECLARE again CURSOR WITH HOLD FOR {big}")
        assert len(con.execute("FETCH ALL FROM again").fetchall()) == 100000


def test_a_with_hold_cursor_ends_with_a_rolled_back_transaction(server):
    """PostgreSQL drops a WITH HOLD cursor whose declaring transaction is rolled back
    (or fails), and keeps one whose transaction committed, through a later rollback; it
    survived the rollback, and FETCH read it."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        for end in ("ROLLBACK", "ABORT", "COMMIT"):  # COMMIT of a failed block: rolled back
            con.execute("BEGIN")
            con.execute(f"DECLARE h CURSOR WITH HOLD FOR {QUERY}")
            if end == "COMMIT":
                with pytest.raises(psycopg.Error):
                    con.execute("SELECT nope FROM nothing")
            con.execute(end)
            with pytest.raises(psycopg.Error) as err:
                con.execute("FETCH 1 FROM h")
            assert err.value.sqlstate == "34000", end
        whole = _whole(server)
        con.execute("BEGIN")
        con.execute(f"DECLARE kept CURSOR WITH HOLD FOR {QUERY}")
        con.execute("COMMIT")
        con.execute("BEGIN")
        assert con.execute("FETCH 2 FROM kept").fetchall() == whole[:2]
        con.execute("ROLLBACK")  # declared by a committed transaction: it stays
        assert con.execute("FETCH ALL FROM kept").fetchall() == whole[2:]
        # a simple query's string: the cursor ends at its ROLLBACK, not at its end
        with pytest.raises(psycopg.Error) as err:
            con.execute(f"BEGIN; DECLARE g CURSOR WITH HOLD FOR {QUERY}; ROLLBACK; "
                        "FETCH 1 FROM g")
        assert err.value.sqlstate == "34000"


def test_pg_cursors_lists_the_sessions_cursors(server):
    """pg_cursors lists the session's open SQL cursors as PostgreSQL does (it was always
    empty): name, the DECLARE statement, holdable or not, never binary or scrollable here
    (forward only), and when; not another session's, not protocol portals, not closed
    ones."""
    with psycopg.connect(_dsn(server), autocommit=True) as con, \
            psycopg.connect(_dsn(server), autocommit=True) as other:
        con.execute("BEGIN")
        con.execute(f"DECLARE c1 CURSOR FOR {QUERY}")
        con.execute("DECLARE \"It's\" NO SCROLL CURSOR WITH HOLD FOR SELECT 'a''b' AS x")
        listed = con.execute(
            "SELECT name, statement, is_holdable, is_binary, is_scrollable, "
            "creation_time IS NOT NULL FROM pg_catalog.pg_cursors ORDER BY name").fetchall()
        assert listed == [
            ("It's", "DECLARE \"It's\" NO SCROLL CURSOR WITH HOLD FOR SELECT 'a''b' AS x",
             True, False, False, True),
            ("c1", f"DECLARE c1 CURSOR FOR {QUERY}", False, False, False, True)]
        assert other.execute("SELECT COUNT(*) FROM pg_cursors").fetchone() == (0,)
        con.execute("CLOSE c1")
        assert con.execute("SELECT name FROM pg_cursors WHERE name = %s",
                           ["c1"]).fetchall() == []
        con.execute("COMMIT")
        assert con.execute("SELECT name, is_holdable FROM pg_cursors").fetchall() == [
            ("It's", True)]
        con.execute("CLOSE ALL")
        assert con.execute("SELECT COUNT(*) FROM pg_cursors").fetchone() == (0,)


def test_psycopg_closes_a_named_cursor_it_finds_in_pg_cursors(server):
    """psycopg looks a named cursor up in pg_cursors before it closes one it did not
    describe: listed now, it is closed (the name is free again); it was never listed,
    so psycopg sent no CLOSE and the cursor stayed open until the transaction ended."""
    with psycopg.connect(_dsn(server)) as con:
        con.execute("DECLARE mine CURSOR FOR SELECT 1")  # declared outside psycopg's cursor
        with con.cursor("mine"):
            pass  # psycopg closes it at exit, having found it in pg_cursors
        assert con.execute("SELECT COUNT(*) FROM pg_cursors").fetchone() == (0,)
        con.execute("DECLARE mine CURSOR FOR SELECT 2")  # free: no 42P03
        con.rollback()


def test_pg_cursors_is_listed_in_code_only(server):
    """The session's cursors are written into a statement where it reads pg_cursors;
    the same words inside a client's string stay the client's text (the listing, quotes
    and all, was written into the string too: a cursor's name could end the string and
    become SQL)."""
    name = "x', (SELECT 42), '"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute(f'DECLARE "{name}" CURSOR WITH HOLD FOR SELECT 1')
        for text in ("dpsql_pg_cursors()", "a dpsql_pg_cursors() b"):
            assert con.execute(f"SELECT '{text}' AS t").fetchone() == (text,)
        assert con.execute("SELECT name FROM pg_cursors").fetchall() == [(name,)]
        con.execute("CLOSE ALL")


def test_pg_prepared_statements_lists_the_sessions_statements(server):
    """pg_prepared_statements lists the session's named prepared statements as
    PostgreSQL 15 does (it was always empty): name, text, when, parameter types
    (declared, else as Describe infers them, else text), from_sql false (protocol
    statements); not the unnamed one, not another session's, not deallocated ones; in
    code only (the same words in a client's string stay its text)."""
    with psycopg.connect(_dsn(server), autocommit=True) as con, \
            psycopg.connect(_dsn(server), autocommit=True) as other:
        pg = con.pgconn
        pg.prepare(b"s1", b"SELECT COUNT(*) FROM trips WHERE age > $1 AND region = $2")
        pg.prepare(b"it's", b"SELECT 'a''b' AS x, $1::int AS y", [23])
        pg.prepare(b"", b"SELECT 1")
        sql = ("SELECT name, statement, prepare_time IS NOT NULL, parameter_types, from_sql, "
               "generic_plans, custom_plans FROM pg_catalog.pg_prepared_statements "
               "ORDER BY name")
        assert con.execute(sql).fetchall() == [
            ("it's", "SELECT 'a''b' AS x, $1::int AS y", True, ["integer"], False, 0, 0),
            ("s1", "SELECT COUNT(*) FROM trips WHERE age > $1 AND region = $2", True,
             ["bigint", "text"], False, 0, 0)]
        assert other.execute("SELECT COUNT(*) FROM pg_prepared_statements").fetchone() == (0,)
        text = "dpsql_pg_prepared_statements()"
        assert con.execute(f"SELECT '{text}' AS t").fetchone() == (text,)
        con.execute("DEALLOCATE s1")
        assert con.execute("SELECT name FROM pg_prepared_statements").fetchall() == [
            ("it's",)]
        con.execute("DISCARD ALL")
        assert con.execute("SELECT COUNT(*) FROM pg_prepared_statements").fetchone() == (0,)


def test_pg_prepared_statements_counts_plans_as_postgresql(server):
    """generic_plans and custom_plans were always 0. PostgreSQL 15 counts one plan at
    each Bind (checked against a PostgreSQL 15 server: these counts): a statement
    without parameters is planned generic, one with parameters custom for its first five
    Binds, then generic; ``plan_cache_mode = force_custom_plan`` keeps it custom."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        pg.prepare(b"p", b"SELECT COUNT(*) FROM trips WHERE age < $1", [23])
        pg.prepare(b"q", b"SELECT COUNT(*) FROM trips")
        for _ in range(7):
            assert pg.exec_prepared(b"p", [b"30"]).status == psycopg.pq.ExecStatus.TUPLES_OK
            assert pg.exec_prepared(b"q", []).status == psycopg.pq.ExecStatus.TUPLES_OK
        sql = "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements ORDER BY 1"
        assert con.execute(sql).fetchall() == [("p", 2, 5), ("q", 7, 0)]
        con.execute("SET plan_cache_mode = force_custom_plan")
        pg.exec_prepared(b"p", [b"30"])
        assert con.execute(sql).fetchall()[0] == ("p", 2, 6)
