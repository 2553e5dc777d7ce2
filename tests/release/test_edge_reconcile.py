"""Reconciliation without the per-node variances: what the calibration bootstrap's
replicates need (their counts only), at none of the O(n²) cost of the reconciled
variances of every node."""

from __future__ import annotations

import numpy as np

from dpsql.release.reconcile import reconcile

from test_reconcile import _mc_views, _three_views


def test_counts_do_not_depend_on_computing_the_variances():
    spec, trees, truth_ab, hist = _three_views()
    views = _mc_views(spec, trees, truth_ab, hist, seed=5)
    full, _ = reconcile(views, spec, trees)
    lean, _ = reconcile(views, spec, trees, node_variances=False)
    assert full.keys() == lean.keys() and "g" in full
    for name in full:
        for a, b, old in zip(full[name].levels, lean[name].levels,
                             next(v for v in views if v.name == name).tree.levels):
            assert np.array_equal(a.counts, b.counts)
            if name != "c":  # a real-valued tree keeps its mechanism's variances
                assert np.array_equal(b.variance, old.variance)
        assert lean[name].error_model.kind == full[name].error_model.kind
