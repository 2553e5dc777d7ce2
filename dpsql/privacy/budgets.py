"""Privacy losses as typed values: :class:`PureDP`, :class:`ZCDP` and :class:`ApproxDP`.

Parameters are stored as exact :class:`~fractions.Fraction` so that composition and
splitting by weights are exact. Conversions that involve irrational numbers (the tight
zCDP → (ε, δ) conversion and its inverse) are computed in floating point and then
rounded in the *conservative* direction before they are stored as a Fraction: a
converted ε is never smaller, and a converted ρ never larger, than the exact value.

Conversions:

* pure → zCDP: ρ = ε²/2 (Bun–Steinke 2016, Prop. 1.4).
* zCDP → (ε, δ): the tight conversion of Canonne, Kamath and Steinke (2020, Cor. 13),
  δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α, solved for the smallest ε.
* (ε, δ) → zCDP: the largest ρ whose tight conversion at δ gives at most ε, found by
  bisection. It is only meaningful for mechanisms that are *already* ρ-zCDP (Gaussian
  noise): (ε, δ)-DP does not imply any zCDP guarantee in general.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Sequence, Union

from dpsql.errors import InvalidPrivacyParameterError

Number = Union[int, float, Fraction, str]


def _to_fraction(name: str, value: Number) -> Fraction:
    if isinstance(value, bool):
        raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise InvalidPrivacyParameterError(f"{name} must be a finite number, got {value!r}")
    try:
        return Fraction(value)
    except (TypeError, ValueError, ZeroDivisionError) as err:
        raise InvalidPrivacyParameterError(
            f"{name} must be a number, got {value!r}") from err


def _positive(name: str, value: Number) -> Fraction:
    f = _to_fraction(name, value)
    if f <= 0:
        raise InvalidPrivacyParameterError(
            f"{name} must be > 0, got {value!r}; a zero or negative budget releases nothing "
            f"useful: give a positive {name}")
    return f


def _fmt(f: Fraction) -> str:
    return f"{float(f):.6g}"


def ceil_float(x: Fraction) -> float:
    """The smallest float >= the exact ``x``: noise scales computed from exact budgets are
    rounded up, never down, so float rounding can only add privacy."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _ceil_fraction(x: float) -> Fraction:
    """The float x nudged one ulp up, as an exact Fraction (conservative for ε)."""
    return Fraction(math.nextafter(x, math.inf))


def _floor_fraction(x: float) -> Fraction:
    """The float x nudged one ulp down, as an exact Fraction (conservative for ρ)."""
    return Fraction(max(math.nextafter(x, 0.0), 0.0))


@dataclass(frozen=True)
class PureDP:
    """Pure ε-differential privacy."""

    epsilon: Fraction

    def __init__(self, epsilon: Number) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", epsilon))

    def to_zcdp(self) -> "ZCDP":
        """ε-DP implies (ε²/2)-zCDP."""
        return ZCDP(self.epsilon * self.epsilon / 2)

    def to_approx(self, delta: Number) -> "ApproxDP":
        """ε-DP is (ε, δ)-DP for every δ; reported with the given δ."""
        return ApproxDP(self.epsilon, delta)

    def __add__(self, other: "PureDP") -> "PureDP":
        if not isinstance(other, PureDP):
            return NotImplemented
        return PureDP(self.epsilon + other.epsilon)

    def scale(self, weight: Number) -> "PureDP":
        """This loss multiplied by a positive weight (ε scales linearly)."""
        return PureDP(self.epsilon * _positive("weight", weight))

    def split(self, weights: Sequence[Number]) -> list["PureDP"]:
        """Split into parts proportional to ``weights``; the parts compose back exactly."""
        return [self.scale(w) for w in normalise_weights(weights)]

    def describe(self) -> str:
        return f"ε={_fmt(self.epsilon)} (pure DP)"

    def to_json(self) -> dict:
        return {"kind": "pure", "epsilon": str(self.epsilon)}


@dataclass(frozen=True)
class ZCDP:
    """ρ-zero-concentrated differential privacy (Bun–Steinke 2016)."""

    rho: Fraction

    def __init__(self, rho: Number) -> None:
        object.__setattr__(self, "rho", _positive("rho", rho))

    def to_zcdp(self) -> "ZCDP":
        return self

    def to_approx(self, delta: Number) -> "ApproxDP":
        """The smallest ε such that ρ-zCDP implies (ε, δ)-DP (CKS 2020, Cor. 13)."""
        d = _open_unit("delta", delta)
        eps = zcdp_epsilon(float(self.rho), float(d))
        return ApproxDP(_ceil_fraction(eps), d)

    def __add__(self, other: "ZCDP") -> "ZCDP":
        if not isinstance(other, ZCDP):
            return NotImplemented
        return ZCDP(self.rho + other.rho)

    def scale(self, weight: Number) -> "ZCDP":
        """This loss multiplied by a positive weight (ρ scales linearly)."""
        return ZCDP(self.rho * _positive("weight", weight))

    def split(self, weights: Sequence[Number]) -> list["ZCDP"]:
        """Split into parts proportional to ``weights``; the parts compose back exactly."""
        return [self.scale(w) for w in normalise_weights(weights)]

    def describe(self) -> str:
        return f"ρ={_fmt(self.rho)} (zCDP)"

    def to_json(self) -> dict:
        return {"kind": "zcdp", "rho": str(self.rho)}


@dataclass(frozen=True)
class ApproxDP:
    """Approximate (ε, δ)-differential privacy."""

    epsilon: Fraction
    delta: Fraction

    def __init__(self, epsilon: Number, delta: Number) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", epsilon))
        object.__setattr__(self, "delta", _open_unit("delta", delta))

    def to_zcdp(self) -> "ZCDP":
        """The largest ρ whose tight conversion at this δ gives at most this ε.

        Use it only to calibrate a mechanism that is itself ρ-zCDP (Gaussian noise)."""
        rho = zcdp_rho(float(self.epsilon), float(self.delta))
        return ZCDP(_floor_fraction(rho))

    def to_approx(self, delta: Number) -> "ApproxDP":
        d = _open_unit("delta", delta)
        if d < self.delta:
            raise InvalidPrivacyParameterError(
                f"cannot report (ε, δ)-DP at δ={_fmt(d)} smaller than the guaranteed "
                f"δ={_fmt(self.delta)}")
        return ApproxDP(self.epsilon, d)

    def __add__(self, other: "ApproxDP") -> "ApproxDP":
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(self.epsilon + other.epsilon, self.delta + other.delta)

    def scale(self, weight: Number) -> "ApproxDP":
        """Both ε and δ multiplied by a positive weight (basic composition is linear)."""
        w = _positive("weight", weight)
        return ApproxDP(self.epsilon * w, self.delta * w)

    def split(self, weights: Sequence[Number]) -> list["ApproxDP"]:
        """Split ε and δ into parts proportional to ``weights`` (basic composition)."""
        return [self.scale(w) for w in normalise_weights(weights)]

    def describe(self) -> str:
        return f"(ε={_fmt(self.epsilon)}, δ={float(self.delta):.3g})-DP"

    def to_json(self) -> dict:
        return {"kind": "approx", "epsilon": str(self.epsilon), "delta": str(self.delta)}


Budget = Union[PureDP, ZCDP, ApproxDP]


def budget_from_json(data: dict) -> Budget:
    """Inverse of ``Budget.to_json``."""
    kind = data.get("kind")
    if kind == "pure":
        return PureDP(Fraction(data["epsilon"]))
    if kind == "zcdp":
        return ZCDP(Fraction(data["rho"]))
    if kind == "approx":
        return ApproxDP(Fraction(data["epsilon"]), Fraction(data["delta"]))
    raise InvalidPrivacyParameterError(
        f"unknown budget kind {kind!r}; expected 'pure', 'zcdp' or 'approx'")


def compose(budgets: Iterable[Budget]) -> Budget:
    """Sequential composition of losses of one kind (exact: ε, ρ or (ε, δ) add up)."""
    items = list(budgets)
    if not items:
        raise InvalidPrivacyParameterError("compose() needs at least one budget")
    kinds = {type(b) for b in items}
    if len(kinds) != 1:
        names = sorted(k.__name__ for k in kinds)
        raise InvalidPrivacyParameterError(
            f"cannot compose different kinds of loss {names}; convert them to one kind first "
            "(e.g. PureDP.to_zcdp())")
    total = items[0]
    for b in items[1:]:
        total = total + b
    return total


def normalise_weights(weights: Sequence[Number], *, what: str = "split()",
                      count: int | None = None, count_hint: str = "") -> list[Fraction]:
    """Exact shares proportional to ``weights`` (each > 0), summing to exactly 1.

    ``count`` checks the length (with ``count_hint`` saying what the entries stand for);
    ``what`` names the argument in errors. Every budget split in dpsql goes through here.
    """
    ws = list(weights)
    if count is not None and len(ws) != count:
        raise InvalidPrivacyParameterError(
            f"{what} needs {count} weights{count_hint}, got {len(ws)}")
    if not ws:
        raise InvalidPrivacyParameterError(f"{what} needs at least one weight")
    fr = [_positive(f"{what} weight", w) for w in ws]
    s = sum(fr)
    return [w / s for w in fr]




# --------------------------------------------------------------------------------------
# The usable range of a budget, derived from where the noise stays exact and finite.
# --------------------------------------------------------------------------------------

MAX_NOISE_SCALE = 2.0 ** 47
"""The largest noise scale (Laplace b, Gaussian σ) the samplers draw exactly. A discrete
draw's magnitude is ⌊−b·ln(1−U)⌋ with U a 53-bit uniform, at most 53·ln 2 ≈ 36.7·b, so
below 2⁴⁷·36.7 < 2⁵³ every magnitude is an exact integer in float64 (and in int64);
beyond, draws lose their last bits and the pmf is no longer the one analysed."""

MIN_NOISE_SCALE = 2.0 ** -20
"""The smallest noise scale accepted: below a millionth of one count the noise is
smaller than the rounding of the counts it is added to, the discrete Gaussian's
acceptance exponent 1/(2σ²) exceeds 2³⁹, and the guarantee (ε above 10⁶) means nothing."""

RHO_RANGE = (1.0 / (2.0 * MAX_NOISE_SCALE ** 2), 1.0 / (2.0 * MIN_NOISE_SCALE ** 2))
"""ρ of a one-level view with sensitivity 1: σ = 1/√(2ρ) within the noise-scale range."""
EPSILON_RANGE = (1.0 / MAX_NOISE_SCALE, 1.0 / MIN_NOISE_SCALE)
"""ε of a one-level view with sensitivity 1: b = 1/ε within the noise-scale range."""


def usable_range_text() -> str:
    """The usable budget range, as the error messages and docs state it."""
    return (f"usable range: {RHO_RANGE[0]:.3g} <= rho <= {RHO_RANGE[1]:.3g}, "
            f"{EPSILON_RANGE[0]:.3g} <= epsilon <= {EPSILON_RANGE[1]:.3g}")


def check_usable(budget: "Budget") -> "Budget":
    """Refuse a total budget outside the range where any view's noise can be drawn
    exactly (:data:`RHO_RANGE`, :data:`EPSILON_RANGE`): ``rho = 1e-300`` would need noise
    of scale 10¹⁵⁰ and ``rho = 1e308`` noise below float resolution. Each view's actual
    noise scale is checked again when it is drawn (its share, depth and sensitivity
    shrink the budget further)."""
    if isinstance(budget, ZCDP):
        value, (lo, hi), name = float(budget.rho), RHO_RANGE, "rho"
    else:
        value, (lo, hi), name = float(budget.epsilon), EPSILON_RANGE, "epsilon"
    if not lo <= value <= hi:
        raise InvalidPrivacyParameterError(
            f"{name} = {value:.6g} is outside the range where the noise can be drawn "
            f"exactly and stays finite ({usable_range_text()}); give a budget in that range")
    return budget


def _open_unit(name: str, value: Number) -> Fraction:
    f = _to_fraction(name, value)
    if not (0 < f < 1):
        raise InvalidPrivacyParameterError(
            f"{name} must be in (0, 1), got {value!r}; typical values are 1e-6 to 1e-10, "
            "well below 1/n")
    return f


# --------------------------------------------------------------------------------------
# The tight zCDP ↔ (ε, δ) conversion (Canonne, Kamath, Steinke 2020, Corollary 13).
# --------------------------------------------------------------------------------------

def _minimise(f, lo: float = math.log(1e-9), hi: float = math.log(1e8)) -> float:
    """Minimum of a unimodal f on [lo, hi]: a grid to bracket it, then golden section."""
    n = 240
    grid = [lo + (hi - lo) * i / n for i in range(n + 1)]
    values = [f(s) for s in grid]
    i = min(range(n + 1), key=values.__getitem__)
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, n)]
    gr = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - gr * (b - a), a + gr * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(90):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - gr * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + gr * (b - a)
            fd = f(d)
    return min(fc, fd, values[i])


def _epsilon_at(rho: float, log_inv_delta: float, alpha: float) -> float:
    """ε such that the CKS Cor. 13 bound at order α equals δ:
    ε = αρ + (ln(1/δ) − ln(α−1) + α·ln(1−1/α)) / (α−1)."""
    return alpha * rho + (log_inv_delta - math.log(alpha - 1.0)
                          + alpha * math.log1p(-1.0 / alpha)) / (alpha - 1.0)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ε for which ρ-zCDP implies (ε, δ)-DP (CKS 2020, Cor. 13).

    δ(ε) = inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α; solving for ε at fixed α and
    minimising over α (on a log(α−1) grid refined by golden section) gives ε(δ)."""
    if not (0.0 < delta < 1.0):
        raise InvalidPrivacyParameterError(f"delta must be in (0, 1), got {delta!r}")
    if rho <= 0.0:
        return 0.0
    log_inv = math.log(1.0 / delta)
    eps = _minimise(lambda s: _epsilon_at(rho, log_inv, 1.0 + math.exp(s)))
    return max(eps, 0.0)


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ρ for which ρ-zCDP implies (ε, δ)-DP under the tight conversion."""
    if not (0.0 < delta < 1.0):
        raise InvalidPrivacyParameterError(f"delta must be in (0, 1), got {delta!r}")
    # The classic bound ρ + 2√(ρ ln 1/δ) ≤ ε is sufficient, so its root is a lower bracket.
    log_inv = math.log(1.0 / delta)
    lo = (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
    hi = max(2.0 * lo, 1e-300)
    while zcdp_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return lo
