"""The release writer: typed numpy columns, one transaction, atomic replace, and the
catalog it returns equals the one read back from the file."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from dpsql.release import open_release
from dpsql.release import store


def _row(name="r"):
    return {"name": name, "created": "2026-01-01T00:00:00+00:00",
            "neighbouring": "add_remove", "privacy_unit": "one row", "max_rows": 1,
            "rng": "seeded: not private", "attributes": [],
            "spec": {"name": name, "nested": [1, 2.5, "x"]},
            "budget": {"kind": "zcdp", "rho": "1/2"}, "rho": 0.5, "epsilon": 3.2, "delta": 1e-9}


def _views():
    level = {"k": 1, "table": "v__l1", "attribute": "m", "kind": "categorical",
             "columns": ["m"], "n_nodes": 3, "span": None}
    return [{"name": n, "mechanism": "inftda", "weight": "1", "budget": {"kind": "zcdp", "rho": "1/4"},
             "attributes": ["m"], "levels": [level], "error_model": {"kind": "x"},
             "prefix_table": None, "info": {"sensitivity": 1.0}} for n in ("zeta", "alpha")]


TABLES = {"v__l1": {"m": np.array(["a", "b", "c"], dtype=object),
                    "dp_count": np.array([3, 0, 7], dtype=np.int64), "dp_var": None},
          "t_types": {"i": np.array([], dtype=np.int64), "s": np.array([], dtype=object),
                      "u": np.array([], dtype="<U3"), "f": np.array([], dtype=np.float64)}}


def test_columns_keep_their_types_even_when_empty(tmp_path):
    out = tmp_path / "r.duckdb"
    store.write_release(out, _row(), _views(), TABLES)
    con = duckdb.connect(str(out), read_only=True)
    assert [r[:2] for r in con.execute("DESCRIBE v__l1").fetchall()] == [
        ("m", "VARCHAR"), ("dp_count", "BIGINT"), ("dp_var", "DOUBLE")]
    assert con.execute("SELECT * FROM v__l1").fetchall() == [
        ("a", 3, None), ("b", 0, None), ("c", 7, None)]
    assert [r[:2] for r in con.execute("DESCRIBE t_types").fetchall()] == [
        ("i", "BIGINT"), ("s", "VARCHAR"), ("u", "VARCHAR"), ("f", "DOUBLE")]


def test_returned_catalog_equals_the_file(tmp_path):
    out = tmp_path / "r.duckdb"
    got = store.write_release(out, _row(), _views(), TABLES)
    assert got == open_release(out)
    assert list(got.views) == ["alpha", "zeta"]  # name order, as read back


def test_writes_through_the_callers_connection_and_gives_it_back(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE keep AS SELECT 42 AS x")
    store.write_release(tmp_path / "r.duckdb", _row(), _views(), TABLES, con=con)
    assert con.execute("SELECT current_database()").fetchall() == [("memory",)]
    assert con.execute("SELECT x FROM keep").fetchall() == [(42,)]
    assert con.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = "
                       "'dpsql_out'").fetchall() == [(0,)]


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "r.duckdb"
    store.write_release(out, _row("old"), _views(), TABLES)
    before = out.read_bytes()
    real = store.create_table
    calls = []

    def failing(*a, **k):
        calls.append(a[1])
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(*a, **k)

    monkeypatch.setattr(store, "create_table", failing)
    con = duckdb.connect()
    with pytest.raises(RuntimeError, match="disk full"):
        store.write_release(out, _row("new"), _views(), TABLES, con=con)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb"]
    assert open_release(out).name == "old"
    assert con.execute("SELECT current_database()").fetchall() == [("memory",)]
