"""A client connection of ``dpsql serve`` that ends, however it ends, frees its session
(an in-memory DuckDB with the release attached, about 10 MB) and its cancel key.

A client that vanished (a reset: a killed BI tool, a dropped network) raised in the
middle of buenavista's read loop, and its clean-up (close the session, forget the cancel
key) was skipped: every such client leaked a session for the life of the server."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from dpsql.server import serve
from tests.bi.pg_client import SYNC, connected, message, parse, query, read_message

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _settled(srv) -> tuple[int, int]:  # noqa: ANN001
    """(sessions, cancel keys) once every client thread has ended (polled: the server
    notices a closed socket when its thread next reads)."""
    deadline = time.monotonic() + 60
    while (srv.sessions or srv._wire.ctxts) and time.monotonic() < deadline:
        time.sleep(0.05)
    return srv.sessions, len(srv._wire.ctxts)


@pytest.mark.parametrize("ending", ["reset-idle", "reset-mid-query", "reset-mid-batch",
                                    "terminate", "close", "oversized"])
def test_every_ending_frees_the_session(trips_release, ending):
    with serve(trips_release, port=0, max_statement_size=4096) as srv:
        s = connected(srv.port)
        assert srv.sessions == 1
        if ending == "reset-idle":
            _reset(s)
        elif ending == "reset-mid-query":
            s.sendall(query("SELECT region, COUNT(*) FROM trips GROUP BY region"))
            _reset(s)
        elif ending == "reset-mid-batch":
            s.sendall(parse("", "SELECT 1") + b"B\x00\x00")  # half a message, then gone
            _reset(s)
        elif ending == "terminate":
            s.sendall(message(b"X") + SYNC)
            assert read_message(s) == (b"", b"")
            s.close()
        elif ending == "close":
            s.close()
        else:
            s.sendall(b"Q" + struct.pack("!I", 1 << 30))
            assert read_message(s)[0] == b"E"
            s.close()
        assert _settled(srv) == (0, 0)
