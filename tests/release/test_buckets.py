"""Bounded-memory counting with a unit column: units split into buckets by their salted
hash give exactly the counts of one pass; the bounding key matches its written
definition; DuckDB's resources come from the spec or the CLI; running out of memory or of
disk says which setting to change."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.cli import main
from dpsql.engine_settings import EngineSettings, parse_engine, size_bytes
from dpsql.errors import DataError, OperationalError, SpecError
from dpsql.release import bounding, build_release, counts
from dpsql.release.duckdb_settings import configure, engine_error, memory_limit
from dpsql.release.ingest import ingest
from dpsql.spec import ReleaseSpec

from bounding_paths import bounding_path  # noqa: F401  (a fixture)



def _table(seed: int, ids: str) -> pa.Table:
    g = np.random.default_rng(seed)
    n_units = 400
    sizes = g.integers(1, 30, n_units)
    unit = np.repeat(np.arange(n_units), sizes)
    g.shuffle(unit)
    if ids == "string":
        uid = pa.array([f"person-{u}" for u in unit], mask=unit == 7)
    else:
        uid = pa.array(unit * 1_000_003 - 5_000_000, mask=unit == 7)
    return pa.table({"uid": uid, "mode": g.choice(["car", "bus", "walk"], unit.size),
                     "distance": g.uniform(0, 10, unit.size)})


def _spec(base: Path, max_rows: int = 3, **extra) -> ReleaseSpec:
    return ReleaseSpec.from_dict({
        "name": "b", "source": "t.parquet", "neighbouring": "add_remove", "budget": {"rho": 1},
        "privacy_unit": {"column": "uid", "max_rows": max_rows, "on_null": "drop"},
        "attributes": {"mode": {"kind": "categorical", "domain": ["car", "bus", "walk"]},
                       "distance": {"kind": "range", "lower": 0, "upper": 10, "bins": 10}},
        "views": [{"name": "md", "levels": ["mode", "distance"]},
                  {"name": "d", "levels": ["distance"]}], **extra}, base_dir=base)


def _leaves(spec: ReleaseSpec, salt: int) -> tuple[list, int]:
    con = duckdb.connect()
    report = ingest(spec, con, salt=salt)
    rows = con.execute("SELECT * FROM dpsql_leaves ORDER BY ALL").fetchall()
    return rows, report.rows_used


@pytest.mark.parametrize("ids", ["integer", "string"])
@pytest.mark.parametrize("k", [2, 7])
def test_buckets_give_exactly_the_counts_of_one_pass(tmp_path, monkeypatch, ids, k,
                                                     bounding_path):  # noqa: F811
    pq.write_table(_table(3, ids), tmp_path / "t.parquet")
    spec = _spec(tmp_path)
    for salt in (5, 2**62 - 3):
        monkeypatch.setattr(counts, "bucket_count", lambda rows, limit: 1)
        one, used_one = _leaves(spec, salt)
        monkeypatch.setattr(counts, "bucket_count", lambda rows, limit: k)
        split, used_split = _leaves(spec, salt)
        assert split == one and used_split == used_one
    assert used_one < 400 * 29  # bounding did drop rows


def test_bucket_count_is_sized_from_rows_and_memory_limit():
    assert counts.bucket_count(1_000, 4 * 10**9) == 1
    # 150M rows at about 120 bytes each under a 4 GB limit: a third of it per bucket.
    k = counts.bucket_count(150_000_000, 4 * 10**9)
    assert k == -(-150_000_000 * counts.BYTES_PER_ROW // (4 * 10**9 // 3))
    assert 150_000_000 * counts.BYTES_PER_ROW / k <= 4 * 10**9 / 3
    assert counts.bucket_count(10**12, 64 * 2**20) == counts.MAX_BUCKETS


def test_a_memory_limit_splits_a_large_count_into_buckets(tmp_path):
    # The real sizing: at a 64 MiB limit, 400k rows make several buckets, and the counts
    # are those of one pass at the default limit (same salt).
    g = np.random.default_rng(1)
    unit = g.integers(0, 50_000, 400_000)
    pq.write_table(pa.table({"uid": unit, "mode": g.choice(["car", "bus", "walk"], unit.size),
                             "distance": g.uniform(0, 10, unit.size)}), tmp_path / "t.parquet")
    assert counts.bucket_count(400_000, 64 * 2**20) > 1
    small = _spec(tmp_path, engine={"memory_limit": "64MiB", "threads": 1})
    con = duckdb.connect()
    configure(con, small.engine)
    assert memory_limit(con) == 64 * 2**20
    ingest(small, con, salt=9)
    got = con.execute("SELECT * FROM dpsql_leaves ORDER BY ALL").fetchall()
    assert got == _leaves(_spec(tmp_path), 9)[0]


@pytest.mark.parametrize("column,sql_type", [
    (pa.array([3, -1, 2**40, None, 3], type=pa.int64()), "BIGINT"),
    (pa.array([3, -1, 70000, None, 3], type=pa.int32()), "INTEGER"),
    (pa.array(["ana", "bo", "", None, "ana"]), "VARCHAR"),
])
def test_duckdb_computes_the_key_as_defined(column, sql_type):
    con = duckdb.connect()
    payload = np.array([0, 5, 2**40 + 1, 7, 0], dtype=np.uint64)
    occ = np.array([0, 0, 3, 1, 1], dtype=np.uint64)
    con.register("t", pa.table({"dpsql_unit": column, "p": payload, "o": occ}))
    salt = 2**61 + 12345
    s = bounding.duckdb_salted(bounding.duckdb_unit_hash("dpsql_unit", sql_type), salt)
    got = [r[0] for r in con.execute(
        f"SELECT {bounding.duckdb_key(s, 'p', 'o')} FROM t").fetchall()]
    want = bounding.reference_keys(column.to_pylist(), payload, occ, salt)
    assert got == [int(x) for x in want]


def test_a_chained_payload_is_the_mix_of_the_codes():
    con = duckdb.connect()
    got = con.execute(f"SELECT {bounding.duckdb_chained_payload(['a', 'b'])} "
                      "FROM (SELECT 3 AS a, 9 AS b)").fetchall()[0][0]
    want = bounding.mix64(bounding.mix64(np.uint64(3)) ^ np.uint64(9))
    assert got == int(want)


# --------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------

def test_engine_settings_in_the_spec(tmp_path):
    assert _spec(tmp_path).engine == EngineSettings()
    assert _spec(tmp_path, engine="spark").engine.name == "spark"
    got = _spec(tmp_path, engine={"memory_limit": "2GB", "threads": 2,
                                  "temp_directory": "/tmp/x"}).engine
    assert got == EngineSettings("duckdb", "2GB", 2, "/tmp/x")
    assert "engine" not in _spec(tmp_path, engine="spark").to_dict()  # never stored
    assert size_bytes("1.5GiB") == int(1.5 * 2**30) and size_bytes("512MB") == 512 * 10**6


@pytest.mark.parametrize("raw,message", [
    ("flink", "engine.name: unknown engine 'flink'; allowed: duckdb, spark"),
    ({"memory": "4GB"}, "engine.memory: unknown key; allowed: name, memory_limit"),
    ({"memory_limit": "lots"}, "engine.memory_limit: 'lots' is not a size"),
    ({"memory_limit": 4}, "engine.memory_limit: must be a size string"),
    ({"memory_limit": "1MB"}, "engine.memory_limit: '1MB' is below 64MiB"),
    ({"threads": 0}, "engine.threads: must be an integer >= 1, got 0"),
    ({"threads": True}, "engine.threads: must be an integer >= 1"),
    ({"temp_directory": ""}, "engine.temp_directory: must be a directory path"),
    ({"master": "local[2]"}, "engine.master: is a Spark setting; set name = \"spark\""),
    (3, "engine: must be \"duckdb\", \"spark\" or a table"),
])
def test_bad_engine_settings_name_the_key(tmp_path, raw, message):
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, engine=raw)
    assert message in str(err.value)
    assert parse_engine(None) == EngineSettings()


def test_cli_options_override_the_spec(tmp_path, capsys):
    pq.write_table(_table(1, "integer"), tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text(
        'name = "b"\nsource = "t.parquet"\nneighbouring = "add_remove"\n'
        '[engine]\nmemory_limit = "64GB"\n[budget]\nrho = 1\n'
        '[privacy_unit]\ncolumn = "uid"\nmax_rows = 3\non_null = "drop"\n'
        '[attributes.mode]\nkind = "categorical"\ndomain = ["car", "bus", "walk"]\n'
        '[[views]]\nname = "m"\nlevels = ["mode"]\n')
    out = tmp_path / "r.duckdb"
    assert main(["release", str(tmp_path / "s.toml"), "-o", str(out), "--seed", "1", "-q",
                 "--memory-limit", "256MB", "--threads", "1",
                 "--temp-dir", str(tmp_path / "spill")]) == 0
    assert out.exists()
    assert main(["release", str(tmp_path / "s.toml"), "-o", str(out), "-q",
                 "--threads", "0"]) == 1
    assert "engine (command line).threads: must be an integer >= 1, got 0" in \
        capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Out of memory, out of disk
# --------------------------------------------------------------------------------------

def _exhaust(con: duckdb.DuckDBPyConnection) -> duckdb.Error:
    con.execute("SET threads = 1")
    try:
        con.execute("SELECT count(*) FROM (SELECT u, list(v) FROM (SELECT range % 1000003 "
                    "AS u, range AS v FROM range(3000000)) GROUP BY u)").fetchall()
    except duckdb.Error as err:
        return err
    raise AssertionError("DuckDB did not run out")


def test_out_of_memory_names_the_memory_limit():
    con = duckdb.connect()
    con.execute("SET memory_limit = '20MB'")
    con.execute("SET temp_directory = ''")
    err = engine_error(_exhaust(con), con)
    assert isinstance(err, OperationalError) and not isinstance(err, DataError)
    assert str(err).startswith("DuckDB ran out of memory while counting (memory_limit = ")
    assert "raise engine.memory_limit (--memory-limit)" in str(err)
    assert "\n" not in str(err)


def test_a_full_temporary_disk_names_the_temp_directory(tmp_path):
    con = duckdb.connect()
    con.execute("SET memory_limit = '20MB'")
    con.execute(f"SET temp_directory = '{tmp_path}'")
    con.execute("SET max_temp_directory_size = '1MB'")  # a disk of 1 MB
    err = engine_error(_exhaust(con), con)
    assert isinstance(err, OperationalError)
    assert str(err).startswith(f"the disk under the temporary directory ({tmp_path}) is full")
    assert "set engine.temp_directory (--temp-dir)" in str(err) and "\n" not in str(err)


def test_ingest_reports_running_out_of_memory_as_such(tmp_path):
    g = np.random.default_rng(2)
    n = 2_000_000
    pq.write_table(pa.table({"uid": np.arange(n), "mode": g.choice(["car", "bus"], n),
                             "distance": g.uniform(0, 10, n)}), tmp_path / "t.parquet")
    spec = _spec(tmp_path)
    con = duckdb.connect()
    con.execute("SET memory_limit = '24MB'")
    con.execute("SET temp_directory = ''")  # nowhere to spill
    con.execute("SET threads = 1")
    with pytest.raises(OperationalError, match="DuckDB ran out of memory while counting"):
        ingest(spec, con, salt=1)


def test_build_applies_the_settings(tmp_path):
    pq.write_table(_table(2, "string"), tmp_path / "t.parquet")
    spec = _spec(tmp_path, engine={"memory_limit": "300MB", "threads": 1,
                                   "temp_directory": str(tmp_path / "spill")})
    release = build_release(spec, tmp_path / "r.duckdb", seed=3, progress=False)
    assert release.report.rows_used > 0
