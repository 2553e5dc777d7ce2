"""``dp_bound(beta)`` of an InfTDA answer: Theorem 1's simultaneous bound, tightened with
the tree (a sum of whole sibling sets is bounded through their parent, the minimal
cover). It is the guarantee for when a worst case is needed; the per-answer intervals
are :mod:`dpsql.accuracy.inftda_answers`'."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.inftda_support import Support, split_rows


def cover_bound(support: Support, level: int, rows: Any, bounds: Sequence[float]) -> float:
    """A bound on |error| of the sum over ``rows`` at ``level``, on the event that every
    node of level ℓ ≤ ``level`` errs by at most ``bounds[ℓ]`` (Theorem 1 with its β split
    over levels 1..level, so the event holds for all of them at once).

    Each whole sibling set is bounded through its parent (the minimal cover), bottom-up:
    a parent whose released children are all in the sum (each whole, recursively) costs
    ``bounds[ℓ−1]`` plus ``bounds[ℓ]`` per zero child left out (a released zero can hide
    a count up to that), when that is less than its children's costs; everything else
    costs ``bounds[ℓ]`` per node. Deep zeros (in pruned subtrees) cost ``bounds[level]``
    each: their parent is unknown to the answer, so they are never covered."""
    released, zero_parents, deep, _ = split_rows(rows)
    if level > 0:  # a zero whose "parent" was not released (an empty root) is deep
        known = zero_parents < support.active[level - 1].size
        deep += int(np.count_nonzero(~known))
        zero_parents = zero_parents[known]
    b = [float(x) for x in bounds]
    total = deep * b[level]
    # items at the current level: released rows with (cost, whole) and zero rows by parent
    idx = released
    cost = np.full(idx.size, b[level])
    whole = np.ones(idx.size, dtype=bool)
    zp = zero_parents
    for lv in range(level, 0, -1):
        if idx.size == 0 and zp.size == 0:
            break
        parents = support.parent[lv][idx] if idx.size else np.zeros(0, np.int64)
        keys = np.unique(np.concatenate([parents, zp]))
        pos_r = np.searchsorted(keys, parents)
        pos_z = np.searchsorted(keys, zp)
        child_cost = np.bincount(pos_r, weights=cost, minlength=keys.size) \
            + b[lv] * np.bincount(pos_z, minlength=keys.size)
        n_rel = np.bincount(pos_r, minlength=keys.size)
        n_whole = np.bincount(pos_r, weights=whole.astype(np.float64), minlength=keys.size)
        n_zero = np.bincount(pos_z, minlength=keys.size)
        act = support.active[lv - 1][keys]
        fan = support.fanout[lv - 1][keys]
        all_released = (n_rel == act) & (n_whole == n_rel)
        missing_zeros = fan - act - n_zero
        # more zeros than the parent has (codes that repeat a zero, which the error
        # columns layer before they get here): the parent does not cover them, and each
        # costs its own bound
        via_parent = np.where(all_released & (missing_zeros >= 0),
                              b[lv - 1] + b[lv] * missing_zeros, np.inf)
        cost = np.minimum(child_cost, via_parent)
        whole = all_released & (missing_zeros == 0) & (via_parent <= child_cost)
        idx, zp = keys, np.zeros(0, np.int64)
    return total + float(cost.sum())


__all__ = ["cover_bound"]
