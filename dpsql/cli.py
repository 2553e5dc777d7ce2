"""The ``dpsql`` command line: release, advise, inspect, query, report, serve, passwd, demo.

Every command returns an exit status: 0 on success, 1 for a dpsql error (the message is
printed without a traceback), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any, Sequence

from rich.console import Console
from rich.text import Text

from dpsql import __version__
from dpsql.errors import Error, OperationalError, ProgrammingError
from dpsql.cli_query import cmd_query, console as _console
from dpsql.present import release_summary


def _print_report(console: Console, report: Any) -> None:
    if report is None:
        return
    console.print(Text(f"rows read: {report.rows_read:,}; rows used: {report.rows_used:,} "
                       "(shown to you only; not stored in the release)"))
    for attr, action, rows in report.actions:
        console.print(Text(f"  {attr}: {rows:,} row(s) {action}"))


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------

def _dry_run_errors(spec) -> str:
    """What the dry run's errors are. Those of Gaussian/Laplace-family views are the
    build's exactly (their error models are functions of the spec). InfTDA's σ is the
    linear model's (κ = 1), which the build recalibrates on the data: the dry run said
    "the errors above are those of the release it would build", and a persons table at
    ρ = 0.5 showed σ = 15.9 per node at every level, then 12.0 to 14.0 once built."""
    inftda = [v.name for v in spec.views if v.mechanism == "inftda"]
    if not inftda:
        return "The errors above are those of the release it would build."
    return ("The errors above are those of the release it would build, but for InfTDA "
            f"({', '.join(inftda)}): its σ is the linear model's, which the build "
            "calibrates on the data, so the built release's σ differs (smaller on sparse "
            "data, larger on dense data; docs/spec.md, \"How good the predictions "
            "are\"). Its 95% bound (Theorem 1) is the build's.")


def cmd_release(args: argparse.Namespace) -> int:
    from dpsql.release import build_release, plan_release
    from dpsql.release.ledger import spent_text as ledger_text
    from dpsql.spec import ReleaseSpec

    console = _console()
    if args.output is None and not args.dry_run:  # usage: on stderr, as argparse's
        Console(stderr=True, highlight=False, soft_wrap=True).print(Text(
            "error: dpsql release needs -o RELEASE (the file to write), or --dry-run to see "
            "the expected error without reading any data"))
        return 2
    spec = ReleaseSpec.from_toml(args.spec)
    spec = replace(spec, engine=spec.engine.with_overrides(
        name=args.engine, memory_limit=args.memory_limit, threads=args.threads,
        temp_directory=args.temp_dir, master=args.spark_master))
    if args.dry_run:
        for table in release_summary(plan_release(spec, seed=args.seed)):
            console.print(table)
        if spec.workload is not None:
            from dpsql.workload.advise import print_workload
            print_workload(_console(markup=False), spec)
        console.print("dry run: the spec is valid; no data was read and nothing was "
                      f"written. {_dry_run_errors(spec)}")
        return 0
    release = build_release(spec, args.output, seed=args.seed, progress=not args.quiet,
                            replace=args.replace)
    _print_report(console, release.report)
    if release.report.prior_releases:
        console.print(Text.assemble(("warning: ", "bold yellow"),
                                    ledger_text(release.report.prior_releases)))
    for table in release_summary(release):
        console.print(table)
    if release.seeded:
        console.print("[bold yellow]warning:[/] this release was built with --seed: its noise "
                      "is reproducible, so it is NOT private. Use it for tests only.")
    console.print(Text(f"wrote {args.output} from the {spec.origin()} (not stored in the "
                       "release)"))
    return 0


def cmd_advise(args: argparse.Namespace) -> int:
    from dpsql.workload.advise import run_advise

    return run_advise(_console(markup=False), args.spec, args.queries, write=args.write,
                      add_views=args.add_views, fanouts=args.fanouts,
                      covariance_bins=args.covariance_bins)


def cmd_inspect(args: argparse.Namespace) -> int:
    from dpsql.release_file import open_release

    console = _console()
    release = open_release(args.release)
    if args.format == "json":
        import json

        from dpsql.present import release_record
        from dpsql.report_noise import noise_rows

        record = release_record(release)
        noise = {name: (sens, text) for name, _, sens, text in noise_rows(release)}
        for view in record["views"]:
            view["sensitivity"], view["noise"] = noise[view["name"]]
        sys.stdout.write(json.dumps(record, indent=2, default=str, ensure_ascii=False)
                         + "\n")
        return 0
    for table in release_summary(release):
        console.print(table)
    if args.columns:
        from dpsql.domains.calendar import axis_text, edges_of
        from dpsql.present import column_table
        from dpsql.release_file import read_domains

        dates = {a.name: [axis_text(a.value_type, e) for e in edges_of(a)]
                 for a in release.attributes.values()
                 if a.kind == "range" and a.value_type in ("date", "timestamp")}
        console.print(column_table(release, read_domains(args.release, release), dates))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from dpsql.demo import run_demo

    return run_demo(_console(), workdir=args.workdir, rows=args.rows)


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dpsql.report import build_report

    out = args.output or str(Path(args.release).with_suffix(".html"))
    build_report(args.release, out, progress=not args.quiet)
    _console().print(Text(f"wrote {out}"))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    import warnings

    from dpsql.dbapi import SeededReleaseWarning
    from dpsql.server import UnencryptedServerWarning, serve

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("buenavista").setLevel(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SeededReleaseWarning)
        warnings.simplefilter("always", UnencryptedServerWarning)
        server = serve(args.release, host=args.host, port=args.port,
                       password_file=args.password_file,
                       max_connections=args.max_connections,
                       statement_timeout=args.statement_timeout,
                       memory_limit=args.memory_limit, auth=args.auth,
                       tls_cert=args.tls_cert, tls_key=args.tls_key,
                       allow_unencrypted=args.allow_unencrypted,
                       max_statement_size=args.max_statement_size)
    if any(issubclass(w.category, SeededReleaseWarning) for w in caught):
        err.print(Text.assemble(("warning: ", "bold yellow"), "the release is seeded: NOT "
                                "private (tests and demos only)"))
    for w in caught:
        if issubclass(w.category, UnencryptedServerWarning):
            err.print(Text.assemble(("warning: ", "bold yellow"), str(w.message)))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    auth = f"password required, {server.auth}" if server.auth else \
        "no password (loopback only)"
    tls = "TLS required" if server.tls else "no TLS"
    print(f"dpsql serve: {server.url} ({auth}; {tls}; read-only)", flush=True)
    ssl = " sslmode=require" if server.tls else ""
    print(f"  psql \"host={server.host} port={server.port} dbname={server.database}{ssl}\"    "
          "Ctrl-C or SIGTERM stops the server", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    err.print("dpsql serve: stopped")
    return 0


def cmd_passwd(args: argparse.Namespace) -> int:
    """Prompt twice (or read one line from a pipe) and write the verifier."""
    import getpass

    from dpsql.server import write_verifier

    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise ProgrammingError("the two passwords differ; nothing written")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    write_verifier(args.file, password)
    _console().print(Text(f"wrote a SCRAM-SHA-256 verifier to {args.file} (mode 600): "
                          f"dpsql serve RELEASE --password-file {args.file}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpsql",
        description="Differentially private releases of tables, queried with plain SQL.")
    parser.add_argument("--version", action="version", version=f"dpsql {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("release", help="build a release file from a spec (curator)")
    p.add_argument("spec", help="the release spec (TOML)")
    p.add_argument("-o", "--output", help="the release file to write (.duckdb); required "
                   "unless --dry-run")
    p.add_argument("--dry-run", action="store_true",
                   help="check the spec and show the guarantee, budget shares and expected "
                        "per-level error, without reading any data or writing anything")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise (reproducible, NOT private: tests and demos only)")
    p.add_argument("--replace", action="store_true",
                   help="replace an existing release file: this spends the budget again on "
                        "the same data and changes the numbers of anyone querying it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.add_argument("--engine", choices=("duckdb", "spark"), default=None,
                   help="what reads and counts the rows (default: the spec's engine, else "
                        "duckdb)")
    p.add_argument("--memory-limit", default=None, metavar="SIZE",
                   help="DuckDB's memory limit, e.g. 4GB (default: the spec's, else 80%% of "
                        "the machine's memory)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="DuckDB's threads (default: the spec's, else one per core)")
    p.add_argument("--temp-dir", default=None, metavar="DIR",
                   help="where DuckDB spills what does not fit in memory (default: the "
                        "spec's, else .tmp in the working directory)")
    p.add_argument("--spark-master", default=None, metavar="URL",
                   help="the Spark master with --engine spark (default: the spec's, else "
                        "local[*])")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("advise", help="predict a spec's error on a workload of queries and "
                                      "optimise its budget split, before any budget is "
                                      "spent (curator)")
    p.add_argument("spec", help="the release spec (TOML), with or without a [workload]")
    p.add_argument("queries", nargs="?", default=None, metavar="QUERIES.sql",
                   help="a .sql file of queries separated by ';' (-- weight: N before a "
                        "query weights it), added to the spec's [workload]")
    p.add_argument("--write", metavar="OUT.toml", default=None,
                   help="write the optimised spec (with the workload) to this file")
    p.add_argument("--add-views", action="store_true",
                   help="add a view for each set of attributes that refused queries use "
                        "together, and optimise with them")
    p.add_argument("--covariance-bins", type=int, default=1024, metavar="N",
                   help="cascade views of at most N bins try the other covariance "
                        "(default 1024; the optimal one costs seconds at 1,024 bins, "
                        "minutes at 4,096)")
    p.add_argument("--fanouts", action="store_true",
                   help="also choose the fan-out of range attributes that tree views split "
                        "(2, 4, 8, 16 or 32; about one optimisation per candidate)")
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser("inspect", help="show a release's guarantee, views and error model")
    p.add_argument("release", help="a release file (.duckdb)")
    p.add_argument("--columns", action="store_true",
                   help="also list each column with its kind, type and public domain "
                        "(category values or bin edges)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or json: the guarantee, each view's budget, "
                        "sensitivity, noise and per-level error, for scripts")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("query", help="run SQL on a release; answers with error bars (analyst)")
    p.add_argument("release", help="a release file (.duckdb)")
    p.add_argument("sql", help="the query, e.g. \"SELECT mode, COUNT(*) FROM trips GROUP BY "
                               "mode\"; - reads it from standard input")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default: table)")
    p.add_argument("-p", "--param", action="append", metavar="VALUE",
                   help="a value for the next '?' placeholder (repeatable; JSON numbers stay "
                        "numbers, anything else is text)")
    p.add_argument("--ci", type=float, default=None, metavar="LEVEL",
                   help="add a confidence interval of this level for each row's count "
                        "(default 0.95 for table output, none for csv/json)")
    p.add_argument("--no-ci", action="store_true", help="no confidence interval column")
    p.add_argument("--allow-file-access", action="store_true",
                   help="let the query read files and URLs (read_csv, read_parquet ...) to "
                        "join public data; off by default: the query reads the release only")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("report", help="write a self-contained HTML accuracy report of a release")
    p.add_argument("release", help="a release file (.duckdb)")
    p.add_argument("-o", "--output", default=None,
                   help="the HTML file to write (default: the release path with .html)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("serve", help="serve a release over the PostgreSQL protocol (psql, BI "
                                     "tools); read-only")
    p.add_argument("release", help="a release file (.duckdb)")
    p.add_argument("--host", default=os.environ.get("DPSQL_HOST", "127.0.0.1"),
                   help="address to listen on (default 127.0.0.1, env DPSQL_HOST); any "
                        "non-loopback address needs --password-file")
    p.add_argument("--port", type=int, default=os.environ.get("DPSQL_PORT", "5433"),
                   help="TCP port (default 5433, env DPSQL_PORT; 0 picks a free port)")
    p.add_argument("--password-file", default=os.environ.get("DPSQL_PASSWORD_FILE"),
                   metavar="FILE", help="require this password: the first line of FILE, "
                                        "mode 600, is the password or a SCRAM verifier "
                                        "from `dpsql passwd` (env DPSQL_PASSWORD_FILE)")
    p.add_argument("--auth", choices=("scram-sha-256", "md5"), default="scram-sha-256",
                   help="how the password is checked (default scram-sha-256; md5 only for "
                        "clients that predate SCRAM)")
    p.add_argument("--tls-cert", default=os.environ.get("DPSQL_TLS_CERT"), metavar="FILE",
                   help="serve TLS with this PEM certificate (chain), and require it of "
                        "every client (env DPSQL_TLS_CERT)")
    p.add_argument("--tls-key", default=os.environ.get("DPSQL_TLS_KEY"), metavar="FILE",
                   help="the PEM private key of --tls-cert, mode 600 (default: inside the "
                        "certificate file; env DPSQL_TLS_KEY)")
    p.add_argument("--allow-unencrypted", action="store_true",
                   help="serve a non-loopback --host without TLS (refused otherwise: "
                        "queries and answers would cross the network in plain text)")
    p.add_argument("--max-connections", type=int, default=64, metavar="N",
                   help="serve at most N clients at once, those still authenticating "
                        "included (default 64); the next get SQLSTATE 53300")
    p.add_argument("--statement-timeout", type=float, metavar="SECONDS",
                   default=os.environ.get("DPSQL_STATEMENT_TIMEOUT", "300"),
                   help="interrupt a statement after SECONDS (default 300, env "
                        "DPSQL_STATEMENT_TIMEOUT; 0 = no limit); the client gets 57014")
    p.add_argument("--memory-limit", metavar="SIZE",
                   default=os.environ.get("DPSQL_MEMORY_LIMIT", "1GB"),
                   help="memory cap of each session's DuckDB, e.g. 512MB or 2GB (default "
                        "1GB, env DPSQL_MEMORY_LIMIT); a query over it gets 53200")
    p.add_argument("--max-statement-size", type=int, metavar="BYTES",
                   default=os.environ.get("DPSQL_MAX_STATEMENT_SIZE", str(1 << 20)),
                   help="refuse longer statements with SQLSTATE 54000 (default 1048576, "
                        "env DPSQL_MAX_STATEMENT_SIZE)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log every statement, where it was routed and every error sent "
                        "back (stderr)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("passwd", help="write a SCRAM verifier of a password for `dpsql serve "
                                      "--password-file` (no password is stored)")
    p.add_argument("file", help="the file to create (mode 600; never overwritten)")
    p.set_defaults(func=cmd_passwd)

    p = sub.add_parser("demo", help="build a release of synthetic trips and query it")
    p.add_argument("--workdir", default=None, help="where to write the demo files "
                                                   "(default: a temporary directory)")
    p.add_argument("--rows", type=int, default=50_000, help="synthetic rows (default 50000)")
    p.set_defaults(func=cmd_demo)
    return parser


_SPEC_SUFFIXES = (".toml",)
_DATA_SUFFIXES = (".parquet", ".csv", ".tsv", ".json", ".jsonl", ".ndjson")


def check_release_argument(command: str, path: str) -> None:
    """A curator's spec or raw data given where a release file belongs (``dpsql report
    flights.toml``) is named as such, with the command to run, before DuckDB says
    "not a valid DuckDB database file" or, for a parquet file, "Cannot launch in-memory
    database in read-only mode". A DuckDB file of any name passes (bytes 8-11 of a DuckDB
    database are ``DUCK``)."""
    from pathlib import Path

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in _SPEC_SUFFIXES + _DATA_SUFFIXES or not p.is_file():
        return
    with p.open("rb") as f:
        if f.read(12)[8:12] == b"DUCK":
            return
    if suffix in _SPEC_SUFFIXES:
        release = p.with_suffix(".duckdb").name
        raise OperationalError(
            f"{path!r} is a release spec, not a release: build the release first, "
            f"`dpsql release {path} -o {release}`, then `dpsql {command} {release}`")
    raise OperationalError(
        f"{path!r} looks like raw data, not a release: dpsql {command} reads only the release "
        "file (.duckdb) that `dpsql release SPEC -o RELEASE` writes from the data")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command != "release" and isinstance(getattr(args, "release", None), str):
            check_release_argument(args.command, args.release)
        return int(args.func(args) or 0)
    except Error as err:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            Text.assemble(("error: ", "bold red"), str(err)))
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
