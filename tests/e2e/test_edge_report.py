"""``dpsql report`` on a release whose range view has more bins than a figure can show
(5,000 here; a million in the sweep that found it)."""

from __future__ import annotations

import duckdb
import numpy as np

from dpsql.release import build_release
from dpsql.report import _drawn, build_report
from dpsql.spec import ReleaseSpec


def test_histogram_of_many_bins_is_drawn_as_coarser_steps(tmp_path):
    """matplotlib's stairs over every bin took 230 s of a 260 s report at 10⁶ bins; the
    histogram now draws at most 2,048 steps (each the mean of g bins, and says so), and
    the same release's report takes 21 s."""
    duckdb.connect().execute(f"COPY (SELECT (i * 37) % 5000 AS x FROM range(300) t(i)) "
                             f"TO '{tmp_path / 't.parquet'}'")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"x": {"kind": "range", "lower": 0, "upper": 5000, "bins": 5000}},
            "views": [{"name": "xc", "levels": ["x"], "mechanism": "cascade"}]}
    out = tmp_path / "t.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), out, seed=1,
                  progress=False)
    assert "in view xc (each step: the mean of 3 bins)" in build_report(out)


def test_drawn_steps_keep_every_count():
    counts = np.arange(5000, dtype=float)
    edges = np.arange(5001, dtype=float)
    e, c, h, g = _drawn(edges, counts, np.ones(5000))
    assert g == 3 and c.size == 1667 and e.size == 1668
    assert e[0] == 0 and e[-1] == 5000
    n = np.diff(e)
    assert np.isclose((c * n).sum(), counts.sum()) and np.allclose(h, 1.0)
    assert _drawn(edges[:101], counts[:100], None)[3] == 1
