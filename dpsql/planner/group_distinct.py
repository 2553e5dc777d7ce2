"""``SELECT DISTINCT`` of labels over the private table, as the GROUP BY it is in SQL.

Called by :mod:`~dpsql.planner.find_references` for a SELECT over the private table
that has no aggregate and no GROUP BY (otherwise refused as row-level access).
"""

from __future__ import annotations

from sqlglot import exp


def group_distinct(select: exp.Select) -> bool:
    """``SELECT DISTINCT <labels> FROM t`` (no aggregate, no GROUP BY) is ``SELECT
    <labels> FROM t GROUP BY ALL`` in SQL: rewrite it so (BI tools list a filter's values
    this way) and answer True. Like any GROUP BY of the release, it lists every public
    category the WHERE keeps, whether or not its released count is 0: which values occur
    is what the release must not reveal. Not for ``DISTINCT ON`` (one arbitrary row per
    key), a star (rows) or a window function (over rows): they stay refused."""
    distinct = select.args.get("distinct")
    if not isinstance(distinct, exp.Distinct) or distinct.args.get("on") is not None:
        return False
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(
            e.this, exp.Star)) or e.find(exp.Window) for e in select.expressions):
        return False
    select.set("distinct", None)
    select.set("group", exp.Group(all=True))
    return True
