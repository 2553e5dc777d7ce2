"""The baselines of ``reference/od_topdown.md`` §2.6: VanillaGauss, the stability
histogram (SH) and TDA-ℓ2. Each returns a :class:`PrivateTree` whose upper levels are
sums of the released leaves (so they are exactly consistent).

* :func:`vanilla_gauss` — N_Z(0, σ²) on **every** public leaf, σ² = Δ²/(2ρ) with the
  derived L2 sensitivity (√2·m substitute, m add/remove). As in the authors' code [R], the
  signed values are kept and only exact zeros dropped; ``clamp=True`` clamps negatives to
  0 first (post-processing). Dense: it needs the leaf level to fit in memory (the paper
  did not run it on Italy for this reason).
* :func:`stability_histogram` — discrete Laplace of scale b = Δ₁/ε on the *positive*
  leaves only (Δ₁ = 2m substitute, m add/remove), releasing those ≥ τ = m + b·ln(2m/δ).
  For m = 1 under substitution this is the paper's t = 1 + 2 ln(2/δ)/ε (Thm 7). A unit
  creates at most m new cells, each of count ≤ m, and P[count + X ≥ τ] ≤ e^{−(τ−m)/b}
  for the discrete Laplace, so the union is ≤ δ/2. Integer noise: no rounding needed.
  (ε, δ)-DP only: the budget must be :class:`ApproxDP`.
* :func:`tda_l2` — the TopDown loop of InfTDA with the Euclidean projection onto
  {y ≥ 0, Σy = c}, yᵢ = max(xᵢ − τ, 0) (τ by sorting, od_topdown §2.6 [D]), then the
  authors' rounding [R]: round to nearest; if short by k add 1 to the k largest entries,
  if over by k subtract 1 from the k smallest positive entries. Its error model is the
  InfTDA bound with 1.5 of rounding slack per level (proof in
  :mod:`dpsql.accuracy.inftda`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.inftda import (LeafGaussErrorModel, StabilityHistogramErrorModel,
                                   describe_leaves)
from dpsql.errors import InternalError, InvalidPrivacyParameterError, SpecError
from dpsql.mechanisms.base import PrivateLevel, PrivateTree
from dpsql.mechanisms.inftda import NoiseHook, _as_zcdp, _sigma2, topdown, true_levels
from dpsql.mechanisms.intopt import _segment_sort
from dpsql.privacy.budgets import ApproxDP
from dpsql.privacy.samplers import discrete_gaussian, discrete_laplace
from dpsql.privacy.units import histogram_sensitivity

MAX_DENSE_LEAVES = 50_000_000


def _levels_from_leaves(tree: Any, ids: np.ndarray, counts: np.ndarray) -> tuple[PrivateLevel, ...]:
    """Sum released leaves upward; nodes whose sum is exactly 0 are not stored."""
    out = [PrivateLevel(ids, counts)]
    for k in range(tree.depth, 0, -1):
        pi, pc = tree.aggregate(out[-1].ids, out[-1].counts, k, k - 1)
        nz = pc != 0
        out.append(PrivateLevel(pi[nz], pc[nz]))
    out.reverse()
    return tuple(out)


def leaves_per_node(tree: Any, max_nodes: int = 10_000_000) -> list[np.ndarray | None]:
    """For each level, the number of leaves under each node (None if the level is larger
    than ``max_nodes``). Descendants are contiguous in tree order, so it is a difference of
    first-leaf ids."""
    d = tree.depth
    out: list[np.ndarray | None] = []
    for k in range(d + 1):
        size = tree.level_sizes[k]
        if k == d:
            out.append(np.ones(1, dtype=np.int64))
            continue
        if size > max_nodes:
            out.append(None)
            continue
        ids = np.arange(size, dtype=np.int64)
        for j in range(k + 1, d + 1):
            ids, _ = tree.child_ranges(j, ids)
        first = np.append(ids, tree.level_sizes[d])
        out.append(np.diff(first))
    return out


def _describe(tree: Any) -> list:
    per = leaves_per_node(tree)
    desc = describe_leaves([p if p is not None else np.zeros(0, np.int64) for p in per])
    for k, p in enumerate(per):
        if p is None:  # a public bound: at most all leaves
            desc[k] = {"max": int(tree.level_sizes[tree.depth])}
    return desc


def vanilla_gauss(tree: Any, leaf_ids: Any, leaf_counts: Any, budget: Any, *,
                  neighbouring: Any, max_rows: int = 1, rng: np.random.Generator,
                  clamp: bool = False) -> PrivateTree:
    """Discrete Gaussian on every public leaf; upper levels are sums of leaves."""
    sens = histogram_sensitivity(neighbouring, max_rows)
    nb, m = sens.neighbouring, sens.max_rows
    zc = _as_zcdp(budget)
    size = tree.level_sizes[tree.depth]
    if size > MAX_DENSE_LEAVES:
        raise SpecError(f"VanillaGauss draws noise on all {size} leaves, more than "
                        f"{MAX_DENSE_LEAVES}; use inftda for sparse large domains")
    truth = true_levels(tree, leaf_ids, leaf_counts)[-1]
    dsq = sens.l2_squared
    sigma2 = _sigma2(dsq, zc.rho)
    dense = np.zeros(size, dtype=np.int64)
    dense[truth[0]] = truth[1]
    dense += discrete_gaussian(sigma2, size, rng)
    if clamp:
        np.maximum(dense, 0, out=dense)
    ids = np.flatnonzero(dense).astype(np.int64)
    levels = _levels_from_leaves(tree, ids, dense[ids])
    model = LeafGaussErrorModel(sigma2, _describe(tree))
    return PrivateTree(mechanism="vanilla_gauss", levels=levels, error_model=model, loss=zc,
                       sensitivity={"l2": math.sqrt(float(dsq))}, draws=size,
                       info={"neighbouring": nb.value, "max_rows": m, "sigma2": sigma2,
                             "clamp": bool(clamp)})


def stability_histogram(tree: Any, leaf_ids: Any, leaf_counts: Any, budget: ApproxDP, *,
                        neighbouring: Any, max_rows: int = 1,
                        rng: np.random.Generator) -> PrivateTree:
    """Laplace on positive leaves, released if ≥ τ (no false positives)."""
    sens = histogram_sensitivity(neighbouring, max_rows)
    nb, m, l1 = sens.neighbouring, sens.max_rows, sens.l1
    if not isinstance(budget, ApproxDP):
        raise InvalidPrivacyParameterError(
            f"the stability histogram is (epsilon, delta)-DP only; give ApproxDP(epsilon, "
            f"delta), got {budget!r}")
    eps, delta = float(budget.epsilon), float(budget.delta)
    scale = math.nextafter(l1 / eps, math.inf)
    threshold = m + scale * math.log(2.0 * m / delta)
    ids, cnt = true_levels(tree, leaf_ids, leaf_counts)[-1]
    pos = cnt > 0
    ids, cnt = ids[pos], cnt[pos]
    noisy = cnt + discrete_laplace(scale, cnt.size, rng)
    keep = noisy >= threshold
    levels = _levels_from_leaves(tree, ids[keep], noisy[keep].astype(np.int64))
    model = StabilityHistogramErrorModel(scale, threshold, _describe(tree))
    return PrivateTree(mechanism="stability_histogram", levels=levels, error_model=model,
                       loss=budget, sensitivity={"l1": float(l1)}, draws=int(cnt.size),
                       info={"neighbouring": nb.value, "max_rows": m, "scale": scale,
                             "threshold": threshold})


def _segment_rank(key: np.ndarray, seg: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """0-based rank of each entry within its segment by ascending ``key`` (stable)."""
    order = _segment_sort(key, seg, ptr.size - 1)
    rank = np.empty(key.size, dtype=np.int64)
    rank[order] = np.arange(key.size, dtype=np.int64) - ptr[seg[order]]
    return rank


def project_l2_rounded(x: np.ndarray, ptr: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Euclidean projection of each segment onto {y ≥ 0, Σy = c}, then the [R] rounding."""
    x = np.asarray(x, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    m = np.diff(ptr)
    seg = np.repeat(np.arange(c.size, dtype=np.int64), m)
    if x.size == 0:
        return x.copy()
    # τ: sort descending, ρ = #{j : u_j·j > cumsum_j − c} (a prefix), τ = (cs_ρ − c)/ρ
    order = _segment_sort(-x, seg, c.size)
    u = x[order]
    cs = np.cumsum(u)
    base = np.concatenate(([0], cs))[ptr[:-1]]
    local = np.arange(u.size, dtype=np.int64) - ptr[seg] + 1
    segcs = cs - base[seg]
    cond = u * local > segcs - c[seg]
    rho = np.bincount(seg, weights=cond, minlength=c.size).astype(np.int64)
    rho_safe = np.maximum(rho, 1)
    cs_rho = np.concatenate(([0], cs))[ptr[:-1] + rho_safe] - base
    tau = (cs_rho - c) / rho_safe
    y = np.maximum(x - tau[seg], 0.0)
    r = np.rint(y).astype(np.int64)
    r[(c == 0)[seg]] = 0
    cr = np.concatenate(([0], np.cumsum(r)))
    diff = c - (cr[ptr[1:]] - cr[ptr[:-1]])
    if np.any(diff > 0):
        rank = _segment_rank(-r, seg, ptr)  # largest first
        r += (rank < diff[seg]) & (diff[seg] > 0)
    if np.any(diff < 0):
        big = np.iinfo(np.int64).max // 4
        key = np.where(r > 0, r, big)
        rank = _segment_rank(key, seg, ptr)  # smallest positive first
        sub = (rank < -diff[seg]) & (diff[seg] < 0)
        if np.any(sub & (r <= 0)):
            raise InternalError("TDA-l2 rounding ran out of positive entries")
        r -= sub
    return r


def tda_l2(tree: Any, leaf_ids: Any, leaf_counts: Any, budget: Any, *, neighbouring: Any,
           max_rows: int = 1, level_weights: Sequence[Any] | None = None,
           rng: np.random.Generator, root_weight: Any = None,
           noise_hook: NoiseHook | None = None) -> PrivateTree:
    """TopDown with Euclidean projection and rounding (same noise and budget as InfTDA)."""
    return topdown(tree, leaf_ids, leaf_counts, budget, neighbouring=neighbouring,
                   max_rows=max_rows, level_weights=level_weights, rng=rng,
                   root_weight=root_weight, noise_hook=noise_hook,
                   project=project_l2_rounded, mechanism="tda_l2", rounding_slack=1.5)


__all__ = ["leaves_per_node", "project_l2_rounded", "stability_histogram", "tda_l2",
           "vanilla_gauss"]
