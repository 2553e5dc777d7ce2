"""Laplace-family intervals cover at their stated confidence, through SQL.

A one-level ``btree`` (fan-out = bins) under add/remove releases each bin's raw
measurement: its error is one discrete Laplace draw. The normal interval ±1.96σ covers
P(|L| ≤ 1.96σ) = 1 − exp(−1.96·√2) = 0.937 of such answers, not 0.95
(:mod:`dpsql.accuracy.laplace_sum`).

The release: the seeded trips data (20,000 rows), one view ``dist`` over ``distance``
with 800 bins of width 0.1 (0 to 80 km; the longer trips are dropped, and bins nobody's
trip falls in are left out: an interval clipped to [0, 0] covers their 0 by
construction; 776 bins are left) and fan-out 800, ε = 0.02 (discrete Laplace of scale
50: σ ≈ 70.7, so whole-count ends move coverage by at most 0.001). Each of RELEASES
seeded releases is queried as an analyst would, ``SELECT distance, COUNT(*),
dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95) FROM dist GROUP BY distance``, and
compared with plain DuckDB on the raw rows: n = 26 × 776 = 20,176 answers (many bins a
release rather than many releases: each release costs a build).

The arithmetic: SE = √(0.95 · 0.05 / 20,176) = 0.00153, 5 SE = 0.0077, so the band is
[0.9423, 0.9577]. The normal interval of the same answers (±1.96·dp_stderr) covers
0.9374 in theory, 8.3 SE below 0.95: the test asserts that it falls below the band
(what this fix changed), and that the released intervals fall inside it.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from dpsql.spec import ReleaseSpec

from conftest import seeded_cursor

RELEASES = 26
SEEDS = range(9000, 9000 + RELEASES)
P, K_SE, Z95 = 0.95, 5.0, 1.959963984540054


def _spec(base) -> ReleaseSpec:
    return ReleaseSpec.from_dict({
        "name": "trips_dist", "source": "trips.parquet", "neighbouring": "add_remove",
        "budget": {"epsilon": 0.02},
        "attributes": {"distance": {"kind": "range", "lower": 0, "upper": 80, "bins": 800,
                                    "fanout": 800, "on_out_of_bounds": "drop"}},
        "views": [{"name": "dist", "levels": ["distance"], "mechanism": "btree"}],
    }, base_dir=base)


@pytest.mark.statistical
def test_one_level_btree_bins_cover_95(trips_data, tmp_path):
    spec = _spec(trips_data)
    # the trips' distances have two decimals: bin b holds [b/10, (b+1)/10), exactly
    truth = dict(duckdb.connect().execute(
        "SELECT CAST(round(distance * 100) AS BIGINT) // 10 AS b, COUNT(*) "
        f"FROM '{trips_data / 'trips.parquet'}' WHERE distance < 80 GROUP BY b"
    ).fetchall())
    assert len(truth) == 776  # bins nobody's trip falls in are left out (below)
    rows = []
    for seed in SEEDS:
        path = tmp_path / f"r{seed}.duckdb"
        cur = seeded_cursor(spec, path, seed)
        cur.execute("SELECT distance, COUNT(*), dp_stderr(), dp_ci_low(0.95), "
                    "dp_ci_high(0.95) FROM dist GROUP BY distance")
        got = cur.fetchall()
        assert cur.dp_info["mechanism"] == "btree" and cur.dp_info["level"] == 1
        # a bin whose truth is 0 is covered whenever its interval is clipped to [0, 0]:
        # left out, so that coverage is the model's (a truth >= 1 is not affected)
        assert len(got) == 800
        rows += [(truth[round(a * 10)], c, se, lo, hi) for a, c, se, lo, hi in got
                 if truth.get(round(a * 10), 0) >= 1]
        cur.connection.close()
        path.unlink()
    t, c, se, lo, hi = (np.array(x, dtype=np.float64) for x in zip(*rows))
    n = t.size
    band = K_SE * math.sqrt(P * (1 - P) / n)
    covered = float(np.mean((lo <= t) & (t <= hi)))
    normal = float(np.mean(np.abs(c - t) <= Z95 * se))
    assert abs(covered - P) <= band, (covered, normal, n)
    assert normal < P - band, (covered, normal, n)  # the ±1.96σ interval under-covers
