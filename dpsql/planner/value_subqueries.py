"""``k IN (SELECT ...)`` in WHERE on a binned attribute whose bins hold one value: the
top-n filter a BI tool sends (``WHERE k IN (SELECT k FROM t GROUP BY k ORDER BY
COUNT(*) DESC LIMIT 3)``, Superset's and Tableau's "top N" of a dimension).

A predicate on a binned attribute is otherwise a range of it, moved inside the read as
bin filters (:mod:`~dpsql.planner.predicate_truth`), which needs its bounds as constants:
a subquery that is no constant (``SELECT 5``) is refused there. Where each bin of the
attribute holds one value (:func:`~dpsql.planner.group_bins.label_bins`: not a
timestamp, whose fraction of a second the release does not keep) the values of a node
are its one value, so the predicate is exact on the node rows as it stands:
it stays in WHERE, the column becomes each leaf node's value in the data's type (the
grouping :class:`~dpsql.planner.group_bins.BinGroup` of every leaf edge, ``value``),
and DuckDB runs the subquery. The subquery over a private table is a query of its own,
planned as any other (its answer is a released aggregate: post-processing, no raw row
is read). ``NOT IN`` is answered the same way, with SQL's NULLs: the NULL node's value
is NULL, as the data's.

On bins of many values a node's rows have many values, some in the subquery's answer
and some not, and no released count says how many: refused, saying why and what to
write instead.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.constant_bounds import constant_subquery
from dpsql.planner.group_bins import bins_text, label_bins
from dpsql.release_file import AttributeMeta


def value_subquery(c: exp.Expression, a: AttributeMeta, is_attr) -> bool:
    """True when the WHERE conjunct ``c`` is ``attr [NOT] IN (<a query>)`` of the binned
    attribute ``a`` (``is_attr(column)`` tells its columns), the query not a constant,
    and ``a``'s bins each hold one value: ``c`` then stays in WHERE (module doc). Raises
    the refusal on bins of many values; False for any other conjunct."""
    node = c
    while isinstance(node, (exp.Paren, exp.Not)):
        node = node.this
    if not isinstance(node, exp.In) or not is_attr(node.this) or node.expressions:
        return False
    query = node.args.get("query")
    if query is None:
        return False
    try:
        constant_subquery(query, "", a.name)
        return False  # IN (SELECT 5): its value, a range of the attribute
    except UnsupportedQueryError:
        pass
    if label_bins(a):
        return True
    raise UnsupportedQueryError(
        f"{c.sql('duckdb')!r}: the bins of the binned attribute {a.name!r} hold many "
        f"values each ({bins_text(a)}{_FRACTIONS if a.value_type == 'timestamp' else ''}), "
        "so a bin's rows may be partly in the subquery's answer and partly "
        f"not, and no released count says how many. Count by {a.name} first and filter "
        f"the released bins: WITH q AS (SELECT {a.name}, COUNT(*) AS n FROM <table> GROUP "
        f"BY {a.name}) SELECT ... FROM q WHERE q.{a.name} IN (SELECT ...), or list the "
        f"values as literals ({a.name} IN (1, 2)); a subquery is answered where each bin "
        "holds one value (integers in bins of 1, dates by day, decimals by their "
        "resolution)")


_FRACTIONS = ": a second holds its fractions, which the release does not keep"
