"""The numbers the accuracy report shows, read from a release file and its error models.

Split from :mod:`dpsql.report`, which turns them into plots and HTML: per level, its
public nodes, stored rows, zeros and one-node error (:func:`level_rows`); the released
counts of a categorical first level with their per-answer 95 % intervals
(:func:`first_level_counts`); and per range attribute, the released CDF with its 95 %
band and per-bin error (:func:`range_curves`). :mod:`dpsql.report` documents the
decisions (which band, clipping, zeros). Only the release file is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import duckdb
import numpy as np

from dpsql._sql import quote_ident
from dpsql.accuracy.base import count_interval
from dpsql.accuracy.inftda_answers import interval_offsets
from dpsql.accuracy.multiset import model_offsets
from dpsql.domains.calendar import CALENDAR_TYPES, axis_text, edges_of
from dpsql.errors import Error, IntegrityError
from dpsql.release_file import Release, ViewMeta, read_support

__all__ = ["LevelRow", "RangeCurve", "first_level_counts", "level_rows", "range_curves"]

Z95 = NormalDist().inv_cdf(0.975)
_MAX_BAND_POINTS = 257      # edges at which a non-vectorised model is evaluated
_MAX_BAND_IDS = 40_000_000  # ... fewer when groups·K is huge (each call costs ~groups·b)
_MAX_BIN_LOOP = 4096        # bins beyond which per-bin error bars are skipped (not vectorised)
MAX_DOMAIN_SHOWN = 8       # public values listed per categorical level

@dataclass(frozen=True)
class LevelRow:
    """One level of a view as the report shows it (counts read from the level table)."""

    k: int
    label: str            # the column a categorical/spine level adds, or the range attribute
    attribute: str
    kind: str
    public_nodes: int
    stored_rows: int
    zeros: int            # public nodes released as 0, stored or not
    negatives: int
    total: float          # sum of the released counts of the level
    width: float | None   # range levels: the width of one node in attribute units
    stderr: float | None  # one node (the worst one where nodes differ)
    bound95: float | None
    domain: tuple[str, ...] = ()  # first public values (categorical/spine levels)
    width_text: str = ""  # the width in words: "5", "16 days", "3 months"


@dataclass(frozen=True)
class RangeCurve:
    """The released CDF and histogram of one range attribute of a view, with 95 % error."""

    attribute: str
    level: int
    groups: int                 # leading nodes the marginal is summed over (1: none)
    edges: np.ndarray           # K+1 bin edges in attribute units
    counts: np.ndarray          # K released counts per bin (summed over the groups)
    cdf: np.ndarray             # K+1 released counts below each edge
    band_at: np.ndarray         # edge indices where the band was evaluated
    band: np.ndarray            # 95 % half-width of the CDF at those edges
    bin_half: np.ndarray | None  # 95 % half-width of each bin's count (None: skipped)
    band_kind: str              # "variance" | "variance bound" | "bound"


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    try:
        return con.execute(sql).fetchall()
    except duckdb.Error as err:
        raise IntegrityError(f"the release's tables do not match its catalog ({err}); the "
                             "file is damaged or was not written by dpsql") from err


def level_rows(con: duckdb.DuckDBPyConnection, release: Release, view: ViewMeta
               ) -> list[LevelRow]:
    """Per level of ``view``: public nodes, stored rows, zeros, negatives and the one-node
    error from the view's error model (``level_summary``)."""
    summary = {s["level"]: s for s in view.error_model.level_summary()}
    out = []
    for lv in view.levels:
        stored, zero_rows, neg, total = _rows(con, (
            f"SELECT count(*), count(*) FILTER (WHERE dp_count = 0), "
            f"count(*) FILTER (WHERE dp_count < 0), coalesce(sum(dp_count), 0) "
            f"FROM {quote_ident(lv.table)}"))[0]
        if stored > lv.n_nodes:
            raise IntegrityError(f"level table {lv.table!r} holds {stored:,} rows but its "
                                 f"public domain has {lv.n_nodes:,} nodes: the file is corrupt")
        attr = release.attributes.get(lv.attribute)
        domain: tuple[str, ...] = ()
        width = lv.span * attr.width if lv.kind == "range" and attr and attr.width and \
            lv.span else None
        label = lv.attribute if width or not lv.columns else lv.columns[-1]
        if lv.kind != "range" and attr is not None and lv.columns:
            domain = tuple(str(r[0]) for r in _rows(con, (
                f"SELECT {quote_ident(lv.columns[-1])} FROM {quote_ident(attr.domain_table)} "
                f"GROUP BY 1 ORDER BY min(code) LIMIT {MAX_DOMAIN_SHOWN + 1}")))
        s = summary.get(lv.k, {})
        out.append(LevelRow(lv.k, label, lv.attribute, lv.kind, lv.n_nodes, int(stored),
                            int(lv.n_nodes - stored + zero_rows), int(neg), float(total),
                            width, s.get("stderr"), s.get("bound95"), domain,
                            _width_text(attr, lv.span) if width else ""))
    return out


_SECONDS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _width_text(attr: Any, span: int) -> str:
    """A node's width as the curator declared it: a number, or for dates and timestamps a
    calendar length in the attribute's unit, or the largest unit that divides it
    (``16 days``, not the axis's ``1.3824e+06`` seconds); ``3 months`` for month bins,
    whose axis width is an average."""
    if attr.value_type not in ("date", "timestamp"):
        return f"{span * attr.width:g}"
    if attr.unit == "month":
        return f"{span} month" + ("s" if span != 1 else "")
    seconds = round(span * attr.width * (86400 if attr.value_type == "date" else 1))
    units = dict(_SECONDS)
    name = attr.unit if attr.unit in units and seconds % units[attr.unit] == 0 else next(
        n for n, size in _SECONDS if seconds % size == 0)
    n = seconds // units[name]
    return f"{n} {name}" + ("s" if n != 1 else "")


def _half_width(model: Any, level: int, ids: np.ndarray) -> tuple[float, str]:
    """95 % half-width of the released sum of ``ids`` at ``level`` and what it is."""
    v = model.sum_variance(level, ids)
    if v is None:
        return float(model.sum_bound(level, ids, 0.05)), "bound"
    if not v.exact and model.kind == "reconciled":  # an approximation, not a bound
        return Z95 * v.stderr, "approximate variance"
    return Z95 * v.stderr, "variance" if v.exact else "variance bound"


def _bands(model: Any, level: int, K: int, groups: int, stride: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """(edges evaluated, CDF half-widths there, per-bin half-widths, band kind). Group g's
    bins are the node ids ``g·stride + j`` (``stride`` K, or K + 1 with a NULL node)."""
    if groups == 1 and level == model.depth and stride == K:
        rv = model.range_variance(np.zeros(K + 1, np.int64), np.arange(K + 1))
        if rv is not None:  # exact and vectorised: every edge and every bin
            per_bin = model.range_variance(np.arange(K), np.arange(1, K + 1))
            return np.arange(K + 1), Z95 * np.sqrt(rv), Z95 * np.sqrt(per_bin), "variance"
    # one model call per edge over ~groups·b/2 ids: fewer edges when the level is huge
    points = min(K, _MAX_BAND_POINTS - 1, max(8, int(_MAX_BAND_IDS / (groups * K))))
    at = np.unique(np.round(np.linspace(0, K, points + 1))).astype(np.int64)
    offsets = np.arange(groups, dtype=np.int64) * stride
    band, kinds = np.zeros(at.size), set()
    for i, b in enumerate(at):
        band[i], kind = _half_width(model, level, np.add.outer(offsets, np.arange(b)).ravel())
        kinds.add(kind)
    per_bin = None
    if K <= _MAX_BIN_LOOP:
        per_bin = np.array([_half_width(model, level, offsets + j)[0] for j in range(K)])
    kind = next(k for k in ("bound", "variance bound", "variance") if k in kinds)
    return at, band, per_bin, kind


_MAX_COUNTS_SHOWN = 24  # rows of the first level's counts table


def first_level_counts(con: duckdb.DuckDBPyConnection, view: ViewMeta
                       ) -> list[tuple[str, float, float, float]]:
    """(label, released count, 95 % low, 95 % high) of each released node of a categorical
    or spine first level, largest first (at most :data:`_MAX_COUNTS_SHOWN`): the per-answer
    interval an analyst gets for ``GROUP BY`` that column (InfTDA: calibrated, from the
    support; Gaussian-family views: ±1.96 σ of the node's exact variance; Laplace-family
    views: the Laplace quantile of :mod:`dpsql.accuracy.laplace_sum`), at whole counts
    and never below 0 (:func:`~dpsql.accuracy.base.count_interval`, as ``dp_ci_low/high``)."""
    lv = view.levels[0]
    if lv.kind == "range" or not lv.columns:
        return []
    model = view.error_model
    rows = _rows(con, f"SELECT {quote_ident(lv.columns[-1])}, dp_count "
                      f"FROM {quote_ident(lv.table)} ORDER BY rowid")
    out = []
    support = read_support(con, view) if model.reads_support else None
    for i, (label, count) in enumerate(rows):
        if support is not None:
            _, below, above = interval_offsets(support, model.calibration, model.sigma2,
                                               model.root_sigma2, 1, np.array([i]), 0.95)
        else:
            below, above = model_offsets(model, 1, np.array([i]), 0.95)
        c = float(count)
        out.append((str(label), c, *count_interval(c, below, above)))
    out.sort(key=lambda r: -r[1])
    return out[:_MAX_COUNTS_SHOWN]


def _sql_bands(analyst: Any, view: ViewMeta, attr: Any, edges: np.ndarray, K: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """The calibrated InfTDA band: half the width of the 95 % interval an analyst gets
    for the prefix (``SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM view WHERE
    attr < edge``, on ``analyst``, a cursor of :func:`dpsql.connect` on the release) at
    each edge evaluated, and of each bin (``GROUP BY attr``).

    The analyst's query is the one truth: the planner reads the coarsest level that
    answers the prefix, and its rows hold the released zeros under it, which the interval
    rules read. The band was computed from the leaf level's released rows alone, so it
    missed both: on the trips release (ρ = 1) ``distance < 256`` (the whole range, the
    released root) showed ±57.7 where SQL gives ±2.5, and ``distance < 192`` ±57.0 where
    it reads a coarser level and gives ±15.0; a persons table's age CDF ±5,323 against
    ±852. Cost: about 0.1 s per curve at K = 64, 1.5 s at K = 4,000."""
    value = ((lambda x: axis_text(attr.value_type, float(x)))  # also before the year 1
             if attr.value_type in CALENDAR_TYPES else float)
    at = np.unique(np.round(np.linspace(0, K, min(K, _MAX_BAND_POINTS - 1) + 1))
                   ).astype(np.int64)
    name, col = quote_ident(view.name), quote_ident(attr.name)
    sql = " UNION ALL ".join(
        f"SELECT {i} AS i, COUNT(*) AS n, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
        f"FROM {name} WHERE {col} < ?" for i in range(at.size))
    band = np.full(at.size, np.nan)
    try:
        got = analyst.execute(sql, [value(edges[b]) for b in at]).fetchall()
    except Error:  # a view SQL cannot name (a tampered file's): no band, as no interval
        return at, band, None, "calibrated"
    for i, _, lo, hi in got:
        band[i] = (hi - lo) / 2.0 if lo is not None and hi is not None else np.nan
    per_bin = None
    if K <= _MAX_BIN_LOOP:
        try:
            rows = analyst.execute(
                f"SELECT {col}, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM {name} "
                f"WHERE {col} IS NOT NULL GROUP BY 1 ORDER BY 1").fetchall()
        except Error:  # as above: no per-bin error bars rather than no report
            rows = []
        if len(rows) == K:  # one row per bin, in bin order (every bin, zeros included)
            per_bin = np.array([(hi - lo) / 2.0 for _, _, lo, hi in rows])
    return at, band, per_bin, "calibrated"


def range_curves(con: duckdb.DuckDBPyConnection, release: Release, view: ViewMeta,
                 analyst: Any = None) -> list[RangeCurve]:
    """One :class:`RangeCurve` per range attribute of ``view``, at the level where the
    attribute reaches single bins. Node ids there are ``g·S + bin`` (tree order: the
    levels above come first, ``dpsql.domains``), so the prefix [0, b) summed over the
    groups is the node set {g·S + j : j < b}; S is K, or K + 1 for an attribute whose
    NULLs are a category (its NULL node, bin K, comes last in each group and is in no
    prefix). Counts are read from that level's table. An income with non-response
    released as a NULL node (on a persons table, 41 nodes per tract for 40 bins) had no
    CDF at all: the level's node count was not a multiple of K, and the curve was
    skipped without a word."""
    out = []
    for name in dict.fromkeys(lv.attribute for lv in view.levels if lv.kind == "range"):
        attr = release.attributes.get(name)
        lv = [x for x in view.levels if x.attribute == name][-1]
        stride = None if attr is None or not attr.bins else \
            int(attr.bins) + (1 if attr.null_category else 0)
        if stride is None or lv.n_nodes % stride or lv.span not in (1, None):
            continue
        K, groups = int(attr.bins), lv.n_nodes // stride
        counts = np.zeros(K)
        for b, c in _rows(con, f"SELECT {quote_ident(name + '_bin_lo')}, sum(dp_count) "
                               f"FROM {quote_ident(lv.table)} GROUP BY 1"):
            if stride > K and b is not None and int(b) == K:
                continue  # the NULL node: in no prefix of the values
            if b is None or not 0 <= int(b) < K:
                raise IntegrityError(f"{lv.table!r}: bin {b} is outside 0..{K - 1}")
            counts[int(b)] = float(c)
        edges = edges_of(attr)
        if view.error_model.reads_support:  # InfTDA: what SQL gives (analyst: a cursor)
            if analyst is None:
                raise ValueError(f"range_curves of the InfTDA view {view.name!r} needs "
                                 "analyst, a cursor of dpsql.connect on the release")
            at, band, per_bin, kind = _sql_bands(analyst, view, attr, edges, K)
        else:
            at, band, per_bin, kind = _bands(view.error_model, lv.k, K, groups, stride)
        out.append(RangeCurve(name, lv.k, groups, edges, counts,
                              np.concatenate([[0.0], np.cumsum(counts)]), at, band, per_bin,
                              kind))
    return out
