"""Pass 2: find every reference to a logical table and check how it is used.

For each SELECT whose FROM/JOIN names a logical table (the release name, or a view
name), this pass collects:

* the **label columns** it uses outside the aggregates (GROUP BY, SELECT, HAVING, ORDER
  BY, JOIN ON, categorical WHERE predicates). Any deterministic predicate on
  categorical/hierarchy labels is exact on the released nodes, so those predicates stay
  where the analyst wrote them and DuckDB evaluates them on the node labels;
* the **range filters** on binned attributes (``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``
  with literals, combined by AND into one interval per attribute). They are removed
  from the WHERE clause; the rewrite turns them into bin overlap weights;
* the **aggregates** (each call sorted out by :mod:`~dpsql.planner.classify_calls`):
  counts (``COUNT(*)``, ``COUNT(1)``, ``COUNT(attr)``, ``SUM(1)``), approximate
  ``SUM``/``AVG`` of a binned attribute, ``MEDIAN``/``QUANTILE_CONT``/``dp_quantile`` of
  a binned attribute, and the error pseudo-functions.

Row counts (``COUNT(*)``, ``COUNT(1)``, ``SUM(1)``) over an outer join that can pad the
private table with NULL rows are refused: SQL counts a padded row as 1, the released
counts have nothing to back it (``COUNT(attr)`` and ``SUM(dp_count)`` skip it, as SQL
does). A POSITIONAL join with the private table is refused (it pairs rows by position).

Everything else that touches the private table raises :class:`UnsupportedQueryError`
naming the construct and the supported form; nothing that could give a wrong number is
let through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.catalog import Catalog, ReleaseInfo, ViewInfo
from dpsql.planner.dropped_nulls import null_safe
from dpsql.planner._names import (conjuncts_of, home_catalog, is_named_call, long_name_binds,
                                  names_cte, output_name, scope_tables, split_columns)
from dpsql.planner.group_bins import BinGroup, bin_group, one_value_bins
from dpsql.planner.trunc_units import (compared, day_of, refuse_date_by_time, trunc_call,
                                      trunc_unit)
from dpsql.planner.date_parts import date_part_call, part_unit
from dpsql.planner.group_distinct import group_distinct
from dpsql.planner.join_bins import (JoinFilter, against_column, check_join_condition,
                                     join_filters)
from dpsql.planner.inline_subqueries import inline_hint
from dpsql.planner.joins import null_rejected, pads_with_nulls, using_keys
from dpsql.planner.classify_calls import (ERROR_FUNCTIONS, MEASURE, MEASURE_HELP, Aggregate,
                                          classify, counts_rows, enclosing_call, fn_name,
                                          not_an_attribute)
from dpsql.planner.output_aliases import alias_bound
from dpsql.planner.parse_sql import Scope, Walked, columns_below, walk_tree
from dpsql.planner.refuse_correlated import refuse_correlated
from dpsql.planner.refuse_stars import refuse_stars
from dpsql.planner.refuse_volatile import refuse_volatile
from dpsql.planner.null_rows import NullRows
from dpsql.planner.predicate_truth import predicate_truth
from dpsql.planner.value_subqueries import value_subquery
from dpsql.planner.value_intervals import EVERYTHING, Intervals

@dataclass(frozen=True)
class RangeFilter:
    """The part of one binned attribute's axis that the WHERE clause keeps: the interval
    from ``lo`` to ``hi`` (None = unbounded; the axis is continuous, so open and closed
    bounds coincide), or when ``pieces`` is not None exactly those disjoint half-open
    intervals inside it (``()``: nothing). Predicates on integer and decimal attributes
    arrive here already widened to whole values (:mod:`~dpsql.planner.value_intervals`)."""

    attribute: str
    lo: float | None
    hi: float | None
    pieces: tuple[tuple[float, float], ...] | None = None
    null: bool | None = None
    """For an attribute with a NULL node (``on_null = "category"``): whether the filter
    keeps it (``IS NULL``, ``OR x IS NULL``); None for the others."""

    @classmethod
    def of(cls, attribute: str, pieces: Intervals, null: bool | None = None
           ) -> "RangeFilter":
        if not pieces:
            return cls(attribute, None, None, (), null)
        lo, hi = pieces[0][0], pieces[-1][1]
        return cls(attribute, lo if math.isfinite(lo) else None,
                   hi if math.isfinite(hi) else None,
                   None if len(pieces) == 1 else tuple(pieces), null)

    def edges(self) -> tuple[float, ...]:
        """Every finite bound of the kept intervals."""
        if self.pieces is None:
            return tuple(x for x in (self.lo, self.hi) if x is not None)
        return tuple(x for p in self.pieces for x in p if math.isfinite(x))


@dataclass(frozen=True)
class Reference:
    """One use of a logical table inside one SELECT."""

    select: exp.Select
    table: exp.Table
    alias: str
    release: ReleaseInfo
    candidates: tuple[ViewInfo, ...]
    columns: frozenset[str]  # label columns used outside aggregates
    ranges: tuple[RangeFilter, ...]
    aggregates: tuple[Aggregate, ...]
    removed: tuple[exp.Expression, ...] = field(default=())  # WHERE conjuncts moved inside
    calls: tuple[exp.Expression, ...] = field(default=(), compare=False, repr=False)
    """The aggregate and anonymous function calls of the SELECT's own scope."""
    plain_columns: tuple[exp.Column, ...] | None = field(default=None, compare=False,
                                                         repr=False)
    """Columns of the SELECT outside its WHERE, GROUP BY, FROM and JOINs and outside its
    aggregates; None when the SELECT has a WITH or a nested query (whose nodes the scope
    walk does not visit), so that a pass needing them must walk the tree itself."""
    long_names: tuple[exp.Column, ...] = field(default=(), compare=False, repr=False)
    """Label columns of the scope qualified by more than the table (``main.trips.region``,
    ``trips.trips.region``): the rewrite reads the release under the reference's alias,
    which a longer qualifier no longer names, so it shortens them to the alias."""
    measured: frozenset[str] = frozenset()
    """Binned attributes whose distribution an aggregate needs (leaf level): those of
    the SUM, AVG and quantile aggregates."""
    bins: tuple[BinGroup, ...] = ()
    """Groupings by binned attributes (:mod:`~dpsql.planner.group_bins`)."""
    non_null: frozenset[str] = frozenset()
    """Attributes whose NULL rows the WHERE clause leaves out (a conjunct on the
    attribute alone that is false on NULL, as every comparison is): a view that dropped
    those NULLs (``on_null = "drop"``) answers such a reference as the data would."""
    truncs: tuple[tuple[exp.Column, str, str], ...] = field(default=(), compare=False)
    """``date_trunc(unit, attr)`` of a date or timestamp attribute outside the aggregates
    (SELECT, GROUP BY, ORDER BY...), and a date part of it (``year(attr)``: a function
    of ``date_trunc('year', attr)``, :mod:`~dpsql.planner.date_parts`): (the column
    node, the attribute, the unit). The
    chosen level's nodes each lie in one unit (:func:`dpsql.domains.calendar.trunc_aligned`)
    and the rewrite puts each node's first date or timestamp in the column's place, so
    that DuckDB's own ``date_trunc`` groups whole nodes. A date part in a JOIN condition
    (``year(t.m) = p.v``) is one too, with the unit it is a function of
    (:func:`~dpsql.planner.date_parts.part_unit`)."""

    counted: frozenset[str] = frozenset()
    """Attributes with ``on_null = "drop"`` of which the SELECT takes ``COUNT(attr)``:
    the count of the rows where it has a value, read from a view over it."""
    unclear_nulls: tuple[tuple[str, exp.Expression], ...] = field(default=(), compare=False)
    """(attribute, WHERE conjunct) where the conjunct's value on the attribute's NULL
    rows is not known to the planner (``upper(cd) = 'A'``): for the refusal's words."""
    join_filters: tuple[JoinFilter, ...] = ()
    """Terms of a join's ``ON`` on one binned attribute and constants (``t.y < 50``):
    the chosen level's nodes lie inside or outside each (:mod:`~dpsql.planner.join_bins`)."""

    def null_safe(self, view: ViewInfo) -> bool:
        """True when ``view`` holds every row this reference counts
        (:func:`~dpsql.planner.dropped_nulls.null_safe`)."""
        return not view.null_dropped or null_safe(self, view)

    @property
    def trunc_units(self) -> frozenset[tuple[str, str]]:
        """(attribute, unit) of each ``date_trunc(unit, attribute)``."""
        return frozenset((a, u) for _, a, u in self.truncs)

    def needed_attributes(self) -> frozenset[str]:
        out = set(self.measured) | {r.attribute for r in self.ranges} | self.counted
        out |= {a for _, a, _ in self.truncs}
        out.update(g.attribute for g in self.bins)
        out.update(f.attribute for f in self.join_filters)
        for c in self.columns:
            a = self.release.column_attribute(c)
            if a is not None:
                out.add(a.name)
        return frozenset(out)


def find_references(tree: exp.Expression, catalog: Catalog,
                    walked: Walked | None = None) -> tuple[Reference, ...]:
    """Every logical-table reference in ``tree``, checked; raises on unsupported use.
    ``walked`` is :func:`~dpsql.planner.parse_sql.parse_walked`'s index of the nodes of
    ``tree``, if the caller has it (the tree is then walked once per query, not once per
    question asked of it)."""
    if walked is None:
        walked = walk_tree(tree)
    scopes = walked.scopes
    # quick test before names_cte
    cte_names = {c.alias_or_name.lower() for c in walked.ctes} if walked.ctes else ()
    resolve = catalog.resolve_table
    refs: list[Reference] = []
    claimed: set[int] = set()
    for select in walked.selects:
        tables = scope_tables(select)
        logical = None
        for t in tables:
            name = t.name
            if cte_names and name.lower() in cte_names and names_cte(t):
                continue
            hit = resolve(home_catalog(t), name)
            if hit is not None:
                if logical is not None:
                    raise UnsupportedQueryError(
                        "joining two private tables row by row is not supported; aggregate "
                        "each in its own CTE (WITH a AS (SELECT ..., COUNT(*) ... GROUP BY "
                        "...)) and join the aggregated results")
                logical = (t, hit)
                claimed.add(id(t))
        if logical is not None:
            t, (release, views) = logical
            refs.append(_analyse(select, t, release, views, tables, scopes[id(select)],
                                 resolve))
        else:
            _refuse_orphan_error_functions(scopes[id(select)])
    for t in walked.tables:
        if id(t) in claimed:
            continue
        if cte_names and t.name.lower() in cte_names and names_cte(t):
            continue
        if resolve(home_catalog(t), t.name):
            raise UnsupportedQueryError(
                f"the private table {t.name!r} may only appear in the FROM or JOIN clause of "
                "an aggregating SELECT (SELECT ..., COUNT(*) FROM "
                f"{t.name} GROUP BY ...)")
    units = {r.release.units_key() for r in refs} if len(refs) > 1 else ()
    if len(units) > 1:
        raise UnsupportedQueryError(
            "this query combines releases with different privacy units or neighbouring "
            f"relations ({sorted(map(str, units))}); their counts are not comparable. Query "
            "each release separately")
    return tuple(refs)


# --------------------------------------------------------------------------------------

def _refuse_orphan_error_functions(scope: Scope) -> None:
    for node in scope.calls:
        if isinstance(node, exp.Anonymous) and fn_name(node) in ERROR_FUNCTIONS:
            raise UnsupportedQueryError(
                f"{fn_name(node)}() must be used in the SELECT that computes COUNT(*) over "
                "the release (it refers to that row's count)")


def _analyse(select: exp.Select, table: exp.Table, release: ReleaseInfo,
             views: tuple[ViewInfo, ...], tables: list[exp.Table], sc: Scope,
             resolve) -> Reference:
    alias = table.alias_or_name
    alias_l = alias.lower()
    attrs = release.attributes
    column_attribute = release.column_attribute
    scope_columns, scope_calls = sc.columns, sc.calls
    args = select.args
    joins = args.get("joins")
    # alone in its FROM, every unqualified column that is not an output alias is ours
    alone = len(tables) == 1 and not joins
    out_aliases: set[str] = set()
    star = False  # SELECT * or <alias>.*: refused below, after the alias check
    for e in select.expressions:
        if isinstance(e, exp.Alias):
            out_aliases.add(e.alias.lower())
        elif isinstance(e, exp.Star) or (isinstance(e, exp.Column) and
                                         isinstance(e.this, exp.Star)
                                         and (not e.table or e.table.lower() == alias_l)):
            star = True
        elif is_named_call(e):  # ORDER BY count: the name rewrite_query gives COUNT(*)
            out_aliases.add(output_name(e))

    def owned(col: exp.Column) -> bool:
        q = col.table
        if q:
            return q.lower() == alias_l and (
                not col.args.get("db") or long_name_binds(col, table, release))
        name = col.name
        if column_attribute(name) is not None:
            return True
        return alone and name.lower() not in out_aliases

    def measure(col: exp.Column) -> bool:
        """``dp_count`` of this reference (qualified by its alias, or unqualified and not
        an output alias of the SELECT, which ORDER BY / HAVING may name; inside a call
        it is always the table's column, as in ``SUM(dp_count) AS dp_count``)."""
        if col.name.lower() != MEASURE:
            return False
        q = col.table
        if q:
            return q.lower() == alias_l
        return enclosing_call(col) is not None or MEASURE not in out_aliases

    shadowed = out_aliases & release.internal_columns
    if shadowed:
        for col, arg in zip(scope_columns, sc.column_args):
            if arg in _ALIAS_BINDING_ARGS and not col.table and col.name.lower() in shadowed:
                raise UnsupportedQueryError(
                    f"the output alias {col.name!r} is used in {arg.upper().rstrip('_')}, and "
                    f"{col.name!r} is also a column of the release tables that the query "
                    "reads (which DuckDB would bind there instead of the alias); rename the "
                    "alias, or repeat its expression")

    if star:
        raise UnsupportedQueryError(
            f"SELECT * on the private table {table.name!r} is not supported: there are no "
            "rows, only released counts. Write SELECT <columns>, COUNT(*) FROM "
            f"{table.name} GROUP BY <columns>")

    refuse_stars(sc, table, alias_l)

    if args.get("sample") is not None or table.args.get("sample") is not None:
        raise UnsupportedQueryError(
            f"sampling the private table {table.name!r} (USING SAMPLE / TABLESAMPLE) is not "
            "supported: its rows are released counts, not records, so a sample of them is "
            "no sample of the data; query the whole table")

    padded = bool(joins) and pads_with_nulls(table, joins)
    using = using_keys(table, joins) if joins else ()

    # ---- WHERE: range predicates move inside, the rest stays
    ranges: dict[str, Intervals] = {}
    null_rows = NullRows(release, owned)  # the clause on each attribute's NULL rows
    drops_nulls = any(v.null_dropped for v in views)  # else no view cares (no walk)
    removed: list[exp.Expression] = []
    removed_ids: set[int] = set()  # the scope's columns in them
    nested_labels: set[str] = set()
    where = args.get("where")

    def correlated(inner: list[exp.Column], c: exp.Expression, qualified: bool = False,
                   in_where: bool = True) -> None:
        """A nested query's columns are its own, but for our attributes: a label's level
        must carry it, a binned one is refused (``qualified``: only names qualified by
        our alias count, as in a derived table of the FROM clause)."""
        for x in inner:
            a = column_attribute(x.name)
            if a is None or (x.table and x.table.lower() != alias_l) or (
                    qualified and not x.table):
                continue
            if a.kind != "range":
                nested_labels.add(release.column_name(x.name))  # its level must carry it
            else:
                refuse_correlated(x, a, c, select, table.name, resolve, in_where)

    if sc.nested:  # queries nested outside WHERE: the SELECT list, HAVING, ORDER BY...
        for key, value in args.items():
            if key in ("where", "with", "with_"):
                continue
            for part in value if isinstance(value, list) else [value]:
                inner = split_columns(part)[1] if isinstance(part, exp.Expression) else ()
                if inner:  # a derived table names its own columns, but under LATERAL
                    correlated(inner, part, key in ("from", "from_", "joins")
                               and part.find(exp.Lateral) is None, in_where=False)
    for c in conjuncts_of(where.this) if where is not None else ():
        if sc.nested:  # a nested query may sit in it: its columns and ORs are its own
            c_columns, inner, has_or = split_columns(c)
        else:
            c_columns, has_or = columns_below(c)
            inner = ()
        if any(map(measure, c_columns)) or any(map(measure, inner)):
            raise UnsupportedQueryError(
                f"dp_count in WHERE ({c.sql('duckdb')!r}) is not supported: {MEASURE_HELP}; "
                "to filter on the count, use HAVING SUM(dp_count) > x")
        correlated(inner, c)
        col_attrs: set[str] = set()
        range_attr = None  # the first binned attribute among them
        for x in c_columns:
            if not owned(x):
                continue
            a = column_attribute(x.name)
            if a is None:
                col_attrs.add(x.name)
            else:
                col_attrs.add(a.name)
                if range_attr is None and a.kind == "range":
                    range_attr = a.name  # declared spelling
        if not col_attrs:
            null_rows.constant(c)
            continue
        if has_or and len(col_attrs) > 1:
            raise UnsupportedQueryError(
                f"OR across attributes ({', '.join(sorted(col_attrs))}) is not supported; "
                "combine predicates with AND, use IN for several values of one attribute, or "
                "UNION ALL two queries")
        if range_attr is None:
            if drops_nulls and len(col_attrs) == 1:
                null_rows.label(c, next(iter(col_attrs)))
            continue
        if value_subquery(c, attrs[range_attr], _column_test(range_attr, owned)):
            continue  # k IN (SELECT ...) on one-value bins: stays, on each node's value
        truth = predicate_truth(c, attrs[range_attr], _column_test(range_attr, owned))
        ranges[range_attr] = null_rows.range(c, range_attr, truth).true  # the AND
        removed.append(c)
        removed_ids.update(map(id, c_columns))

    non_null, nulls = null_rows.settle(lambda a: _column_test(a, owned))
    filters = join_filters(joins, owned, release) if joins else []  # ON ... AND t.y < 50
    for f in filters:
        removed_ids.update(map(id, f.condition.find_all(exp.Column)))
    for x in null_rejected(table, joins, owned) if joins else ():  # JOIN ... ON t.n = p.w
        a = column_attribute(x.name)
        if a is not None:
            non_null.add(a.name)

    # ---- aggregates
    aggregates: list[Aggregate] = []
    inside: set[int] = set()  # the scope's columns in them
    for node in scope_calls:  # classify answers None for every other node
        node_columns = columns_below(node)[0]
        agg = classify(node, node_columns, owned, release, measure)
        if agg is None:
            continue
        aggregates.append(agg)
        inside.update(map(id, node_columns))
    kinds = {a.kind for a in aggregates}
    measured = frozenset() if kinds.isdisjoint(_DISTRIBUTION_KINDS) else frozenset(
        a.attribute for a in aggregates if a.kind in _DISTRIBUTION_KINDS and a.attribute)

    if padded:
        for agg in aggregates:
            if agg.kind == "count" and counts_rows(agg.node):
                raise UnsupportedQueryError(
                    f"{agg.node.sql('duckdb')} over an outer join that can pad the private "
                    f"table {table.name!r} with NULL rows is not supported: SQL counts each "
                    "padded row as 1, yet it holds no private rows. Count the private rows "
                    f"with COUNT({alias}.<attribute>), which is 0 where nothing matched")

    if args.get("group") is None and not aggregates:
        group_distinct(select)  # SELECT DISTINCT <labels> becomes GROUP BY ALL (in args)
    if args.get("group") is None and kinds.isdisjoint(_MEASURING_KINDS):
        if any(measure(x) for x in scope_columns):
            raise UnsupportedQueryError(
                f"the bare column dp_count is not supported: {MEASURE_HELP}")
        raise UnsupportedQueryError(
            f"row-level access to the private table {table.name!r} is not supported; "
            f"aggregate it: SELECT <columns>, COUNT(*) FROM {table.name} GROUP BY <columns>"
            + inline_hint(select))

    refuse_volatile(select, table.name)  # after DISTINCT became GROUP BY ALL

    # ---- label columns used anywhere else in the scope
    columns: set[str] = set()
    truncs: list[tuple[exp.Column, str, str]] = []
    bins: list[BinGroup] = []
    long_names: list[exp.Column] = []
    plain: list[exp.Column] | None = None if sc.nested else []
    outputs = alias_bound(select, out_aliases, scope_columns, sc.column_args)
    for node, arg in zip(scope_columns, sc.column_args):
        if id(node) in inside or id(node) in outputs:  # outputs: DuckDB binds the alias
            continue
        if plain is not None and arg not in PLACING_ARGS:
            plain.append(node)
        if id(node) in removed_ids:  # in WHERE, a placing argument
            continue
        name = node.name
        lname = name.lower()
        if lname == MEASURE and measure(node):
            raise UnsupportedQueryError(
                f"the bare column dp_count is not supported: {MEASURE_HELP}")
        # owned(node), with the name and its attribute looked up once
        q = node.table
        a = column_attribute(name)
        if q:
            if q.lower() != alias_l or (node.args.get("db") and
                                         not long_name_binds(node, table, release)):
                continue
        elif a is None and not (alone and lname not in out_aliases):
            continue
        if a is None:
            raise not_an_attribute(name, release)
        call = trunc_call(node) if a.kind == "range" else None
        if call is not None:
            truncs.append((node, a.name, trunc_unit(call, a)))
            if compared(call) and not (arg == "joins" and against_column(
                    call)):  # as in WHERE (trunc_predicates), so that no answer
                refuse_date_by_time(call, a)  # differs from DuckDB's
            continue
        if a.kind == "range" and day_of(node, a):  # CAST(ts AS DATE): its day
            truncs.append((node, a.name, "day"))
            continue
        part = date_part_call(node) if a.kind == "range" else None
        if part is not None:  # year(d), extract(dow FROM d): a function of a date_trunc
            try:
                truncs.append((node, a.name, part_unit(*part, a)))
                continue
            except UnsupportedQueryError:
                if arg != "joins":  # in a JOIN condition: the JOIN refusal (bin_group)
                    raise
        if a.kind == "range":
            # a JOIN condition needs no GROUP BY: it keeps or drops each node's bin
            # (group_bins answers it where a bin holds one value, as a row does)
            if args.get("group") is None and arg not in ("joins", "where"):
                raise UnsupportedQueryError(
                    f"the binned attribute {a.name!r} can only be used in range predicates "
                    f"(WHERE {a.name} BETWEEN lo AND hi, <, <=, >, >=), inside SUM/AVG/"
                    f"MEDIAN/dp_quantile, or grouped: SELECT {a.name}, COUNT(*) FROM "
                    f"{table.name} GROUP BY {a.name} (one row per released bin)")
            if not aggregates:  # the bins, with no count: not the data's values
                raise UnsupportedQueryError(
                    f"grouping by the binned attribute {a.name!r} without an aggregate "
                    f"would list its bins, not values of the data (a tool that draws a "
                    f"histogram from them would draw every bin once): count them, SELECT "
                    f"{a.name}, COUNT(*) FROM {table.name} GROUP BY {a.name}; the bins "
                    f"themselves are public, in {a.domain_table}")
            def level_widths(a=a) -> tuple[float, ...]:
                return tuple((lv.span or 1) * a.width for v in views
                             for lv in v.attribute_levels.get(a.name, ()))
            group = bin_group(node, arg, a, level_widths)
            if arg == "joins" and group.bucket is None:  # read as its bin: where exact
                check_join_condition(node, a, level_widths)
            bins.append(group)
            continue
        columns.add(release.column_name(name))
        if node.args.get("db"):
            long_names.append(node)
    for agg in aggregates:  # COUNT(attr) of a NULL category: its level must carry attr
        if agg.kind == "count" and agg.attribute and agg.attribute in attrs \
                and attrs[agg.attribute].kind == "range":
            if agg.attribute not in ranges:  # any level with its nodes (the NULL one too)
                ranges[agg.attribute], nulls[agg.attribute] = EVERYTHING, True
        elif agg.kind == "count" and agg.attribute:
            columns.add(agg.attribute)
    for name in using:  # USING (col): a join key the node rows must carry
        a = column_attribute(name)
        if a is not None and a.kind == "range":  # its node rows carry bins, not values
            raise UnsupportedQueryError(
                f"JOIN ... USING ({name}) with the binned attribute {a.name!r} is not "
                "supported: the release holds its bins, not a value per row. "
                + (f"Its bins hold one value each: write the condition with ON "
                   f"({alias}.{a.name} = <table>.{a.name}), or count" if one_value_bins(a)
                   else "Count")
                + f" by {a.name} first and join the released bins: WITH q AS (SELECT "
                f"{a.name}, COUNT(*) AS n FROM {table.name} GROUP BY {a.name}) SELECT ... "
                f"FROM q JOIN ... USING ({a.name})")
        if a is not None:
            columns.add(release.column_name(name))
    columns |= nested_labels

    if "count" not in kinds and not kinds.isdisjoint(_ERROR_KINDS):
        raise UnsupportedQueryError(
            "dp_stderr(), dp_ci_low(), dp_ci_high(), dp_bound() and dp_estimate() refer to "
            "the row's COUNT(*): add COUNT(*) to the same SELECT")
    return Reference(select, table, alias, release, views, frozenset(columns),
                     tuple(RangeFilter.of(a, p, nulls.get(a)) for a, p in sorted(ranges.items()))
                     if ranges else (),
                     tuple(aggregates), tuple(removed), tuple(scope_calls),
                     None if plain is None else tuple(plain), tuple(long_names), measured,
                     tuple(bins), frozenset(non_null), tuple(truncs),
                     frozenset(a.skips for a in aggregates if a.skips),
                     tuple(null_rows.unknown.items()), tuple(filters))


_MEASURING_KINDS = frozenset(("count", "sum", "avg", "quantile"))


_DISTRIBUTION_KINDS = frozenset(("sum", "avg", "quantile"))
_ERROR_KINDS = frozenset(ERROR_FUNCTIONS) | {"stderr", "ci_low", "ci_high", "bound",
                                             "estimate", "estimate_stderr"}


_ALIAS_BINDING_ARGS = ("where", "group", "having", "qualify")
"""SELECT arguments where DuckDB binds a name to a source column before an output alias."""


PLACING_ARGS = ("where", "with", "with_", "from", "from_", "joins", "group")
"""SELECT arguments that place or group the rows (see ``Reference.plain_columns``)."""


def _column_test(attr: str, owned):
    def is_attr(x: exp.Expression) -> bool:
        return isinstance(x, exp.Column) and owned(x) and x.name.lower() == attr.lower()
    return is_attr
