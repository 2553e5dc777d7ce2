"""The tables of one released view: its ``dpsql_views`` row, its level tables
``<view>__l<k>`` (labels from the nodes' integer codes and the public domain, typed as
:func:`label_values` says, counts,
per-node variances, InfTDA's support columns) and, for a binned last attribute, its
prefix table of cumulative sums (the release file's format: DESIGN, "Release file")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpsql import domains
from dpsql.domains.calendar import edges_of
from dpsql.mechanisms.base import PrivateTree
from dpsql.privacy import Budget
from dpsql.release.measured import MEASURED_TABLE, measured_columns
from dpsql.release.public_trees import range_fanout
from dpsql.release.store import Columns
from dpsql.release_file import LevelMeta
from dpsql.spec import Categorical, Hierarchy, Range, ReleaseSpec, View

MAX_PREFIX_CELLS = 20_000_000


def typed_values(values: Any) -> np.ndarray:
    """Public labels as a numpy column of one type: strings stay objects (VARCHAR),
    integers become int64 (BIGINT), other numbers float64 (DOUBLE)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values)
    if arr.size and isinstance(arr[0], str) and \
            all(type(v) is str for v in arr.tolist()):  # noqa: E721 (exact and fast)
        return arr
    if all(isinstance(v, str) or v is None for v in arr):  # NULL: a category's last value
        return arr
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr):
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def label_values(attr: Categorical | Hierarchy, column: str, values: Any) -> np.ndarray:
    """The public labels of one categorical or spine column, in code order, as they are
    stored: :func:`typed_values`, except that a column of ``attr.integer_columns`` (text
    values of an integer source column: :mod:`dpsql.release.value_types`) is BIGINT, its
    NULL (a NULL category or branch) masked."""
    if column not in attr.integer_columns:
        return typed_values(values)
    text = np.empty(len(values), dtype=object)
    text[:] = list(values)
    null = np.equal(text, None)
    if not null.any():
        return text.astype(np.int64)
    text[null] = "0"
    return np.ma.masked_array(text.astype(np.int64), mask=null)


def view_tables(spec: ReleaseSpec, view: View, budget: Budget, tree: PrivateTree,
                 dtree: domains.DomainTree | None, extra: list[Columns] | None = None
                 ) -> tuple[dict[str, Any], dict[str, Columns]]:
    """The ``dpsql_views`` row and the level/prefix tables of one released view."""
    attrs = [spec.attributes[a] for a in view.levels]
    if dtree is None:
        attr = attrs[0]
        levels, tables = _range_levels(view, attr, tree)
        prefix = _prefix_table(view, attr, tree.leaves.ids, tree.leaves.counts, [], None)
    else:
        measured = None
        if extra is not None and tree.measured is not None:  # InfTDA's measurements
            by_level, measured = measured_columns(dtree, tree)
            extra = [{**e, **c} for e, c in zip(extra, by_level)]
        levels, tables = _tree_levels(view, spec, dtree, tree, extra)
        if measured is not None:
            tables[MEASURED_TABLE.format(view=view.name)] = measured
        prefix = None
        if isinstance(attrs[-1], Range):
            prefix = _prefix_table(view, attrs[-1], tree.leaves.ids, tree.leaves.counts,
                                   attrs[:-1], dtree)
    if prefix is not None:
        tables[f"{view.name}__prefix"] = prefix
    row = {
        "name": view.name, "mechanism": view.mechanism, "weight": str(view.weight),
        "budget": budget.to_json(), "attributes": list(view.levels),
        "levels": [lv.to_json() for lv in levels],
        "error_model": tree.error_model.to_params(),
        "prefix_table": f"{view.name}__prefix" if prefix is not None else None,
        "info": {"sensitivity": tree.sensitivity, **_jsonable(tree.info)},
    }
    return row, tables




def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in info.items():
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, (np.integer, np.floating)):
            v = v.item()
        elif isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out


def _count_columns(level) -> Columns:
    return {"dp_count": np.asarray(level.counts),
            "dp_var": (np.asarray(level.variance, dtype=np.float64)
                       if level.variance is not None else None)}


def _range_columns(attr: Range, bin_lo: np.ndarray, bin_hi: np.ndarray) -> dict[str, Any]:
    null = bin_lo >= attr.bins  # the NULL node of on_null = "category": [K, K + 1)
    edges = edges_of(attr)  # calendar months, or dpsql.domains.bin_edges: by index
    lo = edges[np.minimum(bin_lo, attr.bins).astype(np.int64)]
    hi = edges[np.minimum(bin_hi, attr.bins).astype(np.int64)]
    if null.any():  # its bounds are NULL (NaN is stored as NULL): no range holds it
        lo, hi = np.where(null, np.nan, lo), np.where(null, np.nan, hi)
    return {f"{attr.name}_lo": lo, f"{attr.name}_hi": hi,
            f"{attr.name}_bin_lo": bin_lo.astype(np.int64),
            f"{attr.name}_bin_hi": bin_hi.astype(np.int64)}


def _range_levels(view: View, attr: Range, tree: PrivateTree
                  ) -> tuple[list[LevelMeta], dict[str, Columns]]:
    levels, tables = [], {}
    spans = tree.bin_spans or ()
    for k in range(1, tree.depth + 1):
        lv = tree.levels[k]
        span = int(spans[k])
        lo = lv.ids * span
        hi = np.minimum(lo + span, attr.bins)
        name = f"{view.name}__l{k}"
        tables[name] = {**_range_columns(attr, lo, hi), **_count_columns(lv)}
        levels.append(LevelMeta(k, name, attr.name, "range",
                                (f"{attr.name}_lo", f"{attr.name}_hi"),
                                int(math.ceil(attr.bins / span)), span))
    return levels, tables


def _tree_levels(view: View, spec: ReleaseSpec, dtree: domains.DomainTree, tree: PrivateTree,
                 extra: list[Columns] | None = None
                 ) -> tuple[list[LevelMeta], dict[str, Columns]]:
    """Level tables 1..d; ``extra`` adds columns per level (InfTDA's support and bias)."""
    levels, tables = [], {}
    for k in range(1, dtree.depth + 1):
        info = dtree.level_info(k)
        lv = tree.levels[k]
        labels = dtree.labels(k, lv.ids)
        cols: dict[str, Any] = {}
        for a in view.levels:
            attr = spec.attributes[a]
            if isinstance(attr, Range):
                if f"{a}_lo" in labels:
                    cols.update(_range_columns(attr, labels[f"{a}_lo"], labels[f"{a}_hi"]))
            else:
                for c in attr.columns:
                    if c in labels:
                        cols[c] = label_values(attr, c, dtree.values(c))[labels[c]]
        cols.update(_count_columns(lv))
        if extra is not None:
            cols.update(extra[k - 1])
        name = f"{view.name}__l{k}"
        tables[name] = cols
        attr = spec.attributes[info.attribute] if info.attribute in spec.attributes else None
        if attr is None:  # a spine column: find its hierarchy
            attr = next(x for x in spec.attributes.values()
                        if isinstance(x, Hierarchy) and info.attribute in x.level_columns)
        if isinstance(attr, Range):
            level_cols: tuple[str, ...] = (f"{attr.name}_lo", f"{attr.name}_hi")
        else:
            level_cols = (info.attribute,)
        levels.append(LevelMeta(k, name, attr.name, info.kind, level_cols,
                                int(dtree.level_sizes[k]), info.bin_span))
    return levels, tables


def _prefix_table(view: View, attr: Range, ids: np.ndarray, values: np.ndarray,
                  leading: list[Any], dtree: domains.DomainTree | None) -> Columns | None:
    """Cumulative sums of the leaves in bin order (per leading group), so that any range
    of bins costs two lookups: count[lo, hi) = cum[hi] − cum[lo]."""
    k_bins = attr.bins
    if attr.on_null == "category":  # a NULL node among the leaves: no bin-order prefix
        return None
    if not leading:
        dense = np.zeros(k_bins, dtype=np.float64)
        dense[ids] = values
        cum = np.concatenate([[0.0], np.cumsum(dense)])
        return {"bin": np.arange(k_bins + 1, dtype=np.int64), "cum": cum}
    if dtree is None:
        return None
    n_groups = dtree.level_sizes[-1] // k_bins if dtree.level_sizes[-1] % k_bins == 0 else 0
    if not n_groups or n_groups * (k_bins + 1) > MAX_PREFIX_CELLS:
        return None
    dense = np.zeros(n_groups * k_bins, dtype=np.float64)
    dense[ids] = values
    dense = dense.reshape(n_groups, k_bins)
    cum = np.concatenate([np.zeros((n_groups, 1)), np.cumsum(dense, axis=1)], axis=1)
    group_ids = np.repeat(np.arange(n_groups, dtype=np.int64), k_bins + 1)
    depth_group = dtree.depth - len(domains.binned(attr.name, k_bins, range_fanout(attr))
                                    .level_sizes) + 1
    labels = dtree.labels(depth_group, np.arange(n_groups, dtype=np.int64))
    cols: dict[str, Any] = {}
    for a in leading:
        for c in a.columns:
            if c in labels:
                cols[c] = label_values(a, c, dtree.values(c))[labels[c][group_ids]]
    cols["bin"] = np.tile(np.arange(k_bins + 1, dtype=np.int64), n_groups)
    cols["cum"] = cum.ravel()
    return cols


__all__ = ["MAX_PREFIX_CELLS", "label_values", "typed_values", "view_tables"]
