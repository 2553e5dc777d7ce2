"""Which names in ORDER BY and HAVING DuckDB binds to an output alias, not to a column.

An analyst may name an output like an attribute: ``SELECT c, COUNT(*) AS k FROM t GROUP
BY c ORDER BY k``. DuckDB binds such a name so:

* **ORDER BY**: an item that is exactly an unqualified name of an output alias (in
  parentheses or not) is that output (``ORDER BY k DESC`` sorts by the count); inside
  an expression (``ORDER BY -k``) the name is the column.
* **HAVING**: an unqualified name outside an aggregate is the column when the column is
  one of the grouping keys (``GROUP BY k``, ``GROUP BY kk`` where ``kk`` is ``k``, ``GROUP
  BY ALL``...), else the output alias (``HAVING k > 100`` filters on the count).
* WHERE, GROUP BY and QUALIFY bind the column first.

The planner read every such name as the attribute, so ``SELECT k AS kk, COUNT(*) AS k
FROM t GROUP BY k ORDER BY k DESC LIMIT 3`` listed the three highest bins of ``k``
where DuckDB on the data lists the three largest counts (a silent wrong answer), and
``HAVING k > 1900`` with ``k`` a count failed inside DuckDB on the rewritten query.
:func:`alias_bound` finds those names, which are then not references to the release and
are left for DuckDB to bind to the output, as on the data.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.planner.classify_calls import enclosing_call


def alias_bound(select: exp.Select, out_aliases: set[str], columns: list[exp.Column],
                column_args: list[str]) -> set[int]:
    """``id()`` of each of ``columns`` (the SELECT's own, under ``column_args``) that
    DuckDB binds to an output alias of ``select``, whose lower-cased names are
    ``out_aliases``."""
    if not out_aliases:
        return set()
    found: set[int] = set()
    grouped: set[str] | None = None
    for col, arg in zip(columns, column_args):
        if col.table or col.name.lower() not in out_aliases:
            continue
        if arg == "order":
            item: exp.Expression = col
            while isinstance(item.parent, exp.Paren):  # ORDER BY (k) is ORDER BY k
                item = item.parent
            if isinstance(item.parent, exp.Ordered) and item.parent.this is item:
                found.add(id(col))
        elif arg == "having" and enclosing_call(col) is None:
            if grouped is None:
                grouped = _grouped_names(select)
            if col.name.lower() not in grouped:
                found.add(id(col))
    return found


def _grouped_names(select: exp.Select) -> set[str]:
    """The lower-cased names of the columns that are grouping keys of ``select`` as
    written or through an output alias, an ordinal or GROUP BY ALL."""
    outputs = {e.alias.lower(): e.this for e in select.expressions if isinstance(e, exp.Alias)}
    group = select.args.get("group")
    if group is None:
        return set()
    items: list[exp.Expression] = []
    if group.args.get("all"):
        items += [e.this if isinstance(e, exp.Alias) else e for e in select.expressions
                  if not e.find(exp.AggFunc)]
    for key in ("expressions", "rollup", "cube", "grouping_sets"):
        for item in group.args.get(key) or ():
            items += _leaves(item)
    names: set[str] = set()
    for item in items:
        if isinstance(item, exp.Literal) and item.is_int:
            i = int(item.this) - 1
            if 0 <= i < len(select.expressions):
                e = select.expressions[i]
                item = e.this if isinstance(e, exp.Alias) else e
        if isinstance(item, exp.Column):
            target = outputs.get(item.name.lower()) if not item.table else None
            # a name binds the column first; an alias only when no column is named so:
            # both readings are kept (a superset keeps the column reading, the old one)
            names.add(item.name.lower())
            if isinstance(target, exp.Column):
                names.add(target.name.lower())
    return names


def _leaves(item: exp.Expression) -> list[exp.Expression]:
    """The grouping expressions inside ROLLUP(...), CUBE(...), GROUPING SETS ((...))."""
    if isinstance(item, (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple, exp.Paren)):
        out: list[exp.Expression] = []
        for e in item.expressions if not isinstance(item, exp.Paren) else (item.this,):
            out += _leaves(e)
        return out
    return [item]
