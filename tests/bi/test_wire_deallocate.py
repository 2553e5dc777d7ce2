"""SQL ``DEALLOCATE`` and ``DISCARD ALL`` on ``dpsql serve`` drop prepared statements, as
in PostgreSQL: they were accepted and did nothing, so a statement "deallocated" by a
driver (psycopg before libpq 17 evicts its prepared statements so) or by a pooler's
reset (pgbouncer's ``DISCARD ALL``) still ran, ``DEALLOCATE`` of a name that never
existed answered ``DEALLOCATE``, and the session's bound on prepared statements
(:class:`dpsql.server._bounds.Held`, 1,000) filled up although the client freed them."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq

from dpsql.server._bounds import MAX_HELD
from tests.bi.pg_client import (SYNC, bind, client_process, connected, execute, fields,
                                kinds, parse, until_ready)
from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

COUNT = b"SELECT COUNT(*) > 1000 FROM trips"


def _state(res: pq.PGresult) -> str | None:
    if res.status != pq.ExecStatus.FATAL_ERROR:
        return None
    return (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()


def _refused(con: psycopg.Connection, sql: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as err:
        con.execute(sql)
    return err.value


@pytest.mark.parametrize("sql", ["DEALLOCATE s1", "DEALLOCATE PREPARE s1",
                                 "deallocate prepare S1", 'DEALLOCATE "s1";',
                                 "DEALLOCATE ALL", "DEALLOCATE PREPARE ALL", "DISCARD ALL"])
def test_deallocate_drops_the_statement(server, sql):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        assert _state(pg.prepare(b"s1", COUNT)) is None
        assert _state(pg.exec_prepared(b"s1", [])) is None
        cur = con.execute(sql)
        assert cur.statusmessage == sql.split()[0].upper() + (
            " ALL" if sql.endswith("ALL") else "")
        res = pg.exec_prepared(b"s1", [])
        assert _state(res) == "26000"
        assert res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) == \
            b'prepared statement "s1" does not exist'
        assert con.execute(COUNT.decode()).fetchone() == (True,)


def test_deallocate_of_an_unknown_name_is_26000(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        err = _refused(con, "DEALLOCATE never_prepared")
        assert err.sqlstate == "26000"
        assert str(err) == 'prepared statement "never_prepared" does not exist'
        # an identifier folds to lower case, a quoted one does not
        assert _state(con.pgconn.prepare(b"Mixed", COUNT)) is None
        assert _refused(con, "DEALLOCATE Mixed").sqlstate == "26000"
        con.execute('DEALLOCATE "Mixed"')
        assert _refused(con, "DEALLOCATE").sqlstate == "42601"
        assert _refused(con, "DEALLOCATE PREPARED s1").sqlstate == "42601"  # as PostgreSQL
        con.execute("DEALLOCATE ALL")  # nothing to drop: no error
        assert con.execute(COUNT.decode()).fetchone() == (True,)


def test_deallocate_all_keeps_the_unnamed_statement_and_frees_the_bound(server):
    """DEALLOCATE ALL drops the named statements, not the unnamed one (PostgreSQL); the
    session may then prepare MAX_HELD new ones."""
    with connected(server.port) as s:
        s.sendall(parse("", COUNT.decode()) + parse("named", COUNT.decode()) + SYNC)
        assert kinds(until_ready(s)) == "11Z"
        s.sendall(parse("d", "DEALLOCATE ALL") + bind("", "d") + execute("") + SYNC)
        assert kinds(until_ready(s)) == "12CZ"
        s.sendall(bind("", "") + execute("") + SYNC)
        assert kinds(until_ready(s)) == "2DCZ"
        s.sendall(bind("", "named") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "26000"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        for round_ in range(2):
            for i in range(MAX_HELD):
                assert _state(pg.prepare(f"s{i}".encode(), COUNT)) is None, (round_, i)
            assert _state(pg.prepare(b"one_more", COUNT)) == "54000"
            con.execute("DEALLOCATE ALL")


def test_psycopg_prepared_statements_over_many_rollbacks(server):
    """psycopg forgets its prepared statements on ROLLBACK and sends ``DEALLOCATE ALL``,
    then prepares the next ones under new names. With DEALLOCATE a no-op the server kept
    every old one, and the 1,001st rollback's statement hit the session bound (54000,
    "too many prepared statements") on a connection that held one statement at a time."""
    sql = "SELECT COUNT(*) > 1000 FROM trips WHERE age < %s"
    with psycopg.connect(_dsn(server), prepare_threshold=0) as con:
        for i in range(MAX_HELD + 5):
            assert con.execute(sql, [60]).fetchone() == (True,), i
            con.rollback()


def test_libpq_blocking_close_of_statements_and_portals(server):
    """libpq's blocking PQclosePrepared / PQclosePortal (libpq 17+; Close then Sync)
    answer CloseComplete and ReadyForQuery, for a name that exists or not, and a closed
    statement is gone (26000).

    In a client process of its own: psycopg's C implementation keeps the GIL while
    libpq waits in these calls, so called in the process that runs the server they wait
    for an answer the server thread, needing the GIL, can never send (a deadlock of the
    test process, not of the server: the "hang" of close_prepared seen in process)."""
    client = (
        "import sys, psycopg\n"
        "from psycopg.pq import DiagnosticField as F, ExecStatus as X\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as con:\n"
        "    pg = con.pgconn\n"
        "    assert pg.prepare(b's1', b'SELECT COUNT(*) FROM trips').status == X.COMMAND_OK\n"
        "    print(pg.close_prepared(b's1').status == X.COMMAND_OK)\n"
        "    print(pg.close_prepared(b'never').status == X.COMMAND_OK)\n"
        "    print(pg.close_portal(b'never').status == X.COMMAND_OK)\n"
        "    print(pg.exec_prepared(b's1', []).error_field(F.SQLSTATE).decode())\n"
        "    print(con.execute('SELECT COUNT(*) > 0 FROM trips').fetchone()[0])\n")
    assert client_process(client, _dsn(server)) == ["True", "True", "True", "26000", "True"]


@pytest.mark.parametrize("sql", ["PREPARE q AS SELECT COUNT(*) FROM trips",
                                 "PREPARE q (int) AS SELECT COUNT(*) FROM trips WHERE age < $1",
                                 "EXECUTE q", "EXECUTE q (30)"])
def test_sql_prepare_and_execute_are_refused_saying_what_to_use(server, sql):
    """SQL PREPARE / EXECUTE are not supported (drivers prepare through the protocol,
    which is): one refusal, 0A000, that says so. They were refused as writes ("PREPARE is
    not allowed: dpsql serve is read-only", 25006) or, with parameter types, as "PREPARE
    statements are not supported: a release is read-only" (0A000)."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        err = _refused(con, sql)
        assert err.sqlstate == "0A000"
        assert "SQL PREPARE and EXECUTE are not supported" in str(err)
        assert "prepared statements" in str(err) and "read-only" not in str(err)
        assert con.execute(COUNT.decode()).fetchone() == (True,)
