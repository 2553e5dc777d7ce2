"""Date parts of a binned date or timestamp attribute: ``year(m)``, ``month(m)``,
``extract(dow FROM d)``, ``date_part('hour', ts)``, ``monthname(m)``, ``last_day(m)``...

Each is a function of ``date_trunc(unit, x)`` for one calendar unit (:func:`part_unit`):
``year``, ``decade``, ``century``, ``millennium`` and ``era`` of the year (DuckDB's
``century(DATE '2000-06-01')`` is 20 and ``century(DATE '2001-01-01')`` 21: a function
of the year, not of ``date_trunc('century', ·)``, whose centuries start in 2000),
``quarter`` of the quarter, ``month``, ``monthname`` and ``last_day`` of the month,
``week``, ``weekofyear`` and ``yearweek`` of the ISO week, ``isoyear`` of the ISO year,
the day parts (``day``, ``dayofweek``, ``isodow``, ``dayofyear``, ``dayname``,
``julian``...) of the day, and ``hour``, ``minute``, ``second`` (``epoch``, and the
millisecond and microsecond of whole seconds) of their units; on a DATE a part finer
than a day is of the day (``hour(d)`` is 0). Where that unit's boundaries are bin edges
(:func:`~dpsql.domains.calendar.trunc_aligned`), the part has one value over each
released bin, so a node that lies in one unit can stand for its rows: the planner
evaluates the part on the node's first value (``Reference.truncs``), as it evaluates
``date_trunc``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.domains.calendar import (DATE_AS_DAY, TIMESTAMP_AS_SECOND, TRUNC_ALIASES,
                                    TRUNC_UNITS, trunc_aligned)

_CALLS: dict[type, str] = {
    exp.Year: "year", exp.Quarter: "quarter", exp.Month: "month", exp.Monthname: "month",
    exp.LastDay: "month", exp.Week: "week", exp.WeekOfYear: "week", exp.Day: "day",
    exp.DayOfMonth: "day", exp.DayOfWeek: "day", exp.DayOfWeekIso: "day",
    exp.DayOfYear: "day", exp.Dayname: "day", exp.Hour: "hour", exp.Minute: "minute",
    exp.Second: "second"}
"""sqlglot's classes of DuckDB's one-argument date part functions, and their unit."""

_NAMED = ("yearweek", "isoyear", "decade", "century", "millennium", "era", "weekday",
          "julian", "isodow", "dayofweek", "dayofyear", "weekofyear")
"""Date part functions sqlglot leaves anonymous (by name, one argument)."""

_OF_YEAR = {"decade": "year", "century": "year", "millennium": "year", "era": "year"}


def part_unit(col: exp.Column, a) -> str | None:
    """The calendar unit of which the date part call around the column ``col`` (of the
    date or timestamp attribute ``a``) is a function, when its boundaries are edges of
    ``a``'s bins; None for anything else (another call, a part whose unit cuts the bins,
    a part that is no function of one unit such as ``timezone``)."""
    if a.value_type not in TRUNC_UNITS:
        return None
    node, call = col, col.parent
    while isinstance(call, exp.Paren):
        node, call = call, call.parent
    name = _part_name(call, node)
    if name is None:
        return None
    unit = _OF_YEAR.get(TRUNC_ALIASES.get(name, name), TRUNC_ALIASES.get(name, name))
    if a.value_type == "date" and unit in DATE_AS_DAY:
        unit = "day"
    elif a.value_type == "timestamp" and unit in TIMESTAMP_AS_SECOND:
        unit = "second"
    if unit not in TRUNC_UNITS[a.value_type] or not trunc_aligned(a, unit, 1):
        return None
    return unit


def _part_name(call: exp.Expression | None, arg: exp.Expression) -> str | None:
    """The part ``call`` takes of ``arg`` (lower case, as written), or None."""
    if call is None:
        return None
    if type(call) in _CALLS and call.this is arg and len(list(call.iter_expressions())) == 1:
        return _CALLS[type(call)]
    if isinstance(call, exp.Extract) and call.expression is arg:
        part = call.this
        return part.name.lower() if isinstance(part, (exp.Var, exp.Literal)) else None
    if isinstance(call, exp.Anonymous):
        name, args = call.name.lower(), call.expressions
        if name in _NAMED and len(args) == 1 and args[0] is arg:
            return name
        if name in ("date_part", "datepart") and len(args) == 2 and args[1] is arg \
                and isinstance(args[0], exp.Literal) and args[0].is_string:
            return args[0].name.lower()
    return None


__all__ = ["part_unit"]
