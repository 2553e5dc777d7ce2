"""Counting on any public tree: per-node Laplace / Gaussian baselines and the
α-multiplicative approximate-DP algorithm (``reference/counting_on_trees.md``).

A tree is given by ``parents``: ``parents[k-1][j]`` is the parent (at level k−1) of node j
of level k, for k = 1..d, with each level's nodes sorted by parent; level 0 is the root.
True counts are the leaf counts (level d); upper levels are sums (:func:`tree_level_counts`).
So descendants of any node form one contiguous block of every lower level, which lets
every step below run once per level over whole arrays.

Sensitivity (derived, DESIGN rule 2). A unit has at most ``m = max_rows`` rows and each
row reaches one leaf, so it touches every level. Per level the change has L1 norm ≤ m and
L2 ≤ m under add/remove; under substitution m rows may leave some nodes and m arrive at
others: L1 ≤ 2m, L2 ≤ √2·m, and the root n is public.

**Baselines** (digest §2.2 B1/B2): noise on every node of every noisy level, then the BLUE
(:func:`dpsql.mechanisms.least_squares.tree_least_squares`). The budget is split across
the noisy levels (uniform, or ``level_weights``) and composed sequentially; within a level
the L1/L2 sensitivity calibrates the noise. Noise is discrete (exact integer samplers on
integer counts, digest E11) by default:

* Laplace, ``PureDP(ε)``: discrete Laplace of scale ``b_k = L1/ε_k``, ε_k = w_k·ε.
* Gaussian, ``ZCDP(ρ)``: discrete Gaussian with ``σ²_k = L2²/(2ρ_k)``, ρ_k = w_k·ρ
  (CKS 2020: the multivariate discrete Gaussian is exactly as zCDP as the continuous one).
* Gaussian, ``ApproxDP(ε, δ)`` with discrete noise: the largest ρ whose tight conversion
  gives (ε, δ) (:meth:`ApproxDP.to_zcdp`), then as above. The analytic Gaussian
  (Balle–Wang) curve is exact only for *continuous* noise — no theorem gives it for the
  multivariate discrete Gaussian — so it is used only with ``discrete=False``: the whole
  release is one Gaussian mechanism once each level is scaled by 1/σ_k, and with
  ``σ²_k = s²·L2²/w_k`` its scaled L2 sensitivity is exactly 1, so ``s`` is the analytic
  σ for sensitivity 1 (this also fixes digest E10: valid for ε ≥ 1).

The noise variances stored in the error model are the exact variances of the samplers
(discrete Laplace: 2q/(1−q)² with q = e^{−1/b}; discrete Gaussian: from its pmf).

**α-algorithm** (digest §2.3–2.7, Thm 4.1): see :mod:`dpsql.mechanisms.alpha_tree`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from dpsql.accuracy.tree_counts import TreeCountsErrorModel, encode_fanouts
from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms.base import PrivateLevel, PrivateTree
from dpsql.mechanisms.least_squares import tree_least_squares
from dpsql.privacy.budgets import ApproxDP, Budget, PureDP, ZCDP, ceil_float, normalise_weights
from dpsql.privacy.calibrate import analytic_gaussian_sigma
from dpsql.privacy.samplers import (Sampler, discrete_gaussian, discrete_laplace, gaussian,
                                    laplace)
from dpsql.privacy.units import Neighbouring, histogram_sensitivity

__all__ = ["tree_level_counts", "laplace_tree", "gaussian_tree"]


# ------------------------------------------------------------------------------ trees
def _check_parents(parents: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    if len(parents) < 1:
        raise InvalidPrivacyParameterError(
            "a tree needs at least one level below the root: give parents[0] for level 1")
    ps, sizes = [], [1]
    for k, p in enumerate(parents, start=1):
        arr = np.asarray(p)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] must be a 1-d integer array, got {arr.dtype} {arr.shape}")
        arr = arr.astype(np.int64)
        if arr.size == 0 or arr[0] < 0 or arr[-1] >= sizes[-1] or np.any(np.diff(arr) < 0):
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] must be non-empty, sorted and lie in [0, {sizes[-1]}): "
                "each level's nodes are ordered by parent")
        ps.append(arr)
        sizes.append(arr.size)
    return ps, sizes


def _segment_sum(parents: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by sorted ``parents`` (empty groups: 0)."""
    cs = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    bounds = np.searchsorted(parents, np.arange(size + 1))
    return cs[bounds[1:]] - cs[bounds[:-1]]


def tree_level_counts(parents: Sequence[np.ndarray], leaf_counts: np.ndarray) -> list[np.ndarray]:
    """True counts of every level 0..d (int64, exact) from the leaf counts.

    >>> [c.tolist() for c in tree_level_counts([np.array([0, 0]), np.array([0, 1, 1])],
    ...                                         np.array([3, 1, 2]))]
    [[6], [3, 3], [3, 1, 2]]
    """
    ps, sizes = _check_parents(parents)
    x = np.asarray(leaf_counts)
    if x.shape != (sizes[-1],) or (x.size and not np.issubdtype(x.dtype, np.integer)):
        raise DataError(f"leaf_counts must be {sizes[-1]} integers (one per leaf of level "
                        f"{len(ps)}), got {x.dtype} {x.shape}")
    x = x.astype(np.int64)
    if np.any(x < 0):
        raise DataError(f"leaf counts must be >= 0, found {int(x.min())}")
    out = [x]
    for k in range(len(ps), 0, -1):
        out.append(_segment_sum(ps[k - 1], out[-1], sizes[k - 1]))
    return out[::-1]


# ------------------------------------------------------------------------- baselines
def _dlap_variance(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (-math.expm1(-1.0 / scale)) ** 2


def _dgauss_variance(sigma2: float) -> float:
    if sigma2 > 400.0:  # |Var − σ²| < σ²·e^{−2π²σ²}·poly: far below float resolution
        return sigma2
    half = int(math.ceil(14.0 * math.sqrt(sigma2))) + 2
    x = np.arange(-half, half + 1, dtype=np.float64)
    p = np.exp(-x * x / (2.0 * sigma2))
    return float((x * x * p).sum() / p.sum())


def _baseline(kind: str, parents, leaf_counts, budget: Budget, neighbouring, max_rows: int,
              rng: np.random.Generator, level_weights, discrete: bool,
              noise: Sampler = discrete_gaussian) -> PrivateTree:
    ps, sizes = _check_parents(parents)
    counts = tree_level_counts(ps, leaf_counts)
    sens = histogram_sensitivity(neighbouring, max_rows)
    nb, m, l1, l2_sq = sens.neighbouring, sens.max_rows, sens.l1, sens.l2_squared
    d = len(ps)
    first = 1 if sens.total_is_public else 0
    weights = normalise_weights(
        [1] * (d + 1 - first) if level_weights is None else level_weights,
        what="level_weights", count=d + 1 - first,
        count_hint=f" (one per noisy level {first}..{d}; under substitution the root is "
                   "public and has none)")
    noise_var = [0.0] * (d + 1)
    scales: dict[int, float] = {}
    if kind == "laplace":
        if not isinstance(budget, PureDP):
            raise InvalidPrivacyParameterError(
                f"laplace_tree needs a PureDP budget, got {type(budget).__name__}; use "
                "gaussian_tree for zCDP or (ε, δ) budgets")
        for w, k in zip(weights, range(first, d + 1)):
            b = ceil_float(l1 / (budget.epsilon * w))  # never below the exact Δ₁/ε_k
            scales[k] = b
            noise_var[k] = _dlap_variance(b) if discrete else 2.0 * b * b
        noise_name = "discrete_laplace" if discrete else "laplace"
    else:
        if isinstance(budget, ZCDP) or (isinstance(budget, ApproxDP) and discrete):
            rho = budget.to_zcdp().rho
            s2 = {k: ceil_float(l2_sq / (2 * rho * w)) for w, k in zip(weights, range(first, d + 1))}
        elif isinstance(budget, ApproxDP):
            s = analytic_gaussian_sigma(1.0, float(budget.epsilon), float(budget.delta))
            s2 = {k: s * s * float(l2_sq / w) for w, k in zip(weights, range(first, d + 1))}
        else:
            raise InvalidPrivacyParameterError(
                f"gaussian_tree needs a ZCDP or ApproxDP budget, got {type(budget).__name__}; "
                "use laplace_tree for pure DP")
        for k, v in s2.items():
            scales[k] = v
            noise_var[k] = _dgauss_variance(v) if discrete else v
        noise_name = "discrete_gaussian" if discrete else "gaussian"
    noisy: list[np.ndarray] = []
    draws = 0
    for k in range(d + 1):
        if k < first:
            noisy.append(counts[k].astype(np.float64))
            continue
        n = sizes[k]
        if kind == "laplace":
            z = discrete_laplace(scales[k], n, rng) if discrete else laplace(scales[k], n, rng)
        else:
            z = noise(scales[k], n, rng) if discrete else gaussian(scales[k], n, rng)
        noisy.append(counts[k].astype(np.float64) + z)
        draws += n
    est, post = tree_least_squares(ps, noisy, noise_var)
    model = TreeCountsErrorModel(sizes, noise_var, encode_fanouts(ps, sizes), noise_name)
    levels = tuple(PrivateLevel(np.arange(sizes[k], dtype=np.int64),
                                np.asarray(est[k], dtype=np.float64),
                                np.asarray(post[k], dtype=np.float64)) for k in range(d + 1))
    info = {"neighbouring": nb.value, "max_rows": m, "noise": noise_name,
            "level_weights": [str(w) for w in weights], "noisy_levels": list(range(first, d + 1)),
            "noise_scales": [scales.get(k) for k in range(d + 1)],
            "noise_variances": noise_var}
    return PrivateTree(mechanism=f"{kind}_tree", levels=levels, error_model=model, loss=budget,
                       sensitivity={"l1_per_level": float(l1), "l2_per_level": math.sqrt(l2_sq)},
                       draws=draws, info=info)


def laplace_tree(parents: Sequence[np.ndarray], leaf_counts: np.ndarray, budget: PureDP, *,
                 neighbouring: Neighbouring | str, max_rows: int = 1,
                 rng: np.random.Generator, level_weights: Sequence[float] | None = None,
                 discrete: bool = True) -> PrivateTree:
    """ε-DP counts of every node: (discrete) Laplace noise per node, then least squares.

    The budget is split over the noisy levels (0..d under add/remove, 1..d under
    substitution, where the root is the public n) by ``level_weights`` (uniform if None);
    level k gets scale ``L1/ε_k``. Per-node ``variance`` is the exact BLUE posterior.

    >>> from dpsql.privacy import rng
    >>> t = laplace_tree([np.array([0, 0])], np.array([5, 7]), PureDP(1),
    ...                  neighbouring="add_remove", rng=rng(0))
    >>> abs(float(t.levels[0].counts[0]) - float(t.levels[1].counts.sum())) < 1e-9
    True
    """
    return _baseline("laplace", parents, leaf_counts, budget, neighbouring, max_rows, rng,
                     level_weights, discrete)


def gaussian_tree(parents: Sequence[np.ndarray], leaf_counts: np.ndarray,
                  budget: ZCDP | ApproxDP, *, neighbouring: Neighbouring | str,
                  max_rows: int = 1, rng: np.random.Generator,
                  level_weights: Sequence[float] | None = None,
                  discrete: bool = True,
                  noise: Sampler = discrete_gaussian) -> PrivateTree:
    """ρ-zCDP or (ε, δ)-DP counts of every node: Gaussian noise per node, then least squares.

    Discrete Gaussian noise by default (zCDP-calibrated; an (ε, δ) budget is converted with
    the tight CKS conversion). ``discrete=False`` adds continuous Gaussian noise and, for
    (ε, δ), uses the analytic Gaussian calibration (module docstring). ``noise`` draws the
    discrete noise: the exact sampler for a release; the calibration bootstrap's
    replicates (noise around released values) pass the table sampler
    (:mod:`dpsql.privacy.table_sampler`).

    >>> from dpsql.privacy import rng
    >>> t = gaussian_tree([np.array([0, 0])], np.array([5, 7]), ZCDP("0.5"),
    ...                   neighbouring="substitute", rng=rng(0))
    >>> float(t.levels[0].counts[0]), float(t.levels[0].variance[0])
    (12.0, 0.0)
    """
    return _baseline("gaussian", parents, leaf_counts, budget, neighbouring, max_rows, rng,
                     level_weights, discrete, noise)
