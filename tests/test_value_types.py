"""Value types and NULL policies in the spec, their inference at release time, and the
predicate-to-interval arithmetic of the planner (exact, on each type's grid)."""

from __future__ import annotations

import math

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

import dpsql
from dpsql.planner.predicate_truth import predicate_intervals
from dpsql.planner.value_intervals import complement, intersect, union
from dpsql.release import build_release, open_release
from dpsql.release_file import AttributeMeta
from dpsql.release.value_types import infer_value_type, with_value_types
from dpsql.spec import ReleaseSpec

INF = math.inf


def _spec(attr: dict, **extra) -> dict:
    return {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1}, "attributes": {"a": attr, **extra},
            "views": [{"name": "v", "levels": ["a"]}]}


def _range(**kw) -> dict:
    return {"kind": "range", "lower": 0, "upper": 10, "bins": 10, **kw}


@pytest.mark.parametrize("attr,message", [
    (_range(type="integer", bins=4), r"attributes\.a: integer values need bins on their "
                                     r"grid: .* bin width \(2\.5\) must be whole numbers"),
    (_range(type="integer", lower=0.5), r"lower \(0\.5\)"),
    (_range(type="decimal"), r"attributes\.a\.resolution: missing"),
    (_range(type="decimal", resolution=0), r"resolution: must be > 0"),
    (_range(type="decimal", resolution=0.3), r"multiples of 0\.3"),
    (_range(type="real", resolution=0.1), r"only a decimal attribute has a resolution"),
    (_range(resolution=0.1), r"add type = \"decimal\""),
    (_range(type="float"), r"unknown value type 'float'; allowed: integer, decimal, real.*"
                           r"; did you mean 'real'\?"),
    (_range(type="DateTime"), r"did you mean 'timestamp'\?"),
    ({"kind": "range", "lower": "2013-01-01 00:00:00", "upper": "2013-01-02 00:00:00",
      "unit": "hours"}, r"unknown unit 'hours' .*; did you mean 'hour'\?"),
    (_range(type="timestamp", unit="fortnight"),
     r"unit: unknown unit 'fortnight' for a timestamp; allowed: second, minute, hour"),
    (_range(unit="day"), r"unit: a bin unit is for date and timestamp attributes"),
    ({"kind": "range", "lower": "2013-01-15", "upper": "2014-01-01", "unit": "month"},
     r"lower: month bins start on the first of a month"),
    ({"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01", "unit": "month",
      "bins": 11}, r"bins: is 11, but \[lower, upper\) holds 12 months"),
    ({"kind": "range", "lower": "2013-01-01", "upper": "2014-01-01", "unit": "day",
      "width": 1}, r"give one of 'unit' or 'width'"),
    ({"kind": "range", "lower": "2013-01-01 00:00:00+02:00", "upper": "2013-01-02 00:00:00",
      "unit": "hour"}, r"has a time zone offset"),
    ({"kind": "range", "lower": "2013-01-01 00:00:00", "upper": "2013-01-02 00:00:00",
      "width": 0.5}, r"bin width \(0\.5\) must be whole seconds"),
    (_range(type="date", lower="2013-13-01"), r"lower: '2013-13-01' is not a date"),
    ({"kind": "range", "lower": "2013-01-01", "upper": "2013-02-01", "width": 1.5},
     r"bin width \(1\.5\) must be whole days"),
    ({"kind": "categorical", "domain": [1, 2], "on_null": "category"},
     r"\"category\" needs a domain of strings"),
    ({"kind": "categorical", "domain": ["x"], "on_null": "keep"},
     r"unknown policy 'keep'; allowed: error, drop, category"),
])
def test_spec_refuses_bad_value_types_and_null_policies(attr, message):
    with pytest.raises(dpsql.SpecError, match=message):
        ReleaseSpec.from_dict(_spec(attr))


def test_spec_accepts_grid_types_and_round_trips():
    spec = ReleaseSpec.from_dict(_spec(_range(type="decimal", resolution=0.1, upper=1),
                                       c={"kind": "categorical", "domain": ["x"],
                                          "on_null": "category"}))
    a = spec.attributes["a"]
    assert (a.value_type, a.resolution, a.step) == ("decimal", 0.1, 0.1)
    assert spec.attributes["c"].domain_values == ("x", None)
    again = ReleaseSpec.from_json(spec.to_json())
    assert again.attributes == spec.attributes
    assert ReleaseSpec.from_dict(_spec(_range(type="integer"))).attributes["a"].step == 1.0


def test_date_bounds_make_a_date_attribute_binned_by_day_or_week():
    import datetime

    week = ReleaseSpec.from_dict(_spec({"kind": "range", "lower": "2012-12-31",
                                        "upper": datetime.date(2014, 1, 1), "width": 7}))
    a = week.attributes["a"]
    assert (a.value_type, a.step, a.lower, a.bins) == ("date", 1.0, 15705.0, 53)
    assert a.upper == a.lower + 7 * 53  # rounded up to a whole week
    assert ReleaseSpec.from_json(week.to_json()).attributes["a"] == a


@pytest.mark.parametrize("duck_type,expected", [
    ("BIGINT", ("integer", None)), ("UTINYINT", ("integer", None)),
    ("DECIMAL(6,2)", ("decimal", 0.01)), ("DECIMAL(18,0)", ("integer", None)),
    ("DOUBLE", ("real", None)), ("FLOAT", ("real", None)), ("DATE", ("date", None)),
])
def test_value_type_inference(duck_type, expected):
    assert infer_value_type(duck_type) == expected


@pytest.mark.parametrize("values,source,integer", [
    (["1", "2", "10"], "INTEGER", True), (["-3", "0", "7"], "SMALLINT", True),
    (["1", "2"], "DECIMAL(9,0)", True), (["9223372036854775807"], "HUGEINT", True),
    (["1", "2"], "VARCHAR", False),  # text in the source stays text
    (["1", "07"], "INTEGER", False), (["+1", "2"], "INTEGER", False),  # not DuckDB's text
    (["1", "2.5"], "INTEGER", False), (["9223372036854775808"], "HUGEINT", False),
    ([1, 2], "INTEGER", False),  # numbers in the spec: integers as declared, no marking
])
def test_text_labels_of_an_integer_source_column_are_marked(values, source, integer):
    spec = ReleaseSpec.from_dict(_spec({"kind": "categorical", "domain": values}),
                                 base_dir=".")
    typed = with_value_types(spec, {"a": source})
    assert typed.attributes["a"].integer_columns == (("a",) if integer else ())
    # spine values are text however the spec writes them: [1, 2] reads as "1", "2"
    spine = {"kind": "hierarchy", "columns": ["p", "q"], "spine": [[1, v] for v in values]}
    typed = with_value_types(ReleaseSpec.from_dict(_spec(spine), base_dir="."),
                             {"p": "BIGINT", "q": source})
    as_text = integer or values == [1, 2]
    assert typed.attributes["a"].integer_columns == (("p", "q") if as_text else ("p",))


def _write(tmp_path, table: pa.Table) -> None:
    pq.write_table(table, tmp_path / "t.parquet")


def test_inferred_types_are_recorded_in_the_release(tmp_path):
    con = duckdb.connect()
    con.execute(f"COPY (SELECT i::BIGINT AS a, (i / 100)::DECIMAL(6,2) AS d, i / 7.0 AS r "
                f"FROM range(1000) t(i)) TO '{tmp_path / 't.parquet'}'")
    raw = _spec(_range(upper=1000, bins=100), d={"kind": "range", "lower": 0, "upper": 10,
                                                 "bins": 100},
                r={"kind": "range", "lower": 0, "upper": 150, "bins": 64})
    raw["views"] = [{"name": "v", "levels": ["a", "d", "r"], "mechanism": "gaussian_tree"}]
    out = tmp_path / "t.duckdb"
    build_release(ReleaseSpec.from_dict(raw, base_dir=tmp_path), out, seed=1, progress=False)
    rel = open_release(out)
    got = {n: (a.value_type, a.step) for n, a in rel.attributes.items()}
    assert got == {"a": ("integer", 1.0), "d": ("decimal", 0.01), "r": ("real", None)}
    assert rel.spec["attributes"]["d"]["type"] == "decimal"


def test_an_inferred_grid_type_with_off_grid_bins_is_refused(tmp_path):
    con = duckdb.connect()
    con.execute(f"COPY (SELECT i::INTEGER AS a FROM range(100) t(i)) TO "
                f"'{tmp_path / 't.parquet'}'")
    spec = ReleaseSpec.from_dict(_spec(_range(upper=100, bins=40)), base_dir=tmp_path)
    with pytest.raises(dpsql.DataError, match=r"bin width \(2\.5\) must be whole numbers.*"
                                              r"inferred from the source column's type "
                                              r"INTEGER"):
        build_release(spec, tmp_path / "t.duckdb", seed=1, progress=False)


def test_decimals_are_binned_exactly_on_their_grid(tmp_path):
    """0.3 in bins of 0.1 is bin 3 (floor(0.3 / 0.1) is 2 in binary floating point)."""
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 0.3::DECIMAL(4,1) AS a FROM range(50)) TO "
                f"'{tmp_path / 't.parquet'}'")
    raw = _spec(_range(upper=1, bins=10))
    raw["budget"] = {"rho": "1e11"}
    raw["views"] = [{"name": "v", "levels": ["a"], "mechanism": "cascade"}]
    out = tmp_path / "t.duckdb"
    build_release(ReleaseSpec.from_dict(raw, base_dir=tmp_path), out, seed=1, progress=False)
    depth = open_release(out).views["v"].depth
    rows = duckdb.connect(str(out), read_only=True).execute(
        f"SELECT a_bin_lo, round(dp_count) FROM v__l{depth} WHERE dp_count > 1").fetchall()
    assert rows == [(3, 50.0)]


# ---- interval arithmetic -------------------------------------------------------------

def _intervals(where: str, value_type: str, step: float | None = None,
               on_null: str = "error"):
    meta = AttributeMeta("x", "range", ("x_lo", "x_hi"), "d", 0.0, 100.0, 100, value_type,
                         step, on_null)
    cond = sqlglot.parse_one(f"SELECT 1 FROM t WHERE {where}", dialect="duckdb") \
        .args["where"].this
    return predicate_intervals(cond, meta, lambda n: isinstance(n, exp.Column)
                               and n.name == "x")


@pytest.mark.parametrize("where,expected", [
    ("x BETWEEN 1000 AND 2475", ((1000, 2476),)),
    ("x <= 5", ((-INF, 6),)), ("x < 5", ((-INF, 5),)), ("x < 5.5", ((-INF, 6),)),
    ("x <= 5.5", ((-INF, 6),)), ("x >= 5", ((5, INF),)), ("x > 5", ((6, INF),)),
    ("x > 5.5", ((6, INF),)), ("5 < x", ((6, INF),)), ("x = 5", ((5, 6),)),
    ("x = 5.5", ()), ("x IN (3, 1, 2, 7)", ((1, 4), (7, 8))),
    ("x NOT IN (3, 4)", ((-INF, 3), (5, INF))), ("x <> 3", ((-INF, 3), (4, INF))),
    ("x NOT BETWEEN 2 AND 4", ((-INF, 2), (5, INF))),
    ("x < 2 OR x >= 8", ((-INF, 2), (8, INF))), ("NOT (x > 3)", ((-INF, 4),)),
    ("x BETWEEN 5 AND 1", ()), ("x IS NOT NULL", ((-INF, INF),)),
    ("(x > 1 AND x < 9) AND x <> 5", ((2, 5), (6, 9))),
])
def test_integer_predicates_keep_whole_values(where, expected):
    assert _intervals(where, "integer", 1.0) == expected


@pytest.mark.parametrize("where,expected", [
    ("x <= 0.3", ((-INF, 0.31),)), ("x < 0.305", ((-INF, 0.31),)),
    ("x = 0.3", ((0.3, 0.31),)), ("x = 0.305", ()), ("x > 0.1", ((0.11, INF),)),
    ("x BETWEEN 0.1 AND 0.2", ((0.1, 0.21),)),
])
def test_decimal_predicates_are_exact_on_the_grid(where, expected):
    got = _intervals(where, "decimal", 0.01)
    assert len(got) == len(expected)
    for (a, b), (c, d) in zip(got, expected):
        assert (a, b) == pytest.approx((c, d), abs=1e-12)


@pytest.mark.parametrize("where,expected", [
    ("x <= DATE '1970-01-05'", ((-INF, 5),)), ("x = '1970-01-02'", ((1, 2),)),
    ("x > CAST('1970-01-10' AS DATE)", ((10, INF),)),
    ("x IN ('1970-01-01', '1970-01-03')", ((0, 1), (2, 3))),
])
def test_date_predicates_compare_whole_days(where, expected):
    assert _intervals(where, "date", 1.0) == expected


def test_a_date_compared_with_a_number_is_refused():
    with pytest.raises(dpsql.UnsupportedQueryError, match="must be a date literal"):
        _intervals("x <= 5", "date", 1.0)


@pytest.mark.parametrize("where", ["x = 5", "x IN (1, 2)", "x <> 5", "x NOT IN (1)",
                                   # a range that is one point, or leaves one out
                                   "x BETWEEN 5 AND 5", "x >= 5 AND x <= 5",
                                   "x > 5 OR x < 5", "NOT (x BETWEEN 5 AND 5)"])
def test_points_of_a_real_axis_are_refused(where):
    with pytest.raises(dpsql.UnsupportedQueryError, match="real-valued attribute 'x'"):
        _intervals(where, "real")


@pytest.mark.parametrize("where,expected", [
    ("x NOT IN (1.5, NULL)", ()), ("NOT (x IN (1.5, NULL))", ()),
    ("x <> 1.5 AND x < 1", ((-INF, 1),)), ("x = 1.5 OR x < 3", ((-INF, 3),)),
    ("x IN (1.5, NULL) OR x BETWEEN 1 AND 3", ((1, 3),)),
])
def test_a_point_of_a_real_axis_that_changes_no_kept_row_is_answered(where, expected):
    """Three-valued logic at single points: x NOT IN (1.5, NULL) is never TRUE (FALSE at
    1.5, UNKNOWN elsewhere), so it keeps no row, as in DuckDB; it was refused like x =
    1.5. A point kept or left out alone is still refused (above)."""
    assert _intervals(where, "real") == expected
    with pytest.raises(dpsql.UnsupportedQueryError, match="keeps the value 1.5 alone"):
        _intervals("x IN (1.5, NULL)", "real")


def test_real_bounds_are_continuous():
    assert _intervals("x <= 5", "real") == _intervals("x < 5", "real") == ((-INF, 5),)
    assert _intervals("x NOT BETWEEN 2 AND 4", "real") == ((-INF, 2), (4, INF))


def test_is_null_of_a_binned_attribute_follows_its_null_policy():
    """on_null = "error": the attribute is never NULL (ingest refused one), so IS NULL
    keeps no row, as SQL on the data would; "drop": no view over it holds those rows."""
    assert _intervals("x IS NULL", "integer", 1.0) == ()
    assert _intervals("x IS NULL OR x < 3", "integer", 1.0) == ((-INF, 3),)
    assert _intervals("NOT (x IS NULL OR x < 3)", "integer", 1.0) == ((3, INF),)
    with pytest.raises(dpsql.UnsupportedQueryError, match="x IS NULL: the release cannot "
                                                          "count the rows where x is NULL"):
        _intervals("x IS NULL", "integer", 1.0, on_null="drop")


def test_interval_set_operations():
    a, b = ((0, 2), (5, 9)), ((1, 6),)
    assert intersect(a, b) == ((1, 2), (5, 6))
    assert union(a, b) == ((0, 9),)
    assert complement(a) == ((-INF, 0), (2, 5), (9, INF))
    assert complement(complement(a)) == a
