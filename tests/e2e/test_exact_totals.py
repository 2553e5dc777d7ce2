"""One truth per release, to the last bit: SQL in, answers out, compared with ``==``.

Every view of a release answers its total, and every view sharing a marginal answers
it, with the same number (issue #18), and a real-valued view's sums are exact sums of
its stored leaves whatever level, order or table (prefix sums) they are read from
(:mod:`dpsql.release.exact_sums`). Before the dyadic grid, the trips release answered
``SELECT COUNT(*)`` with 19999.999999999993 from its Cascade view and
20000.000000000033 from its b-ary view, where its InfTDA views said 20000.
"""

from __future__ import annotations

import json
import math
import warnings

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
from conftest import seeded_cursor

MODES = ["car", "train", "bus", "bike", "walk", "plane"]


def _cursor(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        return dpsql.connect(path).cursor()


def _one(cur, sql, params=None):
    cur.execute(sql, params)
    (value,), = cur.fetchall()
    return value


def _views(path):
    with duckdb.connect(str(path), read_only=True) as con:
        return {n: (m, json.loads(levels)) for n, m, levels in con.execute(
            "SELECT name, mechanism, levels FROM dpsql_views").fetchall()}


def _leaves(path, view, attr, depth):
    """The stored leaf counts of a one-attribute range view, in bin order."""
    with duckdb.connect(str(path), read_only=True) as con:
        return [c for _, c in con.execute(
            f"SELECT {attr}_bin_lo, dp_count FROM {view}__l{depth} ORDER BY 1").fetchall()]


def _check_range_view(cur, path, view, attr, lower, width, bins, total):
    """[lower, x) + [x, upper) is the total, and [lower, x) the exact sum of its leaves,
    through SQL and through the release's own dp_range macro, at every bin edge x."""
    depth = len(_views(path)[view][1])
    leaves = _leaves(path, view, attr, depth)
    assert math.fsum(leaves) == total
    with duckdb.connect(str(path), read_only=True) as con:
        for b in range(bins + 1):
            x = lower + b * width
            below = _one(cur, f"SELECT COUNT(*) FROM {view} WHERE {attr} < ?", [x])
            above = _one(cur, f"SELECT COUNT(*) FROM {view} WHERE {attr} >= ?", [x])
            assert below == math.fsum(leaves[:b]), (view, x)
            assert below + above == total, (view, x)
            macro, = con.execute(f"SELECT dp_range('{view}', '{attr}', ?, ?)",
                                 [lower, x]).fetchone()
            assert macro == below, (view, x)


def test_every_view_of_the_trips_release_answers_the_same_total(trips_release):
    cur = _cursor(trips_release)
    views = _views(trips_release)
    assert {m for m, _ in views.values()} >= {"inftda", "gaussian_tree", "cascade", "btree"}
    totals = {v: _one(cur, f"SELECT COUNT(*) FROM {v}") for v in views}
    agreed = totals["geo_mode"]  # InfTDA: an integer, the agreed total
    assert isinstance(agreed, int)
    assert totals == {v: agreed for v in views}, totals
    # the logical table and a ROLLUP's grand total say the same
    assert _one(cur, "SELECT COUNT(*) FROM trips") == agreed
    cur.execute("SELECT floor(distance / 128) * 128 AS d, COUNT(*) FROM dist "
                "GROUP BY ROLLUP (d) ORDER BY d NULLS LAST")
    rows = cur.fetchall()
    assert rows[-1][1] == agreed == rows[0][1] + rows[1][1]


def test_every_entry_point_returns_the_same_exact_total(trips_release, capsys):
    """DuckDB (attach + sql) and the CLI's JSON carry the same doubles as the DB-API."""
    from dpsql.cli import main

    agreed = _one(_cursor(trips_release), "SELECT COUNT(*) FROM geo_mode")
    con = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        dpsql.attach(con, str(trips_release))
    for view in ("dist", "age_tree", "geo_gauss"):
        (got,), = dpsql.sql(con, f"SELECT COUNT(*) AS n FROM {view}").fetchall()
        assert got == agreed, view
        assert main(["query", str(trips_release), f"SELECT COUNT(*) AS n FROM {view}",
                     "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["rows"][0]["n"] == agreed, view


@pytest.mark.parametrize("view, attr, lower, width, bins", [
    ("dist", "distance", 0, 4, 64), ("age_tree", "age", 0, 1, 100)])
def test_range_sums_are_exact_sums_of_the_leaves(trips_release, view, attr, lower, width,
                                                 bins):
    cur = _cursor(trips_release)
    total = _one(cur, "SELECT COUNT(*) FROM geo_mode")
    _check_range_view(cur, trips_release, view, attr, lower, width, bins, total)


@pytest.fixture(scope="module")
def modes_release(trips_data, tmp_path_factory):
    """A mode marginal shared by InfTDA, a Gaussian and a Laplace tree (whose leaves,
    mode × age, lie below it), and two range views of age: the real-valued views all
    agree on the total and the tree views on each mode's count."""
    spec = {"name": "m", "source": "trips.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"mode": {"kind": "categorical", "domain": MODES},
                           "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 20}},
            "views": [{"name": "modes", "levels": ["mode"], "mechanism": "inftda"},
                      {"name": "gauss", "levels": ["mode", "age"],
                       "mechanism": "gaussian_tree"},
                      {"name": "lap", "levels": ["mode", "age"], "mechanism": "laplace_tree"},
                      {"name": "casc", "levels": ["age"], "mechanism": "cascade"},
                      {"name": "bary", "levels": ["age"], "mechanism": "btree"}]}
    path = tmp_path_factory.mktemp("modes") / "m.duckdb"
    return seeded_cursor(ReleaseSpec.from_dict(spec, base_dir=trips_data), path, 5), path


def test_views_sharing_a_marginal_answer_it_bit_for_bit(modes_release):
    cur, path = modes_release
    total = _one(cur, "SELECT COUNT(*) FROM modes")
    for v in ("gauss", "lap", "casc", "bary"):
        assert _one(cur, f"SELECT COUNT(*) FROM {v}") == total, v
    per_mode = {}
    for v in ("modes", "gauss", "lap"):
        cur.execute(f"SELECT mode, COUNT(*) FROM {v} GROUP BY mode ORDER BY mode")
        per_mode[v] = cur.fetchall()
    assert per_mode["gauss"] == per_mode["modes"] == per_mode["lap"]
    # a mode's count summed from its leaves (two age ranges, read at a finer level) is
    # the agreed count, exactly
    for v in ("gauss", "lap"):
        cur.execute(f"SELECT mode, COUNT(*) FROM {v} WHERE age < 45 GROUP BY mode")
        young = dict(cur.fetchall())
        cur.execute(f"SELECT mode, COUNT(*) FROM {v} WHERE age >= 45 GROUP BY mode")
        old = dict(cur.fetchall())
        assert {m: young[m] + old[m] for m in young} == dict(per_mode["modes"]), v
        assert cur.dp_info["level"] > 1  # the leaves, not the agreed level
        assert cur.dp_info["read_table"] == f"{v}__prefix"  # cum[b1] − cum[b0] a mode
    for v in ("casc", "bary"):
        _check_range_view(cur, path, v, "age", 0, 5, 20, total)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 400), bins=st.integers(2, 24), rho=st.sampled_from([0.05, 1.0, 1e4]),
       neighbouring=st.sampled_from(["add_remove", "substitute"]), seed=st.integers(0, 2**16))
def test_random_releases_agree_exactly(tmp_path, n, bins, rho, neighbouring, seed):
    """Random data, domain, budget and neighbouring: every view answers the same total
    and every range view's prefix sums are exact sums of its leaves, through SQL."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = np.random.default_rng(seed)
    base = tmp_path / f"r{seed}_{n}_{bins}_{neighbouring}_{rho}"
    base.mkdir(exist_ok=True)  # hypothesis may run an example twice
    pq.write_table(pa.table({"mode": np.array(MODES[:3])[g.integers(0, 3, n)].tolist(),
                             "x": g.integers(0, bins, n)}), base / "t.parquet")
    spec = {"name": "r", "source": "t.parquet", "neighbouring": neighbouring,
            "budget": {"rho": rho},
            "attributes": {"mode": {"kind": "categorical", "domain": MODES[:3]},
                           "x": {"kind": "range", "lower": 0, "upper": bins, "bins": bins}},
            "views": [{"name": "i", "levels": ["mode"], "mechanism": "inftda"},
                      {"name": "g", "levels": ["mode", "x"], "mechanism": "gaussian_tree"},
                      {"name": "c", "levels": ["x"], "mechanism": "cascade"},
                      {"name": "b", "levels": ["x"], "mechanism": "btree"}]}
    path = base / "r.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), path, seed=seed,
                  progress=False, replace=True)
    cur = _cursor(path)
    total = _one(cur, "SELECT COUNT(*) FROM i")
    assert [_one(cur, f"SELECT COUNT(*) FROM {v}") for v in "gcb"] == [total] * 3
    for v in "cb":
        _check_range_view(cur, path, v, "x", 0, 1, bins, total)
