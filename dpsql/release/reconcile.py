"""One truth per release: make every pair of views agree on every marginal they share.

Each view of a release is released by its own mechanism with its own share of the
budget, so two views answer "how many trips in region R1" (or the total) with two
different noisy numbers. This step runs at release time, after every mechanism and
before the level tables are written, and changes the released values so that all views
sharing a marginal (:mod:`dpsql.release.marginals`: the total, and every attribute
prefix two views both have) hold exactly the same counts for it.

**Privacy.** It reads only the mechanisms' outputs (released counts, their public error
models and the public domains), never the data: it is post-processing, costs no budget,
and the release keeps the guarantee of its views' composition. It draws no randomness.

**Combination** (top-down along the shared marginals, coarse first: the total, then each
finer marginal given its agreed parents):

1. each view first moves to the agreed parents: y' = y + G·(P − y_parent), G being its
   own gain from its parent level (least-squares gains for real-valued views; InfTDA's
   linear "support" model, G = 1/A per level, A = the parent's released children);
2. the views' y' are combined by precision: r̂ = Σ λᵥ y'ᵥ, λᵥ ∝ 1/vᵥ, with vᵥ the node's
   variance given the parent level (at the total: its own variance). For InfTDA that is
   the support model: v(root) = σ²_root (add/remove) or 0 (substitute); a released node
   i of level l whose parent u has Aᵤ released children has
   vᵢ = σ²_{l−1}(1 − 1/Aᵤ) + vᵤ/Aᵤ², started from vᵤ = 0 at the parent level; a node InfTDA
   did not release counts as 0 with the variance of one noise draw, σ²_{l−1}, and so
   does a node it released as the only child of a parent with other public children
   (vᵢ = σ²_{l−1} + vᵤ): the support model would call it exact given its parent, but its
   zero siblings may hide counts, or it may be a false positive (measured: a false 1 in
   an empty age bin, taken as exact, fixed a Gaussian tree's reconciled leaves at
   (1, 0, …, 0) with a 95% band of 10⁻⁷). A view whose node is exact (v = 0, the public
   total under ``substitute``) gives its value;
3. each node moves towards its agreed parent by its share of the group's combined
   variance w = 1/Σ 1/vᵥ: r = r̂ + g(P − Σ_sib r̂), g = w/Σ_sib w, so that siblings sum to P
   exactly;
4. when an InfTDA view shares the marginal its values must be integers: the total is
   rounded (and kept ≥ 0), and each sibling group is rounded (kept ≥ 0) and projected
   onto its integer parent by an even ℓ∞ projection
   (:func:`~dpsql.mechanisms.intopt.even_projection`: every child not held at 0 moves
   alike up to one unit, the extra units by a pseudo-random order from public values;
   IntOpt's own choice would take them from the smallest children every time), which
   keeps rounded values that already sum to P unchanged.

A marginal is agreed only where it lies directly below its agreed parent marginal in
every view that has it. The two trees of an origin/destination release both have the
(work region, home region) table, but at level 2, under a level (work region) the other
tree does not have: agreeing on it would make each tree's level 1 the sum of a table
that mixes the other tree's finer noise, and those sums are less accurate than the
tree's own level (measured: a worker municipality's home-province counts got worse).
Such a marginal is listed as ``not_reconciled`` with the reason, and the trees agree on
their total. A marginal whose views reach it from different agreed marginals (a view [a, b] and a
view [b, a] sharing a × b while [a] is agreed with a third view) is left out and listed
as ``not_reconciled`` with the reason, as is an integer marginal under a real-valued one:
both would need a step (raking, integer rounding under real parents) this module does
not take.

**Making each view agree** at its deepest shared level, and below it:
:mod:`dpsql.release.reconcile_views`.

**Exact, not to float rounding.** The float arithmetic above leaves a real-valued
view's leaves summing to its agreed values only to rounding (a Cascade total of
19999.999999999993 for an agreed 20000). Given the release's count grid
(:mod:`dpsql.release.exact_sums`), each real-valued agreed marginal is put on the grid
here, once, in the order of its public codes, its sibling groups summing exactly to
their agreed parents; the build then puts every real-valued view on the same grid
top-down, which keeps these values as they are (the rule is idempotent) and makes every
level below them sum to them exactly. Two views sharing a marginal therefore hold the
same doubles for it, and any sum of their nodes is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpsql import domains
from dpsql.accuracy.reconciled import gains
from dpsql.errors import InternalError
from dpsql.mechanisms.base import PrivateTree
from dpsql.mechanisms.intopt import even_projection, public_priority
from dpsql.release import marginals as mg
from dpsql.release.exact_sums import from_units, snap_level, to_units
from dpsql.release.reconcile_views import (Agreed, ReleasedView, descend, update_integer,
                                           update_range, update_tree)
from dpsql.spec import own_population_views

INTEGER_MECHANISMS = ("inftda",)
TREE_MECHANISMS = ("inftda", "gaussian_tree", "laplace_tree")


def reconcile(views: list[ReleasedView], spec: Any,
              trees: dict[str, domains.DomainTree], node_variances: bool = True,
              grid: int | None = None) -> tuple[dict[str, PrivateTree], dict]:
    """The views' trees after reconciliation (only changed ones are returned) and the
    record of what was agreed: ``{"marginals": [...], "not_reconciled": [...]}``.
    ``node_variances=False`` keeps a real-valued tree's old per-node variances (its
    error model is still the reconciled one): for the calibration bootstrap's replicates,
    which read counts only. The reconciled variances of every node of level D cost
    O(n²) in its n nodes (accuracy/reconciled.py, ``posterior``): 66 s of a 68 s build
    for InfTDA and a Gaussian tree over a 50 × 50 domain, 33 times over.

    ``grid``: the release's count grid exponent s (:mod:`dpsql.release.exact_sums`).
    Each real-valued agreed marginal is then put on the grid 2^−s once, here, its
    sibling groups summing exactly to their agreed parents, so that every view that
    shares it holds the same doubles and their sums are exact (None: left as computed,
    for the calibration bootstrap's replicates, which compare InfTDA counts only)."""
    members: dict[mg.Key, list[tuple[int, int]]] = {}
    for i, v in enumerate(views):
        for k, key in enumerate(v.levels.keys):
            if key is not None and (v.mechanism in TREE_MECHANISMS or k == 0):
                members.setdefault(key, []).append((i, k))
    shared = [k for k, m in members.items() if len({i for i, _ in m}) > 1]
    agreed: dict[mg.Key, Agreed] = {}
    skipped = []
    for key in mg.order(shared, spec, trees):
        group = members[key]
        result = _agree(key, group, views, agreed, spec, trees, grid)
        if isinstance(result, str):
            skipped.append({"marginal": mg.label(key, spec),
                            "views": sorted({views[i].name for i, _ in group}),
                            "reason": result})
        else:
            agreed[key] = result
    out: dict[str, PrivateTree] = {}
    for v in views:
        levels = [k for k, key in enumerate(v.levels.keys) if key in agreed
                  and (v.mechanism in TREE_MECHANISMS or k == 0)]
        if not levels:
            continue
        record = [{"level": k, "marginal": mg.label(v.levels.keys[k], spec),
                   "with": [n for n in agreed[v.levels.keys[k]].views if n != v.name]}
                  for k in levels]
        if v.mechanism in INTEGER_MECHANISMS:
            tree = update_integer(v, max(levels), agreed, spec, trees)
        elif v.mechanism in TREE_MECHANISMS:
            tree = update_tree(v, levels, agreed, node_variances)
        else:
            tree = update_range(v, agreed[()])
        info = {**tree.info, "reconciled": {"marginals": record, "deepest_level": max(levels),
                                           "error_model": tree.error_model.kind}}
        out[v.name] = replace(tree, info=info)
    summary = {"marginals": [{"marginal": mg.label(a.key, spec), "views": a.views,
                              "integer": a.integer} for a in agreed.values()],
               "not_reconciled": skipped}
    return out, summary


def reconcile_release(spec: Any, trees: dict[str, domains.DomainTree],
                      outputs: list[tuple[PrivateTree, domains.DomainTree | None]],
                      node_variances: bool = True, grid: int | None = None
                      ) -> list[tuple[PrivateTree, domains.DomainTree | None]]:
    """The build's step: each view's (tree, domain tree) after :func:`reconcile`, in the
    order of ``spec.views``; a changed view's ``info["reconciled"]`` says what it agreed
    on, with whom, and (``release``) what the whole release agreed on."""
    released = [ReleasedView(view.name, view.mechanism, tree, dtree,
                             mg.ViewLevels(spec, view, dtree, trees))
                for view, (tree, dtree) in zip(spec.views, outputs)]
    # a view that drops an attribute's NULL rows counts another population (its own
    # total): it agrees with no other view
    own = own_population_views(
        ((v.name, v.levels) for v in spec.views),
        {a: getattr(attr, "on_null", "error") for a, attr in spec.attributes.items()})
    changed, summary = reconcile([r for r in released if r.name not in own], spec, trees,
                                 node_variances, grid)
    out = []
    for view, (tree, dtree) in zip(spec.views, outputs):
        if view.name in changed:
            new = changed[view.name]
            tree = replace(new, info={**new.info, "reconciled": {
                **new.info["reconciled"], "release": summary}})
        out.append((tree, dtree))
    return out


# ----------------------------------------------------------------------------- members
@dataclass
class _Member:
    """One view's nodes of a shared marginal (its level k), seen from its level j of the
    parent marginal (module docstring, step 1; accuracy/reconciled.py, the model)."""

    ids: np.ndarray      # the view's level-k node ids (released ones for InfTDA)
    y: np.ndarray        # their counts
    cv: np.ndarray       # variance given the view's level j (unconditional at the total)
    G: np.ndarray        # gain from the level-j ancestor (0 at the total)
    anc: np.ndarray      # position of the level-j ancestor among the view's level-j ids
    steps: list[dict[str, Any]]  # per level k..j+1: z, g, parent, n_up
    miss: float          # variance of a node the view did not release


def _level_shape(v: ReleasedView, lvl: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(parent position, z, g, sole) of the nodes of level ``lvl``: the least-squares
    arrays of a Gaussian/Laplace tree, or InfTDA's linear support model on released
    nodes; ``sole`` marks an InfTDA node released as the only child of a parent that has
    other public children (step 2 of the module doc: not known exactly given its parent)."""
    t = v.tree
    if v.mechanism in INTEGER_MECHANISMS:
        ids = t.levels[lvl].ids
        par = v.dtree.parent(lvl, ids) if ids.size else ids
        up = t.levels[lvl - 1].ids
        pos = np.searchsorted(up, par)
        a = np.bincount(pos, minlength=up.size).astype(np.float64)
        sigma2 = float(t.info["sigma2_levels"][lvl - 1])
        public = v.dtree.n_children(lvl, up) if up.size else np.zeros(0, np.int64)
        sole = (a[pos] == 1) & (public[pos] > 1)
        return pos, np.full(ids.size, sigma2), 1.0 / a[pos], sole
    shape = t.error_model.shape()
    return (shape.parents[lvl - 1], shape.z[lvl], shape.g[lvl],
            np.zeros(shape.z[lvl].size, bool))


def _member(v: ReleasedView, j: int | None, k: int) -> _Member:
    t = v.tree
    lv = t.levels[k]
    root = t.info.get("sigma2_root") if v.mechanism in INTEGER_MECHANISMS else None
    # a node InfTDA did not release is 0 with the variance of its own noise draw; at the
    # root that is σ²_root (a noisy total clamped at 0 releases an empty level 0: taking
    # it as exact would fix every view's total at 0 with a variance of 1/12)
    miss = float(t.info["sigma2_levels"][k - 1]) if (
        v.mechanism in INTEGER_MECHANISMS and k) else float(root or 0.0)
    if j is None:  # the total: no parent
        if v.mechanism in INTEGER_MECHANISMS:
            cv = np.full(lv.ids.size, float(root) if root is not None else 0.0)
        else:
            cv = np.asarray(lv.variance, dtype=np.float64)
        return _Member(lv.ids, np.asarray(lv.counts), cv, np.zeros(lv.ids.size),
                       np.zeros(lv.ids.size, np.int64), [], miss)
    n_j = t.levels[j].ids.size
    cv, G, anc = np.zeros(n_j), np.ones(n_j), np.arange(n_j, dtype=np.int64)
    steps = []
    for lvl in range(j + 1, k + 1):
        pos, z, g, sole = _level_shape(v, lvl)
        Z = np.bincount(pos, weights=z, minlength=cv.size)[pos]
        cv = np.where(sole, z + g * g * cv[pos],
                      np.where(Z > 0, np.maximum(z - g * g * (Z - cv[pos]), 0.0), 0.0))
        G, anc = G[pos] * g, anc[pos]
        step = {"z": z.tolist(), "g": g.tolist(), "parent": pos.tolist(),
                "n_up": int(t.levels[lvl - 1].ids.size)}
        if sole.any():
            step["sole"] = sole.tolist()
        steps.insert(0, step)
    return _Member(lv.ids, np.asarray(lv.counts), cv, G, anc, steps, miss)


# --------------------------------------------------------------------------- combining
def _agree(key: mg.Key, group: list[tuple[int, int]], views: list[ReleasedView],
           agreed: dict[mg.Key, Agreed], spec: Any, trees: dict,
           grid: int | None = None) -> Agreed | str:
    integer = any(views[i].mechanism in INTEGER_MECHANISMS for i, _ in group)
    parent_key, at = None, [None] * len(group)
    if key:
        at = [next(j for j in range(k - 1, -1, -1) if views[i].levels.keys[j] in agreed)
              for i, k in group]
        gaps = sorted({views[i].name for (i, k), j in zip(group, at) if k != j + 1})
        if gaps:
            return ("not directly below its agreed parent marginal in " + ", ".join(gaps)
                    + ": agreeing on it would replace the levels in between with sums of "
                    "the other views' finer counts, which are less accurate")
        nearest = {views[i].levels.keys[j] for (i, _), j in zip(group, at)}
        if len(nearest) > 1:
            return ("its views reach it from different agreed marginals ("
                    + ", ".join(sorted(mg.label(p, spec) for p in nearest)) + ")")
        parent_key = nearest.pop()
        if integer and not agreed[parent_key].integer:
            return (f"integer (InfTDA) under a real-valued agreed "
                    f"{mg.label(parent_key, spec)}")
    members = [_member(views[i], j, k) for (i, k), j in zip(group, at)]
    codes = [views[i].levels.codes(k, m.ids) for (i, k), m in zip(group, members)]
    extra = [np.zeros(0, np.int64)]
    if parent_key is not None and all(views[i].mechanism in INTEGER_MECHANISMS
                                      for i, _ in group):
        extra.append(_public_children(key, parent_key, group, views, agreed[parent_key],
                                      spec, trees))
    universe = np.unique(np.concatenate(codes + extra))
    n = universe.size
    pa = agreed[parent_key] if parent_key is not None else None
    num, prec, kappa = np.zeros(n), np.zeros(n), np.zeros(n)
    exact_sum, exact_n = np.zeros(n), np.zeros(n)
    parts = []
    for (i, k), j, m, c in zip(group, at, members, codes):
        pos = np.searchsorted(universe, c)
        y = np.zeros(n)
        y[pos] = m.y
        if pa is not None:  # move to the agreed parents first: y' = y + G (P − y_parent)
            t = views[i].tree
            pcode = views[i].levels.codes(j, t.levels[j].ids)
            ppos = np.searchsorted(pa.codes, pcode)
            p_val = np.asarray(pa.values, dtype=np.float64)[np.minimum(ppos, pa.codes.size - 1)]
            p_val = np.where(pa.codes[np.minimum(ppos, pa.codes.size - 1)] == pcode, p_val, 0.0)
            own = np.asarray(t.levels[j].counts, dtype=np.float64)
            y[pos] = m.y + m.G * (p_val - own)[m.anc]
        var = np.full(n, m.miss)
        var[pos] = m.cv
        node = np.full(n, -1, np.int64)
        node[pos] = np.arange(pos.size)
        g_full = np.zeros(n)
        g_full[pos] = m.G
        zero = var <= 0
        exact_sum += np.where(zero, y, 0.0)
        exact_n += zero
        p = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, var))
        num += p * y
        prec += p
        parts.append((p, zero, g_full, node, m))
    has_exact = exact_n > 0
    est = np.where(has_exact, exact_sum / np.maximum(exact_n, 1),
                   num / np.where(prec > 0, prec, 1.0))
    w = np.where(has_exact, 0.0, 1.0 / np.where(prec > 0, prec, 1.0))
    step_members = []
    for p, zero, g_full, node, m in parts:
        lam = np.where(has_exact, zero / np.maximum(exact_n, 1), p * w)
        kappa += lam * g_full
        step_members.append({"lam": lam.tolist(), "node": node.tolist(), "miss": m.miss,
                             "size": int(m.ids.size), "steps": m.steps})
    if pa is None:
        values = np.maximum(np.rint(est), 0).astype(np.int64) if integer else est
        if grid is not None and not integer:  # the total on the grid (exact_sums.py)
            values = from_units(np.rint(np.ldexp(values, grid)).astype(np.int64), grid)
        # rounding adds an error close to uniform on ±0.5, nearly independent of the
        # estimate when its standard deviation is ≥ 1 (Sheppard): variance 1/12; an exact
        # total (public under substitute: w = 0) is a whole count, and rounds to itself
        rounding = 1.0 / 12.0 if integer and float(w[0]) > 0 else 0.0
        step: dict[str, Any] = {"w": w.tolist(), "var": float(w[0]) + rounding}
    else:
        pc = mg.coarsen(universe, key, parent_key, spec, trees)
        parent = np.searchsorted(pa.codes, pc)
        found = (parent < pa.codes.size) & (pa.codes[np.minimum(parent, pa.codes.size - 1)] == pc)
        if not found.all():
            raise InternalError("a shared node has no agreed parent; this is a bug, please "
                                "report")
        values = _towards_parents(est, w, parent, pa.values, integer)
        if grid is not None and not integer:  # exact sums (exact_sums.py)
            values = from_units(snap_level(values, parent, to_units(pa.values, grid), grid),
                                grid)
        step = {"w": w.tolist(), "parent": parent.tolist(), "kappa": kappa.tolist(),
                "members": step_members}
    names = sorted({views[i].name for i, _ in group})
    chain = {key} | (pa.chain if pa is not None else set())
    return Agreed(key, universe, values, parent_key, integer, names, step, chain)


def _towards_parents(est: np.ndarray, w: np.ndarray, parent: np.ndarray,
                     parent_values: np.ndarray, integer: bool) -> np.ndarray:
    """Step 2 (and 3 for integers): each sibling group sums to its agreed parent."""
    n_par = parent_values.size
    cnt = np.bincount(parent, minlength=n_par)
    if np.any((cnt == 0) & (np.asarray(parent_values) != 0)):
        raise InternalError("an agreed parent has no children to share its count; this is "
                            "a bug, please report")
    g, _ = gains(w, parent, n_par)
    gap = np.asarray(parent_values, dtype=np.float64) - np.bincount(
        parent, weights=est, minlength=n_par)
    out = est + g * gap[parent]
    if not integer:
        return out
    order = np.argsort(parent, kind="stable")
    pv = np.asarray(parent_values, dtype=np.int64)
    y = even_projection(np.maximum(np.rint(out[order]), 0).astype(np.int64), parent[order],
                        pv, public_priority(order, pv[parent[order]]))
    result = np.empty_like(y)
    result[order] = y
    return result


def _public_children(key: mg.Key, parent_key: mg.Key, group: list[tuple[int, int]],
                     views: list[ReleasedView], parent: Agreed, spec: Any,
                     trees: dict) -> np.ndarray:
    """Codes of every public node of ``key`` under a positive agreed parent, found in a
    view that has the parent marginal as a level (only when every view of the group is
    sparse: a dense view already lists every node)."""
    for i, k in group:
        v = views[i]
        j = next((j for j in range(k) if v.levels.keys[j] == parent_key), None)
        if j is not None:
            ids = descend(v, j, parent, spec, trees)[-1][0]
            for lvl in range(j + 1, k + 1):
                ids, _ = v.dtree.children(lvl, ids)
            return v.levels.codes(k, ids)
    return np.zeros(0, np.int64)


__all__ = ["reconcile", "reconcile_release"]
