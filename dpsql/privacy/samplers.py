"""Vectorised noise samplers.

The discrete samplers return ``int64`` arrays and follow Canonne, Kamath and Steinke,
"The Discrete Gaussian for Differential Privacy" (NeurIPS 2020):

* :func:`discrete_laplace` draws P[X = x] ∝ exp(−|x|/scale) as the difference of two
  i.i.d. geometric variables.
* :func:`discrete_gaussian` draws P[X = x] ∝ exp(−x²/(2σ²)) by rejection from a discrete
  Laplace proposal with scale t = ⌊σ⌋ + 1, accepting Y with probability
  exp(−(|Y| − σ²/t)²/(2σ²)) (CKS Algorithm 3).
* The acceptance coin Bernoulli(exp(−γ)) follows CKS Algorithm 1/2: for γ ≤ 1, draw
  Bernoulli(γ/k) for k = 1, 2, … until one fails and accept when the count is odd; for
  γ > 1, ⌊γ⌋ coins Bernoulli(exp(−1)) and one Bernoulli(exp(−(γ − ⌊γ⌋))).

Every step works on whole arrays: the loops run over rounds (their number grows with
log of the sample size), never over samples. The rational arithmetic of CKS is replaced
by comparisons of 53-bit uniforms, so each coin's probability is exact up to 2⁻⁵³, and
the geometric draws use numpy's inversion in float64 — "provably close", not
bit-exact.

``sigma2`` is always a *variance* (``reference/inftda.md`` §2.1).
"""

from __future__ import annotations

import math
from typing import Callable, Union

import numpy as np

from dpsql.errors import InternalError, InvalidPrivacyParameterError
from dpsql.privacy.budgets import MAX_NOISE_SCALE, usable_range_text

Size = Union[int, tuple[int, ...]]
Sampler = Callable[[float, Size, np.random.Generator], np.ndarray]
"""``sampler(sigma2, size, rng)``: N_Z(0, σ²) draws as int64 (the mechanisms' ``noise``
argument: :func:`discrete_gaussian` for a release)."""


def _check_scale(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}") from err
    if math.isnan(v) or math.isinf(v) or v < 0:
        raise InvalidPrivacyParameterError(
            f"{name} must be a finite number >= 0, got {value!r}")
    limit = MAX_NOISE_SCALE ** 2 if name == "sigma2" else MAX_NOISE_SCALE
    if v > limit:
        raise InvalidPrivacyParameterError(
            f"{name} = {v:.6g} is beyond {limit:.6g}, where the samplers stop being exact "
            "(draws would lose their last bits); the budget share of this view or level is "
            f"too small for its sensitivity: raise it ({usable_range_text()})")
    return v


def _exact_int64(magnitudes: np.ndarray) -> np.ndarray:
    """float64 magnitudes as int64, refusing any that is not an exact integer below 2⁵³
    (never cast inf/NaN or a rounded float to int64 unchecked)."""
    if magnitudes.size and not float(np.max(np.abs(magnitudes))) < 2.0 ** 53:
        raise InternalError("a noise draw is not finite or beyond 2^53; the noise scale "
                            "check should have refused its scale")
    return magnitudes.astype(np.int64)


def _count(size: Size) -> int:
    if isinstance(size, (int, np.integer)):
        if size < 0:
            raise InvalidPrivacyParameterError(f"size must be >= 0, got {size}")
        return int(size)
    return int(np.prod(size, dtype=np.int64))


def _bernoulli_exp_le1(gamma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−γ)) for each γ in [0, 1] (CKS Algorithm 1, vectorised over rounds).

    Round k draws A ~ Bernoulli(γ/k) for every element still going; an element stops at
    the first A = 0 and its output is 1 iff it stopped at an odd k. All elements still
    going share the same k, so a round is one uniform draw and one compaction."""
    g = np.asarray(gamma, dtype=np.float64).ravel()
    coin = rng.random(g.size) < g  # round k = 1 on the whole array
    out = ~coin
    active = np.flatnonzero(coin)
    g = g[active]
    k = 2
    while active.size:
        coin = rng.random(active.size) * k < g
        if k % 2 == 1:
            out[active[~coin]] = True
        active = active[coin]
        g = g[coin]
        k += 1
    return out


def bernoulli_exp(gamma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−γ)) for each γ ≥ 0 (CKS Algorithm 2, vectorised over rounds).

    exp(−γ) = exp(−(γ − ⌊γ⌋)) · exp(−1)^⌊γ⌋: one coin for the fractional part, then
    ⌊γ⌋ coins Bernoulli(exp(−1)) for the survivors, stopping at the first failure."""
    gamma = np.asarray(gamma, dtype=np.float64)
    whole = np.floor(gamma)
    alive = _bernoulli_exp_le1(gamma - whole, rng)
    todo = np.flatnonzero(alive & (whole > 0))
    remaining = whole[todo]
    while todo.size:
        ok = _bernoulli_exp_le1(np.ones(todo.size), rng)
        alive[todo[~ok]] = False
        remaining -= 1.0
        keep = ok & (remaining > 0)
        todo = todo[keep]
        remaining = remaining[keep]
    return alive


def _dlap_magnitudes(scale: float, m: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """m proposals of the discrete Laplace as (magnitude as float64, negative-sign mask),
    with the (negative, 0) outcomes still in: callers must reject them.

    The magnitude G = ⌊ln(1 − U)/ln q⌋ ~ Geometric(1 − q) on {0, 1, …}, since
    P[G ≥ g] = q^g; with a fair random sign and (−, 0) rejected, P[x] ∝ q^|x|
    (CKS 2020, Algorithm 2)."""
    u = rng.random(m)
    mag = np.floor(np.log1p(-u) * -scale)
    neg = rng.integers(0, 2, size=m, dtype=np.uint8).view(bool)
    return mag, neg


def _dlap(scale: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of the discrete Laplace, P[x] ∝ exp(−|x|/scale)."""
    if n == 0 or scale == 0.0:
        return np.zeros(n, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        m = int((n - filled) * 1.02) + 64
        mag, neg = _dlap_magnitudes(scale, m, rng)
        ok = ~(neg & (mag == 0))
        np.negative(mag, out=mag, where=neg)
        y = _exact_int64(mag[ok])
        take = min(y.size, n - filled)
        out[filled:filled + take] = y[:take]
        filled += take
    return out


def discrete_laplace(scale: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """Discrete Laplace noise: P[X = x] ∝ exp(−|x|/scale), as int64.

    >>> from dpsql.privacy import rng
    >>> discrete_laplace(2.0, 3, rng(1)).dtype
    dtype('int64')
    """
    s = _check_scale("scale", scale)
    n = _count(size)
    return _dlap(s, n, rng).reshape(size)


def discrete_gaussian(sigma2: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """Discrete Gaussian noise N_Z(0, σ²): P[X = x] ∝ exp(−x²/(2σ²)), as int64.

    ``sigma2`` is the variance parameter σ² (not σ). ``sigma2 = 0`` gives zeros.

    >>> from dpsql.privacy import rng
    >>> x = discrete_gaussian(400.0, 100_000, rng(3))
    >>> abs(float(x.var()) / 400 - 1) < 0.03
    True
    """
    s2 = _check_scale("sigma2", sigma2)
    n = _count(size)
    if n == 0 or s2 == 0.0:
        return np.zeros(size, dtype=np.int64)
    sigma = math.sqrt(s2)
    t = math.floor(sigma) + 1.0
    shift = s2 / t
    out = np.empty(n, dtype=np.int64)
    filled = 0
    rate = 0.5  # refined after the first batch
    while filled < n:
        need = n - filled
        m = int(need / rate * 1.05) + 64
        mag, neg = _dlap_magnitudes(t, m, rng)
        gamma = mag - shift
        gamma *= gamma
        gamma *= 1.0 / (2.0 * s2)
        keep = bernoulli_exp(gamma, rng) & ~(neg & (mag == 0))
        np.negative(mag, out=mag, where=neg)
        y = _exact_int64(mag[keep])
        rate = max(y.size / m, 0.05)
        take = min(y.size, need)
        out[filled:filled + take] = y[:take]
        filled += take
    return out.reshape(size)


def laplace(scale: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """Continuous Laplace noise with the given scale b (variance 2b²), as float64."""
    s = _check_scale("scale", scale)
    return rng.laplace(0.0, s, size=size) if s > 0 else np.zeros(size)


def gaussian(sigma2: float, size: Size, rng: np.random.Generator) -> np.ndarray:
    """Continuous Gaussian noise with variance ``sigma2``, as float64."""
    s2 = _check_scale("sigma2", sigma2)
    return rng.normal(0.0, math.sqrt(s2), size=size) if s2 > 0 else np.zeros(size)


def discrete_gaussian_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    """The exact normalised pmf of N_Z(0, σ²) at the given integers (for tests)."""
    s2 = float(sigma2)
    half = int(math.ceil(40.0 * math.sqrt(s2))) + 2
    z = np.arange(-half, half + 1, dtype=np.float64)
    norm = np.exp(-z * z / (2.0 * s2)).sum()
    x = np.asarray(support, dtype=np.float64)
    return np.exp(-x * x / (2.0 * s2)) / norm


def discrete_laplace_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    """The exact normalised pmf of the discrete Laplace at the given integers (for tests)."""
    q = math.exp(-1.0 / float(scale))
    x = np.abs(np.asarray(support, dtype=np.float64))
    return (1.0 - q) / (1.0 + q) * q ** x
