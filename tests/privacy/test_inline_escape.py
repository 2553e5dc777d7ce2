"""Red team of the subquery inliner (dpsql/planner/inline_subqueries.py): a derived table
or CTE that only picks, renames and filters the private table's columns is read as the
table. It must never be a way to read rows, to reach a column the subquery does not
select (``SELECT x FROM (SELECT c AS x FROM t)`` names no other column of ``t``), or to
skip a check: what it produces is planned by the normal path, so an inlined query gives
exactly the direct query's answer, error columns included, and everything else is
refused as a row-level read."""

from __future__ import annotations

import pytest

import dpsql
from conftest import connect_seeded

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


@pytest.fixture(scope="module")
def con(trips_release):
    c = connect_seeded(trips_release)
    yield c
    c.close()


ESCAPES = [
    # rows, under a new name or through an outer *
    "SELECT x FROM (SELECT mode AS x FROM trips) v",
    "SELECT * FROM (SELECT * FROM trips) v",
    "SELECT * FROM (SELECT mode, region FROM trips WHERE region = 'R1') v LIMIT 5",
    "SELECT v.* FROM (SELECT mode AS m FROM trips) v",
    "WITH v AS (SELECT * FROM trips) SELECT * FROM v",
    "SELECT x FROM (SELECT x FROM (SELECT mode AS x FROM trips) a) b",
    # a column the subquery does not select, by name, qualified, in a nested query, as
    # an output alias DuckDB would bind in GROUP BY, as the whole row
    "SELECT region, COUNT(*) FROM (SELECT mode FROM trips) v GROUP BY region",
    "SELECT v.region, COUNT(*) FROM (SELECT mode FROM trips) v GROUP BY 1",
    "SELECT mode, COUNT(*) FROM (SELECT mode FROM trips) v GROUP BY mode HAVING "
    "MAX(region) > ''",
    "SELECT mode, COUNT(*) FROM (SELECT mode FROM trips) v WHERE EXISTS (SELECT 1 FROM "
    "(SELECT 1) z WHERE region = 'R1') GROUP BY mode",
    "SELECT mode AS region, COUNT(*) FROM (SELECT mode FROM trips) v GROUP BY region",
    "SELECT x, COUNT(*) FROM (SELECT mode AS x FROM trips) v WHERE distance < 5 GROUP BY x",
    "SELECT v, COUNT(*) FROM (SELECT mode FROM trips) v GROUP BY v",
    # the release tables' own columns, renamed or hidden
    "SELECT SUM(dp_var) FROM (SELECT * FROM trips) v",
    "SELECT mode, SUM(dp_count) FROM (SELECT mode FROM trips) v GROUP BY mode",
    "SELECT n, COUNT(*) FROM (SELECT dp_count AS n, mode FROM trips) v GROUP BY n",
    "SELECT mode, COUNT(*) FROM (SELECT mode FROM trips WHERE dp_count > 3) v GROUP BY mode",
    "SELECT distance_lo, COUNT(*) FROM (SELECT * FROM trips) v GROUP BY 1",
    # a sample of rows, or a filter that would pick released nodes
    "SELECT mode, COUNT(*) FROM (SELECT mode FROM trips LIMIT 1) v GROUP BY mode",
    "SELECT mode, COUNT(*) FROM (SELECT mode FROM trips WHERE random() < 0.5) v GROUP BY mode",
    "SELECT mode, COUNT(*) FROM (SELECT mode, row_number() OVER () AS i FROM trips) v "
    "WHERE i < 10 GROUP BY mode",
    # a file read under the lock-down
    "SELECT mode, COUNT(*) FROM (SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM "
    "read_text('/etc/hostname'))) v GROUP BY mode",
]


@pytest.mark.parametrize("sql", ESCAPES, ids=range(len(ESCAPES)))
def test_the_inliner_reads_no_row_and_no_hidden_column(con, sql):
    with pytest.raises(dpsql.Error) as err:
        con.execute(sql).fetchall()
    assert isinstance(err.value, (dpsql.UnsupportedQueryError, dpsql.ProgrammingError)), \
        err.value
    assert "dp_var" not in str(err.value) or "dp_var" in sql


SAME = [  # (through a subquery, written directly)
    ("SELECT mode, COUNT(*) AS n, dp_stderr(), dp_ci_low(0.9), dp_bound(0.05) FROM (SELECT * "
     "FROM trips WHERE region = 'R1') v GROUP BY mode ORDER BY mode",
     "SELECT mode, COUNT(*) AS n, dp_stderr(), dp_ci_low(0.9), dp_bound(0.05) FROM trips "
     "WHERE region = 'R1' GROUP BY mode ORDER BY mode"),
    ('SELECT "Mode", COUNT(*), dp_stderr() FROM (SELECT mode AS "Mode", distance AS d FROM '
     'trips) v WHERE d BETWEEN 3 AND 17 GROUP BY "Mode" ORDER BY 1',
     "SELECT mode AS \"Mode\", COUNT(*), dp_stderr() FROM trips WHERE distance BETWEEN 3 AND "
     "17 GROUP BY mode ORDER BY 1"),
]


@pytest.mark.parametrize("via,direct", SAME, ids=range(len(SAME)))
def test_an_inlined_query_is_the_direct_query(con, via, direct):
    a, b = con.cursor(), con.cursor()
    got = a.execute(via).fetchall()
    assert got == b.execute(direct).fetchall() and got
    assert [d[0] for d in a.description] == [d[0] for d in b.description]
    for key in ("view", "level", "ranges", "interpolation"):
        assert a.dp_info[key] == b.dp_info[key]
