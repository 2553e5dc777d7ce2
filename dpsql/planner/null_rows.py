"""What a WHERE clause does with the rows where an attribute is NULL, conjunct by conjunct.

The planner reads each conjunct of a WHERE clause on one attribute
(:mod:`~dpsql.planner.find_references`). On the rows where that attribute is NULL a
conjunct is TRUE, UNKNOWN or FALSE (:mod:`~dpsql.planner.predicate_truth`), and the
clause keeps them only where every conjunct is TRUE (their ``AND``: the least). So the
values are collected per attribute and decided once the whole clause is read:

* never TRUE there: the clause leaves those rows out, and a view that dropped them
  (``on_null = "drop"``) answers it as the data would (``x IS NULL AND x = 'a'`` too);
* TRUE there, on an attribute with ``on_null = "drop"``: refused, since no view over it
  holds those rows (:func:`~dpsql.planner.dropped_nulls.is_null_error`), unless another
  conjunct is a constant FALSE or NULL (``x IS NULL AND FALSE``), which keeps no row;
* a conjunct on labels of another shape is valued by DuckDB with NULL in place of the
  attribute's columns (:func:`folded_null_row_value`:
  ``coalesce(cd = 'a', FALSE)`` is FALSE there, ``coalesce(cd, 'z') = 'z'`` TRUE) when
  it is built of the constant-expression nodes the planner values;
* a conjunct whose value there is still not known (a function of a label, a subquery
  that reads a table) decides nothing: the view choice then asks for a view that holds
  those rows, and where none does the refusal names the conjunct.

For an attribute with ``on_null = "category"`` a binned attribute's NULL node is kept
where the clause is TRUE on it.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import Error as DpsqlError
from dpsql.planner.constant_bounds import (constant_subquery_or_none, listed, one_value,
                                           quantified)
from dpsql.planner.dropped_nulls import is_null_error
from dpsql.planner.fold_constants import fold_condition, fold_constant
from dpsql.planner.predicate_truth import (FALSE, TRUE, UNKNOWN, Truth, refuse_dropped_nulls,
                                           refuse_points)
from dpsql.planner.refuse_loose_syntax import refuse_list_membership


class NullRows:
    """The WHERE clause of one reference, on each attribute's NULL rows (module doc).
    ``release``: the reference's :class:`~dpsql.planner.catalog.ReleaseInfo`; ``owned``:
    whether a column is the reference's."""

    def __init__(self, release, owned) -> None:
        self.release, self.owned = release, owned
        self.labels: dict[str, tuple[int, exp.Expression]] = {}  # value, first conjunct
        self.unknown: dict[str, exp.Expression] = {}  # attribute: its first such conjunct
        self.binned: dict[str, tuple[Truth, exp.Expression]] = {}
        self.never = False

    def constant(self, c: exp.Expression) -> None:
        """A conjunct with no column: FALSE or NULL (``FALSE``, ``1 = 2``) keeps no row."""
        if c.find(exp.Column) is None:
            folded = fold_condition(c)
            self.never = self.never or (folded is not None and folded.value is not True)

    def label(self, c: exp.Expression, attribute: str) -> None:
        """A conjunct on the label columns of one attribute (left in the query)."""
        cols = self._columns(c, attribute)
        v = null_row_value(c, lambda x: any(x is y for y in cols)) if cols else None
        if v is None and rejects_null(c):
            v = UNKNOWN
        if v is None and cols:  # COALESCE, CASE...: DuckDB's value with NULL for them
            v = folded_null_row_value(c, cols)
        if v is None:
            self.unknown.setdefault(attribute, c)
        elif attribute in self.labels:
            self.labels[attribute] = min(self.labels[attribute][0], v), \
                self.labels[attribute][1]
        else:
            self.labels[attribute] = v, c

    def range(self, c: exp.Expression, attribute: str, truth: Truth) -> Truth:
        """A conjunct on a binned attribute, of :class:`Truth` ``truth``; returns the AND
        of its conjuncts so far."""
        if attribute in self.binned:  # named together: the AND decides the refusals
            truth = self.binned[attribute][0].both(truth)
            self.binned[attribute] = truth, exp.and_(self.binned[attribute][1], c)
        else:
            self.binned[attribute] = truth, c
        return truth

    def settle(self, column_test) -> tuple[set[str], dict[str, bool]]:
        """(the attributes whose NULL rows the clause leaves out, and per binned attribute
        with a NULL node whether it keeps it); refuses a clause TRUE on the NULL rows of
        an attribute with ``on_null = "drop"``. ``column_test(attribute)``: a test of the
        reference's columns of a binned attribute."""
        attrs = self.release.attributes
        non_null = set(self.unknown) if self.never else set()
        for a, (v, first) in self.labels.items():
            if v != TRUE or self.never:
                non_null.add(a)
            elif a not in self.unknown:
                meta, cols = attrs.get(a), self._columns(first, a)
                if meta is not None and meta.on_null == "drop" and cols:
                    raise is_null_error(meta, cols[0].name, first.sql("duckdb"))
        nulls: dict[str, bool] = {}
        for a, (truth, first) in self.binned.items():
            if not self.never:
                refuse_dropped_nulls(truth, first, attrs[a], column_test(a))
                refuse_points(truth, first, attrs[a])
            if truth.at_null != TRUE or self.never:
                non_null.add(a)
            if attrs[a].null_category:  # the NULL node: kept where the clause is TRUE
                nulls[a] = truth.at_null == TRUE
        return non_null, nulls

    def _columns(self, c: exp.Expression, attribute: str) -> list[exp.Column]:
        meta = self.release.attributes.get(attribute)
        return [x for x in c.find_all(exp.Column) if self.owned(x) and meta is not None
                and self.release.column_attribute(x.name) is meta]


_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between,
                   exp.Like, exp.ILike, exp.Not, exp.Paren, exp.And, exp.Or, exp.Column,
                   exp.Literal, exp.Neg, exp.Tuple, exp.Cast, exp.Placeholder, exp.Identifier,
                   exp.DataType, exp.DataTypeParam, exp.Add, exp.Sub, exp.Mul, exp.Div,
                   exp.IntDiv, exp.Mod, exp.Pow, exp.Interval, exp.Var, exp.Null)


def rejects_null(c: exp.Expression) -> bool:
    """True when the predicate ``c`` (on one attribute) is never true where it is NULL:
    built of comparisons, IN, BETWEEN, LIKE, arithmetic, NULL, AND/OR/NOT and ``IS NOT
    NULL`` only (no IS NULL, COALESCE, CASE...). A NULL literal is UNKNOWN under every one
    of them, as the attribute's NULL is."""
    if isinstance(c, exp.Not) and isinstance(c.this, exp.Is) \
            and isinstance(c.this.expression, exp.Null):
        return True  # attr IS NOT NULL
    return all(isinstance(x, _NULL_REJECTING) for x in c.walk())


_NULL_IN = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike,
            exp.Glob, exp.SimilarTo, exp.RegexpLike, exp.Between, exp.In)
"""Comparisons that are UNKNOWN where their column is NULL, whatever the constants."""


def null_row_value(c: exp.Expression, is_attr) -> int | None:
    """The value (:data:`TRUE`, :data:`UNKNOWN` or :data:`FALSE`) of the predicate ``c``
    on a row where the attribute (a label column: ``is_attr``) is NULL, in DuckDB's
    three-valued logic; None for a shape it does not know (a function of the column, a
    subquery that reads a table: ``x IN (SELECT ...)`` of no row is FALSE). A comparison,
    ``LIKE``, ``BETWEEN`` or ``IN`` of the column with constants is UNKNOWN, ``IS NULL`` and
    ``IS NOT DISTINCT FROM NULL`` TRUE, ``IS [NOT] DISTINCT FROM`` a value FALSE (TRUE),
    ``(p) IS TRUE / FALSE / NULL`` TRUE or FALSE, ``NOT`` swaps TRUE and FALSE, ``AND`` /
    ``OR`` take the least / greatest."""

    def constant(node: exp.Expression) -> bool:
        """No column, and each SELECT in it one constant value (one row)."""
        return node.find(exp.Column, exp.Table, exp.Star) is None and all(
            one_value(q) for q in node.find_all(exp.Query)
            if not isinstance(q, exp.Subquery))

    def value(node: exp.Expression) -> int | None:
        if isinstance(node, exp.Paren):
            return value(node.this)
        if isinstance(node, exp.In):  # x IN ? bound to a list: not SQL's IN
            refuse_list_membership(node)
        if isinstance(node, (exp.And, exp.Or)):
            a, b = value(node.this), value(node.expression)
            if isinstance(node, exp.And):  # FALSE AND anything is FALSE
                return FALSE if FALSE in (a, b) else None if None in (a, b) else min(a, b)
            return TRUE if TRUE in (a, b) else None if None in (a, b) else max(a, b)
        if isinstance(node, exp.Not):
            v = value(node.this)
            return None if v is None else TRUE - v
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            if is_attr(node.this):
                return TRUE
            v = value(node.this)
            return None if v is None else TRUE if v == UNKNOWN else FALSE
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            v = value(node.this)
            return None if v is None else TRUE if v == (
                TRUE if node.expression.this else FALSE) else FALSE
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            left, right = node.this, node.expression
            if is_attr(right):
                left, right = right, left
            if not is_attr(left) or not constant(right):
                return None
            other = constant_subquery_or_none(right)
            folded = None if other is None else fold_constant(other, "the value")
            if folded is None:
                return None
            same = TRUE if folded.value is None else FALSE  # NULL IS NOT DISTINCT FROM NULL
            return same if isinstance(node, exp.NullSafeEQ) else TRUE - same
        if isinstance(node, _NULL_IN) and any(quantified(x)[1] is not None
                                              for x in node.iter_expressions()):
            return quantified_value(node)
        if isinstance(node, _NULL_IN):
            args = [x for x in node.iter_expressions()]
            if any(is_attr(x) for x in args) and all(
                    is_attr(x) or constant(x) for x in args):
                return UNKNOWN
            return None
        if isinstance(node, (exp.Boolean, exp.Null)) or constant(node):
            folded = fold_condition(node)
            if folded is not None:
                return UNKNOWN if folded.value is None else TRUE if folded.value else FALSE
        return None

    def quantified_value(node: exp.Expression) -> int | None:
        """``attr op ANY (...)`` / ``ALL (...)``: an empty list makes ANY FALSE and ALL
        TRUE on the NULL row (DuckDB's ``NULL <> ALL ([])`` is true); a list of values or
        a constant subquery (one row) makes it UNKNOWN; anything else is not known."""
        left, right = node.this.unnest(), node.expression
        some, over = quantified(right)
        if not is_attr(left) or over is None:
            return None
        items = listed(over)
        if items is not None and not all(constant(e) for e in items):
            return None
        if items == []:
            return FALSE if some else TRUE
        if items is None and constant_subquery_or_none(over) is None:
            return None
        return UNKNOWN

    return value(c)


def folded_null_row_value(c: exp.Expression, cols: list[exp.Column]) -> int | None:
    """The value of the predicate ``c`` on a row where its columns ``cols`` (nodes of
    ``c``: one attribute's) are NULL, as DuckDB computes ``c`` with NULL in their place
    (``coalesce(cd = 'a', TRUE)`` is TRUE there, ``coalesce(cd, 'z') = 'a'`` FALSE);
    None when ``c`` with them replaced is not a constant condition of
    :data:`~dpsql.planner.fold_constants.ALLOWED` nodes (``upper(cd) = 'A'``) or DuckDB
    fails on it."""
    copy = c.copy()
    mine = {id(x) for x in cols}
    for x, y in zip(list(c.find_all(exp.Column)), list(copy.find_all(exp.Column))):
        if id(x) in mine:
            y.replace(exp.Null())
    if copy.find(exp.Column) is not None:
        return None
    try:
        folded = fold_condition(copy)
    except DpsqlError:
        return None
    if folded is None:
        return None
    return UNKNOWN if folded.value is None else TRUE if folded.value else FALSE


__all__ = ["NullRows", "folded_null_row_value", "null_row_value", "rejects_null"]
