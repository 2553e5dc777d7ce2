"""A group's nodes as a multiset (dpsql.accuracy.multiset): a join that repeats rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpsql.accuracy import multiset
from dpsql.accuracy.base import Variance
from dpsql.accuracy.tree_counts import TreeCountsErrorModel

# a 3-level tree (1 → 3 → 9 → 27) whose tree_counts model weighs repeated ids natively:
# the oracle of the multiset's polarisation
PARENTS = [np.zeros(3, np.int64), np.repeat(np.arange(3), 3), np.repeat(np.arange(9), 3)]
MODEL = TreeCountsErrorModel.from_parents(PARENTS, [1.0, 2.0, 3.0, 5.0])


def _weighted(level: int, ids: np.ndarray) -> float:
    return MODEL.sum_variance(level, ids).value


def test_a_set_is_one_plain_layer():
    ms = multiset.split(np.array([4, 1, 7]))
    assert ms.plain and ms.layers[0].tolist() == [4, 1, 7]
    assert multiset.split(np.zeros(0, np.int64)).plain


def test_equal_repeats_scale():
    ms = multiset.split(np.array([3, 5, 3, 5, 3, 5]))
    assert ms.scale == 3 and ms.layers[0].tolist() == [3, 5] and ms.weights == (1,)
    var = multiset.variance(ms, lambda t: MODEL.sum_variance(2, t))
    assert var.value == pytest.approx(9 * _weighted(2, np.array([3, 5])))
    assert multiset.added(ms, lambda t: float(t.size)) == 6.0


def test_unequal_repeats_are_nested_layers():
    ms = multiset.split(np.array([1, 2, 2, 3, 3, 3]))
    assert ms.scale == 1
    assert [t.tolist() for t in ms.layers] == [[1, 2, 3], [2, 3], [3]]
    assert ms.weights == (1, 1, 1)
    ms = multiset.split(np.array([1, 4, 4, 4]))  # weights follow the multiplicities
    assert [t.tolist() for t in ms.layers] == [[1, 4], [4]] and ms.weights == (1, 2)


def test_codes_that_are_not_nodes_stay_in_the_first_layer():
    """A calibrated InfTDA view's negative codes name a zero's parent: two zeros of one
    parent share a code and are not a repeated node."""
    def nodes(u):
        return u >= 0
    ms = multiset.split(np.array([-5, -5, 2, 7]), layered=nodes)
    assert ms.plain and sorted(ms.layers[0].tolist()) == [-5, -5, 2, 7]
    ms = multiset.split(np.array([-5, -5, -5, 2, 2, 7]), layered=nodes)
    assert ms.scale == 1
    assert [sorted(t.tolist()) for t in ms.layers] == [[-5, -5, -5, 2, 7], [2]]
    # a join that repeats every row twice, zeros included: exactly twice the answer
    ms = multiset.split(np.array([-5, -5, -5, -5, 2, 2, 7, 7]), layered=nodes)
    assert ms.scale == 2 and sorted(ms.layers[0].tolist()) == [-5, -5, 2, 7]


@settings(max_examples=60, deadline=None)
@given(level=st.integers(1, 3), data=st.data())
def test_polarisation_equals_the_weighted_variance(level, data):
    n = [1, 3, 9, 27][level]
    reps = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    ids = np.repeat(np.arange(n), reps)
    ms = multiset.split(ids)
    got = multiset.variance(ms, lambda t: MODEL.sum_variance(level, t))
    assert got.value == pytest.approx(_weighted(level, ids), rel=1e-9, abs=1e-9)
    assert got.exact


def test_many_layers_fall_back_to_an_upper_bound():
    ids = np.repeat(np.arange(12), np.arange(1, 13))  # 12 distinct multiplicities
    got = multiset.variance(multiset.split(ids), lambda t: MODEL.sum_variance(3, t))
    assert not got.exact and got.value >= _weighted(3, ids) * (1 - 1e-12)


def test_a_model_without_variances_gives_none():
    assert multiset.variance(multiset.split(np.array([1, 1, 2])), lambda t: None) is None
    assert multiset.variance(multiset.split(np.array([1, 2])), lambda t: None) is None
    # independent unit nodes: 2·y₁ + y₂ has variance 4 + 1
    assert multiset.variance(multiset.split(np.array([1, 1, 2])),
                             lambda t: Variance(float(t.size), True)).value == 5.0


def test_a_model_that_weighs_repeats_gets_the_list_as_it_is():
    """The Gaussian and Laplace trees weigh a repeated id themselves: exact at any number
    of distinct multiplicities (through layers, 12 of them would give Minkowski's)."""
    ids = np.repeat(np.arange(12), np.arange(1, 13))
    assert MODEL.weighs_repeats
    got = multiset.model_variance(MODEL, 3, ids)
    assert got.exact and got.value == pytest.approx(_weighted(3, ids))


def test_set_variances_that_are_bounds_are_added_as_standard_errors():
    """Polarising upper bounds would not bound the cross terms: with any set variance
    inexact the layers' standard errors add (Minkowski)."""
    def fn(t):
        return Variance(float(t.size), False)
    got = multiset.variance(multiset.split(np.array([1, 1, 2])), fn)
    assert not got.exact and got.value == pytest.approx((2 ** 0.5 + 1.0) ** 2)
