"""A protocol message over ``dpsql serve``'s size limit (twice ``--max-statement-size``,
:func:`dpsql.server._bounds.max_message`) is refused before it is read, and the client is
told why: FATAL 54000 (program_limit_exceeded) with the message's size, the limit and
what to do, then the connection ends.

The server used to close the socket with the rest of the message unread: the kernel then
resets the connection, and a client still sending a large Bind or Query (libpq writes
all of it before it reads) lost the ErrorResponse, with psycopg's "server closed the
connection unexpectedly" for a 20 MB parameter. The rest of the message is now read and
discarded (within a time bound) before the connection is closed."""

from __future__ import annotations

import socket
import struct

import psycopg
import pytest

from dpsql.server import serve
from dpsql.server._bounds import max_message
from tests.bi.pg_client import connected, fields, query, read_message
from tests.bi.test_serve import _dsn

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

LIMIT = 4096  # --max-statement-size: messages over max_message(LIMIT), 73,728 bytes, refused


@pytest.fixture(scope="module")
def small(trips_release):
    with serve(trips_release, port=0, max_statement_size=LIMIT) as srv:
        yield srv


def _refused(srv, sql: str, params: list | None = None) -> psycopg.Error:  # noqa: ANN001
    with psycopg.connect(_dsn(srv), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as info:
            con.execute(sql, params)
        assert con.closed or con.pgconn.status == psycopg.pq.ConnStatus.BAD
    return info.value


@pytest.mark.parametrize("size", [200_000, 20_000_000])
@pytest.mark.parametrize("how", ["bind", "prepared", "query"])
def test_an_oversized_message_gets_fatal_54000_before_the_end(small, how, size):
    """A Bind with a large parameter (psycopg's execute with params, also once prepared)
    or a large simple Query: FATAL 54000 that names the size and the limit."""
    value = "x" * size
    if how == "query":
        err = _refused(small, f"SELECT COUNT(*) FROM trips WHERE region = '{value}'")
    else:
        with psycopg.connect(_dsn(small), autocommit=True) as con:
            with pytest.raises(psycopg.Error) as info:
                con.execute("SELECT COUNT(*) FROM trips WHERE region = %s", [value],
                            prepare=how == "prepared")
            err = info.value
    assert err.sqlstate == "54000", err
    assert err.diag.severity == "FATAL"
    kind = "Query" if how == "query" else "Bind"
    assert f"a {kind} message of {size // 1000:,}," in str(err) or \
        f"a {kind} message of {size // 1_000_000}," in str(err), str(err)
    assert f"{max_message(LIMIT):,} bytes" in str(err)
    assert "--max-statement-size" in str(err) and "connection is closed" in str(err)


def test_a_message_claiming_2_gb_is_refused_without_waiting_for_it(small):
    """Only the length word is read: the answer comes at once (the client need not send
    the 2 GB it claims), FATAL, and the server ends the connection when the client goes."""
    with connected(small.port) as s:
        s.sendall(b"B" + struct.pack("!I", 0x7FFFFFF0))
        kind, body = read_message(s)
        error = fields(body)
        assert kind == b"E" and (error["S"], error["C"]) == ("FATAL", "54000")
        assert error["M"].startswith("a Bind message of 2,147,483,628 bytes refused")
        s.shutdown(socket.SHUT_WR)
        assert read_message(s) == (b"", b"")  # the server closed its side


def test_the_server_goes_on_after_an_oversized_message(small):
    with connected(small.port) as s:
        s.sendall(query("SELECT 1 -- " + "x" * (LIMIT + 1)))
        kind, body = read_message(s)
        assert kind == b"E" and fields(body)["S"] == "ERROR"  # a statement: the session goes on
        assert fields(body)["C"] == "54000"
    with psycopg.connect(_dsn(small), autocommit=True) as con:
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
    assert small.sessions <= 1
