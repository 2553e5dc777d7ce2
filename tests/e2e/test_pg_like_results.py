"""PostgreSQL-like results and the public-domain notice, end to end: output names and
types through :func:`dpsql.connect` and ``dpsql serve``; a literal outside a categorical
domain answered (0) and noticed in process (``cursor.messages``, a
:class:`~dpsql.dbapi.PublicDomainWarning`), over the wire (a NoticeResponse) and by
``dpsql query`` (a line on stderr)."""

from __future__ import annotations

import warnings

import psycopg
import pytest

import dpsql
from dpsql.cli import main
from dpsql.dbapi import PublicDomainWarning
from dpsql.server import serve

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

TYPO = "SELECT COUNT(*) AS n FROM trips WHERE mode = 'Car' AND region IN ('R1', 'r9')"


@pytest.fixture(scope="module")
def con(exact_con):
    return exact_con


@pytest.fixture(scope="module")
def server(exact_release):
    srv = serve(exact_release, port=0)
    yield srv
    srv.stop()


def _pg(srv):
    return psycopg.connect(host="127.0.0.1", port=srv.port, dbname=srv.database,
                           user="analyst", sslmode="disable")


NAMED = "SELECT mode, COUNT(*), SUM(dp_count), dp_stderr() FROM mode_dist GROUP BY mode " \
        "ORDER BY mode"


def test_names_and_types_follow_postgresql_in_process(con):
    cur = con.cursor()
    cur.execute(NAMED)
    assert [(d[0], d[1]) for d in cur.description] == [
        ("mode", "VARCHAR"), ("count", "BIGINT"), ("sum", "BIGINT"), ("dp_stderr", "DOUBLE")]
    df = con.cursor().execute("SELECT region, COUNT(*) AS n FROM geo_mode WHERE "
                              "mode = 'car' GROUP BY region").fetch_df()
    assert str(df["n"].dtype) == "int64"  # not HUGEINT read back as floats
    cur.execute("SELECT COUNT(*) FROM dist WHERE distance < 64")  # a real-valued view
    assert (cur.description[0][0], cur.description[0][1]) == ("count", "DOUBLE")


def test_order_by_and_having_name_an_unaliased_count_as_postgresql_does(con):
    """``ORDER BY count`` names the unaliased COUNT(*), as in PostgreSQL (it was refused:
    "column 'count' is not an attribute"), and HAVING too."""
    cur = con.cursor()
    cur.execute("SELECT region, COUNT(*) AS n FROM geo_mode GROUP BY 1 ORDER BY n DESC")
    want = cur.fetchall()
    cur.execute("SELECT region, COUNT(*) FROM geo_mode GROUP BY 1 ORDER BY count DESC")
    assert cur.fetchall() == want and want[0][1] > want[-1][1]
    cur.execute("SELECT region, COUNT(*), dp_stderr() FROM geo_mode GROUP BY 1 "
                f"HAVING count > {want[-1][1]} ORDER BY count")
    assert [r[:2] for r in cur.fetchall()] == want[:-1][::-1]


def test_names_and_types_follow_postgresql_over_the_server(server):
    with _pg(server) as pg:
        cur = pg.execute(NAMED)
        assert [c.name for c in cur.description] == ["mode", "count", "sum", "dp_stderr"]
        assert [c.type_code for c in cur.description][1:3] == [20, 20]  # int8, not numeric
        assert all(type(r[1]) is int for r in cur.fetchall())


def test_a_literal_outside_the_domain_is_answered_and_noticed_in_process(con):
    cur = con.cursor()
    with pytest.warns(PublicDomainWarning) as caught:
        cur.execute(TYPO)
    assert len(caught) == 2 and "closest: 'car'" in str(caught[0].message)
    assert cur.fetchall() == [(0,)]  # correct SQL: no released row has mode 'Car'
    texts = [str(w) for _, w in cur.messages]
    assert all(cls is dpsql.Warning for cls, _ in cur.messages)
    assert len(texts) == 2
    assert "'Car' is not a value of 'mode'" in texts[0] and "closest: 'car'" in texts[0]
    assert "'r9' is not a value of 'region'" in texts[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cur.execute("SELECT COUNT(*) FROM trips WHERE mode IN ('car', 'bus')")
    assert cur.messages == []  # cleared by each execute


def test_a_literal_outside_the_domain_is_a_server_notice(server):
    with _pg(server) as pg:
        notices = []
        pg.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
        assert pg.execute(TYPO).fetchall() == [(0,)]
        assert pg.execute("SELECT COUNT(*) FROM trips WHERE mode = %s", ["Bus"]
                          ).fetchall() == [(0,)]
    assert [s for s, _ in notices] == ["NOTICE"] * 3
    assert "closest: 'car'" in notices[0][1] and "closest: 'bus'" in notices[2][1]


def test_a_literal_outside_the_domain_is_a_cli_line(exact_release, capsys):
    assert main(["query", str(exact_release), TYPO, "--format", "csv"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == ["n", "0"]
    assert "notice: 'Car' is not a value of 'mode'" in " ".join(out.err.split())


def test_what_an_analyst_reads_about_a_query_names_no_internals(con):
    """From a user trial: ``dp_info['budget']`` was a Python repr (``ZCDP(rho=Fraction(1,
    8))``), a mistyped table drew DuckDB's suggestion of an internal node table
    (``Did you mean "dpsql_nodes.trips__geo_mode__l4"?``), and EXPLAIN, a read, was
    refused because "a release is read-only"."""
    cur = con.cursor()
    cur.execute("SELECT COUNT(*) FROM geo_mode")
    assert cur.dp_info["budget"].startswith("ρ=") and "Fraction" not in cur.dp_info["budget"]
    for typo in ("trip", "geo_mod"):
        with pytest.raises(dpsql.ProgrammingError) as err:
            cur.execute(f"SELECT COUNT(*) FROM {typo}")
        assert "dpsql_" not in str(err.value).split("while running")[0]
        assert "__l" not in str(err.value) and "SHOW TABLES lists the tables" in str(err.value)
    with pytest.raises(dpsql.NotSupportedError, match="EXPLAIN statements are not supported: "
                       "a release answers SELECT queries only") as err:
        cur.execute("EXPLAIN SELECT COUNT(*) FROM trips")
    assert "read-only" not in str(err.value)
