"""Making each view of a release agree with the agreed marginals
(:mod:`dpsql.release.reconcile` decides what they are), at its deepest shared level D:
upper levels are the agreed values where shared, sums of level D elsewhere.

* InfTDA views: levels 0..D are the agreed marginal (integer, ≥ 0); below D each
  parent's released children are projected onto the parent's new count (children of a
  parent that had none released: all its public children at 0), so the view stays
  integer, non-negative and consistent. The
  projection is ℓ∞-optimal like InfTDA's IntOpt, but not IntOpt's choice among the
  optimal solutions (the smallest children lose, the largest gain, so a sum of one
  small category over many parents drifts): every child not held at 0 moves by the same
  amount up to one unit, the extra units going by a pseudo-random order from the node
  ids and the parent's new count (:func:`~dpsql.mechanisms.intopt.even_projection`).
  Its error model is not changed here; InfTDA's intervals are calibrated on the final
  counts by a bootstrap of the whole pipeline (:mod:`dpsql.release.bootstrap`).
* Gaussian/Laplace tree views: Gaussian conditioning on level D (:mod:`dpsql.accuracy.
  reconciled` derives it): level D takes the agreed values, the difference flows down
  with the least-squares gains (a child moves by g = Cov(child, parent)/Var(parent) times
  its parent's move), the levels below D are sums of the new leaves, and the error model
  becomes a ``reconciled`` model with the exact new covariance.
* Cascade and b-ary tree views share their total only (their finer levels are bin
  ranges of their own split, and no other kind of view has them): each leaf moves by
  Cov(leaf, total)/Var(total) × (agreed − own), and upper levels are sums of leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpsql import domains
from dpsql.accuracy.reconciled import ReconciledErrorModel
from dpsql.mechanisms.base import PrivateLevel, PrivateTree
from dpsql.mechanisms.intopt import even_projection, public_priority
from dpsql.release import marginals as mg


@dataclass
class ReleasedView:
    """One view's mechanism output, with what reconciliation needs to line it up."""

    name: str
    mechanism: str
    tree: PrivateTree
    dtree: domains.DomainTree | None  # None for range mechanisms (cascade, btree)
    levels: mg.ViewLevels


@dataclass
class Agreed:
    """The agreed values of one shared marginal."""

    key: mg.Key
    codes: np.ndarray        # sorted node codes
    values: np.ndarray       # agreed counts (int64 when integer)
    parent_key: mg.Key | None
    integer: bool
    views: list[str]
    step: dict[str, Any]     # this marginal's part of the error model of C (accuracy)
    chain: set = field(default_factory=set)


def descend(v: ReleasedView, depth: int, marginal: Agreed, spec: Any,
             trees: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Levels 0..depth of ``v`` holding the positive nodes of ``marginal`` (a level of
    ``v`` at ``depth``) and their sums: top-down over the public children of the nodes
    kept at the level above (the nodes InfTDA itself enumerated)."""
    total = int(np.asarray(marginal.values).sum())
    ids = np.zeros(1 if total > 0 else 0, np.int64)
    out = [(ids, np.full(ids.size, total, dtype=np.int64))]
    for lvl in range(1, depth + 1):
        child, _ = v.dtree.children(lvl, ids)
        key = v.levels.keys[lvl]
        coarse = mg.coarsen(marginal.codes, marginal.key, key, spec, trees)
        uniq, inv = np.unique(coarse, return_inverse=True)
        sums = np.bincount(inv, weights=np.asarray(marginal.values, dtype=np.float64),
                           minlength=uniq.size)
        codes = v.levels.codes(lvl, child)
        val = np.zeros(codes.size)
        if uniq.size:
            pos = np.minimum(np.searchsorted(uniq, codes), uniq.size - 1)
            val = np.where(uniq[pos] == codes, sums[pos], 0.0)
        val = np.rint(val).astype(np.int64)
        keep = val > 0
        ids = child[keep]
        out.append((ids, val[keep]))
    return out


def update_integer(v: ReleasedView, depth: int, agreed: dict[mg.Key, Agreed], spec: Any,
                    trees: dict) -> PrivateTree:
    """InfTDA: levels 0..depth from the agreed marginal, then IntOpt top-down."""
    t = v.tree
    top = descend(v, depth, agreed[v.levels.keys[depth]], spec, trees)
    levels = [PrivateLevel(ids, cnt) for ids, cnt in top]
    for lvl in range(depth + 1, t.depth + 1):
        levels.append(_reproject(v.dtree, lvl, levels[-1], t.levels[lvl]))
    return replace(t, levels=tuple(levels))


def _reproject(dtree: domains.DomainTree, lvl: int, parents: PrivateLevel,
               old: PrivateLevel) -> PrivateLevel:
    """Each parent's released children projected onto its new count (an even ℓ∞
    projection: module doc); a parent without
    released children spreads its count over all its public children."""
    par_ids, par_cnt = parents.ids, parents.counts
    if par_ids.size == 0:
        return PrivateLevel(np.zeros(0, np.int64), np.zeros(0, np.int64))
    old_par = dtree.parent(lvl, old.ids) if old.ids.size else old.ids
    pos = np.searchsorted(par_ids, old_par)
    hit = (pos < par_ids.size) & (par_ids[np.minimum(pos, par_ids.size - 1)] == old_par)
    ids, x, seg = old.ids[hit], np.asarray(old.counts)[hit], pos[hit]
    lonely = np.flatnonzero(np.bincount(seg, minlength=par_ids.size) == 0)
    if lonely.size:
        child, idx = dtree.children(lvl, par_ids[lonely])
        ids = np.concatenate([ids, child])
        x = np.concatenate([x, np.zeros(child.size, np.int64)])
        seg = np.concatenate([seg, lonely[idx]])
        order = np.argsort(ids, kind="stable")
        ids, x, seg = ids[order], x[order], seg[order]
    par_cnt = np.asarray(par_cnt, dtype=np.int64)
    # not IntOpt's tie-break, which would take every remainder from the smallest children
    y = even_projection(x.astype(np.int64), seg, par_cnt, public_priority(ids, par_cnt[seg]))
    keep = y > 0
    return PrivateLevel(ids[keep], y[keep].astype(np.int64))


def _chain(a: Agreed, agreed: dict[mg.Key, Agreed]) -> list[Agreed]:
    out = [a]
    while out[-1].parent_key is not None:
        out.append(agreed[out[-1].parent_key])
    return out[::-1]


def _chain_params(a: Agreed, agreed: dict[mg.Key, Agreed]) -> list[dict[str, Any]]:
    return [c.step for c in _chain(a, agreed)]


def _exact(a: Agreed, agreed: dict[mg.Key, Agreed]) -> bool:
    """The stored model is exact when the chain is the total alone (an InfTDA root is
    plain discrete Gaussian noise) or holds no InfTDA view (accuracy/reconciled.py)."""
    chain = _chain(a, agreed)
    return len(chain) == 1 or not any(c.integer for c in chain)


def update_tree(v: ReleasedView, levels: list[int], agreed: dict[mg.Key, Agreed],
                 node_variances: bool = True) -> PrivateTree:
    """Gaussian/Laplace tree: condition on level D, gains down, sums up."""
    t = v.tree
    D = max(levels)
    a = agreed[v.levels.keys[D]]
    node = np.searchsorted(a.codes, v.levels.codes(D, t.levels[D].ids))
    model = ReconciledErrorModel(t.error_model.to_params(), D, _chain_params(a, agreed),
                                 node, exact=_exact(a, agreed))
    shape = t.error_model.shape()
    counts = [np.asarray(lv.counts, dtype=np.float64).copy() for lv in t.levels]
    at_d = np.asarray(a.values, dtype=np.float64)[node]
    delta = at_d - counts[D]
    for lvl in range(D + 1, t.depth + 1):
        delta = delta[shape.parents[lvl - 1]] * shape.g[lvl]
    counts[D] = at_d
    if D < t.depth:
        counts[t.depth] = counts[t.depth] + delta
    for lvl in range(t.depth - 1, -1, -1):
        if lvl == D:
            continue
        if lvl < D and lvl in levels:
            b = agreed[v.levels.keys[lvl]]
            counts[lvl] = np.asarray(b.values, dtype=np.float64)[
                np.searchsorted(b.codes, v.levels.codes(lvl, t.levels[lvl].ids))]
        else:  # ``parents[lvl]`` are the parents of level lvl + 1's nodes
            counts[lvl] = np.bincount(shape.parents[lvl], weights=counts[lvl + 1],
                                      minlength=counts[lvl].size)
    new = tuple(PrivateLevel(lv.ids, counts[k], model.node_variances(k) if node_variances
                             else lv.variance) for k, lv in enumerate(t.levels))
    return replace(t, levels=new, error_model=model)


def update_range(v: ReleasedView, total: Agreed) -> PrivateTree:
    """Cascade / b-ary tree: leaves move by Cov(leaf, total)/Var(total) × the gap."""
    t = v.tree
    K = int(getattr(t.error_model, "bins"))
    spans = list(t.bin_spans or ())
    model = ReconciledErrorModel(t.error_model.to_params(), 0, _chain_params(total, {}),
                                 [0], exact=_exact(total, {}), spans=spans)
    v_t = float(t.error_model.sum_variance(0, np.zeros(1, np.int64)).value)
    leaves = t.levels[-1]
    lo = leaves.ids * spans[-1]
    hi = np.minimum(lo + spans[-1], K)
    gap = float(np.asarray(total.values, dtype=np.float64)[0]) - float(t.levels[0].counts[0])
    move = model.cov_with_total(lo, hi) / v_t * gap if v_t > 0 else np.zeros(lo.size)
    leaf_counts = np.asarray(leaves.counts, dtype=np.float64) + move
    dense = np.zeros(K)
    dense[lo] = leaf_counts
    cum = np.concatenate([[0.0], np.cumsum(dense)])
    bounds = []
    for k, lv in enumerate(t.levels):
        a = lv.ids * spans[k]
        bounds.append((a, np.minimum(a + spans[k], K)))
    var = model.range_variance(np.concatenate([b[0] for b in bounds]),
                               np.concatenate([b[1] for b in bounds]))
    new, at = [], 0
    for k, lv in enumerate(t.levels):
        if k == 0:
            counts = np.asarray(total.values, dtype=np.float64)[:1]
        elif k == t.depth:
            counts = leaf_counts
        else:
            counts = cum[bounds[k][1]] - cum[bounds[k][0]]
        new.append(PrivateLevel(lv.ids, counts, var[at:at + lv.ids.size]))
        at += lv.ids.size
    return replace(t, levels=tuple(new), error_model=model)


__all__ = ["Agreed", "ReleasedView", "descend", "update_integer", "update_range", "update_tree"]
