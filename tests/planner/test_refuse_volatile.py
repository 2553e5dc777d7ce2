"""Volatile functions over the private table: refused where the release would evaluate
them once per released node instead of once per data row (dpsql.planner.refuse_volatile),
answered where they are evaluated once per output row, on the release as on the data."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql.planner.refuse_volatile import VOLATILE

REFUSED = [  # (query, function, clause); each ran and gave whole nodes at random
    ("SELECT COUNT(*) FROM trips WHERE random() < 0.5", "random", "WHERE"),
    ("SELECT region, COUNT(*) FROM trips WHERE region = 'R1' AND gen_random_uuid() IS NOT "
     "NULL GROUP BY region", "uuid", "WHERE"),
    ("SELECT COUNT(*) FROM trips WHERE mode IN (SELECT 'car' WHERE random() < 2)", "random",
     "WHERE"),
    ("SELECT COUNT(*) FROM trips WHERE uuidv7() IS NOT NULL", "uuidv7", "WHERE"),
    ("SELECT region, COUNT(*) FROM trips GROUP BY region, random() < 0.5", "random",
     "GROUP BY"),
    ("SELECT random() < 0.5 AS r, COUNT(*) FROM trips GROUP BY r", "random",
     "GROUP BY (by its alias)"),
    ("SELECT random() < 0.5, COUNT(*) FROM trips GROUP BY 1", "random",
     "GROUP BY (by position)"),
    ("SELECT region, random() < 0.5, COUNT(*) FROM trips GROUP BY ALL", "random",
     "GROUP BY ALL"),
    ("SELECT DISTINCT region, uuid() FROM trips", "uuid", "GROUP BY ALL"),
    ("SELECT p.l, COUNT(*) FROM trips t JOIN (SELECT 'R1' AS region, 'x' AS l) p "
     "ON t.region = p.region AND random() < 0.5 GROUP BY p.l", "random", "JOIN ... ON"),
    ("SELECT region, COUNT(*) FROM trips GROUP BY ROLLUP (region, setseed(0.5))", "setseed",
     "GROUP BY"),
]


@pytest.mark.parametrize("sql,name,clause", REFUSED)
def test_volatile_functions_are_refused_where_they_would_pick_nodes(exact_con, sql, name,
                                                                   clause):
    with pytest.raises(dpsql.UnsupportedQueryError) as err:
        exact_con.execute(sql)
    text = str(err.value)
    assert text.startswith(f"{name}() in {clause}"), text
    assert "is volatile" in text and "released nodes" in text and "WITH r AS" in text


@pytest.mark.parametrize("sql", [
    "SELECT region, COUNT(*), random() AS r FROM trips GROUP BY region",
    "SELECT region, COUNT(*) FROM trips GROUP BY region HAVING random() < 2",
    "SELECT region, COUNT(*) FROM trips GROUP BY region ORDER BY random()",
    "SELECT COUNT(*) FROM trips WHERE now() > TIMESTAMP '2000-01-01 00:00:00'",
    "SELECT COUNT(*) FROM trips WHERE current_date > DATE '2000-01-01'",
    "WITH c AS (SELECT region, COUNT(*) AS n FROM trips GROUP BY region) "
    "SELECT SUM(n) FROM c WHERE random() < 2",
])
def test_volatile_functions_stay_where_they_run_once_per_output_row(exact_con, sql):
    rows = exact_con.execute(sql).fetchall()
    assert sum(r[-1] if "SUM(n)" in sql or "current_date" in sql or "now()" in sql
               else r[1] for r in rows) == 20_000


def test_the_list_is_duckdbs_volatile_functions():
    con = duckdb.connect()
    names = {n for (n,) in con.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE stability = 'VOLATILE'"
        " AND function_type = 'scalar'").fetchall()}
    assert names <= VOLATILE, sorted(names - VOLATILE)
