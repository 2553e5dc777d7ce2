"""dpsql/domains/calendar.py: calendar-month edges and date_trunc alignment, on spec
ranges (day, week, month and hour bins)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

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
    (dict(lower="2013-01-01", upper="2014-01-01", unit="day"),
     ("day", "week", "month", "quarter", "year")),
    (dict(lower="2012-12-31", upper="2014-01-01", unit="week"), ("week",)),  # Mondays
    (dict(lower="2013-01-01", upper="2014-01-01", unit="week"), ()),  # Tuesdays
    (dict(lower="2012-01-01", upper="2015-01-01", unit="month"), ("month", "quarter", "year")),
    (dict(lower="2013-01-01 00:00:00", upper="2013-01-08 00:00:00", unit="hour"),
     ("hour", "day", "week", "month", "quarter", "year")),
])
def test_units_that_align_with_the_leaf_bins(attr, units):
    assert aligned_units(_range(**attr)) == units


def test_coarser_nodes_align_only_where_their_edges_fall_on_unit_boundaries():
    m = _range(lower="2012-01-01", upper="2015-01-01", unit="month")
    assert [trunc_aligned(m, "year", s) for s in (1, 2, 4, 16)] == [True, True, True, False]
    assert [trunc_aligned(m, "quarter", s) for s in (1, 3, 4)] == [True, True, False]
    h = _range(lower="2013-01-01 00:00:00", upper="2013-01-08 00:00:00", unit="hour")
    assert [trunc_aligned(h, "day", s) for s in (1, 4, 16)] == [True, True, False]
