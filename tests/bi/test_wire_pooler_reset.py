"""What connection poolers send to reset a server connection, through the extended
protocol (pgbouncer's ``server_reset_query``, pgpool's ``reset_query_list``, JDBC pools'
validation): ``DISCARD ALL`` and ``CLOSE ALL`` answer their CommandComplete tags, as
PostgreSQL 15 does.

Both failed with 34000 ``portal "" does not exist``: the Describe of the portal ran the
statement, which closed every portal, its own included, so the Execute after it found
nothing. PostgreSQL's DISCARD ALL and CLOSE ALL close every portal but the one that runs
them (``PortalHashTableDeleteAll`` skips the active portal)."""

from __future__ import annotations

import psycopg
import pytest

from tests.bi.pg_client import (SYNC, bind, connected, describe, execute, fields, kinds,
                                parse, until_ready)
from tests.bi.test_serve import _dsn, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


@pytest.mark.parametrize("sql, tag", [("DISCARD ALL", "DISCARD ALL"),
                                      ("CLOSE ALL", "CLOSE CURSOR ALL")])
@pytest.mark.parametrize("prepare", [False, True])
def test_psycopg_extended_protocol_reset(server, sql, tag, prepare):
    """psycopg sends a statement with parameters (here none, ``prepare``: named, as
    after its prepare_threshold) as Parse, Bind, Describe(portal), Execute, Sync."""
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        con.execute("DECLARE held CURSOR WITH HOLD FOR SELECT 1 AS x")
        con.execute("SET application_name = 'before'")
        cur = con.cursor()
        cur.execute(sql, [], prepare=prepare)
        assert cur.statusmessage == tag
        assert con.execute("SELECT COUNT(*) FROM pg_cursors").fetchone() == (0,)
        name = con.execute("SHOW application_name").fetchone()[0]
        assert name == ("" if sql == "DISCARD ALL" else "before")
        assert con.execute("SELECT COUNT(*) > 1000 FROM trips").fetchone() == (True,)


def test_discard_all_in_one_message_cycle_closes_the_other_portals(server):
    """Raw protocol: the portal that runs DISCARD ALL answers its tag; a portal bound
    before it in the same cycle is closed (34000 after it), as in PostgreSQL."""
    with connected(server.port) as s:
        s.sendall(parse("q", "SELECT 1 AS x") + parse("", "DISCARD ALL") + SYNC)
        assert kinds(until_ready(s)) == "11Z"
        s.sendall(bind("other", "q") + bind("", "") + describe(b"P", "") + execute("")
                  + SYNC)
        got = until_ready(s)
        assert kinds(got) == "22nCZ"
        assert got[3][1] == b"DISCARD ALL\x00"
        s.sendall(execute("other") + SYNC)
        got = until_ready(s)
        assert kinds(got) == "EZ" and fields(got[0][1])["C"] == "34000"
