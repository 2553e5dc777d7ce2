"""InfTDA's per-answer 95% intervals cover the truth 95% of the time, through SQL.

60 releases of the seeded trips data (20,000 rows, the tests' data set), seeds 500..559,
one InfTDA view ``geo_mode`` (region → province → city → mode) at ρ = 0.1 (per level a
discrete Gaussian of variance 20: intervals several units wide, so that the integer
truth does not make coverage jump with the width). Each release is queried as an analyst
would, ``SELECT city, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM geo_mode GROUP BY
city`` through :func:`dpsql.connect`, and compared with plain DuckDB on the raw rows:
n = 60 releases × 60 cities = 3,600 answers.

The arithmetic. If the intervals are calibrated, the pooled coverage is about binomial
with p = 0.95: SE = √(0.95 · 0.05 / 3,600) = 0.00363, and 5 SE = 0.0182, so the
accepted band is [0.9318, 0.9682].

The power check: the same model's intervals scaled by 0.8 and by 1.25 must fall
outside that band. The interval is centre ± t·se with Student's t at B − 1 = 31 degrees
of freedom (t = 2.040; se from the B = 32 bootstrap replicates), so its coverage is
P(|T₃₁| ≤ t) = 0.95, and scaled by s it is P(|T₃₁| ≤ s·t), which is the interval the
model gives at confidence c(s) = P(|T₃₁| ≤ s·t): the test asks for those too, in the
same query (the ends are whole counts, :func:`dpsql.accuracy.base.count_interval`, which
keeps exactly the whole counts inside, so coverage of a whole-number truth is that of
the model's interval; no interval reaches 0 here, where it would be clipped):

* × 0.8: P(|T₃₁| ≤ 1.632) = 0.887, 0.045 below the band (8.5 of its own binomial SE,
  √(0.887 · 0.113 / 3,600) = 0.0053); with a known variance (normal) 0.897, still 0.035
  below;
* × 1.25: P(|T₃₁| ≤ 2.549) = 0.984, 0.016 above the band (7.5 of its own SE, 0.0021);
  normal: 0.989.

So a model whose intervals were 20% too narrow or 25% too wide fails the first
assertion. Seeded releases; no wall-clock assertion.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest
from scipy import stats

from dpsql.datasets import trips_spec
from dpsql.spec import ReleaseSpec

from conftest import seeded_cursor

RELEASES = 60
SEEDS = range(500, 500 + RELEASES)
P, K_SE = 0.95, 5.0
DOF = 31  # B − 1 of the bootstrap's B = 32 replicates
_T = stats.t.ppf(0.5 + P / 2, DOF)
SCALES = (1.0, 0.8, 1.25)
CONFIDENCES = tuple(float(2 * stats.t.cdf(s * _T, DOF) - 1) for s in SCALES)
QUERY = ("SELECT city, COUNT(*), "
         + ", ".join(f"dp_ci_low({c!r}), dp_ci_high({c!r})" for c in CONFIDENCES)
         + " FROM geo_mode GROUP BY city")


def _answers(trips_data, tmp_path) -> np.ndarray:
    """(truth, lo, hi at each of CONFIDENCES) of every answer of every release."""
    spec = trips_spec(0.1)
    spec["views"] = [v for v in spec["views"] if v["name"] == "geo_mode"]
    spec = ReleaseSpec.from_dict(spec, base_dir=trips_data)
    truth = dict(duckdb.connect().execute(
        f"SELECT city, COUNT(*) FROM '{trips_data / 'trips.parquet'}' GROUP BY city"
    ).fetchall())
    out = []
    for seed in SEEDS:
        path = tmp_path / f"r{seed}.duckdb"
        cur = seeded_cursor(spec, path, seed)
        cur.execute(QUERY)
        rows = cur.fetchall()
        assert cur.dp_info["view"] == "geo_mode" and cur.dp_info["error_family"] == \
            "calibrated"
        cur.connection.close()
        path.unlink()
        out += [(truth.get(city, 0), *ends) for city, _, *ends in rows]
    return np.asarray(out, dtype=np.float64)


@pytest.mark.statistical
def test_inftda_intervals_cover_95_percent_and_scaled_ones_do_not(trips_data, tmp_path):
    answers = _answers(trips_data, tmp_path)
    n = answers.shape[0]
    assert n == RELEASES * 60
    truth = answers[:, 0]
    assert answers[:, 1::2].min() > 0  # no interval clipped at 0

    def coverage(scale: float) -> float:
        i = 1 + 2 * SCALES.index(scale)
        lo, hi = answers[:, i], answers[:, i + 1]
        assert np.all(lo == np.round(lo)) and np.all(hi == np.round(hi))  # whole counts
        return float(np.mean((lo <= truth) & (truth <= hi)))

    se = math.sqrt(P * (1 - P) / n)
    band = (P - K_SE * se, P + K_SE * se)
    got = coverage(1.0)
    assert band[0] <= got <= band[1], \
        f"coverage {got:.4f} of {n} answers outside [{band[0]:.4f}, {band[1]:.4f}]"
    narrow, wide = coverage(0.8), coverage(1.25)
    assert narrow < band[0], f"× 0.8 intervals cover {narrow:.4f}: the test has no power"
    assert wide > band[1], f"× 1.25 intervals cover {wide:.4f}: the test has no power"
