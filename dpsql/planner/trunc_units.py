"""``date_trunc`` of a binned date or timestamp attribute: which units it may take.

A grouping ``date_trunc(unit, d)`` (:mod:`~dpsql.planner.group_bins`), a calendar filter
(:mod:`~dpsql.planner.trunc_predicates`) and a date part (:mod:`~dpsql.planner.date_parts`)
all check the unit here: a literal among those of the attribute's type, whose
boundaries are bin edges (:func:`trunc_unit`), and no comparison that DuckDB gets wrong
on a DATE (:func:`refuse_date_by_time`).
"""

from __future__ import annotations

from datetime import timedelta

from sqlglot import exp

from dpsql.domains.calendar import (DATE_AS_DAY, TIMESTAMP_AS_SECOND, TRUNC_ALIASES,
                                    TRUNC_UNITS, aligned_units, trunc_aligned)
from dpsql.errors import UnsupportedQueryError
from dpsql.release_file import AttributeMeta

TRUNCS = (exp.TimestampTrunc, exp.DateTrunc)
"""``date_trunc`` as sqlglot parses it: a grouping of a date or timestamp attribute by
calendar units, answered from the level whose nodes each lie in one unit."""


_PLAIN_TIMESTAMPS = tuple(getattr(exp.DataType.Type, n) for n in ("TIMESTAMP", "TIMESTAMPNTZ")
                          if hasattr(exp.DataType.Type, n))
"""``TIMESTAMP`` as sqlglot 28 and 30 parse DuckDB's (and ``DATETIME``): no zone, microseconds."""


def trunc_call(col: exp.Column) -> exp.Expression | None:
    """The ``date_trunc`` that truncates ``col``: its direct argument, or through a cast
    of it to a plain ``TIMESTAMP`` (Metabase's ``date_trunc('month', CAST(d AS
    timestamp))`` of a date column on PostgreSQL): a DATE's midnight and a TIMESTAMP
    itself have the unit start of the value. Not a TRY_CAST, nor a ``TIMESTAMPTZ`` (in
    the session's time zone) or a ``TIMESTAMP_S`` (its own precision)."""
    node, parent = col, col.parent
    if isinstance(parent, exp.Cast) and not isinstance(parent, exp.TryCast) \
            and parent.this is col and parent.to.is_type(*_PLAIN_TIMESTAMPS):
        node, parent = parent, parent.parent
    return parent if isinstance(parent, TRUNCS) and parent.this is node else None


def trunc_column(call: exp.Expression) -> exp.Expression:
    """What ``call`` (a ``date_trunc``) truncates, through a cast to a plain
    ``TIMESTAMP`` (:func:`trunc_call`)."""
    x = call.this
    if isinstance(x, exp.Cast) and not isinstance(x, exp.TryCast) \
            and x.to.is_type(*_PLAIN_TIMESTAMPS):
        return x.this
    return x


def to_date(node: exp.Expression) -> bool:
    """``node`` is a cast to DATE, ``CAST(x AS DATE)``, ``x::DATE`` or ``date(x)`` (DuckDB
    and MySQL's, one argument), not a TRY_CAST (of a string it is NULL where the CAST
    fails)."""
    if isinstance(node, exp.Date):
        return all(not v or k == "this" for k, v in node.args.items())
    return isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast) \
        and node.to.is_type(exp.DataType.Type.DATE)


def day_of(col: exp.Column, a: AttributeMeta) -> bool:
    """Whether ``col``, of the binned attribute ``a``, is the whole argument of a cast to
    DATE (:func:`to_date`) of a date or timestamp: its day, ``date_trunc('day', col)``
    typed DATE, which BI tools write for a day (Metabase's day of a timestamp on
    PostgreSQL, Tableau's ``CAST(DATE_TRUNC('DAY', CAST(ts AS DATE)) AS DATE)``): a
    grouping by the unit ``'day'``, answered from the coarsest level whose nodes each
    lie in one day, with any expression around the cast evaluated there. Refused where
    a bin holds parts of two days (bins of 90 minutes, week bins)."""
    parent = col.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not to_date(parent) or a.value_type not in ("date", "timestamp"):
        return False
    if not trunc_aligned(a, "day", 1):
        fits = aligned_units(a)
        raise UnsupportedQueryError(
            f"{parent.sql('duckdb')} is the day of {a.name!r}, and its released bins "
            f"({f'{a.unit} bins' if a.unit else f'bins of {_duration(a)}'}) do not each "
            "lie in one day: the rows of a bin may fall on two days or more. "
            + (f"Group by units that align: {', '.join(f'date_trunc({u!r}, {a.name})' for u in fits)}"
               if fits else "No date_trunc unit aligns with these bins")
            + f"; or count one day with WHERE {a.name} BETWEEN ...")
    return True


def _duration(a: AttributeMeta) -> str:
    """The width of ``a``'s bins, in days for a date, as a time for a timestamp."""
    if a.value_type == "date":
        return f"{a.width:g} days"
    return str(timedelta(seconds=a.width))


def trunc_unit(call: exp.Expression, a: AttributeMeta) -> str:
    """The unit of ``date_trunc(unit, a)`` on the binned attribute ``a``, checked: a date
    or timestamp attribute, a literal unit (:func:`trunc_name`), and a unit whose
    boundaries are bin edges."""
    name = trunc_name(call, a)
    if not trunc_aligned(a, name, 1):
        fits = aligned_units(a)
        bins = a.unit or f"bins of {a.width:g}"
        spelled = unit_spelled(call)
        raise UnsupportedQueryError(
            f"date_trunc('{spelled}', {a.name}) does not align with the released bins of "
            f"{a.name!r} ({bins}): {_unit_text(spelled, name, a)} would split a bin"
            f"{_ISOYEAR if name == 'isoyear' else ''}. "
            + (f"Units that align: {', '.join(fits)}" if fits else
               "No date_trunc unit aligns with these bins (week bins align with weeks "
               "when the domain starts on a Monday)")
            + f"; or count one {name} with WHERE {a.name} BETWEEN ...")
    return name


_ISOYEAR = (" (an ISO year starts on the Monday of the week that holds January 4, "
            "between December 29 and January 4, not on the first of a month: it aligns "
            "with day bins, and with week bins that start on a Monday)")


def _unit_text(spelled: str, name: str, a: AttributeMeta) -> str:
    """'a day', or for a unit finer than the attribute's grid, what it is there."""
    if spelled != name:
        return f"a {spelled} of {a.name} is its {name} (the grid of its values), and a {name}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def unit_spelled(call: exp.Expression) -> str | None:
    """The unit ``date_trunc`` was written with, lower case and in DuckDB's canonical
    spelling ('mon' is 'month'); None when it is not a literal."""
    unit = call.args.get("unit")
    name = unit.name.lower() if isinstance(unit, (exp.Var, exp.Literal)) else None
    return TRUNC_ALIASES.get(name, name)


def trunc_name(call: exp.Expression, a: AttributeMeta) -> str:
    """The unit of ``date_trunc(unit, a)``, checked: ``a`` is a date or timestamp
    attribute and the unit a literal among those of its type
    (:data:`~dpsql.domains.calendar.TRUNC_UNITS`). A unit finer than the attribute's
    grid is its grid unit, as in DuckDB on such values: an hour, minute, second,
    millisecond or microsecond of a date is its day
    (:data:`~dpsql.domains.calendar.DATE_AS_DAY`), a millisecond or microsecond of a
    timestamp is refused: the release keeps no fraction of a second, which such a
    unit keeps in DuckDB on the rows
    (:data:`~dpsql.domains.calendar.TIMESTAMP_AS_SECOND`)."""
    if a.value_type not in TRUNC_UNITS:
        raise UnsupportedQueryError(
            f"date_trunc() of {a.name!r}: its values are {a.value_type or 'real'} numbers, "
            "not a date or timestamp; group its values with the range predicates "
            f"(WHERE {a.name} BETWEEN lo AND hi)")
    unit = call.args.get("unit")
    name = unit_spelled(call)
    if a.value_type == "date" and name in DATE_AS_DAY:
        name = "day"
    elif a.value_type == "timestamp" and name in TIMESTAMP_AS_SECOND:
        raise UnsupportedQueryError(
            f"date_trunc({name!r}, {a.name}) keeps {a.name!r}'s fraction of a second, and "
            "the release keeps none (the build cuts it off when counting: docs/spec.md), so "
            f"it would group each second's rows as one; group by date_trunc('second', "
            f"{a.name})")
    allowed = TRUNC_UNITS[a.value_type]
    if name not in allowed:
        raise UnsupportedQueryError(
            f"date_trunc({repr(name) if name else unit.sql('duckdb')}, {a.name}): "
            f"the unit must be a literal among {', '.join(allowed)} (or one of DuckDB's "
            f"other spellings of them{_finer_text(a)})")
    return name


def _finer_text(a: AttributeMeta) -> str:
    if a.value_type != "date":
        return ""
    return f"; {', '.join(DATE_AS_DAY)}: the day, the grid of {a.name}'s values"


_MISCOMPARED = frozenset(DATE_AS_DAY) | {
    s for s, u in TRUNC_ALIASES.items() if u in DATE_AS_DAY and s != "epoch"}
"""The spellings of ``date_trunc`` units finer than a day whose comparisons DuckDB 2.0.1
gets wrong on a DATE (all of hour, minute, second, millisecond and microsecond, in
every spelling but ``'epoch'``, a unit of its own that DuckDB truncates to the second
and compares right: checked in tests/e2e/test_trunc_units.py)."""


def refuse_date_by_time(call: exp.Expression, a: AttributeMeta) -> None:
    """Refuse a comparison (``=``, ``<``, ``BETWEEN``, ``IN``, ... anywhere in a query:
    WHERE, the SELECT list, HAVING, a CASE) of ``date_trunc('hour' | 'minute' |
    'second' | 'millisecond' | 'microsecond', d)`` of a date attribute ``a``. Its value
    is the date's midnight (GROUP BY answers it as the day), but DuckDB 2's rewrite of
    date_trunc comparisons gets it wrong on a DATE column (duckdb#19635):
    ``date_trunc('hour', d) = TIMESTAMP '2013-05-05 00:00:00'`` is false on 2013-05-05,
    in WHERE, in the SELECT list, in a CASE or a FILTER alike, while ``... IN (TIMESTAMP
    '2013-05-05 00:00:00')`` is true, and ``date_trunc('minute', d) > '2013-05-05
    12:00'`` is true there. Released nodes are not a DATE column (the planner evaluates
    the call on each node's first day, where DuckDB answers by SQL), so an answer would
    differ from DuckDB's on the data whichever it gave: none is given. Of ``CAST(d AS
    TIMESTAMP)`` (:func:`trunc_call`) DuckDB compares right (``date_trunc('hour',
    CAST(d AS TIMESTAMP)) = TIMESTAMP '2013-05-05 00:00:00'`` is true on 2013-05-05):
    answered."""
    if trunc_column(call) is not call.this:
        return
    raw = call.args.get("unit")
    spelled = raw.name.lower() if isinstance(raw, (exp.Var, exp.Literal)) else None
    if a.value_type == "date" and spelled in _MISCOMPARED:
        raise UnsupportedQueryError(
            f"{call.sql('duckdb')} compared with a value: on the date attribute "
            f"{a.name!r} it is the date's midnight, and DuckDB compares it "
            f"inconsistently (its rewrite of date_trunc comparisons is wrong for units "
            f"finer than a day on a DATE). Write date_trunc('day', {a.name}), or compare "
            f"{a.name} itself")


_COMPARED_IN = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ, exp.NullSafeEQ,
                exp.NullSafeNEQ, exp.Between, exp.In)


def compared(call: exp.Expression) -> bool:
    """Whether ``call`` is an operand of a comparison, ``BETWEEN`` or ``IN`` (``IS [NOT]
    NULL`` is not one: it is NULL exactly where the column is), also through what DuckDB
    folds into one before its date_trunc rewrite: parentheses, a cast to a timestamp type
    (a no-op on the call's TIMESTAMP), a simple ``CASE call WHEN v`` (``call = v``, either
    side) and ``NULLIF(call, v)`` (``call = v``). Each of those answered on a DATE where
    DuckDB errs (:func:`refuse_date_by_time`)."""
    node, parent = call, call.parent
    while isinstance(parent, exp.Paren) or (
            isinstance(parent, (exp.Cast, exp.TryCast)) and _timestamp_type(parent.to)):
        node, parent = parent, parent.parent
    if isinstance(parent, exp.Case):  # CASE call WHEN ...
        return parent.this is node
    if isinstance(parent, exp.If) and node is parent.this and \
            isinstance(parent.parent, exp.Case) and parent.parent.this is not None:
        return True  # CASE x WHEN call ...
    return isinstance(parent, _COMPARED_IN + (exp.Nullif,))


def _timestamp_type(to: exp.Expression) -> bool:
    """A TIMESTAMP type of any precision or zone (sqlglot 30 writes DuckDB's TIMESTAMP as
    TIMESTAMPNTZ, 28 as TIMESTAMP)."""
    kind = getattr(to, "this", None)
    return str(getattr(kind, "value", kind)).upper().startswith(("TIMESTAMP", "DATETIME"))
