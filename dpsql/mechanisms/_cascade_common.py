"""What both cascades share: input checks, σ calibration and the consistent m-ary levels.

The tree cascade (:mod:`dpsql.mechanisms.cascade`, Cascade Sampling) and the
range-optimal one (:mod:`dpsql.mechanisms.cascade_optimal`) differ only in the covariance
of their Gaussian noise. Both check the histogram, the arity and the neighbouring relation
the same way, calibrate σ from a Mahalanobis sensitivity Δ_C the same way (zCDP, the
analytic Gaussian or the paper's formula: the *Calibration* decision in
:mod:`dpsql.mechanisms.cascade`), and return the same levels: the m-ary bottom-up sums of
the released leaves. Both import this module; :func:`dpsql.mechanisms.cascade.cascade`
picks one of them by ``covariance``, so the import runs one way:
cascade → cascade_optimal → _cascade_common.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms.base import PrivateLevel
from dpsql.privacy.budgets import ApproxDP, Budget, PureDP, ZCDP
from dpsql.privacy.calibrate import analytic_gaussian_sigma, gaussian_sigma_zcdp
from dpsql.privacy.units import Neighbouring, histogram_sensitivity

MECHANISM = "cascade"


def check_neighbouring_rows(neighbouring: Any, max_rows: Any) -> tuple[Neighbouring, int]:
    sens = histogram_sensitivity(neighbouring, max_rows)
    return sens.neighbouring, sens.max_rows


def paper_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """σ of the paper's Thm 3.8: sqrt(2Δ_C²·ln(2/δ))/ε (ε ≤ 1, δ ≤ 1/2). With
    Δ_C² = 1 + k/3 this is Thm 3.9 (σ = 136.24 at ε = 0.1, δ = 1e-9, k = 10)."""
    e, d = float(epsilon), float(delta)
    if not (0 < e <= 1) or not (0 < d <= 0.5):
        raise InvalidPrivacyParameterError(
            f"the paper's calibration holds only for 0 < epsilon <= 1 and 0 < delta <= 1/2, "
            f"got epsilon={e!r}, delta={d!r}; use calibration='tight' (analytic Gaussian)")
    return float(sensitivity) * math.sqrt(2.0 * math.log(2.0 / d)) / e


def calibrate_sigma(sensitivity: float, budget: Budget, calibration: str = "tight") -> float:
    """σ for Mahalanobis sensitivity Δ_C under ``budget``: Δ/√(2ρ) for zCDP, the
    analytic Gaussian (``"tight"``) or the paper's formula (``"paper"``) for (ε, δ)."""
    if calibration not in ("tight", "paper"):
        raise InvalidPrivacyParameterError(
            f"calibration must be 'tight' or 'paper', got {calibration!r}")
    if isinstance(budget, PureDP):
        raise InvalidPrivacyParameterError(
            "Cascade Sampling adds Gaussian noise, which is never pure ε-DP; give a ZCDP "
            "budget (e.g. PureDP(eps).to_zcdp()) or an ApproxDP(epsilon, delta)")
    if isinstance(budget, ZCDP):
        if calibration == "paper":
            raise InvalidPrivacyParameterError(
                "calibration='paper' is an (ε, δ) formula; give an ApproxDP budget or use "
                "calibration='tight' with a ZCDP budget")
        return gaussian_sigma_zcdp(sensitivity, budget.rho)  # exact: rounded up there
    if isinstance(budget, ApproxDP):
        if calibration == "paper":
            return paper_sigma(float(budget.epsilon), float(budget.delta), sensitivity)
        return analytic_gaussian_sigma(sensitivity, float(budget.epsilon),
                                       float(budget.delta))
    raise InvalidPrivacyParameterError(f"budget must be ZCDP or ApproxDP, got {budget!r}")


def check_hist(hist: Any, ndim: int) -> np.ndarray:
    h = np.asarray(hist)
    if h.ndim != ndim or h.size == 0:
        raise DataError(f"the histogram must be a non-empty {ndim}-D array, got shape {h.shape}")
    if not np.issubdtype(h.dtype, np.integer):
        raise DataError(f"the histogram must hold integer counts, got dtype {h.dtype}")
    if np.any(h < 0):
        raise DataError("the histogram holds negative counts; true counts are >= 0")
    return h.astype(np.int64, copy=False)


def check_arity(arity: Any) -> int:
    if isinstance(arity, bool) or not isinstance(arity, (int, np.integer)) or arity < 2:
        raise InvalidPrivacyParameterError(f"arity must be an integer >= 2, got {arity!r}")
    return int(arity)


def range_levels(leaves: np.ndarray, arity: int, depth: int,
                 node_variance: Any) -> tuple[PrivateLevel, ...]:
    """Levels 0..depth over released leaf counts: each upper level is the m-ary
    bottom-up sum of the one below (padding past K adds public zeros), so the tree is
    exactly consistent; ``node_variance(d)`` gives each level's dp_var column."""
    per_level = [leaves]
    for _ in range(depth):
        child = per_level[0]
        pad = (-child.size) % arity
        if pad:
            child = np.concatenate([child, np.zeros(pad)])
        per_level.insert(0, child.reshape(-1, arity).sum(axis=1))
    return tuple(PrivateLevel(np.arange(c.size, dtype=np.int64), c, node_variance(d))
                 for d, c in enumerate(per_level))
