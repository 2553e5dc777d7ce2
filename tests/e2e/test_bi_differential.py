"""The BI-tool differential hunt, bounded and deterministic: seeded queries shaped as
Superset, Metabase, Tableau, Power BI and Looker send them (tests/e2e/bi_sql_gen.py),
over a release whose views use the Gaussian and Laplace trees, Cascade (tree and
range-optimal covariance) and the b-ary Laplace tree, answered by dpsql at ρ = 1e11 and
by plain DuckDB on the raw rows.

Each answer must be DuckDB's (within 0.5, rows as multisets, public groups of count 0
aside) or a refusal with :class:`dpsql.UnsupportedQueryError`; a sample of the queries
must give the same rows through every entry point: DuckDB with the release attached,
``dpsql.connect`` (PEP 249) and ``dpsql serve`` (pgwire, through psycopg).

A longer campaign: ``python tests/e2e/bi_sql_gen.py 5000 SEED``.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import psycopg
import pytest

import bi_sql_gen
import dpsql
import fuzz_sql_support as fz
from dpsql import duck
from dpsql.server import serve

# PEP 249 warns of a value outside a public domain (Metabase's c <> ''); DuckDB's API not
pytestmark = [pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning"),
              pytest.mark.filterwarnings("ignore::dpsql._dbapi_cursor.PublicDomainWarning")]

SEEDS = (20261128, 7)
QUERIES_PER_SEED = 200
ALIAS = "s"  # the attach alias: Metabase's "s"."t", the raw side's schema s


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    base = tmp_path_factory.mktemp("bi_differential")
    bi_sql_gen.build(base)
    return base


@pytest.fixture(scope="module")
def cons(base):
    dp = duckdb.connect()
    duck.attach(dp, str(bi_sql_gen.build(base)), name=ALIAS)
    dp.execute(fz.PUBLIC)
    raw = bi_sql_gen.raw_connection(base)
    yield dp, raw
    dp.close()
    raw.close()


def test_the_generator_is_deterministic():
    a, b = bi_sql_gen.BiGen(3), bi_sql_gen.BiGen(3)
    assert [a.query() for _ in range(60)] == [b.query() for _ in range(60)]


@pytest.mark.parametrize("seed", SEEDS)
def test_every_bi_query_is_duckdbs_answer_or_a_clear_refusal(cons, seed):
    dp, raw = cons
    gen = bi_sql_gen.BiGen(seed)
    kinds: Counter = Counter()
    tools: Counter = Counter()
    bad = []
    for _ in range(QUERIES_PER_SEED):
        sql, keys, tool = gen.query()
        kind, detail = fz.classify(dp, raw, sql, keys)
        kinds[kind] += 1
        tools[tool] += kind == "equal"
        if kind in ("wrong", "answered", "unclear", "crash"):
            bad.append((kind, sql, detail[:500]))
    assert not bad, "\n".join(f"[{k}] {q}\n    {d}" for k, q, d in bad[:10])
    # the shapes stay answerable: most queries are answered and compared, of every tool
    assert kinds["equal"] >= QUERIES_PER_SEED * 2 // 3, kinds
    assert len(tools) == 20 and min(tools.values()) >= 1, tools


@pytest.fixture(scope="module")
def server(base):
    srv = serve(bi_sql_gen.build(base), port=0)
    assert srv._conn.planning.start(wait=120)
    pg = psycopg.connect(f"host=127.0.0.1 port={srv.port} dbname={srv.database} "
                         "user=analyst sslmode=disable connect_timeout=10", autocommit=True)
    yield pg
    pg.close()
    srv.stop()


@pytest.fixture(scope="module")
def pep249(base):
    con = dpsql.connect(bi_sql_gen.build(base))
    yield con
    con.close()


def _rows(run) -> tuple[str, list]:  # noqa: ANN001
    """('ok', rows normalised and sorted) or ('refused', '') or ('error', text)."""
    try:
        rows = run()
    except (dpsql.UnsupportedQueryError, psycopg.errors.FeatureNotSupported):
        return "refused", []
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return "error", [f"{type(e).__name__}: {e}"]
    return "ok", sorted((tuple(round(float(v), 4) if fz._num(v) else
                               None if v is None else str(v) for v in r) for r in rows),
                        key=repr)


def test_every_entry_point_gives_the_same_rows(cons, pep249, server):
    """Forty generated queries through DuckDB with the release attached, dpsql.connect
    and dpsql serve: the same rows, or refused by all three. Metabase's schema is the
    attach alias on DuckDB's API, the release's name on connect's, public on the wire."""
    dp, _ = cons
    gen = bi_sql_gen.BiGen(11)
    outcomes: Counter = Counter()
    while sum(outcomes.values()) < 40:
        sql = gen.query()[0]
        if "pub" in sql:  # the public table is a table of the DuckDB connection only
            continue
        attached = _rows(lambda: duck.execute(dp, sql)[0].fetchall())
        connected = _rows(lambda: pep249.execute(sql.replace('"s"."t"', '"t"."t"')).fetchall())
        wire = _rows(lambda: server.execute(sql.replace('"s"."t"', '"public"."t"')).fetchall())
        assert attached == connected == wire, (sql, attached, connected, wire)
        outcomes[attached[0]] += 1
    assert outcomes["ok"] >= 25, outcomes


# PostgreSQL's to_char (Looker and Metabase send it; DuckDB has none) parsed to sqlglot's
# ToChar, whose DuckDB form dropped the format: the months came out labelled
# '2013-01-01 00:00:00', not '2013-01', through every entry point (dpsql serve too, where
# "public"."t" is rewritten first). Now refused, naming DuckDB's strftime.
TO_CHAR = ["SELECT to_char(date_trunc('month', d), 'YYYY-MM') AS mo, COUNT(*) FROM {t} "
           "GROUP BY 1 ORDER BY 1",
           "SELECT c, COUNT(*) FROM {t} WHERE c IS NOT NULL GROUP BY c, to_char(DATE "
           "'2013-01-01', 'YYYY')",
           # of the binned column itself: was refused as "used in 'CAST(d AS TEXT)'"
           "SELECT to_char(d, 'YYYY-MM') AS mo, COUNT(*) FROM {t} GROUP BY 1"]


@pytest.mark.parametrize("sql", TO_CHAR, ids=range(len(TO_CHAR)))
def test_to_char_is_refused_not_answered_without_its_format(cons, pep249, server, sql,
                                                            caplog):
    dp, _ = cons
    with pytest.raises(dpsql.UnsupportedQueryError, match=r"to_char.*strftime"):
        duck.execute(dp, sql.format(t="t"))
    with pytest.raises(dpsql.UnsupportedQueryError, match=r"to_char.*strftime"):
        pep249.execute(sql.format(t='"t"."t"'))
    with pytest.raises(psycopg.errors.FeatureNotSupported, match=r"to_char.*strftime"):
        server.execute(sql.format(t='"public"."t"'))
    assert not [r for r in caplog.records if "not supported for expression" in r.message]
    # what to write instead is answered, as DuckDB answers it on the data
    fixed = sql.replace("to_char(date_trunc('month', d), 'YYYY-MM')",
                        "strftime(date_trunc('month', d), '%Y-%m')")
    if fixed != sql:
        got = pep249.execute(fixed.format(t="t")).fetchall()
        assert got[:2] == [("2013-01", 509.0), ("2013-02", 522.0)]


# BI tools' projection subqueries over the private table (dpsql/planner/inline_subqueries.py):
# each is an aggregate of the table, answered as DuckDB answers it on the rows
INLINED = [
    # Superset's virtual datasets
    'SELECT c AS c, COUNT(*) AS "count" FROM (SELECT * FROM t) AS virtual_table GROUP BY c '
    'ORDER BY "count" DESC LIMIT 10000',
    "SELECT c, COUNT(*) AS count FROM (SELECT c, r FROM t WHERE r <> 'E') AS virtual_table "
    "WHERE c IS NOT NULL GROUP BY c ORDER BY count DESC LIMIT 10000",
    "SELECT CAST(date_trunc('month', d) AS DATE) AS __timestamp, COUNT(*) AS count FROM "
    "(SELECT d, k FROM vd WHERE d >= DATE '2013-03-01') AS virtual_table GROUP BY 1 LIMIT 50000",
    "SELECT c, SUM(dp_count) AS n FROM (SELECT * FROM vlt WHERE k BETWEEN 3 AND 12) AS "
    "virtual_table GROUP BY c",
    # Power BI, one to three levels deep
    'SELECT "_"."c", count(1) AS "a0" FROM (SELECT "_"."c" FROM "t" "_" WHERE ("_"."c" IS NOT '
    'NULL)) "_" GROUP BY "_"."c"',
    'select "_"."c", "_"."a0" from (select "_"."c", count(1) as "a0" from (select "_"."c" from '
    '(select "_"."c", "_"."k" from "vlt" "_" where ("_"."k" < 10)) "_" where ("_"."c" IS NOT '
    'NULL)) "_" group by "_"."c") "_" where not "_"."a0" is null limit 1000001',
    # Metabase/Tableau over a native query that renames
    'SELECT "Category", COUNT(*) AS "count" FROM (SELECT c AS "Category", k FROM t WHERE k >= '
    '5) AS "source" WHERE "Category" <> \'b\' GROUP BY "Category" ORDER BY "Category"',
    'SELECT "source"."Region" AS "Region", COUNT(*) AS "count" FROM (SELECT r AS "Region", c '
    'AS "C" FROM t WHERE pr <> \'N1\') AS "source" WHERE "source"."C" < \'c\' GROUP BY '
    '"source"."Region" ORDER BY "source"."Region" ASC',
    # Tableau's custom SQL with named expressions of the columns
    'SELECT "Cat", COUNT(*) AS n FROM (SELECT COALESCE(c, \'N/A\') AS "Cat", k FROM vlt) '
    '"Custom SQL Query" WHERE "Cat" <> \'b\' AND k < 12 GROUP BY "Cat"',
    "SELECT kb, SUM(one) AS n FROM (SELECT floor(k / 5) * 5 AS kb, 1 AS one FROM t) s "
    "GROUP BY kb",
    # an outer * is the subquery's columns; a CTE; a join with a public table
    "SELECT *, COUNT(*) AS n FROM (SELECT c AS cat, r FROM t) v GROUP BY ALL",
    "WITH base AS (SELECT c AS cat FROM t WHERE r = 'N') SELECT cat, COUNT(*) FROM base "
    "GROUP BY cat",
    "SELECT v.c, p.kind, COUNT(*) FROM (SELECT c FROM t WHERE k > 4) v JOIN pub p ON v.c = "
    "p.label GROUP BY 1, 2",
    "SELECT p.label, COUNT(v.c) AS n FROM pub p LEFT JOIN (SELECT c FROM t) v ON v.c = "
    "p.label GROUP BY 1",
]


@pytest.mark.parametrize("sql", INLINED, ids=range(len(INLINED)))
def test_projection_subqueries_are_answered_as_duckdb_answers_them(cons, sql):
    dp, raw = cons
    kind, detail = fz.classify(dp, raw, sql, len(sql))  # every column compared as a key
    assert kind == "equal", (kind, detail)


# what is not a projection is planned as the subquery it is: a row-level read of the
# table is refused, saying what would have been read as the table itself
ROW_LEVEL = "row-level access to the private table 't'.*read as the table itself only when"
NOT_INLINED = {
    "distinct": ("SELECT x, COUNT(*) FROM (SELECT DISTINCT k AS x FROM t) v GROUP BY x",
                 "grouping by the binned attribute 'k' without an aggregate"),
    "group by": ("SELECT c, COUNT(*) FROM (SELECT c, k FROM t GROUP BY c, k) v GROUP BY c",
                 "grouping by the binned attribute 'k' without an aggregate"),
    "aggregate": ("SELECT n, COUNT(*) FROM (SELECT COUNT(*) OVER () AS n, c FROM t) v "
                  "GROUP BY n", "row-level"),
    "window": ("SELECT c, COUNT(*) FROM (SELECT c, row_number() OVER () AS i FROM t) v "
               "GROUP BY c", ROW_LEVEL),
    "limit": ("SELECT c, COUNT(*) FROM (SELECT c FROM t LIMIT 100) v GROUP BY c", ROW_LEVEL),
    "offset": ("SELECT c, COUNT(*) FROM (SELECT c FROM t OFFSET 5) v GROUP BY c", ROW_LEVEL),
    "order by and limit": ("SELECT c, COUNT(*) FROM (SELECT c FROM t ORDER BY c LIMIT 10) v "
                           "GROUP BY c", ROW_LEVEL),
    "qualify": ("SELECT c, COUNT(*) FROM (SELECT c FROM t QUALIFY row_number() OVER () < 5) "
                "v GROUP BY c", ROW_LEVEL),
    "set operation": ("SELECT c, COUNT(*) FROM (SELECT c FROM t UNION ALL SELECT c FROM t) v "
                      "GROUP BY c", ROW_LEVEL),
    "join": ("SELECT c, COUNT(*) FROM (SELECT t.c FROM t JOIN pub p ON t.c = p.label) v "
             "GROUP BY c", ROW_LEVEL),
    "unnamed expression": ("SELECT COUNT(*) FROM (SELECT upper(c) FROM t) v", ROW_LEVEL),
    "expression on the NULL side": ("SELECT p.label, COUNT(v.x) FROM pub p LEFT JOIN "
                                    "(SELECT COALESCE(c, 'a') AS x FROM t) v ON v.x = "
                                    "p.label GROUP BY 1", ROW_LEVEL),
    "volatile": ("SELECT c, COUNT(*) FROM (SELECT c FROM t WHERE random() < 0.5) v GROUP BY c",
                 ROW_LEVEL),
    "sample": ("SELECT c, COUNT(*) FROM (SELECT c FROM t USING SAMPLE 10%) v GROUP BY c",
               "sampling the private table"),
    "outer join filter": ("SELECT p.label, COUNT(v.c) FROM pub p LEFT JOIN (SELECT c FROM t "
                          "WHERE k < 5) v ON v.c = p.label GROUP BY 1", ROW_LEVEL),
    "hidden column": ("SELECT r, COUNT(*) FROM (SELECT c FROM t) v GROUP BY r", ROW_LEVEL),
    "in a CTE": ("WITH v AS (SELECT c FROM t LIMIT 5) SELECT c, COUNT(*) FROM v GROUP BY c",
                 ROW_LEVEL),
}


@pytest.mark.parametrize("case", sorted(NOT_INLINED))
def test_other_subqueries_are_planned_as_written_and_refused(cons, case):
    dp, _ = cons
    sql, says = NOT_INLINED[case]
    with pytest.raises(dpsql.UnsupportedQueryError, match=says):
        duck.execute(dp, sql)


def test_a_superset_virtual_dataset_through_every_entry_point(cons, pep249, server):
    """Superset's virtual dataset over the release, through DuckDB with the release
    attached, dpsql.connect and dpsql serve: DuckDB's answer on the rows at each."""
    dp, raw = cons
    sql = ("SELECT r AS r, COUNT(*) AS \"count\" FROM (SELECT c, r FROM {t} WHERE c <> 'b') "
           "AS virtual_table GROUP BY r ORDER BY \"count\" DESC, r LIMIT 10000")
    want = [(r, float(n)) for r, n in raw.execute(sql.format(t="t")).fetchall()]
    assert len(want) == 4
    for got in (duck.execute(dp, sql.format(t='"s"."t"'))[0].fetchall(),
                pep249.execute(sql.format(t='"t"."t"')).fetchall(),
                server.execute(sql.format(t='"public"."t"')).fetchall()):
        assert [(r, round(float(n), 4)) for r, n in got] == want


@pytest.mark.parametrize("sql", ["SELECT c FROM t", "SELECT c, COUNT(*) FROM t WHERE c IN "
                                 "(SELECT c FROM t LIMIT 1) GROUP BY c"])
def test_the_subquery_hint_is_only_for_a_subquery_of_from(cons, sql):
    """A row-level read that is no subquery of FROM (the query itself, an IN list) is
    refused without the words about subqueries read as the table."""
    dp, _ = cons
    with pytest.raises(dpsql.UnsupportedQueryError, match="row-level access") as err:
        duck.execute(dp, sql)
    assert "read as the table itself" not in str(err.value)
