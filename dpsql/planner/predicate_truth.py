"""A WHERE predicate on one binned attribute, in SQL's three-valued logic, as the parts of
the attribute's axis where it is TRUE and where it is FALSE, and its value on a row where
the attribute is NULL (:class:`Truth`).

A row is kept where the predicate is TRUE. Where it is FALSE its ``NOT`` keeps the row;
where it is UNKNOWN (NULL) neither does. So the walk carries both sets: ``NOT`` swaps them,
``AND`` keeps TRUE where both are TRUE and FALSE where either is FALSE, ``OR`` the other
way round, exactly DuckDB's rules. The comparisons, ``BETWEEN``, ``IN`` and ``IS [NOT]
DISTINCT FROM`` of the attribute with a value are cut on the axis by
:mod:`~dpsql.planner.value_intervals`, and each is UNKNOWN on a NULL row:

* **a NULL bound** (``NULL``, ``CAST(NULL AS INT)``, ``NULL + 1``, ``NULLIF(5, 5)``...:
  any constant expression DuckDB values as NULL, :mod:`~dpsql.planner.fold_constants`)
  makes its comparison UNKNOWN at every value: ``k = NULL``, ``k <> NULL``, ``k < NULL``
  and their ``NOT`` keep no row; ``k BETWEEN NULL AND 5`` keeps none, and its ``NOT``
  keeps ``k > 5`` (FALSE AND UNKNOWN is FALSE); ``k IN (1, NULL)`` keeps ``k = 1``, and
  ``k NOT IN (1, NULL)`` keeps no row. ``IS NOT DISTINCT FROM NULL`` is ``IS NULL``, ``IS
  DISTINCT FROM NULL`` is ``IS NOT NULL``; ``IS [NOT] DISTINCT FROM`` a value is TRUE or
  FALSE on a NULL row too (never UNKNOWN). ``COALESCE``/``NULLIF`` of constants are valued
  by DuckDB.
* **a constant subquery** (``k = (SELECT 5)``, ``k IN (SELECT 3)``, ``k < ANY (SELECT
  5)``, ``k >= ALL (SELECT 7)``): a SELECT with one constant expression and no FROM,
  WHERE or any other clause has one row, that value; the comparison with it (``= ANY``,
  ``IN``, ``ALL`` of one row) is the comparison with the value, NULL included (a string
  from it is a VARCHAR, which DuckDB casts only under ``=``, ``<>``, ``IS [NOT] DISTINCT
  FROM`` and in an ``IN (a, b)`` list: :func:`varchar_bound`). Any other
  subquery (one that reads a table, has several rows or columns, or a clause that could
  drop its row) is refused: the planner never runs a subquery to cut a bound.
* **a list** (``k op ANY ([a, b])``, ``SOME``, ``ALL``; a Python list bound to ``?``):
  the OR (ANY, SOME) or AND (ALL) of ``k op a``, ``k op b``; an empty list is FALSE
  (ANY) or TRUE (ALL) on every row, NULL rows included, as in DuckDB. A string in the
  list is cast to the list's type, as DuckDB casts it (:func:`_list_values`).
* ``COALESCE(p, q, ...)`` of predicates is ``p`` where it is not UNKNOWN, else ``q``...:
  ``coalesce(n = 5, FALSE)`` is FALSE on a NULL row, ``coalesce(n = 5, TRUE)`` TRUE.
* constant conditions (``TRUE``, ``NULL``, ``1 = 1``) are TRUE, UNKNOWN or FALSE at every
  value and on NULL rows; ``(p) IS [NOT] TRUE``, ``IS [NOT] FALSE`` and ``(p) IS [NOT]
  NULL`` of a predicate ``p`` are TRUE or FALSE everywhere, read from ``p``'s sets.

The policy of the attribute's NULL rows (``on_null``, :mod:`~dpsql.planner.dropped_nulls`)
decides what :attr:`Truth.at_null` means: ``"error"`` has none, ``"category"`` keeps its
NULL node where the predicate is TRUE on it, and ``"drop"`` refuses a predicate TRUE on it
(no view over the attribute holds those rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from dpsql._sql import quote_literal
from dpsql.domains.calendar import CALENDAR_TYPES
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.dropped_nulls import is_null_error
from dpsql.planner.bind_params import to_literal
from dpsql.planner.fold_constants import (fold_condition, fold_constant, fold_list,
                                          not_plain_calendar, plain_calendar)
from dpsql.planner.trunc_predicates import untrunc
from dpsql.planner.value_intervals import (EVERYTHING, Axis, Intervals, complement,
                                           intersect, unsupported, union)

FALSE, UNKNOWN, TRUE = 0, 1, 2


@dataclass(frozen=True)
class Truth:
    """Where a predicate is TRUE and where FALSE on the attribute's axis (UNKNOWN on the
    rest), and its value (:data:`TRUE`, :data:`UNKNOWN` or :data:`FALSE`) on a row where
    the attribute is NULL."""

    true: Intervals
    false: Intervals
    at_null: int
    points: tuple[tuple[float, int], ...] = ()
    """On a real axis, the value at single points where it is not the intervals' value
    (``x = 1.5`` is FALSE everywhere but TRUE at 1.5): (point, value), by point."""

    def at(self, p: float) -> int:
        """The value at the point ``p``."""
        return dict(self.points).get(p, _value_at(self, p, 0))

    def _each(self, other: "Truth", op) -> tuple[tuple[float, int], ...]:
        ps = sorted({p for p, _ in self.points} | {p for p, _ in other.points})
        return tuple((p, op(self.at(p), other.at(p))) for p in ps)

    def mapped(self, op) -> tuple[tuple[float, int], ...]:
        return tuple((p, op(v)) for p, v in self.points)

    def negate(self) -> "Truth":
        return Truth(self.false, self.true, TRUE - self.at_null,
                     self.mapped(lambda v: TRUE - v))

    def both(self, other: "Truth") -> "Truth":
        """``self AND other``."""
        return Truth(intersect(self.true, other.true), union(self.false, other.false),
                     min(self.at_null, other.at_null), self._each(other, min))

    def either(self, other: "Truth") -> "Truth":
        """``self OR other``."""
        return Truth(union(self.true, other.true), intersect(self.false, other.false),
                     max(self.at_null, other.at_null), self._each(other, max))

    def unknown(self) -> Intervals:
        return complement(union(self.true, self.false))

    def otherwise(self, other: "Truth") -> "Truth":
        """``COALESCE(self, other)``: ``other`` where ``self`` is UNKNOWN."""
        unknown = self.unknown()
        return Truth(union(self.true, intersect(unknown, other.true)),
                     union(self.false, intersect(unknown, other.false)),
                     other.at_null if self.at_null == UNKNOWN else self.at_null,
                     self._each(other, lambda a, b: b if a == UNKNOWN else a))


def _value_at(t: Truth, p: float, side: int) -> int:
    """The intervals' value at ``p`` (``side`` 0), just below it (-1) or just above (1)."""
    def has(pieces: Intervals) -> bool:
        return any((lo < p <= hi) if side < 0 else (lo <= p < hi) for lo, hi in pieces)
    return TRUE if has(t.true) else FALSE if has(t.false) else UNKNOWN


_UNKNOWN_EVERYWHERE = Truth((), (), UNKNOWN)
_IS_NULL = Truth((), EVERYTHING, TRUE)


def _constant(value: bool | None) -> Truth:
    if value is None:
        return _UNKNOWN_EVERYWHERE
    return Truth(EVERYTHING, (), TRUE) if value else Truth((), EVERYTHING, FALSE)


def _two_valued(true: Intervals, at_null: int = UNKNOWN, points=()) -> Truth:
    return Truth(true, complement(true), at_null, points)


_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE,
         exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.NullSafeEQ: exp.NullSafeEQ,
         exp.NullSafeNEQ: exp.NullSafeNEQ}


def predicate_truth(c: exp.Expression, meta, is_attr) -> Truth:
    """The :class:`Truth` of the predicate ``c`` on the binned attribute ``meta``;
    ``is_attr(node)`` says whether a node is that attribute's column. Raises
    :class:`UnsupportedQueryError` for any other shape, naming what works.
    :func:`refuse_dropped_nulls` refuses a WHERE clause TRUE on the NULL rows of an
    attribute with ``on_null = "drop"``."""
    axis = Axis(meta)

    def bound(node: exp.Expression, what: str, how: str | None = None):
        """A bound's value on the axis, None for NULL (a constant subquery's value).
        ``how``: the comparison, when it is not one under which DuckDB casts a VARCHAR
        to the attribute's type (:func:`varchar_bound`)."""
        value = constant_subquery(node, what, meta.name)
        is_text, text = varchar_bound(value, node, what)
        if is_text and how is not None:
            raise _varchar_error(node, value, text, what, how, axis)
        if is_text:
            return None if text is None else axis.literal(exp.Literal.string(text), what)
        while isinstance(value, exp.Paren) and isinstance(value.this, (exp.Paren, exp.Literal)):
            value = value.this  # ('5') is the literal '5'
        return axis.literal(value, what)

    def compare(kind: type, node: exp.Expression, what: str) -> Truth:
        how = None if kind in _EQUALITY else _OPS[kind]
        some, quantified = _quantified(node)
        items = _listed(quantified)
        if items is not None:  # x op ANY ([a, b]): x op a OR x op b; ALL: AND
            if not items:  # DuckDB: FALSE (ANY) or TRUE (ALL) on every row, NULL x too
                return _constant(not some)
            items = _list_values(items, node, what, axis)
            out = compare(kind, items[0], what)
            for e in items[1:]:
                t = compare(kind, e, what)
                out = out.either(t) if some else out.both(t)
            return out
        if quantified is not None:  # of a one-row subquery: its value
            how = f"{_OPS[kind]} {'ANY' if some else 'ALL'} (SELECT ...)"
            node = _one_row(node, quantified, what, meta.name)
        v = bound(node, what, how)
        if kind in (exp.NullSafeEQ, exp.NullSafeNEQ):
            t = _IS_NULL if v is None else cell(v, FALSE)
            return t if kind is exp.NullSafeEQ else t.negate()
        if v is None:
            return _UNKNOWN_EVERYWHERE
        if kind in (exp.EQ, exp.NEQ):
            return cell(v) if kind is exp.EQ else cell(v).negate()
        return _ordered(axis, kind, v)

    def cell(v, at_null: int = UNKNOWN) -> Truth:
        """``x = v``: a grid value's cell, or on a real axis the single point v."""
        if axis.step is not None or not math.isfinite(v):
            return _two_valued(axis.cell(v) if axis.step is not None else (), at_null)
        return Truth((), EVERYTHING, at_null, ((float(v), TRUE),))

    def walk(node: exp.Expression) -> Truth:
        node = untrunc(node, meta, is_attr)  # date_trunc(unit, attr) <op> v: on attr
        if isinstance(node, exp.Paren):
            return walk(node.this)
        if isinstance(node, exp.And):
            return walk(node.this).both(walk(node.expression))
        if isinstance(node, exp.Or):
            return walk(node.this).either(walk(node.expression))
        if isinstance(node, exp.Not):
            return walk(node.this).negate()
        if isinstance(node, exp.Coalesce):  # of predicates: the first that is not NULL
            out = walk(node.this)
            for e in node.expressions:
                out = out.otherwise(walk(e))
            return out
        if isinstance(node, exp.Is) and is_attr(node.this):
            if isinstance(node.expression, exp.Null):
                return _IS_NULL
            raise unsupported(c, axis)
        if isinstance(node, exp.Is) and isinstance(node.expression, (exp.Null, exp.Boolean)):
            inner = walk(node.this)  # (p) IS NULL / TRUE / FALSE: never UNKNOWN
            want = UNKNOWN if isinstance(node.expression, exp.Null) else \
                TRUE if node.expression.this else FALSE
            kept = inner.unknown() if want == UNKNOWN else inner.true if want == TRUE \
                else inner.false
            return _two_valued(kept, TRUE if inner.at_null == want else FALSE,
                               inner.mapped(lambda v: TRUE if v == want else FALSE))
        if isinstance(node, exp.Between) and is_attr(node.this):
            lo, hi = node.args["low"], node.args["high"]
            what = "a BETWEEN bound"
            lo_v, hi_v = bound(lo, what, "BETWEEN"), bound(hi, what, "BETWEEN")
            out = _at_least(axis, lo_v).both(_at_least(axis, hi_v, exp.LTE))
            if node.args.get("symmetric"):  # SQL's BETWEEN SYMMETRIC: either order
                out = out.either(_at_least(axis, hi_v).both(_at_least(axis, lo_v, exp.LTE)))
            return out
        if isinstance(node, exp.In) and is_attr(node.this) and not node.args.get("unnest"):
            what = f"an IN value of {meta.name}"
            items = [(e, None) for e in node.expressions]
            if node.args.get("query") is not None:  # IN (SELECT v): one value
                items.append((node.args["query"], "IN (SELECT ...)"))
            out = Truth((), EVERYTHING, UNKNOWN)
            for e, how in items:  # x IN (a, b) is x = a OR x = b
                v = bound(e, what, how)
                out = out.either(_UNKNOWN_EVERYWHERE if v is None else cell(v))
            return out
        if type(node) in _FLIP:
            left, right, kind = node.this, node.expression, type(node)
            if is_attr(right) and not is_attr(left):
                left, right, kind = right, left, _FLIP[kind]
            if is_attr(left) and not is_attr(right) \
                    and not any(map(is_attr, right.find_all(exp.Column))):
                return compare(kind, right, f"the bound of {meta.name}")
        if node.find(exp.Column) is None:  # TRUE, NULL, 1 = 1: the same on every row
            folded = fold_condition(node)
            if folded is not None:
                return _constant(folded.value)
        raise unsupported(c, axis)

    return walk(c)


def _at_least(axis: Axis, v, kind: type = exp.GTE) -> Truth:
    """``x >= v`` (or ``kind``) of a bound's value ``v`` (None: NULL, UNKNOWN)."""
    return _UNKNOWN_EVERYWHERE if v is None else _ordered(axis, kind, v)


def _ordered(axis: Axis, kind: type, v) -> Truth:
    """``x < v``, ``<=``, ``>`` or ``>=``. On a real axis the intervals answer ``<=`` as
    ``<`` and ``>`` as ``>=`` (the same bound: a point holds no released count), so
    ``x <= v`` also carries its TRUE and ``x > v`` its FALSE at v itself: a clause whose
    rows hang on v alone is then refused by :func:`refuse_points` as ``x = v`` and ``x <>
    v`` are. ``x BETWEEN 1.5 AND 1.5`` answered 0 and ``x > 1.5 OR x < 1.5`` every row,
    where DuckDB keeps the rows at 1.5 (2 of the trips) and leaves them out."""
    t = _two_valued(axis.compare(kind, v))
    if axis.step is None and kind in (exp.LTE, exp.GT) and math.isfinite(float(v)):
        return Truth(t.true, t.false, t.at_null,
                     ((float(v), TRUE if kind is exp.LTE else FALSE),))
    return t


_EQUALITY = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ)
"""The comparisons under which DuckDB casts a VARCHAR to the column's type (as it does
each value of an ``IN (a, b)`` list)."""
_OPS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.EQ: "=", exp.NEQ: "<>",
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


def _varchar_error(node, value, text: str | None, what: str, how: str,
                   axis: Axis) -> UnsupportedQueryError:
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


def refuse_dropped_nulls(truth: Truth, c: exp.Expression, meta, is_attr) -> None:
    """Refuse the predicate ``c`` (of :class:`Truth` ``truth``: the AND of a WHERE
    clause's conjuncts on the attribute ``meta``) when it is TRUE on the rows where the
    attribute is NULL and the attribute has ``on_null = "drop"``: no view over it holds
    those rows. ``n IS NULL AND n > 5`` is never TRUE, so it is answered (0)."""
    if truth.at_null == TRUE and meta.on_null == "drop":
        col = next(x for x in c.find_all(exp.Column) if is_attr(x))
        raise is_null_error(meta, col.name, c.sql("duckdb"))


def refuse_points(truth: Truth, c: exp.Expression, meta) -> None:
    """Refuse the predicate ``c`` (of :class:`Truth` ``truth``: the AND of a WHERE
    clause's conjuncts on the real-valued attribute ``meta``) when it keeps a single
    point that the values on both sides of it are not kept (``x = 1.5``, ``x IN (1.5,
    NULL)``), or leaves out a point between kept values (``x <> 1.5``): a point holds
    no released count. Where the point goes as one side does, the continuous axis
    answers it as it answers ``<=`` and ``<`` (the same bound): ``x NOT IN (1.5, NULL)``
    keeps no row, ``x <> 1.5 AND x < 1`` is ``x < 1``, ``x = 1.5 OR x < 3`` is ``x <
    3``."""
    for p, v in truth.points:
        kept = v == TRUE
        if kept != (_value_at(truth, p, -1) == TRUE) \
                and kept != (_value_at(truth, p, 1) == TRUE):
            raise Axis(meta).point_error(
                f"{c.sql('duckdb')!r} ({'keeps' if kept else 'leaves out'} the value {p!r} "
                "alone)")


def predicate_intervals(c: exp.Expression, meta, is_attr) -> Intervals:
    """The intervals of the axis of the binned attribute ``meta`` where the predicate
    ``c`` is TRUE (:func:`predicate_truth`), refused as :func:`refuse_dropped_nulls`
    and :func:`refuse_points` say."""
    truth = predicate_truth(c, meta, is_attr)
    refuse_dropped_nulls(truth, c, meta, is_attr)
    refuse_points(truth, c, meta)
    return truth.true


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


def _quantified(node: exp.Expression) -> tuple[bool, exp.Expression | None]:
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


def _listed(quantified: exp.Expression | None) -> list[exp.Expression] | None:
    """The values of ``ANY ([a, b])`` / ``ALL ([a, b])`` (a list literal, as psycopg sends
    a Python list for ``x = ANY(%s)``; ``quantified``: what :func:`_quantified` says it
    quantifies over), else None."""
    if quantified is None:
        return None
    inner = quantified.unnest()  # without its parentheses
    return list(inner.expressions) if isinstance(inner, exp.Array) else None


def _list_values(items: list[exp.Expression], node: exp.Expression, what: str,
                 axis: Axis) -> list[exp.Expression]:
    """The values of a list literal with a string among them, as DuckDB reads them: cast
    to the list's type, the common type of its other items, not to the attribute's
    (:func:`~dpsql.planner.fold_constants.fold_list`: ``n = ANY([5, '6.5'])`` is ``n IN
    (5, 7)`` and ``p = ANY([1.5, '2.25'])`` is ``p IN (1.5, 2.3)``). A list of strings
    alone is a VARCHAR[], which DuckDB does not compare with a number or a date: refused
    with DuckDB's reason. ``items`` without a string are returned as they are."""
    if not any(_is_text(e, what) for e in items):
        return items
    folded = fold_list(items, what)
    if folded is None:
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} mixes strings with values that are not "
            f"constants; write the list's values as literals of the type of {axis.name!r}")
    if folded.type == "VARCHAR[]" or not folded.type.endswith("[]"):
        calendar = axis.value_type in CALENDAR_TYPES
        raise UnsupportedQueryError(
            f"{what} {node.sql('duckdb')!r} is a list of strings, a VARCHAR[], which DuckDB "
            f"does not compare with the {axis.value_type} attribute {axis.name!r} (\"Cannot "
            "compare values of type ... and VARCHAR in IN/ANY/ALL clause - an explicit cast "
            "is required\"); write the values without quotes"
            + (" as dates (DATE 'YYYY-MM-DD')" if calendar else "")
            + f", or {axis.name} IN (a, b), where DuckDB casts each string")
    if folded.type in ("DATE[]", "TIMESTAMP[]"):  # no time zone, as everywhere
        for e in items:
            if isinstance(e.unnest(), exp.Literal) and not plain_calendar(e.unnest().this):
                raise not_plain_calendar(what, e.unnest().this)
    return [to_literal(v) for v in folded.value]


def _is_text(e: exp.Expression, what: str) -> bool:
    """Whether the list item ``e`` is a string: a string literal or a VARCHAR constant."""
    inner = e.unnest()
    if isinstance(inner, exp.Literal):
        return inner.is_string
    return varchar_bound(inner, inner, what)[0]


def _one_row(node: exp.Expression, sub: exp.Expression, what: str,
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


__all__ = ["FALSE", "TRUE", "UNKNOWN", "Truth", "constant_subquery",
           "constant_subquery_or_none", "one_value", "predicate_intervals", "predicate_truth",
           "refuse_dropped_nulls", "refuse_points"]
