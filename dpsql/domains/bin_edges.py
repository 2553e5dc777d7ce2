"""The bin edges of an equal-width binned attribute: one definition, used wherever an
edge is computed, stored, compared or printed.

Edge ``b`` of an attribute with bounds ``lower``, ``upper`` and ``K`` bins is the
**correctly rounded** double of the exact decimal ``lower + b·(upper − lower)/K``, where
``lower`` and ``upper`` are read as the decimals they print as (``0.1`` is 1/10, as the
planner reads literals: :func:`dpsql.planner.classify_calls.as_fraction`). So with
``lower = 0, upper = 1, bins = 10`` edge 3 is the double of the literal ``0.3``, not
``0 + 3 · 0.1 = 0.30000000000000004``, and ``WHERE x < 0.3`` lands on the edge: the
answer is the exact sum of bins 0..2, not an interpolation by 4e-16 of bin 3.

How it is computed (exact and vectorised): with ``lower = p/D`` and ``upper = q/D``
(``D`` the common denominator), edge ``b`` is ``N_b / M`` with ``N_b = p·K + b·(q − p)`` and
``M = K·D`` integers. When every ``|N_b|`` and ``M`` are at most 2⁵³ they are exact
doubles and one IEEE division (numpy's, or DuckDB's ``DOUBLE`` ``/``) is the correctly
rounded quotient, so Python, numpy and SQL give the same bits. Beyond 2⁵³ (bounds with
many digits, astronomically many bins) there is no exact DOUBLE formula for SQL, and the
attribute keeps the **product** edges ``lower + b·width`` (``width = (upper − lower)/K``),
as every release did before the decimal edges (:data:`PRODUCT`). A release records which
(``AttributeMeta.edges``); a release file without the record was built with the product
edges, and is read with them: its stored edges, its data's bins and the planner's
comparisons all use that one formula, so it stays self-consistent (a literal ``0.3``
there is 4e-16 off edge 3 and interpolates, as it did when it was built).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

DECIMAL = "decimal"
"""Edges are the correctly rounded decimals ``lower + b·(upper − lower)/K``."""
PRODUCT = "product"
"""Edges are the double expression ``lower + b·width`` (releases before the decimal edges,
and bounds too long for exact doubles)."""

_EXACT = 2 ** 53


@lru_cache(maxsize=1024)  # a few attributes, asked per bound of every query
def _ratio(lower: float, upper: float, bins: int) -> tuple[int, int, int] | None:
    """``(p·K, q − p, K·D)`` with ``lower = p/D``, ``upper = q/D`` as printed, divided by
    their gcd, or None when some ``N_b`` or ``M`` exceeds 2⁵³ (no exact double division)."""
    lo, hi = Fraction(repr(float(lower))), Fraction(repr(float(upper)))
    d = math.lcm(lo.denominator, hi.denominator)
    p, q = int(lo * d), int(hi * d)
    n0, step, m = p * bins, q - p, bins * d
    g = math.gcd(n0, step, m)  # the same quotients: whole widths (seconds by the
    n0, step, m = n0 // g, step // g, m // g  # second for years) stay exact
    if max(abs(n0), abs(n0 + step * bins), m) > _EXACT:
        return None
    return n0, step, m


def edge_mode(lower: float, upper: float, bins: int) -> str:
    """The edge formula a new release uses for these bounds: :data:`DECIMAL` when it is
    exact in doubles, else :data:`PRODUCT`."""
    return DECIMAL if _ratio(lower, upper, bins) is not None else PRODUCT


def bin_edges(lower: float, upper: float, bins: int, b, mode: str | None = None
              ) -> np.ndarray:
    """The edges at the indices ``b`` (an integer array, 0..K; ``K`` is ``upper``), as
    float64. ``mode``: :data:`DECIMAL` or :data:`PRODUCT`; None: :func:`edge_mode`."""
    b = np.asarray(b, dtype=np.int64)
    r = _ratio(lower, upper, bins) if mode != PRODUCT else None
    if r is None:
        out = lower + b * ((upper - lower) / bins)
    else:
        n0, step, m = r
        out = (n0 + b * step).astype(np.float64) / np.float64(m)
    return np.where(b >= bins, float(upper), out)


def bin_edge(lower: float, upper: float, bins: int, b: int, mode: str | None = None
             ) -> float:
    """Edge ``b`` (one index) of :func:`bin_edges`."""
    return float(bin_edges(lower, upper, bins, b, mode))


def all_edges(lower: float, upper: float, bins: int, mode: str | None = None) -> np.ndarray:
    """The ``K + 1`` edges, ``lower`` first and ``upper`` last."""
    return bin_edges(lower, upper, bins, np.arange(bins + 1), mode)


def edge_index(lower: float, upper: float, bins: int, x: float, mode: str | None = None
               ) -> int | None:
    """The index ``b`` (0..K) whose edge is exactly ``x``, else None. ``(x − lower)/width``
    rounds near the right index (within one), and the neighbours' edges are compared."""
    if not lower <= x <= upper:
        return None
    guess = round((x - lower) / ((upper - lower) / bins))
    for b in (guess, guess - 1, guess + 1):
        if 0 <= b <= bins and bin_edge(lower, upper, bins, b, mode) == x:
            return b
    return None


def edge_sql(lower: float, upper: float, bins: int, b: str, mode: str | None = None) -> str:
    """SQL for the same edge (a DOUBLE, bit for bit :func:`bin_edges` in :data:`DECIMAL`
    mode) at the BIGINT SQL expression ``b``. Not clipped at ``K``: in :data:`PRODUCT`
    mode ``b = K`` may miss ``upper`` (the callers write ``upper`` there)."""
    r = _ratio(lower, upper, bins) if mode != PRODUCT else None
    if r is None:
        return f"({float(lower)!r} + ({b}) * {float((upper - lower) / bins)!r})"
    n0, step, m = r
    return f"(CAST({n0} + ({b}) * {step} AS DOUBLE) / CAST({m} AS DOUBLE))"


__all__ = ["DECIMAL", "PRODUCT", "all_edges", "bin_edge", "bin_edges", "edge_index",
           "edge_mode", "edge_sql"]
