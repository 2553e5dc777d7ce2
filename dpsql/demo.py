"""``dpsql demo``: a release of seeded synthetic trips, queried with SQL, next to the truth.

The demo plays both roles. As the curator it writes a spec and builds a release from a
synthetic table (generated in-package, seeded). As the analyst it runs SQL on the release
and prints each DP answer with its 95% interval. Because the demo also holds the raw
table, it prints the true value beside each answer — a real analyst never sees it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
from rich.console import Console
from rich.table import Table

from dpsql.datasets import synthetic_trips, write_parquet

SPEC = """\
# A release spec: everything here is public. The data never leaves `dpsql release`.
name = "trips"
source = "trips.parquet"
neighbouring = "add_remove"          # one trip (row) joining or leaving is protected
# To protect travellers with several trips instead, add:
#   [privacy_unit]
#   column = "traveller"
#   max_rows = 4                     # at most 4 trips per traveller are used

[budget]
rho = 1.0                            # zCDP; about (ε=9.5, δ=1e-9)-DP in total

[attributes.geo]
kind = "hierarchy"
columns = ["region", "province", "city"]
spine_file = "geo.csv"

[attributes.mode]
kind = "categorical"
domain = ["car", "train", "bus", "bike", "walk"]

[attributes.distance]
kind = "range"
lower = 0
upper = 256
bins = 256

[attributes.age]
kind = "range"
lower = 0
upper = 100
bins = 100

[[views]]
name = "geo_mode"
levels = ["geo", "mode"]
mechanism = "inftda"
weight = 2

[[views]]
name = "dist"
levels = ["distance"]
mechanism = "cascade"

[[views]]
name = "ages"
levels = ["age"]
mechanism = "btree"
"""

QUERIES = [
    ("Trips per region",
     "SELECT region, COUNT(*) AS trips, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
     "FROM trips GROUP BY region ORDER BY region",
     "SELECT region, COUNT(*) FROM raw GROUP BY region ORDER BY region"),
    ("Trips per province in region R1",
     "SELECT province, COUNT(*) AS trips, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
     "FROM trips WHERE region = 'R1' GROUP BY province ORDER BY province",
     "SELECT province, COUNT(*) FROM raw WHERE region = 'R1' GROUP BY province "
     "ORDER BY province"),
    ("Car trips per region",
     "SELECT region, COUNT(*) AS trips, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
     "FROM trips WHERE mode = 'car' GROUP BY region ORDER BY region",
     "SELECT region, COUNT(*) FROM raw WHERE mode = 'car' GROUP BY region ORDER BY region"),
    ("Trips between 10 and 50 km",
     "SELECT COUNT(*) AS trips, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi "
     "FROM trips WHERE distance BETWEEN 10 AND 50",
     "SELECT COUNT(*) FROM raw WHERE distance BETWEEN 10 AND 50"),
    ("Median age",
     "SELECT MEDIAN(age) AS median_age, dp_quantile_low(age, 0.5, 0.95) AS lo, "
     "dp_quantile_high(age, 0.5, 0.95) AS hi FROM trips",
     "SELECT MEDIAN(age) FROM raw"),
]


def run_demo(console: Console, workdir: str | None = None, rows: int = 50_000) -> int:
    """Build the demo release and print DP answers beside the truth. Returns 0."""
    from dpsql import duck
    from dpsql.present import release_summary
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        table, spine = synthetic_trips(rows, seed=2026)
        write_parquet(table, base / "trips.parquet")
        spine.to_csv(base / "geo.csv")
        (base / "trips.toml").write_text(SPEC)
        console.rule("[bold]dpsql demo[/] — synthetic data, seeded noise: NOT a private release")
        console.print(f"curator: dpsql release {base / 'trips.toml'} -o {base / 'trips.duckdb'}")
        release = build_release(ReleaseSpec.from_toml(base / "trips.toml"),
                                base / "trips.duckdb", seed=2026, progress=True,
                                replace=True)  # the demo's own seeded file, rebuilt
        for t in release_summary(release):
            console.print(t)

        con = duckdb.connect()
        duck.attach(con, str(base / "trips.duckdb"))
        raw = duckdb.connect()
        raw.execute(f"CREATE VIEW raw AS SELECT * FROM '{base / 'trips.parquet'}'")
        checked = outside = 0  # true values against their 95% intervals
        for title, sql, truth_sql in QUERIES:
            result = duck.sql(con, sql)
            cols = result.columns
            rows_dp = result.fetchall()
            truth = raw.execute(truth_sql).fetchall()
            out = Table(title=title, caption=f"analyst: {sql}", caption_justify="left")
            for c in cols:
                out.add_column(c)
            out.add_column("truth (demo only)", style="dim")
            for dp_row, true_row in zip(rows_dp, truth):
                shown = _cell(true_row[-1])
                if "lo" in cols and "hi" in cols:
                    lo, hi = dp_row[cols.index("lo")], dp_row[cols.index("hi")]
                    checked += 1
                    if not lo <= true_row[-1] <= hi:
                        outside += 1
                        shown += " (outside)"
                out.add_row(*[_cell(v) for v in dp_row], shown)
            console.print(out)
        console.print(f"{outside} of {checked} true values lie outside their 95% interval "
                      "in this one release; over many releases about 1 in 20 does "
                      "(benchmarks/calibration.py and benchmarks/quantiles.py measure it per "
                      "query shape).")
        console.print("The truth column exists only because the demo holds the raw data; an "
                      "analyst sees the release alone. Every answer above came from the same "
                      "release, so they are consistent and cost no extra privacy.")
        if workdir:
            console.print(f"files kept in {base}")
    return 0


def _cell(v: object) -> str:
    if isinstance(v, float):  # whole counts (interval ends) as counts, e.g. 3,096
        return f"{v:,.0f}" if v.is_integer() else f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)
