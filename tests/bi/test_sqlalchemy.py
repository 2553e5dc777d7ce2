"""The ``dpsql`` SQLAlchemy dialect with real clients: SQLAlchemy Core and text(), the
Inspector, pandas.read_sql, and the SQL Superset 4 emits for a bar chart.

Every answer is compared with ``dpsql.connect`` on the same release (the dialect must add
nothing and lose nothing), and on the exact release (ρ = 1e6) with plain DuckDB on the raw
parquet (STYLE §5a: DuckDB is the oracle).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys

import duckdb
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import column, desc, func, select, table, text

import dpsql
from dpsql._install import install_hint
from dpsql.errors import OperationalError, UnsupportedQueryError
from dpsql.sqlalchemy import DpsqlDialect

# The fixture releases are seeded on purpose (reproducible tests).
pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

SQLALCHEMY_2 = int(sa.__version__.split(".")[0]) >= 2
BY_MODE = "SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode ORDER BY mode"


@pytest.fixture(scope="module")
def engine(trips_release):
    eng = sa.create_engine(f"dpsql:///{trips_release}")
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def exact_engine(exact_release):
    eng = sa.create_engine(f"dpsql:///{exact_release}")
    yield eng
    eng.dispose()


def dbapi_rows(path, sql, params=None):
    """The answer of ``dpsql.connect`` for the same query: the reference."""
    with dpsql.connect(path) as con:
        return con.execute(sql, params).fetchall()


def raw_rows(trips_data, sql):
    """Plain DuckDB on the raw parquet (``{src}`` in ``sql``)."""
    con = duckdb.connect()
    try:
        return con.execute(sql.format(src=f"'{trips_data / 'trips.parquet'}'")).fetchall()
    finally:
        con.close()


def rows(result):
    return [tuple(r) for r in result]


# --------------------------------------------------------------------------------------
# Engine and URL
# --------------------------------------------------------------------------------------

def test_entry_point_resolves_without_registering(trips_release):
    (ep,) = importlib.metadata.entry_points(group="sqlalchemy.dialects", name="dpsql")
    assert ep.value == "dpsql.sqlalchemy:DpsqlDialect"
    # a fresh interpreter that never imports dpsql nor calls registry.register
    code = ("import sqlalchemy as sa, warnings\n"
            "warnings.simplefilter('ignore')\n"
            f"e = sa.create_engine('dpsql:///{trips_release}')\n"
            "print(type(e.dialect).__module__, type(e.dialect).__name__)\n"
            "with e.connect() as c:\n"
            "    print(c.execute(sa.text('SELECT COUNT(*) FROM trips')).scalar())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[:2] == ["dpsql.sqlalchemy", "DpsqlDialect"]
    assert float(lines[2]) == pytest.approx(dbapi_rows(
        trips_release, "SELECT COUNT(*) FROM trips")[0][0])


def test_sqlalchemy_is_optional(monkeypatch):
    out = subprocess.run([sys.executable, "-c",
                          "import sys, dpsql, dpsql.dbapi, dpsql.cli\n"
                          "print('sqlalchemy' in sys.modules)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr  # dpsql never imports it itself
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "dpsql.sqlalchemy")
    with pytest.raises(ImportError, match=re.escape(install_hint("bi"))):
        importlib.import_module("dpsql.sqlalchemy")


def test_pool_pre_ping(trips_release):
    eng = sa.create_engine(f"dpsql:///{trips_release}", pool_pre_ping=True)
    with eng.connect() as c:
        first = c.execute(text("SELECT COUNT(*) FROM trips")).scalar()
    with eng.connect() as c:  # the pooled connection is pinged, then reused
        assert eng.dialect.do_ping(c.connection.dbapi_connection)
        assert c.execute(text("SELECT COUNT(*) FROM trips")).scalar() == first
    eng.dispose()


def test_dialect_constants(engine):
    d = engine.dialect
    assert isinstance(d, DpsqlDialect) and d.name == "dpsql"
    assert DpsqlDialect.supports_statement_cache is True
    assert d.paramstyle == "qmark" and d.positional
    assert d.dbapi is dpsql.dbapi  # 2.x's loaded_dbapi; 1.4 has only this name


def test_relative_and_absolute_urls(trips_release, monkeypatch):
    monkeypatch.chdir(trips_release.parent)
    want = dbapi_rows(trips_release, BY_MODE)
    absolute = f"dpsql:///{trips_release}"  # an absolute path gives four slashes
    assert absolute.startswith("dpsql:////")
    for url in (f"dpsql:///{trips_release.name}", absolute):
        eng = sa.create_engine(url)
        with eng.connect() as c:
            assert rows(c.execute(text(BY_MODE))) == want
        eng.dispose()


def test_url_options(trips_release):
    eng = sa.create_engine(f"dpsql:///{trips_release}?name=t2&threads=1&plan_cache_size=0")
    with eng.connect() as c:
        assert c.connection.dbapi_connection.releases == {"t2": str(trips_release)}
        assert sa.inspect(c).get_schema_names() == ["t2"]
        assert rows(c.execute(text(BY_MODE))) == dbapi_rows(trips_release, BY_MODE)
        assert c.exec_driver_sql("SELECT current_setting('threads')").scalar() == 1
    eng.dispose()


@pytest.mark.parametrize("url, message", [
    ("dpsql:///{p}?confidence=0.9", "unknown dpsql URL option"),
    ("dpsql:///{p}?threads=two", "must be a non-negative integer"),
    ("dpsql://host/{p}", "not a server"),
    ("dpsql://", "names no release file"),
])
def test_bad_urls_are_refused(trips_release, url, message):
    with pytest.raises(sa.exc.ArgumentError, match=message):
        sa.create_engine(url.format(p=trips_release))


def test_missing_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    eng = sa.create_engine("dpsql:///no/such/release.duckdb")
    with pytest.raises(sa.exc.OperationalError) as info:
        eng.connect()
    assert isinstance(info.value.orig, OperationalError)
    msg = str(info.value.orig)
    assert str(tmp_path / "no/such/release.duckdb") in msg  # the absolute path looked at
    assert "four slashes" in msg
    assert not (tmp_path / "no").exists()  # nothing created


# --------------------------------------------------------------------------------------
# Inspector
# --------------------------------------------------------------------------------------

def test_inspector_lists_logical_tables(engine):
    insp = sa.inspect(engine)
    assert insp.default_schema_name == "trips"
    assert insp.get_schema_names() == ["trips"]
    tables = insp.get_table_names()
    assert tables == ["trips", "age_tree", "dist", "geo_gauss", "geo_mode", "mode_dist"]
    assert insp.get_table_names(schema="trips") == tables
    assert insp.get_table_names(schema="nope") == []
    assert insp.get_view_names() == []  # release views are listed as tables
    assert not any(t.startswith("dpsql_") or "__" in t for t in tables)  # no physical tables
    assert insp.has_table("trips") and insp.has_table("GEO_MODE", schema="trips")
    assert not insp.has_table("dpsql_release") and not insp.has_table("x")


def test_inspector_columns_and_types(engine):
    insp = sa.inspect(engine)
    cols = {c["name"]: c for c in insp.get_columns("trips")}
    assert list(cols) == ["region", "province", "city", "mode", "age", "distance",
                          "dp_count"]
    for name in ("region", "province", "city", "mode"):
        assert isinstance(cols[name]["type"], sa.String), name
    for name in ("age", "distance"):  # binned: numeric, used in range predicates
        assert "range predicates" in cols[name]["comment"]
    # typed as DESCRIBE and GROUP BY type them: integer values BIGINT, real ones DOUBLE
    assert isinstance(cols["age"]["type"], sa.BigInteger)
    assert isinstance(cols["distance"]["type"], sa.Float)
    assert isinstance(cols["dp_count"]["type"], sa.Float)  # several mechanisms, ranges
    assert "SUM(dp_count)" in cols["dp_count"]["comment"]
    assert not any(c["nullable"] for c in cols.values())

    def types(t):
        return {c["name"]: type(c["type"]) for c in insp.get_columns(t, schema="trips")}

    assert types("geo_mode") == {"region": sa.String, "province": sa.String,
                                 "city": sa.String, "mode": sa.String,
                                 "dp_count": sa.BigInteger}  # InfTDA: integer counts
    assert types("geo_gauss")["dp_count"] is sa.Float  # least squares: real counts
    assert types("mode_dist") == {"mode": sa.String, "distance": sa.Float,
                                  "dp_count": sa.Float}  # interpolated ranges
    with pytest.raises(sa.exc.NoSuchTableError):
        insp.get_columns("nope")


def test_inspector_keys_comments_and_reflection(engine):
    insp = sa.inspect(engine)
    assert insp.get_pk_constraint("trips")["constrained_columns"] == []
    assert insp.get_foreign_keys("trips") == []
    assert insp.get_indexes("geo_mode") == []
    assert insp.get_unique_constraints("trips") == []
    comment = insp.get_table_comment("geo_mode")["text"]
    assert "'geo_mode' (inftda)" in comment and "NOT private" in comment  # seeded
    md = sa.MetaData()
    md.reflect(engine)
    assert set(md.tables) == {"trips", "age_tree", "dist", "geo_gauss", "geo_mode",
                              "mode_dist"}
    assert "dp_count" in md.tables["dist"].c


def test_catalog_is_read_once_per_connection_and_follows_attach(trips_release,
                                                                exact_release):
    eng = sa.create_engine(f"dpsql:///{trips_release}")
    with eng.connect() as c:
        first = eng.dialect._catalog(c)
        assert eng.dialect._catalog(c) is first  # pandas asks has_table on every read_sql
        c.connection.dbapi_connection.attach(exact_release, name="exact")
        insp = sa.inspect(c)
        assert insp.get_schema_names() == ["trips", "exact"]
        assert insp.get_table_names(schema="exact")[0] == "trips"
        assert c.execute(text("SELECT COUNT(*) FROM exact.trips")).scalar() == \
            pytest.approx(20_000, abs=1e-6)
    eng.dispose()


# --------------------------------------------------------------------------------------
# Core select(), text(), parameters
# --------------------------------------------------------------------------------------

def test_core_select_group_order_limit(engine, trips_release):
    trips = sa.Table("trips", sa.MetaData(), autoload_with=engine)
    n = func.count().label("n")
    stmt = (select(trips.c.mode, n).where(trips.c.distance.between(10, 50))
            .group_by(trips.c.mode).order_by(desc(n)).limit(3))
    sql = str(stmt.compile(engine))
    assert "LIMIT ?" in sql and "BETWEEN ? AND ?" in sql  # qmark, bound by the planner
    with engine.connect() as c:
        got = rows(c.execute(stmt))
    want = dbapi_rows(trips_release, "SELECT mode, COUNT(*) AS n FROM trips WHERE distance "
                                     "BETWEEN 10 AND 50 GROUP BY mode ORDER BY n DESC LIMIT 3")
    assert len(got) == 3 and got == want


def test_text_with_bound_parameters(engine, trips_release):
    # LIMIT ? after WHERE ?: the planner binds qmark parameters in text order
    q = text("SELECT region, COUNT(*) AS n FROM trips WHERE mode = :m AND city <> :c "
             "GROUP BY region ORDER BY n DESC LIMIT :k")
    with engine.connect() as c:
        got = rows(c.execute(q, {"m": "car", "c": "R1-P1-C1", "k": 2}))
        again = rows(c.execute(q, {"m": "bus", "c": "R1-P1-C1", "k": 3}))
    assert got == dbapi_rows(trips_release, "SELECT region, COUNT(*) AS n FROM trips WHERE "
                             "mode = 'car' AND city <> 'R1-P1-C1' GROUP BY region ORDER BY "
                             "n DESC LIMIT 2")
    assert len(again) == 3 and again == dbapi_rows(
        trips_release, "SELECT region, COUNT(*) AS n FROM trips WHERE mode = ? AND city <> ? "
        "GROUP BY region ORDER BY n DESC LIMIT ?", ["bus", "R1-P1-C1", 3])


def test_parameters_bind_in_text_order_through_ctes(engine, trips_release):
    q = ("WITH a AS (SELECT mode, COUNT(*) AS n FROM trips WHERE region = {r} GROUP BY mode) "
         "SELECT mode, n FROM a WHERE n > {m} ORDER BY n DESC LIMIT {k}")
    with engine.connect() as c:
        got = rows(c.execute(text(q.format(r=":r", m=":m", k=":k")),
                             {"r": "R3", "m": 100, "k": 2}))
    assert len(got) == 2
    assert got == dbapi_rows(trips_release, q.format(r="'R3'", m=100, k=2))


def test_sum_dp_count_equals_count(engine):
    geo_mode = sa.Table("geo_mode", sa.MetaData(), schema="trips", autoload_with=engine)
    stmt = (select(geo_mode.c.region, func.sum(geo_mode.c.dp_count).label("s"),
                   func.count().label("n"))
            .group_by(geo_mode.c.region).order_by(geo_mode.c.region))
    assert "geo_mode.region" in str(stmt.compile(engine))  # not trips.geo_mode.region
    with engine.connect() as c:
        got = rows(c.execute(stmt))
    assert len(got) == 4 and all(s == n for _, s, n in got)


def test_compiler_keeps_postgres_meaning_on_duckdb(engine, trips_release):
    geo = sa.Table("geo_gauss", sa.MetaData(), autoload_with=engine)
    with engine.connect() as c:
        # regexp_match is a partial match (PostgreSQL's ~), on every sqlglot version
        labels = [r[0] for r in dbapi_rows(trips_release,
                                           "SELECT city FROM trips.dpsql_domain__geo")]
        matching = sorted(x for x in labels if re.search("P2-C", x))
        assert 0 < len(matching) < len(labels)
        for where, want in ((geo.c.city.regexp_match("P2-C"), matching),
                            (geo.c.city.regexp_match("p2-c", flags="i"), matching),
                            (~geo.c.city.regexp_match("P2-C"),
                             sorted(set(labels) - set(matching)))):
            got = rows(c.execute(select(geo.c.city, func.count()).where(where)
                                 .group_by(geo.c.city).order_by(geo.c.city)))
            assert [r[0] for r in got] == want, str(where)
        # / is true division, // floor division (an operator SQLAlchemy 2.0 added)
        total = dbapi_rows(trips_release, "SELECT COUNT(*) FROM geo_gauss")[0][0]
        d = c.execute(select((func.count() / 7).label("d")).select_from(geo)).scalar()
        assert d == pytest.approx(total / 7)
        if SQLALCHEMY_2:
            q = select((func.count() // 7).label("f")).select_from(geo)
            assert c.execute(q).scalar() == total // 7
        with pytest.raises(sa.exc.CompileError, match="read-only"):
            c.execute(select(geo.c.city).with_for_update())


def test_literal_binds_round_trip(engine):
    """Superset compiles with literal_binds: quotes are doubled, backslashes are not
    escapes in DuckDB, and a '?' inside a string is not a placeholder."""
    value = "x'y\\z %?"
    trips = sa.Table("trips", sa.MetaData(), autoload_with=engine)
    probe = select(sa.literal(value, sa.String).label("v"))
    stmt = (select(func.count().label("n")).select_from(trips)
            .where(trips.c.mode.in_(["car", "bus"]), trips.c.distance < 12.5))
    with engine.connect() as c:
        sql = str(probe.compile(c, compile_kwargs={"literal_binds": True}))
        assert sql == "SELECT 'x''y\\z %?' AS v"
        assert c.exec_driver_sql(sql).scalar() == value
        inline = str(stmt.compile(c, compile_kwargs={"literal_binds": True}))
        assert "IN ('car', 'bus')" in inline and "< 12.5" in inline
        assert c.exec_driver_sql(inline).scalar() == c.execute(stmt).scalar()


# --------------------------------------------------------------------------------------
# Superset 4: the SQL of a bar chart (dimension "mode", metric COUNT(*), row limit)
# --------------------------------------------------------------------------------------

SUPERSET_BAR = """SELECT mode AS mode, COUNT(*) AS count
FROM trips.trips
WHERE region IN ('R1', 'R2')
GROUP BY mode
ORDER BY count DESC
LIMIT 10000"""

# with a series limit, Superset joins an inner ranking query on the dimension
SUPERSET_SERIES_LIMIT = """SELECT mode AS mode, COUNT(*) AS count
FROM trips.trips
JOIN (SELECT mode AS mode__, COUNT(*) AS mme_inner__
FROM trips.trips
WHERE region IN ('R1', 'R2')
GROUP BY mode
ORDER BY mme_inner__ DESC
LIMIT 3) AS series_limit ON mode = mode__
WHERE region IN ('R1', 'R2')
GROUP BY mode
ORDER BY count DESC
LIMIT 10000"""

# SQL Lab and virtual datasets wrap the query in a subquery
SUPERSET_VIRTUAL = """SELECT mode AS mode, SUM(n) AS count
FROM (SELECT mode, region, COUNT(*) AS n FROM trips GROUP BY mode, region) AS virtual_table
WHERE region IN ('R1', 'R2')
GROUP BY mode
ORDER BY count DESC
LIMIT 10000"""

# the metric as a saved SUM(dp_count) measure, labelled the way Superset labels it
SUPERSET_SUM_MEASURE = """SELECT mode AS mode, SUM(dp_count) AS "SUM(dp_count)"
FROM trips.trips
WHERE region IN ('R1', 'R2')
GROUP BY mode
ORDER BY "SUM(dp_count)" DESC
LIMIT 10000"""

MODES = ("car", "train", "bus", "bike", "walk", "plane")
BAR_ORACLE = ("SELECT mode, COUNT(*) AS count FROM {src} WHERE region IN ('R1', 'R2') "
              "GROUP BY mode ORDER BY count DESC")


@pytest.mark.parametrize("sql", [SUPERSET_BAR, SUPERSET_SERIES_LIMIT, SUPERSET_VIRTUAL,
                                 SUPERSET_SUM_MEASURE],
                         ids=["bar", "series_limit", "virtual_table", "sum_dp_count"])
def test_superset_bar_chart_queries(engine, exact_engine, trips_release, trips_data, sql):
    with engine.connect() as c:
        got = rows(c.execute(text(sql)))
    assert got == dbapi_rows(trips_release, sql)
    with exact_engine.connect() as c:
        exact = rows(c.execute(text(sql)))
    # the release lists every public mode, the raw data only those that occur
    counts = {m: 0 for m in MODES} | dict(raw_rows(trips_data, BAR_ORACLE))
    want = sorted(counts.items(), key=lambda kv: -kv[1])[:3 if "series" in sql else None]
    assert [m for m, _ in exact] == [m for m, _ in want]
    assert [n for _, n in exact] == pytest.approx([n for _, n in want], abs=1e-6)


def test_superset_filter_values_query(engine):
    """A native filter's value list: GROUP BY without an aggregate lists the public
    domain (every value, also those with a zero count)."""
    q = "SELECT mode AS mode FROM trips.trips GROUP BY mode ORDER BY mode LIMIT 1000"
    with engine.connect() as c:
        assert [r[0] for r in c.execute(text(q))] == sorted(MODES)


def test_superset_core_expression_shape(engine, trips_release):
    """The same series-limit query built as Superset builds it: unbound column() and
    table(name, schema), labels, an aliased subquery joined on the dimension."""
    tbl = table("trips", schema="trips")
    inner = (select(column("mode").label("mode__"), func.count().label("mme_inner__"))
             .select_from(tbl).group_by(column("mode")).order_by(desc("mme_inner__"))
             .limit(3).subquery("series_limit"))
    stmt = (select(column("mode").label("mode"), func.count().label("count"))
            .select_from(tbl.join(inner, column("mode") == inner.c.mode__))
            .group_by(column("mode")).order_by(desc("count")).limit(10000))
    with engine.connect() as c:
        got = rows(c.execute(stmt))
    want = dbapi_rows(trips_release, "SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode "
                                     "ORDER BY n DESC LIMIT 3")
    assert got == want


# --------------------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------------------

def test_pandas_read_sql(engine, trips_release):
    want = dbapi_rows(trips_release, BY_MODE)
    df = pd.read_sql(BY_MODE, engine)
    assert list(df.columns) == ["mode", "n"]
    assert list(df.itertuples(index=False, name=None)) == want
    q = ("SELECT mode, COUNT(*) AS n FROM trips WHERE region = ? GROUP BY mode "
         "ORDER BY mode LIMIT ?")
    by_qmark = pd.read_sql_query(q, engine, params=("R2", 4))
    by_text = pd.read_sql_query(text(q.replace("?", ":r", 1).replace("?", ":k")), engine,
                                params={"r": "R2", "k": 4})
    want = dbapi_rows(trips_release, q, ["R2", 4])
    assert len(want) == 4
    assert list(by_qmark.itertuples(index=False, name=None)) == want
    assert list(by_text.itertuples(index=False, name=None)) == want


@pytest.mark.filterwarnings("always::dpsql.dbapi.SeededReleaseWarning")
def test_seeded_release_warning_points_at_the_analysts_line(trips_release):
    """The warning of a seeded release, raised while SQLAlchemy's pool connects, is shown
    at the line that asked for the connection: it pointed inside SQLAlchemy
    (sqlalchemy/engine/create.py), where an analyst would not look for its cause."""
    eng = sa.create_engine(f"dpsql:///{trips_release}")
    try:
        with pytest.warns(dpsql.dbapi.SeededReleaseWarning) as caught:
            pd.read_sql(BY_MODE, eng)
    finally:
        eng.dispose()
    assert [w.filename for w in caught] == [__file__]


def test_pandas_matches_raw_data_on_exact_release(exact_engine, trips_data):
    df = pd.read_sql("SELECT region, COUNT(*) AS n FROM trips GROUP BY region "
                     "ORDER BY region", exact_engine)
    want = raw_rows(trips_data, "SELECT region, COUNT(*) FROM {src} GROUP BY region "
                                "ORDER BY region")
    assert [r for r, _ in want] == list(df["region"])
    assert list(df["n"]) == pytest.approx([n for _, n in want], abs=1e-6)


def test_pandas_read_sql_table_is_row_level_access(engine):
    # pandas >= 2.2 wraps the refusal in its DatabaseError; 2.1 (SQLAlchemy 1.4's pandas,
    # Superset 6's) lets SQLAlchemy's own NotSupportedError through
    with pytest.raises((pd.errors.DatabaseError, sa.exc.NotSupportedError),
                       match="not supported"):
        pd.read_sql_table("trips", engine)


# --------------------------------------------------------------------------------------
# Errors: unsupported queries, DDL and DML are dpsql errors wrapped by SQLAlchemy
# --------------------------------------------------------------------------------------

def test_unsupported_query_is_wrapped(engine):
    with engine.connect() as c, pytest.raises(sa.exc.NotSupportedError) as info:
        c.execute(text("SELECT mode, AVG(age) FROM trips GROUP BY mode"))
    assert isinstance(info.value.orig, UnsupportedQueryError)
    assert "no single view covers" in str(info.value.orig)  # the planner's own words
    assert "age, mode" in str(info.value.orig)


def test_ddl_and_dml_are_refused(engine):
    md = sa.MetaData()
    trips = sa.Table("trips", md, autoload_with=engine)
    sa.Table("scratch", md, sa.Column("a", sa.Integer))
    with engine.connect() as c:
        with pytest.raises(sa.exc.NotSupportedError, match="read-only") as info:
            md.create_all(c)  # trips exists (skipped); CREATE TABLE scratch is refused
        assert isinstance(info.value.orig, UnsupportedQueryError)
        with pytest.raises(sa.exc.NotSupportedError, match="INSERT statements"):
            c.execute(trips.insert().values(mode="car"))
        with pytest.raises(sa.exc.NotSupportedError, match="DELETE|read-only"):
            c.execute(trips.delete())
    assert not sa.inspect(engine).has_table("scratch")


def test_isolation_level_is_autocommit_only(engine):
    with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as c:
        assert c.get_isolation_level() == "AUTOCOMMIT"
        assert c.execute(text("SELECT 1")).scalar() == 1
    with pytest.raises(sa.exc.ArgumentError, match="AUTOCOMMIT"):
        with engine.execution_options(isolation_level="SERIALIZABLE").connect():
            pass


def test_dp_info_reaches_sqlalchemy_users(engine):
    with engine.connect() as c:
        result = c.execute(text("SELECT COUNT(*) FROM trips.geo_mode"))
        info = result.context.cursor.dp_info
        result.all()
    assert info["view"] == "geo_mode" and info["privacy"] == "seeded: not private"
