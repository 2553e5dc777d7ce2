"""Date parts of a binned date or timestamp attribute: ``year(d)``, ``month(d)``,
``extract(dow FROM d)``, ``date_part('doy', d)``, ... grouped, selected, ordered by and
compared in HAVING as ``date_trunc(unit, d)`` is (:mod:`dpsql.planner.group_bins`).

**A part is a function of a truncation.** ``year(d)`` is a function of
``date_trunc('year', d)``, ``month(d)`` of ``date_trunc('month', d)``, ``dayofweek(d)``
of ``date_trunc('day', d)`` (:func:`part_unit`). So a part is constant on every node
that lies within one unit, and the planner answers it exactly as it answers
``date_trunc(unit, d)``: from the coarsest level whose nodes each lie in one unit, with
the call evaluated by DuckDB on each node's first value (``Reference.truncs``; the
value and its type are DuckDB's own). Where a boundary of the unit falls inside a bin,
that bin holds values with different parts and no released count says how many rows
each has: refused, naming the parts that are constant on the bins (``dayofweek(m)``
or ``day(m)`` on month bins, ``month(w)`` on week bins).

For most parts the value changes at every boundary of its unit (each day has another
day of the week, each week another week number), so "the unit aligns with the bins" is
exactly "the part is constant on every bin". A few parts change less often than any
``date_trunc`` unit, and are answered where their year is constant (never wrong,
refused on bins that cross a year but no boundary of theirs): ``century`` and
``millennium`` (DuckDB's start in a year ending in 01, 2001 is in the 21st century,
where ``date_trunc('century', ·)`` starts 2000) and ``era``. A part finer than a day of
a date (``hour(d)``, 0) is answered where the day is, as ``date_trunc('hour', d)`` is;
a part that reads a timestamp below the second (its milliseconds, microseconds or
nanoseconds, and ``epoch`` and ``julian``, which carry the fraction) is refused, as the
release keeps no fraction of a second (:func:`below_second`).

Spellings: the functions DuckDB names after a part (``year``, ``dayofweek``,
``weekday``, ``isodow``, ``yearweek``, ``epoch``, ...; also
``monthname``, ``dayname`` and ``last_day``), ``EXTRACT(part FROM d)`` and
``date_part('part', d)`` / ``datepart`` with every part name DuckDB accepts
(:data:`~dpsql.domains.calendar.TRUNC_ALIASES`: ``'mon'``, ``'dow'``, ``'doy'``...).
The column must be the call's whole argument (``year(d + 1)`` is refused as any other
computation with a binned column is). A part in WHERE is not answered here (a
predicate on a binned attribute is a range of it: write the range, or ``date_trunc``).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.domains.calendar import (DATE_AS_DAY, TIMESTAMP_AS_SECOND, TRUNC_ALIASES,
                                    TRUNC_UNITS, trunc_aligned)
from dpsql.errors import UnsupportedQueryError
from dpsql.release_file import AttributeMeta

_CLASSES = {name: part for name, part in (
    ("Year", "year"), ("Month", "month"), ("Quarter", "quarter"), ("Day", "day"),
    ("DayOfMonth", "day"), ("DayOfWeek", "dow"), ("DayOfWeekIso", "isodow"),
    ("DayOfYear", "doy"), ("Hour", "hour"), ("Minute", "minute"), ("Second", "second"),
    ("Week", "week"), ("WeekOfYear", "week"), ("Monthname", "month"),
    ("Dayname", "dow"), ("TimeToUnix", "epoch"), ("LastDay", "month"))}
"""sqlglot's classes for DuckDB's part functions (by name: some are missing from older
sqlglot versions, which parse those calls as ``Anonymous``) -> the part."""

_FUNCTIONS = {**{n: n for n in (
    "year", "month", "quarter", "day", "dayofmonth", "dayofweek", "weekday", "isodow",
    "dayofyear", "week", "weekofyear", "yearweek", "isoyear", "decade", "century",
    "millennium", "era", "julian", "hour", "minute", "second", "millisecond",
    "microsecond", "nanosecond", "epoch")},
    "monthname": "month", "dayname": "dow", "last_day": "month"}
"""DuckDB's one-argument part functions (by lower-case name) -> the part."""

_BY_YEAR = {"era", "century", "millennium"} | {
    s for s, u in TRUNC_ALIASES.items() if u in ("century", "millennium")}
"""Parts that change less often than their ``date_trunc`` unit's boundaries (DuckDB's
centuries start in 2001, its truncation to a century in 2000): functions of the year."""

_NANO = {"nanosecond", "nanoseconds", "ns", "nsec"}
_UNSUPPORTED = {"timezone", "timezone_hour", "timezone_minute"}

SHOWN = ("second", "minute", "hour", "day", "dayofweek", "isodow", "dayofyear", "week",
         "yearweek", "month", "quarter", "year", "isoyear", "decade", "century",
         "millennium")
"""The part functions a refusal lists, where they are constant on the bins."""


def date_part_call(col: exp.Column) -> tuple[exp.Expression, str] | None:
    """(the call, its part as written, lower case) when ``col`` is the whole value
    argument of a date-part call, in parentheses or not (module doc); None otherwise."""
    node, call = col, col.parent
    while isinstance(call, exp.Paren):
        node, call = call, call.parent
    if isinstance(call, exp.Extract):
        unit = call.this
        if call.expression is node and isinstance(unit, (exp.Var, exp.Literal)):
            return call, unit.name.lower()
        return None
    if isinstance(call, exp.Anonymous):
        name, args = call.name.lower(), call.expressions
        if name in ("date_part", "datepart") and len(args) == 2 and args[1] is node \
                and isinstance(args[0], exp.Literal) and args[0].is_string:
            return call, args[0].name.lower()
        if name in _FUNCTIONS and len(args) == 1 and args[0] is node:
            return call, _FUNCTIONS[name]
        return None
    part = _CLASSES.get(type(call).__name__)
    if part is not None and call.this is node and all(
            v is None or v is False or (isinstance(v, exp.Boolean) and not v.this)
            for k, v in call.args.items() if k != "this"):
        return call, part
    return None


def part_unit(call: exp.Expression, part: str, a: AttributeMeta) -> str:
    """The ``date_trunc`` unit of which ``part`` (of the binned attribute ``a``, in
    ``call``) is a function, checked: ``a`` is a date or timestamp attribute, the part
    one DuckDB takes on it, and the unit's boundaries bin edges (so that the part is
    constant on every bin); else an :class:`UnsupportedQueryError` naming what to
    write."""
    shown = call.sql("duckdb")
    if a.value_type not in TRUNC_UNITS:
        raise UnsupportedQueryError(
            f"{shown}: {a.name!r} holds {a.value_type or 'real'} numbers, not dates or "
            f"timestamps; group its values by buckets of whole bins (GROUP BY {a.name}, "
            f"or floor({a.name} / w))")
    if a.value_type == "timestamp" and below_second(part):
        raise UnsupportedQueryError(
            f"{shown} reads {a.name!r} below the second, and the release keeps no fraction "
            "of a second (the build cuts it off when counting: docs/spec.md), so it would "
            f"group each second's rows as one; group by second({a.name}) or "
            f"date_trunc('second', {a.name})")
    unit = unit_of(part, a.value_type)
    if unit is None:
        raise UnsupportedQueryError(
            f"{shown}: the date part {part!r} of {a.name!r} ({a.value_type}) is not "
            f"supported; the parts that are: {', '.join(SHOWN)} (and DuckDB's other "
            "names for them)")
    if not trunc_aligned(a, unit, 1):
        bins = a.unit + " bins" if a.unit else f"bins of {a.width:g}"
        fits = [p for p in SHOWN if (u := unit_of(p, a.value_type)) is not None
                and trunc_aligned(a, u, 1)]
        raise UnsupportedQueryError(
            f"{shown} is not constant on the released bins of {a.name!r} ({bins}): a bin "
            f"holds values of {a.name} in more than one {unit}, and the release does not "
            f"say how many of its rows have each value of {shown}. "
            + (f"Date parts constant on these bins: "
               f"{', '.join(f'{p}({a.name})' for p in fits)}" if fits else
               "No date part is constant on these bins")
            + f"; or count one {unit} with WHERE {a.name} BETWEEN ...")
    return unit


def below_second(part: str) -> bool:
    """Whether the date part or ``date_trunc`` unit ``part`` of a timestamp reads its
    fraction of a second (milliseconds, microseconds, nanoseconds, and ``epoch`` and
    ``julian``, which carry the fraction), which a release does not keep: such parts of
    a timestamp attribute are refused, as on a source with fractions they would group
    each second's rows as one (DuckDB on the rows: one group per value)."""
    return part in _NANO or part in ("epoch", "julian", "jd") or \
        TRUNC_ALIASES.get(part, part) in TIMESTAMP_AS_SECOND


def unit_of(part: str, value_type: str) -> str | None:
    """The ``date_trunc`` unit (:data:`~dpsql.domains.calendar.TRUNC_UNITS`) of which
    ``part`` of a ``value_type`` value is a function (module doc), or None for a part
    that is not one of DuckDB's for that type, or that reads a timestamp below the
    second (:func:`below_second`)."""
    if part in _UNSUPPORTED or part in _NANO and value_type == "date" or \
            value_type == "timestamp" and below_second(part):
        return None
    if part in _BY_YEAR:
        unit = "year"
    elif part in ("julian", "jd", "dayofweek", "isodow", "weekday", "dayofyear",
                  "dayofmonth"):
        unit = "day"
    else:
        unit = TRUNC_ALIASES.get(part, part)
    if value_type == "date" and unit in DATE_AS_DAY:
        unit = "day"
    return unit if unit in TRUNC_UNITS[value_type] else None
