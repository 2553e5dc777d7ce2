"""Pass 2, star expressions: refused in a SELECT over the private table.

The planner rewrites the private table onto a release table (a level table, a node
table, a prefix table), whose columns are the attribute labels and the release's own:
``dp_count``, ``dp_var``, ``dp_parent``, ``dp_fanout``, ``dp_bias``, ``dp_row``, bin
bounds. A star expression (``*``, ``t.*``, ``* EXCLUDE``/``REPLACE``/``LIKE``/``SIMILAR
TO``, ``COLUMNS(*)``, ``COLUMNS('regex')``, ``COLUMNS(c -> ...)``, ``*COLUMNS(...)``)
would expand to those columns, not to the logical table's attributes, and select, group
or filter by them. ``SELECT *`` is refused with its own message in
:mod:`~dpsql.planner.find_references`; this pass refuses every other form, in any clause.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.parse_sql import Scope


def refuse_stars(sc: Scope, table: exp.Table, alias_l: str) -> None:
    """Refuse the star expressions of a SELECT over the private table (``COLUMNS(*)``,
    ``COLUMNS('regex')``, ``COLUMNS(c -> ...)``, ``* EXCLUDE``/``REPLACE``/``LIKE``,
    ``t.*``, in any clause): they expand to the columns of the release table that the
    query is rewritten onto (``dp_count``, ``dp_var``, ``dp_parent``...), not to the
    logical table's attributes, and so select, group or filter by its internals. Only
    ``COUNT(*)`` and ``<public table>.*`` (and ``COLUMNS(<public table>.*)``) stay."""
    def ours(col: exp.Expression) -> bool:
        return not (isinstance(col, exp.Column) and isinstance(col.this, exp.Star)
                    and col.table and col.table.lower() != alias_l)

    for node in sc.stars:
        if isinstance(node, exp.Star) and (
                isinstance(node.parent, exp.Columns) or isinstance(node.parent, exp.Count)
                and not any(node.args.values())):
            continue  # COUNT(*); COLUMNS(*) is refused as a whole
        if isinstance(node, exp.Columns) and not ours(node.this):
            continue
        _star_error(node, table)
    for col in sc.columns:
        if isinstance(col.this, exp.Star) and ours(col) and not isinstance(
                col.parent, exp.Columns):
            _star_error(col, table)


def _star_error(node: exp.Expression, table: exp.Table) -> None:
    top = node
    while isinstance(top.parent, (exp.Like, exp.ILike, exp.SimilarTo, exp.Columns)):
        top = top.parent
    raise UnsupportedQueryError(
        f"{top.sql('duckdb')} on the private table {table.name!r} is not supported: star "
        "expressions (*, t.*, * EXCLUDE/REPLACE/LIKE, COLUMNS(...)) would expand to the "
        "columns of the release table the query reads (its counts and internals), not to "
        "the table's attributes. Name the attributes: SELECT <columns>, COUNT(*) FROM "
        f"{table.name} GROUP BY <columns>")
