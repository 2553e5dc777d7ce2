"""BLAS threads on a shared machine: numpy's OpenBLAS at its default thread count vs one
thread, on the README-sized release and its analyst queries, idle and under load.

    .venv/bin/python benchmarks/blas_threads.py [--rounds 5] [--quick]

**The question.** numpy's wheels ship OpenBLAS with one worker thread per core, and its
workers busy-wait between calls. When other processes keep the cores busy (a shared
server, CI, a notebook beside a build), a dense LAPACK call on a small matrix (the
range-optimal covariance's 256×256 ``eigh``) can become far slower with two threads than
with one: the threads wait for each other on cores they do not get.

**The work** (each arm in a fresh subprocess, so that BLAS starts with the thread count
set for it and no factorisation is shared from an earlier run):

* ``build``: :func:`dpsql.release.build_release` of the README's spec over 20,000 seeded
  synthetic trips: InfTDA ``geo_mode`` (with its bootstrap calibration), a Cascade view of
  256 distance bins with ``covariance = "optimal"`` (the range-optimal solver: a few
  256×256 eigendecompositions and K³ products) and InfTDA ``geo_dist``, one traveller
  keeping at most 4 trips;
* ``queries``: in another fresh process, :func:`dpsql.connect` on that release and
  :data:`QUERIES` (error columns on each view: the optimal view's exact variances are one
  eigendecomposition per process, InfTDA's calibrated intervals, a quantile interval).

**The arms.** ``default``: OpenBLAS's own thread count (one per core), with dpsql's cap
switched off (``dpsql._blas.MAX_SINGLE_THREAD_SIZE = 0`` in the child); ``one``:
``OPENBLAS_NUM_THREADS=1`` for the whole process; ``dpsql``: as the package runs, OpenBLAS's
default with dpsql's cap (one thread around its dense linear algebra on matrices of at
most 256 rows, :mod:`dpsql._blas`). The arms are interleaved within each round, so that
drift on a shared machine hits each alike; each phase reports the minimum and the median
over ``--rounds``.

**The conditions.** ``idle``: nothing started by the benchmark, which first waits (up to
``--wait-idle`` seconds) for the cores to be less than 10 % busy; the share of the cores
busy (from /proc/stat, over a second) and the load average are recorded before and after,
since other work on a shared box shows there. ``loaded``: two busy Python processes
(``while 1: pass``, as many as the cores of this 2-core box) started by the benchmark
before the condition and killed after it. ``setup_K`` phases (:data:`PHASES`) time the
range-optimal set-up of K bins alone, to place the cap's size limit.

Results in ``results/blas_threads.json``; the ratios are ``one / default`` and
``dpsql / default`` of the medians (below 1: fewer threads are faster). Targets (the
README's table): with two busy processes beside it, the build as shipped at most as slow
as with OpenBLAS's default (≤ 1×); idle, within the noise of it (≤ 1.05×). About 20
minutes, most of it the default arm under load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

N_ROWS = 20_000
SEED = 2026

SPEC = {
    "name": "trips", "source": "trips.parquet", "neighbouring": "add_remove",
    "privacy_unit": {"column": "traveller", "max_rows": 4},
    "budget": {"rho": 1.0},
    "attributes": {
        "geo": {"kind": "hierarchy", "columns": ["region", "province", "city"],
                "spine_file": "geo.csv"},
        "mode": {"kind": "categorical", "domain": ["car", "train", "bus", "bike", "walk"]},
        "distance": {"kind": "range", "lower": 0, "upper": 256, "bins": 256,
                     "on_out_of_bounds": "clamp"},
    },
    "views": [
        {"name": "geo_mode", "levels": ["geo", "mode"], "mechanism": "inftda", "weight": 2},
        {"name": "dist", "levels": ["distance"], "mechanism": "cascade",
         "covariance": "optimal"},
        {"name": "geo_dist", "levels": ["geo", "distance"], "mechanism": "inftda"},
    ],
}
"""The README's curator spec (``trips.toml``), as a dict."""

QUERIES = [
    "SELECT region, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM trips "
    "GROUP BY region ORDER BY region",
    "SELECT COUNT(*), dp_stderr(), dp_ci_low(0.95) FROM dist "
    "WHERE distance BETWEEN 10 AND 50",
    "SELECT COUNT(*), dp_stderr() FROM dist WHERE distance >= 100",
    "SELECT MEDIAN(distance), dp_quantile_low(distance, 0.5, 0.95), "
    "dp_quantile_high(distance, 0.5, 0.95) FROM dist",
    "SELECT region, COUNT(*), dp_stderr() FROM geo_dist WHERE distance < 64 "
    "GROUP BY region ORDER BY region",
    "SELECT province, mode, COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM geo_mode "
    "WHERE region = 'R1' GROUP BY province, mode ORDER BY province, mode",
]
"""Planner queries with error columns on every view of :data:`SPEC`."""

ARMS = {
    "default": ({}, "off"),
    "one": ({"OPENBLAS_NUM_THREADS": "1"}, "off"),
    "dpsql": ({}, "on"),
}
"""Per arm: the environment over the parent's (every BLAS thread variable removed) and
whether dpsql's own cap is on."""

_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "GOTO_NUM_THREADS", "BLIS_NUM_THREADS")

_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
mode, base = sys.argv[1], sys.argv[2]
import dpsql._blas  # imported before the clock in every arm
if sys.argv[6] == "off":
    dpsql._blas.MAX_SINGLE_THREAD_SIZE = 0
t0 = time.perf_counter()
if mode.startswith("setup_"):
    from dpsql.accuracy.optimal_ranges import factorise, optimal_range_weights
    k = int(mode[len("setup_"):])
    factorise(k, optimal_range_weights(k)[0])
elif mode == "build":
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec
    spec = ReleaseSpec.from_dict(json.loads(sys.argv[3]), base_dir=base)
    build_release(spec, sys.argv[4], seed=int(sys.argv[5]), progress=False, replace=True)
else:
    import dpsql
    con = dpsql.connect(sys.argv[4])
    for q in json.loads(sys.argv[3]):
        cur = con.cursor(); cur.execute(q); cur.fetchall()
seconds = time.perf_counter() - t0
try:
    from threadpoolctl import threadpool_info
    threads = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
except ImportError:
    threads = None
print(json.dumps({"seconds": seconds, "blas_threads_at_exit": threads}))
"""


def _env(arm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
    return {**env, **ARMS[arm][0]}


def _child(arm: str, mode: str, base: Path, release: Path) -> dict:
    payload = json.dumps(QUERIES if mode == "queries" else SPEC)
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(base), payload,
                          str(release), str(SEED), ARMS[arm][1]],
                         env=_env(arm), check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_busy(seconds: float = 1.0) -> float | None:
    """The share of all cores busy over ``seconds`` (from /proc/stat; None elsewhere):
    what else runs on the machine, unlike the load average, which lags by minutes."""
    def read() -> list[int]:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    try:
        a = read()
        time.sleep(seconds)
        b = read()
    except OSError:
        return None
    d = [y - x for x, y in zip(a, b)]
    idle = d[3] + (d[4] if len(d) > 4 else 0)  # idle + iowait
    return 1.0 - idle / max(sum(d), 1)


def _wait_idle(limit_s: float) -> float | None:
    """Wait up to ``limit_s`` for the cores to be less than 10 % busy; the last share."""
    deadline = time.monotonic() + limit_s
    busy = cpu_busy()
    while busy is not None and busy > 0.10 and time.monotonic() < deadline:
        busy = cpu_busy(5.0)
    return busy


def _busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]


def _condition(base: Path, rounds: int, load: int, phases: tuple[str, ...]) -> dict:
    procs = _busy(load)
    try:
        time.sleep(1.0 if load else 0.0)  # let the busy processes reach the cores
        load_before = os.getloadavg()
        busy_before = cpu_busy()
        runs: dict[str, dict[str, list[float]]] = {a: {ph: [] for ph in phases}
                                                   for a in ARMS}
        threads: dict[str, object] = {}
        for _ in range(rounds):
            for arm in ARMS:  # interleaved
                for phase in phases:  # "queries" reads the release "build" just wrote
                    got = _child(arm, phase, base, base / f"{arm}.duckdb")
                    runs[arm][phase].append(got["seconds"])
                    threads[arm] = got["blas_threads_at_exit"]
        load_after = os.getloadavg()
        busy_after = cpu_busy()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    out: dict = {"busy_processes": load, "load_average_before": load_before,
                 "load_average_after": load_after, "cpu_busy_before": busy_before,
                 "cpu_busy_after": busy_after, "blas_threads_at_exit": threads,
                 "runs": runs}
    for phase in phases:
        out[phase] = {arm: {"min_s": min(r[phase]), "median_s": statistics.median(r[phase])}
                      for arm, r in runs.items()}
        med = {arm: statistics.median(r[phase]) for arm, r in runs.items()}
        out[phase]["ratio_one_vs_default"] = med["one"] / med["default"]
        out[phase]["ratio_dpsql_vs_default"] = med["dpsql"] / med["default"]
    return out


def _blas_info() -> object:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    import numpy as np  # loads its BLAS

    return {"numpy": np.__version__,
            "libraries": [{k: p.get(k) for k in ("internal_api", "version", "num_threads",
                                                 "threading_layer", "architecture",
                                                 "filepath")}
                          for p in threadpool_info()]}


PHASES = ("build", "queries", "setup_256", "setup_512", "setup_1024")
"""``setup_K``: the range-optimal set-up of K bins alone (solver and factorisation, the
dense part of building such a view), in a fresh process: where the cap's size limit
falls."""


def _table(conditions: dict) -> str:
    lines = ["condition  phase        default s  one s  dpsql s  one/default  dpsql/default"]
    for name, c in conditions.items():
        for ph in c["phases"]:
            r = c[ph]
            lines.append(f"{name:<10} {ph:<12} {r['default']['median_s']:9.3f} "
                         f"{r['one']['median_s']:6.3f} {r['dpsql']['median_s']:8.3f} "
                         f"{r['ratio_one_vs_default']:12.2f} "
                         f"{r['ratio_dpsql_vs_default']:14.2f}")
        busy = [c.get(k) for k in ("cpu_busy_before", "cpu_busy_after")]
        lines.append(f"{name:<10} load average before/after: "
                     f"{c['load_average_before'][0]:.2f} / {c['load_average_after'][0]:.2f}; "
                     "cores busy before/after: "
                     + " / ".join("-" if b is None else f"{b:.0%}" for b in busy))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 rounds")
    ap.add_argument("--conditions", default="idle,loaded")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--name", default="blas_threads",
                    help="results/NAME.json (default blas_threads)")
    ap.add_argument("--wait-idle", type=float, default=600.0, metavar="SECONDS",
                    help="before the idle condition, wait up to this long for the cores "
                         "to be less than 10%% busy (default 600)")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    phases = tuple(args.phases.split(","))
    from dpsql.datasets import write_trips

    with tempfile.TemporaryDirectory() as tmp:
        base = write_trips(tmp, N_ROWS, seed=1)
        conditions = {}
        for name in args.conditions.split(","):
            waited = _wait_idle(args.wait_idle) if name == "idle" else None
            t0 = time.perf_counter()
            conditions[name] = _condition(base, rounds, {"idle": 0, "loaded": 2}[name],
                                          phases)
            conditions[name]["wall_s"] = time.perf_counter() - t0
            conditions[name]["phases"] = list(phases)
            conditions[name]["cpu_busy_after_waiting"] = waited
            print(_table({name: conditions[name]}), flush=True)
    payload = {"rows": N_ROWS, "rounds": rounds, "spec": SPEC, "queries": QUERIES,
               "arms": ARMS, "blas": _blas_info(), "conditions": conditions,
               "table": _table(conditions).splitlines()}
    if {"idle", "loaded"} <= set(conditions) and "build" in phases:
        payload["headline"] = {
            f"{c}_{ph}_ratio": conditions[c][ph]["ratio_dpsql_vs_default"]
            for c in ("idle", "loaded") for ph in ("build", "queries") if ph in phases}
        payload["targets"] = {"loaded_build_ratio": "<= 1", "idle_build_ratio": "<= 1.05"}
    print(_table(conditions))
    print(write(args.name, payload))


if __name__ == "__main__":
    main()
