"""How a SELECT joins a logical table: the columns of its ``USING`` joins, and whether
an outer join can pad the table's side with rows of NULLs (:mod:`~dpsql.planner.
find_references` refuses row counts over such a join: SQL counts a padded row as 1, and
the released counts have nothing to back it). The joins that cannot be answered from
released counts are refused here, naming what to write instead: NATURAL (it would join
on whichever columns the node rows happen to carry) and POSITIONAL (node rows are not
records). An inner or semi join whose condition compares an attribute (``t.n = p.w``)
keeps none of the rows where it is NULL, as a WHERE predicate false on NULL does
(:func:`null_rejected`)."""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner._names import conjuncts_of

_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between)
"""Conditions whose value is NULL, so never true, where their first operand (or, for the
comparisons, either operand) is NULL: not ``IS [NOT] DISTINCT FROM``."""


def null_rejected(table: exp.Table, joins: list[exp.Join], owned) -> list[exp.Column]:
    """The columns of ``table`` (``owned(col)``) that a join drops the NULL rows of: an
    operand of a comparison or ``BETWEEN`` (``t.n = p.w``, ``t.n BETWEEN p.a AND p.b``),
    or the column of ``t.n IS NOT NULL``, that is an AND-ed term of the ``ON`` of an
    inner join, or of a semi join whose left side ``table`` is. Such a row never
    matches, so the join keeps none of them: the query counts the rows where the column
    has a value, which a view that dropped its NULLs (``on_null = "drop"``) holds. Outer
    joins keep their left rows (and ANTI joins the unmatched ones, NULLs included), so
    their conditions drop nothing."""
    out: list[exp.Column] = []
    for j in joins:
        kind, on = (j.kind or "").upper(), j.args.get("on")
        if on is None or j.side or j.method or kind not in ("", "INNER", "SEMI") or (
                kind == "SEMI" and j.this is table):
            continue
        for c in conjuncts_of(on):
            if _is_not_null(c):  # t.n IS NOT NULL
                sides = [c.this.this]
            elif not isinstance(c, _NULL_REJECTING):
                continue
            else:
                sides = [c.this] if isinstance(c, exp.Between) else [c.this, c.expression]
            for x in sides:
                while isinstance(x, exp.Paren):
                    x = x.this
                if isinstance(x, exp.Column) and owned(x):
                    out.append(x)
    return out


def _is_not_null(c: exp.Expression) -> bool:
    return isinstance(c, exp.Not) and isinstance(c.this, exp.Is) \
        and isinstance(c.this.expression, exp.Null)


def using_keys(table: exp.Table, joins: list[exp.Join]) -> tuple[str, ...]:
    """The columns of ``USING (...)`` joins of the SELECT; a NATURAL join with the private
    table is refused: it joins on every shared column name, and the node rows carry only
    the columns the query names, so it would join on the wrong ones."""
    keys: list[str] = []
    for j in joins:
        if (j.method or "").upper() == "NATURAL":
            raise UnsupportedQueryError(
                f"NATURAL JOIN with the private table {table.name!r} is not supported: name "
                "the join columns, JOIN ... USING (<attribute>) or JOIN ... ON "
                f"{table.alias_or_name}.<attribute> = <table>.<column>")
        keys += [u.name for u in j.args.get("using") or []]
    return tuple(keys)


def pads_with_nulls(table: exp.Table, joins: list[exp.Join]) -> bool:
    """True when an outer join of the SELECT can add rows of NULLs on ``table``'s side:
    its own LEFT/FULL join, or a later RIGHT/FULL join (whose left operand is everything
    joined before it). A POSITIONAL join pairs rows by their order, which is no function
    of a row's attributes (node rows are not records), so it is refused outright."""
    here = next((i for i, j in enumerate(joins) if j.this is table), -1)
    for i, j in enumerate(joins):
        if j.method.upper() == "POSITIONAL" and i >= here:  # the table is on one side
            raise UnsupportedQueryError(
                f"POSITIONAL JOIN with the private table {table.name!r} is not supported: "
                "it pairs rows by their position, and the release has no rows, only "
                "released counts; join on attributes (JOIN ... ON / USING) instead")
    if here >= 0 and joins[here].side.upper() in ("LEFT", "FULL"):
        return True
    return any(j.side.upper() in ("RIGHT", "FULL") for j in joins[here + 1:])


__all__ = ["null_rejected", "pads_with_nulls", "using_keys"]
