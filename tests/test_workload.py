"""The ``[workload]`` of a spec, its predictions and the optimiser (dpsql.workload)."""

from __future__ import annotations

import math
from fractions import Fraction

import duckdb
import pytest

import dpsql
from dpsql import duck
from dpsql.datasets import trips_spec
from dpsql.errors import SpecError
from dpsql.planner.choose_view import choose_view
from dpsql.planner.find_references import find_references
from dpsql.planner.parse_sql import parse_walked
from dpsql.release import build_release
from dpsql.release.build import plan_release
from dpsql.spec import ReleaseSpec
from dpsql.spec_workload import WorkloadQuery, read_queries
from dpsql.workload.optimise import current_parts, optimise, spec_with
from dpsql.workload.predict import predict_spec, weighted_mse

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

QUERIES = [
    "SELECT COUNT(*) FROM trips",
    "SELECT region, COUNT(*) FROM trips GROUP BY region",
    "SELECT city, COUNT(*) FROM trips GROUP BY city",
    "SELECT region, mode, COUNT(*) FROM trips GROUP BY region, mode",
    "SELECT COUNT(*) FROM trips WHERE distance BETWEEN 16 AND 100",
    "SELECT COUNT(*) FROM trips WHERE age < 30",
    "SELECT mode, COUNT(*) FROM trips WHERE distance < 64 GROUP BY mode",
]


def _spec(trips_data, **extra) -> ReleaseSpec:
    raw = trips_spec(1.0)
    raw["workload"] = {"queries": QUERIES, **extra}
    return ReleaseSpec.from_dict(raw, base_dir=trips_data)


# ---------------------------------------------------------------------------- the spec

def test_workload_inline_and_file_round_trip(trips_data, tmp_path):
    (tmp_path / "q.sql").write_text(
        "-- weight: 3\n-- name: per region\nSELECT region, COUNT(*) FROM trips GROUP BY "
        "region;\n/* a ; in a comment */ SELECT COUNT(*) FROM trips WHERE mode = 'a;b';\n"
        "SELECT COUNT(*) FROM trips -- no trailing semicolon\n")
    raw = trips_spec(1.0)
    raw["workload"] = {"file": str(tmp_path / "q.sql"),
                       "queries": ["SELECT COUNT(*) FROM trips",
                                   {"sql": "SELECT mode, COUNT(*) FROM trips GROUP BY mode",
                                    "weight": 0.5}]}
    spec = ReleaseSpec.from_dict(raw, base_dir=trips_data)
    qs = spec.workload.queries
    assert [q.weight for q in qs] == [3, 1, 1, 1, Fraction(1, 2)]
    assert qs[0].name == "per region" and "'a;b'" in qs[1].sql
    assert qs[2].sql == "SELECT COUNT(*) FROM trips"
    again = ReleaseSpec.from_json(spec.to_json())
    assert again.workload == spec.workload  # the file's queries are kept inline


@pytest.mark.parametrize("workload, message", [
    ({"queries": []}, "workload: lists no query"),
    ({"queries": [{"sql": "SELECT 1", "weight": 0}]}, "workload.queries[0].weight: must be > 0"),
    ({"queries": [{"sql": "  "}]}, "workload.queries[0].sql: must be a non-empty"),
    ({"queries": ["SELECT 1"], "limit": 3}, "workload.limit: unknown key"),
    ({"file": "missing.sql"}, "workload.file: "),
    ({"queries": [3]}, "workload.queries[0]: must be an SQL string"),
    ("SELECT 1", "workload: must be a table"),
])
def test_workload_errors_name_the_key(trips_data, workload, message):
    raw = trips_spec(1.0)
    raw["workload"] = workload
    with pytest.raises(SpecError) as err:
        ReleaseSpec.from_dict(raw, base_dir=trips_data)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_read_queries_weight_directive_applies_to_the_next_statement_only():
    qs = read_queries("-- weight: 2.5\nSELECT 1;\nSELECT 2;")
    assert [(q.sql, q.weight) for q in qs] == [("SELECT 1", Fraction(5, 2)), ("SELECT 2", 1)]
    with pytest.raises(SpecError, match="weight: must be > 0"):
        read_queries("-- weight: -1\nSELECT 1")


# ----------------------------------------------------------------------- predictions

def test_unanswerable_queries_are_reported_not_raised(trips_data):
    spec = _spec(trips_data)
    preds = predict_spec(spec, [WorkloadQuery("SELECT COUNT(*) FROM trips WHERE age < 30 "
                                              "AND distance < 10"),
                                WorkloadQuery("SELEC 1"),
                                WorkloadQuery("SELECT COUNT(*) FROM trips")])
    assert preds[0].variance is None and "no single view covers" in preds[0].refused
    assert preds[1].variance is None and preds[1].refused
    assert preds[2].variance > 0 and preds[2].refused is None


def test_predictions_are_the_planners_on_the_built_release(trips_data, tmp_path):
    # data-free models (cascade, b-ary tree, Gaussian tree; no reconciliation): the dry
    # run's prediction is exactly the planner's on the release built from data
    raw = trips_spec(1.0)
    raw["reconcile"] = False
    raw["views"] = [v for v in raw["views"] if v["mechanism"] != "inftda"]
    spec = ReleaseSpec.from_dict(raw, base_dir=trips_data)
    qs = [WorkloadQuery(q) for q in (
        "SELECT COUNT(*) FROM trips WHERE distance BETWEEN 16 AND 100",
        "SELECT COUNT(*) FROM trips WHERE age < 30",
        "SELECT province, COUNT(*) FROM trips GROUP BY province")]
    preds = predict_spec(spec, qs)
    out = tmp_path / "r.duckdb"
    build_release(spec, out, seed=5, progress=False)
    cur = dpsql.connect(str(out)).cursor()
    con = duckdb.connect()
    duck.attach(con, str(out))
    for q, p in zip(qs, preds):
        cur.execute(q.sql)
        assert cur.dp_info["view"] == p.views[0][0]
        tree, walked = parse_walked(q.sql)
        choice = choose_view(find_references(tree, duck.catalog_of(con), walked)[0])
        assert choice.predicted == pytest.approx(cur.dp_info["predicted_error95"], rel=1e-12)
        assert p.rmse == pytest.approx(choice.stderr, rel=1e-9)
        # the b-ary tree's interval is its Laplace quantile, wider than 1.96 sigma
        assert 1.959963984540054 * p.rmse <= choice.predicted * (1 + 1e-12)


# ------------------------------------------------------------------------ the optimiser

def test_optimiser_lowers_the_predicted_workload_error_deterministically(trips_data):
    spec = _spec(trips_data)
    a = optimise(spec)
    b = optimise(spec)
    assert a.spec == b.spec and a.after == b.after
    assert a.objective_after < 0.9 * a.objective_before
    assert weighted_mse(predict_spec(a.spec)) == pytest.approx(a.objective_after, rel=1e-12)
    # the written spec is a plain spec: it loads back as it is
    again = ReleaseSpec.from_json(a.spec.to_json())
    assert again.views == a.spec.views and again.budget == spec.budget


def _spent_rho(release) -> float:
    """ρ spent by a release, recomputed from each view's recorded noise (InfTDA and the
    Gaussian tree per level, the range mechanisms from their budget)."""
    total = 0.0
    for v in release.views.values():
        info = v.info
        if v.mechanism == "inftda":
            l2 = info["sensitivity"]["l2_per_level"] ** 2
            total += sum(l2 / (2 * s) for s in info["sigma2_levels"])
            if info.get("sigma2_root") is not None:
                total += info["sensitivity"]["l2_root"] ** 2 / (2 * info["sigma2_root"])
        elif v.mechanism == "gaussian_tree":
            l2 = info["sensitivity"]["l2_per_level"] ** 2
            total += sum(l2 / (2 * s) for s in info["noise_scales"] if s)  # σ²
        elif hasattr(v.budget, "rho"):
            total += float(v.budget.rho)
        else:
            total += float(v.budget.epsilon) ** 2 / 2
    return total


def test_optimised_spec_spends_exactly_the_total(trips_data):
    spec = _spec(trips_data)
    opt = optimise(spec).spec
    assert any(v.level_weights for v in opt.views)  # per-level weights were chosen
    for s in (spec, opt):
        assert _spent_rho(plan_release(s)) == pytest.approx(1.0, rel=1e-9)
    # the check fails on a spec that spends more: the same parts, twice the budget
    parts = current_parts(opt, {v.name: len(plan_release(opt).views[v.name].levels)
                                for v in opt.views})
    doubled = spec_with(opt, {k: 2 * p for k, p in parts.items()}, exact_total=False)
    assert _spent_rho(plan_release(doubled)) > 1.0 + 0.5
    assert not math.isclose(_spent_rho(plan_release(doubled)), 1.0, rel_tol=1e-3)


def test_without_a_workload_nothing_changes(trips_data):
    spec = ReleaseSpec.from_dict(trips_spec(1.0), base_dir=trips_data)
    out = optimise(spec)
    assert out.spec == spec and out.before == ()


def test_probed_coefficients_reproduce_the_models_variances(trips_data):
    # InfTDA's prediction is linear in 1/ρ per level: Σ_p a_qp / ρ_p over the probed
    # coefficients gives back each query's predicted variance
    import numpy as np

    from dpsql.workload.optimise import _probe_catalog
    from dpsql.workload.predict import dry_catalog, plan_workload, predict

    spec = _spec(trips_data)
    catalog = dry_catalog(spec)
    planned = plan_workload(catalog, spec.workload.queries, spec)
    base = predict(planned)
    depths = {v.name: len(catalog.releases[0].release.views[v.name].levels)
              for v in spec.views}
    parts = current_parts(spec, depths)
    checked = 0
    for i, b in enumerate(base):
        (name, _), = b.views
        if spec.view(name).mechanism != "inftda":
            continue
        p = parts[name]
        total = 0.0
        for j in range(p.size):
            probe = predict([planned[i]], _probe_catalog(catalog, spec, j, parts), fixed=True)
            total += 2.0 * p[j] * (b.variance - probe[0].variance) / p[j]
        assert total == pytest.approx(b.variance, rel=1e-9)
        assert np.isfinite(total)
        checked += 1
    assert checked >= 3


def test_fanout_search_keeps_the_best_and_resets_level_weights(trips_data):
    spec = _spec(trips_data)
    plain = optimise(spec)
    searched = optimise(spec, fanouts=True)
    assert searched.objective_after <= plain.objective_after * (1 + 1e-12)
    fan = searched.spec.attributes["distance"].fanout
    assert fan == "auto" or fan in (2, 4, 8, 16, 32)
    if fan != spec.attributes["distance"].fanout:
        assert "distance: fanout = " + str(fan) in searched.changes
    # the result builds: level weights match the depth the chosen fan-out gives
    assert _spent_rho(plan_release(searched.spec)) == pytest.approx(1.0, rel=1e-9)


# ----------------------------------------------------------- public information only

def test_predictions_and_optimiser_never_read_the_data(trips_data, tmp_path):
    # the same spec over another data set, and over no data at all (the source file
    # gone): the same predictions and the same optimised spec
    import shutil

    from dpsql.datasets import write_trips

    (tmp_path / "other").mkdir()
    other = write_trips(tmp_path / "other", 500, seed=99)
    shutil.copy(trips_data / "geo.csv", other / "geo.csv")
    a = optimise(_spec(trips_data))
    spec_b = _spec(other)
    (other / "trips.parquet").unlink()
    b = optimise(spec_b)
    assert a.spec.views == b.spec.views
    assert [p.variance for p in a.after] == [p.variance for p in b.after]
    assert [p.variance for p in predict_spec(spec_b)] == \
        [p.variance for p in predict_spec(_spec(trips_data))]


def test_dry_run_inftda_predictions_use_the_linear_scale(trips_data):
    # a dry run's InfTDA calibration bootstraps the all-zero stand-in: its κ is replaced
    # by the linear model's 1, whatever the stand-in's noisy root put in the tree
    from dpsql.workload.predict import dry_catalog

    for weight in (0.001, 1, 1000):  # other shares: other noisy roots
        raw = trips_spec(1.0)
        raw["views"][0]["weight"] = weight
        for v in dry_catalog(ReleaseSpec.from_dict(raw, base_dir=trips_data)
                             ).releases[0].views:
            cal = getattr(v.model, "calibration", None)
            if v.model.kind == "inftda":
                assert cal is not None and set(cal.kappa) == {1.0}
                assert set(cal.zero_var) == {0.0}


def test_scattered_range_pieces_are_predicted_with_their_covariances(trips_data):
    # NOT BETWEEN and a scattered IN on a cascade view: the prediction is the variance
    # of the sum of the pieces (with the tree's covariances), measured here over 1,000
    # draws of the mechanism itself (its error does not depend on the counts), not the
    # variance of the pieces' hull (which the test also shows would be wrong)
    import numpy as np

    from dpsql.mechanisms.cascade import cascade
    from dpsql.privacy import ZCDP, rng

    raw = trips_spec(1.0)
    raw["attributes"]["age"]["type"] = "integer"
    raw["views"] = [{"name": "ages", "levels": ["age"], "mechanism": "cascade"}]
    spec = ReleaseSpec.from_dict(raw, base_dir=trips_data)
    queries = {((0, 20), (61, 100)): "age NOT BETWEEN 20 AND 60",
               ((3, 4), (50, 52), (90, 91)): "age IN (3, 50, 51, 90)"}
    preds = predict_spec(spec, [WorkloadQuery(f"SELECT COUNT(*) FROM trips WHERE {w}")
                                for w in queries.values()])
    hull = predict_spec(spec, [WorkloadQuery(
        "SELECT COUNT(*) FROM trips WHERE age BETWEEN 3 AND 90")])[0].variance
    draws = np.array([cascade(np.zeros(100, np.int64), ZCDP(1.0), neighbouring="add_remove",
                              rng=rng(s)).levels[-1].counts for s in range(1000)])
    for (pieces, _), p in zip(queries.items(), preds):
        err = sum(draws[:, a:b].sum(axis=1) for a, b in pieces)
        measured = float(np.mean(err ** 2))
        se = measured * math.sqrt(2 / err.size)
        assert abs(p.variance - measured) < 5 * se
    whole = predict_spec(spec, [WorkloadQuery("SELECT COUNT(*) FROM trips")])[0].variance
    first = sum(draws[:, a:b].sum(axis=1) for a, b in ((0, 20), (61, 100)))
    assert abs(whole - float(np.mean(first ** 2))) > 5 * whole * math.sqrt(2 / 1000)
    assert hull != preds[1].variance


def test_too_many_range_pieces_fall_back_to_the_hull(trips_data, monkeypatch):
    # the pieces' prediction is quadratic in their number (pairwise covariances): past
    # MAX_PIECES an IN-list of scattered values is ranked by its hull, as before
    import importlib

    choose_view = importlib.import_module("dpsql.planner.choose_view")
    raw = trips_spec(1.0)
    raw["attributes"]["age"]["type"] = "integer"
    raw["views"] = [{"name": "ages", "levels": ["age"], "mechanism": "cascade"}]
    spec = ReleaseSpec.from_dict(raw, base_dir=trips_data)
    scattered = WorkloadQuery("SELECT COUNT(*) FROM trips WHERE age IN (3, 50, 51, 90)")
    hull = WorkloadQuery("SELECT COUNT(*) FROM trips WHERE age BETWEEN 3 AND 90")
    pieces = predict_spec(spec, [scattered])[0].variance
    monkeypatch.setattr(choose_view, "MAX_PIECES", 2)
    capped, whole = (p.variance for p in predict_spec(spec, [scattered, hull]))
    assert capped == whole != pieces
