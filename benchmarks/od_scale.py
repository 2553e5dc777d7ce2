"""An origin/destination release at Italy's scale, end to end (issue 22).

    .venv/bin/python benchmarks/od_scale.py [--quick]

The data are :func:`dpsql.datasets.gravity_od`'s seeded gravity model over 20 regions, 110
provinces and 8,000 municipalities (a 64M-cell public leaf level), written one row per
commuter as ``examples/commutes_od.py`` does, released with the example's spec (two
interleaved InfTDA views, the destination and the origin tree) at the example's ρ = 1 and
at ρ = 100, where most non-zero pairs come out positive and are stored: the level tables
are then as large as they get. Two sizes, about 11× apart in non-zero pairs: 500k pairs
(1.2M commuters, ρ = 100 only) and 5.6M pairs (12M commuters, both budgets).

Reported per size (each release in a fresh subprocess, so peak RSS is its own): the whole
release's time and peak RSS, the nodes stored, and the time per stage of the build
(reading and counting, the mechanisms, InfTDA's bootstrap calibration, building the level
tables (``view_tables._tree_levels``: labels from the nodes' integer codes) and writing the
file), with the load average before and after each release (the machine is shared).
``--repeat N`` runs each release N times and keeps the fastest (all times in the JSON).
``--compare-with DIR`` also releases with the dpsql source tree in DIR (another version,
e.g. ``git worktree add DIR main``), interleaved: DIR's release, then this code's, on the
same data, each in a fresh subprocess; the JSON's ``before_after`` holds both (the
fastest of the repeats of each) and their ratios per budget, so that a change's effect
is measured under the same load.
The level-table time should grow like the nodes stored (linear), not faster. Targets, at
5.6M pairs and either budget: the whole release ≤ 30 s and peak RSS ≤ 3 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write  # noqa: E402

# (non-zero pairs, commuters, budgets ρ)
SIZES = [(500_000, 1_200_000, (100.0,)), (5_600_000, 12_000_000, (100.0, 1.0))]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import dpsql
from dpsql.datasets import commutes_spec
from dpsql.release import build, build_release, view_tables
from dpsql.spec import ReleaseSpec
base, rho = Path(sys.argv[1]), float(sys.argv[2])
# where the time goes: the build's stages, timed by wrapping the functions it calls
STAGES = {"ingest": (build, "ingest"), "mechanism": (build, "_run_mechanism"),
          "calibration": (build, "calibrate_views"), "levels": (view_tables, "_tree_levels"),
          "write": (build, "write_release")}
spent = {k: 0.0 for k in STAGES}
def timer(key, real):
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t
    return timed
for key, (module, fn) in STAGES.items():
    setattr(module, fn, timer(key, getattr(module, fn)))
spec = ReleaseSpec.from_dict(commutes_spec(rho), base_dir=base)
t = time.perf_counter()
out = base / f"r{rho:g}.duckdb"  # one file per budget: a release is never replaced
release = build_release(spec, out, seed=1, progress=False)
total = time.perf_counter() - t
import duckdb
con = duckdb.connect(str(out), read_only=True)
nodes = sum(con.execute(f'SELECT count(*) FROM "{lv.table}"').fetchall()[0][0]
            for v in release.views.values() for lv in v.levels)
leaf = sum(con.execute(f'SELECT count(*) FROM "{v.levels[-1].table}"').fetchall()[0][0]
           for v in release.views.values())
print(json.dumps({"seconds": total, "peak_rss_mb":
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "level_tables_seconds": spent["levels"],
                  "stage_seconds": {k: v for k, v in spent.items()}, "nodes_stored": nodes,
                  "leaf_nodes_stored": leaf, "rows": release.report.rows_used,
                  "dpsql": str(Path(dpsql.__file__).parent.parent)}))
"""


def release(base: Path, rho: float, source: str | None = None) -> dict:
    """One release in a fresh subprocess (with the dpsql of ``source`` if given), with
    the load average around it."""
    for old in base.glob(f"r{rho:g}.duckdb*"):
        old.unlink()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if source is not None:
        env["PYTHONPATH"] = source
    load = os.getloadavg()[0]
    # run from the data directory: `python -c` puts the working directory first on
    # sys.path, where a source checkout's dpsql would shadow PYTHONPATH's
    out = subprocess.run([sys.executable, "-c", CHILD, str(base), str(rho)],
                         capture_output=True, text=True, env=env, cwd=base)
    if out.returncode != 0:
        raise RuntimeError(f"the release at rho {rho:g} ({source or 'this code'}) failed:\n"
                           f"{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if source is not None and Path(got["dpsql"]).resolve() != Path(source).resolve():
        raise RuntimeError(f"the release meant for {source} imported dpsql from {got['dpsql']}")
    return {**got, "load_average_before": load, "load_average_after": os.getloadavg()[0]}


def run(pairs: int, trips: int, rhos: tuple[float, ...], repeat: int = 1,
        compare: str | None = None) -> tuple[list[dict], list[dict]]:
    """This code's fastest release per budget, and with ``compare``, the before/after
    pairs (the other code's release, then this code's, each repeat)."""
    from dpsql.datasets import write_commutes
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        t = time.perf_counter()
        write_commutes(base, n_trips=trips, seed=2011, n_regions=20, n_provinces=110,
                       n_munis=8000, n_pairs=pairs)
        made = time.perf_counter() - t
        runs, pairs_out = [], []
        for rho in rhos:
            load = os.getloadavg()[0]
            tries, before = [], []
            for _ in range(repeat):  # the fastest release is kept, all times reported
                if compare is not None:
                    before.append(release(base, rho, compare))
                tries.append(release(base, rho))
            got = min(tries, key=lambda t: t["seconds"])
            runs.append({"pairs": pairs, "commuters": trips, "rho": rho,
                         "data_seconds": made, **got, "load_average_before": load,
                         "load_average_after": os.getloadavg()[0],
                         "seconds_each_repeat": [t["seconds"] for t in tries]})
            print(json.dumps(runs[-1]), flush=True)
            if compare is not None:
                old = min(before, key=lambda t: t["seconds"])
                pairs_out.append({
                    "pairs": pairs, "rho": rho,
                    "before": {**old, "seconds_each_repeat": [t["seconds"] for t in before]},
                    "after": {**got, "seconds_each_repeat": [t["seconds"] for t in tries]},
                    "speedup": old["seconds"] / got["seconds"],
                    "stage_speedup": {k: old["stage_seconds"][k] / v
                                      for k, v in got["stage_seconds"].items() if v > 0},
                    "load_average_range": [min(min(t["load_average_before"],
                                                   t["load_average_after"])
                                               for t in before + tries),
                                           max(max(t["load_average_before"],
                                                   t["load_average_after"])
                                               for t in before + tries)]})
                print(json.dumps(pairs_out[-1]), flush=True)
    return runs, pairs_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="one small size (a smoke run)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="releases per size and budget; the fastest is reported")
    ap.add_argument("--compare-with", metavar="DIR",
                    help="a dpsql source tree to release with too, interleaved (before/after)")
    ap.add_argument("--compare-label", default="",
                    help="what DIR holds (e.g. 'main at b029ba0'), stored in the JSON")
    args = ap.parse_args()
    sizes = [(50_000, 120_000, (100.0,))] if args.quick else SIZES
    runs, compared = [], []
    for p, t, rhos in sizes:
        got, pairs = run(p, t, rhos, args.repeat, args.compare_with)
        runs += got
        compared += pairs
    for r in runs:
        print(f"{r['pairs']:>10,} pairs, rho {r['rho']:g}: {r['seconds']:.2f} s, peak "
              f"{r['peak_rss_mb']:,.0f} MB, {r['nodes_stored']:,} nodes stored, level tables "
              f"{r['level_tables_seconds']:.2f} s; stages "
              + ", ".join(f"{k} {v:.1f} s" for k, v in r["stage_seconds"].items())
              + f"; load {r['load_average_before']:.1f} -> {r['load_average_after']:.1f}")
    payload = {"municipalities": 8000, "repeat": args.repeat, "runs": runs,
               "targets": {"seconds": "<= 30", "peak_rss_mb": "<= 3072"}}
    if compared:
        payload["before_after"] = {
            "before": args.compare_label or args.compare_with, "after": "this code",
            "what": "each release with the code before, then with this code, in fresh "
                    "subprocesses on the same data, per size and budget and repeat; the "
                    "fastest of the repeats of each",
            "runs": compared}
        for r in compared:
            print(f"{r['pairs']:>10,} pairs, rho {r['rho']:g}: before "
                  f"{r['before']['seconds']:.2f} s, after {r['after']['seconds']:.2f} s "
                  f"({r['speedup']:.2f}x); load "
                  f"{r['load_average_range'][0]:.1f}-{r['load_average_range'][1]:.1f}")
    if len(runs) > 1:
        small, big = runs[0], runs[1]  # the same budget, 11x the pairs
        payload["level_tables_growth"] = big["level_tables_seconds"] / small["level_tables_seconds"]
        payload["nodes_growth"] = big["nodes_stored"] / small["nodes_stored"]
        payload["pairs_growth"] = big["pairs"] / small["pairs"]
    name = "od_scale_quick" if args.quick else "od_scale"
    earlier = RESULTS / f"{name}.json"  # an earlier run's comparison of the samplers
    if earlier.exists():
        kept = json.loads(earlier.read_text()).get("bootstrap_sampler_comparison")
        if kept is not None:
            payload["bootstrap_sampler_comparison"] = kept
    print(write(name, payload))


if __name__ == "__main__":
    main()
