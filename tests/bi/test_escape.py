"""The escape suite: no analyst entry point reads any file but the release.

A secret text file, a raw-data parquet file (the release's own source rows, each with a
person id) and a raw DuckDB database are planted next to each other. Every statement of
:mod:`tests.bi.escape_statements` (file readers of every kind, ATTACH/COPY/INSTALL/LOAD/
SET/PRAGMA/EXPORT, multi-statement and quoting tricks, raw reads inside subqueries, CTEs,
UNIONs, IN lists and lateral joins, ``query()``, ``getvariable``, URLs) is run through
every analyst entry point: ``dpsql.connect`` (``Connection.execute``), a DB-API cursor,
``dpsql.attach(con, path, lockdown=True)`` (through the planner, and raw SQL on the
locked DuckDB connection itself), the ``dpsql query`` command (the statement as an
argument, or on standard input: ``dpsql query r.duckdb -``), ``dpsql serve`` over the
simple and the extended query protocol (libpq; each also with the statement made
longer than 1 KiB, so that a planning process routes and plans it), the same as the
query of a SQL cursor (``DECLARE c CURSOR WITH HOLD FOR <statement>``, then ``FETCH
ALL``), and the SQLAlchemy dialect. Each must be
refused (the raw DuckDB connection may run what reads no file), and neither file's
content may appear in any output or error message; nothing may be written. The control
(:func:`test_the_markers_are_found_when_file_access_is_allowed`) shows that the same
check finds the content when the opt-out lets a statement read it.
"""

from __future__ import annotations

import logging
import secrets

import duckdb
import psycopg
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.cli import main
from dpsql.server import serve
from tests.bi.escape_statements import ALL, HOST_INFO, STAR_FORMS, VOLATILE_FORMS
from tests.bi.test_sqlalchemy import engine  # noqa: F401  (a fixture)

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

TOKEN = secrets.token_hex(8)
SECRET = f"SECRET-{TOKEN}"
RAW = f"RAWROW-{TOKEN}"


@pytest.fixture(scope="module")
def planted(tmp_path_factory, trips_data):
    """The planted files; returns the values the statement templates use."""
    d = tmp_path_factory.mktemp("planted")
    (d / "secret.txt").write_text(f"token,value\n{SECRET},42\n")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT *, '{RAW}-' || row_number() OVER () AS who FROM "
                f"read_parquet('{trips_data / 'trips.parquet'}')) TO '{d / 'raw.parquet'}'")
    con.close()
    con = duckdb.connect(str(d / "raw.duckdb"))
    con.execute(f"CREATE TABLE raw AS SELECT * FROM read_parquet('{d / 'raw.parquet'}')")
    con.close()
    return {"secret": str(d / "secret.txt"), "raw": str(d / "raw.parquet"),
            "rawdb": str(d / "raw.duckdb"), "dir": str(d), "dirname": d.name,
            "out": str(d / "out.csv")}


LONG = "\n-- " + "x" * 1200


def _leaks(text: str) -> bool:
    return SECRET in text or RAW in text or TOKEN in text


# -- the entry points: each runs one statement and returns (refused, everything shown) --

@pytest.fixture(scope="module")
def connection(trips_release):
    con = dpsql.connect(trips_release)
    yield con
    con.close()


@pytest.fixture(scope="module")
def attached(trips_release):
    con = duckdb.connect()
    dpsql.attach(con, str(trips_release), lockdown=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def server(trips_release):
    srv = serve(trips_release, port=0)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def libpq(server):
    assert server._conn.planning.start(wait=120)
    con = psycopg.connect(f"host=127.0.0.1 port={server.port} dbname={server.database} "
                          "user=analyst sslmode=disable connect_timeout=10", autocommit=True)
    yield con.pgconn
    con.close()


def _run_connect(ctx, sql):
    return repr(ctx["connection"].execute(sql).fetchall())


def _run_cursor(ctx, sql):
    cur = ctx["connection"].cursor()
    try:
        cur.execute(sql)
        return repr(cur.fetch_arrow_table().to_pylist())
    finally:
        cur.close()


def _run_attach(ctx, sql):
    return repr(dpsql.sql(ctx["attached"], sql).fetchall())


def _run_cli(ctx, sql):
    code = main(["query", str(ctx["release"]), sql])
    out = ctx["capsys"].readouterr()
    if code != 0:
        raise RuntimeError(out.out + out.err)
    return out.out + out.err


def _run_cli_stdin(ctx, sql):
    """``dpsql query release -`` with the statement on standard input."""
    import io

    ctx["monkeypatch"].setattr("sys.stdin", io.StringIO(sql))
    return _run_cli(ctx, "-")


def _run_pg(ctx, sql, extended):
    pg = ctx["libpq"]
    res = pg.exec_params(sql.encode(), []) if extended else pg.exec_(sql.encode())
    shown = (res.error_message or b"").decode(errors="replace")
    rows = [[res.get_value(r, c) for c in range(res.nfields)] for r in range(res.ntuples)]
    if res.status == psycopg.pq.ExecStatus.FATAL_ERROR:
        raise RuntimeError(shown)
    return shown + repr(rows)


def _run_declared(ctx, sql, extended):
    """``sql`` as the query of a SQL cursor (``DECLARE ... WITH HOLD FOR sql``, then
    ``FETCH ALL``), as psycopg's named cursors and psqlODBC's UseDeclareFetch send it."""
    pg = ctx["libpq"]
    run = (lambda q: pg.exec_params(q.encode(), [])) if extended else \
        (lambda q: pg.exec_(q.encode()))
    try:
        res = run(f"DECLARE escape_c CURSOR WITH HOLD FOR {sql}")
        if res.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            raise RuntimeError((res.error_message or b"").decode(errors="replace"))
        return _run_pg(ctx, "FETCH ALL FROM escape_c", extended)
    finally:
        pg.exec_(b"CLOSE ALL")


def _run_sqlalchemy(ctx, sql):
    with ctx["engine"].connect() as c:
        return repr(c.exec_driver_sql(sql).fetchall())


ENTRY_POINTS = {
    "connect": _run_connect,
    "cursor": _run_cursor,
    "attach_lockdown": _run_attach,
    "cli_query": _run_cli,
    "cli_query_stdin": _run_cli_stdin,
    "serve_simple": lambda ctx, sql: _run_pg(ctx, sql, extended=False),
    "serve_extended": lambda ctx, sql: _run_pg(ctx, sql, extended=True),
    # over 1 KiB: routed and planned in a planning process (dpsql.server._planning)
    "serve_simple_long": lambda ctx, sql: _run_pg(ctx, sql + LONG, extended=False),
    "serve_extended_long": lambda ctx, sql: _run_pg(ctx, sql + LONG, extended=True),
    # the statement as a SQL cursor's query (dpsql.server._cursors), short and long
    "serve_declare": lambda ctx, sql: _run_declared(ctx, sql, extended=False),
    "serve_declare_extended": lambda ctx, sql: _run_declared(ctx, sql, extended=True),
    "serve_declare_long": lambda ctx, sql: _run_declared(ctx, sql + LONG, extended=False),
    "sqlalchemy": _run_sqlalchemy,
}


@pytest.fixture
def ctx(request, trips_release, planted, capsys, monkeypatch):
    entry = request.node.callspec.params["entry"]
    out = {"release": trips_release, "capsys": capsys, "planted": planted,
           "monkeypatch": monkeypatch}
    needs = {"connect": "connection", "cursor": "connection", "attach_lockdown": "attached",
             "serve_simple": "libpq", "serve_extended": "libpq", "sqlalchemy": "engine",
             "serve_simple_long": "libpq", "serve_extended_long": "libpq",
             "serve_declare": "libpq", "serve_declare_extended": "libpq",
             "serve_declare_long": "libpq"}
    if entry in needs:
        out[needs[entry]] = request.getfixturevalue(needs[entry])
    return out


STDIN_EVERY = 4
"""``dpsql query r.duckdb -`` runs the statement it reads from standard input exactly as
``dpsql query r.duckdb <statement>`` runs its argument, and ``cli_query`` gets every
statement: the standard-input form gets every 4th, which shows that the reading path
holds the same lock-down at a quarter of the cost (each command opens the release,
about 0.25 s, so the full pair was half of this suite's time)."""

READS = [(entry, template) for entry in sorted(ENTRY_POINTS)
         for i, template in enumerate(ALL)
         if entry != "cli_query_stdin" or i % STDIN_EVERY == 0]


@pytest.mark.parametrize("entry,template", READS)
def test_no_entry_point_reads_a_file(entry, template, ctx):
    planted = ctx["planted"]
    sql = template.format(**planted)
    try:
        shown = ENTRY_POINTS[entry](ctx, sql)
        refused = False
    except Exception as err:  # noqa: BLE001  (every error's text is checked)
        shown = f"{type(err).__name__}: {err} {err.__cause__!r}"
        refused = True
    assert not _leaks(shown), shown
    assert refused, f"{entry} ran {sql!r}: {shown[:300]}"
    assert not (planted["dir"] and __import__("os").path.exists(planted["out"]))


def _host_paths(release) -> list[str]:  # noqa: ANN001
    import os

    return [os.path.expanduser("~").rstrip("/") + "/", os.getcwd(), str(release.parent)]


@pytest.mark.parametrize("sql", HOST_INFO)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_no_entry_point_shows_host_paths(entry, sql, ctx):
    """DuckDB's settings and errors name host directories: ``secret_directory`` is
    ``<home>/.duckdb/stored_secrets``, ``allowed_directories`` held the working
    directory's ``.tmp`` (in-process), ``duckdb_extensions()`` failed with "Cannot
    access directory <home>/.duckdb/extensions/...". Every entry point showed them (the
    server too: ``current_setting`` in a query over a logical table, ``duckdb_settings()``
    on the catalog database). Now such a ``current_setting`` is refused on the planner's
    route, ``duckdb_extensions()`` everywhere, and the catalog database has no path to
    show; what still runs (``duckdb_settings()``) shows neither the home nor the working
    directory. ``duckdb_databases()`` in a query naming a logical table ran on the
    session's own DuckDB over the server and showed the release file's path on the host
    (``/srv/.../trips.duckdb``); it is refused on the planner's route (the catalog
    database's has no path)."""
    try:
        shown = ENTRY_POINTS[entry](ctx, sql)
    except Exception as err:  # noqa: BLE001  (every error's text is checked)
        shown = f"{type(err).__name__}: {err} {err.__cause__!r}"
    leaked = [p for p in _host_paths(ctx["release"]) if p in shown]
    assert not leaked, (leaked, shown[:500])


HELPER_QUERIES = [  # the documented names (README, docs/sql.md, error messages)
    ("SELECT COUNT(*) FROM dp_level('dist', 1)", "2"),
    ("SELECT COUNT(*) FROM dp_level('trips.dist', 6)", "64"),
    ("SELECT COUNT(*) FROM dpsql_domain__mode", "6"),
    ("SELECT bins FROM dp_attribute_bounds('distance')", "64"),
    ("SELECT dp_range('dist', 'distance', 0, 256) - dp_cum('dist', 'distance', 256) = 0",
     "True"),
]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_the_documented_helpers_answer_at_every_entry_point(entry, ctx):
    for sql, expected in HELPER_QUERIES:
        shown = ENTRY_POINTS[entry](ctx, sql)
        assert expected in shown.replace("'t'", "True").replace("b't'", "True"), (sql, shown)


def test_the_locked_duckdb_connection_itself_reads_no_file(attached, planted):
    """Below the planner: raw SQL on the DuckDB connection that
    ``dpsql.attach(..., lockdown=True)`` locked. DuckDB runs what reads no file
    (``query('SELECT 1')``), and refuses every read, write and setting change."""
    ran = []
    for template in ALL:
        sql = template.format(**planted)
        try:
            shown = repr(attached.execute(sql).fetchall())
            ran.append(sql)
        except duckdb.Error as err:
            shown = str(err)
        assert not _leaks(shown), (sql, shown)
    import os
    assert not os.path.exists(planted["out"])
    assert all(attached.execute(f"SELECT current_setting('{s}')").fetchall()[0][0] == v
               for s, v in (("enable_external_access", False), ("lock_configuration", True)))
    assert len(ran) < len(ALL) // 4, ran  # most are refused by DuckDB itself


def test_the_markers_are_found_when_file_access_is_allowed(trips_release, planted, caplog):
    """The control: with the documented opt-out the same statements read the files, and
    the check above sees their content (so its silence means something)."""
    with caplog.at_level(logging.WARNING, logger="dpsql"):
        con = dpsql.connect(trips_release, allow_file_access=True)
    assert "file access allowed" in caplog.text
    with con:
        rows = con.execute(f"SELECT * FROM read_csv('{planted['secret']}')").fetchall()
        assert _leaks(repr(rows))
        rows = con.execute(f"SELECT who FROM read_parquet('{planted['raw']}') LIMIT 1"
                           ).fetchall()
        assert _leaks(repr(rows))
        got = con.execute("SELECT COUNT(*) FROM trips WHERE region IN (SELECT region FROM "
                          f"read_parquet('{planted['raw']}'))").fetchall()
        assert got and got[0][0] > 0
        assert not con.locked


def test_a_locked_connection_says_how_to_attach_more(trips_release, exact_release):
    with dpsql.connect(trips_release) as con:
        con.attach(exact_release, name="exact")  # before the first query: fine
        assert con.execute("SELECT COUNT(*) FROM exact").fetchall()
        assert con.locked
        with pytest.raises(dpsql.OperationalError, match="before any cursor"):
            con.attach(exact_release, name="again")
    duck = duckdb.connect()
    dpsql.attach(duck, str(trips_release), lockdown=True)
    with pytest.raises(dpsql.OperationalError, match="attach every release before locking"):
        dpsql.attach(duck, str(exact_release), name="exact")
    duck.close()


def test_cli_allow_file_access(trips_release, planted, capsys):
    sql = f"SELECT * FROM read_csv('{planted['secret']}')"
    assert main(["query", str(trips_release), sql]) == 1
    assert SECRET not in capsys.readouterr().out
    assert main(["query", str(trips_release), sql, "--allow-file-access"]) == 0
    assert SECRET in capsys.readouterr().out


def test_sqlalchemy_url_opt_out(trips_release, planted):
    eng = sa.create_engine(f"dpsql:///{trips_release}?allow_file_access=true")
    with eng.connect() as c:
        rows = c.exec_driver_sql(f"SELECT * FROM read_csv('{planted['secret']}')").fetchall()
    eng.dispose()
    assert _leaks(repr(rows))
    with pytest.raises(sa.exc.ArgumentError, match="true or false"):
        sa.create_engine(f"dpsql:///{trips_release}?allow_file_access=yes").connect()


@pytest.mark.parametrize("sql", STAR_FORMS)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_star_expressions_never_show_the_release_tables_columns(entry, sql, ctx):
    """``COLUMNS(*)``, ``* LIKE``, ``t.*``... on the private table are refused like
    ``SELECT *``, at every entry point: they would list, group or filter by the internal
    columns of the release table the query is rewritten onto."""
    with pytest.raises(Exception, match="not supported") as err:
        ENTRY_POINTS[entry](ctx, sql)
    assert "dp_parent" not in str(err.value) and "dp_fanout" not in str(err.value)


def _shape(entry, ctx, sql) -> tuple[list[str], list]:  # noqa: ANN001
    """(column names, rows) of ``sql`` at ``entry``."""
    if entry in ("connect", "cursor"):
        cur = ctx["connection"].cursor()
        cur.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()
    if entry == "attach_lockdown":
        rel = dpsql.sql(ctx["attached"], sql)
        return list(rel.columns), rel.fetchall()
    if entry == "sqlalchemy":
        with ctx["engine"].connect() as c:
            res = c.exec_driver_sql(sql)
            return list(res.keys()), res.fetchall()
    pg = ctx["libpq"]
    sql += LONG if entry.endswith("_long") else ""
    if "declare" in entry:
        res = pg.exec_(f"DECLARE shape_c CURSOR WITH HOLD FOR {sql}".encode())
        if res.status != psycopg.pq.ExecStatus.FATAL_ERROR:
            res = pg.exec_(b"FETCH ALL FROM shape_c")
        pg.exec_(b"CLOSE ALL")
    else:
        res = pg.exec_params(sql.encode(), []) if "extended" in entry else \
            pg.exec_(sql.encode())
    if res.status == psycopg.pq.ExecStatus.FATAL_ERROR:
        raise RuntimeError((res.error_message or b"").decode(errors="replace"))
    return [res.fname(i).decode() for i in range(res.nfields)], [None] * res.ntuples


INTERNAL = ("dp_var", "dp_parent", "dp_fanout", "dp_bias")
PUBLIC_TRIPS = ["region", "province", "city", "mode", "distance", "age", "dp_count"]


@pytest.mark.parametrize("entry", sorted(set(ENTRY_POINTS) - {"cli_query", "cli_query_stdin"}))
def test_limit_0_probes_show_the_public_columns_only(entry, ctx):
    """A row-level ``LIMIT 0`` probe of a logical table (Metabase's ``SELECT TRUE AS "_"
    FROM "public"."trips" WHERE 1 <> 1 LIMIT 0``, a tool's ``SELECT * FROM t LIMIT 0``)
    is answered: the logical table's public columns, no row. Star forms list no internal
    column; naming one (dp_var, dp_parent ...) or a level table is still refused."""
    assert _shape(entry, ctx, 'SELECT TRUE AS "_" FROM trips WHERE 1 <> 1 LIMIT 0') == (
        ["_"], [])
    assert _shape(entry, ctx, "SELECT * FROM trips LIMIT 0") == (PUBLIC_TRIPS, [])
    assert _shape(entry, ctx, "SELECT * FROM (SELECT * FROM dist) s LIMIT 0") == (
        ["distance", "dp_count"], [])
    assert _shape(entry, ctx, "SELECT COLUMNS('dp_.*') FROM trips LIMIT 0") == (
        ["dp_count"], [])
    assert _shape(entry, ctx, "SELECT t.* FROM geo_mode t LIMIT 0")[0] == [
        "region", "province", "city", "mode", "dp_count"]
    for sql in ("SELECT dp_var FROM trips LIMIT 0", "SELECT dp_parent, dp_fanout, dp_bias "
                "FROM geo_mode LIMIT 0", "SELECT * FROM trips LIMIT 1",
                "SELECT * FROM trips WHERE 1 <> 1", "SELECT * FROM geo_mode__l1 t, trips "
                "LIMIT 0"):
        with pytest.raises(Exception) as err:
            _shape(entry, ctx, sql)
        shown = {n for n in INTERNAL if n in str(err.value) and n not in sql}
        assert not shown, err.value  # no internal column it did not name itself


@pytest.mark.parametrize("sql", VOLATILE_FORMS)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_volatile_functions_are_refused_at_every_entry_point(entry, sql, ctx):
    with pytest.raises(Exception, match="is volatile"):
        ENTRY_POINTS[entry](ctx, sql)


# statements sqlglot parses as a raw Command (or not at all), logging a WARNING that
# Python printed to the terminal before dpsql's refusal
NOT_QUERIES = ["CALL pragma_version()", "PRAGMA version", "SET threads = 1",
               "RESET threads", "INSTALL httpfs", "LOAD httpfs", "ATTACH 'x.db' AS r",
               "COPY (SELECT 1) TO 'x.csv'", "EXPORT DATABASE 'x'", "CHECKPOINT",
               "FORCE CHECKPOINT", "SELECT 1; CALL pragma_version()"]


@pytest.mark.parametrize("sql", NOT_QUERIES)
@pytest.mark.parametrize("entry", sorted(set(ENTRY_POINTS) - {"attach_lockdown"}))
def test_non_queries_are_refused_without_a_sqlglot_warning(entry, sql, ctx, caplog):
    """Refused at every entry point (the raw locked DuckDB connection is DuckDB's own
    business), and nothing is logged on the way: no "contains unsupported syntax.
    Falling back to parsing as a 'Command'" from sqlglot."""
    with caplog.at_level(logging.WARNING):
        with pytest.raises(Exception) as info:
            ENTRY_POINTS[entry](ctx, sql)
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")], caplog.text
    text = str(info.value)
    assert "not supported" in text or "not allowed" in text or "one statement" in text \
        or "statements given" in text or "several statements" in text, text


@pytest.mark.parametrize("sql, says", [
    ("SHOW ALL", "SHOW statements are not supported"),
    ("VALUES", "'VALUES' is not a query"),  # it said "COLUMN statements are not supported"
    ("TABLE", "'TABLE' is not a query")])
@pytest.mark.parametrize("entry", ["connect", "cursor", "cli_query", "cli_query_stdin",
                                   "sqlalchemy"])
def test_odd_statements_get_a_clear_refusal_in_process(entry, sql, says, ctx):
    """``SHOW ALL`` made sqlglot's parser raise a bare IndexError ("list index out of
    range") at every in-process entry point; it is the SHOW refusal. (Over the server
    SHOW ALL lists the session's settings, as PostgreSQL does.) A bare word is no
    statement, not a "COLUMN statement"."""
    with pytest.raises(Exception) as info:
        ENTRY_POINTS[entry](ctx, sql)
    assert says in str(info.value), info.value
    assert not isinstance(info.value, IndexError)


@pytest.mark.parametrize("sql", ['SELECT "abc', "SELECT COUNT(*) FROM trips WHERE mode = 'a",
                                 "SELECT 1 FROM trips WHERE $$x"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_statement_that_does_not_tokenize_is_a_syntax_error(entry, sql, ctx):
    """An unterminated quote: ``dpsql query`` (with the SQL as an argument or, as a query
    kept in a file, on standard input) crashed with sqlglot's TokenError and a traceback
    while it looked for the outer SELECT to add interval columns to; every other entry
    point said "syntax error". All do now."""
    with pytest.raises(Exception) as info:
        ENTRY_POINTS[entry](ctx, sql)
    assert "syntax error" in str(info.value).lower() or "unterminated" in str(
        info.value).lower(), (type(info.value), info.value)
    assert "TokenError" not in type(info.value).__name__


def test_cli_call_prints_the_refusal_only(trips_release):
    """The real command: stderr holds the error line, not sqlglot's warning first."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "query", str(trips_release),
                          "CALL pragma_version()"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    assert "unsupported syntax" not in out.stderr and "Command" not in out.stderr
    assert "error: CALL statements are not supported" in out.stderr


@pytest.mark.parametrize("query", [
    "DECLARE inner_c CURSOR WITH HOLD FOR SELECT 1", "SET application_name = 'changed'",
    "RESET ALL", "SHOW ALL", "FETCH ALL FROM inner_c", "CLOSE ALL", "DISCARD ALL",
    "DEALLOCATE ALL", "BEGIN",
    "DECLARE c CURSOR WITH HOLD FOR " * 1500 + "SELECT 1"])
def test_a_cursor_is_declared_over_a_query_only(libpq, query):
    """A SQL cursor's query runs through the session like any statement, so ``DECLARE c
    CURSOR FOR <session command>`` ran the command: ``DECLARE c ... FOR DECLARE d ...``
    declared ``d`` (1,500 such prefixes exhausted the server's recursion: XX000
    "maximum recursion depth exceeded", and a traceback in its log), ``FOR SET ...``
    changed the setting before "its query returns no rows", ``FOR SHOW ALL`` was
    declared. PostgreSQL refuses them all as a syntax error (42601), with no effect."""
    res = libpq.exec_(f"DECLARE outer_c CURSOR WITH HOLD FOR {query}".encode())
    try:
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"42601"
        assert b"needs a query" in (res.error_message or b""), res.error_message
        for name in (b"outer_c", b"inner_c", b"c"):  # no cursor was declared
            gone = libpq.exec_(b"FETCH ALL FROM " + name)
            assert gone.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"34000", name
        shown = libpq.exec_(b"SHOW application_name")
        assert shown.get_value(0, 0) != b"changed"
        assert libpq.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        libpq.exec_(b"ROLLBACK")
        libpq.exec_(b"CLOSE ALL")


@pytest.mark.parametrize("query", ["DECLARE copied_c CURSOR WITH HOLD FOR SELECT 1",
                                   "MOVE ALL FROM copied_c", "CLOSE ALL"])
def test_copy_runs_a_query_only(libpq, query):
    """``COPY (query) TO STDOUT`` refused session commands before they ran, but not the
    cursor commands: ``COPY (DECLARE c CURSOR WITH HOLD FOR SELECT 1) TO STDOUT`` said
    "needs a query that returns rows" after declaring ``c``. Nothing runs now."""
    libpq.exec_(b"DECLARE kept_c CURSOR WITH HOLD FOR SELECT 1")
    try:
        res = libpq.exec_(f"COPY ({query}) TO STDOUT".encode())
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert b"needs a query that returns rows" in (res.error_message or b"")
        kept = libpq.exec_(b"FETCH ALL FROM kept_c")  # not closed
        assert kept.status == psycopg.pq.ExecStatus.TUPLES_OK, kept.error_message
        gone = libpq.exec_(b"FETCH ALL FROM copied_c")  # not declared
        assert gone.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"34000"
    finally:
        libpq.exec_(b"CLOSE ALL")
