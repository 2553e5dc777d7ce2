"""What the cold query path builds on first access instead of on every execute (issue #6):
``cursor.description`` (from DuckDB's description of the result) and ``cursor.dp_info``
(from the plan). Each must be exactly what an eager build would have given, whenever it
is read: before or after fetching, after an Arrow fetch, with or without the plan cache.
"""

from __future__ import annotations

import pytest

import dpsql.dbapi as db
from dpsql import duck
from dpsql.planner import describe, plan_query

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

QUERIES = [
    "SELECT region, COUNT(*) AS n, dp_stderr() AS se FROM trips GROUP BY region "
    "ORDER BY region",
    "SELECT COUNT(*) AS n FROM trips WHERE distance >= 3 AND distance < 41",
    "SELECT mode, AVG(distance) AS d FROM trips GROUP BY mode ORDER BY mode",
]


@pytest.mark.parametrize("cache", [0, 16])
@pytest.mark.parametrize("query", QUERIES)
def test_dp_info_read_late_equals_the_planners(trips_release, cache, query):
    with db.connect(trips_release, plan_cache_size=cache) as c:
        eager = plan_query(duck.catalog_of(c._con), query).info  # built at once
        cur = c.execute(query)
        rows = cur.fetchall()
        late = cur.dp_info  # first read after fetching
        assert late["privacy"] == db.SEEDED_NOTE  # the fixture release is seeded
        assert {k: v for k, v in late.items() if k != "privacy"} == eager
        assert cur.dp_info == late  # built once, handed out as copies
        c.execute(query).fetchall()
        assert cur.dp_info == late and len(rows) > 0


def test_dp_info_follows_the_current_result(trips_release):
    with db.connect(trips_release, plan_cache_size=0) as c:
        cur = c.cursor()
        cur.execute(QUERIES[0])
        cur.execute(QUERIES[1])  # never read for the first query
        assert [{k: r[k] for k in ("attribute", "lo", "hi")} for r in cur.dp_info["ranges"]] \
            == [{"attribute": "distance", "lo": 3.0, "hi": 41.0}]
        cur.executemany("SELECT COUNT(*) AS n FROM trips WHERE age >= ?", [[10], [50]])
        assert cur.dp_info["ranges"][0]["lo"] == 10.0
        assert cur.nextset()
        assert cur.dp_info["ranges"][0]["lo"] == 50.0
        assert cur.nextset() is None
        assert cur.dp_info is None and cur.description is None
        cur.close()
        assert cur.dp_info is None


def test_cached_plans_carry_their_info_not_the_query_tree(trips_release):
    with db.connect(trips_release, plan_cache_size=4) as c:
        c.execute(QUERIES[0]).fetchall()
        (planned,) = c._plans.values()
        assert isinstance(planned._info, dict)  # built when cached


def test_plan_info_is_describe_of_the_plan(trips_release):
    import duckdb

    con = duckdb.connect()
    duck.attach(con, str(trips_release))
    planned = plan_query(duck.catalog_of(con), QUERIES[2])
    assert not isinstance(planned._info, dict)  # not built yet
    info = planned.info
    assert planned.info is info and info["approximate"] == ["avg"]
    assert set(info) >= set(describe([], []))
    con.close()


@pytest.mark.parametrize("read_at", ["before", "after_fetchall", "after_arrow",
                                     "after_partial"])
def test_description_read_late_is_the_same(trips_release, read_at):
    q = "SELECT region, COUNT(*) AS n, dp_ci_low(0.9) AS lo FROM trips GROUP BY region"
    with db.connect(trips_release) as c:
        expected = c.execute(q).description
        cur = c.execute(q)
        if read_at == "after_fetchall":
            cur.fetchall()
        elif read_at == "after_arrow":
            cur.fetch_arrow_table()
        elif read_at == "after_partial":
            cur.fetchone()
            cur.fetch_arrow_table()
        assert cur.description == expected
        assert [d[0] for d in expected] == ["region", "n", "lo"]
        assert expected[1][1] == db.NUMBER and expected[0][1] == db.STRING
