"""Typed parameters at every analyst entry point: ``Decimal`` bound exactly, dates and
timestamps (text and binary over the server), time-zone-aware values refused with one
message everywhere.

Answers are checked against plain DuckDB on the raw table with the same parameter (the
exact release of ``typed_release``: STYLE §5a). The values are picked so that rounding
the parameter through a float changes the answer: a label whose count is k passes
``COUNT(*) < k + 1e-19`` exactly, and fails it as ``COUNT(*) < k``.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import duckdb
import psycopg
import pytest

import dpsql
from dpsql.cli import main
from dpsql.server import serve

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

HAVING = "SELECT c, COUNT(*) AS n FROM t GROUP BY c HAVING COUNT(*) < ? ORDER BY c"
TINY = Decimal("0.0000000000000000001")  # 1e-19: lost by a float next to any count
UTC2 = dt.timezone(dt.timedelta(hours=2))


@pytest.fixture(scope="module")
def raw(typed_data):
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM '{typed_data / 't.parquet'}'")
    yield con
    con.close()


@pytest.fixture(scope="module")
def local(typed_release):
    con = dpsql.connect(typed_release)
    yield con
    con.close()


@pytest.fixture(scope="module")
def server(typed_release):
    srv = serve(typed_release, port=0)
    yield srv
    srv.stop()


@pytest.fixture
def pg(server):
    con = psycopg.connect(f"host=127.0.0.1 port={server.port} dbname={server.database} "
                          "user=analyst sslmode=disable connect_timeout=10", autocommit=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def just_above(raw) -> Decimal:
    """The smallest label count plus 1e-19: exactly, that label passes ``< value``."""
    smallest = raw.execute("SELECT MIN(n) FROM (SELECT COUNT(*) AS n FROM t GROUP BY c)"
                           ).fetchall()[0][0]
    return Decimal(smallest) + TINY


def _rows(rows) -> list[tuple]:
    return [tuple(round(v) if isinstance(v, float) else v for v in r) for r in rows]


def _cli(capsys, release, sql, *params) -> list[list[str]]:
    import csv
    import io

    argv = ["query", str(release), sql, "--format", "csv"]
    for p in params:
        argv += ["-p", str(p)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return list(csv.reader(io.StringIO(out)))[1:]


# -- Decimal: exact at every entry point ------------------------------------------------

def test_decimal_parameter_is_exact_through_dpsql_connect(local, raw, just_above):
    want = raw.execute(HAVING, [just_above]).fetchall()
    assert len(want) == 1  # the smallest label passes: 1e-19 matters
    assert raw.execute(HAVING, [float(just_above)]).fetchall() == []  # as a float: lost
    assert _rows(local.execute(HAVING, [just_above]).fetchall()) == want
    value = Decimal("2.5000000000000000001")
    assert local.execute("SELECT ? AS v", [value]).fetchall() == [(value,)]
    assert local.execute("SELECT ? AS v", [-value]).fetchall() == [(-value,)]
    # 38 decimals below 1 (bound as 0.123..., 39 digits: a DOUBLE) and a negative of more
    # than 28 digits (sqlglot's Literal.number rounded it to 28) stay exact, as in DuckDB
    for text in (".12345678901234567890123456789012345678",
                 "-.12345678901234567890123456789012345678",
                 "-2.5000000000000000000000000000001"):
        sql = "SELECT ? AS v, typeof(?) AS t"
        want = raw.execute(sql, [Decimal(text)] * 2).fetchall()
        assert want[0][0] == Decimal(text)
        assert local.execute(sql, [Decimal(text)] * 2).fetchall() == want


def test_decimal_parameter_is_exact_through_the_cli(capsys, typed_release, raw,
                                                    just_above):
    want = raw.execute(HAVING, [just_above]).fetchall()
    got = _cli(capsys, typed_release, HAVING, just_above)
    assert [(c, int(n)) for c, n in got] == want
    assert _cli(capsys, typed_release, "SELECT ? AS v", "2.5000000000000000001") == [
        ["2.5000000000000000001"]]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_numeric_parameter_is_exact_over_the_server(pg, raw, just_above, binary):
    want = raw.execute(HAVING, [just_above]).fetchall()
    sql = HAVING.replace("?", "%s")
    got = pg.execute(sql, [just_above], binary=binary).fetchall()  # NUMERIC, OID 1700
    assert _rows(got) == want
    # untyped text (OID 0, as node-postgres sends) reads as the exact literal it spells
    res = pg.pgconn.exec_params(HAVING.replace("?", "$1").encode(),
                                [str(just_above).encode()])
    assert res.error_message == b""
    assert [res.get_value(r, 0).decode() for r in range(res.ntuples)] == [want[0][0]]


@pytest.mark.parametrize("value", ["2.5000000000000000001", "-0.0001", "0", "12345.678",
                                   "1E+30", "-1E-20", "0.10", "NaN",
                                   "123456789012345678901234567890123456789.5"])
def test_binary_numeric_parameters_decode_exactly(value):
    """psycopg's own binary NUMERIC dumper is the oracle."""
    from psycopg.types.numeric import DecimalBinaryDumper

    from dpsql.server._types import decode_param

    raw = bytes(DecimalBinaryDumper(Decimal).dump(Decimal(value)))
    got = decode_param(raw, 1700, 1)
    assert got == Decimal(value) or got.is_nan() and Decimal(value).is_nan()


def test_the_planner_compares_long_decimal_bounds_exactly(local, raw):
    """A bound in WHERE goes through the planner's interval arithmetic on the attribute's
    grid, which reads a numeric literal as a float: the bound parameter is exact now, the
    planner still rounds it (planner literals, another branch: remove this xfail then)."""
    for sql, value in (("SELECT COUNT(*) FROM t WHERE p < ?", "2.5000000000000000001"),
                       ("SELECT COUNT(*) FROM t WHERE n < ?", "2.0000000000000000001")):
        want = raw.execute(sql, [Decimal(value)]).fetchall()[0][0]
        got = local.execute(sql, [Decimal(value)]).fetchall()[0][0]
        if abs(got - want) >= 0.5:
            pytest.xfail(f"{sql} with {value}: planner gives {got}, DuckDB {want}")


# -- dates and timestamps -----------------------------------------------------------------

DATED = [("SELECT COUNT(*) FROM t WHERE d < ?", dt.date(2013, 1, 10)),
         ("SELECT COUNT(*) FROM t WHERE d >= ?", dt.date(2013, 1, 30)),
         ("SELECT COUNT(*) FROM t WHERE ts < ?", dt.datetime(2013, 1, 2, 5)),
         ("SELECT COUNT(*) FROM t WHERE ts >= ?", dt.datetime(2013, 1, 1, 13)),
         ("SELECT COUNT(*) FROM t WHERE ts < ?", dt.date(2013, 1, 2))]


@pytest.mark.parametrize("sql,value", DATED)
def test_date_and_timestamp_parameters_through_dpsql_connect(local, raw, sql, value):
    want = raw.execute(sql, [value]).fetchall()[0][0]
    assert local.execute(sql, [value]).fetchall()[0][0] == pytest.approx(want, abs=0.5)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("sql,value", DATED)
def test_date_and_timestamp_parameters_over_the_server(pg, raw, sql, value, binary):
    """psycopg sends a date as DATE (1082), a naive datetime as TIMESTAMP (1114); in
    binary with ``binary=True`` (the server refused binary dates before)."""
    want = raw.execute(sql, [value]).fetchall()[0][0]
    got = pg.execute(sql.replace("?", "%s"), [value], binary=binary).fetchall()[0][0]
    assert got == pytest.approx(want, abs=0.5)


@pytest.mark.parametrize("oid,raw_value", [(1082, struct.pack("!i", 0x7FFFFFFF)),
                                           (1114, struct.pack("!q", -(2**63)))])
def test_infinite_binary_dates_are_refused(oid, raw_value):
    from dpsql.server._types import decode_param

    with pytest.raises(dpsql.DataError, match="infinite"):
        decode_param(raw_value, oid, 1)


# -- time zones: refused, one message, every entry point ----------------------------------

AWARE = dt.datetime(2013, 1, 2, 5, tzinfo=UTC2)
ZONE_WORDS = "has a time zone"


def test_aware_datetime_is_refused_by_dpsql_connect(local):
    with pytest.raises(dpsql.NotSupportedError, match=ZONE_WORDS) as info:
        local.execute("SELECT COUNT(*) FROM t WHERE ts < ?", [AWARE])
    assert "+0200" in str(info.value) and "replace(tzinfo=None)" in str(info.value)
    naive = local.execute("SELECT COUNT(*) FROM t WHERE ts < ?",
                          [AWARE.replace(tzinfo=None)]).fetchall()
    assert naive[0][0] > 0  # what the message says to send works


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t WHERE ts < '2013-01-02 05:00:00+02'",
    "SELECT COUNT(*) FROM t WHERE ts BETWEEN '2013-01-01' AND '2013-01-02 05:00:00Z'"])
def test_a_timestamp_literal_with_an_offset_is_refused(local, capsys, typed_release, sql):
    """It raised a bare TypeError (naive minus aware) from the planner before."""
    with pytest.raises(dpsql.NotSupportedError, match=ZONE_WORDS):
        local.execute(sql)
    assert main(["query", str(typed_release), sql]) == 1
    assert ZONE_WORDS in capsys.readouterr().err


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_timestamptz_parameter_is_refused_over_the_server(pg, binary):
    with pytest.raises(psycopg.errors.FeatureNotSupported, match=ZONE_WORDS):
        pg.execute("SELECT COUNT(*) FROM t WHERE ts < %s", [AWARE], binary=binary)
    # untyped text with an offset: the planner's refusal of the literal
    res = pg.pgconn.exec_params(b"SELECT COUNT(*) FROM t WHERE ts < $1",
                                [b"2013-01-02 05:00:00+02"])
    assert ZONE_WORDS.encode() in res.error_message
    assert pg.execute("SELECT COUNT(*) FROM t").fetchall()[0][0] > 0  # session goes on
