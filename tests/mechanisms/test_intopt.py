"""IntOpt: golden vectors, brute-force optimality, properties, segmented == per-parent
(reference/inftda.md §2.3, §6.5–9; reference/od_topdown.md §2.2–2.4, §6.1–9)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.errors import InvalidPrivacyParameterError
from dpsql.mechanisms.intopt import intopt, intopt_loop, intopt_segmented, segment_offsets

GOLDEN = [
    # inftda.md §2.3
    ([5, -3, 2, 10], 20, [7, 0, 1, 12]),
    ([3, 3, 3, 3], 10, [2, 2, 3, 3]),
    ([0, 0, 0], 2, [0, 1, 1]),
    ([-1, 4, 4], 6, [0, 3, 3]),
    ([0, 1000], 0, [0, 0]),
    ([0, 1000], 1, [0, 1]),
    # od_topdown.md §2.4
    ([0, -1, 1], 2, [0, 0, 2]),
    ([0, 0, 0, 10], 12, [0, 0, 1, 11]),
    ([5, 3, 1, -2], 4, [3, 1, 0, 0]),
    ([1, 1, 1, 1], 2, [0, 0, 1, 1]),
    ([2, 2, 2], 3, [1, 1, 1]),
    ([-5, -5], 3, [1, 2]),
    ([0, 0, 5, 5], 4, [0, 0, 2, 2]),
    ([3, 3, 3], 9, [3, 3, 3]),
    ([7], 3, [3]),
    # §6.9: not maximal in zeros
    ([4, 8, 4], 6, [0, 5, 1]),
]


@pytest.mark.parametrize("x,c,y", GOLDEN)
def test_golden_vectors(x, c, y):
    assert intopt_loop(x, c) == y
    assert intopt(x, c).tolist() == y


def test_golden_distance():
    assert max(abs(a - b) for a, b in zip(intopt([5, -3, 2, 10], 20), [5, -3, 2, 10])) == 3
    assert np.abs(intopt([-5, -5], 3) - np.array([-5, -5])).max() == 7


def brute_min(x, c):
    best = None
    for y in itertools.product(range(c + 1), repeat=len(x)):
        if sum(y) == c:
            d = max(abs(a - b) for a, b in zip(x, y))
            best = d if best is None else min(best, d)
    return best


def closed_form_alpha(x, c):
    """od_topdown §2.2: min α ≥ 0 with α ≥ −min x, mα ≥ c − Σx, Σ max(0, xᵢ − α) ≤ c."""
    m = len(x)
    a = max(0, -min(x), -((-(c - sum(x))) // m))
    while sum(max(0, xi - a) for xi in x) > c:
        a += 1
    return a


small = st.integers(1, 4).flatmap(
    lambda m: st.tuples(st.lists(st.integers(-6, 10), min_size=m, max_size=m),
                        st.integers(0, 8)))


@settings(max_examples=300, deadline=None)
@given(small)
def test_brute_force_optimal(case):
    x, c = case
    y = intopt(x, c)
    dist = int(np.abs(y - np.array(x)).max())
    assert dist == brute_min(x, c) == closed_form_alpha(x, c)
    # Lemma 12 / inftda §6.7 lower bound
    m = len(x)
    assert dist >= max(-((-(c - sum(x))) // m), -min(x), 0)


medium = st.integers(1, 30).flatmap(
    lambda m: st.tuples(st.lists(st.integers(-60, 200), min_size=m, max_size=m),
                        st.integers(0, 500)))


@settings(max_examples=300, deadline=None)
@given(medium)
def test_fast_equals_loop_and_properties(case):
    x, c = case
    y = intopt(x, c)
    assert y.tolist() == intopt_loop(x, c)
    assert y.dtype == np.int64 and len(y) == len(x)
    assert y.sum() == c and y.min() >= 0
    xa = np.array(x)
    # order preservation: x_i < x_j ⇒ y_i ≤ y_j
    i, j = np.meshgrid(np.arange(len(x)), np.arange(len(x)))
    assert not np.any((xa[i] < xa[j]) & (y[i] > y[j]))
    # y_i ≤ max(0, x_i + ⌈(c − Σx)/m⌉)
    up = -((-(c - sum(x))) // len(x))
    assert np.all(y <= np.maximum(0, xa + up))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=20))
def test_fixed_point(x):
    assert intopt(x, sum(x)).tolist() == x


segments = st.lists(
    st.integers(0, 8).flatmap(
        lambda m: st.tuples(st.lists(st.integers(-40, 80), min_size=m, max_size=m),
                            st.integers(0, 120) if m else st.just(0))),
    min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(segments)
def test_segmented_equals_per_parent(segs):
    xs = [np.array(x, dtype=np.int64) for x, _ in segs]
    cs = np.array([c for _, c in segs], dtype=np.int64)
    lens = np.array([len(x) for x in xs])
    ptr = np.concatenate(([0], np.cumsum(lens)))
    y = intopt_segmented(np.concatenate(xs) if lens.sum() else np.zeros(0, np.int64), ptr, cs)
    for i, (x, c) in enumerate(segs):
        assert y[ptr[i]:ptr[i + 1]].tolist() == intopt_loop(x, c)
    ids = np.repeat(np.arange(len(segs)), lens)
    assert np.array_equal(segment_offsets(ids, len(segs)), ptr)
    flat = np.concatenate(xs) if lens.sum() else np.zeros(0, np.int64)
    assert np.array_equal(intopt_segmented(flat, ids, cs), y)


@settings(max_examples=150, deadline=None)
@given(segments, st.sampled_from([1, 3, 7, 20]))
def test_segmented_by_blocks_equals_per_parent(segs, block):
    """Past BLOCK entries the segments go in blocks of whole segments (one longer than a
    block alone): the same output, empty segments included."""
    from dpsql.mechanisms import intopt as intopt_mod
    xs = [np.array(x, dtype=np.int64) for x, _ in segs]
    cs = np.array([c for _, c in segs], dtype=np.int64)
    ptr = np.concatenate(([0], np.cumsum([len(x) for x in xs])))
    flat = np.concatenate(xs) if ptr[-1] else np.zeros(0, np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(intopt_mod, "BLOCK", block)
        y = intopt_segmented(flat, ptr, cs)
    for i, (x, c) in enumerate(segs):
        assert y[ptr[i]:ptr[i + 1]].tolist() == intopt_loop(x, c)


def test_edge_cases():
    assert intopt([], 0).tolist() == []
    assert intopt([-3, 9, 2], 0).tolist() == [0, 0, 0]
    assert intopt([-7], 5).tolist() == [5]
    with pytest.raises(InvalidPrivacyParameterError, match="c >= 0"):
        intopt([1, 2], -1)
    with pytest.raises(InvalidPrivacyParameterError, match="empty"):
        intopt([], 3)
    with pytest.raises(InvalidPrivacyParameterError):
        intopt_loop([1], -2)


def test_large_values_exact():
    x = [10**12, -(10**12), 3, 10**12 + 5]
    c = 2 * 10**12
    assert intopt(x, c).tolist() == intopt_loop(x, c)


def test_negative_total_shift_uses_integer_ceil():
    # T = c − Σx = −7, m = 3: ⌈−7/3⌉ = −2, the smallest entries are reduced first
    x, c = [5, 4, 3], 5
    assert intopt(x, c).tolist() == intopt_loop(x, c) == [3, 2, 0]
    x, c = [10**15 + 1, 10**15, 10**15], 0
    assert intopt(x, c).tolist() == [0, 0, 0]
    x, c = [2 * 10**15 + 1, -(10**15), 0], 10**15
    assert intopt(x, c).tolist() == intopt_loop(x, c)


def test_segmented_large_batch_matches_loop():
    rng = np.random.default_rng(5)
    m = rng.integers(1, 40, 3000)
    ptr = np.concatenate(([0], np.cumsum(m)))
    x = rng.integers(-80, 300, ptr[-1])
    c = rng.integers(0, 400, m.size)
    y = intopt_segmented(x, ptr, c)
    for i in range(0, m.size, 97):
        assert y[ptr[i]:ptr[i + 1]].tolist() == intopt_loop(x[ptr[i]:ptr[i + 1]], c[i])
    assert np.array_equal(np.add.reduceat(y, ptr[:-1]), c)


# ---- even_projection: an optimal projection that moves every child alike -----------

nonneg_segments = st.lists(
    st.integers(1, 8).flatmap(
        lambda m: st.tuples(st.lists(st.integers(0, 40), min_size=m, max_size=m),
                            st.integers(0, 200))),
    min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(nonneg_segments, st.integers(0, 2**32))
def test_even_projection_is_an_optimal_projection(segs, salt):
    from dpsql.mechanisms.intopt import even_projection, public_priority
    x = np.concatenate([np.array(s, dtype=np.int64) for s, _ in segs])
    c = np.array([t for _, t in segs], dtype=np.int64)
    seg = np.repeat(np.arange(len(segs)), [len(s) for s, _ in segs])
    y = even_projection(x, seg, c, public_priority(np.arange(x.size), np.full(x.size, salt)))
    ref = intopt_segmented(x, seg, c)
    assert y.dtype == np.int64 and y.min() >= 0
    assert np.array_equal(np.bincount(seg, weights=y, minlength=c.size), c)
    for i in range(len(segs)):
        sel = seg == i
        z = (y - x)[sel]
        # the same l-inf distance as IntOpt (the optimum) ...
        assert np.abs(z).max() == np.abs((ref - x)[sel]).max()
        # ... and every child not held at 0 moves alike, up to one unit
        free = y[sel] > 0
        if free.any():
            assert z[free].max() - z[free].min() <= 1


def test_even_projection_does_not_drift_on_the_smallest_child():
    """IntOpt takes a negative remainder from the smallest child and gives a positive one
    to the largest: summed over many parents whose new totals move by a symmetric ±1..3,
    the smallest child drifts. The even projection does not (5 standard errors)."""
    from dpsql.mechanisms.intopt import even_projection, public_priority
    rng = np.random.default_rng(5)
    n, m = 20_000, 5
    x = np.sort(rng.integers(5, 60, size=(n, m)), axis=1).ravel()
    seg = np.repeat(np.arange(n), m)
    shift = rng.choice([-3, -2, -1, 1, 2, 3], size=n)
    c = np.bincount(seg, weights=x).astype(np.int64) + shift
    plain = (intopt_segmented(x, seg, c) - x)[np.arange(n) * m] - shift / m
    y = even_projection(x, seg, c, public_priority(np.arange(x.size), c[seg]))
    even = (y - x)[np.arange(n) * m] - shift / m  # against a uniform share of the change
    se = even.std() / np.sqrt(n)
    assert abs(even.mean()) < 5 * se
    assert plain.mean() < -20 * se  # the paper's tie-break: the smallest loses


@settings(max_examples=200, deadline=None)
@given(nonneg_segments, st.integers(0, 2**32), st.integers(0, 2**32))
def test_even_projection_is_the_same_segment_by_segment(segs, salt, shuffle):
    """Segments are independent: one call over all of them (some already at their total,
    which are returned as they are, segment ids in any order) equals one call per
    segment."""
    from dpsql.mechanisms.intopt import even_projection, public_priority
    x = np.concatenate([np.array(s, dtype=np.int64) for s, _ in segs])
    seg = np.repeat(np.arange(len(segs)), [len(s) for s, _ in segs])
    # every other segment already at its total
    c = np.array([sum(s) if i % 2 else t for i, (s, t) in enumerate(segs)], dtype=np.int64)
    order = np.random.default_rng(shuffle).permutation(x.size)
    x, seg = x[order], seg[order]
    prio = public_priority(np.arange(x.size), np.full(x.size, salt))
    y = even_projection(x, seg, c, prio)
    for i in range(len(segs)):
        sel = seg == i
        alone = even_projection(x[sel], np.zeros(int(sel.sum()), np.int64), c[i:i + 1],
                                prio[sel])
        assert np.array_equal(y[sel], alone)
