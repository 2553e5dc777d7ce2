"""dpsql/domains/calendar.py: calendar-month edges and date_trunc alignment, on spec
ranges (day, week, month and hour bins)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import numpy as np
import pytest

from dpsql.domains.calendar import (aligned_units, bin_span_of, edge_index, from_axis,
                                    to_axis, trunc_aligned)
from dpsql.spec_attributes import _parse_attribute


def _range(**kw):
    return _parse_attribute("attributes.d", "d", {"kind": "range", **kw}, Path("."))


def test_month_bins_have_calendar_edges_across_a_leap_february():
    m = _range(lower="2012-01-01", upper="2012-12-15", unit="month")
    assert m.bins == 12 and from_axis("date", m.upper) == date(2013, 1, 1)
    days = [b - a for a, b in zip(m.edges(), m.edges()[1:])]
    assert days == [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    march = to_axis("date", date(2012, 3, 1))
    assert edge_index(m, march) == 2 and edge_index(m, march + 1) is None
    assert bin_span_of(m, march - 1, march + 1) == (1, 3)  # Feb 29 .. Mar 1: two months


def test_timestamp_axis_is_seconds_and_a_date_is_its_midnight():
    assert to_axis("timestamp", datetime(1970, 1, 2, 0, 0, 1)) == 86401
    assert to_axis("timestamp", date(1970, 1, 2)) == 86400
    assert to_axis("date", datetime(1970, 1, 2, 12)) == 1.5  # a time of day on a date


@pytest.mark.parametrize("attr,units", [
    # the ISO year 2014 starts on Monday 2013-12-30; a year holds the whole domain
    (dict(lower="2013-01-01", upper="2014-01-01", unit="day"),
     ("day", "week", "month", "quarter", "year", "isoyear")),
    (dict(lower="2012-12-31", upper="2014-01-01", unit="week"),  # Mondays
     ("week", "isoyear", "decade")),
    (dict(lower="2013-01-01", upper="2014-01-01", unit="week"), ()),  # Tuesdays
    (dict(lower="2012-01-01", upper="2015-01-01", unit="month"),
     ("month", "quarter", "year", "decade")),
    (dict(lower="2013-01-01 00:00:00", upper="2013-01-08 00:00:00", unit="hour"),
     ("hour", "day", "week", "month")),
    (dict(lower="1895-01-01", upper="2105-01-01", unit="month"),  # no isoyear: Mondays
     ("month", "quarter", "year", "decade", "century", "millennium")),
    (dict(lower="2009-12-30 00:00:00", upper="2010-01-02 00:00:00", unit="hour"),
     ("hour", "day", "week", "month", "quarter", "year", "decade")),  # 2010 Q1 too
])
def test_units_that_align_with_the_leaf_bins(attr, units):
    """The units named as the ones to group by: aligned, and of those that hold the
    whole domain in one group, the finest only."""
    assert aligned_units(_range(**attr)) == units


@pytest.mark.parametrize("unit", ["isoyear", "decade", "century", "millennium", "year",
                                  "quarter", "month", "week"])
def test_unit_starts_are_where_duckdb_s_date_trunc_changes(unit):
    """The boundaries of date_trunc(unit, ·) are those of DuckDB's on every day of spans
    around 2000 (2000 starts a century and a millennium, 2001 does not), 1900, 1000 and
    years before 1 AD (DuckDB truncates a year towards zero: the decade of the year 0,
    1 BC, runs from -9 to 9)."""
    import duckdb

    from dpsql.domains.calendar import _unit_starts

    con = duckdb.connect()
    for y0, y1 in ((-1010, -990), (-130, -80), (-30, 30), (990, 1010), (1895, 1905),
                   (1995, 2025)):
        lo, hi = (int(np.datetime64(y - 1970, "Y").astype("datetime64[D]").astype(int))
                  for y in (y0, y1))
        day = "DATE '1970-01-01' + CAST(i AS INTEGER)"
        want = con.execute(
            f"SELECT list(i ORDER BY i) FROM (SELECT i, date_trunc('{unit}', {day}) AS t, "
            f"lag(date_trunc('{unit}', {day})) OVER (ORDER BY i) AS p FROM range({lo}, "
            f"{hi}) r(i)) WHERE t <> p").fetchone()[0] or []
        assert [int(x) for x in _unit_starts("date", lo, hi, unit)] == want, (y0, y1)
        assert want or unit in ("century", "millennium")  # (and some change)
        seconds = [int(x) // 86400 for x in _unit_starts("timestamp", lo * 86400.0,
                                                          hi * 86400.0, unit)]
        assert seconds == want, (y0, y1)


def test_coarser_nodes_align_only_where_their_edges_fall_on_unit_boundaries():
    m = _range(lower="2012-01-01", upper="2015-01-01", unit="month")
    assert [trunc_aligned(m, "year", s) for s in (1, 2, 4, 16)] == [True, True, True, False]
    assert [trunc_aligned(m, "quarter", s) for s in (1, 3, 4)] == [True, True, False]
    h = _range(lower="2013-01-01 00:00:00", upper="2013-01-08 00:00:00", unit="hour")
    assert [trunc_aligned(h, "day", s) for s in (1, 4, 16)] == [True, True, False]


def test_axis_text_is_iso_and_reaches_before_the_year_1():
    """``axis_text`` writes what Python's ``isoformat`` writes for the years 1 to 9999, and
    DuckDB's astronomical years beyond them (Python's dates stop there); the spec reads its
    text back to the same day or second."""
    from dpsql.domains.calendar import axis_text
    from dpsql.spec_attributes import day_number, second_number

    g = np.random.default_rng(4)
    for x in g.uniform(-719162, 2932896, 500):
        assert axis_text("date", x) == from_axis("date", x).isoformat()
    for x in g.uniform(-719162 * 86400, 2932896 * 86400, 500):
        assert axis_text("timestamp", x) == from_axis("timestamp", x).isoformat(sep=" ")
    bc = float(np.datetime64("-0015-03-01").astype(int))
    assert [axis_text("date", bc), axis_text("date", bc - 1)] == ["-0015-03-01", "-0015-02-28"]
    assert axis_text("timestamp", bc * 86400 + 3661) == "-0015-03-01 01:01:01"
    assert axis_text("date", float(np.datetime64("0000-12-31").astype(int))) == "0000-12-31"
    for x in g.integers(-3_000_000, -719162, 200):
        assert day_number("lower", axis_text("date", x)) == x
        assert second_number("lower", axis_text("timestamp", x * 86400 + 59)) == x * 86400 + 59
