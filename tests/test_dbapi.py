"""PEP 249 conformance of dpsql.dbapi, modelled on the ``dbapi20`` compliance suite.

The dbapi20 checks that need a writable database (CREATE/INSERT round trips, callproc)
are replaced by their read-only counterpart: DDL and DML must raise NotSupportedError.
Answers are checked against the exact release (ρ = 1e12), where DuckDB on the raw parquet
is the oracle (STYLE §5a).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import duckdb
import pyarrow as pa
import pytest

import dpsql
import dpsql.dbapi as db
from dpsql.dbapi import SeededReleaseWarning

# The fixture releases are seeded on purpose; each test that is about the warning checks
# it explicitly with pytest.warns.
pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

BY_MODE = "SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode ORDER BY mode"
BY_REGION = "SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region"
TOTAL = "SELECT COUNT(*) AS n FROM trips"


@pytest.fixture()
def con(trips_release):
    c = db.connect(trips_release)
    yield c
    c.close()


@pytest.fixture()
def cur(con):
    return con.cursor()


@pytest.fixture(scope="module")
def private_release(trips_data, tmp_path_factory):
    """A small release built WITHOUT a seed: OS-entropy noise, hence private."""
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict({
        "name": "trips", "source": "trips.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1.0},
        "attributes": {"mode": {"kind": "categorical",
                                "domain": ["car", "train", "bus", "bike", "walk", "plane"]}},
        "views": [{"name": "modes", "levels": ["mode"], "mechanism": "gaussian_tree"}],
    }, base_dir=trips_data)
    out = tmp_path_factory.mktemp("private") / "private.duckdb"
    build_release(spec, out, seed=None, progress=False)
    return out


# --------------------------------------------------------------------------------------
# Module interface (dbapi20: test_apilevel, test_threadsafety, test_paramstyle, ...)
# --------------------------------------------------------------------------------------

def test_module_globals():
    assert db.apilevel == "2.0"
    assert db.threadsafety == 1  # threads may share the module, not connections
    assert db.paramstyle == "qmark"


def test_exception_hierarchy():
    assert issubclass(db.Warning, Exception)
    assert issubclass(db.Error, Exception)
    for cls in (db.InterfaceError, db.DatabaseError):
        assert issubclass(cls, db.Error)
    for cls in (db.DataError, db.OperationalError, db.IntegrityError, db.InternalError,
                db.ProgrammingError, db.NotSupportedError):
        assert issubclass(cls, db.DatabaseError)
    # the DP leaves sit under the branch a DB-API user would catch
    assert issubclass(dpsql.UnsupportedQueryError, db.NotSupportedError)
    assert issubclass(dpsql.SqlSyntaxError, db.ProgrammingError)
    # one hierarchy: the module's classes are dpsql's
    assert db.Error is dpsql.Error and db.NotSupportedError is dpsql.NotSupportedError
    assert issubclass(SeededReleaseWarning, UserWarning)


def test_exceptions_as_connection_attributes(con):
    for name in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError",
                 "OperationalError", "IntegrityError", "InternalError", "ProgrammingError",
                 "NotSupportedError"):
        assert getattr(con, name) is getattr(db, name)


def test_type_objects_and_constructors():
    assert db.NUMBER == "BIGINT" and db.NUMBER == "DECIMAL(38,0)" and db.NUMBER == "DOUBLE"
    assert db.STRING == "VARCHAR" and db.STRING != "BIGINT"
    assert db.DATETIME == "TIMESTAMP WITH TIME ZONE" and db.DATETIME == "DATE"
    assert db.BINARY == "BLOB"
    assert db.ROWID != "BIGINT"
    assert db.Date(2020, 1, 2).isoformat() == "2020-01-02"
    assert db.Time(1, 2, 3).isoformat() == "01:02:03"
    assert db.Timestamp(2020, 1, 2, 3, 4, 5).year == 2020
    assert db.DateFromTicks(0).year in (1969, 1970)
    assert db.TimeFromTicks(0).second == 0
    assert db.TimestampFromTicks(86400 * 365).year in (1970, 1971)
    assert db.Binary(b"ab") == b"ab"


def test_lazy_connect_export(trips_release):
    assert dpsql.connect is db.connect or dpsql.connect.__name__ == "connect"
    with dpsql.connect(trips_release) as c:
        assert isinstance(c, db.Connection)


# --------------------------------------------------------------------------------------
# Connection (dbapi20: test_connect, test_close, test_commit, test_rollback)
# --------------------------------------------------------------------------------------

def test_connect_and_close(trips_release):
    c = db.connect(trips_release)
    assert not c.closed
    c.commit()
    c.rollback()  # read-only: no pending changes, so a no-op (module docstring)
    cur = c.cursor()
    c.close()
    assert c.closed
    for call in (c.cursor, c.commit, c.rollback):
        with pytest.raises(db.InterfaceError, match="closed"):
            call()
    with pytest.raises(db.InterfaceError):
        cur.execute(TOTAL)  # cursors die with their connection
    c.close()  # twice is harmless


def test_connection_context_manager(trips_release):
    with db.connect(trips_release) as c:
        assert c.cursor().execute(TOTAL).fetchone()[0] > 0
    assert c.closed


def test_read_write_is_refused(trips_release):
    with pytest.raises(db.NotSupportedError, match="immutable"):
        db.connect(trips_release, read_only=False)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(db.Error, match="nope.duckdb"):
        db.connect(tmp_path / "nope.duckdb")


def test_not_a_release(tmp_path):
    path = tmp_path / "plain.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(db.DatabaseError):
        db.connect(path)


def test_several_releases_on_one_connection(trips_release, exact_release):
    with db.connect(trips_release) as c:
        alias = c.attach(exact_release, name="exact")
        assert alias == "exact"
        assert set(c.releases) == {"trips", "exact"}
        noisy = c.execute(TOTAL).fetchone()[0]
        exact = c.execute("SELECT COUNT(*) FROM exact").fetchone()[0]
        assert exact == pytest.approx(20_000, abs=1e-6)
        assert abs(noisy - exact) < 200  # ρ = 1 noise on a total is a few units


# --------------------------------------------------------------------------------------
# Seeded (not private) releases
# --------------------------------------------------------------------------------------

def test_seeded_release_warns_and_is_flagged(trips_release):
    with pytest.warns(SeededReleaseWarning, match="NOT private") as record:
        c = db.connect(trips_release)
    assert record[0].filename == __file__  # points at the caller of connect()
    with c:
        assert c.seeded == {"trips"}
        cur = c.execute(TOTAL)
        assert cur.dp_info["privacy"] == db.SEEDED_NOTE == "seeded: not private"
        assert cur.dp_info["seeded"] is True


def test_private_release_does_not_warn(private_release):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with db.connect(private_release) as c:
            cur = c.execute(BY_MODE)
            assert len(cur.fetchall()) == 6
            assert "privacy" not in cur.dp_info and cur.dp_info["seeded"] is False
            assert not c.seeded


# --------------------------------------------------------------------------------------
# Cursor: description, rowcount, fetch* (dbapi20: test_description, test_rowcount,
# test_fetchone, test_fetchmany, test_fetchall, test_mixedfetch, test_arraysize, test_next)
# --------------------------------------------------------------------------------------

def test_description(cur):
    assert cur.description is None
    cur.execute(BY_MODE)
    d = cur.description
    assert len(d) == 2 and all(len(col) == 7 for col in d)
    assert [col[0] for col in d] == ["mode", "n"]
    assert d[0][1] == db.STRING
    assert d[1][1] == db.NUMBER


def test_rowcount(cur):
    assert cur.rowcount == -1
    cur.execute(BY_MODE)
    assert cur.rowcount == -1  # unknown while streaming
    rows = cur.fetchall()
    assert cur.rowcount == len(rows) == 6


def test_fetch_before_execute(cur):
    for call in (cur.fetchone, cur.fetchall, cur.fetchmany, cur.fetch_arrow_table):
        with pytest.raises(db.Error, match="execute"):
            call()


def test_fetchone(cur):
    cur.execute(TOTAL)
    row = cur.fetchone()
    assert isinstance(row, tuple) and len(row) == 1
    assert cur.fetchone() is None
    assert cur.rowcount == 1


def test_fetchmany_and_arraysize(cur):
    assert cur.arraysize == 1
    cur.execute(BY_MODE)
    assert len(cur.fetchmany()) == 1
    cur.arraysize = 2
    assert len(cur.fetchmany()) == 2
    assert len(cur.fetchmany(10)) == 3  # 6 modes: 1 + 2 + 3
    assert cur.fetchmany(10) == []
    assert cur.rowcount == 6
    with pytest.raises(db.ProgrammingError):
        cur.execute(BY_MODE).fetchmany(-1)


def test_fetchall_and_mixed_fetch(cur):
    all_rows = cur.execute(BY_MODE).fetchall()
    assert [r[0] for r in all_rows] == sorted(["car", "train", "bus", "bike", "walk", "plane"])
    cur.execute(BY_MODE)
    mixed = [cur.fetchone()] + cur.fetchmany(2) + cur.fetchall()
    assert mixed == all_rows
    assert cur.fetchall() == [] and cur.fetchone() is None


def test_iteration(cur):
    rows = list(cur.execute(BY_MODE))
    assert rows == cur.execute(BY_MODE).fetchall()


def test_cursors_do_not_block_each_other(con):
    a, b = con.cursor(), con.cursor()
    a.execute(BY_MODE)
    first = a.fetchone()
    b.execute(BY_REGION)
    assert len(b.fetchall()) == 4
    assert a.fetchone() != first  # a's stream survived b's query
    assert len(a.fetchall()) == 4


def test_execute_returns_cursor_and_resets(cur):
    assert cur.execute(BY_MODE) is cur
    cur.fetchone()
    cur.execute(TOTAL)
    assert [d[0] for d in cur.description] == ["n"]
    assert len(cur.fetchall()) == 1


# --------------------------------------------------------------------------------------
# Closed objects, no-op methods, context managers
# --------------------------------------------------------------------------------------

def test_closed_cursor(cur):
    cur.execute(TOTAL)
    cur.close()
    assert cur.closed
    for call in (lambda: cur.execute(TOTAL), cur.fetchone, cur.fetchall, cur.fetchmany,
                 lambda: cur.setinputsizes([]), lambda: cur.setoutputsize(10),
                 lambda: cur.executemany(TOTAL, [[]])):
        with pytest.raises(db.InterfaceError, match="closed"):
            call()
    cur.close()  # twice is harmless


def test_cursor_context_manager(con):
    with con.cursor() as cur:
        cur.execute(TOTAL)
    assert cur.closed


def test_setsizes_are_noops(cur):
    cur.setinputsizes([db.NUMBER])
    cur.setoutputsize(100)
    cur.setoutputsize(100, 0)
    assert cur.execute(TOTAL).fetchone()[0] > 0


# --------------------------------------------------------------------------------------
# Statements the read-only release refuses; parameters
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("statement", [
    "CREATE TABLE t (x INTEGER)",
    "INSERT INTO trips VALUES (1)",
    "DROP TABLE trips",
    "UPDATE trips SET mode = 'car'",
    "DELETE FROM trips",
])
def test_ddl_and_dml_are_not_supported(cur, statement):
    with pytest.raises(db.NotSupportedError):
        cur.execute(statement)


def test_unsupported_query(cur):
    with pytest.raises(dpsql.UnsupportedQueryError):
        cur.execute("SELECT * FROM trips")
    assert cur.description is None
    with pytest.raises(db.Error, match="execute"):
        cur.fetchall()


def test_syntax_error(cur):
    with pytest.raises(db.ProgrammingError) as info:
        cur.execute("SELEC mode, COUNT(*) FROM trips GROUP BY mode")
    assert isinstance(info.value, dpsql.SqlSyntaxError)


def test_qmark_parameters(exact_release, trips_data):
    raw = duckdb.connect()
    src = str(trips_data / "trips.parquet")
    want = raw.execute(f"SELECT COUNT(*) FROM '{src}' WHERE mode = 'bus'").fetchone()[0]
    with db.connect(exact_release) as c:
        cur = c.execute("SELECT COUNT(*) FROM trips WHERE mode = ?", ["bus"])
        assert cur.fetchone()[0] == pytest.approx(want, abs=1e-6)
        cur.execute("SELECT COUNT(*) FROM trips WHERE mode = ?", ("bus",))
        assert cur.fetchone()[0] == pytest.approx(want, abs=1e-6)


def test_a_list_parameter_is_a_list_for_any(exact_release):
    """``x = ANY(?)`` with a list, as psycopg binds a Python list: it was refused
    ('parameter of type list is not supported'); now a list literal, on a categorical
    attribute (DuckDB compares the labels) and on a binned one (the planner reads
    ``x < ANY([a, b])`` as ``x < a OR x < b``); an empty list keeps no row. ``x <> ALL(?)``
    is the AND, and keeps every row for an empty list (DuckDB's ``x <> ALL([])``)."""
    with db.connect(exact_release) as c:
        def one(sql, params=None):
            return c.execute(sql, params).fetchone()[0]

        assert one("SELECT COUNT(*) FROM trips WHERE mode = ANY(?)", [["bus", "car"]]) == \
            one("SELECT COUNT(*) FROM trips WHERE mode IN ('bus', 'car')")
        assert one("SELECT COUNT(*) FROM trips WHERE distance < ANY(?)", [(16, 48)]) == \
            one("SELECT COUNT(*) FROM trips WHERE distance < 48")
        assert one("SELECT COUNT(*) FROM trips WHERE mode = ANY(?)", [[]]) == 0
        # ALL (?): sqlglot reads ALL(...) of a list as a function call; it was refused
        # ("the bound of age must be a numeric literal ..., got 'ALL([30, 40])'")
        assert one("SELECT COUNT(*) FROM trips WHERE age <> ALL(?)", [[30, 40]]) == \
            one("SELECT COUNT(*) FROM trips WHERE age NOT IN (30, 40)")
        assert one("SELECT COUNT(*) FROM trips WHERE age < ALL(?)", [(30, 40)]) == \
            one("SELECT COUNT(*) FROM trips WHERE age < 30")
        assert one("SELECT COUNT(*) FROM trips WHERE age = ANY(?::INT[])", [["30", 40]]) \
            == one("SELECT COUNT(*) FROM trips WHERE age IN (30, 40)")  # was refused
        assert one("SELECT COUNT(*) FROM trips WHERE age > ALL(?)", [[]]) == \
            one("SELECT COUNT(*) FROM trips")
        # a list with a string is a VARCHAR[] as DuckDB binds it, not an INTEGER[] as the
        # literal ['30', 40] would be: refused as DuckDB refuses it (it answered 400)
        with pytest.raises(db.NotSupportedError, match="VARCHAR"):
            one("SELECT COUNT(*) FROM trips WHERE age = ANY(?)", [["30", 40]])


@pytest.mark.filterwarnings("ignore::dpsql.dbapi.PublicDomainWarning")  # the injected text
def test_parameter_injection_is_harmless(cur):
    total = cur.execute(TOTAL).fetchone()[0]
    try:
        cur.execute("SELECT COUNT(*) AS n FROM trips WHERE mode = ?", ["car' OR 1=1 --"])
    except db.Error:
        return  # a clear error is also fine (value outside the public domain)
    rows = cur.fetchall()
    assert rows == [] or rows[0][0] in (0, None) or rows[0][0] < total


@pytest.mark.parametrize("params", ["bus", {"mode": "bus"}, 3])
def test_bad_parameter_containers(cur, params):
    with pytest.raises(db.ProgrammingError, match="sequence"):
        cur.execute("SELECT COUNT(*) FROM trips WHERE mode = ?", params)


def test_wrong_number_of_parameters(cur):
    with pytest.raises(db.ProgrammingError):
        cur.execute("SELECT COUNT(*) FROM trips WHERE mode = ?", [])


def test_operation_must_be_text(cur):
    with pytest.raises(db.ProgrammingError, match="string"):
        cur.execute(42)


# --------------------------------------------------------------------------------------
# executemany / nextset (dbapi20: test_executemany, test_nextset)
# --------------------------------------------------------------------------------------

def test_executemany_gives_one_result_set_per_parameter_set(exact_release, trips_data):
    raw = duckdb.connect()
    src = str(trips_data / "trips.parquet")
    modes = ["car", "bus", "walk"]
    want = [raw.execute(f"SELECT COUNT(*) FROM '{src}' WHERE mode = ?", [m]).fetchone()[0]
            for m in modes]
    with db.connect(exact_release) as c:
        cur = c.cursor()
        cur.executemany("SELECT COUNT(*) FROM trips WHERE mode = ?", [[m] for m in modes])
        got = [cur.fetchone()[0]]
        while cur.nextset():
            got.append(cur.fetchone()[0])
        assert got == pytest.approx(want, abs=1e-6)
        assert cur.nextset() is None and cur.description is None


def test_executemany_plans_every_set_before_running(cur):
    with pytest.raises(db.ProgrammingError):
        cur.executemany("SELECT COUNT(*) FROM trips WHERE mode = ?", [["car"], []])
    assert cur.description is None


def test_executemany_empty(cur):
    cur.executemany("SELECT COUNT(*) FROM trips WHERE mode = ?", [])
    assert cur.description is None and cur.nextset() is None


# --------------------------------------------------------------------------------------
# Extras: dp_info, Arrow, pandas; answers match the oracle
# --------------------------------------------------------------------------------------

def test_dp_info_describes_the_answer(cur):
    assert cur.dp_info is None
    cur.execute(BY_REGION)
    info = cur.dp_info
    assert isinstance(info, dict)
    text = repr(info)
    assert "view" in info and info["view"] in ("geo_mode", "geo_gauss")
    for key in ("levels", "mechanism", "budget", "error_model", "notes"):
        assert key in info, f"dp_info lacks {key!r}: {text}"
    info["view"] = "tampered"
    assert cur.dp_info["view"] != "tampered"  # a copy


def test_fetch_arrow_table(cur):
    rows = cur.execute(BY_MODE).fetchall()
    table = cur.execute(BY_MODE).fetch_arrow_table()
    assert isinstance(table, pa.Table)
    assert table.column_names == ["mode", "n"]
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        (m, pytest.approx(float(n))) for m, n in rows]
    assert cur.rowcount == 6 and cur.fetchall() == []
    cur.execute(BY_MODE)
    cur.fetchmany(2)
    rest = cur.fetch_arrow_table()
    assert rest.num_rows == 4 and rest.column(0).to_pylist() == [r[0] for r in rows[2:]]


def test_fetch_df(cur):
    pd = pytest.importorskip("pandas")
    df = cur.execute(BY_MODE).fetch_df()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["mode", "n"]
    assert len(df) == 6
    cur.execute(BY_MODE).fetchmany(4)
    assert len(cur.fetch_df()) == 2
    assert cur.fetch_df().shape == (0, 2)  # exhausted: an empty frame, same columns
    assert cur.fetch_arrow_table().num_rows == 0


def test_fetch_df_without_pandas(cur, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    cur.execute(BY_MODE)
    with pytest.raises(db.NotSupportedError, match="pip install pandas"):
        cur.fetch_df()


def test_exact_release_matches_duckdb(exact_release, trips_data):
    raw = duckdb.connect()
    src = str(trips_data / "trips.parquet")
    want = raw.execute(f"SELECT mode, COUNT(*) FROM '{src}' GROUP BY mode ORDER BY mode"
                       ).fetchall()
    with db.connect(exact_release) as c:
        got = {m: n for m, n in c.execute(BY_MODE).fetchall()}
    for mode, n in want:
        assert got[mode] == pytest.approx(n, abs=1e-6)
    assert sum(got.values()) == pytest.approx(20_000, abs=1e-6)


def test_query_side_imports_no_mechanism_nor_rng(trips_release):
    # DESIGN layering: answering is post-processing, so connecting and querying never load
    # the mechanisms, the RNG or the samplers.
    code = ("import sys, warnings, dpsql.dbapi as db; "
            "warnings.simplefilter('ignore'); "
            f"c = db.connect({str(trips_release)!r}); c.execute('SELECT COUNT(*) FROM trips')"
            ".fetchall(); "
            "bad = [m for m in sys.modules if m.startswith(('dpsql.mechanisms', "
            "'dpsql.privacy.generator', 'dpsql.privacy.samplers', 'dpsql.release.build'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --------------------------------------------------------------------------------------
# Plan cache
# --------------------------------------------------------------------------------------

def test_plan_cache_hits_and_types(trips_release, monkeypatch):
    calls = []
    real = db.plan_query

    def counting(catalog, query, params=None):
        calls.append((query, params))
        return real(catalog, query, params)

    monkeypatch.setattr(db, "plan_query", counting)
    # unlocked: a locked-down connection cannot attach a release after its first query
    with db.connect(trips_release, allow_file_access=True) as c:
        q = "SELECT COUNT(*) FROM trips WHERE age >= ?"
        a = c.execute(q, [30]).fetchall()
        assert c.execute(q, [30]).fetchall() == a
        assert len(calls) == 1  # the second run reused the plan
        c.execute(q, [30.5]).fetchall()  # equal-hash values of another type: a new plan
        assert len(calls) == 2
        c.attach(trips_release, name="again")  # the catalog changed: plans are dropped
        c.execute(q, [30]).fetchall()
        assert len(calls) == 3


def test_plan_cache_can_be_turned_off(trips_release, monkeypatch):
    calls = []
    real = db.plan_query
    monkeypatch.setattr(db, "plan_query", lambda *a: calls.append(a) or real(*a))
    with db.connect(trips_release, plan_cache_size=0) as c:
        for _ in range(3):
            c.execute(TOTAL).fetchall()
    assert len(calls) == 3
    with pytest.raises(db.ProgrammingError, match="plan_cache_size"):
        db.connect(trips_release, plan_cache_size=-1)


def test_plan_cache_is_bounded_and_dp_info_is_a_copy(trips_release):
    with db.connect(trips_release, plan_cache_size=2) as c:
        for k in range(5):
            c.execute("SELECT COUNT(*) FROM trips WHERE age >= ?", [k]).fetchall()
        assert len(c._plans) == 2
        cur = c.execute(BY_MODE)
        cur.dp_info["notes"].append("tampered")
        assert "tampered" not in c.execute(BY_MODE).dp_info["notes"]
