"""Cascade Sampling: correlated Gaussian input perturbation whose every tree node has the
same (or a chosen, per-level) variance (``reference/cascade_sampling.md``).

Decisions (digest section in brackets):

* **Sampling** [§3.1, §7]. One vectorised step per level. A parent's noise X is split
  into m children X/m + τ·(H z), with z ~ N(0, I_{m−1}) and H the orthonormal Helmert
  basis of the sum-zero subspace, so the deviations are N(0, τ²(I − J/m)). For m = 2 this
  is exactly Algorithm 1 (X/2 ± (√3/2)σY, one Y per parent): n draws in all on a
  perfect tree, the root plus n − 1 Y's (the digest's "2n − 1" in §3.1 miscounts);
  any m costs one normal per leaf. Level variances
  v_d are allowed when v_{d+1} > v_d/m² (§7 [derived]).
* **Padding** [§6.1]. K bins that are not a power of m are padded with public empty
  cells to n = m^L. Subtrees wholly in the padding are never drawn; padded cells are
  never released; the upper levels are bottom-up sums of the *released* leaves (§6.7),
  so they are exactly consistent and a node that straddles K holds the sum of its
  released leaves (its dp_var is that range's variance).
* **Sensitivity** [§3.6, derived here]. A unit changes the histogram by v; the privacy
  loss of x + N(0, σ²C) depends on the Mahalanobis norm vᵀC⁻¹v. Under add/remove with at
  most m rows, v ≥ 0 (or ≤ 0) with ‖v‖₁ ≤ m: a convex function on that simplex peaks at a
  vertex m·e_i, so Δ_C² = m²·max diag C⁻¹. Under substitution (n public) v = a − b with
  ‖a‖₁ = ‖b‖₁ ≤ m, the convex hull of m(e_i − e_j) and 0, so
  Δ_C² = m²·max_{i≠j}(e_i − e_j)ᵀC⁻¹(e_i − e_j); the closed forms are in
  :mod:`dpsql.accuracy.cascade` and are checked against the dense inverse in tests.
  The pair constant is never below the single-leaf one on a tree with two or more
  leaves, so it also covers a substitution that changed the unit's row count. Padding
  is conservative: the released K-marginal has a smaller constant (Schur complement).
* **Calibration** [§3.6]. zCDP: ρ = Δ_C²/(2σ²). (ε, δ): the analytic Gaussian mechanism
  with sensitivity Δ_C (``calibration="tight"``), or the paper's Thm 3.8/3.9 formula
  σ² = 2Δ_C²·ln(2/δ)/ε², valid only for ε ≤ 1, δ ≤ 1/2 (``calibration="paper"``).
  Pure DP is refused: Gaussian noise is never ε-DP.
* **Covariance** (the spec's ``covariance``). :func:`cascade` is the one place that picks
  the tree covariance (this module) or the range-optimal one
  (:mod:`dpsql.mechanisms.cascade_optimal`). What both share — input checks, the σ
  calibration above and the consistent levels — is in
  :mod:`dpsql.mechanisms._cascade_common`, which both import.
* **Outputs** are float64, unbiased, not rounded or clipped [§6.6].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.cascade import (
    Cascade2DErrorModel,
    CascadeErrorModel,
    depth_for,
    inverse_diagonal,
    split_variances,
    substitution_constant,
)
from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms._cascade_common import (
    MECHANISM,
    calibrate_sigma,
    check_arity,
    check_hist,
    check_neighbouring_rows,
    range_levels,
)
from dpsql.mechanisms.base import PrivateTree
from dpsql.mechanisms.cascade_optimal import cascade_optimal
from dpsql.privacy.budgets import Budget
from dpsql.privacy.units import Neighbouring


# ------------------------------------------------------------------ the sampler

def helmert_basis(arity: int) -> np.ndarray:
    """m × (m−1) orthonormal basis of the sum-zero subspace (column k ∝ (1,…,1,−k,0,…))."""
    m = int(arity)
    h = np.zeros((m, m - 1))
    for k in range(1, m):
        h[:k, k - 1] = 1.0
        h[k, k - 1] = -float(k)
        h[:, k - 1] /= math.sqrt(k * (k + 1))
    return h


def normals_needed(arity: int, depth: int, bins: int) -> int:
    """Standard normals a cascade over the first ``bins`` leaves consumes: 1 for the root
    plus m − 1 per split parent that covers a released leaf."""
    total, m = 1, int(arity)
    for d in range(depth):
        total += -(-bins // m ** (depth - d)) * (m - 1)
    return total


def cascade_transform(z: np.ndarray, arity: int, level_variance: Sequence[float],
                      bins: int | None = None) -> list[np.ndarray]:
    """The cascade as a linear map of standard normals, along the last axis of ``z``.

    ``z[..., :normals_needed(m, L, K)]`` holds the root normal, then per level d the
    (m−1)·P_d split normals of its P_d parents (parent-major). Returns the top-down node
    noise of every level 0..L, restricted to nodes that cover one of the first K leaves.
    Linear in z, so feeding the identity gives the mixing matrix A with AAᵀ = C."""
    m = int(arity)
    v = np.asarray(level_variance, dtype=np.float64)
    depth = v.size - 1
    k = m ** depth if bins is None else int(bins)
    tau = np.sqrt(split_variances(m, v))
    z = np.asarray(z, dtype=np.float64)
    need = normals_needed(m, depth, k)
    if z.ndim < 1 or z.shape[-1] < need or not 1 <= k <= m ** depth:
        raise InvalidPrivacyParameterError(
            f"a cascade over {k} of {m ** depth} leaves needs {need} normals on the last "
            f"axis, got shape {z.shape}")
    batch = z.shape[:-1]
    x = z[..., :1] * math.sqrt(v[0])
    levels, off = [x], 1
    h = helmert_basis(m)
    for d in range(depth):
        p = x.shape[-1]
        zd = z[..., off:off + p * (m - 1)]
        off += p * (m - 1)
        if m == 2:  # Algorithm 1: children X/2 ± (τ/√2)·Y
            half = 0.5 * x
            dev = (tau[d] / math.sqrt(2.0)) * zd
            kids = np.empty(batch + (p, 2))
            np.add(half, dev, out=kids[..., 0])
            np.subtract(half, dev, out=kids[..., 1])
        else:
            dev = zd.reshape(batch + (p, m - 1)) @ (tau[d] * h.T)
            kids = dev + x[..., :, None] / m
        keep = -(-k // m ** (depth - d - 1))
        x = kids.reshape(batch + (p * m,))[..., :keep]
        levels.append(x)
    return levels


def cascade_noise(depth: int, rng: np.random.Generator, *, arity: int = 2,
                  level_variance: Sequence[float] | float = 1.0,
                  bins: int | None = None) -> list[np.ndarray]:
    """Top-down cascade noise of a perfect m-ary tree of ``depth`` (Algorithm 1, its
    m-ary and level-dependent extensions): node noise per level 0..depth, restricted to
    the nodes over the first ``bins`` leaves. A scalar ``level_variance`` is the common
    node variance σ²."""
    lv = np.broadcast_to(np.asarray(level_variance, dtype=np.float64), (depth + 1,))
    k = int(arity) ** depth if bins is None else int(bins)
    z = rng.standard_normal(normals_needed(arity, depth, k))
    return cascade_transform(z, arity, lv, k)


# ------------------------------------------------------------------ calibration

def mahalanobis_sensitivity(arity: int, level_variance: Sequence[float], *,
                            neighbouring: Neighbouring | str, max_rows: int = 1) -> float:
    """Δ_C = max over neighbours of ‖C^{-1/2}(x − x')‖ for node variances
    ``level_variance`` (use a unit shape and calibrate σ on top)."""
    nb, m = check_neighbouring_rows(neighbouring, max_rows)
    if nb is Neighbouring.ADD_REMOVE:
        const = inverse_diagonal(arity, level_variance)
    else:
        const = substitution_constant(arity, level_variance)
    return m * math.sqrt(const)


# ------------------------------------------------------------------ 1-D release

def cascade(hist: Any, budget: Budget, *, neighbouring: Neighbouring | str,
            max_rows: int = 1, rng: np.random.Generator, arity: int = 2,
            calibration: str = "tight",
            relative_variance: Sequence[float] | None = None,
            covariance: str = "tree") -> PrivateTree:
    """Release a histogram of K bins as a consistent m-ary tree with cascade noise.

    ``relative_variance`` (one positive value per level, root first; default all 1)
    sets the *shape* of the per-level node variances; the calibration scales it. Levels
    0..L of the padded tree are returned restricted to [0, K), with ``bin_spans``,
    per-node ``variance`` and float64 counts (upper levels = sums of released leaves).

    ``covariance="optimal"`` replaces the tree covariance by the range-optimal one
    (:func:`dpsql.mechanisms.cascade_optimal.cascade_optimal`: the least total variance
    over all ranges of any unbiased linear Gaussian mechanism, K ≤ 4,096); the levels,
    ids and calibration are the same, ``relative_variance`` does not apply.

    >>> from dpsql.privacy import ZCDP, rng
    >>> t = cascade(np.array([5, 0, 3, 9, 1]), ZCDP(1), neighbouring="add_remove",
    ...             rng=rng(0))
    >>> t.bin_spans, [lvl.counts.size for lvl in t.levels]
    ((8, 4, 2, 1), [1, 2, 3, 5])
    >>> round(t.info["sigma"] ** 2, 4)  # (1 + 3/3) / (2ρ): every full node's variance
    1.0
    """
    if covariance not in ("tree", "optimal"):
        raise InvalidPrivacyParameterError(
            f"covariance must be 'tree' (Cascade Sampling) or 'optimal' (range-optimal), "
            f"got {covariance!r}")
    if covariance == "optimal":
        if relative_variance is not None:
            raise InvalidPrivacyParameterError(
                "relative_variance shapes the tree covariance; the range-optimal "
                "covariance has no level shape to set")
        return cascade_optimal(hist, budget, neighbouring=neighbouring, max_rows=max_rows,
                               rng=rng, arity=arity, calibration=calibration)
    h = check_hist(hist, 1)
    m = check_arity(arity)
    nb, rows = check_neighbouring_rows(neighbouring, max_rows)
    k = h.size
    depth = depth_for(k, m)
    shape = np.ones(depth + 1) if relative_variance is None \
        else np.asarray(relative_variance, dtype=np.float64)
    if shape.shape != (depth + 1,):
        raise InvalidPrivacyParameterError(
            f"relative_variance needs {depth + 1} values (levels 0..{depth}), got {shape.size}")
    split_variances(m, shape)  # validates feasibility
    delta_c = mahalanobis_sensitivity(m, shape, neighbouring=nb, max_rows=rows)
    sigma = calibrate_sigma(delta_c, budget, calibration)
    variances = (sigma * sigma) * shape
    n_draws = normals_needed(m, depth, k)
    noise = cascade_transform(rng.standard_normal(n_draws), m, variances, k)[-1]
    counts = h + noise
    model = CascadeErrorModel(m, depth, k, tuple(float(x) for x in variances))
    levels = range_levels(counts, m, depth, model.node_variance)
    return PrivateTree(
        mechanism=MECHANISM, levels=levels, error_model=model, loss=budget,
        sensitivity={"mahalanobis_l2": delta_c, "max_rows": float(rows)},
        bin_spans=tuple(m ** (depth - d) for d in range(depth + 1)), draws=n_draws,
        info={"sigma": sigma, "arity": m, "padded_bins": m ** depth, "bins": k,
              "calibration": calibration, "neighbouring": nb.value,
              "relative_variance": [float(x) for x in shape]})


# ------------------------------------------------------------------ 2-D grid

@dataclass(frozen=True)
class PrivateGrid:
    """A 2-D cascade release: the noisy K1 × K2 cells and their exact error model."""

    counts: np.ndarray
    error_model: Cascade2DErrorModel
    loss: Budget
    sensitivity: dict[str, float] = field(default_factory=dict)
    draws: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def grid_constant(arity: tuple[int, int], depth: tuple[int, int],
                  neighbouring: Neighbouring | str) -> float:
    """Mahalanobis constant of C_1 ⊗ C_2 (unit variance): d₁d₂ under add/remove, with
    d = 1 + L(m−1)/(m+1) (digest §3.5: (1 + K1/3)(1 + K2/3)); under substitution
    2d₁d₂ − 2·min off-diagonal of C_1⁻¹ ⊗ C_2⁻¹, whose smallest factor per axis is
    (C⁻¹)_ij = m/(m+1) for leaves split at the root (and d when i = j on that axis)."""
    nb = Neighbouring.parse(neighbouring)
    d = [1.0 + L * (m - 1) / (m + 1) for m, L in zip(arity, depth)]
    if nb is Neighbouring.ADD_REMOVE:
        return d[0] * d[1]
    off = [m / (m + 1) if L else None for m, L in zip(arity, depth)]
    cands = []
    if off[0] is not None:
        cands += [off[0] * d[1]] + ([off[0] * off[1]] if off[1] is not None else [])
    if off[1] is not None:
        cands.append(d[0] * off[1])
    if not cands:
        return d[0] * d[1]
    return 2.0 * d[0] * d[1] - 2.0 * min(cands)


def cascade_2d(hist2d: Any, budget: Budget, *, neighbouring: Neighbouring | str,
               max_rows: int = 1, rng: np.random.Generator, arity: int = 2,
               calibration: str = "tight") -> PrivateGrid:
    """Algorithm 4: every dyadic (m-adic) rectangle of the padded grid gets noise
    N(0, σ²); leaf covariance σ²(C_rows ⊗ C_cols). A column cascade per row normal,
    then a row cascade on the results (each row node has its own column cascade)."""
    h = check_hist(hist2d, 2)
    m = check_arity(arity)
    nb, rows = check_neighbouring_rows(neighbouring, max_rows)
    (k1, k2), depth = h.shape, (depth_for(h.shape[0], m), depth_for(h.shape[1], m))
    const = grid_constant((m, m), depth, nb)
    delta_c = rows * math.sqrt(const)
    sigma = calibrate_sigma(delta_c, budget, calibration)
    n1, n2 = normals_needed(m, depth[0], k1), normals_needed(m, depth[1], k2)
    g = rng.standard_normal((n1, n2))
    cols = cascade_transform(g, m, np.ones(depth[1] + 1), k2)[-1]          # (n1, k2)
    grid = cascade_transform(cols.T, m, np.full(depth[0] + 1, sigma * sigma), k1)[-1].T
    model = Cascade2DErrorModel((m, m), depth, (k1, k2), sigma * sigma)
    return PrivateGrid(h + grid, model, budget,
                       sensitivity={"mahalanobis_l2": delta_c, "max_rows": float(rows)},
                       draws=n1 * n2,
                       info={"sigma": sigma, "arity": m, "calibration": calibration,
                             "neighbouring": nb.value})


# ------------------------------------------------------------------ streaming

class CascadeStream:
    """Algorithm 2: continual release of noisy counts, one leaf at a time, by doubling
    a binary cascade tree (digest §3.3), with σ fixed up front for a public ``horizon``
    (§6.8): Δ_C² uses depth H = ⌈log₂ horizon⌉.

    Only the path from the current root to the last leaf is stored (height h → node
    noise). Leaf t+1 turns the node at height j (j = trailing ones of t) into its right
    sibling (parent − left) and draws fresh left children below it; when t+1 is a power
    of two the root doubles: X₁ = −X₀/2 + (√3/2)σY, new root X₀ + X₁. O(log t) per leaf,
    O(1) amortised; earlier outputs never change. The first t leaves have the law of the
    first t leaves of the depth-H tree (every subtree of a cascade is a cascade), so the
    whole stream is a marginal of one depth-H release: it is private at the calibrated
    loss, and :attr:`error_model` (bins = horizon) gives its exact variances. Streaming
    is sequential by nature: this is the one per-element loop in the module."""

    def __init__(self, budget: Budget, *, horizon: int, neighbouring: Neighbouring | str,
                 max_rows: int = 1, rng: np.random.Generator,
                 calibration: str = "tight") -> None:
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) \
                or horizon < 1:
            raise InvalidPrivacyParameterError(
                f"horizon must be an integer >= 1 (the most leaves the stream will emit), "
                f"got {horizon!r}")
        nb, rows = check_neighbouring_rows(neighbouring, max_rows)
        self.horizon = int(horizon)
        self.horizon_depth = depth_for(self.horizon, 2)
        shape = np.ones(self.horizon_depth + 1)
        self.sensitivity = mahalanobis_sensitivity(2, shape, neighbouring=nb, max_rows=rows)
        self.sigma = calibrate_sigma(self.sensitivity, budget, calibration)
        self.loss = budget
        self._rng = rng
        self._path: list[Any] = []
        self._t = 0

    def __len__(self) -> int:
        return self._t

    def _draw(self) -> Any:
        return self.sigma * self._rng.standard_normal()

    def _next_noise(self) -> Any:
        if self._t >= self.horizon:
            raise InvalidPrivacyParameterError(
                f"the stream has emitted its horizon of {self.horizon} leaves; its noise was "
                "calibrated for no more. Start a new stream with a new budget and a larger "
                "horizon")
        t, path, c = self._t, self._path, math.sqrt(3.0) / 2.0
        if t == 0:
            path.append(self._draw())
        elif t & (t - 1) == 0:  # doubling: the old root X0 gets a right sibling
            k = len(path) - 1
            x0 = path[k]
            x1 = -0.5 * x0 + c * self._draw()
            path.append(x0 + x1)
            path[k] = x1
            for h in range(k - 1, -1, -1):
                path[h] = 0.5 * path[h + 1] + c * self._draw()
        else:
            prev, j = t - 1, 0
            while prev & 1:
                prev >>= 1
                j += 1
            path[j] = path[j + 1] - path[j]  # left child -> its right sibling
            for h in range(j - 1, -1, -1):
                path[h] = 0.5 * path[h + 1] + c * self._draw()
        self._t += 1
        return path[0]

    def append(self, count: int) -> float:
        """Release the next count with its cascade noise."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise DataError(f"stream counts must be integers >= 0, got {count!r}")
        return float(count + self._next_noise())

    def extend(self, counts: Any) -> np.ndarray:
        """Release several counts in order."""
        return np.array([self.append(int(x)) for x in check_hist(counts, 1)])

    @property
    def error_model(self) -> CascadeErrorModel:
        s2 = self.sigma * self.sigma
        return CascadeErrorModel(2, self.horizon_depth, self.horizon,
                                 (s2,) * (self.horizon_depth + 1))


# ------------------------------------------------------------------ general trees

def _check_fanouts(fanouts: Sequence[Any]) -> list[np.ndarray]:
    out, size = [], 1
    for d, f in enumerate(fanouts):
        a = np.asarray(f)
        if a.shape != (size,) or (a.size and (not np.issubdtype(a.dtype, np.integer)
                                              or a.min() < 0)):
            raise InvalidPrivacyParameterError(
                f"fanouts[{d}] must be {size} integer child counts >= 0 (one per node at "
                f"depth {d}), got shape {a.shape}")
        out.append(a.astype(np.int64))
        size = int(a.sum())
    return out


def tree_cascade_transform(z: np.ndarray, fanouts: Sequence[Any],
                           sigma: float) -> list[np.ndarray]:
    """Algorithm 3 (any public tree) as a linear map of standard normals along axis 0.

    ``fanouts[d][i]`` is the number of children of node i at depth d; the nodes at depth
    d+1 are listed parent by parent. A node with c ≥ 2 children splits as
    X/c + τ_c(W − mean W), τ_c² = σ²(1 + 1/c) (binary: the paper's ±(√3/2)σY); one
    child copies its parent; leaves stop. Every node is N(0, σ²). ``z`` has one normal
    for the root and one per child."""
    fs = _check_fanouts(fanouts)
    z = np.asarray(z, dtype=np.float64)
    x = sigma * z[:1]
    levels, off = [x], 1
    for f in fs:
        p, total = f.size, int(f.sum())
        parent = np.repeat(np.arange(p), f)
        c = f[parent].astype(np.float64).reshape((-1,) + (1,) * (z.ndim - 1))
        w = z[off:off + total] * (sigma * np.sqrt(1.0 + 1.0 / c)) if total else z[:0]
        off += total
        mean = np.zeros((p,) + z.shape[1:])
        nz = f > 0
        if total:
            starts = (np.cumsum(f) - f)[nz]
            mean[nz] = np.add.reduceat(w, starts, axis=0) / \
                f[nz].reshape((-1,) + (1,) * (z.ndim - 1))
        x = x[parent] / c + w - mean[parent] if total else x[:0]
        levels.append(x)
    return levels


def tree_cascade_noise(fanouts: Sequence[Any], sigma: float,
                       rng: np.random.Generator) -> list[np.ndarray]:
    """Algorithm 3 noise for every node of a public tree, level by level."""
    fs = _check_fanouts(fanouts)
    return tree_cascade_transform(rng.standard_normal(1 + sum(int(f.sum()) for f in fs)),
                                  fs, sigma)


def tree_privacy_constant(fanouts: Sequence[Any], neighbouring: Neighbouring | str) -> float:
    """Mahalanobis constant (σ = 1) of Algorithm 3 on a public tree.

    Add/remove: max over leaves of diag(C⁻¹) = 1 + Σ_{ancestors, c ≥ 2} (c−1)/(c+1)
    (1 + b_i/3 for binary trees, b_i two-child ancestors; digest §3.4 [derived]).
    Substitution: max over leaf pairs, which for a pair split at node w (c children) is
    2c/(c+1) plus both path sums below w; computed bottom-up with the two largest child
    path sums per node (one vectorised step per level)."""
    nb = Neighbouring.parse(neighbouring)
    fs = _check_fanouts(fanouts)
    g = np.zeros(int(fs[-1].sum()) if fs else 1)  # deepest nodes: leaves
    best_pair = -np.inf
    for f in reversed(fs):
        p = f.size
        parent = np.repeat(np.arange(p), f)
        order = np.lexsort((g, parent))
        gs = g[order]
        ends = np.cumsum(f) - 1
        top1 = np.where(f > 0, gs[np.maximum(ends, 0)] if gs.size else 0.0, 0.0)
        a = np.where(f >= 2, (f - 1) / (f + 1.0), 0.0)
        if np.any(f >= 2):
            two = f >= 2
            top2 = gs[ends[two] - 1]
            lca = 2.0 * f[two] / (f[two] + 1.0)
            best_pair = max(best_pair, float(np.max(top1[two] + top2 + lca)))
        g = np.where(f > 0, a + top1, 0.0)
    diag = 1.0 + float(g[0])
    if nb is Neighbouring.ADD_REMOVE or best_pair == -np.inf:
        return diag
    return best_pair
