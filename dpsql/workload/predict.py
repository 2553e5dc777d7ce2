"""Predicted error of each workload query under a spec, before any data is read.

Each query is planned as the planner plans it (:mod:`dpsql.planner`: parse, find the
logical-table references, :func:`~dpsql.planner.choose_view.choose_view`) against the
catalog of a dry run (:func:`dpsql.release.build.plan_release`: the same budget split,
trees and mechanisms on an all-zero stand-in, whose error models are exactly a real
build's). The prediction is the planner's own: the predicted standard error of one output
row, from the chosen view's error model (which the planner chose by its 95 % interval);
for a model that gives bounds only, the standard error of a normal with the same 95 %
half-width, (half-width / 1.96) (stated as ``family = "bound"``). A query with several references adds their
variances. A query the spec cannot answer keeps the planner's one-line refusal.

No second error model is written here: everything comes from ``dpsql.accuracy`` through
the planner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Sequence


from dpsql.errors import Error
from dpsql.planner.catalog import Catalog, ReleaseInfo, ViewInfo
from dpsql.planner.choose_view import Choice, choose_view, range_errors
from dpsql.planner.find_references import Reference, find_references
from dpsql.planner.bind_params import bind_params
from dpsql.planner.parse_sql import parse_walked
from dpsql.privacy import rng as make_rng
from dpsql.release.build import attribute_tree, dry_run_row, plan_view, view_budgets
from dpsql.release.store import catalog_rows
from dpsql.release_file import Release, catalog_from_rows
from dpsql.spec import Hierarchy, Range, ReleaseSpec
from dpsql.spec_workload import WorkloadQuery

PRECOMPUTED_BINS = 128  # as dpsql.duck: range views this small get the full range table


@dataclass(frozen=True)
class Planned:
    """One workload query as the planner answers it: per reference the view and level,
    or the refusal."""

    query: WorkloadQuery
    refs: tuple[Reference, ...] = ()
    refused: str | None = None
    needs: frozenset[str] = frozenset()
    """With a refusal from the choice of view: the attributes the query uses together
    (a view over exactly them would answer it: :mod:`dpsql.workload.suggest`)."""


@dataclass(frozen=True)
class Prediction:
    """The predicted error of one query: its variance (one output row) and the views."""

    query: WorkloadQuery
    variance: float | None  # None: refused
    views: tuple[tuple[str, int], ...] = ()  # (view, level) per reference
    family: str = "variance"  # "variance", or "bound" when a view gives bounds only
    refused: str | None = None
    needs: frozenset[str] = frozenset()

    @property
    def rmse(self) -> float | None:
        return None if self.variance is None else self.variance ** 0.5


MEMO_VIEWS = 256


def dry_release(spec: ReleaseSpec, memo: dict | None = None) -> Release:
    """:func:`dpsql.release.build.plan_release`'s catalog, one view at a time: each view
    runs on the all-zero stand-in with its own fixed generator, so that a view's dry run
    depends on the view, its budget share and the release's public settings only and can
    be reused (``memo``, for specs with the same attributes but for range fan-outs, which
    are part of the key) when the optimiser changes another view."""
    trees = {name: attribute_tree(a) for name, a in spec.attributes.items()}
    rows = []
    for view, budget in zip(spec.views, view_budgets(spec)):
        key = (json.dumps(view.to_json(), sort_keys=True), json.dumps(budget.to_json()),
               spec.neighbouring.value, spec.unit.max_rows,
               tuple(getattr(spec.attributes[a], "fanout", None) for a in view.levels))
        row = None if memo is None else memo.get(key)
        if row is None:
            row = plan_view(spec, view, budget, trees, make_rng(0))
            if memo is not None and len(memo) < MEMO_VIEWS:
                memo[key] = row
        rows.append(row)
    return catalog_from_rows("(dry run)", *catalog_rows(
        dry_run_row(spec), sorted(rows, key=lambda v: v["name"])))


def dry_catalog(spec: ReleaseSpec, memo: dict | None = None) -> Catalog:
    """The planner's catalog of the release ``spec`` would build (no data read)."""
    release = dry_release(spec, memo)
    views = []
    for vm in release.views.values():
        v = ViewInfo(spec.name, vm, True, vm.error_model)
        attrs = release.attributes
        ranges = None
        if len(vm.attributes) == 1 and attrs[vm.attributes[0]].kind == "range" \
                and attrs[vm.attributes[0]].bins <= PRECOMPUTED_BINS:
            ranges = range_errors(v, attrs[vm.attributes[0]].bins)
        views.append(replace(
            v, bound_levels=tuple(not v.model.gives_variance(lv.k) for lv in vm.levels),
            null_dropped=frozenset(a for a in vm.attributes if attrs[a].on_null == "drop"),
            range_errors=ranges))
    sizes, determines = _column_facts(spec)
    return Catalog((ReleaseInfo(spec.name, release, tuple(views), sizes, determines),))


def _column_facts(spec: ReleaseSpec):
    """Distinct values per categorical/hierarchy column, and which hierarchy columns
    determine their coarser ones (as :func:`dpsql.duck.attach` reads them from the file)."""
    sizes, determines = [], []
    for a in spec.attributes.values():
        if isinstance(a, Range):
            continue
        if isinstance(a, Hierarchy):
            for i, c in enumerate(a.level_columns):
                values = {p[i] for p in a.paths}
                sizes.append((c, len(values)))
                if i and len(values) == len({p[:i + 1] for p in a.paths}):
                    determines.append((c, tuple(a.level_columns[:i])))
        else:
            sizes.append((a.name, len(a.domain_values)))
    return tuple(sizes), tuple(determines)


def plan_workload(catalog: Catalog, queries: Sequence[WorkloadQuery],
                  spec: ReleaseSpec | None = None) -> list[Planned]:
    """Each query's references (or its refusal), planned once; choices come later."""
    out = []
    for q in queries:
        refs: tuple[Reference, ...] = ()
        try:
            tree, walked = parse_walked(q.sql)
            bind_params(tree, None, walked)
            refs = tuple(find_references(tree, catalog, walked))
            if not refs:
                out.append(Planned(q, refused="reads no private table (nothing to predict)"))
                continue
            for r in refs:
                choose_view(r)  # refusals (no covering view, NULL drops) surface here
            out.append(Planned(q, refs))
        except (Error, RecursionError) as err:
            needs: frozenset[str] = frozenset()
            if refs and ("no single view covers" in str(err) or "in no view" in str(err)):
                needs = frozenset().union(*(r.needed_attributes() for r in refs))
            out.append(Planned(q, refused=_hint(str(err) or type(err).__name__, spec),
                               needs=needs))
    return out


def _hint(message: str, spec: ReleaseSpec | None) -> str:
    """A dry run does not know the value type of a range attribute left to inference
    (it is read from the source at build time): say how to plan such a query."""
    if spec is None or "real-valued attribute" not in message:
        return message
    untyped = [a.name for a in spec.attributes.values()
               if isinstance(a, Range) and a.value_type is None and f"'{a.name}'" in message]
    if not untyped:
        return message
    return (f"{message} (the dry run takes {untyped[0]!r} as real because its type is "
            f"inferred when the release is built; declare type = \"integer\" to plan "
            "this query)")


def predict(planned: Sequence[Planned], catalog: Catalog | None = None,
            fixed: bool = False) -> list[Prediction]:
    """The planner's prediction of each planned query against ``catalog`` (by default
    the one it was planned on). ``fixed``: keep each reference on the view it was first
    given (the optimiser's probes change one part of a view at a time)."""
    swap = _swapper(catalog) if catalog is not None else None
    out = []
    for p in planned:
        if p.refused is not None:
            out.append(Prediction(p.query, None, refused=p.refused, needs=p.needs))
            continue
        var, views, family = 0.0, [], "variance"
        for r in p.refs:
            if swap is not None:
                r = swap(r, choose_view(r).view.name if fixed else None)
            c: Choice = choose_view(r)
            var += c.stderr ** 2
            views.append((c.view.name, c.level))
            if c.view.bound_model(c.level):
                family = "bound"
        out.append(Prediction(p.query, var, tuple(views), family))
    return out


def _swapper(catalog: Catalog):
    info = catalog.releases[0]
    by_name = {v.name: v for v in info.views}

    def swap(ref: Reference, only: str | None) -> Reference:
        cands = tuple(by_name[v.name] for v in ref.candidates if v.name in by_name
                      and (only is None or v.name == only))
        return replace(ref, release=info, candidates=cands)
    return swap


def predict_spec(spec: ReleaseSpec, queries: Sequence[WorkloadQuery] | None = None
                 ) -> list[Prediction]:
    """Plan and predict ``queries`` (default: the spec's workload) under ``spec``."""
    if queries is None:
        queries = spec.workload.queries if spec.workload else ()
    catalog = dry_catalog(spec)
    return predict(plan_workload(catalog, queries, spec))


def weighted_mse(predictions: Sequence[Prediction]) -> float:
    """Σ w·Var / Σ w over the answered queries (the optimiser's objective)."""
    num = sum(float(p.query.weight) * p.variance for p in predictions
              if p.variance is not None)
    den = sum(float(p.query.weight) for p in predictions if p.variance is not None)
    return num / den if den else 0.0


__all__ = ["Planned", "Prediction", "dry_catalog", "plan_workload", "predict",
           "predict_spec", "weighted_mse"]
