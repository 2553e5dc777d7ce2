"""Pass 4: rewrite each reference into a subquery over one level table.

The reference ``FROM trips AS t`` becomes ``FROM (<node rows>) AS t``: one row per
released node of the chosen level, with

* the label columns of the attributes resolved at that level (named as the analyst
  names them: ``region``, ``mode``…), so the analyst's GROUP BY / ROLLUP / CUBE /
  GROUPING SETS / HAVING / categorical WHERE / JOIN run unchanged in DuckDB;
* for binned attributes, ``<attr>_lo``/``<attr>_hi`` clipped to the query's interval,
  and ``<attr>_bin_lo``/``<attr>_bin_hi``;
* ``dp_count`` (times the overlap weight when a range bound falls inside a bin: the
  **uniform interpolation** policy: a bin contributes the fraction of its width that lies
  in the interval), ``dp_var`` and ``dp_node`` (the node id at that level: ``rowid`` of
  a dense level table, whose rows are every public node in id order; a unique row number
  over the public domain for a sparse InfTDA level, which is joined onto its public
  domain so that absent nodes read as 0 and count towards the bound).

The aggregates become sums over those rows: ``COUNT(*)`` → ``COALESCE(SUM(dp_count), 0)``;
``SUM(attr)`` → Σ count × midpoint of the (clipped) bin; ``AVG`` = that / count;
``MEDIAN``/``dp_quantile`` → ``dp_hist_quantile`` (a Python UDF: the group's histogram,
negative counts clipped to 0, uniform within a bin). The error pseudo-functions become
``dp_error(what, 'alias.view', level, LIST(dp_node), param)``, a registered Arrow UDF that
evaluates the view's error model on exactly the nodes summed into that output row (per
grouping set, so ROLLUP subtotals get their own error). For interpolated ranges the
nodes are the outer cover of the interval (partial bins counted whole), and ``dp_info``
says the error is then an approximation.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.planner.catalog import ViewInfo
from dpsql.planner.choose_view import Choice
from dpsql.planner.find_references import Reference
from dpsql.planner.parse_sql import DIALECT

import sqlglot


def q(name: str) -> str:
    """Quote an identifier for DuckDB (identifiers come from the catalog, never from the
    analyst's literals)."""
    return '"' + str(name).replace('"', '""') + '"'


def num(x: float) -> str:
    return repr(float(x))


def level_columns(view: ViewInfo, k: int) -> tuple[list[str], dict[str, int]]:
    """Label columns resolved at level k, and the bin span of each binned attribute."""
    labels: list[str] = []
    spans: dict[str, int] = {}
    for lv in view.meta.levels[:k]:
        if lv.kind == "range":
            spans[lv.attribute] = lv.span or 1
        else:
            for c in lv.columns:
                if c not in labels:
                    labels.append(c)
    return labels, spans


def node_rows_sql(ref: Reference, choice: Choice) -> str:
    """The SELECT that replaces the reference: one row per node of the chosen level."""
    view, k = choice.view, choice.level
    alias = view.alias
    lv = view.level(k)
    labels, spans = level_columns(view, k)
    attrs = ref.release.attributes
    if view.dense:
        cols = [q(c) for c in labels]
        for a in spans:
            cols += [q(f"{a}_lo"), q(f"{a}_hi"), q(f"{a}_bin_lo"), q(f"{a}_bin_hi")]
        base = (f"SELECT {', '.join(cols + ['dp_count', 'dp_var', 'rowid AS dp_node'])} "
                f"FROM {q(alias)}.{q(lv.table)}")
    else:
        parts, on, cols = [], [], []
        for i, a in enumerate(view.meta.attributes):
            meta = attrs[a]
            d = f"d{i}"
            if a in spans:
                s, kb = spans[a], meta.bins
                parts.append(
                    f"(SELECT b AS {q(a + '_bin_lo')}, LEAST(b + {s}, {kb}) AS "
                    f"{q(a + '_bin_hi')}, {num(meta.lower)} + b * {num(meta.width)} AS "
                    f"{q(a + '_lo')}, CASE WHEN b + {s} >= {kb} THEN {num(meta.upper)} ELSE "
                    f"{num(meta.lower)} + (b + {s}) * {num(meta.width)} END AS {q(a + '_hi')} "
                    f"FROM range(0, {kb}, {s}) AS r(b)) AS {d}")
                on.append(f"t.{q(a + '_bin_lo')} = {d}.{q(a + '_bin_lo')}")
                cols += [f"{d}.{q(a + c)}" for c in ("_lo", "_hi", "_bin_lo", "_bin_hi")]
            else:
                mine = [c for c in labels if c in meta.columns]
                if not mine:
                    continue
                parts.append(f"(SELECT DISTINCT {', '.join(q(c) for c in mine)} FROM "
                             f"{q(alias)}.{q(meta.domain_table)}) AS {d}")
                on += [f"t.{q(c)} = {d}.{q(c)}" for c in mine]
                cols += [f"{d}.{q(c)}" for c in mine]
        base = (f"SELECT {', '.join(cols)}, COALESCE(t.dp_count, 0) AS dp_count, "
                "CAST(NULL AS DOUBLE) AS dp_var, row_number() OVER () AS dp_node FROM "
                + " CROSS JOIN ".join(parts)
                + f" LEFT JOIN {q(alias)}.{q(lv.table)} AS t ON {' AND '.join(on)}")
    # the wrapper: range overlap, clipping and interpolation weights
    out = [q(c) for c in labels]
    where, weights = [], []
    ranges = {r.attribute: r for r in ref.ranges}
    for a in spans:
        lo_c, hi_c = q(f"{a}_lo"), q(f"{a}_hi")
        r = ranges.get(a)
        lo_e, hi_e = lo_c, hi_c
        if r is not None and r.lo is not None:
            where.append(f"{hi_c} > {num(r.lo)}")
            lo_e = f"GREATEST({lo_c}, {num(r.lo)})"
        if r is not None and r.hi is not None:
            where.append(f"{lo_c} < {num(r.hi)}")
            hi_e = f"LEAST({hi_c}, {num(r.hi)})"
        if r is not None and not choice.aligned:
            weights.append(f"(({hi_e}) - ({lo_e})) / ({hi_c} - {lo_c})")
        out += [f"{lo_e} AS {lo_c}", f"{hi_e} AS {hi_c}", q(f"{a}_bin_lo"), q(f"{a}_bin_hi")]
    count = "dp_count" if not weights else "dp_count * " + " * ".join(weights)
    out += [f"{count} AS dp_count", "dp_var", "dp_node"]
    sql = f"SELECT {', '.join(out)} FROM ({base}) AS b"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql


def rewrite_reference(ref: Reference, choice: Choice) -> None:
    """Rewrite ``ref`` in place inside its (already copied) tree."""
    select, a = ref.select, ref.alias
    A = exp.to_identifier(a, quoted=True)

    def col(name: str) -> exp.Column:
        return exp.column(name, table=A.copy(), quoted=True)

    def count_sum() -> exp.Expression:
        return exp.func("COALESCE", exp.Sum(this=col("dp_count")), exp.Literal.number(0))

    def err(what: str, param: float | None) -> exp.Expression:
        return exp.Anonymous(this="dp_error", expressions=[
            exp.Literal.string(what), exp.Literal.string(choice.view.key),
            exp.Literal.number(choice.level),
            exp.Anonymous(this="LIST", expressions=[col("dp_node")]),
            exp.Literal.number(param if param is not None else 0.0)])

    def mid(attr: str) -> exp.Expression:
        return exp.Div(this=exp.Paren(this=exp.Add(this=col(f"{attr}_lo"),
                                                   expression=col(f"{attr}_hi"))),
                       expression=exp.Literal.number(2))

    # keep the output names the analyst would get from DuckDB
    for i, e in enumerate(list(select.expressions)):
        if isinstance(e, exp.Alias):
            continue
        if any(any(p is e for p in _ancestors(x.node)) for x in ref.aggregates):
            name = "count_star()" if (isinstance(e, exp.Count) and
                                      isinstance(e.this, exp.Star)) \
                else e.sql(DIALECT, normalize_functions="lower")
            wrapper = exp.Alias(alias=exp.to_identifier(name, quoted=True))
            e.replace(wrapper)
            wrapper.set("this", e)
    for agg in ref.aggregates:
        node = _find_same(select, agg.node)
        if agg.kind == "count":
            new = count_sum()
        elif agg.kind == "sum":
            new = exp.func("COALESCE", exp.Sum(this=exp.Mul(this=col("dp_count"),
                                                            expression=mid(agg.attribute))),
                           exp.Literal.number(0))
        elif agg.kind == "avg":
            new = exp.Div(this=exp.Sum(this=exp.Mul(this=col("dp_count"),
                                                    expression=mid(agg.attribute))),
                          expression=exp.func("NULLIF", exp.Sum(this=col("dp_count")),
                                              exp.Literal.number(0)))
        elif agg.kind == "quantile":
            new = exp.Anonymous(this="dp_hist_quantile", expressions=[
                exp.Anonymous(this="LIST", expressions=[col("dp_count")]),
                exp.Anonymous(this="LIST", expressions=[col(f"{agg.attribute}_lo")]),
                exp.Anonymous(this="LIST", expressions=[col(f"{agg.attribute}_hi")]),
                exp.Literal.number(agg.param)])
        elif agg.kind == "stderr":
            new = err("stderr", None)
        elif agg.kind == "bound":
            new = err("bound", agg.param)
        elif agg.kind in ("ci_low", "ci_high"):
            op = exp.Sub if agg.kind == "ci_low" else exp.Add
            new = exp.Paren(this=op(this=count_sum(), expression=err("half", agg.param)))
        else:  # pragma: no cover - find_references only emits the kinds above
            raise AssertionError(agg.kind)
        node.replace(new)
    # move range predicates inside the node rows
    if ref.removed:
        where = select.args.get("where")
        keep = [c for c in _conjuncts(where.this)
                if not any(c is r for r in ref.removed)]
        if keep:
            select.set("where", exp.Where(this=exp.and_(*keep)))
        else:
            select.set("where", None)
    sub = sqlglot.parse_one(node_rows_sql(ref, choice), dialect=DIALECT)
    table = _find_same(select, ref.table)
    table.replace(exp.Subquery(this=sub, alias=exp.TableAlias(this=A.copy())))


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    return list(e.flatten()) if isinstance(e, exp.And) else [e]


def _ancestors(node: exp.Expression):
    p = node
    while p is not None:
        yield p
        p = p.parent


def _find_same(root: exp.Expression, node: exp.Expression) -> exp.Expression:
    """The node itself: references are collected on the tree being rewritten."""
    return node
