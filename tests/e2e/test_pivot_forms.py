"""DuckDB's PIVOT and UNPIVOT statements in the forms sqlglot does not parse: after a
``WITH`` list, in parentheses with ``ORDER BY`` / ``LIMIT`` / ``OFFSET`` outside, nested
(:func:`dpsql.planner.parse_sql._pivot_as_select`). Each is answered as DuckDB answers it
on the raw rows, at ρ = 1e11, through ``dpsql.connect`` and through ``dpsql serve``
(whose read-only guard reads them as the SELECT they are); a form that still does not
parse says which spelling works."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
from conftest import release_and_raw

INNER = "SELECT k, s, COUNT(*) AS n FROM t GROUP BY ALL"
PIVOT = f"PIVOT ({INNER}) ON s IN ('F', 'M') USING SUM(n) GROUP BY k"
CTE = f"WITH c AS ({INNER}) "
UNPIVOT = ("UNPIVOT (SELECT k, COUNT(*) AS n, SUM(1) AS m FROM t GROUP BY k) ON n, m "
           "INTO NAME what VALUE v")
FORMS = [  # each was a syntax error ("Expecting )", "Invalid expression / Unexpected token")
    f"{CTE}PIVOT c ON s IN ('F', 'M') USING SUM(n) GROUP BY k ORDER BY k DESC",
    f"{CTE}PIVOT c ON s IN ('F', 'M') USING SUM(n) GROUP BY k ORDER BY k LIMIT 2",
    f"({PIVOT}) ORDER BY k DESC",
    f"({PIVOT}) ORDER BY k DESC LIMIT 2 OFFSET 1",
    f"(({PIVOT})) ORDER BY k",
    f"({PIVOT} ORDER BY k DESC) LIMIT 2",
    f"{CTE}(PIVOT c ON s IN ('F', 'M') USING SUM(n) GROUP BY k) ORDER BY k DESC",
    f"({CTE}PIVOT c ON s IN ('F', 'M') USING SUM(n) GROUP BY k) ORDER BY k DESC LIMIT 2",
    f"WITH c(a, b, n) AS MATERIALIZED ({INNER}) PIVOT c ON b IN ('F', 'M') USING SUM(n) "
    "GROUP BY a ORDER BY a",  # a CTE's column list and MATERIALIZED
    f"({UNPIVOT}) ORDER BY k, what",
    "WITH u AS (SELECT k, COUNT(*) AS n, SUM(1) AS m FROM t GROUP BY k) UNPIVOT u ON n, m "
    "INTO NAME what VALUE v ORDER BY k, what LIMIT 3",
]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    base = tmp_path_factory.mktemp("pivots")
    g = np.random.default_rng(9)
    pq.write_table(pa.table({"k": g.choice(["a", "b", "c", "d"], 2000),
                             "s": g.choice(["F", "M"], 2000)}), base / "t.parquet")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e11"},
            "attributes": {"k": {"kind": "categorical", "domain": ["a", "b", "c", "d"]},
                           "s": {"kind": "categorical", "domain": ["F", "M"]}},
            "views": [{"name": "v", "levels": ["k", "s"], "mechanism": "gaussian_tree"}]}
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb", seed=2,
                  progress=False)
    return base


@pytest.fixture(scope="module")
def cons(release):
    with release_and_raw(release) as pair:
        yield pair


def _close(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        len(g) == len(w) and all(x == y if isinstance(y, str) else abs(x - y) <= 0.5
                                 for x, y in zip(g, w)) for g, w in zip(got, want))


@pytest.mark.parametrize("sql", FORMS)
def test_pivot_forms_are_answered_as_duckdb_answers_them(cons, sql):
    con, raw = cons
    want = raw.execute(sql).fetchall()
    assert want and _close(con.execute(sql).fetchall(), want)


def test_parameters_keep_their_text_order(cons):
    con, raw = cons
    sql = (f"({CTE}PIVOT c ON s IN ('F', 'M') USING SUM(n) GROUP BY k) "
           "ORDER BY k DESC LIMIT ? OFFSET ?")
    want = raw.execute(sql, [2, 1]).fetchall()
    assert len(want) == 2 and _close(con.execute(sql, [2, 1]).fetchall(), want)


@pytest.mark.parametrize("sql", [
    f"({PIVOT}) ORDER BY k LIMIT",
    f"({PIVOT} ORDER BY) LIMIT 2",
])
def test_a_pivot_form_that_does_not_parse_names_the_spelling_that_works(cons, sql):
    with pytest.raises(dpsql.SqlSyntaxError, match=r"is read as SELECT \* FROM \(PIVOT "
                       r"\.\.\.\) ORDER BY \.\.\. LIMIT \.\.\., which did not parse"):
        cons[0].execute(sql)


@pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")
def test_dpsql_serve_answers_them_as_dpsql_connect_does(release, cons):
    """The server's read-only guard asks DuckDB's own parser (a SELECT each), its router
    sends what sqlglot cannot parse to the planner: the same answers as in process."""
    import psycopg

    from dpsql.server import serve

    srv = serve(release / "t.duckdb", port=0)
    try:
        dsn = f"host=127.0.0.1 port={srv.port} dbname={srv.database} sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as pg:
            for sql in FORMS[:1] + FORMS[3:4] + FORMS[5:8] + FORMS[-2:]:
                want = cons[0].execute(sql).fetchall()
                assert [tuple(r) for r in pg.execute(sql).fetchall()] == want, sql
            with pytest.raises(psycopg.errors.SyntaxError, match=r"SELECT \* FROM \(PIVOT"):
                pg.execute(f"({PIVOT}) ORDER BY k LIMIT")
    finally:
        srv.stop()


@pytest.mark.parametrize("sql", [
    "(SELECT k, COUNT(*) AS n FROM t GROUP BY k) ORDER BY k DESC LIMIT 2",
    "((SELECT k, COUNT(*) AS n FROM t GROUP BY k)) ORDER BY n DESC",
    "WITH c AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k) (SELECT * FROM c) ORDER BY k "
    "LIMIT 1 OFFSET 1",
])
def test_a_select_in_parentheses_takes_clauses_outside_too(cons, sql):
    """The same form with a SELECT: sqlglot reads it as a bare subquery, which was
    refused as "SUBQUERY statements are not supported"."""
    con, raw = cons
    want = raw.execute(sql).fetchall()
    assert want and _close(con.execute(sql).fetchall(), want)
