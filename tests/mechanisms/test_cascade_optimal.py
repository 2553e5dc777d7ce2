"""Cascade with the range-optimal covariance (dpsql.accuracy.optimal_ranges,
dpsql.mechanisms.cascade_optimal): optimality certificates, exact privacy constants,
the exact error model against dense linear algebra, and black-box audits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.accuracy import load
from dpsql.accuracy.cascade import CascadeErrorModel, optimal_relative_variance, inverse_diagonal
from dpsql.accuracy.optimal_ranges import (
    MAX_OPTIMAL_BINS,
    RangeOptimalErrorModel,
    all_ranges_gram,
    factorisation_residual,
    noise_factor,
    optimal_range_weights,
    privacy_constants,
)
from dpsql.errors import IntegrityError, InvalidPrivacyParameterError
from dpsql.mechanisms.cascade import cascade
from dpsql.mechanisms.cascade_optimal import cascade_optimal
from dpsql.privacy import ApproxDP, ZCDP, rng
from dpsql.privacy.calibrate import analytic_gaussian_delta


def _all_ranges(k: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.triu_indices(k + 1, 1)
    return lo.astype(np.int64), hi.astype(np.int64)


def _dense_range_variances(cov: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    k = cov.shape[0]
    w = (np.arange(k)[None, :] >= lo[:, None]) & (np.arange(k)[None, :] < hi[:, None])
    return np.einsum("ri,ij,rj->r", w, cov, w)


def _pair_max(m_inv: np.ndarray) -> float:
    d = np.diag(m_inv)
    pairs = d[:, None] + d[None, :] - 2 * m_inv
    np.fill_diagonal(pairs, -np.inf)
    return float(pairs.max())


# ------------------------------------------------------------------ the optimum

def test_gram_counts_the_ranges_holding_both_bins():
    k = 9
    lo, hi = _all_ranges(k)
    w = ((np.arange(k)[None, :] >= lo[:, None]) & (np.arange(k)[None, :] < hi[:, None]))
    np.testing.assert_array_equal(all_ranges_gram(k), w.T.astype(float) @ w)


@pytest.mark.parametrize("k", [1, 2, 5, 16, 100, 257])
def test_solver_certifies_its_gap_and_lies_between_the_bounds(k):
    """Primal total variance f·max d, dual f² (at the returned weights), and the SVD
    bound (dual at uniform weights): SVD ≤ dual ≤ optimum ≤ primal ≤ (1 + gap)·dual."""
    lam, gap, steps = optimal_range_weights(k)
    assert gap <= 1e-5 and 1 <= steps <= 50 and math.isclose(lam.sum(), 1.0)
    gram = all_ranges_gram(k)
    factor, m_inv = noise_factor(k, lam)
    scale = np.diag(m_inv).max()  # privacy constant 1: C' = scale·C
    total = scale * np.trace(gram @ factor @ factor.T)
    eig = np.linalg.eigvalsh(gram)
    svd = np.sqrt(np.clip(eig, 0, None)).sum() ** 2 / k
    s = np.sqrt(lam)
    dual = np.sqrt(np.clip(np.linalg.eigvalsh(s[:, None] * gram * s), 0, None)).sum() ** 2
    assert svd <= dual * (1 + 1e-9)
    assert dual <= total * (1 + 1e-9)
    assert total <= dual * (1 + gap) * (1 + 1e-9)


def test_kept_factorisation_is_the_fresh_one_and_read_only():
    """The factorisation is kept per (K, λ) for the bootstrap's replicates: a kept pair
    is bit-identical to a fresh one and cannot be written, so no caller can change the
    noise of a later build; another λ gets its own."""
    from dpsql.accuracy import optimal_ranges

    lam, _, _ = optimal_range_weights(16)
    factor, m_inv = noise_factor(16, lam)
    assert noise_factor(16, tuple(lam))[0] is factor
    with pytest.raises(ValueError):
        factor[0, 0] = 0.0
    kept = optimal_ranges.factorise(16, lam)
    assert kept.residual == factorisation_residual(factor, m_inv)  # of exactly this F, M
    optimal_ranges._factors.clear()  # as an eviction does
    fresh, fresh_inv = noise_factor(16, lam)
    assert optimal_ranges.factorise(16, lam).residual == factorisation_residual(fresh,
                                                                                 fresh_inv)
    assert fresh is not factor
    np.testing.assert_array_equal(fresh, factor)
    np.testing.assert_array_equal(fresh_inv, m_inv)
    other = lam.copy()
    other[0] *= 2.0
    assert not np.array_equal(noise_factor(16, other)[0], factor)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 24), st.integers(0, 2 ** 32 - 1))
def test_weak_duality_for_any_weights(k, seed):
    """Every λ gives a feasible mechanism (total ≥ the optimum) and a dual bound (≤ it):
    for random λ the primal of λ is never below the dual of the solver's λ and vice versa."""
    lam = np.random.default_rng(seed).random(k) + 0.05
    lam /= lam.sum()
    gram = all_ranges_gram(k)
    factor, m_inv = noise_factor(k, lam)
    primal_random = np.diag(m_inv).max() * np.trace(gram @ factor @ factor.T)
    opt, _, _ = optimal_range_weights(k)
    s = np.sqrt(lam)
    dual_random = np.sqrt(np.clip(np.linalg.eigvalsh(s[:, None] * gram * s), 0, None)).sum() ** 2
    f2, m2 = noise_factor(k, opt)
    primal_opt = np.diag(m2).max() * np.trace(gram @ f2 @ f2.T)
    assert primal_random >= primal_opt * (1 - 1e-5) - 1e-9
    assert dual_random <= primal_opt * (1 + 1e-9)


@pytest.mark.parametrize("k", [8, 64, 256])
def test_optimal_beats_every_tree_cascade_on_all_ranges(k):
    """At the same privacy constant the optimum's mean range variance is below the
    tree cascade with equal and with range-optimised level variances."""
    lo, hi = _all_ranges(k)
    lam, _, _ = optimal_range_weights(k)
    factor, m_inv = noise_factor(k, lam)
    optimum = np.diag(m_inv).max() * np.trace(all_ranges_gram(k) @ factor @ factor.T) / lo.size
    depth = int(math.log2(k))
    for shape in (np.ones(depth + 1), optimal_relative_variance(2, k, lo, hi)):
        const = inverse_diagonal(2, shape)
        model = CascadeErrorModel(2, depth, k, tuple(shape * const))
        assert optimum < model.range_variance(lo, hi).mean()


def test_ratio_against_iid_at_1024_bins():
    """The number the issue's benchmark targets, from the model alone: the RMSE ratio
    to an i.i.d. Gaussian histogram at equal ρ on all ranges and on ranges > 64 bins."""
    t = cascade_optimal(np.zeros(1024, dtype=np.int64), ZCDP("0.5"),
                        neighbouring="add_remove", rng=rng(0))
    lo, hi = _all_ranges(1024)
    var = t.error_model.range_variance(lo, hi)  # σ_iid² = 1/(2ρ) = 1
    length = hi - lo
    assert 0.185 < math.sqrt(var.mean() / length.mean()) < 0.195
    long = length > 64
    assert math.sqrt(var[long].mean() / length[long].mean()) < 0.185


# ------------------------------------------------------------------ privacy

@pytest.mark.parametrize("k", [1, 2, 7, 33])
def test_inverse_is_the_dense_inverse_and_constants_brute_force(k):
    lam, _, _ = optimal_range_weights(k)
    factor, m_inv = noise_factor(k, lam)
    dense = np.linalg.inv(factor @ factor.T)
    np.testing.assert_allclose(m_inv, dense, rtol=1e-8, atol=1e-8 * np.abs(dense).max())
    single, pair = privacy_constants(m_inv)
    assert math.isclose(single, np.diag(dense).max(), rel_tol=1e-9)
    if k > 1:
        assert math.isclose(pair, _pair_max(dense), rel_tol=1e-9)


@pytest.mark.parametrize("nb,rows", [("add_remove", 1), ("add_remove", 3), ("substitute", 1),
                                     ("substitute", 2)])
def test_release_spends_at_most_its_budget_exactly(nb, rows):
    """zCDP: for every neighbour vertex v (m·e_i, and m(e_i − e_j) under substitution)
    vᵀ(σ²C)⁻¹v/2 ≤ ρ, with equality at the worst one (up to the 1e-9 margin)."""
    k, rho = 40, 0.3
    t = cascade_optimal(np.arange(k), ZCDP(str(rho)), neighbouring=nb, max_rows=rows,
                        rng=rng(1))
    cov = t.error_model.covariance()
    cinv = np.linalg.inv(cov)
    worst = np.diag(cinv).max()
    if nb == "substitute":
        worst = max(worst, _pair_max(cinv))
    cost = rows * rows * worst / 2
    assert cost <= rho * (1 + 1e-7)
    assert cost >= rho * (1 - 1e-6)


def test_approx_dp_calibration_meets_delta():
    t = cascade_optimal(np.arange(50), ApproxDP("0.5", "1e-8"), neighbouring="add_remove",
                        rng=rng(2))
    assert analytic_gaussian_delta(t.sensitivity["mahalanobis_l2"], t.info["sigma"], 0.5) <= 1e-8


# ------------------------------------------------------------------ the error model

@pytest.mark.parametrize("k,arity", [(1, 2), (8, 2), (37, 2), (37, 3), (100, 4)])
def test_error_model_equals_dense_algebra(k, arity):
    t = cascade_optimal(np.arange(k), ZCDP(1), neighbouring="add_remove", rng=rng(3),
                        arity=arity)
    model = t.error_model
    cov = model.covariance()
    lo, hi = _all_ranges(k)
    np.testing.assert_allclose(model.range_variance(lo, hi),
                               _dense_range_variances(cov, lo, hi), rtol=1e-9,
                               atol=1e-12 * np.abs(cov).max())
    g = np.random.default_rng(k)
    for level, lv in enumerate(t.levels):
        span = t.bin_spans[level]
        np.testing.assert_allclose(lv.variance, model.node_variance(level), rtol=1e-12)
        for _ in range(3):
            ids = np.unique(g.integers(0, lv.ids.size, g.integers(1, lv.ids.size + 1)))
            u = np.zeros(k)
            for j in ids:
                u[j * span:min((j + 1) * span, k)] = 1.0
            assert math.isclose(model.sum_variance(level, ids).value, u @ cov @ u,
                                rel_tol=1e-9, abs_tol=1e-12 * np.abs(cov).max())
    assert model.sum_variance(t.depth, np.array([], dtype=np.int64)).value == 0.0
    assert load(model.to_params()) == model
    assert [r["level"] for r in model.level_summary()] == list(range(1, t.depth + 1))


def test_release_is_consistent_reproducible_and_records_its_choice():
    hist = np.random.default_rng(0).integers(0, 30, 300)
    a = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(9), covariance="optimal")
    b = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(9), covariance="optimal")
    np.testing.assert_array_equal(a.leaves.counts, b.leaves.counts)
    for upper, lower in zip(a.levels, a.levels[1:]):
        pad = np.concatenate([lower.counts, np.zeros((-lower.counts.size) % 2)])
        np.testing.assert_allclose(upper.counts, pad.reshape(-1, 2).sum(axis=1), rtol=1e-12)
    assert a.info["covariance"] == "optimal" and a.info["optimality_gap"] <= 1e-5
    assert a.draws == 300 and a.bin_spans[-1] == 1


@pytest.mark.statistical
def test_empirical_covariance_and_unbiasedness():
    k, reps = 12, 8_000
    g = rng(11)
    hist = np.arange(k) * 5
    out = np.array([cascade_optimal(hist, ZCDP(2), neighbouring="add_remove",
                                    rng=g).leaves.counts for _ in range(reps)])
    cov = cascade_optimal(hist, ZCDP(2), neighbouring="add_remove",
                          rng=rng(0)).error_model.covariance()
    noise = out - hist
    se_mean = np.sqrt(np.diag(cov) / reps)
    assert np.all(np.abs(noise.mean(axis=0)) < 5 * se_mean)
    # entrywise s.e. of a sample covariance: sqrt((Σ_ij² + Σ_ii Σ_jj)/reps)
    se_cov = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / reps)
    assert np.all(np.abs(np.cov(noise, rowvar=False) - cov) < 5 * se_cov)


# ------------------------------------------------------------------ bad input

def test_bad_arguments_say_what_to_do():
    with pytest.raises(InvalidPrivacyParameterError, match="at most 4096 bins"):
        cascade(np.zeros(MAX_OPTIMAL_BINS + 1, dtype=np.int64), ZCDP(1),
                neighbouring="add_remove", rng=rng(0), covariance="optimal")
    with pytest.raises(InvalidPrivacyParameterError, match="'tree'.*'optimal'"):
        cascade(np.zeros(4, dtype=np.int64), ZCDP(1), neighbouring="add_remove", rng=rng(0),
                covariance="dense")
    with pytest.raises(InvalidPrivacyParameterError, match="relative_variance"):
        cascade(np.zeros(4, dtype=np.int64), ZCDP(1), neighbouring="add_remove", rng=rng(0),
                covariance="optimal", relative_variance=[1, 1, 1])
    with pytest.raises(IntegrityError):
        RangeOptimalErrorModel(2, 2, 4, 1.0, (0.5, 0.5, 0.0, 0.0))
    with pytest.raises(IntegrityError):
        RangeOptimalErrorModel(2, 1, 4, 1.0, (0.25,) * 4)


@pytest.mark.parametrize("k", [1, 7, 64, 300])
def test_the_factorisation_residual_bounds_the_true_constant(k):
    """The a-posteriori check: e = ‖FᵀMF − I‖∞ is tiny, and the constant of the
    covariance actually sampled (FFᵀ, inverted densely) is within (1 − e)⁻¹ of the
    computed one, so the 1e-9 margin on Δ² covers the rounding."""
    from dpsql.mechanisms.cascade_optimal import ROUNDING_MARGIN, check_residual
    lam, _, _ = optimal_range_weights(k)
    factor, m_inv = noise_factor(k, lam)
    e = check_residual(factor, m_inv)
    assert e < 1e-11
    dense = np.linalg.inv(factor @ factor.T)
    assert float(np.diag(dense).max()) <= float(np.diag(m_inv).max()) / (1 - e) * (
        1 + ROUNDING_MARGIN)


def test_a_residual_beyond_the_margin_refuses_the_build():
    from dpsql.mechanisms.cascade_optimal import check_residual
    lam, _, _ = optimal_range_weights(16)
    factor, m_inv = noise_factor(16, lam)
    with pytest.raises(InvalidPrivacyParameterError, match=r"residual 1(\.\d+)?e-08, more than "
                                                          r"the 1e-09 margin"):
        check_residual(factor, m_inv * (1 - 1e-8))  # an inverse 1e-8 too small
    t = cascade_optimal(np.arange(16), ZCDP(1), neighbouring="add_remove", rng=rng(0))
    assert 0 <= t.info["mahalanobis_residual"] < 1e-12
