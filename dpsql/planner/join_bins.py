"""A binned attribute in the condition of a join with a public table.

SQL compares the attribute row by row; the release holds nodes, each a range of bins,
and the rewrite puts each node's bin in the column's place. The answer is the data's
only where the condition has one value over every row of a node.
:func:`check_join_condition` decides that for a bare column (outside a bucketing call
or ``date_trunc``, which :mod:`~dpsql.planner.group_bins` answers on whole bins).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.group_bins import _buckets_text, _num, one_value_bins
from dpsql.release_file import AttributeMeta

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ,
                exp.NullSafeNEQ)


def check_join_condition(col: exp.Column, a: AttributeMeta,
                         level_widths: Callable[[], tuple[float, ...]]) -> None:
    """A binned column in a JOIN condition (outside a bucketing call or ``date_trunc``)
    is compared row by row in SQL, and on the release with each node's bin lower bound:
    the same only where a bin holds one value. So it is answered on integer, date and
    timestamp attributes whose bins hold one value each (the bound is that value, of the
    data's kind), and on such decimal attributes only compared as it is (the bound is a
    DOUBLE where the data has a DECIMAL: ``p::INT`` rounds 2.5 to 2, the data's 2.50 to
    3). Elsewhere it is refused: ``t.x > pub.w`` on bins of 0.125 read each bin as its
    lower bound, and left out the bin just above w (5,911 trips of 6,000 where w = 0),
    and ``t.m = pub.d`` on month bins counted the whole month. ``level_widths()``: the
    node widths of the levels that hold ``a`` (asked for the message only)."""
    parent = col.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if one_value_bins(a) and (a.value_type != "decimal" or isinstance(parent, _COMPARISONS)):
        return
    what = ("its bins hold one value each, but as DOUBLEs (the data's are DECIMALs), so "
            f"compare {a.name} itself with =, <>, <, <=, >, >=" if one_value_bins(a) else
            f"its released bins hold many values ({_bin_text(a)}), each of which the join "
            "would read as its lower bound")
    part = _condition(col)
    where = "JOIN condition" if part.arg_key in ("on", "match_condition") else "join"
    raise UnsupportedQueryError(
        f"the binned attribute {a.name!r} in the {where} {part.sql('duckdb')!r} is not "
        f"supported: SQL reads it row by row, and {what}. Count by its bins first "
        f"and join the released bins (WITH q AS (SELECT {a.name}, COUNT(*) AS n FROM <table> "
        f"GROUP BY {a.name}) SELECT ... FROM q JOIN ... ON q.{a.name} ...: each bin as its "
        f"lower bound), join on {_buckets_text(a, level_widths)}, or filter {a.name} in WHERE with "
        "literal bounds")


def _condition(col: exp.Column) -> exp.Expression:
    """The part of the join that holds ``col``: its ON condition, or the joined table
    (``unnest([t.x])``, a LATERAL subquery)."""
    node: exp.Expression = col
    while node.parent is not None and not isinstance(node.parent, exp.Join):
        node = node.parent
    return node


def _bin_text(a: AttributeMeta) -> str:
    return a.unit + " bins" if a.unit else f"bins {_num(a.width)} wide"


__all__ = ["check_join_condition"]
