"""The range-optimal correlated Gaussian noise and its exact error model.

Cascade Sampling releases ``x + N(0, σ²C)`` with the tree covariance C_k; its privacy
depends on C only through the Mahalanobis constant ``max diag C⁻¹`` (digest §3.6,
Thm 3.8, which holds for any C). This module picks the C that minimises the *total*
variance over every range of K bins, ``tr(G C)`` with ``G = Σ_ranges w wᵀ``, at a fixed
constant — the optimal unbiased linear Gaussian mechanism for that workload (the matrix
mechanism under ℓ₂; Li et al. 2010, Yuan et al. 2016). [derived here; not in the paper.]

* **The convex problem.** With M = C⁻¹: minimise ``tr(G M⁻¹)`` subject to
  ``diag(M) ≤ 1``. Its Lagrange dual is ``max over λ ≥ 0, Σλ = 1`` of
  ``(tr (Λ^½ G Λ^½)^½)²``, attained (for the λ of the optimum) by
  ``M ∝ Λ^{-½} (Λ^½ G Λ^½)^½ Λ^{-½}``. At uniform λ the dual value is the SVD bound
  (Σ singular values of W)²/K (Li & Miklau 2012), so the optimum is never below it.
* **The solver.** Fixed-point iteration on λ: with H = Λ^½GΛ^½ = VwVᵀ and
  H^½ = V√wVᵀ, the diagonal of M is ``d = diag(H^½)/λ``; at the optimum d is constant
  (the complementary slackness of the dual). The update ``λ ← λ·d²`` (normalised)
  equalises d; each step is one symmetric eigendecomposition. Every iterate gives a
  feasible mechanism whose total variance is ``f·max d`` (f = Σ√w), and every λ gives
  the dual lower bound f², so ``gap = max d / f − 1`` certifies how far (as a relative
  excess of mean squared error) the released mechanism is from the optimum. It falls
  about 40× per step; at K = 1,024 three to five steps reach 1e-5.
* **The noise.** ``C = (Λ^½V) w^{-½} (Λ^½V)ᵀ``, sampled as ``F z`` with
  ``F = Λ^½ V w^{-¼}`` and z ~ N(0, I_K): K normals, one matrix product. Privacy uses
  ``diag(C⁻¹) = diag(M)`` computed from the same factorisation.
* **Cost.** O(K³) time and O(K²) memory, once per process and shape: the
  factorisation is kept (:func:`factorise`), so the mechanism, its error model and the
  release-time bootstrap's replicates share one; :func:`dpsql.accuracy.load` shares
  models, and attaching a release never builds one. Hence
  :data:`MAX_OPTIMAL_BINS`; beyond it the tree covariance (O(K)) is the choice.

The error model stores only public numbers: K, the weights λ, σ and the view's level
shape. Variances are exact: ``Var[lo, hi) = P[hi,hi] − 2P[lo,hi] + P[lo,lo]`` with P
the 2-D prefix sums of σ²C, so O(1) per range after an O(K²) set-up.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np

from dpsql._blas import limited
from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.accuracy.cascade import RangeLevels, _check_ranges
from dpsql.errors import IntegrityError, InvalidPrivacyParameterError

MAX_OPTIMAL_BINS = 4096
"""The largest K the range-optimal covariance accepts: its set-up is a few dense K×K
eigendecompositions (about 1 s each at K = 2,048 on one core, 8× that at 4,096)."""

_Z95 = NormalDist().inv_cdf(0.975)


def all_ranges_gram(bins: int) -> np.ndarray:
    """G = WᵀW for W = every range [lo, hi) of ``bins`` bins, each once:
    G[i, j] = (min(i, j) + 1)·(K − max(i, j)), the ranges holding both bins."""
    i = np.arange(int(bins), dtype=np.float64)
    return (np.minimum.outer(i, i) + 1.0) * (bins - np.maximum.outer(i, i))


def _check_bins(bins: Any) -> int:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise InvalidPrivacyParameterError(f"bins must be an integer >= 1, got {bins!r}")
    if bins > MAX_OPTIMAL_BINS:
        raise InvalidPrivacyParameterError(
            f"the range-optimal covariance is dense (O(K²) memory, O(K³) time) and allows "
            f"at most {MAX_OPTIMAL_BINS} bins, got {bins}; use the tree covariance "
            "(covariance = \"tree\", Cascade Sampling) for more bins")
    return int(bins)


def _spectral(gram: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(√λ, w, V) with Λ^½ G Λ^½ = V diag(w) Vᵀ; w is clipped away from 0 (G is
    positive definite, so this only guards rounding)."""
    s = np.sqrt(weights)
    w, v = np.linalg.eigh(s[:, None] * gram * s[None, :])
    floor = float(w.max()) * 1e-15
    return s, np.maximum(w, floor), v


def _inverse_diagonal(s: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """diag(M) = diag(H^½)/λ for the mechanism of these weights (M = C⁻¹)."""
    return np.einsum("ij,j,ij->i", v, np.sqrt(w), v) / (s * s)


@lru_cache(maxsize=4)
def _solve(bins: int, tol: float, max_iter: int) -> tuple[tuple[float, ...], float, int]:
    gram = all_ranges_gram(bins)
    lam = np.full(bins, 1.0 / bins)
    best: tuple[float, np.ndarray, int] | None = None
    for it in range(1, max_iter + 1):
        with limited(bins):  # one BLAS thread for a small matrix (dpsql._blas)
            s, w, v = _spectral(gram, lam)
            d = _inverse_diagonal(s, w, v)
        f = float(np.sqrt(w).sum())
        gap = float(d.max()) / f - 1.0
        if best is None or gap < best[0]:
            best = (gap, lam, it)
        if gap <= tol:
            break
        lam = lam * d * d
        lam = lam / lam.sum()
    gap, lam, it = best
    return tuple(float(x) for x in lam), max(gap, 0.0), it


def optimal_range_weights(bins: int, *, tol: float = 1e-5,
                          max_iter: int = 50) -> tuple[np.ndarray, float, int]:
    """The dual weights λ of the range-optimal covariance over ``bins`` bins, the
    certified optimality gap (relative excess of total range variance over the optimum
    of every unbiased linear Gaussian mechanism at the same privacy constant), and the
    number of eigendecompositions it took. Deterministic; cached per process.

    >>> lam, gap, _ = optimal_range_weights(16)
    >>> bool(gap <= 1e-5), round(float(lam.sum()), 12)
    (True, 1.0)
    """
    k = _check_bins(bins)
    if not 0 < tol < 1 or max_iter < 1:
        raise InvalidPrivacyParameterError("tol must be in (0, 1) and max_iter >= 1")
    lam, gap, it = _solve(k, float(tol), int(max_iter))
    return np.array(lam), gap, it


def _check_weights(weights: Any, bins: int) -> np.ndarray:
    lam = np.asarray(weights, dtype=np.float64)
    if lam.shape != (bins,) or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise IntegrityError(f"range-optimal weights must be {bins} positive finite numbers")
    return lam


FACTOR_CACHE_BYTES = 300 * 2 ** 20
"""The most memory :func:`noise_factor` keeps for factorisations already made: one
4,096-bin view's (F and M, 268 MB), or many smaller ones, least recently used first out."""


@dataclass(frozen=True, eq=False)
class Factorisation:
    """F and M = C⁻¹ of one (K, λ), read-only, and the residual ``e`` of exactly this F
    and M (:func:`factorisation_residual`): one object, so that the certificate a build
    checks always belongs to the F its noise is drawn from."""

    factor: np.ndarray
    m_inv: np.ndarray
    residual: float


_factors: "OrderedDict[tuple[int, bytes], Factorisation]" = OrderedDict()
_factors_lock = threading.Lock()


def factorise(bins: int, weights: Any) -> Factorisation:
    """The :class:`Factorisation` of K = ``bins`` and the weights λ.

    It depends only on K and λ (public, data-free), and a build asks for it again and
    again: the mechanism draws its noise from F, its error model's variances come from
    F, and the release-time bootstrap re-runs both once per replicate (32
    eigendecompositions of the same matrix, 70 % of building the trips demo). So it is
    computed once (with its residual: two K³ products, 4 % of the eigendecomposition at
    K = 4,096) and kept up to :data:`FACTOR_CACHE_BYTES`. Two threads that miss at once
    each compute and use their own; the last one is kept."""
    k = _check_bins(bins)
    lam = _check_weights(weights, k)
    key = (k, lam.tobytes())
    with _factors_lock:
        hit = _factors.get(key)
        if hit is not None:
            _factors.move_to_end(key)
            return hit
    with limited(k):  # one BLAS thread for a small matrix (dpsql._blas)
        s, w, v = _spectral(all_ranges_gram(k), lam)
        factor = (s[:, None] * v) * w ** -0.25
        m_inv = ((v * np.sqrt(w)) @ v.T) / np.outer(s, s)
        factor.flags.writeable = m_inv.flags.writeable = False
        out = Factorisation(factor, m_inv, factorisation_residual(factor, m_inv))
    with _factors_lock:
        _factors[key] = out
        while len(_factors) > 1 and sum(f.factor.nbytes + f.m_inv.nbytes for f in
                                        _factors.values()) > FACTOR_CACHE_BYTES:
            _factors.popitem(last=False)
    return out


def noise_factor(bins: int, weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """(F, M) for the weights λ: leaf noise ``σ·F z`` (z ~ N(0, I)) has covariance
    ``σ²C`` with ``C = F Fᵀ``, and ``M = C⁻¹`` (from the same factorisation).
    Every λ > 0 gives a valid mechanism; privacy is calibrated on M, never assumed.
    Kept between calls (:func:`factorise`)."""
    f = factorise(bins, weights)
    return f.factor, f.m_inv


def factorisation_residual(factor: np.ndarray, m_inv: np.ndarray) -> float:
    """e = ‖FᵀMF − I‖∞, an upper bound on the spectral norm of that symmetric residual.

    The noise drawn is ``σ·F z``, so its covariance is C = FFᵀ for the F actually used;
    M is C⁻¹ only up to the rounding of the eigendecomposition. For any leaf change v,
    with u = F⁻¹v: vᵀMv = uᵀ(FᵀMF)u ≥ (1 − e)‖u‖² = (1 − e)·vᵀC⁻¹v, so the true
    Mahalanobis constant is at most the computed one divided by (1 − e). Two K³
    products: 1 % of building the covariance at K = 1,024 (0.24 s of 20 s), 4 % at
    K = 4,096 (30 s of 715 s, on a loaded 2-core machine)."""
    resid = factor.T @ (m_inv @ factor)
    resid[np.diag_indices_from(resid)] -= 1.0
    return float(np.abs(resid).sum(axis=1).max())


def privacy_constants(m_inv: np.ndarray) -> tuple[float, float]:
    """(max_i M_ii, max over i ≠ j of (e_i − e_j)ᵀM(e_i − e_j)) for M = C⁻¹: the
    squared Mahalanobis sensitivity of one leaf moving by 1 (add/remove) and of a pair
    moving by (+1, −1) (substitution). Computed in row blocks (O(K²) time, O(K·block)
    extra memory)."""
    d = np.diag(m_inv).copy()
    single = float(d.max())
    if d.size < 2:
        return single, single
    pair = -math.inf
    for start in range(0, d.size, 512):
        block = d[start:start + 512, None] + d[None, :] - 2.0 * m_inv[start:start + 512]
        rows = np.arange(start, min(start + 512, d.size))
        block[rows - start, rows] = -math.inf  # i == j is not a pair
        pair = max(pair, float(block.max()))
    return single, pair


@register
@dataclass(frozen=True)
class RangeOptimalErrorModel(RangeLevels, ErrorModel):
    """Exact error model of a range-optimal release: leaf noise N(0, σ²C(λ)) over
    ``bins`` bins, levels grouped ``arity``-ary as in a cascade view (:class:`RangeLevels`).

    >>> lam, _, _ = optimal_range_weights(8)
    >>> m = RangeOptimalErrorModel(2, 3, 8, 1.0, tuple(lam))
    >>> bool(m.range_variance(np.array([0]), np.array([8]))[0] > 0)
    True
    """

    sigma: float  # after RangeLevels' arity, tree_depth, bins
    weights: tuple[float, ...]

    kind = "cascade_optimal"

    def __post_init__(self) -> None:
        K = int(self.bins)
        self._check_shape("range-optimal", len(self.weights), K, "weights")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise IntegrityError(f"range-optimal sigma must be > 0, got {self.sigma!r}")
        _check_weights(self.weights, K)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_prefix_cache", None)

    # -- contract ---------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "arity": self.arity, "depth": self.tree_depth,
                "bins": self.bins, "sigma": self.sigma, "weights": list(self.weights)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "RangeOptimalErrorModel":
        return cls(int(params["arity"]), int(params["depth"]), int(params["bins"]),
                   float(params["sigma"]), tuple(float(x) for x in params["weights"]))

    # -- the covariance ----------------------------------------------------------
    def covariance(self) -> np.ndarray:
        """The dense K×K leaf noise covariance σ²C (K² floats)."""
        factor, _ = noise_factor(self.bins, self.weights)
        with limited(self.bins):
            return (self.sigma ** 2) * (factor @ factor.T)

    def _prefix(self) -> np.ndarray:
        """P[a, b] = Cov(noise of bins [0, a), noise of bins [0, b)), (K+1)×(K+1);
        built on first use (one eigendecomposition), then kept."""
        cached = self._prefix_cache
        if cached is not None:
            return cached
        with self._lock:
            if self._prefix_cache is None:
                p = np.zeros((self.bins + 1, self.bins + 1))
                p[1:, 1:] = np.cumsum(np.cumsum(self.covariance(), axis=0), axis=1)
                object.__setattr__(self, "_prefix_cache", p)
            return self._prefix_cache

    def range_variance(self, lo: Any, hi: Any) -> np.ndarray:
        """Exact variance of the released count of bins [lo, hi), vectorised, O(1) each."""
        lo_a, hi_a = _check_ranges(lo, hi, self.bins)
        p = self._prefix()
        out = p[hi_a, hi_a] - 2.0 * p[lo_a, hi_a] + p[lo_a, lo_a]
        return np.maximum(out, 0.0)

    def gives_variance(self, level: int) -> bool:
        return True  # without building the prefix sums (one eigendecomposition)

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance:
        """Exact variance of the sum of released nodes ``node_ids`` at ``level``: the
        nodes are merged into maximal runs of bins and every pair of runs is read from P."""
        ids = self._node_ids(level, node_ids)
        if ids.size == 0:
            return Variance(0.0, True)
        s = self.span(level)
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        starts = ids[np.concatenate([[0], breaks])] * s
        ends = np.minimum((ids[np.concatenate([breaks - 1, [ids.size - 1]])] + 1) * s,
                          self.bins)
        p = self._prefix()
        a, b = starts, ends
        cov = (p[b[:, None], b[None, :]] - p[a[:, None], b[None, :]]
               - p[b[:, None], a[None, :]] + p[a[:, None], a[None, :]])
        return Variance(float(max(cov.sum(), 0.0)), True)

    def node_variance(self, level: int) -> np.ndarray:
        """The dp_var column of ``level``: each node's exact variance."""
        size, s = self.level_size(level), self.span(level)
        lo = np.arange(size, dtype=np.int64) * s
        return self.range_variance(lo, np.minimum(lo + s, self.bins))

    def level_summary(self) -> list[dict[str, Any]]:
        """Per level, the *largest* node's standard error (nodes differ here, unlike
        the tree covariance, where every full node shares one variance)."""
        rows = []
        for k in range(1, self.tree_depth + 1):
            var = float(self.node_variance(k).max())
            sd = math.sqrt(var)
            rows.append({"level": k, "variance": var, "stderr": sd,
                         "bound95": _Z95 * sd, "nodes": self.level_size(k)})
        return rows
