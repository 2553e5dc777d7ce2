"""What ``dpsql query`` prints: its interval columns, table cells, CSV/JSON values and
provenance footer, split from :mod:`dpsql.cli` (one concept: presenting a query's answer).

The CLI appends ``dp_ci_low/high`` to the outer SELECT (:func:`with_ci_columns`); the CI
column of a table has one form for all its rows (:func:`ci_cells`).
"""

from __future__ import annotations

from typing import Any, Sequence

CI_LOW, CI_HIGH = "dp_ci_low", "dp_ci_high"
_ERROR_FUNCTIONS = {"dp_stderr", "dp_ci_low", "dp_ci_high", "dp_bound", "dp_estimate",
                    "dp_estimate_stderr", "dp_quantile_low", "dp_quantile_high"}


def with_ci_columns(query: str, confidence: float) -> str | None:
    """``query`` with ``dp_ci_low(c), dp_ci_high(c)`` appended to its outer SELECT, or None
    when it has no plain outer SELECT or already asks for error columns. The planner then
    decides whether they make sense (they refer to the row's count); if it refuses, the
    CLI runs the query as written (see :func:`cmd_query`). sqlglot is used at this edge
    only to append two projections; the planner sees ordinary SQL."""
    from sqlglot import exp

    tree = _one_statement(query)
    if not isinstance(tree, exp.Select):
        return None  # the planner reports a syntax error or several statements itself
    if any(isinstance(f, exp.Anonymous) and f.name.lower().startswith("dp_")
           for f in tree.find_all(exp.Anonymous)):
        return None
    tree = tree.select(f"{CI_LOW}({confidence!r}) AS {CI_LOW}",
                       f"{CI_HIGH}({confidence!r}) AS {CI_HIGH}", copy=True)
    return tree.sql(dialect="duckdb")


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
