"""Pass 2, its bounds: a range bound written as a constant expression, valued by DuckDB.

``dep_delay < 10 + 5``, ``x BETWEEN (1) AND (2 * 3)``, ``n < CAST('15' AS SMALLINT)``,
``d >= DATE '2013-01-01' + INTERVAL 1 MONTH`` and ``DATE '2013-1-5'`` each compare the
attribute with one value, which DuckDB computes before it reads a row. The planner needs
that value to cut the attribute's axis (:mod:`~dpsql.planner.value_intervals`), and asks
DuckDB for it, so that it is DuckDB's to the digit and of DuckDB's type: ``30 / 2`` is
the DOUBLE 15.0 and ``31 // 2`` the INTEGER 15, ``1.5 + 1`` the DECIMAL 2.5, ``DATE
'2013-01-31' + INTERVAL 1 MONTH`` the TIMESTAMP 2013-02-28 00:00:00 (a month added to
a month's last days ends on the shorter month's last day), ``DATE '2013-1-5'`` the DATE
2013-01-05.

Decision: the expression is run by a DuckDB of the planner's own, never the analyst's
connection: an in-memory database with no table and no data, one per process, locked
down as an analyst's connection is (:func:`dpsql.lockdown.lock_duckdb`: no file or
network access, no extension loaded, its configuration frozen). Only expressions built
of literals, NULL, casts to built-in types, intervals, parentheses, the arithmetic
operators, ``COALESCE``, ``NULLIF``, ``CASE`` and comparisons and logic of them are run
(:data:`ALLOWED`): no column, subquery, parameter or other function call, so
what it runs cannot read a table, a file or a setting, draw a random number or depend
on the time of day, and every node of it has already passed the lock-down checks of the
whole query (:mod:`~dpsql.planner.refuse_file_reads`). A string cast to a date or a
timestamp must be a plain calendar value (:func:`plain_calendar`): one with a time zone
(``'2013-01-02 05:30+02'``, which DuckDB reads without its offset) or a special value
(``'infinity'``, ``'epoch'``) is refused, as a time zone is everywhere
(:mod:`~dpsql.planner.refuse_time_zones`).
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp

from dpsql.errors import DataError, InternalError, UnsupportedQueryError
from dpsql.lockdown import lock_duckdb

ALLOWED = (exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Neg, exp.Add, exp.Sub,
           exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Pow, exp.Cast, exp.DataType,
           exp.DataTypeParam, exp.Interval, exp.Var, exp.Coalesce, exp.Nullif, exp.Case,
           exp.If, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
           exp.NullSafeNEQ, exp.Is, exp.And, exp.Or, exp.Not, exp.Between, exp.In)
"""The node kinds of an expression the planner asks DuckDB to value (TryCast is a
Cast): literals, NULL, casts, intervals, arithmetic, COALESCE, NULLIF, CASE, and
comparisons and logic of them."""

_T = exp.DataType.Type
_CALENDAR = {_T.DATE, _T.TIMESTAMP, _T.TIMESTAMPNTZ, _T.DATETIME, _T.TIMESTAMP_S,
             _T.TIMESTAMP_MS, _T.TIMESTAMP_NS}
_ZONED = {_T.TIMESTAMPTZ, _T.TIMESTAMPLTZ, _T.TIMETZ}

_PLAIN_CALENDAR = re.compile(
    r"\s*-?\d{4,}-\d{1,2}-\d{1,2}(?:\s*\(BC\))?"
    r"(?:[ T]\d{1,2}:\d{1,2}(?::\d{1,2}(?:\.\d{1,9})?)?)?\s*")


def plain_calendar(text: str) -> bool:
    """Whether ``text`` is a date (``YYYY-M-D``) or a date and time (``HH:MM[:SS[.f]]``,
    after a space or a ``T``), fields with or without leading zeros, and nothing else:
    no time zone, no ``'infinity'``. Years before 1 and after 9999 are written as
    DuckDB reads them: astronomical (``'-0015-03-01'`` is 16 BC) or as DuckDB prints
    them (``'0016-03-01 (BC)'``, ``'0016-03-01 (BC) 12:00:00'``; ``'12345-01-01'``)."""
    return _PLAIN_CALENDAR.fullmatch(text) is not None


@dataclass(frozen=True)
class Constant:
    """A constant expression's value, as DuckDB's Python client gives it (int, Decimal,
    float, date, datetime...), and DuckDB's name of its type (``typeof``: ``INTEGER``,
    ``DECIMAL(12,1)``, ``DOUBLE``, ``DATE``, ``TIMESTAMP``...)."""

    value: Any
    type: str


def fold_constant(node: exp.Expression, what: str) -> Constant | None:
    """The value of ``node`` as DuckDB computes it (a NULL is a value of None: ``NULL``,
    ``CAST(NULL AS INT)``, ``NULLIF(5, 5)``), or None when ``node`` is not a constant
    expression of :data:`ALLOWED` nodes (a column, a function call, a parameter...).
    Raises :class:`~dpsql.errors.DataError` where DuckDB fails on it (as it would on the
    query: ``CAST('2013-02-30' AS DATE)``, an overflow), and
    :class:`~dpsql.errors.UnsupportedQueryError` for a time zone; ``what`` names the
    bound."""
    if not _constant_nodes(node, what):
        return None
    value = _fold(node.sql("duckdb"))
    if isinstance(value, str):
        raise DataError(f"{what} {node.sql('duckdb')!r} cannot be computed: {value}")
    return value


def fold_list(items: list[exp.Expression], what: str,
              to: exp.DataType | None = None) -> Constant | None:
    """The list literal ``[items]`` as DuckDB values it (a Python list, and DuckDB's
    name of its type: ``INTEGER[]``...), or None when an item is not a constant
    expression (:func:`fold_constant`). Its items take their common type, to which
    DuckDB casts each string literal among them, not to the type of the column compared
    with it: ``[5, '6.5']`` is the INTEGER[] ``[5, 7]``, ``[1.5, '2.25']`` the
    DECIMAL(2,1)[] ``[1.5, 2.3]``, ``['5', NULL]`` a VARCHAR[]. ``to``: the list type it
    is cast to (``[1, 2]::BIGINT[]``, ``CAST([] AS INT[])``). Raises as
    :func:`fold_constant` does."""
    if not all(_constant_nodes(e, what) for e in items) or (
            to is not None and not _constant_nodes(to, what)):
        return None
    array = exp.Array(expressions=[e.copy() for e in items])
    if to is not None:
        array = exp.Cast(this=array, to=to.copy())
    value = _fold(array.sql("duckdb"))
    if isinstance(value, str):
        raise DataError(f"{what} {array.sql('duckdb')!r} cannot be computed: {value}")
    return value


def _constant_nodes(node: exp.Expression, what: str) -> bool:
    """Whether ``node`` is an expression of :data:`ALLOWED` nodes, which DuckDB may value;
    refuses a time zone type and a string cast to a date that is not a plain one."""
    for x in node.walk():
        if not isinstance(x, ALLOWED):
            return False
        if isinstance(x, exp.DataType) and x.this in _ZONED:
            raise UnsupportedQueryError(
                f"{what} {node.sql('duckdb')!r} has a time zone type, but the release's dates "
                "and timestamps have none; write a DATE or a TIMESTAMP in the data's own time")
        if isinstance(x, exp.DataType) and x.this == _T.USERDEFINED:
            return False
        if isinstance(x, exp.Cast) and x.to.this in _CALENDAR:
            text = _cast_string(x)
            if text is not None and not plain_calendar(text):
                raise not_plain_calendar(what, text)
    return True


def fold_condition(node: exp.Expression) -> Constant | None:
    """The value (True, False or None for NULL) of a constant condition (``TRUE``,
    ``NULL``, ``1 = 1``, ``NULL IS NULL``), as DuckDB computes it; None when ``node`` is
    not a constant expression of :data:`ALLOWED` nodes or not a boolean one."""
    folded = fold_constant(node, "the condition")
    if folded is None or folded.type not in ("BOOLEAN", '"NULL"'):
        return None
    return folded


def _cast_string(cast: exp.Cast) -> str | None:
    """The string literal ``cast`` casts, through parentheses and casts to other types
    (``CAST(CAST('infinity' AS TEXT) AS DATE)``, ``CAST(('epoch') AS DATE)``: DuckDB reads
    the text as it would read it cast directly), or None."""
    inner = cast.this
    while isinstance(inner, (exp.Cast, exp.Paren)):
        inner = inner.this
    return inner.this if isinstance(inner, exp.Literal) and inner.is_string else None


def cast_text(text: str, to: str, what: str) -> Constant:
    """DuckDB's ``CAST(text AS to)`` (``to``: ``DATE`` or ``TIMESTAMP``), as DuckDB casts
    a string compared with a column of that type."""
    folded = fold_constant(exp.cast(exp.Literal.string(text), to), what)
    if folded is None:
        raise InternalError(f"CAST({text!r} AS {to}) was not valued: this is a bug, please "
                            "report")
    return folded


def epoch_seconds(node: exp.Expression, what: str) -> float:
    """The seconds since 1970-01-01 of a constant DATE or TIMESTAMP expression ``node``
    (already valued by :func:`fold_constant`), as DuckDB computes them: for a value
    Python's ``date`` cannot hold (before the year 1, after 9999), which the folder
    hands back as DuckDB's text (``'0016-03-01 (BC)'``)."""
    folded = _fold(f"epoch(CAST(({node.sql('duckdb')}) AS TIMESTAMP))")
    if not isinstance(folded, Constant) or not isinstance(folded.value, (int, float)):
        raise InternalError(f"epoch({node.sql('duckdb')}) was not valued: this is a bug, "
                            "please report")
    return float(folded.value)


def not_plain_calendar(what: str, text: str) -> UnsupportedQueryError:
    return UnsupportedQueryError(
        f"{what} {text!r} is not a plain date or timestamp, which is all dpsql reads: write "
        "'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS', with no time zone (the release's dates and "
        "timestamps have none: write the value in the data's own time) and no special "
        "value ('infinity', 'epoch')")


class _Folder:
    """The planner's DuckDB for constant expressions (module docstring): one for the
    process, opened on first use, used by one thread at a time (a bound is valued in
    well under a millisecond, and each distinct short one once: :func:`_fold`)."""

    def __init__(self) -> None:
        self.con: duckdb.DuckDBPyConnection | None = None
        self.lock = threading.Lock()

    def run(self, sql: str) -> tuple[str, Any]:
        with self.lock:
            if self.con is None:
                con = duckdb.connect(":memory:")
                con.execute("SET threads = 1")
                lock_duckdb(con)
                self.con = con
            row = self.con.execute(f"SELECT typeof(v), v FROM (SELECT {sql} AS v)").fetchone()
        return row  # type: ignore[return-value]


_FOLDER = _Folder()

CACHED_CHARS = 256
"""The longest expression whose value is remembered (:func:`_fold`). A bound is short;
a long one (a megabyte of digits or spaces in a cast string, which the server accepts in
a statement) is valued each time: remembering 1,024 of them kept about 2 GB in a
long-lived process (a planning process of ``dpsql serve``), outside every session's
memory limit."""


def _fold(sql: str) -> Constant | str:
    """The value of the constant expression ``sql`` (DuckDB SQL of :data:`ALLOWED`
    nodes), or DuckDB's error message; remembered when ``sql`` is short."""
    return _fold_cached(sql) if len(sql) <= CACHED_CHARS else _fold_now(sql)


@functools.lru_cache(maxsize=1024)
def _fold_cached(sql: str) -> Constant | str:
    return _fold_now(sql)


def _fold_now(sql: str) -> Constant | str:
    try:
        kind, value = _FOLDER.run(sql)
    except duckdb.Error as err:
        return str(err).splitlines()[0]
    return Constant(value, kind)


__all__ = ["ALLOWED", "Constant", "cast_text", "epoch_seconds", "fold_condition",
           "fold_constant", "fold_list", "plain_calendar"]
