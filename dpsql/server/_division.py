"""Division by zero on ``dpsql serve``: SQLSTATE 22012 where PostgreSQL 15 raises it
whatever the data, the rest as DuckDB answers it.

DuckDB divides by IEEE 754 rules: ``SELECT 1/0`` is ``Infinity``, ``0/0`` ``NaN``, and the
in-process :mod:`dpsql.dbapi` answers so (it is DuckDB's SQL). PostgreSQL raises 22012
(division_by_zero) for every ``/`` by zero (integer, numeric and float8 alike), and a
client that tests for it, or a dashboard that divides by a constant it got wrong, saw a
number instead. Decisions:

* **Constant divisions** raise 22012: a ``/`` or ``%`` whose both sides are constant
  expressions (literals, casts, arithmetic of them: ``1/0``, ``1/0.0``,
  ``1.0::float8/0``, ``1/(1-1)``), the divisor zero and the dividend neither NULL nor
  ``NaN``. PostgreSQL folds them while planning, so it raises whatever the rows (even
  under ``WHERE false``), at Bind in the extended protocol: so does this server. The
  values come from DuckDB (:func:`dpsql.planner.fold_constants.fold_constant`).
* Only where PostgreSQL surely folds them: the statement's own SELECT (its select list,
  WHERE, GROUP BY, HAVING, ORDER BY, LIMIT), not a subquery or CTE (PostgreSQL may
  drop an unused subquery column unevaluated), not inside ``CASE``, ``COALESCE`` or
  ``IF`` (a constant condition drops a branch first), and not under an AND/OR with a
  constant operand (``false AND 1/0 > 0`` is false in PostgreSQL). Those cases keep
  DuckDB's answer, so no error is raised where PostgreSQL would not raise one.
* **Divisions of values** (``x / COUNT(*)`` where a count is 0, a column divided by
  zero) keep DuckDB's ``Infinity``/``NaN``: whether PostgreSQL raises there depends on
  the rows it evaluates, and the release's answers are not the table's rows; a noisy
  answer's value is never changed.
* DuckDB's own error for an integer or decimal ``%`` or ``//`` by zero ("Division by
  zero") is 22012 too (:func:`dpsql.server._sqlstates.sqlstate_of`; it was 42000).
* A parameter (``1/$1``) is not a constant here; PostgreSQL's custom plan folds its
  value, this server divides by DuckDB's rules.
"""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

from sqlglot import exp

from dpsql.errors import DataError, UnsupportedQueryError
from dpsql.planner.fold_constants import fold_constant


class DivisionByZeroError(DataError):
    """A constant division by zero: SQLSTATE 22012 (division_by_zero)."""


_BRANCHES = (exp.Case, exp.If, exp.Coalesce)
"""Expressions PostgreSQL may leave partly unevaluated after folding their conditions."""


def division_by_zero(tree: exp.Expression) -> DivisionByZeroError | None:
    """The 22012 error PostgreSQL raises planning ``tree`` (one parsed statement), or
    None (module docstring)."""
    if not isinstance(tree, exp.Select):
        return None
    for div in tree.find_all(exp.Div, exp.Mod):
        if div.find_ancestor(exp.Select) is not tree or _maybe_skipped(div, tree):
            continue
        divisor = _value(div.expression)
        if divisor is None or isinstance(divisor, timedelta) or divisor != 0:
            continue
        dividend = _value(div.this)
        if dividend is None or (isinstance(dividend, float) and math.isnan(dividend)):
            continue
        if isinstance(div, exp.Mod) and (isinstance(dividend, (float, timedelta))
                                         or isinstance(divisor, float)):
            continue  # PostgreSQL has no float or interval %: not its 22012
        shown = div.sql("duckdb")
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return DivisionByZeroError(
            f"division by zero: {shown} divides by a constant zero (as PostgreSQL, this "
            "server refuses it whatever the rows); divide by a non-zero value, or by "
            "NULLIF(divisor, 0) for a NULL")
    return None


def _maybe_skipped(node: exp.Expression, top: exp.Expression) -> bool:
    anc = node.parent
    while anc is not None and anc is not top:
        if isinstance(anc, _BRANCHES):
            return True
        if isinstance(anc, exp.Connector) and any(
                isinstance(x, (exp.Boolean, exp.Null)) for x in anc.walk()):
            return True
        anc = anc.parent
    return False


def _value(node: exp.Expression) -> object | None:
    """The non-NULL number or interval ``node`` is, as DuckDB computes it, else None."""
    try:
        folded = fold_constant(node, "a division's operand")
    except (DataError, UnsupportedQueryError, RecursionError):
        return None  # DuckDB fails on it (or it is too deep): the query's run answers
    if folded is None or isinstance(folded.value, bool):
        return None
    if isinstance(folded.value, (int, float, Decimal, timedelta)):
        return folded.value
    return None


__all__ = ["DivisionByZeroError", "division_by_zero"]
