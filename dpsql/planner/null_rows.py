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
  attribute's columns (:func:`~dpsql.planner.predicate_truth.folded_null_row_value`:
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

from dpsql.planner.dropped_nulls import is_null_error
from dpsql.planner.fold_constants import fold_condition
from dpsql.planner.predicate_truth import (TRUE, UNKNOWN, Truth, folded_null_row_value,
                                           null_row_value, refuse_dropped_nulls, refuse_points,
                                           rejects_null)


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
        if attribute in self.binned:
            truth = self.binned[attribute][0].both(truth)
            self.binned[attribute] = truth, self.binned[attribute][1]
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


__all__ = ["NullRows"]
