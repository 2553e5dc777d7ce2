"""``dpsql serve`` resource limits with a real server and real psycopg clients: the
statement timeout (57014), the per-session memory cap (53200), and that a client cannot
lift either (SET/RESET/PRAGMA refused, DuckDB's configuration locked)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from dpsql.errors import ProgrammingError
from dpsql.server import serve, sqlstate_of
from dpsql.server._limits import (OutOfMemoryError, QueryCanceledError,
                                  StatementTimeoutError, Watchdog, parse_pg_timeout)
from tests.bi.pg_client import cancelled_errors
from tests.bi.test_serve import _dsn, _last_result

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

TIMEOUT = 1.5  # seconds: the server's limit in these tests
# ~1e4 s on one thread (0.3 s per 1e8 rows): it can only end by being interrupted
LONG = "SELECT sum(range % 7) FROM range(1000000000000)"
# the same scan over a logical table's rows goes through the dpsql planner route
LONG_PLANNER = ("SELECT COUNT(*) FROM trips WHERE region IN (SELECT 'R' || (range % 7) "
                "FROM range(1000000000000) WHERE range % 1000003 = -1)")
# a hash aggregate over 4M distinct keys: far more than 50 MB (no spilling), and well
# under the default 1GB (duckdb 2.0.1 measured: fails at 50MB, answers at 300MB; 40M keys
# outgrew 1GB between duckdb 2.0.0 and 2.0.1, so keep the margin on both sides)
BIG = "SELECT count(*) FROM (SELECT range AS k, count(*) FROM range(4000000) GROUP BY k)"


@pytest.fixture(scope="module")
def limited(trips_release):
    srv = serve(trips_release, port=0, statement_timeout=TIMEOUT, memory_limit="50MB")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def capped(trips_release):
    """The 50 MB cap without the short timeout: on a loaded machine BIG can take longer
    than 1.5 s to reach the cap, and the test would see 57014 instead of 53200."""
    srv = serve(trips_release, port=0, statement_timeout=600, memory_limit="50MB")
    yield srv
    srv.stop()


def _duckdb_settings(con) -> dict[str, str]:
    """DuckDB's own settings, as a client sees them (catalog route: duckdb_settings())."""
    return dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN ("
                            "'memory_limit', 'threads', 'temp_directory', "
                            "'max_temp_directory_size')").fetchall())


def _timed_out(con, sql):
    start = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled) as info:
        con.execute(sql)
    return info.value, time.monotonic() - start


def test_timeout_interrupts_a_long_query_and_the_session_survives(limited):
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        err, took = _timed_out(con, LONG)
        assert err.sqlstate == "57014"  # interrupted, not left to run ~1e4 s
        assert took >= TIMEOUT  # never before its deadline (load only makes it later)
        msg = str(err)
        assert "1.5-second limit" in msg and "--statement-timeout" in msg
        assert "narrow the query" in msg
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_timeout_on_the_planner_route(limited):
    """A statement naming a logical table runs through dpsql's planner, which wraps DuckDB
    errors: the interrupt is still recognised as the timeout (57014, not 58000)."""
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        err, _ = _timed_out(con, LONG_PLANNER)
        assert "1.5-second limit" in str(err)
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def test_timeout_with_bound_parameters(limited, monkeypatch):
    """The extended protocol (Parse/Bind/Describe/Execute, psycopg with parameters) is
    timed too, and a statement is not run twice past its limit: the server's own
    watchdog counts the timed statements that expired (no wall-clock bound, which a
    loaded machine would break)."""
    expired = []
    real = Watchdog.statement

    @contextlib.contextmanager
    def counted(self, timeout):
        with real(self, timeout) as stmt:
            try:
                yield stmt
            finally:
                if stmt.expired:
                    expired.append(stmt)

    monkeypatch.setattr(Watchdog, "statement", counted)
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        with pytest.raises(psycopg.errors.QueryCanceled, match="1.5-second limit"):
            con.execute("SELECT sum(range %% %s) FROM range(1000000000000)", [7])
        assert len(expired) == 1
        assert con.execute("SELECT %s + 1", [41]).fetchall() == [(42,)]
        assert len(expired) == 1


@pytest.mark.parametrize("sql,names", [
    (LONG.replace("sum(range % 7)", "sum(range % $1) AS s"), [b"s"]),
    (LONG_PLANNER.replace("COUNT(*)", "COUNT(*) AS n, dp_stderr() AS se")
     .replace("% 7", "% $1"), [b"n", b"se"]),
], ids=["catalog", "planner"])
def test_describe_binds_and_never_runs_the_statement(limited, sql, names):
    """Describe(statement) of a statement that would run for hours answers its columns
    (it plans and binds, and runs nothing: it used to run the statement, hit the timeout
    and answer NoData), and the Execute that follows is the one run that is timed."""
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        pgconn = con.pgconn
        pgconn.send_prepare(b"long", sql.encode())
        assert _last_result(pgconn).status == psycopg.pq.ExecStatus.COMMAND_OK
        pgconn.send_describe_prepared(b"long")
        desc = _last_result(pgconn)
        assert desc.status == psycopg.pq.ExecStatus.COMMAND_OK
        assert [desc.fname(i) for i in range(desc.nfields)] == names
        pgconn.send_query_prepared(b"long", [b"7"])
        res = _last_result(pgconn)
        assert res.status == psycopg.pq.ExecStatus.FATAL_ERROR
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"57014"
        assert b"1.5-second limit" in res.error_message
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def test_cancel_reaches_the_planner_route(limited):
    """A CancelRequest stops a statement on the planner route too (the planner runs it on
    its own DuckDB cursor, which interrupting the session's connection did not reach), and
    it says "user request", not timeout."""
    with serve(limited.release, port=0, statement_timeout=0) as srv, \
            psycopg.connect(_dsn(srv), autocommit=True) as con:
        errors = cancelled_errors(con, LONG_PLANNER)
        assert [e.sqlstate for e in errors] == ["57014"]
        assert "user request" in str(errors[0]) and "limit" not in str(errors[0])
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]


def test_timeout_in_a_transaction_block_fails_the_block(limited):
    with psycopg.connect(_dsn(limited)) as con:  # not autocommit: psycopg sends BEGIN
        _timed_out(con, LONG)
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            con.execute("SELECT 1")
        con.rollback()
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert con.execute("SELECT 1").fetchall() == [(1,)]


def _ran_or_ran_out(con, sql: str) -> list | None:
    """The rows of ``sql``, or None if the statement timeout stopped it after it had run
    its own full limit (a slow, loaded machine). Stopped any earlier, it was hit by an
    earlier statement's timer: that fails. Only a lower bound on the elapsed time is
    asserted, which load can only make longer."""
    start = time.monotonic()
    try:
        return con.execute(sql).fetchall()
    except psycopg.errors.QueryCanceled:
        assert time.monotonic() - start >= TIMEOUT * 0.98, "interrupted before its limit"
        return None


def test_timer_never_hits_a_later_statement(limited):
    """Quick statements back to back, each ending just before or across the moment an
    earlier statement's timer would have fired: none is interrupted before its own limit
    (on a loaded machine one may run out of its own time: that is not a leftover timer)."""
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        end = time.monotonic() + 2.5 * TIMEOUT
        n = 0
        while time.monotonic() < end or n < 2:  # at least two, however slow
            rows = _ran_or_ran_out(con, "SELECT sum(range % 7) FROM range(3000000)")
            assert rows in (None, [(8999994,)])
            n += 1
        # a statement of ~0.6 TIMEOUT (on an idle machine) right after one of the same
        for _ in range(2):
            _ran_or_ran_out(con, "SELECT sum(range % 7) FROM range(300000000)")


def test_watchdog_token_race():
    """The clock interrupts only while its own statement runs: a statement that ends
    before its deadline is never interrupted, not even by a late timer thread."""
    calls = []
    dog = Watchdog(lambda: calls.append(time.monotonic()))
    for _ in range(50):
        with dog.statement(0.01):
            pass
    with dog.statement(0.01) as stmt:
        deadline = time.monotonic() + 60  # the clock thread may be slow to run under load
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
    assert stmt.expired and calls  # expired: interrupted, then again every 50 ms
    fired = len(calls)
    time.sleep(0.15)
    assert len(calls) == fired  # nothing after the statement ended
    with dog.statement(0) as stmt:  # 0 = no limit: never on the clock
        time.sleep(0.05)
    assert not stmt.expired and len(calls) == fired


def test_clock_orders_deadlines_across_sessions():
    """One clock serves every session: a later statement with an earlier deadline is
    interrupted first, and each interrupt reaches its own session only."""
    fired = []
    slow = Watchdog(lambda: fired.append("slow"))
    fast = Watchdog(lambda: fired.append("fast"))
    done = threading.Event()

    started = threading.Event()

    def run_slow():
        with slow.statement(120):  # far beyond the test, however loaded the machine
            started.set()
            done.wait(60)

    t = threading.Thread(target=run_slow)
    t.start()
    assert started.wait(60)
    with fast.statement(0.1):
        deadline = time.monotonic() + 60
        while not fired and time.monotonic() < deadline:
            time.sleep(0.01)
    assert fired and set(fired) == {"fast"}  # the slow statement's deadline is not due
    done.set()
    t.join(60)
    assert "slow" not in fired  # it ended long before its deadline


def test_client_can_lower_but_not_raise_the_timeout(limited):
    with psycopg.connect(_dsn(limited), autocommit=True) as con:
        assert con.execute("SHOW statement_timeout").fetchone() == ("1500ms",)
        for value in ("0", "'1h'", "DEFAULT"):
            con.execute(f"SET statement_timeout = {value}")
            assert con.execute("SHOW statement_timeout").fetchone() == ("1500ms",)
        err, _ = _timed_out(con, LONG)  # the server's limit still holds
        assert "1.5-second limit" in str(err)
        con.execute("SET statement_timeout = 300")  # milliseconds, as in PostgreSQL
        assert con.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        err, took = _timed_out(con, LONG)
        assert "0.3-second limit" in str(err) and took < TIMEOUT
        con.execute("RESET statement_timeout")
        assert con.execute("SHOW statement_timeout").fetchone() == ("1500ms",)
        with pytest.raises(psycopg.errors.DataException, match="statement_timeout"):
            con.execute("SET statement_timeout = 'soon'")


def test_cancel_is_not_reported_as_a_timeout():
    err = QueryCanceledError("canceling statement due to user request")
    assert sqlstate_of(err) == sqlstate_of(StatementTimeoutError("x")) == "57014"
    assert sqlstate_of(OutOfMemoryError("x")) == "53200"


def test_memory_cap_gives_53200_and_the_session_survives(capped):
    with psycopg.connect(_dsn(capped), autocommit=True) as con:
        with pytest.raises(psycopg.errors.OutOfMemory) as info:
            con.execute(BIG)
        assert info.value.sqlstate == "53200"
        msg = str(info.value)
        assert "memory limit (50MB)" in msg and "--memory-limit" in msg
        assert "temp_directory" not in msg  # DuckDB's advice is for DuckDB users, not here
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchall() == [(True,)]
        limits = _duckdb_settings(con)
        assert limits["memory_limit"].endswith("MiB")
        assert float(limits["memory_limit"].split()[0]) < 50
        # no spilling to the server's disk
        assert limits["temp_directory"] == "" and limits["max_temp_directory_size"] == "0 bytes"


def test_a_huge_result_is_capped_too(capped):
    """DuckDB's cap does not cover the Python rows a result becomes (fetchall() of this
    took 18 GB under a 50 MB DuckDB cap): the server counts them against the same cap."""
    with psycopg.connect(_dsn(capped), autocommit=True) as con:
        with pytest.raises(psycopg.errors.OutOfMemory) as info:
            con.execute("SELECT range, range::VARCHAR FROM range(100000000)")
        # refused early, not after 1e8 rows: the message says how far the fetch got
        fetched = int(re.search(r"more than (\d+) rows", str(info.value)).group(1))
        assert fetched < 10_000_000
        assert "memory limit (50MB)" in str(info.value) and "LIMIT" in str(info.value)
        rows = con.execute("SELECT range, range::VARCHAR FROM range(100000)").fetchall()
        assert len(rows) == 100000 and rows[-1] == (99999, "99999")  # a fair result passes
        assert con.execute("SELECT COUNT(*) FROM pg_catalog.pg_class WHERE relname = "
                           "'trips'").fetchall() == [(1,)]


def test_the_same_query_runs_under_the_default_cap(trips_release):
    """The cap, not the query, is what failed above: with 1GB it answers."""
    with serve(trips_release, port=0, statement_timeout=30) as srv, \
            psycopg.connect(_dsn(srv), autocommit=True) as con:
        assert con.execute(BIG).fetchall() == [(4000000,)]
        assert con.execute("SHOW statement_timeout").fetchone() == ("30s",)


@pytest.mark.parametrize("sql,code", [
    ("SET memory_limit = '100GB'", "42501"),
    ("SET threads = 64", "42501"),
    ("SET threads TO 64", "42501"),
    ("SET GLOBAL memory_limit = '100GB'", "42501"),
    ("SET SESSION max_memory = '100GB'", "42501"),
    ("SET temp_directory = '/tmp/x'", "42501"),
    ("SET max_temp_directory_size = '100GB'", "42501"),
    ("RESET memory_limit", "42501"),
    ("RESET threads", "42501"),
    ("SET lock_configuration = false", "42501"),
    ("PRAGMA memory_limit = '100GB'", "25006"),
    ("PRAGMA threads = 64", "25006"),
    ("SELECT 1; SET memory_limit = '100GB'", "42501"),  # each statement on its own
    ("SELECT $$x$$; SET threads = 64", "42501"),
    ("CALL pragma_version()", "25006"),
])
def test_clients_cannot_lift_the_limits(capped, sql, code):
    with psycopg.connect(_dsn(capped), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as info:
            con.execute(sql)
        assert info.value.sqlstate == code
        if code == "42501":
            assert "set by the server operator" in str(info.value)
        got = _duckdb_settings(con)  # the catalog database's: 2 threads
        assert float(got["memory_limit"].split()[0]) < 50 and got["threads"] == "2"
        with pytest.raises(psycopg.errors.OutOfMemory):  # the cap still holds
            con.execute(BIG)


def test_session_duckdb_is_capped_and_locked(limited):
    """The planner route's DuckDB (the session's own) has the cap and one thread."""
    sess = limited._conn.new_session()
    try:
        got = sess._duck.execute("SELECT current_setting('memory_limit'), "
                                 "current_setting('threads'), "
                                 "current_setting('temp_directory')").fetchone()
        assert float(got[0].split()[0]) < 50 and got[1:] == (1, "")
        with pytest.raises(Exception, match="locked"):
            sess._duck.execute("SET memory_limit = '100GB'")
    finally:
        sess.close()


@pytest.mark.parametrize("kw,words", [
    ({"statement_timeout": -1}, "statement_timeout -1 must be a number of seconds"),
    ({"statement_timeout": float("nan")}, "statement_timeout nan"),
    ({"statement_timeout": "5"}, "statement_timeout '5'"),
    ({"memory_limit": "lots"}, "memory_limit 'lots' is not a size"),
    ({"memory_limit": ""}, "memory_limit '' must be a size"),
])
def test_bad_limits_are_refused(trips_release, kw, words):
    with pytest.raises(ProgrammingError, match=words):
        serve(trips_release, port=0, **kw)


def test_pg_timeout_units():
    assert parse_pg_timeout("5000") == 5.0
    assert parse_pg_timeout("5s") == parse_pg_timeout(" 5 S ") == 5.0
    assert parse_pg_timeout("2min") == 120.0
    assert parse_pg_timeout("250ms") == 0.25
    assert parse_pg_timeout("-1") is None and parse_pg_timeout("5 parsecs") is None


def test_cli_passes_the_limits(trips_release):
    """The CLI's options and env vars reach serve(): a bad value is refused at start-up."""
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "serve", str(trips_release),
                          "--port", "0", "--memory-limit", "lots"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "memory_limit 'lots' is not a size" in out.stderr
    env = {**os.environ, "DPSQL_STATEMENT_TIMEOUT": "-2"}
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "serve", str(trips_release),
                          "--port", "0"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and "statement_timeout -2.0 must be" in out.stderr
