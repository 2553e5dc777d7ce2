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
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.domains.bin_edges import bin_edge, bin_edges
from dpsql.planner.classify_calls import as_fraction, literal_value
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


def _progression(a: AttributeMeta, start: float | Fraction, width: float | Fraction,
                 stop: float | None) -> tuple[int, int, int] | Misaligned:
    """Edges ``start + j·width`` (j ≥ 0, up to ``stop``), those inside the domain, as
    (first, step, count) leaf indices; :class:`Misaligned` if one is off the grid.
    Exact arithmetic on the decimals the numbers print as."""
    lower, leaf = leaf_grid(a)
    start, width = as_fraction(start), as_fraction(width)
    step = _leaf(a, lower + width) if width > 0 else None
    if step is None or step <= 0:
        return Misaligned()
    j0 = max(0, math.floor((lower - start) / width) + 1)  # first edge above lower
    lo_edge = start + j0 * width
    if stop is not None and lo_edge > as_fraction(stop):
        return (1, step, 0)
    first = _leaf(a, lo_edge)
    if first is None:
        return Misaligned()
    last = a.bins - 1 if stop is None else min(a.bins - 1,
                                               math.floor((as_fraction(stop) - lower) / leaf))
    count = 0 if last < first else (last - first) // step + 1
    return (first, step, count) if count else (1, step, 0)


@dataclass(frozen=True)
class Misaligned:
    """A bucketing whose edges cut released bins. ``why``: how DuckDB's DOUBLE arithmetic
    moves an edge that is on the grid in exact arithmetic (empty when an edge is off the
    grid)."""

    why: str = ""


def _floor_div(call: exp.Expression, col: exp.Column, a: AttributeMeta):
    """``floor(g(x))`` for an increasing affine ``g`` of constants (:func:`_affine`:
    ``x / w``, ``x * m``, ``(x - o) / w``, ``x``) or ``x // w``: edges where ``g(x)`` is
    a whole number, ``o + j·w``. Each must be a bin edge, exactly, and DuckDB's
    arithmetic on the data must put its edges there too (:func:`_duck_cut`)."""
    if isinstance(call, exp.Floor):
        if call.args.get("decimals") is not None:
            return None
        ops = _affine(col, call)
        if ops is None:
            return None
        scale, shift = Fraction(1), Fraction(0)
        for kind, k, _ in ops:
            scale, shift = _EXACT[kind](scale, shift, k)
        if scale <= 0:  # floor(-x): each edge in the bucket below it, the bin above
            return Misaligned(f"{call.sql('duckdb')} decreases with {a.name}, so that a "
                              "value on a bucket edge is in the bucket below it, and a bin "
                              "holds its lower edge")
        width, start = 1 / scale, -shift / scale
        lower = leaf_grid(a)[0]
        if start > lower:  # edges below ``start`` too: begin at one at or below lower
            start -= math.ceil((start - lower) / width) * width
        found = _progression(a, start, width, None)
        if isinstance(found, tuple) and found[2]:
            return _duck_cut(call, ops, a, found) or found
        return found
    # IntDiv: x // w, a floor division on whole values from 0 up only (DuckDB's //
    # truncates towards 0 and is a plain division on DOUBLEs)
    # (and on DECIMALs: ``x // 2.0`` is x / 2.0, so only a whole-number literal)
    if _strip(call.this) is not col or a.value_type != "integer" or a.lower < 0 \
            or not (isinstance(call.expression, exp.Literal)
                    and call.expression.this.isdigit()):
        return None
    w = number(call.expression)
    if w is None or w <= 0:
        return Misaligned()
    return _progression(a, 0.0, w, None)


_Number = Fraction | float
"""A value as DuckDB computes it: exact (an INTEGER or DECIMAL: a Fraction) or a DOUBLE."""

_EXACT = {
    "add": lambda s, c, k: (s, c + k), "sub": lambda s, c, k: (s, c - k),
    "rsub": lambda s, c, k: (-s, k - c), "mul": lambda s, c, k: (s * k, c * k),
    "div": lambda s, c, k: (s / k, c / k), "neg": lambda s, c, k: (-s, -c)}
"""Each step of :func:`_affine` on ``scale·x + shift``, exactly."""


def _affine(col: exp.Column, top: exp.Expression
            ) -> list[tuple[str, Fraction, _Number]] | None:
    """The steps from ``col`` up to the argument of ``top`` (its FLOOR), each an
    arithmetic operation with a constant: ``(kind, constant as written, constant as
    DuckDB types it)``; None when something else stands between them."""
    ops: list[tuple[str, Fraction, _Number]] = []
    node: exp.Expression = col
    while True:
        parent = node.parent
        if parent is top:
            return ops if node is top.this else None
        if isinstance(parent, exp.Paren):
            node = parent
            continue
        if isinstance(parent, exp.Neg):
            ops.append(("neg", Fraction(0), Fraction(0)))
            node = parent
            continue
        if not isinstance(parent, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            return None
        left = node is parent.this
        k = _constant(parent.expression if left else parent.this)
        if k is None:
            return None
        if isinstance(parent, exp.Add):
            kind = "add"
        elif isinstance(parent, exp.Sub):
            kind = "sub" if left else "rsub"
        elif isinstance(parent, exp.Mul):
            kind = "mul"
        elif left and k[0] != 0 and not parent.args.get("typed"):
            # a division by a nonzero constant: sqlglot's ``safe`` (NULL on a zero divisor;
            # sqlglot 28 marks DuckDB's ``/`` so, 30 does not) changes nothing here
            kind = "div"
        else:
            return None
        ops.append((kind, *k))
        node = parent


def _constant(node: exp.Expression) -> tuple[Fraction, _Number] | None:
    """A constant of numeric literals (``12.5``, ``-0.5``, ``(1/2)``): its value as
    written, exactly, and as DuckDB computes it (an INTEGER or DECIMAL literal exact, a
    literal with an exponent a DOUBLE, a ``/`` a DOUBLE division); None otherwise."""
    node = _strip(node)
    if isinstance(node, exp.Neg):
        k = _constant(node.this)
        return None if k is None else (-k[0], -k[1])
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return Fraction(node.this), literal_value(node, "")
        except (ValueError, ZeroDivisionError, UnsupportedQueryError):
            return None
    kinds = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div"}
    kind = kinds.get(type(node))
    if kind is None:
        return None
    left, right = _constant(node.this), _constant(node.expression)
    if left is None or right is None or (kind == "div" and right[0] == 0):
        return None
    return _exact_op(kind, left[0], right[0]), _duck_op(kind, left[1], right[1])


def _exact_op(kind: str, x: Fraction, k: Fraction) -> Fraction:
    s, c = _EXACT[kind](Fraction(1), Fraction(0), k)
    return s * x + c


def _duck_op(kind: str, x: _Number, k: _Number) -> _Number:
    """One step as DuckDB computes it: exact on INTEGERs and DECIMALs but for ``/``,
    which divides DOUBLEs, and in DOUBLE as soon as one side is one (IEEE round to
    nearest, as Python's floats)."""
    if isinstance(x, Fraction) and isinstance(k, Fraction) and kind != "div":
        return _exact_op(kind, x, k)
    x, k = (x if isinstance(x, np.ndarray) else float(x)), float(k)
    return {"add": lambda: x + k, "sub": lambda: x - k, "rsub": lambda: k - x,
            "mul": lambda: x * k, "div": lambda: x / k, "neg": lambda: -x}[kind]()


def _duck_cut(call: exp.Expression, ops, a: AttributeMeta, found: tuple[int, int, int]
              ) -> Misaligned | None:
    """Whether DuckDB, computing the bucket on the data, puts every value of a bucket's
    bins in one bucket: the exact edges are bin edges, but a division by a decimal is
    a DOUBLE division (``0.3 / 0.1`` is 2.9999999999999996, so that 0.3 falls in
    bucket 2, while the bins hold it with 0.35). The bucket of a value rises with it
    (each step is monotone in IEEE arithmetic), so it is checked at the first and the
    last value of the data in each bucket's bins: the bin edge and the double below the
    next one for a real attribute, the first and last grid values for integers and
    decimals. Exact arithmetic (integer and decimal values, ``+ - *`` of INTEGER and
    DECIMAL constants) needs no check."""
    if a.value_type not in ("integer", "decimal", "real"):
        return None  # a date or timestamp: no arithmetic (DuckDB refuses it)
    if a.value_type != "real" and all(isinstance(k, Fraction) and kind != "div"
                                      for kind, _, k in ops):
        return None
    first, step, count = found
    cuts = np.concatenate([[0], first + step * np.arange(count), [a.bins]])
    if a.value_type == "real":  # DOUBLEs from the start: numpy's IEEE arithmetic, at once
        x0 = bin_edges(a.lower, a.upper, a.bins, cuts[:-1], a.edge_mode)
        x1 = np.nextafter(bin_edges(a.lower, a.upper, a.bins, cuts[1:], a.edge_mode),
                          -np.inf)
        bad = np.nonzero(_bucket(ops, x0) != _bucket(ops, x1))[0]
        pairs = [(float(x0[i]), float(x1[i])) for i in bad[:1]]
    else:
        pairs = _grid_pairs(a, ops, cuts)
        if pairs is None:  # numbers beyond 2**53: one bucket at a time, exactly
            pairs = [(x0, x1) for x0, x1 in ((_first_value(a, int(lo)),
                                              _last_value(a, int(hi)))
                                             for lo, hi in zip(cuts, cuts[1:]))
                     if x0 <= x1 and _bucket(ops, x0) != _bucket(ops, x1)][:1]
    for x0, x1 in pairs:
        return Misaligned(
            f"DuckDB computes it in DOUBLE, where it is {_bucket(ops, x0):g} at {a.name} = "
            f"{_text(x0)} and {_bucket(ops, x1):g} at {_text(x1)}, values of one bucket's "
            f"bins; floor({a.name} / w) with a power of two w (0.5, 0.25, 2, 4) is exact "
            "in DOUBLE")
    return None


_EXACT_INT = 2 ** 53


def _grid_pairs(a: AttributeMeta, ops, cuts: np.ndarray) -> list | None:
    """:func:`_duck_cut` for integer and decimal values, all buckets at once: the first
    and last grid values ``k·step`` of each bucket's bins as integer indices ``k``; the
    exact steps before the first DOUBLE one make ``(A·k + B) / D``, which is one correctly
    rounded division of exact doubles while ``|A·k + B|`` and ``D`` stay within 2⁵³ (as
    DuckDB's cast of the exact value to DOUBLE rounds it); the rest in numpy's IEEE
    arithmetic. The first bucket whose ends differ, as exact values, or None when the
    numbers leave that range."""
    lower, leaf = leaf_grid(a)
    step = as_fraction(a.step or 1)
    p, u = lower / step, leaf / step  # grid index of edge b: ceil(p + b·u)
    q = math.lcm(p.denominator, u.denominator)
    pn, un = int(p * q), int(u * q)
    if abs(pn) + abs(un) * a.bins >= 2 ** 62 or q >= 2 ** 62:
        return None
    b = cuts.astype(np.int64)
    first = -((-(pn + b * un)) // q)  # the first grid index at or above each edge
    k0, k1 = first[:-1], first[1:] - 1
    keep = k0 <= k1
    k0, k1 = k0[keep], k1[keep]
    scale, shift, i = step, Fraction(0), 0  # the value k·step, then the exact steps
    while i < len(ops) and ops[i][0] != "div" and isinstance(ops[i][2], Fraction):
        scale, shift = _EXACT[ops[i][0]](scale, shift, ops[i][2])
        i += 1
    d = math.lcm(scale.denominator, shift.denominator)
    big, small = int(scale * d), int(shift * d)
    top = max(abs(big) * int(max(np.abs(k0).max(initial=0), np.abs(k1).max(initial=0)))
              + abs(small), d)
    if top > _EXACT_INT:
        return None
    ends = [np.float64(big * k + small) / np.float64(d) for k in (k0, k1)]
    f0, f1 = (_bucket(ops[i:], x) for x in ends)
    bad = np.nonzero(f0 != f1)[0]
    return [(int(k0[j]) * step, int(k1[j]) * step) for j in bad[:1]]


def _bucket(ops, x):
    """``floor`` of the steps ``ops`` on ``x`` (a value, or a numpy array of DOUBLEs), as
    DuckDB computes them."""
    for kind, _, k in ops:
        x = _duck_op(kind, x, k)
    return np.floor(x) if isinstance(x, np.ndarray) else math.floor(x)


def _first_value(a: AttributeMeta, b: int) -> _Number:
    """The least value of the data in leaf bin ``b``: its lower edge for a real attribute
    (the double the release bins by, :mod:`dpsql.domains.bin_edges`), else the first
    value of the grid at or above it."""
    if a.value_type == "real":
        return float(bin_edge(a.lower, a.upper, a.bins, b, a.edge_mode))
    lower, leaf = leaf_grid(a)
    step = as_fraction(a.step or 1)
    return math.ceil((lower + b * leaf) / step) * step


def _last_value(a: AttributeMeta, b: int) -> _Number:
    """The greatest value of the data below leaf edge ``b``."""
    if a.value_type == "real":
        return math.nextafter(float(bin_edge(a.lower, a.upper, a.bins, b, a.edge_mode)),
                              -math.inf)
    return _first_value(a, b) - as_fraction(a.step or 1)


def _text(x: _Number) -> str:
    """A value as the data holds it: a DOUBLE's repr, a decimal's digits."""
    if isinstance(x, float):
        return repr(x)
    return str(Decimal(x.numerator) / Decimal(x.denominator))


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
edge indices, :class:`Misaligned`, or None when the column is not the bucketed value."""


def bucket_call(col: exp.Column) -> exp.Expression | None:
    """The bucketing call that holds ``col``: the FLOOR around an affine expression of it
    (:func:`_affine`: ``floor(x / w)``, ``floor(x * 2)``, Metabase's ``floor((x - o) /
    w)``), or a call of :data:`BUCKETS` directly around it."""
    parent = col.parent
    while isinstance(parent, (exp.Paren, exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div)):
        parent = parent.parent
    if isinstance(parent, exp.Floor) and _affine(col, parent) is not None:
        return parent
    parent = col.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return parent if isinstance(parent, tuple(BUCKETS)) else None
