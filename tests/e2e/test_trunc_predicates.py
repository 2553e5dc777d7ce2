"""``WHERE date_trunc(unit, d) <op> v`` on binned date and timestamp attributes, answered
as the equivalent range of ``d`` (:mod:`dpsql.planner.trunc_predicates`), checked against
plain DuckDB on the raw table at an enormous budget (every count within 0.5): the
identities are DuckDB's meaning of the comparison, for aligned and mid-unit values,
NULLs, ``NOT``, ``BETWEEN``, ``IN``, ``IS [NOT] DISTINCT FROM``, constant subqueries and
lists (``= ANY ([a, b])``, ``<> ALL ([])``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
from conftest import count_mismatches, release_and_raw


@pytest.fixture(scope="module")
def cons(tmp_path_factory):
    """(dpsql on the exact release, DuckDB on the raw table): a date d with one row on
    every day of 2012-11-15 .. 2014-02-14 plus random ones and NULLs (on_null =
    "category"), day bins; a timestamp ts over 2013-03-30 .. 2013-04-02 (a month, a
    quarter and an ISO week begin inside), minute bins."""
    base = tmp_path_factory.mktemp("trunc")
    g = np.random.default_rng(3)
    days = np.arange(np.datetime64("2012-11-15"), np.datetime64("2014-02-15"))
    d = np.concatenate([days, days[g.integers(0, len(days), 800)]])
    n = len(d)
    ts = np.datetime64("2013-03-30T00:00:00") + g.integers(0, 3 * 86400, n).astype(
        "timedelta64[s]")
    pq.write_table(pa.table({"d": pa.array(d, pa.date32(), mask=g.random(n) < 0.05),
                             "ts": pa.array(ts, pa.timestamp("us"))}), base / "t.parquet")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e10"},
            "attributes": {
                "d": {"kind": "range", "lower": "2012-11-15", "upper": "2014-02-15",
                      "width": 1, "on_null": "category"},
                "ts": {"kind": "range", "lower": "2013-03-30 00:00:00",
                       "upper": "2013-04-02 00:00:00", "unit": "minute"}},
            "views": [{"name": "vd", "levels": ["d"], "mechanism": "gaussian_tree"},
                      {"name": "vts", "levels": ["ts"], "mechanism": "gaussian_tree"}]}
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb", seed=1,
                  progress=False)
    with release_and_raw(base) as pair:
        yield pair


OPS = (">=", ">", "<", "<=", "=", "<>")
VALUES = {  # unit: (attribute, a unit start, a value inside a unit)
    "year": ("d", "DATE '2013-01-01'", "'2013-06-15'"),
    "quarter": ("d", "'2013-04-01'", "TIMESTAMP '2013-07-01 00:00:01'"),
    "month": ("d", "DATE '2013-03-01'", "DATE '2013-03-15'"),
    "week": ("d", "'2013-06-03'", "DATE '2013-06-05'"),  # 2013-06-03 is a Monday
    "day": ("d", "TIMESTAMP '2013-05-05 00:00:00'", "'2013-05-05 12:00'"),
    "hour": ("ts", "'2013-03-31 05:00:00'", "TIMESTAMP '2013-03-31 05:30:00'"),
    "minute": ("ts", "'2013-04-01 10:07'", "'2013-04-01 10:07:30'"),
    "isoyear": ("d", "'2013-12-30'", "DATE '2013-06-15'"),  # ISO 2014 starts on Dec 30
    "decade": ("d", "DATE '2010-01-01'", "'2013-06-15'"),
    "millennium": ("d", "'2000-01-01'", "TIMESTAMP '2001-01-01 00:00:00'"),
    "second": ("ts", "'2013-04-01 10:07:01'", "'2013-04-01 10:07:01.5'"),
}
WHERES = [f"date_trunc('{u}', {a}) {op} {v}" for u, (a, *vs) in VALUES.items()
          for v in vs for op in OPS] + [
    "NOT (date_trunc('month', d) = DATE '2013-03-01')",
    "date_trunc('month', d) <> '2013-03-15'",  # every non-NULL row
    "date_trunc('month', d) = NULL", "NOT (date_trunc('year', d) < CAST(NULL AS DATE))",
    "DATE '2013-03-15' <= date_trunc('month', d)",
    "date_trunc('quarter', d) BETWEEN '2013-02-01' AND DATE '2013-07-01'",
    "date_trunc('week', d) NOT BETWEEN '2013-01-02' AND '2013-11-30'",
    "date_trunc('month', d) IN ('2013-01-01', DATE '2013-05-01', '2013-07-04', NULL)",
    "date_trunc('month', d) NOT IN ('2013-01-01', '2013-05-01')",
    "date_trunc('month', d) IS NOT DISTINCT FROM '2013-02-01'",
    "date_trunc('month', d) IS DISTINCT FROM NULL",
    "date_trunc('year', d) >= DATE '2012-12-31' + INTERVAL 1 DAY",
    "date_trunc('month', d) < '9999-12-15'", "date_trunc('year', d) > '9999-06-01'",
    "date_trunc('week', ts) >= '2013-03-31 23:00'", "date_trunc('month', ts) < '2013-04-01'",
    "date_trunc('quarter', ts) = '2013-04-01' AND ts < '2013-04-01 12:00'",
    "date_trunc('day', ts) > '2013-03-30' OR ts < '2013-03-30 01:00'",
    "date_trunc('month', d) >= '2013-03-01' AND date_trunc('month', d) < '2013-06-01'",
    # constant subqueries and lists, as for d itself (these were refused: "must be a
    # timestamp literal ..., got '(SELECT ...)'")
    "date_trunc('month', d) IN (SELECT DATE '2013-03-01')",
    "date_trunc('month', d) NOT IN (SELECT DATE '2013-03-01')",
    "date_trunc('month', d) = (SELECT '2013-03-01')",  # a VARCHAR, cast under =
    "date_trunc('month', d) < ANY (SELECT DATE '2013-03-15')",
    "date_trunc('week', d) >= ALL (SELECT DATE '2013-06-05')",
    "date_trunc('month', d) = ANY ([DATE '2013-03-01', '2013-05-01'])",
    "NOT (date_trunc('month', d) <> ALL ([DATE '2013-03-01', NULL]))",
    "date_trunc('month', d) <> ALL ([])", "NOT (date_trunc('month', d) = ANY ([]))",
    "date_trunc('hour', ts) IN ((SELECT TIMESTAMP '2013-03-31 05:00:00'), NULL)",
    # NULL exactly where d is (was refused: "predicate ... is not supported")
    "date_trunc('year', d) IS NULL", "NOT (date_trunc('month', d) IS NULL)",
    "date_trunc('hour', d) IS NULL",  # an hour of a DATE: its midnight, NULL where d is
    # in parentheses (were refused: "predicate ... on the binned attribute 'd' is not
    # supported")
    "(date_trunc('month', d)) >= '2013-03-01'", "'2013-03-01' = ((date_trunc('month', d)))",
    "(date_trunc('week', d)) BETWEEN '2013-01-02' AND '2013-11-30'",
    "(date_trunc('month', d)) IN ('2013-01-01', '2013-05-01')", "(date_trunc('year', d)) IS NULL",
]


def test_date_trunc_comparisons_are_sql(cons):
    wrong, counts = count_mismatches(*cons, WHERES)
    assert not wrong, wrong
    assert len(set(counts)) > 30 and max(counts) > 1000  # not all empty or everything


@pytest.mark.parametrize("where,message", [
    ("date_trunc('millenia', d) >= '2013-01-01'", r"the unit must be a literal among day, "
     r"week, month, quarter, year, isoyear, decade, century, millennium"),  # DuckDB's
    # documentation spells it so; DuckDB 2.0.1 refuses it
    ("date_trunc('month', d) >= 5", r"the value compared with DATE_TRUNC\('MONTH', d\) "
     r"must be a timestamp literal"),
    ("date_trunc('month', d) IN (SELECT max(d) FROM t)", r"the planner does not run a "
     r"subquery"),
    ("date_trunc('month', d) < ANY (SELECT '2013-01-01')", r"a VARCHAR, which DuckDB "
     r"casts .* only under =, <>, IS \[NOT\] DISTINCT FROM and IN \(a, b\); it refuses "
     r"< ANY \(SELECT \.\.\.\)"),
    ("date_trunc('month', d) = ANY (['2013-01-01'])", r"is a list of strings, a VARCHAR\[\]"),
    ("date_trunc('month', d) >= date_trunc('year', d)", r"predicate .* on the binned "
     r"attribute 'd' is not supported"),
    ("date_trunc('month', d) = '2013-01-01 05:00+02'", r"time zone"),
    # DuckDB answers date_trunc('hour', d) = TIMESTAMP '2013-05-05 00:00:00' false on
    # that day but IN (...) true: no answer agrees with it
    ("date_trunc('hour', d) = '2013-05-05'", r"compares it inconsistently .* "
     r"date_trunc\('day', d\)"),
    ("date_trunc('mins', d) IN ('2013-05-05')", r"units finer than a day on a DATE"),
])
def test_date_trunc_refusals_say_what_works(cons, where, message):
    with pytest.raises(dpsql.NotSupportedError, match=message):  # time zone: its parent
        cons[0].execute(f"SELECT COUNT(*) FROM t WHERE {where}")


def test_every_unit_spelling_duckdb_accepts_is_its_unit(cons):
    """DuckDB reads ``date_trunc('mon', d)`` as ``'month'`` (and 'y', 'w', 'hrs', ...):
    each spelling of :data:`~dpsql.domains.calendar.TRUNC_ALIASES` truncates like its
    unit in DuckDB itself, and is answered in WHERE and in GROUP BY as DuckDB answers it
    (they were refused: "the unit must be a literal among ...")."""
    from dpsql.domains.calendar import TRUNC_ALIASES

    con, raw = cons
    value = "TIMESTAMP '2013-03-31 05:17:42.5'"
    for alias, unit in TRUNC_ALIASES.items():
        assert raw.execute(f"SELECT date_trunc('{alias}', {value}) = "
                           f"date_trunc('{unit}', {value})").fetchone()[0], alias
        a, start, _ = VALUES.get(unit, ("ts", "'2013-03-31 05:17:42'", None))  # second
        q = f"SELECT COUNT(*) FROM t WHERE date_trunc('{alias}', {a}) >= {start}"
        if unit in ("millisecond", "microsecond"):  # the release keeps no fraction
            with pytest.raises(dpsql.NotSupportedError, match="fraction of a second"):
                con.execute(q)
            continue
        got, want = con.execute(q).fetchall()[0][0], raw.execute(q).fetchall()[0][0]
        assert abs(got - want) <= 0.5, (q, got, want)
    for unit in ("mon", "hour"):  # the hour of a date is its midnight, as its day is
        q = (f"SELECT date_trunc('{unit}', d) AS m, COUNT(*) FROM t WHERE d < '2013-02-01' "
             "GROUP BY m ORDER BY m")
        got, want = dict(con.execute(q).fetchall()), dict(raw.execute(q).fetchall())
        assert len(want) >= 3 and set(want) <= set(got), unit  # and the empty days
        assert all(abs(n - want.get(m, 0)) <= 0.5 for m, n in got.items()), unit
