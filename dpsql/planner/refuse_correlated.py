"""Pass 2, its nested queries: refuse one correlated with a binned attribute.

``EXISTS (SELECT 1 FROM pub WHERE pub.w = k)`` in the WHERE clause of a SELECT over the
private table names the binned attribute ``k`` of each outer row. On the release the
outer rows are released nodes, each holding a bin of ``k``, not one value per row, so
the subquery cannot be run as on the data: DuckDB failed on the planned query (the
level table has ``k_lo``/``k_hi``, no ``k``), and grouped by a month-binned attribute it
ran once per month node (164 rows for January where the data has 4 on January 1st).
Such a subquery is refused, naming what to write instead (:func:`refuse_correlated`),
in WHERE and in every other clause: a scalar subquery in the SELECT list or ORDER BY,
one in HAVING, a LATERAL join (where DuckDB failed on the planned query likewise).
Categorical and spine labels are released as values, so a subquery correlated with one
is answered (:mod:`~dpsql.planner.find_references` reads the label on the node rows).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner._names import home_catalog, scope_tables


def refuse_correlated(col: exp.Column, attribute, c: exp.Expression, select: exp.Select,
                      table: str, resolve, where: bool = True) -> None:
    """Refuse the column ``col`` of the binned ``attribute`` of ``table`` inside a query
    nested in ``c`` of ``select`` (a WHERE conjunct, or with ``where`` False a part of
    another clause: the SELECT list, HAVING, ORDER BY, a LATERAL join...), unless it is
    unqualified and a query around it reads a private table itself (whose attribute it
    then is). ``resolve(catalog, name)`` finds a private table (``Catalog.resolve_table``)."""
    if col.table or not _read_inside(col, select, resolve):
        raise _binned_in_subquery(attribute, col, c, table, where)


def _read_inside(col: exp.Column, select: exp.Select, resolve) -> bool:
    """Whether a query nested in ``select`` around ``col`` reads a private table itself
    (``c IN (SELECT c FROM t WHERE k < 5 GROUP BY c)``): there an unqualified name of an
    attribute is that reference's, analysed on its own."""
    node = col.parent
    while node is not None and node is not select:
        if isinstance(node, exp.Select) and any(
                resolve(home_catalog(t), t.name) for t in scope_tables(node)):
            return True
        node = node.parent
    return False


def _binned_in_subquery(a, col: exp.Column, c: exp.Expression, table: str, where: bool
                        ) -> UnsupportedQueryError:
    """The refusal of a binned attribute named inside a subquery of the WHERE clause: a
    subquery correlated with it (``EXISTS (SELECT 1 FROM pub WHERE pub.w = k)``) would
    run once per released node, and a node holds a bin of the attribute, not one value
    per row (DuckDB failed on the planned query, or on month bins counted every row of
    the month where the data's match one day). An unqualified name may be the
    subquery's own column, which the planner cannot know (it reads no public table):
    the message says to qualify it then. Outside WHERE (a scalar subquery in the
    SELECT list or ORDER BY, HAVING, LATERAL) DuckDB failed on the planned query too
    ("Table t does not have a column named k"); the advice is then to run the subquery
    on the released rows of a CTE that counts by the attribute."""
    n = a.name
    own = "" if col.table else (
        f"; if {col.name!r} is a column of the subquery's own table, qualify it "
        f"(<table>.{col.name}), since DuckDB binds an unqualified name to the outer "
        f"query's {table!r} when the subquery's tables have no such column")
    cte = f"WITH q AS (SELECT {n}, COUNT(*) AS cnt FROM {table} GROUP BY {n})"
    advice = (
        f"Filter {n} in this SELECT's WHERE with literal bounds ({n} BETWEEN lo AND hi, "
        f"<, <=, >, >=, and on integers, decimals and dates {n} IN (v1, v2)), or count "
        f"by {n} first and filter the released bins: {cte} SELECT SUM(cnt) FROM q WHERE "
        f"... q.{n} ..." if where else
        f"Count by {n} first and run the subquery on the released rows, one per bin: "
        f"{cte} SELECT q.{n}, q.cnt, (SELECT ... WHERE ... = q.{n}) FROM q")
    return UnsupportedQueryError(
        f"the binned attribute {n!r} of {table!r} is used inside a subquery "
        f"({c.sql('duckdb').lstrip(', ')!r}): a subquery correlated with a binned attribute is not "
        f"supported, since the release holds counts of the bins of {n!r}, not its value "
        f"row by row. {advice}{own}")

__all__ = ["refuse_correlated"]
