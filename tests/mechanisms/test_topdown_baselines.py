"""The TopDown baselines: VanillaGauss, the stability histogram, TDA-ℓ2
(reference/od_topdown.md §2.6, §6.27–34)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.accuracy import load
from dpsql.domains import categorical, concat, hierarchy
from dpsql.errors import InvalidPrivacyParameterError
from dpsql.mechanisms.topdown_baselines import (leaves_per_node, project_l2_rounded,
                                                stability_histogram, tda_l2, vanilla_gauss)
from dpsql.privacy import ApproxDP, ZCDP, rng


def cat_tree(*sizes):
    return concat(*[categorical(f"a{i}", list(range(s))) for i, s in enumerate(sizes)])


def data(tree, n, seed, complete=False):
    g = np.random.default_rng(seed)
    size = tree.level_sizes[-1]
    p = 1.0 / np.arange(1, size + 1) ** 1.2
    leaves = g.choice(size, size=n, p=p / p.sum())
    if complete:
        leaves = np.concatenate([leaves, np.arange(size)])
    return np.unique(leaves, return_counts=True)


def dense(tree, k, ids, cnt):
    out = np.zeros(tree.level_sizes[k], dtype=np.int64)
    np.add.at(out, tree.ancestor(tree.depth, ids, k), cnt)
    return out


def check_sums(tree, out):
    for k in range(1, tree.depth + 1):
        lv = out.levels[k]
        assert np.all(np.diff(lv.ids) > 0)
        pi, pc = tree.aggregate(lv.ids, lv.counts, k, k - 1)
        nz = pc != 0
        assert np.array_equal(pi[nz], out.levels[k - 1].ids)
        assert np.array_equal(pc[nz], out.levels[k - 1].counts)


def test_leaves_per_node():
    tree = concat(hierarchy(["r", "p"], [("a", "x"), ("a", "y"), ("b", "z")]),
                  categorical("m", [1, 2]))
    per = leaves_per_node(tree)
    assert per[0].tolist() == [6] and per[1].tolist() == [4, 2]
    assert per[2].tolist() == [2, 2, 2] and per[3].tolist() == [1]


def test_vanilla_gauss_structure_and_model():
    tree = cat_tree(3, 4, 5)
    ids, cnt = data(tree, 500, 0, complete=True)
    out = vanilla_gauss(tree, ids, cnt, ZCDP(1), neighbouring="substitute", rng=rng(0))
    assert out.draws == 60
    check_sums(tree, out)
    # FDR is 0 on complete data: every true leaf is positive
    assert np.all(dense(tree, 3, ids, cnt)[out.leaves.ids] > 0)
    em = out.error_model
    assert em.sigma2 == pytest.approx(1.0)  # Δ² = 2, σ² = Δ²/(2ρ)
    v = em.sum_variance(1, np.array([0, 2]))
    assert v.exact and v.value == pytest.approx(2 * 20 * 1.0)
    assert load(em.to_params()).to_params() == em.to_params()
    add = vanilla_gauss(tree, ids, cnt, ZCDP(1), neighbouring="add_remove", max_rows=2,
                        rng=rng(0), clamp=True)
    assert add.error_model.sigma2 == pytest.approx(2.0) and add.leaves.counts.min() > 0


def test_vanilla_zero_noise_is_exact():
    tree = cat_tree(3, 4)
    ids, cnt = data(tree, 100, 1)
    out = vanilla_gauss(tree, ids, cnt, ZCDP(10**12), neighbouring="substitute", rng=rng(0))
    assert np.array_equal(out.leaves.ids, ids) and np.array_equal(out.leaves.counts, cnt)


@pytest.mark.statistical
def test_vanilla_error_grows_toward_root():
    """od_topdown §6.29: level-ℓ error variance is σ²·b^(T−ℓ)."""
    tree = cat_tree(4, 4, 4)
    ids, cnt = data(tree, 2000, 2, complete=True)
    errs = {k: [] for k in range(4)}
    for r in range(300):
        out = vanilla_gauss(tree, ids, cnt, ZCDP(2), neighbouring="substitute", rng=rng(r))
        for k in range(4):
            rel = np.zeros(tree.level_sizes[k], np.int64)
            rel[out.levels[k].ids] = out.levels[k].counts
            errs[k].append(rel - dense(tree, k, ids, cnt))
    for k in range(4):
        e = np.concatenate(errs[k]).astype(float)
        expect = 0.5 * 4 ** (3 - k)
        assert abs(e.var() - expect) < 5 * expect * math.sqrt(2 / e.size)


def test_stability_histogram():
    tree = cat_tree(5, 5, 4)
    ids, cnt = data(tree, 3000, 3)
    budget = ApproxDP(1, 1e-8)
    out = stability_histogram(tree, ids, cnt, budget, neighbouring="substitute", rng=rng(0))
    tau = out.info["threshold"]
    assert tau == pytest.approx(1 + 2 * math.log(2 / 1e-8), rel=1e-9)  # 39.2 at ε = 1
    assert tau == pytest.approx(39.2, abs=0.05)
    truth = dense(tree, 3, ids, cnt)
    assert np.all(truth[out.leaves.ids] > 0)           # never a false positive
    assert np.all(out.leaves.counts >= tau)             # everything released passed τ
    assert out.draws == ids.size                        # noise on positive leaves only
    check_sums(tree, out)
    em = out.error_model
    assert load(em.to_params()).to_params() == em.to_params()
    assert em.sum_variance(1, np.array([0])) is None
    assert em.sum_bound(3, np.array([0]), 0.05) > tau
    with pytest.raises(InvalidPrivacyParameterError, match="ApproxDP"):
        stability_histogram(tree, ids, cnt, ZCDP(1), neighbouring="substitute", rng=rng(0))


def simplex_projection(x, c):
    """Reference Euclidean projection onto {y ≥ 0, Σy = c} by bisection on τ."""
    x = np.asarray(x, float)
    lo, hi = x.min() - c - 1, x.max() + 1
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.maximum(x - mid, 0).sum() > c:
            lo = mid
        else:
            hi = mid
    return np.maximum(x - hi, 0)


segs = st.lists(st.integers(1, 7).flatmap(
    lambda m: st.tuples(st.lists(st.integers(-30, 60), min_size=m, max_size=m),
                        st.integers(0, 80))), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(segs)
def test_l2_projection_rounding(cases):
    xs = [np.array(x) for x, _ in cases]
    c = np.array([cc for _, cc in cases])
    ptr = np.concatenate(([0], np.cumsum([len(x) for x in xs])))
    y = project_l2_rounded(np.concatenate(xs), ptr, c)
    for i, (x, cc) in enumerate(cases):
        yi = y[ptr[i]:ptr[i + 1]]
        assert yi.sum() == cc and yi.min() >= 0
        real = simplex_projection(x, cc)
        assert np.abs(yi - real).max() <= 1.5 + 1e-6


def test_tda_l2_structure_recurrence_and_exactness():
    tree = cat_tree(3, 4, 2, 5)
    ids, cnt = data(tree, 400, 4)
    truth = [dense(tree, k, ids, cnt) for k in range(5)]
    for seed in range(6):
        calls = []
        out = tda_l2(tree, ids, cnt, ZCDP(0.3), neighbouring="substitute", rng=rng(seed),
                     noise_hook=lambda lv, ch, pa, nz: calls.append((lv, pa, nz.copy())))
        check_sums(tree, out)
        assert all(int(lv.counts.sum()) == 400 and lv.counts.min() > 0 for lv in out.levels)
        eta = [np.zeros(s, np.int64) for s in tree.level_sizes]
        for lv, pa, nz in calls:
            np.maximum.at(eta[lv - 1], pa, np.abs(nz))
        prev = np.zeros(1)
        for k in range(1, 5):
            rel = np.zeros(tree.level_sizes[k], np.int64)
            rel[out.levels[k].ids] = out.levels[k].counts
            err = np.abs(rel - truth[k])
            par = tree.parent(k, np.arange(tree.level_sizes[k]))
            assert np.all(err <= prev[par] + 2 * eta[k - 1][par] + 1.5)
            prev = err
    em = out.error_model
    assert em.rounding_slack == 1.5 and load(em.to_params()).to_params() == em.to_params()
    ex = tda_l2(tree, ids, cnt, ZCDP(1), neighbouring="substitute", rng=rng(0),
                noise_hook=lambda lv, ch, pa, nz: np.zeros_like(nz))
    assert np.array_equal(ex.leaves.ids, ids) and np.array_equal(ex.leaves.counts, cnt)
