"""Settings a client changes with ``SET`` on ``dpsql serve``, as PostgreSQL reports and
honours them."""

from __future__ import annotations

import psycopg
import pytest

from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def test_a_changed_reported_setting_sends_parameter_status(server):
    """PostgreSQL sends ParameterStatus when a reported setting (application_name,
    DateStyle, TimeZone, ...) changes; drivers keep their copy from it (psycopg's
    ``info.parameter_status``, JDBC's ``getClientInfo``). None was sent: psycopg still
    said '' after ``SET application_name = 'dashboard'``."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("SET application_name = 'dashboard'")
        assert con.info.parameter_status("application_name") == "dashboard"
        with con.transaction():  # inside a block
            con.execute("SET application_name = 'in a block'")
        assert con.info.parameter_status("application_name") == "in a block"
        con.execute("SET TimeZone = 'UTC'")
        assert con.info.parameter_status("TimeZone") == "UTC"
        assert con.execute("SHOW application_name").fetchone() == ("in a block",)


@pytest.mark.parametrize("value", ["UTF8", "'utf8'", "'UTF-8'", "unicode", "DEFAULT"])
def test_client_encoding_utf8_is_accepted(server, value):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute(f"SET client_encoding = {value}")
        assert con.execute("SHOW client_encoding").fetchone() == ("UTF8",)


@pytest.mark.parametrize("sql", ["SET client_encoding = 'LATIN1'",
                                 "SET client_encoding TO 'WIN1252'", "SET NAMES 'SQL_ASCII'"])
def test_another_client_encoding_is_refused(server, sql):
    """The server sends UTF-8 only; a client that asked for LATIN1 was told SET and then
    decoded UTF-8 bytes as WIN1252 (a region named 'Émilie' arrived as 'Ã‰milie').
    Now 0A000, which says so, and the encoding stays UTF8."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            con.execute(sql)
        assert err.value.sqlstate == "0A000" and "UTF8" in str(err.value)
        assert con.execute("SHOW client_encoding").fetchone() == ("UTF8",)
        assert con.info.parameter_status("client_encoding") == "UTF8"


def test_reset_restores_the_session_default(server):
    """RESET name gave back nothing: after SET application_name = 'x'; RESET
    application_name, SHOW said 'x' (RESET ALL likewise kept every SET). Now the session
    default comes back: the value the client sent at start-up (psycopg's
    application_name=mytool: SHOW said '' from the start), else the server's; RESET ALL
    and DISCARD ALL restore them all (a pooler's reset)."""
    with psycopg.connect(_dsn(server, application_name="mytool"), autocommit=True) as con:
        assert con.execute("SHOW application_name").fetchone() == ("mytool",)
        assert con.info.parameter_status("application_name") == "mytool"
        default_zone = con.execute("SHOW TimeZone").fetchone()
        con.execute("SET application_name = 'x'")
        con.execute("RESET application_name")
        assert con.execute("SHOW application_name").fetchone() == ("mytool",)
        assert con.info.parameter_status("application_name") == "mytool"
        for reset in ["RESET ALL", "DISCARD ALL"]:
            con.execute("SET application_name = 'x'")
            con.execute("SET TimeZone = 'Asia/Tokyo'")
            con.execute("SET my.custom = 'y'")
            con.execute(reset)
            assert con.execute("SHOW application_name").fetchone() == ("mytool",)
            assert con.execute("SHOW TimeZone").fetchone() == default_zone
            with pytest.raises(psycopg.Error) as err:
                con.execute("SHOW my.custom")
            assert err.value.sqlstate == "42704"
        con.execute("BEGIN")
        with pytest.raises(psycopg.Error) as err:  # PostgreSQL's rule
            con.execute("DISCARD ALL")
        assert err.value.sqlstate == "25001"
        con.execute("ROLLBACK")


@pytest.mark.parametrize("prepared", [False, True], ids=["simple", "extended"])
def test_show_is_tagged_show(server, prepared):
    """PostgreSQL's CommandComplete tag for SHOW is ``SHOW``, without a row count; it
    was ``SELECT 1`` (``SELECT 22`` for SHOW ALL)."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        for sql in ("SHOW TimeZone", "SHOW ALL"):
            cur = con.execute(sql, prepare=prepared)
            assert cur.pgresult.command_status == b"SHOW", sql
            assert cur.fetchall()


@pytest.mark.parametrize("sql", ["SET foo = 1", "SET SESSION foo TO 'x'", "SET foo TO DEFAULT",
                                 "RESET foo", "SET statment_timeout = 5000"])
def test_an_unknown_parameter_is_42704(server, sql):
    """``SET`` / ``RESET`` of a parameter without a dot that neither the server nor
    PostgreSQL knows is 42704 (unrecognized configuration parameter), as PostgreSQL 15
    answers; it was accepted (``SET foo = 1`` answered SET, so a misspelt setting went
    unnoticed). Nothing is set."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            con.execute(sql)
        assert err.value.sqlstate == "42704"
        assert 'unrecognized configuration parameter "' in str(err.value)
        with pytest.raises(psycopg.Error) as err:
            con.execute("SHOW foo")
        assert err.value.sqlstate == "42704"


def test_custom_and_postgresql_parameters_are_accepted(server):
    """A dotted name is a custom setting (PostgreSQL accepts any, and RESET of one never
    set); a PostgreSQL parameter this server has no use for is kept for SHOW (JDBC sets
    extra_float_digits on connect, Npgsql lock_timeout)."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("SET myapp.user_id = '42'")
        assert con.execute("SHOW myapp.user_id").fetchone() == ("42",)
        con.execute("RESET myapp.never_set")
        con.execute("SET lock_timeout = 0")
        con.execute("SET extra_float_digits TO 3")
        assert con.execute("SHOW extra_float_digits").fetchone() == ("3",)
