"""InfTDA's noisy measurements and the unbiased estimates built on them
(dpsql.release.measured, dpsql.accuracy.inftda_answers.measured_estimate).

* The run keeps exactly what it measured: every public child of every kept node, with
  its true count plus the noise it drew (a noise hook fixes the noise).
* A release stores each measured released zero under the planner's code for it.
* Statistical (fixed seeds, exact discrete Gaussian noise, 5 standard errors): on a
  sparse tree where the projected counts' sum of one category across every parent is
  biased (a small count under every parent, often released as 0), the measurements' sum
  is unbiased and its 95 % interval covers 95 % of the time, while the interval scaled
  by 0.8 or by 1.25 falls outside the accepted band.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpsql.accuracy.inftda_support import zero_code
from dpsql.domains import categorical, concat
from dpsql.mechanisms.inftda import inftda, true_levels
from dpsql.privacy import ZCDP, rng
from dpsql.release.measured import measured_columns

PARENTS, CHILDREN = 30, 8


def _sparse_tree():
    """30 parents × 8 children: 40 in child 0 and 2 in child 1 under every parent."""
    t = concat(categorical("p", range(PARENTS)), categorical("c", range(CHILDREN)))
    ids = np.array([p * CHILDREN + c for p in range(PARENTS) for c in (0, 1)])
    counts = np.tile([40, 2], PARENTS)
    return t, ids, counts


def test_the_run_keeps_what_it_measured():
    t, ids, counts = _sparse_tree()
    drawn = {}

    def hook(level, child, parent, noise):
        fixed = (child % 5) - 2  # a known noise per node
        drawn[level] = (child.copy(), fixed)
        return fixed

    out = inftda(t, ids, counts, ZCDP(1), neighbouring="substitute", rng=rng(3),
                 noise_hook=hook, keep_measured=10**6)
    truth = true_levels(t, ids, counts)
    assert list(out.measured[0][0]) == [0] and list(out.measured[0][1]) == [counts.sum()]
    for k in (1, 2):
        mids, x = out.measured[k]
        child, noise = drawn[k]
        assert np.array_equal(mids, child)
        true = np.zeros(t.level_sizes[k], np.int64)
        true[truth[k][0]] = truth[k][1]
        assert np.array_equal(x, true[child] + noise)
    # level 2 measures every public child of every kept parent, and only those
    kept = out.levels[1].ids
    assert out.measured[2][0].size == kept.size * CHILDREN
    assert out.info["measurements_kept"]
    plain = inftda(t, ids, counts, ZCDP(1), neighbouring="substitute", rng=rng(3))
    assert plain.measured is None  # not kept unless asked
    few = inftda(t, ids, counts, ZCDP(1), neighbouring="substitute", rng=rng(3),
                 keep_measured=100)  # 30 + 240 drawn: more than it may keep
    assert few.measured is None and few.info["measurements_kept"] is False
    assert np.array_equal(few.levels[2].counts, plain.levels[2].counts)  # the same release


def test_released_zeros_are_stored_by_their_planner_code():
    t, ids, counts = _sparse_tree()
    out = inftda(t, ids, counts, ZCDP(0.05), neighbouring="substitute", rng=rng(8),
                 keep_measured=10**6)
    cols, table = measured_columns(t, out)
    kept, leaves = out.levels[1].ids, out.levels[2].ids
    assert not np.isnan(cols[1]["dp_measured"]).any()
    assert cols[1]["dp_measured"].size == leaves.size
    zeros = np.setdiff1d(np.concatenate([np.arange(p * CHILDREN, (p + 1) * CHILDREN)
                                         for p in kept]), leaves)
    code = zero_code(np.searchsorted(kept, zeros // CHILDREN), zeros % CHILDREN)
    x = dict(zip(out.measured[2][0].tolist(), out.measured[2][1].tolist()))
    at2 = table["dp_level"] == 2
    assert np.array_equal(table["dp_code"][at2], np.sort(code))
    assert np.array_equal(table["dp_measured"][at2], [x[int(z)] for z in zeros[np.argsort(code)]])
    assert list(table["dp_level"][:1]) == [0] and table["dp_measured"][0] == counts.sum()


def test_the_measurements_sum_across_parents_is_unbiased_and_calibrated():
    """300 releases (seeds 0..299) at ρ = 0.05 (σ² = 40 per level). Per release, the sum
    of child c over all 30 parents for c = 0..7: 2,400 answers, independent (disjoint
    measurements). Accepted coverage band at 5 SE: 0.95 ± 5·√(0.95·0.05/2400) =
    [0.928, 0.972]; the interval × 0.8 covers P(|Z| ≤ 1.568) = 0.883, × 1.25
    P(|Z| ≤ 2.450) = 0.986, both outside. Bias: the projected sum of child 1 (truth 60)
    is off by about −30 on average (its 2s come out 0 under a push of several σ), far
    beyond 5 SE of its mean; the measurements' sum's mean error is within 5 SE of 0."""
    t, ids, counts = _sparse_tree()
    z = stats.norm.ppf(0.975)
    truth = np.zeros(CHILDREN)
    truth[0], truth[1] = 40 * PARENTS, 2 * PARENTS
    covered = {1.0: 0, 0.8: 0, 1.25: 0}
    err_ls, err_int = [], []
    for seed in range(300):
        out = inftda(t, ids, counts, ZCDP(0.05), neighbouring="substitute", rng=rng(seed),
                     keep_measured=10**6)
        leaf_ids, x = out.measured[2]
        label = leaf_ids % CHILDREN
        s = np.bincount(label, weights=x, minlength=CHILDREN)
        se = np.sqrt(np.bincount(label, minlength=CHILDREN) * out.error_model.sigma2[1])
        # every parent holds 42, so every one is kept and every leaf measured
        assert leaf_ids.size == PARENTS * CHILDREN
        for scale in covered:
            covered[scale] += int(np.sum(np.abs(s - truth) <= scale * z * se))
        err_ls.append(s[1] - truth[1])
        rel = out.levels[2]
        err_int.append(rel.counts[rel.ids % CHILDREN == 1].sum() - truth[1])
    n = 300 * CHILDREN
    band = 5 * np.sqrt(0.95 * 0.05 / n)
    assert abs(covered[1.0] / n - 0.95) <= band, covered
    assert covered[0.8] / n < 0.95 - band and covered[1.25] / n > 0.95 + band, covered
    for errors, biased in ((err_ls, False), (err_int, True)):
        e = np.asarray(errors, dtype=float)
        off = abs(e.mean()) > 5 * e.std(ddof=1) / np.sqrt(e.size)
        assert off == biased, (biased, e.mean(), e.std())
