"""An answer's nodes as a multiset: the error of a group whose rows a join repeated.

The planner hands the error columns the node of every input row of a group
(``LIST(node)``), and the count is the ``SUM`` over the same rows. A join with a public
table whose key repeats (a bridge table: a region that belongs to two sales areas)
repeats rows, so a node can come m times and count m times: the answer is Σ mᵢ·yᵢ, and so
is its error. Error models evaluate node *sets*; this module evaluates a multiset
through them, in two steps:

* **Scale.** When every code occurs a multiple of g > 1 times, the answer is g times the
  multiset with every count divided by g (a join that repeats each row of a group
  equally, the usual case): its standard error, offsets and bound are g times that
  multiset's. Exact.
* **Layers.** What is left is split into nested sets T₁ ⊃ T₂ ⊃ … with weights wᵢ: Tᵢ
  holds the nodes that occur at least cᵢ times, 1 = c₁ < c₂ < … the distinct
  multiplicities (and 1), and wᵢ = cᵢ − cᵢ₋₁ (w₁ = 1), so that the multiset's sum is
  Σᵢ wᵢ·(the sum over Tᵢ). Its variance is exact by polarisation (for T_l ⊂ T_i,
  Cov(T_i, T_l) = [Var(T_i) + Var(T_l) − Var(T_i ∖ T_l)]/2) when the model's set
  variances are exact; with more than :data:`MAX_LAYERS` layers, or set variances that
  are bounds or estimates (calibrated InfTDA's), Minkowski's (Σ wᵢ·sdᵢ)², an upper
  bound whatever the correlations. An interval's
  offsets and a bound add the layers' (the triangle inequality: exact when the layers'
  errors move together, wider otherwise; sound for InfTDA's bounds, which hold on one
  event for every node at once).

A calibrated InfTDA view's row codes name nodes too, its released zeros included (each
has its own code: :func:`~dpsql.accuracy.inftda_answers.zero_code`), so a repeated zero
is layered like a repeated node. The one code that is not a node's is that of a zero
under a zero parent (``DEEP_ZERO``, every such node's): it is never layered, and the
caller says so (``layered``).

A model that weighs repeated ids itself (``weighs_repeats``: the Gaussian and Laplace
trees, a reconciled tree) gets the list as it is.

Laplace-family models (``laplace_cumulants``: ``btree``, ``laplace_tree``) get intervals
from the Laplace quantile of :mod:`dpsql.accuracy.laplace_sum`, not ±z·σ; ``dp_stderr``
and ``dp_bound`` keep the exact variance and its normal bound.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import numpy as np

from dpsql.accuracy import laplace_sum
from dpsql.accuracy.base import Variance, distinct, z_value

MAX_LAYERS = 8
"""Layers whose covariances are evaluated exactly (K layers: K(K+1)/2 set evaluations);
beyond, the variance is Minkowski's upper bound (K evaluations)."""


class Multiset(NamedTuple):
    """A group's node codes as g × Σᵢ wᵢ·(set Tᵢ) (module doc)."""

    scale: int
    layers: tuple[np.ndarray, ...]
    weights: tuple[int, ...]

    @property
    def plain(self) -> bool:
        """True when no node repeats: one layer of weight 1, scale 1."""
        return self.scale == 1 and len(self.layers) <= 1


def split(codes: np.ndarray, *, layered: Callable[[np.ndarray], np.ndarray] | None = None
          ) -> Multiset:
    """``codes`` (int64) as a :class:`Multiset`. ``layered`` selects the codes that name
    one node each (default: all); the others stay, every occurrence, in the first layer."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size < 2 or (codes.size <= 16 and len(set(codes.tolist())) == codes.size):
        return Multiset(1, (codes,), (1,))  # nothing repeats: the usual small group
    uniq, counts = distinct(codes)
    if uniq.size == codes.size:
        return Multiset(1, (codes,), (1,))  # nothing repeats: the usual group
    node = np.ones(uniq.size, bool) if layered is None else layered(uniq)
    if not node.any() or counts[node].max() == 1:  # no node repeats
        return Multiset(1, (codes,), (1,))
    g = int(np.gcd.reduce(counts[node]))
    if g > 1 and not np.any(counts[~node] % g):
        counts = counts // g
        codes = np.repeat(uniq, counts)
    else:
        g = 1
    cuts = np.unique(np.concatenate([[1], counts[node]]))
    if cuts.size == 1:
        return Multiset(g, (codes,), (1,))
    outer = np.concatenate([uniq[node], np.repeat(uniq[~node], counts[~node])])
    layers = [np.sort(outer)] + [uniq[node & (counts >= c)] for c in cuts[1:].tolist()]
    weights = [1] + np.diff(cuts).tolist()
    return Multiset(g, tuple(layers), tuple(int(w) for w in weights))


def variance(ms: Multiset, fn: Callable[[np.ndarray], Variance | None]) -> Variance | None:
    """The variance of the multiset's sum, from ``fn`` (a set's variance) on its layers
    (module doc); None when ``fn`` gives none."""
    if ms.plain:
        return fn(ms.layers[0])
    vs = [fn(t) for t in ms.layers]
    if any(v is None for v in vs):
        return None
    g2 = float(ms.scale) ** 2
    w = [float(x) for x in ms.weights]
    pairs = {}
    polarise = len(vs) <= MAX_LAYERS and all(v.exact for v in vs)
    for i in range(len(vs) if polarise else 0):
        for j in range(i + 1, len(vs)):
            outer = ms.layers[i]  # ⊃ layers[j], whose codes are distinct nodes
            rest = fn(outer[~np.isin(outer, ms.layers[j])])
            polarise = polarise and rest is not None and rest.exact
            pairs[i, j] = rest
    if not polarise:
        # Minkowski: sd(Σ wᵢ·Tᵢ) ≤ Σ wᵢ·sd(Tᵢ) whatever the correlations (polarising
        # upper bounds or estimates would not bound the cross terms)
        sd = sum(wi * math.sqrt(max(v.value, 0.0)) for wi, v in zip(w, vs))
        return Variance(g2 * sd * sd, False)
    total = sum(wi * wi * v.value for wi, v in zip(w, vs))
    for (i, j), rest in pairs.items():
        total += w[i] * w[j] * (vs[i].value + vs[j].value - rest.value)
    return Variance(g2 * max(total, 0.0), all(v.exact for v in vs))


def added(ms: Multiset, fn: Callable[[np.ndarray], float]) -> float:
    """g·Σᵢ wᵢ·fn(Tᵢ): a bound or an interval offset of the multiset's sum from its
    layers' (module doc)."""
    return float(ms.scale) * sum(w * fn(t) for w, t in zip(ms.weights, ms.layers))


def model_variance(model: Any, level: int, ids: np.ndarray) -> Variance | None:
    """The variance of the count over the node multiset ``ids`` of ``level`` under
    ``model`` (an error model that does not read the support), or None."""
    if model.weighs_repeats:
        return model.sum_variance(level, ids)
    return variance(split(ids), lambda t: model.sum_variance(level, t))


def model_bound(model: Any, level: int, ids: np.ndarray, beta: float) -> float:
    """``dp_bound(beta)`` over the node multiset ``ids``: the Laplace quantile at 1 − β of
    a Laplace-family model (:func:`_laplace_half`: z·σ held one Laplace draw only 0.937 of
    the time at β = 0.05), the normal bound of the variance for a variance model (the
    default ``sum_bound``), else the layers' bounds added."""
    half = _laplace_half(model, level, ids, 1.0 - beta)
    if half is not None:
        return half
    var = model_variance(model, level, ids)
    if var is not None:
        return z_value(1.0 - beta) * math.sqrt(var.value)
    return added(split(ids), lambda t: float(model.sum_bound(level, t, beta)))


def _laplace_half(model: Any, level: int, ids: np.ndarray, confidence: float
                  ) -> float | None:
    """The Laplace-family half-width (:mod:`dpsql.accuracy.laplace_sum`), or None when
    the model's noise is not Laplace. A model that weighs repeats gets the list; a set
    gets its own quantile; a multiset with repeats gets its exact standard error times
    the widest of its layers' quantile-to-σ ratios."""
    if model.weighs_repeats:
        cum = model.laplace_cumulants(level, ids)
        return None if cum is None else laplace_sum.half_width(cum, confidence)
    ms = split(ids)
    if ms.plain:
        cum = model.laplace_cumulants(level, ms.layers[0])
        return None if cum is None else laplace_sum.half_width(cum, confidence)
    ratio = 0.0
    for t in ms.layers:
        cum = model.laplace_cumulants(level, t)
        if cum is None:
            return None
        if cum.k2 > 0:
            ratio = max(ratio, laplace_sum.half_width(cum, confidence) / math.sqrt(cum.k2))
    var = model_variance(model, level, ids)
    return None if var is None else ratio * math.sqrt(var.value)


def model_offsets(model: Any, level: int, ids: np.ndarray, confidence: float
                  ) -> tuple[float, float]:
    """How far below and above the count over the node multiset ``ids`` its interval at
    ``confidence`` reaches: the Laplace quantile of a Laplace-family model
    (:func:`_laplace_half`), ±z·se of the variance, or ±``dp_bound(1 − confidence)``."""
    half = _laplace_half(model, level, ids, confidence)
    if half is not None:
        return half, half
    var = model_variance(model, level, ids)
    if var is None:
        half = model_bound(model, level, ids, 1.0 - confidence)
    else:
        half = z_value(confidence) * math.sqrt(var.value)
    return half, half


__all__ = ["MAX_LAYERS", "Multiset", "added", "model_bound", "model_offsets",
           "model_variance", "split", "variance"]
