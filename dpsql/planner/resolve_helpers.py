"""Pass 1c: the release's public helpers, by the names the docs give them.

A release stores SQL macros (``udfs/dpsql_macros.sql``) and public tables that a DuckDB
client opening the file directly reaches by name: ``dp_level(view, k)``,
``dp_attribute_bounds(attr)``, ``dp_range(view, attr, lo, hi)``, ``dp_cum(view, attr,
x)``, ``dpsql_domain__<attr>``. Every analyst entry point ATTACHes the release under an
alias instead, where DuckDB finds none of them unqualified, and the stored macros, whose
bodies name release tables unqualified, fail even when qualified. So this pass resolves
them against the catalog, the same way for ``dpsql.connect``, ``dpsql.attach``,
``dpsql query``, ``dpsql serve`` and the SQLAlchemy dialect:

* ``dp_level('view', k)`` (in FROM) reads the level table of that view, qualified by its
  release's alias (``'alias.view'`` picks one of several releases); an unknown view or
  level gets an error listing the views and their depths;
* ``dp_attribute_bounds('attr')`` becomes the bounds from the catalog, as a VALUES row;
* ``dp_range(view, attr, lo, hi)`` and ``dp_cum(view, attr, x)`` (the count of
  ``[lower, x)``) become the registered UDF ``dp_range_count`` (the same prefix sums,
  the same interpolation inside a bin);
* an unqualified table name that is one of a release's own tables (``dpsql_domain__mode``,
  ``dist__l3``, ``dpsql_release``...) and no CTE gets the release's alias.

Nothing here opens a way around the lock-down: each rewrite names a release table or a
registered UDF, which the analyst could already reach by its qualified name; the
arguments must be literals (after parameter binding), so no text becomes SQL.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner._names import names_cte
from dpsql.planner.catalog import Catalog
from dpsql.planner.parse_sql import Walked

SCALARS = ("dp_range", "dp_cum")
"""Stored scalar macros, computed by the registered UDF ``dp_range_count``."""

TABLE_MACROS = ("dp_level", "dp_attribute_bounds")
HELPERS = frozenset(TABLE_MACROS + SCALARS)
"""Every helper this pass resolves (``dpsql serve`` routes a statement naming one to the
planner)."""


def resolve_helpers(walked: Walked, catalog: Catalog) -> None:
    """Rewrite, in place, the helper calls and release table names in ``walked``."""
    if not catalog.releases:
        return
    cte_names = {c.alias_or_name.lower() for c in walked.ctes}
    for t in walked.tables:
        this = t.this
        if isinstance(this, exp.Anonymous):
            name = this.name.lower()
            if name in TABLE_MACROS:
                _table_macro(t, name, this, catalog)
            continue
        if t.args.get("db") or not isinstance(this, exp.Identifier):
            continue
        lname = this.name.lower()
        if lname in cte_names and names_cte(t):
            continue
        for r in catalog.releases:
            if lname in r.table_names:
                t.set("db", exp.to_identifier(r.alias, quoted=True))
                break
    for calls in [s.calls for s in walked.scopes.values()] + [walked.reads]:
        for call in calls:
            if isinstance(call, exp.Anonymous) and call.name.lower() in SCALARS:
                _scalar_macro(call)


def _scalar_macro(call: exp.Anonymous) -> None:
    args = list(call.expressions)
    if call.name.lower() == "dp_cum":  # [lower, x): from minus infinity (clamped)
        args.insert(2, exp.Var(this="CAST('-infinity' AS DOUBLE)"))
    call.set("this", "dp_range_count")
    call.set("expressions", args)


def _literal(call: exp.Anonymous, i: int, want: type) -> object:
    args = call.expressions
    x = args[i] if i < len(args) else None
    if isinstance(x, exp.Literal) and (x.is_string == (want is str)):
        return x.this if want is str else int(float(x.this))
    raise UnsupportedQueryError(
        f"{call.sql('duckdb')}: {call.name.lower()} takes literal arguments, e.g. "
        "dp_level('dist', 3) or dp_attribute_bounds('distance')")


def _level(call: exp.Anonymous, key: str, view, shown: str) -> int:
    """The level ``k`` of ``dp_level(view, k)``: a whole-number literal, nothing else
    (``1.5``, ``'1'``, ``NULL`` or ``1 + 1`` named a level table that does not exist, or
    read level 1 for 1.5)."""
    args = call.expressions
    x = args[1] if len(args) == 2 else None
    if isinstance(x, exp.Literal) and not x.is_string and x.this.isdigit():
        return int(x.this)
    got = "nothing" if x is None else x.sql("duckdb")
    levels = (f"the levels of {key!r} are 1 to {view.meta.depth}" if view is not None
              else f"{key!r} is no view; the views are: {shown}")
    raise UnsupportedQueryError(
        f"dp_level({', '.join(a.sql('duckdb') for a in args)}): the level k of "
        f"dp_level(view, k) must be a whole-number literal, got {got}; {levels}")


def _table_macro(t: exp.Table, name: str, call: exp.Anonymous, catalog: Catalog) -> None:
    if name == "dp_level":
        shown = ", ".join(f"'{v.name}' (levels 1-{v.meta.depth})"
                          for r in catalog.releases for v in r.views)
        key = _literal(call, 0, str)
        view = catalog.find_view(key)
        k = _level(call, key, view, shown)
        if view is None or not 1 <= k <= view.meta.depth:
            raise UnsupportedQueryError(
                f"dp_level({key!r}, {k}): no such view and level; the views are: {shown} "
                "(write 'alias.view' to pick one of several releases)")
        t.set("this", exp.to_identifier(view.level(k).table, quoted=True))
        t.set("db", exp.to_identifier(view.alias, quoted=True))
        t.set("catalog", None)
        return
    attr = _literal(call, 0, str)
    for r in catalog.releases:
        a = r.attributes.get(attr)
        if a is not None and a.kind == "range":
            alias = t.args.get("alias")
            t.replace(exp.Var(this=(
                f"(SELECT * FROM (VALUES (CAST({float(a.lower)!r} AS DOUBLE), "
                f"CAST({float(a.upper)!r} AS DOUBLE), CAST({int(a.bins)} AS BIGINT))) AS "
                "b(lower, upper, bins)) AS "
                + (alias.sql("duckdb") if alias is not None else "dp_attribute_bounds"))))
            return
    binned = sorted(a.name for r in catalog.releases for a in r.attributes.values()
                    if a.kind == "range")
    raise UnsupportedQueryError(
        f"dp_attribute_bounds({attr!r}): no binned attribute of that name; the binned "
        f"attributes are: {', '.join(binned) or 'none'}")

