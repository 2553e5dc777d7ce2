"""Planner fixture tests: ``input;expected;`` SQL fixtures per pass (STYLE §5b) and
snapshots of the generated DuckDB SQL."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import sqlglot

from dpsql import duck
from dpsql.planner import plan_query
from dpsql.planner.parse_sql import bind_params, parse_sql

FIXTURES = Path(__file__).parent / "fixtures"


def _cases(name: str) -> list[list[str]]:
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.strip() and not line.startswith("--"):
            out.append([p.strip() for p in line.rstrip(";").split(";")])
    return out


@pytest.fixture(scope="module")
def catalog(trips_release):
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    yield duck.catalog_of(c)
    c.close()


@pytest.mark.parametrize("case", _cases("bind_params.sql"))
def test_bind_params(case):
    query, params, expected = case
    got = bind_params(parse_sql(query), json.loads(params)).sql("duckdb")
    assert got == sqlglot.parse_one(expected, dialect="duckdb").sql("duckdb")


@pytest.mark.parametrize("case", _cases("choose_view.sql"))
def test_choose_view(catalog, case):
    query, expected = case
    info = plan_query(catalog, query).info
    assert f"{info['view']}:{info['level']}:{info['interpolation']}" == expected


@pytest.mark.parametrize("case", _cases("rewrite_query.sql"))
def test_rewrite_snapshot(catalog, case):
    query, expected = case
    assert plan_query(catalog, query).sql == expected
