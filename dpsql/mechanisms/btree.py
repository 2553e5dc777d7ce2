"""The optimal level-uniform b-ary Laplace tree under pure ε-DP (``reference/tree_cdf.md``).

Pipeline of :func:`btree`:

1. **Shape** (:func:`choose_tree`, digest §2.5–2.6, errata §5.2–5.3). Fan-outs are chosen
   by exact minimisation of the raw prefix error over all padded trees with K̄ ∈ [K, 2K):
   dummy leaves go after bin K, nodes wholly in the padding are omitted, so the top level
   has only ⌈K/L_1⌉ nodes. Per-level budgets are Thm IV.2(a) generalised to padding:
   with D_i = Σ_{p<K} d_i(p) (digit sums in radix n, §2.6), the raw error is
   Σ_i D_i·Var_i and ε_i ∝ D_i^{1/3} minimises it (KKT, as in the proof of IV.2(a));
   without padding D_i = K(n_i−1)/2 and this is exactly ε_i ∝ (n_i−1)^{1/3}.
2. **Noise.** Every node of levels 1..h gets discrete Laplace noise (CKS 2020), scale
   Δ₁/ε_i. A unit changes at most m rows, and every level is a partition of [0, K), so
   the per-level L1 sensitivity is Δ₁ = m under add/remove and 2m under substitution
   (digest §2.4: "a swap changes at most two level-i counts by 1"). Levels compose
   sequentially to Σ ε_i = ε. The root is public n under substitution (variance 0) and
   unmeasured under add/remove (its estimate is the sum of level 1; no budget spent).
3. **Consistency.** The BLUE of all nodes (:mod:`dpsql.mechanisms.least_squares`): it
   dominates the App. B refinement (digest §4.3: 41,040 vs 59,633 at K = 256), which is
   kept in :func:`refine_prefixes` as a reference. Upper levels are re-summed from the
   released leaves, so each level is the aggregate of the one below.
4. **CDF.** :func:`project_cdf` maps noisy cumulative counts to an integer,
   non-decreasing vector in [0, N] ending at N (§2.8): PAVA + clip + round (squared ℓ2,
   O(K)) or the O(K·N) trellis DP (ℓ1 or ℓ2, small inputs). :func:`monotone_cdf`,
   :func:`cdf` and :func:`quantile` are post-processing of released counts only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence, Union

import numpy as np

from dpsql.accuracy.btree import BTreeErrorModel, bin_spans, level_sizes
from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms.base import PrivateLevel, PrivateTree
from dpsql.mechanisms.least_squares import tree_least_squares
from dpsql.privacy.budgets import PureDP
from dpsql.privacy.samplers import discrete_laplace
from dpsql.postprocess import cdf, monotone_cdf_from_leaves, project_cdf, quantile
from dpsql.privacy.units import Neighbouring, histogram_sensitivity

__all__ = [
    "TreeChoice", "choose_tree", "digit_sums", "budget_weights", "raw_prefix_error",
    "range_cover", "refine_prefixes", "project_cdf", "btree", "monotone_cdf",
    "monotone_cdf_from_leaves", "cdf", "quantile", "discrete_laplace_variance",
]

Fanouts = Union[str, int, Sequence[int]]


# ------------------------------------------------------------------------------------------
# Shape: digit sums, exact raw error, budgets, search
# ------------------------------------------------------------------------------------------

def digit_sums(K: int, L: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """D = Σ_{p<K} ((p // L) mod n): the number of times level nodes with L leaves each
    and fan-out n are used over all prefixes [0, p), p < K (closed form, exact int64)."""
    L = np.asarray(L, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    q, r = K // L, K % L
    full, t = q // n, q % n
    per_block = full * (n * (n - 1) // 2) + t * (t - 1) // 2
    return L * per_block + r * t


def _level_digit_sums(K: int, fanouts: Sequence[int]) -> np.ndarray:
    spans = bin_spans(fanouts)
    return np.array([int(digit_sums(K, spans[i + 1], fanouts[i])) for i in range(len(fanouts))],
                    dtype=np.int64)


def budget_weights(K: int, fanouts: Sequence[int]) -> tuple[float, ...]:
    """Budget fractions ε_i/ε ∝ D_i^{1/3} (Thm IV.2(a), generalised to padding)."""
    D = _level_digit_sums(K, fanouts).astype(np.float64)
    c = np.cbrt(np.maximum(D, 1.0))
    return tuple(float(x) for x in c / c.sum())


def raw_prefix_error(K: int, fanouts: Sequence[int], level_variances: Sequence[float]) -> float:
    """Exact Σ_{p=1}^{K−1} Var(raw prefix estimate p) = Σ_i D_i·Var_i (digest §2.6).

    With Var_i = 8/ε_i² (Lap(2/ε_i), swap model) this is the paper's N²·E2; e.g.
    K = 256, (16, 16), ε_i = 1/2 gives 122,880 (Thm IV.1)."""
    D = _level_digit_sums(K, fanouts).astype(np.float64)
    return float(np.dot(D, np.asarray(level_variances, dtype=np.float64)))


@dataclass(frozen=True)
class TreeChoice:
    """A tree shape: fan-outs top-down (n_1 = nodes under the root that exist), budget
    fractions per level, and ``cost`` = 8·(Σ D_i^{1/3})³, the paper's N²ε²E2 for the raw
    prefix estimator with these budgets (Lap(2/ε_i) in the swap model)."""

    bins: int
    fanouts: tuple[int, ...]
    weights: tuple[float, ...]
    cost: float

    @property
    def padded_bins(self) -> int:
        return bin_spans(self.fanouts)[0]


def _cost(K: int, fanouts: Sequence[int]) -> float:
    D = _level_digit_sums(K, fanouts).astype(np.float64)
    return 8.0 * float(np.cbrt(D).sum()) ** 3


def choose_tree(K: int, *, pad: bool = True, max_fanout: int = 64) -> TreeChoice:
    """The padded mixed-radix tree of least raw prefix error with optimal budgets.

    Exhaustive over every ordered tree with lower fan-outs in [2, max_fanout] and any top
    fan-out (so the histogram (K) is included), padded (Π n_i = K̄ ∈ [K, 2K)) or, with
    ``pad=False``, exact (Π n_i = K: the digest's §2.6 table). Padding often wins by a
    little: K = 256 gives (14, 19) (K̄ = 266, cost 119.38·K/2 against 120·K/2 for (16, 16)),
    K = 1024 gives (9, 12, 10) (243.14 against 248 for (32, 32)). The cost Σ_i D_i^{1/3}
    is additive over
    levels and D_i depends only on (L_i, n_i), so the search is a shortest path over the
    number of leaves per node L < K (Bellman–Ford, one vectorised sweep per fan-out and
    round), closed by a top level of ⌈K/L⌉ nodes. Lower fan-outs are capped at
    ``max_fanout``: past 64, two levels of ≈√n are cheaper in the real relaxation
    (2(√n−1)^{1/3} < (n−1)^{1/3} for n ≥ 65), and the tests check the capped search
    against an uncapped brute force on small K.

    The criterion is the paper's: the raw prefix estimator, in the swap model (under
    add/remove the full-range prefix is no longer free; it is ignored). dpsql releases
    the BLUE; the raw-optimal padded tree also had the lower BLUE range variance at every
    K we compared (256, 1000, 1024, 4096, against the unpadded optimum).
    Ties between orderings (complete trees, where the order does not change the raw
    error) go to the smallest fan-outs on top: with these budgets the BLUE range error
    prefers it (K = 256: (8, 32) 329.5 against (32, 8) 354.2 per range at ε = 1; note the
    digest's App. B remark, with equal budgets, points the other way).

    >>> choose_tree(256, pad=False).fanouts, choose_tree(1000, pad=False).fanouts
    ((16, 16), (10, 10, 10))
    >>> choose_tree(256).fanouts
    (14, 19)
    """
    K = int(K)
    if K < 2:
        raise InvalidPrivacyParameterError(
            f"a tree needs at least 2 bins, got K={K}; release a plain noisy count instead")
    nmax = max(2, min(int(max_fanout), K - 1))
    dist = np.full(K, np.inf)
    dist[1] = 0.0
    step = np.zeros(K, dtype=np.int64)         # fan-out of the level just above the chain
    changed = np.zeros(K, dtype=bool)
    changed[1] = True
    while changed.any():
        src = np.flatnonzero(changed)
        changed[:] = False
        for n in range(2, nmax + 1):
            j = src[src * n < K]
            if j.size == 0:
                break
            cand = dist[j] + np.cbrt(digit_sums(K, j, n).astype(np.float64))
            tgt = j * n
            better = cand < dist[tgt] * (1.0 - 1e-13)
            if better.any():
                dist[tgt[better]] = cand[better]
                step[tgt[better]] = n
                changed[tgt[better]] = True
    L = np.arange(1, K)
    top = -(-K // L)
    total = dist[1:] + np.cbrt(digit_sums(K, L, top).astype(np.float64))
    if not pad:
        total = np.where(K % L == 0, total, np.inf)
    best = int(np.argmin(total)) + 1
    fans = [int(-(-K // best))]
    cur = best
    while cur > 1:
        fans.append(int(step[cur]))
        cur //= int(step[cur])
    fanouts = tuple(fans)
    cost = _cost(K, fanouts)
    asc = tuple(sorted(fanouts))
    if asc != fanouts and bin_spans(asc)[1] < K and _cost(K, asc) <= cost * (1 + 1e-12):
        fanouts, cost = asc, _cost(K, asc)
    return TreeChoice(K, fanouts, budget_weights(K, fanouts), cost)


def _resolve_fanouts(K: int, fanouts: Fanouts) -> tuple[int, ...]:
    if isinstance(fanouts, str):
        if fanouts != "auto":
            raise InvalidPrivacyParameterError(
                f"fanouts must be 'auto', an integer b >= 2 or a tuple, got {fanouts!r}")
        return choose_tree(K).fanouts
    if isinstance(fanouts, (int, np.integer)) and not isinstance(fanouts, bool):
        b = int(fanouts)
        if b < 2:
            raise InvalidPrivacyParameterError(f"fan-out b must be >= 2, got {b}")
        h = 1
        while b ** h < K:
            h += 1
        return (-(-K // b ** (h - 1)),) + (b,) * (h - 1)
    fans = tuple(int(n) for n in fanouts)
    if not fans or any(n < 2 for n in fans):
        raise InvalidPrivacyParameterError(f"fan-outs must be integers >= 2, got {fanouts!r}")
    spans = bin_spans(fans)
    if spans[0] < K or spans[1] >= K:
        raise InvalidPrivacyParameterError(
            f"fan-outs {fans} do not fit K={K} bins: need Π n_i >= K and Π n_2..n_h < K "
            "(the top level must have at least two nodes)")
    return fans


# ------------------------------------------------------------------------------------------
# Covers and the App. B refinement
# ------------------------------------------------------------------------------------------

def range_cover(lo: np.ndarray, hi: np.ndarray, fanouts: Sequence[int], K: int
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The mixed-radix cover of leaf ranges [lo, hi) (digest §2.3, extended to ranges).

    Returns, per level i = 0..h, ``(l_start, l_stop, r_start, r_stop)``: the cover uses
    level-i nodes [l_start, l_stop) ∪ [r_start, r_stop). Nodes are disjoint, their union
    is exactly [lo, hi), and each part has at most n_i − 1 nodes. For a prefix (lo = 0)
    level i contributes d_i(p) nodes, the digits of §2.3."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    spans = bin_spans(fanouts)
    sizes = level_sizes(K, fanouts)
    out = []
    prev_a = prev_b = None
    for i, L in enumerate(spans):
        a = -(-lo // L)                                   # first node starting at or after lo
        b = np.where(hi >= K, sizes[i], hi // L)          # nodes ending at or before hi
        if prev_a is None:
            z = np.zeros_like(a)
            out.append((a, np.maximum(a, b), z, z))
        else:
            n = fanouts[i - 1]
            # children of wholly covered parents, [n·prev_a, n·prev_b), are covered above
            l_stop = np.clip(n * prev_a, a, np.maximum(a, b))
            r_stop = np.maximum(b, l_stop)
            r_start = np.clip(n * prev_b, l_stop, r_stop)
            out.append((a, l_stop, r_start, r_stop))
        prev_a, prev_b = a, b
    return out


def _cover_sum(values: Sequence[np.ndarray], cover) -> np.ndarray:
    total = 0.0
    for v, (ls, le, rs, re) in zip(values, cover):
        c = np.concatenate(([0.0], np.cumsum(v)))
        total = total + (c[le] - c[ls]) + (c[re] - c[rs])
    return total


def refine_prefixes(noisy: Sequence[np.ndarray], fanouts: Sequence[int], K: int, total: float,
                    level_variances: Sequence[float]) -> np.ndarray:
    """App. B refinement (digest §2.7): estimation from below, then left/right averaging.

    ``noisy[i]`` are the raw level-i measurements (i = 1..h; ``noisy[0]`` is ignored, the
    root is the public ``total``). Unequal n or ε use the natural α_i of §2.7 (inverse
    variance with the children's summed variance). Returns est_p for p = 1..K. A reference
    estimator: :func:`btree` releases the BLUE, which is never worse."""
    h = len(fanouts)
    sizes = level_sizes(K, fanouts)
    z = [np.empty(0)] * (h + 1)
    V = [np.empty(0)] * (h + 1)
    z[h] = np.asarray(noisy[h], dtype=np.float64)
    V[h] = np.full(sizes[h], float(level_variances[h - 1]))
    for i in range(h - 1, 0, -1):
        parent = np.arange(sizes[i + 1]) // fanouts[i]
        s = np.bincount(parent, weights=z[i + 1], minlength=sizes[i])
        S = np.bincount(parent, weights=V[i + 1], minlength=sizes[i])
        sv = float(level_variances[i - 1])
        w = S / (S + sv)
        z[i] = w * np.asarray(noisy[i], dtype=np.float64) + (1.0 - w) * s
        V[i] = S * sv / (S + sv)
    z[0] = np.array([float(total)])
    p = np.arange(1, K + 1)
    left = _cover_sum(z, range_cover(np.zeros_like(p), p, fanouts, K))
    right = _cover_sum(z, range_cover(p, np.full_like(p, K), fanouts, K))
    return (left + float(total) - right) / 2.0


# ------------------------------------------------------------------------------------------
# The mechanism
# ------------------------------------------------------------------------------------------

def discrete_laplace_variance(scale: float) -> float:
    """Variance of P[x] ∝ exp(−|x|/scale): 2q/(1−q)² with q = exp(−1/scale).

    Floored at 1e−100: for a tiny scale (a huge ε) the exact value underflows to 0, which
    the least squares would read as "known exactly"; the floor is a harmless upper bound."""
    q = math.exp(-1.0 / scale)
    return max(2.0 * q / (1.0 - q) ** 2, 1e-100)


def btree(hist: np.ndarray, budget: PureDP, *, neighbouring: Neighbouring | str,
          max_rows: int = 1, rng: np.random.Generator, fanouts: Fanouts = "auto") -> PrivateTree:
    """Release a K-bin histogram as a consistent b-ary tree of BLUE counts under pure ε-DP.

    ``hist`` holds the true (contribution-bounded) counts of the K bins. ``fanouts`` is
    ``"auto"`` (:func:`choose_tree`), an integer b (padded b-ary tree) or a tuple n_1..n_h.
    Levels 0..h follow ``dpsql.mechanisms.base``: level i node j covers bins
    [j·bin_spans[i], (j+1)·bin_spans[i]) ∩ [0, K), counts are float64 and consistent, and
    ``variance`` is each node's exact posterior variance.

    >>> from dpsql.privacy import rng
    >>> t = btree(np.arange(16), PureDP(1), neighbouring="substitute", rng=rng(1))
    >>> t.depth, float(t.levels[0].counts[0]) == 120.0, t.info["fanouts"]
    (1, True, [16])
    """
    if not isinstance(budget, PureDP):
        raise InvalidPrivacyParameterError(
            f"btree is a pure ε-DP mechanism and needs a PureDP budget, got {budget!r}")
    sensitivity = histogram_sensitivity(neighbouring, max_rows)
    nb, m, sens = sensitivity.neighbouring, sensitivity.max_rows, sensitivity.l1
    counts = np.asarray(hist)
    if counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise DataError(f"hist must be a 1-D integer array of bin counts, got {counts.dtype} "
                        f"with shape {counts.shape}")
    if np.any(counts < 0):
        raise DataError("hist has negative counts; counts of bins are >= 0")
    counts = counts.astype(np.int64)
    K = counts.size
    fans = _resolve_fanouts(K, fanouts)
    h = len(fans)
    spans, sizes = bin_spans(fans), level_sizes(K, fans)
    weights = budget_weights(K, fans)
    parts = budget.split([Fraction(w) for w in weights])
    # conservative float scale: one ulp up, never below the exact Δ₁/ε_i
    scales = [math.nextafter(float(Fraction(sens) / part.epsilon), math.inf) for part in parts]
    variances = [discrete_laplace_variance(s) for s in scales]

    true = [np.empty(0, dtype=np.int64)] * (h + 1)
    true[h] = counts
    for i in range(h - 1, -1, -1):
        true[i] = np.add.reduceat(true[i + 1], np.arange(0, sizes[i + 1], fans[i]))
    N = int(true[0][0])
    noisy: list[np.ndarray] = [np.array([float(N)])]
    for i in range(1, h + 1):
        noise = discrete_laplace(scales[i - 1], sizes[i], rng)
        noisy.append((true[i] + noise).astype(np.float64))
    root_var = 0.0 if nb is Neighbouring.SUBSTITUTE else None
    if root_var is None:
        noisy[0] = np.array([0.0])
    parents = [np.arange(sizes[i]) // fans[i - 1] for i in range(1, h + 1)]
    est, post = tree_least_squares(parents, noisy,
                                   [np.inf if root_var is None else 0.0] + variances)
    del true, noisy
    # upper levels are the sums of the released leaves (base.py consistency contract)
    released = [np.empty(0)] * (h + 1)
    released[h] = est[h]
    for i in range(h - 1, -1, -1):
        released[i] = np.add.reduceat(released[i + 1], np.arange(0, sizes[i + 1], fans[i]))
    model = BTreeErrorModel(K, fans, variances, root_var)
    levels = tuple(PrivateLevel(ids=np.arange(sizes[i], dtype=np.int64), counts=released[i],
                                variance=post[i]) for i in range(h + 1))
    info = {
        "bins": K, "fanouts": list(fans), "padded_bins": spans[0],
        "budget_weights": list(weights), "epsilons": [str(p.epsilon) for p in parts],
        "noise": "discrete_laplace", "noise_scales": scales, "neighbouring": nb.value,
        "max_rows": m, "estimator": "blue",
        "total": N if nb is Neighbouring.SUBSTITUTE else None,
    }
    return PrivateTree(mechanism="btree", levels=levels, error_model=model, loss=budget,
                       sensitivity={"l1_per_level": float(sens), "l1": float(sens * h)},
                       bin_spans=spans, draws=int(sum(sizes[1:])), info=info)


# ------------------------------------------------------------------------------------------
# CDF and quantiles: post-processing of released counts
# ------------------------------------------------------------------------------------------

def monotone_cdf(tree: PrivateTree) -> np.ndarray:
    """Integer monotone CDF (length K, last entry N) of a released tree (post-processing:
    uses only released counts and public n under substitution)."""
    return monotone_cdf_from_leaves(tree.leaves.counts, tree.info.get("total"))
