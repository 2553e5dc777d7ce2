"""The BI compatibility replay: what the BI clients send, replayed against dpsql serve.

Each fixture under tests/bi/fixtures/ names its client, its version and where its SQL
came from (recorded for real here by tests/bi/record_fixtures.py: psql with its
meta-commands and tab completion, pgcli, SQLAlchemy's inspector and pandas; taken from
the public source of clients that cannot run here: Superset's chart and preview SQL,
Metabase, Grafana's PostgreSQL data source, DBeaver's navigator, pgjdbc's
DatabaseMetaData). Every statement is replayed
on a real ``dpsql serve`` through psycopg (with its parameters, over the extended
protocol, as the client sent it) and must be answered, except those the fixture marks
``"expect": "privacy_refusal"``: they must be refused with SQLSTATE 0A000 and a message
that names the form to write instead. The coverage figure (answered / statements that
are not privacy refusals) is printed and checked against the issue's target (95%); the
statements the clients' own SQL sends through the planner are replayed through the
``dpsql://`` SQLAlchemy dialect as well.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from tests.bi.test_escape import server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.json"))
TARGET = 0.95
REWRITE_WORDS = ("write ", "Write ")


def _load(path: Path) -> dict:
    data = json.loads(path.read_text())
    assert {"client", "version", "source", "statements"} <= set(data), path.name
    return data


def _param(value) -> bytes | None:  # noqa: ANN001
    """A recorded parameter as the text a client sends (lists as array literals)."""
    if value is None:
        return None
    if isinstance(value, list):
        return ("{" + ",".join("NULL" if v is None else '"' + str(v).replace(
            "\\", "\\\\").replace('"', '\\"') + '"' for v in value) + "}").encode()
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


def _oid(con, ref: dict) -> int:  # noqa: ANN001
    """A recorded oid parameter (``{"oid_of": "namespace"|"class", "name": ...}``): the
    oid of that schema or table on this server (oids differ between runs)."""
    table, column = {"namespace": ("pg_namespace", "nspname"),
                     "class": ("pg_class", "relname")}[ref["oid_of"]]
    return con.execute(f"SELECT oid FROM {table} WHERE {column} = %s",
                       [ref["name"]]).fetchall()[0][0]


def _replay(server, statements: list[dict]) -> list[tuple[dict, str | None, list]]:
    """(statement, None when answered or the error text, rows) for each statement, on one
    connection as the client had: with parameters over the extended protocol (``$n``,
    as recorded), without over the simple one; a failed transaction is rolled back, as
    the clients do."""
    out = []
    with psycopg.connect(f"host=127.0.0.1 port={server.port} dbname={server.database} "
                         "user=analyst sslmode=disable connect_timeout=10",
                         autocommit=True) as con:
        pg = con.pgconn
        for s in statements:
            sql = s["sql"].encode()
            params = [_oid(con, v) if isinstance(v, dict) else v for v in s["params"] or ()]
            res = (pg.exec_params(sql, [_param(v) for v in params])
                   if s["params"] else pg.exec_(sql))
            if res.status == psycopg.pq.ExecStatus.FATAL_ERROR:
                state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) or b""
                out.append((s, f"{state.decode()}: "
                               f"{(res.error_message or b'').decode(errors='replace')}", []))
                if pg.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    pg.exec_(b"ROLLBACK")
            else:
                out.append((s, None, [tuple(None if v is None else v.decode() for v in
                                            (res.get_value(r, c) for c in range(res.nfields)))
                                      for r in range(res.ntuples)]))
    return out


@pytest.fixture(scope="module")
def replayed(server) -> dict[str, list[tuple[dict, str | None, list]]]:
    return {p.stem: _replay(server, _load(p)["statements"]) for p in FIXTURES}


def test_every_fixture_names_its_client_version_and_source():
    assert len(FIXTURES) >= 8
    for p in FIXTURES:
        data = _load(p)
        assert data["client"] and data["version"] and len(data["source"]) > 40, p.name
        assert data["statements"], p.name


@pytest.mark.parametrize("name", [p.stem for p in FIXTURES])
def test_privacy_refusals_name_the_rewrite(replayed, name):
    for s, error, _ in replayed[name]:
        if s.get("expect") == "privacy_refusal":
            assert error is not None, f"{name}: answered {s['sql']!r}"
            assert error.startswith("0A000"), error
            assert any(w in error for w in REWRITE_WORDS), error


def coverage(replayed) -> tuple[int, int, list[str]]:
    """(answered, statements that are not privacy refusals, the failures)."""
    answered = total = 0
    failures = []
    for name, results in replayed.items():
        for s, error, _ in results:
            if s.get("expect") == "privacy_refusal":
                continue
            total += 1
            if error is None:
                answered += 1
            else:
                failures.append(f"{name}: {s['sql'][:80]!r} -> {error[:160]}")
    return answered, total, failures


def test_coverage_of_the_recorded_workload(replayed, capsys):
    answered, total, failures = coverage(replayed)
    with capsys.disabled():
        print(f"\nBI replay: {answered}/{total} non-privacy-refused statements answered "
              f"({answered / total:.1%}) over {len(replayed)} clients")
    assert answered / total >= TARGET, "\n".join(failures)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    refused = sum(s.get("expect") == "privacy_refusal" for r in replayed.values()
                  for s, _, _ in r)
    assert f"**{answered} of {total}" in readme, "README's replay figure is out of date"
    assert re.search(rf"other\s+{refused}\s", readme), "README's refusal count is out of date"


@pytest.mark.parametrize("name", ["psql", "pgcli", "sqlalchemy_pandas"])
def test_recorded_clients_are_answered_in_full(replayed, name):
    failures = [f"{s['sql'][:80]!r} -> {e}" for s, e, _ in replayed[name]
                if e is not None and s.get("expect") != "privacy_refusal"]
    assert not failures, "\n".join(failures)


def _rows(replayed, name: str, *marks: str) -> list[tuple]:
    """The rows of the first statement of fixture ``name`` whose SQL has every mark."""
    return next(rows for s, _, rows in replayed[name] if all(m in s["sql"] for m in marks))


LOGICAL = {"trips", "geo_mode", "geo_gauss", "dist", "age_tree", "mode_dist"}


def test_the_answers_list_the_logical_tables(replayed):
    """Answered is not enough: each client's table listing finds the logical tables (and
    only those), and psql's tab completion completes ``tr`` to ``trips``."""
    completion = _rows(replayed, "psql", "LIKE 'tr%'")
    assert ("trips", None) in completion
    assert _rows(replayed, "psql", "(a.attname) LIKE 'mo%'") == [("mode", None)]
    assert {r[0] for r in _rows(replayed, "psql", "LIKE 'geo\\_%'")} == {"geo_gauss",
                                                                           "geo_mode"}
    assert {r[1] for r in _rows(replayed, "psql", "c.relkind IN ('r','p','')")} == LOGICAL
    assert {r[0] for r in _rows(replayed, "psql", "FROM pg_catalog.pg_database")} == {"trips"}
    assert {r[0] for r in _rows(replayed, "psql", 'n.nspname AS "Name"')} == {"public"}
    assert {r[2] for r in _rows(replayed, "pgjdbc", "AS TABLE_TYPE")} == LOGICAL
    assert {r[3] for r in _rows(replayed, "pgjdbc", "AS TABLE_TYPE")} == {"TABLE"}
    assert {r[0] for r in _rows(replayed, "grafana", "WHERE quote_ident(table_schema) = "
                                "'public'")} == LOGICAL
    columns = _rows(replayed, "grafana", 'AS "column"')
    assert [c for c, _ in columns][:4] == ["region", "province", "city", "mode"]
    assert {r[0] for r in _rows(replayed, "grafana", 'AS "name"')} == {"public"}
    assert {r[2] for r in _rows(replayed, "dbeaver", "d.classoid='pg_namespace'")} == {
        "public", "pg_catalog", "information_schema"}
    dbeaver_tables = _rows(replayed, "dbeaver", "c.relkind not in ('i','I','c')")
    assert LOGICAL <= {r[2] for r in dbeaver_tables}  # (oid, oid, relname, ...)
    dbeaver_columns = _rows(replayed, "dbeaver", "def_value")
    assert [r[0] for r in dbeaver_columns] == ["trips"] * 7
    jdbc_columns = _rows(replayed, "pgjdbc", "row_number() OVER")
    assert [r[2] for r in jdbc_columns] == [r[0].strip('"') for r in columns]


def test_metabase_syncs_the_logical_tables_with_postgresql_types(replayed):
    """Metabase's own sync SQL (quoted ``"pg_catalog"."pg_class"``, ``format('%s', ...)``,
    ``CAST(format('%I.%I', ...) AS REGCLASS)``) lists the logical tables without a row
    count, may SELECT each, and types their columns with PostgreSQL's names. Before, the
    table list failed ("Table with name dpsql_pg_class() AS pg_class does not exist") and
    so did the columns; every type read '%s'; and the per-table probe was refused, which
    makes Metabase leave the table out."""
    tables = _rows(replayed, "metabase_sync", '"estimated_row_count"')
    assert {r[1] for r in tables} == LOGICAL
    assert {(r[0], r[2], r[4]) for r in tables} == {("public", "TABLE", None)}  # no count
    privileges = _rows(replayed, "metabase_sync", "table_privileges")
    assert {(r[1], r[2]) for r in privileges} == {("public", t) for t in LOGICAL}
    assert {r[4] for r in privileges} == {"t"}  # select
    fields = _rows(replayed, "metabase_sync", '"database-type"')
    assert [(r[0], r[1], r[2]) for r in fields] == [
        ("region", "varchar", "0"), ("province", "varchar", "1"), ("city", "varchar", "2"),
        ("mode", "varchar", "3"), ("distance", "float8", "4"), ("age", "int8", "5"),
        ("dp_count", "float8", "6")]
    assert fields[3][6] == "categorical attribute (mode): 6 public values"  # col_description
    assert {(r[5], r[7], r[8]) for r in fields} == {("f", "f", "f")}  # pk?, required, auto
    assert _rows(replayed, "metabase_sync", "WHERE 1 <> 1 LIMIT 0") == []
    assert _rows(replayed, "metabase_sync", '"fk-table-schema"') == []
    assert _rows(replayed, "metabase_sync", '"field-name"') == []
    # pgjdbc's getPrimaryKeys reads information_schema._pg_expandarray too: no key
    assert _rows(replayed, "pgjdbc", "_pg_expandarray") == []


def test_table_comments_and_no_emulation_functions(replayed):
    """The logical tables' comment reaches what joins pg_description on ``classoid =
    'pg_class'::regclass`` (SQLAlchemy's get_table_comment, Metabase's table description):
    it was None, DuckDB filing comments under the database's oid. psql's ``\\df dp*``
    listed this emulation's own macros (dpsql_pg_class, dpsql_format ...) as the
    release's functions; now none."""
    comment = "dpsql logical table: differentially private counts; query with COUNT(*)"
    assert _rows(replayed, "sqlalchemy_pandas", "pg_description.objsubid = $1")[0][1] \
        .startswith(comment)
    tables = _rows(replayed, "metabase_sync", '"estimated_row_count"')
    assert all(r[3].startswith(comment) for r in tables)
    assert _rows(replayed, "psql", "'^(dp.*)$'") == []


def test_dbeaver_reads_the_sql_keywords(replayed):
    """DBeaver's editor reads its extra keywords from pg_get_keywords() minus an array
    literal (``word <> ALL ('{...}'::text[])``): both were missing ("Table Function with
    name pg_get_keywords does not exist", then "Conversion Error ... '{a,abs,...}'")."""
    words = _rows(replayed, "dbeaver", "pg_get_keywords")[0][0].split(",")
    assert "pivot" in words and "select" not in words and "table" not in words


def test_grafana_reads_postgresql_type_names(replayed):
    """Grafana's query builder picks time and metric columns by information_schema's
    data_type; it read DuckDB's names (DOUBLE, BIGINT), now PostgreSQL's."""
    columns = dict(_rows(replayed, "grafana", 'AS "column"'))
    assert columns["distance"] == "double precision" and columns["age"] == "bigint"
    assert columns["mode"] == "character varying"


def test_the_planned_statements_through_the_dialect(trips_release):
    """The clients' own queries of the logical table (not catalog SQL, which the dialect
    answers through its own inspection) give the same verdicts through ``dpsql://``."""
    eng = sa.create_engine(f"dpsql:///{trips_release}")
    checked = 0
    try:
        with eng.connect() as c:
            for p in FIXTURES:
                for s in _load(p)["statements"]:
                    sql = s["sql"]
                    if s["params"] or "trips" not in sql or "pg_" in sql \
                            or "information_schema" in sql:
                        continue
                    checked += 1
                    try:
                        c.exec_driver_sql(sql.replace("public.", "").replace(
                            '"public".', "")).fetchall()
                        ok = True
                    except sa.exc.DBAPIError as err:
                        ok = False
                        assert s.get("expect") == "privacy_refusal", (p.name, sql, err)
                    assert ok == (s.get("expect") != "privacy_refusal"), (p.name, sql)
    finally:
        eng.dispose()
    assert checked >= 15
