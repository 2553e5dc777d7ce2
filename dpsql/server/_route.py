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

from dpsql.planner import too_complex
from dpsql.planner._sqlglot_compat import parse_duckdb
from dpsql.planner.refuse_file_reads import refuse_file_reads_in
from dpsql.schema_catalog import fix_catalog_sql
from dpsql.server._commands import first_word as _first_word
from dpsql.planner.route_catalog import (BY_NAME, by_name, catalog_only, discovery_sql,
                                         route_catalog, shape_probe)
from dpsql.server._division import DivisionByZeroError, division_by_zero
from dpsql.server._guard import MULTI, ReadOnlyError, Refusal, read_only

_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)


def without_comments(text: str) -> str:
    """``text`` without its SQL comments (quoted strings and names kept as written): what
    a session command reads. ``SHOW ALL -- note`` asked for a setting named
    ``all -- note``, and ``SET application_name = 'x' /* y */`` set it to the comment."""
    return _NOT_CODE.sub(lambda m: m.group(0) if m.group(0)[0] in "'\"" else " ",
                         text).strip()

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
    Raises :class:`ReadOnlyError` on writes, and the 22012 of a constant division by
    zero (:mod:`dpsql.server._division`)."""
    route, sql, problem = routed_statement(text, logical, relations, alias)
    if problem is not None:
        raise problem
    return route, sql


def routed_statement(text: str, logical: set[str], relations: set[str], alias: str
                     ) -> tuple[str, str, DivisionByZeroError | None]:
    """:func:`route_statement`, the error PostgreSQL raises when it plans the statement
    (a constant division by zero) returned, not raised: a Describe answers the shape of
    such a statement, as PostgreSQL's does, and its Bind or Execute raises it."""
    found = discovery_sql(text, logical)  # DESCRIBE t, SHOW TABLES, SHOW COLUMNS FROM t
    if found is not None:
        return "catalog", found, None
    try:
        trees = [t for t in parse_duckdb(text) if t is not None]
    except sqlglot.errors.SqlglotError:
        trees = []
    except RecursionError:  # 54001, as the planner would say; its traceback is huge
        raise too_complex() from None
    if len(trees) > 1:
        raise Refusal(MULTI)
    if not trees:  # unparsable: text heuristics
        if _first_word(text) in _WRITE_COMMANDS:
            raise ReadOnlyError(read_only(_first_word(text)))
        if re.search(r"\b(pg_catalog|information_schema|pg_\w+)\b", text, re.I) and \
                not any(re.search(rf"\b{re.escape(n)}\b", text, re.I)
                        for n in logical):
            if BY_NAME.search(text):
                raise Refusal(by_name())
            return "catalog", fix_catalog_sql(text), None
        return "planner", text, None
    tree = trees[0]
    problem = division_by_zero(tree)
    return (*_route_tree(text, tree, logical, relations, alias), problem)


def _route_tree(text: str, tree: exp.Expression, logical: set[str], relations: set[str],
                alias: str) -> tuple[str, str]:
    if isinstance(tree, _WRITES) or any(isinstance(n, _WRITES) for n in tree.walk()):
        raise ReadOnlyError(read_only(type(tree).__name__.upper()))
    if isinstance(tree, exp.Command):
        what = str(tree.this).upper()
        if what in _WRITE_COMMANDS:
            raise ReadOnlyError(read_only(what))
        return "planner", text
    if isinstance(tree, exp.Summarize):
        route_catalog(text, logical, relations)  # refuses SUMMARIZE of a logical table
    if catalog_only(tree, logical, relations, ("public", alias.lower()), tableless=True):
        if BY_NAME.search(text):  # on the text: however sqlglot names the call
            raise Refusal(by_name())
        refuse_file_reads_in(tree)  # the planner's check (DuckDB is locked as well)
        return "catalog", fix_catalog_sql(text)
    probe = shape_probe(tree, logical, relations, ("public", alias.lower()))
    if probe is not None:
        refuse_file_reads_in(probe)
        return "catalog", fix_catalog_sql(probe.sql(dialect="duckdb"))
    public = [t for t in tree.find_all(exp.Table) if t.name.lower() in logical
              and (t.text("db") or "").lower() == "public" and not t.text("catalog")]
    if public:  # BI tools write "public"."trips": the logical table
        for t in public:
            t.set("db", exp.to_identifier(alias))
        for c in tree.find_all(exp.Column):  # Metabase: "public"."trips"."mode"
            if c.table.lower() in logical and c.text("db").lower() == "public" \
                    and not c.text("catalog"):
                c.set("db", None)
        return "planner", tree.sql(dialect="duckdb")
    return "planner", text


__all__ = ["route_statement", "routed_statement"]
