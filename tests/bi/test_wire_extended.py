"""The extended query protocol of ``dpsql serve`` as drivers use it, message by message
(raw frontend messages on a socket, :mod:`tests.bi.pg_client`), against PostgreSQL's
rules (the protocol chapter of its manual, "Extended Query"):

* a portal keeps its rows: Execute with a row limit sends that many and PortalSuspended,
  the next Execute goes on, and a new Bind of the same name starts a new query;
* portals end with their transaction: at Sync outside a block (an implicit transaction)
  they are closed; a portal outlives the statement it was bound from;
* an empty query answers EmptyQueryResponse, a Describe of a portal that returns no rows
  NoData;
* after an error every message up to Sync is skipped, a simple Query included."""

from __future__ import annotations

import struct

import pytest

from dpsql.server._bounds import MAX_HELD
from tests.bi.pg_client import (FLUSH, SYNC, bind, close, connected, data_rows, describe,
                                execute, fields, kinds, message, parse, query,
                                read_message, until_ready)
from tests.bi.test_serve import server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

REGIONS = "SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region"


def _simple_rows(sock, sql: str) -> list[list[str | None]]:  # noqa: ANN001
    sock.sendall(query(sql))
    got = until_ready(sock)
    assert kinds(got)[-2:] == "CZ", got
    return data_rows(got)


def _alive(sock) -> None:  # noqa: ANN001
    assert _simple_rows(sock, "SELECT COUNT(*) > 0 AS ok FROM trips") == [["t"]]


def test_a_new_bind_never_answers_with_the_previous_querys_rows(server):
    """JDBC's setMaxRows(1) sends Execute with a row limit of 1 and then Sync, leaving
    the rest of the unnamed portal unread. The next query on the connection (a new
    Parse, Bind, Execute of the unnamed portal) got the *previous* query's remaining rows:
    ``SELECT 42`` answered three rows of regions and counts. A Bind now starts its portal
    afresh, whatever the old one left."""
    with connected(server.port) as s:
        regions = _simple_rows(s, REGIONS)
        assert len(regions) == 4
        s.sendall(parse("", REGIONS) + bind("", "") + execute("", 1) + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12DsZ" and data_rows(got) == regions[:1]
        s.sendall(parse("", "SELECT 42 AS answer") + bind("", "") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12DCZ" and data_rows(got) == [["42"]]
        # within one batch too: bind "", read one row, bind "" again
        s.sendall(parse("r", REGIONS) + bind("", "r") + execute("", 1)
                  + parse("a", "SELECT 42 AS answer") + bind("", "a") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12Ds12DCZ" and data_rows(got) == regions[:1] + [["42"]]


def test_a_bind_to_an_open_named_portal_is_42P03(server):
    """PostgreSQL refuses a Bind (or a DECLARE) to a name whose portal or cursor is
    still open (42P03, duplicate_cursor); it replaced the portal, so the client read the
    second query's rows under the first one's name. The unnamed portal is replaced."""
    with connected(server.port) as s:
        regions = _simple_rows(s, REGIONS)
        s.sendall(parse("r", REGIONS) + bind("p", "r") + execute("p", 1)
                  + parse("a", "SELECT 42 AS answer") + bind("p", "a") + execute("p") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12Ds1EZ" and data_rows(got) == regions[:1]
        assert fields(got[-2][1])["C"] == "42P03"
        assert 'cursor "p" already exists' in fields(got[-2][1])["M"]
        assert _simple_rows(s, "BEGIN") == []
        assert _simple_rows(s, "DECLARE c CURSOR FOR SELECT 1") == []
        s.sendall(bind("c", "a") + SYNC)  # a cursor's name
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "42P03"
        assert got[-1][1] == b"E"  # in a failed block, as PostgreSQL
        assert _simple_rows(s, "ROLLBACK") == []
        s.sendall(bind("p", "a") + execute("p") + SYNC)  # closed at the Sync: free again
        assert data_rows(until_ready(s)) == [["42"]]


def test_execute_with_a_row_limit_resumes_then_completes_once(server):
    """Execute(limit 3) x 3 on four rows: three rows and PortalSuspended, the fourth and
    ``SELECT 1``, then ``SELECT 0``: a completed portal is not run again (it used to start
    the query over and send its first three rows again)."""
    with connected(server.port) as s:
        regions = _simple_rows(s, REGIONS)
        s.sendall(parse("", REGIONS) + bind("", "") + execute("", 3) + execute("", 3)
                  + execute("", 3) + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12DDDsDCCZ"
        assert data_rows(got) == regions
        tags = [body for kind, body in got if kind == b"C"]
        assert tags == [b"SELECT 1\x00", b"SELECT 0\x00"]


def test_sync_outside_a_block_closes_the_portals(server):
    """Portals belong to their transaction: outside a block, Sync ends it and closes
    them (34000 after), so a client that binds named portals and never closes them
    cannot fill the session's bound (1,000 portals, 54000); inside BEGIN ... COMMIT a
    portal survives Sync, which is how JDBC fetches a large result in chunks."""
    with connected(server.port) as s:
        regions = _simple_rows(s, REGIONS)
        s.sendall(parse("r", REGIONS) + bind("p", "r") + execute("p", 1) + SYNC)
        assert kinds(until_ready(s)) == "12DsZ"
        s.sendall(execute("p") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ"
        assert (fields(got[0][1])["C"], fields(got[0][1])["M"]) == (
            "34000", 'portal "p" does not exist')
        s.sendall(b"".join(bind(f"p{i}", "r") + SYNC for i in range(MAX_HELD + 1)))
        got = [until_ready(s) for _ in range(MAX_HELD + 1)]
        assert {kinds(g) for g in got} == {"2Z"}
        # in a block: the portal survives Sync, and COMMIT ends it
        assert _simple_rows(s, "BEGIN") == []
        s.sendall(bind("p", "r") + execute("p", 1) + SYNC)
        assert kinds(until_ready(s)) == "2DsZ"
        s.sendall(execute("p") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "DDDCZ" and got[-1][1] == b"T" and data_rows(got) == regions[1:]
        assert _simple_rows(s, "COMMIT") == []
        s.sendall(execute("p") + SYNC)
        assert kinds(until_ready(s)) == "EZ"
        _alive(s)


def test_a_portal_outlives_its_statement(server):
    """Closing a statement leaves the portals bound from it (PostgreSQL's rule): their
    Execute failed with XX000 and the message "'s'" (a KeyError)."""
    with connected(server.port) as s:
        regions = _simple_rows(s, REGIONS)
        s.sendall(parse("s", REGIONS) + bind("p", "s") + close(b"S", "s") + execute("p")
                  + SYNC)
        got = until_ready(s)
        assert kinds(got) == "123DDDDCZ" and data_rows(got) == regions
        _alive(s)


def test_an_empty_query_answers_empty_query_response(server):
    """An empty statement through Parse/Bind/Describe/Execute: NoData, then
    EmptyQueryResponse (libpq: PGRES_EMPTY_QUERY). It answered no Describe at all and
    CommandComplete with the tag ``EMPTY``."""
    with connected(server.port) as s:
        s.sendall(parse("", "") + bind("", "") + describe(b"P", "") + execute("") + SYNC)
        assert kinds(until_ready(s)) == "12nIZ"
        s.sendall(parse("e", "  ") + describe(b"S", "e") + SYNC)
        assert kinds(until_ready(s)) == "1tnZ"
        _alive(s)


def test_describe_of_a_portal_without_rows_is_no_data(server):
    """Describe(portal) of a statement that returns no rows (SET, BEGIN) answers NoData;
    nothing was sent, and a driver that counts its pending Describes (pgjdbc) waited for
    one."""
    with connected(server.port) as s:
        s.sendall(parse("", "SET application_name = 'bi'") + bind("", "")
                  + describe(b"P", "") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12nCSZ" and got[3][1] == b"SET\x00"  # S: ParameterStatus
        assert _simple_rows(s, "SHOW application_name") == [["bi"]]


def test_after_an_error_everything_up_to_sync_is_skipped(server):
    """A simple Query between a failed extended message and Sync is skipped too (it ran,
    and answered its own ReadyForQuery in the middle of the batch)."""
    with connected(server.port) as s:
        s.sendall(parse("", "SELECT * FROM trips") + bind("", "") + execute("")
                  + query("SELECT 1") + describe(b"S", "") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12EZ"
        _alive(s)


@pytest.mark.parametrize("oids,params", [((23,), ()), ((), (b"1",)), ((23, 23), (b"1",))],
                         ids=["too-few", "too-many", "too-few-of-two"])
def test_a_bind_with_the_wrong_number_of_parameters_is_08P01(server, oids, params):
    """PostgreSQL refuses the Bind itself (08P01, protocol_violation); the Bind was
    accepted and the Execute failed with 42000 from the planner."""
    sql = "SELECT COUNT(*) FROM trips" + (" WHERE age < $1" if oids else "") \
        + (" AND age > $2" if len(oids) == 2 else "")
    with connected(server.port) as s:
        s.sendall(parse("", sql, oids) + bind("", "", params) + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1EZ"
        error = fields(got[1][1])
        assert error["C"] == "08P01"
        assert error["M"] == (f"bind message supplies {len(params)} parameters, but prepared "
                              f'statement "" requires {len(oids)}')
        _alive(s)


def test_flush_sends_what_is_pending(server):
    """Flush (no Sync): the answers so far arrive (ParseComplete here)."""
    with connected(server.port) as s:
        s.sendall(parse("f", "SELECT 1") + FLUSH)
        assert read_message(s)[0] == b"1"
        s.sendall(SYNC)
        assert kinds(until_ready(s)) == "Z"


@pytest.mark.parametrize("kind,name", [(b"F", "FunctionCall"), (b"Z", None), (b"\x01", None)])
def test_an_unknown_message_type_is_fatal_08P01(server, kind, name):
    """A message type the server does not speak (FunctionCall, which libpq's large-object
    calls send; garbage): FATAL 08P01 naming it, then the connection ends, as PostgreSQL
    answers "invalid frontend message type". It was ERROR XX000 "Unknown type_code:
    b'F'" (and a traceback in the server's log as an unexpected error)."""
    with connected(server.port) as s:
        s.sendall(message(kind, b"\x00\x00\x00\x01") + query("SELECT 1"))
        got = until_ready(s)
        assert kinds(got) == "E"  # and then the end: no ReadyForQuery
        error = fields(got[0][1])
        assert (error["S"], error["C"]) == ("FATAL", "08P01")
        assert error["M"].startswith(f"invalid frontend message type {kind!r}")
        assert name is None or name in error["M"]


def test_copy_data_outside_copy_is_ignored(server):
    """CopyData, CopyDone and CopyFail outside a COPY are ignored (PostgreSQL's rule: a
    client still sending the data of a COPY the server refused); they ended the
    connection with XX000."""
    with connected(server.port) as s:
        s.sendall(message(b"d", b"1\t2\n") + message(b"c") + message(b"f", b"oops\x00"))
        _alive(s)


@pytest.mark.parametrize("sql", ["", ";", "-- only a comment", "/* c */ ;", "-- a\n-- b"])
def test_a_statement_of_comments_is_an_empty_query(server, sql):
    """Through Parse/Bind/Describe/Execute, as through a simple Query: NoData and
    EmptyQueryResponse. A line comment at the very end (``-- only a comment``, no newline)
    was refused: "several statements in one query string"."""
    with connected(server.port) as s:
        s.sendall(parse("", sql) + bind("", "") + describe(b"P", "") + execute("") + SYNC)
        assert kinds(until_ready(s)) == "12nIZ"
        s.sendall(query(sql))
        assert kinds(until_ready(s)) == "IZ"


def _bind_body(formats: tuple[int, ...], values: bytes, n: int = 1) -> bytes:
    return (b"\x00\x00" + struct.pack("!h", len(formats))
            + b"".join(struct.pack("!h", f) for f in formats) + struct.pack("!h", n) + values)


@pytest.mark.parametrize("body,words", [
    (_bind_body((0, 0), struct.pack("!i", 1) + b"5" + b"\x00\x00"),
     "bind message has 2 parameter formats but 1 parameters"),
    (_bind_body((), struct.pack("!i", 5) + b"5"), "insufficient data left in message"),
    (_bind_body((), struct.pack("!i", 1)), "insufficient data left in message"),
    (b"\x00", "insufficient data left in message"),
], ids=["format-count", "short-value", "no-value", "no-statement-name"])
def test_a_malformed_bind_is_08P01_and_the_session_goes_on(server, body, words):
    """PostgreSQL's checks and words (08P01); a Bind cut short was XX000 "unpack requires
    a buffer of 2 bytes", and two formats for one value were accepted."""
    with connected(server.port) as s:
        s.sendall(parse("", "SELECT $1::int AS v") + message(b"B", body) + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1EZ"
        error = fields(got[1][1])
        assert error["C"] == "08P01" and words in error["M"], error
        _alive(s)


def test_copy_to_stdout_through_the_extended_protocol(server):
    """``COPY (query) TO STDOUT`` through Parse/Bind/Describe/Execute answers as through a
    simple Query (NoData, CopyOutResponse, the rows, CopyDone, ``COPY n``), parameters
    included. It was refused as a write (25006, "COPY is not allowed: dpsql serve is
    read-only")."""
    copy = "COPY (SELECT region, COUNT(*) FROM trips GROUP BY region ORDER BY 1) TO STDOUT"
    with connected(server.port) as s:
        s.sendall(query(copy))
        simple = until_ready(s)
        assert kinds(simple) == "HddddcCZ"
        s.sendall(parse("", copy) + bind("", "") + describe(b"P", "") + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12nHddddcCZ"
        assert got[3:] == simple
        s.sendall(parse("", "COPY (SELECT COUNT(*) > 1000 AS ok FROM trips WHERE distance < $1)"
                        " TO STDOUT WITH (FORMAT csv, HEADER)", (23,))
                  + bind("", "", (b"40",)) + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "12HddcCZ"
        assert [body for kind, body in got if kind == b"d"] == [b"ok\n", b"t\n"]
        _alive(s)


def test_an_error_before_sync_undoes_the_sets_since_the_last_sync(server):
    """The messages up to Sync run as one implicit transaction (PostgreSQL's rule): an
    error in it rolls back a SET executed before it in the same batch; a SET whose Sync
    came first stays. The SET stayed."""
    with connected(server.port) as s:
        s.sendall(parse("", "SET application_name = 'x'") + bind("", "") + execute("")
                  + parse("", "SELECT nope FROM trips") + bind("", "") + execute("")
                  + SYNC)
        got = kinds(until_ready(s))  # (PostgreSQL's error comes at the Parse: 12CEZ)
        assert got.startswith("12C") and got.endswith("EZ"), got
        assert _simple_rows(s, "SHOW application_name") == [[""]]
        s.sendall(parse("", "SET application_name = 'y'") + bind("", "") + execute("")
                  + SYNC)
        until_ready(s)
        s.sendall(parse("", "SELECT nope FROM trips") + bind("", "") + execute("") + SYNC)
        assert kinds(until_ready(s)).endswith("EZ")
        assert _simple_rows(s, "SHOW application_name") == [["y"]]


def test_a_constant_division_by_zero_is_22012_at_bind(server):
    """PostgreSQL 15 folds a constant division while planning and raises 22012
    (division_by_zero) whatever the rows, at Bind in the extended protocol: ``SELECT
    1/0``, ``1/0.0`` (numeric), ``1.0::float8/0``, ``5 % 0``, a bound ``age < 1/0`` on the
    release; a Describe of the statement answers its shape. The server answered
    Infinity (DuckDB's float division), and 42000 for ``5 % 0``. Where PostgreSQL drops
    the division unevaluated (``false AND 1/0 > 0``) it answers as PostgreSQL does."""
    with connected(server.port) as s:
        for sql in ("SELECT 1/0", "SELECT 1/0.0", "SELECT 1.0::float8/0", "SELECT 5 % 0",
                    "SELECT COUNT(*) FROM trips WHERE age < 1/0"):
            s.sendall(query(sql))
            got = until_ready(s)
            assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "22012", (sql, got)
        s.sendall(parse("z", "SELECT 1/0 AS x") + describe(b"S", "z") + bind("", "z")
                  + execute("") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "1tTEZ" and fields(got[3][1])["C"] == "22012", got
        assert _simple_rows(s, "SELECT 1 WHERE false AND 1/0 > 0") == []
        _alive(s)
