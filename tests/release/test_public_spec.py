"""A release names none of the curator's files: the stored spec is its public part only
(no source, no sql, no folders), and no table of the file holds the source path or the
curator's SQL. ``dpsql release`` prints where the data came from, to the curator."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from dpsql.cli import main
from dpsql.datasets import trips_spec
from dpsql.release import build_release, open_release
from dpsql.spec import ReleaseSpec

MARK = "curator_only_7d1e"


def _all_text(path) -> str:
    """Every value of every table of the release, as text, plus the file's raw bytes."""
    con = duckdb.connect(str(path), read_only=True)
    parts = []
    for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        parts.append(table)
        rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
        parts.append(repr(rows))
    for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal "
                              "UNION ALL SELECT macro_definition FROM duckdb_functions() "
                              "WHERE NOT internal AND macro_definition IS NOT NULL"
                              ).fetchall():
        parts.append(str(sql))
    con.close()
    return "\n".join(parts) + path.read_bytes().decode("latin-1")


@pytest.fixture(scope="module")
def curator_dir(tmp_path_factory, trips_data):
    d = tmp_path_factory.mktemp(f"folder_{MARK}")
    shutil.copy(trips_data / "trips.parquet", d / f"raw_{MARK}.parquet")
    shutil.copy(trips_data / "geo.csv", d / f"spine_{MARK}.csv")
    return d


def _spec(d, **source) -> ReleaseSpec:
    data = {**trips_spec(1e6, gaussian_tree=False), **source}
    data = {k: v for k, v in data.items() if v is not None}
    data["attributes"]["geo"]["spine_file"] = f"spine_{MARK}.csv"
    return ReleaseSpec.from_dict(data, base_dir=d)


@pytest.mark.parametrize("source", [
    {"source": f"raw_{MARK}.parquet"},
    {"source": None, "sql": f"SELECT * FROM read_parquet('raw_{MARK}.parquet') "
                            f"WHERE distance >= 0 /* {MARK} */"},
], ids=["source", "sql"])
def test_release_names_no_curator_file(curator_dir, tmp_path, source, monkeypatch):
    monkeypatch.chdir(curator_dir)  # the SQL's relative path reads from here
    spec = _spec(curator_dir, **source)
    out = tmp_path / "r.duckdb"
    build_release(spec, out, seed=1, progress=False)
    text = _all_text(out)
    assert "dpsql_release" in text and "geo_mode" in text  # the scan sees the tables
    assert MARK not in text
    assert str(curator_dir) not in text
    stored = open_release(out).spec
    assert not {"source", "sql", "base_dir"} & set(stored)
    assert stored["views"] and stored["attributes"]["geo"]["spine"]  # the public part


def test_cli_release_prints_the_origin(curator_dir, tmp_path, capsys):
    toml = curator_dir / "spec.toml"
    toml.write_text(f"""
name = "trips"
source = "raw_{MARK}.parquet"
neighbouring = "add_remove"

[budget]
rho = 1.0

[attributes.geo]
kind = "hierarchy"
columns = ["region", "province", "city"]
spine_file = "spine_{MARK}.csv"

[[views]]
name = "places"
levels = ["geo"]
mechanism = "inftda"
""")
    out = tmp_path / "cli.duckdb"
    assert main(["release", str(toml), "-o", str(out), "--seed", "1", "-q"]) == 0
    printed = "".join(capsys.readouterr().out.split())
    assert f"raw_{MARK}.parquet" in printed  # the curator sees where the data came from
    assert MARK not in _all_text(out)
