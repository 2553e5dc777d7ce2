"""Refusals over ``dpsql serve`` say what the in-process API says (the same lock-down,
in the same words), with PostgreSQL's SQLSTATE for them."""

from __future__ import annotations

import psycopg
import pytest

import dpsql
from tests.bi.test_serve import _dsn, local, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

LONG = " /* " + "x" * 1100 + " */"  # past INLINE_BYTES: planned in a planning process


@pytest.mark.parametrize("sql", [
    "EXPLAIN SELECT COUNT(*) FROM trips", "EXPLAIN ANALYZE SELECT COUNT(*) FROM trips",
    "explain (format json) SELECT region, COUNT(*) FROM trips GROUP BY region",
    "EXPLAIN SELECT 1", "EXPLAIN SELECT * FROM pg_class", "EXPLAIN DELETE FROM trips",
    "EXPLAIN SELECT COUNT(*) FROM trips" + LONG])
@pytest.mark.parametrize("prepared", [False, True], ids=["simple", "extended"])
def test_explain_is_refused_as_in_process(server, local, sql, prepared):
    """EXPLAIN, a read, is refused by the server in the in-process API's words (0A000,
    "EXPLAIN statements are not supported: a release answers SELECT queries only ...");
    the server's guard said "EXPLAIN is not supported by dpsql serve" for the forms
    DuckDB parses, and the planner's words for the others."""
    with pytest.raises(dpsql.NotSupportedError) as here:
        local.cursor().execute(sql)
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as there:
            con.execute(sql, prepare=prepared)
        assert there.value.sqlstate == "0A000"
        assert there.value.diag.message_primary == str(here.value)
        assert "read-only" not in str(there.value)
        assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)


@pytest.mark.parametrize("sql, hint", [
    ("EXPLAIN SELECT COUNT(*) FROM trips", None),
    ("EXPLAIN SELECT COUNT(*) FROM trips" + LONG, None),  # from a planning process
    ("PREPARE q AS SELECT COUNT(*) FROM trips", None),
    ("SET client_encoding = 'LATIN1'", None),
    ("SELECT 1; SELECT 2", None), ("SELECT 1; SELECT 2" + LONG, None),
    ("SELECT MAX(age) FROM trips", "COUNT(*)")])
def test_each_refusal_has_its_own_hint_or_none(server, sql, hint):
    """Every 0A000 carried the hint "dpsql answers COUNT(*) aggregates over its logical
    tables; see the message for the supported form", EXPLAIN, SQL PREPARE and SET
    client_encoding included, where it says nothing relevant; their messages say what
    to do, and they now have no hint. A refusal of a query's form keeps it."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            con.execute(sql, prepare=True)  # one statement: no split in a Parse
        assert err.value.sqlstate == "0A000"
        got = err.value.diag.message_hint
        assert got is None if hint is None else hint in got
