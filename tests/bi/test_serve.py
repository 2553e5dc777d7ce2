"""``dpsql serve`` with real PostgreSQL clients: the Debian ``psql`` binary, psycopg 3 and
SQLAlchemy's ``postgresql+psycopg://`` dialect, against servers started on free loopback
ports inside the tests.

Every answer is compared with :func:`dpsql.connect` on the same release: the server must
add nothing and lose nothing (it plans with the same planner).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import psycopg
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.errors import (DataError, Error, IntegrityError, InternalError, InterfaceError,
                          NotSupportedError, OperationalError, ProgrammingError,
                          SqlSyntaxError, UnsupportedQueryError)
from dpsql.server import UnencryptedServerWarning, serve, sqlstate_of
from tests.bi.pg_client import (cancelled_errors, cli_server, client_process, read_message,
                                 startup_packet)

# Seeded on purpose; some queries name values outside the domains (answered 0, noticed:
# tests/e2e/test_pg_like_results.py checks the notices).
pytestmark = [pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning"),
              pytest.mark.filterwarnings("ignore::dpsql.dbapi.PublicDomainWarning")]

LOGICAL = {"trips", "geo_mode", "geo_gauss", "dist", "age_tree", "mode_dist"}
USER = "analyst"


def _start(release, **kw):
    return serve(release, **{"port": 0, **kw})


@pytest.fixture(scope="module")
def server(trips_release):
    srv = _start(trips_release)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def local(trips_release):
    """The reference: dpsql.connect on the same release, in process."""
    con = dpsql.connect(trips_release)
    yield con
    con.close()


def _dsn(srv, **extra) -> str:
    parts = {"host": "127.0.0.1", "port": srv.port, "dbname": srv.database, "user": USER,
             "connect_timeout": 10, "sslmode": "disable"}
    parts.update(extra)
    return " ".join(f"{k}={v}" for k, v in parts.items())


def _expected(local, sql, params=None):
    cur = local.cursor()
    cur.execute(sql, params)
    return [tuple(r) for r in cur.fetchall()]


# --------------------------------------------------------------------------------------
# psql (Debian postgresql-client), installed by .ci/run
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def psql():
    path = shutil.which("psql")
    if path is None:
        pytest.skip("psql not found: .ci/run installs Debian postgresql-client when it runs "
                    "as root or with sudo (apt-get install postgresql-client)")
    return path


def _psql(psql, srv, command, *flags):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PGCONNECT_TIMEOUT="10", PGSSLMODE="disable")
    out = subprocess.run(
        [psql, "-X", "-h", "127.0.0.1", "-p", str(srv.port), "-U", USER, "-d", srv.database,
         "-v", "ON_ERROR_STOP=1", *flags, "-c", command],
        capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_psql_lists_the_logical_tables(psql, server):
    rows = [line.split("|") for line in _psql(psql, server, r"\dt", "-A", "-t").splitlines()]
    assert {r[1] for r in rows} == LOGICAL  # no level tables, no dpsql_* metadata tables
    assert {(r[0], r[2]) for r in rows} == {("public", "table")}


def test_psql_describes_a_table(psql, server):
    out = _psql(psql, server, r"\d trips", "-A")
    columns = dict(line.split("|")[:2] for line in out.splitlines()[2:] if "|" in line)
    assert columns == {"region": "character varying", "province": "character varying",
                       "city": "character varying", "mode": "character varying",
                       "distance": "double precision", "age": "bigint",
                       "dp_count": "double precision"}
    assert 'Table "public.trips"' in out


def test_psql_group_by_equals_dpsql_connect(psql, server, local):
    sql = "SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region"
    out = _psql(psql, server, sql, "-A", "-t", "-F", ",")
    got = [(r, float(n)) for r, n in (line.split(",") for line in out.splitlines())]
    assert got == [(r, float(n)) for r, n in _expected(local, sql)]  # repr round-trips
    assert len(got) == 4


# --------------------------------------------------------------------------------------
# psycopg 3
# --------------------------------------------------------------------------------------

@pytest.fixture()
def pg(server):
    with psycopg.connect(_dsn(server)) as con:
        yield con


CONSISTENCY = [
    ("SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode ORDER BY mode", None),
    ("SELECT region, province, COUNT(*) FROM trips GROUP BY ROLLUP (region, province) "
     "ORDER BY region NULLS FIRST, province NULLS FIRST", None),
    ("SELECT COUNT(*) AS n, dp_stderr() AS se, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
     "FROM trips WHERE distance BETWEEN 10 AND 50", None),
    ("SELECT mode, COUNT(*), dp_bound(0.05) FROM trips WHERE mode IN ('car', 'bus') "
     "GROUP BY mode ORDER BY mode", None),
    ("SELECT COUNT(*) FROM trips WHERE age < 40", None),
    ("SELECT MEDIAN(age) FROM trips", None),
    ("SELECT mode, COUNT(*) FROM trips WHERE mode = ? AND distance < ? GROUP BY mode",
     ["car", 30]),
    ("SELECT COUNT(*) FROM trips WHERE region = ? AND province = ?", ["R1", "R1P1"]),
    # a Python list, as psycopg sends it: a text[] / int8[] array parameter
    ("SELECT COUNT(*) FROM trips WHERE mode = ANY(?) AND distance < ANY(?) "
     "AND distance > ALL(?)", [["bus", "car"], [16, 48], [5, 8]]),
]


def _pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


@pytest.mark.parametrize("sql,params", CONSISTENCY)
def test_psycopg_answers_equal_dpsql_connect(pg, local, sql, params):
    got = pg.execute(_pg_sql(sql), params).fetchall()
    assert [tuple(r) for r in got] == _expected(local, sql, params)


def test_schema_qualified_names_are_the_logical_tables(pg, local):
    """BI tools write "public"."trips" (the schema they listed): the same logical table."""
    sql = 'SELECT "mode", COUNT(*) AS n FROM "public"."trips" GROUP BY "mode" ORDER BY 1'
    assert [tuple(r) for r in pg.execute(sql).fetchall()] == _expected(
        local, "SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode ORDER BY 1")
    sql = "SELECT COUNT(*) FROM public.geo_mode WHERE region = %s"
    assert pg.execute(sql, ["R3"]).fetchall() == _expected(
        local, "SELECT COUNT(*) FROM geo_mode WHERE region = ?", ["R3"])


def test_psycopg_parameter_types(pg, local):
    """int, float and str parameters arrive typed (the planner binds numbers as numbers)."""
    sql = "SELECT COUNT(*) FROM trips WHERE distance >= ? AND distance < ?"
    for lo, hi in [(10, 50), (10.5, 49.25)]:
        got = pg.execute(_pg_sql(sql), [lo, hi]).fetchall()
        assert got == _expected(local, sql, [lo, hi])
    assert pg.execute("SELECT %s::VARCHAR || 'x', %s + 1", ["a", 41]).fetchall() == [("ax", 42)]
    # psycopg prepares a statement after 5 executions: the named path must agree too
    for _ in range(7):
        assert pg.execute("SELECT COUNT(*) FROM trips WHERE mode = %s", ["bus"]).fetchall() \
            == _expected(local, "SELECT COUNT(*) FROM trips WHERE mode = ?", ["bus"])


@pytest.mark.parametrize("sql,code,words", [
    ("SELECT * FROM trips", "0A000", "SELECT *"),
    ("SELECT region, SUM(distance * 2) FROM trips GROUP BY region", "0A000", "supported"),
    ("SELEC region FROM trips", "42601", "syntax error"),
    ("CREATE TABLE t (a INT)", "25006", "read-only"),
    ("INSERT INTO trips VALUES (1)", "25006", "read-only"),
    ("DROP TABLE trips", "25006", "read-only"),
    ("SHOW no_such_setting", "42704", "unrecognized"),
    ("SELECT COUNT(*) FROM trip", "42P01", "SHOW TABLES lists the tables"),  # was 42000
    ("SELECT COUNT(*) FROM trips; DROP TABLE trips", "25006", "read-only"),
])
def test_psycopg_error_codes(server, sql, code, words):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as info:
            con.execute(sql)
        assert info.value.sqlstate == code
        assert words in str(info.value)
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def test_a_database_the_server_does_not_serve_is_refused(server):
    """As PostgreSQL: dbname=flights against a server of the trips release was accepted
    and answered from trips (a user trial pointed a BI tool at the wrong server and got
    "Did you mean sqlite_schema?"); it is FATAL (3D000), naming the database served. With
    no dbname libpq asks for the user's name, refused the same way."""
    for dsn in (_dsn(server, dbname="flights"), _dsn(server).replace(
            f"dbname={server.database} ", "")):
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(dsn)
        assert "FATAL:  database" in str(info.value)  # libpq keeps no SQLSTATE here
        assert f'does not exist: this server serves the release "{server.database}"' \
            in str(info.value)
    with psycopg.connect(_dsn(server)) as con:  # the right name still connects
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)


def _last_result(pgconn):
    """Wait (without holding the GIL) for a libpq async request; return its last result."""
    deadline = time.monotonic() + 120  # generous: a loaded machine answers late
    last = None
    while True:
        while pgconn.is_busy():  # get_result() only once it will not block
            assert time.monotonic() < deadline, "no answer from the server"
            select.select([pgconn.socket], [], [], 0.1)
            pgconn.consume_input()
        res = pgconn.get_result()
        if res is None:
            return last
        last = res


def test_binary_results_and_describe_statement(server, local):
    """Binary result formats (psycopg binary cursors), and Describe of a named statement
    (what JDBC drivers send before binding): the columns and parameter types come back."""
    sql = "SELECT mode, COUNT(*) AS n, dp_stderr() AS se FROM trips WHERE mode IN (?, ?) " \
          "GROUP BY mode ORDER BY mode"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with con.cursor(binary=True) as cur:
            got = cur.execute(_pg_sql(sql), ["bus", "car"]).fetchall()
        assert [tuple(r) for r in got] == _expected(local, sql, ["bus", "car"])
        # libpq's asynchronous calls: the blocking ones would hold the GIL that the
        # in-process server thread needs
        pgconn = con.pgconn
        pgconn.send_prepare(b"s1", b"SELECT region, COUNT(*) AS n FROM trips "
                                   b"WHERE mode = $1 GROUP BY region", [0])
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        pgconn.send_describe_prepared(b"s1")
        desc = _last_result(pgconn)
        assert desc.status == psycopg.pq.ExecStatus.COMMAND_OK
        assert [desc.fname(i) for i in range(desc.nfields)] == [b"region", b"n"]
        assert desc.nparams == 1 and desc.param_type(0) == 25  # unknown -> text


def test_cancel_request_interrupts_the_query(server):
    """psycopg's cancel() sends a CancelRequest on a new socket: the running DuckDB query
    stops with 57014 (query_canceled) and the session stays usable."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        errors = cancelled_errors(con, "SELECT COUNT(*) FROM range(1000000000000)")
        assert [e.sqlstate for e in errors] == ["57014"]
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_failed_transaction_needs_rollback(server):
    """PostgreSQL semantics: after an error in a block, only ROLLBACK gets through."""
    with psycopg.connect(_dsn(server)) as con:  # not autocommit: psycopg sends BEGIN
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            con.execute("SELECT * FROM trips")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            con.execute("SELECT COUNT(*) FROM trips")
        con.rollback()
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
        con.commit()


def test_session_commands(pg):
    pg.execute("SET application_name = 'dashboards'")
    assert pg.execute("SHOW application_name").fetchone() == ("dashboards",)
    assert pg.execute("SHOW transaction_read_only").fetchone() == ("on",)
    # a trailing comment is not part of the command (it was: 'all -- note' is unknown)
    shown = dict((n, v) for n, v, _ in pg.execute("SHOW ALL -- note").fetchall())
    assert shown["application_name"] == "dashboards"
    pg.execute("SET application_name = 'a--b' /* why */")
    assert pg.execute("SHOW application_name /* c */").fetchone() == ("a--b",)
    assert pg.execute("SELECT current_schema()").fetchone() == ("public",)
    version = pg.execute("SELECT version()").fetchone()[0]
    assert version.startswith("PostgreSQL 15.0 (dpsql")
    assert pg.info.server_version == 150000


def test_catalog_lists_only_logical_tables(pg):
    tables = pg.execute("SELECT table_schema, table_name FROM information_schema.tables "
                        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
                        ).fetchall()
    assert set(tables) == {("public", t) for t in LOGICAL}
    cols = pg.execute("SELECT column_name FROM information_schema.columns WHERE table_name = "
                      "%s ORDER BY ordinal_position", ["geo_mode"]).fetchall()
    assert [c[0] for c in cols] == ["region", "province", "city", "mode", "dp_count"]
    assert pg.execute("SELECT COUNT(*) FROM pg_catalog.pg_class WHERE relname LIKE '%\\_\\_l%' "
                      "ESCAPE '\\'").fetchone() == (0,)


def test_sqlstate_table():
    assert sqlstate_of(UnsupportedQueryError("x")) == "0A000"
    assert sqlstate_of(SqlSyntaxError("x")) == "42601"
    assert sqlstate_of(NotSupportedError("x")) == "0A000"
    assert sqlstate_of(ProgrammingError("x")) == "42000"
    assert sqlstate_of(DataError("x")) == "22000"
    assert sqlstate_of(IntegrityError("x")) == "23000"
    assert sqlstate_of(InternalError("x")) == "XX000"
    assert sqlstate_of(OperationalError("x")) == "58000"
    assert sqlstate_of(InterfaceError("x")) == "55000"
    assert sqlstate_of(Error("x")) == "58000"
    assert sqlstate_of(RuntimeError("x")) == "XX000"


@pytest.mark.slow
def test_twenty_concurrent_clients_for_ten_seconds(server, local):
    queries = [(q, p) for q, p in CONSISTENCY if "MEDIAN" not in q]
    expected = [_expected(local, q, p) for q, p in queries]
    stop = time.monotonic() + 10.0
    done, failures = [0] * 20, []

    def client(i: int) -> None:
        try:
            with psycopg.connect(_dsn(server), autocommit=True) as con:
                k = i
                while time.monotonic() < stop or not done[i]:  # at least one each
                    q, p = queries[k % len(queries)]
                    got = [tuple(r) for r in con.execute(_pg_sql(q), p).fetchall()]
                    if got != expected[k % len(queries)]:
                        failures.append((i, q, got))
                    done[i] += 1
                    k += 1
        except Exception as err:  # noqa: BLE001  (reported below)
            failures.append((i, repr(err)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not failures, failures[:3]
    assert all(n > 0 for n in done), done  # every client was served
    deadline = time.monotonic() + 60  # generous: polling ends as soon as it holds
    while server.sessions and time.monotonic() < deadline:  # Terminate is asynchronous
        time.sleep(0.05)
    assert server.sessions == 0  # every session was closed with its client


# --------------------------------------------------------------------------------------
# SQLAlchemy over the server
# --------------------------------------------------------------------------------------

def test_sqlalchemy_lists_tables_and_queries(server, local):
    engine = sa.create_engine(f"postgresql+psycopg://{USER}@127.0.0.1:{server.port}/"
                              f"{server.database}?sslmode=disable")
    try:
        insp = sa.inspect(engine)
        assert set(insp.get_table_names()) == LOGICAL
        cols = {c["name"]: c["type"] for c in insp.get_columns("mode_dist")}
        assert list(cols) == ["mode", "distance", "dp_count"]
        assert isinstance(cols["distance"], sa.Double)
        sql = "SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region"
        with engine.connect() as conn:
            assert [tuple(r) for r in conn.execute(sa.text(sql))] == _expected(local, sql)
            trips = sa.Table("trips", sa.MetaData(), autoload_with=conn)
            q = (sa.select(trips.c.mode, sa.func.count().label("n"))
                 .where(trips.c.region == "R2").group_by(trips.c.mode).order_by(trips.c.mode))
            assert [tuple(r) for r in conn.execute(q)] == _expected(
                local, "SELECT mode, count(*) AS n FROM trips WHERE region = 'R2' GROUP BY "
                       "mode ORDER BY mode")
    finally:
        engine.dispose()


# --------------------------------------------------------------------------------------
# Security: passwords, loopback, shutdown
# --------------------------------------------------------------------------------------

@pytest.fixture()
def password_file(tmp_path):
    p = tmp_path / "pw"
    p.write_text("s3cret-Ü\n", encoding="utf-8")
    p.chmod(0o600)
    return p


def test_password_authentication(trips_release, password_file):
    with _start(trips_release, password_file=password_file) as srv:
        with psycopg.connect(_dsn(srv, password="s3cret-Ü")) as con:
            assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(_dsn(srv, password="wrong"))
        env = {k: os.environ.pop(k) for k in ("PGPASSWORD",) if k in os.environ}
        try:
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(_dsn(srv, passfile=os.devnull))
        finally:
            os.environ.update(env)


def test_password_file_must_be_private(trips_release, password_file, tmp_path):
    password_file.chmod(0o644)
    with pytest.raises(ProgrammingError, match="chmod 600"):
        _start(trips_release, password_file=password_file)
    empty = tmp_path / "empty"
    empty.write_text("")
    empty.chmod(0o600)
    with pytest.raises(ProgrammingError, match="empty"):
        _start(trips_release, password_file=empty)


def test_non_loopback_needs_a_password(trips_release, password_file):
    with pytest.raises(ProgrammingError, match="--password-file"):
        _start(trips_release, host="0.0.0.0")
    with pytest.raises(ProgrammingError, match="--tls-cert.*--allow-unencrypted"):
        _start(trips_release, host="0.0.0.0", password_file=password_file)
    with pytest.warns(UnencryptedServerWarning, match="without TLS"):
        srv = _start(trips_release, host="0.0.0.0", password_file=password_file,
                     allow_unencrypted=True)
    with srv:
        with psycopg.connect(_dsn(srv, password="s3cret-Ü")) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)


def test_stop_ends_open_sessions(trips_release):
    srv = _start(trips_release)
    con = psycopg.connect(_dsn(srv), autocommit=True)
    assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
    srv.stop()  # returns (no duration asserted: a loaded machine may be slow)
    assert not srv.running
    with pytest.raises(psycopg.OperationalError):
        con.execute("SELECT 1")
    con.close()
    srv.stop()  # twice is harmless


# --------------------------------------------------------------------------------------
# The CLI: dpsql serve
# --------------------------------------------------------------------------------------

def test_cli_serve_and_sigterm(trips_release):
    with cli_server(trips_release, "--max-connections", "3") as (proc, port, _):
        # libpq's default sslmode=prefer: the server declines SSL, the client goes on
        with psycopg.connect(f"host=127.0.0.1 port={port} dbname=trips user=x") as con:
            assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert "NOT private" in proc.stderr.read()


def test_cli_serve_verbose_logs_statements_and_refusals(trips_release):
    with cli_server(trips_release, "-v") as (proc, port, _):
        with psycopg.connect(f"host=127.0.0.1 port={port} dbname=trips user=x",
                             autocommit=True) as con:
            with pytest.raises(psycopg.Error):
                con.execute("SELECT * FROM trips")
            with pytest.raises(psycopg.Error):
                con.execute("SELEC 1")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        log = proc.stderr.read()
    assert "planner <- SELECT * FROM trips" in log
    refusal = [ln for ln in log.splitlines() if "ERROR 0A000 to 127.0.0.1" in ln]
    assert len(refusal) == 1 and "SELECT * on the private table 'trips'" in refusal[0]
    syntax = [ln for ln in log.splitlines() if "ERROR 42601 to 127.0.0.1" in ln]
    assert len(syntax) == 1 and "'SELEC' does not start a query" in syntax[0]


def test_cli_refuses_non_loopback_without_password(trips_release):
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "serve", str(trips_release),
                          "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert "--password-file" in out.stderr


def test_cli_refuses_a_bad_max_connections(trips_release):
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "serve", str(trips_release),
                          "--port", "0", "--max-connections", "0"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1
    assert "max_connections 0 must be a positive integer" in out.stderr


def test_port_in_use(trips_release):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(OperationalError, match="pick another --port"):
            _start(trips_release, port=s.getsockname()[1])


# --------------------------------------------------------------------------------------
# JDBC-style clients (Metabase, Tableau, DBeaver): pgjdbc 42.x DatabaseMetaData SQL
# --------------------------------------------------------------------------------------

JDBC_SCHEMAS = (
    'SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  '
    "WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = "
    "(pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR "
    "nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', "
    "'pg_toast_temp_'))  ORDER BY TABLE_SCHEM")
JDBC_TABLES = (
    'SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE '
    "n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN "
    "n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   "
    "WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM "
    "INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN "
    "'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   "
    "END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN "
    "'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY "
    "SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN "
    "CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' "
    "THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' "
    "THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN "
    "'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description "
    "AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS "
    "SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, "
    'pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid '
    "AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = "
    "n.oid  AND n.nspname LIKE 'public' AND c.relname LIKE '%' AND (false  OR ( "
    "c.relkind IN ('r','p') AND n.nspname !~ '^pg_' AND n.nspname <> "
    "'information_schema' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME ")
JDBC_COLUMNS = (
    'SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR '
    "(t.typtype = 'd' AND t.typnotnull) AS "
    'attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY '
    "a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as "
    "attidentity,nullif(a.attgenerated, '') as "
    'attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS '
    'adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN '
    'pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a '
    'ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN '
    'pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  '
    'LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = '
    'dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND '
    "dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON "
    "(dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in "
    "('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE "
    "'public' AND c.relname LIKE 'mode_dist') c WHERE true  ORDER BY "
    'nspname,c.relname,attnum ')


def test_jdbc_metadata_queries(server):
    """The SQL pgjdbc's getSchemas/getTables/getColumns send (Metabase and Tableau list
    tables and columns through them): logical tables only, PostgreSQL type OIDs."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("SET extra_float_digits = 3")
        assert ("public", None) in con.execute(JDBC_SCHEMAS).fetchall()
        tables = con.execute(JDBC_TABLES).fetchall()
        assert {(r[1], r[2], r[3]) for r in tables} == {("public", t, "TABLE")
                                                        for t in LOGICAL}
        cols = con.execute(JDBC_COLUMNS).fetchall()
        assert [(r[2], r[3], r[8]) for r in cols] == [
            ("mode", 1043, 1), ("distance", 701, 2), ("dp_count", 701, 3)]


@pytest.mark.parametrize("value", [0, 1, -1, 9021, 10000, 10**30 + 7, -(10**37) - 7,
                                   "0.0012", "-12.3400", "1E+8", "0.00001", 6824.814814814815,
                                   "NaN"])
def test_numeric_binary_output_reads_back_in_psycopg(value):
    """PostgreSQL's binary NUMERIC (base-10000 groups) as psycopg's own loader reads it."""
    from decimal import Decimal

    from psycopg.types.numeric import NumericBinaryLoader

    from dpsql.server._types import pg_type

    encode = pg_type("DECIMAL(38,4)")[3]
    v = Decimal(value) if isinstance(value, str) else value
    got = NumericBinaryLoader(1700).load(encode(v))
    want = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    assert got == want or (got.is_nan() and want.is_nan())


# --------------------------------------------------------------------------------------
# Security review regressions (one test per confirmed issue)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT $$'$$ FROM pg_class; CREATE OR REPLACE MACRO version() AS 'pwned' --'",
    "SELECT E'\\'' FROM pg_class; CREATE TABLE public.fake_table(secret_col INT) --'",
    "SELECT $$'$$ FROM pg_class; DROP SCHEMA public CASCADE --'",
    "SELECT $x$;$x$ FROM pg_class; SELECT 2",
])
def test_hidden_second_statement_is_refused(server, sql):
    """A second statement hidden from the ';' check by a dollar-quoted or E'' string never
    runs on the shared catalog database (DuckDB's parser counts the statements). Since a
    simple query's statements run one by one (PostgreSQL's rule, for Npgsql), the split
    reads the strings as PostgreSQL does and the write after them is refused (25006)."""
    with psycopg.connect(_dsn(server), autocommit=True) as atk:
        with pytest.raises(psycopg.Error) as info:
            atk.execute(sql)
        assert info.value.sqlstate in ("0A000", "25006")
    with psycopg.connect(_dsn(server), autocommit=True) as other:
        assert other.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 15.0 (")
        tables = other.execute("SELECT table_name FROM information_schema.tables WHERE "
                               "table_schema = 'public'").fetchall()
        assert {t[0] for t in tables} == LOGICAL


@pytest.mark.parametrize("sql", [
    "ATTACH ':memory:' AS pg_catalog", "ATTACH ':memory:' AS evil", "DETACH trips",
    "PRAGMA database_list", "PRAGMA threads=1", "CHECKPOINT", "USE memory",
    "CALL pragma_version()", "/* x */ ATTACH ':memory:' AS x",
])
def test_attach_detach_pragma_checkpoint_are_refused(server, sql):
    with psycopg.connect(_dsn(server), autocommit=True) as atk:
        with pytest.raises(psycopg.Error) as info:
            atk.execute(sql)
        assert info.value.sqlstate == "25006", str(info.value)
    with psycopg.connect(_dsn(server), autocommit=True) as other:
        rel = other.execute("SELECT c.relname FROM pg_catalog.pg_class c JOIN "
                            "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                            "n.nspname = 'public'").fetchall()
        assert {r[0] for r in rel} == LOGICAL
        dbs = other.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal"
                            ).fetchall()
        assert {d[0] for d in dbs} == {server.database, "memory"}  # as built


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM query('SELECT * FROM trips')",
    "SELECT count(*) FROM query_table(['trips'])",
    "SELECT count(*) FROM query_table('trips')",
    "SELECT * FROM pg_class, query_table('geo_mode')",
])
def test_placeholder_tables_never_answer_a_count(server, sql):
    """The catalog's empty placeholder tables cannot be read through query()/query_table():
    an error, never COUNT(*) = 0."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as info:
            con.execute(sql)
        assert info.value.sqlstate == "0A000"
        assert "FROM" in str(info.value)


def test_describe_never_fails_the_transaction(server, local):
    """Describe(statement) with untyped parameters (libpq PQprepare without types, what
    node-postgres and JDBC do) returns the row shape and leaves the transaction alone; the
    untyped "50" binds as the number the range bound needs."""
    sql = "SELECT COUNT(*) AS n FROM trips WHERE age < ?"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pgconn = con.pgconn
        pgconn.send_query(b"BEGIN")
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        # a statement whose dummy run fails (no view covers age with region)
        pgconn.send_prepare(b"bad", b"SELECT region, COUNT(*) FROM trips WHERE age < $1 "
                                    b"GROUP BY region")
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        pgconn.send_describe_prepared(b"bad")
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        assert pgconn.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        pgconn.send_prepare(b"s1", sql.replace("?", "$1").encode())
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        pgconn.send_describe_prepared(b"s1")
        desc = _last_result(pgconn)
        assert [desc.fname(i) for i in range(desc.nfields)] == [b"n"]
        assert desc.nparams == 1
        pgconn.send_query_prepared(b"s1", [b"50"])  # untyped text, as node-postgres sends
        res = _last_result(pgconn)
        assert res.status == psycopg.pq.ExecStatus.TUPLES_OK, res.error_message
        assert float(res.get_value(0, 0)) == _expected(local, sql, [50])[0][0]
        assert pgconn.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        # untyped text that is not a number stays text
        pgconn.send_prepare(b"s2", b"SELECT COUNT(*) FROM trips WHERE mode = $1")
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        pgconn.send_query_prepared(b"s2", [b"bus"])
        res = _last_result(pgconn)
        assert float(res.get_value(0, 0)) == _expected(
            local, "SELECT COUNT(*) FROM trips WHERE mode = ?", ["bus"])[0][0]
        pgconn.send_query(b"ROLLBACK")
        _last_result(pgconn)


def test_no_session_before_authentication(trips_release, password_file):
    """Unauthenticated connections cost no session (no DuckDB, no release attached)."""
    with _start(trips_release, password_file=password_file) as srv:
        socks = []
        try:
            for _ in range(5):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(startup_packet())
                assert read_message(s)[0] == b"R"  # the SCRAM challenge
                socks.append(s)
            assert srv.sessions == 0
            with psycopg.connect(_dsn(srv, password="s3cret-Ü")) as con:
                assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
                assert srv.sessions == 1
                session = srv._conn.sessions()[0]
                threads = session._duck.execute("SELECT current_setting('threads')")
                assert threads.fetchall() == [(1,)]
        finally:
            for s in socks:
                s.close()


def test_max_connections(trips_release):
    with _start(trips_release, max_connections=2) as srv:
        with psycopg.connect(_dsn(srv)) as a, psycopg.connect(_dsn(srv)) as b:
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(_dsn(srv))
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            with s:
                s.sendall(startup_packet())
                kind, body = read_message(s)
                assert kind == b"E" and b"C53300\x00" in body and b"SFATAL\x00" in body
            assert a.execute("SELECT 1").fetchone() == b.execute("SELECT 1").fetchone()
        deadline = time.monotonic() + 60  # the slots are free again once they closed
        while True:
            try:
                with psycopg.connect(_dsn(srv)) as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    with pytest.raises(ProgrammingError, match="max_connections"):
        _start(trips_release, max_connections=0)


def test_startup_timeout_and_oversized_messages(trips_release):
    with _start(trips_release) as srv:
        srv._wire.startup_timeout = 0.5  # the default is 10 s
        # a generous socket timeout: recv raises (and the test fails) unless the server
        # gives up on the silent client and closes the connection
        with socket.create_connection(("127.0.0.1", srv.port), timeout=120) as s:
            s.sendall(b"\x00\x00")  # half a length word, then silence
            while s.recv(4096):  # the server gives up and closes the connection
                pass
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(startup_packet())
            while read_message(s)[0] != b"Z":  # authenticated, ready for query
                pass
            s.sendall(b"Q" + struct.pack("!I", 0x7FFFFFF0))  # claims a 2 GB query
            kind, body = read_message(s)
            assert kind == b"E" and b"C54000\x00" in body and b"limit" in body


def test_a_client_that_goes_away_is_one_log_line(trips_release, caplog):
    """A client reset mid-query (a killed BI tool) is logged as one line, without the
    tracebacks that buenavista and the error path would print."""
    import logging
    with caplog.at_level(logging.INFO), _start(trips_release) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(startup_packet())
        while read_message(s)[0] != b"Z":
            pass
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sql = b"SELECT region, COUNT(*) FROM trips GROUP BY region\x00"
        s.sendall(b"Q" + struct.pack("!I", 4 + len(sql)) + sql)
        s.close()  # with SO_LINGER 0: a reset
        deadline = time.monotonic() + 60
        while "went away" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelname == "INFO"
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert "Traceback" not in caplog.text


def test_cancel_keys_do_not_come_from_random(server):
    """Cancel keys are drawn with ``secrets``: the ``random`` module's state (predictable
    from its outputs) is not touched by a connection."""
    import random

    state = random.getstate()
    with psycopg.connect(_dsn(server)) as a, psycopg.connect(_dsn(server)) as b:
        assert a.pgconn.backend_pid != b.pgconn.backend_pid
        assert a.pgconn.backend_pid > 0
    assert random.getstate() == state


@pytest.mark.parametrize("value,oid,fmt,code", [
    (b"abc", 23, 0, "22000"),             # not an int4
    (b"1.5.2", 1700, 0, "22000"),         # not a numeric
    (b"\x00\x01", 23, 1, "22000"),        # binary int4 of 2 bytes
    (b"\x00\x00\x00\x01", 869, 1, "08P01"),  # binary inet: no binary decoder
])
def test_a_bind_error_is_an_error_response_and_the_session_goes_on(server, local, value,
                                                                  oid, fmt, code):
    """A parameter that does not decode for its declared type used to end the session
    (buenavista's handler caught the exception and closed the connection). Now: an
    ErrorResponse, the rest of the batch is skipped until Sync, ReadyForQuery, and the
    same connection answers its next queries (PostgreSQL's extended protocol)."""
    sql = "SELECT COUNT(*) FROM trips WHERE age < $1"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        res = pg.exec_params(sql.encode(), [value], param_types=[oid], param_formats=[fmt])
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == code.encode()
        assert pg.status == psycopg.pq.ConnStatus.OK
        assert pg.transaction_status == psycopg.pq.TransactionStatus.IDLE
        got = con.execute("SELECT COUNT(*) FROM trips WHERE age < %s", [50]).fetchall()
        assert got == _expected(local, "SELECT COUNT(*) FROM trips WHERE age < ?", [50])
        # in a block, the failed Bind fails the block, as a failed statement does
        con.execute("BEGIN")
        res = pg.exec_params(sql.encode(), [value], param_types=[oid], param_formats=[fmt])
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert pg.transaction_status == psycopg.pq.TransactionStatus.INERROR
        con.execute("ROLLBACK")
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def test_an_unknown_prepared_statement_is_an_error_not_the_end(server):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pg = con.pgconn
        res = pg.exec_prepared(b"never_prepared", [])
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"26000"
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _until_ready(sock) -> list[tuple[bytes, bytes]]:  # noqa: ANN001
    out = [read_message(sock)]
    while out[-1][0] not in (b"Z", b""):
        out.append(read_message(sock))
    return out


EXECUTE_UNNAMED = _message(b"E", b"\x00" + struct.pack("!i", 0))


@pytest.mark.parametrize("sent, answer", [
    (_message(b"D", b"Snever\x00"),
     (b"E", "26000", 'prepared statement "never" does not exist')),
    (_message(b"D", b"Pnever\x00"), (b"E", "34000", 'portal "never" does not exist')),
    (_message(b"E", b"never\x00" + struct.pack("!i", 0)),
     (b"E", "34000", 'portal "never" does not exist')),
    (_message(b"C", b"Snever\x00"), (b"3",)),  # closing what does not exist: no error
    (_message(b"C", b"Pnever\x00"), (b"3",)),
], ids=["describe-statement", "describe-portal", "execute", "close-statement",
        "close-portal"])
def test_unknown_statement_and_portal_names_on_the_wire(server, sent, answer):
    """Describe of an unknown statement: ErrorResponse 26000, the messages up to Sync
    skipped (an Execute here), then ReadyForQuery, and the session goes on. An unknown
    portal was XX000 with the message "'never'" (buenavista's KeyError, logged as an
    unexpected server error) and Close of an unknown name too, which PostgreSQL answers
    with CloseComplete; now 34000 'portal "never" does not exist' (PostgreSQL's words) and
    CloseComplete."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(startup_packet())
        assert _until_ready(s)[-1] == (b"Z", b"I")
        s.sendall(sent + EXECUTE_UNNAMED * (answer[0] == b"E") + _message(b"S"))
        got = _until_ready(s)
        assert [kind for kind, _ in got] == [answer[0], b"Z"] and got[-1][1] == b"I"
        if answer[0] == b"E":
            fields = dict((f[:1], f[1:].decode()) for f in got[0][1].split(b"\x00") if f)
            assert (fields[b"C"], fields[b"M"]) == answer[1:]
        s.sendall(_message(b"Q", b"SELECT COUNT(*) > 0 FROM trips\x00"))
        kinds = [kind for kind, _ in _until_ready(s)]
        assert kinds == [b"T", b"D", b"C", b"Z"]


def test_psycopg_describe_prepared_of_an_unknown_name(server):
    """psycopg's blocking PGconn.describe_prepared gets 26000 and the session goes on.

    It runs in a client process of its own: psycopg's C implementation (psycopg-binary)
    keeps the GIL while libpq waits in PQdescribePrepared (its prepare and exec_prepared
    release it), so called in the process that runs the server, it waits for an answer
    that the server thread, needing the GIL, never sends. That is the "hang" seen in an
    in-process test: a deadlock of the test process, not of the server. In process,
    send_describe_prepared with _last_result (below) is the way."""
    client = (
        "import sys, psycopg\n"
        "from psycopg.pq import DiagnosticField, ExecStatus, TransactionStatus\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as con:\n"
        "    pg = con.pgconn\n"
        "    res = pg.describe_prepared(b'never_prepared')\n"
        "    print(res.status == ExecStatus.FATAL_ERROR,\n"
        "          res.error_field(DiagnosticField.SQLSTATE).decode(),\n"
        "          pg.transaction_status == TransactionStatus.IDLE)\n"
        "    pg.prepare(b's1', b'SELECT COUNT(*) AS n FROM trips')\n"
        "    print(pg.describe_prepared(b's1').fname(0).decode())\n"
        "    print(con.execute('SELECT COUNT(*) > 0 FROM trips').fetchone()[0])\n")
    assert client_process(client, _dsn(server)) == ["True", "26000", "True", "n", "True"]
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        pgconn = con.pgconn
        pgconn.send_query(b"BEGIN")
        _last_result(pgconn)
        pgconn.send_describe_prepared(b"never_prepared")
        res = _last_result(pgconn)
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"26000"
        assert pgconn.transaction_status == psycopg.pq.TransactionStatus.INERROR
        pgconn.send_query(b"ROLLBACK")
        _last_result(pgconn)
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]
