"""SQL in, answers out for a cascade view with the range-optimal covariance, next to a
tree-covariance view of the same attribute: answers are sums of the released leaves,
error columns come from the dense exact model, and the planner picks the view whose
predicted error is smaller."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from dpsql import duck
from dpsql.datasets import trips_spec
from dpsql.release import build_release, open_release
from dpsql.spec import ReleaseSpec


@pytest.fixture(scope="module")
def release(trips_data, tmp_path_factory):
    raw = trips_spec(1.0)
    raw["views"] = [
        {"name": "dist", "levels": ["distance"], "mechanism": "cascade",
         "covariance": "optimal"},
        {"name": "dist_tree", "levels": ["distance"], "mechanism": "cascade"},
    ]
    # the views' own models (reconciling their totals would condition both: that is
    # tested in tests/release/test_reconcile.py)
    raw["reconcile"] = False
    out = tmp_path_factory.mktemp("optimal") / "trips.duckdb"
    build_release(ReleaseSpec.from_dict(raw, base_dir=trips_data), out, seed=5, progress=False)
    return out


@pytest.fixture()
def con(release):
    c = duckdb.connect()
    duck.attach(c, release)
    yield c
    c.close()


def _leaves(release) -> np.ndarray:
    depth = _view(release).depth
    raw = duckdb.connect(str(release), read_only=True)
    counts = np.array([r[0] for r in raw.execute(
        f"SELECT dp_count FROM dist__l{depth} ORDER BY distance_bin_lo").fetchall()])
    raw.close()
    return counts


def _view(release):
    return open_release(release).views["dist"]


def test_range_answer_and_error_are_the_leaves_and_the_dense_model(con, release):
    n, se = duck.sql(con, "SELECT COUNT(*), dp_stderr() FROM dist "
                          "WHERE distance >= 8 AND distance < 48").fetchall()[0]
    leaves = _leaves(release)
    assert leaves.size == 64
    assert n == pytest.approx(leaves[2:12].sum(), abs=1e-6)
    model = duck.catalog_of(con).find_view("dist").model
    assert model.kind == "cascade_optimal"
    w = np.zeros(64)
    w[2:12] = 1.0
    assert se == pytest.approx(math.sqrt(w @ model.covariance() @ w), rel=1e-9)


def test_answers_are_consistent(con):
    total = duck.sql(con, "SELECT COUNT(*) FROM dist").fetchall()[0][0]
    parts = [duck.sql(con, f"SELECT COUNT(*) FROM dist WHERE distance >= {a} AND "
                           f"distance < {b}").fetchall()[0][0]
             for a, b in ((0, 40), (40, 100), (100, 256))]
    assert sum(parts) == pytest.approx(total, abs=1e-6)


def test_level_tables_carry_each_nodes_variance(release):
    view = _view(release)
    raw = duckdb.connect(str(release), read_only=True)
    for lv in view.levels:
        got = np.array([r[0] for r in raw.execute(
            f"SELECT dp_var FROM {lv.table} ORDER BY distance_bin_lo").fetchall()])
        np.testing.assert_allclose(got, view.error_model.node_variance(lv.k), rtol=1e-12)
    raw.close()
    assert view.info["covariance"] == "optimal" and view.info["optimality_gap"] <= 1e-5


def test_planner_picks_the_smaller_predicted_error(con):
    q = "SELECT COUNT(*) FROM trips WHERE distance >= 4 AND distance < 200"
    info = duck.plan(con, q).info
    cat = duck.catalog_of(con)
    pred = {v: float(cat.find_view(v).model.range_variance(np.array([1]), np.array([50]))[0])
            for v in ("dist", "dist_tree")}
    assert info["view"] == min(pred, key=pred.get)


def test_median_and_cdf_udfs(con):
    med = duck.sql(con, "SELECT MEDIAN(distance) FROM dist").fetchall()[0][0]
    q = duck.sql(con, "SELECT dp_quantile('dist', 'distance', 0.5)").fetchall()[0][0]
    assert med == pytest.approx(q)
    assert 0 <= med <= 256


def test_inspect_names_the_covariance_and_its_sigma(release, capsys):
    from dpsql.cli import main

    assert main(["inspect", str(release)]) == 0
    out = capsys.readouterr().out  # rich may wrap the label inside its cell
    assert "(optimal" in out and "largest" in out
    assert out.count("optimal") == 1  # dist_tree keeps the default tree covariance


def test_error_model_is_built_once_and_shared_across_connections(release):
    """Attaching builds no covariance (the prefix sums wait for the first error column);
    every connection of the process then shares the one model and its set-up."""
    a, b = duckdb.connect(), duckdb.connect()
    try:
        duck.attach(a, release)
        model = duck.catalog_of(a).find_view("dist").model
        duck.sql(a, "SELECT COUNT(*), dp_stderr() FROM dist WHERE distance < 40").fetchall()
        assert model._prefix_cache is not None
        duck.attach(b, release)
        assert duck.catalog_of(b).find_view("dist").model is model
        assert open_release(release).views["dist"].error_model is model
    finally:
        a.close()
        b.close()


def test_attaching_evaluates_no_optimal_model(trips_data, tmp_path, monkeypatch):
    """A fresh model (nothing shared) of a view beyond the attach-time precomputation
    (more than 128 bins) stays unevaluated through attach; the first error column builds
    it once, for every later query and connection."""
    from dpsql import accuracy
    from dpsql.duck import MAX_PRECOMPUTED_BINS
    from dpsql.accuracy.optimal_ranges import RangeOptimalErrorModel

    raw = trips_spec(1.0)
    raw["attributes"]["distance"]["bins"] = 2 * MAX_PRECOMPUTED_BINS
    raw["views"] = [{"name": "dist", "levels": ["distance"], "mechanism": "cascade",
                     "covariance": "optimal"}]
    release = tmp_path / "wide.duckdb"
    build_release(ReleaseSpec.from_dict(raw, base_dir=trips_data), release, seed=5,
                  progress=False)
    monkeypatch.setattr(accuracy, "_SHARED", type(accuracy._SHARED)())
    monkeypatch.setattr(accuracy, "_RECENT", type(accuracy._RECENT)())
    built = []
    real = RangeOptimalErrorModel.covariance
    monkeypatch.setattr(RangeOptimalErrorModel, "covariance",
                        lambda self: built.append(1) or real(self))
    c, d = duckdb.connect(), duckdb.connect()
    try:
        duck.attach(c, release)
        assert built == []
        duck.sql(c, "SELECT COUNT(*), dp_stderr() FROM dist WHERE distance < 40").fetchall()
        assert built == [1]
        duck.sql(c, "SELECT COUNT(*), dp_stderr() FROM dist WHERE distance < 60").fetchall()
        duck.attach(d, release)
        duck.sql(d, "SELECT COUNT(*), dp_stderr() FROM dist WHERE distance < 80").fetchall()
        assert built == [1]
    finally:
        c.close()
        d.close()
