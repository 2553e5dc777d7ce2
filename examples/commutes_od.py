"""Home → work commuting flows as a DP origin/destination release (InfTDA on O/D trees).

Run it with ``python examples/commutes_od.py`` (no extra data needed).

The script plays both roles, one after the other:

* **Curator.** It writes a seeded gravity-model population of 1,000,000 commuters over a
  public geography of 20 regions, 110 provinces and 1,500 municipalities (the shape of
  the Italian commuting data in Boninsegna and Silvestri, PoPETs 2025, at a fifth of the
  municipalities), then builds one release with two views of the same flows, each with
  half of the budget:

  - ``work_first``, the **destination tree**: levels alternate work region, home
    region, work province, home province, work municipality, home municipality;
  - ``home_first``, the **origin tree**, its mirror image.

  Every level of either tree is a whole O/D table at one pair of resolutions, so the
  planner answers "coarse home → fine work" questions from single nodes of the first and
  the reverse from the second, and says which in ``dp_info``.

* **Analyst.** It queries the release through DuckDB (``dpsql.attach`` + ``dpsql.sql``),
  the PEP 249 module (``dpsql.connect``, with ``?`` parameters) and the ``dpsql query``
  command: the largest flows between regions, the work regions of one province's
  residents, the home provinces of one municipality's workers, and commuters by home
  region with the total.

Because this script also holds the raw table, it prints the true value beside every
answer, in a column labelled as such, and ends with the curator's check of the error at
every level of both trees against InfTDA's 95% bound. **A real analyst never sees the
truth**: they have the release file alone.

Decisions a reviewer should know:

* **Substitution.** One commuter replaced by another: the number of commuters is public
  (it is exact in the release) and every level is an integer, non-negative, consistent
  O/D table (od_topdown's setting, m = 1).
* **One geography file, two attributes.** ``home`` and ``work`` read the same public
  ``municipalities.csv`` through ``spine_columns``.
* **Intervals.** InfTDA answers carry calibrated per-answer 95% intervals (about 95% of
  answers are covered; docs/sql.md, "Error columns"). The curator's check at the end
  compares each level's largest error with InfTDA's guaranteed bound (Theorem 1), which
  holds for every node of a level at once (``dp_bound``).
* **Seeds.** Without ``--seed`` the noise comes from OS entropy and the release is
  private. ``--seed N`` makes the run reproducible and marks the release ``seeded: not
  private``. The tests use it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import duckdb
from rich.console import Console
from rich.table import Table

import dpsql
from dpsql import duck
from dpsql.datasets import commutes_spec, write_commutes
from dpsql.dbapi import SeededReleaseWarning
from dpsql.release import build_release, open_release
from dpsql.spec import ReleaseSpec

TRUTH = "TRUE value (example only: an analyst never sees this)"
SHAPE = {"n_regions": 20, "n_provinces": 110, "n_munis": 1500, "n_pairs": 40_000}
COMMUTERS = 1_000_000


# --------------------------------------------------------------------------------------
# Curator
# --------------------------------------------------------------------------------------

def build(console: Console, workdir: Path, rho: float, seed: int | None) -> Path:
    write_commutes(workdir, COMMUTERS, seed=2011, **SHAPE)
    spec_dict = commutes_spec(rho)
    (workdir / "commutes.json").write_text(json.dumps(spec_dict, indent=2) + "\n")
    console.rule("[bold]curator[/]: build commutes.duckdb from commutes.parquet")
    spec = ReleaseSpec.from_dict(spec_dict, base_dir=workdir)
    release = build_release(spec, workdir / "commutes.duckdb", seed=seed, progress=True,
                            replace=True)  # the example regenerates its data each run
    for view in release.views.values():
        levels = " → ".join(lv.columns[0] for lv in view.levels)
        console.print(f"  view {view.name!r}: {view.mechanism}, {view.budget.describe()}; "
                      f"levels {levels}")
    if seed is not None:
        console.print("[yellow]--seed given: this release is reproducible and NOT private.[/]")
    return workdir / "commutes.duckdb"


# --------------------------------------------------------------------------------------
# Analyst
# --------------------------------------------------------------------------------------

def _kind(info: dict) -> str:
    return (f"95% interval (InfTDA, calibrated per answer); answered by view "
            f"{info['view']!r}, level {info['level']}")


def top_flows(release: Path, n: int = 8) -> list[dict]:
    """Through DuckDB: attach the release to a plain connection, run the SQL."""
    con = duckdb.connect()
    dpsql.attach(con, str(release))
    query = ("SELECT home_region, work_region, COUNT(*) AS commuters, dp_ci_low(0.95) AS lo, "
             "dp_ci_high(0.95) AS hi FROM commutes WHERE home_region <> work_region "
             f"GROUP BY ALL ORDER BY commuters DESC, home_region, work_region LIMIT {n}")
    rows = dpsql.sql(con, query).fetchall()
    kind = _kind(duck.plan(con, query).info)
    return [{"section": "largest flows between regions", "interface": "duckdb",
             "label": f"{h} → {w}", "key": [h, w], "answer": c, "lo": lo, "hi": hi,
             "kind": kind} for h, w, c, lo, hi in rows]


def breakdown(cur, section: str, by: str, where: str, value: str) -> list[dict]:
    """Through DB-API with a '?' parameter: the top five ``by`` groups of the commuters
    whose ``where`` column is ``value``."""
    cur.execute(f"SELECT {by}, COUNT(*) AS commuters, dp_ci_low(0.95), dp_ci_high(0.95) "
                f"FROM commutes WHERE {where} = ? GROUP BY ALL ORDER BY commuters DESC, "
                f"{by} LIMIT 5", [value])
    rows, kind = cur.fetchall(), _kind(cur.dp_info)
    return [{"section": section, "interface": "dbapi", "label": g, "key": [value, g],
             "answer": c, "lo": lo, "hi": hi, "kind": kind} for g, c, lo, hi in rows]


def dpsql_command() -> list[str]:
    """The ``dpsql`` console script next to this Python, or ``python -m dpsql.cli``."""
    script = Path(sys.executable).with_name("dpsql")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dpsql.cli"]


def regions_cli(release: Path) -> list[dict]:
    """Through the CLI: commuters by home region and the total, ``--format json``."""
    query = ("SELECT home_region, COUNT(*) AS commuters, dp_ci_low(0.95) AS lo, "
             "dp_ci_high(0.95) AS hi FROM commutes GROUP BY ROLLUP (home_region) "
             "ORDER BY commuters DESC NULLS FIRST LIMIT 6")
    proc = subprocess.run([*dpsql_command(), "query", str(release), query, "--format",
                           "json"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"dpsql query failed ({proc.returncode}): {proc.stderr}")
    out = json.loads(proc.stdout)
    kind = _kind(out["dp_info"])
    return [{"section": "commuters by home region", "interface": "cli",
             "label": r["home_region"] or "all commuters", "key": [r["home_region"]],
             "answer": r["commuters"], "lo": r["lo"], "hi": r["hi"], "kind": kind}
            for r in out["rows"]]


# --------------------------------------------------------------------------------------
# The curator's check (it needs the raw data): error by level against the bound
# --------------------------------------------------------------------------------------

def level_errors(release: Path, truth: duckdb.DuckDBPyConnection) -> list[dict]:
    """Max |released − true| over every public node of every level of both trees (a
    node that is not released is 0), next to the model's 95% bound (Theorem 1's, which
    holds for every node of the level at once)."""
    truth.execute(f"ATTACH '{release}' AS rel (READ_ONLY)")
    out = []
    for view in open_release(release).views.values():
        model = view.error_model
        for lv in view.levels:
            cols = [c for v in view.levels[:lv.k] for c in v.columns]
            keys = ", ".join(cols)
            worst, = truth.execute(
                f"SELECT max(abs(coalesce(r.dp_count, 0) - coalesce(t.n, 0))) FROM "
                f"rel.{lv.table} r FULL JOIN (SELECT {keys}, count(*) AS n FROM raw "
                f"GROUP BY ALL) t USING ({keys})").fetchone()
            out.append({"view": view.name, "level": lv.k, "columns": cols,
                        "nodes": lv.n_nodes, "max_abs_error": int(worst),
                        "bound95": model.node_bound(lv.k, 0.05)})
    truth.execute("DETACH rel")
    return out


# --------------------------------------------------------------------------------------

def print_section(console: Console, title: str, rows: list[dict]) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("", "DP answer", "95% interval", "interface"):
        table.add_column(col, justify="left" if col in ("", "interface") else "right")
    table.add_column(TRUTH, style="dim", justify="right")
    for r in rows:
        interval = f"[{round(r['lo']):,}, {round(r['hi']):,}]"
        table.add_row(r["label"], f"{r['answer']:,}", interval, r["interface"],
                      f"{r['truth']:,}")
    console.print(table)
    console.print(f"  interval: {rows[0]['kind']}", style="dim")


def _truth(truth: duckdb.DuckDBPyConnection, rows: list[dict], where: str) -> None:
    """Fill in each row's true count: ``where`` is a predicate over the raw rows whose
    ``?`` take the row's ``key`` (a key ending in NULL is a ROLLUP total: every row)."""
    for r in rows:
        if r["key"][-1] is None:
            r["truth"] = truth.execute("SELECT count(*) FROM raw").fetchone()[0]
        else:
            r["truth"] = truth.execute(f"SELECT count(*) FROM raw WHERE {where}",
                                       r["key"]).fetchone()[0]


def run(workdir: Path, rho: float, seed: int | None, console: Console) -> dict:
    t0 = time.perf_counter()
    release = build(console, workdir, rho, seed)
    truth = duckdb.connect()
    truth.execute(f"CREATE VIEW raw AS SELECT * FROM '{workdir / 'commutes.parquet'}'")

    console.rule("[bold]analyst[/]: SQL on commutes.duckdb (the release file alone)")
    flows = top_flows(release)
    _truth(truth, flows, "home_region = ? AND work_region = ?")
    print_section(console, "Largest flows between regions (DuckDB: dpsql.attach + "
                           "dpsql.sql)", flows)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)  # a seeded release: said above
        conn = dpsql.connect(str(release))
    cur = conn.cursor()
    # A mid-sized province and municipality (their names are public; picking them by true
    # size is the script's shortcut, not something an analyst could do). A coarse work
    # region under a fine home province is one node of the origin tree, a home province
    # under a fine work municipality one node of the destination tree.
    breakdowns = []
    for where, by, offset, section, title in (
            ("home_province", "work_region", 10, "where residents of {} work",
             "Where residents of province {} work (DB-API, a ? parameter)"),
            ("work_municipality", "home_province", 3, "where workers of {} live",
             "Where the workers of municipality {} live, by home province (DB-API)")):
        value = truth.execute(f"SELECT {where} FROM raw GROUP BY ALL ORDER BY count(*) "
                              f"DESC, 1 LIMIT 1 OFFSET {offset}").fetchone()[0]
        rows = breakdown(cur, section.format(value), by, where, value)
        _truth(truth, rows, f"{where} = ? AND {by} = ?")
        print_section(console, title.format(value), rows)
        breakdowns += rows
    conn.close()

    console.print('$ dpsql query commutes.duckdb "SELECT home_region, COUNT(*) ... GROUP BY '
                  'ROLLUP (home_region) ..." --format json')
    regions = regions_cli(release)
    _truth(truth, regions, "home_region = ?")
    print_section(console, "Commuters by home region, with the total (CLI)", regions)
    console.print("Under substitution the number of commuters is public: the total is "
                  "exact, and every level of both trees sums to it.")

    console.rule("[bold]curator's check[/] (needs the raw data): error by level")
    errors = level_errors(release, truth)
    table = Table(title="Max |error| over every public node of a level, and InfTDA's 95% "
                        "bound for one node", title_justify="left")
    for col in ("view", "level", "columns", "nodes", "max |error|", "95% bound"):
        table.add_column(col, justify="right" if col in ("level", "nodes", "max |error|",
                                                         "95% bound") else "left")
    for e in errors:
        table.add_row(e["view"], str(e["level"]), " × ".join(e["columns"][-2:]),
                      f"{e['nodes']:,}", f"{e['max_abs_error']:,}", f"{e['bound95']:,.0f}")
    console.print(table)
    console.print(f"done in {time.perf_counter() - t0:.1f} s. Every answer came from one "
                  "release: consistent, and free of further privacy cost.")
    return {"answers": flows + breakdowns + regions, "levels": errors,
            "commuters": COMMUTERS, "rho": rho}


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
    tmp = None if args.workdir else tempfile.mkdtemp(prefix="dpsql-commutes-")
    workdir = Path(args.workdir or tmp).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = run(workdir, args.rho, args.seed, console)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "130")
    sys.exit(main())
