"""Pass 2, volatile functions: refused where they would be evaluated per released node.

A SELECT over the private table runs on released nodes (one row per node of a level),
not on the data's rows. A deterministic expression of the labels gives every row of a
node the same value, so filtering, joining and grouping nodes is exactly filtering,
joining and grouping rows. A **volatile** function (a new value at each call:
``random()``, ``uuid()``, ``gen_random_uuid()``, ``nextval()``...; DuckDB's
``stability = 'VOLATILE'`` functions, :data:`VOLATILE`) is not: ``WHERE random() < 0.5``
would keep or drop whole nodes, each holding many rows, and ``GROUP BY random() < 0.5``
would split nodes, not rows. So it is refused in the WHERE clause, the JOIN conditions and
the grouping keys (GROUP BY, and the SELECT items that GROUP BY ALL, an ordinal or an
output alias makes keys, which includes ``SELECT DISTINCT``) of a SELECT that reads the
private table.

Elsewhere it stays: in the SELECT list, HAVING, QUALIFY and ORDER BY it is evaluated once
per output row (group), on the release as on the data, and in a query over the aggregated
result it sees that result's rows. Functions that are constant within a query
(``now()``, ``current_date``, ``current_setting(...)``) are deterministic here and stay
everywhere.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError

VOLATILE = frozenset((
    "random", "rand", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "setseed", "nextval",
    "currval", "setval", "current_connection_id", "current_query", "current_query_id",
    "current_transaction_id", "error", "sleep_ms", "stats", "vector_type", "write_log"))
"""DuckDB's volatile scalar functions (``duckdb_functions()`` with ``stability =
'VOLATILE'``; a test checks the list against the installed DuckDB)."""

_TYPED = {exp.Rand: "random", exp.Uuid: "uuid"}
"""sqlglot's own classes for some of them (the others parse as ``Anonymous``)."""


def volatile_name(node: exp.Expression) -> str | None:
    """The name of the volatile function ``node`` calls, or None."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        return name if name in VOLATILE else None
    return _TYPED.get(type(node))


def refuse_volatile(select: exp.Select, table_name: str) -> None:
    """Raise :class:`UnsupportedQueryError` for a volatile call in the WHERE, a JOIN
    condition or a grouping key of ``select``, which reads the private table
    ``table_name``."""
    where = select.args.get("where")
    if where is not None:
        _check(where, "WHERE", table_name)
    for join in select.args.get("joins") or ():
        for arg in ("on", "using", "match_condition"):
            if join.args.get(arg) is not None:
                cond = join.args[arg]
                for c in cond if isinstance(cond, list) else (cond,):
                    _check(c, "JOIN ... ON", table_name)
    group = select.args.get("group")
    if group is None:
        return
    _check(group, "GROUP BY", table_name)
    items = select.expressions
    if group.args.get("all"):
        for e in items:
            if not e.find(exp.AggFunc):
                _check(e, "GROUP BY ALL (a grouping key)", table_name)
        return
    aliases = {e.alias.lower(): e for e in items if isinstance(e, exp.Alias)}
    for node in group.walk():
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit() \
                and 1 <= int(node.this) <= len(items):
            _check(items[int(node.this) - 1], "GROUP BY (by position)", table_name)
        elif isinstance(node, exp.Column) and not node.table \
                and node.name.lower() in aliases:
            _check(aliases[node.name.lower()], "GROUP BY (by its alias)", table_name)


def _check(node: exp.Expression, clause: str, table_name: str) -> None:
    for x in node.walk():
        name = volatile_name(x)
        if name is not None:
            raise UnsupportedQueryError(
                f"{name}() in {clause} of a query over the private table {table_name!r} "
                f"is not supported: it is volatile (a new value at every call), and the "
                f"query runs on released nodes, each holding many rows, not on the "
                f"data's rows, so it would keep, drop or group whole nodes at random. "
                f"Use it in the SELECT list, HAVING or ORDER BY (once per output row), "
                f"or in a query over the aggregated result: WITH r AS (SELECT ..., "
                f"COUNT(*) AS n FROM {table_name} GROUP BY ...) SELECT ... FROM r WHERE ...")
