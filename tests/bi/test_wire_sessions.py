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
from tests.bi.pg_client import (SYNC, connected, fields, message, parse, query, read_message,
                                startup_packet)

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


@pytest.mark.parametrize("sent", [b"", b"\x00\x00", "startup"],
                         ids=["nothing", "half", "no-password"])
def test_a_client_too_slow_to_start_gets_fatal_57014(trips_release, sent, caplog, tmp_path):
    """A client that does not finish start-up and authentication in time: FATAL 57014
    "canceling authentication due to timeout" (PostgreSQL's words) and the end, logged in
    one line. It got ERROR XX000 "timed out", logged with a traceback as an unexpected
    server error."""
    import logging

    password = tmp_path / "pw"
    password.write_text("secret\n")
    password.chmod(0o600)
    with caplog.at_level(logging.INFO), serve(trips_release, port=0,
                                              password_file=password) as srv:
        srv._wire.startup_timeout = 0.5
        with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as s:
            s.sendall(startup_packet() if sent == "startup" else sent)
            got = [read_message(s)]
            while got[-1][0] not in (b"E", b""):
                got.append(read_message(s))
            assert got[-1][0] == b"E"
            error = fields(got[-1][1])
            assert (error["S"], error["C"]) == ("FATAL", "57014")
            assert error["M"].startswith("canceling authentication due to timeout")
            assert read_message(s) == (b"", b"")
        assert _settled(srv) == (0, 0)
    assert "unexpected server error" not in caplog.text and "Traceback" not in caplog.text
