"""Transaction blocks and savepoints on ``dpsql serve`` as PostgreSQL keeps them (each
expectation was checked against a PostgreSQL 15 server). A release is read-only, so a
transaction is bookkeeping, but clients rely on its answers: SQLAlchemy's
``begin_nested()`` and psycopg's nested ``transaction()`` are savepoints, and a client
that lost track of its savepoints is told so (3B001) rather than answered as if they
were there."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

IDLE, INTRANS, INERROR = (psycopg.pq.TransactionStatus.IDLE,
                          psycopg.pq.TransactionStatus.INTRANS,
                          psycopg.pq.TransactionStatus.INERROR)


def _state(con: psycopg.Connection, sql: str) -> str | None:
    try:
        con.execute(sql)
    except psycopg.Error as err:
        return err.sqlstate
    return None


def test_savepoints_are_kept_as_postgresql_keeps_them(server):
    """ROLLBACK TO or RELEASE of a savepoint the block does not have is 3B001 and fails
    the block; SAVEPOINT, RELEASE and ROLLBACK TO outside a block are 25P01. All were
    accepted."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        assert _state(con, "SAVEPOINT a") == "25P01"
        assert _state(con, "RELEASE SAVEPOINT a") == "25P01"
        assert _state(con, "ROLLBACK TO SAVEPOINT a") == "25P01"
        assert con.info.transaction_status == IDLE
        con.execute("BEGIN")
        assert _state(con, "ROLLBACK TO SAVEPOINT nope") == "3B001"
        assert con.info.transaction_status == INERROR
        con.execute("ROLLBACK")
        con.execute("BEGIN")
        for sql in ("SAVEPOINT a", "SAVEPOINT \"B\"", "SAVEPOINT c"):
            con.execute(sql)
        assert _state(con, "SELECT nope FROM nowhere") is not None
        assert con.info.transaction_status == INERROR
        con.execute("ROLLBACK TO \"B\"")  # back before the error; c goes, B stays
        assert con.info.transaction_status == INTRANS
        assert _state(con, "RELEASE SAVEPOINT c") == "3B001"
        assert _state(con, "ROLLBACK TO B") == "3B001"  # unquoted, b: not "B"
        con.execute("ROLLBACK")
        con.execute("BEGIN")
        con.execute("SAVEPOINT a")
        con.execute("SAVEPOINT b")
        con.execute("RELEASE SAVEPOINT a")  # a and everything after it
        assert _state(con, "ROLLBACK TO SAVEPOINT b") == "3B001"
        con.execute("ROLLBACK")
        con.execute("BEGIN")
        con.execute("SAVEPOINT a")
        con.execute("COMMIT")  # the block's savepoints end with it
        con.execute("BEGIN")
        assert _state(con, "RELEASE a") == "3B001"
        con.execute("ROLLBACK")


def test_nested_transactions_of_psycopg_and_sqlalchemy(server):
    with psycopg.connect(_dsn(server)) as con:
        with con.transaction():
            with pytest.raises(psycopg.Error):
                with con.transaction():  # a savepoint, rolled back to
                    con.execute("SELECT nope FROM nowhere")
            assert con.execute("SELECT COUNT(*) > 1000 FROM trips").fetchone() == (True,)
            with con.transaction():
                assert con.execute("SELECT 1").fetchone() == (1,)
    engine = sa.create_engine(f"postgresql+psycopg://analyst@127.0.0.1:{server.port}/"
                              f"{server.database}?sslmode=disable")
    with engine.connect() as conn:
        with conn.begin():
            nested = conn.begin_nested()
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
            nested.rollback()
            nested = conn.begin_nested()
            nested.commit()
            assert conn.execute(sa.text("SELECT COUNT(*) > 1000 FROM trips")).scalar()
    engine.dispose()


def _show(con: psycopg.Connection, name: str) -> str:
    return con.execute(f"SHOW {name}").fetchone()[0]


def test_a_rolled_back_set_is_undone_and_set_local_ends_with_its_block(server):
    """PostgreSQL undoes the SETs of a block that rolls back (or fails), and a SET LOCAL
    ends with its block, commit included; outside a block SET LOCAL does nothing. Every
    SET lasted for the session: after ``BEGIN; SET application_name = 'x'; ROLLBACK`` it
    was still 'x' (and psycopg was told so)."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        timeout = _show(con, "statement_timeout")
        con.execute("SET application_name = 'before'")
        con.execute("BEGIN")
        con.execute("SET application_name = 'rolled back'")
        con.execute("SET statement_timeout = '1s'")
        con.execute("ROLLBACK")
        assert _show(con, "application_name") == "before"
        assert con.info.parameter_status("application_name") == "before"
        assert _show(con, "statement_timeout") == timeout
        con.execute("BEGIN")
        con.execute("SET application_name = 'failed'")
        assert _state(con, "SELECT nope FROM nowhere") is not None
        con.execute("COMMIT")  # of a failed block: a rollback
        assert _show(con, "application_name") == "before"
        con.execute("BEGIN")
        con.execute("SET LOCAL application_name = 'local'")
        con.execute("SET LOCAL statement_timeout = '1s'")
        con.execute("SET TimeZone = 'Europe/Rome'")
        assert (_show(con, "application_name"), _show(con, "statement_timeout")) == (
            "local", "1s")
        con.execute("COMMIT")
        assert _show(con, "application_name") == "before"
        assert _show(con, "statement_timeout") == timeout
        assert _show(con, "TimeZone") == "Europe/Rome"  # a plain SET: committed
        con.execute("BEGIN")
        con.execute("SET application_name = 'kept'")
        con.execute("SAVEPOINT s")
        con.execute("SET application_name = 'undone'")
        con.execute("SET LOCAL statement_timeout = '2s'")
        con.execute("ROLLBACK TO SAVEPOINT s")  # the SETs since the savepoint: undone
        assert (_show(con, "application_name"), _show(con, "statement_timeout")) == (
            "kept", timeout)
        con.execute("COMMIT")
        assert _show(con, "application_name") == "kept"
        con.execute("SET application_name = 'before'")
        con.execute("SET LOCAL application_name = 'outside a block'")
        assert _show(con, "application_name") == "before"
        con.execute("BEGIN")
        con.execute("RESET application_name")
        con.execute("COMMIT")
        assert _show(con, "application_name") == ""


def test_rollback_to_a_savepoint_closes_the_cursors_declared_since(server):
    """PostgreSQL closes the cursors opened after a savepoint that is rolled back to;
    those declared before it stay. They all stayed."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("BEGIN")
        con.execute("DECLARE before_sp CURSOR FOR SELECT 1")
        con.execute("SAVEPOINT s")
        con.execute("DECLARE after_sp CURSOR FOR SELECT 2")
        con.execute("ROLLBACK TO SAVEPOINT s")
        assert _state(con, "FETCH after_sp") == "34000"
        con.execute("ROLLBACK TO SAVEPOINT s")
        assert con.execute("FETCH before_sp").fetchall() == [(1,)]
        con.execute("ROLLBACK")


@pytest.mark.parametrize("prepared", [False, True], ids=["simple", "extended"])
def test_transaction_commands_out_of_place_warn_as_postgresql(server, prepared):
    """PostgreSQL answers COMMIT or ROLLBACK outside a block, BEGIN inside one and SET
    LOCAL outside one with a WARNING (25P01, 25001) and goes on; nothing was said, so a
    client that lost track of its transaction (psql prints the warning, JDBC keeps it as
    a SQLWarning) was never told."""
    heard: list[tuple[str, str, str]] = []
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.add_notice_handler(lambda d: heard.append(
            (d.severity_nonlocalized, d.sqlstate, d.message_primary)))
        for sql in ("COMMIT", "ROLLBACK", "BEGIN", "BEGIN", "COMMIT",
                    "SET LOCAL application_name = 'x'"):
            con.execute(sql, prepare=prepared)
        assert heard == [
            ("WARNING", "25P01", "there is no transaction in progress"),
            ("WARNING", "25P01", "there is no transaction in progress"),
            ("WARNING", "25001", "there is already a transaction in progress"),
            ("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks")]
        assert con.info.transaction_status == IDLE
