"""Counting on trees: the Laplace / Gaussian baselines, their error model, and the
α-multiplicative algorithm (``reference/counting_on_trees.md`` §6 checkable properties)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql.mechanisms.alpha_tree as at
import dpsql.mechanisms.tree_counts as tc
from dpsql.accuracy import load
from dpsql.accuracy.tree_counts import (TreeCountsErrorModel, decode_fanouts, encode_fanouts,
                                        posterior_variances)
from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms.least_squares import tree_least_squares
from dpsql.mechanisms.alpha_tree import alpha_schedule, alpha_tree
from dpsql.mechanisms.tree_counts import gaussian_tree, laplace_tree, tree_level_counts
from dpsql.privacy import ApproxDP, PureDP, ZCDP, rng
from dpsql.privacy.calibrate import analytic_gaussian_delta
from dpsql.privacy.samplers import discrete_gaussian_pmf, discrete_laplace_pmf


# ----------------------------------------------------------------------------- helpers
def random_tree(rs: np.random.Generator, depth: int, lo: int, hi: int) -> list[np.ndarray]:
    parents, width = [], 1
    for _ in range(depth):
        fan = rs.integers(lo, hi + 1, size=width)
        parents.append(np.repeat(np.arange(width), fan))
        width = int(fan.sum())
    return parents


def regular_tree(depth: int, fan: int) -> list[np.ndarray]:
    return [np.repeat(np.arange(fan ** k), fan) for k in range(depth)]


def capture_noisy(monkeypatch) -> list:
    """Record the noisy measurements the baselines hand to least squares."""
    seen = []

    def spy(parents, noisy, variances):
        seen.append(([np.asarray(y).copy() for y in noisy], list(variances)))
        return tree_least_squares(parents, noisy, variances)

    monkeypatch.setattr(tc, "tree_least_squares", spy)
    return seen


def linear_sum_variance(parents, var, level, ids):
    """Brute force: the BLUE is linear in the measurements; push unit vectors through it."""
    sizes = [1] + [len(p) for p in parents]
    total = 0.0
    for lvl in range(len(sizes)):
        if var[lvl] == 0:
            continue
        for j in range(sizes[lvl]):
            unit = [np.zeros(s) for s in sizes]
            unit[lvl][j] = 1.0
            est, _ = tree_least_squares(parents, unit, var)
            total += float(est[level][ids].sum()) ** 2 * var[lvl]
    return total


# ------------------------------------------------------------------------------ basics
def test_level_counts_sums_and_exact_int64():
    parents = [np.array([0, 0, 0]), np.array([0, 0, 2, 2])]   # node 1 of level 1 childless
    big = 2 ** 60
    counts = tree_level_counts(parents, np.array([big, 1, 2, 3]))
    assert counts[0].tolist() == [big + 6]
    assert counts[1].tolist() == [big + 1, 0, 5]
    assert all(c.dtype == np.int64 for c in counts)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 31), st.integers(1, 4))
def test_level_counts_consistency_property(seed, depth):
    rs = np.random.default_rng(seed)
    parents = random_tree(rs, depth, 1, 4)
    x = rs.integers(0, 1000, size=len(parents[-1]))
    counts = tree_level_counts(parents, x)
    for k in range(depth):
        assert np.array_equal(np.bincount(parents[k], weights=counts[k + 1],
                                          minlength=counts[k].size), counts[k])
    assert counts[0][0] == x.sum()


@pytest.mark.parametrize("parents, leaves, err", [
    ([np.array([0, 1])], np.array([1, 1]), InvalidPrivacyParameterError),   # out of range
    ([np.array([0, 0]), np.array([1, 0])], np.array([1, 1]), InvalidPrivacyParameterError),
    ([np.array([0.0, 0.0])], np.array([1, 1]), InvalidPrivacyParameterError),
    ([np.array([0, 0])], np.array([1, -1]), DataError),
    ([np.array([0, 0])], np.array([1.5, 1]), DataError),
    ([np.array([0, 0])], np.array([1, 1, 1]), DataError),
    ([], np.array([1]), InvalidPrivacyParameterError),
])
def test_bad_trees_are_rejected(parents, leaves, err):
    with pytest.raises(err):
        laplace_tree(parents, leaves, PureDP(1), neighbouring="add_remove", rng=rng(0))


def test_sensitivity_is_derived():
    parents = regular_tree(2, 2)
    x = np.arange(4)
    for nb, l2 in (("add_remove", 3.0), ("substitute", 3 * math.sqrt(2))):
        t = gaussian_tree(parents, x, ZCDP(1), neighbouring=nb, max_rows=3, rng=rng(1))
        assert t.sensitivity["l2_per_level"] == pytest.approx(l2)
    with pytest.raises(InvalidPrivacyParameterError, match="max_rows"):
        gaussian_tree(parents, x, ZCDP(1), neighbouring="add_remove", max_rows=0, rng=rng(1))


# ---------------------------------------------------------------------- baselines: det
def test_laplace_scales_follow_budget_split():
    parents = regular_tree(3, 2)
    x = np.arange(8)
    t = laplace_tree(parents, x, PureDP(2), neighbouring="add_remove", max_rows=3, rng=rng(1))
    assert t.info["noise_scales"] == pytest.approx([3 * 4 / 2] * 4)       # L1·(d+1)/ε
    t = laplace_tree(parents, x, PureDP(2), neighbouring="substitute", max_rows=3, rng=rng(1),
                     level_weights=[1, 1, 2])
    assert t.info["noise_scales"][0] is None                               # the public n
    assert t.info["noise_scales"][1:] == pytest.approx([6 / (2 / 4), 6 / (2 / 4), 6 / (2 / 2)])
    assert t.levels[0].counts[0] == x.sum() and t.levels[0].variance[0] == 0.0
    b = t.info["noise_scales"][3]
    assert t.info["noise_variances"][3] == pytest.approx(
        sum(k * k * p for k, p in zip(range(-400, 401),
                                      discrete_laplace_pmf(b, np.arange(-400, 401)))))
    with pytest.raises(InvalidPrivacyParameterError):
        laplace_tree(parents, x, PureDP(1), neighbouring="substitute", rng=rng(0),
                     level_weights=[1, 1, 1, 1])
    with pytest.raises(InvalidPrivacyParameterError):
        laplace_tree(parents, x, ZCDP(1), neighbouring="substitute", rng=rng(0))


def test_gaussian_calibrations():
    parents = regular_tree(2, 3)
    x = np.ones(9, dtype=np.int64)
    t = gaussian_tree(parents, x, ZCDP("0.5"), neighbouring="add_remove", max_rows=2,
                      rng=rng(0), level_weights=[1, 2, 1])
    # σ²_k = L2²/(2ρ_k): ρ = Σ_k L2²/(2σ²_k) recovers the budget exactly
    s2 = t.info["noise_scales"]
    assert sum(4.0 / (2 * v) for v in s2) == pytest.approx(0.5)
    assert s2 == pytest.approx([4 / (2 * 0.125), 4 / (2 * 0.25), 4 / (2 * 0.125)])
    for v, ex in zip(s2, t.info["noise_variances"]):
        support = np.arange(-200, 201)
        assert ex == pytest.approx(float((support ** 2 * discrete_gaussian_pmf(v, support)).sum()))
    # (ε, δ) discrete: through the tight conversion; continuous: analytic Gaussian, whose
    # scaled sensitivity is exactly 1 so the whole release meets δ at ε.
    budget = ApproxDP(2, "1e-6")
    t = gaussian_tree(parents, x, budget, neighbouring="substitute", rng=rng(0))
    rho = float(budget.to_zcdp().rho)
    assert sum(2.0 / (2 * v) for v in t.info["noise_scales"][1:]) == pytest.approx(rho)
    t = gaussian_tree(parents, x, budget, neighbouring="substitute", rng=rng(0), discrete=False,
                      level_weights=[3, 1])
    inv = sum(2.0 / v for v in t.info["noise_scales"][1:])      # Σ L2²/σ²_k = 1/s²
    assert analytic_gaussian_delta(1.0, 1.0 / math.sqrt(inv), 2.0) <= 1e-6 * (1 + 1e-9)
    assert analytic_gaussian_delta(1.0, 0.99 / math.sqrt(inv), 2.0) > 1e-6
    with pytest.raises(InvalidPrivacyParameterError):
        gaussian_tree(parents, x, PureDP(1), neighbouring="substitute", rng=rng(0))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 31), st.integers(1, 3), st.sampled_from(["add_remove", "substitute"]),
       st.booleans())
def test_baselines_consistent_and_well_formed(seed, depth, nb, lap):
    rs = np.random.default_rng(seed)
    parents = random_tree(rs, depth, 1, 4)
    x = rs.integers(0, 50, size=len(parents[-1]))
    mech = laplace_tree if lap else gaussian_tree
    budget = PureDP(1) if lap else ZCDP("0.3")
    t = mech(parents, x, budget, neighbouring=nb, rng=rng(seed))
    assert t.depth == depth and t.loss == budget
    for k, lvl in enumerate(t.levels):
        assert lvl.ids.dtype == np.int64 and np.array_equal(lvl.ids, np.arange(lvl.ids.size))
        assert lvl.counts.dtype == np.float64 and np.all(lvl.variance >= 0)
        if k < depth:
            sums = np.bincount(parents[k], weights=t.levels[k + 1].counts, minlength=lvl.ids.size)
            assert np.allclose(sums, lvl.counts, rtol=1e-9, atol=1e-6)
        model = t.error_model
        for j in range(lvl.ids.size):
            assert model.sum_variance(k, np.array([j])).value == pytest.approx(lvl.variance[j])
    assert t.draws == sum(len(p) for p in parents) + (nb == "add_remove")


# ------------------------------------------------------------------ baselines: stat
@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_noise_scale_per_level_and_node(monkeypatch, kind):
    """Raw noise per level: variance within 5 SE of the exact sampler variance, and the
    test has power against scales ×0.7 and ×1.3; every node (zeros too) is noised."""
    seen = capture_noisy(monkeypatch)
    parents = [np.zeros(4000, dtype=np.int64), np.repeat(np.arange(4000), 4)]
    x = np.zeros(16000, dtype=np.int64)
    x[::7] = 5
    counts = tree_level_counts(parents, x)
    if kind == "laplace":
        t = laplace_tree(parents, x, PureDP(3), neighbouring="add_remove", rng=rng(11))
    else:
        t = gaussian_tree(parents, x, ZCDP("0.02"), neighbouring="add_remove", rng=rng(11))
    noisy, variances = seen[-1]
    for k in (1, 2):
        z = noisy[k] - counts[k]
        assert np.all(z == np.round(z))                 # integer (discrete) noise
        v = variances[k]
        n = z.size
        se = math.sqrt(max(float(np.var(z * z)), 1e-12) / n)
        assert abs(float(np.mean(z * z)) - v) <= 5 * se
        for wrong in (0.7 ** 2, 1.3 ** 2):
            assert abs(float(np.mean(z * z)) - wrong * v) > 5 * se
        assert abs(float(z.mean())) <= 5 * math.sqrt(v / n)
    # level 0 is noised too (add/remove): its variance is the scheduled one
    assert variances[0] == t.info["noise_variances"][0] > 0


@pytest.mark.statistical
@pytest.mark.parametrize("kind, nb", [("laplace", "add_remove"), ("gaussian", "substitute")])
def test_unbiased_and_posterior_variance_matches(kind, nb):
    rs = np.random.default_rng(5)
    parents = random_tree(rs, 3, 1, 4)
    x = rs.integers(0, 30, size=len(parents[-1]))
    counts = tree_level_counts(parents, x)
    reps = 1500
    g = rng(77)
    errs = [[] for _ in counts]
    for _ in range(reps):
        if kind == "laplace":
            t = laplace_tree(parents, x, PureDP(1), neighbouring=nb, rng=g)
        else:
            t = gaussian_tree(parents, x, ZCDP("0.5"), neighbouring=nb, rng=g)
        for k, lvl in enumerate(t.levels):
            errs[k].append(lvl.counts - counts[k])
    for k, lvl in enumerate(t.levels):
        e = np.array(errs[k])                               # reps x nodes
        var = lvl.variance
        if k == 0 and nb == "substitute":
            assert np.all(e == 0) and var[0] == 0
            continue
        # unbiased: every node's mean error within 5 SE
        assert np.all(np.abs(e.mean(axis=0)) <= 5 * np.sqrt(var / reps))
        # posterior variance: pooled standardised squares have mean 1 (5 SE)
        u = (e * e / var).ravel()
        cols = e.shape[1]
        se = float(np.std((e * e / var).mean(axis=1))) / math.sqrt(reps)
        assert abs(float(u.mean()) - 1.0) <= 5 * se + 1e-12, (k, u.mean(), se, cols)
        # ... and per node within a looser 5-SE band
        per = (e * e).mean(axis=0) / var
        per_se = np.std(e * e / var, axis=0) / math.sqrt(reps)
        assert np.all(np.abs(per - 1.0) <= 5 * per_se + 1e-12)


@pytest.mark.statistical
def test_sum_variance_matches_empirical():
    parents = random_tree(np.random.default_rng(9), 2, 2, 5)
    x = np.arange(len(parents[-1]), dtype=np.int64)
    ids = np.array([0, 2, 3, len(parents[-1]) - 1])
    g = rng(3)
    sums = []
    for _ in range(2000):
        t = gaussian_tree(parents, x, ZCDP("0.5"), neighbouring="add_remove", rng=g)
        sums.append(float(t.levels[2].counts[ids].sum() - x[ids].sum()))
    v = t.error_model.sum_variance(2, ids)
    s = np.array(sums)
    assert v.exact
    se = float(np.std(s * s)) / math.sqrt(s.size)
    assert abs(float(np.mean(s * s)) - v.value) <= 5 * se


# ------------------------------------------------------------------------ error model
def test_error_model_exact_and_round_trip():
    rs = np.random.default_rng(2)
    parents = random_tree(rs, 3, 1, 3)
    x = rs.integers(0, 9, size=len(parents[-1]))
    t = gaussian_tree(parents, x, ZCDP(1), neighbouring="substitute", rng=rng(0))
    model = t.error_model
    params = json.loads(json.dumps(model.to_params()))
    assert params["kind"] == "tree_counts"
    again = load(params)
    assert isinstance(again, TreeCountsErrorModel) and again.to_params() == model.to_params()
    var = t.info["noise_variances"]
    for level, ids in [(3, np.array([0, 1, 4])), (2, np.arange(len(parents[1]))), (1, [0]),
                       (0, [0]), (3, np.array([2, 2]))]:
        ids = np.asarray(ids)
        got = again.sum_variance(level, ids)
        assert got.exact
        assert got.value == pytest.approx(linear_sum_variance(parents, var, level, ids), rel=1e-9,
                                          abs=1e-9)
    post = posterior_variances(parents, var)
    for k in range(4):
        assert np.allclose(post[k], t.levels[k].variance)
        assert np.allclose(again.posterior(k), t.levels[k].variance)
    summary = again.level_summary()
    assert [s["level"] for s in summary] == [1, 2, 3]
    assert summary[2]["stderr"] == pytest.approx(math.sqrt(t.levels[3].variance.max()))
    assert again.depth == 3
    # without the shape: the Gauss–Markov bound |S|·σ²_k, marked inexact, never below exact
    shapeless = load({**params, "fanouts": None})
    for level, ids in [(3, np.array([0, 1, 4])), (2, np.array([0]))]:
        b = shapeless.sum_variance(level, ids)
        assert not b.exact and b.value == pytest.approx(ids.size * var[level])
        assert b.value >= again.sum_variance(level, ids).value
    assert shapeless.sum_bound(3, np.array([0]), 0.05) > 0
    with pytest.raises(InvalidPrivacyParameterError):
        again.sum_variance(4, np.array([0]))
    with pytest.raises(InvalidPrivacyParameterError):
        load({**params, "noise_variances": [0.0, -1.0, 1.0, 1.0]})
    with pytest.raises(InvalidPrivacyParameterError):
        load({**params, "level_sizes": [1, 2]})


@pytest.mark.parametrize("mech, budget", [(gaussian_tree, ZCDP(10 ** 6)),
                                          (laplace_tree, PureDP(10 ** 6))])
def test_huge_budget_is_exact(mech, budget):
    """The exact-release oracle: the discrete noise is 0 and its variance underflows to 0."""
    parents = regular_tree(3, 3)
    x = np.arange(27, dtype=np.int64)
    t = mech(parents, x, budget, neighbouring="add_remove", rng=rng(0))
    for k, c in enumerate(tree_level_counts(parents, x)):
        assert np.array_equal(t.levels[k].counts, c)
        assert np.all(t.levels[k].variance == 0)
    assert load(t.error_model.to_params()).sum_variance(3, np.arange(5)).value == 0.0


def test_fanout_encoding_round_trip():
    parents = [np.zeros(3, dtype=np.int64), np.array([0, 0, 2, 2, 2])]
    sizes = [1, 3, 5]
    enc = encode_fanouts(parents, sizes)
    assert enc == [[[3, 1]], [[2, 1], [0, 1], [3, 1]]]
    back = decode_fanouts(enc, sizes)
    assert all(np.array_equal(a, b) for a, b in zip(back, parents))
    assert encode_fanouts(regular_tree(3, 4), [1, 4, 16, 64])[2] == [[4, 16]]


# ------------------------------------------------------------- α-algorithm: primitives
@pytest.mark.parametrize("scale, shift, delta", [(2.0, 1, 1e-3), (0.7, 2, 1e-4), (5.0, 3, 1e-6)])
def test_truncated_discrete_laplace_radius_is_private_and_tight(scale, shift, delta):
    R = int(at._tl_radius(scale, shift, math.log(delta)))
    support = np.arange(-R, R + 1)
    p = discrete_laplace_pmf(scale, support)
    p /= p.sum()
    eps = shift / scale

    def embed(shift_by):
        arr = np.zeros(2 * R + 2 * shift + 1)
        arr[shift + shift_by: shift + shift_by + 2 * R + 1] = p
        return arr

    def hockey(big, small):  # δ at e^ε between two output distributions
        return float(np.maximum(big - math.exp(eps) * small, 0).sum())

    assert max(hockey(embed(0), embed(a)) for a in range(-shift, shift + 1)) <= delta * (1 + 1e-9)
    # vector query: the shift split over two coordinates (the edge mass is superadditive)
    if shift >= 2:
        joint = np.outer(embed(0), embed(0))
        moved = np.outer(embed(1), embed(shift - 1))
        assert hockey(joint, moved) <= delta * (1 + 1e-9)
    # tight: one less would leak more than δ (unless R is the floor R = shift)
    if R > shift:
        assert at._tl_edge_mass(scale, R - 1, shift) > delta
    draws = at._trunc_dlap(scale, R, 20000, rng(4))
    assert np.abs(draws).max() <= R and draws.dtype == np.int64


def test_svt_margin_is_minimal():
    for scale, target in [(3.0, 1e-3), (20.0, 1e-6), (0.5, 0.1)]:
        t = int(at._dlap_margin(np.array([scale]), np.array([math.log(target)]))[0])
        q = math.exp(-1 / scale)
        tail = lambda s: 2 * q ** (s + 1) / (1 + q)          # P[|X| > s]
        assert tail(t) <= target
        assert t == 0 or tail(t - 1) > target


# --------------------------------------------------------------- α-algorithm: schedule
@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("depth", [1, 4])
def test_schedule_properties(alpha, depth):
    budget = ApproxDP(1, "1e-6")
    s = alpha_schedule(depth, budget, alpha=alpha, neighbouring="add_remove")
    beta = alpha / (6 + 5 * alpha)
    assert s.beta == pytest.approx(beta) and s.ratio == pytest.approx(1 + 2 * alpha / 3)
    assert s.ratio == pytest.approx((1 + alpha) * (1 - beta) / (1 + beta))
    assert s.cutoff == 2 and isinstance(s.cutoff, int)                  # integer cutoff (E4)
    n = s.epsilon.size
    tau, big_m = s.thresholds(n)
    assert np.allclose(big_m, (1 + alpha) * (1 - beta) * tau)
    assert np.allclose(big_m[:-1], (1 + beta) * tau[1:])
    assert np.allclose(big_m / ((1 - beta) * tau), 1 + alpha)           # c_i = 1 + α
    # the corrected, convergent schedule: ε_i ∝ i·r^{−(i−1)}, eventually decreasing
    i = np.arange(1, n + 1)
    ratio = s.epsilon * s.ratio ** (i - 1) / i
    assert np.allclose(ratio, ratio[0], rtol=1e-9)
    tail = int(math.ceil(1 / math.log(s.ratio))) + 1
    assert np.all(np.diff(s.epsilon[tail:]) < 0) and s.epsilon[-1] < 1e-6 * s.epsilon.max()
    # budgets: exact sums never exceed the shares (basic composition)
    assert sum(Fraction(float(e)) for e in s.epsilon) <= s.rung_budget.epsilon
    assert sum(Fraction(float(e)) for e in s.delta) <= s.rung_budget.delta
    assert math.fsum(np.exp(s.log_eta)) <= s.eta
    shares = [s.rung_budget, s.root_budget, s.clip_budget]
    assert sum(b.epsilon for b in shares) == budget.epsilon
    assert sum(b.delta for b in shares) == budget.delta
    # per-rung accuracy conditions hold, the requirement is largest at i = 1
    assert np.all(s.margin + 2 * s.radius <= s.beta * tau)
    assert np.all(s.cutoff * (tau - s.margin) > big_m)
    need = (s.margin + 2 * s.radius) * (1 + beta) / (beta * alpha * s.ratio ** (i - 1))
    assert int(np.argmax(need)) == 0
    # never above the digest's corrected closed form (Cor 4.7 with K(α), estimation at ε/2)
    d, eps, dl = depth + 1, 0.5, 0.5e-6
    k_alpha = 6 * (1 + alpha) ** 2 * (3 + 2 * alpha) ** 3 / ((6 + 5 * alpha) * alpha ** 4)
    closed = 12 * k_alpha / eps * max(8 * math.log(4 * d / s.eta),
                                      math.log(1 + 2 * math.expm1(eps / 4) / dl))
    assert s.tau_min_required <= closed
    assert s.eta == min(1 / d ** 2, 0.25)                               # E7


def test_schedule_rejections_and_sensitivity():
    b = ApproxDP(1, "1e-6")
    for bad in (0, 1, 1.5):
        with pytest.raises(InvalidPrivacyParameterError):
            alpha_schedule(3, b, alpha=bad, neighbouring="add_remove")
    with pytest.raises(InvalidPrivacyParameterError):
        alpha_schedule(3, PureDP(1), alpha=0.5, neighbouring="add_remove")
    s = alpha_schedule(3, b, alpha=0.5, neighbouring="add_remove")
    with pytest.raises(InvalidPrivacyParameterError):
        alpha_schedule(3, b, alpha=0.5, neighbouring="add_remove", tau_min=s.tau_min / 2)
    big = alpha_schedule(3, b, alpha=0.5, neighbouring="add_remove", tau_min=3 * s.tau_min)
    assert big.tau_min == 3 * s.tau_min
    s3 = alpha_schedule(3, b, alpha=0.5, neighbouring="add_remove", max_rows=3)
    assert s3.sensitivity == 3 and np.allclose(s3.query_scale, 3 * s.query_scale)
    sub = alpha_schedule(3, b, alpha=0.5, neighbouring="substitute", max_rows=3)
    assert sub.sensitivity == 6 and sub.root_budget is None
    assert sub.rung_budget == b.scale(Fraction(1, 2))
    noclip = alpha_schedule(3, b, alpha=0.5, neighbouring="substitute", clip=False)
    assert noclip.rung_budget == b and noclip.clip_budget is None


# ------------------------------------------------------------ α-algorithm: structure
def test_next_forest_maximal_light_subtrees():
    # root -> {a, b}; a -> {a0, a1}; b -> {b0}
    parents = [np.array([0, 0]), np.array([0, 0, 1])]
    sizes = [1, 2, 3]
    tid = [np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(3, np.int64)]
    top = [np.array([True]), np.array([True, False]), np.array([True, False, False])]
    new = at._next_forest(top, tid, parents, sizes)
    # ⊥ sibling a1 of the ⊤ a0, and the whole ⊥ subtree b (with b0) go on; ⊤ nodes leave
    assert new[0].tolist() == [-1]
    assert new[1].tolist() == [-1, 2]            # b is a root: global id 1 + 1
    assert new[2].tolist() == [-1, 4, 2]         # a1 its own root (id 3 + 1), b0 under b
    # nodes already estimated stay out; a ⊥ tree root stays the root
    tid2 = [np.array([-1]), np.array([-1, 2]), np.array([-1, 4, 2])]
    top2 = [np.array([False]), np.array([False, False]), np.array([False, False, True])]
    new2 = at._next_forest(top2, tid2, parents, sizes)
    assert new2[1].tolist() == [-1, 2] and new2[2].tolist() == [-1, 4, -1]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 31))
def test_classification_and_forest_invariants(seed):
    rs = np.random.default_rng(seed)
    parents = random_tree(rs, 3, 1, 4)
    sizes = [1] + [len(p) for p in parents]
    x = (rs.pareto(1.0, size=sizes[-1]) * 20).astype(np.int64)
    counts = tree_level_counts(parents, x)
    s = alpha_schedule(3, ApproxDP(1, "1e-6"), alpha=0.5, neighbouring="add_remove",
                       tau_min=1e9)
    tid = [np.zeros(n, np.int64) for n in sizes]
    # make part of the tree already estimated: a random earlier partition
    g = rng(seed)
    for rung in range(3):
        tau = float(rs.uniform(0, 40))
        top, stats = at._classify(counts, parents, sizes, tid, tau, 0.0, 0.0, s, 0, g)
        assert stats["svt_top_max"] <= s.cutoff
        for k in range(len(sizes)):
            assert not np.any(top[k] & (tid[k] < 0))                    # only active nodes
            if k:
                par = parents[k - 1]
                same = tid[k] >= 0
                same &= tid[k - 1][par] == tid[k]
                assert not np.any(top[k] & same & ~top[k - 1][par])     # ⊤ is upward-closed
        new = at._next_forest(top, tid, parents, sizes)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        for k in range(len(sizes)):
            bottom = (tid[k] >= 0) & ~top[k]
            assert np.array_equal(new[k] >= 0, bottom)                  # every ⊥ node covered
            gid = offsets[k] + np.arange(sizes[k])
            roots = bottom & (new[k] == gid)
            if k:
                par = parents[k - 1]
                pb = (tid[k - 1][par] >= 0) & ~top[k - 1][par]
                assert np.array_equal(roots, bottom & ~pb)              # maximal subtrees
                inner = bottom & pb
                assert np.array_equal(new[k][inner], new[k - 1][par][inner])
        tid = new


@pytest.mark.statistical
@pytest.mark.parametrize("case", ["heavy_leaf", "all_light"])
def test_classification_misclassification_rate(case):
    """§6.13: with w_root ≤ M_1 and the scheduled margins, a heavy node
    (w ≥ (1+β)τ_1) labelled ⊥ or a light one (w < (1−β)τ_1) labelled ⊤ happens in at most
    η_1 of the runs (+5 SE); a single heavy leaf and an all-light tree."""
    parents = regular_tree(3, 3)
    sizes = [1, 3, 9, 27]
    s = alpha_schedule(3, ApproxDP(1, "1e-6"), alpha=0.5, neighbouring="add_remove")
    tau, big_m = s.thresholds(1)
    tau1 = float(tau[0])
    x = np.zeros(27, dtype=np.int64)
    if case == "heavy_leaf":
        x[13] = int(math.ceil((1 + s.beta) * tau1))
    else:
        x[:] = int((1 - s.beta) * tau1 / 27) - 1
    counts = tree_level_counts(parents, x)
    assert counts[0][0] <= big_m[0]
    g = rng(21)
    bad_runs = 0
    reps = 200
    for _ in range(reps):
        tid = [np.zeros(n, np.int64) for n in sizes]
        top, _ = at._classify(counts, parents, sizes, tid, tau1, float(s.margin[0]),
                              float(s.radius[0]), s, 0, g)
        wrong = any(np.any((counts[k] >= (1 + s.beta) * tau1) & ~top[k])
                    or np.any((counts[k] < (1 - s.beta) * tau1) & top[k]) for k in range(4))
        bad_runs += wrong
    eta1 = math.exp(float(s.log_eta[0]))
    assert bad_runs / reps <= eta1 + 5 * math.sqrt(eta1 * (1 - eta1) / reps)


def _path_nonincreasing(values, parents):
    return all(np.all(values[k + 1] <= values[k][parents[k]] * (1 + 1e-12))
               for k in range(len(parents)))


@pytest.mark.parametrize("nb", ["add_remove", "substitute"])
@pytest.mark.parametrize("midpoint", [False, True])
def test_alpha_outputs_structure_and_ledger(nb, midpoint):
    rs = np.random.default_rng(8)
    parents = random_tree(rs, 3, 2, 5)
    x = (rs.pareto(0.8, size=len(parents[-1])) * 2e4).astype(np.int64)
    counts = tree_level_counts(parents, x)
    budget = ApproxDP(1, "1e-6")
    out = alpha_tree(parents, x, budget, alpha=0.5, rng=rng(2), neighbouring=nb,
                     midpoint=midpoint)
    s = out.schedule
    n = int(counts[0][0])
    M = out.info["root_bound"]
    if nb == "add_remove":
        assert n <= M <= n + 2 * s.root_radius
    else:
        assert M == n and out.estimates[0][0] == n
    ell = out.info["rungs"]
    tau, big_m = s.thresholds(ell)
    grid = np.r_[s.alpha * s.tau_min, big_m]
    if midpoint:
        grid = np.r_[s.alpha * s.tau_min / 2, (big_m + (1 - s.beta) * tau) / 2]
    for k in range(4):
        u = out.unclipped[k]
        assert np.all(np.isfinite(u)) and np.all(np.isin(u, grid))
        err_u = np.abs(u - counts[k])
        err = np.abs(out.estimates[k] - counts[k])
        assert np.all(err <= err_u + 1e-9) and np.all(err <= out.accuracy.additive_bound + 1e-9)
    assert _path_nonincreasing(out.unclipped, parents)
    assert out.info["svt_top_max"] <= s.cutoff
    assert out.accuracy.alpha == (0.25 if midpoint else 0.5)
    spent_e = sum(e for _, e, _ in out.ledger)
    spent_d = sum(d for _, _, d in out.ledger)
    assert spent_e <= budget.epsilon and spent_d <= budget.delta
    assert [name for name, _, _ in out.ledger if name.startswith("rung")] == \
        [f"rung {i}" for i in range(ell, 0, -1)]
    assert "not additive" in out.accuracy.describe()


def test_alpha_privacy_total_independent_of_tuning():
    """Footnote 7 / §6.20: the ledger stays within (ε, δ) whatever τ_min, α or the data."""
    parents = regular_tree(3, 3)
    budget = ApproxDP("0.5", "1e-7")
    for tau_mult, alpha, scale in [(1, 0.3, 1e3), (7, 0.3, 1e7), (1, 0.9, 1e9), (50, 0.6, 0)]:
        s = alpha_schedule(3, budget, alpha=alpha, neighbouring="add_remove")
        x = np.full(27, int(scale), dtype=np.int64)
        out = alpha_tree(parents, x, budget, alpha=alpha, rng=rng(1), neighbouring="add_remove",
                         tau_min=tau_mult * s.tau_min)
        assert sum(e for _, e, _ in out.ledger) <= budget.epsilon
        assert sum(d for _, _, d in out.ledger) <= budget.delta


# ---------------------------------------------------------- α-algorithm: statistical
def _inputs(rs, parents):
    n = len(parents[-1])
    heavy = (rs.pareto(0.7, size=n) * 5e4).astype(np.int64)
    single = np.zeros(n, dtype=np.int64)
    single[n // 2] = 10 ** 9
    uniform = np.full(n, 3 * 10 ** 6, dtype=np.int64)
    return {"heavy": heavy, "single": single, "uniform": uniform}


@pytest.mark.statistical
@pytest.mark.parametrize("fan", [2, 50])
def test_alpha_per_node_accuracy_rate(fan):
    """§6.18/19/21: failures of |ŵ − w| ≤ α·max(w, τ) per node at most η (+5 SE), for
    heavy-tailed, single-heavy-leaf, uniform and boundary inputs, at arity 2 and 50."""
    depth = 3 if fan == 2 else 2
    parents = regular_tree(depth, fan)
    rs = np.random.default_rng(fan)
    budget = ApproxDP(1, "1e-6")
    sched = alpha_schedule(depth, budget, alpha=0.5, neighbouring="add_remove")
    inputs = _inputs(rs, parents)
    # boundary: leaves at (1±β)τ_1 and at M_0 = α·τ_min
    tau, big_m = sched.thresholds(2)
    n = len(parents[-1])
    bnd = np.array([(1 + sched.beta) * tau[0], (1 - sched.beta) * tau[0], big_m[0],
                    sched.alpha * sched.tau_min], dtype=np.float64)
    inputs["boundary"] = np.resize(np.floor(bnd / 4), n).astype(np.int64)
    fails = fails_u = trials = tight = 0
    excess2 = []
    g = rng(1000 + fan)
    for name, x in inputs.items():
        counts = tree_level_counts(parents, x)
        for _ in range(20):
            out = alpha_tree(parents, x, budget, alpha=0.5, rng=g, neighbouring="add_remove")
            assert out.info["transitions_max"] <= 1          # one root path per tree and rung
            for k in range(depth + 1):
                err = np.abs(out.estimates[k] - counts[k])
                allow = out.accuracy.allowance(counts[k])
                fails += int(np.sum(err > allow))
                # the Estimation step alone (before the ClipWrapper) carries the guarantee
                err_u = np.abs(out.unclipped[k] - counts[k])
                fails_u += int(np.sum(err_u > allow))
                tight += int(np.sum(err_u > allow / 8))
                trials += err.size
                excess2.append(np.maximum(err - 0.5 * counts[k], 0) ** 2)
    eta = sched.eta
    assert fails / trials <= eta + 5 * math.sqrt(eta * (1 - eta) / trials)
    assert fails_u / trials <= eta + 5 * math.sqrt(eta * (1 - eta) / trials)
    # power: the test would notice a guarantee claimed at α/8 instead of α
    assert tight / trials > eta + 5 * math.sqrt(eta * (1 - eta) / trials)
    rmse = math.sqrt(float(np.concatenate(excess2).max()))
    assert rmse <= out.accuracy.mrmse_bound      # §6.23 (worst node and run, a fortiori)


@pytest.mark.statistical
def test_alpha_zero_input_outputs_m0():
    parents = regular_tree(3, 4)
    x = np.zeros(64, dtype=np.int64)
    g = rng(5)
    hits = 0
    for _ in range(30):
        out = alpha_tree(parents, x, ApproxDP(1, "1e-6"), alpha=0.5, rng=g,
                         neighbouring="add_remove", midpoint=True)
        m0 = out.schedule.alpha * out.schedule.tau_min / 2
        hits += all(np.all(u == m0) for u in out.unclipped)
        # the clipped output is within 2R of the truth
        assert all(np.all(np.abs(e) <= 2 * out.schedule.clip_radius) for e in out.estimates)
    eta = out.schedule.eta
    assert hits >= 30 * (1 - eta) - 5 * math.sqrt(30 * eta * (1 - eta))


def test_laplace_scales_are_rounded_up():
    """ε = 3 split over two levels: the exact scale 2/3 is not a float; the used one is above."""
    t = laplace_tree(regular_tree(1, 2), np.arange(2), PureDP(3), neighbouring="add_remove",
                     rng=rng(1))
    assert all(Fraction(b) >= Fraction(2, 3) for b in t.info["noise_scales"])
