"""What ``dpsql serve`` checks of a statement before it runs, where PostgreSQL answers
it: at Parse its syntax (42601) and its tables (42P01), at Bind what planning raises (a
constant division by zero, 22012). Each used to come at Execute, after ParseComplete
and BindComplete, so a client that prepares (asyncpg, JDBC, psycopg's
``prepare=True``) learnt late, and psql drew no caret. Nothing here runs a statement
or changes the session; only these errors are raised: a refusal (a write, EXPLAIN) or
an unknown column is answered at Execute, with the values bound.

* **Syntax** (:func:`check_syntax`): well formed when DuckDB's parser (PostgreSQL's
  grammar) reads it; else it goes the way it would run: routed, then read by the
  planner's parser or, on the catalog route, by DuckDB's after the PostgreSQL spellings
  are rewritten. A statement over :data:`~dpsql.server._bounds.INLINE_BYTES` is checked
  the same way in a planning process (:func:`dpsql.server._planning.
  check_statement_syntax`), under the statement timeout: DuckDB's parser takes a fifth
  of a second per megabyte, but a hostile megabyte (100,000 ORs) takes it seconds,
  which must stay cancellable, and sqlglot's parse holds the GIL. Long statements were
  not checked at Parse at all (a syntax error in a 2 KB dashboard query came at
  Execute).
* **Tables** (:func:`check_tables`): only a table that is neither a logical table, a
  catalog relation nor a CTE of the statement (:func:`dpsql.server._route.other_tables`,
  from the parse the router makes anyway and remembers) is looked for, so a BI tool's
  statements cost nothing more. It is looked for as the statement would read it: bound,
  never run (``SELECT 1 FROM name LIMIT 0`` as a DuckDB relation), on the session's
  DuckDB (also under the release's alias, as the planner qualifies the release's own
  tables) and on the catalog database. ``DECLARE`` (PostgreSQL reads its query when it
  runs) and long statements are not looked at. A simple Query's statements are looked
  at one by one, each just before it runs (PostgreSQL analyses each then: ``SELECT 1;
  SELECT * FROM nosuch`` answers the first), so its error has the same words and place.
* **Planning** (:func:`check_plan`): the router's remembered verdict
  (:mod:`dpsql.server._division`).

Session commands are read when they run.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any, Callable

import duckdb

from dpsql._sql import quote_ident
from dpsql.errors import SqlSyntaxError
from dpsql.planner.parse_sql import parse_walked
from dpsql.server._bounds import INLINE_BYTES
from dpsql.server._commands import first_word
from dpsql.server._cursors import declared_query
from dpsql.server._limits import classify
from dpsql.server._route import UnknownTableError, without_comments
from dpsql.server._syntax import statement_text, text_start


def _statement(sql: str) -> tuple[str, str] | None:
    """(text, first word) of the statement ``sql`` checks, which for a ``DECLARE`` is its
    query, read as any statement (psycopg's cursors); None for a DECLARE without one."""
    text = statement_text(sql)
    word = first_word(text)
    while word == "DECLARE":
        query = declared_query(without_comments(text))
        if query is None:
            return None
        text = statement_text(query)
        word = first_word(text)
    return text, word


def check_syntax(session: Any, sql: str, commands: Any) -> None:
    """Raise the syntax error (42601) that ``sql`` would meet when it runs, running
    nothing (module docstring); ``commands``: the statements the session answers
    itself."""
    read = _statement(sql)
    if read is None:
        return
    text, word = read
    if not text or word in commands:
        return
    if len(text) > INLINE_BYTES:
        return _check_long(session, text) if session.planning is not None else None
    read_syntax(text, lambda t: session._route_cached(t, planned=False))


def read_syntax(text: str, route: Callable[[str], tuple[str, str]]) -> None:
    """Raise the syntax error of ``text`` (one statement), read the way it would run:
    well formed when DuckDB's parser reads it; else ``route``-d (a refusal is the
    Execute's to answer), then read by DuckDB's parser on the catalog route (the
    PostgreSQL spellings rewritten) or by the planner's (sqlglot)."""
    try:
        duckdb.extract_statements(text)
        return
    except duckdb.Error:
        pass
    try:
        where, routed = route(text)
    except Exception:  # noqa: BLE001  (a refusal: the Execute answers it)
        return
    if where == "catalog":
        duckdb.extract_statements(routed)  # its ParserException: 42601
        return
    try:
        parse_walked(routed)
    except SqlSyntaxError:
        raise
    except Exception:  # noqa: BLE001  (not a syntax error: the Execute answers it)
        return


def _check_long(session: Any, text: str) -> None:
    session._cancel.clear()
    with session.watchdog.statement(session.statement_timeout) as stmt:
        try:
            session.planning.prepare(text, None, session._cancel, syntax=True)
        except (SqlSyntaxError, duckdb.ParserException):
            raise
        except Exception as err:  # noqa: BLE001  (not a syntax error: the Execute's)
            mapped = classify(err, stmt, session.memory_limit)
            if mapped is not err:  # the timeout or a cancel: 57014
                raise mapped from err


def check_tables(session: Any, sql: str, commands: Any, offset: int = 0) -> None:
    """Raise :class:`UnknownTableError` (42P01, with where the name is: ``offset`` plus
    its place in ``sql``) for the first table ``sql`` names that does not exist (module
    docstring)."""
    text = statement_text(sql)
    word = first_word(text)
    if not text or word in commands or len(text) > INLINE_BYTES:
        return
    try:
        duckdb.extract_statements(text)
        tables = session._routed(text).tables
    except Exception:  # noqa: BLE001  (a refusal or a syntax error: answered elsewhere)
        return
    for name, start in tables:
        if _exists(session, name):
            continue
        shown = name.replace('"', "")  # as PostgreSQL names it: "public.x"
        close = get_close_matches(shown.rsplit(".", 1)[-1].lower(), session.logical, 1)
        err = UnknownTableError(f'relation "{shown}" does not exist: '
                                + (f'did you mean "{close[0]}"? ' if close else "")
                                + "SHOW TABLES lists the tables to query")
        if start >= 0:  # 1-based in the client's text
            err.position = offset + text_start(sql) + start + 1
        raise err


def _exists(session: Any, name: str) -> bool:
    probes = [(session._duck, name), (session.catalog_cur, name)]
    if "." not in name:
        probes.insert(1, (session._duck, f"{quote_ident(session.alias)}.{name}"))
    for con, probe in probes:
        sql = f"SELECT 1 FROM {probe} LIMIT 0"
        try:
            if len(duckdb.extract_statements(sql)) != 1:  # the name as sqlglot quotes it:
                return True  # one statement; anything else is the Execute's to refuse
            con.sql(sql)  # bound, not run
            return True
        except duckdb.CatalogException:
            continue
        except duckdb.Error:  # it exists, or the Execute says more
            return True
    return False


def check_plan(session: Any, sql: str, commands: Any) -> None:
    """Raise what PostgreSQL raises planning ``sql`` at Bind: a constant division by
    zero (22012, :mod:`dpsql.server._division`). A long statement is checked when it
    runs, in a planning process."""
    read = _statement(sql)
    if read is None:
        return
    text, word = read
    if not text or word in commands or len(text) > INLINE_BYTES or session.failed:
        return
    try:
        session._route_cached(text, planned=False)
    except Exception:  # noqa: BLE001  (a refusal: the Execute answers it)
        return
    session._route_cached(text)  # raises the planning error, if any


__all__ = ["check_plan", "check_syntax", "check_tables", "read_syntax"]
