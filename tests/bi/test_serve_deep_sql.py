"""Deep SQL through ``dpsql serve``: SQLSTATE 54001 (statement_too_complex) with a
one-line message (the server's pre-parse nesting bound, or the planner's recursion limit
for what that bound does not count: CASE nesting, long AND chains), never XX000 and a
RecursionError, and the session survives."""

from __future__ import annotations

import re

import psycopg
import pytest

from dpsql.server import serve
from tests.bi.test_serve import _dsn

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

DEEP = {
    "parentheses": "SELECT COUNT(*) FROM trips WHERE " + "(" * 3000 + "mode = 'car'"
                   + ")" * 3000,
    "case": "SELECT " + "CASE WHEN 1 = 1 THEN " * 2000 + "1" + " END" * 2000,
    "ands": "SELECT COUNT(*) FROM trips WHERE " + " AND ".join(["mode = 'car'"] * 20000),
}


@pytest.fixture(scope="module")
def server(trips_release):
    srv = serve(trips_release, port=0)
    yield srv
    srv.stop()


@pytest.mark.parametrize("kind", list(DEEP))
def test_deep_sql_is_54001_and_the_session_survives(server, kind):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as info:
            con.execute(DEEP[kind])
        assert info.value.sqlstate == "54001"
        # the server's pre-parse bound (parentheses) or the planner's recursion limit
        assert re.search(r"too complex|nested too deeply", str(info.value))
        assert "\n" not in str(info.value).strip()
        assert con.execute("SELECT COUNT(*) FROM trips").fetchone()[0] > 0
