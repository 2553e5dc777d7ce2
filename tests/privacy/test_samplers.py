"""The samplers against their exact distributions (chi-square with a power check), and the
calibration bootstrap's table sampler against the same pmf."""

import math

import numpy as np
import pytest
from scipy import stats

import dpsql
from dpsql.privacy import discrete_gaussian, discrete_laplace, gaussian, laplace, rng
from dpsql.privacy.samplers import bernoulli_exp, discrete_gaussian_pmf, discrete_laplace_pmf
from dpsql.privacy import table_sampler
from dpsql.privacy.table_sampler import MAX_HALF_WIDTH, discrete_gaussian_table

ALPHA = 1e-6  # false-positive rate of every goodness-of-fit test


def _chi2_pvalue(samples, pmf, min_expected=20.0):
    """Chi-square p-value of integer samples against a pmf, pooling sparse tails."""
    lo, hi = int(samples.min()), int(samples.max())
    support = np.arange(lo, hi + 1)
    observed = np.bincount(samples - lo, minlength=support.size).astype(float)
    expected = pmf(support) * samples.size
    # Mass outside the observed support goes to the two end cells.
    outside = samples.size - expected.sum()
    expected[0] += outside / 2
    expected[-1] += outside / 2
    # Pool cells from the outside in until every cell expects >= min_expected.
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    order = np.argsort(np.abs(support - 0))[::-1]
    for i in order:
        acc_o += observed[i]
        acc_e += expected[i]
        if acc_e >= min_expected:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e:
        obs[-1] += acc_o
        exp[-1] += acc_e
    obs, exp = np.array(obs), np.array(exp)
    exp *= obs.sum() / exp.sum()
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.statistical
@pytest.mark.parametrize("sampler", [discrete_gaussian, discrete_gaussian_table])
@pytest.mark.parametrize("sigma2", [0.1, 0.25, 0.7, 1.0, 3.0, 20.0, 1e4])
def test_discrete_gaussian_fits_exact_pmf(sampler, sigma2):
    """The exact sampler and the bootstrap's table sampler (dpsql.privacy.table_sampler)."""
    x = sampler(sigma2, 400_000, rng(11))
    assert x.dtype == np.int64
    assert _chi2_pvalue(x, lambda s: discrete_gaussian_pmf(sigma2, s)) > ALPHA
    # Power: the same test rejects the wrong noise scale (x0.7 and x1.3 in sigma).
    for factor in (0.7, 1.3):
        wrong = sigma2 * factor ** 2
        assert _chi2_pvalue(x, lambda s: discrete_gaussian_pmf(wrong, s)) < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [0.5, 3.0, 50.0])
def test_discrete_laplace_fits_exact_pmf(scale):
    x = discrete_laplace(scale, 400_000, rng(12))
    assert _chi2_pvalue(x, lambda s: discrete_laplace_pmf(scale, s)) > ALPHA
    for factor in (0.7, 1.3):
        assert _chi2_pvalue(x, lambda s: discrete_laplace_pmf(scale * factor, s)) < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [1e2, 1e6, 1e8, 1e12])
def test_discrete_gaussian_mean_and_variance(sigma2):
    n = 200_000
    x = discrete_gaussian(sigma2, n, rng(13)).astype(np.float64)
    se_mean = math.sqrt(sigma2 / n)
    assert abs(x.mean()) < 6 * se_mean
    # Var of the sample variance of a near-Gaussian: 2 sigma^4 / n.
    se_var = sigma2 * math.sqrt(2.0 / n)
    assert abs(x.var() - sigma2) < 6 * se_var


def test_tiny_variance_is_almost_always_zero():
    x = discrete_gaussian(1e-4, 10_000, rng(1))
    assert np.count_nonzero(x) == 0  # P[x != 0] ~ 2 e^-5000


@pytest.mark.parametrize("size", [0, (0,), (3, 0)])
def test_size_zero(size):
    assert discrete_gaussian(4.0, size, rng(1)).size == 0
    assert discrete_laplace(4.0, size, rng(1)).size == 0


def test_shapes_are_kept():
    assert discrete_gaussian(4.0, (3, 5), rng(1)).shape == (3, 5)
    assert discrete_laplace(2.0, (2, 2), rng(1)).shape == (2, 2)


def test_zero_scale_is_no_noise():
    assert not discrete_gaussian(0.0, 5, rng(1)).any()
    assert not discrete_laplace(0.0, 5, rng(1)).any()


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "a"])
def test_bad_scale(bad):
    with pytest.raises(dpsql.InvalidPrivacyParameterError):
        discrete_gaussian(bad, 3, rng(1))


@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.5, 3.999, 4.0, 4.001, 7.2, 9.5])
def test_bernoulli_exp_rate(gamma):
    """Around and past the steps of 4 (one coin exp(-f), then coins exp(-4)): 4 is one
    step and no remainder, 9.5 two steps and 1.5."""
    n = 400_000
    hits = bernoulli_exp(np.full(n, gamma), rng(5)).sum()
    p = math.exp(-gamma)
    assert abs(hits - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 1


def test_bernoulli_exp_mixed_gammas_keep_their_places():
    """One call decides each element by its own γ: 0 always passes, a huge γ never does,
    whatever the neighbours."""
    gamma = np.tile([0.0, 800.0, 0.0, 50.0], 10_000)
    out = bernoulli_exp(gamma, rng(6))
    assert out[0::4].all() and out[2::4].all()
    assert not out[1::4].any() and not out[3::4].any()


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [0.05, 0.12, 0.5])
def test_discrete_gaussian_small_scales_cell_by_cell(sigma2):
    """Below σ = 1 (InfTDA's levels at large ρ: σ² = 0.12 in the O/D benchmark at ρ = 100)
    the proposal's magnitude is 0 or 1 almost always: each cell's frequency, and the
    share of |x| ≥ 2, within 5 binomial standard errors of the exact pmf."""
    n = 2_000_000
    x = discrete_gaussian(sigma2, n, rng(24))
    for v in (-1, 0, 1):
        p = float(discrete_gaussian_pmf(sigma2, np.array([v]))[0])
        assert abs(np.count_nonzero(x == v) - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1
    p = 1.0 - float(discrete_gaussian_pmf(sigma2, np.arange(-1, 2)).sum())
    assert abs(np.count_nonzero(np.abs(x) >= 2) - n * p) <= 5 * math.sqrt(n * p) + 1
    assert abs(int(x.sum())) <= 5 * math.sqrt(n * float(x.var())) + 1  # symmetric


def test_seeded_generators_reproduce_and_unseeded_differ():
    a = discrete_gaussian(100.0, 1000, rng(42))
    b = discrete_gaussian(100.0, 1000, rng(42))
    assert np.array_equal(a, b)
    c = discrete_gaussian(100.0, 1000, rng())
    d = discrete_gaussian(100.0, 1000, rng())
    assert not np.array_equal(c, d)


def test_continuous_samplers():
    g = rng(3)
    assert laplace(2.0, 100_000, g).var() == pytest.approx(8.0, rel=0.05)
    assert gaussian(9.0, 100_000, g).var() == pytest.approx(9.0, rel=0.05)


# The table sampler of the calibration bootstrap's replicates (dpsql.privacy.table_sampler)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [0.1, 0.25, 0.7])
def test_table_sampler_small_scales_cell_by_cell(sigma2):
    """Below σ = 1 almost all mass is on -1, 0, 1: each cell's frequency within 5 binomial
    standard errors of the exact pmf."""
    n = 1_000_000
    x = discrete_gaussian_table(sigma2, n, rng(22))
    for v in (-1, 0, 1):
        p = float(discrete_gaussian_pmf(sigma2, np.array([v]))[0])
        assert abs(np.count_nonzero(x == v) - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.statistical
@pytest.mark.parametrize("slack", [1.1, 0.01])
def test_table_sampler_sparse_draws_are_independent(slack, monkeypatch):
    """Below P[X != 0] = 1/4 the non-zero draws sit at geometric gaps (module doc): each
    cell's frequency, and the frequency of a non-zero right after a non-zero (independent
    neighbours), within 5 binomial standard errors; with a tiny slack the gaps come in
    many batches, with the same law."""
    monkeypatch.setattr(table_sampler, "SPARSE_SLACK", slack)
    sigma2, n = 0.12, 1_000_000
    x = discrete_gaussian_table(sigma2, n, rng(25))
    for v in (-1, 0, 1):
        p = float(discrete_gaussian_pmf(sigma2, np.array([v]))[0])
        assert abs(np.count_nonzero(x == v) - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1
    p = 1.0 - float(discrete_gaussian_pmf(sigma2, np.array([0]))[0])
    both = np.count_nonzero((x[1:] != 0) & (x[:-1] != 0))
    m = np.count_nonzero(x[:-1] != 0)
    assert abs(both - m * p) <= 5 * math.sqrt(m * p * (1 - p)) + 1
    assert x[-1000:].any() and x[:1000].any()  # the whole range is filled


def test_table_sampler_tiny_sizes_and_scales():
    assert discrete_gaussian_table(0.12, 1, rng(3)).shape == (1,)
    assert not discrete_gaussian_table(1e-4, 10_000, rng(3)).any()  # P[x != 0] ~ e^-5000


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [1e6, 2.5e7, 1e8, 1e12])
def test_table_sampler_wide_scales(sigma2):
    """σ = 1,000 uses a table of 24,003 cells, σ = 5,000 one of 120,003; σ = 10⁴ and 10⁶
    are beyond MAX_HALF_WIDTH and draw from the exact sampler."""
    n = 200_000
    x = discrete_gaussian_table(sigma2, n, rng(23)).astype(np.float64)
    assert abs(x.mean()) < 6 * math.sqrt(sigma2 / n)
    assert abs(x.var() - sigma2) < 6 * sigma2 * math.sqrt(2.0 / n)


def test_beyond_the_table_it_is_the_exact_sampler():
    sigma2 = (MAX_HALF_WIDTH / 12.0) ** 2 * 1.01
    assert np.array_equal(discrete_gaussian_table(sigma2, 1000, rng(5)),
                          discrete_gaussian(sigma2, 1000, rng(5)))


def test_table_sampler_draws_from_the_callers_generator():
    """Seeded replicates reproduce, and the draws advance the given generator."""
    a, b = rng(42), rng(42)
    assert np.array_equal(discrete_gaussian_table(2.0, 1000, a),
                          discrete_gaussian_table(2.0, 1000, b))
    assert a.random() == b.random() != rng(42).random()


@pytest.mark.parametrize("size", [0, (0,), (3, 0)])
def test_table_sampler_size_zero_and_shapes(size):
    assert discrete_gaussian_table(4.0, size, rng(1)).size == 0
    assert discrete_gaussian_table(4.0, (3, 5), rng(1)).shape == (3, 5)
    assert not discrete_gaussian_table(0.0, 5, rng(1)).any()


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "a"])
def test_table_sampler_bad_scale(bad):
    with pytest.raises(dpsql.InvalidPrivacyParameterError):
        discrete_gaussian_table(bad, 3, rng(1))
