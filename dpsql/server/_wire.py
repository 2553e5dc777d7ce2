"""The PostgreSQL wire protocol of ``dpsql serve``: buenavista's handler, extended.

buenavista (``buenavista.postgres``) reads and writes the protocol messages; this module
subclasses its handler and server where dpsql needs more than it gives, and never copies
or patches its code:

* **Start-up and login** (:mod:`dpsql.server._login`): SCRAM-SHA-256 or MD5 passwords,
  and TLS.
* **SQLSTATE codes.** buenavista's ErrorResponse carries only a message. Ours carries the
  severity, the SQLSTATE (:mod:`dpsql.server._sqlstates`: dpsql's PEP 249 hierarchy
  mapped onto PostgreSQL's error classes), the message and, for dpsql errors, a hint.
* **Typed parameters.** buenavista decodes text parameters of unknown type as dates
  (``dateutil``) and leaves numbers as strings. We decode by the type OID the client
  declared (int2/int4/int8/oid -> int, float4/float8 -> float, numeric -> an exact
  Decimal, bool -> bool, binary date/timestamp -> date/datetime, timestamptz -> a datetime
  with its offset, which the planner refuses, anything else -> str) so that the planner
  binds ``WHERE distance < $1`` as a number (:func:`dpsql.server._types.decode_param`).
  Untyped (OID 0) text parameters — node-postgres sends all its parameters so — are
  read as the literal they spell (:func:`dpsql.server._guard.spelled`).
* **Result types** (:mod:`dpsql.server._types`). DuckDB type names map to PostgreSQL
  OIDs with PostgreSQL's text output (booleans ``t``/``f``, ``Infinity``/``NaN``, arrays
  as ``{...}``) and binary output when asked (numeric, dates, arrays ... included).
* **The extended protocol** (Parse, Bind, Describe, Execute, Close, Sync) as PostgreSQL
  answers it: :mod:`dpsql.server._extended` (the messages) and
  :mod:`dpsql.server._context` (statements and portals).
* **Transaction status.** ReadyForQuery reports the session's real state (idle, in a
  block, failed block), not buenavista's per-message error flag.
* **Startup.** GSSAPI encryption requests are declined (``N``); a CancelRequest
  interrupts the running DuckDB query (buenavista closes the session instead). The
  session is built only after authentication, start-up must finish within 10 s, at most
  ``max_connections`` clients are served (FATAL 53300 beyond), messages over twice the
  statement size limit (:func:`dpsql.server._bounds.max_message`) are refused before they
  are read (FATAL 54000 naming the size and the limit; the rest of the message is read
  and discarded before the connection ends, so that the client gets the error and not a
  reset), and cancel keys come from :mod:`secrets` (buenavista
  draws them from ``random``).
"""

from __future__ import annotations

import hmac
import logging
import socket
import struct
import time
from typing import Any

import duckdb
from buenavista.postgres import BuenaVistaHandler, BVBuffer

from dpsql.errors import Error, OperationalError
from dpsql.server._commands import Result
from dpsql.server._context import Context
from dpsql.server._copy import CopyOut, copy_lines, copy_out_response, parse_copy_out
from dpsql.server._extended import ExtendedProtocol
from dpsql.server._guard import Refusal, split_simple_query
from dpsql.server._limits import QueryCanceledError
from dpsql.server._login import Login, TlsRequiredError
from dpsql.server._bounds import MessageTooLongError
from dpsql.server._syntax import syntax_position
from dpsql.server._sqlstates import (TooManyConnectionsError, UnknownDatabaseError, hint_of,
                                     sqlstate_of)
from dpsql.server._types import ProtocolError, pg_type

logger = logging.getLogger("dpsql.server")


STARTUP_TIMEOUT = 10.0  # seconds a client has to finish start-up and authentication


# --------------------------------------------------------------------------------------
# The handler
# --------------------------------------------------------------------------------------

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_PROTOCOL_3 = 196608
_MAX_STARTUP = 10000  # bytes, PostgreSQL's own limit on a startup packet


_MESSAGES = {b"Q": "Query", b"P": "Parse", b"B": "Bind", b"D": "Describe", b"E": "Execute",
             b"C": "Close", b"p": "password", b"d": "CopyData", b"F": "FunctionCall"}


class StartupTimeoutError(QueryCanceledError):
    """Start-up and authentication not finished in time: FATAL 57014, PostgreSQL's
    "canceling authentication due to timeout" (buenavista: ERROR XX000 "timed out")."""


class UnknownMessageError(ProtocolError):
    """A message type the server does not speak: FATAL 08P01, and the connection ends;
    ``unread``: the bytes of its body, discarded first (as for
    :class:`MessageTooLongError`)."""

    def __init__(self, message: str, unread: int) -> None:
        super().__init__(message)
        self.unread = unread


_SPOKEN = frozenset(bytes([c]) for c in b"QPBDECSHXp")
_IGNORED = frozenset((b"d", b"c", b"f"))  # CopyData, CopyDone, CopyFail
DISCARD_SECONDS = 60.0
"""How long the rest of an oversized message is read and thrown away before the
connection is closed (closing with it unread resets the connection, and the client loses
the ErrorResponse); the read also ends when the client sends nothing for
:data:`STARTUP_TIMEOUT` seconds or closes its side."""


class _CappedBuffer(BVBuffer):
    """buenavista's reader, refusing a message longer than ``limit`` bytes before it
    allocates it (a 4-byte length header could otherwise make the server allocate 2 GB).
    It remembers the type byte of the message being read, to name it in the refusal."""

    def __init__(self, stream: Any, limit: int) -> None:
        super().__init__(stream)
        self.limit = limit
        self.kind = b""

    def read_byte(self) -> bytes:
        """The next message's type byte (buenavista reads it so, and nothing else).
        CopyData, CopyDone and CopyFail outside a COPY are skipped, as PostgreSQL does
        (a client may still be sending the data of a COPY the server refused); a type
        the server does not speak is FATAL 08P01 (buenavista: ERROR XX000)."""
        while True:
            self.kind = super().read_byte()
            if self.kind not in _IGNORED:
                break
            self.read_bytes(self.read_uint32() - 4)
        if self.kind and self.kind not in _SPOKEN:
            name = _MESSAGES.get(self.kind)
            head = self.stream.read(4)
            raise UnknownMessageError(
                f"invalid frontend message type {self.kind!r}"
                + (f" ({name}, which dpsql serve does not support)" if name else "")
                + ": the connection is closed",
                struct.unpack("!I", head)[0] - 4 if len(head) == 4 else 0)
        return self.kind

    def read_bytes(self, n: int) -> bytes:
        if n < 0:
            raise ProtocolError(f"message of {n} bytes refused")
        if n > self.limit:
            what = _MESSAGES.get(self.kind, "protocol")
            raise MessageTooLongError(
                f"a {what} message of {n:,} bytes refused: the limit is {self.limit:,} "
                "bytes per message (twice dpsql serve --max-statement-size, plus "
                "framing); send a shorter statement or smaller parameter values (a value "
                "this long is a table: filter on a coarser attribute, or group and join), "
                "or ask the operator for a larger --max-statement-size; the connection is "
                "closed", n)
        return super().read_bytes(n)


class Handler(Login, ExtendedProtocol, BuenaVistaHandler):
    """One client connection (one thread): buenavista's handler with dpsql's extensions.

    Start-up is cheap and bounded: the client has :data:`STARTUP_TIMEOUT` seconds to finish
    start-up and authentication; no session (an in-memory DuckDB with the release attached)
    exists until the password is checked (:meth:`handle_post_auth`); at most
    ``max_connections`` clients (counting those still authenticating) are served, the
    others get FATAL 53300."""

    @property
    def r(self) -> BVBuffer:
        return self._r

    @r.setter
    def r(self, value: BVBuffer) -> None:  # buenavista's handle() sets self.r
        self._r = value if isinstance(value, _CappedBuffer) else \
            _CappedBuffer(value.stream, self.server.max_message)

    def setup(self) -> None:
        super().setup()
        self.admitted = False
        self.ctx: Context | None = None  # once start-up made it (freed by finish)
        self.tls = False  # the socket is wrapped in TLS
        self.request.settimeout(self.server.startup_timeout)
        self.server.track(self.request)

    def finish(self) -> None:
        """End the connection, and free its session and cancel key whatever ended it:
        buenavista frees them only when its read loop ends normally, and a client that
        vanished (a reset) raised out of it, leaking its session (~10 MB) for the life
        of the server."""
        try:
            super().finish()
        except OSError:  # the client went away; nothing left to flush
            pass
        finally:
            ctx, self.ctx = self.ctx, None
            if ctx is not None:
                self.server.ctxts.pop(ctx.process_id, None)
                if ctx.session is not None:
                    self.server.conn.close_session(ctx.session)
            self.server.untrack(self.request)
            if self.tls:  # socketserver closes the socket it accepted, now detached
                self._close_tls()
            if self.admitted:
                self.server.release_slot()

    # -- startup and authentication ------------------------------------------------------

    def handle_startup(self, conn):  # noqa: ANN001, ANN201  (buenavista's signature)
        """buenavista's start-up, without creating the session (that waits for the
        password), with a cap on the packet size and on the number of clients, and with
        unpredictable cancel keys (``secrets``, not ``random``)."""
        size, code = self.r.read_uint32(), self.r.read_uint32()
        if code == _SSL_REQUEST and self.server.tls is not None and not self.tls:
            if not self._start_tls():
                return None
            return self.handle_startup(conn)
        if code in (_SSL_REQUEST, _GSSENC_REQUEST):
            self.wfile.write(b"N")
            return self.handle_startup(conn)
        if code == _CANCEL_REQUEST:
            pid, key = self.r.read_uint32(), self.r.read_uint32()
            ctx = self.server.ctxts.get(pid)
            if ctx is not None and ctx.session is not None and hmac.compare_digest(
                    struct.pack("!I", ctx.secret_key), struct.pack("!I", key)):
                ctx.session.interrupt()
            return None
        if code != _PROTOCOL_3:
            raise ProtocolError(f"unsupported protocol or request code {code}: dpsql serve "
                                "speaks the PostgreSQL protocol 3.0")
        if not 8 <= size <= _MAX_STARTUP:
            raise ProtocolError(f"startup packet of {size} bytes refused")
        if self.server.tls is not None and not self.tls:
            self.send_error(TlsRequiredError(
                "this server requires TLS: connect with sslmode=require, or better "
                "sslmode=verify-full and sslrootcert=<the CA that signed its certificate>"),
                fatal=True)
            return None
        msg = [x.decode("utf-8") for x in self.r.read_bytes(size - 8).split(b"\x00")]
        params = dict(zip(msg[::2], msg[1::2]))
        if not self.server.take_slot():
            self.send_error(TooManyConnectionsError(
                f"sorry, too many clients already (max_connections = "
                f"{self.server.max_connections}); try again later"), fatal=True)
            return None
        self.admitted = True
        ctx = self.ctx = Context(params, self.server.rewriter, self.server.ctxts)
        self.send_auth_request(ctx)
        return ctx

    def handle_post_auth(self, ctx) -> None:  # noqa: ANN001
        """Authenticated: now build the session (never before the password is checked).
        A start-up packet naming another database is refused first (FATAL 3D000, after
        the password, as PostgreSQL does, so that only a client that may connect learns
        the name): a client pointed at the wrong server, or with a mistyped name, must
        not be answered quietly from this release."""
        served = self.server.database
        asked = ctx.params.get("database") or ctx.params.get("user")  # libpq's default
        if served is not None and asked and asked != served:
            self.send_error(UnknownDatabaseError(
                f'database "{asked}" does not exist: this server serves the release '
                f'"{served}"; connect with dbname={served}'), fatal=True)
            self.request.shutdown(socket.SHUT_RD)  # the read loop ends here
            return
        try:
            ctx.session = self.server.conn.create_session()
        except Exception as err:  # noqa: BLE001  (tell the client, then end)
            logger.exception("cannot open a session")
            self.send_error(OperationalError(f"cannot open a session: {err}"), fatal=True)
            raise
        ctx.session.prepared = ctx  # SQL DEALLOCATE drops the protocol's statements
        ctx.reported = self.server.conn.parameters()  # what super() tells the client now
        ctx.session.start_up(ctx.params)  # application_name=... (ParameterStatus follows)
        self.request.settimeout(None)  # idle clients are fine once authenticated
        super().handle_post_auth(ctx)

    # -- queries ---------------------------------------------------------------------------

    def handle_query(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """A simple-protocol query: each of its statements in turn (PostgreSQL's rule;
        Npgsql sends its start-up queries as one string), each routed and checked on its
        own (:func:`split_simple_query`); the first error ends the string. Skipped, like
        every message, between an extended-protocol error and Sync (PostgreSQL's rule)."""
        if ctx.has_error:
            return
        sql = payload.decode("utf-8").rstrip("\x00")
        statements = split_simple_query(sql) or [""]
        if self._well_formed(ctx, sql, statements):
            session, saved, offset = ctx.session, None, 0
            for statement in statements:
                if saved is None and len(statements) > 1 and not session.in_txn:
                    saved = (dict(session.settings), session.client_timeout)
                offset = max(sql.find(statement, offset), 0)
                if not self._simple(ctx, statement, offset):
                    if saved is not None and not session.in_txn:
                        # PostgreSQL runs the string as one implicit transaction, and an
                        # error rolls back its SETs ("SET application_name = 'a';
                        # SELECT nope" kept 'a')
                        session.settings.clear()
                        session.settings.update(saved[0])
                        session.client_timeout = saved[1]
                    break
                if session.in_txn:
                    saved = None  # an explicit block keeps its own (_commands._scoped)
                offset += len(statement)
        ctx.end_of_message_cycle()
        self.send_ready_for_query(ctx)

    def _well_formed(self, ctx, sql: str, statements: list[str]) -> bool:  # noqa: ANN001
        """PostgreSQL parses a whole query string before it runs any of it: a syntax
        error in its third statement answers that error alone, and the first two never
        run (they ran: ``BEGIN; SELECT 1; SELEC 2`` left the session in a failed block,
        where PostgreSQL leaves it idle). False, the error sent (with its place in
        ``sql``, field P), when one is malformed."""
        offset = 0
        try:
            for statement in statements:
                offset = max(sql.find(statement, offset), 0)
                ctx.session.check_syntax(statement)
                offset += len(statement)
        except Exception as err:  # noqa: BLE001  (the syntax error goes to the client)
            at = syntax_position(err, statement)
            if at is not None:
                err.position = at + offset
            if ctx.session.in_txn:
                ctx.session.failed = True  # as any error inside a block
            self.send_error(err)
            return False
        return True

    def _simple(self, ctx, sql: str, offset: int = 0) -> bool:  # noqa: ANN001
        """Run one statement of a simple query and send its answer; False on an error.
        ``offset``: where ``sql`` starts in the query string (42P01's place)."""
        try:
            copy = parse_copy_out(sql)  # COPY (query) TO STDOUT: the query as sent alone
            if copy is None and not ctx.session.failed:
                ctx.session.check_tables(sql, offset)  # PostgreSQL's analysis: 42P01
            result = ctx.execute_sql(copy.query if copy is not None else sql)
            if copy is not None:
                self._send_copy(result, copy)
            elif result.status() == "EMPTY":
                self.wfile.write(struct.pack("!ci", b"I", 4))
            elif result.has_results():
                self.send_row_description(result)
                count = self.send_data_rows(result)
                self.send_command_complete(f"{result.tag(count)}\x00")
            else:
                self.send_warnings(result)
                self.send_command_complete(f"{result.status()}\x00")
        except Exception as err:  # noqa: BLE001  (every error goes to the client)
            self.send_error(err)
            return False
        return True

    def send_warnings(self, result: Result) -> None:
        """The WARNINGs of a command (:attr:`Result.warnings`), before its tag."""
        for code, message in getattr(result, "warnings", ()):
            self.send_notice(message, "WARNING", code)

    def _send_copy(self, result: Result, copy: CopyOut) -> None:
        """The rows of ``result`` as a COPY TO STDOUT (:mod:`dpsql.server._copy`)."""
        if not result.has_results():
            raise Refusal(
                f"COPY ({copy.query[:60]}) TO STDOUT needs a query that returns rows: "
                "write COPY (SELECT ...) TO STDOUT")
        self.wfile.write(copy_out_response(result.column_count()))
        count = -1 if copy.header else 0
        for line in copy_lines(result, copy):
            self.wfile.write(struct.pack("!ci", b"d", len(line) + 4) + line)
            count += 1
        self.wfile.write(struct.pack("!ci", b"c", 4))
        self.send_command_complete(f"COPY {count}\x00")

    # -- responses -------------------------------------------------------------------------

    def send_error(self, exception, ctx=None, fatal: bool = False) -> None:  # noqa: ANN001
        if isinstance(exception, ConnectionError):  # the client went away: nobody to tell
            raise exception
        if isinstance(exception, TimeoutError):  # only start-up reads have a timeout
            exception, fatal = StartupTimeoutError(
                "canceling authentication due to timeout: start-up and authentication "
                f"must finish within {self.server.startup_timeout:g} s"), True
        code = sqlstate_of(exception) if isinstance(exception, BaseException) else "XX000"
        if isinstance(exception, BaseException) and not isinstance(exception, Error):
            if not isinstance(exception, duckdb.Error):
                logger.exception("unexpected server error", exc_info=exception)
        unread = getattr(exception, "unread", None)  # of a refused message: FATAL
        fatal = fatal or unread is not None
        severity = "FATAL" if fatal else "ERROR"
        message = " ".join(str(exception).split()) or type(exception).__name__
        # `dpsql serve -v`: what the client was told, next to the statement it sent
        logger.info("%s %s to %s: %s", severity, code,
                    (getattr(self, "client_address", None) or ("?",))[0], message)
        buf = BVBuffer()
        for field, value in (("S", severity), ("V", severity), ("C", code), ("M", message)):
            buf.write_bytes(field.encode("ascii"))
            buf.write_string(value)
        hint = hint_of(exception, code) if isinstance(exception, BaseException) else None
        if hint:
            buf.write_bytes(b"H")
            buf.write_string(hint)
        position = getattr(exception, "position", None)
        if position:  # where a syntax error is (psql draws its caret there)
            buf.write_bytes(b"P")
            buf.write_string(str(position))
        buf.write_bytes(b"\x00")
        out = buf.get_value()
        self.wfile.write(struct.pack("!ci", b"E", len(out) + 4) + out)
        if ctx is not None:
            ctx.mark_error()
        if unread is not None:
            self._discard(unread)

    def _discard(self, size: int) -> None:
        """Read and throw away the rest of a refused message (at most ``size`` bytes,
        for at most :data:`DISCARD_SECONDS`), so that closing the connection next does
        not reset it under the client, which would lose the FATAL error just sent."""
        deadline = time.monotonic() + DISCARD_SECONDS
        self.request.settimeout(STARTUP_TIMEOUT)
        try:
            while size > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(size, 1 << 16))
                if not chunk:
                    return
                size -= len(chunk)
        except OSError:  # the client went away, or sent nothing for a while: done
            pass

    def send_notice(self, message: str, severity: str = "NOTICE", code: str = "00000"
                    ) -> None:
        """A NoticeResponse (psql prints ``NOTICE:  ...``; psycopg calls its notice
        handlers): a literal outside a public domain, which changes no answer; or a
        command's WARNING (``COMMIT`` outside a block: 25P01)."""
        buf = BVBuffer()
        for field, value in (("S", severity), ("V", severity), ("C", code),
                             ("M", message)):
            buf.write_bytes(field.encode("ascii"))
            buf.write_string(value)
        buf.write_bytes(b"\x00")
        out = buf.get_value()
        self.wfile.write(struct.pack("!ci", b"N", len(out) + 4) + out)

    def send_ready_for_query(self, ctx) -> None:  # noqa: ANN001
        """ReadyForQuery with the session's transaction status; first a ParameterStatus
        for each reported setting that changed since the client was last told (``SET
        application_name``...), as PostgreSQL sends them: drivers keep their copy so."""
        if ctx is not None and ctx.session is not None:
            now = ctx.session.reported()
            told = ctx.reported
            if told is not None:
                changed = {k: v for k, v in now.items() if told.get(k) != v}
                if changed:
                    self.send_parameter_status(changed)
            ctx.reported = now
        status = ctx.session.transaction_status() if ctx is not None else b"I"
        self.wfile.write(struct.pack("!cic", b"Z", 5, status))

    def send_row_description(self, result: Result) -> None:
        buf = BVBuffer()
        for name, dtype, fmt in zip(result.names or [], result.types, _formats(result)):
            oid, typlen, _, _ = pg_type(dtype)
            buf.write_string(name)
            buf.write_bytes(struct.pack("!ihihih", 0, 0, oid, typlen, -1, fmt))
        out = buf.get_value()
        self.wfile.write(struct.pack("!cih", b"T", len(out) + 6, result.column_count()) + out)

    def send_data_rows(self, result: Result, limit: int = 0) -> int:
        for text in getattr(result, "notices", ()):  # once, before the first rows
            self.send_notice(text)
        result.notices = ()
        encoders = []
        for dtype, fmt in zip(result.types, _formats(result)):
            _, _, text, binary = pg_type(dtype)
            if fmt == 1:
                encoders.append(binary)
            else:
                encoders.append(lambda v, text=text: text(v).encode("utf-8"))
        count = 0
        ncols = result.column_count()
        for row in result.rows():
            parts = []
            for value, enc in zip(row, encoders):
                if value is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = enc(value)
                    parts.append(struct.pack("!i", len(data)) + data)
            body = b"".join(parts)
            self.wfile.write(struct.pack("!cih", b"D", len(body) + 6, ncols) + body)
            count += 1
            if limit > 0 and count >= limit:
                break
        return count


def _formats(result: Result) -> list[int]:
    """The format of each result column: what the client asked for (Bind), except that a
    type without a binary encoder here (numeric, dates, intervals, arrays) is sent as text.
    RowDescription states the format per column, and clients (libpq, psycopg, JDBC) decode
    by it."""
    asked = result.result_format or []
    out = []
    for i, dtype in enumerate(result.types):
        fmt = asked[i] if i < len(asked) else 0
        out.append(1 if fmt == 1 and pg_type(dtype)[3] is not None else 0)
    return out
