"""Pass 2, its calendar filters: ``date_trunc(unit, d) <op> v`` as a predicate on ``d``.

BI tools filter by periods with ``WHERE date_trunc('month', d) >= DATE '2013-03-01'``.
On a binned date or timestamp attribute ``d`` that comparison is exactly a range of
``d``, which the planner answers like any other (aligned on the bins, or interpolated
inside one). :func:`untrunc` rewrites it before :mod:`~dpsql.planner.predicate_truth`
walks it; what is not of this shape is left as it is (and refused there, as before).

**The value compared.** DuckDB's ``date_trunc`` returns a TIMESTAMP (of a DATE too), so
``v`` is compared as a timestamp: a DATE is its midnight, a string is cast to TIMESTAMP,
a constant expression is valued by DuckDB (:class:`~dpsql.planner.value_intervals.Axis`
with a timestamp type: exactly as a timestamp column compares it), and so is a constant
subquery's value (``= (SELECT DATE '2013-03-01')``, ``IN (SELECT ...)``, ``< ANY (SELECT
...)``) and each value of a list (``= ANY ([a, b])``: ``= a OR = b``; ``<> ALL ([a,
b])``: ``<> a AND <> b``; an empty list FALSE or TRUE on every row), as
:mod:`~dpsql.planner.constant_bounds` reads them for a comparison of the attribute
itself. Anything else (a column, a number, a subquery that reads a table: this pass
runs none) is refused with the forms that work. Call it T, with ``floor(T) =
date_trunc(unit, T)`` and ``next(x) = x + 1 unit``. As ``date_trunc`` is a
non-decreasing step function whose values are the unit starts:

* ``trunc(d) >= T  ⟺  d >= (T if T = floor(T) else next(floor(T)))``
* ``trunc(d) >  T  ⟺  d >= next(floor(T))``
* ``trunc(d) <  T  ⟺  d <  (T if T = floor(T) else next(floor(T)))``
* ``trunc(d) <= T  ⟺  d <  next(floor(T))``
* ``trunc(d) =  T  ⟺  T = floor(T) and T <= d < next(T)``; no row when T is inside a
  unit (written ``d >= T AND d < T``: empty, and UNKNOWN where ``d`` is NULL, as the
  comparison is, so that its ``NOT`` keeps every non-NULL row and no NULL one);
* ``<>`` is ``NOT (=)``; ``BETWEEN a AND b`` is ``>= a AND <= b`` (``SYMMETRIC``: or the
  swapped pair); ``IN (a, b)`` is ``= a OR = b``; ``NOT IN`` / ``NOT BETWEEN`` their
  ``NOT``; ``IS NOT DISTINCT FROM T`` is ``(= T) IS TRUE`` (``d IS NULL`` for a NULL T),
  ``IS DISTINCT FROM`` its ``NOT``;
* a NULL T (``NULL``, ``CAST(NULL AS DATE)``) makes the comparison UNKNOWN everywhere
  (``d >= NULL``), and a NULL ``d`` makes every comparison UNKNOWN, as in SQL;
* ``date_trunc(unit, d) IS [NOT] NULL`` is ``d IS [NOT] NULL`` (``date_trunc`` is NULL
  exactly where ``d`` is).

Units: those of :data:`~dpsql.domains.calendar.TRUNC_UNITS` (millennium, century,
decade, isoyear, year, quarter, month, week, day for dates; hour, minute and second too
for timestamps, whose millisecond and microsecond are refused: a release keeps no
fraction of a second), with DuckDB's boundaries (ISO weeks from Monday, quarters
from January, April, July and October, ISO years from the Monday of the week of January
4, decades, centuries and millennia from a year that is a multiple of their length, so
that 2000 starts a century). Another unit, a non-literal one, or ``date_trunc`` of an
attribute that is not a date or timestamp is refused
(:func:`~dpsql.planner.trunc_units.trunc_name`), and so is a comparison of a unit finer
than a day of a date attribute, which DuckDB gets wrong
(:func:`~dpsql.planner.trunc_units.refuse_date_by_time`). The call may stand in
parentheses, and a truncation to a day or longer in a cast to DATE
(``CAST(date_trunc('month', d) AS DATE) >= DATE '2013-03-01'``, as Tableau writes it:
:func:`_undated`). A bound past the year 9999 (``next`` of a T in December 9999) is
beyond every value.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from types import SimpleNamespace

from sqlglot import exp

from dpsql.domains.calendar import DATE_AS_DAY, EPOCH, TIMESTAMP_AS_SECOND
from dpsql.planner.constant_bounds import (EQUALITY, OPS, bound_value, list_values, listed,
                                           one_row, quantified, refuse_empty_type)
from dpsql.planner.trunc_units import (TRUNCS, refuse_date_by_time, to_date, trunc_column,
                                      trunc_name, unit_spelled)
from dpsql.planner.refuse_loose_syntax import refuse_list_membership
from dpsql.planner.value_intervals import Axis

_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ, exp.NullSafeEQ,
                exp.NullSafeNEQ)
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
_FIXED = {"week": timedelta(days=7), "day": timedelta(days=1),
          "hour": timedelta(hours=1), "minute": timedelta(minutes=1),
          "second": timedelta(seconds=1)}
_MONTHS = {"year": 12, "quarter": 3, "month": 1}
_YEARS = {"decade": 10, "century": 100, "millennium": 1000}


def untrunc(node: exp.Expression, meta, is_attr) -> exp.Expression:
    """``node`` with a comparison, ``BETWEEN`` or ``IN`` of ``date_trunc(unit, attr)``
    (``is_attr``: the binned attribute ``meta``'s column) with constants rewritten into
    the same predicate on the attribute itself (module doc); any other node unchanged."""
    if isinstance(node, _COMPARISONS):
        left, right, kind = _unparen(node.this), _unparen(node.expression), type(node)
        left, right = _undated(left, [right], is_attr), _undated(right, [left], is_attr)
        if _trunc_of(right, is_attr) and not _trunc_of(left, is_attr):
            left, right, kind = right, left, _FLIP.get(kind, kind)
        if _trunc_of(left, is_attr) and not _mentions(right, is_attr):
            return _Trunc(left, meta).compare(kind, right)
    elif isinstance(node, exp.Is) and _trunc_of(node.this, is_attr) \
            and isinstance(node.expression, exp.Null):  # NULL exactly where attr is
        trunc_name(_unparen(node.this), meta)  # the unit checked, as DuckDB checks it
        return exp.Is(this=trunc_column(_unparen(node.this)).copy(), expression=exp.Null())
    elif isinstance(node, (exp.Between, exp.In)) and _undated(
            node.this, [v for k, v in node.args.items() if k != "this" and
                        isinstance(v, exp.Expression)] + list(node.expressions), is_attr
    ) is not node.this:
        node = node.copy()
        node.set("this", _undated(node.this, [], is_attr).copy())
        return untrunc(node, meta, is_attr)
    elif isinstance(node, exp.Between) and _trunc_of(node.this, is_attr) and not any(
            _mentions(node.args[k], is_attr) for k in ("low", "high")):
        t = _Trunc(_unparen(node.this), meta)
        lo, hi = node.args["low"], node.args["high"]
        out = exp.and_(t.compare(exp.GTE, lo, "BETWEEN"), t.compare(exp.LTE, hi, "BETWEEN"))
        if node.args.get("symmetric"):
            out = exp.or_(out, exp.and_(t.compare(exp.GTE, hi, "BETWEEN"),
                                        t.compare(exp.LTE, lo, "BETWEEN")))
        return exp.paren(out, copy=False)
    elif isinstance(node, exp.In) and _trunc_of(node.this, is_attr) \
            and not node.args.get("unnest") and not _mentions(node, is_attr, node.this):
        refuse_list_membership(node)
        t = _Trunc(_unparen(node.this), meta)
        items = list(node.expressions)
        if node.args.get("query") is not None:  # IN (SELECT v): a constant one's value
            items.append(node.args["query"])
        if not items:
            return node
        hows = [None] * len(node.expressions) + ["IN (SELECT ...)"] * (len(items) - len(
            node.expressions))
        return exp.paren(exp.or_(*(t.compare(exp.EQ, e, how) for e, how in zip(items, hows))),
                         copy=False)
    return node


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _undated(node: exp.Expression, values: list[exp.Expression], is_attr) -> exp.Expression:
    """``node``, or the ``date_trunc`` inside it when it is one to a day or longer in a
    cast to DATE (Tableau's ``CAST(DATE_TRUNC('MONTH', d) AS DATE)``), or the attribute
    itself in one (``CAST(ts AS DATE)``, ``ts::DATE``: ``date_trunc('day', ts)``, the
    day :func:`~dpsql.planner.trunc_units.day_of` groups by), compared with ``values``
    that hold no bare string: the truncation is a midnight, which the DATE holds as it
    is and which compares with a DATE or a TIMESTAMP as the TIMESTAMP does (DuckDB
    compares a DATE with a TIMESTAMP as its midnight). A bare string would be cast to
    DATE there (dropping a time of day) and to TIMESTAMP without the cast, and a unit
    finer than a day of a timestamp loses its time in the DATE: those keep the cast,
    and are refused as before."""
    inner = _unparen(node)
    if not to_date(inner):
        return node
    call = _unparen(inner.this)
    if isinstance(call, exp.Column) and is_attr(call):
        call = exp.TimestampTrunc(this=call, unit=exp.Var(this="DAY"))
    if not isinstance(call, TRUNCS):
        return node
    name = unit_spelled(call)
    if name is None or name in DATE_AS_DAY or name in TIMESTAMP_AS_SECOND:
        return node
    if any(isinstance(x.parent, exp.Paren) or not isinstance(x.parent, exp.Cast)
           for v in values for x in v.find_all(exp.Literal) if x.is_string):
        return node
    return call


def _trunc_of(node: exp.Expression, is_attr) -> bool:
    """``date_trunc(unit, attr)`` (or of ``CAST(attr AS TIMESTAMP)``), in parentheses or not."""
    node = _unparen(node)
    return isinstance(node, TRUNCS) and is_attr(trunc_column(node))


def _mentions(node: exp.Expression, is_attr, skip: exp.Expression | None = None) -> bool:
    """Whether a column of the attribute appears in ``node`` (outside ``skip``)."""
    inside = set() if skip is None else {id(x) for x in skip.find_all(exp.Column)}
    return any(is_attr(x) for x in node.find_all(exp.Column) if id(x) not in inside)


class _Trunc:
    """``date_trunc(unit, attr)``: its unit checked, and its comparisons with a value."""

    def __init__(self, call: exp.Expression, meta) -> None:
        self.unit = trunc_name(call, meta)
        refuse_date_by_time(call, meta)
        self.column = trunc_column(call)
        self.what = f"the value compared with {call.sql('duckdb')}"
        # compared as a TIMESTAMP column compares (date_trunc returns TIMESTAMP)
        self.axis = _timestamp_axis(call.sql("duckdb"))

    def compare(self, kind: type, node: exp.Expression,
                how: str | None = None) -> exp.Expression:
        """``date_trunc(unit, attr) <kind> node`` on ``attr``; ``how``: the comparison
        when it is not ``kind`` itself (``IN (SELECT ...)``), for the refusal of a VARCHAR
        (:func:`~dpsql.planner.constant_bounds.bound_value`)."""
        some, over = quantified(node)
        items = listed(over, self.what)
        if items is not None:  # op ANY ([a, b]): op a OR op b; ALL: AND
            if not items:  # FALSE (ANY) or TRUE (ALL) on every row, NULL ones too
                refuse_empty_type(over, node, self.what, self.axis)
                return exp.false() if some else exp.true()
            items = list_values(items, node, self.what, self.axis)
            both = exp.or_ if some else exp.and_
            return exp.paren(both(*(self.compare(kind, e) for e in items)), copy=False)
        if how is None and kind not in EQUALITY:
            how = OPS[kind]
        if over is not None:  # op ANY (SELECT v): op v
            how = f"{OPS[kind]} {'ANY' if some else 'ALL'} (SELECT ...)"
            node = one_row(node, over, self.what, self.axis.name)
        x = bound_value(node, self.what, how, self.axis)
        col = self.column
        if x is None:  # a NULL: UNKNOWN everywhere, or IS [NOT] DISTINCT FROM NULL
            if kind in (exp.NullSafeEQ, exp.NullSafeNEQ):
                out = exp.Is(this=col.copy(), expression=exp.Null())
                return out if kind is exp.NullSafeEQ else exp.not_(out)
            return exp.GTE(this=col.copy(), expression=exp.Null())
        t = EPOCH + timedelta(seconds=x)
        low = _floor(t, self.unit)
        up = _next(low, self.unit)
        on_start = t == low  # never for the year 0 (None): T is in a year AD
        if kind is exp.GTE:
            return self._at_least(t if on_start else up)
        if kind is exp.GT:
            return self._at_least(up)
        if kind is exp.LT:
            return exp.not_(self._at_least(t if on_start else up))
        if kind is exp.LTE:
            return exp.not_(self._at_least(up))
        if on_start:
            same = exp.and_(self._at_least(t), exp.not_(self._at_least(up)))
        else:
            same = self._nothing(t)
        if kind is exp.EQ:
            return exp.paren(same, copy=False)
        if kind is exp.NEQ:
            return exp.not_(same)
        same = exp.Is(this=exp.paren(same, copy=False), expression=exp.true())
        return same if kind is exp.NullSafeEQ else exp.not_(same)

    def _at_least(self, bound: datetime | None) -> exp.Expression:
        """``attr >= bound``; nothing for a bound past the year 9999 (None)."""
        if bound is None:
            return self._nothing(EPOCH)
        return exp.GTE(this=self.column.copy(), expression=_timestamp(bound))

    def _nothing(self, at: datetime) -> exp.Expression:
        """A predicate of no row, UNKNOWN where the attribute is NULL."""
        return exp.paren(exp.and_(
            exp.GTE(this=self.column.copy(), expression=_timestamp(at)),
            exp.LT(this=self.column.copy(), expression=_timestamp(at))), copy=False)


def _timestamp_axis(name: str) -> Axis:
    return Axis(SimpleNamespace(name=name, lower=0.0, upper=0.0, value_type="timestamp",
                                step=1))


def _timestamp(t: datetime) -> exp.Expression:
    return exp.cast(exp.Literal.string(t.isoformat(sep=" ")), exp.DataType.Type.TIMESTAMP)


def _floor(t: datetime, unit: str) -> datetime | None:
    """``date_trunc(unit, t)``, as DuckDB's (weeks start on Monday, quarters in January,
    April, July and October, ISO years on the Monday of the week of January 4, decades,
    centuries and millennia on a year that is a multiple of their length:
    :data:`~dpsql.domains.calendar.TRUNC_UNITS`); None for the year 0 (1 BC), where a
    decade, century or millennium of the first years AD starts and which no Python
    datetime holds."""
    if unit in _MONTHS:
        months = _MONTHS[unit]
        return datetime(t.year, 1 if months == 12 else t.month - (t.month - 1) % months, 1)
    if unit in _YEARS:
        year = t.year - t.year % _YEARS[unit]
        return datetime(year, 1, 1) if year >= 1 else None
    if unit == "isoyear":
        day = date.fromisocalendar(t.isocalendar()[0], 1, 1)
        return datetime(day.year, day.month, day.day)
    if unit == "week":
        return datetime(t.year, t.month, t.day) - timedelta(days=t.weekday())
    keep = ("day", "hour", "minute", "second").index(unit)
    return datetime(*(t.year, t.month, t.day, t.hour, t.minute, t.second)[:3 + keep])


def _next(start: datetime | None, unit: str) -> datetime | None:
    """``start + 1 unit`` (a unit start; None: the year 0, :func:`_floor`), None past the
    year 9999."""
    try:
        if unit in _MONTHS:
            m = start.year * 12 + start.month - 1 + _MONTHS[unit]
            return datetime(m // 12, m % 12 + 1, 1)
        if unit in _YEARS:
            return datetime((start.year if start else 0) + _YEARS[unit], 1, 1)
        if unit == "isoyear":
            day = date.fromisocalendar(start.isocalendar()[0] + 1, 1, 1)
            return datetime(day.year, day.month, day.day)
        return start + _FIXED[unit]
    except (OverflowError, ValueError):
        return None


__all__ = ["untrunc"]
