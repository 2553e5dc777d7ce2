"""Integer spine and categorical columns keep an integer type, end to end.

A release over integer source columns: a spine read from a CSV (``precinct``, ``beat``:
text values of INTEGER columns, with a NULL branch), a ``domain_file`` categorical over
a SMALLINT column (``shift``), a quoted categorical over a VARCHAR column whose values
look like numbers (``zone``: stays text, as in the source) and a text categorical. With
ρ = 1e6 the InfTDA counts are exact, so every answer equals DuckDB's on the raw rows.
SQL goes in through ``dpsql.attach``, ``dpsql.connect``, ``dpsql serve`` (psycopg), the
``dpsql://`` dialect and the CLI: the integer columns come back as BIGINT (int8 on the
wire, ``int`` in Python, int64 in pandas), sort as numbers, filter with ``3`` and
``'3'`` alike, and the catalog says BIGINT wherever it is asked. A release written before
(VARCHAR labels) still opens and is described as VARCHAR, consistently.
"""

from __future__ import annotations

import json
import re
import shutil

import duckdb
import psycopg
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.cli import main
from dpsql.release import build_release
from dpsql.server import serve
from dpsql.spec import ReleaseSpec

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

N = 6000
INTEGER = {"precinct", "beat", "shift"}
SPEC = {
    "name": "stops", "source": "stops.parquet", "neighbouring": "add_remove",
    "budget": {"rho": 1e6},
    "attributes": {
        "geo": {"kind": "hierarchy", "columns": ["precinct", "beat"],
                "spine_file": "beats.csv", "on_null": "category"},
        "shift": {"kind": "categorical", "domain_file": "shifts.csv"},
        "zone": {"kind": "categorical", "domain": ["7", "12", "30"]},
        "race": {"kind": "categorical", "domain": ["Black", "White", "Other"]},
        "hour": {"kind": "range", "lower": 0, "upper": 24, "width": 1},
    },
    "views": [
        {"name": "place", "levels": ["geo", "race"], "mechanism": "inftda"},
        {"name": "shifts", "levels": ["shift", "zone"], "mechanism": "inftda"},
        {"name": "geo_hour", "levels": ["geo", "hour"], "mechanism": "inftda"},
    ],
    "reconcile": False,
}
BY_PRECINCT = ("SELECT precinct, COUNT(*) AS n FROM stops WHERE precinct IS NOT NULL "
               "GROUP BY precinct ORDER BY precinct")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    base = tmp_path_factory.mktemp("stops")
    con = duckdb.connect()
    con.execute(f"""CREATE TABLE stops AS SELECT
        CASE WHEN i % 97 = 0 THEN NULL ELSE 1 + i % 12 END AS precinct,
        CASE WHEN i % 97 = 0 THEN NULL ELSE (1 + i % 12) * 10 + (i // 12) % 3 END AS beat,
        CAST(1 + i % 3 AS SMALLINT) AS shift,
        ['7', '12', '30'][1 + i % 3] AS zone,
        ['Black', 'White', 'Other'][1 + (i // 7) % 3] AS race,
        i % 24 AS hour FROM range({N}) t(i)""")
    con.execute(f"COPY stops TO '{base / 'stops.parquet'}' (FORMAT parquet)")
    (base / "beats.csv").write_text("precinct,beat\n" + "".join(
        f"{p},{p * 10 + k}\n" for p in range(1, 13) for k in range(3)))
    (base / "shifts.csv").write_text("1\n2\n3\n")
    out = base / "stops.duckdb"
    build_release(ReleaseSpec.from_dict(SPEC, base_dir=base), out, seed=5, progress=False)
    yield con, out
    con.close()


@pytest.fixture(scope="module")
def release(raw):
    return raw[1]


def truth(raw, sql: str) -> list[tuple]:
    return raw[0].execute(sql).fetchall()


@pytest.fixture(scope="module")
def con(release):
    c = dpsql.connect(release)
    yield c
    c.close()


def test_the_spine_and_the_domain_file_are_stored_as_bigint(release):
    with duckdb.connect(str(release), read_only=True) as c:
        types = {(t, col): ty for t, col, ty in c.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE "
            "column_name IN ('precinct', 'beat', 'shift', 'zone', 'race')").fetchall()}
    assert {k: v for k, v in types.items() if k[1] in INTEGER} == {
        k: "BIGINT" for k in types if k[1] in INTEGER}
    assert ("geo_hour__prefix", "beat") in types  # the prefix table's leading labels too
    assert {v for k, v in types.items() if k[1] not in INTEGER} == {"VARCHAR"}


def test_results_are_integers_in_numeric_order_through_connect(con, raw):
    cur = con.cursor().execute(BY_PRECINCT)
    assert [(d[0], d[1]) for d in cur.description] == [("precinct", "BIGINT"),
                                                      ("n", "BIGINT")]
    rows = cur.fetchall()
    assert rows == truth(raw, BY_PRECINCT)
    assert [r[0] for r in rows] == list(range(1, 13))  # not '1', '10', '11', '12', '2'
    df = con.cursor().execute(BY_PRECINCT).fetch_df()
    assert str(df["precinct"].dtype) == "int64" and df["precinct"].is_monotonic_increasing
    cur = con.cursor().execute("SELECT beat, COUNT(*) FROM stops GROUP BY beat "
                               "ORDER BY beat NULLS LAST")
    assert cur.description[0][1] == "BIGINT"
    assert cur.fetchall() == truth(raw, "SELECT beat, COUNT(*) FROM stops GROUP BY beat "
                                        "ORDER BY beat NULLS LAST")
    cur = con.cursor().execute("SELECT shift, zone, COUNT(*) FROM stops GROUP BY ALL "
                               "ORDER BY ALL")
    assert [d[1] for d in cur.description] == ["BIGINT", "VARCHAR", "BIGINT"]
    nonzero = [r for r in cur.fetchall() if r[-1]]  # every public cell is listed, zeros too
    assert nonzero == truth(raw, "SELECT shift, zone, COUNT(*) FROM stops GROUP BY ALL "
                                 "ORDER BY ALL")  # zone is text, as in the source: '12' < '7'



@pytest.mark.parametrize("where,raw_where", [
    ("precinct = 3", None), ("precinct = '3'", "precinct = 3"),
    ("precinct IN ('3', '11')", "precinct IN (3, 11)"), ("precinct IN (3, 11)", None),
    ("precinct BETWEEN 3 AND 4", None), ("precinct > '9'", "precinct > 9"),
    ("precinct <> 3", None), ("beat = 31", None), ("precinct IS NULL", None),
    ("shift = '2'", "shift = 2"), ("zone = '12'", None), ("zone > '3'", None),
    ("precinct = 3 AND hour < 12", None),  # answered from the prefix table
])
def test_filters_take_integers_and_their_text(con, raw, where, raw_where):
    sql = f"SELECT COUNT(*) FROM stops WHERE {where}"
    assert con.execute(sql).fetchall() == truth(
        raw, f"SELECT COUNT(*) FROM stops WHERE {raw_where or where}")


@pytest.mark.parametrize("where", ["precinct = 'abc'", "shift IN (1, 'x')",
                                   "precinct = '3.5'", "precinct = '3.0000000000000000001'"])
def test_a_string_that_is_not_an_integer_is_a_clear_error(con, where):
    with pytest.raises(dpsql.DataError, match=r"is not an integer, and '(precinct|shift)' is "
                                              r"an integer column \(BIGINT\); compare it "
                                              r"with an integer, e\.g\. \w+ = 3"):
        con.execute(f"SELECT COUNT(*) FROM stops WHERE {where}")


def test_an_integer_outside_the_domain_is_answered_and_noticed(con):
    cur = con.cursor()
    with pytest.warns(dpsql.dbapi.PublicDomainWarning):
        cur.execute("SELECT COUNT(*) FROM shifts WHERE shift IN (3, '13') AND zone <> '7' "
                    "AND shift <> 0")
    assert sorted(str(m) for _, m in cur.messages) == [
        "'13' is not a value of 'shift' (its public domain has 3 values), so no released "
        "row matches it; closest: 1, 2, 3",
        "0 is not a value of 'shift' (its public domain has 3 values), so no released row "
        "matches it; closest: 1, 2, 3"]
    with pytest.warns(dpsql.dbapi.PublicDomainWarning, match="closest: 10, 11, 12"):
        assert cur.execute("SELECT COUNT(*) FROM stops WHERE precinct = 99").fetchall() == [
            (0,)]


def test_attach_gives_the_same_types_and_order(release, raw):
    c = duckdb.connect()
    dpsql.attach(c, str(release), lockdown=True)
    rel = dpsql.sql(c, BY_PRECINCT)
    assert [str(t) for t in rel.types] == ["BIGINT", "BIGINT"]
    assert rel.fetchall() == truth(raw, BY_PRECINCT)
    assert [r[:2] for r in dpsql.sql(c, "DESCRIBE stops").fetchall()] == [
        ("precinct", "BIGINT"), ("beat", "BIGINT"), ("shift", "BIGINT"), ("zone", "VARCHAR"),
        ("race", "VARCHAR"), ("hour", "BIGINT"), ("dp_count", "DOUBLE")]
    c.close()


def test_the_catalog_reports_the_result_types(con):
    described = {r[0]: r[1] for r in con.execute("DESCRIBE stops").fetchall()}
    schema = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_name = 'stops'").fetchall())
    assert described == schema
    for column in ("precinct", "beat", "shift", "zone", "race"):
        cur = con.cursor().execute(f"SELECT {column}, COUNT(*) FROM stops GROUP BY {column}")
        assert cur.description[0][1] == described[column], column


def test_over_the_server_int8_in_numeric_order(release, raw):
    server = serve(release, port=0)
    try:
        _over_the_server(server, raw)
    finally:
        server.stop()


def _over_the_server(server, raw) -> None:
    with psycopg.connect(host="127.0.0.1", port=server.port, dbname=server.database,
                         user="analyst", sslmode="disable") as pg:
        cur = pg.execute(BY_PRECINCT)
        assert [c.type_code for c in cur.description] == [20, 20]  # int8
        rows = cur.fetchall()
        assert rows == truth(raw, BY_PRECINCT) and all(type(r[0]) is int for r in rows)
        assert pg.execute("SELECT COUNT(*) FROM stops WHERE precinct = %s", [3]
                          ).fetchall() == truth(raw, "SELECT COUNT(*) FROM stops "
                                                     "WHERE precinct = 3")
        assert pg.execute("SELECT COUNT(*) FROM stops WHERE precinct = %s", ["3"]
                          ).fetchall() == truth(raw, "SELECT COUNT(*) FROM stops "
                                                     "WHERE precinct = 3")
        oids = dict(pg.execute(
            "SELECT a.attname, a.atttypid FROM pg_attribute a JOIN pg_class c ON "
            "c.oid = a.attrelid WHERE c.relname = 'stops' AND a.attnum > 0").fetchall())
        assert {c: oids[c] for c in ("precinct", "beat", "shift", "zone")} == {
            "precinct": 20, "beat": 20, "shift": 20, "zone": 1043}
        types = dict(pg.execute("SELECT column_name, data_type FROM "
                                "information_schema.columns WHERE table_name = 'stops'"
                                ).fetchall())
        # PostgreSQL's type names over the server (Grafana and Metabase read them)
        assert types["precinct"] == types["shift"] == "bigint"
        with pytest.raises(psycopg.errors.DataException, match="'abc' is not an integer"):
            pg.execute("SELECT COUNT(*) FROM stops WHERE precinct = 'abc'")


def test_the_dialect_reflects_and_reads_integers(release, raw):
    import pandas as pd

    engine = sa.create_engine(f"dpsql:///{release}")
    try:
        cols = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns("stops")}
        assert isinstance(cols["precinct"], sa.BigInteger)
        assert isinstance(cols["shift"], sa.BigInteger)
        assert isinstance(cols["zone"], sa.String)
        assert isinstance(cols["hour"], sa.BigInteger)  # binned integers, as DESCRIBE says
        df = pd.read_sql(BY_PRECINCT, engine)
        assert str(df["precinct"].dtype) == "int64"
        assert list(df.itertuples(index=False, name=None)) == truth(raw, BY_PRECINCT)
        t = sa.Table("stops", sa.MetaData(), autoload_with=engine)
        q = sa.select(t.c.precinct, sa.func.count().label("n")).where(
            t.c.precinct.in_([3, 11])).group_by(t.c.precinct).order_by(t.c.precinct)
        with engine.connect() as c:
            assert [tuple(r) for r in c.execute(q)] == truth(
                raw, "SELECT precinct, COUNT(*) FROM stops WHERE precinct IN (3, 11) "
                     "GROUP BY precinct ORDER BY precinct")
    finally:
        engine.dispose()


def test_the_cli_prints_numeric_order_and_integer_json(release, raw, capsys):
    assert main(["query", str(release), BY_PRECINCT, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "precinct,n"
    assert [int(x.split(",")[0]) for x in lines[1:]] == list(range(1, 13))
    assert main(["query", str(release), BY_PRECINCT, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r[0] if isinstance(r, list) else r["precinct"] for r in out["rows"]] == \
        list(range(1, 13))
    assert main(["inspect", str(release), "--columns"]) == 0
    shown = re.sub(r"[│\s]+", " ", capsys.readouterr().out)
    assert re.search(r"precinct geo hierarchy level 1 integer 13 values: 1, 2, 3", shown)
    assert re.search(r"shift shift categorical integer 3 values: 1, 2, 3", shown)
    assert re.search(r"zone zone categorical text 3 values: 7, 12, 30", shown)


def test_a_release_written_with_text_labels_still_opens_as_text(release, raw, tmp_path):
    """What dpsql wrote before integer labels: the same format, VARCHAR label columns.
    It opens, answers, and is described as VARCHAR everywhere, as its results are."""
    old = tmp_path / "old.duckdb"
    shutil.copy(release, old)
    with duckdb.connect(str(old)) as c:
        for table, column in c.execute(
                "SELECT table_name, column_name FROM duckdb_columns() WHERE column_name "
                "IN ('precinct', 'beat')").fetchall():
            c.execute(f'ALTER TABLE "{table}" ALTER "{column}" TYPE VARCHAR')
    with dpsql.connect(old) as c:
        cur = c.cursor().execute(BY_PRECINCT)
        assert cur.description[0][1] == "VARCHAR"
        assert sorted(cur.fetchall(), key=lambda r: int(r[0])) == [
            (str(p), n) for p, n in truth(raw, BY_PRECINCT)]
        assert dict((r[0], r[1]) for r in c.execute("DESCRIBE stops").fetchall())[
            "precinct"] == "VARCHAR"
        assert c.execute("SELECT COUNT(*) FROM stops WHERE precinct = 3").fetchall() == \
            truth(raw, "SELECT COUNT(*) FROM stops WHERE precinct = 3")
