"""Pass 1, after the parse: bind the parameters (qmark ``?`` and DuckDB's ``$1``).

Each one is replaced by an AST literal *before* any analysis (:func:`bind_params`), so a
parameter value can never change the query's shape: it is always one literal (a list
parameter is one list literal). :func:`to_literal` says how each Python type is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlglot import exp

from dpsql.errors import ProgrammingError
from dpsql.planner.parse_sql import QMARK, Walked
from dpsql.planner.refuse_time_zones import refuse_time_zone


def _text_order(holder: exp.Placeholder) -> tuple[int, int]:
    name = str(holder.this or "")
    if name.startswith(QMARK) and name[len(QMARK):].isdigit():
        return (0, int(name[len(QMARK):]))
    return (1, 0)


def bind_params(tree: exp.Expression, params: Sequence[Any] | None,
                walked: Walked | None = None) -> exp.Expression:
    """Replace every ``?`` (in order) or ``$n`` by a literal built from ``params``, in
    place (``tree`` is the planner's own fresh parse), and return ``tree``. ``walked``:
    the nodes of ``tree`` from :func:`parse_walked`, if the caller has them."""
    holders = (list(walked.placeholders) if walked is not None else
               [n for n in tree.walk() if isinstance(n, exp.Placeholder)])
    params = list(params) if params is not None else []
    if not holders:
        if params:
            raise ProgrammingError(f"{len(params)} parameters given but the query has no "
                                   "'?' placeholder")
        return tree
    named = sorted({str(h.this) for h in holders if h.this and not str(h.this).isdigit()
                    and _text_order(h)[0]})
    if named:
        raise ProgrammingError(
            f"named placeholders ({', '.join('$' + n for n in named)}) are not supported: "
            "use '?' (bound in text order) or $1, $2, ... (bound by number)")
    numbered = [h for h in holders if h.this and str(h.this).isdigit()]
    if numbered and len(numbered) != len(holders):
        raise ProgrammingError("mix of '?' and '$n' placeholders; use one style")
    if numbered:
        wanted = max(int(str(h.this)) for h in holders)
        if wanted != len(params):
            raise ProgrammingError(f"the query uses ${wanted} but {len(params)} parameters "
                                   "were given")
        values = [params[int(str(h.this)) - 1] for h in holders]
    else:
        holders.sort(key=_text_order)  # stable: others keep their walk order
        if len(holders) != len(params):
            raise ProgrammingError(f"the query has {len(holders)} '?' placeholders but "
                                   f"{len(params)} parameters were given")
        values = params
    for holder, value in zip(holders, values):
        holder.replace(to_literal(value))
    return tree


def to_literal(value: Any) -> exp.Expression:
    """A Python value as one SQL literal (strings are quoted by sqlglot, never spliced).

    A ``Decimal`` is written exactly, as the numeric literal it is (DuckDB reads it as a
    DECIMAL up to 38 digits, as it reads the same literal in the text), never through a
    float: ``x < Decimal("2.5000000000000000001")`` keeps ``x = 2.5``. A ``date`` binds as
    ``CAST('YYYY-MM-DD' AS DATE)``, a ``datetime`` as ``CAST('... ' AS TIMESTAMP)``; a
    ``datetime`` with a time zone is refused (:mod:`dpsql.planner.refuse_time_zones`). A
    list or tuple is a list literal of its values (``x = ANY(?)``, as psycopg binds a
    Python list); one that holds a string is a list of strings, as DuckDB binds it
    (:func:`_as_varchar`)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ProgrammingError(f"parameter {value!r} is not a finite number")
        return exp.Literal.number(repr(value))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, Decimal):
        return _decimal_literal(value)
    if isinstance(value, datetime):
        refuse_time_zone(value)
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return to_literal(value.item())
    if isinstance(value, (list, tuple)):  # x = ANY(?): a list literal of those values
        if any(isinstance(v, str) for v in value):
            value = [_as_varchar(v) for v in value]
        return exp.Array(expressions=[to_literal(v) for v in value])
    raise ProgrammingError(f"parameter of type {type(value).__name__} is not supported; "
                           "pass None, bool, int, float, Decimal, str, date, datetime, or a "
                           "list of those (x = ANY(?))")


def _as_varchar(value: Any) -> Any:
    """An element of a Python list that holds a string, as DuckDB's own parameter binding
    types it: the list is a VARCHAR[], every other element its text (``['1', 2]`` is
    ``['1', '2']``, which DuckDB does not compare with a number: "Cannot compare values of
    type BIGINT and VARCHAR"; as a list literal ``['1', 2]`` would be an INTEGER[] and
    answered). None stays NULL."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _as_varchar(value.item())
    return str(value)


_DECIMAL_DIGITS = 38  # DuckDB's widest DECIMAL


def _decimal_literal(value: Decimal) -> exp.Expression:
    """A Decimal as its exact numeric literal. One that no DECIMAL(38) holds (more than
    38 integer digits or decimal places) is a DOUBLE in DuckDB whichever way it is
    written, so it binds as the nearest float, as its literal would; never as a text of
    millions of digits (a NUMERIC parameter of ``1e100000000`` over the server)."""
    if not value.is_finite():
        raise ProgrammingError(f"parameter {value} is not a finite number")
    scale = -int(value.as_tuple().exponent)
    if value.adjusted() < _DECIMAL_DIGITS and scale <= _DECIMAL_DIGITS:
        # not exp.Literal.number(text): it negates through abs(), which rounds a Decimal
        # to 28 digits (-2.5000000000000000000000000000001 became -2.500000000000000000000000000)
        text = format(value.copy_abs(), "f")
        lit = exp.Literal(this=text[1:] if text.startswith("0.") else text, is_string=False)
        return exp.Neg(this=lit) if value.is_signed() else lit  # .5: 38 decimals stay exact
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ProgrammingError(f"parameter {value} is out of range: DuckDB reads a number "
                               "this large as a DOUBLE, which cannot hold it")
    return to_literal(as_float)


__all__ = ["bind_params", "to_literal"]
