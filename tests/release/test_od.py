"""Origin/destination releases: views whose levels interleave two spines (od_topdown.md
§1), built from a spec. Level layout and sizes, the consistency contract on every level,
the exact total under substitution, zero noise reproducing the true O/D table, and the
dry run's error models."""

from __future__ import annotations

import duckdb
import pytest

from dpsql import domains
from dpsql.datasets import commutes_spec
from dpsql.release import build_release, open_release, plan_release
from dpsql.spec import ReleaseSpec

from conftest import COMMUTES_SHAPE, COMMUTES_TRIPS

SIDES = {"work_first": ("work", "home"), "home_first": ("home", "work")}
GEO = ("region", "province", "municipality")


def _labels(view: str, k: int) -> list[str]:
    """Label columns of level k: the first side's region, the second side's region, the
    first side's province, ..."""
    first, second = SIDES[view]
    order = [f"{s}_{g}" for g in GEO for s in (first, second)]
    return order[:k]


def test_levels_alternate_the_two_spines(commutes_release):
    release = open_release(commutes_release)
    r, p, m = (COMMUTES_SHAPE[k] for k in ("n_regions", "n_provinces", "n_munis"))
    con = duckdb.connect(str(commutes_release), read_only=True)
    for name in SIDES:
        view = release.views[name]
        assert view.depth == 6
        assert [lv.columns for lv in view.levels] == [(c,) for c in _labels(name, 6)]
        assert [lv.attribute for lv in view.levels] == list(SIDES[name]) * 3
        assert [lv.kind for lv in view.levels] == ["hierarchy"] * 6
        assert [lv.n_nodes for lv in view.levels] == [r, r * r, r * p, p * p, p * m, m * m]
        for lv in view.levels:
            cols = [row[0] for row in con.execute(f"DESCRIBE {lv.table}").fetchall()]
            assert sorted(cols) == sorted(_labels(name, lv.k) + [
                "dp_count", "dp_var", "dp_parent", "dp_fanout", "dp_bias",
                "dp_measured"]), lv.table


def test_every_level_is_the_sum_of_the_level_below_and_sums_to_n(commutes_release):
    """The consistency contract, compared both ways (a FULL JOIN): a node is released
    exactly when its children sum to a positive count, and equals that sum. Under
    substitution the total is public, so every level sums to n exactly."""
    con = duckdb.connect(str(commutes_release), read_only=True)
    for name in SIDES:
        for k in range(1, 6):
            cols = ", ".join(_labels(name, k))
            on = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in _labels(name, k))
            bad = con.execute(
                f"SELECT count(*) FROM {name}__l{k} a FULL JOIN (SELECT {cols}, "
                f"sum(dp_count) AS s FROM {name}__l{k + 1} GROUP BY ALL) b ON {on} "
                "WHERE a.dp_count IS DISTINCT FROM b.s").fetchone()[0]
            assert bad == 0, (name, k)
        for k in range(1, 7):
            total, low = con.execute(f"SELECT sum(dp_count), min(dp_count) "
                                     f"FROM {name}__l{k}").fetchone()
            assert (total, low > 0) == (COMMUTES_TRIPS, True), (name, k)


def test_zero_noise_reproduces_the_true_od_table(commutes_exact, commutes_data):
    """At ρ = 1e6 the discrete Gaussian draws are 0: every level of both views is the
    true count of its (work, home) cell, from DuckDB over the raw rows."""
    con = duckdb.connect(str(commutes_exact), read_only=True)
    con.execute(f"CREATE TEMP VIEW raw AS SELECT * FROM "
                f"'{commutes_data / 'commutes.parquet'}'")
    for name in SIDES:
        for k in (2, 3, 6):
            cols = ", ".join(_labels(name, k))
            diff = con.execute(
                f"(SELECT {cols}, count(*) FROM raw GROUP BY ALL) EXCEPT ALL "
                f"(SELECT {cols}, dp_count FROM {name}__l{k})").fetchall()
            extra = con.execute(
                f"(SELECT {cols}, dp_count FROM {name}__l{k}) EXCEPT ALL "
                f"(SELECT {cols}, count(*) FROM raw GROUP BY ALL)").fetchall()
            assert (diff, extra) == ([], []), (name, k)


def test_level_sizes_are_the_interleaved_public_tree(commutes_data):
    """The release's public tree is domains.interleave of the two spines (first side
    first), so its level sizes are the mechanism's."""
    spec = ReleaseSpec.from_dict(commutes_spec(), base_dir=commutes_data)
    spines = {a: domains.hierarchy(list(spec.attributes[a].columns),
                                   list(spec.attributes[a].paths)) for a in ("work", "home")}
    planned = plan_release(spec, seed=1)
    for name, (first, second) in SIDES.items():
        tree = domains.interleave(spines[first], spines[second])
        assert [lv.n_nodes for lv in planned.views[name].levels] == list(tree.level_sizes[1:])


def test_dry_run_gives_the_error_models_of_the_real_build(commutes_data, tmp_path):
    spec = ReleaseSpec.from_dict(commutes_spec(0.5), base_dir=commutes_data)
    planned = plan_release(spec, seed=2)
    built = build_release(spec, tmp_path / "c.duckdb", seed=2, progress=False)
    for name, v in built.views.items():
        p = planned.views[name]
        assert (p.levels, p.budget) == (v.levels, v.budget)
        # InfTDA's calibration is measured on the released counts: the dry run has none
        # to measure and shows the nominal one (kappa 1); everything else is the build's
        assert model_without_calibration(p.error_params) == \
            model_without_calibration(v.error_params)


@pytest.mark.parametrize("mechanism", ["gaussian_tree", "laplace_tree"])
def test_per_node_mechanisms_take_interleaved_views(commutes_data, tmp_path, mechanism):
    """The dense mechanisms run on the same public tree: every node stored, every level
    the sum of the level below."""
    raw = commutes_spec(1.0)
    if mechanism == "laplace_tree":
        raw["budget"] = {"epsilon": 1.0}
    raw["views"] = [{**raw["views"][0], "mechanism": mechanism}]
    out = tmp_path / "dense.duckdb"
    build_release(ReleaseSpec.from_dict(raw, base_dir=commutes_data), out, seed=4,
                  progress=False)
    con = duckdb.connect(str(out), read_only=True)
    view = open_release(out).views["work_first"]
    for lv in view.levels[:-1]:
        n, = con.execute(f"SELECT count(*) FROM {lv.table}").fetchone()
        assert n == lv.n_nodes
        cols = ", ".join(_labels("work_first", lv.k))
        worst, = con.execute(
            f"SELECT max(abs(a.dp_count - b.s)) FROM {lv.table} a JOIN (SELECT {cols}, "
            f"sum(dp_count) AS s FROM work_first__l{lv.k + 1} GROUP BY ALL) b "
            f"USING ({cols})").fetchone()
        assert worst < 1e-6 * COMMUTES_TRIPS


def test_inspect_names_the_column_each_level_refines(commutes_release):
    """``dpsql inspect``: an interleaved view's levels alternate attributes, so each row
    names the spine column it splits."""
    from dpsql.present import release_summary

    views = release_summary(open_release(commutes_release))[1]
    col = [c.header for c in views.columns].index("refines")
    refines = [str(c) for c in views.columns[col].cells]  # Text cells: never markup
    assert refines[:6] == _labels("home_first", 6)
    assert refines[6:] == _labels("work_first", 6)


def model_without_calibration(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != "calibration"}
