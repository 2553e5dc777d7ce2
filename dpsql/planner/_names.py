"""Name resolution for the planner, as DuckDB resolves names: which FROM items and
columns a query's names denote. A logical table sits in the catalog of its release (the
attach alias), schema ``main``; CTEs are scoped as in SQL; a WHERE conjunct's nested
queries keep their own columns. Pure functions of the syntax tree: no catalog access
beyond the release passed in, no I/O."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlglot import ErrorLevel, exp

if TYPE_CHECKING:
    from dpsql.planner.catalog import ReleaseInfo


def names_cte(t: exp.Table) -> bool:
    """True when the table name ``t`` refers to a CTE in its scope (:func:`cte_named`)."""
    return cte_named(t) is not None


def cte_named(t: exp.Table) -> exp.CTE | None:
    """The CTE the table name ``t`` refers to in its scope, as SQL scopes them, or None:
    a CTE of the WITH of an enclosing query, and, inside the body of a CTE, only the CTEs
    defined before it (that CTE too under WITH RECURSIVE). A non-recursive CTE named like
    a table reads the table in its own body (``WITH trips AS (SELECT COUNT(*) ... FROM
    trips)``), and a CTE of one subquery is unknown to its siblings."""
    if t.args.get("db") or t.args.get("catalog"):
        return None
    name = t.name.lower()
    prev, node, body = t, t.parent, None
    while node is not None:
        if isinstance(node, exp.CTE):
            body = node
        elif isinstance(node, exp.With):
            ctes = list(node.expressions)
            at = next((i for i, c in enumerate(ctes) if c is body), None)
            if at is not None:
                ctes = ctes[:at + 1] if node.args.get("recursive") else ctes[:at]
            hit = next((c for c in ctes if c.alias_or_name.lower() == name), None)
            if hit is not None:
                return hit
            body = None
        elif isinstance(node, exp.Query):
            w = node.args.get("with_") or node.args.get("with")
            if w is not None and w is not prev:
                hit = next((c for c in w.expressions if c.alias_or_name.lower() == name),
                           None)
                if hit is not None:
                    return hit
        prev, node = node, node.parent
    return None


def home_catalog(t: exp.Table) -> str:
    """The catalog a table name points into, as :meth:`~dpsql.planner.catalog.Catalog.resolve_table` takes it:
    ``""`` for ``t``, ``c`` for ``c.t`` and for ``c.main.t`` (a logical table sits in
    schema ``main`` of its release's catalog). ``c.s.t`` with another schema ``s`` names
    no logical table: the answer is then ``c.s``, which is no attach alias."""
    if not t.args.get("db"):
        return ""
    db = t.text("db")
    if not t.args.get("catalog"):
        return db
    return t.text("catalog") if db.lower() == "main" else f"{t.text('catalog')}.{db}"


def scope_tables(select: exp.Select) -> list[exp.Table]:
    out = []
    frm = select.args.get("from_") or select.args.get("from")
    sources = [frm.this] if frm is not None else []
    sources += [j.this for j in select.args.get("joins") or []]
    for s in sources:
        if isinstance(s, exp.Table):
            out.append(s)
    return out


def long_name_binds(col: exp.Column, table: exp.Table, release: ReleaseInfo) -> bool:
    """True when a column qualified by more than a table name (``s.t.c``, ``c.s.t.c``)
    names ``table``, as DuckDB binds such names: the table must be unaliased, and the
    extra parts are its catalog or its schema (``s.t.c``), or both (``c.s.t.c``). A
    logical table sits in the catalog of its release (the attach alias), schema
    ``main``."""
    if table.args.get("alias") is not None:
        return False  # an alias is the only name of an aliased table, as in DuckDB
    db, catalog = col.text("db").lower(), col.text("catalog").lower()
    home = release.alias.lower()
    if catalog:
        return catalog == home and db == "main"
    return db in (home, "main")


def split_columns(c: exp.Expression) -> tuple[list[exp.Column], list[exp.Column], bool]:
    """One walk of a WHERE conjunct: the columns of this SELECT itself, the columns
    inside queries nested in it (``x IN (SELECT ...)``, ``EXISTS (...)``), and whether
    this SELECT's own part has an OR (an OR inside a nested query is that query's)."""
    own: list[exp.Column] = []
    inner: list[exp.Column] = []
    has_or = False
    stack = [(c, False)]
    while stack:
        node, nested = stack.pop()
        if isinstance(node, exp.Column):
            (inner if nested else own).append(node)
            continue
        if not nested and isinstance(node, exp.Or):
            has_or = True
        below = nested or (isinstance(node, exp.Query) and node is not c)
        stack.extend((x, below) for x in node.iter_expressions())
    return own, inner, has_or


def conjuncts_of(e: exp.Expression) -> list[exp.Expression]:
    """The AND-ed terms of a condition, each without its parentheses: ``(a AND b) AND
    (c)`` and ``((a AND b) AND c)`` are ``[a, b, c]`` (BI tools parenthesise every
    predicate). The rewrite parenthesises an OR again when it joins the terms back."""
    while isinstance(e, exp.Paren):
        e = e.this
    if not isinstance(e, exp.And):
        return [e]
    return [t for part in (e.this, e.expression) for t in conjuncts_of(part)]


def is_named_call(e: exp.Expression) -> bool:
    """Whether :func:`output_name` names the unaliased output ``e`` by its function."""
    f = e.this if isinstance(e, (exp.Cast, exp.Window)) else e
    return isinstance(f, exp.Anonymous) or (isinstance(f, exp.Func)
                                            and not isinstance(f, exp.Binary))


def output_name(e: exp.Expression) -> str:
    """PostgreSQL's name of an unaliased output: a function call (also under a cast or
    as a window) is named by its function (as DuckDB spells it), ``count`` for
    ``COUNT(*)``, ``dp_stderr`` for ``dp_stderr()`` (ORDER BY and HAVING may name it
    so, as in PostgreSQL); any other expression keeps its SQL text, as DuckDB names
    it."""
    if is_named_call(e):
        f = e.this if isinstance(e, (exp.Cast, exp.Window)) else e
        if isinstance(f, exp.Anonymous):
            return f.name.lower()
        written = f.sql("duckdb", normalize_functions="lower",  # no warning of a
                        unsupported_level=ErrorLevel.IGNORE).split("(", 1)[0]  # lossy node
        return written if _WORD.fullmatch(written) else f.sql_name().lower()
    return e.sql("duckdb", normalize_functions="lower")


_WORD = re.compile(r"[a-z_][a-z0-9_]*")
"""A function name as DuckDB SQL writes it: ``date_trunc`` and ``dayofweek``, where
sqlglot's own names for its classes are ``timestamp_trunc`` and ``day_of_week``."""
