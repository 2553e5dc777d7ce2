"""Throughput of dpsql's discrete Gaussian against numpy's normal and OpenDP's discrete
Gaussian, measured in one run.

    .venv/bin/python benchmarks/samplers.py

Targets (issue "Foundation"): >= 50x faster than OpenDP, <= 10x slower than numpy's
normal, at sigma^2 = 400 for 10^6 samples.
"""

from __future__ import annotations

import math
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from _common import best_of, write  # noqa: E402

from dpsql.privacy import discrete_gaussian, rng  # noqa: E402

N = 1_000_000
SIGMA2 = 400.0


def main() -> dict:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    g = rng(1)
    ours = best_of(lambda: discrete_gaussian(SIGMA2, N, g), repeat=7)
    np_gen = np.random.default_rng(1)
    numpy_normal = best_of(lambda: np_gen.normal(0.0, math.sqrt(SIGMA2), N), repeat=7)
    aes_normal = best_of(lambda: g.normal(0.0, math.sqrt(SIGMA2), N), repeat=7)

    space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float))
    meas = dp.m.make_gaussian(*space, scale=math.sqrt(SIGMA2))
    zeros = [0] * N
    opendp_time = best_of(lambda: meas(zeros), repeat=2)

    result = {
        "n_samples": N,
        "sigma2": SIGMA2,
        "seconds": {
            "dpsql_discrete_gaussian": ours,
            "numpy_normal_pcg64": numpy_normal,
            "numpy_normal_aes_ctr": aes_normal,
            "opendp_discrete_gaussian": opendp_time,
        },
        "ratios": {
            "speedup_vs_opendp": opendp_time / ours,
            "slowdown_vs_numpy_normal": ours / numpy_normal,
        },
        "targets": {"speedup_vs_opendp": ">= 50", "slowdown_vs_numpy_normal": "<= 10"},
    }
    result["targets_met"] = (result["ratios"]["speedup_vs_opendp"] >= 50
                             and result["ratios"]["slowdown_vs_numpy_normal"] <= 10)
    path = write("samplers", result)
    print(f"dpsql discrete Gaussian: {ours * 1e3:.1f} ms for {N:,} samples at sigma^2={SIGMA2:g}")
    print(f"  vs OpenDP: {result['ratios']['speedup_vs_opendp']:.0f}x faster (target >= 50x)")
    print(f"  vs numpy normal: {result['ratios']['slowdown_vs_numpy_normal']:.2f}x slower "
          "(target <= 10x)")
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
