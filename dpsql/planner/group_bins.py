"""Grouping by a binned attribute: which released bins a query's groups are made of.

A binned (range) attribute has no values in a release, only bins. A query may still
group by it, in three forms, each read from released nodes whose bins lie wholly inside
one group:

* **the bare column** (``SELECT hour, COUNT(*) ... GROUP BY hour``): one row per
  released leaf bin. The column's value is the bin's lower bound (typed as the
  attribute: an integer attribute whose bin edges are whole numbers gives BIGINT, a date
  attribute a DATE, otherwise DOUBLE). It keeps the analyst's name (a chart's x axis is
  the column it grouped by, and it sorts as a number). No column is added for the upper
  bound: a result has exactly the columns its SELECT names, because BI tools map result
  columns by position (Superset drew a histogram of the inserted upper bounds as its
  counts when an ``<name>_high`` column followed the bound); the edges are public, in
  ``dpsql_domain__<name>`` and the spec;
* **a bucketing expression** ``floor(g(x))`` of an increasing affine ``g`` with
  constants (``floor(x / w)``; Metabase's auto-binning ``floor((x - o) / w) * w + o``,
  whose edges are ``o + j·w``; a multiplication by a reciprocal, ``floor(x * 2) / 2``;
  :func:`~dpsql.planner.bucket_edges.bucket_call`), and any expression of it,
  ``x // w`` (integer attributes from 0 up and a whole-number
  ``w``: DuckDB's ``//`` truncates, and divides DOUBLEs and DECIMALs plainly) or
  ``width_bucket(x, low, high, n)``: one row per
  bucket. Its edges must fall on the released bin grid, exactly (the decimals written,
  no tolerance), and DuckDB's arithmetic on the data must keep them there (a ``/`` is a
  DOUBLE division, and so is all arithmetic on a DOUBLE column: ``0.3 / 0.1`` is
  2.9999999999999996, so ``floor(x / 0.1)`` puts 0.3 in bucket 2 while the bins hold it
  in bucket 3; checked at each bucket's first and last value,
  :func:`~dpsql.planner.bucket_edges._duck_cut`); then each bucket is a union of
  whole nodes, and the planner reads the coarsest level of the range tree whose nodes
  fit (``choose_view``). The expression is evaluated on a value inside each node (the
  node's first whole value for integer and date attributes, a grid value near its
  midpoint as a DECIMAL for decimals, its midpoint for reals), so
  its result and type are those DuckDB gives on the data (``width_bucket``, which DuckDB
  lacks, is spelled out as PostgreSQL defines it: 0 below ``low``, ``n + 1`` from
  ``high``). A bucket that cuts a bin is refused, naming the aligned widths;
* on an attribute whose bins each hold one value (:func:`label_bins`: integers in
  bins of 1, dates by day, decimals by their resolution; not timestamps, whose
  fractions of a second the release does not keep), any
  other expression of the column (``CASE WHEN k < 10 ...``, ``CAST(k AS VARCHAR)``,
  ``strftime(d, '%Y-%m')``, ``p::INT``, also a bucket that would cut wider bins,
  ``floor(k / 2.5)``): the bins are labels, so the expression of each leaf node's value
  is the expression on every row of it (volatile calls are refused before, by
  ``refuse_volatile``). The column becomes the node's value in the data's own type
  (:func:`one_value_sql`: a DECIMAL stays one, ``CAST(2.50 AS INT)`` is 3) and the
  grouping has every leaf edge, so the leaf level is read. The bare column stays the
  bin's bound (:func:`bound_sql`), on whose SQL the value is built, so that DuckDB
  finds a ``GROUP BY p`` inside ``p::INT``. A JOIN condition is :mod:`join_bins`'s;
* anything else that computes with the column in the SELECT list or the GROUP BY
  (``hour + 1`` on bins of many values) is refused: its value inside a bin is unknown.

:data:`~dpsql.planner.bucket_edges.BUCKETS` maps a sqlglot expression class to the
function that reads its bucket edges, so that another bucketing function (``date_trunc`` for date bins) is one entry:
it returns the edges as leaf-bin indices ``(first, step, count)``, or "misaligned", and
the call is then evaluated on :func:`value_sql`'s value (a DATE for date attributes).
Edges that are no arithmetic progression of leaf bins (calendar months over day bins)
would need :class:`BinGroup` to carry the edge list itself. ``date_trunc(unit, d)`` of a
date or timestamp attribute is checked in :mod:`~dpsql.planner.trunc_units` (the unit's
boundaries must be bin edges) and answered from the coarsest level whose nodes each lie
in one unit (``Reference.truncs``), also of ``CAST(d AS TIMESTAMP)``
(:func:`~dpsql.planner.trunc_units.trunc_call`), and so is a cast to DATE, ``CAST(ts
AS DATE)`` or ``ts::DATE``, the day (:func:`~dpsql.planner.trunc_units.day_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.domains.calendar import TRUNC_UNITS, aligned_units, axis_to_value_sql
from dpsql.errors import UnsupportedQueryError
from dpsql.planner._names import output_name
from dpsql.planner.bucket_edges import BUCKETS, Misaligned, bucket_call, leaf_grid, number
from dpsql.planner.classify_calls import as_fraction
from dpsql.release_file import AttributeMeta


@dataclass(frozen=True)
class BinGroup:
    """The bucket edges one grouping puts on a binned attribute, as leaf-bin edge indices
    strictly inside the domain: ``count`` edges ``first, first + step, ...``. A node of
    ``s`` leaf bins lies in one bucket iff every edge is a multiple of ``s``."""

    attribute: str
    first: int
    step: int
    count: int
    column: exp.Column = field(compare=False, repr=False)
    """The column in the query (replaced by the node's value)."""
    bucket: exp.Expression | None = field(default=None, compare=False, repr=False)
    """The bucketing call around it, or None for the bare column."""
    value: bool = field(default=False, compare=False, repr=False)
    """The column inside another expression of an attribute whose bins each hold one
    value (:func:`one_value_bins`): replaced by the node's value in the data's own type
    (:func:`one_value_sql`), read from the leaf level."""

    def fits(self, span: int) -> bool:
        """True when nodes of ``span`` leaf bins never straddle a bucket edge."""
        if self.count == 0:
            return True
        if self.first % span:
            return False
        return self.count == 1 or self.step % span == 0

    def signature(self) -> tuple[str, int, int, int]:
        return (self.attribute, self.first, self.step, self.count)


_ITEM_ARGS = ("expressions", "group")
"""SELECT arguments whose items are grouping keys or outputs: a binned column there must
be the whole item or inside a bucketing call."""


def bin_group(col: exp.Column, arg: str, a: AttributeMeta,
              level_widths: Callable[[], tuple[float, ...]]) -> BinGroup:
    """The grouping that the binned column ``col`` (of attribute ``a``, met in the
    SELECT argument ``arg``) makes, or an :class:`UnsupportedQueryError` naming what to
    write. ``level_widths()``: the node widths of the levels that hold ``a`` (asked for
    the message only)."""
    leaves = BinGroup(a.name, 1, 1, max(0, (a.bins or 1) - 1), column=col)
    one_value = arg != "joins" and label_bins(a)  # a JOIN condition: join_bins
    call = bucket_call(col)
    if call is not None:
        found = BUCKETS[type(call)](call, col, a)
        if isinstance(found, Misaligned) and not one_value:
            raise _misaligned(call, a, level_widths, found.why)
        if isinstance(found, tuple):
            return BinGroup(a.name, *found, column=col, bucket=call)
    node: exp.Expression = col
    parent = col.parent
    while isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    if one_value and not _whole_item(node):  # a label: any expression of it is exact
        return BinGroup(*leaves.signature(), column=col, value=True)
    if arg in _ITEM_ARGS and not _whole_item(node):
        raise UnsupportedQueryError(
            f"the binned attribute {a.name!r} is used in {(parent or node).sql('duckdb')!r}; "
            f"its released values are bins, so group by the bins (GROUP BY {a.name}: one "
            f"row per bin, holding its lower bound) or by {buckets_text(a, level_widths)}"
            f"{_bands_text(a) if node.find_ancestor(exp.Case) else ''}"
            f"{_FRACTION if one_value_bins(a) and a.value_type == 'timestamp' else ''}")
    return leaves


def bins_text(a: AttributeMeta) -> str:
    """The released bins of ``a`` in a few words, for refusals: ``month bins``, ``bins
    0.125 wide``."""
    return f"{a.unit} bins" if a.unit else f"bins {num_text(a.width)} wide"


def one_value_bins(a: AttributeMeta) -> bool:
    """Each leaf bin of the binned attribute ``a`` holds one value of its grid (an
    integer, a decimal, a date or a second per bin): its lower bound is the value."""
    if a.step is None or a.value_type not in ("integer", "decimal", "date", "timestamp"):
        return False
    return leaf_grid(a)[1] == as_fraction(a.step)


def label_bins(a: AttributeMeta) -> bool:
    """The binned attribute ``a`` is a label: each bin holds one value of the data as the
    source has it, so any expression of it is exact (:func:`one_value_bins`, but for
    timestamps: the build cuts a fraction of a second off, so ``CAST(ts AS VARCHAR)``,
    ``strftime(ts, '%f')`` or ``epoch_ms(ts)`` of a source with fractions would differ
    from DuckDB's on the data, as ``millisecond(ts)`` would; a timestamp is grouped by
    ``date_trunc`` and date parts, :mod:`~dpsql.planner.date_parts`)."""
    return one_value_bins(a) and a.value_type != "timestamp"


def _bands_text(a: AttributeMeta) -> str:
    """For a CASE over a binned attribute: bands of unequal widths (ages 0-19, 20-64,
    65+), which a statistical office asks for first, and which no bucket call makes.
    The refusal named equal-width buckets only."""
    x = a.name
    return (f"; for bands of unequal widths, count each band with its own WHERE, e.g. "
            f"SELECT 'low' AS band, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM "
            f"<table> WHERE {x} < <edge> UNION ALL SELECT 'high', COUNT(*), "
            f"dp_ci_low(0.95), dp_ci_high(0.95) FROM <table> WHERE {x} >= <edge> (exact "
            f"with edges on bin edges, interpolated with a wider interval otherwise), or, "
            f"with every edge on a bin edge, add up the bins outside: SELECT CASE WHEN {x} "
            f"< <edge> THEN 'low' ELSE 'high' END, SUM(n) FROM (SELECT {x}, COUNT(*) AS n "
            f"FROM <table> GROUP BY {x}) GROUP BY 1 (without error columns; each bin is "
            f"read as its lower bound, so an edge inside a bin puts the whole bin in one "
            f"band)")


_FRACTION = ("; its bins hold one second each, but not the fraction of a second a "
             "source value may have (the build cuts it off), so other expressions of it "
             "are not answered")


def _whole_item(node: exp.Expression) -> bool:
    """``node`` is a whole grouping key or output (through parentheses, an alias, ROLLUP
    and the like), or a whole key of a window's ``PARTITION BY`` or ``ORDER BY``: a
    window runs on the grouped rows, where the column is the grouped bin (its lower
    bound), the same value as the ``GROUP BY`` output, so ``SUM(COUNT(*)) OVER (ORDER
    BY n)`` accumulates the bins in the order of their lower bounds."""
    parent = node.parent
    while isinstance(parent, (exp.Paren, exp.Alias, exp.Ordered, exp.Tuple, exp.Rollup,
                              exp.Cube, exp.GroupingSets, exp.Grouping, exp.GroupingId)):
        node, parent = parent, parent.parent  # GROUPING(k): which grouping set, of the
        # bin key itself
    if isinstance(parent, exp.Window):
        return node.arg_key == "partition_by"
    if isinstance(parent, exp.Order) and isinstance(parent.parent, exp.Window):
        return True
    return isinstance(parent, (exp.Select, exp.Group))


def buckets_text(a: AttributeMeta, level_widths) -> str:
    """The buckets of whole bins to suggest: calendar units for a date or timestamp (its
    day numbers are no values to divide), else widths on the bin grid."""
    if a.value_type in TRUNC_UNITS:
        fits = aligned_units(a)
        return ("calendar units of whole bins: " + ", ".join(
            f"date_trunc('{u}', {a.name})" for u in fits) if fits else
                f"ranges of whole bins (WHERE {a.name} BETWEEN ...): no date_trunc unit "
                "aligns with these bins")
    return (f"buckets of whole bins (floor({a.name} / w) * w or width_bucket({a.name}, "
            f"low, high, n), with {_widths_text(a, level_widths)})")


def _misaligned(call: exp.Expression, a: AttributeMeta, level_widths,
                why: str = "") -> UnsupportedQueryError:
    if a.value_type in TRUNC_UNITS:
        return UnsupportedQueryError(
            f"{call.sql('duckdb')} cuts the released bins of {a.name!r} "
            f"({a.unit or 'days'}): group by {buckets_text(a, level_widths)}")
    return UnsupportedQueryError(
        f"{call.sql('duckdb')} cuts the released bins of {a.name!r} ({num_text(a.width)} wide "
        f"from {num_text(a.lower)} to {num_text(a.upper)}"
        f"{': ' + why if why else ''}): a bucket must be a union of whole bins; "
        f"use {_widths_text(a, level_widths)}")


def _widths_text(a: AttributeMeta, level_widths) -> str:
    shown = ", ".join(num_text(w) for w in sorted(set(level_widths())))
    return (f"a width that is a multiple of {num_text(a.width)} with edges on "
            f"{num_text(a.lower)} + k * {num_text(a.width)} (the released levels hold widths "
            f"{shown}: those read fewest nodes)")


def num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def whole_edges(a: AttributeMeta) -> bool:
    """Every bin edge of ``a`` is a whole value of its integer or date grid."""
    return a.value_type in ("integer", "date") and float(a.lower).is_integer() \
        and float(a.width).is_integer()


def bound_sql(a: AttributeMeta, x: str) -> str:
    """A bin edge ``x`` (SQL, a DOUBLE on the attribute's axis) typed as the attribute:
    BIGINT for an integer attribute with whole edges, a DATE or TIMESTAMP for calendar
    attributes (day or second numbers since 1970-01-01), otherwise DOUBLE."""
    if a.value_type in ("date", "timestamp"):
        return axis_to_value_sql(a.value_type, x)
    if whole_edges(a):
        return f"CAST({x} AS BIGINT)"
    return f"CAST({x} AS DOUBLE)"


def one_value_sql(a: AttributeMeta, lo: str) -> str:
    """The one value of a leaf bin from ``lo`` (SQL, its lower edge on the attribute's
    axis) of an attribute whose bins each hold one value (:func:`one_value_bins`), in
    the data's own type: BIGINT, DATE, TIMESTAMP, and DECIMAL(18, s) for a decimal of
    resolution 10⁻ˢ (so that ``p::INT`` of 2.50 rounds to 3 as it does on the data, not
    to 2 as the DOUBLE 2.4999... might). It is built on :func:`bound_sql`'s expression,
    the one ``GROUP BY p`` groups by, so that DuckDB finds that grouped expression
    inside it (``SELECT p::INT ... GROUP BY p``). NULL on the NULL node."""
    bound = bound_sql(a, lo)
    if a.value_type != "decimal":
        return bound
    return f"CAST({bound} AS DECIMAL(18, {_scale(a)}))"


def _scale(a: AttributeMeta) -> int:
    """The scale s of a decimal attribute of resolution 10⁻ˢ."""
    step, scale = as_fraction(a.step), 0
    while (step * 10 ** scale).denominator != 1:
        scale += 1
    return scale


def value_sql(a: AttributeMeta, lo: str, hi: str) -> str:
    """A value inside the node [lo, hi) (SQL), typed as the attribute: its first whole
    value on an integer grid, its first date or timestamp, the decimal of the grid at or
    below its midpoint as a DECIMAL (so that ``floor(p * 10)`` is a DECIMAL, as on the
    data), else its midpoint (far from any aligned bucket edge, so rounding cannot move
    it across one)."""
    if a.value_type in ("date", "timestamp"):
        return axis_to_value_sql(a.value_type, lo)
    if a.value_type == "integer":
        return f"CAST(CEIL({lo} - 1e-9) AS BIGINT)"
    if a.value_type == "decimal":  # the grid value at or below the midpoint, a DECIMAL
        m = 10 ** _scale(a)
        return f"CAST(FLOOR((({lo}) + ({hi})) / 2 * {m}) / {m} AS DECIMAL(18, {_scale(a)}))"
    return f"(({lo}) + ({hi})) / 2"


def width_bucket_sql(call: exp.Expression, value: str) -> str:
    """PostgreSQL's ``width_bucket(value, low, high, n)`` (DuckDB has none): 0 below
    ``low``, ``n + 1`` from ``high``, else the 1-based bucket, as BIGINT."""
    low, high = number(call.args["min_value"]), number(call.args["max_value"])
    n = int(number(call.args["num_buckets"]))
    return (f"CASE WHEN {value} < {low!r} THEN 0 WHEN {value} >= {high!r} THEN {n + 1} "
            f"ELSE CAST(FLOOR(({value} - {low!r}) * {n} / {high - low!r}) AS BIGINT) + 1 END")


def replace_bins(select: exp.Select, groups: tuple[BinGroup, ...],
                 edges: dict[str, tuple[str, str]], attributes: dict) -> None:
    """Rewrite each grouping of ``groups`` in ``select`` onto the node rows, whose
    (clipped) bin edges of each binned attribute are the SQL ``edges[attr]``: a bare
    column becomes the bin's lower bound; in a bucketing call it becomes a value inside
    the node. An
    unaliased output keeps the name DuckDB would give it on the data (the column's, or
    the call's, as PostgreSQL names it)."""
    for g in groups:
        a = attributes[g.attribute]
        lo, hi = edges[g.attribute]
        if g.value:
            replace_item(select, g.column, exp.Var(this=one_value_sql(a, lo)), None)
            continue
        if g.bucket is None:
            replace_item(select, g.column, exp.Var(this=bound_sql(a, lo)), g.column.name)
            continue
        inner = value_sql(a, lo, hi)
        if isinstance(g.bucket, exp.WidthBucket):
            replace_item(select, g.bucket, exp.Var(this=width_bucket_sql(g.bucket, inner)),
                          "width_bucket")
        else:
            replace_item(select, g.column, exp.Var(this=inner), None)


def replace_item(select: exp.Select, node: exp.Expression, new: exp.Expression,
                 name: str | None) -> None:
    """Replace ``node`` (a column of ``select``) with ``new``. When it is in an unaliased
    output of ``select``, alias that output first: ``name``, or when the column is inside
    a larger expression (a call around it), the name DuckDB or PostgreSQL gives the
    expression as written (:func:`~dpsql.planner._names.output_name`)."""
    item, parent = node, node.parent
    while isinstance(parent, exp.Paren):
        item, parent = parent, parent.parent
    top = item
    while top.parent is not None and top.parent is not select:
        top = top.parent
    is_output = top.parent is select and top.arg_key == "expressions"
    if is_output and not isinstance(top, exp.Alias):
        wrapper = exp.Alias(alias=exp.to_identifier(
            name if top is item else output_name(top), quoted=True))
        top.replace(wrapper)
        wrapper.set("this", top)
    node.replace(new)
