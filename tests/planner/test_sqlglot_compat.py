"""The sqlglot versions dpsql accepts (28.10+) plan DuckDB's ``~`` alike or refuse it
(dpsql.planner._sqlglot_compat): up to 30.26 sqlglot reads ``~`` as a whole-string
match, which is not what DuckDB 2 runs. CI runs this file on sqlglot 30+ (the test venv) and on
Superset 6.1's sqlglot 28 (.ci/run's compatibility venv), so both branches are checked."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

import dpsql
from dpsql.errors import UnsupportedQueryError
from dpsql.planner import _sqlglot_compat

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

TILDE = "SELECT city, COUNT(*) FROM geo_gauss WHERE city {op} 'P2-C' GROUP BY city ORDER BY city"
NAMED = ("SELECT city, COUNT(*) FROM geo_gauss WHERE {neg}regexp_matches(city, 'P2-C') "
         "GROUP BY city ORDER BY city")


def test_the_flag_matches_this_sqlglot():
    version = tuple(int(p) for p in sqlglot.__version__.split(".")[:2])
    assert _sqlglot_compat.TILDE_IS_FULL_MATCH == (version < (30, 27))
    assert duckdb.sql("SELECT 'R1-P2-C1' ~ 'P2-C'").fetchall() == [(True,)]  # DuckDB: partial


@pytest.mark.parametrize("op, neg", [("~", ""), ("!~", "NOT ")])
def test_tilde_means_what_duckdb_means_or_is_refused(trips_release, op, neg):
    with dpsql.connect(trips_release) as con:
        named = con.execute(NAMED.format(neg=neg)).fetchall()
        assert named  # regexp_matches plans on every version
        if _sqlglot_compat.TILDE_IS_FULL_MATCH:
            with pytest.raises(UnsupportedQueryError, match=r"regexp_matches\(x, 'pattern'\)"):
                con.execute(TILDE.format(op=op))
        else:
            assert con.execute(TILDE.format(op=op)).fetchall() == named


def test_a_tilde_inside_a_string_is_not_the_operator(trips_release):
    with dpsql.connect(trips_release) as con:
        assert con.execute("SELECT '~' AS t, COUNT(*) > 0 FROM trips").fetchall() == [
            ("~", True)]
