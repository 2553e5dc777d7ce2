"""A binned attribute in the condition of a join with a public table.

SQL compares the attribute row by row; the release holds nodes, each a range of bins,
and the rewrite puts a node in the place of its rows. The answer is the data's exactly
where the condition has one value over the rows of every node read, so it is answered
there and refused elsewhere:

* **a condition on the attribute alone** (an AND-ed term of ``ON`` with constants only:
  ``t.y < 50``, ``t.d BETWEEN DATE '2013-03-01' AND DATE '2013-03-31'``, ``t.m IS NOT
  NULL``, ``date_trunc('month', t.m) = DATE '2013-01-01'``): read as WHERE reads it
  (:func:`~dpsql.planner.predicate_truth.predicate_truth`: the parts of the axis where
  it is TRUE, and its value on a NULL row), it is a :class:`JoinFilter`. Each bound
  must be a bin edge; the level read then has nodes that lie wholly inside or outside
  it, and the term becomes a test of the node's bin. A bound inside a bin is refused
  (:func:`join_filters`): WHERE would interpolate it, which a join cannot (it keeps or
  drops each node whole);
* **a date part** (``year(t.m) = p.v``, ``month(t.m)``, ``extract(dow FROM t.d)``)
  whose unit's boundaries are bin edges (:func:`~dpsql.planner.date_parts.part_unit`)
  and ``date_trunc(unit, t.m)`` on such a unit: evaluated on each node's first value,
  from a level whose nodes lie in one unit (``Reference.truncs``). ``date_trunc`` finer
  than a day of a DATE compared with a public column is answered (:func:`against_column`);
* **a bucketing call** (``floor(t.x) = p.k``): :mod:`~dpsql.planner.group_bins`;
* **the bare column** compared with a public column (``t.k = p.k``):
  :func:`check_join_condition`, where a bin holds one value. ``t.m >= p.dd`` on month
  bins is right only if every ``p.dd`` is the first day of a month, which the planner,
  reading no table when it plans, does not know: refused, naming
  ``date_trunc('month', t.m) >= p.dd`` (the same rows on such values).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sqlglot import exp

from dpsql.domains.calendar import (CALENDAR_TYPES, TRUNC_UNITS, aligned_units, axis_text,
                                    edges_of, grid_index)
from dpsql.errors import UnsupportedQueryError
from dpsql.planner._names import conjuncts_of
from dpsql.planner.group_bins import bins_text, buckets_text, num_text, one_value_bins
from dpsql.planner.predicate_truth import (TRUE, predicate_truth, refuse_dropped_nulls,
                                           refuse_points)
from dpsql.planner.value_intervals import Intervals, pieces_condition
from dpsql.release_file import AttributeMeta


@dataclass(frozen=True)
class JoinFilter:
    """An AND-ed term of a join's ``ON`` on one binned attribute and constants: TRUE on
    the axis ``pieces`` (and on the NULL node where ``null``), whose bounds inside the
    domain are the leaf-bin edges ``edges``."""

    attribute: str
    pieces: Intervals
    null: bool
    edges: tuple[int, ...]
    condition: exp.Expression = field(compare=False, repr=False)
    """The term in the query (replaced by the test of the node's bin)."""

    def fits(self, span: int) -> bool:
        """True when nodes of ``span`` leaf bins never straddle a bound."""
        return all(e % span == 0 for e in self.edges)

    def signature(self) -> tuple[str, tuple[int, ...]]:
        return (self.attribute, self.edges)

    def sql(self, lo: str, hi: str) -> str:
        """The term on a node whose bin is [``lo``, ``hi``) (NULL bounds: the NULL node):
        the node overlaps the pieces, so lies inside them (its edges do not cut them)."""
        inside = pieces_condition(self.pieces, lo, hi)
        if self.null:
            return f"({inside} OR {lo} IS NULL)"
        return f"({inside} AND {lo} IS NOT NULL)"


def join_filters(joins: list[exp.Join], owned, release) -> list[JoinFilter]:
    """The :class:`JoinFilter` of each AND-ed term of the joins' ``ON`` conditions whose
    columns are all of one binned attribute of this reference (``owned``) and that WHERE
    would read (:func:`~dpsql.planner.predicate_truth.predicate_truth`). A term WHERE
    does not read (``t.k + 1 = 5``, ``year(t.m) = 2013``) is left to the column rules.
    Refused, as WHERE refuses them: a term TRUE on the NULL rows of an attribute with
    ``on_null = "drop"``, one that keeps or leaves out a single point of a real axis;
    and a bound inside a bin (the join keeps or drops each node whole)."""
    out: list[JoinFilter] = []
    for j in joins:
        on = j.args.get("on")
        for c in conjuncts_of(on) if on is not None else ():
            cols = list(c.find_all(exp.Column))
            if not cols or c.find(exp.Query) is not None or not all(map(owned, cols)):
                continue
            metas = {id(release.column_attribute(x.name)) for x in cols}
            a = release.column_attribute(cols[0].name)
            if len(metas) != 1 or a is None or a.kind != "range":
                continue

            def is_attr(x: exp.Expression, a=a) -> bool:
                return isinstance(x, exp.Column) and owned(x) and \
                    release.column_attribute(x.name) is a
            try:
                truth = predicate_truth(c, a, is_attr)
            except UnsupportedQueryError:
                continue
            refuse_dropped_nulls(truth, c, a, is_attr)
            refuse_points(truth, c, a)
            edges = []
            for x in sorted({x for p in truth.true for x in p if a.lower < x < a.upper}):
                b = grid_index(a, x)
                if b is None:
                    raise _inside_bin(c, a, x)
                edges.append(b)
            out.append(JoinFilter(a.name, truth.true, truth.at_null == TRUE, tuple(edges), c))
    return out


def _inside_bin(c: exp.Expression, a: AttributeMeta, x: float) -> UnsupportedQueryError:
    edges = edges_of(a)
    i = int(np.searchsorted(edges, x))
    near = " and ".join(_value_text(a, e) for e in (edges[i - 1], edges[i]))
    return UnsupportedQueryError(
        f"the JOIN condition {c.sql('duckdb')!r} puts a bound of the binned attribute "
        f"{a.name!r} at {_value_text(a, x)}, inside a released bin ({bins_text(a)}; the "
        f"nearest edges are {near}): the release does not know the bin's rows on either "
        f"side of it, and a join keeps or drops each bin whole. Write the bound on a bin "
        f"edge; or, in an inner join, move the condition to WHERE, which answers a bound "
        f"inside a bin by interpolation (approximate)")


def _value_text(a: AttributeMeta, x: float) -> str:
    if a.value_type in CALENDAR_TYPES:
        return f"{a.value_type.upper()} '{axis_text(a.value_type, float(x))}'"
    return num_text(float(x)) if math.isfinite(x) else str(x)


def against_column(call: exp.Expression) -> bool:
    """``call`` is one side of a comparison (``=``, ``<``, ...: not ``IN``, ``BETWEEN``
    or a CASE) whose other side reads a column: a join's comparison with a public
    column, which DuckDB evaluates row by row, right for ``date_trunc('hour', d)`` of a
    DATE too (its wrong rewrite, duckdb#19635, is of comparisons with a constant)."""
    node, parent = call, call.parent
    while isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    if not isinstance(parent, _COMPARISONS):
        return False
    other = parent.expression if parent.this is node else parent.this
    return other.find(exp.Column) is not None

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
            f"its released bins hold many values ({bins_text(a)}), each of which the join "
            "would read as its lower bound")
    part = _condition(col)
    where = "JOIN condition" if part.arg_key in ("on", "match_condition") else "join"
    raise UnsupportedQueryError(
        f"the binned attribute {a.name!r} in the {where} {part.sql('duckdb')!r} is not "
        f"supported: SQL reads it row by row, and {what}.{_unit_starts_text(col, parent, a)}"
        f" Count by its bins first "
        f"and join the released bins (WITH q AS (SELECT {a.name}, COUNT(*) AS n FROM <table> "
        f"GROUP BY {a.name}) SELECT ... FROM q JOIN ... ON q.{a.name} ...: each bin as its "
        f"lower bound), join on {buckets_text(a, level_widths)}, or filter {a.name} in WHERE with "
        "literal bounds")


_AT_LEAST = {(exp.GTE, True): ">=", (exp.LT, True): "<", (exp.LTE, False): ">=",
             (exp.GT, False): "<"}
"""(comparison, the column on its left) -> the operator of ``col >= w`` or ``col < w``."""


def _unit_starts_text(col: exp.Column, parent: exp.Expression | None,
                      a: AttributeMeta) -> str:
    """For ``t.m >= p.dd`` on calendar bins (month bins: ``date_trunc('month', ·)``
    aligns): the same rows as ``date_trunc('month', t.m) >= p.dd`` where every ``p.dd``
    is the first day of a month, which the planner cannot know (it reads no table to
    plan). Offered, with that condition; '' for any other shape."""
    units = aligned_units(a) if a.value_type in TRUNC_UNITS else ()
    if not units or not isinstance(parent, (exp.GTE, exp.LT, exp.LTE, exp.GT)):
        return ""
    left = parent.this.unnest() is col
    op = _AT_LEAST.get((type(parent), left))
    other = parent.expression if left else parent.this
    if op is None or other.find(exp.Column) is None:
        return ""
    u, w = units[0], other.sql("duckdb")
    return (f" Where {w} holds only {_START[u]}, {col.sql('duckdb')} "
            f"{op} {w} is date_trunc('{u}', {col.sql('duckdb')}) {op} {w}, which is "
            f"answered (the planner reads no table to plan, so it cannot check {w}'s "
            f"values itself).")


_START = {"second": "whole seconds", "minute": "whole minutes", "hour": "whole hours",
          "day": "midnights", "week": "Mondays", "month": "first days of months",
          "quarter": "first days of quarters", "year": "first days of years",
          "isoyear": "first days of ISO years",
          "decade": "first days of decades", "century": "first days of centuries",
          "millennium": "first days of millennia"}


def _condition(col: exp.Column) -> exp.Expression:
    """The part of the join that holds ``col``: its ON condition, or the joined table
    (``unnest([t.x])``, a LATERAL subquery)."""
    node: exp.Expression = col
    while node.parent is not None and not isinstance(node.parent, exp.Join):
        node = node.parent
    return node


__all__ = ["JoinFilter", "against_column", "check_join_condition", "join_filters"]
