"""The SQL planner: analyst SQL in, DuckDB SQL over the release tables out.

An ordered tuple of small passes, each a ``verb_object`` module (STYLE §1, §3):

1. :mod:`~dpsql.planner.parse_sql` — parse (DuckDB dialect), refuse non-queries and
   the INTERVALs DuckDB's parser rejects (:mod:`~dpsql.planner.refuse_loose_syntax`),
   bind parameters as literals *before* planning (:mod:`~dpsql.planner.bind_params`);
   on a locked-down connection,
   :mod:`~dpsql.planner.refuse_file_reads` then refuses whatever would read a file;
   :mod:`~dpsql.planner.resolve_helpers` resolves the release's helpers (``dp_level``,
   ``dp_range``, ``dpsql_domain__<attr>``...) by their documented names;
   :mod:`~dpsql.planner.inline_subqueries` reads a subquery of FROM that only selects,
   renames and filters the private table's columns (Superset's virtual datasets, Power
   BI's nesting) as the table itself;
2. :mod:`~dpsql.planner.find_references` — find each logical-table reference and check
   that it is only used under supported aggregates (each call sorted out by
   :mod:`~dpsql.planner.classify_calls`), with no star expression
   (:mod:`~dpsql.planner.refuse_stars`), no volatile function where it would pick
   released nodes (:mod:`~dpsql.planner.refuse_volatile`) and no WHERE subquery
   correlated with a binned attribute (:mod:`~dpsql.planner.refuse_correlated`); range
   bounds written as constant expressions (NULLs and one-row constant subqueries
   included) are valued by a locked DuckDB of the planner's own
   (:mod:`~dpsql.planner.fold_constants`), predicates on a binned attribute are walked in
   three-valued logic (:mod:`~dpsql.planner.predicate_truth`) and the WHERE clause's value
   on each attribute's NULL rows is settled by its policy (:mod:`~dpsql.planner.null_rows`);
3. :mod:`~dpsql.planner.choose_view` — pick the covering view with the smallest
   predicted error and the level to read;
4. :mod:`~dpsql.planner.rewrite_query` — replace the reference by a subquery over that
   level table and the aggregates by sums over its nodes.

Everything else (joins with public tables, CTEs, windows over the aggregates, HAVING,
ORDER BY, LIMIT, ROLLUP/CUBE/GROUPING SETS/GROUP BY ALL) is left for DuckDB to run as
written. sqlglot types never cross this package's public functions: they take and return
strings, dicts and frozen dataclasses. The planner does no I/O: it reads only the
:class:`~dpsql.planner.catalog.Catalog` built at attach time.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dpsql.errors import QueryTooComplexError
from dpsql.planner.catalog import Catalog, ReleaseInfo, ViewInfo
from dpsql.planner.check_literals import domain_notices
from dpsql.planner.choose_view import Choice, bin_range, choose_view
from dpsql.planner.find_references import RangeFilter, Reference, find_references
from dpsql.planner.bind_params import bind_params
from dpsql.planner.inline_subqueries import inline_subqueries
from dpsql.planner.parse_sql import generate_sql, parse_walked
from dpsql.planner.refuse_file_reads import refuse_file_reads
from dpsql.planner.resolve_helpers import resolve_helpers
from dpsql.planner.route_catalog import route_catalog
from dpsql.planner.rewrite_query import rewrite_reference
from dpsql.planner.value_intervals import describe_intervals

INTERPOLATION = "uniform"
QUANTILE_INTERVAL_NOTE = (
    "dp_quantile_low/dp_quantile_high: the view's confidence band for the cumulative "
    "counts (count(< x) - p * count as one linear query of the nodes, total included), "
    "inverted at the bin edges: covers the true quantile of the rows with at least the "
    "stated confidence, per quantile and per row, at the resolution of the bins "
    "(dpsql.quantile_ci)")
QUANTILE_INTERVAL_SUMS_NOTE = (
    "dp_quantile_low/dp_quantile_high on an InfTDA view: its calibrated intervals for the "
    "two sums count(< x) and count(>= x), each at confidence 1 - (1 - conf)/2, bound "
    "count(< x) - p * count at each bin edge (a union bound: conservative), inverted at "
    "the bin edges; approximate as those intervals are (dpsql.quantile_ci)")


@dataclass(frozen=True)
class PlannedQuery:
    """The result of planning: DuckDB SQL, the ``dp_info`` dict, the output columns.

    ``info`` is built on first access from what the planner decided (the dict costs
    about a tenth of planning a query and most callers never read it): the same dict,
    later. Until then the plan keeps the planner's references (and their syntax tree)."""

    sql: str
    _info: Any = field(hash=False, compare=False, repr=False)  # the dict, or its maker
    columns: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    """Things the analyst should know that change no answer: a literal outside a public
    domain (:mod:`~dpsql.planner.check_literals`)."""
    route: str = "release"
    """``"catalog"``: schema discovery (:mod:`~dpsql.planner.route_catalog`), run on the
    catalog database that describes the logical tables, not on the release."""

    @property
    def info(self) -> dict[str, Any]:
        info = self._info
        if not isinstance(info, dict):
            info = info()
            object.__setattr__(self, "_info", info)  # frozen: set once, to the same value
        return info


def plan_query(catalog: Catalog, query: str, params: Sequence[Any] | None = None
               ) -> PlannedQuery:
    """Plan ``query`` against the attached releases in ``catalog``.

    Parsing and every pass recurse over the syntax tree, so SQL nested deeper than
    Python's recursion limit (thousands of parentheses or CASEs, a chain of 20,000 ANDs,
    which sqlglot nests one level per operator) raises :class:`QueryTooComplexError`
    here, the planner's boundary, instead of a bare ``RecursionError``."""
    try:
        return _plan_query(catalog, query, params)
    except RecursionError:
        # ``from None``: the RecursionError's own traceback is ~1,000 frames long.
        raise too_complex() from None


def too_complex() -> QueryTooComplexError:
    """The error for SQL nested deeper than the planner can walk: names the limit."""
    return QueryTooComplexError(
        "the query is nested too deeply to plan: its syntax tree goes deeper than Python's "
        f"recursion limit ({sys.getrecursionlimit():,} frames; each parenthesis, CASE or "
        "AND/OR operator is a level); flatten it: IN (...) instead of chains of OR, fewer "
        "nested parentheses or CASEs, or several simpler queries")


def _plan_query(catalog: Catalog, query: str, params: Sequence[Any] | None
                ) -> PlannedQuery:
    if isinstance(query, str) and catalog.releases:
        routed = route_catalog(query, catalog.logical_names, locked=catalog.locked)
        if routed is not None:
            return PlannedQuery(_bound(routed, params), CATALOG_INFO, route="catalog")
    tree, walked = parse_walked(query)  # one parse, one walk; the tree is ours to rewrite
    if catalog.locked:
        refuse_file_reads(walked)
    bind_params(tree, params, walked)
    resolve_helpers(walked, catalog)
    walked = inline_subqueries(tree, walked, catalog)
    refs = find_references(tree, catalog, walked)
    notices = domain_notices(refs) if refs else ()
    choices = [choose_view(r) for r in refs]
    read = [rewrite_reference(ref, choice) for ref, choice in zip(refs, choices)]
    columns = tuple(e.alias_or_name for e in getattr(tree, "selects", []) or [])
    sql = generate_sql(tree)  # nothing changes the tree afterwards
    return PlannedQuery(sql, lambda: describe(refs, choices, read), columns, notices)


CATALOG_INFO = {"private": False, "references": [], "notes": [
    "schema discovery: answered from the public description of the logical tables (the "
    "spec's names and types), not from the release's counts"]}


def _bound(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with its parameters bound as literals (a catalog query with ``?``)."""
    if not params:
        return sql
    tree, walked = parse_walked(sql)
    return generate_sql(bind_params(tree, params, walked))


def describe(refs: Sequence[Reference], choices: Sequence[Choice],
             read: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``cursor.dp_info`` dict: one entry per reference, the first one also flat.
    ``read``: the release table each reference reads (the level table, or the view's
    prefix table for a range answered from it)."""
    entries = [_describe_one(r, c) for r, c in zip(refs, choices)]
    for e, table in zip(entries, read or ()):
        e["read_table"] = table
    info: dict[str, Any] = {"private": bool(entries), "references": entries}
    if entries:
        info.update({k: v for k, v in entries[0].items()})
        info["seeded"] = any(e["seeded"] for e in entries)
        info["notes"] = sorted({n for e in entries for n in e["notes"]})
    else:
        info["notes"] = ["the query reads no private table: it is run as written"]
    return info


def _reaches_domain_edge(ref: Reference) -> bool:
    """Whether a range of the query keeps the first or the last bin of its attribute's
    domain: where the spec's out-of-bounds policy put the values below or above it
    (clamped into those bins, or dropped), so that the answer there is not the raw
    table's. A range strictly inside the domain needs no such note; a GROUP BY of an
    attribute's buckets (``date_trunc``, ``width_bucket``) with no range on it holds
    both edge bins."""
    ranged = {r.attribute for r in ref.ranges}
    if any(g.attribute not in ranged for g in ref.bins) or any(
            a not in ranged for _, a, _ in ref.truncs):
        return True
    for r in ref.ranges:
        lo, hi = r.lo, r.hi
        if r.pieces is not None:
            if not r.pieces:
                continue
            lo, hi = min(p[0] for p in r.pieces), max(p[1] for p in r.pieces)
        lo = lo if lo is not None and math.isfinite(lo) else None
        hi = hi if hi is not None and math.isfinite(hi) else None
        b0, b1 = bin_range(ref.release, RangeFilter(r.attribute, lo, hi))
        if b0 == 0 or b1 >= ref.release.attributes[r.attribute].bins:
            return True
    return False


def _describe_one(ref: Reference, choice: Choice) -> dict[str, Any]:
    v = choice.view
    model = v.model
    bound_model = v.bound_model(choice.level)
    rel = ref.release.release
    notes = []
    approx = sorted({a.kind for a in ref.aggregates if a.kind in ("sum", "avg", "quantile")})
    if approx:
        notes.append("SUM/AVG/quantiles of binned attributes are approximate: computed from "
                     "the released histogram (bin midpoints, uniform within a bin)")
    intervals = [{"attribute": a.attribute, "p": a.param, "confidence": a.conf,
                  "end": a.end} for a in ref.aggregates if a.kind == "quantile" and a.end]
    if intervals:
        notes.append(QUANTILE_INTERVAL_SUMS_NOTE if model.reads_support
                     else QUANTILE_INTERVAL_NOTE)
    if ref.ranges and not choice.aligned:
        notes.append("a range bound falls inside a bin: uniform interpolation (the bin "
                     "contributes the fraction of its width inside the range), a guess; "
                     "dp_stderr/dp_bound are the noise of the outer cover of whole bins, and "
                     "dp_ci_low/dp_ci_high span the cut bins from none to all of their rows")
    if ref.ranges:
        types = {ref.release.attributes[r.attribute].value_type or "real"
                 for r in ref.ranges}
        if types & {"integer", "decimal"}:
            notes.append("integer and decimal attributes compare whole values, as SQL "
                         "does: x <= b keeps b, x = v is the cell [v, v + step)")
        if "real" in types:
            notes.append("real-valued attributes are a continuous axis: < and <= (> and >=) "
                         "are the same bound")
    if _reaches_domain_edge(ref):
        notes.append("values outside the domain were handled at build time by the spec's "
                     "out-of-bounds policy")
    if bound_model:
        notes.append("this view's error model gives high-probability bounds, not variances: "
                     "dp_stderr() is NULL and dp_ci_low/dp_ci_high use dp_bound(1 - conf)")
    elif model.reads_support:
        notes.append("InfTDA per-answer intervals: dp_stderr/dp_ci_* come from the linear "
                     "support model calibrated by a parametric bootstrap at release time "
                     "(approximate; around the count minus its estimated bias, a sum's "
                     "near-zero bias spanned from 0 to twice its estimate, or where that "
                     "bias exceeds the standard error dp_estimate()'s interval; whole "
                     "counts, never below 0); dp_bound is the guaranteed simultaneous "
                     "bound")
    if rel.seeded:
        notes.append("the release was built with a fixed seed: NOT PRIVATE (tests/demos only)")
    return {
        "table": ref.table.name,
        "release": rel.name,
        "alias": ref.release.alias,
        "view": v.name,
        "level": choice.level,
        "level_table": v.level(choice.level).table,
        "levels": [lv.table for lv in v.meta.levels],
        "mechanism": v.meta.mechanism,
        "budget": v.meta.budget.describe(),
        "error_model": model.kind,
        "reconciled": v.meta.info.get("reconciled", {}).get("marginals", []),
        "error_family": ("bound" if bound_model else
                         "calibrated" if model.reads_support else "variance"),
        "interpolation": (INTERPOLATION if ref.ranges and not choice.aligned
                          else "none (bounds on the bin grid)" if ref.ranges else "none"),
        "ranges": [{"attribute": r.attribute, "lo": r.lo, "hi": r.hi,
                    "type": ref.release.attributes[r.attribute].value_type or "real",
                    "kept": describe_intervals(r.pieces if r.pieces is not None else (
                        (-math.inf if r.lo is None else r.lo,
                         math.inf if r.hi is None else r.hi),),
                        ref.release.attributes[r.attribute].value_type)
                    + (" ∪ NULL" if r.null else "")}
                   for r in ref.ranges],
        "approximate": approx,
        "quantile_intervals": intervals,
        "predicted_error95": choice.predicted,
        "candidates": [{"view": n, "level": k, "predicted_error95": p}
                       for n, k, p in choice.candidates],
        "seeded": rel.seeded,
        "rng": rel.rng,
        "notes": notes,
    }


__all__ = ["Catalog", "PlannedQuery", "ReleaseInfo", "ViewInfo", "plan_query", "describe"]
