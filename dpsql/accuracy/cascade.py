"""Error models of Cascade Sampling (``reference/cascade_sampling.md``).

Cascade noise on a perfect m-ary tree of depth L (n = m**L leaf bins, the first K of
them released) is built top-down: the root is N(0, v_0) and a parent X at depth d gives
its m children X/m + D_c, where the deviation block D = (D_c) is N(0, τ_d²(I − J/m)),
independent of everything above. ``τ_d² = (v_{d+1} − v_d/m²)·m/(m−1)`` makes every node
at depth d+1 have variance v_{d+1} (digest §7 [derived]; equal variance v gives
τ² = v(1 + 1/m), and m = 2 gives the paper's ±(√3/2)·Y split).

Everything here follows from that independent-block ("Haar") representation, so no
n×n matrix is ever built:

* **Any linear query** w over the leaves has noise variance
  ``v_0·(Σw/n)² + Σ_p τ_{d(p)}²·(Σ_c f_c² − (Σ_c f_c)²/m)``, with ``f_c`` the mean of w
  over child c of block p. Blocks whose children all have the same f contribute 0, so a
  range [lo, hi) touches at most two blocks per level (the ancestors of its two
  boundaries): O(m·L) per range, vectorised over arrays of ranges.
* **Node covariances** (digest §2 [derived], generalised): an ancestor u of v at Δ
  levels above it has Cov = v_{d_u}/m^Δ; otherwise, with w their lowest common ancestor,
  Cov = (v_w − m·v_{w+1})/(m(m−1)) / m^{(d_u−d_w−1)+(d_v−d_w−1)} (−σ²/2 for binary
  siblings).
* **Privacy constants.** In whitened coordinates, moving leaf i by one changes the root
  block by 1/√v_0 and every ancestor block by e_c − 1/m, so
  ``diag(C⁻¹) = 1/v_0 + Σ_d (1 − 1/m)/τ_d²`` — 1 + L/3 for the binary equal-variance tree
  (Cor. B.3), 1 + L(m−1)/(m+1) for m-ary. Moving a pair (+1 at i, −1 at j) with lowest
  common ancestor at depth w cancels the blocks above w, gives 2/τ_w² at w and
  (1 − 1/m)/τ_d² for each block below w on both paths; the maximum over w is the
  substitution constant (closed form for equal variance: 2·diag − 2m/(m+1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.errors import IntegrityError, InvalidPrivacyParameterError, ProgrammingError

_Z95 = NormalDist().inv_cdf(0.975)


# ------------------------------------------------------------------ shape mathematics

def split_variances(arity: int, level_variance: Sequence[float]) -> np.ndarray:
    """τ_d² for d = 0..L−1: the variance of each child's i.i.d. component before the
    block is centred, ``(v_{d+1} − v_d/m²)·m/(m−1)``. Raises unless every
    v_{d+1} > v_d/m² (equality would make the children a deterministic function of the
    parent, which has unbounded privacy loss)."""
    v = np.asarray(level_variance, dtype=np.float64)
    m = int(arity)
    if v.ndim != 1 or v.size < 1 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise InvalidPrivacyParameterError(
            f"level variances must be finite and > 0, one per level from the root, got {v!r}")
    gap = v[1:] - v[:-1] / (m * m)
    if np.any(gap <= 0):
        d = int(np.argmax(gap <= 0))
        raise InvalidPrivacyParameterError(
            f"level variance {v[d + 1]!r} at level {d + 1} is infeasible: an m-ary split "
            f"needs it to exceed v_{d}/m² = {v[d] / (m * m)!r} (digest §7)")
    return gap * m / (m - 1)


def inverse_diagonal(arity: int, level_variance: Sequence[float]) -> float:
    """max_i (C⁻¹)_ii for unit moves of one leaf: ``1/v_0 + Σ_d (1 − 1/m)/τ_d²``
    (the same for every leaf of a perfect tree)."""
    m = int(arity)
    tau2 = split_variances(m, level_variance)
    return float(1.0 / float(level_variance[0]) + np.sum((1.0 - 1.0 / m) / tau2))


def substitution_constant(arity: int, level_variance: Sequence[float]) -> float:
    """max over leaf pairs i ≠ j of (e_i − e_j)ᵀC⁻¹(e_i − e_j).

    With lowest common ancestor at depth w the pair costs
    ``2/τ_w² + 2·Σ_{d>w} (1 − 1/m)/τ_d²``; this returns the maximum over w. A tree with
    one leaf has no pairs; it then returns :func:`inverse_diagonal` (conservative)."""
    m = int(arity)
    tau2 = split_variances(m, level_variance)
    if tau2.size == 0:
        return inverse_diagonal(m, level_variance)
    a = (1.0 - 1.0 / m) / tau2
    below = np.concatenate([np.cumsum(a[::-1])[::-1][1:], [0.0]])  # Σ_{d>w} a_d
    return float(np.max(2.0 / tau2 + 2.0 * below))


def optimal_relative_variance(arity: int, bins: int, lo: Any, hi: Any) -> np.ndarray:
    """Per-level node variances (root first, leaves scaled to 1) that minimise the mean
    variance of the ranges [lo, hi) at a fixed privacy constant ([derived], beyond §7).

    The mean range variance is c·x, linear in x = (v_0, τ_0², …, τ_{L−1}²)
    (:meth:`CascadeErrorModel.range_design`), and the constant is Σ a_i/x_i with
    a = (1, 1 − 1/m, …). Every positive x is feasible, and Lagrange gives
    x_i ∝ √(a_i/c_i). Pass the result as ``relative_variance`` to
    :func:`dpsql.mechanisms.cascade.cascade`; calibration rescales it."""
    m = int(arity)
    depth = depth_for(int(bins), m)
    probe = CascadeErrorModel(m, depth, int(bins), (1.0,) * (depth + 1))
    c = probe.range_design(lo, hi).mean(axis=0)
    if np.any(c <= 0):  # a level the workload never touches: keep it cheap, not free
        c = np.maximum(c, 1e-9 * float(c.max()))
    a = np.concatenate([[1.0], np.full(depth, 1.0 - 1.0 / m)])
    x = np.sqrt(a / c)
    v = [x[0]]
    for d in range(depth):
        v.append(v[-1] / (m * m) + x[d + 1] * (m - 1) / m)
    v = np.asarray(v)
    return v / v[-1]


def depth_for(bins: int, arity: int) -> int:
    """The smallest L with arity**L >= bins (integer arithmetic)."""
    depth, span = 0, 1
    while span < bins:
        span *= arity
        depth += 1
    return depth


def _check_ranges(lo: Any, hi: Any, bins: int) -> tuple[np.ndarray, np.ndarray]:
    lo_a, hi_a = np.broadcast_arrays(np.asarray(lo), np.asarray(hi))
    if lo_a.size and not (np.issubdtype(lo_a.dtype, np.integer)
                          and np.issubdtype(hi_a.dtype, np.integer)):
        raise ProgrammingError("range bounds must be integer bin positions")
    lo_a = lo_a.astype(np.int64)
    hi_a = hi_a.astype(np.int64)
    if np.any(lo_a < 0) or np.any(hi_a > bins) or np.any(lo_a > hi_a):
        raise ProgrammingError(
            f"ranges [lo, hi) must satisfy 0 <= lo <= hi <= {bins} (the number of bins)")
    return lo_a, hi_a


# ------------------------------------------------------------------ 1-D model

@dataclass(frozen=True)
class RangeLevels:
    """The level shape of a 1-D range view, shared by its error models: K = ``bins``
    leaf bins grouped ``arity``-ary over ``tree_depth`` levels; node j at level d covers
    bins [j·s_d, (j+1)·s_d) ∩ [0, K), s_d = arity^(depth − d)."""

    arity: int
    tree_depth: int
    bins: int

    @property
    def depth(self) -> int:
        return self.tree_depth

    @property
    def leaves(self) -> int:
        """Padded number of leaves, arity**depth."""
        return self.arity ** self.tree_depth

    def span(self, level: int) -> int:
        """Leaf bins per node at ``level``."""
        return self.arity ** (self.tree_depth - level)

    def level_size(self, level: int) -> int:
        """Number of released nodes at ``level``: ceil(bins / span)."""
        s = self.span(level)
        return -(-self.bins // s)

    def _node_ids(self, level: int, node_ids: Any) -> np.ndarray:
        """``node_ids`` of ``level`` as sorted unique int64; refuses ids off the level."""
        if not 0 <= level <= self.tree_depth:
            raise ProgrammingError(f"level must be in 0..{self.tree_depth}, got {level}")
        ids = np.unique(np.asarray(node_ids, dtype=np.int64).ravel())
        size = self.level_size(level)
        if ids.size and (ids[0] < 0 or ids[-1] >= size):
            raise ProgrammingError(f"node ids at level {level} must be in 0..{size - 1}")
        return ids

    def _check_shape(self, what: str, count: int, expected: int, noun: str) -> None:
        """Refuse an inconsistent shape: arity ≥ 2, depth ≥ 0, 1 ≤ bins ≤ arity^depth,
        and ``count`` per-model parameters (``noun``) where ``expected`` are needed."""
        m, L, K = int(self.arity), int(self.tree_depth), int(self.bins)
        if m < 2 or L < 0 or not 1 <= K <= m ** L or count != expected:
            raise IntegrityError(f"inconsistent {what} error model (arity={m}, depth={L}, "
                                 f"bins={K}, {count} {noun})")


@register
@dataclass(frozen=True)
class CascadeErrorModel(RangeLevels, ErrorModel):
    """Exact error model of a 1-D cascade release.

    ``level_variance[d]`` is the (absolute) noise variance of every full node at depth
    d; ``bins`` = K leaf bins are released out of ``arity**depth`` (the rest is public
    padding). A node that straddles K holds the sum of its released leaves, so its
    variance is that of the range it covers.

    >>> m = CascadeErrorModel(2, 10, 1024, (1.0,) * 11)
    >>> round(float(m.range_variance(np.array([171]), np.array([853]))[0]), 6)  # worst
    7.111111
    """

    level_variance: tuple[float, ...]  # after RangeLevels' arity, tree_depth, bins

    kind = "cascade"

    def __post_init__(self) -> None:
        self._check_shape("cascade", len(self.level_variance), self.tree_depth + 1,
                          "level variances")
        m = self.arity
        object.__setattr__(self, "level_variance",
                           tuple(float(x) for x in self.level_variance))
        object.__setattr__(self, "_tau2", split_variances(m, self.level_variance))

    # -- contract ---------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "arity": self.arity, "depth": self.tree_depth,
                "bins": self.bins, "level_variance": list(self.level_variance)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "CascadeErrorModel":
        return cls(int(params["arity"]), int(params["depth"]), int(params["bins"]),
                   tuple(float(x) for x in params["level_variance"]))

    def range_variance(self, lo: Any, hi: Any) -> np.ndarray:
        """Exact variance of the released count of bins [lo, hi), vectorised (O(m·L)
        per range: only the ≤ 2 boundary blocks per level contribute)."""
        lo_a, hi_a = _check_ranges(lo, hi, self.bins)
        shape = lo_a.shape
        lo_a, hi_a = lo_a.ravel(), hi_a.ravel()
        n = float(self.leaves)
        out = self.level_variance[0] * ((hi_a - lo_a) / n) ** 2
        out = out + self._block_terms(lo_a, hi_a, 0, self.tree_depth)
        return out.reshape(shape)

    def range_design(self, lo: Any, hi: Any) -> np.ndarray:
        """Coefficients X (ranges × (L+1)) with range_variance = X @ (v_0, τ_0², …,
        τ_{L−1}²): the variance is linear in the root variance and the split variances."""
        lo_a, hi_a = _check_ranges(lo, hi, self.bins)
        lo_a, hi_a = lo_a.ravel(), hi_a.ravel()
        cols = [((hi_a - lo_a) / float(self.leaves)) ** 2]
        cols += [self._block_terms(lo_a, hi_a, d, d + 1, unit=True)
                 for d in range(self.tree_depth)]
        return np.stack(cols, axis=1)

    def _block_terms(self, lo: np.ndarray, hi: np.ndarray, d_from: int,
                     d_to: int, unit: bool = False) -> np.ndarray:
        """Σ over blocks at depths d_from..d_to−1 of τ²(Σf² − (Σf)²/m) for [lo, hi)
        (τ² = 1 when ``unit``)."""
        m = self.arity
        total = np.zeros(lo.shape, dtype=np.float64)
        nonempty = hi > lo
        last = np.where(nonempty, hi - 1, lo)
        kids = np.arange(m, dtype=np.int64)
        for d in range(d_from, d_to):
            s_c = self.arity ** (self.tree_depth - d - 1)
            s_p = s_c * m
            p_lo, p_hi = lo // s_p, last // s_p
            for p, use in ((p_lo, nonempty), (p_hi, nonempty & (p_hi != p_lo))):
                start = p[:, None] * s_p + kids * s_c
                cover = np.minimum(hi[:, None], start + s_c) - np.maximum(lo[:, None], start)
                f = np.clip(cover, 0, None) / s_c
                t = np.sum(f * f, axis=1) - np.sum(f, axis=1) ** 2 / m
                tau2 = 1.0 if unit else self._tau2[d]
                total += np.where(use, tau2 * np.maximum(t, 0.0), 0.0)
        return total

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance:
        """Exact variance of the sum of released nodes ``node_ids`` at ``level`` (any
        set, contiguous or not): the selected leaf coverage is aggregated up the tree
        with sparse bincounts, one step per level (O(|ids|·level))."""
        ids = self._node_ids(level, node_ids)
        if ids.size == 0:
            return Variance(0.0, True)
        m, s = self.arity, self.span(level)
        cover = (np.minimum((ids + 1) * s, self.bins) - ids * s).astype(np.float64)
        total = self.level_variance[0] * (cover.sum() / self.leaves) ** 2
        cur_ids, cur_cov = ids, cover
        for d in range(level - 1, -1, -1):  # blocks whose children are at depth d+1
            s_c = self.span(d + 1)
            parent, inv = np.unique(cur_ids // m, return_inverse=True)
            f = cur_cov / s_c
            sf = np.bincount(inv, weights=f, minlength=parent.size)
            sf2 = np.bincount(inv, weights=f * f, minlength=parent.size)
            t = np.maximum(sf2 - sf * sf / m, 0.0)
            total += self._tau2[d] * float(t.sum())
            cur_ids = parent
            cur_cov = np.bincount(inv, weights=cur_cov, minlength=parent.size)
        if self.bins % s and ids[-1] == self.level_size(level) - 1:  # straddling: partial below
            lo = np.array([ids[-1] * s]), np.array([self.bins])
            total += float(self._block_terms(lo[0], lo[1], level, self.tree_depth)[0])
        return Variance(float(total), True)

    def node_variance(self, level: int) -> np.ndarray:
        """The dp_var column of ``level``: v_level for full nodes, the exact range
        variance for a node that straddles the padding."""
        size, s = self.level_size(level), self.span(level)
        out = np.full(size, self.level_variance[level])
        if self.bins % s:
            out[-1] = self.range_variance(np.array([(size - 1) * s]),
                                          np.array([self.bins]))[0]
        return out

    def node_covariance(self, level_a: int, ids_a: Any, level_b: int, ids_b: Any) -> np.ndarray:
        """Closed-form Cov of full (unpadded) nodes, vectorised over id pairs."""
        m, v = self.arity, np.asarray(self.level_variance)
        ia = np.asarray(ids_a, dtype=np.int64)
        ib = np.asarray(ids_b, dtype=np.int64)
        if level_a > level_b:
            level_a, level_b, ia, ib = level_b, level_a, ib, ia
        w = np.zeros(np.broadcast(ia, ib).shape, dtype=np.int64)
        for d in range(1, level_a + 1):  # deepest common ancestor depth
            same = (ia // m ** (level_a - d)) == (ib // m ** (level_b - d))
            w = np.where(same, d, w)
        nested = w == level_a
        w1 = np.minimum(w + 1, self.tree_depth)
        sib = (v[w] - m * v[w1]) / (m * (m - 1))
        expo = (level_a - w - 1) + (level_b - w - 1)
        cross = sib / np.power(float(m), expo)
        anc = v[level_a] / float(m) ** (level_b - level_a)
        return np.where(nested, anc, cross)

    def level_summary(self) -> list[dict[str, Any]]:
        rows = []
        for k in range(1, self.tree_depth + 1):
            sd = math.sqrt(self.level_variance[k])
            rows.append({"level": k, "variance": self.level_variance[k], "stderr": sd,
                         "bound95": _Z95 * sd, "nodes": self.level_size(k)})
        return rows


# ------------------------------------------------------------------ 2-D model

@register
@dataclass(frozen=True)
class Cascade2DErrorModel(ErrorModel):
    """Exact error model of a 2-D cascade grid (Algorithm 4): leaf covariance
    σ²·(C_rows ⊗ C_cols), so a rectangle's variance is σ² times the product of the two
    unit-variance 1-D range variances. Only the leaves are released (depth 0)."""

    arity: tuple[int, int]
    tree_depths: tuple[int, int]
    bins: tuple[int, int]
    sigma2: float

    kind = "cascade2d"

    def __post_init__(self) -> None:
        axes = tuple(CascadeErrorModel(int(m), int(L), int(K), (1.0,) * (int(L) + 1))
                     for m, L, K in zip(self.arity, self.tree_depths, self.bins))
        if len(axes) != 2 or not self.sigma2 > 0:
            raise IntegrityError("inconsistent cascade2d error model")
        object.__setattr__(self, "_axes", axes)

    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "arity": list(self.arity),
                "depth": list(self.tree_depths), "bins": list(self.bins),
                "sigma2": float(self.sigma2)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Cascade2DErrorModel":
        return cls(tuple(int(x) for x in params["arity"]),
                   tuple(int(x) for x in params["depth"]),
                   tuple(int(x) for x in params["bins"]), float(params["sigma2"]))

    @property
    def depth(self) -> int:
        return 0

    def axis(self, k: int) -> CascadeErrorModel:
        """The unit-variance 1-D model of axis k (0 = rows, 1 = columns)."""
        return self._axes[k]

    def rect_variance(self, lo1: Any, hi1: Any, lo2: Any, hi2: Any) -> np.ndarray:
        """Exact variance of the released count of the rectangle [lo1,hi1)×[lo2,hi2)."""
        r1 = self._axes[0].range_variance(lo1, hi1)
        r2 = self._axes[1].range_variance(lo2, hi2)
        return self.sigma2 * r1 * r2

    def leaf_covariance(self, i1: Any, j1: Any, i2: Any, j2: Any) -> np.ndarray:
        """Cov of leaves (i1, j1) and (i2, j2)."""
        a, b = self._axes
        return (self.sigma2 * a.node_covariance(a.depth, i1, a.depth, i2)
                * b.node_covariance(b.depth, j1, b.depth, j2))

    def sum_variance(self, level: int, node_ids: np.ndarray, *,
                     exact_limit: int = 2048) -> Variance:
        """Variance of the sum of leaf cells ``node_ids`` (row-major ids i·K2 + j).

        Exact (pairwise closed-form covariances, chunked) for up to ``exact_limit``
        cells; above that the bound λ_max·|S| with exact=False, where λ_max is the
        largest eigenvalue of σ²(C_rows ⊗ C_cols) (digest §2: 1.5² σ² for binary)."""
        if level != 0:
            raise ProgrammingError("a cascade2d grid releases only its leaves (level 0)")
        ids = np.unique(np.asarray(node_ids, dtype=np.int64).ravel())
        k1, k2 = self.bins
        if ids.size and (ids[0] < 0 or ids[-1] >= k1 * k2):
            raise ProgrammingError(f"cell ids must be in 0..{k1 * k2 - 1}")
        if ids.size > exact_limit:
            lam = 1.0
            for ax in self._axes:
                m = ax.arity
                lam *= max(1.0 / ax.leaves, 1.0 + 1.0 / m if ax.depth else 1.0)
            return Variance(self.sigma2 * lam * ids.size, False)
        r, c = ids // k2, ids % k2
        total = 0.0
        step = max(1, 2_000_000 // max(ids.size, 1))
        for s in range(0, ids.size, step):
            total += float(self.leaf_covariance(r[s:s + step, None], c[s:s + step, None],
                                                r[None, :], c[None, :]).sum())
        return Variance(max(total, 0.0), True)

    def level_summary(self) -> list[dict[str, Any]]:
        sd = math.sqrt(self.sigma2)
        return [{"level": 0, "variance": self.sigma2, "stderr": sd, "bound95": _Z95 * sd,
                 "nodes": self.bins[0] * self.bins[1]}]
