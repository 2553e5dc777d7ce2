"""Where a statement of ``dpsql serve`` goes: the catalog database or the planner.

:func:`route_statement` is the session router's decision (see
:mod:`dpsql.server._session`, "Routing"), as a function of the statement and the
session's public facts only, so that a planning process (:mod:`dpsql.server._planning`)
routes a long statement exactly as the session would.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner import too_complex
from dpsql.planner.refuse_file_reads import refuse_file_reads_in
from dpsql.planner.resolve_helpers import HELPERS
from dpsql.server._catalog import fix_catalog_sql
from dpsql.server._commands import first_word as _first_word
from dpsql.server._guard import BY_NAME, MULTI, ReadOnlyError, by_name, read_only

_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)
_CATALOG_SCHEMAS = {"pg_catalog", "information_schema"}
_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Merge,
           exp.TruncateTable, exp.Copy)
_WRITE_COMMANDS = {"GRANT", "REVOKE", "VACUUM", "ANALYZE", "CHECKPOINT", "REINDEX",
                   "CLUSTER", "COMMENT", "LOCK", "REFRESH", "INSTALL", "LOAD", "ATTACH",
                   "DETACH", "EXPORT", "IMPORT", "CALL", "TRUNCATE", "COPY", "PRAGMA",
                   "CREATE", "DROP", "ALTER", "INSERT", "UPDATE", "DELETE", "MERGE", "USE"}



def route_statement(text: str, logical: set[str], relations: set[str], alias: str
                    ) -> tuple[str, str]:
    """``("catalog" | "planner", sql)`` for ``text`` (:meth:`Session.route`), from the
    session's public facts only, so that a planning process can route too: the logical
    table names (lower case), the catalog database's relations and the release alias.
    Raises :class:`ReadOnlyError` on writes."""
    try:
        trees = [t for t in sqlglot.parse(text, read="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError:
        trees = []
    except RecursionError:  # 54001, as the planner would say; its traceback is huge
        raise too_complex() from None
    if len(trees) > 1:
        raise UnsupportedQueryError(MULTI)
    if not trees:  # unparsable: text heuristics
        if _first_word(text) in _WRITE_COMMANDS:
            raise ReadOnlyError(read_only(_first_word(text)))
        if re.search(r"\b(pg_catalog|information_schema|pg_\w+)\b", text, re.I) and \
                not any(re.search(rf"\b{re.escape(n)}\b", text, re.I)
                        for n in logical):
            if BY_NAME.search(text):
                raise UnsupportedQueryError(by_name())
            return "catalog", fix_catalog_sql(text)
        return "planner", text
    tree = trees[0]
    if isinstance(tree, _WRITES) or any(isinstance(n, _WRITES) for n in tree.walk()):
        raise ReadOnlyError(read_only(type(tree).__name__.upper()))
    if isinstance(tree, exp.Command):
        what = str(tree.this).upper()
        if what in _WRITE_COMMANDS:
            raise ReadOnlyError(read_only(what))
        return "planner", text
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    catalog_only, public = True, []
    if any(f.name.lower() in HELPERS for f in tree.find_all(exp.Anonymous)):
        catalog_only = False  # the release's helpers: the planner resolves them
    for t in tree.find_all(exp.Table):
        name, db = t.name.lower(), (t.text("db") or "").lower()
        if not name or (not db and name in ctes):
            continue
        if name in logical and db in ("", "public", alias.lower()) \
                and not t.text("catalog"):
            catalog_only = False
            if db == "public":
                public.append(t)
        elif not (db in _CATALOG_SCHEMAS or (not db and name in relations)
                  or (not db and name.startswith(("pg_", "duckdb_")))):
            catalog_only = False
    if catalog_only:
        if BY_NAME.search(text):  # on the text: however sqlglot names the call
            raise UnsupportedQueryError(by_name())
        refuse_file_reads_in(tree)  # the planner's check (DuckDB is locked as well)
        return "catalog", fix_catalog_sql(text)
    if public:  # BI tools write "public"."trips": the logical table
        for t in public:
            t.set("db", exp.to_identifier(alias))
        return "planner", tree.sql(dialect="duckdb")
    return "planner", text


__all__ = ["route_statement"]
