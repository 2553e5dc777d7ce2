"""Exact queries on binned attributes that BI tools send, checked against plain DuckDB
on the raw rows at ρ = 1e11 (every count within 0.5): window clauses over a binned
grouping key (``SUM(COUNT(*)) OVER (ORDER BY n)``, a running total), answered on every
binned attribute with the key read as its grouped bin, as ``GROUP BY n`` reads it;
any deterministic expression of an attribute whose bins each hold one value
(``CASE WHEN k < 10 ...``, ``strftime(d, '%Y-%m')``, ``p::INT``), answered with the
node's value in the data's type (not of a timestamp: the release keeps no fraction of a
second); top-n filters ``k IN (SELECT k ... LIMIT 3)`` on such
an attribute. They were refused ("the binned attribute 'n' is used in ...", "an IN
value of k ... is a subquery that the planner does not run")."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.errors import UnsupportedQueryError
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
from conftest import release_and_raw


@pytest.fixture(scope="module")
def cons(tmp_path_factory):
    """(dpsql on a ρ = 1e11 release, DuckDB on the raw rows), 2,000 rows of: ``k``
    integers 0 .. 19 in bins of 1 with a NULL category; ``x`` integers 0 .. 99 in bins
    of 10 (many values a bin); ``p`` a DECIMAL(6, 2) in bins of 0.01; ``d`` a date in
    day bins; ``ts`` a timestamp in second bins; ``c`` a category grouped with ``k`` and
    with ``x``. The DuckDB connection also has ``tb``: the raw rows with ``x`` replaced
    by its bin's lower bound (what dpsql answers for a bin of many values)."""
    base = tmp_path_factory.mktemp("one_value_bins")
    g = np.random.default_rng(5)
    n = 2000
    k = g.integers(0, 20, n).astype(object)
    k[g.random(n) < 0.05] = None
    pq.write_table(pa.table({
        "k": pa.array(list(k), pa.int64()), "x": pa.array(g.integers(0, 100, n)),
        "p": pa.array([decimal.Decimal(int(v)) / 100 for v in g.integers(0, 500, n)],
                      pa.decimal128(6, 2)),
        "d": pa.array(np.datetime64("2001-01-01", "D") + g.integers(0, 60, n).astype(
            "timedelta64[D]"), pa.date32()),
        "ts": pa.array(np.datetime64("2001-01-01 00:00:00", "s") + g.integers(
            0, 300, n).astype("timedelta64[s]"), pa.timestamp("us")),
        "c": pa.array(g.choice(["a", "b"], n))}), base / "t.parquet")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e11"},
            "attributes": {
                "k": {"kind": "range", "lower": 0, "upper": 20, "width": 1,
                      "on_null": "category"},
                "x": {"kind": "range", "lower": 0, "upper": 100, "width": 10},
                "p": {"kind": "range", "lower": 0, "upper": 5, "width": 0.01,
                      "type": "decimal", "resolution": 0.01},
                "d": {"kind": "range", "lower": "2001-01-01", "upper": "2001-03-02",
                      "unit": "day"},
                "ts": {"kind": "range", "lower": "2001-01-01 00:00:00",
                       "upper": "2001-01-01 00:05:00", "unit": "second"},
                "c": {"kind": "categorical", "domain": ["a", "b"]}},
            "views": [{"name": f"v{a}", "levels": [a], "mechanism": "gaussian_tree"}
                      for a in ("k", "x", "p", "d", "ts")]
            + [{"name": f"vc{a}", "levels": ["c", a], "mechanism": "gaussian_tree"}
               for a in ("k", "x")]}
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb", seed=1,
                  progress=False)
    with release_and_raw(base) as (con, raw):
        raw.execute("CREATE VIEW tb AS SELECT * REPLACE (x // 10 * 10 AS x) FROM t")
        yield con, raw


def _same(got: list, want: list) -> None:
    """The same rows: equal values, numbers within 0.5 (the release's counts are
    DOUBLEs)."""
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            if isinstance(b, (int, float, decimal.Decimal)) and not isinstance(b, bool) \
                    and b is not None and a is not None:
                assert abs(float(a) - float(b)) <= 0.5, (g, w)
            else:
                assert a == b, (g, w)


WINDOWS = [  # on one-value bins: equal to DuckDB on the raw rows
    "SELECT k, COUNT(*), SUM(COUNT(*)) OVER (ORDER BY k) FROM t GROUP BY k ORDER BY k",
    "SELECT k, COUNT(*) AS n, SUM(COUNT(*)) OVER (ORDER BY k DESC NULLS FIRST) FROM t "
    "GROUP BY k ORDER BY k NULLS FIRST",
    "SELECT c, k, COUNT(*), SUM(COUNT(*)) OVER (PARTITION BY k) FROM t GROUP BY c, k "
    "ORDER BY c, k",
    "SELECT c, k, COUNT(*), rank() OVER (PARTITION BY c ORDER BY k DESC NULLS LAST) AS r "
    "FROM t GROUP BY c, k ORDER BY c, r",
    "SELECT d, SUM(COUNT(*)) OVER (ORDER BY d ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) "
    "FROM t GROUP BY d ORDER BY d",
    "SELECT ts, COUNT(*), row_number() OVER (ORDER BY ts DESC) FROM t GROUP BY ts "
    "ORDER BY ts LIMIT 50",
]


@pytest.mark.parametrize("sql", [
    "SELECT x, COUNT(*), SUM(COUNT(*)) OVER (ORDER BY x DESC NULLS FIRST) FROM {} "
    "GROUP BY x ORDER BY x",
    "SELECT c, x, COUNT(*), SUM(COUNT(*)) OVER (PARTITION BY x) FROM {} GROUP BY c, x "
    "ORDER BY c, x",
])
def test_windows_over_a_many_value_key_read_the_grouped_bin(cons, sql):
    """A bin of many values is one grouped row, its lower bound, as GROUP BY x gives it:
    DuckDB on the rows with x rounded down to its bin."""
    con, raw = cons
    _same(con.execute(sql.format("t")).fetchall(), raw.execute(sql.format("tb")).fetchall())


@pytest.mark.parametrize("sql", [
    "SELECT x, COUNT(*), SUM(COUNT(*)) OVER (ORDER BY x + 1) FROM t GROUP BY x",
    "SELECT x, COUNT(*), lag(x) OVER (ORDER BY x) FROM t GROUP BY x",
])
def test_a_computation_with_a_many_value_key_in_a_window_stays_refused(cons, sql):
    with pytest.raises(UnsupportedQueryError, match="the binned attribute 'x' is used in"):
        cons[0].execute(sql)


LABELS = [  # expressions of attributes whose bins hold one value each: labels
    "SELECT CASE WHEN k < 10 THEN 'low' ELSE 'high' END AS b, COUNT(*) FROM t GROUP BY 1 "
    "ORDER BY 1",
    "SELECT COALESCE(k, -1), COUNT(*) FROM t GROUP BY 1 ORDER BY 1",
    "SELECT CAST(k AS VARCHAR) AS s, COUNT(*) FROM t GROUP BY s ORDER BY s",
    "SELECT k IS NULL, COUNT(*) FROM t GROUP BY k IS NULL ORDER BY 1",
    "SELECT (k >= 10) AS big, COUNT(*) FROM t GROUP BY (k >= 10) ORDER BY 1 NULLS FIRST",
    "SELECT c, k * 2 AS kk, COUNT(*) FROM t GROUP BY ROLLUP (c, k * 2) ORDER BY 1, 2",
    "SELECT k IS NULL AS n, COUNT(*) FROM t GROUP BY ROLLUP (k IS NULL) ORDER BY 1",
    "SELECT floor(k / 2.5) AS b, COUNT(*) FROM t GROUP BY b ORDER BY b",  # cuts no value
    "SELECT k, COUNT(*) FROM t GROUP BY k HAVING k % 2 = 0 ORDER BY k % 3, k",
    "SELECT EXTRACT(MONTH FROM d), COUNT(*) FROM t GROUP BY 1 ORDER BY 1",
    "SELECT strftime(d, '%Y-%m') AS ym, COUNT(*) FROM t GROUP BY ym ORDER BY ym",
    "SELECT CAST(d AS VARCHAR), COUNT(*) FROM t GROUP BY 1 ORDER BY 1",
    "SELECT d::DATE AS day, d + 1 AS next, COUNT(*) FROM t GROUP BY d ORDER BY day",
    "SELECT dayname(d) AS w, COUNT(*) FROM t WHERE d >= DATE '2001-01-15' GROUP BY w "
    "ORDER BY w",
    "SELECT second(ts) % 7 AS s, COUNT(*) FROM t GROUP BY s ORDER BY s",
    "SELECT round(p) AS r, COUNT(*) FROM t GROUP BY r ORDER BY r",
    "SELECT CAST(p AS INT) AS i, COUNT(*) FROM t GROUP BY i ORDER BY i",
    "SELECT p::INT AS i, COUNT(*) FROM t WHERE p > 2.495 GROUP BY i ORDER BY i",
    "SELECT p * 2 AS q, COUNT(*) FROM t GROUP BY q ORDER BY q",
    "SELECT p, p::INT AS i, COUNT(*) FROM t GROUP BY p ORDER BY p",
]


@pytest.mark.parametrize("sql", LABELS)
def test_expressions_of_one_value_attributes_equal_duckdb(cons, sql):
    """Each bin holds one value, so any deterministic expression of it is the
    expression of that value, typed as the data (a DECIMAL stays one: CAST(2.50 AS INT)
    is 3; a DOUBLE 2.4999... would be 2), NULL on the NULL node, from the leaf level."""
    con, raw = cons
    cur = con.cursor()
    cur.execute(sql)
    got, want = cur.fetchall(), raw.execute(sql).fetchall()
    if "GROUP BY p ORDER BY p" in sql:  # the bare p is the bin's bound, a DOUBLE
        want = [(float(w[0]), *w[1:]) for w in want]
    _same([g for g in got if g[-1] > 0.5], want)  # DuckDB has no row for an empty bin
    levels = cur.dp_info["levels"]
    assert cur.dp_info["level"] == len(levels)  # the leaf level: one value a node


def test_a_decimal_value_keeps_its_type(cons):
    con, raw = cons
    sql = "SELECT typeof(p + 0), typeof(p::INT), COUNT(*) FROM t GROUP BY 1, 2"
    for row in (con.execute(sql).fetchall()[0], raw.execute(sql).fetchall()[0]):
        assert row[0].startswith("DECIMAL(") and row[0].endswith(",2)")  # the scale
        assert row[1] == "INTEGER"  # is the resolution's; the precision (6 in the
        # source) is not in the release: dpsql's is 18


@pytest.mark.parametrize("sql, words", [
    ("SELECT x + 1, COUNT(*) FROM t GROUP BY 1", "the binned attribute 'x' is used in"),
    ("SELECT CASE WHEN x < 5 THEN 1 END, COUNT(*) FROM t GROUP BY 1",
     "for bands of unequal widths"),
    ("SELECT floor(x / 15), COUNT(*) FROM t GROUP BY 1", "cuts the released bins of 'x'"),
    ("SELECT k + random(), COUNT(*) FROM t GROUP BY 1", "volatile"),
    # a timestamp's bins hold one second, not the fraction a source value may have
    ("SELECT CAST(ts AS VARCHAR), COUNT(*) FROM t GROUP BY 1", "not the fraction"),
    ("SELECT COUNT(*) FROM t WHERE ts IN (SELECT ts FROM t GROUP BY ts ORDER BY COUNT(*) "
     "DESC LIMIT 2)", "a second holds its fractions"),
])
def test_expressions_of_many_value_or_volatile_stay_refused(cons, sql, words):
    with pytest.raises(UnsupportedQueryError, match=words):
        cons[0].execute(sql)


TOP_N = [  # top-n filters on a one-value key: the inner answer is a released aggregate
    "SELECT k, COUNT(*) FROM t WHERE k IN (SELECT k FROM t GROUP BY k ORDER BY "
    "round(COUNT(*)) DESC, k LIMIT 3) GROUP BY k ORDER BY k",
    "SELECT COUNT(*) FROM t WHERE k IN (SELECT k FROM t GROUP BY k ORDER BY "
    "round(COUNT(*)) DESC, k LIMIT 3)",
    "SELECT c, COUNT(*) FROM t WHERE k NOT IN (SELECT k FROM t WHERE k IS NOT NULL "
    "GROUP BY k ORDER BY round(COUNT(*)) DESC, k LIMIT 3) GROUP BY c ORDER BY c",
    "SELECT c, COUNT(*) FROM t WHERE k IN (SELECT k FROM t GROUP BY k ORDER BY "
    "round(COUNT(*)) DESC, k LIMIT 3) AND k > 1 GROUP BY c ORDER BY c",
    "SELECT d, COUNT(*) FROM t WHERE d IN (SELECT d FROM t GROUP BY d ORDER BY "
    "round(COUNT(*)) DESC, d LIMIT 2) GROUP BY d ORDER BY d",
    "SELECT CAST(p AS INT) AS i, COUNT(*) FROM t WHERE p IN (SELECT p FROM t GROUP BY p "
    "HAVING COUNT(*) >= 7.5) GROUP BY i ORDER BY i",
]


@pytest.mark.parametrize("sql", WINDOWS + TOP_N)
def test_windows_and_top_n_filters_on_a_one_value_key_equal_duckdb(cons, sql):
    """A window over the grouped key; ``k IN (SELECT k ... LIMIT 3)``: each node holds
    one value of k, so the filter is exact on the node rows (NULL where k is NULL, as on
    the data). The ORDER BY rounds the counts (exact within 0.5 here) and breaks ties by
    k, so the top is the same."""
    con, raw = cons
    _same(con.execute(sql).fetchall(), raw.execute(sql).fetchall())


def test_a_top_n_filter_on_bins_of_many_values_is_refused_saying_why(cons):
    with pytest.raises(UnsupportedQueryError) as e:
        cons[0].execute("SELECT c, COUNT(*) FROM t WHERE x IN (SELECT x FROM t GROUP BY x "
                        "ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY c")
    for words in ("hold many values each (bins 10 wide)", "partly in the subquery's answer",
                  "WITH q AS (SELECT x, COUNT(*) AS n FROM <table> GROUP BY x)"):
        assert words in str(e.value)
