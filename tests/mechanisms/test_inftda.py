"""InfTDA: structure, privacy plumbing, the deterministic error recurrence, Theorem 1
(reference/inftda.md §6, reference/od_topdown.md §6.10–30)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.accuracy import load
from dpsql.accuracy.inftda import InfTDAErrorModel
from dpsql.domains import categorical, concat, hierarchy, od_tree
from dpsql.errors import DataError, InvalidPrivacyParameterError
from dpsql.mechanisms.inftda import inftda, topdown
from dpsql.mechanisms.intopt import intopt_segmented
from dpsql.privacy import ApproxDP, PureDP, ZCDP, rng


def cat_tree(*sizes):
    return concat(*[categorical(f"a{i}", list(range(s))) for i, s in enumerate(sizes)])


def skewed(tree, n, seed):
    g = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, tree.level_sizes[-1] + 1) ** 1.3
    leaves = g.choice(tree.level_sizes[-1], size=n, p=p / p.sum())
    return np.unique(leaves, return_counts=True)


def dense_levels(tree, ids, cnt):
    out = []
    for k in range(tree.depth + 1):
        dense = np.zeros(tree.level_sizes[k], dtype=np.int64)
        np.add.at(dense, tree.ancestor(tree.depth, ids, k), cnt)
        out.append(dense)
    return out


def released_dense(tree, out):
    res = []
    for k, lvl in enumerate(out.levels):
        dense = np.zeros(tree.level_sizes[k], dtype=np.int64)
        dense[lvl.ids] = lvl.counts
        res.append(dense)
    return res


def check_structure(tree, out, n):
    assert out.depth == tree.depth
    for k, lvl in enumerate(out.levels):
        assert lvl.ids.dtype == np.int64 and lvl.counts.dtype == np.int64
        assert np.all(np.diff(lvl.ids) > 0)
        assert np.all(lvl.counts > 0)
        assert int(lvl.counts.sum()) == n
        assert lvl.ids.size <= min(max(n, 0), tree.level_sizes[k])
        if k:
            # consistency: aggregate of level k is level k-1, no orphan nodes
            pi, pc = tree.aggregate(lvl.ids, lvl.counts, k, k - 1)
            assert np.array_equal(pi, out.levels[k - 1].ids)
            assert np.array_equal(pc, out.levels[k - 1].counts)
    expected = sum(int(tree.n_children(k, out.levels[k - 1].ids).sum())
                   for k in range(1, tree.depth + 1))
    if out.info["neighbouring"] == "add_remove":
        expected += 1
    assert out.draws == expected


class Recorder:
    def __init__(self, replace=None):
        self.calls = []
        self.replace = replace

    def __call__(self, level, child, parent, noise):
        new = None if self.replace is None else self.replace(level, child, parent, noise)
        self.calls.append((level, child.copy(), parent.copy(),
                           (noise if new is None else new).copy()))
        return new


@pytest.mark.parametrize("nb", ["substitute", "add_remove"])
def test_structure_and_draws(nb):
    tree = cat_tree(3, 4, 2, 5)
    ids, cnt = skewed(tree, 400, 1)
    for seed in range(5):
        out = inftda(tree, ids, cnt, ZCDP(0.5), neighbouring=nb, rng=rng(seed))
        n = int(cnt.sum()) if nb == "substitute" else int(out.levels[0].counts.sum())
        check_structure(tree, out, n)
        if nb == "substitute":
            assert out.levels[0].counts.tolist() == [400]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 300),
       st.integers(0, 2**31), st.sampled_from(["substitute", "add_remove"]))
def test_structure_property(sizes, n, seed, nb):
    tree = cat_tree(*sizes)
    ids, cnt = skewed(tree, n, seed) if n else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    out = inftda(tree, ids, cnt, ZCDP(0.3), neighbouring=nb, rng=rng(seed))
    total = int(out.levels[0].counts.sum()) if out.levels[0].ids.size else 0
    if nb == "substitute":
        assert total == n
    check_structure(tree, out, total)


def zero_noise(level, child, parent, noise):
    return np.zeros_like(noise)


@pytest.mark.parametrize("nb", ["substitute", "add_remove"])
def test_zero_noise_reproduces_truth(nb):
    tree = concat(hierarchy(["r", "p"], [("a", "x"), ("a", "y"), ("b", "z")]),
                  categorical("m", ["car", "bus", "walk"]))
    ids, cnt = skewed(tree, 500, 3)
    out = inftda(tree, ids, cnt, ZCDP(1), neighbouring=nb, rng=rng(0), noise_hook=zero_noise)
    truth = dense_levels(tree, ids, cnt)
    for k, rel in enumerate(released_dense(tree, out)):
        assert np.array_equal(rel, truth[k])


def test_huge_rho_reproduces_truth():
    tree = cat_tree(4, 3, 6)
    ids, cnt = skewed(tree, 1000, 4)
    out = inftda(tree, ids, cnt, ZCDP(10**12), neighbouring="substitute", rng=rng(2))
    assert np.array_equal(out.leaves.ids, ids) and np.array_equal(out.leaves.counts, cnt)


def test_duplicate_leaf_ids_are_summed():
    tree = cat_tree(2, 2)
    out = inftda(tree, np.array([3, 1, 3]), np.array([5, 2, 4]), ZCDP(10**12),
                 neighbouring="substitute", rng=rng(0))
    assert out.leaves.ids.tolist() == [1, 3] and out.leaves.counts.tolist() == [2, 9]


def test_empty_data():
    tree = cat_tree(3, 3)
    e = np.zeros(0, np.int64)
    out = inftda(tree, e, e, ZCDP(1), neighbouring="substitute", rng=rng(0))
    assert all(lvl.ids.size == 0 for lvl in out.levels) and out.draws == 0


def test_unbounded_root_clamped_at_zero():
    tree = cat_tree(3, 3)
    ids, cnt = skewed(tree, 50, 0)

    def sink(level, child, parent, noise):
        return np.full_like(noise, -10**6) if level == 0 else None
    out = inftda(tree, ids, cnt, ZCDP(1), neighbouring="add_remove", rng=rng(0),
                 noise_hook=sink)
    assert all(lvl.ids.size == 0 for lvl in out.levels) and out.draws == 1


def test_recurrence_on_every_node():
    """|err(u)| ≤ |err(parent)| + 2‖η(parent)‖∞ over the whole public universe, with
    η = 0 for parents that were not expanded (inftda §6.10, od_topdown §6.22)."""
    for nb, seed, tree in [("substitute", 1, cat_tree(3, 4, 2, 5)),
                           ("add_remove", 2, cat_tree(3, 4, 2, 5)),
                           ("substitute", 3, od_tree(hierarchy(["o1", "o2"], [(0, 0), (0, 1), (1, 2)]),
                                                     hierarchy(["d1", "d2"], [(0, 0), (1, 1), (1, 2)])))]:
        ids, cnt = skewed(tree, 300, seed)
        for run in range(8):
            rec = Recorder()
            out = inftda(tree, ids, cnt, ZCDP(0.2), neighbouring=nb, rng=rng(100 * seed + run),
                         noise_hook=rec)
            truth = dense_levels(tree, ids, cnt)
            rel = released_dense(tree, out)
            err = [r - t for r, t in zip(rel, truth)]
            eta = [np.zeros(tree.level_sizes[k], np.int64) for k in range(tree.depth + 1)]
            for level, child, parent, noise in rec.calls:
                if level:
                    np.maximum.at(eta[level - 1], parent, np.abs(noise))
            if nb == "add_remove":
                assert abs(err[0][0]) <= abs(rec.calls[0][3][0])
            else:
                assert err[0][0] == 0
            cum = np.abs(err[0])
            for k in range(1, tree.depth + 1):
                par = tree.parent(k, np.arange(tree.level_sizes[k]))
                assert np.all(np.abs(err[k]) <= np.abs(err[k - 1][par]) + 2 * eta[k - 1][par])
                cum = cum[par] + 2 * eta[k - 1][par]
                assert np.all(np.abs(err[k]) <= cum)


def test_pruned_subtree_is_never_noised():
    tree = cat_tree(3, 4, 5)
    ids, cnt = skewed(tree, 600, 2)

    def kill_first(level, child, parent, noise):
        if level == 1:
            out = noise.copy()
            out[child == 0] = -10**6
            return out
        return None
    rec = Recorder(kill_first)
    out = inftda(tree, ids, cnt, ZCDP(1), neighbouring="substitute", rng=rng(0), noise_hook=rec)
    assert 0 not in out.levels[1].ids
    for level, child, parent, noise in rec.calls:
        if level >= 2:
            assert not np.any(tree.ancestor(level, child, 1) == 0)
    for k in (2, 3):
        assert not np.any(tree.ancestor(k, out.levels[k].ids, 1) == 0)


def test_noise_on_every_child_including_zero_cells():
    tree = cat_tree(4, 6)
    rec = Recorder()
    out = inftda(tree, np.array([0]), np.array([100]), ZCDP(10**6), neighbouring="substitute",
                 rng=rng(0), noise_hook=rec)
    lvl2 = [c for lv, c, _, _ in rec.calls if lv == 2]
    assert rec.calls[0][1].tolist() == [0, 1, 2, 3]      # all 4 children of the root
    assert np.concatenate(lvl2).tolist() == list(range(6))  # all 6 children of node 0
    assert out.draws == 10


def test_chunked_levels_keep_invariants():
    tree = cat_tree(5, 5, 5)
    ids, cnt = skewed(tree, 2000, 6)
    out = topdown(tree, ids, cnt, ZCDP(0.5), neighbouring="substitute", max_rows=1,
                  level_weights=None, rng=rng(0), root_weight=None, noise_hook=None,
                  project=intopt_segmented, mechanism="inftda", chunk_size=7)
    check_structure(tree, out, 2000)
    assert out.info["noise_hook_used"] is False
    ex = topdown(tree, ids, cnt, ZCDP(1), neighbouring="substitute", max_rows=1,
                 level_weights=None, rng=rng(0), root_weight=None, noise_hook=zero_noise,
                 project=intopt_segmented, mechanism="inftda", chunk_size=3)
    assert np.array_equal(ex.leaves.ids, ids) and np.array_equal(ex.leaves.counts, cnt)
    assert ex.info["noise_hook_used"] is True


# ---------------------------------------------------------------- privacy plumbing

@pytest.mark.parametrize("m", [1, 3])
def test_sensitivity_and_sigma_substitute(m):
    tree = cat_tree(3, 3, 3)
    out = inftda(tree, np.array([0]), np.array([5]), ZCDP(Fraction(1, 2)),
                 neighbouring="substitute", max_rows=m, rng=rng(0))
    assert out.sensitivity["l2_per_level"] == pytest.approx(math.sqrt(2) * m)
    assert "l2_root" not in out.sensitivity
    # σ² = Δ²/(2ρ_k) = 2m²/(2·ρ/d) = d·m²/ρ
    assert out.info["sigma2_levels"] == [pytest.approx(3 * m * m / 0.5)] * 3
    assert sum(Fraction(r) for r in out.info["rho_levels"]) == Fraction(1, 2)
    assert out.loss == ZCDP(Fraction(1, 2))


@pytest.mark.parametrize("m", [1, 2])
def test_sensitivity_and_sigma_add_remove(m):
    tree = cat_tree(3, 3)
    out = inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="add_remove",
                 max_rows=m, rng=rng(0))
    assert out.sensitivity == {"l2_per_level": pytest.approx(m), "l2_root": pytest.approx(m)}
    # ρ/(d+1) per share, σ² = m²/(2ρ_k)
    assert out.info["sigma2_levels"] == [pytest.approx(m * m * 3 / 2)] * 2
    assert out.info["sigma2_root"] == pytest.approx(m * m * 3 / 2)
    total = Fraction(out.info["rho_root"]) + sum(Fraction(r) for r in out.info["rho_levels"])
    assert total == 1


def test_level_weights_and_root_weight():
    tree = cat_tree(2, 2, 2)
    out = inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="add_remove",
                 level_weights=[1, 2, 3], root_weight=2, rng=rng(0))
    assert [Fraction(r) for r in out.info["rho_levels"]] == [Fraction(1, 8), Fraction(2, 8),
                                                             Fraction(3, 8)]
    assert Fraction(out.info["rho_root"]) == Fraction(2, 8)
    with pytest.raises(InvalidPrivacyParameterError, match="needs 3 weights"):
        inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="substitute",
               level_weights=[1, 2], rng=rng(0))
    with pytest.raises(InvalidPrivacyParameterError, match="root_weight"):
        inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="substitute",
               root_weight=1, rng=rng(0))


def test_sigma_is_never_below_exact():
    tree = cat_tree(3, 3, 3)
    out = inftda(tree, np.array([0]), np.array([5]), ZCDP(Fraction(1, 7)),
                 neighbouring="substitute", rng=rng(0))
    for s in out.info["sigma2_levels"]:
        assert Fraction(s) >= Fraction(21)


def test_budget_kinds():
    tree = cat_tree(2, 2)
    approx = ApproxDP(1, Fraction(1, 10**8))
    out = inftda(tree, np.array([0]), np.array([5]), approx, neighbouring="substitute",
                 rng=rng(0))
    assert out.loss == approx.to_zcdp()
    # the classic inverse (inftda §2.1) is a lower bound on the tight one; ≈ 0.0132 at ε=1
    assert float(out.loss.rho) >= 0.0132154
    with pytest.raises(InvalidPrivacyParameterError, match="pure DP"):
        inftda(tree, np.array([0]), np.array([5]), PureDP(1), neighbouring="substitute",
               rng=rng(0))
    with pytest.raises(InvalidPrivacyParameterError, match="max_rows"):
        inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="substitute",
               max_rows=0, rng=rng(0))
    with pytest.raises(InvalidPrivacyParameterError, match="neighbouring"):
        inftda(tree, np.array([0]), np.array([5]), ZCDP(1), neighbouring="bounded", rng=rng(0))


def test_bad_data():
    tree = cat_tree(2, 2)
    with pytest.raises(DataError, match=">= 0"):
        inftda(tree, np.array([0]), np.array([-1]), ZCDP(1), neighbouring="substitute", rng=rng(0))
    with pytest.raises(DataError, match="outside"):
        inftda(tree, np.array([4]), np.array([1]), ZCDP(1), neighbouring="substitute", rng=rng(0))
    with pytest.raises(DataError, match="whole"):
        inftda(tree, np.array([0]), np.array([1.5]), ZCDP(1), neighbouring="substitute", rng=rng(0))


def test_seeded_runs_are_deterministic():
    tree = cat_tree(3, 4, 5)
    ids, cnt = skewed(tree, 500, 0)
    a = inftda(tree, ids, cnt, ZCDP(0.1), neighbouring="substitute", rng=rng(9))
    b = inftda(tree, ids, cnt, ZCDP(0.1), neighbouring="substitute", rng=rng(9))
    assert np.array_equal(a.leaves.ids, b.leaves.ids)
    assert np.array_equal(a.leaves.counts, b.leaves.counts)


# ---------------------------------------------------------------- error model

def test_error_model_theorem1_formula_and_round_trip():
    tree = cat_tree(3, 4, 2, 5)
    out = inftda(tree, np.array([0]), np.array([5]), ZCDP(0.5), neighbouring="substitute",
                 rng=rng(0))
    em = out.error_model
    d, rho, beta = 4, 0.5, 0.1
    sizes = [3, 12, 24, 120]
    for k in range(1, 5):
        thm = sum(math.sqrt(8 * d / rho * math.log(2 * k * sizes[l] / beta)) for l in range(k))
        assert em.node_bound(k, beta) == pytest.approx(thm, rel=1e-12)
    assert em.sum_variance(2, np.array([0])) is None
    back = load(em.to_params())
    assert isinstance(back, InfTDAErrorModel) and back.to_params() == em.to_params()
    import json
    assert json.loads(json.dumps(em.to_params())) == em.to_params()
    summary = em.level_summary()
    assert [s["level"] for s in summary] == [1, 2, 3, 4]
    assert summary[0]["bound95"] == pytest.approx(em.node_bound(1, 0.05))
    # sums: m × per-node, or (|V_k| − m) × per-node via the exact total
    b3 = em.node_bound(3, beta)
    assert em.sum_bound(3, np.array([1, 2, 2]), beta) == pytest.approx(2 * b3)
    assert em.sum_bound(3, np.arange(24), beta) == 0.0
    assert em.sum_bound(3, np.arange(20), beta) == pytest.approx(4 * b3)
    assert em.sum_bound(3, np.array([], dtype=np.int64), beta) == 0.0


def test_error_model_unbounded_root_term():
    em = InfTDAErrorModel([2.0, 2.0], [1, 3, 9], root_sigma2=4.0)
    beta = 0.05
    root = math.sqrt(2 * 4.0 * math.log(2 * 3 / beta))
    lv = sum(2 * math.sqrt(2 * 2.0 * math.log(2 * 3 * s / beta)) for s in (3, 9))
    assert em.node_bound(2, beta) == pytest.approx(root + lv)
    assert em.sum_bound(2, np.arange(9), beta) == pytest.approx(root)
    with pytest.raises(InvalidPrivacyParameterError):
        em.node_bound(2, 1.5)


# ---------------------------------------------------------------- statistical

@pytest.mark.statistical
def test_theorem1_violation_rate_and_noise_calibration():
    """inftda §6.11–13: over R runs the level-k max error (over all prefixes) exceeds the
    two-sided Theorem 1 bound in at most β·R + 5 SE runs (in practice none); the raw noise
    has mean ≈ 0 and variance ≈ d/ρ; the mean error grows with depth."""
    tree = cat_tree(3, 4, 2, 5)
    ids, cnt = skewed(tree, 400, 0)
    truth = dense_levels(tree, ids, cnt)
    runs, beta, rho = 300, 0.1, 0.5
    violations = np.zeros(5, int)
    max_err = np.zeros((runs, 5))
    noise_all = []

    def grab(level, child, parent, noise):
        noise_all.append(noise.copy())
    em = None
    for r in range(runs):
        out = inftda(tree, ids, cnt, ZCDP(rho), neighbouring="substitute", rng=rng(10_000 + r),
                     noise_hook=grab)
        em = out.error_model
        rel = released_dense(tree, out)
        for k in range(1, 5):
            e = np.abs(rel[k] - truth[k]).max()
            max_err[r, k] = e
            violations[k] += e > em.node_bound(k, beta)
    tol = beta * runs + 5 * math.sqrt(runs * beta * (1 - beta))
    assert np.all(violations <= tol)
    assert violations.sum() == 0  # the bound is ~10x loose (digest sanity run)
    z = np.concatenate(noise_all).astype(float)
    s2 = 4 / rho
    assert abs(z.mean()) < 5 * math.sqrt(s2 / z.size)
    assert abs(z.var() - s2) < 5 * s2 * math.sqrt(2 / z.size)
    means = max_err[:, 1:].mean(axis=0)
    assert means[0] < means[-1]  # zoom-in: level 1 is more accurate than the leaves


@pytest.mark.statistical
def test_error_scales_like_inverse_sqrt_rho():
    """inftda §6.13: halving ρ multiplies the mean max error by ≈ √2 (on data with
    enough mass that clamping at 0 rarely binds)."""
    tree = cat_tree(4, 5, 6)
    ids, cnt = skewed(tree, 20_000, 5)
    truth = dense_levels(tree, ids, cnt)
    means = []
    for rho in (0.2, 0.1):
        errs = []
        for r in range(150):
            out = inftda(tree, ids, cnt, ZCDP(rho), neighbouring="substitute", rng=rng(r))
            rel = released_dense(tree, out)
            errs.append([np.abs(rel[k] - truth[k]).max() for k in (1, 3)])
        means.append(np.mean(errs, axis=0))
    ratio = means[1] / means[0]
    assert np.all((ratio > 1.2) & (ratio < 1.65)), ratio
    assert means[0][0] < means[0][1]  # and grows with depth
