"""Describe(statement) on ``dpsql serve`` describes the parameters a client left open
(type OID 0 in its Parse) as PostgreSQL infers them (each expectation was checked
against a PostgreSQL 15 server with the same columns): a client that encodes each value
by the described type (asyncpg; pgjdbc's ``setObject`` without a type) sends an ``int``
for ``age < $1`` in binary int8, and gets the answer. Every open parameter was described
as text (25), so asyncpg refused a Python ``int`` there ("expected str")."""

from __future__ import annotations

import socket
import struct

import pytest

from dpsql.server._param_types import parameter_types
from tests.bi.pg_client import (SYNC, connected, data_rows, describe, execute, fields, kinds,
                                message, parse, query, startup_packet, until_ready)
from tests.bi.test_serve import _start, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def _parameter_types(body: bytes) -> list[int]:
    n = struct.unpack("!h", body[:2])[0]
    return list(struct.unpack(f"!{n}i", body[2:2 + 4 * n]))


@pytest.mark.parametrize("sql,types", [
    ("SELECT COUNT(*) AS n FROM trips WHERE age < $1", [20]),
    ("SELECT mode, COUNT(*) AS n FROM trips WHERE distance BETWEEN $1 AND $2 AND mode IN "
     "($3, $4) GROUP BY mode ORDER BY mode LIMIT $5 OFFSET $6", [701, 701, 25, 25, 20, 20]),
    ("SELECT COUNT(*) FROM trips WHERE ($1) <= age", [20]),
    ("SELECT $1::int AS x, $2::numeric AS y, $3::date AS z", [23, 1700, 1082]),
    ("SELECT COUNT(*) FROM trips WHERE mode = ANY($1) AND distance > ALL($2)", [1009, 1022]),
    ("SELECT $1 AS anything", [25]),  # nothing says its type: text, as PostgreSQL
    # in expressions and aggregates (were text)
    ("SELECT region, COUNT(*) AS n FROM trips GROUP BY region HAVING COUNT(*) > $1", [20]),
    ("SELECT COUNT(*) FROM trips WHERE EXTRACT(year FROM DATE '2020-01-01') = $1", [1700]),
    # asyncpg's type introspection
    ("SELECT t.typname FROM pg_catalog.pg_type t WHERE t.oid = any($1::oid[])", [1028]),
])
def test_open_parameters_are_described_as_postgresql_infers_them(server, sql, types):
    with connected(server.port) as s:
        s.sendall(parse("s", sql) + describe(b"S", "s") + SYNC)
        got = until_ready(s)
        assert kinds(got)[:2] == "1t", got
        assert _parameter_types(got[1][1]) == types


def test_a_binary_value_of_an_open_type_is_read_as_described(server):
    """asyncpg's flow: Parse without types, Describe, then Bind each value in binary by
    the described type (int8 for ``age < $1``): the answer is the one for 40. The value
    was read as text of unknown type (eight bytes of binary int8)."""
    sql = "SELECT COUNT(*) AS n FROM trips WHERE age < $1"
    with connected(server.port) as s:
        s.sendall(query(sql.replace("$1", "40")))
        expected = data_rows(until_ready(s))
        s.sendall(parse("s", sql) + describe(b"S", "s") + SYNC)
        assert kinds(until_ready(s)) == "1tTZ"
        value = struct.pack("!q", 40)
        body = (b"\x00s\x00" + struct.pack("!hhh", 1, 1, 1) + struct.pack("!i", len(value))
                + value + struct.pack("!hh", 1, 0))
        s.sendall(message(b"B", body) + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "2DCZ", got
        assert data_rows(got) == expected


@pytest.fixture(scope="module")
def typed_server(typed_release):
    srv = _start(typed_release)
    yield srv
    srv.stop()


@pytest.mark.parametrize("sql,types", [
    ("SELECT COUNT(*) AS k FROM t WHERE d < $1", [1082]),
    ("SELECT COUNT(*) AS k FROM t WHERE ts >= $1", [1114]),
    ("SELECT COUNT(*) AS k FROM t WHERE p < $1", [701]),  # p is listed as float8
    ("SELECT COUNT(*) AS k FROM t WHERE d BETWEEN $1::date AND $2", [1082, 1082]),
])
def test_describe_of_dates_and_timestamps_is_their_shape(typed_server, sql, types):
    """A statement on a date or timestamp column is described by its row shape; its
    dummy run compared the column with ``0``, failed, and Describe answered NoData (a
    client then expects no rows)."""
    with socket.create_connection(("127.0.0.1", typed_server.port), timeout=60) as s:
        s.sendall(startup_packet(database=typed_server.database))
        assert kinds(until_ready(s))[-1] == "Z"
        s.sendall(parse("s", sql) + describe(b"S", "s") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1tTZ", got
        assert _parameter_types(got[1][1]) == types


def test_a_parameter_compared_with_date_trunc(typed_server):
    """``date_trunc(unit, <timestamp>) >= $1`` types ``$1`` as a timestamp, as PostgreSQL
    15 does (it was text; ``date_trunc`` of a date is PostgreSQL's timestamptz, which this
    server refuses: text), and Describe answers its shape: the planner answers it as a
    range of ``ts`` (:mod:`dpsql.planner.trunc_predicates`). A statement the planner
    refuses whatever the value (a unit it does not know, ``'millenia'``, which DuckDB
    refuses too; ``'decade'`` was one before dpsql knew it) is refused at
    Describe (0A000, checked with two sets of sample values), where it answered NoData: a
    client that prepares (asyncpg) was told the statement returns no rows, and learnt at
    Execute (inside a transaction block it still answers NoData: a Describe never fails
    the block, tests/bi/test_serve.py)."""
    tables = {"t": [("ts", "TIMESTAMP"), ("d", "DATE")]}
    ts = "SELECT COUNT(*) AS k FROM t WHERE date_trunc('month', ts) >= $1"
    assert parameter_types(ts, [], tables) == [1114]
    assert parameter_types(ts.replace("ts)", "d)"), [], tables) == [0]
    with socket.create_connection(("127.0.0.1", typed_server.port), timeout=60) as s:
        s.sendall(startup_packet(database=typed_server.database))
        assert kinds(until_ready(s))[-1] == "Z"
        s.sendall(parse("s", ts.replace("month", "millenia")) + describe(b"S", "s") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1EZ", got
        assert "refused whatever their values" in fields(got[1][1])["M"]
        assert fields(got[1][1])["C"] == "0A000"
        s.sendall(parse("k", ts) + describe(b"S", "k") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1tTZ", got
        assert _parameter_types(got[1][1]) == [1114]


def test_lists_of_dates_and_timestamps_bind_as_typed_lists(typed_server, typed_release):
    """``d = ANY(%s)`` with Python dates: psycopg sends a date[] (OID 1182) or
    timestamp[] (1115), which were refused as unknown array types ("binary parameter of
    type OID 1182 is not supported"); their elements now arrive as dates and timestamps,
    in text and binary format alike, and answer as the same list does in process."""
    import datetime as dt

    import psycopg

    import dpsql
    from tests.bi.test_serve import _dsn

    days = [dt.date(2013, 1, 3), dt.date(2013, 1, 17), None]
    stamps = [dt.datetime(2013, 1, 1, 5, 30), dt.datetime(2013, 1, 2, 23, 59, 59)]
    cases = [("SELECT COUNT(*) FROM t WHERE d = ANY(%s)", [days]),
             ("SELECT COUNT(*) FROM t WHERE d <> ALL(%s)", [days[:2]]),
             ("SELECT COUNT(*) FROM t WHERE ts < ANY(%s)", [stamps])]
    local = dpsql.connect(typed_release)
    with psycopg.connect(_dsn(typed_server)) as pg:
        for sql, params in cases:
            want = local.cursor().execute(sql.replace("%s", "?"), params).fetchall()
            assert 0 < want[0][0] < 2000
            for binary in (False, True):
                got = pg.cursor(binary=binary).execute(sql, params).fetchall()
                assert [tuple(r) for r in got] == want, (sql, binary)
