"""Choose a spec's budget split for its workload: view shares and per-level weights.

**Parts.** The budget of a release is spent in *parts*, each with its own share ρ_p:
an InfTDA view has one part per noisy level (plus its noisy root under add/remove, whose
weight the mechanism fixes at 1: ``level_weights`` are relative to it), a Gaussian tree
one per noisy level (``level_weights``); a cascade, b-ary (``btree``) or Laplace tree
view is one part (its levels are split by the mechanism's own rule: Cascade Sampling's
equal node variances, the tree-CDF's optimal per-level budgets). Total ρ is the sum of
the parts, and the spec this module writes says exactly that: view ``weight`` = Σ of its
parts, ``level_weights`` = its parts (the mechanisms normalise them), so the privacy
accounting is the mechanisms' own and is never exceeded (a test rebuilds the per-level
ρ from a release's recorded noise and checks the sum).

**Model of the objective.** The objective is the weighted mean of the workload's
predicted variances, Σ_q w_q Var_q / Σ_q w_q, each from the planner on a dry run
(:mod:`dpsql.workload.predict`). For every Gaussian mechanism of dpsql a query's
predicted variance is Σ_p a_qp / ρ_p over the parts of the view that answers it
(InfTDA's prediction κ_k σ²_k m(1 − m/|V_k|) + σ²_root·frac², a cascade's or optimal
covariance's Var ∝ 1/ρ); for a Gaussian tree it is so to first order (its BLUE weights
depend on the σ_k). The coefficients are read off the error models, not re-derived:
the dry run at the current split, then one probe per part index, in which each view's
own error model has that part's noise variance halved (its ρ doubled) and the planner
predicts the queries that view answers again: a_qp = 2ρ_p·(Var_q − Var'_q). One-part
views need no probe (a_q = Var_q·ρ_v).

**Optimum.** Minimising Σ_p A_p / ρ_p (A_p = Σ_q w_q a_qp) subject to Σ_p ρ_p = ρ gives
ρ_p ∝ √A_p (Lagrange). A pure-ε total is split by ε instead (Var ∝ 1/ε², ε additive):
ε_v ∝ A_v^{1/3}, one part per view. No part is starved: each keeps at least
:data:`FLOOR` of an even split (a view the workload never reads still answers its own
queries). The views that answer each query can change with the split, so the step is
repeated (at most :data:`ROUNDS` times, until a round gains less than 1 %) on the
planner's new choices, and the best spec by the
predicted objective, the curator's own included, is returned. Then each cascade view
within the optimal covariance's size limit tries the other covariance, kept if the
predicted objective falls (views of at most :data:`COVARIANCE_TRIAL_BINS` bins by
default). On request (``fanouts=True``), each range attribute that a tree view splits
b-ary tries every fan-out of :data:`FANOUTS`, each with a budget split of its own (the
depth, and so the parts, change with it), and keeps the best.

Deterministic: dry runs use a fixed generator and the arithmetic has no randomness;
written weights are rounded to :data:`DIGITS` significant digits (any positive weights
are valid; the budget is normalised from them).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Sequence

import numpy as np

from dpsql.accuracy import load
from dpsql.accuracy.optimal_ranges import MAX_OPTIMAL_BINS
from dpsql.errors import InternalError
from dpsql.planner.catalog import Catalog
from dpsql.privacy import Neighbouring, PureDP, ZCDP
from dpsql.spec import Range, ReleaseSpec, View
from dpsql.spec_workload import WorkloadQuery
from dpsql.workload.predict import (Planned, Prediction, dry_catalog, plan_workload,
                                    predict, weighted_mse)

FLOOR = 0.05
ROUNDS = 3
CONVERGED = 0.01  # a round that lowers the objective by less than 1 % is the last
DIGITS = 4
COVARIANCE_TRIAL_BINS = 1024
"""By default, cascade views up to this many bins try the other covariance: the optimal
one's set-up is several dense K×K eigendecompositions (about a second at 1,024 bins on
one core, 10 s at 1,400 on a loaded machine, minutes at 4,096). ``optimise(...,
covariance_bins=)`` and ``dpsql advise --covariance-bins`` raise it, up to
:data:`~dpsql.accuracy.optimal_ranges.MAX_OPTIMAL_BINS`."""
FANOUTS = (2, 4, 8, 16, 32)
"""Fan-outs tried for range attributes under tree views with ``fanouts=True``."""
SPLIT_LEVELS = ("inftda", "gaussian_tree")  # mechanisms whose level_weights are optimised


@dataclass(frozen=True)
class Optimised:
    """The optimiser's result: the spec, and the workload's predictions before/after."""

    spec: ReleaseSpec
    before: tuple[Prediction, ...]
    after: tuple[Prediction, ...]
    changes: tuple[str, ...]  # what changed, one line each (covariances)

    @property
    def objective_before(self) -> float:
        return weighted_mse(self.before)

    @property
    def objective_after(self) -> float:
        return weighted_mse(self.after)


def _n_levels(catalog, name: str) -> int:
    return len(catalog.releases[0].release.views[name].levels)


def _noisy_root(spec: ReleaseSpec) -> bool:
    return Neighbouring.parse(spec.neighbouring) is Neighbouring.ADD_REMOVE


def part_count(spec: ReleaseSpec, view: View, depth: int) -> int:
    """How many parts ``view`` (of ``depth`` levels) spends its budget in."""
    if view.mechanism not in SPLIT_LEVELS or isinstance(spec.budget, PureDP):
        return 1
    return depth + (1 if _noisy_root(spec) else 0)


def current_parts(spec: ReleaseSpec, depths: dict[str, int]) -> dict[str, np.ndarray]:
    """Each view's parts' budgets (ρ, or ε for a pure-ε total) under ``spec``'s weights."""
    total = _total(spec)
    wsum = sum(v.weight for v in spec.views)
    out = {}
    for v in spec.views:
        share = total * float(v.weight / wsum)
        n = part_count(spec, v, depths[v.name])
        if n == 1:
            out[v.name] = np.array([share])
            continue
        lw = [float(w) for w in v.level_weights] if v.level_weights else [1.0] * depths[v.name]
        if v.mechanism == "inftda" and _noisy_root(spec):
            lw = [1.0] + lw
        w = np.asarray(lw, dtype=np.float64)
        if w.size != n:  # a hand-written list of the wrong length: the build refuses it
            w = np.ones(n)
        out[v.name] = share * w / w.sum()
    return out


def _total(spec: ReleaseSpec) -> float:
    b = spec.budget
    return float(b.epsilon) if isinstance(b, PureDP) else float(b.to_zcdp().rho)


def _rounded(x: float) -> Fraction:
    return Fraction(f"{x:.{DIGITS}g}")


def spec_with(spec: ReleaseSpec, parts: dict[str, np.ndarray], exact_total: bool = True
              ) -> ReleaseSpec:
    """``spec`` with view weights and level weights that spend ``parts``. With
    ``exact_total`` the spec keeps its budget (the parts are taken as proportions, and
    weights are rounded to :data:`DIGITS` digits for the curator); otherwise the budget
    becomes their sum and every weight is the exact value of its float (the optimiser's
    probes: a view whose parts did not change then gets exactly the same budget, and its
    dry run is reused)."""
    fmt = _rounded if exact_total else Fraction
    views = []
    scale = max(float(sum(p.sum() for p in parts.values())), 1e-300)
    for v in spec.views:
        p = parts[v.name]
        weight = fmt(float(p.sum()) / scale * len(spec.views)) if exact_total \
            else Fraction(float(p.sum()))
        lw = v.level_weights
        if p.size > 1:
            if v.mechanism == "inftda" and _noisy_root(spec):
                lw = tuple(fmt(float(x / p[0])) for x in p[1:])
            else:
                lw = tuple(fmt(float(x / p.max())) for x in p)
        views.append(replace(v, weight=weight, level_weights=lw))
    out = replace(spec, views=tuple(views))
    if not exact_total:
        total = sum((v.weight for v in views), Fraction(0))
        out = replace(out, budget=PureDP(total) if isinstance(spec.budget, PureDP)
                      else ZCDP(total))
    return out


def _probe_catalog(catalog: Catalog, spec: ReleaseSpec, j: int,
                   parts: dict[str, np.ndarray]) -> Catalog:
    """``catalog`` with part ``j`` of every multi-part view given twice its ρ: the view's
    own error model with that part's noise variance halved (σ² = Δ²/(2ρ) for InfTDA's
    and the Gaussian tree's levels), everything else (the tree, InfTDA's calibration)
    as the dry run made it. No mechanism runs."""
    info = catalog.releases[0]
    root = _noisy_root(spec)
    views = []
    for v in info.views:
        p = parts.get(v.name)
        if p is None or p.size <= j or p.size == 1:
            views.append(v)
            continue
        params = copy.deepcopy(v.model.to_params())
        if params["kind"] == "inftda":
            if root and j == 0:
                params["root_sigma2"] /= 2.0
            else:
                params["sigma2"][j - (1 if root else 0)] /= 2.0
        elif params["kind"] == "tree_counts":
            params["noise_variances"][j + (0 if root else 1)] /= 2.0
        else:  # another kind with parts would be a bug in part_count
            raise InternalError(f"no per-level probe for error model {params['kind']!r}; "
                                "this is a bug, please report")
        views.append(replace(v, model=load(params), predictions={}, reads={}))
    return Catalog((replace(info, views=tuple(views), choices={}),))


def _coefficients(spec: ReleaseSpec, planned: Sequence[Planned], base: Sequence[Prediction],
                  parts: dict[str, np.ndarray], catalog: Catalog) -> dict[str, np.ndarray]:
    """A_p = Σ_q w_q a_qp for every part (module doc: one probe per part index, which
    re-predicts only the queries answered by views that have that part)."""
    pure = isinstance(spec.budget, PureDP)
    power = 2.0 if pure else 1.0
    cost = {name: np.zeros(p.size) for name, p in parts.items()}
    multi = max(p.size for p in parts.values())
    drops: list[dict[int, float]] = []
    for j in range(multi if multi > 1 else 0):
        idx = [i for i, b in enumerate(base) if b.variance is not None
               and any(parts[name].size > j for name, _ in b.views)]
        probe = predict([planned[i] for i in idx], _probe_catalog(catalog, spec, j, parts),
                        fixed=True)
        drops.append({i: base[i].variance - p.variance for i, p in zip(idx, probe)})
    for i, pred in enumerate(base):
        if pred.variance is None:
            continue
        w = float(pred.query.weight) / len(pred.views)
        for name, _level in pred.views:
            p = parts[name]
            if p.size == 1:
                cost[name][0] += w * pred.variance * p[0] ** power
                continue
            for j in range(p.size):
                cost[name][j] += w * max(drops[j].get(i, 0.0), 0.0) * 2.0 * p[j]
    return cost


def _allocate(cost: dict[str, np.ndarray], total: float, pure: bool) -> dict[str, np.ndarray]:
    names = list(cost)
    flat = np.concatenate([cost[n] for n in names])
    score = np.cbrt(flat) if pure else np.sqrt(flat)
    floor = FLOOR * total / flat.size
    free = np.ones(flat.size, dtype=bool)
    alloc = np.full(flat.size, floor)
    for _ in range(flat.size):  # water-filling: parts below the floor get the floor
        budget = total - floor * (~free).sum()
        s = score[free].sum()
        alloc[free] = budget * score[free] / s if s > 0 else budget / free.sum()
        low = free & (alloc < floor)
        if not low.any():
            break
        alloc[low] = floor
        free &= ~low
    out, i = {}, 0
    for n in names:
        out[n] = alloc[i:i + cost[n].size]
        i += cost[n].size
    return out


def optimise(spec: ReleaseSpec, queries: Sequence[WorkloadQuery] | None = None,
             rounds: int = ROUNDS, covariance_bins: int = COVARIANCE_TRIAL_BINS,
             fanouts: bool = False) -> Optimised:
    """The spec whose budget split minimises the workload's predicted weighted MSE
    (module doc), with the predictions before and after. ``fanouts``: also try each
    :data:`FANOUTS` on the range attributes that tree views (not cascades) split, each
    with its own budget split (about one optimisation per candidate)."""
    if queries is None:
        queries = spec.workload.queries if spec.workload else ()
    memo: dict = {}
    catalog = dry_catalog(spec, memo)
    planned = plan_workload(catalog, queries, spec)
    before = predict(planned)
    best, best_pred = _split(spec, planned, before, catalog, memo, rounds)
    changes = []
    if fanouts:
        for name in _split_ranges(spec, best_pred):
            current = best.attributes[name].fanout
            for b in FANOUTS:
                if b == current:
                    continue
                trial = replace(best, attributes={**best.attributes, name: replace(
                    best.attributes[name], fanout=b)}, views=tuple(
                    replace(v, level_weights=None) if name in v.levels else v
                    for v in best.views))  # other depths: level weights start equal
                cat = dry_catalog(trial, memo)
                t_spec, t_pred = _split(trial, planned, predict(planned, cat), cat, memo,
                                        rounds)
                if weighted_mse(t_pred) < weighted_mse(best_pred) * (1 - 1e-9):
                    best, best_pred = t_spec, t_pred
            if best.attributes[name].fanout != current:
                changes.append(f"{name}: fanout = {best.attributes[name].fanout}")
    best, best_pred, more = _covariances(best, planned, best_pred, memo,
                                         min(covariance_bins, MAX_OPTIMAL_BINS))
    return Optimised(best, tuple(before), tuple(best_pred), tuple(changes + more))


def _split_ranges(spec: ReleaseSpec, pred: Sequence[Prediction]) -> list[str]:
    """Range attributes split b-ary by a tree view that answers some query."""
    used = {name for p in pred for name, _ in p.views}
    out = []
    for v in spec.views:
        if v.name in used and v.mechanism != "cascade":
            out += [a for a in v.levels if isinstance(spec.attributes[a], Range)
                    and a not in out]
    return out


def _split(spec: ReleaseSpec, planned: Sequence[Planned], before: list[Prediction],
           catalog: Catalog, memo: dict, rounds: int) -> tuple[ReleaseSpec, list[Prediction]]:
    """View shares and level weights (module doc), from ``spec`` and its predictions."""
    depths = {v.name: _n_levels(catalog, v.name) for v in spec.views}
    pure = isinstance(spec.budget, PureDP)
    best, best_pred = spec, before
    current, pred = spec, before
    for _ in range(rounds):
        parts = current_parts(current, depths)
        cost = _coefficients(current, planned, pred, parts, catalog)
        if not any(c.sum() > 0 for c in cost.values()):
            break
        candidate = spec_with(current, _allocate(cost, _total(spec), pure))
        catalog = dry_catalog(candidate, memo)
        pred = predict(planned, catalog)
        current = candidate
        gain = weighted_mse(pred) < weighted_mse(best_pred) * (1 - CONVERGED)
        if weighted_mse(pred) < weighted_mse(best_pred):
            best, best_pred = candidate, pred
        if not gain:
            break
    return best, best_pred


def _covariances(spec: ReleaseSpec, planned: Sequence[Planned], pred: list[Prediction],
                 memo: dict, max_bins: int):
    """Try the other covariance on every cascade view of at most ``max_bins`` bins."""
    changes = []
    used = {name for p in pred for name, _ in p.views}
    for i, v in enumerate(spec.views):
        if v.mechanism != "cascade" or v.name not in used \
                or spec.attributes[v.levels[0]].bins > max_bins:
            continue
        other = "tree" if v.covariance == "optimal" else "optimal"
        trial = replace(spec, views=spec.views[:i] + (replace(v, covariance=other),)
                        + spec.views[i + 1:])
        tp = predict(planned, dry_catalog(trial, memo))
        if weighted_mse(tp) < weighted_mse(pred) * (1 - 1e-9):
            changes.append(f"{v.name}: covariance = {other!r}")
            spec, pred = trial, tp
    return spec, pred, changes


__all__ = ["FLOOR", "Optimised", "current_parts", "optimise", "part_count", "spec_with"]
