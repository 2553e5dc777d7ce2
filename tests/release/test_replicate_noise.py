"""Which sampler draws which noise: a release's own discrete Gaussian noise (InfTDA's,
gaussian_tree's) comes from the exact CKS sampler (privacy rule 4), and only the
calibration bootstrap's replicates, post-processing of released counts, draw from the
fast table sampler (dpsql.privacy.table_sampler)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dpsql.datasets import trips_spec
from dpsql.domains import DomainTree
from dpsql.mechanisms.inftda import inftda
from dpsql.mechanisms.tree_counts import gaussian_tree
from dpsql.privacy import table_sampler
from dpsql.release import build, build_release
from dpsql.spec import Hierarchy, ReleaseSpec

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


def _leaf_ids(spec, view, dtree: DomainTree, leaf):
    """The view's sparse true leaves (ids sorted, counts) from its coded leaf counts."""
    attrs = [spec.attributes[a] for a in view.levels]
    ids = dtree.leaf_ids({a.level_columns[-1] if isinstance(a, Hierarchy) else a.name:
                          leaf[f"c_{a.name}"] for a in attrs})
    order = np.argsort(ids, kind="stable")
    return ids[order], leaf["n"][order]


def _rerun(spec, view, budget, dtree, leaf, generator, **noise):
    """The view's mechanism, called directly (not through the build), on its true leaves."""
    ids, n = _leaf_ids(spec, view, dtree, leaf)
    lw = list(view.level_weights) if view.level_weights else None
    common = dict(level_weights=lw, neighbouring=spec.neighbouring,
                  max_rows=spec.unit.max_rows, rng=generator, **noise)
    if view.mechanism == "inftda":
        return inftda(dtree, ids, n, budget, **common)
    dense = np.zeros(dtree.level_sizes[-1], dtype=np.int64)
    np.add.at(dense, ids, n)
    parents = [dtree.parent_array(k) for k in range(1, dtree.depth + 1)]
    return gaussian_tree(parents, dense, budget, **common)


def test_a_releases_noise_is_the_exact_samplers_stream(trips_data, tmp_path, monkeypatch):
    """Each InfTDA and gaussian_tree view's tree is its mechanism with the exact sampler on
    its true leaves from the generator's state before it ran, draw for draw; the same run
    with the table sampler gives other counts (so the check has power); and the
    bootstrap, which ran, used the table sampler."""
    seen = []
    real = build._run_mechanism

    def run_spy(spec, view, budget, trees, leaf, generator):
        before = copy.deepcopy(generator)
        out = real(spec, view, budget, trees, leaf, generator)
        seen.append((spec, view, budget, leaf, before, out))
        return out

    monkeypatch.setattr(build, "_run_mechanism", run_spy)
    table_sampler._table.cache_clear()
    spec = ReleaseSpec.from_dict(trips_spec(1.0), base_dir=trips_data)
    build_release(spec, tmp_path / "r.duckdb", seed=5, progress=False)
    assert table_sampler._table.cache_info().currsize > 0  # the replicates' tables

    checked = []
    for spec, view, budget, leaf, before, (tree, dtree) in seen:
        if view.mechanism not in ("inftda", "gaussian_tree"):
            continue  # their noise is continuous or discrete Laplace: no table sampler
        assert "calibration" not in tree.info  # calibrated later, from this tree
        exact = _rerun(spec, view, budget, dtree, leaf, copy.deepcopy(before))
        table = _rerun(spec, view, budget, dtree, leaf, copy.deepcopy(before),
                       noise=table_sampler.discrete_gaussian_table)
        for mine, again in zip(tree.levels, exact.levels):
            assert np.array_equal(mine.ids, again.ids) and np.array_equal(mine.counts,
                                                                           again.counts)
        assert any(a.counts.shape != b.counts.shape or not np.array_equal(a.counts, b.counts)
                   for a, b in zip(tree.levels, table.levels)), view.name
        checked.append(view.name)
    assert sorted(checked) == ["geo_gauss", "geo_mode", "mode_dist"]


def test_inftda_draws_from_the_exact_sampler_by_default():
    """Without ``noise``, InfTDA's draws are discrete_gaussian's, call for call."""
    from dpsql.domains import categorical, concat
    from dpsql.privacy import ZCDP, rng
    from dpsql.privacy.samplers import discrete_gaussian

    t = concat(categorical("a", list(range(8))), categorical("b", list(range(50))))
    ids, n = np.arange(0, 400, 3), np.arange(1, 135) % 17
    chunks = {"default": [], "exact": []}

    def hook(name):
        return lambda level, child, parent, z: chunks[name].append(z.copy())

    inftda(t, ids, n, ZCDP(1), neighbouring="add_remove", rng=rng(3), noise_hook=hook("default"))
    inftda(t, ids, n, ZCDP(1), neighbouring="add_remove", rng=rng(3), noise_hook=hook("exact"),
           noise=discrete_gaussian)
    assert len(chunks["default"]) == 3  # the root and two levels
    for a, b in zip(chunks["default"], chunks["exact"]):
        assert np.array_equal(a, b)
