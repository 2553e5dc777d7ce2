"""SQL cursors of ``dpsql serve``: ``DECLARE ... CURSOR FOR query``, ``FETCH``, ``MOVE``
and ``CLOSE``, as PostgreSQL has them, forward only.

psycopg's server-side cursors (``connection.cursor(name)``; SQLAlchemy's
``stream_results``, pandas' ``read_sql(chunksize=...)`` through it) and psqlODBC with
``UseDeclareFetch`` (Excel, Power BI, Tableau over ODBC) read large results so. They
were refused as a syntax error ("'DECLARE' does not start a query").

A cursor is a portal of the connection (:class:`dpsql.server._context.Context`), as in
PostgreSQL: the protocol's Describe and Execute reach it by name, Sync or the end of the
transaction closes it unless it was declared ``WITH HOLD``, and it counts against the
session's bound on portals. Its query runs when it is declared, through the session like
any other statement (routing, lock-down, statement timeout, memory cap), and ``FETCH``
reads on from the rows it returned. ``FETCH`` backwards (``PRIOR``, ``FIRST``, ``LAST``,
``ABSOLUTE``, ``RELATIVE``, ``BACKWARD``) gets 55000, PostgreSQL's answer for a ``NO
SCROLL`` cursor; ``BINARY`` cursors get 0A000 (binary results are asked for in the
protocol's Bind).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Protocol

from dpsql.errors import InterfaceError, SqlSyntaxError
from dpsql.server._commands import _COMMANDS as _SESSION_COMMANDS
from dpsql.server._commands import Result, SessionState, first_word
from dpsql.server._guard import Refusal


class CursorError(InterfaceError):
    """FETCH backwards (SQLSTATE 55000, object_not_in_prerequisite_state)."""


class DeclareOutsideBlockError(InterfaceError):
    """``DECLARE`` without ``WITH HOLD`` outside a transaction block: SQLSTATE 25P01."""


class DuplicateCursorError(InterfaceError):
    """``DECLARE`` of a name already in use: SQLSTATE 42P03."""


class Cursors(Protocol):
    """The connection's portals, as :class:`dpsql.server._context.Context` keeps them."""

    def declare(self, name: str, sql: str, params: list, result: Result,
                hold: bool, statement: str = "") -> None: ...

    def cursor(self, name: str) -> Any: ...

    def close_portal(self, name: str) -> None: ...

    def close_portals(self) -> None: ...

    def cursors(self) -> list[tuple[str, Any]]: ...


_NAME = r'(?:"(?P<quoted>(?:[^"]|"")+)"|(?P<name>[A-Za-z_][\w$]*))'
_DECLARE = re.compile(
    rf"DECLARE\s+{_NAME}\s+(?P<options>(?:BINARY|ASENSITIVE|INSENSITIVE|NO\s+SCROLL|SCROLL|\s)*)"
    r"CURSOR\s+(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.+)$", re.I | re.S)
_FETCH = re.compile(
    r"(?P<verb>FETCH|MOVE)\s+(?:(?P<direction>NEXT|ALL|FORWARD\s+ALL|FORWARD(?:\s+\d+)?|\d+"
    r"|PRIOR|FIRST|LAST|ABSOLUTE\s+-?\d+|RELATIVE\s+-?\d+|BACKWARD(?:\s+(?:ALL|\d+))?|-\d+)"
    rf"\s+)?(?:FROM\s+|IN\s+)?{_NAME}\s*;?\s*$", re.I | re.S)
_CLOSE = re.compile(rf"CLOSE\s+(?:(?P<all>ALL)|{_NAME})\s*;?\s*$", re.I | re.S)


def _name(m: re.Match) -> str:
    if m.group("quoted") is not None:
        return m.group("quoted").replace('""', '"')
    return m.group("name").lower()


def _cursors(s: SessionState) -> Cursors:
    if s.prepared is None:  # a session without a connection (no wire handler)
        raise CursorError("cursors need a client connection")
    return s.prepared  # type: ignore[return-value]


def declare(s: Any, text: str, params: list | None) -> Result:
    """``DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH[OUT] HOLD] FOR query``: run the
    query through the session and keep its rows as the portal ``name``."""
    m = _DECLARE.match(text)
    if m is None:
        raise SqlSyntaxError(f"syntax error in {text[:80]!r}: write DECLARE name CURSOR "
                             "[WITH HOLD] FOR SELECT ...; a cursor here is forward only "
                             "(NO SCROLL)")
    if re.search(r"\bSCROLL\b", re.sub(r"NO\s+SCROLL", "", m.group("options"), flags=re.I),
                 re.I):
        raise CursorError("SCROLL cursors are not supported: dpsql serve's cursors read "
                          "forward only; declare it NO SCROLL or without SCROLL")
    if re.search(r"\bBINARY\b", m.group("options"), re.I):
        raise Refusal("BINARY cursors are not supported: declare it without "
                                    "BINARY and ask for binary results in the Bind of the "
                                    "FETCH (psycopg: connection.cursor(name, binary=True))")
    hold = (m.group("hold") or "").upper() == "WITH"
    if not hold and not s.in_transaction():
        raise DeclareOutsideBlockError("DECLARE CURSOR can only be used in transaction "
                                       "blocks: send BEGIN first, or declare it WITH HOLD")
    a_query(m.group("query"))
    cursors, name = _cursors(s), _name(m)
    try:
        cursors.cursor(name)
    except Exception:  # noqa: BLE001  (no such cursor: the name is free)
        pass
    else:
        raise DuplicateCursorError(f'cursor "{name}" already exists')
    result = s.execute_sql(m.group("query"), params)
    if not result.has_results():
        raise SqlSyntaxError(f"cursor {name!r}: its query returns no rows; DECLARE ... "
                             "CURSOR FOR needs a SELECT")
    cursors.declare(name, m.group("query"), list(params or []), result, hold, text)
    return Result(status="DECLARE CURSOR")


def declared_query(text: str) -> str | None:
    """The query of a ``DECLARE ... CURSOR FOR query`` (None when it is not one), refused
    as a syntax error when it is a statement the session answers itself (:func:`a_query`)."""
    m = _DECLARE.match(text)
    return a_query(m.group("query")) if m else None


def a_query(query: str) -> str:
    """``query``, the query of a cursor; a syntax error (42601, PostgreSQL's answer) when
    it is one of :data:`_NOT_QUERIES`, before anything reads it further: nested
    ``DECLARE ... FOR DECLARE ...`` is then refused at its first level, not recursed into."""
    word = first_word(query)
    if word in _NOT_QUERIES:
        raise SqlSyntaxError(f"DECLARE ... CURSOR FOR {word} is not supported: a cursor "
                             "needs a query (SELECT, WITH, VALUES, TABLE, FROM); write "
                             "DECLARE name CURSOR [WITH HOLD] FOR SELECT ...")
    return query


def fetch(s: SessionState, text: str) -> Result:
    """``FETCH [NEXT | n | ALL | FORWARD [n | ALL]] [FROM | IN] name`` (``MOVE`` alike,
    without the rows): the next rows of the cursor."""
    m = _FETCH.match(text)
    if m is None:
        raise SqlSyntaxError(f"syntax error in {text[:80]!r}: write FETCH [FORWARD] "
                             "{n | ALL | NEXT} FROM name")
    verb = m.group("verb").upper()
    direction = re.sub(r"\s+", " ", (m.group("direction") or "NEXT").upper())
    if re.match(r"PRIOR|FIRST|LAST|ABSOLUTE|RELATIVE|BACKWARD|-", direction):
        raise CursorError(f"cursor can only scan forward ({verb} {direction}): dpsql "
                          "serve's cursors are NO SCROLL; declare a new one to read again")
    count = None if direction.endswith("ALL") else \
        int(direction.split()[-1]) if direction[-1].isdigit() else 1
    portal = _cursors(s).cursor(_name(m))
    result = portal.result
    rows = list(itertools.islice(result.rows(), count))
    if verb == "MOVE":
        return Result(status=f"MOVE {len(rows)}")
    return Result(result.names, result.types, rows, status="FETCH")


def fetch_shape(s: SessionState, text: str) -> Result | None:
    """The columns a ``FETCH`` answers (Describe of a prepared ``FETCH``), reading no
    row; None for ``MOVE``, or when the statement or its cursor is not valid (the
    Execute then says why)."""
    m = _FETCH.match(text)
    if m is None or m.group("verb").upper() != "FETCH" or s.prepared is None:
        return None
    try:
        result = _cursors(s).cursor(_name(m)).result
    except Exception:  # noqa: BLE001  (no such cursor: NoData, the Execute says so)
        return None
    return Result(result.names, result.types, ())


def close(s: SessionState, text: str) -> Result:
    """``CLOSE name`` (34000 when there is none) or ``CLOSE ALL``."""
    m = _CLOSE.match(text)
    if m is None:
        raise SqlSyntaxError(f"syntax error in {text[:80]!r}: write CLOSE name or CLOSE ALL")
    cursors = _cursors(s)
    if m.group("all"):
        cursors.close_portals()
        return Result(status="CLOSE CURSOR ALL")
    name = _name(m)
    cursors.cursor(name)  # 34000 when there is none
    cursors.close_portal(name)
    return Result(status="CLOSE CURSOR")


CURSOR_COMMANDS = {"FETCH": fetch, "MOVE": fetch, "CLOSE": close}
"""Cursor commands that take the statement's text only (``DECLARE`` takes its
parameters too: :func:`declare`)."""

_NOT_QUERIES = frozenset(_SESSION_COMMANDS) | frozenset(CURSOR_COMMANDS) | {"DECLARE"}
"""What a cursor's query may not be: the statements the session answers itself. Its
query runs through the session, so ``DECLARE c CURSOR FOR SET ...`` changed the setting
and ``FOR DECLARE d CURSOR FOR ...`` declared ``d`` (1,500 of them nested exhausted the
recursion: XX000); PostgreSQL refuses them as a syntax error (42601), with no effect."""

__all__ = ["CURSOR_COMMANDS", "CursorError", "DeclareOutsideBlockError",
           "DuplicateCursorError", "close", "declare", "declared_query", "fetch",
           "fetch_shape"]
