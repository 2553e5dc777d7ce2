"""The value a bound of a binned attribute stands for, where it is not written as one
literal: a constant subquery (``k = (SELECT 5)``), a quantified list (``k < ANY ([5,
20])``, ``k <> ALL (?)`` with a Python list) or a quantified constant subquery (``k >=
ALL (SELECT 7)``), and the string cases where DuckDB's typing decides
(:func:`varchar_bound`, :func:`list_values`). :mod:`~dpsql.planner.predicate_truth`
and :mod:`~dpsql.planner.trunc_predicates` (``date_trunc(unit, d) = ANY (...)``) read
their bounds through it; :mod:`~dpsql.planner.null_rows` reads their value on a NULL
row.

The planner never runs a subquery: a constant one (one expression, no FROM or other
clause: one row) is its value; any other is refused (:func:`constant_subquery`).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql import quote_literal
from dpsql.domains.calendar import CALENDAR_TYPES
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.bind_params import to_literal
from dpsql.planner.fold_constants import (Constant, fold_constant, fold_list,
                                          not_plain_calendar, plain_calendar)
from dpsql.planner.value_intervals import Axis


def bound_value(node: exp.Expression, what: str, how: str | None, axis: Axis):
    """The value on ``axis`` of the bound ``node`` (a literal, a constant expression or
    a constant subquery), None for NULL. ``how``: the comparison, when it is not one
    under which DuckDB casts a VARCHAR to the attribute's type (:func:`varchar_bound`)."""
    value = constant_subquery(node, what, axis.name)
    is_text, text = varchar_bound(value, node, what)
    if is_text and how is not None:
        raise varchar_error(node, value, text, what, how, axis)
    if is_text:
        return None if text is None else axis.literal(exp.Literal.string(text), what)
    while isinstance(value, exp.Paren) and isinstance(value.this, (exp.Paren, exp.Literal)):
        value = value.this  # ('5') is the literal '5'
    return axis.literal(value, what)


EQUALITY = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ)
"""The comparisons under which DuckDB casts a VARCHAR to the column's type (as it does
each value of an ``IN (a, b)`` list)."""
OPS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.EQ: "=", exp.NEQ: "<>",
        exp.NullSafeEQ: "IS NOT DISTINCT FROM", exp.NullSafeNEQ: "IS DISTINCT FROM"}


def varchar_bound(value: exp.Expression, node: exp.Expression, what: str = "the bound"
                  ) -> tuple[bool, str | None]:
    """(True, its text, None for NULL) when the bound ``value`` (``node``, or the value
    of the constant subquery ``node``) is a VARCHAR other than a string literal written
    in the comparison: a string from a subquery (``(SELECT '5')``), a cast to VARCHAR,
    ``NULLIF('5', '6')``...; else (False, None). DuckDB casts a string *literal* to the
    column's type under every comparison, but such a VARCHAR only under ``=``, ``<>``,
    ``IS [NOT] DISTINCT FROM`` and in an ``IN (a, b)`` list: ``k = (SELECT '5.4')`` is
    ``k = 5`` on a BIGINT column, where ``k < (SELECT '5')``, ``k IN (SELECT '5')`` and
    ``k < ANY (SELECT '5')`` are its binder errors ("Cannot compare values of type
    BIGINT and type VARCHAR")."""
    inner = value.unnest()  # without its parentheses
    if isinstance(inner, exp.Literal):
        return (inner.is_string and value is not node), inner.this
    if isinstance(inner, (exp.Null, exp.Boolean, exp.Neg, exp.Placeholder)) \
            or inner.find(exp.Column, exp.Query) is not None:
        return False, None
    folded = fold_constant(inner, what)
    if folded is None or folded.type != "VARCHAR":
        return False, None
    return True, folded.value


def varchar_error(node, value, text: str | None, what: str, how: str,
                   axis: Axis) -> UnsupportedQueryError:
    """The refusal of a VARCHAR ``value`` (its string ``text``, None for a NULL of type
    VARCHAR) compared by ``node`` with an attribute of ``axis``: DuckDB's binder would not
    cast it there, and the message gives its reason and what to write instead."""
    inner = value.unnest()  # without its parentheses
    desc = ("is a NULL of type VARCHAR" if text is None else
            "is a string from a subquery, a VARCHAR" if isinstance(inner, exp.Literal)
            else f"is the VARCHAR {text!r}")
    calendar = axis.value_type in CALENDAR_TYPES
    fix = (f"NULL, or a NULL of {'a date' if calendar else 'a number'} (CAST(NULL AS "
           f"{'DATE' if calendar else 'INTEGER'}))" if text is None
           else f"the string itself: {quote_literal(text)}")
    return UnsupportedQueryError(
        f"{what} {node.sql('duckdb')!r} {desc}, which DuckDB casts to the type of the "
        f"attribute {axis.name!r} only under =, <>, IS [NOT] DISTINCT FROM and IN (a, b); "
        f"it refuses {how} with it (\"Cannot compare values of type ... and VARCHAR - an "
        f"explicit cast is required\"); write {fix}")


def constant_subquery(node: exp.Expression, what: str, name: str) -> exp.Expression:
    """``node``, or for a subquery the constant expression it selects (``(SELECT 5)`` is
    5): a SELECT of one expression and nothing else, so one row. Refuses any other
    subquery, naming what to write."""
    inner = node
    while isinstance(inner, (exp.Subquery, exp.Paren)) and isinstance(
            inner.this, (exp.Subquery, exp.Paren, exp.Select)):
        inner = inner.this
    if not isinstance(inner, exp.Query):
        return node
    if one_value(inner):
        value = inner.expressions[0]
        value = value.this if isinstance(value, exp.Alias) else value
        if value.find(exp.Query, exp.Column, exp.Star) is None:
            return value
    raise UnsupportedQueryError(
        f"{what} {node.sql('duckdb')!r} is a subquery that the planner does not run: only "
        "a constant one, a SELECT of one value with no FROM or other clause (SELECT 5), "
        f"is read as its value. List the values as literals ({name} IN (1, 2), {name} < 5), "
        f"or count by {name} first and filter the released bins in an outer query")


def quantified(node: exp.Expression) -> tuple[bool, exp.Expression | None]:
    """(True for ANY/SOME, False for ALL; what it quantifies over) of the bound of ``x op
    ANY (...)``, ``SOME (...)`` or ``ALL (...)``, else (False, None). sqlglot parses
    ``ANY ([a, b])`` and ``ALL (SELECT ...)`` as its ``Any``/``All``, but ``ALL ([a,
    b])``, ``ALL (?)``, ``ALL ((SELECT ...))`` and ``SOME ([a, b])`` as a call of a
    function named ALL or SOME, which DuckDB reads as the same quantifier."""
    if isinstance(node, (exp.Any, exp.All)):
        return isinstance(node, exp.Any), node.this
    if isinstance(node, exp.Anonymous) and node.name.upper() in ("ALL", "SOME") \
            and len(node.expressions) == 1:
        return node.name.upper() == "SOME", node.expressions[0]
    return False, None


def listed(quantified: exp.Expression | None,
           what: str = "the list") -> list[exp.Expression] | None:
    """The values of ``ANY ([a, b])`` / ``ALL ([a, b])`` (a list literal, as psycopg sends
    a Python list for ``x = ANY(%s)``; ``quantified``: what :func:`quantified` says it
    quantifies over), else None. A list cast to a list type (``[1, 2]::BIGINT[]``,
    ``CAST([] AS INT[])``, ``?::INT[]``) is the values DuckDB casts it to
    (:func:`~dpsql.planner.fold_constants.fold_list`: ``['1.5']::INT[]`` is ``[2]``)."""
    if quantified is None:
        return None
    inner = quantified.unnest()  # without its parentheses
    if isinstance(inner, exp.Array):
        return list(inner.expressions)
    if isinstance(inner, exp.Cast) and inner.to.is_type(exp.DataType.Type.ARRAY) \
            and isinstance(inner.this.unnest(), exp.Array):
        folded = fold_list(list(inner.this.unnest().expressions), what, inner.to)
        if folded is not None and isinstance(folded.value, list):
            return _typed(folded)
    return None


def refuse_empty_type(quantified: exp.Expression, node: exp.Expression, what: str,
                      axis: Axis) -> None:
    """Refuse an empty list cast to a type that DuckDB does not compare with the
    attribute (``d < ANY ([]::INT[])``, ``k <> ALL ([]::VARCHAR[])``: "Cannot compare
    values of type DATE and INTEGER in IN/ANY/ALL clause"), as it refuses a NULL of that
    type (:meth:`~dpsql.planner.value_intervals.Axis.literal`); an untyped ``[]`` is
    compared with every type."""
    inner = quantified.unnest()
    if not (isinstance(inner, exp.Cast) and inner.to.expressions):
        return
    element = inner.to.expressions[0]
    try:
        axis.literal(exp.cast(exp.Null(), element), what)
    except UnsupportedQueryError as err:
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} is an empty list of type "
            f"{element.sql('duckdb')}, which DuckDB does not compare with {axis.name!r}, "
            f"of type {axis.value_type} (\"Cannot compare values of type ... in IN/ANY/ALL "
            "clause - an explicit cast is required\"); write [] or cast it to the type of "
            f"{axis.name!r}") from err


def _typed(folded: Constant) -> list[exp.Expression]:
    """The values of a folded list, each a literal cast to the list's element type, so
    that each is compared as DuckDB compares the list's (a FLOAT in single precision:
    ``p = ANY ([2.1::FLOAT, '2.5'])`` keeps the 2.10 rows, and is refused with the FLOAT
    bound as ``p = 2.1::FLOAT`` is; a DECIMAL exactly, a DOUBLE as the float it is)."""
    element = folded.type[:-2]
    try:
        to = exp.DataType.build(element, dialect="duckdb")
    except Exception as err:  # noqa: BLE001 - sqlglot's parse error of a type name
        raise UnsupportedQueryError(
            f"a list of type {folded.type} is not supported as a bound; write its values "
            "as literals") from err
    return [exp.cast(to_literal(v), to) for v in folded.value]  # a NULL of its type too


def list_values(items: list[exp.Expression], node: exp.Expression, what: str,
                 axis: Axis) -> list[exp.Expression]:
    """The values of a list literal with a string among them, as DuckDB reads them: cast
    to the list's type, the common type of its other items, not to the attribute's
    (:func:`~dpsql.planner.fold_constants.fold_list`: ``n = ANY([5, '6.5'])`` is ``n IN
    (5, 7)`` and ``p = ANY([1.5, '2.25'])`` is ``p IN (1.5, 2.3)``). A list of strings
    alone is a VARCHAR[], which DuckDB does not compare with a number or a date: refused
    with DuckDB's reason. ``items`` without a string are returned as they are."""
    values = [_item_value(e) for e in items]
    if not any(_is_text(e, what) for e in values):
        return items
    folded = fold_list(values, what)
    if folded is None:
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} mixes strings with values that are not "
            f"constants; write the list's values as literals of the type of {axis.name!r}")
    if folded.type == "VARCHAR[]" or not folded.type.endswith("[]"):
        calendar = axis.value_type in CALENDAR_TYPES
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} is a list of strings, a VARCHAR[], which DuckDB "
            f"does not compare with {axis.name!r}, of type {axis.value_type} (\"Cannot "
            "compare values of type ... and VARCHAR in IN/ANY/ALL clause - an explicit cast "
            "is required\"); write the values without quotes"
            + (" as dates (DATE 'YYYY-MM-DD')" if calendar else "")
            + f", or {axis.name} IN (a, b), where DuckDB casts each string")
    if folded.type in ("DATE[]", "TIMESTAMP[]"):  # no time zone, as everywhere
        for e in items:
            if isinstance(e.unnest(), exp.Literal) and not plain_calendar(e.unnest().this):
                raise not_plain_calendar(what, e.unnest().this)
    return _typed(folded)


def _item_value(e: exp.Expression) -> exp.Expression:
    """A list item, or a constant subquery's value (:func:`constant_subquery`), a string
    one as the VARCHAR it is (not a string literal, which takes the list's type): DuckDB
    refuses ``[1, (SELECT '2')]`` ("Cannot deduce template type") as it refuses ``[1,
    CAST('2' AS VARCHAR)]``."""
    value = constant_subquery_or_none(e)
    if value is None or value is e:
        return e
    inner = value.unnest()
    if isinstance(inner, exp.Literal) and inner.is_string:
        return exp.cast(inner.copy(), exp.DataType.Type.VARCHAR)
    return value


def _is_text(e: exp.Expression, what: str) -> bool:
    """Whether the list item ``e`` is a string: a string literal or a VARCHAR constant."""
    inner = e.unnest()
    if isinstance(inner, exp.Literal):
        return inner.is_string
    return varchar_bound(inner, inner, what)[0]


def one_row(node: exp.Expression, sub: exp.Expression, what: str,
             name: str) -> exp.Expression:
    """The subquery ``sub`` of ``x op ANY (...)`` / ``ALL (...)`` (``node``), which must be
    a constant one (:func:`constant_subquery`: one row, so the comparison with its
    value)."""
    while isinstance(sub, exp.Paren) and not isinstance(sub.this, exp.Array):
        sub = sub.this
    if not isinstance(sub, (exp.Subquery, exp.Select)):
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} compares with a list, which is not supported; "
            f"write {name} IN (a, b) for = ANY, or one comparison per value joined with "
            "OR (ANY) or AND (ALL)")
    return sub


def one_value(q: exp.Query) -> bool:
    """A SELECT of one expression and no other clause (one row)."""
    return isinstance(q, exp.Select) and len(q.expressions) == 1 and {
        k for k, v in q.args.items() if v not in (None, [], False)} == {"expressions"}


def constant_subquery_or_none(node: exp.Expression) -> exp.Expression | None:
    """:func:`constant_subquery`'s value, or None where it would refuse."""
    try:
        return constant_subquery(node, "", "")
    except UnsupportedQueryError:
        return None


__all__ = ["EQUALITY", "OPS", "bound_value", "constant_subquery", "constant_subquery_or_none",
           "list_values", "listed", "one_row", "one_value", "quantified",
           "refuse_empty_type", "varchar_bound", "varchar_error"]
