"""Release-time calibration of InfTDA's per-answer intervals: a parametric bootstrap.

:mod:`dpsql.accuracy.inftda_answers` explains the model. This module measures what the
linear model misses (IntOpt's structured bias, its variance effects, what released zeros
hide) by re-running InfTDA ``B`` times on the *released* tree as if it were the truth,
with the same noise scales, and comparing each replicate with the released tree.

Privacy: the bootstrap reads only the released counts and the public domain tree, and
draws fresh noise: it is post-processing of the release and costs no budget. Its noise
comes from a *jumped* copy of the release's generator (an independent AES-CTR stream),
so the calibration does not shift any view's noise: a seeded release's counts are the
same with and without it.

Cost: ``B`` runs of InfTDA over the released leaves (at most n of them), so about ``B``
times the mechanism's own time. ``B`` is chosen from the number of noise draws
(:func:`replicates_for`): 32 for small and medium trees (a 1M-commuter O/D release:
262k draws), down to 4 for the largest (Italy's O/D), where the per-level factors are
still measured over millions of nodes and the noisier per-node bias is paid for by the
(1 + 1/B) term of the variance.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from dpsql.accuracy.inftda_answers import Calibration
from dpsql.accuracy.inftda_support import Support, node_variances
from dpsql.mechanisms.base import PrivateTree

MAX_REPLICATES = 32
MIN_REPLICATES = 4
DRAW_BUDGET = 40_000_000
"""Noise draws the bootstrap may spend in all (B × draws of one run), before the floor."""


def replicates_for(draws: int) -> int:
    """B: as many replicates as :data:`DRAW_BUDGET` allows, between 4 and 32."""
    return int(min(MAX_REPLICATES, max(MIN_REPLICATES, DRAW_BUDGET // max(int(draws), 1))))


@dataclass(frozen=True)
class SupportArrays:
    """Per level 1..d (index k−1): each released node's parent row at level k−1, and
    per level 0..d each released node's number of public children; what the release
    stores as ``dp_parent``/``dp_fanout`` and the query side reads back as a
    :class:`~dpsql.accuracy.inftda_support.Support`."""

    parents: tuple[np.ndarray, ...]
    fanouts: tuple[np.ndarray, ...]


def support_arrays(dtree: Any, released: PrivateTree) -> SupportArrays:
    """The released tree's shape: parent rows and public fan-outs, level by level."""
    d = dtree.depth
    levels = released.levels
    parents = []
    for k in range(1, d + 1):
        pub = dtree.parent(k, levels[k].ids)
        parents.append(np.searchsorted(levels[k - 1].ids, pub).astype(np.int64))
    fanouts = [dtree.n_children(k + 1, levels[k].ids).astype(np.int64) if k < d
               else np.zeros(levels[k].ids.size, np.int64) for k in range(d + 1)]
    return SupportArrays(tuple(parents), tuple(fanouts))


def _lookup(ids: np.ndarray, counts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """counts at the sorted ids ``at`` (0 where ``ids`` lacks them)."""
    if ids.size == 0:
        return np.zeros(at.size, np.int64)
    pos = np.minimum(np.searchsorted(ids, at), ids.size - 1)
    return np.where(ids[pos] == at, counts[pos], 0)


class Moments:
    """Running sums of the bootstrap errors of one released InfTDA tree: per released
    node, Σe and Σe²; per level, the released zeros' false-positive mass. ``add`` takes
    one replicate (the mechanism re-run on the released tree, or a whole replicate of
    the release pipeline, :mod:`dpsql.release.bootstrap`); ``result`` gives what
    :func:`calibrate` returns."""

    def __init__(self, dtree: Any, released: PrivateTree, measure_root: bool = False) -> None:
        """``measure_root``: also measure the root's bias and variance (when the root is
        not InfTDA's own noisy count but an agreed total; otherwise its variance is
        known exactly, σ²_root)."""
        d = dtree.depth
        self.dtree, self.released, self.replicates = dtree, released, 0
        self.measure_root = measure_root
        self.ids = [lv.ids for lv in released.levels]
        self.truth = [lv.counts.astype(np.float64) for lv in released.levels]
        self.parent_pub = [None] + [dtree.parent(k, self.ids[k]) for k in range(1, d + 1)]
        self.s1 = [np.zeros(self.ids[k].size) for k in range(d + 1)]
        self.s2 = [np.zeros(self.ids[k].size) for k in range(d + 1)]
        self.z_sum, self.z_sq, self.z_n = np.zeros(d + 1), np.zeros(d + 1), np.zeros(d + 1)

    def add(self, rep: PrivateTree) -> None:
        """One replicate's errors against the released tree."""
        dtree, ids = self.dtree, self.ids
        if self.measure_root and ids[0].size:
            e0 = _lookup(rep.levels[0].ids, rep.levels[0].counts, ids[0]) - self.truth[0]
            self.s1[0] += e0
            self.s2[0] += e0 * e0
        for k in range(1, dtree.depth + 1):
            r_ids, r_cnt = rep.levels[k].ids, rep.levels[k].counts
            e = _lookup(r_ids, r_cnt, ids[k]) - self.truth[k]
            self.s1[k] += e
            self.s2[k] += e * e
            # the released zeros' analogue: children of this replicate's expanded parents
            # that the released tree has at 0; what the replicate puts there is their error
            expanded = rep.levels[k - 1].ids
            if expanded.size:
                under = _lookup(expanded, np.ones(expanded.size, np.int64),
                                self.parent_pub[k]) > 0
                fp = r_cnt[_lookup(ids[k], np.ones(ids[k].size, np.int64), r_ids) == 0
                           ].astype(np.float64)
                self.z_sum[k] += fp.sum()
                self.z_sq[k] += (fp * fp).sum()
                self.z_n[k] += float(dtree.n_children(k, expanded).sum()) - int(under.sum())
        self.replicates += 1

    def result(self) -> tuple[Calibration, tuple[np.ndarray, ...], SupportArrays,
                              list[np.ndarray]]:
        """(calibration, per-level biases, support arrays, per-level variances)."""
        dtree, released, B = self.dtree, self.released, self.replicates
        d = dtree.depth
        model = released.error_model
        shape = support_arrays(dtree, released)
        support = Support.from_levels(shape.parents, shape.fanouts)
        v_lin = node_variances(support, model.sigma2, model.root_sigma2)
        kappa, zero_bias, zero_var, biases, variances = [], [], [], [], []
        for k in range(1, d + 1):
            bias = self.s1[k] / B
            var_boot = (np.maximum(self.s2[k] / B - bias * bias, 0.0)
                        * (B / max(B - 1, 1)))
            lin = float(v_lin[k].sum())
            kap = float(var_boot.sum()) / lin if lin > 0 else 1.0
            kappa.append(max(kap, 1e-3) if lin > 0 else 1.0)
            zn = self.z_n[k]
            mean0 = self.z_sum[k] / zn if zn > 0 else 0.0
            zero_bias.append(float(mean0))
            zero_var.append(float(max(self.z_sq[k] / zn - mean0 * mean0, 0.0)) if zn > 0
                            else 0.0)
            biases.append(bias)
            variances.append(var_boot)
        root_bias = root_var = None
        if self.measure_root and self.ids[0].size:
            root_bias = float(self.s1[0][0] / B)
            root_var = float(max(self.s2[0][0] / B - root_bias ** 2, 0.0) * (B / max(B - 1, 1)))
        cal = Calibration(B, tuple(kappa), tuple(zero_bias), tuple(zero_var), root_bias,
                          root_var)
        return cal, tuple(biases), shape, variances


def calibrate(dtree: Any, released: PrivateTree,
              rerun: Callable[[np.ndarray, np.ndarray, np.random.Generator], PrivateTree],
              rng: np.random.Generator, replicates: int | None = None
              ) -> tuple[Calibration, tuple[np.ndarray, ...], SupportArrays, list[np.ndarray]]:
    """Bootstrap ``released`` (module doc). ``rerun(leaf_ids, leaf_counts, rng)`` runs the
    same mechanism with the same parameters on other leaf counts.

    Returns the calibration, each level's per-node bias (levels 1..d), the support
    arrays, and each level's per-node bootstrap variance (levels 1..d, the ``dp_var``
    column)."""
    return _bootstrap(dtree, released, rerun, rng, replicates).result()


def _bootstrap(dtree: Any, released: PrivateTree,
               rerun: Callable[[np.ndarray, np.ndarray, np.random.Generator], PrivateTree],
               rng: np.random.Generator, replicates: int | None,
               tick: Callable[[int, int], None] | None = None) -> Moments:
    B = replicates if replicates is not None else replicates_for(released.draws)
    moments = Moments(dtree, released)
    leaves = released.levels[dtree.depth]
    for b in range(B):
        if tick is not None:
            tick(b + 1, B)
        moments.add(rerun(leaves.ids, leaves.counts, rng))
    return moments


def with_calibration(dtree: Any, released: PrivateTree, moments: Moments, method: str
                     ) -> tuple[PrivateTree, list[dict[str, np.ndarray]]]:
    """``released`` with the calibrated error model and per-node variances of
    ``moments``, and the extra columns of each level table 1..d: ``dp_parent`` (the
    parent's row in the level above), ``dp_fanout`` (public children; 0 at the leaves)
    and ``dp_bias`` (bootstrap bias)."""
    cal, biases, shape, variances = moments.result()
    levels = [released.levels[0]] + [replace(lv, variance=v) for lv, v in
                                      zip(released.levels[1:], variances)]
    model = released.error_model.with_calibration(cal)
    info = {**released.info, "calibration": {"method": method,
                                             "replicates": cal.replicates}}
    tree = replace(released, levels=tuple(levels), error_model=model, info=info)
    extra = [{"dp_parent": shape.parents[k - 1], "dp_fanout": shape.fanouts[k],
              "dp_bias": biases[k - 1]} for k in range(1, dtree.depth + 1)]
    return tree, extra


def calibrated_tree(dtree: Any, released: PrivateTree,
                    rerun: Callable[[np.ndarray, np.ndarray, np.random.Generator], PrivateTree],
                    rng: np.random.Generator, replicates: int | None = None,
                    tick: Callable[[int, int], None] | None = None
                    ) -> tuple[PrivateTree, list[dict[str, np.ndarray]]]:
    """:func:`with_calibration` of the bootstrap of ``released`` alone (:func:`calibrate`).

    The bootstrap draws from a jumped copy of ``rng`` (an independent stream), so
    ``rng`` itself is not advanced: the other views' noise is unchanged. ``tick(b, B)``,
    if given, is called before replicate b of B (a progress display)."""
    boot = np.random.Generator(rng.bit_generator.jumped())
    moments = _bootstrap(dtree, released, rerun, boot, replicates, tick)
    return with_calibration(dtree, released, moments, "parametric bootstrap")


__all__ = ["Moments", "SupportArrays", "calibrate", "calibrated_tree", "replicates_for",
           "support_arrays", "with_calibration"]
