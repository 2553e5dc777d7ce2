"""Month bins whose bounds reach before the year 1 (DuckDB's dates go back to 5877642 BC,
Python's ``date`` stops at 1 AD). The month arithmetic (dpsql/domains/calendar.py) is
numpy's proleptic Gregorian calendar, DuckDB's: such a spec failed with "OverflowError:
date value out of range" when it was read. Bounds are written with astronomical years as
DuckDB writes them (``'-0015-03-01'`` is 16 BC, ``'0000-01-01'`` 1 BC). Checked against
plain DuckDB on the raw rows at ρ = 1e11 (every count within 0.5)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.errors import SpecError
from dpsql.release import build_release
from dpsql.schema_catalog import bins_text
from dpsql.spec import ReleaseSpec
from conftest import count_mismatches, release_and_raw, same_groups

ATTRIBUTES = {
    "m": {"kind": "range", "lower": "-0015-03-01", "upper": "0015-01-01", "unit": "month"},
    "mt": {"kind": "range", "lower": "-0003-01-01 00:00:00", "upper": "0003-01-01 00:00:00",
           "unit": "month"},
    "d": {"kind": "range", "lower": "-0001-12-01", "upper": "0001-02-01", "width": 1},
}


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    """3,000 rows: ``m`` a date in month bins over 16 BC .. 14 AD, ``mt`` a timestamp in
    month bins over 4 BC .. 2 AD, ``d`` a date in day bins over December 2 BC .. January
    1 AD."""
    base = tmp_path_factory.mktemp("bc_months")
    g = np.random.default_rng(11)
    n = 3000

    def drawn(lo: str, hi: str, unit: str) -> np.ndarray:
        a, b = np.datetime64(lo, unit), np.datetime64(hi, unit)
        return a + g.integers(0, int((b - a).astype(int)), n).astype(f"timedelta64[{unit}]")

    pq.write_table(pa.table({
        "m": pa.array(drawn("-0015-03-01", "0015-01-01", "D"), pa.date32()),
        "mt": pa.array(drawn("-0003-01-01", "0003-01-01", "s"), pa.timestamp("us")),
        "d": pa.array(drawn("-0001-12-01", "0001-02-01", "D"), pa.date32())}),
        base / "t.parquet")
    return base, {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
                  "budget": {"rho": "1e11"}, "attributes": ATTRIBUTES,
                  "views": [{"name": f"v{a}", "levels": [a], "mechanism": "gaussian_tree"}
                            for a in ATTRIBUTES]}


@pytest.fixture(scope="module")
def cons(spec):
    base, raw = spec
    build_release(ReleaseSpec.from_dict(raw, base_dir=base), base / "t.duckdb", seed=2,
                  progress=False)
    with release_and_raw(base) as pair:
        yield pair


GROUPS = ["date_trunc('month', m)", "date_trunc('quarter', m)", "date_trunc('year', m)",
          "date_trunc('decade', m)", "year(m)", "month(m)", "quarter(m)",
          "date_trunc('month', mt)", "year(mt)", "date_trunc('day', d)", "year(d)",
          "dayofweek(d)"]


@pytest.mark.parametrize("key", GROUPS)
def test_groups_are_duckdb_s(cons, key):
    con, raw = cons
    q = f"SELECT {key} AS u, COUNT(*) FROM t GROUP BY u ORDER BY u"
    want = raw.execute(q).fetchall()
    assert len(want) > 1
    same_groups(con.execute(q).fetchall(), want)


def test_ranges_are_duckdb_s(cons):
    wrong, counts = count_mismatches(*cons, [
        "m < DATE '0001-01-01'", "m >= '0005-06-01' AND m < '0010-01-01'",
        "date_trunc('year', m) >= '0002-01-01'", "m BETWEEN '0001-01-01' AND '0001-12-31'",
        "mt >= TIMESTAMP '0001-03-01 00:00:00'", "d >= DATE '0001-01-01'"])
    assert not wrong, wrong
    assert all(0 < c < 3000 for c in counts)


def test_literals_before_1_ad_are_duckdb_s(cons):
    """A bound before the year 1, astronomical or as DuckDB prints it ('(BC)'), as a
    string, a DATE, a TIMESTAMP or an expression with an INTERVAL: Python's ``date``
    cannot hold it, so its point of the axis is DuckDB's ``epoch`` (each was refused as
    "not a plain date or timestamp")."""
    wrong, counts = count_mismatches(*cons, [
        "m < DATE '-0005-01-01'", "m < '0006-01-01 (BC)'", "m < '-0005-01-01'",
        "m >= DATE '-0010-01-01' + INTERVAL 1 MONTH AND m < '-0002-07-01'",
        "m BETWEEN '0011-01-01 (BC)' AND '-0003-12-31'",
        "mt < TIMESTAMP '-0001-06-01 00:00:00'", "mt >= '0002-06-01 (BC) 00:00:00'",
        "d < DATE '0000-01-01'", "d >= '-0001-12-25' AND d < DATE '0000-01-05'"])
    assert not wrong, wrong
    assert all(0 < c < 3000 for c in counts)


def test_the_report_draws_an_attribute_before_1_ad(spec):
    """The HTML report's InfTDA prefix bands query the release at every bin edge: with
    Python dates as parameters it failed with "OverflowError: date value out of range"."""
    from dpsql.report import build_report
    base, raw = spec
    raw = {**raw, "budget": {"rho": "1"}, "attributes": {"d": ATTRIBUTES["d"]},
           "views": [{"name": "vi", "levels": ["d"], "mechanism": "inftda"}]}
    build_release(ReleaseSpec.from_dict(raw, base_dir=base), base / "inftda.duckdb",
                  seed=3, progress=False)
    build_report(base / "inftda.duckdb", base / "inftda.html", progress=False)
    assert "View vi" in re.sub(r"<[^>]+>", "", (base / "inftda.html").read_text())


def test_the_bins_are_named_with_duckdb_s_years(spec):
    """The catalog's and the summary's words for the bins (Python's dates stop at 1 AD)."""
    s = ReleaseSpec.from_dict(spec[1], base_dir=spec[0])
    assert s.attributes["m"].bins == 30 * 12 - 2  # years -15 .. 14, from March
    assert bins_text(s.attributes["m"]) == "358 bins by month over [-0015-03-01, 0015-01-01)"
    assert bins_text(s.attributes["mt"]) == \
        "72 bins by month over [-0003-01-01 00:00:00, 0003-01-01 00:00:00)"


def test_a_timestamp_bound_before_1_ad_may_be_a_date_as_after_it(spec):
    """``"-0003-01-01"`` for a timestamp bound is its midnight, as ``"2013-01-01"`` is
    (it was refused "is not a timestamp")."""
    mt = {**ATTRIBUTES["mt"], "lower": "-0003-01-01", "upper": "0003-01-01",
          "type": "timestamp"}
    raw = {**spec[1], "attributes": {**ATTRIBUTES, "mt": mt}}
    got = ReleaseSpec.from_dict(raw, base_dir=spec[0]).attributes["mt"]
    want = ReleaseSpec.from_dict(spec[1], base_dir=spec[0]).attributes["mt"]
    assert (got.lower, got.upper, got.bins) == (want.lower, want.upper, want.bins)


@pytest.mark.parametrize("key,value,message", [
    ("lower", "-0015-03-02", r"attributes.m.lower: month bins start on the first of a month"),
    ("lower", "-0015-02-30", r"attributes.m.lower: '-0015-02-30' is not a date; write "
                             r"YYYY-MM-DD"),
])
def test_bad_bounds_before_1_ad_are_refused_naming_the_key(spec, key, value, message):
    raw = {**spec[1], "attributes": {**ATTRIBUTES, "m": {**ATTRIBUTES["m"], key: value,
                                                          "type": "date"}}}
    with pytest.raises(SpecError, match=message):
        ReleaseSpec.from_dict(raw, base_dir=spec[0])
