"""Differential SQL fuzzing of the planner: one table and one release with several views
at an enormous budget, and a classifier that compares dpsql's answer with plain DuckDB's
on the raw table; the queries come from tests/e2e/fuzz_sql_gen.py.

Every generated query is valid DuckDB SQL on the raw table. With ρ = 1e11 the noise is
negligible, so dpsql must either give DuckDB's numbers (within 0.5; groups matched as
multisets, NULL groups included) or refuse with :class:`dpsql.UnsupportedQueryError`.
A public group whose released count is 0 is listed by dpsql and not by a raw ``GROUP
BY`` (docs/sql.md): rows whose numbers are all 0 or NULL are dropped from both sides
before comparing.

Run ``python tests/e2e/fuzz_sql_gen.py N SEED`` for a long campaign; the test
(tests/e2e/test_fuzz_sql.py) runs a bounded, fixed-seed one.
"""

from __future__ import annotations

import decimal
import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N_ROWS = 6000
SPINE = [["N", "N1", "n1"], ["N", "N1", "n2"], ["N", "N2", "n3"], ["S", "S1", "s1"],
         ["S", "S1", "s2"], ["S", "S2", "s3"], ["E", "E1", "e1"]]
PUBLIC = ("CREATE OR REPLACE TEMP TABLE pub AS SELECT * FROM (VALUES ('a', 'vowel', 1), "
          "('b', 'consonant', 2), ('c', 'consonant', 3), ('z', 'none', 9)) AS v(label, kind, w)")


def write_data(base: Path) -> Path:
    """t.parquet: integer n (NULLs dropped), decimal p, real x, date d, month-binned date
    m, categorical c and integer k (NULL nodes), a region/province/city hierarchy with a
    NULL branch. Every value occurs often, so few public groups are empty."""
    g = np.random.default_rng(23)
    n = np.minimum(g.zipf(1.4, N_ROWS) - 1, 99).astype(np.int64)
    p = np.minimum(np.round(g.uniform(0, 10, N_ROWS), 2), 9.99)  # inside [0, 10)
    p[:40] = 2.5
    x = g.uniform(0, 8, N_ROWS)
    d = np.datetime64("2013-01-01") + g.integers(0, 365, N_ROWS).astype("timedelta64[D]")
    m = np.datetime64("2012-01-01") + g.integers(0, 1096, N_ROWS).astype("timedelta64[D]")
    ts = np.datetime64("2013-01-01T00:00:00") + g.integers(0, 7 * 86400, N_ROWS).astype(
        "timedelta64[s]")
    c = np.array(["a", "b", "c"], dtype=object)[g.integers(0, 3, N_ROWS)]
    c[g.random(N_ROWS) < 0.07] = None
    h = np.array(SPINE, dtype=object)[g.integers(0, len(SPINE), N_ROWS)]
    h[g.random(N_ROWS) < 0.05] = (None, None, None)
    table = pa.table({
        "n": pa.array(n, mask=g.random(N_ROWS) < 0.04),
        "p": pa.array([f"{v:.2f}" for v in p]).cast(pa.decimal128(6, 2)),
        "x": x, "d": pa.array(d, pa.date32()), "m": pa.array(m, pa.date32()),
        "ts": pa.array(ts, pa.timestamp("us")),
        "c": pa.array(list(c), pa.string()),
        "k": pa.array(g.integers(0, 20, N_ROWS), mask=g.random(N_ROWS) < 0.06),
        "r": pa.array(list(h[:, 0]), pa.string()), "pr": pa.array(list(h[:, 1]), pa.string()),
        "ci": pa.array(list(h[:, 2]), pa.string())})
    pq.write_table(table, base / "t.parquet")
    return base


def spec(rho: str = "1e11") -> dict:
    return {
        "name": "t", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": rho},
        "attributes": {
            "n": {"kind": "range", "lower": 0, "upper": 100, "bins": 100, "on_null": "drop"},
            "p": {"kind": "range", "lower": 0, "upper": 10, "bins": 1000},
            "x": {"kind": "range", "lower": 0, "upper": 8, "bins": 64},
            "d": {"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01", "width": 1},
            "ts": {"kind": "range", "lower": "2013-01-01 00:00:00",
                   "upper": "2013-01-08 00:00:00", "unit": "hour"},
            "m": {"kind": "range", "lower": "2012-01-01", "upper": "2014-12-31",
                  "unit": "month"},
            "c": {"kind": "categorical", "domain": ["a", "b", "c"], "on_null": "category"},
            "k": {"kind": "range", "lower": 0, "upper": 20, "bins": 20, "on_null": "category"},
            "h": {"kind": "hierarchy", "columns": ["r", "pr", "ci"], "on_null": "category",
                  "spine": SPINE},
        },
        "views": [
            {"name": "vhi", "levels": ["h"], "mechanism": "inftda"},
            {"name": "vch", "levels": ["c", "h"], "mechanism": "gaussian_tree"},
            {"name": "vck", "levels": ["c", "k"], "mechanism": "inftda"},
            {"name": "vkn", "levels": ["k", "n"], "mechanism": "gaussian_tree"},
            {"name": "vn", "levels": ["n"], "mechanism": "cascade"},
            {"name": "vp", "levels": ["p"], "mechanism": "cascade"},
            {"name": "vcx", "levels": ["c", "x"], "mechanism": "gaussian_tree"},
            {"name": "vd", "levels": ["d"], "mechanism": "cascade"},
            {"name": "vm", "levels": ["m"], "mechanism": "gaussian_tree"},
            {"name": "vts", "levels": ["ts"], "mechanism": "gaussian_tree"},
        ],
    }


def build(base: Path, name: str = "fuzz.duckdb") -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    out = base / name
    if not out.exists():
        build_release(ReleaseSpec.from_dict(spec(), base_dir=base), out, seed=1,
                      progress=False)
    return out


VIEWS = [v["name"] for v in spec()["views"]]


# ---------------------------------------------------------------- the oracle

def raw_connection(base: Path) -> duckdb.DuckDBPyConnection:
    """The raw table as ``t`` and under each view's name, as the release names them."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{base / 't.parquet'}')")
    for view in VIEWS:
        con.execute(f"CREATE VIEW {view} AS SELECT * FROM t")
    con.execute(PUBLIC)
    return con


def opened(base: Path):
    """Yields (dpsql's connection to the fuzz release, DuckDB's to the raw table, base)
    over ``base``, its data written and its release built if need be, then closes them
    (a pytest fixture's body: ``yield from fz.opened(path)``)."""
    if not (base / "t.parquet").exists():
        write_data(base)
    dp, raw = dp_connection(build(base)), raw_connection(base)
    try:
        yield dp, raw, base
    finally:
        dp.close()
        raw.close()


def dp_connection(release: Path) -> duckdb.DuckDBPyConnection:
    from dpsql import duck

    con = duckdb.connect()
    duck.attach(con, str(release))
    con.execute(PUBLIC)
    return con


def _num(v) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def _norm(row) -> tuple:
    """Numbers to 6 decimals (keys compare exactly; the noise is far below 1e-3)."""
    return tuple(round(float(v), 6) if _num(v) else v for v in row)


def _zero(row, key_width: int) -> bool:
    """A group whose count (the first number after the keys) is 0: a public group a raw
    GROUP BY does not list. Its AVG is the bin's mean when the count's noise is not
    exactly 0, so only the count decides."""
    if key_width and len(row) > key_width:
        v = row[key_width]  # NULL: SQL's SUM over no rows, where a released 0 sums to 0
        return v is None or (_num(v) and abs(float(v)) < 0.25)
    # an outer aggregate over no rows is all NULL (SUM, MAX): over the released zero
    # groups dpsql lists, 0
    return all(v is None or (_num(v) and abs(float(v)) < 0.25) for v in row[key_width:]) \
        and (any(_num(v) for v in row[key_width:]) or len(row) > key_width)


def same(got, want, kw: int, ordered_limit: bool = False) -> bool:
    """Multiset equality within 0.5, after dropping the rows whose numbers after the
    ``kw`` key columns are all 0 or NULL on both sides."""
    g = [r for r in got if not _zero(r, kw)]
    w = [r for r in want if not _zero(r, kw)]
    if ordered_limit:
        w = w[:len(g)]
    if len(g) != len(w):
        return False
    g = sorted(g, key=lambda r: repr(_norm(r[:kw])))
    w = sorted(w, key=lambda r: repr(_norm(r[:kw])))
    for a, b in zip(g, w):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if x is None and _num(y) and abs(float(y)) < 0.5 or \
                    y is None and _num(x) and abs(float(x)) < 0.5:
                continue  # SUM over released zeros is 0, not SQL's NULL (docs/sql.md)
            if _num(x) and _num(y):
                if abs(float(x) - float(y)) > 0.5:
                    return False
            elif _num(x) != _num(y) or (x != y and not (x is None and y is None)):
                return False
    return True


def _within(got, want_all, kw: int) -> bool:
    """A LIMIT cut inside a tie: every non-zero row of ``got`` is a row of the data."""
    pool = [r for r in want_all if not _zero(r, kw)]
    for r in got:
        if _zero(r, kw):
            continue
        match = next((i for i, w in enumerate(pool) if same([r], [w], kw)), None)
        if match is None:
            return False
        pool.pop(match)
    return True


_OUTER_LIMIT = re.compile(r" LIMIT \d+\s*$")
_WIDTH_BUCKET = re.compile(r"width_bucket\((\w+), ([-\d.]+), ([-\d.]+), (\d+)\)")


def _width_bucket(m: re.Match) -> str:
    """PostgreSQL's width_bucket (dpsql spells it out; this DuckDB has none): 0 below
    ``lo``, ``n + 1`` from ``hi``."""
    x, lo, hi, n = m.groups()
    return (f"(CASE WHEN {x} < {lo} THEN 0 WHEN {x} >= {hi} THEN {n} + 1 ELSE "
            f"CAST(floor(({x} - {lo}) * {n} / ({hi} - {lo})) AS BIGINT) + 1 END)")


def classify(dp, raw, q: str, kw: int) -> tuple[str, str]:
    """('equal' | 'refused' | 'raw_error' | 'answered' | 'unclear' | 'crash' | 'wrong',
    detail): 'answered' is a number from dpsql where DuckDB fails on the data."""
    import dpsql
    from dpsql import duck

    q_raw = _WIDTH_BUCKET.sub(_width_bucket, q.replace("SUM(dp_count)", "SUM(1)"))
    try:
        want = raw.execute(q_raw).fetchall()
    except duckdb.Error as e:
        try:  # DuckDB fails on the data: dpsql must not answer either
            duck.execute(dp, q)[0].fetchall()
        except Exception:  # noqa: BLE001 - any refusal or error is DuckDB's outcome
            return "raw_error", str(e).splitlines()[0]
        return "answered", f"DuckDB on the data: {str(e).splitlines()[0]}"
    limit = _OUTER_LIMIT.search(q) is not None  # a LIMIT of a subquery cuts no output row
    try:
        cur, _ = duck.execute(dp, q)
        got = cur.fetchall()
    except dpsql.UnsupportedQueryError as e:
        return "refused", str(e)
    except dpsql.Error as e:
        return "unclear", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - a crash is what we look for
        return "crash", f"{type(e).__name__}: {e}"
    if limit:
        want_all = raw.execute(_OUTER_LIMIT.sub("", q_raw)).fetchall()
        ok = same(got, want_all, kw, ordered_limit=True) or _within(got, want_all, kw)
    else:
        ok = same(got, want, kw)
    if ok:
        return "equal", ""
    return "wrong", f"got {sorted(map(_norm, got), key=repr)[:12]} want " \
                    f"{sorted(map(_norm, want), key=repr)[:12]}"
