"""GROUP BY a binned attribute, end to end: SQL in, one row per released bin (or aligned
bucket) out, checked against plain DuckDB on the raw table (the exact release: ρ = 1e6),
through :func:`dpsql.connect`, :func:`dpsql.attach` and ``dpsql serve``."""

from __future__ import annotations

import duckdb
import psycopg
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.errors import UnsupportedQueryError
from dpsql.server import serve

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


@pytest.fixture(scope="module")
def con(exact_con):
    return exact_con


@pytest.fixture(scope="module")
def raw(trips_data):
    c = duckdb.connect()
    c.execute(f"CREATE VIEW raw AS SELECT * FROM '{trips_data / 'trips.parquet'}'")
    yield c
    c.close()


def _run(con, sql):
    cur = con.cursor()
    cur.execute(sql)
    return cur, [tuple(r) for r in cur.fetchall()]


def test_group_by_the_bare_attribute_gives_one_row_per_bin_with_its_bound(con, raw):
    """One row per bin, holding its lower bound, and exactly the SELECT's columns: BI
    tools map result columns by position (an inserted upper-bound column was once drawn
    by Superset as the counts)."""
    cur, rows = _run(con, "SELECT distance, COUNT(*) FROM trips GROUP BY distance "
                          "ORDER BY distance")
    assert [d[0] for d in cur.description] == ["distance", "count"]
    truth = dict(raw.execute("SELECT least(floor(distance / 4), 63) * 4 AS b, count(*) "
                             "FROM raw GROUP BY b").fetchall())
    assert len(rows) == 64  # every public bin, zeros included
    assert [r[0] for r in rows] == [4.0 * i for i in range(64)]
    for lo, n in rows:
        assert n == truth.get(lo, 0)
    assert cur.dp_info["view"] in ("mode_dist", "dist")


def test_an_integer_attribute_keeps_integer_bounds_and_the_error_columns_follow(con, raw):
    cur, rows = _run(con, "SELECT age AS a, COUNT(*) AS n, dp_stderr() AS se, "
                          "dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi FROM trips "
                          "WHERE age BETWEEN 20 AND 29 GROUP BY a ORDER BY a")
    assert [d[0] for d in cur.description] == ["a", "n", "se", "lo", "hi"]
    assert [r[0] for r in rows] == list(range(20, 30))
    assert all(type(r[0]) is int for r in rows)
    truth = dict(raw.execute("SELECT age, count(*) FROM raw WHERE age BETWEEN 20 AND 29 "
                             "GROUP BY age").fetchall())
    for a, n, se, lo, hi in rows:
        assert abs(n - truth[a]) < 0.5
        assert se > 0 and lo <= n <= hi


def test_aligned_buckets_read_a_coarser_level_and_match_the_data(con, raw):
    cur, rows = _run(con, "SELECT floor(distance / 64) * 64 AS d, COUNT(*) FROM trips "
                          "GROUP BY 1 ORDER BY 1")
    leaf = _run(con, "SELECT distance, COUNT(*) FROM trips GROUP BY 1")[0].dp_info
    assert cur.dp_info["view"] == leaf["view"] and cur.dp_info["level"] < leaf["level"]
    truth = raw.execute("SELECT floor(least(distance, 255.9) / 64) * 64 AS d, count(*) "
                        "FROM raw GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [tuple(r) for r in truth]


def test_width_bucket_follows_postgresql(con, raw):
    _, rows = _run(con, "SELECT width_bucket(age, 20, 60, 4) AS b, COUNT(*) AS n FROM "
                        "trips GROUP BY b ORDER BY b")
    truth = raw.execute("SELECT CASE WHEN age < 20 THEN 0 WHEN age >= 60 THEN 5 ELSE "
                        "floor((age - 20) / 10) + 1 END AS b, count(*) FROM raw "
                        "GROUP BY b ORDER BY b").fetchall()
    assert [r[0] for r in rows] == [r[0] for r in truth]
    for (b, n), (_, t) in zip(rows, truth):
        assert abs(n - t) < 0.5


def test_integer_floor_division_rollup_and_positions(con, raw):
    _, rows = _run(con, "SELECT age // 10 AS decade, COUNT(*) FROM trips GROUP BY 1 "
                        "ORDER BY 1")
    truth = dict(raw.execute("SELECT age // 10, count(*) FROM raw GROUP BY 1").fetchall())
    assert {d for d, _ in rows} == set(range(10))
    for d, n in rows:
        assert abs(n - truth.get(d, 0)) < 0.5
    # ORDER BY 2 is the count: no column is inserted
    cur, rows = _run(con, "SELECT age, COUNT(*) FROM trips GROUP BY 1 ORDER BY 2 DESC "
                          "LIMIT 1")
    top = raw.execute("SELECT age FROM raw GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchall()
    assert rows[0][0] == top[0][0]
    _, rows = _run(con, "SELECT mode, distance, COUNT(*) FROM trips "
                        "GROUP BY ROLLUP (mode, distance) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST "
                        "LIMIT 2")
    assert rows[0] == (None, None, 20_000)
    assert rows[1][:2] == ("bike", None)  # a subtotal: no bin, no bound


def test_a_plain_division_of_a_one_value_attribute_is_its_value_divided(con, raw):
    """``age // 2.0`` is ``age / 2.0`` in DuckDB (a DECIMAL divisor), no bucket; age's
    bins hold one value each, so it is each bin's value divided, as on the data."""
    sql = "SELECT age // 2.0 AS h, COUNT(*) FROM {} WHERE age < 40 GROUP BY h ORDER BY h"
    _, rows = _run(con, sql.format("trips"))
    want = raw.execute(sql.format("raw")).fetchall()
    assert [r for r in rows if r[1]] == want


@pytest.mark.parametrize("sql, words", [
    ("SELECT floor(distance / 5) * 5, COUNT(*) FROM trips GROUP BY 1",
     ["cuts the released bins of 'distance'", "multiple of 4", "4, 8, 16, 32, 64, 128"]),
    ("SELECT width_bucket(distance, 0, 100, 3), COUNT(*) FROM trips GROUP BY 1",
     ["cuts the released bins"]),
    ("SELECT distance + 1, COUNT(*) FROM trips GROUP BY 1",
     ["'distance + 1'", "GROUP BY distance", "lower bound", "floor(distance / w) * w"]),
    ("SELECT distance // 64, COUNT(*) FROM trips GROUP BY 1", ["'distance // 64'"]),
    # a hair off the bins' 4: the bucket edges 4.0000000001, 8.0000000002... cut bins, and
    # values of exactly 4 or 8 fall below them (1,787 answered where the data has 1,795)
    ("SELECT floor(distance / 4.0000000001), COUNT(*) FROM trips GROUP BY 1",
     ["cuts the released bins of 'distance'", "multiple of 4"]),
    ("SELECT width_bucket(distance, 0, 256.0000000001, 64), COUNT(*) FROM trips GROUP BY 1",
     ["cuts the released bins"]),
    # DuckDB's // of a DECIMAL is a plain division (distance // 2.0 is distance / 2.0),
    # no bucket (on age, whose bins hold one value each, it is a label: answered below)
    ("SELECT distance // 2.0, COUNT(*) FROM trips GROUP BY 1", ["'distance // 2.0'"]),
    ("SELECT distance, COUNT(*) FROM trips", ["GROUP BY distance"]),
    # Superset's histogram chart asks for the values and bins them itself: a list of the
    # bins would be drawn flat, every bin once
    ("SELECT distance AS distance FROM trips GROUP BY distance LIMIT 10000",
     ["without an aggregate", "COUNT(*)", "dpsql_domain__distance"]),
])
def test_misaligned_and_unknown_buckets_are_refused_with_the_aligned_widths(con, sql, words):
    with pytest.raises(UnsupportedQueryError) as e:
        con.cursor().execute(sql)
    for w in words:
        assert w in str(e.value)


def test_attach_sqlalchemy_and_the_server_give_the_same_bins(exact_release):
    sql = "SELECT age, COUNT(*) AS n FROM trips WHERE age < 30 GROUP BY age ORDER BY age"
    local = dpsql.connect(exact_release)
    expected = [tuple(r) for r in local.cursor().execute(sql).fetchall()]
    local.close()
    d = duckdb.connect()
    dpsql.attach(d, exact_release)
    assert [tuple(r) for r in dpsql.sql(d, sql).fetchall()] == expected
    engine = sa.create_engine(f"dpsql:///{exact_release}")
    with engine.connect() as c:
        result = c.exec_driver_sql(sql)
        assert list(result.keys()) == ["age", "n"]
        assert [tuple(r) for r in result] == expected
    engine.dispose()
    srv = serve(exact_release, port=0)
    try:
        with psycopg.connect(host="127.0.0.1", port=srv.port, dbname=srv.database,
                             user="analyst", sslmode="disable") as pg:
            cur = pg.execute(sql)
            assert [c.name for c in cur.description] == ["age", "n"]
            got = cur.fetchall()
        assert [a for a, _ in got] == [a for a, _ in expected]
        assert all(abs(float(x[1]) - y[1]) < 1e-9 for x, y in zip(got, expected))
    finally:
        srv.stop()
