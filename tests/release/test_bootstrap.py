"""The calibration bootstrap of a reconciled release (dpsql.release.bootstrap): it re-runs
the whole pipeline on released values only, sees the agreement, and moves no noise."""

from __future__ import annotations

import numpy as np
import pytest

import dpsql
from dpsql.datasets import trips_spec
from dpsql.release import bootstrap, build, build_release, open_release
from dpsql.spec import ReleaseSpec

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def _build(trips_data, path, reconcile=True, seed=11):
    spec = ReleaseSpec.from_dict({**trips_spec(1.0), "reconcile": reconcile},
                                 base_dir=trips_data)
    return build_release(spec, path, seed=seed, progress=False).path


def test_the_pipeline_bootstrap_reads_only_released_trees(trips_data, tmp_path, monkeypatch):
    """Privacy: every replicate is drawn around a view's final released tree (the trees
    the release writes), never around true counts; and every view that agreed on a
    marginal is re-drawn, so the replicate reconciliation sees them all."""
    finals, calls = {}, []
    real_views, real_replicate = bootstrap.calibrate_views, build._replicate

    def views_spy(spec, trees, outputs, replicate, generator, **kw):
        finals.update({v.name: t for v, (t, _) in zip(spec.views, outputs)})
        return real_views(spec, trees, outputs, replicate, generator, **kw)

    def replicate_spy(spec, view, budget, trees, dtree, released, g):
        calls.append((view.name, released))
        return real_replicate(spec, view, budget, trees, dtree, released, g)

    monkeypatch.setattr(build, "calibrate_views", views_spy)
    monkeypatch.setattr(build, "_replicate", replicate_spy)
    rel = open_release(_build(trips_data, tmp_path / "r.duckdb"))
    assert rel.views["geo_mode"].info["calibration"]["method"] == bootstrap.PIPELINE
    B = rel.views["geo_mode"].info["calibration"]["replicates"]
    names = {n for n, _ in calls}
    assert names == {"geo_mode", "mode_dist", "geo_gauss", "dist", "age_tree"}
    assert len(calls) == B * len(names)
    for name, released in calls:
        assert released is finals[name]


def test_agreed_levels_carry_the_combined_error(trips_data, tmp_path):
    """geo_mode's regions agree with the Gaussian tree's, and its total with four views':
    their calibrated standard errors are the combination's, well below what InfTDA alone
    has (reconcile = false)."""
    def region_se(path):
        con = dpsql.connect(str(path))
        cur = con.cursor()
        cur.execute("SELECT region, COUNT(*), dp_stderr() FROM geo_mode GROUP BY region")
        se = [r[2] for r in cur.fetchall()]
        cur.execute("SELECT COUNT(*), dp_stderr() FROM geo_mode")  # the root: agreed total
        se.append(cur.fetchone()[1])
        con.close()
        return np.array(se)

    path = _build(trips_data, tmp_path / "on.duckdb")
    on = region_se(path)
    # COUNT(*) sums the regions: its variance is the measured agreed total's
    cal = open_release(path).views["geo_mode"].error_params["calibration"]
    assert on[-1] == pytest.approx(np.sqrt(cal["root_var"] * (1 + 1 / cal["replicates"])))
    off = region_se(_build(trips_data, tmp_path / "off.duckdb", reconcile=False))
    assert on[:-1].mean() < 0.85 * off[:-1].mean(), (on, off)  # measured: 0.69
    assert on[-1] < 0.85 * off[-1], (on, off)


def test_the_calibration_moves_no_released_count(trips_data, tmp_path, monkeypatch):
    """The bootstrap draws from a jumped stream: a seeded release's counts are the same
    whatever the number of replicates."""
    def leaves(path):
        con = dpsql.connect(str(path))
        cur = con.cursor()
        out = {}
        for view, cols in (("geo_mode", "city, mode"), ("geo_gauss", "city"),
                           ("mode_dist", "mode")):
            cur.execute(f"SELECT {cols}, COUNT(*) FROM {view} GROUP BY {cols} ORDER BY {cols}")
            out[view] = cur.fetchall()
        con.close()
        return out

    monkeypatch.setattr(bootstrap, "replicates_for", lambda draws: 4)
    four = leaves(_build(trips_data, tmp_path / "four.duckdb"))
    monkeypatch.setattr(bootstrap, "replicates_for", lambda draws: 7)
    seven = leaves(_build(trips_data, tmp_path / "seven.duckdb"))
    assert four == seven


def test_a_gaussian_tree_agreed_with_inftda_is_calibrated_too(trips_data, tmp_path):
    """geo_gauss agrees with geo_mode (InfTDA) on region, province and city: its agreed
    part is the linear support model's approximation, so the pipeline bootstrap measures
    its mean squared error at the agreed level and scales the model by it (recorded);
    a view whose agreement holds no InfTDA view keeps its exact model."""
    rel = open_release(_build(trips_data, tmp_path / "r.duckdb"))
    gauss = rel.views["geo_gauss"]
    scale = gauss.info["calibration"]["agreed_scale"]
    assert gauss.info["calibration"]["method"] == bootstrap.PIPELINE
    assert gauss.error_params["scale"] == scale
    assert 0.5 < scale < 3.0  # measured on this release: about 1.1 to 1.3
    for name in ("dist", "age_tree"):  # their total's chain is exact: not scaled
        assert rel.views[name].error_params["exact"] is True
        assert rel.views[name].error_params["scale"] == 1.0
