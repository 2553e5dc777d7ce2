"""Confidence intervals for quantiles of a binned attribute: the released CDF's
confidence band, inverted at the bin edges.

``MEDIAN(x)`` / ``dp_quantile(x, p)`` invert the isotonic fit of a group's released
cumulative counts (:mod:`dpsql.postprocess`). ``dp_quantile_low(x, p, conf)`` and
``dp_quantile_high(x, p, conf)`` give the ends of a ``conf`` interval for the *true*
p-quantile of the group's rows, from the view's own error model. No noise is drawn and
no data read: this is post-processing, like every answer.

**The statistic.** Let e₀ < e₁ < … < e_B be the group's bin edges (:func:`merge_bins`),
C_j the true number of its rows below e_j and N = C_B its true total. The true
p-quantile q (the smallest value v with #{X ≤ v} ≥ p·N, ``quantile_disc`` on the
source) lies in bin i, [e_i, e_{i+1}), exactly when T_i < 0 ≤ T_{i+1} with
T_j = C_j − p·N, which is non-decreasing in j (T_0 = −p·N ≤ 0, T_B = (1 − p)·N ≥ 0).
Its released estimate D_j = Ĉ_j − p·N̂ is **one linear query of the released nodes**
(coefficient 1 − p on the nodes below e_j, −p on the others), so its error, total
included, has an exact variance under the view's model
(:meth:`~dpsql.accuracy.base.ErrorModel.linear_variance`); its half-width h_j at
``conf`` is ±z·σ for Gaussian-family views, the Laplace-sum quantile of its cumulants
for b-ary and Laplace trees (:mod:`dpsql.accuracy.laplace_sum`;
:meth:`~dpsql.accuracy.base.ErrorModel.linear_cumulants`).

**The ends.** With U_j = D_j + h_j and L_j = D_j − h_j:

* low end: e_{a−1}, with a the first edge where U reaches 0 (a = B if none does);
* high end: e_b, with b the first edge from which L stays ≥ 0 to the last edge
  (b = B if L_{B−1} < 0); for values on a grid (integers, decimals, dates) the last grid
  value below it, e_b − step.

Each end fails only through the error at **one fixed edge**, the one next to the true
quantile: the low end is above q only if U_{i+1} < 0 although T_{i+1} ≥ 0, and the high
end is at or below q only if L_i ≥ 0 although T_i < 0, each with probability at most
(1 − conf)/2 (a symmetric error's one-sided tail at the two-sided half-width). So
[low, high] holds q with probability ≥ conf, pointwise per quantile and per group.
(That is why the high end takes the edge from which L *stays* non-negative, not the
first edge where it does: the first crossing would fail whenever *any* edge below q
crossed, a union of events.) The low end is always below the high end (a ≤ b).

**Resolution and approximations.** The ends are bin edges: a quantile inside a bin
cannot be located finer than the bin, so the interval is at least one bin wide, and on
a grid whose bins hold one value each it is exact to the value. The probability
statement is exact for Gaussian noise with exact variances, and for Laplace noise as
good as the Laplace-sum quantile (an approximation for unequal weights, measured in
:mod:`dpsql.accuracy.laplace_sum`). A range bound inside a bin (interpolated counts)
uses the nodes of the outer cover, as the other error columns do. Views whose models
give only simultaneous bounds (InfTDA without its calibration) are refused by the
planner.

**Views with intervals for sums (calibrated InfTDA).** InfTDA's per-answer model
(:mod:`dpsql.accuracy.inftda_answers`) gives no variance for a weighted sum: it gives a
calibrated interval [S − below, S + above] for a *sum* S of released nodes (bias
corrected, possibly asymmetric, widened near zero, never below 0). The comparison is
T_j = C_j − p·N = (1 − p)·A_j − p·B_j with A_j the true count below e_j and B_j the true
count of the rest of the group, both sums of nodes. So (:func:`sum_band`)

    U_j = (1 − p)·A⁺_j − p·B⁻_j,   L_j = (1 − p)·A⁻_j − p·B⁺_j,

with [A⁻_j, A⁺_j] and [B⁻_j, B⁺_j] the two sums' intervals at confidence
1 − (1 − conf)/2 (:func:`sum_level`), at whole counts. The ends are then chosen as above.
At the fixed edge next to q, the low end fails only if U_{i+1} < 0 ≤ T_{i+1}, which
needs A_{i+1} > A⁺ or B_{i+1} < B⁻ (else U ≥ T): each a one-sided miss of a two-sided
interval at 1 − (1 − conf)/2, probability (1 − conf)/4 (the model's two tails are
equal under its normal approximation; its widenings only lower them), so at most
(1 − conf)/2 together (a union bound); the high end likewise with A⁻ and B⁺. So
[low, high] holds q with probability ≥ conf, as far as the InfTDA intervals hold their
level: it is **conservative** by the union bound (A + B is the group's total, so A
above its interval and B below its own are largely one event, counted twice) and by
the InfTDA intervals' own widenings near zero, and **approximate** where that model is
(its bootstrap calibration, normal approximation and bias estimated at the released
tree; benchmarks/calibration.py). Measured (benchmarks/quantiles.py, docs/sql.md):
coverage 0.999–1.000 at 95 %, intervals up to 2.3× a Gaussian view's at the same
budget, mostly InfTDA's own larger noise. The sums of every
edge are nested (A grows by one bin's rows, B shrinks), so their intervals are evaluated
all at once (:mod:`dpsql.quantile_ci_inftda`), at about a Gaussian view's cost.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpsql.accuracy import laplace_sum
from dpsql.accuracy.base import count_interval, z_value
from dpsql.errors import InvalidPrivacyParameterError
from dpsql.postprocess import merge_bins

__all__ = ["CHUNK", "edge_half_widths", "linear_half_width", "quantile_interval",
           "sum_band", "sum_level", "whole_ends"]


def linear_half_width(model: Any, level: int, ids: np.ndarray, coef: np.ndarray,
                      confidence: float) -> float | None:
    """The two-sided half-width at ``confidence`` of the error of Σ coef·(released count)
    over the distinct ``ids`` of ``level``: the Laplace-sum quantile of its cumulants for
    a Laplace-family model, ±z·σ of its exact variance otherwise; None for a model that
    gives no variances. A Laplace-family model without a weighted carry-up (a reconciled
    b-ary tree) takes its exact σ times the widest quantile-to-σ ratio of the positive
    and the negative part (as :mod:`dpsql.accuracy.multiset` does for repeated nodes)."""
    var = model.linear_variance(level, ids, coef)
    if var is None:
        return None
    cum = model.linear_cumulants(level, ids, coef)
    if cum is not None:
        return laplace_sum.half_width(cum, confidence)
    sd = math.sqrt(var.value)
    ratio = None
    for part in (ids[coef > 0], ids[coef < 0]):
        c = model.laplace_cumulants(level, part) if part.size else None
        if c is not None and c.k2 > 0:
            r = laplace_sum.half_width(c, confidence) / math.sqrt(c.k2)
            ratio = r if ratio is None else max(ratio, r)
    return (z_value(confidence) if ratio is None else ratio) * sd


CHUNK = 256
"""Edges whose variances are evaluated in one vectorised call (memory: CHUNK × nodes)."""


def _edge_coefficients(inv: np.ndarray, nodes: int, row_bin: np.ndarray, edges: np.ndarray,
                       p: float) -> np.ndarray:
    """The coefficient of each distinct node (columns) in D_j for each edge j (rows):
    Σ over the rows that hold it of [bin < j] − p."""
    rows = (row_bin[None, :] < edges[:, None]) - p
    if inv.size == nodes:  # every row its own node: a permutation
        out = np.empty_like(rows)
        out[:, inv] = rows
        return out
    order = np.argsort(inv, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
    return np.add.reduceat(rows[:, order], starts, axis=1)


def _block_variances(model: Any, level: int, uniq: np.ndarray, inv: np.ndarray,
                     row_bin: np.ndarray, bins: int, p: float) -> np.ndarray | None:
    """Var(D_j) of every interior edge in O(depth) each, from the model's
    ``range_variance``, when the group is one block of leaf bins [s, s + bins) of a
    range view's leaf level, one row per bin in order (an ungrouped quantile): with the
    blocks A = [s, s + j) and B = [s + j, s + bins), D_j = (1 − p)·A − p·B and
    Var(D_j) = (1 − p)²V_A + p²V_B − 2(1 − p)p·Cov(A, B), where
    Cov(A, B) = (V_{A∪B} − V_A − V_B)/2. None otherwise."""
    n = uniq.size
    if level != model.depth or inv.size != n or n != bins or n < 2 \
            or np.any(uniq[inv] - uniq[0] != row_bin) \
            or uniq[-1] - uniq[0] != n - 1:
        return None
    s = int(uniq[0])
    mid = s + np.arange(1, bins)
    try:
        va = model.range_variance(np.full(mid.size, s), mid)
        if va is None:
            return None
        vb = model.range_variance(mid, np.full(mid.size, s + bins))
        vall = float(model.range_variance(np.array([s]), np.array([s + bins]))[0])
    except InvalidPrivacyParameterError:  # not leaf bins of the model: the general path
        return None
    cov = (vall - va - vb) / 2.0
    return np.maximum((1 - p) ** 2 * va + p * p * vb - 2.0 * (1 - p) * p * cov, 0.0)


def _laplace_reach(confidence: float) -> float:
    """A multiple of σ that no Laplace-family half-width at ``confidence`` exceeds, with
    room (:func:`~dpsql.accuracy.laplace_sum.half_width`: one Laplace draw is the widest
    at high confidence, the normal at low; its whole-count roundings add at most one
    coefficient, which the caller adds)."""
    return 1.5 * max(laplace_sum.laplace_sum_quantile(1, confidence), z_value(confidence))


def edge_half_widths(model: Any, level: int, ids: np.ndarray, row_bin: np.ndarray,
                     bins: int, p: float, confidence: float, D: np.ndarray | None = None
                     ) -> np.ndarray | None:
    """h_j for the interior edges j = 1..bins−1 (module doc): the half-width of the
    error of D_j = Σ_rows ([bin < j] − p)·count over the rows' nodes ``ids`` (a node
    that several rows hold, through a join that repeats it, counts as often).

    The variances of every edge come from the model's range variances (a block of leaf
    bins), its prefix carry-up (one row per bin in node order: a Gaussian or Laplace
    tree's group, :meth:`~dpsql.accuracy.base.ErrorModel.prefix_linear_variances`), or
    else vectorised calls (:meth:`~dpsql.accuracy.base.ErrorModel.linear_variances`). A Laplace-family
    model's exact half-width (its cumulants, one call per edge) is only needed where
    it can change a comparison: given the released ``D``, at the edges with |D_j| below
    a generous bound of it (:func:`_laplace_reach`·σ_j + the largest coefficient); the
    other edges get that bound, which decides their comparisons the same way. (A model
    without weighted cumulants, whose half-width is a ratio of its parts', gets every
    edge exactly.)"""
    uniq, inv = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    j_all = np.arange(1, bins)
    if not j_all.size:  # one bin (k = 3): no interior edge, the interval is the bin (no
        return np.empty(0)  # variance to take; its None crashed the UDF with a TypeError)
    var = _block_variances(model, level, uniq, inv, row_bin, bins, p)
    if var is None and inv.size == uniq.size == bins and np.array_equal(inv, row_bin):
        var = model.prefix_linear_variances(level, uniq, p)  # one row per bin, in id order
    for s in range(0 if var is None else j_all.size, j_all.size, CHUNK):
        if var is None:
            var = np.empty(j_all.size)
        coefs = _edge_coefficients(inv, uniq.size, row_bin, j_all[s:s + CHUNK], p)
        got = model.linear_variances(level, uniq, coefs)
        if got is None:
            return None
        var[s:s + CHUNK] = got
    sd = np.sqrt(np.maximum(var, 0.0))
    laplace = uniq.size and model.laplace_cumulants(level, uniq[:1]) is not None
    if not laplace:
        return z_value(confidence) * sd
    weight = max(1.0, float(np.bincount(inv).max()))
    h = _laplace_reach(confidence) * sd + weight
    exact = model.linear_cumulants(level, uniq[:1], np.ones(1)) is not None
    # the bound holds for the Laplace-sum quantile of exact cumulants; the fallback's
    # ratio (a reconciled tree's parts) is not bounded by it: every edge exactly
    near = j_all if D is None or not exact else j_all[np.abs(D) < h]
    for j in near.tolist():
        coef = _edge_coefficients(inv, uniq.size, row_bin, np.array([j]), p)[0]
        h[j - 1] = linear_half_width(model, level, uniq, coef, confidence)
    return h


def sum_level(confidence: float) -> float:
    """The two-sided confidence at which :func:`sum_band` takes each of its two sums'
    intervals: 1 − (1 − ``confidence``)/2, so that each one-sided end fails with
    probability (1 − ``confidence``)/4 and the two of one edge together with at most
    (1 − ``confidence``)/2 (a union bound), what one end of the quantile interval may."""
    return 1.0 - (1.0 - confidence) / 2.0


def whole_ends(count: np.ndarray, below: np.ndarray, above: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~dpsql.accuracy.base.count_interval` of arrays: [count − below,
    count + above] at whole counts, never below 0 (the two whole counts around it when
    none lies inside)."""
    lo, hi = count - below, count + above
    slack = 1e-9 * np.maximum(1.0, np.maximum(np.abs(below), np.abs(above))) \
        + 4.0 * np.spacing(np.abs(count))
    a, b = np.ceil(lo - slack), np.floor(hi + slack)
    a, b = np.minimum(a, b), np.maximum(a, b)
    return np.maximum(a, 0.0), np.maximum(b, 0.0)


def sum_band(offsets, ids: np.ndarray, counts: np.ndarray, row_bin: np.ndarray, bins: int,
             p: float, confidence: float, nested=None) -> tuple[np.ndarray, np.ndarray]:
    """The band's ends (U_j, L_j) at the interior edges j = 1..bins−1 for a view whose
    model gives intervals for *sums* of released nodes, not for weighted sums
    (calibrated InfTDA; module doc, "Views with intervals for sums"):

        U_j = (1 − p)·A⁺_j − p·B⁻_j,   L_j = (1 − p)·A⁻_j − p·B⁺_j,

    with [A⁻_j, A⁺_j] the interval of A_j = Σ count over the rows below e_j and
    [B⁻_j, B⁺_j] that of B_j, the rest of the group's rows, each at
    :func:`sum_level` (``confidence``), at whole counts and never below 0
    (:func:`~dpsql.accuracy.base.count_interval`). ``offsets(ids, level)`` gives
    (below, above) of the interval of the sum over the rows ``ids`` (a node multiset)
    at ``level``; ``counts`` are the rows' released counts, ``row_bin`` their bins.

    ``nested(codes, sizes, level)``, when given, evaluates the same offsets for the sums
    over the first ``sizes`` of ``codes``, every size at once (``(below, above, exact)``
    arrays, ``exact`` marking those left to ``offsets``; or None:
    :func:`dpsql.quantile_ci_inftda.nested_offsets`): A_j are the prefixes of the rows in
    bin order, B_j the suffixes. Without it (or when it gives None) edges are evaluated
    one by one (two sums each): upwards from the first until U reaches 0 (the low end),
    downwards from the last until L falls below 0 (the high end); the edges in between
    cannot change either end and are NaN (False in both comparisons of
    :func:`quantile_interval`)."""
    order = np.argsort(row_bin, kind="stable")
    ids_s = np.asarray(ids, dtype=np.int64)[order]
    split_at = np.searchsorted(row_bin[order], np.arange(1, bins))  # rows below edge j
    cum = np.cumsum(np.bincount(row_bin, weights=counts, minlength=bins))
    total = float(cum[-1])
    level = sum_level(confidence)
    U = np.full(bins - 1, np.nan)
    L = np.full(bins - 1, np.nan)

    def ends(part: np.ndarray, count: float) -> tuple[float, float]:
        if not part.size:
            return 0.0, 0.0
        return count_interval(count, *offsets(part, level))

    def edge(j: int) -> None:
        if not np.isnan(U[j - 1]):
            return
        k = int(split_at[j - 1])
        a = float(cum[j - 1])
        a_lo, a_hi = ends(ids_s[:k], a)
        b_lo, b_hi = ends(ids_s[k:], total - a)
        U[j - 1] = (1.0 - p) * a_hi - p * b_lo
        L[j - 1] = (1.0 - p) * a_lo - p * b_hi

    got_a = got_b = None
    if nested is not None and bins > 1:
        got_a = nested(ids_s, split_at, level)
        got_b = None if got_a is None else nested(ids_s[::-1], ids_s.size - split_at, level)
    if got_a is not None and got_b is not None:  # every edge at once
        a = cum[:-1]
        a_lo, a_hi = whole_ends(a, got_a[0], got_a[1])
        b_lo, b_hi = whole_ends(total - a, got_b[0], got_b[1])
        U[:] = (1.0 - p) * a_hi - p * b_lo
        L[:] = (1.0 - p) * a_lo - p * b_hi
        for j in (np.flatnonzero(got_a[2] | got_b[2]) + 1).tolist():
            U[j - 1] = np.nan  # left to the model, edge by edge
            edge(j)
        return U, L
    for j in range(1, bins):
        edge(j)
        if U[j - 1] >= 0:
            break
    for j in range(bins - 1, 0, -1):
        edge(j)
        if L[j - 1] < 0:
            break
    return U, L


def cut_rows_span(U: np.ndarray, L: np.ndarray, counts: np.ndarray, whole: np.ndarray,
                  row_bin: np.ndarray, bins: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """The band (U, L) widened by the rows that a range bound cutting a bin weighed (count
    w·W of a whole count W): how the rows of a cut bin spread inside it is not released,
    so the row's true share lies anywhere from none to all of them, as the count's own
    dp_ci_low/high take it. D_j = Σ ([bin < j] − p)·count moves by (1 − p) per row below
    edge j and by −p per row above it, so U_j gains (1 − p)·(room up below j) + p·(room
    down from j) and L_j loses (1 − p)·(room down below j) + p·(room up from j), with room
    up = max(W, 0) − count and down = count − min(W, 0). (Without it the interval
    covered only the uniform guess: m >= DATE '2014-04-03' on month bins, p = 0.1, gave
    [2014-04-03, 2014-04-30] where the data's quantile is 2014-05-01.)"""
    moved = np.abs(whole - counts) > 1e-9 * np.abs(whole)  # the rows a cut weighed
    if bins < 2 or not moved.any():
        return U, L
    up = np.where(moved, np.maximum(whole, 0.0) - counts, 0.0)
    down = np.where(moved, counts - np.minimum(whole, 0.0), 0.0)
    up_below = np.cumsum(np.bincount(row_bin, weights=up, minlength=bins))[:-1]
    down_below = np.cumsum(np.bincount(row_bin, weights=down, minlength=bins))[:-1]
    return (U + (1 - p) * up_below + p * (down.sum() - down_below),
            L - (1 - p) * down_below - p * (up.sum() - up_below))


def quantile_interval(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                      halves, p: float, step: float = 0.0, whole: np.ndarray | None = None
                      ) -> tuple[float, float] | None:
    """The (low, high) ends of a group's quantile interval (module doc) from its rows'
    released ``counts`` and bins [lo, hi); ``halves(row_bin, bins, D)`` gives the interior
    edges' half-widths given the released D_j (:func:`edge_half_widths`; where
    |D_j| is large any h_j below it decides the same), or the band's ends (U, L)
    themselves as a pair of arrays (:func:`sum_band`; NaN at the edges that cannot
    decide an end), ``step`` the grid step (0: a continuous axis). None when the
    released total is not positive (the quantile itself is NULL there) or the model
    gives no half-widths. ``whole``: each row's count before a range bound that cuts its
    bin weighed it (:func:`cut_rows_span`).

    >>> flat = lambda row_bin, bins, D: np.full(bins - 1, 3.0)
    >>> quantile_interval(np.array([10., 10, 10, 10]), np.arange(4.), np.arange(1., 5),
    ...                   flat, 0.5, step=1.0)
    (1.0, 2.0)
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.size == 0:
        return None
    edges, row_bin = merge_bins(lo, hi)
    bins = edges.size - 1
    cum = np.cumsum(np.bincount(row_bin, weights=c, minlength=bins))
    total = cum[-1]
    if not total > 0:
        return None
    D = cum[:-1] - p * total
    h = halves(row_bin, bins, D)
    if h is None:
        return None
    U, L = h if isinstance(h, tuple) else (D + h, D - h)
    if whole is not None:
        U, L = cut_rows_span(U, L, c, np.asarray(whole, dtype=np.float64), row_bin, bins, p)
    up = np.flatnonzero(U >= 0)
    a = int(up[0]) + 1 if up.size else bins
    below = np.flatnonzero(L < 0)
    b = int(below[-1]) + 2 if below.size else 1
    return float(edges[a - 1]), float(edges[b] - step)
