"""Catalog relations whose rows are the session's own, listed as PostgreSQL lists them:
``pg_cursors`` (the session's open SQL cursors, :mod:`dpsql.server._cursors`) and
``pg_prepared_statements`` (its named prepared statements). Both listed none.

The catalog database is shared by the sessions, so its relations are empty
(:data:`dpsql.pg_emulation.RELATIONS`) and a session's rows are written into its own
statement as literals (quoted, :func:`dpsql._sql.quote_literal`), in place of the
catalog's relation (``dpsql_pg_cursors()``, as the catalog route reads ``pg_cursors``):
only where DuckDB's tokenizer reads it as code (in a client's string, the listing's
quotes would have ended the client's string, and a cursor's name become SQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import duckdb

from dpsql._sql import quote_literal
from dpsql.pg_emulation import _PG_TYPE_NAMES, _PG_UDT_NAMES
from dpsql.server._commands import SessionState
from dpsql.server._param_types import TEXT, parameter_types
from dpsql.server._types import ARRAY_ELEMENTS


@dataclass(frozen=True)
class SessionView:
    """One relation: the catalog's call the route reads it as, its columns (SQL over the
    ``VALUES`` alias ``c``) and its rows, each a tuple of SQL literals, from the
    session."""

    call: str
    columns: tuple[str, ...]
    rows: Callable[[SessionState], list[tuple[str, ...]]]

    def listing(self, rows: list[tuple[str, ...]]) -> str:
        names = ", ".join(f"c{i}" for i in range(len(self.columns)))
        values = ", ".join("(" + ", ".join(r) + ")" for r in rows)
        select = ", ".join(col.replace("{}", f"c{i}") for i, col in enumerate(self.columns))
        return f"(SELECT {select} FROM (VALUES {values}) AS c({names}))"


def _when(at: Any) -> str:
    return f"{quote_literal(at.isoformat())}::TIMESTAMPTZ"


def _cursor_rows(s: SessionState) -> list[tuple[str, ...]]:
    """Name, its DECLARE statement, WITH HOLD or not, never binary or scrollable here
    (forward only), when it was declared."""
    return [(quote_literal(name), quote_literal(p.declared), str(p.hold).lower(), "false",
             "false", _when(p.created)) for name, p in s.prepared.cursors()]


def _type_name(oid: int) -> str:
    """PostgreSQL's name of a type (``regtype``'s text: ``integer``, ``text[]``)."""
    if oid in ARRAY_ELEMENTS:
        return _type_name(ARRAY_ELEMENTS[oid]) + "[]"
    return _PG_TYPE_NAMES.get(oid) or _PG_UDT_NAMES.get(oid) or "unknown"


def _statement_rows(s: SessionState) -> list[tuple[str, ...]]:
    """Name, its text, when it was prepared, its parameter types (declared, else as
    Describe infers them, else text), not from SQL (SQL PREPARE is not supported), and
    its generic and custom plans, counted at each Bind as PostgreSQL 15 counts them
    (:meth:`dpsql.server._context.Context.count_plan`)."""
    tables = getattr(getattr(s, "catalog", None), "tables", {})
    out = []
    for name, sql, oids, at, (generic, custom) in s.prepared.statements():
        types = [_type_name(oid or TEXT) for oid in parameter_types(sql, oids, tables)]
        out.append((quote_literal(name), quote_literal(sql), _when(at),
                    "[" + ", ".join(map(quote_literal, types)) + "]::VARCHAR[]", "false",
                    f"{int(generic)}::BIGINT", f"{int(custom)}::BIGINT"))
    return out


VIEWS = (
    SessionView("dpsql_pg_cursors()", (
        "{}::VARCHAR AS name", "{}::VARCHAR AS statement", "{} AS is_holdable",
        "{} AS is_binary", "{} AS is_scrollable", "{} AS creation_time"), _cursor_rows),
    SessionView("dpsql_pg_prepared_statements()", (
        "{}::VARCHAR AS name", "{}::VARCHAR AS statement", "{} AS prepare_time",
        "{} AS parameter_types", "{} AS from_sql", "{} AS generic_plans",
        "{} AS custom_plans"), _statement_rows),
)


def with_session_views(s: SessionState, sql: str) -> str:
    """A catalog statement with each of :data:`VIEWS` it reads listing the session's
    rows (module docstring); as it was when it reads none, or the session has none."""
    if s.prepared is None or "dpsql_pg_" not in sql:
        return sql
    for view in VIEWS:
        if view.call not in sql:
            continue
        try:  # the catalog's relation where it is code, never inside a string or comment
            at = [pos for pos, kind in duckdb.tokenize(sql)
                  if kind == duckdb.token_type.identifier and sql.startswith(view.call, pos)]
        except duckdb.Error:
            return sql
        rows = view.rows(s)
        if not rows or not at:
            continue
        listing = view.listing(rows)
        for pos in reversed(at):
            sql = sql[:pos] + listing + sql[pos + len(view.call):]
    return sql


__all__ = ["VIEWS", "SessionView", "with_session_views"]
