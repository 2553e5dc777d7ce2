"""Tree least squares: the two-pass BLUE against a dense GLS solve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.errors import InvalidPrivacyParameterError
from dpsql.mechanisms.least_squares import sum_variance_upper_bound, tree_least_squares


def random_tree(rs: np.random.Generator, depth: int, max_fan: int):
    """Parents arrays of a random tree whose leaves are all at level ``depth``."""
    parents = []
    width = 1
    for _ in range(depth):
        fan = rs.integers(1, max_fan + 1, size=width)
        parents.append(np.repeat(np.arange(width), fan))
        width = int(fan.sum())
    return parents


def leaf_matrix(parents):
    """A[k]: (nodes at level k) x (leaves) indicator of the leaves under each node."""
    d = len(parents)
    n_leaves = len(parents[-1]) if d else 1
    mats = [None] * (d + 1)
    mats[d] = np.eye(n_leaves)
    for k in range(d, 0, -1):
        m = len(parents[k - 2]) if k >= 2 else 1
        up = np.zeros((m, mats[k].shape[0]))
        up[parents[k - 1], np.arange(mats[k].shape[0])] = 1.0
        mats[k - 1] = up @ mats[k]
    return mats


def dense_gls(parents, noisy, variances):
    """GLS over leaf unknowns: exact rows (var 0) as equality constraints, inf rows dropped."""
    mats = leaf_matrix(parents)
    rows, ys, vs = [], [], []
    for k, A in enumerate(mats):
        v = np.broadcast_to(np.asarray(variances[k], float), (A.shape[0],))
        rows.append(A)
        ys.append(np.asarray(noisy[k], float))
        vs.append(v)
    A = np.vstack(rows)
    y = np.concatenate(ys)
    v = np.concatenate(vs)
    exact = v == 0
    meas = np.isfinite(v) & ~exact
    n = A.shape[1]
    if exact.any():
        C, dvec = A[exact], y[exact]
        x0 = np.linalg.lstsq(C, dvec, rcond=None)[0]
        u, s, vt = np.linalg.svd(C)
        rank = int((s > 1e-9).sum())
        N = vt[rank:].T
    else:
        x0, N = np.zeros(n), np.eye(n)
    W = 1.0 / v[meas]
    Am = A[meas] @ N
    r = y[meas] - A[meas] @ x0
    M = Am.T @ (W[:, None] * Am)
    Minv = np.linalg.inv(M)
    t = Minv @ (Am.T @ (W * r))
    x = x0 + N @ t
    cov = N @ Minv @ N.T
    est = [A_k @ x for A_k in mats]
    var = [np.einsum("ij,jk,ik->i", A_k, cov, A_k) for A_k in mats]
    return est, var


def check_consistent(parents, est):
    for k, p in enumerate(parents, start=1):
        sums = np.bincount(p, weights=est[k], minlength=len(est[k - 1]))
        has = np.bincount(p, minlength=len(est[k - 1])) > 0  # childless nodes are leaves
        np.testing.assert_allclose(sums[has], est[k - 1][has], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_blue_matches_dense_gls(seed):
    rs = np.random.default_rng(seed)
    depth = int(rs.integers(1, 4))
    parents = random_tree(rs, depth, 4)
    sizes = [1] + [len(p) for p in parents]
    noisy = [rs.normal(10, 5, size=s) for s in sizes]
    # per-node variances; the root is exact in half the cases (substitution)
    variances = [rs.uniform(0.2, 5.0, size=s) for s in sizes]
    if seed % 2:
        variances[0] = 0.0
    est, var = tree_least_squares(parents, noisy, variances)
    dest, dvar = dense_gls(parents, noisy, variances)
    for k in range(depth + 1):
        np.testing.assert_allclose(est[k], dest[k], rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(var[k], dvar[k], rtol=1e-8, atol=1e-10)
    check_consistent(parents, est)


@pytest.mark.parametrize("seed", range(6))
def test_unmeasured_nodes_match_dense_gls(seed):
    """variance inf = not measured: the root (add/remove), and scattered inner nodes."""
    rs = np.random.default_rng(100 + seed)
    parents = random_tree(rs, 3, 3)
    sizes = [1] + [len(p) for p in parents]
    noisy = [rs.normal(10, 5, size=s) for s in sizes]
    variances = [np.full(s, 2.0) for s in sizes]
    variances[0][:] = np.inf
    for k in (1, 2):
        variances[k][rs.random(sizes[k]) < 0.4] = np.inf
    est, var = tree_least_squares(parents, noisy, variances)
    dest, dvar = dense_gls(parents, noisy, variances)
    for k in range(4):
        np.testing.assert_allclose(est[k], dest[k], rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(var[k], dvar[k], rtol=1e-8, atol=1e-10)


def test_unmeasured_leaf_is_identified_by_parent():
    parents = [np.array([0, 0])]
    est, var = tree_least_squares(parents, [[10.0], [4.0, np.nan]], [0.0, [1.0, np.inf]])
    np.testing.assert_allclose(est[1], [4.0, 6.0])
    np.testing.assert_allclose(var[1], [1.0, 1.0])
    assert var[0][0] == 0.0


def test_two_unidentified_siblings_share_residual():
    parents = [np.array([0, 0, 0])]
    est, var = tree_least_squares(parents, [[10.0], [4.0, 0.0, 0.0]], [0.0, [1.0, np.inf, np.inf]])
    np.testing.assert_allclose(est[1], [4.0, 3.0, 3.0])
    assert np.isinf(var[1][1:]).all() and var[1][0] == 1.0


def test_childless_inner_node_is_a_leaf():
    parents = [np.array([0, 0]), np.array([0, 0])]  # node 1 of level 1 has no children
    noisy = [[10.0], [6.0, 5.0], [3.0, 2.0]]
    est, var = tree_least_squares(parents, noisy, [1.0, 1.0, 1.0])
    check_consistent(parents, est)
    # dense check: unknowns are leaves (2 at level 2) and the childless node
    A = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]], float)
    y = np.array([10, 6, 5, 3, 2], float)
    x = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(est[1], [x[0] + x[1], x[2]], rtol=1e-10)
    cov = np.linalg.inv(A.T @ A)
    np.testing.assert_allclose(var[1][1], cov[2, 2], rtol=1e-10)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), depth=st.integers(1, 4), fan=st.integers(1, 6),
       exact_root=st.booleans())
def test_consistency_property(seed, depth, fan, exact_root):
    rs = np.random.default_rng(seed)
    parents = random_tree(rs, depth, fan)
    sizes = [1] + [len(p) for p in parents]
    noisy = [rs.normal(0, 100, size=s) for s in sizes]
    variances = [float(rs.uniform(0.1, 10)) for _ in sizes]
    if exact_root:
        variances[0] = 0.0
    est, var = tree_least_squares(parents, noisy, variances)
    check_consistent(parents, est)
    if exact_root:
        assert est[0][0] == noisy[0][0]
    for k in range(depth + 1):
        assert np.all(var[k] >= -1e-12)
        assert np.all(var[k] <= np.asarray(variances[k]) + 1e-9)  # never worse than raw


def test_blue_variance_below_raw_cover_bound():
    rs = np.random.default_rng(5)
    parents = random_tree(rs, 3, 4)
    sizes = [1] + [len(p) for p in parents]
    variances = [np.inf, 3.0, 2.0, 1.0]
    _, dvar = dense_gls(parents, [np.zeros(s) for s in sizes], variances)
    # the sum of all level-1 nodes is the root; raw cover bound = Σ level-1 variances
    assert dvar[0][0] <= sum_variance_upper_bound(np.full(sizes[1], 3.0)) + 1e-12


def test_input_validation():
    with pytest.raises(InvalidPrivacyParameterError, match="sorted"):
        tree_least_squares([np.array([1, 0])], [[1.0], [1.0, 1.0]], [1.0, 1.0])
    with pytest.raises(InvalidPrivacyParameterError, match="exactly one node"):
        tree_least_squares([np.array([0])], [[1.0, 2.0], [1.0]], [1.0, 1.0])
    with pytest.raises(InvalidPrivacyParameterError, match=">= 0"):
        tree_least_squares([np.array([0])], [[1.0], [1.0]], [1.0, -1.0])
    with pytest.raises(InvalidPrivacyParameterError, match="levels"):
        tree_least_squares([np.array([0])], [[1.0]], [1.0])
    with pytest.raises(InvalidPrivacyParameterError):
        sum_variance_upper_bound(np.array([-1.0]))
