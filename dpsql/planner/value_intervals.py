"""Comparisons with a binned attribute as sets of intervals of its axis, following SQL
on the attribute's value type (``AttributeMeta.value_type``; DESIGN "SQL surface"). The
predicates built of them (AND, OR, NOT, NULLs: three-valued) are walked by
:mod:`~dpsql.planner.predicate_truth`.

* **integer / decimal** values lie on a grid of step ``r`` (1, or the resolution). A
  value v stands for the cell [v, v + r) of the axis, so every comparison includes or
  excludes whole values, as SQL does: ``x <= b`` is ``x < (⌊b/r⌋ + 1)·r``, ``x < b`` is
  ``x < ⌈b/r⌉·r``, ``x >= a`` is ``x >= ⌈a/r⌉·r``, ``x > a`` is ``x >= (⌊a/r⌋ + 1)·r``;
  ``BETWEEN a AND b`` keeps both ends; ``x = v`` is the cell of v (empty when v is off
  the grid: an integer is never 2.5); ``IN`` is a union of cells; ``<>``, ``NOT IN``,
  ``NOT BETWEEN`` and ``NOT (...)`` are complements (where no bound is NULL); ``OR`` of
  predicates on the one attribute is a union. NULLs are no point of the axis: ``IS NOT
  NULL`` keeps every value (it tells the planner that the query leaves NULLs out, so a
  view that dropped them may answer), ``IS NULL`` none (under ``on_null = "category"``
  the NULL node is kept instead, under ``"drop"`` it is refused). The grid arithmetic is
  exact (decimal fractions, not binary floating point).
* **real** values are a continuous axis: ``<`` and ``<=`` are the same bound, a single
  value has no width, so ``=``, ``IN``, ``<>`` and ``NOT IN`` are refused with the forms
  that work where the point alone decides a row (``Truth.points`` and
  :func:`~dpsql.planner.predicate_truth.refuse_points`: ``x NOT IN (1.5, NULL)``, never
  TRUE, is answered).

The result is a tuple of disjoint half-open intervals ``(lo, hi)`` in increasing order,
``-inf``/``inf`` for an unbounded side; ``()`` is the empty set. A bound that falls
inside a bin is then interpolated by the rewrite (uniformly, reported in ``dp_info``).
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction

from sqlglot import exp

from dpsql.domains.calendar import CALENDAR_TYPES, TRUNC_ALIASES, axis_text, to_axis
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.classify_calls import as_fraction, literal_value
from dpsql.planner.date_parts import date_part_call
from dpsql.planner.fold_constants import (Constant, cast_text, epoch_seconds, fold_constant,
                                          not_plain_calendar, plain_calendar)
from dpsql.planner.refuse_time_zones import refuse_time_zone

Intervals = tuple[tuple[float, float], ...]
EVERYTHING: Intervals = ((-math.inf, math.inf),)
GRID_TYPES = ("integer", "decimal", "date", "timestamp")
_SPANS = ("year", "decade", "century", "millennium", "era", "isoyear")
"""Date parts whose values are one span of time each (``year(d) = 2013`` is a range of
``d``), unlike those that repeat (``hour(ts) = 5`` every day, ``month(d) = 3`` every
year): only for those does a refusal suggest the range."""
_CALENDAR_RESULTS = ("DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS")
"""DuckDB types of a constant that a date or timestamp attribute compares with exactly
(a TIMESTAMP_NS holds nanoseconds, which a Python datetime does not)."""
_NUMERIC_TYPE = re.compile(r"U?(?:TINY|SMALL|BIG|HUGE)?INT(?:EGER)?|DECIMAL\(\d+,\d+\)"
                           r"|FLOAT|DOUBLE")
"""DuckDB's names (``typeof``) of the numeric types."""
_PLAIN_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)\s*")
_CANONICAL = re.compile(r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)?")


def _calendar_axis(text: str, to: str, value_type: str, what: str) -> float:
    """A string compared with a date (``to = "date"``) or timestamp attribute, cast as
    DuckDB casts it to the column's type, as a point of ``value_type``'s axis:
    ``'2013-1-5'`` is 2013-01-05, ``'2013-01-05 12:00'`` against a DATE column is
    2013-01-05 (DuckDB drops the time). Canonical text is read by Python (the same
    value, without a query), the rest by DuckDB
    (:func:`~dpsql.planner.fold_constants.cast_text`), and a value Python's ``date``
    does not hold (``'-0015-03-01'``, 16 BC; a year past 9999) by DuckDB's ``epoch``; a
    time zone is refused."""
    if not plain_calendar(text):
        try:
            parsed = datetime.fromisoformat(text.strip())
        except ValueError:
            pass
        else:  # '2013-01-02 05:30+02': no guessing
            refuse_time_zone(parsed, f"{what} {text!r}:")
        raise not_plain_calendar(what, text)
    if _CANONICAL.fullmatch(text) and (to == "timestamp" or len(text) == 10):
        try:
            return to_axis(value_type, date.fromisoformat(text) if to == "date"
                           else datetime.fromisoformat(text))
        except ValueError:
            pass  # '2013-02-30': DuckDB's error
    typed = "DATE" if to == "date" else "TIMESTAMP"
    value = cast_text(text, typed, what).value
    if isinstance(value, (date, datetime)):
        return to_axis(value_type, value)
    return _epoch_axis(exp.cast(exp.Literal.string(text), typed), value_type, what)


def _epoch_axis(node: exp.Expression, value_type: str, what: str) -> float:
    """The axis point of a constant date or timestamp that Python cannot hold, by
    DuckDB's ``epoch`` (seconds; a date attribute's axis counts days)."""
    seconds = epoch_seconds(node, what)
    return seconds / 86400.0 if value_type == "date" else seconds


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """The intervals in both ``a`` and ``b``."""
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo < hi:
                out.append((lo, hi))
    return _normal(out)


def union(a: Intervals, b: Intervals) -> Intervals:
    return _normal(list(a) + list(b))


def complement(a: Intervals) -> Intervals:
    out, at = [], -math.inf
    for lo, hi in a:
        if lo > at:
            out.append((at, lo))
        at = hi
    if at < math.inf:
        out.append((at, math.inf))
    return tuple(out)


def _normal(items: list[tuple[float, float]]) -> Intervals:
    """Sorted, disjoint, touching intervals merged."""
    out: list[tuple[float, float]] = []
    for lo, hi in sorted(items):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


class Axis:
    """One attribute's axis: its name, value type and grid step."""

    def __init__(self, meta) -> None:
        self.name = meta.name
        self.lower, self.upper = meta.lower, meta.upper
        self.value_type = meta.value_type or "real"
        step = meta.step if self.value_type in GRID_TYPES else None
        self.step = None if not step else 1 if step == 1 else as_fraction(step)

    def literal(self, node: exp.Expression, what: str) -> Fraction | float | None:
        """A bound's value on the axis (None for a NULL: ``NULL``, ``CAST(NULL AS
        INT)``, a constant expression DuckDB values as NULL), as DuckDB compares it with a column of the
        attribute's type: a number (exact where DuckDB's is:
        :func:`~dpsql.planner.classify_calls.literal_value`), or for a date or timestamp
        attribute a date or timestamp (``DATE 'x'``, ``TIMESTAMP 'x'``, ``'x'``, ``CAST('x'
        AS DATE)``, ...) as its point of the axis (:func:`dpsql.domains.calendar.to_axis`).
        As in SQL, a timestamp compared with a date attribute keeps its time of day (a
        fraction of a day, so ``d < TIMESTAMP '2013-06-01 12:00'`` keeps June 1st) and a
        date compared with a timestamp attribute is its midnight; a plain string is cast to
        the attribute's type (:meth:`_text`, :func:`_calendar_axis`), and a constant
        expression (``10 + 5``, ``DATE '2013-01-31' + INTERVAL 1 MONTH``) is valued by
        DuckDB (:mod:`~dpsql.planner.fold_constants`)."""
        if self.value_type in CALENDAR_TYPES:
            return self._calendar(node, what)
        if isinstance(node, exp.Literal) and node.is_string:
            return self._text(node.this, what)
        try:
            return literal_value(node, what)
        except UnsupportedQueryError:
            folded = fold_constant(node, what)
            if folded is None:
                raise
            if folded.value is None:
                return self._null(folded, node, what)
            return self._number(folded, node, what)

    def _number(self, c: Constant, node: exp.Expression, what: str) -> Fraction | float:
        """A constant's value as a numeric bound: integers and DECIMALs exact, a DOUBLE
        as the float it is. A FLOAT makes DuckDB compare in single precision: exact on a
        real axis (the column is the DOUBLE side) and on integers within 2^24, refused
        on decimals (2.10 and 2.1::FLOAT are the same FLOAT)."""
        v = c.value
        if isinstance(v, int) and not isinstance(v, bool):
            return Fraction(v)
        if isinstance(v, Decimal) and v.is_finite():
            return Fraction(v)
        if isinstance(v, float) and not math.isnan(v) and (
                c.type == "DOUBLE" or self.step is None or (
                    self.value_type == "integer" and max(abs(self.lower), abs(self.upper))
                    <= 2 ** 24)):
            return v
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} is {v!r} of type {c.type}, which is not compared "
            f"exactly with the {self.value_type} attribute {self.name!r}; write it as an "
            "integer, a decimal or a DOUBLE")

    def _null(self, c: Constant, node: exp.Expression, what: str) -> None:
        """A NULL bound (None: every comparison with it is unknown), when DuckDB compares
        it with the attribute: an untyped NULL, or one of a type of the attribute's kind
        (a number for a numeric attribute, a date or timestamp for a calendar one).
        Another type is refused, as DuckDB refuses ``k < CAST(NULL AS DATE)`` or ``d <
        NULL + 1`` ("Cannot compare values of type DATE and type INTEGER")."""
        calendar = self.value_type in CALENDAR_TYPES
        if c.type == '"NULL"' or (c.type in _CALENDAR_RESULTS + ("TIMESTAMP_NS",)
                                  if calendar else _NUMERIC_TYPE.fullmatch(c.type)):
            return None
        kind = "a date or timestamp" if calendar else "a number"
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} is a NULL of type {c.type}, which DuckDB does "
            f"not compare with the {self.value_type} attribute {self.name!r} without a "
            f"cast; write NULL, or a NULL of {kind} (CAST(NULL AS "
            f"{'DATE' if calendar else 'INTEGER'}))")

    def _text(self, text: str, what: str) -> Fraction | float:
        """A string compared with a numeric attribute: DuckDB casts it to the column's
        type. A plain number on the attribute's grid is that number whatever the column
        (an integer for an integer attribute, a multiple of the resolution for a
        decimal); one off the grid is refused, since DuckDB's answer depends on the
        source column's type, which the release does not keep: ``k = '5.4'`` and ``k =
        (SELECT '5.4')`` are ``k = 5`` on a BIGINT column and keep no row on a DOUBLE
        one (``n > '10.5'`` is ``n > 11`` on a BIGINT column), and PostgreSQL refuses
        them."""
        if not _PLAIN_NUMBER.fullmatch(text):
            raise UnsupportedQueryError(
                f"{what} is the string {text!r}, which is not a plain number; write the "
                f"number itself, e.g. {self.name} < 10 or {self.name} < '10'")
        value = Fraction(text.strip())
        if self.step is None:
            return float(value)
        if (value / self.step).denominator == 1:
            return value
        whole = "a whole number" if self.step == 1 else f"a multiple of {float(self.step):g}"
        kind = "an integer" if self.value_type == "integer" else f"a {self.value_type}"
        raise UnsupportedQueryError(
            f"{what} is the string {text!r}, which is not {whole}, and {self.name!r} is "
            f"{kind} attribute: DuckDB casts the string to the type of the source column, "
            "which the release does not keep (an integer or DECIMAL column rounds it to its "
            "scale, a DOUBLE column keeps it), and PostgreSQL refuses it; write the number "
            f"without quotes ({text.strip()}) or {whole}")

    def _calendar(self, node: exp.Expression, what: str) -> float | None:
        v, to = node, self.value_type
        if isinstance(node, exp.Cast) and node.to.this in (exp.DataType.Type.DATE,
                                                          exp.DataType.Type.TIMESTAMP):
            v, to = node.this, "date" if node.to.is_type("date") else "timestamp"
        if isinstance(v, exp.Literal) and v.is_string:
            return _calendar_axis(v.this, to, self.value_type, what)
        folded = fold_constant(node, what)
        if folded is not None and folded.value is None:
            return self._null(folded, node, what)
        if folded is not None and folded.type in _CALENDAR_RESULTS:
            if isinstance(folded.value, (date, datetime)):
                return to_axis(self.value_type, folded.value)
            return _epoch_axis(node, self.value_type, what)  # before the year 1, past 9999
        raise UnsupportedQueryError(
            f"{what} must be a {self.value_type} literal ("
            + ("DATE 'YYYY-MM-DD', 'YYYY-MM-DD'" if self.value_type == "date" else
               "TIMESTAMP 'YYYY-MM-DD HH:MM:SS', 'YYYY-MM-DD HH:MM:SS', DATE 'YYYY-MM-DD'")
            + ", an expression of them with INTERVAL, or a ? parameter bound to such a "
            f"string), got {node.sql('duckdb')!r}"
            + (f" (of type {folded.type})" if folded is not None else ""))

    def _grid(self, x: Fraction | float, up: bool) -> Fraction:
        """The grid point at or above (``up``) / at or below ``x``, exactly (a float is
        read as the decimal it prints as; a Fraction is exact: a bound written with more
        digits than a float holds moves no boundary)."""
        if self.step == 1:  # integers, days, seconds
            return Fraction(math.ceil(x) if up else math.floor(x))
        q = as_fraction(x) / self.step  # type: ignore[operator]
        n = math.ceil(q) if up else math.floor(q)
        return n * self.step

    def compare(self, kind: type, v: Fraction | float) -> Intervals:
        if isinstance(v, float) and math.isinf(v) and (
                self.step is not None or kind not in (exp.EQ, exp.NEQ)):
            # a DOUBLE beyond range (1e400, 'inf'::DOUBLE): every value or none. On a real
            # axis x >= inf was the piece (inf, inf), whose infinite ends read as no bound:
            # every row (x >= 'inf'::DOUBLE counted 6,000 of 6,000 rows; DuckDB: none)
            keeps = {exp.LT: v > 0, exp.LTE: v > 0, exp.GT: v < 0, exp.GTE: v < 0,
                     exp.EQ: False, exp.NEQ: True}[kind]
            return EVERYTHING if keeps else ()
        if self.step is None:
            v = float(v)
            if kind in (exp.LT, exp.LTE):
                return ((-math.inf, v),)
            if kind in (exp.GT, exp.GTE):
                return ((v, math.inf),)
            raise self.point_error("=" if kind is exp.EQ else "<>")
        r = self.step
        if kind is exp.LTE:
            return ((-math.inf, float(self._grid(v, up=False) + r)),)
        if kind is exp.LT:
            return ((-math.inf, float(self._grid(v, up=True))),)
        if kind is exp.GTE:
            return ((float(self._grid(v, up=True)), math.inf),)
        if kind is exp.GT:
            return ((float(self._grid(v, up=False) + r), math.inf),)
        cell = self.cell(v)
        return cell if kind is exp.EQ else complement(cell)

    def cell(self, v: Fraction | float) -> Intervals:
        """The cell [v, v + r) of a grid value; empty when ``v`` is off the grid."""
        if self.step is None:
            raise self.point_error("IN")
        if isinstance(v, float) and math.isinf(v):
            return ()
        lo = self._grid(v, up=False)
        if lo != as_fraction(v):
            return ()
        return ((float(lo), float(lo + self.step)),)

    def point_error(self, op: str) -> UnsupportedQueryError:
        a = self.name
        return UnsupportedQueryError(
            f"{op} on the real-valued attribute {a!r} compares a single point of a "
            f"continuous axis, which holds no released count; write {a} BETWEEN lo AND hi "
            f"(or <, <=, >, >=), or declare the attribute type = \"integer\" or \"decimal\" "
            "in the spec to compare whole values")


def unsupported(c: exp.Expression, axis: Axis) -> UnsupportedQueryError:
    a = axis.name
    v = "v" if a.lower() != "v" else "w"  # the bound's placeholder: not the attribute's name
    forms = (f"{a} BETWEEN lo AND hi, {a} < {v}, {a} <= {v}, {a} > {v}, {a} >= {v}"
             + (f", {a} = {v}, {a} IN (...), {a} <> {v}, {a} NOT IN (...)"
                if axis.step is not None else "")
             + (f", date_trunc('month', {a}) >= {v} (any of those with date_trunc)"
                if axis.value_type in CALENDAR_TYPES else ""))
    kind = "date or timestamp" if axis.value_type in CALENDAR_TYPES else "numeric"
    sub = "" if c.find(exp.Query) is None else (
        " (the planner does not run a subquery: list its values as literals, or count by "
        f"{a} first and filter the released bins in an outer query)")
    part = next((p for col in c.find_all(exp.Column) if col.name.lower() == a.lower()
                 and (p := date_part_call(col)) is not None), None)
    if part is not None:  # year(d) = 2013: a part is answered outside WHERE only
        call, name = part
        ranges = (f"filter on the range it stands for ({a} >= DATE '2013-01-01' AND {a} < "
                  f"DATE '2014-01-01', or date_trunc('year', {a}) = DATE '2013-01-01'), or "
                  if TRUNC_ALIASES.get(name, name) in _SPANS else "")
        sub += (f"; {call.sql('duckdb')} is a date part: it is answered in GROUP BY, "
                "HAVING and the SELECT list where it is constant on the bins, not in "
                f"WHERE: {ranges}group by it and keep groups with HAVING")
    return UnsupportedQueryError(
        f"predicate {c.sql('duckdb')!r} on the binned attribute {a!r} is not supported; "
        f"write {forms} with {kind} literals, combined with AND, OR and NOT{sub}")


def pieces_condition(pieces: tuple[tuple[float, float], ...], lo_c: str, hi_c: str) -> str:
    """The bins that overlap any of ``pieces`` (FALSE for none)."""
    if not pieces:
        return "FALSE"
    parts = []
    for lo, hi in pieces:
        cond = [f"{hi_c} > {_num(lo)}"] if math.isfinite(lo) else []
        cond += [f"{lo_c} < {_num(hi)}"] if math.isfinite(hi) else []
        parts.append(" AND ".join(cond) or "TRUE")
    return "(" + " OR ".join(f"({c})" for c in parts) + ")"


def pieces_weight(pieces: tuple[tuple[float, float], ...], lo_c: str, hi_c: str) -> str:
    """The fraction of a bin's width inside the union of ``pieces`` (uniform
    interpolation, as for one interval)."""
    terms = []
    for lo, hi in pieces:
        a = f"GREATEST({lo_c}, {_num(lo)})" if math.isfinite(lo) else lo_c
        b = f"LEAST({hi_c}, {_num(hi)})" if math.isfinite(hi) else hi_c
        terms.append(f"GREATEST(({b}) - ({a}), 0)")
    return f"({' + '.join(terms)}) / ({hi_c} - {lo_c})"


def _num(x: float) -> str:
    return repr(float(x))


def describe_intervals(pieces: Intervals, value_type: str | None = None) -> str:
    """``[lo, hi) ∪ ...`` for dp_info; dates and timestamps as such (``[2013-01-01,
    2013-04-01)``)."""
    if not pieces:
        return "∅"

    def show(x: float) -> str:
        if value_type in CALENDAR_TYPES and math.isfinite(x):
            return axis_text(value_type, x)  # also before 1 AD and past 9999
        return f"{x:g}"
    return " ∪ ".join(f"[{show(lo)}, {show(hi)})" for lo, hi in pieces)
