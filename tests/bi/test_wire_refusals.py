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
