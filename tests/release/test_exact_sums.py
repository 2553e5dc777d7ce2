"""The dyadic count grid (dpsql/release/exact_sums.py): exact sibling sums, nearest
units, idempotence, and exact sums of stored values in any order."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpsql.errors import InternalError
from dpsql.mechanisms.btree import btree
from dpsql.mechanisms.cascade import cascade
from dpsql.privacy import PureDP, ZCDP
from dpsql.release.exact_sums import (MAX_EXPONENT, from_units, grid_exponent, snap_level,
                                      snap_tree, to_units)


@st.composite
def sibling_groups(draw):
    """Real values in sibling groups and parent units near their sums."""
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
    s = draw(st.integers(0, 30))
    values = draw(st.lists(st.floats(-1e4, 1e5, allow_nan=False), min_size=sum(sizes),
                           max_size=sum(sizes)))
    parent = np.repeat(np.arange(len(sizes)), sizes)
    perm = draw(st.permutations(range(parent.size)))  # groups need not be contiguous
    parent = parent[list(perm)]
    x = np.array(values)
    sums = np.bincount(parent, weights=x, minlength=len(sizes))
    shift = np.array(draw(st.lists(st.integers(-3, 3), min_size=len(sizes),
                                   max_size=len(sizes))))
    return x, parent, np.rint(np.ldexp(sums, s)).astype(np.int64) + shift, s


@settings(max_examples=300, deadline=None)
@given(sibling_groups())
def test_siblings_sum_exactly_to_their_parent_and_stay_within_a_unit(case):
    x, parent, parent_units, s = case
    units = snap_level(x, parent, parent_units, s)
    assert np.array_equal(np.bincount(parent, minlength=parent_units.size).astype(bool),
                          np.ones(parent_units.size, bool))
    got = np.zeros(parent_units.size, np.int64)
    np.add.at(got, parent, units)
    assert np.array_equal(got, parent_units)  # exact, in integers
    # within one unit of the value, plus the group's share of the parent's offset
    gap = parent_units - np.rint(np.ldexp(np.bincount(parent, weights=x,
                                                      minlength=parent_units.size), s))
    size = np.bincount(parent)
    slack = 1 + np.ceil(np.abs(gap) / size)[parent] + 1
    assert np.all(np.abs(units - np.ldexp(x, s)) <= slack)
    # idempotent: on the grid and summing to the parent, nothing moves
    assert np.array_equal(snap_level(from_units(units, s), parent, parent_units, s), units)


def test_the_missing_units_go_to_the_largest_remainders():
    # 0.5 + 0.7 + 0.8 = 2: floors 0, 0, 0; the two units to 0.8 and 0.7
    assert snap_level(np.array([0.5, 0.7, 0.8]), np.zeros(3, np.int64), np.array([2]),
                      0).tolist() == [0, 1, 1]
    # a parent far from its children: an even share first, then the remainders
    assert snap_level(np.array([0.0, 0.0, 0.0]), np.zeros(3, np.int64), np.array([-4]),
                      0).tolist() == [-1, -1, -2]  # -2 each, +1 to the first two


def test_a_parent_without_children_cannot_hold_a_count():
    with pytest.raises(InternalError, match="no children"):
        snap_level(np.array([1.0]), np.array([0]), np.array([1, 5]), 0)


def test_grid_exponent_leaves_headroom_for_sums():
    t = cascade(np.array([3, 4]), ZCDP(1.0), neighbouring="add_remove", max_rows=1,
                rng=np.random.default_rng(0))
    assert grid_exponent([t]) == MAX_EXPONENT  # a small view: the finest grid
    big = cascade(np.array([2**40, 0]), ZCDP(1.0), neighbouring="add_remove", max_rows=1,
                  rng=np.random.default_rng(0))
    assert grid_exponent([t, big]) == 2  # 2^40 < Σ|leaves| < 2^41: 53 − 10 − 41
    assert grid_exponent([]) is None


@pytest.mark.parametrize("make", [
    lambda g: cascade(g.integers(0, 50, 37), ZCDP(0.5), neighbouring="add_remove",
                      max_rows=1, rng=g, arity=3),
    lambda g: cascade(g.integers(0, 50, 64), ZCDP(0.5), neighbouring="add_remove",
                      max_rows=1, rng=g, covariance="optimal"),
    lambda g: btree(g.integers(0, 50, 100), PureDP(1.0), neighbouring="add_remove",
                    max_rows=1, rng=g),
], ids=["cascade-ternary", "cascade-optimal", "btree"])
def test_snapped_range_trees_sum_exactly_in_any_order(make):
    g = np.random.default_rng(3)
    tree = make(g)
    s = grid_exponent([tree])
    snapped = snap_tree(tree, None, s)
    spans = snapped.bin_spans
    leaves = snapped.leaves
    for k, lv in enumerate(snapped.levels):
        c = lv.counts
        assert np.array_equal(from_units(to_units(c, s), s), c)  # on the grid
        # a node is the exact sum of its leaves, however they are added
        lo = lv.ids * spans[k]
        for j, a in zip(range(c.size), lo):
            mine = leaves.counts[(leaves.ids * spans[-1] >= a)
                                 & (leaves.ids * spans[-1] < a + spans[k])]
            assert c[j] == math.fsum(mine) == sum(mine) == sum(mine[::-1])
        # and moved by at most two units from the mechanism's value
        assert np.max(np.abs(c - tree.levels[k].counts)) <= 2 * math.ldexp(1.0, -s)
    assert snapped.info["count_grid"] == {"exponent": s, "quantum": math.ldexp(1.0, -s)}
    assert snap_tree(snapped, None, s).levels[-1].counts.tolist() == leaves.counts.tolist()
