"""Where a statement of ``dpsql serve`` goes: the catalog database or the planner.

:func:`route_statement` is the session router's decision (see
:mod:`dpsql.server._session`, "Routing"), as a function of the statement and the
session's public facts only, so that a planning process (:mod:`dpsql.server._planning`)
routes a long statement exactly as the session would.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import sqlglot
from sqlglot import exp

from dpsql.errors import ProgrammingError
from dpsql.planner import too_complex
from dpsql.planner._sqlglot_compat import parse_duckdb
from dpsql.planner.parse_sql import generate_sql
from dpsql.planner.refuse_file_reads import refuse_file_reads_in
from dpsql.schema_catalog import fix_catalog_sql
from dpsql.server._commands import first_word as _first_word
from dpsql.planner.route_catalog import (BY_NAME, CATALOG_SCHEMAS, by_name, catalog_only,
                                         discovery_sql, route_catalog, shape_probe)
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



class UnknownTableError(ProgrammingError):
    """A Parse of a statement naming a table that does not exist: SQLSTATE 42P01
    (undefined_table), with where the name is (``position``, field P)."""

    position: int | None = None


class Routed(NamedTuple):
    """Where a statement goes (:func:`routed_statement`)."""

    route: str  # "catalog" or "planner"
    sql: str  # the text that runs there
    problem: DivisionByZeroError | None  # what PostgreSQL raises planning it (22012)
    tables: tuple[tuple[str, int], ...]  # tables to look for (:func:`other_tables`)


def route_statement(text: str, logical: set[str], relations: set[str], alias: str
                    ) -> tuple[str, str]:
    """``("catalog" | "planner", sql)`` for ``text`` (:meth:`Session.route`), from the
    session's public facts only, so that a planning process can route too: the logical
    table names (lower case), the catalog database's relations and the release alias.
    Raises :class:`ReadOnlyError` on writes, and the 22012 of a constant division by
    zero (:mod:`dpsql.server._division`)."""
    routed = routed_statement(text, logical, relations, alias)
    if routed.problem is not None:
        raise routed.problem
    return routed.route, routed.sql


def routed_statement(text: str, logical: set[str], relations: set[str], alias: str
                     ) -> Routed:
    """:func:`route_statement`, the error PostgreSQL raises when it plans the statement
    (a constant division by zero) returned, not raised: a Describe answers the shape of
    such a statement, as PostgreSQL's does, and its Bind or Execute raises it. Also the
    tables it names that are neither logical nor catalog relations
    (:func:`other_tables`), which a Parse looks for."""
    found = discovery_sql(text, logical)  # DESCRIBE t, SHOW TABLES, SHOW COLUMNS FROM t
    if found is not None:
        return Routed("catalog", found, None, ())
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
            return Routed("catalog", fix_catalog_sql(text), None, ())
        return Routed("planner", text, None, ())
    tree = trees[0]
    problem = division_by_zero(tree)
    tables = other_tables(tree, logical, relations, alias)
    return Routed(*_route_tree(text, tree, logical, relations, alias), problem, tables)


def other_tables(tree: exp.Expression, logical: set[str], relations: set[str], alias: str
                 ) -> tuple[tuple[str, int], ...]:
    """The tables a SELECT names that are neither logical tables, catalog relations nor
    its CTEs, each as SQL (``"x"``, ``s."x"``) with where its name starts in the text
    (0-based; -1 when unknown): those a Parse looks for on the session, to answer 42P01
    when one does not exist, as PostgreSQL does (:meth:`Session.check_tables`). A query
    in parentheses with clauses outside (``(SELECT ...) ORDER BY k``, which the planner
    reads as ``SELECT * FROM (...)``) is looked into the same way."""
    if isinstance(tree, exp.Subquery):
        tree = tree.this
    if not isinstance(tree, (exp.Select, exp.SetOperation)):
        return ()
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    home = ("", "public", alias.lower())
    found = []
    for t in tree.find_all(exp.Table):
        name, db = t.name.lower(), (t.text("db") or "").lower()
        if not isinstance(t.this, exp.Identifier) or (not db and name in ctes):
            continue  # a table function or a CTE
        if (name in logical and db in home) or (name in relations and (
                not db or db in CATALOG_SCHEMAS)):
            continue
        parts = [p for p in (t.args.get("catalog"), t.args.get("db"), t.this) if p]
        start = parts[0].meta.get("start", -1) if isinstance(parts[0], exp.Identifier) \
            else -1
        found.append((".".join(p.sql(dialect="duckdb") for p in parts), start))
    return tuple(found)


def _route_tree(text: str, tree: exp.Expression, logical: set[str], relations: set[str],
                alias: str) -> tuple[str, str]:
    write = next((n for n in tree.walk() if isinstance(n, _WRITES)), None)
    if write is not None:  # the write's SQL word: TRUNCATE, DELETE in a WITH (not SELECT)
        raise ReadOnlyError(read_only(
            "TRUNCATE" if isinstance(write, exp.TruncateTable) else type(write).__name__.upper()))
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
        # the planner's generator: it refuses what DuckDB's SQL cannot say (to_char)
        # where sqlglot's default one drops a part of it
        return "planner", generate_sql(tree)
    return "planner", text


__all__ = ["Routed", "UnknownTableError", "other_tables", "route_statement", "routed_statement"]
