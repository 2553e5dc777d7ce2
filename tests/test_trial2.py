"""A second new user's trial (a statistical office publishing a persons table): each
test pins a friction point found by following README.md and docs/ alone."""

from __future__ import annotations

import pytest

PIVOT = ("PIVOT (SELECT region, mode, COUNT(*) AS n FROM trips GROUP BY ALL) ON mode "
         "USING SUM(n) GROUP BY region")


def test_pivot_statement_takes_order_by_and_limit(exact_con):
    """DuckDB's PIVOT statement ends with optional ORDER BY and LIMIT (its docs' grammar:
    `PIVOT ... ON ... USING ... GROUP BY ... ORDER BY ... LIMIT ...`), and DuckDB runs
    it; dpsql answered `syntax error at line 1, column 103 near 'ORDER BY'`, so an
    analyst could not sort a pivoted table. Now it is the pivot in a subquery with the
    clauses outside it, parameters included."""
    cur = exact_con.cursor()
    want = cur.execute(f"SELECT * FROM ({PIVOT}) ORDER BY region DESC LIMIT 2").fetchall()
    got = cur.execute(f"{PIVOT} ORDER BY region DESC LIMIT ?", [2]).fetchall()
    assert got == want and len(got) == 2
    assert [r[0] for r in got] == sorted((r[0] for r in got), reverse=True)
    unpivot = ("UNPIVOT (SELECT mode, COUNT(*) AS n FROM trips GROUP BY ALL) ON n "
               "INTO NAME k VALUE v ORDER BY mode LIMIT 1 OFFSET 1")
    assert len(cur.execute(unpivot).fetchall()) == 1

