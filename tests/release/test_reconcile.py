"""One truth per release: views agree on shared marginals after reconciliation; the
combination, the InfTDA re-projection and the reconciled error model."""

from __future__ import annotations

import numpy as np
import pytest

import dpsql
from dpsql.accuracy import load
from dpsql.datasets import trips_spec
from dpsql.domains import categorical, concat
from dpsql.mechanisms.cascade import cascade
from dpsql.mechanisms.inftda import inftda
from dpsql.mechanisms.tree_counts import gaussian_tree
from dpsql.privacy import ZCDP, rng
from dpsql.release import build_release, open_release
from dpsql.release.marginals import ViewLevels
from dpsql.release.reconcile import _towards_parents, reconcile
from dpsql.release.reconcile_views import ReleasedView, _reproject
from dpsql.spec import ReleaseSpec


def _one(cur, sql):
    cur.execute(sql)
    return cur.fetchall(), dict(cur.dp_info)


# ------------------------------------------------------------------- end to end, SQL
@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")
def test_views_of_one_release_agree_on_shared_marginals(trips_release):
    """COUNT(*) answered by each view is the same number; region/province/city counts
    of the InfTDA and the Gaussian-tree view are the same numbers."""
    con = dpsql.connect(str(trips_release))
    cur = con.cursor()
    totals = {}
    for view in ("geo_mode", "geo_gauss", "dist", "age_tree", "mode_dist"):
        rows, info = _one(cur, f"SELECT COUNT(*) FROM {view}")
        assert info["view"] == view
        totals[view] = rows[0][0]
    assert len({round(float(t), 6) for t in totals.values()}) == 1, totals
    assert totals["geo_mode"] == int(totals["geo_mode"])
    for cols in ("region", "region, province", "region, province, city"):
        got = {}
        for view in ("geo_mode", "geo_gauss"):
            rows, info = _one(cur, f"SELECT {cols}, COUNT(*) FROM {view} GROUP BY {cols}")
            assert info["view"] == view and info["reconciled"]
            got[view] = {r[:-1]: r[-1] for r in rows if r[-1] != 0}
        assert got["geo_mode"] == got["geo_gauss"], cols
    con.close()


def test_reconciliation_is_recorded_and_can_be_turned_off(trips_data, tmp_path):
    rel = open_release(build_release(
        ReleaseSpec.from_dict({**trips_spec(1.0), "reconcile": False}, base_dir=trips_data),
        tmp_path / "off.duckdb", seed=11, progress=False).path)
    assert all("reconciled" not in v.info for v in rel.views.values())
    on = ReleaseSpec.from_dict(trips_spec(1.0), base_dir=trips_data)
    rel = open_release(build_release(on, tmp_path / "on.duckdb", seed=11, progress=False).path)
    rec = rel.views["geo_gauss"].info["reconciled"]
    assert [m["marginal"] for m in rec["marginals"]] == ["total", "region", "province", "city"]
    assert rec["marginals"][1]["with"] == ["geo_mode"]
    assert rel.views["geo_gauss"].error_params["kind"] == "reconciled"
    assert rel.views["geo_mode"].error_params["kind"] == "inftda"
    summary = rec["release"]
    assert summary["marginals"][0] == {
        "marginal": "total", "integer": True,
        "views": ["age_tree", "dist", "geo_gauss", "geo_mode", "mode_dist"]}
    assert summary["not_reconciled"] == []
    assert on.to_dict().get("reconcile", True) and \
        ReleaseSpec.from_dict({**trips_spec(1.0), "reconcile": False},
                              base_dir=trips_data).to_dict()["reconcile"] is False


def test_reconcile_key_must_be_a_boolean(trips_data):
    with pytest.raises(dpsql.errors.SpecError, match="reconcile"):
        ReleaseSpec.from_dict({**trips_spec(1.0), "reconcile": "yes"}, base_dir=trips_data)


def test_od_trees_agree_on_the_total_and_say_why_not_on_the_pair_tables(commutes_release):
    """The pair tables sit under a level the other tree lacks (work region, home region):
    agreeing on them would replace each tree's own in-between level with sums of mixed
    finer counts, so they are listed as not reconciled and each tree keeps its own."""
    import duckdb
    rel = open_release(commutes_release)
    rec = rel.views["work_first"].info["reconciled"]
    assert [m["marginal"] for m in rec["marginals"]] == ["total"]
    skipped = rec["release"]["not_reconciled"]
    assert [m["marginal"] for m in skipped] == [
        "home_region × work_region", "home_province × work_province",
        "home_municipality × work_municipality"]
    assert all("not directly below" in m["reason"] for m in skipped)
    con = duckdb.connect(str(commutes_release), read_only=True)
    totals = {v: con.execute(f"SELECT SUM(dp_count) FROM {v}__l1").fetchone()[0]
              for v in ("work_first", "home_first")}
    assert totals["work_first"] == totals["home_first"]
    con.close()


# ---------------------------------------------------------------------- combination
def test_towards_parents_real_and_integer():
    est = np.array([3.2, 5.1, 1.0, 7.7, 0.4])
    w = np.array([1.0, 3.0, 0.0, 2.0, 2.0])
    parent = np.array([0, 0, 0, 1, 1])
    out = _towards_parents(est, w, parent, np.array([10.0, 9.0]), integer=False)
    assert out[:3].sum() == pytest.approx(10.0) and out[3:].sum() == pytest.approx(9.0)
    assert out[2] == 1.0  # an exact node does not move
    assert out[1] - est[1] == pytest.approx(3 * (out[0] - est[0]))  # share ∝ variance
    ints = _towards_parents(est, w, parent, np.array([10, 9]), integer=True)
    assert ints.dtype == np.int64 and ints.min() >= 0
    assert ints[:3].sum() == 10 and ints[3:].sum() == 9
    assert np.all(np.abs(ints - out) <= 1.5)


def _spec(views, attributes=None, neighbouring="add_remove"):
    attributes = attributes or {
        "a": {"kind": "categorical", "domain": [0, 1, 2]},
        "b": {"kind": "categorical", "domain": [0, 1, 2, 3]},
        "x": {"kind": "range", "lower": 0, "upper": 16, "bins": 16}}
    return ReleaseSpec.from_dict({"name": "t", "source": "unused.parquet",
                                  "neighbouring": neighbouring, "budget": {"rho": 1},
                                  "attributes": attributes, "views": views})


def _trees(spec):
    from dpsql.release.build import attribute_tree
    return {n: attribute_tree(a) for n, a in spec.attributes.items()}


def test_two_inftda_views_reproject_to_integer_consistent_agreement():
    spec = _spec([{"name": "v1", "levels": ["a", "b"], "mechanism": "inftda"},
                  {"name": "v2", "levels": ["a", "b"], "mechanism": "inftda"}])
    trees = _trees(spec)
    dt = concat(trees["a"], trees["b"])
    leaf = np.arange(12)
    counts = np.array([40, 0, 3, 9, 1, 0, 0, 2, 30, 31, 0, 5])
    views = []
    for i, v in enumerate(spec.views):
        t = inftda(dt, leaf, counts, ZCDP(0.05), neighbouring="add_remove", rng=rng(i))
        views.append(ReleasedView(v.name, "inftda", t, dt, ViewLevels(spec, v, dt, trees)))
    out, summary = reconcile(views, spec, trees)
    assert [m["marginal"] for m in summary["marginals"]] == ["total", "a", "a × b"]
    a, b = out["v1"], out["v2"]
    for k in range(3):
        assert np.array_equal(a.levels[k].ids, b.levels[k].ids)
        assert np.array_equal(a.levels[k].counts, b.levels[k].counts)
        assert a.levels[k].counts.dtype == np.int64 and np.all(a.levels[k].counts > 0)
    for k in (1, 2):
        par = dt.parent(k, a.levels[k].ids)
        sums = {int(p): 0 for p in a.levels[k - 1].ids}
        for p, c in zip(par, a.levels[k].counts):
            sums[int(p)] += int(c)
        assert sums == dict(zip(a.levels[k - 1].ids.tolist(), a.levels[k - 1].counts.tolist()))


def test_reproject_follows_the_new_parent_counts():
    """Released children are projected onto the new parent count, every child moving
    alike up to one unit (not IntOpt's smallest-first remainder); a parent that lost its
    count loses its children; a newly positive parent spreads its count evenly over all
    its public children."""
    from dpsql.mechanisms.base import PrivateLevel
    dt = concat(categorical("a", [0, 1, 2]), categorical("b", [0, 1, 2, 3]))
    parents = PrivateLevel(np.array([0, 2]), np.array([20, 6]))  # 1 gone, 2 new
    old = PrivateLevel(np.array([0, 1, 5, 6]), np.array([8, 5, 4, 4]))
    new = _reproject(dt, 2, parents, old)
    assert new.ids.tolist() == [0, 1, 8, 9, 10, 11]
    assert new.counts.tolist() == [12, 8, 2, 2, 1, 1]  # +4/+3 (the order is pseudo-random)
    assert new.counts.dtype == np.int64


# ------------------------------------------------------ error model: Monte Carlo
def _three_views():
    """Three views share the total, two of them also attribute a: (spec, trees, true
    a × b counts, the x histogram)."""
    spec = _spec([{"name": "g", "levels": ["a", "b"], "mechanism": "gaussian_tree"},
                  {"name": "h", "levels": ["a"], "mechanism": "gaussian_tree"},
                  {"name": "c", "levels": ["x"], "mechanism": "cascade"}])
    truth_ab = np.array([40, 0, 3, 9, 1, 0, 0, 2, 30, 31, 0, 5])
    hist = np.zeros(16, dtype=np.int64)
    hist[:12] = truth_ab
    return spec, _trees(spec), truth_ab, hist


def _mc_views(spec, trees, truth_ab, hist, seed):
    dt = concat(trees["a"], trees["b"])
    g = rng(seed)
    t1 = gaussian_tree([dt.parent_array(k) for k in (1, 2)], truth_ab, ZCDP(0.02),
                       neighbouring="add_remove", rng=g)
    truth_a = np.bincount(dt.ancestor(2, np.arange(12), 1), weights=truth_ab)
    t2 = gaussian_tree([trees["a"].parent_array(1)], truth_a.astype(np.int64), ZCDP(0.05),
                       neighbouring="add_remove", rng=g)
    t3 = cascade(hist, ZCDP(0.05), neighbouring="add_remove", rng=g)
    v1, v2, v3 = spec.views
    return [ReleasedView("g", "gaussian_tree", t1, dt, ViewLevels(spec, v1, dt, trees)),
            ReleasedView("h", "gaussian_tree", t2, trees["a"],
                         ViewLevels(spec, v2, trees["a"], trees)),
            ReleasedView("c", "cascade", t3, None, ViewLevels(spec, v3, None, trees))]


@pytest.mark.statistical
def test_error_model_after_reconciliation_matches_monte_carlo():
    """Conditioning on agreed marginals changes the covariance (accuracy/reconciled.py
    derives it): three views share the total, two of them also share attribute a. The
    stored models' variances of node sets at every level match the spread of 2,000
    independent reconciled releases within 5 standard errors."""
    spec, trees, truth_ab, hist = _three_views()
    sets = [("g", 0, [0]), ("g", 1, [0]), ("g", 1, [0, 2]), ("g", 2, [1, 5, 6]),
            ("g", 2, [0, 1, 2, 3]), ("h", 1, [1]), ("h", 1, [0, 2]),
            ("c", 0, [0]), ("c", 1, [0]), ("c", 3, [3, 4, 5]), ("c", 4, [7])]
    dt = concat(trees["a"], trees["b"])
    n = 2000
    errs = {s: np.empty(n) for s in range(len(sets))}
    models = {}
    for r in range(n):
        out, _ = reconcile(_mc_views(spec, trees, truth_ab, hist, r), spec, trees)
        for i, (view, k, ids) in enumerate(sets):
            t = out[view]
            if view == "c":
                tk = np.add.reduceat(hist, np.arange(0, 16, t.bin_spans[k]))
            else:
                tk = np.bincount(dt.ancestor(2, np.arange(12), k), weights=truth_ab)
            errs[i][r] = t.levels[k].counts[ids].sum() - tk[ids].sum()
        if r == 0:
            models = {v: load(out[v].error_model.to_params()) for v in ("g", "h", "c")}
            assert {m.kind for m in models.values()} == {"reconciled"}
            assert out["g"].levels[1].counts.tolist() == out["h"].levels[1].counts.tolist()
    for i, (view, k, ids) in enumerate(sets):
        v = models[view].sum_variance(k, np.array(ids))
        assert v.exact
        emp = float(np.mean(errs[i] ** 2))
        se = v.value * np.sqrt(2.0 / n)
        assert abs(emp - v.value) < 5 * se + 1e-9, (view, k, ids, emp, v.value)
    # the range form gives the same as the node form
    rv = models["c"].range_variance(np.array([6]), np.array([12]))
    assert rv[0] == pytest.approx(models["c"].sum_variance(3, np.array([3, 4, 5])).value)


def test_a_scaled_model_scales_only_the_agreed_part():
    """``scale`` (measured by the calibration bootstrap where the chain holds an InfTDA
    view) multiplies the part of bᵀCb below the total, at every level: the total's own
    variance w₀ and the view's own noise below the agreed level D stay exact; it is
    stored."""
    spec, trees, truth_ab, hist = _three_views()
    out, _ = reconcile(_mc_views(spec, trees, truth_ab, hist, 3), spec, trees)
    one = out["g"].error_model
    assert one.level == 1 and one.scale == 1.0
    scaled, cond = one.with_scale(1.7), one.with_scale(1e-12)
    assert load(scaled.to_params()).scale == 1.7
    total = [m.sum_variance(0, np.array([0])).value for m in (one, scaled, cond)]
    assert total[0] == pytest.approx(total[1]) == pytest.approx(total[2])  # w0: exact
    for k, ids in ((1, [1]), (1, [0, 2]), (2, [1]), (2, [0, 5]), (2, [1, 2, 3, 7])):
        v1, vs, v0 = (m.sum_variance(k, np.array(ids)).value for m in (one, scaled, cond))
        assert 0 < v0 < v1
        assert vs - v1 == pytest.approx(0.7 * (v1 - v0))
    assert scaled.node_variances(2) == pytest.approx(
        one.node_variances(2) + 0.7 * (one.node_variances(2) - cond.node_variances(2)))
    with pytest.raises(dpsql.errors.InvalidPrivacyParameterError, match="scale"):
        one.with_scale(0.0)


def test_a_sole_released_child_is_not_exact_given_its_parent():
    """InfTDA's support model gives a node released as its parent's only child no
    variance given the parent; taken as exact, it fixed the other views' agreed values
    and their model's variance to 0 (a false 1 in an empty age bin: a Gaussian tree's
    reconciled 95% band 10⁻⁷ wide). It counts with one noise draw's variance, as an
    unreleased node does, and the other view's zeros there keep a variance."""
    from dataclasses import replace

    from dpsql.mechanisms.base import PrivateLevel
    from dpsql.release.reconcile import _member

    spec = _spec([{"name": "v", "levels": ["a", "b"], "mechanism": "inftda"},
                  {"name": "g", "levels": ["a", "b"], "mechanism": "gaussian_tree"}])
    trees = _trees(spec)
    dt = concat(trees["a"], trees["b"])
    counts = np.array([40, 0, 3, 9, 25, 0, 0, 0, 30, 31, 0, 5])
    t = inftda(dt, np.arange(12), counts, ZCDP(0.5), neighbouring="add_remove", rng=rng(0))
    # a = 1 released with its whole count on b = 0 alone (leaf 4), b = 1..3 at 0
    lv1, lv2 = t.levels[1], t.levels[2]
    keep = (lv2.ids < 4) | (lv2.ids >= 8)
    ids = np.r_[lv2.ids[keep], 4]
    cnt = np.r_[lv2.counts[keep], lv1.counts[lv1.ids == 1]]
    order = np.argsort(ids)
    t = replace(t, levels=(t.levels[0], lv1, PrivateLevel(ids[order], cnt[order])))
    g = gaussian_tree([dt.parent_array(k) for k in (1, 2)], counts, ZCDP(0.5),
                      neighbouring="add_remove", rng=rng(1))
    views = [ReleasedView("v", "inftda", t, dt, ViewLevels(spec, spec.views[0], dt, trees)),
             ReleasedView("g", "gaussian_tree", g, dt,
                          ViewLevels(spec, spec.views[1], dt, trees))]
    member = _member(views[0], 1, 2)
    sigma2 = float(t.info["sigma2_levels"][1])
    assert member.cv[member.ids == 4][0] == pytest.approx(sigma2)  # not 0
    assert np.all(member.cv[member.ids != 4] < sigma2)  # two or more released siblings
    out, _ = reconcile(views, spec, trees)
    model = out["g"].error_model
    assert model.sum_variance(2, np.array([5, 6, 7])).value > 0.5  # was 0.0
    assert model.sum_variance(2, np.array([4])).value > model.sum_variance(
        2, np.array([4, 5, 6, 7])).value  # the leaf is less certain than its parent


@pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")
@pytest.mark.parametrize("levels,bins", [(["y"], 16), (["c", "y"], 16), (["c", "y"], 12)])
def test_a_range_attribute_s_null_node_keeps_its_rows_through_reconciliation(
        tmp_path, levels, bins):
    """Two views sharing a marginal over a range attribute with on_null = "category":
    the marginal code of the NULL node (leaf code K = bins) was K // span, which is the
    next item's first node when the span divides K (c = 'a''s NULL rows matched c = 'b''s
    first bin) and the last bin node when it does not. At ρ = 1e11 the InfTDA view
    answered y IS NULL with 0 (DuckDB: 1,689 of 20,000 in the review's data) and by c
    396, 374, 0. Found by the session's second review; each view alone was exact."""
    import duckdb

    import pyarrow as pa
    import pyarrow.parquet as pq

    g = np.random.default_rng(2)
    n = 3000
    pq.write_table(pa.table({
        "y": pa.array(np.round(g.gamma(2, 1.2, n), 1), mask=g.random(n) < 0.08),
        "c": pa.array(np.array(["a", "b", "c"])[g.integers(0, 3, n)].tolist())}),
        tmp_path / "t.parquet")
    spec = ReleaseSpec.from_dict({
        "name": "t", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": "1e11"},
        "attributes": {"y": {"kind": "range", "lower": 0, "upper": 8, "bins": bins,
                             "on_null": "category", "on_out_of_bounds": "clamp"},
                       "c": {"kind": "categorical", "domain": ["a", "b", "c"]}},
        "views": [{"name": "vi", "levels": levels, "mechanism": "inftda"},
                  {"name": "vg", "levels": levels, "mechanism": "gaussian_tree"}]},
        base_dir=tmp_path)
    build_release(spec, tmp_path / "r.duckdb", seed=5, progress=False)
    con = dpsql.connect(str(tmp_path / "r.duckdb"))
    raw = f"'{tmp_path / 't.parquet'}'"
    group = "c, " if "c" in levels else ""
    for where in ("y IS NULL", "y < 4", "y >= 4 OR y IS NULL"):
        q = (f"SELECT {group}COUNT(*) FROM {{}} WHERE {where}"
             + (" GROUP BY c ORDER BY c" if group else ""))
        want = [tuple(r[:-1]) + (float(r[-1]),) for r in duckdb.sql(q.format(raw)).fetchall()]
        for view in ("vi", "vg"):
            got = [tuple(r[:-1]) + (round(float(r[-1]), 3),)
                   for r in con.execute(q.format(view)).fetchall()]
            assert got == want, (view, where)
