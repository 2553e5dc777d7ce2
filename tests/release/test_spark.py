"""``engine = "spark"``: the row-level step on Spark gives exactly DuckDB's leaf counts and
policy report, for row-unit and unit-column specs, integer and string unit ids.

One ``local[2]`` SparkSession is shared by the whole run (about 20 s to start). Without
pyspark or a Java runtime these tests skip and say which is missing."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.datasets import commutes_spec, trips_spec, write_commutes, write_trips
from dpsql.errors import DataError, SpecError
from dpsql.release import build_release
from dpsql.release.ingest import ingest
from dpsql.spec import ReleaseSpec

import test_bounding
from bounding_paths import bounding_path  # noqa: F401  (a fixture)
import test_buckets
import test_ingest

SALT = 2**61 + 987654321


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.skip("pyspark is not installed: pip install -e '.[spark]'")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime: apt-get install default-jre-headless (Java 17+)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = (SparkSession.builder.master("local[2]").appName("dpsql tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.warehouse.dir",
                           str(tmp_path_factory.mktemp("spark-warehouse")))
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _on_duckdb(spec: ReleaseSpec):
    con = duckdb.connect()
    report = ingest(spec, con, salt=SALT)
    return con.execute("SELECT * FROM dpsql_leaves ORDER BY ALL").fetchall(), report


def _on_spark(spec: ReleaseSpec, session):
    from dpsql.release.spark import SparkConnection
    rows = SparkConnection(session)
    try:
        report = ingest(spec, rows, salt=SALT)
        plans = [session.table(v)._jdf.queryExecution().toString() for v in
                 ("dpsql_rows", "dpsql_leaves") if session.catalog.tableExists(v)]
        con = duckdb.connect()
        con.register("leaves", rows.leaves_arrow())
        leaves = con.execute("SELECT * FROM leaves ORDER BY ALL").fetchall()
    finally:
        rows.close()
    assert not any(str(SALT) in p or hex(SALT)[2:] in p for p in plans)  # never in a plan
    return leaves, report


def _trips(base: Path, unit: bool) -> ReleaseSpec:
    write_trips(base, 3000, seed=5)
    data = trips_spec(1.0)
    if unit:
        pq.write_table(pq.read_table(base / "trips.parquet").append_column(
            "person", pa.array(np.random.default_rng(1).integers(0, 700, 3000))),
            base / "trips.parquet")
        data["privacy_unit"] = {"column": "person", "max_rows": 2}
    return ReleaseSpec.from_dict(data, base_dir=base)


def _messy(base: Path, unit: bool, dist: str) -> ReleaseSpec:
    table = test_ingest._messy(2000, 11, nan=dist != "clamp")  # NaN cannot be clamped
    if unit:  # many rows per unit: bounding drops some
        table = table.set_column(0, "uid", pa.array(np.arange(2000) % 300))
    pq.write_table(table, base / "t.parquet")
    return test_ingest._spec(base, unit, dist=dist)


def _unused(base: Path, unit: bool) -> ReleaseSpec:
    """Attributes in no view that drop rows outside their domain (mode) and bounds
    (distance): every view loses those rows, on either engine."""
    table = test_ingest._messy(2000, 12)
    if unit:
        table = table.set_column(0, "uid", pa.array(np.arange(2000) % 300))
    pq.write_table(table, base / "t.parquet")
    return test_ingest._spec(base, unit, views=[{"name": "g", "levels": ["geo"]}])


def _bounded(base: Path, max_rows: int) -> ReleaseSpec:
    table, sizes = test_bounding._units_table(seed=2, n_units=60)  # a NULL unit too
    pq.write_table(table, base / "t.parquet")
    return test_bounding._spec(base, len(sizes), max_rows)


def _string_ids(base: Path, ids: str) -> ReleaseSpec:
    pq.write_table(test_buckets._table(4, ids), base / "t.parquet")
    return test_buckets._spec(base, max_rows=3)


def _commutes(base: Path) -> ReleaseSpec:
    write_commutes(base, 4000, seed=3, n_regions=3, n_provinces=6, n_munis=30, n_pairs=200)
    return ReleaseSpec.from_dict(commutes_spec(1.0), base_dir=base)


def _typed(base: Path, unit: bool) -> ReleaseSpec:
    """Value types (integer, exact decimals, dates by week) and per-attribute NULL policies:
    NULL categories (a range's NULL node, a categorical's NULL value), NULLs dropped from the
    views over one attribute only, and out-of-bounds values on both sides of every range."""
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT i % 97 AS uid,
        CASE WHEN i % 11 = 0 THEN NULL ELSE (i % 130) - 10 END::INTEGER AS age,
        CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 37) % 1300) / 100 - 1 END::DECIMAL(6,2)
            AS fare,
        DATE '2013-01-01' + CAST(i % 400 - 20 AS INTEGER) AS day,
        CASE WHEN i % 7 = 0 THEN NULL ELSE ['car', 'bus', 'walk'][i % 3 + 1] END AS mode
        FROM range(3000) t(i)) TO '{base / "t.parquet"}'""")
    data = {"name": "typed", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1},
            "attributes": {
                "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 20,
                        "on_null": "category", "on_out_of_bounds": "clamp"},
                "fare": {"kind": "range", "lower": 0, "upper": 10, "bins": 100,
                         "type": "decimal", "resolution": 0.01, "on_null": "drop",
                         "on_out_of_bounds": "drop"},
                "day": {"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01",
                        "width": 7, "type": "date", "on_out_of_bounds": "drop"},
                "mode": {"kind": "categorical", "domain": ["car", "bus", "walk"],
                         "on_null": "category"}},
            "views": [{"name": "a", "levels": ["mode", "age"]},
                      {"name": "f", "levels": ["fare"]}, {"name": "d", "levels": ["day"]}]}
    if unit:
        data["privacy_unit"] = {"column": "uid", "max_rows": 20}
    return ReleaseSpec.from_dict(data, base_dir=base)


def _commutes_null_branch(base: Path) -> ReleaseSpec:
    """A hierarchy's NULL branch (on_null = "category"): some home rows have no place."""
    write_commutes(base, 3000, seed=4, n_regions=3, n_provinces=6, n_munis=30, n_pairs=150)
    table = pq.read_table(base / "commutes.parquet")
    for col in ("home_region", "home_province", "home_municipality"):
        i = table.column_names.index(col)
        values = table.column(col).to_pylist()
        table = table.set_column(i, col, pa.array(
            [None if k % 9 == 0 else v for k, v in enumerate(values)], type=pa.string()))
    pq.write_table(table, base / "commutes.parquet")
    data = commutes_spec(1.0)
    data["attributes"]["home"]["on_null"] = "category"
    return ReleaseSpec.from_dict(data, base_dir=base)


SPECS = {
    "trips_rows": lambda b: _trips(b, unit=False),
    "trips_unit_column": lambda b: _trips(b, unit=True),
    "messy_rows_drop": lambda b: _messy(b, unit=False, dist="drop"),
    "messy_unit_clamp": lambda b: _messy(b, unit=True, dist="clamp"),
    "unused_attributes_drop_rows": lambda b: _unused(b, unit=False),
    "unused_attributes_drop_unit_column": lambda b: _unused(b, unit=True),
    "bounding_null_unit_m2": lambda b: _bounded(b, 2),
    "integer_ids_m3": lambda b: _string_ids(b, "integer"),
    "string_ids_m3": lambda b: _string_ids(b, "string"),
    "commutes_od": _commutes,
    "commutes_null_branch": _commutes_null_branch,
    "typed_nulls_rows": lambda b: _typed(b, unit=False),
    "typed_nulls_unit_column": lambda b: _typed(b, unit=True),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_spark_counts_exactly_what_duckdb_counts(tmp_path, spark, name):
    spec = SPECS[name](tmp_path)
    want, want_report = _on_duckdb(spec)
    got, got_report = _on_spark(spec, spark)
    assert got == want
    assert (got_report.rows_read, got_report.rows_used, got_report.actions) == \
        (want_report.rows_read, want_report.rows_used, want_report.actions)


def test_a_bounded_spec_forced_through_every_code_carrier(tmp_path, spark,
                                                         bounding_path):  # noqa: F811
    spec = _bounded(tmp_path, 3)
    assert _on_spark(spec, spark)[0] == _on_duckdb(spec)[0]


def test_spark_refuses_what_duckdb_refuses_with_the_same_message(tmp_path, spark):
    pq.write_table(test_ingest._messy(500, 2), tmp_path / "t.parquet")
    spec = test_ingest._spec(tmp_path, unit=False, mode="error")
    with pytest.raises(DataError) as duck_err:
        _on_duckdb(spec)
    with pytest.raises(DataError) as spark_err:
        _on_spark(spec, spark)
    assert str(spark_err.value) == str(duck_err.value)
    assert "outside its public domain" in str(duck_err.value)


def test_a_release_built_on_spark_is_the_release_built_on_duckdb(tmp_path, spark):
    spec = _string_ids(tmp_path, "string")
    a = build_release(spec, tmp_path / "duck.duckdb", seed=4, progress=False)
    b = build_release(spec, tmp_path / "spark.duckdb", seed=4, progress=False, spark=spark)
    assert a.report.actions == b.report.actions
    con = duckdb.connect()
    con.execute(f"ATTACH '{tmp_path / 'duck.duckdb'}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{tmp_path / 'spark.duckdb'}' AS b (READ_ONLY)")
    for view in a.views.values():
        for level in view.levels:
            assert con.execute(f'SELECT * FROM a."{level.table}" ORDER BY ALL').fetchall() == \
                con.execute(f'SELECT * FROM b."{level.table}" ORDER BY ALL').fetchall()


def test_a_duckdb_file_source_is_refused_on_spark(tmp_path, spark):
    con = duckdb.connect(str(tmp_path / "src.duckdb"))
    con.execute("CREATE TABLE t AS SELECT 'car' AS mode")
    con.close()
    spec = ReleaseSpec.from_dict({
        "name": "d", "source": "duckdb:src.duckdb:t", "neighbouring": "add_remove",
        "budget": {"rho": 1}, "engine": "spark",
        "attributes": {"mode": {"kind": "categorical", "domain": ["car"]}},
        "views": [{"name": "m", "levels": ["mode"]}]}, base_dir=tmp_path)
    with pytest.raises(SpecError, match="sources are read by DuckDB only"):
        build_release(spec, tmp_path / "r.duckdb", seed=1, progress=False, spark=spark)


def test_dpsql_release_engine_spark_runs_on_the_active_session(tmp_path, spark):
    from dpsql.cli import main
    pq.write_table(test_buckets._table(6, "string"), tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text(
        'name = "b"\nsource = "t.parquet"\nneighbouring = "add_remove"\n[budget]\nrho = 1\n'
        '[privacy_unit]\ncolumn = "uid"\nmax_rows = 3\non_null = "drop"\n'
        '[attributes.mode]\nkind = "categorical"\ndomain = ["car", "bus", "walk"]\n'
        '[[views]]\nname = "m"\nlevels = ["mode"]\n')
    for engine in ("duckdb", "spark"):
        assert main(["release", str(tmp_path / "s.toml"), "-o", str(tmp_path / f"{engine}.db"),
                     "--seed", "2", "-q", "--engine", engine]) == 0
    got = [duckdb.connect(str(tmp_path / f"{e}.db"), read_only=True).execute(
        "SELECT * FROM m__l1 ORDER BY ALL").fetchall() for e in ("duckdb", "spark")]
    assert got[0] == got[1] and got[0]


def test_a_sql_source_runs_as_spark_sql_over_the_sessions_tables(tmp_path, spark):
    table = test_buckets._table(8, "integer")
    pq.write_table(table, tmp_path / "t.parquet")
    spark.read.parquet(str(tmp_path / "t.parquet")).createOrReplaceTempView("trips_on_spark")
    from_file = test_buckets._spec(tmp_path)
    data = {**from_file.to_dict(), "sql": "SELECT `uid`, mode, distance FROM trips_on_spark"}
    del data["source"]
    from_table = ReleaseSpec.from_dict(data, base_dir=tmp_path)
    try:
        assert _on_spark(from_table, spark)[0] == _on_duckdb(from_file)[0]
    finally:
        spark.catalog.dropTempView("trips_on_spark")


@pytest.mark.parametrize("attr,what", [
    ({"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01", "unit": "month",
      "type": "date"}, "calendar-month bins"),
    ({"kind": "range", "lower": "2013-01-01 00:00:00", "upper": "2013-01-02 00:00:00",
      "unit": "hour", "type": "timestamp"}, "a timestamp attribute")])
def test_what_spark_does_not_bin_yet_is_refused_in_one_line(tmp_path, spark, attr, what):
    con = duckdb.connect()
    con.execute(f"COPY (SELECT TIMESTAMP '2013-01-01 10:00:00' + INTERVAL (i) MINUTE AS t "
                f"FROM range(50) r(i)) TO '{tmp_path / 't.parquet'}'")
    if attr["type"] == "date":
        con.execute(f"COPY (SELECT CAST(t AS DATE) AS t FROM '{tmp_path / 't.parquet'}') "
                    f"TO '{tmp_path / 'd.parquet'}'")
    spec = ReleaseSpec.from_dict({
        "name": "c", "source": "d.parquet" if attr["type"] == "date" else "t.parquet",
        "neighbouring": "add_remove", "budget": {"rho": 1},
        "attributes": {"t": attr}, "views": [{"name": "v", "levels": ["t"]}]},
        base_dir=tmp_path)
    _on_duckdb(spec)  # DuckDB releases it
    with pytest.raises(SpecError, match=f"attributes.t: engine = \"spark\" does not "
                                        f"release {what} yet"):
        _on_spark(spec, spark)
