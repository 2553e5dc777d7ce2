"""The bucket edges of a grouping expression over a binned attribute, exactly.

:mod:`~dpsql.planner.group_bins` answers ``GROUP BY floor(x / w)`` from released nodes
when every bucket edge is a bin edge. The readers here find the bucketing call around a
column (:func:`bucket_call`) and return its edges as leaf-bin indices ``(first, step,
count)``, or "misaligned" (:data:`BUCKETS`), with exact arithmetic on the decimals the
query writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.classify_calls import as_fraction
from dpsql.release_file import AttributeMeta


def number(x: exp.Expression) -> float | None:
    neg = False
    while isinstance(x, (exp.Paren, exp.Neg)):
        neg ^= isinstance(x, exp.Neg)
        x = x.this
    if isinstance(x, exp.Literal) and not x.is_string:
        try:
            v = float(x.this)
        except ValueError:
            return None
        return -v if neg else v
    return None


def leaf_grid(a: AttributeMeta) -> tuple[Fraction, Fraction]:
    """The exact lower bound and leaf-bin width of ``a``'s domain."""
    lower = as_fraction(a.lower)
    return lower, (as_fraction(a.upper) - lower) / a.bins


def _leaf(a: AttributeMeta, x: Fraction) -> int | None:
    """The leaf edge index of ``x``, or None off the grid (exactly: a bucket width of
    4.0000000001 is not the bins' 4, whose edges it would cut by a hair)."""
    lower, width = leaf_grid(a)
    b = (x - lower) / width
    return int(b) if b.denominator == 1 else None


def _progression(a: AttributeMeta, start: float, width: float | Fraction,
                 stop: float | None) -> tuple[int, int, int] | str:
    """Edges ``start + j·width`` (j ≥ 0, up to ``stop``), those inside the domain, as
    (first, step, count) leaf indices; "misaligned" if one of them is off the grid.
    Exact arithmetic on the decimals the numbers print as."""
    lower, leaf = leaf_grid(a)
    start, width = as_fraction(start), as_fraction(width)
    step = _leaf(a, lower + width) if width > 0 else None
    if step is None or step <= 0:
        return "misaligned"
    j0 = max(0, math.floor((lower - start) / width) + 1)  # first edge above lower
    lo_edge = start + j0 * width
    if stop is not None and lo_edge > as_fraction(stop):
        return (1, step, 0)
    first = _leaf(a, lo_edge)
    if first is None:
        return "misaligned"
    last = a.bins - 1 if stop is None else min(a.bins - 1,
                                               math.floor((as_fraction(stop) - lower) / leaf))
    count = 0 if last < first else (last - first) // step + 1
    return (first, step, count) if count else (1, step, 0)


def _floor_div(call: exp.Expression, col: exp.Column, a: AttributeMeta):
    """``floor(x / w)``, ``floor(x)`` or ``x // w``: edges at every multiple of w."""
    if isinstance(call, exp.Floor):
        if call.args.get("decimals") is not None:
            return None
        inner = _strip(call.this)
        if inner is col:
            w: float | None = 1.0
        elif isinstance(inner, exp.Div) and _strip(inner.this) is col:
            w = number(inner.expression)
        else:
            return None
    else:  # IntDiv: x // w, a floor division on whole values from 0 up only (DuckDB's //
        # truncates towards 0 and is a plain division on DOUBLEs)
        # (and on DECIMALs: ``x // 2.0`` is x / 2.0, so only a whole-number literal)
        if _strip(call.this) is not col or a.value_type != "integer" or a.lower < 0 \
                or not (isinstance(call.expression, exp.Literal)
                        and call.expression.this.isdigit()):
            return None
        w = number(call.expression)
    if w is None or w <= 0:
        return "misaligned"
    return _progression(a, 0.0, w, None)


def _strip(x: exp.Expression) -> exp.Expression:
    while isinstance(x, exp.Paren):
        x = x.this
    return x


def _width_bucket(call: exp.Expression, col: exp.Column, a: AttributeMeta):
    if _strip(call.this) is not col:
        return None
    low = number(call.args["min_value"])
    high = number(call.args["max_value"])
    n = number(call.args["num_buckets"])
    if low is None or high is None or n is None or n < 1 or n != int(n) or high <= low:
        raise UnsupportedQueryError(
            f"{call.sql('duckdb')}: width_bucket over a binned attribute needs numeric "
            "literals low < high and a whole number of buckets n >= 1")
    return _progression(a, low, (as_fraction(high) - as_fraction(low)) / int(n), high)


BUCKETS: dict[type, Callable] = {exp.Floor: _floor_div, exp.IntDiv: _floor_div,
                                 exp.WidthBucket: _width_bucket}
"""Bucketing call class -> ``edges(call, node, attribute)``: (first, step, count) leaf
edge indices, "misaligned", or None when the column is not the bucketed value."""


def bucket_call(col: exp.Column) -> exp.Expression | None:
    """The bucketing call that directly holds ``col`` (through a division for FLOOR)."""
    node: exp.Expression = col
    parent = col.parent
    while isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    if isinstance(parent, exp.Div) and _strip(parent.this) is _strip(node):
        up = parent.parent
        while isinstance(up, exp.Paren):
            up = up.parent
        if isinstance(up, exp.Floor):
            return up
    return parent if isinstance(parent, tuple(BUCKETS)) else None
