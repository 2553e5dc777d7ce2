"""The extended query protocol of ``dpsql serve`` (Parse, Bind, Describe, Execute,
Close; Sync and Flush are buenavista's), as a mixin of the protocol handler
(:class:`dpsql.server._wire.Handler`), with PostgreSQL's answers where buenavista's
differ:

* **Parse** answers a syntax error itself (42601) and refuses a name in use (42P05)
  (:meth:`dpsql.server._context.Context.add_statement`).
* **Describe(statement)** answers the parameter types (those the Parse left open as
  PostgreSQL infers them, :mod:`dpsql.server._param_types`) and the row shape from a run
  with dummy parameters that can never change the session (no transaction state, no
  error to the client): a failing dummy run answers NoData, and the client's Execute
  then runs.
* **Errors in the extended protocol** (a Bind whose value does not decode or whose
  number of values is not the statement's (08P01), an unknown statement (26000) or
  portal (34000)...) are an ErrorResponse; the messages that follow, a simple Query
  included, are discarded until Sync, which answers ReadyForQuery, and the session goes
  on (PostgreSQL's rule; buenavista ended the session). Closing a statement or portal
  that does not exist is no error (CloseComplete), as in PostgreSQL.
* **Portals** (:mod:`dpsql.server._context`) run once and are read on by each Execute
  (a row limit answers PortalSuspended), end with their transaction, and outlive the
  statement they were bound from; an empty query answers EmptyQueryResponse, a Describe
  of a portal without rows NoData.
* **COPY (query) TO STDOUT** answers as through a simple Query (CopyOutResponse, the
  rows, CopyDone; NoData to a Describe); it was refused as a write (25006).
* **Bind** decodes each value by its declared type OID (module docstring of
  :mod:`dpsql.server._wire`, "Typed parameters"); a binary value of an open type by the
  type Describe gave it.
"""

from __future__ import annotations

import io
import struct

from buenavista.postgres import BVBuffer

from dpsql.server._commands import Result
from dpsql.server._context import unknown_statement
from dpsql.server._copy import parse_copy_out
from dpsql.server._guard import UntypedText
from dpsql.server._param_types import TEXT, open_types, parameter_count, parameter_types
from dpsql.server._types import ARRAY_ELEMENTS, ProtocolError, decode_param


class ExtendedProtocol:
    """The extended-protocol messages of the handler; it sends through the handler's
    ``send_*`` methods and ``wfile``."""

    # -- the extended protocol: an error is an ErrorResponse, then messages are discarded
    # until Sync, which answers ReadyForQuery (PostgreSQL's rule); the session goes on

    def _extended(self, ctx, step, payload: bytes) -> None:  # noqa: ANN001
        if ctx.has_error:
            return  # skipped until Sync (buenavista's sync() clears the flag)
        session = ctx.session
        if session is not None and ctx.cycle_settings is None and not session.in_txn:
            # the messages up to Sync are one implicit transaction (PostgreSQL's rule):
            # an error in it undoes its SETs
            ctx.cycle_settings = (dict(session.settings), session.client_timeout)
        try:
            step(ctx, payload or b"")
        except ConnectionError:
            raise
        except Exception as err:  # noqa: BLE001  (every error goes to the client)
            if isinstance(err, struct.error) or str(err) == "subsection not found":
                # the message ended before its fields did (a length word or a string's
                # terminator missing): PostgreSQL's 08P01, not XX000 "unpack requires..."
                err = ProtocolError("invalid message format: insufficient data left in "
                                    "message")
            if session is not None and session.in_txn:
                session.failed = True  # as a failed statement in a block
            elif session is not None and ctx.cycle_settings is not None:
                settings, session.client_timeout = ctx.cycle_settings
                session.settings.clear()
                session.settings.update(settings)
            self.send_error(err, ctx)
        else:
            if session is not None and session.in_txn:
                ctx.cycle_settings = None  # an explicit block keeps its own

    def handle_parse(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        self._extended(ctx, super().handle_parse, payload)

    def handle_bind(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        self._extended(ctx, self._bind, payload)

    def handle_describe(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        self._extended(ctx, self._describe, payload)

    def handle_execute(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        self._extended(ctx, self._execute, payload)

    def handle_close(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        self._extended(ctx, self._close, payload)

    def _execute(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """Execute: the portal's rows, at most ``limit`` of them (0: all), then
        PortalSuspended (more may follow) or CommandComplete; the next Execute reads on
        (:meth:`Context.run_portal`). An empty query answers EmptyQueryResponse; ``COPY
        (query) TO STDOUT`` its CopyOutResponse, rows and CopyDone, as a simple Query
        does (it was refused as a write)."""
        end = payload.index(b"\x00")
        limit = struct.unpack("!i", payload[end + 1:end + 5])[0]
        name = payload[:end].decode("utf-8")
        portal = ctx.portal(name)
        copy = parse_copy_out(portal.sql) if portal.result is None else None
        if copy is not None:  # COPY (query) TO STDOUT: the query's rows as CopyData
            result = ctx.execute_sql(copy.query, portal.params)
            portal.result = Result(status="COPY 0")  # sent: a second Execute sends no more
            return self._send_copy(result, copy)
        result = ctx.run_portal(name)
        if not result.has_results():
            if result.status() == "EMPTY":
                self.wfile.write(struct.pack("!ci", b"I", 4))
            else:
                self.send_warnings(result)
                self.send_command_complete(f"{result.status()}\x00")
        else:
            count = self.send_data_rows(result, limit)
            if 0 < limit <= count:
                self.send_portal_suspend()
            else:
                self.send_command_complete(f"{result.tag(count)}\x00")

    def _close(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """Close: a statement or portal that does not exist is no error (CloseComplete),
        as in PostgreSQL (buenavista answered XX000 "'name'" from its KeyError)."""
        kind, name = payload[:1], payload[1:-1].decode("utf-8")
        if kind == b"S":
            ctx.close_statement(name)
        elif kind == b"P":
            ctx.close_portal(name)
        else:
            raise ProtocolError(f"Close of an unknown kind {kind!r}: 'S' or 'P'")
        self.send_close_complete()

    def _bind(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """Bind: the parameters decoded by their declared type OID; a value that does not
        decode is an ErrorResponse (:meth:`_extended`), not the end of the session; so is
        a number of values other than the statement's parameters (08P01, PostgreSQL's
        check: it used to reach the planner, 42000 at Execute)."""
        buf = BVBuffer(_io(payload))
        portal = _cstring(buf)
        stmt = _cstring(buf)
        if stmt not in ctx.stmts:
            raise unknown_statement(stmt)
        formats = [buf.read_int16() for _ in range(buf.read_int16())]
        n = buf.read_int16()
        if len(formats) not in (0, 1, n):
            raise ProtocolError(f"bind message has {len(formats)} parameter formats but {n} "
                                "parameters")
        required = parameter_count(*ctx.stmts[stmt])
        if n != required:
            raise ProtocolError(f"bind message supplies {n} parameters, but prepared "
                                f'statement "{stmt}" requires {required}')
        oids = list(ctx.stmts[stmt][1]) + [0] * n
        if len(formats) <= 1:
            formats = (formats or [0]) * max(n, 1)
        if any(formats[i] == 1 and not oids[i] for i in range(n)):
            # binary values of types the client left open: sent as Describe said
            oids = _open_types(ctx, ctx.stmts[stmt][0], oids)
        params = []
        for i in range(n):
            size = buf.read_int32()
            raw = None if size < 0 else buf.read_bytes(size)
            value = decode_param(raw, oids[i], formats[i])
            if oids[i] == 0 and formats[i] == 0 and isinstance(value, str):
                value = UntypedText(value)  # read as the literal it spells (_session)
            params.append(value)
        result_formats = [buf.read_int16() for _ in range(buf.read_int16())]
        if ctx.session is not None:  # PostgreSQL plans at Bind: 22012 for 1/0 comes here
            ctx.session.check_plan(ctx.stmts[stmt][0])
            ctx.count_plan(stmt, n, ctx.session.settings.get("plan_cache_mode", "auto"))
        ctx.add_portal(portal, stmt, params, result_formats)
        self.send_bind_complete()

    def _describe(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """Describe: of a portal, its row shape (it runs, once: :meth:`_execute` reads
        on) or NoData; of a statement, its parameter types and row shape or NoData."""
        kind, name = payload[:1], payload[1:-1].decode("utf-8")
        if kind == b"P":
            portal = ctx.portal(name)
            if portal.result is None and parse_copy_out(portal.sql) is not None:
                return self.wfile.write(struct.pack("!ci", b"n", 4))  # NoData, as PostgreSQL
            result = ctx.run_portal(name)
            if result.has_results():
                return self.send_row_description(result)
            return self.wfile.write(struct.pack("!ci", b"n", 4))  # NoData
        if kind != b"S":
            raise ProtocolError(f"Describe of an unknown kind {kind!r}: 'S' or 'P'")
        if name not in ctx.stmts:
            raise unknown_statement(name)
        sql, oids = ctx.stmts[name]
        # Parameter types the client left open are described as PostgreSQL infers them
        # (age > $1: int8), else text (:mod:`dpsql.server._param_types`): a text value is
        # read as the literal it spells (Session._execute_params). libpq's PQprepare
        # without types sends no OIDs: the $n placeholders are counted then. The shape
        # comes from a run with dummy parameters that can never change the session
        # (Session.describe): no transaction state, no error sent for a failing run.
        oids = parameter_types(sql, oids, ctx.session.catalog.tables)
        # a statement the planner refuses with both sets of dummies: its refusal, now
        # (Session.describe); the ParameterDescription only once that is known
        result = ctx.session.describe(sql, _dummies(oids, _DUMMIES, 0),
                                      _dummies(oids, _OTHER_DUMMIES, 1))
        self.send_paramter_description([oid or TEXT for oid in oids])
        if result is not None:
            self.send_row_description(result)
        else:
            self.wfile.write(struct.pack("!ci", b"n", 4))  # NoData


_DUMMIES = {**{oid: b"{}" for oid in ARRAY_ELEMENTS}, 1082: b"2000-01-01",
            1114: b"2000-01-01 00:00:00", 1083: b"00:00:00", 16: b"f"}
"""A value of each type for Describe's dummy run, in text (``0``, ``1``, ... by position
for the rest): a date column compared with ``0`` failed to bind, and Describe answered
NoData for a statement that returns rows."""

_OTHER_DUMMIES = {1082: b"2013-06-15", 1114: b"2013-06-15 12:00:00", 1083: b"12:00:00",
                  16: b"t"}
"""Describe's second set of values (``1``, ``2``, ... by position for the rest, arrays of
one element as text): a statement the planner refuses with both is refused whatever its
values. The numbers differ by position so that ``x BETWEEN $1 AND $2`` on a real-valued
attribute is a range, not a single point (refused: a point holds no count), as it was
when every dummy was ``0``."""


def _dummies(oids: list[int], values: dict[int, bytes], first: int) -> list | None:
    """A dummy value per parameter: ``values`` by type, else the position's number
    counted from ``first`` (distinct, so that no two bounds meet at one point)."""
    def other(i: int) -> bytes:
        return str(first + i).encode()

    try:
        return [decode_param(values.get(oid, b"{1}" if oid in ARRAY_ELEMENTS else other(i)),
                             oid, 0) if oid else UntypedText(other(i).decode())
                for i, oid in enumerate(oids)]
    except Exception:  # noqa: BLE001  (a type whose dummy does not decode)
        return None


def _open_types(ctx, sql: str, oids: list[int]) -> list[int]:  # noqa: ANN001
    if ctx.session is None:
        return list(oids)
    return open_types(sql, oids, ctx.session.catalog.tables)


def _io(payload: bytes) -> io.BytesIO:
    return io.BytesIO(payload)


def _cstring(buf: BVBuffer) -> str:
    out = bytearray()
    while True:
        b = buf.read_byte()
        if not b or b == b"\x00":
            return out.decode("utf-8")
        out += b
