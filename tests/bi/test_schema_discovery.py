"""Schema discovery of the logical tables, in-process and over ``dpsql serve``.

DESCRIBE, SHOW TABLES, SHOW COLUMNS, information_schema, pg_catalog and duckdb_*() answer
from the public spec (names, kinds, value types) through ``dpsql.connect``,
``dpsql.attach`` (DB-API and ``dpsql.sql``), the ``dpsql://`` dialect and the server: they
list the logical tables and never the physical level tables, a source path or a count.
SUMMARIZE of a logical table is a privacy refusal naming what to write; array parameters
(pgcli's ``c.relkind = ANY(%s)``) bind as lists over the extended protocol.
"""

from __future__ import annotations

import re
import shutil
import struct

import duckdb
import psycopg
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.cli import main
from dpsql.server._types import decode_param
from tests.bi.test_escape import attached, connection, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

LOGICAL = {"trips", "geo_mode", "geo_gauss", "dist", "age_tree", "mode_dist"}
TRIPS_COLUMNS = [("region", "VARCHAR"), ("province", "VARCHAR"), ("city", "VARCHAR"),
                 ("mode", "VARCHAR"), ("distance", "DOUBLE"), ("age", "BIGINT"),
                 ("dp_count", "DOUBLE")]


def _run_connect(ctx, sql):
    return ctx["connection"].execute(sql).fetchall()


def _run_attach(ctx, sql):
    return dpsql.sql(ctx["attached"], sql).fetchall()


def _run_dialect(ctx, sql):
    with ctx["engine"].connect() as c:
        return [tuple(r) for r in c.exec_driver_sql(sql).fetchall()]


@pytest.fixture(params=["connect", "attach", "dialect"])
def run(request, trips_release):
    ctx = {}
    if request.param == "connect":
        ctx["connection"] = request.getfixturevalue("connection")
        fn = _run_connect
    elif request.param == "attach":
        ctx["attached"] = request.getfixturevalue("attached")
        fn = _run_attach
    else:
        ctx["engine"] = sa.create_engine(f"dpsql:///{trips_release}")
        fn = _run_dialect
    yield lambda sql: fn(ctx, sql)
    if "engine" in ctx:
        ctx["engine"].dispose()


def test_describe_show_and_show_columns(run):
    assert [(r[0], r[1]) for r in run("DESCRIBE trips")] == TRIPS_COLUMNS
    assert [(r[0], r[1]) for r in run("SHOW trips")] == TRIPS_COLUMNS
    assert [(r[0], r[1]) for r in run("SHOW COLUMNS FROM dist")] == [
        ("distance", "DOUBLE"), ("dp_count", "DOUBLE")]
    # an InfTDA view without a range level: integer counts, as its COUNT(*) gives them
    assert [(r[0], r[1]) for r in run("DESCRIBE geo_mode")][-1] == ("dp_count", "BIGINT")
    assert [(r[0], r[1]) for r in run("DESCRIBE mode_dist")][-1] == ("dp_count", "DOUBLE")
    assert {r[0] for r in run("SHOW TABLES")} == LOGICAL
    assert {r[2] for r in run("SHOW ALL TABLES")} == LOGICAL


def test_information_schema_and_catalogs_list_the_logical_tables_only(run):
    tables = run("SELECT table_schema, table_name FROM information_schema.tables")
    assert {t for _, t in tables} == LOGICAL
    columns = run("SELECT column_name, data_type FROM information_schema.columns "
                  "WHERE table_name = 'trips' ORDER BY ordinal_position")
    assert columns == TRIPS_COLUMNS
    names = {r[0] for r in run("SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'r'")}
    assert names == LOGICAL  # no level, prefix or domain table
    assert {r[0] for r in run("SELECT table_name FROM duckdb_tables()")} == LOGICAL
    assert {r[0] for r in run("SELECT nspname FROM pg_catalog.pg_namespace")} >= {
        "pg_catalog", "information_schema"}


def test_column_comments_come_from_the_spec_and_leak_nothing(run, trips_data):
    rows = run("SELECT table_name, column_name, comment FROM duckdb_columns() "
               "WHERE table_name = 'trips'")
    comments = {c: text for _, c, text in rows}
    assert comments["mode"] == "categorical attribute (mode): 6 public values"
    assert comments["distance"].startswith("binned real attribute: 64 bins of width 4")
    shown = repr(run("SELECT * FROM duckdb_columns()")) + repr(run("SELECT * FROM "
                                                                   "duckdb_tables()"))
    assert str(trips_data) not in shown and "parquet" not in shown


def test_discovery_is_public_and_queries_still_plan(connection):
    cur = connection.cursor()
    cur.execute("DESCRIBE trips")
    assert [d[0] for d in cur.description][:2] == ["column_name", "column_type"]
    assert cur.dp_info["private"] is False
    assert "schema discovery" in cur.dp_info["notes"][0]
    cur.execute("SELECT COUNT(*) FROM trips")  # the count still reads the release
    assert cur.fetchall()[0][0] > 1000
    assert cur.dp_info["private"] is True


def test_summarize_and_by_name_reads_are_refused(run):
    with pytest.raises(Exception, match=r"SUMMARIZE trips is not supported.*DESCRIBE trips"):
        run("SUMMARIZE trips")
    with pytest.raises(Exception, match="query_table"):
        run("SELECT * FROM query_table('trips'), information_schema.tables")


def test_a_second_release_is_described_after_attach(trips_release, exact_release):
    with dpsql.connect(trips_release) as con:
        assert {r[0] for r in con.execute("SHOW TABLES").fetchall()} == LOGICAL
        con2 = duckdb.connect()
        dpsql.attach(con2, str(trips_release))
        assert len(dpsql.sql(con2, "SHOW ALL TABLES").fetchall()) == len(LOGICAL)
        dpsql.attach(con2, str(exact_release), name="exact")
        catalogs = {r[0] for r in dpsql.sql(con2, "SHOW ALL TABLES").fetchall()}
        assert catalogs == {"trips", "exact"}
        con2.close()


# -- over the server ------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg(server):
    con = psycopg.connect(f"host=127.0.0.1 port={server.port} dbname={server.database} "
                          "user=analyst sslmode=disable connect_timeout=10", autocommit=True)
    yield con
    con.close()


def test_server_describe_show_tables_and_show_columns(pg):
    assert [(r[0], r[1]) for r in pg.execute("DESCRIBE trips").fetchall()] == TRIPS_COLUMNS
    assert {r[0] for r in pg.execute("SHOW TABLES").fetchall()} == LOGICAL
    assert [r[0] for r in pg.execute("SHOW COLUMNS FROM dist").fetchall()] == [
        "distance", "dp_count"]
    assert pg.execute("SHOW search_path").fetchall() == [("public",)]  # still a setting
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="SUMMARIZE trips"):
        pg.execute("SUMMARIZE trips")


def test_server_descriptions_for_psql(pg):
    rows = pg.execute("SELECT a.attname, col_description(a.attrelid, a.attnum) FROM "
                      "pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE "
                      "c.relname = 'trips' AND a.attnum > 0 ORDER BY a.attnum").fetchall()
    assert rows[1] == ("province", "hierarchy attribute (geo), level 2: 12 public values")
    table = pg.execute("SELECT obj_description(oid, 'pg_class') FROM pg_class WHERE "
                       "relname = 'dist'").fetchall()[0][0]
    assert table.startswith("dpsql logical table")


def test_server_catalog_has_no_main_schema_and_one_database(pg):
    assert {r[0] for r in pg.execute("SELECT nspname FROM pg_namespace").fetchall()} == {
        "public", "pg_catalog", "information_schema"}
    assert pg.execute("SELECT datname FROM pg_database").fetchall() == [("trips",)]
    schemata = {r[0] for r in pg.execute(
        "SELECT schema_name FROM information_schema.schemata").fetchall()}
    assert schemata == {"public", "pg_catalog", "information_schema"}


def test_server_array_parameters(pg):
    # psycopg sends a list of strings untyped ({r,p}), pgspecial writes ANY('{r,p,""}')
    rows = pg.execute("SELECT relname FROM pg_class WHERE relkind = ANY(%s)",
                      [["r", "p"]]).fetchall()
    assert {r[0] for r in rows} == LOGICAL
    rows = pg.execute("SELECT relname FROM pg_class WHERE relkind = ANY('{r,p,\"\"}')"
                      ).fetchall()
    assert {r[0] for r in rows} == LOGICAL
    rows = pg.execute("SELECT count(*) FROM pg_class WHERE relnatts = ANY(%s)",
                      [[2, 3]], prepare=True).fetchall()  # int2[]: typed
    assert rows[0][0] >= 4  # dist, age_tree (2 columns), the two 1-attribute views...


def test_decode_array_parameters():
    assert decode_param(b'{r,p,""}', 1009, 0) == ["r", "p", ""]
    assert decode_param(b'{1,2,NULL}', 1007, 0) == [1, 2, None]
    assert decode_param(b'{"a,b","c\\"d"}', 1009, 0) == ["a,b", 'c"d']
    assert decode_param(b"{}", 1009, 0) == []
    binary = struct.pack("!iiiii", 1, 0, 23, 2, 1) + struct.pack("!ii", 4, 7) + \
        struct.pack("!ii", 4, 9)
    assert decode_param(binary, 1007, 1) == [7, 9]
    with pytest.raises(dpsql.DataError, match="one-dimensional"):
        decode_param(b"{{1,2},{3,4}}", 1007, 0)
    with pytest.raises(dpsql.DataError, match="not an array literal"):
        decode_param(b"r,p", 1009, 0)
    # dates and timestamps as typed values (psycopg's list of dates), out-of-range binary
    # ones a DataError (they raised OverflowError from the decoder)
    import datetime as dt
    assert decode_param(b"{2013-01-03,NULL}", 1182, 0) == [dt.date(2013, 1, 3), None]
    assert decode_param(b'{"2013-01-03 05:30:00"}', 1115, 0) == [dt.datetime(2013, 1, 3, 5, 30)]
    with pytest.raises(dpsql.DataError, match="not a valid date"):
        decode_param(b"{2013-13-03}", 1182, 0)
    with pytest.raises(dpsql.DataError, match="outside the years 1 to 9999"):
        decode_param(struct.pack("!i", 10 ** 9), 1082, 1)
    with pytest.raises(dpsql.DataError, match="outside the years 1 to 9999"):
        decode_param(struct.pack("!q", 10 ** 18), 1114, 1)


def test_inspect_columns(trips_release, capsys):
    assert main(["inspect", str(trips_release), "--columns"]) == 0
    out = re.sub(r"[│\s]+", " ", capsys.readouterr().out)  # cells wrap on narrow terminals
    assert "columns" in out
    assert "6 values: car, train, bus, bike, walk, plane" in out
    assert "0, 4, 8, …, 252, 256 (64 bins of width 4)" in out
    assert "60 values: " in out and "(+52 more)" in out
    assert main(["inspect", str(trips_release)]) == 0
    assert "bins of width" not in capsys.readouterr().out  # only with --columns


def test_calendar_attributes_are_described_by_their_dates(tmp_path, capsys):
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    con = duckdb.connect()
    con.execute("COPY (SELECT DATE '2013-01-01' + INTERVAL (i % 365) DAY AS day, "
                "TIMESTAMP '2013-01-01' + INTERVAL (i % 160) HOUR AS ts FROM range(500) t(i)) "
                f"TO '{tmp_path / 'x.parquet'}'")
    con.close()
    spec = {"name": "ev", "source": "x.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"day": {"kind": "range", "type": "date", "lower": "2013-01-01",
                                   "upper": "2014-01-01", "unit": "month"},
                           "ts": {"kind": "range", "type": "timestamp",
                                  "lower": "2013-01-01 00:00:00",
                                  "upper": "2013-01-08 00:00:00", "unit": "hour"}},
            "views": [{"name": "by_day", "levels": ["day"], "mechanism": "gaussian_tree"},
                      {"name": "by_ts", "levels": ["ts"], "mechanism": "gaussian_tree"}]}
    out = tmp_path / "ev.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), out, seed=1, progress=False)
    with dpsql.connect(out) as c:
        assert [r[:2] for r in c.execute("DESCRIBE ev").fetchall()] == [
            ("day", "DATE"), ("ts", "TIMESTAMP"), ("dp_count", "DOUBLE")]
        comments = dict(c.execute("SELECT column_name, comment FROM duckdb_columns() WHERE "
                                  "table_name = 'ev'").fetchall())
    assert comments["day"] == ("binned date attribute: 12 bins by month over [2013-01-01, "
                               "2014-01-01); filter with ranges")
    assert comments["ts"].startswith("binned timestamp attribute: 168 bins by hour over "
                                     "[2013-01-01 00:00:00, 2013-01-08 00:00:00)")
    assert main(["inspect", str(out), "--columns"]) == 0
    shown = re.sub(r"[│\s]+", " ", capsys.readouterr().out)  # cells wrap on narrow terminals
    assert "2013-01-01, 2013-02-01, 2013-03-01, …" in shown and "(12 bins by month)" in shown


def test_psql_describe_verbose_reads_as_postgresql(server):
    """psql's ``\\d+`` and ``\\dt+``: the access method is heap (it said "art", DuckDB's
    index type), storage plain or extended and the replica identity default (both
    printed "???"), the stats target empty (it said 0)."""
    from tests.bi.test_serve import _psql

    path = shutil.which("psql")
    if path is None:
        pytest.skip("psql not found (Debian postgresql-client)")
    out = _psql(path, server, r"\d+ trips")
    assert "Access method: heap" in out and "???" not in out and "art" not in out
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")]
            for line in out.splitlines() if "|" in line}
    assert rows["mode"][5] == "extended" and rows["distance"][5] == "plain"
    assert rows["distance"][7] == ""  # stats target
    assert "| heap " in _psql(path, server, r"\dt+ trips")
