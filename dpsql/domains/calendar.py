"""Calendar axes of date and timestamp attributes, and their calendar-month bins.

A ``date`` attribute lives on the axis of day numbers (days since 1970-01-01), a
``timestamp`` attribute on the axis of seconds since 1970-01-01 00:00:00 (no time zone:
DuckDB's ``TIMESTAMP``). Both are grids of step 1 (a day, a second), so predicates follow
SQL on whole days and whole seconds (:mod:`dpsql.planner.value_intervals`).

Bins of a fixed length (a day, a week, an hour, a minute) are ordinary equal-width bins
of that axis. **Calendar months are not**: they hold 28 to 31 days. Rather than teaching
the range tree about arbitrary edges, a month-binned attribute keeps the tree exactly as
it is (bin indices 0..K-1, split b-ary: the mechanisms, error models and prefix sums see
K bins and nothing else) and changes only the map between a bin index and the axis: bin
b is the b-th month after ``lower`` (which must be the first of a month), its edges the
axis values of the first days of months b and b+1. That map is calendar arithmetic
(``date_diff('month', ...)`` when counting, ``lower + b months`` when labelling), so no
edge list is stored or shipped, and the edges of every bin are still exact. Everywhere
the planner turned an axis value into a bin index (``(x - lower) / width``) it asks
:func:`edge_index` / :func:`bin_span_of` instead; a bound inside a month interpolates
uniformly over that month's own length.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from functools import lru_cache

import numpy as np

from dpsql.domains.bin_edges import all_edges, edge_index as bin_edge_index

EPOCH_DATE = date(1970, 1, 1)
EPOCH = datetime(1970, 1, 1)
CALENDAR_TYPES = ("date", "timestamp")
UNITS: dict[str, dict[str, float | None]] = {
    "date": {"day": 1.0, "week": 7.0, "month": None},
    "timestamp": {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0,
                  "week": 604800.0, "month": None},
}
"""The bin units of each calendar type: their length on the axis, None for calendar
months (unequal lengths)."""


def to_axis(value_type: str, value: date | datetime) -> float:
    """A date's day number, or a timestamp's seconds since the epoch (a date is its
    midnight, as SQL casts it)."""
    if value_type == "date":
        if isinstance(value, datetime):  # a timestamp against a date: its fraction of day
            return (value - EPOCH).total_seconds() / 86400.0
        return float((value - EPOCH_DATE).days)
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return (value - EPOCH).total_seconds()


def from_axis(value_type: str, x: float) -> date | datetime:
    """The date or timestamp of a point of the axis (the day or second it starts)."""
    if value_type == "date":
        return EPOCH_DATE + timedelta(days=math.floor(x))
    return EPOCH + timedelta(seconds=math.floor(x))


def _month_of(value_type: str, x: float) -> int:
    """The month (counted from 1970-01, negative before) that the axis point ``x`` lies
    in, on DuckDB's proleptic Gregorian calendar (numpy's: any year, 1 BC and before
    too, where Python's ``date`` stops at the year 1)."""
    day = math.floor(x if value_type == "date" else x / 86400.0)
    return int(np.datetime64(day, "D").astype("datetime64[M]").astype(np.int64))


def _month_start(value_type: str, month: int) -> float:
    """The axis value of the first day (at 00:00:00) of ``month`` (:func:`_month_of`)."""
    day = int(np.datetime64(month, "M").astype("datetime64[D]").astype(np.int64))
    return float(day) if value_type == "date" else day * 86400.0


def axis_text(value_type: str, x: float) -> str:
    """A point of the axis as ISO text: ``'2013-03-01'`` for a date, ``'2013-03-01
    10:00:00'`` for a timestamp (the day or second it starts), also where Python's
    ``date`` does not reach: years before 1 and after 9999 are astronomical, as DuckDB
    reads them (``'-0015-03-01'`` is 16 BC, ``'0000-01-01'`` 1 BC)."""
    day = math.floor(x if value_type == "date" else x / 86400.0)
    m = _month_of("date", day)
    year, month = 1970 + m // 12, m % 12 + 1
    text = (f"{'-' if year < 0 else ''}{abs(year):04d}-{month:02d}-"
            f"{day - int(_month_start('date', m)) + 1:02d}")
    if value_type == "date":
        return text
    s = math.floor(x) - day * 86400
    return f"{text} {s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def is_month_start(value_type: str, x: float) -> bool:
    return x == math.floor(x) and _month_start(value_type, _month_of(value_type, x)) == x


def months_between(value_type: str, lower: float, upper: float) -> int:
    """How many calendar months [lower, upper) spans, rounded up (upper is moved to the
    next first of a month)."""
    n = _month_of(value_type, upper) - _month_of(value_type, lower)
    return n + (0 if is_month_start(value_type, upper) else 1)


@lru_cache(maxsize=64)
def _month_edges(value_type: str, lower: float, bins: int) -> tuple[float, ...]:
    first = _month_of(value_type, lower)
    days = (np.arange(first, first + bins + 1).astype("datetime64[M]")
            .astype("datetime64[D]").astype(np.int64))
    scale = 1.0 if value_type == "date" else 86400.0
    return tuple((days * scale).astype(np.float64).tolist())


def month_edges(value_type: str, lower: float, bins: int) -> np.ndarray:
    """The ``bins + 1`` axis values of the first days of the months after ``lower``."""
    return np.array(_month_edges(value_type, float(lower), int(bins)))


def edges_of(a) -> np.ndarray:
    """The K + 1 bin edges of a binned attribute (a spec ``Range`` or an
    ``AttributeMeta``): calendar months, or the equal-width edges of
    :mod:`dpsql.domains.bin_edges` (by the attribute's ``edge_mode``) with ``upper`` last."""
    if getattr(a, "unit", None) == "month":
        return month_edges(a.value_type, a.lower, a.bins)
    return all_edges(a.lower, a.upper, a.bins, a.edge_mode)


def edge_index(a, x: float) -> int | None:
    """The index of the edge of calendar-month attribute ``a`` at exactly ``x``, or None."""
    edges = month_edges(a.value_type, a.lower, a.bins)
    i = int(np.searchsorted(edges, x))
    return i if i < len(edges) and edges[i] == x else None


def grid_index(a, x: float) -> int | None:
    """The leaf-bin edge index of ``x`` on the binned attribute ``a`` if ``x`` lies
    exactly on that edge, else None: the edge is computed as the release stores it
    (:mod:`dpsql.domains.bin_edges`, by ``a.edge_mode``) and compared with ``==``, so a
    bound written as an edge's decimal (``0.3`` with bins of 0.1) is that edge, and an
    ``x`` a hair off it (5e-324 with bins of 4) is not."""
    if a.unit == "month":
        return edge_index(a, x)
    return bin_edge_index(a.lower, a.upper, a.bins, x, a.edge_mode)


def bin_span_of(a, lo: float, hi: float) -> tuple[int, int]:
    """The smallest range of month bins [b0, b1) that contains [lo, hi) (clamped)."""
    edges = month_edges(a.value_type, a.lower, a.bins)
    b0 = int(np.searchsorted(edges, lo, side="right")) - 1
    b1 = int(np.searchsorted(edges, hi, side="left"))
    return max(0, min(b0, a.bins)), max(0, min(b1, a.bins))


def _start_sql(value_type: str, lower: float) -> str:
    """The literal of the month start ``lower``, with DuckDB's astronomical years (year 0
    is 1 BC, -1 is 2 BC: ``DATE '-0001-03-01'``)."""
    return f"{'DATE' if value_type == 'date' else 'TIMESTAMP'} '{axis_text(value_type, lower)}'"


def month_edge_sql(value_type: str, lower: float, b: str) -> str:
    """SQL for the axis value of month edge ``b`` (an integer SQL expression)."""
    moved = f"({_start_sql(value_type, lower)} + to_months(CAST({b} AS INTEGER)))"
    if value_type == "date":
        return f"CAST(date_diff('day', DATE '1970-01-01', CAST({moved} AS DATE)) AS DOUBLE)"
    return f"epoch({moved})"


def month_bin_sql(value_type: str, lower: float, value: str) -> str:
    """SQL for the (unclamped) month bin of ``value``, an axis DOUBLE expression."""
    if value_type == "date":
        point = f"(DATE '1970-01-01' + CAST(floor({value}) AS INTEGER))"
    else:
        point = f"make_timestamp(CAST(floor({value}) AS BIGINT) * 1000000)"
    return f"date_diff('month', {_start_sql(value_type, lower)}, {point})"


def axis_to_value_sql(value_type: str, x: str) -> str:
    """SQL turning an axis DOUBLE back into the DATE or TIMESTAMP it starts."""
    if value_type == "date":
        return f"(DATE '1970-01-01' + CAST(FLOOR({x}) AS INTEGER))"
    return f"make_timestamp(CAST(FLOOR({x}) AS BIGINT) * 1000000)"


TRUNC_UNITS = {"date": ("day", "week", "month", "quarter", "year", "isoyear", "decade",
                        "century", "millennium"),
               "timestamp": ("second", "minute", "hour", "day", "week", "month", "quarter",
                             "year", "isoyear", "decade", "century", "millennium")}
"""The ``date_trunc`` units each calendar type groups by, finest first. As DuckDB's:
weeks are ISO weeks (from Monday), quarters start in January, April, July and October,
an ``isoyear`` starts on the Monday of the week that holds January 4 (between December
29 and January 4: it does not start on the first of a month, except when that is a
Monday), and a decade, century or millennium of N years starts on January 1 of a year
that is a multiple of N, counted towards zero (``year - year % N`` with the sign of the
year, astronomical years: 2000 starts a century and a millennium, 2001 does not; year 0,
which is 1 BC, holds the years -(N-1) to N-1, 19 for decades)."""

DATE_AS_DAY = ("hour", "minute", "second", "millisecond", "microsecond")
"""Units finer than a day, which DuckDB also accepts on a DATE: ``date_trunc('hour', d)``
is the date's midnight, as ``date_trunc('day', d)`` is (both TIMESTAMPs), so on a date
attribute they are the unit 'day'."""

TIMESTAMP_AS_SECOND = ("millisecond", "microsecond")
"""Units finer than a second. A timestamp attribute's released values are whole seconds
(the build cuts a fraction of a second off, :func:`dpsql.release.value_types.value_sql`),
so ``date_trunc('millisecond', ts)`` of a timestamp, and its millisecond and microsecond
parts, are refused (:mod:`dpsql.planner.date_parts`): on a source with fractions DuckDB
gives one group per value where the release has one per second."""

TRUNC_ALIASES = {
    **dict.fromkeys(("y", "yr", "yrs", "years"), "year"), "quarters": "quarter",
    **dict.fromkeys(("mon", "mons", "months"), "month"),
    **dict.fromkeys(("w", "weeks", "yearweek", "weekofyear"), "week"),
    **dict.fromkeys(("d", "days", "dayofmonth", "dayofweek", "dow", "weekday", "isodow",
                     "dayofyear", "doy", "julian"), "day"),
    **dict.fromkeys(("h", "hr", "hrs", "hours"), "hour"),
    **dict.fromkeys(("m", "min", "mins", "minutes"), "minute"),
    **dict.fromkeys(("s", "sec", "secs", "seconds", "epoch"), "second"),
    **dict.fromkeys(("milliseconds", "ms", "msec", "msecs", "msecond", "mseconds"),
                    "millisecond"),
    **dict.fromkeys(("microseconds", "us", "usec", "usecs", "usecond", "useconds"),
                    "microsecond"),
    **dict.fromkeys(("dec", "decs", "decades"), "decade"),
    **dict.fromkeys(("c", "cent", "centuries"), "century"),
    **dict.fromkeys(("mil", "mils", "millennia", "millenniums", "millenium"), "millennium")}
"""The other spellings DuckDB 2 accepts for those units in ``date_trunc``
(``date_trunc('mon', d)`` is ``date_trunc('month', d)``; each checked against DuckDB
in tests/e2e/test_trunc_predicates.py). The day-of parts (``'dow'``, ``'doy'``,
``'julian'``, ...) truncate to the day and ``'epoch'`` to the second, in DuckDB 2.0.1.
DuckDB's documentation lists ``'millenia'``, which DuckDB 2.0.1 refuses (it takes
``'millennia'``): it is refused here too."""
_FIXED = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_NP_UNIT = {"second": "s", "minute": "m", "hour": "h", "day": "D", "week": "D",
            "month": "M", "quarter": "M", "year": "Y"}
_YEARS = {"decade": 10, "century": 100, "millennium": 1000}
_MONDAY = 4  # 1970-01-01 was a Thursday: day numbers of Mondays are 4 mod 7


def _year_starts(unit: str, first: int, last: int) -> np.ndarray:
    """The day numbers where ``date_trunc(unit, ·)`` of a year-long or longer unit
    (isoyear, decade, century, millennium) changes value, for the astronomical years
    ``first`` to ``last`` (numpy's proleptic Gregorian calendar, DuckDB's)."""
    years = np.arange(first, last + 1)
    jan1 = (years - 1970).astype("datetime64[Y]").astype("datetime64[D]").astype("int64")
    if unit == "isoyear":  # the Monday on or before January 4
        jan4 = jan1 + 3
        return jan4 - (jan4 - _MONDAY) % 7
    n = _YEARS[unit]  # year - year % n towards zero: a start at each multiple of n
    # above 0; below, each group runs up to a multiple of n, so it starts after the next
    return jan1[np.where(years > 0, years % n == 0, (years - 1) % n == 0)]


def _unit_starts(value_type: str, lower: float, upper: float, unit: str) -> np.ndarray:
    """The axis values of the starts of ``unit`` (``date_trunc``'s boundaries,
    :data:`TRUNC_UNITS`) strictly inside (lower, upper)."""
    scale = 1.0 if value_type == "date" else 86400.0  # axis units per day
    if unit in ("day", "week") or unit in _FIXED and value_type == "timestamp":
        length = _FIXED[unit] / (86400.0 if value_type == "date" else 1.0)
        origin = _MONDAY * scale if unit == "week" else 0.0
        first = origin + (math.floor((lower - origin) / length) + 1) * length
        return np.arange(first, upper, length)
    if unit == "isoyear" or unit in _YEARS:
        years = np.array([math.floor(lower / scale), math.ceil(upper / scale)],
                         dtype="int64").astype("datetime64[D]").astype("datetime64[Y]")
        y0, y1 = (years.astype("int64") + 1970).tolist()
        axis = _year_starts(unit, y0, y1 + 1).astype(np.float64) * scale
        return axis[(axis > lower) & (axis < upper)]
    np_unit = _NP_UNIT[unit]
    base = "datetime64[D]" if value_type == "date" else "datetime64[s]"
    lo = np.array(math.floor(lower), dtype="int64").astype(base)
    hi = np.array(math.ceil(upper), dtype="int64").astype(base)
    first, last = (x.astype(f"datetime64[{np_unit}]").astype("int64") for x in (lo, hi))
    if unit == "quarter":  # quarters start in months 0, 3, 6, 9 of the year
        first -= first % 3  # (stepping by 3 from lower's own month lost them)
    starts = np.arange(first, last + 1, 3 if unit == "quarter" else 1
                       ).astype(f"datetime64[{np_unit}]")
    axis = starts.astype(base).astype("int64").astype(np.float64)
    return axis[(axis > lower) & (axis < upper)]


@lru_cache(maxsize=1024)
def trunc_aligned(a, unit: str, span: int) -> bool:
    """True when every boundary of ``date_trunc(unit, ·)`` inside the domain of the
    calendar attribute ``a`` is an edge of its nodes of ``span`` bins, so that each node
    lies in one unit and the units' counts are sums of whole nodes (exact, with the
    nodes' own error model)."""
    if a.unit != "month":
        width = span * (a.upper - a.lower) / a.bins
        fixed = _FIXED.get(unit)
        if fixed is not None:
            length = fixed / (86400.0 if a.value_type == "date" else 1.0)
            if length < width:  # a node wider than the unit straddles its boundaries
                return bool(len(_unit_starts(a.value_type, a.lower, a.upper, unit)) == 0)
        starts = _unit_starts(a.value_type, a.lower, a.upper, unit)
        q = (starts - a.lower) / width
        return bool(np.all(q == np.round(q)))
    if unit in _FIXED:  # a unit shorter than a month splits the month bins
        return False
    edges = month_edges(a.value_type, a.lower, a.bins)[::span]
    starts = _unit_starts(a.value_type, a.lower, a.upper, unit)
    return bool(np.all(np.isin(starts, edges)))


@lru_cache(maxsize=1024)
def unit_count(a, unit: str) -> int:
    """How many values ``date_trunc(unit, ·)`` takes over the domain of the calendar
    attribute ``a`` (the groups of ``GROUP BY date_trunc(unit, a)``): one more than the
    unit's starts inside it."""
    return len(_unit_starts(a.value_type, a.lower, a.upper, unit)) + 1


@lru_cache(maxsize=256)
def aligned_units(a) -> tuple[str, ...]:
    """The ``date_trunc`` units that align with the leaf bins of ``a``, finest first: the
    units to suggest. Of those that hold the whole domain in one group (aligned, as no
    boundary falls inside), only the finest is named: on a domain inside 2013, 'year'
    (what ``year(d)`` means there), not also 'decade', 'century' and 'millennium'; and
    none when no unit splits the domain (the total is no grouping to suggest)."""
    out: list[str] = []
    for u in TRUNC_UNITS[a.value_type]:
        whole = unit_count(a, u) == 1
        if trunc_aligned(a, u, 1) and not (whole and any(unit_count(a, v) == 1
                                                         for v in out)):
            out.append(u)
    return tuple(out) if any(unit_count(a, u) > 1 for u in out) else ()  # only a total
