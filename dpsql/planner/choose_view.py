"""Pass 3: choose the view and the level that answer a reference.

**Covering.** A view covers a reference when every attribute it uses (label columns,
range filters, aggregated binned attributes) is one of the view's attributes.

**Level.** The level read is the shallowest one at which every used label column is
resolved: grouping by a prefix of the view's levels reads that level's table, any other
subset reads the deepest level it needs (for a view ordered geo → mode, ``GROUP BY mode``
reads the leaves). A binned attribute that is only filtered, with bounds on the bin grid
of a coarser level, reads that coarser level (fewer nodes: the minimal cover for bound
models); unaligned bounds and SUM/AVG/quantiles read the attribute's finest bins.

**Predicted error.** Among covering views the planner picks the smallest predicted 95 %
half-width of one output row, from each view's own error model (no data): for a range
view queried without grouping, ``range_variance`` of the query's bin range (of each of
its disjoint pieces, with their covariances, for ``NOT BETWEEN`` or a scattered ``IN``);
otherwise ``m`` nodes of the chosen level, with ``m`` = level size / number of groups ×
filter selectivity (the pieces' widths), as ``sum_bound(level, m nodes, 0.05)`` for bound models,
``1.96·sqrt(sum_variance(level, m sibling nodes))`` for variance models, and the
Laplace-sum quantile of the same nodes for Laplace-family views (``btree``,
``laplace_tree``), which is what their intervals are (a prediction to rank views; the
error columns themselves use the row's actual nodes). Ties go to the
shallower level, then to the view name.

**Speed.** The error models are numpy code: one evaluation costs 10-200 µs, several per
query. The predictions of one-attribute range views are therefore precomputed for every
bin range at attach time (:func:`range_errors`; up to 128 bins, larger ones are memoized
by bin range), and the ``m``-node predictions are memoized on the attached view by
``(level, m)``: a pure function of public parameters,
shared by every query that groups or filters alike. The choice itself is memoized on the
attached release by the reference's signature (candidate views, grouped columns, measured
attributes, range filters with their bounds, attributes whose values COUNT(x) counts), the
only inputs it has. Neither is a plan
cache: every query is still parsed, checked, rewritten and rendered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dpsql.accuracy.laplace_sum import half_width
from dpsql.domains.bin_edges import bin_edge
from dpsql.domains.calendar import bin_span_of, grid_index, trunc_aligned, unit_count
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.catalog import ReleaseInfo, ViewInfo
from dpsql.planner.dropped_nulls import unsafe_view_error
from dpsql.planner.find_references import RangeFilter, Reference

Z95 = 1.959963984540054
MAX_MEMO = 4096  # (level, m) predictions per attached view, choices per attached release


@dataclass(frozen=True)
class Choice:
    """The view and level that answer one reference."""

    view: ViewInfo
    level: int
    aligned: bool  # every range filter falls on the bin grid of ``level`` (no weights)
    predicted: float  # predicted 95 % half-width of one output row
    candidates: tuple[tuple[str, int, float], ...]  # (view, level, predicted) per candidate
    stderr: float = math.nan
    """The predicted standard error of one output row (for a model that gives bounds
    only, its 95 % half-width / 1.96): the workload's variance (dpsql/workload)."""


class Predicted(NamedTuple):
    """A view's predicted 95 % half-width of one output row, and its standard error."""

    half: float
    stderr: float


def choose_view(ref: Reference) -> Choice:
    """The view and level with the smallest predicted error among those covering
    ``ref``: a function of the candidate views and of which attributes ``ref`` groups,
    filters by range (with its bin range) and measures, memoized on the attached release
    by exactly that signature (public facts only, like the predictions it ranks by)."""
    key = (tuple([v.meta.name for v in ref.candidates]), ref.columns, ref.measured,
           ref.ranges, ref.trunc_units, ref.counted)  # every input of needed_attributes
    if ref.bins or ref.join_filters:  # the bucket edges of each grouped binned attribute
        key += (tuple(g.signature() for g in ref.bins + ref.join_filters),)
    if any(v.null_dropped for v in ref.candidates):  # which views hold the rows counted
        key += (ref.non_null,
                frozenset((g.kind, g.attribute, g.skips) for g in ref.aggregates))
    memo = ref.release.choices
    hit = memo.get(key)
    if hit is None:
        hit = _choose(ref)
        if len(memo) < MAX_MEMO:
            memo[key] = hit
    return hit


def _choose(ref: Reference) -> Choice:
    needed = ref.needed_attributes()
    covering = [v for v in ref.candidates if needed <= v.attribute_set]
    safe = [v for v in covering if ref.null_safe(v)]
    if covering and not safe:
        raise unsafe_view_error(ref, covering[0])
    covering = safe
    if not covering:
        missing = sorted(needed - set().union(*(set(v.meta.attributes)
                                                for v in ref.candidates)))
        names = ", ".join(f"{v.name} ({', '.join(v.meta.attributes)})" for v in ref.candidates)
        what = (f"attribute(s) {', '.join(missing)} are in no view" if missing else
                f"no single view covers {', '.join(sorted(needed))} together")
        raise UnsupportedQueryError(
            f"{what} of the table {ref.table.name!r}; the views are: {names}. Query "
            "attributes that one view covers, or split the query")
    # per range filter, computed once for all candidate views: the leaf-grid index of
    # each bound inside the domain (None: off the grid) and the covering bin range
    edges = {r.attribute: _grid_edges(ref.release, r) for r in ref.ranges}
    bins = {r.attribute: bin_range(ref.release, r) for r in ref.ranges}
    scored = []
    for v in covering:
        level, aligned = _level_for(v, ref, edges)
        scored.append((_predict(v, level, ref, bins), level, v.name, v, aligned))
    # ties broken by level, then name; a half within a relative 1e-9 of the smallest is
    # a tie with it: views that reconciliation made agree (every view's total) predict
    # the same variance up to the last bits of float arithmetic, which differ between
    # numpy builds, and the plan must not (a COUNT(*) read from another view on another
    # machine). Anchored on the smallest, not rounded, so no tie straddles a rounding edge
    least = min(s[0].half for s in scored)
    scored.sort(key=lambda s: (least if s[0].half <= least * (1 + 1e-9) else s[0].half,
                               s[1], s[2]))
    best = scored[0]
    return Choice(best[3], best[1], best[4], best[0].half,
                  tuple((s[2], s[1], s[0].half) for s in scored), best[0].stderr)


def _level_for(v: ViewInfo, ref: Reference,
               edges: dict[str, tuple[int | None, ...]] | None = None) -> tuple[int, bool]:
    if edges is None:
        edges = {r.attribute: _grid_edges(ref.release, r) for r in ref.ranges}
    levels = v.meta.levels
    first = v.column_levels  # column -> first level resolving it (precomputed per view)
    k = 1
    for c in ref.columns:
        kc = first.get(c)
        if kc is None:  # not a label of this view (cannot happen for a covering view)
            kc = next(lv.k for lv in levels if c in lv.columns or
                      (lv.kind != "range" and c == lv.attribute and lv.kind == "categorical"))
        k = max(k, kc)
    for a, unit in ref.trunc_units:  # date_trunc: the coarsest level whose nodes each
        meta = ref.release.attributes[a]  # lie inside one unit (the leaves always do)
        own = v.attribute_levels.get(a, ())
        k = max(k, next((lv.k for lv in own if trunc_aligned(meta, unit, lv.span or 1)),
                        own[-1].k))
    aligned = True
    ranged = {r.attribute: r for r in ref.ranges}
    measured = ref.measured
    by_attribute = v.attribute_levels
    for a in set(ranged) | measured:
        own = list(by_attribute.get(a, ()))
        if a in measured:
            k = max(k, own[-1].k)
            aligned = aligned and _on_grid(edges.get(a, ()), own[-1].span or 1)
            continue
        fit = next((lv for lv in own if _on_grid(edges[a], lv.span or 1)), None)
        if fit is None:
            k, aligned = max(k, own[-1].k), False
        else:
            k = max(k, fit.k)
    for g in ref.bins + ref.join_filters:  # the coarsest level whose nodes lie inside
        # one bucket each (or inside or outside a join's condition on the attribute)
        fit = next((lv for lv in by_attribute.get(g.attribute, ())
                    if g.fits(lv.span or 1)), None)
        k = max(k, (fit or by_attribute[g.attribute][-1]).k)
    if not aligned:
        return k, False
    # a deeper level chosen for another attribute: check alignment there too
    for a in ranged:
        if not _on_grid(edges[a], _span_at(v, a, k)):
            return k, False
    return k, True


def _span_at(v: ViewInfo, attribute: str, k: int) -> int:
    own = [lv for lv in v.attribute_levels.get(attribute, ()) if lv.k <= k]
    return (own[-1].span or 1) if own else 1


def _aligned(release: ReleaseInfo, r: RangeFilter | None, span: int) -> bool:
    """True when every bound of ``r`` inside the domain is an edge of ``span``-bin nodes."""
    return r is None or _on_grid(_grid_edges(release, r), span)


def _grid_edges(release: ReleaseInfo, r: RangeFilter) -> tuple[int | None, ...]:
    """The leaf-bin edge index (:func:`grid_index`) of each bound of ``r`` strictly
    inside the domain; None for a bound off the grid. Unbounded sides and bounds at or
    beyond the domain's ends are left out: they align with any span."""
    a = release.attributes[r.attribute]
    return tuple(grid_index(a, x) for x in r.edges() if a.lower < x < a.upper)


def _on_grid(edges: tuple[int | None, ...], span: int) -> bool:
    # exact: a near-edge bound interpolates
    return all(b is not None and not b % span for b in edges)


def bin_range(release: ReleaseInfo, r: RangeFilter) -> tuple[int, int]:
    """The smallest range of leaf bins [b0, b1) that contains the filter's interval: b0
    the last edge at or below its lower bound, b1 the first edge at or above its upper
    bound, the edges computed as the release stores them (:func:`grid_index`'s
    :func:`dpsql.domains.bin_edges.bin_edge`, by ``a.edge_mode``) and compared exactly.
    These are the bins whose stored bounds the rewrite's ``hi > lo`` and ``lo < hi`` keep,
    so the prediction is made for the nodes that answer. (A tolerance of 1e-9 bin widths
    took a bound 5e-10 widths below an edge as that edge: a range predicted one bin
    short of the one answered and of its error columns.)"""
    a = release.attributes[r.attribute]
    lo = a.lower if r.lo is None else min(max(r.lo, a.lower), a.upper)
    hi = a.upper if r.hi is None else min(max(r.hi, a.lower), a.upper)
    if a.unit == "month":
        return bin_span_of(a, lo, hi)
    return _edge_at_or_below(a, lo), _edge_at_or_above(a, hi)


def _edge(a, b: int) -> float:
    return bin_edge(a.lower, a.upper, a.bins, b, a.edge_mode)


def _edge_at_or_below(a, x: float) -> int:
    """The largest b in 0..K with edge b ≤ x (x in [lower, upper]). ``(x − lower)/width``
    lands within one of it; the edges (non-decreasing) settle it."""
    b = min(max(int(math.floor((x - a.lower) / a.width)), 0), a.bins)
    while b > 0 and _edge(a, b) > x:
        b -= 1
    while b < a.bins and _edge(a, b + 1) <= x:
        b += 1
    return b


def _edge_at_or_above(a, x: float) -> int:
    """The smallest b in 0..K with edge b ≥ x (x in [lower, upper])."""
    b = min(max(int(math.ceil((x - a.lower) / a.width)), 0), a.bins)
    while b < a.bins and _edge(a, b) < x:
        b += 1
    while b > 0 and _edge(a, b - 1) >= x:
        b -= 1
    return b


def range_errors(v: ViewInfo, bins: int) -> np.ndarray | None:
    """The predicted 95 % half-width of every bin range [b0, b1) of a one-attribute
    range view, as ``table[b0, b1]`` (NaN below the diagonal); None when the view's
    model has no range variance. Computed once per attach, in one vectorised call."""
    if v.model.laplace_cumulants(v.model.depth, np.zeros(1, np.int64)) is not None:
        return None  # Laplace quantiles: per range, memoized (_range_prediction)
    lo, hi = np.triu_indices(bins + 1, k=1)
    rv = v.model.range_variance(lo, hi)
    if rv is None:
        return None
    table = np.full((bins + 1, bins + 1), np.nan)
    table[lo, hi] = Z95 * np.sqrt(np.asarray(rv, dtype=np.float64))
    return table


def _predict(v: ViewInfo, level: int, ref: Reference,
             bins: dict[str, tuple[int, int]] | None = None) -> Predicted:
    model = v.model
    rel = ref.release
    attrs = v.meta.attributes
    if bins is None:
        bins = {r.attribute: bin_range(rel, r) for r in ref.ranges}
    if len(attrs) == 1 and rel.attributes[attrs[0]].kind == "range" and not ref.columns \
            and not ref.truncs and not ref.bins:  # one range (groups: below)
        pieces = _piece_bins(rel, next((r for r in ref.ranges if r.attribute == attrs[0]),
                                       None))
        if pieces is not None:
            hit = _pieces_prediction(v, pieces)
            if hit is not None:
                return hit
        b0, b1 = bins.get(attrs[0]) or bin_range(rel, RangeFilter(attrs[0], None, None))
        b0 = min(b0, rel.attributes[attrs[0]].bins - 1)  # an empty range at the top edge
        b1 = max(b1, b0 + 1)  # is ranked like the last bin (model ranges are non-empty)
        table = v.range_errors
        if table is not None and b1 < table.shape[1]:
            return Predicted(float(table[b0, b1]), float(table[b0, b1]) / Z95)
        hit = v.predictions.get(("range", b0, b1))
        if hit is not None:
            return hit
        rv = model.range_variance(np.array([b0]), np.array([b1]))
        if rv is not None:
            out = _half95(model, model.depth, np.arange(b0, b1), float(np.asarray(rv)[0]))
            if len(v.predictions) < MAX_MEMO:
                v.predictions[("range", b0, b1)] = out
            return out
    lv = v.meta.level(level)
    m = float(lv.n_nodes)
    groups: dict[str, int] = {}  # attribute -> its number of groups: the size of the
    for c in ref.columns:  # finest grouped column (a hierarchy's columns nest)
        a = rel.column_attribute(c).name
        groups[a] = max(groups.get(a, 1), rel.size(c))
    for g in ref.bins:  # one group per bucket
        groups[g.attribute] = max(groups.get(g.attribute, 1), g.count + 1)
    for _, a, unit in ref.truncs:  # one group per calendar unit (date_trunc)
        groups[a] = max(groups.get(a, 1), unit_count(rel.attributes[a], unit))
    share = {a: 1.0 / n for a, n in groups.items()}  # of an attribute's nodes, a group's
    for r in ref.ranges:  # a range on a grouped attribute picks groups: a group's nodes
        b0, b1 = bins[r.attribute]  # are the fewer of the two, not their product
        pieces = _piece_bins(rel, r)
        width = b1 - b0 if pieces is None else sum(h - lo for lo, h in pieces)
        frac = max(width, 1) / rel.attributes[r.attribute].bins
        share[r.attribute] = min(share.get(r.attribute, 1.0), frac)
    for x in share.values():
        m *= x
    m = max(1, int(round(m)))
    memo = v.predictions
    key = (level, m)
    hit = memo.get(key)
    if hit is not None:
        return hit
    ids = np.arange(min(m, lv.n_nodes))
    var = model.sum_variance(level, ids)
    if var is None:
        bound = float(model.sum_bound(level, np.arange(m), 0.05))
        out = Predicted(bound, bound / Z95)
    else:
        out = _half95(model, level, ids, var.value)
    if len(memo) < MAX_MEMO:
        memo[key] = out
    return out


def _half95(model, level: int, ids: np.ndarray, variance: float) -> Predicted:
    """The 95 % half-width of the interval the view gives the released sum of ``ids`` at
    ``level`` (of this ``variance``): the Laplace-sum quantile of a Laplace-family model
    (``btree``, ``laplace_tree``: :func:`dpsql.accuracy.laplace_sum.half_width`, as
    ``dp_ci_low/high``), ±1.96σ for the others. Ranking a Laplace view by 1.96σ made it
    look up to 8 % better than its interval (2.12σ for one Laplace draw), and so preferred
    over a Gaussian view whose interval is narrower."""
    sd = math.sqrt(variance)
    cum = model.laplace_cumulants(level, ids)
    if cum is not None:
        return Predicted(float(half_width(cum, 0.95)), sd)
    return Predicted(Z95 * sd, sd)


MAX_PIECES = 256
"""Beyond this many disjoint pieces the prediction (quadratic in them: their pairwise
covariances) falls back to the filter's hull: it only ranks views."""


def _piece_bins(release: ReleaseInfo, r: RangeFilter | None
                ) -> tuple[tuple[int, int], ...] | None:
    """The leaf-bin ranges of a filter that keeps several disjoint intervals (``NOT
    BETWEEN``, ``IN`` of scattered values), merged where they touch; None for one
    interval (its hull is the filter) or more than :data:`MAX_PIECES` of them."""
    if r is None or r.pieces is None or not 2 <= len(r.pieces) <= MAX_PIECES:
        return None
    out: list[list[int]] = []
    for lo, hi in r.pieces:
        b0, b1 = bin_range(release, RangeFilter(r.attribute, lo if math.isfinite(lo)
                                                else None, hi if math.isfinite(hi) else None))
        if b1 <= b0:
            continue
        if out and b0 <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b1)
        else:
            out.append([b0, b1])
    return tuple((a, b) for a, b in out) if len(out) > 1 else None


def _pieces_prediction(v: ViewInfo, pieces: tuple[tuple[int, int], ...]
                       ) -> Predicted | None:
    """The predicted 95 % half-width of a sum of disjoint bin ranges of a one-attribute
    range view, with the covariances between the pieces: the sum is Σ (S(b) − S(a)) over
    its pieces [a, b), S(x) the released count of bins [0, x), and
    Cov(S(x), S(y)) = (V(0, x) + V(0, y) − V(x, y)) / 2 from the model's range variance
    V (exact for the models that give one; a view released consistently answers every
    piece from the same counts). None when the model has no range variance."""
    hit = v.predictions.get(("pieces", pieces))
    if hit is not None:
        return hit
    edges = sorted({x for p in pieces for x in p if x > 0})
    coef = {x: 0.0 for x in edges}
    for a, b in pieces:
        coef[b] += 1.0
        if a > 0:
            coef[a] -= 1.0
    x = np.array(edges, dtype=np.int64)
    c = np.array([coef[e] for e in edges])
    lo, hi = np.triu_indices(x.size, k=1)
    prefix = v.model.range_variance(np.zeros(x.size, np.int64), x)
    between = v.model.range_variance(x[lo], x[hi]) if lo.size else np.zeros(0)
    if prefix is None or between is None:
        return None
    prefix = np.asarray(prefix, dtype=np.float64)
    cov = np.diag(prefix)
    cov[lo, hi] = cov[hi, lo] = (prefix[lo] + prefix[hi] - np.asarray(between)) / 2.0
    leaves = np.concatenate([np.arange(a, b) for a, b in pieces])
    out = _half95(v.model, v.model.depth, leaves, max(float(c @ cov @ c), 0.0))
    if len(v.predictions) < MAX_MEMO:
        v.predictions[("pieces", pieces)] = out
    return out
