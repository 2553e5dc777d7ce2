"""Red team of ``dpsql serve``'s per-session memory cap (``--memory-limit``): results and
the rows that open cursors keep are counted against it as Python objects
(:func:`dpsql.server._limits.rows_bytes`).

They were estimated from 16 rows of each chunk of 4,096 (every 256th), and a LIST or
STRUCT value counted as its container alone. A client that knows this shapes its result
so that every sampled row is small: under a 100 MB cap, ``SELECT CASE WHEN i % 256 = 0
THEN '' ELSE repeat('x', 100000) END FROM range(8192)`` answered 820 MB of rows (the
server's memory grew by 1.8 GB), and so did ``SELECT [repeat('x', 100000)] FROM
range(8192)``. Both are the 53200 refusal now, and so is the third of three cursors that
each keep 30 MB under a 50 MB cap.
"""

from __future__ import annotations

import psycopg
import pytest

from dpsql.server import serve

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

MB = 1 << 20


@pytest.fixture(scope="module")
def capped(trips_release):
    srv = serve(trips_release, port=0, statement_timeout=600, memory_limit="50MB")
    yield srv
    srv.stop()


def _connect(srv) -> psycopg.Connection:  # noqa: ANN001
    return psycopg.connect(f"host=127.0.0.1 port={srv.port} dbname={srv.database} "
                           "user=analyst sslmode=disable connect_timeout=10", autocommit=True)


# about 100 MB of rows each (1,000 x 100 kB), only the ones the sample read being small
# (a chunk of 1,000 rows was sampled every 62nd); the last one on the planner's route
SHAPED = [
    "SELECT CASE WHEN i % 62 = 0 THEN '' ELSE repeat('x', 100000) END AS s "
    "FROM range(1000) t(i)",
    "SELECT [repeat('x', 100000)] AS s FROM range(1000) t(i)",
    "SELECT {'a': repeat('x', 100000)} AS s FROM range(1000) t(i)",
    "SELECT map([1], [repeat('x', 100000)]) AS s FROM range(1000) t(i)",
    "SELECT region, COUNT(*) AS n, CASE WHEN i % 256 = 0 THEN '' ELSE repeat('x', 100000) "
    "END AS s FROM trips, range(250) t(i) GROUP BY region, i",
]


@pytest.mark.parametrize("sql", SHAPED)
def test_a_result_shaped_to_fool_the_estimate_is_capped(capped, sql):
    with _connect(capped) as con:
        with pytest.raises(psycopg.errors.OutOfMemory) as info:
            con.execute(sql)
        assert "memory limit (50MB)" in str(info.value)
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]
        fair = con.execute("SELECT repeat('x', 100000) AS s FROM range(100)").fetchall()
        assert len(fair) == 100  # 10 MB: a fair result still passes


def test_cursors_shaped_to_fool_the_estimate_are_capped_together(capped):
    """Each cursor keeps 30 MB (300 rows of 100 kB, small where a 16-row sample looks):
    the third goes past the 50 MB cap and is refused; closing one frees its share."""
    shaped = ("SELECT CASE WHEN i % 18 = 0 THEN '' ELSE repeat('x', 100000) END AS s "
              "FROM range(300) t(i)")
    with _connect(capped) as con:
        try:
            con.execute(f"DECLARE a CURSOR WITH HOLD FOR {shaped}")
            with pytest.raises(psycopg.errors.OutOfMemory) as info:
                con.execute(f"DECLARE b CURSOR WITH HOLD FOR {shaped}")
                con.execute(f"DECLARE c CURSOR WITH HOLD FOR {shaped}")
            assert "open cursors and portals" in str(info.value)
            con.execute("CLOSE ALL")
            con.execute(f"DECLARE d CURSOR WITH HOLD FOR {shaped}")
            assert len(con.execute("FETCH ALL FROM d").fetchall()) == 300
        finally:
            con.execute("CLOSE ALL")
