"""What each ``on_null`` policy leaves in the release, and so which NULL questions it answers.

An attribute's ``on_null`` policy (docs/spec.md) decides what the released tree holds of
the rows where the attribute is NULL:

* ``"error"``: the release was built only because the attribute had no NULL (ingest
  refuses one), so it is never NULL: ``COUNT(x)`` is ``COUNT(*)``, ``x IS NOT NULL``
  keeps every row and ``x IS NULL`` keeps none (its count is exactly 0, as the data's).
* ``"category"``: NULL is a released node of its own, answered as SQL would:
  ``COUNT(x)`` skips it, ``x IS NULL`` selects it.
* ``"drop"``: the views over the attribute left its NULL rows out, and the other views
  kept them. A view over it therefore holds exactly the rows where it has a value:
  ``COUNT(x)`` (and ``WHERE x IS NOT NULL``, or any predicate false on NULL) is read from
  such a view, at any level (every level counts the same rows), and ``COUNT(*)`` without
  such a predicate from a view that kept the rows. ``x IS NULL`` asks for rows that no
  view over ``x`` holds: refused with :func:`is_null_error`, which says how to get that
  count. A SELECT that takes both ``COUNT(x)`` and a count of every row asks for two
  different sets of rows that no one view holds: refused by :func:`unsafe_view_error`.

Used by :mod:`~dpsql.planner.classify_calls` (COUNT(x)),
:mod:`~dpsql.planner.find_references`, :mod:`~dpsql.planner.value_intervals` and
:mod:`~dpsql.planner.choose_view`. Its functions take the
:class:`~dpsql.planner.find_references.Reference` as ``ref`` (not imported: that module
imports this one).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.catalog import ViewInfo

_SKIPPING_KINDS = ("sum", "avg", "quantile")
"""Aggregates of an attribute that skip its NULLs, as in SQL."""
_ERROR_KINDS = ("stderr", "bound", "ci_low", "ci_high", "estimate", "estimate_stderr")
"""The error pseudo-functions: they refer to the SELECT's count, whichever rows it counts."""


def is_null_error(meta, x: str, asked: str) -> UnsupportedQueryError:
    """The refusal of ``asked`` (``x IS NULL``, or a predicate true on NULL) on the column
    ``x`` of the attribute ``meta``, whose policy is ``on_null = "drop"``: names the
    attribute and the policy, says what the release holds, and what to query instead."""
    return UnsupportedQueryError(
        f"{asked}: the release cannot count the rows where {x} is NULL. The attribute "
        f"{meta.name!r} has on_null = \"drop\" in the spec, so the views over it hold only "
        f"the rows where it has a value (its NULL rows are counted only by views without "
        f"it). Count them as COUNT(*) minus COUNT(*) WHERE {x} IS NOT NULL, each from its "
        f"own query (the first reads a view without {meta.name!r}), or release them as a "
        f"value of their own with on_null = \"category\" in the spec")


def null_safe(ref, view: ViewInfo) -> bool:
    """True when ``view`` holds every row that ``ref`` counts: for each attribute whose
    NULL rows the view dropped, the query leaves those rows out too: a WHERE predicate on
    it that is false on NULL, or only aggregates that skip its NULLs (``COUNT(x)``,
    ``SUM``/``AVG``/quantiles of it, and the error functions of that count)."""
    for a in view.null_dropped:
        if a not in ref.non_null and not skips_nulls(ref, a):
            return False
    return True


def skips_nulls(ref, attribute: str) -> bool:
    """True when every aggregate of ``ref`` leaves out the rows where ``attribute`` is
    NULL (and it has one that counts or measures it), and the SELECT does not use the
    attribute outside them (``GROUP BY x`` has a NULL group in SQL, which no view over
    ``x`` holds)."""
    if attribute not in ref.counted and attribute not in ref.measured:
        return False
    if _used_outside_aggregates(ref, attribute):
        return False
    return all(g.kind in _ERROR_KINDS
               or (g.kind == "count" and g.skips == attribute)
               or (g.kind in _SKIPPING_KINDS and g.attribute == attribute)
               for g in ref.aggregates)


def _used_outside_aggregates(ref, attribute: str) -> bool:
    """A label column of ``attribute`` in the SELECT outside its aggregates and WHERE
    ranges, or a grouping by its bins."""
    meta = ref.release.attributes[attribute]
    return any(c in ref.columns for c in meta.columns) \
        or any(g.attribute == attribute for g in ref.bins)


def _join_on(ref, attribute: str):
    """(join, its ON condition) of the first join of ``ref``'s SELECT whose condition
    names a column of ``attribute`` of the reference, or None."""
    meta = ref.release.attributes[attribute]
    names = {c.lower() for c in (meta.name, *meta.columns)}
    alias = ref.alias.lower()
    for j in ref.select.args.get("joins") or ():
        on = j.args.get("on")
        if on is not None and any(
                c.name.lower() in names and (not c.table or c.table.lower() == alias)
                for c in on.find_all(exp.Column)):
            return j, on
    return None


def _column(ref, attribute: str) -> str:
    """The column to name for ``attribute``: the one of its columns that the SELECT
    uses, else its finest (a hierarchy's last level), else its name."""
    meta = ref.release.attributes[attribute]
    if meta.kind == "range":
        return meta.name
    return next((c for c in meta.columns if c in ref.columns), meta.columns[-1])


def unsafe_view_error(ref, view: ViewInfo) -> UnsupportedQueryError:
    """The refusal of ``ref`` when every view covering it dropped NULL rows that it
    counts (``view``: the first of them)."""
    dropped = sorted(a for a in view.null_dropped
                     if a not in ref.non_null and not skips_nulls(ref, a))
    unclear = [(a, c) for a, c in ref.unclear_nulls if a in dropped]
    if unclear:
        a, c = unclear[0]
        names = {n.lower() for n in ref.release.attributes[a].columns}
        x = next((col.name for col in c.find_all(exp.Column) if col.name.lower() in names),
                 _column(ref, a))
        sql = c.sql("duckdb")
        return UnsupportedQueryError(
            f"the WHERE condition {sql} may keep rows where {x} is NULL (the planner "
            f"reads its value there only for comparisons, IN, LIKE, IS [NOT] NULL, "
            f"COALESCE and CASE of {x} with constants), which the release does not "
            f"hold: the views over {a!r} leave its NULL rows out (on_null = \"drop\" in "
            f"the spec). If the condition is never TRUE where {x} is NULL, add AND {x} IS "
            f"NOT NULL to it, which keeps the same rows")
    grouped = [a for a in dropped if _used_outside_aggregates(ref, a)]
    if grouped:
        a = grouped[0]
        x = _column(ref, a)
        joined = _join_on(ref, a)
        if joined is not None:
            j, on = joined
            how = " ".join(w for w in (j.method, j.side, j.kind) if w).upper()
            return UnsupportedQueryError(
                f"the condition {on.sql('duckdb')} of this {how + ' ' if how else ''}JOIN "
                f"may keep rows where {x} is NULL, which the release does not hold: the "
                f"views over {a!r} leave its NULL rows out (on_null = \"drop\" in the "
                f"spec). Only an inner or SEMI join on a comparison of {x} (=, <>, <, <=, "
                f">, >=, BETWEEN: never true on NULL) leaves them out; an outer or ANTI "
                f"join keeps its unmatched rows, and IS NOT DISTINCT FROM matches NULL. Add "
                f"WHERE {x} IS NOT NULL to leave those rows out")
        return UnsupportedQueryError(
            f"this query uses {x} outside its aggregates (GROUP BY, SELECT...), so in SQL "
            f"it has a group where {x} is NULL, which the release does not hold: the views "
            f"over {a!r} leave its NULL rows out (on_null = \"drop\" in the spec). Add WHERE "
            f"{x} IS NOT NULL (or another predicate on it) to leave that group out")
    counted = [a for a in dropped if a in ref.counted]
    if counted:
        a = counted[0]
        mine = next(g.node for g in ref.aggregates if g.skips == a)
        col = mine.this.name
        others = list(dict.fromkeys(g.node.sql("duckdb") for g in ref.aggregates
                                    if g.kind not in _ERROR_KINDS and g.skips != a))
        verb = "counts" if len(others) == 1 else "count"
        return UnsupportedQueryError(
            f"{mine.sql('duckdb')} counts the rows where {col} has a value, and "
            f"{', '.join(others)} in the same SELECT {verb} the rows where it is NULL too; no view holds both: the views "
            f"over {a!r} leave its NULL rows out (on_null = \"drop\" in the spec). Take "
            f"them from two queries, or add WHERE {col} IS NOT NULL to count only the rows "
            f"that have a value")
    names = " or ".join(dropped)
    return UnsupportedQueryError(
        f"every view that covers this query leaves out the rows where {names} is NULL "
        f"(on_null = \"drop\" in the spec), which this query counts; add WHERE "
        f"{_column(ref, dropped[0])} IS NOT NULL (or another predicate on it) to count the rows that "
        "have a value, or query attributes of a view without it")
