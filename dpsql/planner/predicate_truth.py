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
  list is cast to the list's type, as DuckDB casts it (:func:`~dpsql.planner.constant_bounds.list_values`).
* ``COALESCE(p, q, ...)`` of predicates is ``p`` where it is not UNKNOWN, else ``q``...:
  ``coalesce(n = 5, FALSE)`` is FALSE on a NULL row, ``coalesce(n = 5, TRUE)`` TRUE.
* constant conditions (``TRUE``, ``NULL``, ``1 = 1``) are TRUE, UNKNOWN or FALSE at every
  value and on NULL rows; ``(p) IS [NOT] TRUE``, ``IS [NOT] FALSE`` and ``(p) IS [NOT]
  NULL`` of a predicate ``p`` are TRUE or FALSE everywhere, read from ``p``'s sets, and
  so are comparisons of truth values: ``(p) = (q)`` is ``(p AND q) OR (NOT p AND NOT
  q)`` (UNKNOWN where either is), ``(p) IS NOT DISTINCT FROM (q)`` never UNKNOWN.

The policy of the attribute's NULL rows (``on_null``, :mod:`~dpsql.planner.dropped_nulls`)
decides what :attr:`Truth.at_null` means: ``"error"`` has none, ``"category"`` keeps its
NULL node where the predicate is TRUE on it, and ``"drop"`` refuses a predicate TRUE on it
(no view over the attribute holds those rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from dpsql.planner.constant_bounds import (EQUALITY, OPS, bound_value, list_values, listed,
                                           one_row, quantified, refuse_empty_type)
from dpsql.planner.dropped_nulls import is_null_error
from dpsql.planner.fold_constants import fold_condition
from dpsql.planner.refuse_loose_syntax import refuse_list_membership
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
    attribute with ``on_null = "drop"``. The column may be in parentheses: ``(k) = 5``
    is ``k = 5``."""
    axis = Axis(meta)
    column_test = is_attr
    is_attr = lambda node: column_test(node.unnest())  # noqa: E731 - (k) is k

    def bound(node: exp.Expression, what: str, how: str | None = None):
        return bound_value(node, what, how, axis)

    def compare(kind: type, node: exp.Expression, what: str) -> Truth:
        how = None if kind in EQUALITY else OPS[kind]
        some, over = quantified(node)
        items = listed(over, what)
        if items is not None:  # x op ANY ([a, b]): x op a OR x op b; ALL: AND
            if not items:  # DuckDB: FALSE (ANY) or TRUE (ALL) on every row, NULL x too
                refuse_empty_type(over, node, what, axis)
                return _constant(not some)
            items = list_values(items, node, what, axis)
            out = compare(kind, items[0], what)
            for e in items[1:]:
                t = compare(kind, e, what)
                out = out.either(t) if some else out.both(t)
            return out
        if over is not None:  # of a one-row subquery: its value
            how = f"{OPS[kind]} {'ANY' if some else 'ALL'} (SELECT ...)"
            node = one_row(node, over, what, meta.name)
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
            want = UNKNOWN if isinstance(node.expression, exp.Null) else \
                TRUE if node.expression.this else FALSE  # (p) IS NULL / TRUE / FALSE
            return _is(walk(node.this), want)
        if isinstance(node, EQUALITY) and any(map(_condition, node.iter_expressions())):
            a, b = walk(node.this), walk(node.expression)  # (p) = TRUE, (p) <> (q)...
            if isinstance(node, (exp.EQ, exp.NEQ)):  # UNKNOWN where either is
                same = a.both(b).either(a.negate().both(b.negate()))
                return same if isinstance(node, exp.EQ) else same.negate()
            same = _is(a, TRUE).both(_is(b, TRUE)).either(_is(a, FALSE).both(
                _is(b, FALSE))).either(_is(a, UNKNOWN).both(_is(b, UNKNOWN)))
            return same if isinstance(node, exp.NullSafeEQ) else same.negate()
        if isinstance(node, exp.Between) and is_attr(node.this):
            lo, hi = node.args["low"], node.args["high"]
            what = "a BETWEEN bound"
            lo_v, hi_v = bound(lo, what, "BETWEEN"), bound(hi, what, "BETWEEN")
            out = _at_least(axis, lo_v).both(_at_least(axis, hi_v, exp.LTE))
            if node.args.get("symmetric"):  # SQL's BETWEEN SYMMETRIC: either order
                out = out.either(_at_least(axis, hi_v).both(_at_least(axis, lo_v, exp.LTE)))
            return out
        if isinstance(node, exp.In) and is_attr(node.this) and not node.args.get("unnest"):
            refuse_list_membership(node)
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


def _condition(node: exp.Expression) -> bool:
    """Whether ``node`` is a condition (a comparison, ``IN``, ``IS``, ``AND``, ``NOT``,
    ``TRUE``...), so that ``node = x`` compares truth values: ``(k < 5) = FALSE`` is
    ``NOT (k < 5)``, ``(k < 5) = (k > 2)`` is TRUE where both are or neither is."""
    node = node.unnest()
    return isinstance(node, (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)) \
        and not isinstance(node, exp.SubqueryPredicate)  # ANY (...), ALL (...): values


def _is(t: Truth, want: int) -> Truth:
    """``(p) IS TRUE`` (``want``: :data:`TRUE`), ``IS FALSE`` or ``IS NULL`` (UNKNOWN) of
    the predicate of :class:`Truth` ``t``: TRUE or FALSE, never UNKNOWN."""
    kept = t.unknown() if want == UNKNOWN else t.true if want == TRUE else t.false
    return _two_valued(kept, TRUE if t.at_null == want else FALSE,
                       t.mapped(lambda v: TRUE if v == want else FALSE))


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


__all__ = ["FALSE", "TRUE", "UNKNOWN", "Truth", "predicate_intervals", "predicate_truth",
           "refuse_dropped_nulls", "refuse_points"]
