"""Cascade Sampling: the oracles of reference/cascade_sampling.md §8 and the [derived]
extensions (m-ary, level variances, 2-D, streaming, general trees, padding)."""

from __future__ import annotations

import importlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpsql.accuracy import load
from dpsql.accuracy.cascade import (
    Cascade2DErrorModel,
    CascadeErrorModel,
    inverse_diagonal,
    optimal_relative_variance,
    split_variances,
    substitution_constant,
)
from dpsql.errors import DataError, InvalidPrivacyParameterError, ProgrammingError
from dpsql.mechanisms._cascade_common import calibrate_sigma, paper_sigma
from dpsql.mechanisms.cascade import (
    CascadeStream,
    cascade,
    cascade_2d,
    cascade_noise,
    cascade_transform,
    grid_constant,
    mahalanobis_sensitivity,
    normals_needed,
    tree_cascade_noise,
    tree_cascade_transform,
    tree_privacy_constant,
)
from dpsql.privacy import ApproxDP, PureDP, ZCDP, rng
from dpsql.privacy.calibrate import analytic_gaussian_delta, analytic_gaussian_sigma

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ helpers (tests only)

def c_recursive(k: int) -> np.ndarray:
    """C_k by Definition 3.1."""
    c = np.array([[1.0, -0.5], [-0.5, 1.0]])
    for i in range(1, k):
        j = -np.ones((2 ** i, 2 ** i)) / 2 ** (2 * i + 1)
        c = np.block([[c, j], [j, c]])
    return c


def mixing(m: int, variances, bins: int | None = None) -> list[np.ndarray]:
    """Per level, the matrix whose rows give each node's noise as a combination of the
    standard normals: AAᵀ is the exact covariance."""
    depth = len(variances) - 1
    k = m ** depth if bins is None else bins
    n = normals_needed(m, depth, k)
    return [a.T for a in cascade_transform(np.eye(n), m, np.asarray(variances, float), k)]


def dense_leaf_cov(m: int, variances, bins: int | None = None) -> np.ndarray:
    a = mixing(m, variances, bins)[-1]
    return a @ a.T


def pair_max(cinv: np.ndarray) -> float:
    d = np.diag(cinv)
    p = d[:, None] + d[None, :] - 2 * cinv
    np.fill_diagonal(p, -np.inf)
    return float(p.max())


def indicator(lo: int, hi: int, k: int) -> np.ndarray:
    w = np.zeros(k)
    w[lo:hi] = 1.0
    return w


def unit_model(m: int, depth: int, bins: int | None = None) -> CascadeErrorModel:
    return CascadeErrorModel(m, depth, m ** depth if bins is None else bins,
                             (1.0,) * (depth + 1))


# ------------------------------------------------------------------ C_k structure (§8.1-5)

@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_ck_structure_and_entrywise_formula(k):
    c = c_recursive(k)
    n = 2 ** k
    assert np.allclose(c, c.T)
    assert np.all(np.diag(c) == 1.0)
    off = c[~np.eye(n, dtype=bool)]
    assert np.all(off < 0)
    assert np.allclose(c.sum(axis=1), 2.0 ** -k, atol=1e-14)
    assert abs(c.sum() - 1.0) < 1e-12
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    assert np.allclose(unit_model(2, k).node_covariance(k, i, k, j), c, atol=1e-15)
    assert np.allclose(dense_leaf_cov(2, np.ones(k + 1)), c, atol=1e-13)
    eig = np.sort(np.linalg.eigvalsh(c))
    expect = np.sort(np.concatenate([[2.0 ** -k]] + [np.full(2 ** d, 3 * 2.0 ** -(k - d))
                                                     for d in range(k)]))
    assert np.allclose(eig, expect, atol=1e-12)
    assert np.allclose(np.diag(np.linalg.inv(c)), 1 + k / 3)
    assert math.isclose(inverse_diagonal(2, np.ones(k + 1)), 1 + k / 3)


def test_small_inverses():
    assert np.allclose(np.linalg.inv(c_recursive(1)), [[4 / 3, 2 / 3], [2 / 3, 4 / 3]])
    assert np.allclose(3 * np.linalg.inv(c_recursive(2)),
                       [[5, 3, 2, 2], [3, 5, 2, 2], [2, 2, 5, 3], [2, 2, 3, 5]])


def test_symbolic_cascade_inverse_is_scaled_haar():
    a = mixing(2, np.ones(4))[-1]  # 8 leaves x 8 normals, σ = 1
    ainv = np.linalg.inv(a)
    assert np.allclose(ainv[0], 1.0)  # the root normal is the sum of the leaves
    for row in ainv[1:]:  # the Y's are sibling contrasts / √3
        nz = np.abs(row) > 1e-9
        assert np.allclose(np.abs(row[nz]), 1 / math.sqrt(3))
        assert abs(row.sum()) < 1e-9


def test_node_covariance_closed_form_all_pairs_k3():
    levels = mixing(2, np.ones(4))
    model = unit_model(2, 3)
    for la in range(4):
        for lb in range(4):
            dense = levels[la] @ levels[lb].T
            ia, ib = np.meshgrid(np.arange(2 ** la), np.arange(2 ** lb), indexing="ij")
            assert np.allclose(model.node_covariance(la, ia, lb, ib), dense, atol=1e-14)
    # disjoint leaf sets never covary positively (Lemma B.4)
    c = c_recursive(3)
    g = np.random.default_rng(0)
    for _ in range(50):
        lab = g.integers(0, 3, 8)
        assert (lab == 1) @ c @ (lab == 2) <= 1e-15


def test_every_node_has_variance_sigma2_and_children_sum():
    levels = mixing(2, np.full(6, 4.0))
    for lvl in levels:
        assert np.allclose(np.sum(lvl ** 2, axis=1), 4.0)
    for up, down in zip(levels[:-1], levels[1:]):
        assert np.allclose(down[0::2] + down[1::2], up, atol=1e-12)


# ------------------------------------------------------------------ range-variance oracles (§4)

@pytest.mark.parametrize("k,vmax,arg,vmean,pmax", [
    (2, 1.75, (1, 2), 1.175, 1.5), (3, 2.4375, (1, 6), 1.4792, 1.75),
    (4, 3.1094, (3, 12), 1.8695, 2.125), (5, 3.7773, (5, 26), 2.3111, 2.4375),
    (10, 7.1111, (171, 852), 4.752, 4.1113)])
def test_range_variance_oracles(k, vmax, arg, vmean, pmax):
    n = 2 ** k
    lo, hi = np.triu_indices(n + 1, 1)
    rv = unit_model(2, k).range_variance(lo, hi)
    assert abs(rv.max() - vmax) < 1e-4
    assert (lo[rv.argmax()], hi[rv.argmax()] - 1) == arg
    assert abs(rv.mean() - vmean) < 1e-3
    assert abs(rv[lo == 0].max() - pmax) < 1e-4
    assert rv.max() <= 2 * k - 2 + 1e-12
    if k == 3:
        c = c_recursive(3)
        brute = np.array([indicator(a, b, n) @ c @ indicator(a, b, n) for a, b in zip(lo, hi)])
        assert np.allclose(rv, brute, atol=1e-13)


def test_nodal_total_squared_error_and_mse_vs_iid():
    model = CascadeErrorModel(2, 10, 1024, (136.24 ** 2,) * 11)
    total = sum(model.node_variance(d).sum() for d in range(11))
    assert math.isclose(total, (2 * 1024 - 1) * 136.24 ** 2, rel_tol=1e-12)
    lo, hi = np.triu_indices(1025, 1)
    ours = model.range_variance(lo, hi).mean()
    iid = ((hi - lo) * 65.45 ** 2).mean()
    assert math.isclose(iid / 65.45 ** 2, 1026 / 3, rel_tol=1e-9)
    assert ours < iid / 15  # ≈ 8.8e4 against 1.47e6


def test_empty_and_invalid_ranges():
    model = unit_model(2, 3, 6)
    assert model.range_variance(np.array([2]), np.array([2]))[0] == 0.0
    for lo, hi in [(-1, 2), (3, 2), (0, 7)]:
        with pytest.raises(ProgrammingError):
            model.range_variance(np.array([lo]), np.array([hi]))
    with pytest.raises(ProgrammingError):
        model.range_variance(np.array([0.5]), np.array([2.0]))


def feasible_shape(draw, m, depth):
    v = [draw(st.floats(0.2, 5.0))]
    for _ in range(depth):
        v.append(v[-1] / (m * m) + draw(st.floats(0.05, 3.0)))
    return np.array(v)


@st.composite
def trees(draw):
    m = draw(st.sampled_from([2, 2, 3, 4]))
    depth = draw(st.integers(0, 4 if m == 2 else 3))
    n = m ** depth
    bins = draw(st.integers(max(1, n // m + 1) if depth else 1, n))
    return m, depth, bins, feasible_shape(draw, m, depth)


@settings(max_examples=40, deadline=None)
@given(trees(), st.data())
def test_range_and_set_variance_equal_brute_force(tree, data):
    m, depth, bins, v = tree
    c = dense_leaf_cov(m, v, bins)
    model = CascadeErrorModel(m, depth, bins, tuple(v))
    lo, hi = np.triu_indices(bins + 1, 1)
    w = (np.arange(bins) >= lo[:, None]) & (np.arange(bins) < hi[:, None])
    brute = np.einsum("ri,ij,rj->r", w, c, w)
    assert np.allclose(model.range_variance(lo, hi), brute, rtol=1e-10, atol=1e-12)
    for level in range(depth + 1):
        s, size = m ** (depth - level), model.level_size(level)
        ids = np.array(sorted(data.draw(st.sets(st.integers(0, size - 1), max_size=size))),
                       dtype=np.int64)
        wv = np.zeros(bins)
        for j in ids:
            wv[j * s:min((j + 1) * s, bins)] = 1.0
        got = model.sum_variance(level, ids)
        assert got.exact and math.isclose(got.value, wv @ c @ wv, rel_tol=1e-10, abs_tol=1e-12)
        nv = model.node_variance(level)
        for j in range(size):
            wj = indicator(j * s, min((j + 1) * s, bins), bins)
            assert math.isclose(nv[j], wj @ c @ wj, rel_tol=1e-10)


# ------------------------------------------------------------------ privacy constants

@pytest.mark.parametrize("m,depth", [(2, 1), (2, 3), (2, 5), (3, 2), (4, 2), (5, 2)])
def test_mary_constants_equal_dense_inverse(m, depth):
    cinv = np.linalg.inv(dense_leaf_cov(m, np.ones(depth + 1)))
    a = (m - 1) / (m + 1)
    assert np.allclose(np.diag(cinv), 1 + depth * a)
    assert math.isclose(inverse_diagonal(m, np.ones(depth + 1)), 1 + depth * a)
    closed = 2 * (1 + depth * a) - 2 * m / (m + 1)
    assert math.isclose(substitution_constant(m, np.ones(depth + 1)), closed)
    assert math.isclose(pair_max(cinv), closed, rel_tol=1e-9)


def test_level_variance_constants():
    v = np.array([9.0, 4.0, 2.0, 1.5, 1.0])
    assert abs(inverse_diagonal(2, v) - 1.15397) < 1e-5
    cinv = np.linalg.inv(dense_leaf_cov(2, v))
    assert np.allclose(np.diag(cinv), inverse_diagonal(2, v))
    assert math.isclose(pair_max(cinv), substitution_constant(2, v), rel_tol=1e-9)
    levels = mixing(2, v)
    for d, lvl in enumerate(levels):
        assert np.allclose(np.sum(lvl ** 2, axis=1), v[d])
    v3 = np.array([2.0, 1.0, 0.5])
    cinv3 = np.linalg.inv(dense_leaf_cov(3, v3))
    assert np.allclose(np.diag(cinv3), inverse_diagonal(3, v3))
    assert math.isclose(pair_max(cinv3), substitution_constant(3, v3), rel_tol=1e-9)
    with pytest.raises(InvalidPrivacyParameterError):
        split_variances(2, [4.0, 1.0])  # needs v1 > v0/4
    with pytest.raises(InvalidPrivacyParameterError):
        split_variances(2, [1.0, -1.0])


@pytest.mark.parametrize("m,depth,bins", [(2, 3, 5), (2, 4, 11), (3, 2, 7), (4, 2, 13)])
def test_padding_constants_are_conservative(m, depth, bins):
    """The released K-marginal has a smaller Mahalanobis constant than the full tree's
    (Schur complement), so calibrating with the full tree is valid."""
    cinv = np.linalg.inv(dense_leaf_cov(m, np.ones(depth + 1), bins))
    assert np.diag(cinv).max() <= inverse_diagonal(m, np.ones(depth + 1)) + 1e-12
    assert pair_max(cinv) <= substitution_constant(m, np.ones(depth + 1)) + 1e-12


def test_sensitivity_scales_with_max_rows_and_neighbouring():
    one = mahalanobis_sensitivity(2, np.ones(11), neighbouring="add_remove")
    assert math.isclose(one, math.sqrt(1 + 10 / 3))
    assert math.isclose(mahalanobis_sensitivity(2, np.ones(11), neighbouring="add_remove",
                                                max_rows=3), 3 * one)
    sub = mahalanobis_sensitivity(2, np.ones(11), neighbouring="substitute", max_rows=2)
    assert math.isclose(sub, 2 * math.sqrt(2 * (1 + 10 / 3) - 4 / 3))
    with pytest.raises(InvalidPrivacyParameterError):
        mahalanobis_sensitivity(2, np.ones(3), neighbouring="add_remove", max_rows=0)


def test_add_remove_worst_case_over_contribution_vectors():
    """A unit with m rows spread over several cells never beats m·e_i (convexity)."""
    m = 3
    cinv = np.linalg.inv(dense_leaf_cov(2, np.ones(4)))
    worst = m * m * inverse_diagonal(2, np.ones(4))
    g = np.random.default_rng(1)
    for _ in range(300):
        v = np.bincount(g.integers(0, 8, m), minlength=8).astype(float)
        assert v @ cinv @ v <= worst + 1e-9
        b = np.bincount(g.integers(0, 8, m), minlength=8).astype(float)
        assert (v - b) @ cinv @ (v - b) <= m * m * substitution_constant(2, np.ones(4)) + 1e-9


# ------------------------------------------------------------------ calibration

@pytest.mark.parametrize("k,paper,analytic", [(4, 99.97, 76.70), (10, 136.24, 104.52),
                                              (15, 160.31, 122.99), (25, 199.94, 153.39)])
def test_sigma_table(k, paper, analytic):
    delta_c = math.sqrt(1 + k / 3)
    assert abs(paper_sigma(0.1, 1e-9, delta_c) - paper) < 0.01
    assert abs(analytic_gaussian_sigma(delta_c, 0.1, 1e-9) - analytic) < 0.01


def test_paper_calibration_is_conservative_and_bounded():
    delta_c = math.sqrt(1 + 10 / 3)
    s = paper_sigma(0.1, 1e-9, delta_c)
    achieved = analytic_gaussian_delta(delta_c, s, 0.1)
    assert achieved <= 1e-9 and abs(achieved - 7.0e-14) < 0.1e-14
    for e, d in [(1.5, 1e-6), (0.5, 0.6), (0.0, 1e-6)]:
        with pytest.raises(InvalidPrivacyParameterError):
            paper_sigma(e, d)
    with pytest.raises(InvalidPrivacyParameterError):
        calibrate_sigma(1.0, ApproxDP(2, 1e-6), "paper")
    with pytest.raises(InvalidPrivacyParameterError):
        calibrate_sigma(1.0, ZCDP(1), "paper")
    with pytest.raises(InvalidPrivacyParameterError):
        calibrate_sigma(1.0, PureDP(1))
    with pytest.raises(InvalidPrivacyParameterError):
        calibrate_sigma(1.0, ZCDP(1), "loose")


def test_release_spends_exactly_its_budget():
    hist = np.arange(1000, dtype=np.int64)
    t = cascade(hist, ZCDP("0.3"), neighbouring="substitute", max_rows=2, rng=rng(4))
    delta_c = t.sensitivity["mahalanobis_l2"]
    assert math.isclose(delta_c ** 2 / (2 * t.info["sigma"] ** 2), 0.3, rel_tol=1e-12)
    assert math.isclose(delta_c ** 2, 4 * (2 * (1 + 10 / 3) - 4 / 3))
    a = cascade(hist, ApproxDP("0.5", "1e-8"), neighbouring="add_remove", rng=rng(4))
    assert analytic_gaussian_delta(a.sensitivity["mahalanobis_l2"], a.info["sigma"],
                                   0.5) <= 1e-8
    p = cascade(np.arange(1024), ApproxDP("0.1", "1e-9"), neighbouring="add_remove",
                rng=rng(4), calibration="paper")
    assert abs(p.info["sigma"] - 136.24) < 0.01


def test_privacy_loss_variable_moments():
    """§8.12: L = sᵀC⁻¹e_i/σ² + w/2 has mean w/2 and variance w, w = C⁻¹_ii/σ²."""
    sigma, k = 2.0, 3
    c = c_recursive(k)
    cinv = np.linalg.inv(c)
    z = np.random.default_rng(5).standard_normal((200_000, 8))
    s = sigma * z @ np.linalg.cholesky(c).T
    w = cinv[2, 2] / sigma ** 2
    loss = s @ cinv[:, 2] / sigma ** 2 + w / 2
    se = math.sqrt(w / loss.size)
    assert abs(loss.mean() - w / 2) < 5 * se
    assert abs(loss.var() - w) < 5 * w * math.sqrt(2 / loss.size)


# ------------------------------------------------------------------ the release

@pytest.mark.parametrize("m,k", [(2, 1), (2, 8), (2, 10), (2, 13), (3, 10), (4, 64), (16, 300)])
def test_release_conventions(m, k):
    g = np.random.default_rng(k)
    hist = g.integers(0, 10_000, k)
    t = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(1), arity=m)
    depth = t.depth
    assert m ** depth >= k and (depth == 0 or m ** (depth - 1) < k)
    assert t.bin_spans == tuple(m ** (depth - d) for d in range(depth + 1))
    assert t.mechanism == "cascade" and t.draws == normals_needed(m, depth, k)
    for d, lvl in enumerate(t.levels):
        size = -(-k // t.bin_spans[d])
        assert lvl.ids.dtype == np.int64 and np.array_equal(lvl.ids, np.arange(size))
        assert lvl.counts.dtype == np.float64 and lvl.variance.shape == (size,)
        assert np.allclose(lvl.variance, t.error_model.node_variance(d))
    leaves = t.leaves.counts
    assert leaves.size == k
    for d in range(depth):
        s = t.bin_spans[d]
        pad = np.concatenate([leaves, np.zeros((-k) % s)])
        sums = pad.reshape(-1, s).sum(axis=1)
        scale = np.maximum(np.abs(sums), 1.0)
        assert np.all(np.abs(t.levels[d].counts - sums) <= 1e-9 * scale)
    full = t.levels[depth - 1].counts if depth else None
    if depth:
        assert np.allclose(full[: k // m], leaves[: k // m * m].reshape(-1, m).sum(axis=1),
                           rtol=1e-12)
    assert load(t.error_model.to_params()) == t.error_model


def test_padding_straddling_node_holds_released_sum():
    hist = np.full(5, 100, dtype=np.int64)
    t = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(2))
    assert [lvl.counts.size for lvl in t.levels] == [1, 2, 3, 5]
    assert math.isclose(t.levels[1].counts[1], t.leaves.counts[4])
    assert math.isclose(t.levels[2].counts[2], t.leaves.counts[4])
    s2 = t.info["sigma"] ** 2
    assert math.isclose(t.levels[1].variance[1], s2)  # [4,5) is a full leaf
    c = s2 * dense_leaf_cov(2, np.ones(4), 5)
    assert math.isclose(t.levels[0].variance[0], c.sum(), rel_tol=1e-12)


def test_seeded_release_is_reproducible_and_relative_variance():
    hist = np.arange(16)
    a = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(9),
                relative_variance=[4, 2, 1.5, 1, 1])
    b = cascade(hist, ZCDP(1), neighbouring="add_remove", rng=rng(9),
                relative_variance=[4, 2, 1.5, 1, 1])
    assert np.array_equal(a.leaves.counts, b.leaves.counts)
    v = np.array(a.error_model.level_variance)
    assert np.allclose(v / v[-1], [4, 2, 1.5, 1, 1])
    rho = a.sensitivity["mahalanobis_l2"] ** 2 / (2 * a.info["sigma"] ** 2)
    assert math.isclose(rho, 1.0, rel_tol=1e-12)
    assert math.isclose(inverse_diagonal(2, v) / 2, 1.0, rel_tol=1e-12)  # rho = diag/2


@pytest.mark.parametrize("bad,err", [
    (np.array([1, -1]), DataError), (np.array([1.0, 2.0]), DataError),
    (np.zeros((2, 2), dtype=int), DataError), (np.array([], dtype=int), DataError)])
def test_bad_histograms(bad, err):
    with pytest.raises(err):
        cascade(bad, ZCDP(1), neighbouring="add_remove", rng=rng(0))


def test_bad_arguments():
    h = np.arange(4)
    with pytest.raises(InvalidPrivacyParameterError):
        cascade(h, ZCDP(1), neighbouring="add_remove", rng=rng(0), arity=1)
    with pytest.raises(InvalidPrivacyParameterError):
        cascade(h, ZCDP(1), neighbouring="both", rng=rng(0))
    with pytest.raises(InvalidPrivacyParameterError):
        cascade(h, ZCDP(1), neighbouring="add_remove", rng=rng(0), relative_variance=[1, 1])
    with pytest.raises(InvalidPrivacyParameterError):
        cascade(h, ZCDP(1), neighbouring="add_remove", rng=rng(0),
                relative_variance=[16, 1, 1])
    with pytest.raises(InvalidPrivacyParameterError):
        cascade(h, PureDP(1), neighbouring="add_remove", rng=rng(0))


def test_error_model_contract():
    model = CascadeErrorModel(3, 3, 20, (4.0, 3.0, 2.0, 1.0))
    assert load(model.to_params()) == model and model.depth == 3
    rows = model.level_summary()
    assert [r["level"] for r in rows] == [1, 2, 3]
    assert math.isclose(rows[2]["stderr"], 1.0) and math.isclose(rows[2]["bound95"], 1.959964,
                                                                  rel_tol=1e-6)
    assert model.sum_variance(3, np.array([], dtype=int)).value == 0.0
    with pytest.raises(ProgrammingError):
        model.sum_variance(3, np.array([20]))
    with pytest.raises(ProgrammingError):
        model.sum_variance(4, np.array([0]))
    v = model.sum_variance(2, np.array([0, 6]))
    assert math.isclose(model.sum_bound(2, np.array([0, 6]), 0.05), 1.959964 * v.stderr,
                        rel_tol=1e-6)


def test_range_design_and_optimal_shape():
    lo, hi = np.triu_indices(65, 1)
    model = CascadeErrorModel(2, 6, 64, (3.0, 2.0, 1.5, 1.2, 1.1, 1.0, 0.9))
    x = model.range_design(lo, hi)
    theta = np.concatenate([[3.0], split_variances(2, model.level_variance)])
    assert np.allclose(x @ theta, model.range_variance(lo, hi), rtol=1e-12)
    for sel in (hi - lo >= 1, hi - lo > 8):
        shape = optimal_relative_variance(2, 64, lo[sel], hi[sel])
        assert shape.size == 7 and shape[-1] == 1.0

        def mean_var(v):
            v = np.asarray(v, float) * inverse_diagonal(2, v)  # privacy constant 1
            return CascadeErrorModel(2, 6, 64, tuple(v)).range_variance(lo[sel], hi[sel]).mean()

        best = mean_var(shape)
        assert best < mean_var(np.ones(7))
        g = np.random.default_rng(0)
        for _ in range(30):  # a local optimum: random feasible perturbations do no better
            tau = split_variances(2, shape) * np.exp(0.05 * g.standard_normal(6))
            v = [shape[0] * math.exp(0.05 * g.standard_normal())]
            for t in tau:
                v.append(v[-1] / 4 + t / 2)
            assert mean_var(v) >= best * (1 - 1e-12)


def test_cascade_noise_levels():
    levels = cascade_noise(3, rng(1), arity=3, level_variance=2.0, bins=20)
    assert [x.size for x in levels] == [1, 3, 7, 20]
    for up, down in zip(levels[:-1], levels[1:]):
        pad = np.concatenate([down, np.zeros((-down.size) % 3)])
        assert np.allclose(pad.reshape(-1, 3).sum(axis=1)[: up.size - (down.size % 3 > 0)],
                           up[: up.size - (down.size % 3 > 0)])


# ------------------------------------------------------------------ statistical

@pytest.mark.statistical
def test_empirical_covariance_matches_sigma2_ck():
    r, k, sigma = 400_000, 4, 1.0
    z = rng(11).standard_normal((r, 16))
    x = cascade_transform(z, 2, np.full(k + 1, sigma ** 2))[-1]
    emp = x.T @ x / r
    assert np.abs(emp - c_recursive(k)).max() < 5 * math.sqrt(2 / r)
    assert np.abs(x.mean(axis=0)).max() < 5 * math.sqrt(1 / r)


@pytest.mark.statistical
def test_empirical_covariance_mary_and_level_variances():
    r = 200_000
    for m, v in [(3, np.array([1.0, 1.0, 1.0])), (2, np.array([9.0, 4.0, 2.0, 1.5]))]:
        z = rng(12).standard_normal((r, m ** (len(v) - 1)))
        x = cascade_transform(z, m, v)[-1]
        c = dense_leaf_cov(m, v)
        scale = np.sqrt(np.outer(np.diag(c), np.diag(c)))
        assert np.all(np.abs(x.T @ x / r - c) < 5 * math.sqrt(2 / r) * scale)


@pytest.mark.statistical
def test_unbiased_ranges_through_the_release():
    hist = np.random.default_rng(3).integers(0, 50, 12)
    reps, g = 3000, rng(13)
    lo, hi = np.triu_indices(13, 1)
    prefix = lambda a: np.concatenate([[0.0], np.cumsum(a)])  # noqa: E731
    truth = prefix(hist)[hi] - prefix(hist)[lo]
    acc = np.zeros(lo.size)
    sig2 = None
    for _ in range(reps):
        t = cascade(hist, ZCDP(2), neighbouring="add_remove", rng=g)
        p = prefix(t.leaves.counts)
        acc += p[hi] - p[lo] - truth
        sig2 = t.error_model
    se = np.sqrt(sig2.range_variance(lo, hi) / reps)
    assert np.all(np.abs(acc / reps) < 5 * se)


@pytest.mark.statistical
def test_node_marginals_ks_with_power_and_sibling_structure():
    r, sigma = 20_000, 3.0
    levels = cascade_transform(rng(14).standard_normal((r, 16)), 2, np.full(5, sigma ** 2))
    for lvl in (levels[0], levels[2], levels[4]):
        col = lvl[:, -1]
        assert stats.kstest(col, "norm", args=(0, sigma)).pvalue > 1e-6
        for wrong in (0.7, 1.3):
            assert stats.kstest(col, "norm", args=(0, wrong * sigma)).pvalue < 1e-6
    a, b, parent = levels[4][:, 0], levels[4][:, 1], levels[3][:, 0]
    se = 5 / math.sqrt(r)
    assert abs(np.corrcoef(a, b)[0, 1] + 0.5) < 2 * se
    assert abs(np.corrcoef(a - b, parent)[0, 1]) < se
    assert abs(np.var(a - b) / (3 * sigma ** 2) - 1) < 5 * math.sqrt(2 / r)


def _audited_rho(reps: int, neighbouring: str, seed: int, covariance: str) -> float:
    """Black-box audit: estimate the output covariance Σ̂ from ``reps`` releases of one
    histogram, then the zCDP cost max over neighbours v of vᵀΣ̂⁻¹v/2 of Gaussian noise
    with that covariance (substitution: pairs, and single cells, whichever is worse)."""
    hist, rows, g = np.arange(8) * 3, 2, rng(seed)
    out = np.array([cascade(hist, ZCDP("0.5"), neighbouring=neighbouring, max_rows=rows,
                            rng=g, covariance=covariance).leaves.counts
                    for _ in range(reps)])
    cinv = np.linalg.inv(np.cov(out - hist, rowvar=False))
    worst = np.diag(cinv).max()
    if neighbouring == "substitute":
        worst = max(worst, pair_max(cinv))
    return rows * rows * worst / 2


@pytest.mark.statistical
@pytest.mark.parametrize("covariance,module,calibrated_by", [
    ("tree", "dpsql.mechanisms.cascade", "mahalanobis_sensitivity"),
    ("optimal", "dpsql.mechanisms.cascade_optimal", "optimal_sensitivity"),
])
def test_dp_audit_passes_and_catches_under_noising(monkeypatch, covariance, module,
                                                   calibrated_by):
    reps = 6000  # relative s.e. of the estimate ≈ √(2/reps) ≈ 1.8%: tolerance 10% > 5 s.e.
    for nb in ("add_remove", "substitute"):
        assert abs(_audited_rho(reps, nb, 21, covariance) / 0.5 - 1) < 0.10
    mod = importlib.import_module(module)
    real = getattr(mod, calibrated_by)
    monkeypatch.setattr(mod, calibrated_by,
                        lambda *a, **k: 0.7 * real(*a, **k))  # a deliberately broken build
    assert _audited_rho(reps, "add_remove", 22, covariance) / 0.5 > 1.5


# ------------------------------------------------------------------ 2-D grid (Algorithm 4)

class _BasisRng:
    """Stands in for a Generator: returns unit basis arrays so that the mechanism's
    output, linear in its normals, reveals its mixing matrix."""

    def __init__(self, index: int) -> None:
        self.index = index

    def standard_normal(self, shape):
        out = np.zeros(shape)
        out.flat[self.index] = 1.0
        return out


@pytest.mark.parametrize("shape", [(4, 8), (3, 5), (1, 4)])
def test_grid_covariance_is_kronecker(shape):
    h = np.zeros(shape, dtype=np.int64)
    probe = cascade_2d(h, ZCDP(1), neighbouring="add_remove", rng=rng(0))
    cols = [cascade_2d(h, ZCDP(1), neighbouring="add_remove", rng=_BasisRng(i)).counts.ravel()
            for i in range(probe.draws)]
    a = np.array(cols).T
    s2 = probe.error_model.sigma2
    d1, d2 = probe.error_model.tree_depths
    c1 = dense_leaf_cov(2, np.ones(d1 + 1), shape[0])
    c2 = dense_leaf_cov(2, np.ones(d2 + 1), shape[1])
    cov = a @ a.T
    assert np.allclose(cov, s2 * np.kron(c1, c2), atol=1e-12 * s2)
    model = probe.error_model
    k1, k2 = shape
    i = np.arange(k1 * k2)
    assert np.allclose(model.leaf_covariance(i[:, None] // k2, i[:, None] % k2,
                                             i[None] // k2, i[None] % k2), cov, atol=1e-12 * s2)
    g = np.random.default_rng(0)
    for _ in range(20):
        lo1, hi1 = np.sort(g.choice(k1 + 1, 2, replace=False))
        lo2, hi2 = np.sort(g.choice(k2 + 1, 2, replace=False))
        w = np.outer(indicator(lo1, hi1, k1), indicator(lo2, hi2, k2)).ravel()
        assert math.isclose(model.rect_variance(lo1, hi1, lo2, hi2), w @ cov @ w,
                            rel_tol=1e-10)
        ids = np.flatnonzero(g.random(k1 * k2) < 0.4)
        ws = np.isin(i, ids).astype(float)
        assert math.isclose(model.sum_variance(0, ids).value, ws @ cov @ ws,
                            rel_tol=1e-10, abs_tol=1e-12 * s2)
        ids = np.append(ids, 0)
        ws[0] = 1.0
        bound = model.sum_variance(0, ids, exact_limit=0)
        assert not bound.exact and bound.value >= ws @ cov @ ws - 1e-9
    assert load(model.to_params()) == model


def test_grid_dyadic_rectangles_and_consistency():
    model = Cascade2DErrorModel((2, 2), (3, 2), (8, 4), 2.5)
    for s1 in (1, 2, 4, 8):
        for s2 in (1, 2, 4):
            lo1 = np.arange(0, 8, s1)
            lo2 = np.arange(0, 4, s2)
            a, b = np.meshgrid(lo1, lo2, indexing="ij")
            assert np.allclose(model.rect_variance(a, a + s1, b, b + s2), 2.5)
    t = cascade_2d(np.ones((8, 4), dtype=np.int64) * 7, ZCDP(1), neighbouring="add_remove",
                   rng=rng(3))
    assert t.counts.shape == (8, 4) and t.counts.dtype == np.float64


@pytest.mark.parametrize("k1,k2", [(1, 2), (2, 2), (3, 1), (2, 3)])
def test_grid_privacy_constant(k1, k2):
    c = np.kron(c_recursive(k1), c_recursive(k2))
    cinv = np.linalg.inv(c)
    assert np.allclose(np.diag(cinv), (1 + k1 / 3) * (1 + k2 / 3))
    assert math.isclose(grid_constant((2, 2), (k1, k2), "add_remove"),
                        (1 + k1 / 3) * (1 + k2 / 3))
    assert math.isclose(grid_constant((2, 2), (k1, k2), "substitute"), pair_max(cinv),
                        rel_tol=1e-9)
    t = cascade_2d(np.zeros((2 ** k1, 2 ** k2), dtype=np.int64), ZCDP("0.5"),
                   neighbouring="substitute", max_rows=2, rng=rng(0))
    assert math.isclose(t.sensitivity["mahalanobis_l2"] ** 2 / (2 * t.info["sigma"] ** 2), 0.5)


# ------------------------------------------------------------------ streaming (Algorithm 2)

class _SymbolicStream(CascadeStream):
    def __init__(self, horizon: int) -> None:
        super().__init__(ZCDP(1), horizon=horizon, neighbouring="add_remove", rng=rng(0))
        self.sigma, self.used = 1.0, 0

    def _draw(self):
        e = np.zeros(64)
        e[self.used] = 1.0
        self.used += 1
        return e


def test_stream_law_equals_perfect_tree_at_every_length():
    s = _SymbolicStream(32)
    rows = [s._next_noise().copy() for _ in range(32)]
    a = np.array(rows)
    for t in (1, 2, 3, 5, 8, 13, 16, 32):
        k = max(1, math.ceil(math.log2(t)))
        assert np.allclose(a[:t] @ a[:t].T, c_recursive(5)[:t, :t], atol=1e-14)
        assert np.allclose(a[:t] @ a[:t].T, c_recursive(k)[:t, :t], atol=1e-14)
    assert s.used == 32  # one normal per leaf
    left, right = a[:8].sum(axis=0), a[8:16].sum(axis=0)
    assert math.isclose(left @ right, -0.5, abs_tol=1e-14)
    assert math.isclose((left + right) @ (left + right), 1.0)


def test_stream_is_append_only_and_bounded_by_horizon():
    s1 = CascadeStream(ZCDP(1), horizon=10, neighbouring="add_remove", rng=rng(5))
    out = s1.extend(np.arange(10))
    s2 = CascadeStream(ZCDP(1), horizon=10, neighbouring="add_remove", rng=rng(5))
    first = [s2.append(i) for i in range(4)]
    assert np.array_equal(out[:4], first) and len(s1) == 10
    with pytest.raises(InvalidPrivacyParameterError):
        s1.append(1)
    assert math.isclose(s1.sigma, math.sqrt(1 + 4 / 3) / math.sqrt(2))
    model = s1.error_model
    assert model.bins == 10 and model.depth == 4 and load(model.to_params()) == model
    with pytest.raises(DataError):
        s2.append(-1)
    with pytest.raises(InvalidPrivacyParameterError):
        CascadeStream(ZCDP(1), horizon=0, neighbouring="add_remove", rng=rng(5))


# ------------------------------------------------------------------ general trees (Algorithm 3)

def random_fanouts(g, depth, choices=(0, 1, 2)):
    fan = [np.array([2])]
    for _ in range(depth):
        fan.append(g.choice(choices, int(fan[-1].sum())))
    return fan


def tree_leaves(levels, fan):
    parts = [lvl[f == 0] for lvl, f in zip(levels, fan)] + [levels[-1]]
    return np.concatenate(parts, axis=0)


def test_general_tree_binary_constants_and_structure():
    g = np.random.default_rng(8)
    for _ in range(15):
        fan = random_fanouts(g, 4)
        n = 1 + sum(int(f.sum()) for f in fan)
        levels = tree_cascade_transform(np.eye(n), fan, 1.0)
        for lvl in levels:
            assert np.allclose(np.sum(lvl ** 2, axis=1), 1.0)
        for d, f in enumerate(fan):  # children sum to the parent; one child copies it
            parent = np.repeat(np.arange(f.size), f)
            sums = np.zeros_like(levels[d])
            np.add.at(sums, parent, levels[d + 1])
            assert np.allclose(sums[f > 0], levels[d][f > 0])
            only = np.flatnonzero(f == 1)
            pos = np.cumsum(f) - f
            assert np.allclose(levels[d + 1][pos[only]], levels[d][only])
        a = tree_leaves(levels, fan)
        cinv = np.linalg.inv(a @ a.T)
        # b_i: two-child ancestors of each leaf
        b = [np.zeros(1)]
        for f in fan:
            b.append(np.repeat(b[-1] + (f == 2), f))
        b_leaves = np.concatenate([bb[f == 0] for bb, f in zip(b, fan)] + [b[-1]])
        assert np.allclose(np.diag(cinv), 1 + b_leaves / 3)
        assert math.isclose(tree_privacy_constant(fan, "add_remove"), 1 + b_leaves.max() / 3)
        assert math.isclose(tree_privacy_constant(fan, "substitute"), pair_max(cinv),
                            rel_tol=1e-9)


def test_general_tree_mixed_fanouts():
    assert math.isclose(tree_privacy_constant([[3], [4, 4, 4]], "add_remove"), 2.1)
    assert math.isclose(tree_privacy_constant([[2], [5, 5], [3] * 10], "add_remove"), 2.5)
    g = np.random.default_rng(9)
    for _ in range(10):
        fan = random_fanouts(g, 3, (0, 1, 2, 3, 4))
        n = 1 + sum(int(f.sum()) for f in fan)
        a = tree_leaves(tree_cascade_transform(np.eye(n), fan, 1.0), fan)
        cinv = np.linalg.inv(a @ a.T)
        assert math.isclose(tree_privacy_constant(fan, "add_remove"), np.diag(cinv).max(),
                            rel_tol=1e-9)
        assert math.isclose(tree_privacy_constant(fan, "substitute"), pair_max(cinv),
                            rel_tol=1e-9)
    noise = tree_cascade_noise([[2], [2, 0]], 2.0, rng(1))
    assert [x.size for x in noise] == [1, 2, 2]
    assert math.isclose(noise[1][0], noise[2].sum())
    with pytest.raises(InvalidPrivacyParameterError):
        tree_cascade_noise([[2], [1]], 1.0, rng(1))


# ------------------------------------------------------------------ benchmark helpers

def test_uniform_range_sampler_chi_square():
    spec = importlib.util.spec_from_file_location("bench_cascade",
                                                  ROOT / "benchmarks" / "bench_cascade.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    n, draws = 6, 210_000
    lo, hi = bench.sample_ranges(n, draws, np.random.default_rng(2))
    assert np.all((0 <= lo) & (lo < hi) & (hi <= n))
    counts = np.bincount(lo * (n + 1) + hi, minlength=(n + 1) ** 2)
    cells = counts[np.ravel_multi_index(np.triu_indices(n + 1, 1), (n + 1, n + 1))]
    assert cells.size == n * (n + 1) // 2 and cells.sum() == draws
    assert stats.chisquare(cells).pvalue > 1e-6
