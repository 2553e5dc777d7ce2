"""Aligned buckets as BI tools spell them, end to end: Metabase's auto-binning
``((floor(((x - o) / w)) * w) + o)``, a multiplication by a reciprocal (``floor(x * 2) /
2``), and a day of a timestamp as a cast to DATE (``CAST(ts AS DATE)``, ``ts::DATE``,
Tableau's ``CAST(DATE_TRUNC('DAY', CAST(ts AS DATE)) AS DATE)``). At ρ = 1e11 each
answer is DuckDB's on the raw rows: the same groups (NULL ones too), each count within
0.5, and labels of DuckDB's type (a DECIMAL where the data's arithmetic gives one);
where a bucket cuts the released bins, in exact arithmetic or in DuckDB's DOUBLE
arithmetic on the data, the refusal names the aligned widths."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.errors import UnsupportedQueryError
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
from conftest import count_mismatches, release_and_raw

N = 3000


@pytest.fixture(scope="module")
def cons(tmp_path_factory):
    """(dpsql on a ρ = 1e11 release, DuckDB on the raw rows), 3,000 rows of: ``x`` DOUBLE
    in bins 0.1 wide over [0, 10), half of it on the decimals of one digit (0.3 as a
    DOUBLE: the values where a DOUBLE division moves a bucket edge) and 30 rows of
    ``0.3 * 3`` (0.8999999999999999), NULLs a category; ``r`` a score 1.0 .. 5.0 in
    steps of 0.5 and ten rows of the DOUBLE below 0.5, bins 0.5 wide; ``p`` DECIMAL(6, 2) in bins
    0.1 wide (ten values each); ``n`` an integer in bins 5 wide, NULLs a category;
    ``ts`` timestamps in hour bins over ten days, NULLs a category; ``t7`` the same in
    bins of 7 hours (over two weeks), which cut days; ``m`` dates in month bins over
    2012 .. 2014; ``dy`` dates in day bins over ten days of May 2013."""
    base = tmp_path_factory.mktemp("bi_buckets")
    g = np.random.default_rng(11)
    x = g.uniform(0, 10, N)
    x[: N // 2] = np.round(x[: N // 2], 1) % 10
    x[:30] = 0.3 * 3  # 0.8999999999999999, in the bin [0.8, 0.9): a DOUBLE computed
    r = g.integers(2, 11, N) / 2.0
    r[:10] = np.nextafter(0.5, 0)  # 0.49999999999999994, in the bin [0, 0.5)
    ts = np.datetime64("2013-01-01T00:00:00") + g.integers(0, 10 * 86400, N).astype(
        "timedelta64[s]")
    p = np.minimum(np.round(g.uniform(0, 10, N), 2), 9.99)
    pq.write_table(pa.table({
        "x": pa.array(x, mask=g.random(N) < 0.05),
        "r": pa.array(r),
        "p": pa.array([f"{v:.2f}" for v in p]).cast(pa.decimal128(6, 2)),
        "n": pa.array(g.integers(0, 100, N), mask=g.random(N) < 0.05),
        "ts": pa.array(ts, pa.timestamp("us"), mask=g.random(N) < 0.05),
        "t7": pa.array(ts, pa.timestamp("us")),
        "m": pa.array(np.datetime64("2012-01-01") + g.integers(0, 1096, N).astype(
            "timedelta64[D]"), pa.date32()),
        "dy": pa.array(np.datetime64("2013-05-01") + g.integers(0, 10, N).astype(
            "timedelta64[D]"), pa.date32())}), base / "t.parquet")
    days = {"lower": "2013-01-01 00:00:00", "upper": "2013-01-11 00:00:00"}
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e11"},
            "attributes": {
                "x": {"kind": "range", "lower": 0, "upper": 10, "bins": 100,
                      "on_null": "category"},
                "r": {"kind": "range", "lower": 0, "upper": 6, "bins": 12},
                "p": {"kind": "range", "lower": 0, "upper": 10, "bins": 100},
                "n": {"kind": "range", "lower": 0, "upper": 100, "bins": 20,
                      "on_null": "category"},
                "ts": {"kind": "range", **days, "unit": "hour", "on_null": "category"},
                "t7": {"kind": "range", "lower": days["lower"],
                       "upper": "2013-01-15 00:00:00", "bins": 48},
                "m": {"kind": "range", "lower": "2012-01-01", "upper": "2015-01-01",
                      "unit": "month"},
                "dy": {"kind": "range", "lower": "2013-05-01", "upper": "2013-05-11",
                      "unit": "day"}},
            "views": [{"name": f"v{a}", "levels": [a], "mechanism": "gaussian_tree"}
                      for a in ("x", "r", "p", "n", "ts", "t7", "m", "dy")]}
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb", seed=1,
                  progress=False)
    with release_and_raw(base) as pair:
        yield pair


def _kind(t) -> str:
    """A result type, a DECIMAL's precision left out: dpsql computes on DECIMAL(18, s),
    the data on the source's DECIMAL(p, s); the values and the scale are the same."""
    return re.sub(r"DECIMAL\(\d+,\s*", "DECIMAL(", str(t))


def same_as_duckdb(con, raw, q: str) -> list:
    """``q`` on dpsql and on the raw rows: the same groups (keys compared exactly, NULL
    ones too, of the same Python and SQL types), each count within 0.5; dpsql's groups
    of a zero count (released bins with no row) left out. DuckDB's rows."""
    cur = con.cursor()
    cur.execute(q)
    got = [r for r in cur.fetchall() if abs(r[-1]) > 0.5]
    w = raw.execute(q)
    want = w.fetchall()
    assert [_kind(d[1]) for d in cur.description[:-1]] == \
        [_kind(d[1]) for d in w.description[:-1]], (cur.description, w.description)
    key = lambda r: repr(r[:-1])  # noqa: E731 - NULL keys sort too
    got, want = sorted(got, key=key), sorted(want, key=key)
    assert [r[:-1] for r in got] == [r[:-1] for r in want], (got[:6], want[:6])
    assert [tuple(map(type, r[:-1])) for r in got] == [tuple(map(type, r[:-1])) for r in want]
    assert all(abs(g[-1] - w[-1]) <= 0.5 for g, w in zip(got, want)), (got, want)
    return want


METABASE = ('SELECT ((floor((("t"."{x}" - {o}) / {w})) * {w}) + {o}) AS "{x}", count(*) AS '
            '"count" FROM "t" GROUP BY ((floor((("t"."{x}" - {o}) / {w})) * {w}) + {o}) '
            'ORDER BY ((floor((("t"."{x}" - {o}) / {w})) * {w}) + {o}) ASC')
"""The SQL Metabase's auto-binning sends (metabase#9228: ``o`` the column's minimum,
rounded down to a multiple of the width ``w``)."""


@pytest.mark.parametrize("q", [
    METABASE.format(x="x", o="0.0", w="0.5"),  # a DOUBLE from 0, NULLs a group
    METABASE.format(x="x", o="0.0", w="2"),
    METABASE.format(x="n", o="0.0", w="10"),  # integers: n - 0.0 is an exact DECIMAL
    METABASE.format(x="n", o="5.0", w="10"),  # an offset: edges 5, 15, ...
    METABASE.format(x="p", o="0.0", w="2.5"),
    METABASE.format(x="p", o="0.5", w="2.5"),
    "SELECT floor(x * 2) / 2 AS b, COUNT(*) FROM t GROUP BY b",  # bins 0.5 wide
    "SELECT floor(2 * x) AS b, COUNT(*) FROM t GROUP BY b",
    "SELECT floor(x * 0.5) AS b, COUNT(*) FROM t GROUP BY b",  # 2 wide
    "SELECT floor(x / (1/2)) AS b, COUNT(*) FROM t GROUP BY b",  # Metabase on Oracle
    "SELECT floor(p * 10) AS b, COUNT(*) FROM t GROUP BY b",  # a DECIMAL, exact
    "SELECT floor(p * 2) / 2 AS b, COUNT(*) FROM t GROUP BY b",
    "SELECT floor(p) AS b, COUNT(*) FROM t GROUP BY b",  # DECIMAL(p, 0)
    "SELECT floor(n * 0.2) AS b, COUNT(*) FROM t GROUP BY b",  # DECIMAL(21, 0)
    "SELECT floor((n - 10) / 20) AS b, COUNT(*) FROM t GROUP BY b",
])
def test_bi_tools_numeric_buckets_are_duckdb_s(cons, q):
    """Metabase's binning and multiplications by a reciprocal, on the bins they align
    with (they were refused: "the binned attribute 'x' is used in 'x - 0.0'")."""
    con, raw = cons
    assert len(same_as_duckdb(con, raw, q)) > 3


@pytest.mark.parametrize("q", [
    "SELECT CAST(ts AS DATE) AS d, COUNT(*) FROM t GROUP BY d",  # NULLs a group
    "SELECT ts::DATE, COUNT(*) FROM t GROUP BY 1",
    "SELECT date(ts) AS d, COUNT(*) FROM t GROUP BY 1",  # MySQL's, DuckDB's too
    # Tableau's day of a timestamp on PostgreSQL
    "SELECT CAST(DATE_TRUNC('DAY', CAST(ts AS DATE)) AS DATE) AS d, COUNT(*) FROM t "
    "GROUP BY 1",
    "SELECT date_trunc('day', ts)::DATE AS d, COUNT(*) FROM t GROUP BY 1",
    "SELECT dayname(CAST(ts AS DATE)) AS d, COUNT(*) FROM t GROUP BY 1",
    "SELECT CAST(ts AS DATE) AS d, COUNT(*) FROM t WHERE ts IS NOT NULL GROUP BY d",
])
def test_a_cast_to_date_is_the_day_of_a_timestamp(cons, q):
    """``CAST(ts AS DATE)`` on hour bins is ``date_trunc('day', ts)`` typed DATE (it was
    refused: "the binned attribute 'ts' is used in 'CAST(ts AS DATE)'")."""
    con, raw = cons
    assert len(same_as_duckdb(con, raw, q)) >= 8  # 7 days of the week and NULL


@pytest.mark.parametrize("q", [
    # Metabase's month and quarter of a date column on PostgreSQL (metabase#4043, #53499)
    "SELECT date_trunc('month', CAST(\"t\".\"m\" AS timestamp)) AS \"m\", count(*) AS "
    "\"count\" FROM \"t\" GROUP BY date_trunc('month', CAST(\"t\".\"m\" AS timestamp))",
    "SELECT CAST(date_trunc('quarter', CAST(m AS timestamp)) AS date) AS q, COUNT(*) "
    "FROM t GROUP BY 1",
    "SELECT date_trunc('day', CAST(ts AS TIMESTAMP)) AS d, COUNT(*) FROM t GROUP BY 1",
    # of a DATE cast to TIMESTAMP, DuckDB compares an hour right (of the DATE it errs)
    "SELECT date_trunc('hour', CAST(dy AS TIMESTAMP)) = TIMESTAMP '2013-05-05 00:00:00' "
    "AS b, COUNT(*) FROM t GROUP BY 1",
])
def test_date_trunc_of_a_cast_to_timestamp_is_date_trunc_of_the_value(cons, q):
    """``date_trunc(unit, CAST(m AS TIMESTAMP))``: the unit start of a DATE's midnight
    or of the TIMESTAMP itself (it was refused: "'m' is used in 'CAST(m AS
    TIMESTAMP)'")."""
    con, raw = cons
    assert len(same_as_duckdb(con, raw, q)) >= 2


def test_a_cast_to_date_filters_as_the_day(cons):
    con, raw = cons
    wrong, counts = count_mismatches(con, raw, [
        "CAST(ts AS DATE) >= DATE '2013-01-04'", "ts::DATE < DATE '2013-01-04'",
        "CAST(ts AS DATE) BETWEEN DATE '2013-01-02' AND DATE '2013-01-05'",
        "CAST(ts AS DATE) IN (DATE '2013-01-02', DATE '2013-01-09')",
        "CAST(ts AS DATE) = TIMESTAMP '2013-01-03 00:00:00'", "date(ts) < DATE '2013-01-07'",
        "date_trunc('month', CAST(m AS timestamp)) >= TIMESTAMP '2013-03-01'",
        "date_trunc('month', CAST(m AS timestamp)) IS NOT NULL",
        "date_trunc('hour', CAST(dy AS TIMESTAMP)) = TIMESTAMP '2013-05-05 00:00:00'",
        "date_trunc('minute', CAST(dy AS TIMESTAMP)) > '2013-05-05 12:00'"])
    assert not wrong and all(counts)


@pytest.mark.parametrize("q, words", [
    # exact edges on the bins, but DuckDB divides DOUBLEs: 0.3 / 0.1 is 2.9999999999999996
    ("SELECT floor(x / 0.1), COUNT(*) FROM t GROUP BY 1",
     ["cuts the released bins of 'x'", "DOUBLE", "2 at x = 0.3", "multiple of 0.1",
      "power of two"]),
    ("SELECT floor(x * 10) / 10, COUNT(*) FROM t GROUP BY 1",
     ["DOUBLE", "9 at 0.8999999999999999"]),
    (METABASE.format(x="r", o="1.0", w="0.5"), ["DOUBLE", "0.49999999999999994"]),
    ("SELECT floor(p / 0.1), COUNT(*) FROM t GROUP BY 1", ["DOUBLE", "2 at p = 0.3 "]),
    # edges off the bins
    (METABASE.format(x="r", o="1.0", w="0.25"),
     ["cuts the released bins of 'r'", "multiple of 0.5"]),
    (METABASE.format(x="n", o="2.0", w="10"), ["multiple of 5", "edges on 0 + k * 5"]),
    ("SELECT floor(x * 3), COUNT(*) FROM t GROUP BY 1", ["multiple of 0.1"]),
    ("SELECT floor(-x), COUNT(*) FROM t GROUP BY 1", ["decreases with x"]),
    ("SELECT CAST(t7 AS DATE), COUNT(*) FROM t GROUP BY 1",
     ["CAST(t7 AS DATE) is the day of 't7'", "bins of 7:00:00", "WHERE t7 BETWEEN"]),
    ("SELECT date_trunc('day', CAST(m AS timestamp)), COUNT(*) FROM t GROUP BY 1",
     ["does not align with the released bins of 'm'", "month, quarter, year"]),
    # in the session's time zone: not the value's unit start
    ("SELECT date_trunc('month', CAST(m AS TIMESTAMPTZ)), COUNT(*) FROM t GROUP BY 1",
     ["'CAST(m AS TIMESTAMPTZ)'", "date_trunc('month', m)"]),
    # of the DATE itself, DuckDB's comparison errs (duckdb#19635): still refused
    ("SELECT COUNT(*) FROM t WHERE date_trunc('hour', dy) = TIMESTAMP '2013-05-05 00:00:00'",
     ["compares it inconsistently"]),
])
def test_buckets_that_cut_bins_are_refused_with_the_aligned_widths(cons, q, words):
    con, _ = cons
    with pytest.raises(UnsupportedQueryError) as e:
        con.cursor().execute(q)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_the_double_refusals_are_duckdb_s_arithmetic_on_the_rows(cons):
    """What the refusals above say, on the raw rows: rows that the bins hold below an
    edge are above it in DuckDB's bucket, so no sum of bins is its count."""
    _, raw = cons
    below = raw.execute("SELECT count(*) FROM t WHERE x < 0.9 AND x >= 0.8 AND "
                        "floor(x * 10) = 9").fetchall()
    assert below == raw.execute("SELECT count(*) FROM t WHERE x = CAST(0.3 AS DOUBLE) * 3 "
                                "HAVING count(*) > 20").fetchall()
    below = raw.execute("SELECT count(*) FROM t WHERE r < 0.5 AND "
                        "floor((r - 1.0) / 0.5) = -1").fetchall()
    assert below == [(10,)]
    assert raw.execute("SELECT floor(CAST(0.30 AS DECIMAL(6, 2)) / 0.1)").fetchall() == [(2.0,)]
