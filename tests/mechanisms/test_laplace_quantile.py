"""The Laplace-family interval (:mod:`dpsql.accuracy.laplace_sum`) against independent
computations: the exact pmf, Monte Carlo with fixed seeds, and the coefficients of the
least-squares map itself.

Monte Carlo tolerances are 5 binomial standard errors of the coverage at 200,000 draws
(at 0.95: 5·√(0.95·0.05/200,000) = 0.0024)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsql.accuracy.btree import BTreeErrorModel
from dpsql.accuracy.laplace_sum import (Cumulants, discrete_laplace_quantile, half_width,
                                        laplace_sum_quantile)
from dpsql.accuracy.multiset import model_bound, model_offsets
from dpsql.mechanisms.btree import discrete_laplace_variance
from dpsql.mechanisms.least_squares import tree_least_squares
from dpsql.mechanisms.tree_counts import laplace_tree
from dpsql.privacy import rng as make_rng
from dpsql.privacy.budgets import PureDP
from dpsql.privacy.samplers import discrete_laplace, discrete_laplace_pmf

DRAWS = 200_000
CONFS = (0.8, 0.9, 0.95, 0.99)


def _se(p: float, n: int = DRAWS) -> float:
    return math.sqrt(p * (1 - p) / n)


def test_one_laplace_is_closed_form():
    for c in CONFS:
        assert laplace_sum_quantile(1, c) == pytest.approx(math.log(1 / (1 - c)) / math.sqrt(2),
                                                           rel=1e-9)


@pytest.mark.statistical
@pytest.mark.parametrize("n", [2, 3, 5, 8, 30])
def test_sum_of_n_laplaces_against_monte_carlo(n):
    g = np.random.default_rng(100 + n)
    s = g.laplace(0.0, 1.0, size=(DRAWS, n)).sum(axis=1) / math.sqrt(2.0 * n)  # variance 1
    for c in CONFS:
        got = float(np.mean(np.abs(s) <= laplace_sum_quantile(n, c)))
        assert abs(got - c) <= 5 * _se(c), (n, c, got)


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0, 50.0, 1000.0])
def test_discrete_laplace_quantile_is_exact(scale):
    v = discrete_laplace_variance(scale)
    x = np.arange(0, int(60 * scale) + 60)
    pmf = discrete_laplace_pmf(scale, x)
    inside = pmf[0] + 2.0 * np.cumsum(pmf) - 2.0 * pmf[0]  # P(|L| <= k), k = 0, 1, …
    for c in CONFS + (0.5, 0.999):
        k = discrete_laplace_quantile(v, c)
        assert inside[int(k)] >= c - 1e-12, (scale, c, k)
        assert k == 0 or inside[int(k) - 1] < c, (scale, c, k)


def _btree_coefficients(m: BTreeErrorModel, level: int, ids: np.ndarray):
    """(c_j, v_j) of every raw measurement: the released sum of ``ids`` at ``level`` when
    the measurements are the unit vectors (the least squares is linear)."""
    h, sizes = m.depth, m.sizes
    parents = [np.arange(sizes[i]) // m.fanouts[i - 1] for i in range(1, h + 1)]
    var = [np.inf if m.root_variance is None else m.root_variance] + list(m.variances)
    cs, vs = [], []
    for k in range(1, h + 1):
        for j in range(sizes[k]):
            noisy = [np.zeros(s) for s in sizes]
            noisy[k][j] = 1.0
            lv = tree_least_squares(parents, noisy, var)[0][h]
            for i in range(h - 1, level - 1, -1):
                lv = np.add.reduceat(lv, np.arange(0, sizes[i + 1], m.fanouts[i]))
            cs.append(float(lv[ids].sum()))
            vs.append(var[k])
    return np.array(cs), np.array(vs)


SHAPES = [(17, (17,), None, (50.0,)), (17, (17,), 0.0, (50.0,)),
          (60, (8, 8), None, (30.0, 30.0)), (60, (8, 8), 0.0, (30.0, 20.0)),
          (40, (4, 10), None, (20.0, 40.0))]


def _id_sets(n: int):
    return [np.array([0]), np.array([n // 2]), np.arange(2), np.arange(3),
            np.arange(n // 3), np.arange(1, n - 1)]


@pytest.mark.parametrize("shape", SHAPES)
def test_btree_cumulants_match_the_least_squares_coefficients(shape):
    bins, fans, root, var = shape
    m = BTreeErrorModel(bins, fans, var, root)
    for level in range(1, m.depth + 1):
        for ids in _id_sets(m.sizes[level]):
            c, v = _btree_coefficients(m, level, ids)
            got = m.laplace_cumulants(level, ids)
            assert got.k2 == pytest.approx(float(np.sum(c * c * v)), rel=1e-9)
            assert got.k2 == pytest.approx(m.sum_variance(level, ids).value, rel=1e-9)
            assert got.p == pytest.approx(float(np.sum(c ** 4 * v * v)), rel=1e-9)
            assert got.q == pytest.approx(float(np.sum(c ** 4 * v)), rel=1e-9)


def test_laplace_tree_cumulants_match_the_least_squares_coefficients():
    ps = [np.array([0, 0, 0]), np.array([0, 0, 1, 1, 1, 2]),
          np.array([0, 0, 1, 2, 2, 3, 4, 5, 5, 5])]
    t = laplace_tree(ps, np.arange(10), PureDP(1), neighbouring="add_remove", rng=make_rng(0))
    m = t.error_model
    var = m.noise_variances
    sizes = [1, 3, 6, 10]
    g = np.random.default_rng(3)
    for level in range(4):
        for _ in range(6):
            ids = g.integers(0, sizes[level], size=g.integers(1, 2 * sizes[level] + 1))
            uniq, coef = np.unique(ids, return_counts=True)
            cs, vs = [], []
            for k in range(4):
                for j in range(sizes[k]):
                    noisy = [np.zeros(s) for s in sizes]
                    noisy[k][j] = 1.0
                    est = tree_least_squares(ps, noisy, var)[0]
                    cs.append(float(np.sum(est[level][uniq] * coef)))
                    vs.append(var[k])
            c, v = np.array(cs), np.array(vs)
            got = m.laplace_cumulants(level, ids)
            assert got.k2 == pytest.approx(m.sum_variance(level, ids).value, rel=1e-9)
            assert got.k2 == pytest.approx(float(np.sum(c * c * v)), rel=1e-9)
            assert got.p == pytest.approx(float(np.sum(c ** 4 * v * v)), rel=1e-9)
            assert got.q == pytest.approx(float(np.sum(c ** 4 * v)), rel=1e-9)


@pytest.mark.statistical
@pytest.mark.parametrize("shape", SHAPES)
def test_btree_intervals_cover_by_monte_carlo(shape):
    """The interval of every answer shape covers at least its confidence (5 SE), and at a
    standard error of 7–20 whole counts stays within 0.025 of it (0.015 at 0.95): the
    error simulated as Σ c_j L_j with the real discrete Laplace sampler."""
    bins, fans, root, var = shape
    var = tuple(400.0 * x / max(var) for x in var)  # σ ≈ 14–20
    m = BTreeErrorModel(bins, fans, var, root)
    scale = {v: -1.0 / math.log(((v + 1) - math.sqrt(2 * v + 1)) / v) for v in var}
    for level in range(1, m.depth + 1):
        for i, ids in enumerate(_id_sets(m.sizes[level])[:4]):
            c, v = _btree_coefficients(m, level, ids)
            g = make_rng(1000 * level + i)
            err = np.zeros(DRAWS)
            for cj, vj in zip(c, v):
                if abs(cj) > 1e-12:
                    err += cj * discrete_laplace(scale[vj], DRAWS, g)
            for conf in CONFS:
                half = model_offsets(m, level, ids, conf)[1]
                got = float(np.mean(np.abs(err) <= half + 1e-9))
                assert got >= conf - 5 * _se(conf), (shape, level, ids, conf, got)
                assert got <= conf + (0.015 if conf == 0.95 else 0.025), \
                    (shape, level, ids, conf, got)


def test_one_draw_is_the_exact_discrete_quantile():
    """A one-level add/remove bin is its raw measurement: half-width = the exact discrete
    Laplace quantile (the normal ±1.96σ one covered 0.937)."""
    v = discrete_laplace_variance(50.0)
    m = BTreeErrorModel(17, (17,), (v,), None)
    half = model_offsets(m, 1, np.array([4]), 0.95)[1]
    assert half == discrete_laplace_quantile(v, 0.95) == 150.0
    q = math.exp(-1 / 50.0)
    assert 1 - 2 * q ** (half + 1) / (1 + q) >= 0.95 > 1 - 2 * q ** half / (1 + q)
    z_half = 1.959963984540054 * math.sqrt(v)
    assert 1 - 2 * q ** (math.floor(z_half) + 1) / (1 + q) == pytest.approx(0.9374, abs=1e-3)
    # dp_bound(0.05) holds the error with probability 0.95 too (it was z·σ, 138.6)
    assert model_bound(m, 1, np.array([4]), 0.05) == half


def test_half_width_limits():
    assert half_width(Cumulants(0.0, 0.0, 0.0), 0.95) == 0.0
    assert half_width(Cumulants(4.0, 16.0, 0.0), 1.0) == math.inf
    many = Cumulants(1.0, 1e-4, 0.0)  # 10,000 equal terms: Cornish–Fisher ≈ normal
    assert half_width(many, 0.95) == pytest.approx(1.96, abs=1e-3)


def test_reconciled_btree_keeps_its_variance_and_shape(trips_data, tmp_path):
    """Two btree views reconciled on their total: the Laplace cumulants carry the
    reconciled variance (the one-node lookup and the set path agree with sum_variance)
    and the base's effective number of terms."""
    import json

    import duckdb

    from dpsql.accuracy import load
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict({
        "name": "two", "source": "trips.parquet", "neighbouring": "add_remove",
        "budget": {"epsilon": 1},
        "attributes": {"age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100},
                       "distance": {"kind": "range", "lower": 0, "upper": 256, "bins": 64,
                                    "on_out_of_bounds": "clamp"}},
        "views": [{"name": "ages", "levels": ["age"], "mechanism": "btree"},
                  {"name": "dist", "levels": ["distance"], "mechanism": "btree"}],
    }, base_dir=trips_data)
    path = tmp_path / "two.duckdb"
    build_release(spec, path, seed=3, progress=False)
    params = duckdb.connect(str(path), read_only=True).execute(
        "SELECT error_model FROM dpsql_views WHERE name = 'ages'").fetchone()[0]
    m = load(json.loads(params))
    assert m.kind == "reconciled"
    for level in range(1, m.depth + 1):
        for ids in (np.array([3]), np.array([0, 1, 2])):
            got, base = m.laplace_cumulants(level, ids), m.base.laplace_cumulants(level, ids)
            assert got.k2 == pytest.approx(m.sum_variance(level, ids).value, rel=1e-9)
            assert got.k2 < base.k2
            assert got.p / got.k2 ** 2 == pytest.approx(base.p / base.k2 ** 2, rel=1e-9)
            assert not got.lattice


@pytest.mark.statistical
@pytest.mark.parametrize("neighbouring", ["add_remove", "substitute"])
def test_laplace_tree_intervals_cover_by_monte_carlo(neighbouring):
    """laplace_tree (every node measured, the root too under add/remove; a public root
    under substitution): each answer's interval covers at least its confidence (5 SE) and
    at most 0.025 more, the error simulated as Σ c_j L_j with the real sampler."""
    ps = [np.zeros(3, np.int64), np.repeat(np.arange(3), 3), np.repeat(np.arange(9), 3)]
    sizes = [1, 3, 9, 27]
    t = laplace_tree(ps, np.full(27, 100), PureDP("0.1"), neighbouring=neighbouring,
                     rng=make_rng(0))
    m, var = t.error_model, t.error_model.noise_variances
    scales = t.info["noise_scales"]
    draws = 100_000
    for level in (1, 2, 3):
        for i, ids in enumerate((np.array([0]), np.array([1, 2]), np.arange(sizes[level]))):
            cs = []
            for k in range(4):
                for j in range(sizes[k]):
                    noisy = [np.zeros(s) for s in sizes]
                    noisy[k][j] = 1.0
                    cs.append((float(tree_least_squares(ps, noisy, var)[0][level][ids].sum()),
                               k))
            g = make_rng(50 * level + i)
            err = np.zeros(draws)
            for c, k in cs:
                if abs(c) > 1e-12 and var[k] > 0:
                    err += c * discrete_laplace(scales[k], draws, g)
            if m.sum_variance(level, ids).value < 1e-9:  # the public total: no error
                assert model_offsets(m, level, ids, 0.95)[1] < 1e-3
                continue
            for conf in CONFS:
                half = model_offsets(m, level, ids, conf)[1]
                got = float(np.mean(np.abs(err) <= half + 1e-9))
                se = _se(conf, draws)
                assert conf - 5 * se <= got <= conf + 0.025, (level, ids, conf, got)
