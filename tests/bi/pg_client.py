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


def client_process(script: str, dsn: str) -> list[str]:
    """The words ``script`` prints, run in a Python process of its own with ``dsn`` as
    ``sys.argv[1]``: psycopg's blocking describe_prepared/close_prepared keep the GIL while
    libpq waits, so in the process that runs the server they would deadlock the test."""
    out = subprocess.run([sys.executable, "-c", script, dsn], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


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


# --------------------------------------------------------------------------------------
# Extended-protocol messages, as a driver sends them (tests/bi/test_wire_*.py)
# --------------------------------------------------------------------------------------

def message(kind: bytes, body: bytes = b"") -> bytes:
    """A frontend message: its type byte, its length, its body."""
    return kind + struct.pack("!I", len(body) + 4) + body


def parse(name: str, sql: str, oids: tuple[int, ...] = ()) -> bytes:
    return message(b"P", name.encode() + b"\x00" + sql.encode() + b"\x00"
                   + struct.pack("!h", len(oids)) + b"".join(struct.pack("!i", o) for o in oids))


def bind(portal: str, statement: str, params: tuple[bytes | None, ...] = ()) -> bytes:
    """A Bind of text parameters, with text results."""
    body = portal.encode() + b"\x00" + statement.encode() + b"\x00" + struct.pack("!hh", 0,
                                                                                 len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
    return message(b"B", body + struct.pack("!h", 0))


def describe(kind: bytes, name: str) -> bytes:
    return message(b"D", kind + name.encode() + b"\x00")


def execute(portal: str, limit: int = 0) -> bytes:
    return message(b"E", portal.encode() + b"\x00" + struct.pack("!i", limit))


def close(kind: bytes, name: str) -> bytes:
    return message(b"C", kind + name.encode() + b"\x00")


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\x00")


SYNC = message(b"S")
FLUSH = message(b"H")


def connected(port: int):  # noqa: ANN201
    """A raw socket past start-up (no password), ready for query."""
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(startup_packet())
    while read_message(sock)[0] not in (b"Z", b""):
        pass
    return sock


def until_ready(sock) -> list[tuple[bytes, bytes]]:  # noqa: ANN001
    """The server's messages up to and including ReadyForQuery (or the end)."""
    out = [read_message(sock)]
    while out[-1][0] not in (b"Z", b""):
        out.append(read_message(sock))
    return out


def kinds(messages: list[tuple[bytes, bytes]]) -> str:
    """The type bytes of ``messages`` as one string: ``"12DsZ"``."""
    return "".join(kind.decode() for kind, _ in messages)


def fields(body: bytes) -> dict[str, str]:
    """The fields of an ErrorResponse or NoticeResponse body: {"C": "26000", ...}."""
    return {f[:1].decode(): f[1:].decode() for f in body.split(b"\x00") if f}


def data_rows(messages: list[tuple[bytes, bytes]]) -> list[list[str | None]]:
    """The text values of the DataRows among ``messages``."""
    rows = []
    for kind, body in messages:
        if kind != b"D":
            continue
        n, pos, row = struct.unpack("!h", body[:2])[0], 2, []
        for _ in range(n):
            size = struct.unpack("!i", body[pos:pos + 4])[0]
            pos += 4
            row.append(None if size < 0 else body[pos:pos + size].decode())
            pos += max(size, 0)
        rows.append(row)
    return rows
