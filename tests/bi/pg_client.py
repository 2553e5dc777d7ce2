"""What the ``dpsql serve`` tests do as a PostgreSQL client below libpq: raw protocol
messages on a socket, and cancelling a running statement (shared by the test modules of
this directory)."""

from __future__ import annotations

import contextlib
import re
import struct
import subprocess
import sys
import threading
import time

import psycopg


def startup_packet(user: str = "analyst", database: str = "trips") -> bytes:
    """A protocol-3.0 StartupMessage."""
    body = f"user\x00{user}\x00database\x00{database}\x00\x00".encode()
    return struct.pack("!II", len(body) + 8, 196608) + body


def read_message(sock) -> tuple[bytes, bytes]:  # noqa: ANN001
    """(type byte, body) of the next server message; (b"", b"") when the server closed."""
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        if not chunk:
            return b"", b""
        head += chunk
    size = struct.unpack("!I", head[1:])[0] - 4
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return head[:1], body


def cancelled_errors(con: psycopg.Connection, sql: str) -> list[psycopg.Error]:
    """Run ``sql`` on ``con`` in a thread, cancel it after half a second (and again every
    second until it ends) with libpq's non-blocking cancel (the server may share our
    GIL) and return what it raised."""
    errors: list[psycopg.Error] = []

    def run() -> None:
        try:
            con.execute(sql)
        except psycopg.Error as err:
            errors.append(err)

    t = threading.Thread(target=run)
    t.start()
    # A cancel that reaches the server before the statement started is lost (as in
    # PostgreSQL), and a loaded machine can delay the start: cancel again until it ends.
    time.sleep(0.5)
    deadline = time.monotonic() + 120
    while t.is_alive() and time.monotonic() < deadline:
        con.cancel_safe(timeout=20)
        t.join(1.0)
    assert not t.is_alive()
    return errors


@contextlib.contextmanager
def cli_server(*args: object):
    """``dpsql serve ARGS... --port 0`` as a subprocess: yields (the process, the port it
    printed, its first line of output); the process is killed if it is still running at
    the end."""
    with subprocess.Popen([sys.executable, "-m", "dpsql.cli", "serve", *map(str, args),
                           "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            line = proc.stdout.readline()
            assert "postgresql://" in line, (line, proc.poll() is not None and
                                             proc.stderr.read())
            yield proc, int(re.search(r"postgresql://\S+:(\d+)/", line).group(1)), line
        finally:
            if proc.poll() is None:
                proc.kill()
