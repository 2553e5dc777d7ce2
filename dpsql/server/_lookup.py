"""A Parse of ``dpsql serve`` looks for the tables its statement names: 42P01
(undefined_table) for one that does not exist, with where its name is (the
ErrorResponse's field P), as PostgreSQL answers a Parse. The Parse was accepted
(ParseComplete) and the error came at Execute, so a client that prepares (asyncpg,
JDBC, psycopg's ``prepare=True``) learnt late, and psql drew no caret.

Only a table that is neither a logical table, a catalog relation nor a CTE of the
statement (:func:`dpsql.server._route.other_tables`, from the parse the router makes
anyway and remembers) is looked for, so a BI tool's statements cost nothing more. It is
looked for as the statement would read it: bound, never run (``SELECT 1 FROM name LIMIT
0`` as a DuckDB relation), on the session's DuckDB (also under the release's alias, as
the planner qualifies the release's own tables) and on the catalog database; any other
failure is left to the Execute. Session commands, ``DECLARE`` (PostgreSQL reads its
query when it runs), statements DuckDB's parser does not read and those over
:data:`dpsql.server._bounds.INLINE_BYTES` (their parse belongs to a planning process)
are not looked at; a simple Query reports an unknown table when it runs, as PostgreSQL
does for its every statement but the first.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any, Callable, Protocol

import duckdb

from dpsql._sql import quote_ident
from dpsql.server._bounds import INLINE_BYTES
from dpsql.server._commands import first_word
from dpsql.server._route import Routed, UnknownTableError
from dpsql.server._syntax import statement_text, text_start


class LookupSession(Protocol):
    """What the look-up reads of a session (:class:`dpsql.server._session.Session`)."""

    alias: str
    logical: set[str]
    catalog_cur: duckdb.DuckDBPyConnection
    _duck: duckdb.DuckDBPyConnection
    _routed: Callable[[str], Routed]


def check_tables(session: LookupSession, sql: str, commands: Any) -> None:
    """Raise :class:`UnknownTableError` for the first table ``sql`` names that does not
    exist (module docstring); ``commands``: the statements the session answers
    itself."""
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
            err.position = text_start(sql) + start + 1
        raise err


def _exists(session: LookupSession, name: str) -> bool:
    probes = [(session._duck, name), (session.catalog_cur, name)]
    if "." not in name:
        probes.insert(1, (session._duck, f"{quote_ident(session.alias)}.{name}"))
    for con, probe in probes:
        try:
            con.sql(f"SELECT 1 FROM {probe} LIMIT 0")  # bound, not run
            return True
        except duckdb.CatalogException:
            continue
        except duckdb.Error:  # it exists, or the Execute says more
            return True
    return False


__all__ = ["check_tables"]
