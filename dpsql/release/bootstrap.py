"""Calibrating InfTDA views at release time: a parametric bootstrap of what produced them.

An InfTDA view's per-answer intervals (:mod:`dpsql.accuracy.inftda_answers`) are
calibrated by re-running the process that made its counts on the released counts, as if
they were the truth, and measuring each node's bias and variance
(:mod:`dpsql.mechanisms.inftda_calibration`). What that process is depends on the
release:

* **A view that reconciliation did not touch** is the output of InfTDA alone: the
  bootstrap re-runs InfTDA on the view's released leaves (``B`` replicates).
* **Views that reconciliation changed** (:mod:`dpsql.release.reconcile`) are the output
  of *every* view's mechanism followed by the agreement step. Re-running InfTDA alone
  misses both what the agreement does to them: their shared levels carry the combined,
  smaller error of all the views that agreed (measured: the bootstrap of InfTDA alone
  over-stated a region's standard error by 1.3× to 1.9×), and the agreed counts are
  pushed down the tree by a second integer projection whose remainder goes to the
  smallest children first, which about doubles IntOpt's structured bias of a sum over
  many parents (measured on the trips data, summed over 60 cities: −99 for the smallest
  mode, against −50 estimated by the bootstrap of InfTDA alone). So each replicate here
  re-runs the whole pipeline: every view that took part in an agreement is re-drawn
  around its released values (InfTDA: re-run on its released leaves; a real-valued
  view: its released values plus the noise of one run of its mechanism on an all-zero
  histogram, since its error does not depend on the counts), then the replicate views
  are reconciled exactly as the release was, and each InfTDA view's replicate is
  compared with its released tree.

**Privacy.** Only released counts, public domains and the views' public parameters are
read, and the noise is fresh: post-processing, no budget. All replicates draw from one
*jumped* copy of the release generator (an independent AES-CTR stream), taken after
every mechanism ran, so a seeded release's counts are the same with and without the
calibration. Since that noise protects nothing, its discrete Gaussian draws come from
the table sampler (:mod:`dpsql.privacy.table_sampler`: the same distribution, 10× to
30× faster), not from the exact sampler that privacy rule 4 asks of a release's noise.

**Cost.** ``B`` replicates (:func:`~dpsql.mechanisms.inftda_calibration.replicates_for`
over all re-drawn views' noise draws: 32 for small and medium releases) of the
re-drawn mechanisms and of the reconciliation. A replicate is reconciled for its counts
only (``node_variances=False``): the per-node variances of its reconciled real-valued
trees, O(n²) in the agreed level's nodes, are never read here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from dpsql.accuracy.reconciled import ReconciledErrorModel
from dpsql.domains import DomainTree
from dpsql.mechanisms.base import PrivateTree
from dpsql.mechanisms.inftda_calibration import (Moments, calibrated_tree, replicates_for,
                                                 with_calibration)
from dpsql.release.reconcile import reconcile_release

__all__ = ["PIPELINE", "calibrate_alone", "calibrate_views"]

PIPELINE = "parametric bootstrap of the release pipeline (mechanisms and reconciliation)"

Replicate = Callable[[int, PrivateTree, np.random.Generator], PrivateTree]
"""``replicate(i, released, rng)``: one draw of view i's mechanism around ``released``."""

Output = tuple[PrivateTree, "DomainTree | None"]


def calibrate_views(spec: Any, trees: dict[str, DomainTree], outputs: Sequence[Output],
                    replicate: Replicate, generator: np.random.Generator,
                    replicates: int | None = None, stage: Callable[[str], None] | None = None
                    ) -> list[tuple[PrivateTree, DomainTree | None, list | None]]:
    """Each view's (tree, domain tree, extra level-table columns or None), the InfTDA
    views calibrated (module doc: by the bootstrap of InfTDA alone, or of the pipeline
    when reconciliation changed one of them). ``outputs`` are the final (reconciled)
    trees in the order of ``spec.views``."""
    views = spec.views
    inftda = [i for i, v in enumerate(views) if v.mechanism == "inftda"]
    out: list[tuple[PrivateTree, DomainTree | None, list | None]] = [
        (t, d, None) for t, d in outputs]
    agreed = [i for i, (t, _) in enumerate(outputs) if "reconciled" in t.info]
    if not any(i in agreed for i in inftda):
        for n, i in enumerate(inftda, 1):
            tree, dtree = outputs[i]
            which = f"view {views[i].name} ({n} of {len(inftda)} InfTDA views)"
            tick = None if stage is None else (
                lambda b, B, which=which: stage(f"{which}: calibrating the error model, "
                                                f"replicate {b} of {B}"))
            calibrated, extra = calibrate_alone(
                dtree, tree, lambda t, g, i=i: replicate(i, t, g), generator, replicates,
                tick)
            out[i] = (calibrated, dtree, extra)
        return out

    # the whole pipeline: every view that took part in an agreement, and every InfTDA view
    redrawn = sorted(set(agreed) | set(inftda))
    B = replicates if replicates is not None else replicates_for(
        sum(outputs[i][0].draws for i in redrawn))
    generator.integers(0, 2)
    boot = np.random.Generator(generator.bit_generator.jumped())
    moments = {i: Moments(outputs[i][1], outputs[i][0], measure_root=True) for i in inftda}
    approximate = {i: _AgreedError(outputs[i][0]) for i in redrawn
                   if _approximate_chain(outputs[i][0])}
    for b in range(1, B + 1):
        if stage is not None:
            stage(f"calibrating the error models: replicate {b} of {B} of the mechanisms "
                  "and the reconciliation")
        reps = list(outputs)
        for i in redrawn:
            reps[i] = (replicate(i, outputs[i][0], boot), outputs[i][1])
        reps = reconcile_release(spec, trees, reps, node_variances=False)
        for i in inftda:
            moments[i].add(reps[i][0])
        for i, agreed in approximate.items():
            agreed.add(reps[i][0])
    for i in inftda:
        tree, dtree = outputs[i]
        calibrated, extra = with_calibration(dtree, tree, moments[i], PIPELINE)
        out[i] = (calibrated, dtree, extra)
    for i, agreed in approximate.items():
        out[i] = (agreed.calibrated(), outputs[i][1], None)
    return out


def _approximate_chain(tree: PrivateTree) -> bool:
    """A real-valued tree conditioned on agreed values whose chain holds an InfTDA view:
    its agreed part is the linear support model's approximation."""
    model = tree.error_model
    return (isinstance(model, ReconciledErrorModel) and not model.exact_chain
            and tree.mechanism != "inftda")


class _AgreedError:
    """The measured mean squared error of a reconciled real-valued tree's agreed level D
    over the pipeline's replicates, beyond the total's exact share, against the model's
    part of bᵀCb below the total there
    (:mod:`dpsql.accuracy.reconciled`, "Calibrating an approximate chain")."""

    def __init__(self, tree: PrivateTree) -> None:
        self.tree = tree
        self.level = tree.error_model.level
        self.released = np.asarray(tree.levels[self.level].counts, dtype=np.float64)
        self.sq = np.zeros(self.released.size)
        self.replicates = 0

    def add(self, rep: PrivateTree) -> None:
        e = np.asarray(rep.levels[self.level].counts, dtype=np.float64) - self.released
        self.sq += e * e
        self.replicates += 1

    def calibrated(self) -> PrivateTree:
        """The tree with its model's agreed part scaled by measured / modelled."""
        model = self.tree.error_model
        root, below = model.agreed_parts()
        modelled = float(below.sum())
        if not self.replicates or modelled <= 0:
            return self.tree
        scale = (float(self.sq.sum() / self.replicates) - float(root.sum())) / modelled
        model = model.with_scale(max(scale, 1e-3))
        levels = tuple(replace(lv, variance=model.node_variances(k))
                       for k, lv in enumerate(self.tree.levels))
        info = {**self.tree.info, "calibration": {"method": PIPELINE,
                                                  "replicates": self.replicates,
                                                  "agreed_scale": model.scale}}
        return replace(self.tree, levels=levels, error_model=model, info=info)


def calibrate_alone(dtree: DomainTree, tree: PrivateTree,
                    replicate: Callable[[PrivateTree, np.random.Generator], PrivateTree],
                    generator: np.random.Generator, replicates: int | None = None,
                    tick: Callable[[int, int], None] | None = None
                    ) -> tuple[PrivateTree, list[dict[str, np.ndarray]]]:
    """One InfTDA view calibrated by the bootstrap of InfTDA alone on its released
    leaves: the calibrated tree and its extra level-table columns. ``tick(b, B)`` is
    called before replicate b of B."""
    # the bootstrap draws from a jump of the generator's state; after all mechanisms
    # that state would be the same for every view: step it once per view first
    generator.integers(0, 2)
    return calibrated_tree(dtree, tree, lambda ids, n, g: replicate(tree, g), generator,
                           replicates, tick)
