"""An attribute that no view uses still defines the population through its row-dropping
policies: rows outside its public domain (``on_out_of_domain = "drop"``) or bounds
(``on_out_of_bounds = "drop"``) leave every view, as they do for an attribute a view
uses. Its ``on_null = "drop"`` leaves the views over it only, and there are none, so its
NULL rows stay (docs/spec.md, "NULLs").

End to end on the exact path (ρ = 1e6, InfTDA: no noise): a real source (a DuckDB file, a
parquet file, a CSV file), a real build, SQL in, counts out, each equal to plain DuckDB
over the raw table restricted by the spec's public rules (STYLE §5a).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

N = 2400
UNITS = 800  # uid = i % UNITS: three rows per unit
DESTS = ["BOS", "ATL", "ORD"]  # the public list; the source also has SJU and STT
SPINE = [["NE", "BOS"], ["NE", "NYC"], ["SE", "ATL"], ["MW", "ORD"]]

# The raw table, seeded: every kind of trouble in the attributes no view uses.
RAW = f"""SELECT i AS id, i % {UNITS} AS uid,
    ['EWR', 'JFK', 'LGA'][i % 3 + 1] AS origin,
    CAST((i * 7919) % 5000 AS DOUBLE) AS distance,
    CASE WHEN i % 31 = 0 THEN NULL
         ELSE ['BOS', 'ATL', 'ORD', 'SJU', 'STT', 'BOS', 'ATL'][(i * 13) % 7 + 1] END AS dest,
    CASE WHEN i % 29 = 0 THEN NULL WHEN i % 41 = 0 THEN 'nan'::DOUBLE
         ELSE CAST((i * 104729) % 1700 AS DOUBLE) - 100 END AS delay,
    CASE WHEN i % 23 = 0 THEN NULL ELSE ['NE', 'SE', 'MW', 'NE'][(i * 5) % 4 + 1] END
        AS region,
    ['BOS', 'ATL', 'ORD', 'NYC', 'XXX'][(i * 3) % 5 + 1] AS city,
    CASE WHEN i % 7 = 0 THEN NULL ELSE 'N' || (i % 9) END AS tail,
    DATE '2013-01-01' + CAST((i * 37) % 400 - 20 AS INTEGER) AS day
    FROM range({N}) t(i)"""

# The population the spec's public rules define (NULLs are not out of any domain; NaN is
# out of bounds, and DuckDB orders it above every number).
POPULATION = """SELECT * FROM raw WHERE (dest IS NULL OR dest IN ('BOS', 'ATL', 'ORD'))
    AND (delay IS NULL OR (delay >= -60 AND delay < 1440))
    AND (region IS NULL OR (region, city) IN
         (('NE', 'BOS'), ('NE', 'NYC'), ('SE', 'ATL'), ('MW', 'ORD')))
    AND day >= DATE '2013-01-01' AND day < DATE '2014-01-01'"""


def _write_source(base: Path, kind: str) -> str:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE raw AS {RAW}")
    if kind == "duckdb":
        con.execute(f"ATTACH '{base / 'src.duckdb'}' AS src")
        con.execute("CREATE TABLE src.flights AS SELECT * FROM raw")
        source = "duckdb:src.duckdb:flights"
    else:
        con.execute(f"COPY raw TO '{base / f'flights.{kind}'}' (FORMAT {kind})")
        source = f"flights.{kind}"
    con.close()
    return source


def _spec(base: Path, source: str, unit: bool, views: list[dict], **dest) -> ReleaseSpec:
    data = {
        "name": "flights", "source": source, "neighbouring": "add_remove",
        "budget": {"rho": 1e6},
        "attributes": {
            "origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
            "distance": {"kind": "range", "lower": 0, "upper": 5000, "bins": 50},
            "dest": {"kind": "categorical", "domain": DESTS, "on_null": "category",
                     "on_out_of_domain": "drop", **dest},
            "delay": {"kind": "range", "lower": -60, "upper": 1440, "bins": 15,
                      "on_out_of_bounds": "drop", "on_null": "drop"},
            "geo": {"kind": "hierarchy", "columns": ["region", "city"], "spine": SPINE,
                    "on_out_of_domain": "drop", "on_null": "drop"},
            "tail": {"kind": "categorical", "domain": [f"N{k}" for k in range(9)],
                     "on_null": "drop"},
            "day": {"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01",
                    "unit": "day", "on_out_of_bounds": "drop"},
        },
        "views": views,
    }
    if unit:
        data["privacy_unit"] = {"column": "uid", "max_rows": 3}
    return ReleaseSpec.from_dict(data, base_dir=base)


VIEWS = [{"name": "o", "levels": ["origin"]},
         {"name": "od", "levels": ["origin", "distance"]}]


def _answers(path: Path, sql: str) -> list[tuple]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        con = dpsql.connect(path)
    try:
        cur = con.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        con.close()


def _oracle(sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE raw AS {RAW}")
    con.execute(f"CREATE VIEW population AS {POPULATION}")
    return [tuple(r) for r in con.execute(sql).fetchall()]


@pytest.mark.parametrize("unit", [False, True], ids=["rows", "unit_column"])
@pytest.mark.parametrize("kind", ["duckdb", "parquet", "csv"])
def test_count_star_is_the_population_the_policies_define(tmp_path, kind, unit):
    spec = _spec(tmp_path, _write_source(tmp_path, kind), unit, VIEWS)
    release = build_release(spec, tmp_path / "r.duckdb", seed=3, progress=False)
    (total,), = _oracle("SELECT count(*) FROM population")
    (everything,), = _oracle("SELECT count(*) FROM raw")
    assert 0 < total < everything - 300  # the unused attributes drop hundreds of rows
    report = release.report
    assert (report.rows_read, report.rows_used) == (everything, total)
    for sql in ("SELECT COUNT(*) FROM flights", "SELECT COUNT(*) FROM o",
                "SELECT COUNT(*) FROM od"):
        assert _answers(tmp_path / "r.duckdb", sql) == [(total,)], sql
    got = _answers(tmp_path / "r.duckdb", "SELECT origin, COUNT(*) FROM flights "
                                          "GROUP BY origin ORDER BY origin")
    assert got == _oracle("SELECT origin, count(*) FROM population GROUP BY origin "
                          "ORDER BY origin")
    # what each unused attribute dropped, told to the curator (and never stored)
    actions = {(a, what): rows for a, what, rows in report.actions}
    for attr, what, bad in [
            ("dest", "dropped (out of domain)", "dest NOT IN ('BOS', 'ATL', 'ORD')"),
            ("delay", "dropped (out of bounds)", "NOT (delay >= -60 AND delay < 1440)"),
            ("geo", "dropped (not in spine)", "region IS NOT NULL AND (region, city) NOT IN "
             "(('NE', 'BOS'), ('NE', 'NYC'), ('SE', 'ATL'), ('MW', 'ORD'))"),
            ("day", "dropped (out of bounds)", "day < DATE '2013-01-01' OR day >= DATE "
             "'2014-01-01'")]:
        (want,), = _oracle(f"SELECT count(*) FROM raw WHERE {bad}")
        assert actions.pop((attr, what)) == want > 0
    assert actions == {}  # no NULL line: no view drops an unused attribute's NULLs


def test_an_unused_attributes_null_drop_keeps_the_null_rows_in_every_view(tmp_path):
    # tail has on_null = "drop" and NULLs (one row in 7), but no view over it: each view
    # counts its own rows, so they all keep them, as they keep a used attribute's NULLs.
    spec = _spec(tmp_path, _write_source(tmp_path, "parquet"), False, VIEWS)
    build_release(spec, tmp_path / "r.duckdb", seed=3, progress=False)
    (with_nulls,), = _oracle("SELECT count(*) FROM population")
    (nulls,), = _oracle("SELECT count(*) FROM population WHERE tail IS NULL")
    assert nulls > 50
    assert _answers(tmp_path / "r.duckdb", "SELECT COUNT(*) FROM flights") == [(with_nulls,)]


@pytest.mark.parametrize("used", [False, True], ids=["dest_in_no_view", "dest_in_a_view"])
def test_rows_are_dropped_before_each_unit_is_bounded(tmp_path, used):
    # Each unit has one row to a public destination (from EWR) and two to SJU (from JFK);
    # max_rows = 1. The drop comes first (DESIGN: domains, then bounding), so every unit
    # keeps its one row in the population; bounding first would keep an SJU row of two
    # units in three and then drop it.
    con = duckdb.connect(str(tmp_path / "src.duckdb"))
    con.execute("CREATE TABLE flights AS SELECT i // 3 AS uid, "
                "CASE WHEN i % 3 = 0 THEN 'EWR' ELSE 'JFK' END AS origin, "
                "CASE WHEN i % 3 = 0 THEN 'BOS' ELSE 'SJU' END AS dest FROM range(3000) t(i)")
    con.close()
    views = [{"name": "o", "levels": ["origin"]}]
    if used:
        views.append({"name": "d", "levels": ["dest"]})
    data = {"name": "flights", "source": "duckdb:src.duckdb:flights",
            "neighbouring": "add_remove", "budget": {"rho": 1e6},
            "privacy_unit": {"column": "uid", "max_rows": 1},
            "attributes": {
                "origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
                "dest": {"kind": "categorical", "domain": DESTS,
                         "on_out_of_domain": "drop"}},
            "views": views}
    spec = ReleaseSpec.from_dict(data, base_dir=tmp_path)
    release = build_release(spec, tmp_path / "r.duckdb", seed=5, progress=False)
    assert release.report.rows_used == 1000
    got = _answers(tmp_path / "r.duckdb", "SELECT origin, COUNT(*) FROM o GROUP BY origin "
                                          "ORDER BY origin")
    assert got == [("EWR", 1000), ("JFK", 0), ("LGA", 0)]


def test_an_unused_attribute_with_an_error_policy_is_not_read(tmp_path):
    # Decision: an attribute in no view is read for its row-dropping policies only.
    # "error" (and "clamp", "category") act on values that no view releases, so they cost
    # no column read: dest's SJU rows are counted, as they were before.
    spec = _spec(tmp_path, _write_source(tmp_path, "parquet"), False, VIEWS,
                 on_out_of_domain="error")
    release = build_release(spec, tmp_path / "r.duckdb", seed=3, progress=False)
    (total,), = _oracle("SELECT count(*) FROM raw WHERE (delay IS NULL OR (delay >= -60 AND "
                        "delay < 1440)) AND (region IS NULL OR (region, city) IN (('NE', "
                        "'BOS'), ('NE', 'NYC'), ('SE', 'ATL'), ('MW', 'ORD'))) AND "
                        "day >= DATE '2013-01-01' AND day < DATE '2014-01-01'")
    assert release.report.rows_used == total
    assert "dest" not in {a for a, _, _ in release.report.actions}
