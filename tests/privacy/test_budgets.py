"""The budget algebra, the tight conversions and their cross-check against OpenDP."""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql
from dpsql.privacy import (
    ApproxDP,
    PureDP,
    ZCDP,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    budget_from_json,
    compose,
    gaussian_sigma_zcdp,
    zcdp_epsilon,
    zcdp_rho,
)

positive = st.fractions(min_value=Fraction(1, 10**6), max_value=100)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x", None, True])
def test_pure_rejects_bad_epsilon(bad):
    with pytest.raises(dpsql.InvalidPrivacyParameterError, match="epsilon"):
        PureDP(bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -1e-9, float("nan")])
def test_approx_rejects_bad_delta(bad):
    with pytest.raises(dpsql.InvalidPrivacyParameterError, match="delta"):
        ApproxDP(1.0, bad)


def test_invalid_parameter_error_is_also_value_error():
    with pytest.raises(ValueError):
        ZCDP(-2)


def test_pure_to_zcdp_is_exact():
    assert PureDP(Fraction(1, 3)).to_zcdp() == ZCDP(Fraction(1, 18))


@given(positive, positive)
def test_composition_is_exact_and_commutative(a, b):
    assert compose([ZCDP(a), ZCDP(b)]) == ZCDP(a + b) == compose([ZCDP(b), ZCDP(a)])
    assert compose([PureDP(a), PureDP(b)]).epsilon == a + b


@given(positive, st.lists(st.integers(1, 50), min_size=1, max_size=8))
def test_split_composes_back_exactly(total, weights):
    for budget in (PureDP(total), ZCDP(total), ApproxDP(total, Fraction(1, 10**7))):
        parts = budget.split(weights)
        assert len(parts) == len(weights)
        assert compose(parts) == budget


def test_split_is_proportional():
    a, b = ZCDP(1).split([1, 3])
    assert (a.rho, b.rho) == (Fraction(1, 4), Fraction(3, 4))


def test_compose_refuses_mixed_kinds():
    with pytest.raises(dpsql.InvalidPrivacyParameterError, match="convert them to one kind"):
        compose([ZCDP(1), PureDP(1)])


@given(st.sampled_from([PureDP(2), ZCDP(Fraction(1, 7)), ApproxDP(1, Fraction(1, 10**9))]))
def test_json_round_trip(budget):
    assert budget_from_json(budget.to_json()) == budget


def test_tight_conversion_beats_the_classic_bound():
    rho, delta = 0.5, 1e-8
    classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert zcdp_epsilon(rho, delta) < classic


@pytest.mark.parametrize("rho", [1e-4, 0.013215, 0.5, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-8, 1e-12])
def test_conversion_matches_opendp(rho, delta):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    # A Gaussian on a scalar with scale s spends rho = 1/(2 s^2) at sensitivity 1.
    scale = 1.0 / math.sqrt(2.0 * rho)
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False),
                              dp.absolute_distance(T=float), scale=scale)
    assert meas.map(1.0) == pytest.approx(rho, rel=1e-12)
    theirs = dp.c.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta)
    ours = float(ZCDP(rho).to_approx(delta).epsilon)
    assert ours == pytest.approx(theirs, rel=1e-9)
    assert ours >= theirs * (1 - 1e-12)  # never less conservative beyond rounding


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9])
def test_round_trip_epsilon_delta_rho(epsilon, delta):
    rho = ApproxDP(epsilon, delta).to_zcdp()
    back = float(rho.to_approx(delta).epsilon)
    assert back <= epsilon * (1 + 1e-12)  # conservative direction
    assert back == pytest.approx(epsilon, rel=1e-9)


def test_largest_rho_is_largest():
    eps, delta = 1.0, 1e-8
    rho = zcdp_rho(eps, delta)
    assert zcdp_epsilon(rho, delta) <= eps
    assert zcdp_epsilon(rho * (1 + 1e-6), delta) > eps


def test_known_values_from_od_topdown_digest():
    # od_topdown.md §1 lists the classic inverse: we must give at least as much rho.
    for eps, classic_rho in [(0.1, 1.3535e-4), (1.0, 1.3215e-2), (10.0, 1.07988)]:
        assert zcdp_rho(eps, 1e-8) >= classic_rho * (1 - 1e-4)


def test_gaussian_calibration_zcdp():
    assert gaussian_sigma_zcdp(math.sqrt(2), 0.5) == pytest.approx(math.sqrt(2.0))


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-6, 1e6), positive)
def test_gaussian_sigma_zcdp_is_rounded_up_from_the_exact_value(sensitivity, rho):
    """σ = Δ/√(2ρ) in floats is an ulp below the exact value about half the time (at
    ρ = 0.7, Δ = 1: σ²·2ρ = 1 − 7.2e-17), which spends more than ρ. The returned σ is the
    smallest float with σ²·2ρ ≥ Δ² exactly, for a float ρ or a budget's exact Fraction."""
    for r in (rho, float(rho)):
        sigma = gaussian_sigma_zcdp(sensitivity, r)
        assert Fraction(sigma) ** 2 * 2 * Fraction(r) >= Fraction(sensitivity) ** 2
        below = math.nextafter(sigma, 0.0)
        assert Fraction(below) ** 2 * 2 * Fraction(r) < Fraction(sensitivity) ** 2


@pytest.mark.parametrize("epsilon,delta", [(0.1, 1e-9), (1.0, 1e-5), (8.0, 1e-10)])
def test_analytic_gaussian_is_tight(epsilon, delta):
    sigma = analytic_gaussian_sigma(1.0, epsilon, delta)
    assert analytic_gaussian_delta(1.0, sigma, epsilon) <= delta
    assert analytic_gaussian_delta(1.0, sigma * (1 - 1e-6), epsilon) > delta


def test_analytic_gaussian_matches_balle_wang_table():
    # Balle & Wang (2018) Fig. 1 regime: eps=1, delta=1e-5 gives sigma ~ 3.73 (classic: 4.84).
    assert analytic_gaussian_sigma(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=1e-3)


def test_analytic_gaussian_matches_opendp_profile():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    sigma = analytic_gaussian_sigma(1.0, 1.0, 1e-6)
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False),
                              dp.absolute_distance(T=float), scale=sigma)
    profile = dp.c.make_zCDP_to_approxDP(meas).map(1.0)
    # The zCDP route is looser than the exact Gaussian profile: its epsilon is >= 1.
    assert profile.epsilon(1e-6) >= 1.0
