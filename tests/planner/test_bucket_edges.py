"""The bucket edges of a grouping expression (dpsql.planner.bucket_edges): which leaf-bin
edges ``floor(g(x))`` puts on a binned attribute, for the spellings BI tools write
(Metabase's ``floor((x - o) / w) * w + o``, ``floor(x * m)``), exactly where they are
exact, in the query's decimals and in DuckDB's DOUBLE arithmetic on the data; the day
of a cast to DATE (dpsql.planner.trunc_units.day_of) and ``date_trunc`` of a cast to
TIMESTAMP (trunc_call)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dpsql.domains.bin_edges import DECIMAL
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.bucket_edges import BUCKETS, Misaligned, bucket_call
from dpsql.planner.trunc_units import day_of, trunc_call, trunc_column
from dpsql.release_file import AttributeMeta

REAL = AttributeMeta("x", "range", ("x",), "d_x", 0.0, 10.0, 100, "real",
                     edge_mode=DECIMAL)  # bins 0.1: edge 3 is the DOUBLE 0.3
HALVES = AttributeMeta("x", "range", ("x",), "d_x", 0.0, 8.0, 16, "real",
                       edge_mode=DECIMAL)  # bins 0.5
INT = AttributeMeta("x", "range", ("x",), "d_x", 0.0, 100.0, 20, "integer", 1.0)  # 5 wide
DEC = AttributeMeta("x", "range", ("x",), "d_x", 0.0, 10.0, 100, "decimal", 0.01)
HOURS = AttributeMeta("x", "range", ("x",), "d_x", 1356998400.0, 1357862400.0, 240,
                      "timestamp", 1.0, unit="hour")  # 2013-01-01 .. 2013-01-11
SEVEN = AttributeMeta("x", "range", ("x",), "d_x", 1356998400.0, 1358208000.0, 48,
                      "timestamp", 1.0)  # bins of 7 hours


def edges(sql: str, a: AttributeMeta):
    """The reader's answer for the column ``x`` in ``sql``: (first, step, count) leaf
    edge indices, a :class:`Misaligned`, or None (no bucketing call)."""
    col = sqlglot.parse_one(sql, read="duckdb").find(exp.Column)
    call = bucket_call(col)
    return None if call is None else BUCKETS[type(call)](call, col, a)


@pytest.mark.parametrize("sql, a, found", [
    ("floor(x / 0.5) * 0.5", HALVES, (1, 1, 15)),
    ("((floor(((x - 0.0) / 0.5)) * 0.5) + 0.0)", HALVES, (1, 1, 15)),  # Metabase
    ("((floor(((x - 0.0) / 2)) * 2) + 0.0)", HALVES, (4, 4, 3)),
    ("floor(x * 2) / 2", HALVES, (1, 1, 15)),
    ("floor(2 * x)", HALVES, (1, 1, 15)),
    ("floor(x * 0.5)", HALVES, (4, 4, 3)),
    ("floor(x / (1/2))", HALVES, (1, 1, 15)),  # Metabase on Oracle
    ("floor(x * 2)", REAL, (5, 5, 19)),
    ("((floor(((x - 5.0) / 10)) * 10) + 5.0)", INT, (1, 2, 10)),  # edges 5, 15, ..., 95
    ("floor((x - 10) / 20)", INT, (2, 4, 5)),
    ("floor(x * 0.2)", INT, (1, 1, 19)),
    ("floor(x * 10)", DEC, (1, 1, 99)),  # DECIMAL arithmetic: exact
    ("floor((x - 0.5) / 2.5)", DEC, (5, 25, 4)),  # a DECIMAL minus, then DOUBLE / 2.5
])
def test_aligned_spellings_give_their_leaf_edges(sql, a, found):
    assert edges(sql, a) == found


@pytest.mark.parametrize("sql, a, why", [
    ("floor(x * 3)", REAL, ""),  # edges 1/3 apart: off the 0.1 grid
    ("((floor(((x - 2.0) / 10)) * 10) + 2.0)", INT, ""),  # 2, 12, ...: off the 5 grid
    ("floor(x / 0.1)", REAL, "2 at x = 0.3 and 3 at 0.39999999999999997"),
    ("floor(x * 10)", REAL, "8 at x = 0.8 and 9 at 0.8999999999999999"),
    ("floor((x - 1.0) / 0.5)", HALVES, "-2 at x = 0.0 and -1 at 0.49999999999999994"),
    ("floor(x / 0.1)", DEC, "2 at x = 0.3 and 3 at 0.39"),  # DECIMAL / is DOUBLE
    ("floor(-x)", HALVES, "decreases with x"),
    ("floor(10 - x)", HALVES, "decreases with x"),
])
def test_edges_that_cut_bins_exactly_or_in_doubles_are_misaligned(sql, a, why):
    found = edges(sql, a)
    assert isinstance(found, Misaligned)
    assert why in found.why


@pytest.mark.parametrize("sql", [
    "floor(x / y)", "floor(x * x)", "floor(1 / x)", "floor(abs(x) / 2)", "x * 2",
    "floor(x / 2, 1)", "round(x / 2)",
])
def test_what_is_no_affine_floor_is_no_bucket(sql):
    assert edges(sql, HALVES) is None


def test_the_double_check_is_vectorised_over_many_buckets():
    """A million bins of a real attribute in one pass (numpy's IEEE arithmetic is
    DuckDB's): a bucket of each bin, and Metabase's offset on whole numbers (exact)."""
    big = AttributeMeta("x", "range", ("x",), "d_x", 0.0, 2.0 ** 20, 2 ** 20, "real",
                        edge_mode=DECIMAL)
    assert edges("floor(x / 1)", big) == (1, 1, 2 ** 20 - 1)
    assert isinstance(edges("floor((x - 1.0) / 0.5 / 2)", big), tuple)


def day(sql: str, a: AttributeMeta) -> bool:
    return day_of(sqlglot.parse_one(sql, read="duckdb").find(exp.Column), a)


def test_a_cast_to_date_is_a_day_where_days_are_bin_edges():
    assert day("CAST(x AS DATE)", HOURS) and day("x::DATE", HOURS) and day("date(x)", HOURS)
    assert day("CAST((x) AS DATE)", HOURS)
    assert not day("TRY_CAST(x AS DATE)", HOURS)  # not a BI spelling; as before
    assert not day("CAST(x AS TIMESTAMP)", HOURS) and not day("x", HOURS)
    assert not day("CAST(x AS DATE)", INT)  # DuckDB refuses it on the data
    with pytest.raises(UnsupportedQueryError) as e:
        day("CAST(x AS DATE)", SEVEN)
    assert "is the day of 'x'" in str(e.value) and "bins of 7:00:00" in str(e.value)


@pytest.mark.parametrize("sql, through", [
    ("date_trunc('month', x)", True), ("date_trunc('month', CAST(x AS timestamp))", True),
    ("date_trunc('month', x::TIMESTAMP)", True),
    ("date_trunc('month', CAST(x AS DATETIME))", True),
    ("date_trunc('month', CAST(x AS TIMESTAMPTZ))", False),  # the session's zone
    ("date_trunc('month', CAST(x AS TIMESTAMP_S))", False),
    ("date_trunc('month', TRY_CAST(x AS TIMESTAMP))", False),
    ("date_trunc('month', CAST(x AS DATE))", False),  # the day: day_of
    ("date_trunc('month', x + INTERVAL 1 DAY)", False),
])
def test_date_trunc_reads_through_a_cast_to_a_plain_timestamp(sql, through):
    col = sqlglot.parse_one(sql, read="duckdb").find(exp.Column)
    call = trunc_call(col)
    assert (call is not None) is through
    if through:
        assert trunc_column(call) is col


def test_the_grid_check_at_once_is_the_check_bucket_by_bucket():
    """Integers and decimals: the vectorised check (exact steps folded into one DOUBLE
    division, then numpy) finds the same first cut as the exact check of each bucket's
    first and last values, on seeded attributes and constants (a third of them exact)."""
    import random
    from fractions import Fraction

    import numpy as np

    from dpsql.planner import bucket_edges as be
    from dpsql.planner.classify_calls import literal_value

    g = random.Random(5)
    cuts_found = 0
    for _ in range(300):
        kind = g.choice(["integer", "decimal"])
        step = 1.0 if kind == "integer" else g.choice([0.01, 0.1, 0.001])
        bins = g.randint(5, 300)
        width = g.randint(1, 7) * Fraction(repr(step)) * g.choice([1, 5, 10])
        lower = g.randint(-20, 20) * width
        a = AttributeMeta("x", "range", ("x",), "d_x", float(lower),
                          float(lower + width * bins), bins, kind, step)
        ops = [(op, Fraction(k), literal_value(sqlglot.parse_one(k), ""))
               for op, k in ((g.choice(["add", "sub", "mul", "div"]),
                              g.choice(["0.1", "0.3", "2.5", "3", "0.5", "1e-1", "7"]))
                             for _ in range(g.randint(1, 3)))]
        cuts = np.array(sorted({0, bins, *g.sample(range(1, bins), min(bins - 1, 12))}))
        each = [(x0, x1) for x0, x1 in ((be._first_value(a, int(lo)),
                                         be._last_value(a, int(hi)))
                                        for lo, hi in zip(cuts, cuts[1:]))
                if x0 <= x1 and be._bucket(ops, x0) != be._bucket(ops, x1)][:1]
        assert be._grid_pairs(a, ops, cuts) == each, (a, ops)
        cuts_found += bool(each)
    assert 150 < cuts_found < 300
