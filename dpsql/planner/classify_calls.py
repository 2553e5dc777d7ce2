"""Pass 2, its calls: which aggregate or pseudo-function a call over a logical table is.

:func:`classify` sorts one call of a SELECT that reads a logical table into an
:class:`Aggregate` that the rewrite replaces (counts, approximate SUM/AVG and quantiles of
binned attributes, the error pseudo-functions), None for a call DuckDB runs as written (a
window over the aggregated rows, GROUPING, an aggregate of aggregates), or an
:class:`~dpsql.UnsupportedQueryError` that names the construct and the supported form.
:func:`literal_number` reads the numeric literals these calls and range predicates take.
Used by :mod:`dpsql.planner.find_references`.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpsql._sql import quote_literal
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.catalog import ReleaseInfo

ERROR_FUNCTIONS = {"dp_stderr": 0, "dp_ci_low": 1, "dp_ci_high": 1, "dp_bound": 1,
                   "dp_estimate": 0, "dp_estimate_stderr": 0}
QUANTILE_FUNCTIONS = {"dp_quantile"}
QUANTILE_CI_FUNCTIONS = {"dp_quantile_low": "low", "dp_quantile_high": "high"}
"""The ends of a quantile's confidence interval (:mod:`dpsql.quantile_ci`): (attr, p,
conf), aggregates like ``dp_quantile``."""
MEASURE = "dp_count"
MEASURE_HELP = ("dp_count is the measure column that BI tools see on a logical table: only "
                 "SUM(dp_count) is supported, and it is exactly COUNT(*) (same answer, same "
                 "error columns); write SUM(dp_count) or COUNT(*)")
SUPPORTED = ("supported: COUNT(*), COUNT(1), SUM(1), approximate SUM/AVG of a binned "
              "attribute, MEDIAN(attr) or dp_quantile(attr, p) of a binned attribute and "
              "its interval dp_quantile_low/dp_quantile_high(attr, p, conf), and "
              "dp_stderr(), dp_ci_low(conf), dp_ci_high(conf), dp_bound(beta), "
              "dp_estimate(), dp_estimate_stderr()")


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call to be rewritten: ``kind`` is count | sum | avg | quantile |
    stderr | ci_low | ci_high | bound | estimate | estimate_stderr."""

    node: exp.Expression
    kind: str
    attribute: str | None = None
    param: float | None = None
    sums: bool = False
    """A count written as a SUM (``SUM(1)``, ``SUM(dp_count)``): NULL over no rows, as
    SQL's SUM, where ``COUNT`` is 0 (over a public group whose released count is 0, a
    node row is summed: 0, as its ``COUNT``; docs/sql.md)."""
    skips: str | None = None
    """For ``COUNT(x)`` of an attribute with ``on_null = "drop"``: its name. The count is
    of the rows where it has a value, which are exactly the rows of the views over it
    (:mod:`~dpsql.planner.dropped_nulls`): a plain count of such a view."""
    end: str | None = None
    """For a quantile: None for the quantile itself, ``"low"`` / ``"high"`` for an end of
    its interval at confidence :attr:`conf` (``dp_quantile_low/high``)."""
    conf: float | None = None


@functools.cache
def engine_aggregates() -> frozenset[str]:
    """The lower-cased names of DuckDB's aggregate functions, and of its macros that call
    one (``geomean``, ``weighted_avg``), as the installed DuckDB lists them: sqlglot
    parses many as plain function calls (``count_star()``, ``fsum(x)``,
    ``histogram(x)``, ``entropy(x)``, ``mean(x)``...)."""
    import duckdb

    with duckdb.connect() as con:
        rows = con.execute("SELECT DISTINCT lower(function_name), function_type, "
                           "lower(macro_definition) FROM duckdb_functions() "
                           "WHERE function_type IN ('aggregate', 'macro')").fetchall()
    aggs = {n for n, kind, _ in rows if kind == "aggregate"}
    calls = re.compile(r"\b(" + "|".join(map(re.escape, sorted(aggs))) + r")\s*\(")
    return frozenset(aggs | {n for n, kind, body in rows
                             if kind == "macro" and body and calls.search(body)})


def not_an_attribute(name: str, release: ReleaseInfo) -> UnsupportedQueryError:
    """The error for a column of the private table that is no attribute of it. When the
    name is a public value of a text column (``state = S01``, or ``state = "S01"`` as a
    PostgreSQL user may quote a string), the fix is to quote it as a string; when it is
    close to a column's name (``regoin``), that column."""
    known = sorted(c for x in release.attributes.values()
                   for c in ((x.name,) if x.kind == "range" else x.columns))
    holders = [(c, name) for c, values in release.domains if name in values] or \
        [(c, v) for c, values in release.domains for v in values if v.lower() == name.lower()]
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.75)
    hint = (f"; {name!r} is a value of {holders[0][0]}, not a column: write a value as a "
            f"string in single quotes, {quote_literal(holders[0][1])}" if holders
            else f"; did you mean {close[0]!r}?" if close else "")
    return UnsupportedQueryError(
        f"column {name!r} is not an attribute of the release {release.release.name!r}; "
        f"its attributes are: {', '.join(known)}{hint}")


def written_call(node: exp.Expression) -> str:
    """The call ``node`` as the analyst wrote it, for a message: its text in the query
    (``string_agg(r, ',')``, ``bool_or(k > 3)``), not sqlglot's name of its class
    (``GROUPCONCAT``, ``LOGICALOR``), which messages printed before. The parser gives the
    position of the name (or, for some calls, only of a name inside the arguments) in
    the text it read, which :mod:`~dpsql.planner.parse_sql` keeps in the root's
    ``meta``; where either is missing, the call in DuckDB's spelling."""
    text = node.root().meta.get("sql")
    if not isinstance(text, str):
        return node.sql("duckdb")
    start, end = node.meta.get("start"), node.meta.get("end")
    if not isinstance(start, int) or not isinstance(end, int):
        # the first name in the arguments: the call's name is before its parenthesis
        inner = [x.meta["start"] for x in node.walk() if x is not node
                 and isinstance(x.meta.get("start"), int)] if node.args else []
        if not inner:
            return node.sql("duckdb")
        end = min(inner) - 1
        while True:  # back over "(", DISTINCT or ALL to the name
            while end >= 0 and (text[end].isspace() or text[end] == "("):
                end -= 1
            start = end
            while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            if text[start:end + 1].lower() not in ("distinct", "all"):
                break
            end = start - 1
    i = end + 1
    while i < len(text) and text[i].isspace():
        i += 1
    depth, quote = 0, ""
    for j in range(i, len(text)):
        ch = text[j]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                call = text[start:j + 1]
                return call if call[:1].isalpha() else node.sql("duckdb")
        elif depth == 0:
            break  # no argument list after the name: not this call's text
    return node.sql("duckdb")


def fn_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower() if hasattr(node, "sql_name") else type(node).__name__


_T = exp.DataType.Type
_EXACT_CASTS = {_T.INT: 2.0 ** 31, _T.BIGINT: 2.0 ** 63, _T.INT128: 2.0 ** 127,
                _T.DOUBLE: None}
"""Casts a numeric bound may carry, as in ``?::INT``, with the magnitude below which an
integral value is unchanged by them (None: any value). Other casts (FLOAT, DECIMAL,
small integers) can change or reject the value: refused, as any other expression."""


def literal_number(node: exp.Expression, what: str, what_end: str = "") -> float:
    """The value of a numeric literal (``-x``, ``(x)`` and a cast that keeps the value,
    as in ``?::INT`` with an integer or ``x::DOUBLE``, allowed); the error names it
    ``what + what_end`` (two parts, joined only when it is raised)."""
    return float(literal_value(node, what, what_end))


_DECIMAL_DIGITS = 38
"""DuckDB types a literal written with up to 38 digits and a point as an exact
``DECIMAL``, one with more digits (or an exponent) as a ``DOUBLE``. The digits counted
are those written: :func:`~dpsql.planner.parse_sql.keep_leading_dots` gives ``.5`` back
the text sqlglot turns into ``0.5``."""


def literal_value(node: exp.Expression, what: str, what_end: str = ""
                  ) -> Fraction | float:
    """:func:`literal_number`'s value as DuckDB types the literal, which is what the
    comparison of a range predicate on the data uses: an integer or a decimal of at
    most 38 digits is exact (a :class:`~fractions.Fraction`: ``x < 10.000000000000000001``
    keeps 10, where its nearest float, 10.0, would not); a number with an exponent or
    more digits, or a cast to DOUBLE, is the float DuckDB makes of it."""
    v = node
    neg = False
    if isinstance(v, exp.Neg):
        neg, v = True, v.this
    if isinstance(v, exp.Paren):
        v = v.this
    if isinstance(v, exp.Cast) and v.to.this in _EXACT_CASTS:  # TryCast is a Cast
        try:
            x = literal_value(v.this, what, what_end)
        except UnsupportedQueryError:
            x = None
        limit = _EXACT_CASTS[v.to.this]
        if x is not None and limit is None:
            x = float(x)  # DOUBLE: the float of the literal
            return -x if neg else x
        if x is not None and (isinstance(x, Fraction) or math.isfinite(x)) \
                and x == int(x) and abs(x) < limit:
            return -x if neg else x  # the cast changes no value: it is the literal's
    if isinstance(v, exp.Literal) and not v.is_string:
        x = _typed(v.this)
        if x is not None:
            return -x if neg else x
    raise UnsupportedQueryError(
        f"{what}{what_end} must be a numeric literal or a ? parameter (cast to INT, BIGINT, "
        "HUGEINT or DOUBLE if you like, as in ?::INT, when the cast keeps its value), got "
        f"{node.sql('duckdb')!r}")


def as_fraction(x: Fraction | float) -> Fraction:
    """A number as the decimal it prints as, exactly (``0.1`` is 1/10): a Fraction from
    :func:`literal_value` is kept, a float (a DOUBLE literal, a public bound or bin
    width) is read through its shortest repr."""
    return x if isinstance(x, Fraction) else Fraction(repr(float(x)))


def _typed(text: str) -> Fraction | float | None:
    """The number ``text`` (a numeric literal) as DuckDB types it (``1e400`` is the DOUBLE
    infinity); None if it is no number."""
    if text.isdigit() or ("e" not in text.lower() and
                          sum(c.isdigit() for c in text) <= _DECIMAL_DIGITS):
        try:
            return Fraction(text)
        except ValueError:
            pass
    try:
        x = float(text)
    except ValueError:
        return None
    return None if math.isnan(x) else x


def counts_rows(node: exp.Expression) -> bool:
    """``COUNT(*)``, ``COUNT(<non-NULL literal>)`` or ``SUM(1)``: aggregates that count a
    row padded with NULLs by an outer join (``COUNT(attr)`` and ``SUM(dp_count)`` skip it,
    as the rewritten sum of counts does)."""
    arg = node.this
    if isinstance(node, exp.Count):
        return isinstance(arg, (exp.Star, exp.Literal))
    return isinstance(node, exp.Sum) and isinstance(arg, exp.Literal)


def classify(node: exp.Expression, node_columns: list[exp.Column], owned,
              release: ReleaseInfo, measure) -> Aggregate | None:
    """The aggregate that the call ``node`` is, if it is one this pass rewrites;
    ``node_columns``: the columns below it (:func:`~dpsql.planner.parse_sql.columns_below`)."""
    agg = _classify_call(node, node_columns, owned, release, measure)
    if agg is not None and isinstance(node.parent, exp.Filter):
        raise UnsupportedQueryError(
            f"{node.sql('duckdb')} FILTER (WHERE ...) over the private table is not "
            "supported (its error columns would cover the unfiltered rows); put the "
            "condition in WHERE, or GROUP BY it")
    return agg


def _classify_call(node: exp.Expression, node_columns: list[exp.Column], owned,
                   release: ReleaseInfo, measure) -> Aggregate | None:
    windowed = isinstance(node.parent, exp.Window)
    if not windowed and node_columns and isinstance(node, (exp.AggFunc, exp.Anonymous)):
        cols = [x for x in node_columns if measure(x) and enclosing_call(x) is node]
        if cols:
            if isinstance(node, exp.Sum) and node.this is cols[0] and len(cols) == 1:
                return Aggregate(node, "count", sums=True)  # the BI measure: COUNT(*)
            raise UnsupportedQueryError(
                f"{node.sql('duckdb')} is not supported: {MEASURE_HELP}")
    if isinstance(node, exp.Anonymous):
        name = fn_name(node)
        if name in ERROR_FUNCTIONS:
            args = node.expressions
            if len(args) != ERROR_FUNCTIONS[name]:
                raise UnsupportedQueryError(
                    f"{name}() takes {ERROR_FUNCTIONS[name]} argument(s), got {len(args)}")
            param = literal_number(args[0], f"the argument of {name}()") if args else None
            if param is not None and not 0.0 < param < 1.0:
                raise UnsupportedQueryError(
                    f"the argument of {name}() must be in (0, 1), got {param}")
            return Aggregate(node, name[3:], None, param)
        if name in QUANTILE_FUNCTIONS:
            args = node.expressions
            if len(args) != 2:
                raise UnsupportedQueryError("dp_quantile(attr, p) takes two arguments")
            return _quantile(node, args[0], args[1], owned, release)
        if name in QUANTILE_CI_FUNCTIONS:
            args = node.expressions
            if len(args) != 3:
                raise UnsupportedQueryError(
                    f"{name}(attr, p, conf) takes three arguments (the binned attribute, the "
                    f"quantile probability and the confidence, as in {name}(x, 0.5, 0.95)), "
                    f"got {len(args)}")
            conf = literal_number(args[2], f"the confidence of {name}()")
            if not 0.0 < conf < 1.0:
                raise UnsupportedQueryError(
                    f"the confidence of {name}() must be in (0, 1), as in 0.95, got {conf}")
            agg = _quantile(node, args[0], args[1], owned, release)
            return Aggregate(node, "quantile", agg.attribute, agg.param,
                             end=QUANTILE_CI_FUNCTIONS[name], conf=conf)
        if not windowed and name in engine_aggregates():
            # an aggregate DuckDB has and sqlglot does not know (count_star(), fsum(),
            # histogram(), entropy()...): it would run over the released nodes, one row
            # each, not over the data's rows
            raise UnsupportedQueryError(
                f"{written_call(node)} over the private table is not supported; " + SUPPORTED)
        return None
    if not isinstance(node, exp.AggFunc):
        return None
    if windowed:
        return None  # a window over the aggregated rows: DuckDB runs it as written
    if isinstance(node, (exp.Grouping, exp.GroupingId)):
        return None  # which grouping set a row belongs to: no count, DuckDB runs it
    arg = node.this
    if isinstance(node, exp.Count):
        if isinstance(arg, exp.Distinct):
            raise UnsupportedQueryError(
                "COUNT(DISTINCT ...) is not supported on a private table; count rows with "
                "COUNT(*), or list groups with GROUP BY")
        if isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not arg.is_string
                                         and arg.this == "1"):
            return Aggregate(node, "count")
        if isinstance(arg, exp.Column) and owned(arg):
            a = release.column_attribute(arg.name)
            if a is None:  # a typo counted every row: COUNT(regoin) was COUNT(*)
                raise not_an_attribute(arg.name, release)
            if a.null_category:  # skips the NULL category's nodes
                return Aggregate(node, "count", release.column_name(arg.name))
            if a is not None and a.on_null == "drop":  # a view over it: no NULL rows
                return Aggregate(node, "count", skips=a.name)
            return Aggregate(node, "count")  # on_null = "error": never NULL
    if isinstance(node, exp.Sum) and isinstance(arg, exp.Literal) and arg.this == "1" \
            and not arg.is_string:
        return Aggregate(node, "count", sums=True)
    name = written_call(node).split("(", 1)[0]
    if isinstance(node, (exp.Sum, exp.Avg)) and isinstance(arg, exp.Column) and owned(arg):
        a = release.column_attribute(arg.name)
        if a is not None and a.kind == "range" and a.value_type in ("date", "timestamp"):
            raise UnsupportedQueryError(
                f"{name}({arg.name}) of the {a.value_type} attribute {a.name!r} is not "
                "supported; "
                f"use MEDIAN({arg.name}) or dp_quantile({arg.name}, p)")
        if a is not None and a.kind == "range":
            return Aggregate(node, "sum" if isinstance(node, exp.Sum) else "avg", a.name)
        if a is None:
            raise not_an_attribute(arg.name, release)
        raise UnsupportedQueryError(
            f"{name}({arg.name}) is not supported: {arg.name!r} is a categorical attribute; "
            + SUPPORTED)
    if isinstance(node, exp.Median) and isinstance(arg, exp.Column) and owned(arg):
        return _quantile(node, arg, exp.Literal.number(0.5), owned, release)
    if isinstance(node, (exp.PercentileCont, exp.Quantile)) and isinstance(arg, exp.Column) \
            and owned(arg):
        p = node.args.get("expression") or node.args.get("quantile")
        if p is None:
            raise UnsupportedQueryError(f"{name} needs a probability argument")
        return _quantile(node, arg, p, owned, release)
    if isinstance(node, exp.Count) or any(map(owned, node_columns)):
        raise UnsupportedQueryError(f"{written_call(node)} over the private table is not "
                                    "supported; " + SUPPORTED)
    if any(isinstance(x, exp.AggFunc) for x in node.walk() if x is not node):
        return None  # an aggregate of aggregates: DuckDB checks it
    if not node_columns:  # SUM(2), MAX(1): over the private table's rows
        raise UnsupportedQueryError(f"{written_call(node)} over the private table is not "
                                    "supported; " + SUPPORTED)
    raise UnsupportedQueryError(
        f"{written_call(node)} over a column joined to the private table is not supported "
        "(it would be weighted by private rows); aggregate the release first in a CTE, "
        "then join")


def enclosing_call(node: exp.Expression) -> exp.Expression | None:
    p = node.parent
    while p is not None and not isinstance(p, (exp.AggFunc, exp.Anonymous)):
        p = p.parent
    return p


def _quantile(node, arg, p, owned, release) -> Aggregate:
    if not (isinstance(arg, exp.Column) and owned(arg)):
        raise UnsupportedQueryError("dp_quantile/MEDIAN take a binned attribute of the release")
    a = release.column_attribute(arg.name)
    if a is None or a.kind != "range":
        raise UnsupportedQueryError(
            f"quantiles of {arg.name!r} are not supported: it is not a binned attribute; "
            + SUPPORTED)
    q = literal_number(p, "the quantile probability")
    if not 0.0 <= q <= 1.0:
        raise UnsupportedQueryError(f"the quantile probability must be in [0, 1], got {q}")
    return Aggregate(node, "quantile", a.name, q)
