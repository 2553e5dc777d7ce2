"""The empirical-Bayes prior of a level's counts (dpsql.mechanisms.inftda_prior) and
the reach above a released zero it gives (dpsql.accuracy.inftda_zeros.hidden_allowance).

Statistical checks: fixed seeds, tolerances of at least 5 standard errors (measured over
20 seeds: P(0) 0.604 ± 0.030, P(1..3 | > 0) 0.707 ± 0.043, the 95 % quantile given > 0
7.45 ± 0.50 counts, against a truth of 0.600, 0.724 and 7)."""

from __future__ import annotations

import json
import shutil

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.accuracy.inftda_answers import Calibration
from dpsql.accuracy.inftda_zeros import hidden_allowance, zero_allowance, zeros_reach
from dpsql.mechanisms.inftda_prior import fit_level, fit_prior, prior_window
from dpsql.privacy.samplers import discrete_gaussian

SIGMA2 = 12.0  # the O/D example's levels at ρ = 1
SIGMA = SIGMA2 ** 0.5


def _measure(t: np.ndarray, seed: int) -> np.ndarray:
    return t + discrete_gaussian(SIGMA2, t.size, np.random.default_rng(seed))


def _upper_given_positive(p: np.ndarray, q: float) -> int:
    nz = np.cumsum(p[1:]) / p[1:].sum()
    return int(np.searchsorted(nz, q)) + 1


def test_the_fitted_prior_recovers_a_seeded_sparse_mixture():
    """60 % true zeros, the rest geometric (mean 2.9) under σ = 3.5: the deconvolution
    finds the share of zeros, the shape of the small counts and their upper tail."""
    rng = np.random.default_rng(5)
    t = np.where(rng.random(5000) < 0.6, 0, rng.geometric(0.35, 5000))
    window = prior_window(SIGMA, 2.0 * SIGMA)
    g = fit_prior(_measure(t, 6), SIGMA, window)
    assert g.size == window + 1 and g.sum() == pytest.approx(1.0)
    assert g[0] == pytest.approx(0.6, abs=0.15)
    assert g[1:4].sum() / g[1:].sum() == pytest.approx(0.724, abs=0.2)
    assert 5 <= _upper_given_positive(g, 0.95) <= 10
    # smooth: no spike (the nonparametric MLE's atoms), each count within 2x of the next
    assert np.all(g[2:20] < 2.0 * g[1:19]) and np.all(g[1:19] < 2.5 * g[2:20])


def test_the_small_count_signal_counts_the_levels_small_nonzero_counts():
    """n₁ (the gate's signal, ``LevelFit.small``) estimates how many measured nodes hold
    a count in 1..G: on the seeded mixture above (2,010 of 5,000 in 1..42, σ = 3.5) it
    came out 2,078 ± 267 over 20 seeds; the tolerance is 5 of those standard errors. A
    level with nothing in 1..G (zeros and counts of thousands) gives far fewer, but not
    none: 66 ± 94, up to 330, over 20 seeds (the bound below is 5.7 of those above its
    mean): the noise of ~3,000 measured zeros alone makes that much "signal"."""
    rng = np.random.default_rng(5)
    t = np.where(rng.random(5000) < 0.6, 0, rng.geometric(0.35, 5000))
    window = prior_window(SIGMA, 2.0 * SIGMA)
    truth = int(((t >= 1) & (t <= window)).sum())
    fit = fit_level(_measure(t, 6), SIGMA, window)
    assert fit.small == pytest.approx(truth, abs=5 * 267)
    assert np.array_equal(fit.prior, fit_prior(_measure(t, 6), SIGMA, window))
    none = np.where(rng.random(5000) < 0.6, 0, rng.integers(1000, 5000, 5000))
    assert fit_level(_measure(none, 7), SIGMA, window).small < 0.3 * truth


def test_the_reach_shrinks_on_a_sparse_level_and_stays_flat_on_a_dense_one():
    """Sparse (nonzero counts mostly 1 to 3): what a zero hides reaches far less high
    than under the flat prior. Dense (counts spread over 0..2000, far beyond σ): the
    fitted window is about flat, and so is the reach (whole counts, given > 0)."""
    rng = np.random.default_rng(7)
    sparse = np.where(rng.random(5000) < 0.6, 0, rng.geometric(0.5, 5000))
    dense = rng.integers(0, 2000, 20000)
    window = prior_window(SIGMA, 3.0 * SIGMA)
    g_sparse = tuple(fit_prior(_measure(sparse, 8), SIGMA, window))
    g_dense = tuple(fit_prior(_measure(dense, 9), SIGMA, window))
    for push in (0.0, 1.0, 3.0):
        flat = zero_allowance(0.95, push) * SIGMA
        assert hidden_allowance(0.95, push, g_sparse, SIGMA) * SIGMA < 0.6 * flat
        assert hidden_allowance(0.95, push, g_dense, SIGMA) * SIGMA \
            == pytest.approx(flat, abs=1.0 + 0.1 * flat)
    # an answer that came out 0: two zeros' hidden counts together reach further
    two = zeros_reach(0.95, np.array([1.0, 1.0]), False, g_sparse, SIGMA)
    assert hidden_allowance(0.95, 1.0, g_sparse, SIGMA) < two \
        < zeros_reach(0.95, np.array([1.0, 1.0]), False)
    # too few measurements in the window: no prior
    assert fit_prior(_measure(sparse[:50], 10), SIGMA, window) is None


def test_a_release_without_a_fitted_prior_keeps_the_flat_one():
    """A calibration written before the prior was fitted (no ``zero_prior`` in its JSON)
    answers as before: the flat prior's reach, bit for bit; one with it round-trips."""
    old = {"replicates": 32, "kappa": [1.0, 1.1], "zero_bias": [0.1, 0.2],
           "zero_var": [0.5, 0.6]}
    cal = Calibration.from_json(old)
    assert cal.prior(1) is None and cal.prior(2) is None and cal.to_json() == old
    pushes = np.array([1.3, 0.4])
    for released in (True, False):
        assert zeros_reach(0.95, pushes, released, cal.prior(2), SIGMA) \
            == zeros_reach(0.95, pushes, released)
    new = Calibration.from_json({**old, "zero_prior": [[], [0.5, 0.3, 0.2]],
                                 "zero_signal": [None, 812.4]})
    assert new.prior(1) is None and new.prior(2) == (0.5, 0.3, 0.2)
    assert np.isnan(new.zero_signal[0]) and new.zero_signal[1] == 812.4
    assert new.to_json()["zero_signal"] == [None, 812.4]
    assert Calibration.from_json(new.to_json()).to_json() == new.to_json()


LEAVES = ("SELECT work_municipality, home_municipality, COUNT(*) AS n, "
          "dp_ci_high(0.95) AS hi FROM work_first WHERE work_province = 'P0' "
          "AND home_province = 'P0' GROUP BY ALL ORDER BY ALL")


def _answers(path) -> list[tuple]:
    con = duckdb.connect()
    dpsql.attach(con, str(path))
    try:
        return dpsql.sql(con, LEAVES).fetchall()
    finally:
        con.close()


def test_the_leaves_zeros_reach_less_and_an_old_release_keeps_the_flat_reach(
        commutes_release, tmp_path):
    """End to end on the O/D example (σ = 3.5): its sparse leaves have a fitted prior,
    and a released zero's interval reaches less high than under the flat prior, which
    the same release without the prior (as written before it was fitted) still answers
    with; released counts answer the same either way."""
    old = tmp_path / "old.duckdb"
    shutil.copy(commutes_release, old)
    con = duckdb.connect(str(old))
    model = json.loads(con.execute("SELECT error_model FROM dpsql_views "
                                   "WHERE name = 'work_first'").fetchone()[0])
    assert model["calibration"]["zero_prior"][5]  # the leaves
    del model["calibration"]["zero_prior"]
    con.execute("UPDATE dpsql_views SET error_model = ? WHERE name = 'work_first'",
                [json.dumps(model)])
    con.close()
    new, flat = _answers(commutes_release), _answers(old)
    assert [r[:3] for r in new] == [r[:3] for r in flat]
    zeros = [(a[3], b[3]) for a, b in zip(new, flat) if a[2] == 0]
    counts = [(a[3], b[3]) for a, b in zip(new, flat) if a[2] > 0]
    assert zeros and counts and all(a == b for a, b in counts)
    assert all(b >= np.floor(zero_allowance(0.95) * SIGMA) for _, b in zeros)
    assert all(a <= b for a, b in zeros) and sum(a for a, _ in zeros) < 0.8 * sum(
        b for _, b in zeros)
