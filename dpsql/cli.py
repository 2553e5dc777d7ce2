"""The ``dpsql`` command line: release, inspect, query, demo.

Every command returns an exit status: 0 on success, 1 for a dpsql error (the message is
printed without a traceback), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpsql import __version__
from dpsql.errors import Error


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=120)


# --------------------------------------------------------------------------------------
# Summaries shared by `release` and `inspect`
# --------------------------------------------------------------------------------------

def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.3g}" if abs(x) < 1e4 else f"{x:,.0f}"
    return str(x)


def release_summary(release: Any) -> list[Table]:
    """Rich tables describing a release: its guarantee and each view's per-level error."""
    head = Table(title=f"release {release.name!r}", show_header=False)
    head.add_row("guarantee", _guarantee_text(release))
    head.add_row("neighbouring", release.neighbouring)
    head.add_row("privacy unit", release.unit)
    head.add_row("randomness", release.rng)
    head.add_row("created", f"{release.created} by dpsql {release.dpsql_version}")
    views = Table(title="views")
    for col in ("view", "mechanism", "budget share", "level", "attribute", "nodes",
                "σ (one node)", "95% bound (one node)"):
        views.add_column(col)
    for v in release.views.values():
        summary = {s["level"]: s for s in v.error_model.level_summary()}
        for lv in v.levels:
            s = summary.get(lv.k, {})
            first = lv.k == 1
            views.add_row(v.name if first else "", v.mechanism if first else "",
                          v.budget.describe() if first else "", str(lv.k), lv.attribute,
                          f"{lv.n_nodes:,}", _fmt(s.get("stderr")), _fmt(s.get("bound95")))
    return [head, views]


def _guarantee_text(release: Any) -> str:
    parts = [f"ρ={release.rho:.6g}-zCDP"]
    if release.delta == 0:
        parts.insert(0, f"ε={release.epsilon:.6g} pure DP")
    else:
        parts.append(f"(ε={release.epsilon:.6g}, δ={release.delta:.3g})-DP")
    return "; ".join(parts)


def _print_report(console: Console, report: Any) -> None:
    if report is None:
        return
    console.print(f"rows read: {report.rows_read:,}; rows used: {report.rows_used:,} "
                  "(shown to you only; not stored in the release)")
    for attr, action, rows in report.actions:
        console.print(f"  {attr}: {rows:,} row(s) {action}")


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------

def cmd_release(args: argparse.Namespace) -> int:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    console = _console()
    spec = ReleaseSpec.from_toml(args.spec)
    release = build_release(spec, args.output, seed=args.seed, progress=not args.quiet)
    _print_report(console, release.report)
    for table in release_summary(release):
        console.print(table)
    if release.seeded:
        console.print("[bold yellow]warning:[/] this release was built with --seed: its noise "
                      "is reproducible, so it is NOT private. Use it for tests only.")
    console.print(f"wrote {args.output}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from dpsql.release import open_release

    console = _console()
    release = open_release(args.release)
    for table in release_summary(release):
        console.print(table)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from dpsql.demo import run_demo

    return run_demo(_console(), workdir=args.workdir, rows=args.rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpsql",
        description="Differentially private releases of tables, queried with plain SQL.")
    parser.add_argument("--version", action="version", version=f"dpsql {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("release", help="build a release file from a spec (curator)")
    p.add_argument("spec", help="the release spec (TOML)")
    p.add_argument("-o", "--output", required=True, help="the release file to write (.duckdb)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise (reproducible, NOT private: tests and demos only)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("inspect", help="show a release's guarantee, views and error model")
    p.add_argument("release", help="a release file (.duckdb)")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("demo", help="build a release of synthetic trips and query it")
    p.add_argument("--workdir", default=None, help="where to write the demo files "
                                                   "(default: a temporary directory)")
    p.add_argument("--rows", type=int, default=50_000, help="synthetic rows (default 50000)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except Error as err:
        Console(stderr=True, highlight=False).print(
            Text.assemble(("error: ", "bold red"), str(err)))
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
