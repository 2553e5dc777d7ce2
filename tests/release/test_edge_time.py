"""Date and timestamp attributes over awkward sources: a column with a time zone, and
values outside the declared domain."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


@pytest.fixture
def base(tmp_path):
    # 300 instants 5 hours apart from 2020-01-01 00:00 UTC: 144 of them in January 1-30
    duckdb.connect().execute(f"""
        COPY (SELECT TIMESTAMPTZ '2020-01-01 00:00:00+00' + to_hours(i * 5) AS ts,
                     DATE '2020-01-01' + (i % 400)::INT AS d
              FROM range(300) t(i)) TO '{tmp_path / "t.parquet"}'""")
    return tmp_path


def _spec(attrs, views, **kw):
    return {"name": "t", "neighbouring": "add_remove", "budget": {"rho": 1e6},
            "attributes": attrs, "views": views, **kw}


TS = {"ts": {"kind": "range", "lower": "2020-01-01 00:00:00",
             "upper": "2020-01-31 00:00:00", "unit": "day", "on_out_of_bounds": "drop"}}


def test_timestamp_with_time_zone_is_refused_with_the_fix(base):
    """A TIMESTAMPTZ column was binned in the building machine's time zone (DuckDB's
    session zone): the same data gave other bins on a machine in New York than in UTC.
    It is refused, naming the column, its type and the AT TIME ZONE fix."""
    spec = _spec(TS, [{"name": "v", "levels": ["ts"], "mechanism": "gaussian_tree"}],
                 source="t.parquet")
    with pytest.raises(dpsql.DataError, match=r"'ts'.*TIME ZONE.*AT TIME ZONE 'UTC'"):
        build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb",
                      seed=1, progress=False)
    fixed = _spec(TS, [{"name": "v", "levels": ["ts"], "mechanism": "gaussian_tree"}],
                  sql=f"SELECT * REPLACE (ts AT TIME ZONE 'UTC' AS ts) "
                      f"FROM '{base / 't.parquet'}'")
    out = base / "t.duckdb"
    build_release(ReleaseSpec.from_dict(fixed, base_dir=base), out, seed=1, progress=False)
    cur = dpsql.connect(str(out)).cursor()
    cur.execute("SELECT COUNT(*) FROM t")
    assert round(cur.fetchone()[0]) == 144


@pytest.mark.parametrize("attr, shown", [
    ({"kind": "range", "lower": "2020-01-01", "upper": "2020-07-01", "unit": "month"},
     r"\[2020-01-01, 2020-07-01\)"),
    ({"kind": "range", "lower": 0, "upper": 100, "bins": 4, "type": "real"},
     r"\[0, 100\)"),
])
def test_out_of_bounds_error_states_the_bounds_as_written(base, attr, shown):
    """The refusal of out-of-bounds dates said "outside [18262, 18444)" (day numbers;
    seconds for timestamps: "[1.57784e+09, 1.58043e+09)"); it states the dates."""
    if attr.get("type") == "real":
        sql = f"SELECT date_diff('day', DATE '2020-01-01', d) AS d FROM '{base / 't.parquet'}'"
    else:
        sql = f"SELECT d FROM '{base / 't.parquet'}'"
    spec = _spec({"d": {**attr, "on_out_of_bounds": "error"}},
                 [{"name": "v", "levels": ["d"], "mechanism": "gaussian_tree"}], sql=sql)
    with pytest.raises(dpsql.DataError, match=r"'d' has \d+ value\(s\) outside " + shown):
        build_release(ReleaseSpec.from_dict(spec, base_dir=base), base / "t.duckdb",
                      seed=1, progress=False)


def test_mixed_csv_column_refusal_names_an_offending_value(tmp_path):
    """A CSV range column with one non-number ('x3') was refused for its type (VARCHAR)
    without saying which value made it text; the error now quotes one."""
    (tmp_path / "my data.csv").write_text("c,x\na,1\nb,2\na,x3\nb,6.5\n")
    spec = {"name": "t", "source": "my data.csv", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"x": {"kind": "range", "lower": 0, "upper": 10, "bins": 5}},
            "views": [{"name": "v", "levels": ["x"]}]}
    with pytest.raises(dpsql.DataError, match=r"type VARCHAR, e\.g\. 'x3' is not a number"):
        build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), tmp_path / "t.duckdb",
                      seed=1, progress=False)
