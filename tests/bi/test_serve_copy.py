"""``COPY (query) TO STDOUT`` over ``dpsql serve``: psql's ``\\copy (SELECT ...) TO
'file.csv' WITH CSV HEADER`` and psycopg's ``cursor.copy()`` get the query's rows, equal
to :func:`dpsql.connect`'s; the query inside meets the same planner and lock-down as a
SELECT sent alone; a table's rows, options this server does not write and files on the
server are refused with what to write instead (before: every COPY got 25006 "COPY is not
allowed: dpsql serve is read-only", a read included)."""

from __future__ import annotations

import psycopg
import pytest

from tests.bi.test_serve import _dsn, _expected, _psql, local, psql, server  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

QUERY = "SELECT region, mode, COUNT(*) AS n FROM trips GROUP BY ALL ORDER BY region, mode"


def test_psql_copy_to_a_csv_file_equals_dpsql_connect(psql, server, local, tmp_path):
    out = tmp_path / "counts.csv"
    _psql(psql, server, f"\\copy ({QUERY}) TO '{out}' WITH CSV HEADER")
    lines = out.read_text().splitlines()
    assert lines[0] == "region,mode,n"
    got = [(r, m, float(n)) for r, m, n in (line.split(",") for line in lines[1:])]
    assert got == [(r, m, float(n)) for r, m, n in _expected(local, QUERY)]


def test_psycopg_copy_text_format(server, local):
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with con.cursor() as cur, cur.copy(f"COPY ({QUERY}) TO STDOUT") as copy:
            got = [tuple(row) for row in copy.rows()]
        assert got == [(r, m, str(n)) for r, m, n in _expected(local, QUERY)]
        with con.cursor() as cur, cur.copy(
                "COPY (SELECT 'a\tb' AS x, NULL AS y, 'c,\"d\"' AS z) TO STDOUT "
                "(FORMAT csv, HEADER)") as copy:
            data = b"".join(bytes(b) for b in copy)
        assert data == b'x,y,z\na\tb,,"c,""d"""\n'


@pytest.mark.parametrize("sql, state, words", [
    ("COPY trips TO STDOUT", "0A000", "write COPY (SELECT <columns>, COUNT(*) FROM trips"),
    ("COPY (SELECT * FROM trips) TO STDOUT", "0A000", "SELECT * on the private table"),
    ("COPY (SELECT * FROM read_text('/etc/hostname')) TO STDOUT", "0A000", "read_text()"),
    ("COPY (SELECT 1) TO STDOUT WITH BINARY", "0A000", "option 'BINARY' is not supported"),
    ("COPY (SET statement_timeout = 1) TO STDOUT", "0A000", "a query that returns rows"),
    ("COPY (SELECT mode, COUNT(*) FROM trips GROUP BY mode) TO '{out}'", "25006",
     "read-only"),
])
def test_copy_refusals_say_what_to_write(server, tmp_path, sql, state, words):
    out = tmp_path / "out.csv"
    with psycopg.connect(_dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as err:
            with con.cursor() as cur, cur.copy(sql.format(out=out)) as copy:
                list(copy)
        assert err.value.sqlstate == state and words in str(err.value), err.value
        assert con.execute("SHOW statement_timeout").fetchone()[0] != "1ms"  # not run
        assert con.execute("SELECT COUNT(*) FROM trips").fetchone()[0] > 1000  # usable
    assert not out.exists()
