"""Noise calibration: from a sensitivity and a loss to a noise scale, and back.

* Gaussian under zCDP: adding N(0, σ²) (or the discrete N_Z(0, σ²)) to a query of L2
  sensitivity Δ is Δ²/(2σ²)-zCDP, so σ = Δ/√(2ρ) (Bun–Steinke 2016; CKS 2020 Thm 4).
* Gaussian under (ε, δ): the analytic Gaussian mechanism of Balle and Wang (2018, Thm 8):
  the smallest σ with Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.
* Laplace under pure DP: b = Δ₁/ε.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpsql.errors import InvalidPrivacyParameterError
from dpsql.privacy.budgets import ceil_float


def _pos(name: str, v: float) -> float:
    x = float(v)
    if not (x > 0) or math.isinf(x):
        raise InvalidPrivacyParameterError(f"{name} must be a finite number > 0, got {v!r}")
    return x


def _phi(x: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_sigma_zcdp(sensitivity_l2: float, rho: "float | Fraction") -> float:
    """σ such that Gaussian noise on a query of L2 sensitivity Δ is ρ-zCDP: Δ/√(2ρ),
    rounded up: the smallest float σ with σ²·2ρ ≥ Δ² exactly (a float quotient of a
    square root is off by an ulp either way, below the exact σ about half the time).
    ``rho`` may be an exact Fraction (a budget's own), so no float rounding of ρ can
    raise the loss either."""
    d = _pos("sensitivity_l2", sensitivity_l2)
    r = _pos("rho", rho)
    sigma = d / math.sqrt(2.0 * r)
    need, twice_rho = Fraction(d) ** 2, 2 * Fraction(rho)
    while Fraction(sigma) ** 2 * twice_rho < need:
        sigma = math.nextafter(sigma, math.inf)
    while Fraction(math.nextafter(sigma, 0.0)) ** 2 * twice_rho >= need:
        sigma = math.nextafter(sigma, 0.0)
    return sigma


def gaussian_rho(sensitivity_l2: float, sigma2: float) -> float:
    """ρ = Δ²/(2σ²) spent by Gaussian noise of variance σ² on a query of L2 sensitivity Δ."""
    d = _pos("sensitivity_l2", sensitivity_l2)
    return d * d / (2.0 * _pos("sigma2", sigma2))


def analytic_gaussian_delta(sensitivity_l2: float, sigma: float, epsilon: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle–Wang 2018, Thm 8)."""
    d, s, e = float(sensitivity_l2), float(sigma), float(epsilon)
    a = d / (2.0 * s)
    b = e * s / d
    first = _phi(a - b)
    # e^ε Φ(−a − b) computed in log space to avoid overflow for large ε.
    tail = 0.5 * math.erfc((a + b) / math.sqrt(2.0))
    second = math.exp(e + math.log(tail)) if tail > 0 else 0.0
    return max(first - second, 0.0)


def analytic_gaussian_sigma(sensitivity_l2: float, epsilon: float, delta: float) -> float:
    """The smallest σ for which the Gaussian mechanism is (ε, δ)-DP (bisection, relative
    precision 1e-12, rounded up)."""
    d = _pos("sensitivity_l2", sensitivity_l2)
    e = _pos("epsilon", epsilon)
    dl = float(delta)
    if not (0.0 < dl < 1.0):
        raise InvalidPrivacyParameterError(f"delta must be in (0, 1), got {delta!r}")
    lo, hi = 1e-12 * d, d
    while analytic_gaussian_delta(d, hi, e) > dl:
        hi *= 2.0
    while analytic_gaussian_delta(d, lo, e) <= dl and lo > 1e-300:
        lo /= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if analytic_gaussian_delta(d, mid, e) <= dl:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def classic_gaussian_sigma(sensitivity_l2: float, epsilon: float, delta: float) -> float:
    """The textbook σ = Δ·√(2 ln(1.25/δ))/ε (valid for ε < 1); kept for reproducing papers."""
    d = _pos("sensitivity_l2", sensitivity_l2)
    e = _pos("epsilon", epsilon)
    return d * math.sqrt(2.0 * math.log(1.25 / float(delta))) / e


def laplace_scale(sensitivity_l1: float, epsilon: "float | Fraction") -> float:
    """b = Δ₁/ε: Laplace (or discrete Laplace) noise of scale b is ε-DP. Rounded up from
    the exact quotient (:func:`~dpsql.privacy.budgets.ceil_float`), as the mechanisms'
    own scales are; ``epsilon`` may be a budget's exact Fraction."""
    _pos("sensitivity_l1", sensitivity_l1)
    _pos("epsilon", epsilon)
    return ceil_float(Fraction(sensitivity_l1) / Fraction(epsilon))
