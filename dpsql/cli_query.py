"""``dpsql query`` (:func:`cmd_query`: the analyst's side, through the DB-API module) and
what it prints: its interval columns, table cells, CSV/JSON values and provenance footer,
split from :mod:`dpsql.cli` (one concept: running and presenting a query's answer). The
stdout :func:`console` of every command lives here too, so that :mod:`dpsql.cli` imports
this module and not the other way round.

The CLI appends ``dp_ci_low/high`` to the outer SELECT (:func:`with_ci_columns`); the CI
column of a table has one form for all its rows (:func:`ci_cells`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpsql.errors import Error, ProgrammingError

CI_LOW, CI_HIGH = "dp_ci_low", "dp_ci_high"
_ERROR_FUNCTIONS = {"dp_stderr", "dp_ci_low", "dp_ci_high", "dp_bound", "dp_estimate",
                    "dp_estimate_stderr", "dp_quantile_low", "dp_quantile_high"}


def console(markup: bool = True) -> Console:
    """stdout's console for every ``dpsql`` command. ``markup=False`` where what is
    printed holds user text as plain strings (workload queries, file names): rich markup
    would eat '[workload]' or a query's '[1]'."""
    return Console(highlight=False, soft_wrap=False, width=120, markup=markup)


def cmd_query(args: argparse.Namespace) -> int:
    import csv
    import json
    import warnings

    from dpsql.dbapi import SeededReleaseWarning, connect

    out = console()
    err = Console(stderr=True, highlight=False)
    if args.sql == "-":  # a long query kept in a file: dpsql query r.duckdb - < q.sql
        args.sql = sys.stdin.read()
    params = [parse_param(p) for p in args.param] if args.param else None
    confidence = None if args.no_ci else (
        args.ci if args.ci is not None else (0.95 if args.format == "table" else None))
    if confidence is not None and not 0 < confidence < 1:
        raise ProgrammingError(f"--ci {confidence}: the confidence must lie strictly between "
                               "0 and 1, e.g. --ci 0.95")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)  # reported below, one line
        conn = connect(args.release, allow_file_access=args.allow_file_access)
    with conn:
        for alias in sorted(conn.seeded):
            err.print(Text.assemble(("warning: ", "bold yellow"),
                                    f"release {alias!r} is seeded: NOT private (tests and "
                                    "demos only)"))
        cur = conn.cursor()
        cur.warn_notices = False  # each notice is shown below, one line
        with_ci = with_ci_columns(args.sql, confidence) if confidence is not None else None
        ci_note = None
        if with_ci is not None:
            try:
                cur.execute(with_ci, params)
            except Error as refused:  # e.g. no count in the outer SELECT: run as written
                ci_note = f"no error columns for this query ({refused})"
                with_ci = None
        if with_ci is None:
            cur.execute(args.sql, params)
        for _, notice in cur.messages:  # a literal outside a public domain
            err.print(Text.assemble(("notice: ", "bold yellow"), str(notice)))
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        info = cur.dp_info or {}
    if confidence is not None and with_ci is None and ci_note is None and \
            info.get("private") and not asks_for_error_columns(args.sql):
        ci_note = "no error columns for this query (write dp_ci_low/dp_ci_high in the SELECT "\
                  "that counts)"
    if not info.get("private"):
        ci_note = None  # nothing private was read: there is no error to show
    ci = [names.index(CI_LOW), names.index(CI_HIGH)] if with_ci is not None else []

    if args.format == "json":
        records = [{n: plain(v) for n, v in zip(names, r)} for r in rows]
        sys.stdout.write(json.dumps({"columns": names, "rows": records, "dp_info": json_info(info)},
                                  default=str, indent=2) + "\n")
    elif args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[plain(v, exact=True) for v in r] for r in rows])
    else:
        # names and cells are Text, never markup: a label "[bold]x" or "[/]" is data
        table = Table(show_lines=False)
        shown = [i for i in range(len(names)) if i not in ci]
        for i in shown:
            table.add_column(Text(names[i]), justify="right" if rows and isinstance(
                plain(rows[0][i]), (int, float)) else "left")
        if ci:
            table.add_column(f"{confidence:.0%} CI", justify="right")
        ci_column = ci_cells([(r[ci[0]], r[ci[1]], [r[i] for i in shown])
                              for r in rows]) if ci else []
        for n, r in enumerate(rows):
            cells = [cell(r[i]) for i in shown] + ci_column[n:n + 1]
            table.add_row(*map(Text, cells))
        out.print(table)
        for line in info_lines(info):
            out.print(Text(line, style="dim"))
        if ci_note:
            out.print(Text(ci_note, style="dim"))
        out.print(Text(f"{len(rows):,} row(s)", style="dim"))
    return 0


def with_ci_columns(query: str, confidence: float) -> str | None:
    """``query`` with ``dp_ci_low(c), dp_ci_high(c)`` appended to its outer SELECT, or None
    when it has no plain outer SELECT with a FROM or already asks for error columns. The
    planner then decides whether they make sense (they refer to the row's count); if it
    refuses, the CLI runs the query as written (see :func:`cmd_query`).

    The two projections are spliced into the analyst's own text, before the outer
    SELECT's FROM, and nothing else is touched: the planner's checks of the text as
    written (``x IN [a, NULL]``, ``<=>``, ``INTERVAL -3 MONTH``, a literal's digits) see
    what the analyst wrote. The statement was regenerated by sqlglot, which writes
    ``IN [..]`` as ``IN (..)`` and ``<=>`` as ``IS NOT DISTINCT FROM``: the table format
    answered ``k NOT IN [1, NULL]`` with 0 rows and ``k <=> 5`` with 376, where every
    other entry point (and ``--format csv``) refused them."""
    from sqlglot import exp

    tree = _one_statement(query)
    if not isinstance(tree, exp.Select):
        return None  # the planner reports a syntax error or several statements itself
    if any(isinstance(f, exp.Anonymous) and f.name.lower().startswith("dp_")
           for f in tree.find_all(exp.Anonymous)):
        return None
    at = _outer_from(query)
    if at is None:
        return None
    return (f"{query[:at]}, {CI_LOW}({confidence!r}) AS {CI_LOW}, "
            f"{CI_HIGH}({confidence!r}) AS {CI_HIGH} {query[at:]}")


def _outer_from(query: str) -> int | None:
    """Where the outer SELECT's list of outputs ends, outside parentheses (the CTEs of a
    WITH are inside them): at its FROM (not the FROM of ``IS [NOT] DISTINCT FROM``), or in
    DuckDB's FROM-first form (``FROM t SELECT ...``) at the first clause after the list
    (WHERE, GROUP BY, ..., a ``;``) or the end. None when the statement has no FROM."""
    import sqlglot
    from sqlglot.tokens import TokenType

    enders = {TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING, TokenType.QUALIFY,
              TokenType.WINDOW, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.OFFSET,
              TokenType.FETCH, TokenType.SEMICOLON}
    depth, select_at, from_first, previous, last_end = 0, None, False, None, None
    for t in sqlglot.Dialect.get_or_raise("duckdb").tokenize(query):
        if t.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif t.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif depth == 0 and t.token_type == TokenType.SELECT:
            select_at = t.start
        elif depth == 0 and t.token_type == TokenType.FROM \
                and previous != TokenType.DISTINCT:
            if select_at is not None:
                return t.start
            from_first = True
        elif depth == 0 and from_first and select_at is not None and t.token_type in enders:
            return t.start
        previous, last_end = t.token_type, t.end
    return last_end + 1 if from_first and select_at is not None else None


def _one_statement(query: str) -> Any:
    """The sqlglot tree of ``query`` if it is one statement that parses, else None.
    (``parse_one`` of ``A; B`` returns ``A`` alone on sqlglot before 30.)"""
    import sqlglot

    from dpsql.planner._sqlglot_compat import parse_duckdb

    try:  # quiet: `CALL f()` is refused by the planner, not warned about by sqlglot
        trees = [t for t in parse_duckdb(query) if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError):
        return None  # an unterminated quote: the planner reports the syntax error
    return trees[0] if len(trees) == 1 else None


def asks_for_error_columns(query: str) -> bool:
    """Whether the query writes an error column itself (dp_stderr, dp_ci_low, ...): the
    table then shows it, and the footer must not say there is none."""
    from sqlglot import exp

    tree = _one_statement(query)
    return tree is not None and any(
        isinstance(f, exp.Anonymous) and f.name.lower() in _ERROR_FUNCTIONS
        for f in tree.find_all(exp.Anonymous))


def json_info(info: dict[str, Any]) -> dict[str, Any]:
    """``dp_info`` for ``--format json``, each fact once. ``cursor.dp_info`` describes the
    first private table both flat and as ``references[0]`` (docs/sql.md); JSON keeps the
    flat form for a query over one table, and for several keeps ``references`` with the
    query-wide fields only."""
    refs = info.get("references") or []
    if len(refs) <= 1:
        return {k: v for k, v in info.items() if k != "references"}
    query_wide = {"private", "seeded", "notes", "privacy"}
    return {k: v for k, v in info.items() if k in query_wide or k not in refs[0]}


def parse_param(text: str) -> Any:
    """``--param`` values: JSON numbers/booleans/null as such, anything else as text. A
    number with a fraction or exponent is an exact ``Decimal`` (bound as the numeric
    literal it is written as, as ``dpsql.dbapi`` binds a Decimal), never a float: ``-p
    2.5000000000000000001`` must not become 2.5."""
    import decimal
    import json

    try:
        value = json.loads(text, parse_float=decimal.Decimal)
    except ValueError:
        return text
    return value if isinstance(value, (int, decimal.Decimal, bool, str)) or value is None \
        else text


def plain(value: Any, exact: bool = False) -> Any:
    """A result value as JSON/CSV can carry it; ``exact``: a Decimal stays one (CSV
    writes its digits; JSON has only floats)."""
    import datetime
    import decimal
    import math

    if isinstance(value, decimal.Decimal) and not exact:
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def cell(value: Any) -> str:
    value = plain(value)
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if value.is_integer():  # a whole count (dp_ci_low/high's ends) reads as one
            return f"{value:,.0f}"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def ci_cells(intervals: Sequence[tuple[Any, Any, Sequence[Any]]]) -> list[str]:
    """The CI column's cells, one form for the whole column: ``± h`` when every row's
    interval (low, high, the row's values) is centred on a value of its row (its count),
    else ``[low, high]`` on every row (InfTDA's intervals are centred on the count less its
    bias, and clipped at 0). A column that mixed ``± 17`` with ``[3,513, 3,539]`` would
    read as two kinds of error."""
    bounds = [(plain(lo), plain(hi), row) for lo, hi, row in intervals]

    def numeric(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def centred(lo: Any, hi: Any, row: Sequence[Any]) -> bool:
        mid = (lo + hi) / 2
        return any(numeric(v) and abs(v - mid) <= 1e-9 * max(1.0, abs(v))
                   for v in map(plain, row))

    both = [numeric(lo) and numeric(hi) for lo, hi, _ in bounds]
    symmetric = all(centred(lo, hi, row) for (lo, hi, row), ok in zip(bounds, both) if ok)
    return [("—" if not ok else f"± {cell((hi - lo) / 2)}" if symmetric
             else f"[{cell(lo)}, {cell(hi)}]")
            for (lo, hi, _), ok in zip(bounds, both)]


def info_lines(info: dict[str, Any]) -> list[str]:
    """A short provenance footer for table output: view, level, error model, notes."""
    if not info.get("view"):
        return [str(n) for n in info.get("notes") or []]
    head = f"answered from view {info['view']!r}"
    if info.get("mechanism"):
        head += f" ({info['mechanism']})"
    if info.get("level_table"):
        head += f", level {info.get('level')} ({info['level_table']})"
    if info.get("error_model") == "reconciled" and info.get("reconciled"):
        # "error model reconciled" named no model: say whose, and what it agreed on
        agreed = "; ".join(f"{r.get('marginal')} with {', '.join(r.get('with', []))}"
                           for r in info["reconciled"])
        head += f"; error model {info.get('mechanism')}'s, reconciled ({agreed})"
    elif info.get("error_model"):
        head += f"; error model {info['error_model']}"
    if info.get("interpolation") not in (None, "none"):
        head += f"; interpolation {info['interpolation']}"
    notes = [f"note: {n}" for n in info.get("notes") or [] if "fixed seed" not in str(n)]
    return [head, *notes]
