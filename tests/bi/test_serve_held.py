"""What a ``dpsql serve`` session keeps between statements is bounded
(:class:`dpsql.server._bounds.Held`): named prepared statements, portals and settings
stayed in the server's Python memory, outside DuckDB's ``memory_limit``, without limit,
so one client could fill the machine (1,000 Parses of 1 MiB each: 1 GB). Past a bound a
client gets 54000 (program_limit_exceeded) saying what to close, and the session goes
on."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq

from dpsql.server._bounds import MAX_HELD, MAX_HELD_BYTES, MAX_SETTING_BYTES
from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def _state(res: pq.PGresult) -> str | None:
    if res.status != pq.ExecStatus.FATAL_ERROR:
        return None
    return (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()


def _alive(con: psycopg.Connection) -> bool:
    return con.execute("SELECT COUNT(*) > 1000 FROM trips").fetchone() == (True,)


def test_prepared_statements_are_bounded_in_number(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        for i in range(MAX_HELD):
            assert _state(pg.prepare(f"s{i}".encode(), b"SELECT 1")) is None, i
        res = pg.prepare(b"one_more", b"SELECT 1")
        assert _state(res) == "54000"
        assert b"too many prepared statements" in res.error_message
        assert _state(pg.prepare(b"s0", b"SELECT 2")) == "42P05"  # a name it has
        assert _state(pg.exec_(b"DEALLOCATE s0")) is None
        assert _state(pg.prepare(b"s0", b"SELECT 2")) is None  # closed: its slot is free
        assert _state(pg.prepare(b"one_more", b"SELECT 1")) == "54000"
        assert _state(pg.prepare(b"", b"SELECT 3")) is None  # the unnamed one: replaced
        assert _alive(con)
    with psycopg.connect(_dsn(server), autocommit=True) as con:  # a new session: empty
        assert _state(con.pgconn.prepare(b"one_more", b"SELECT 1")) is None


def test_prepared_statements_are_bounded_in_bytes(server):
    body = b"SELECT 1 -- " + b"x" * 1_000_000
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        kept = MAX_HELD_BYTES // len(body)
        for i in range(kept):
            assert _state(pg.prepare(f"big{i}".encode(), body)) is None, i
        res = pg.prepare(b"too_much", body)
        assert _state(res) == "54000" and b"bytes of prepared statements" in res.error_message
        assert _state(pg.exec_(b"DEALLOCATE big0")) is None
        assert _state(pg.prepare(b"big0", body)) is None  # closed first: its bytes are free
        assert _state(res := pg.prepare(b"too_much", body)) == "54000", res.error_message
        assert _alive(con)


def test_settings_are_bounded(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            con.execute(f"SET my.long = '{'x' * (MAX_SETTING_BYTES + 1)}'")
        assert err.value.sqlstate == "54000"
        con.execute(f"SET my.long = '{'x' * MAX_SETTING_BYTES}'")
        known = len(con.execute("SHOW ALL").fetchall())
        con.execute("; ".join(f"SET my.s{i} = 'v'" for i in range(MAX_HELD - known)))
        with pytest.raises(psycopg.Error) as err:
            con.execute("SET my.one_more = 'v'")
        assert err.value.sqlstate == "54000" and "at most" in str(err.value)
        con.execute("SET application_name = 'still settable'")  # a name it has
        assert con.execute("SHOW application_name").fetchone() == ("still settable",)
        assert _alive(con)
