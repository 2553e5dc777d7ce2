"""The node rows of one level of a view, as SQL: what pass 4 (:mod:`dpsql.planner.rewrite_query`)
reads a reference from.

A level's rows carry the label columns resolved at that level, the bins' bounds, the
released count and variance, and for calibrated InfTDA views each node's row code
(:mod:`dpsql.accuracy.inftda_answers`). :func:`dense_nodes_sql` writes every public node
of a sparse level (absent nodes as 0) in node-id order, for the node tables built at
attach time and for levels too large to build; :func:`level_read` memoizes the
catalog facts the rewrite needs of a level. Identifiers and numbers come from the
catalog only, never from the analyst's SQL.
"""

from __future__ import annotations

from collections.abc import Callable

from dpsql._sql import quote_ident as q
from dpsql.accuracy.inftda_support import ZERO_CHILD
from dpsql.domains.bin_edges import edge_sql
from dpsql.domains.calendar import month_edge_sql
from dpsql.planner.catalog import ViewInfo


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


def dense_nodes_sql(view: ViewInfo, k: int, attributes: dict,
                    size: Callable[[str], int] | None = None) -> str:
    """Every public node of level k of a sparse view, absent nodes as 0: the public
    domains of the level's attributes, crossed, LEFT JOINed to the level table, in node-id
    order (so ``rowid`` is the node id). Used at attach time to materialize the node
    table, and per query for levels too large to materialize.

    With ``size`` (a label column's number of public values: ``ReleaseInfo.size``) the
    rows come in no order, with a column ``dp_key``: a unique key per node, the mixed
    radix of each attribute's rank at this level (the rank of its deepest label: a leaf
    code, below the attribute's number of leaves; or a first bin, below its bins), for
    views whose error model only counts nodes (``ErrorModel.counts_nodes``). Without an
    ORDER BY or a numbering window DuckDB pushes the query's filters into the domains,
    so a filtered read of a large level costs its filtered rows, not the whole level
    (a municipality's flows in a 2.25M-node O/D level: 0.65 s -> 0.03 s).

    Node ids are tree order (:mod:`dpsql.domains`): lexicographic in the node's label at
    level 1, then at level 2, ... in the view's level order, whatever attribute each level
    refines (interleaved views alternate them). A label's rank is its domain ``code``: a
    categorical value's, or for a spine prefix the smallest leaf code under it (a spine's
    leaf codes are in tree order, so every subtree is a contiguous block); a bin's rank is
    its first bin. Ordering by the label strings would not do: domains keep the curator's
    order.

    For views whose error model reads the release's support (``reads_support``:
    calibrated InfTDA) the rows also carry ``dp_row``, the node's row code of
    :mod:`dpsql.accuracy.inftda_answers`: its row in the level table; for an absent node
    whose parent is row p of the level above, ``-2 - (p + 2³²·j)`` with j the rank of its
    own label at this level (:func:`~dpsql.accuracy.inftda_support.zero_code`: distinct
    among the parent's children, so that a join that repeats a zero repeats its code);
    ``-1`` when the parent is absent too (a LEFT JOIN onto the level above by the parent's
    labels)."""
    alias = view.alias
    lv = view.level(k)
    labels, spans = level_columns(view, k)
    parts, on, cols, rank = [], [], [], {}
    ref: dict[str, str] = {}  # label column or '<attr>_bin_lo' -> its domain column
    key = ""  # with size: the mixed-radix node key, attribute by attribute
    for i, a in enumerate(view.meta.attributes):
        meta = attributes[a]
        d = f"d{i}"
        if a in spans:
            s, kb = spans[a], meta.bins
            if meta.unit == "month":  # calendar months: the edges by calendar arithmetic
                lo_sql = month_edge_sql(meta.value_type, meta.lower, "b")
                hi_sql = month_edge_sql(meta.value_type, meta.lower, f"LEAST(b + {s}, {kb})")
            else:
                edge = (meta.lower, meta.upper, kb)  # as view_tables stores them
                lo_sql = edge_sql(*edge, "b", meta.edge_mode)
                hi_sql = (f"CASE WHEN b + {s} >= {kb} THEN {num(meta.upper)} ELSE "
                          f"{edge_sql(*edge, f'b + {s}', meta.edge_mode)} END")
            null = (f" UNION ALL SELECT {kb}, {kb + 1}, CAST(NULL AS DOUBLE), "
                    f"CAST(NULL AS DOUBLE)") if meta.null_category else ""  # its NULL node
            parts.append(
                f"(SELECT b AS {q(a + '_bin_lo')}, LEAST(b + {s}, {kb}) AS "
                f"{q(a + '_bin_hi')}, {lo_sql} AS {q(a + '_lo')}, {hi_sql} AS "
                f"{q(a + '_hi')} FROM range(0, {kb}, {s}) AS r(b){null}) AS {d}")
            on.append(f"t.{q(a + '_bin_lo')} = {d}.{q(a + '_bin_lo')}")
            cols += [f"{d}.{q(a + c)}" for c in ("_lo", "_hi", "_bin_lo", "_bin_hi")]
            rank[a] = ref[a + "_bin_lo"] = f"{d}.{q(a + '_bin_lo')}"
            if size is not None:
                radix = kb + 1 if meta.null_category else kb
                key = (f"({key}) * {radix} + " if key else "") + rank[a]
        else:
            mine = [c for c in labels if c in meta.columns]  # a spine prefix, coarse first
            if not mine:
                continue
            keys = [q(c) for c in mine]
            ranks = [f"MIN(MIN(code)) OVER (PARTITION BY {', '.join(keys[:j + 1])}) AS "
                     f"{q('rank_' + c)}" for j, c in enumerate(mine[:-1])]
            ranks.append(f"MIN(code) AS {q('rank_' + mine[-1])}")
            parts.append(f"(SELECT {', '.join(keys)}, {', '.join(ranks)} FROM "
                         f"{q(alias)}.{q(meta.domain_table)} GROUP BY {', '.join(keys)}) "
                         f"AS {d}")
            on += [f"t.{q(c)} IS NOT DISTINCT FROM {d}.{q(c)}" for c in mine]  # NULL:
            # the released value of a NULL category
            cols += [f"{d}.{q(c)}" for c in mine]
            ref.update({c: f"{d}.{q(c)}" for c in mine})
            rank.update({c: f"{d}.{q('rank_' + c)}" for c in mine})
            if size is not None:  # radix: the attribute's number of leaves
                key = (f"({key}) * {size(meta.columns[-1])} + " if key else "") \
                    + rank[mine[-1]]
    base = (f"SELECT {', '.join(cols)}, COALESCE(t.dp_count, 0) AS dp_count, "
            "t.dp_var AS dp_var")
    joined = (" FROM " + " CROSS JOIN ".join(parts)
              + f" LEFT JOIN {q(alias)}.{q(lv.table)} AS t ON {' AND '.join(on)}")
    if view.model.reads_support:
        parent_row = "0"  # level 1: the root is row 0
        if k > 1:
            p_labels, p_spans = level_columns(view, k - 1)
            p_on = [f"p.{q(c)} = {ref[c]}" for c in p_labels] + [
                f"p.{q(a + '_bin_lo')} = ({ref[a + '_bin_lo']} // {s}) * {s}"
                for a, s in p_spans.items()]
            joined += (f" LEFT JOIN {q(alias)}.{q(view.level(k - 1).table)} AS p ON "
                       + " AND ".join(p_on))
            parent_row = "p.rowid"
        child = rank[lv.attribute if lv.kind == "range" else lv.columns[-1]]
        base += (f", COALESCE(t.rowid, -2 - ({parent_row} + {ZERO_CHILD} * {child}), -1) "
                 "AS dp_row")
    if size is not None:
        return f"{base}, {key} AS dp_key{joined}"
    order: list[str] = []
    for level in view.meta.levels[:k]:
        by = rank[level.attribute if level.kind == "range" else level.columns[0]]
        if by not in order:  # a binned attribute's levels share its finest bin rank
            order.append(by)
    return f"{base}{joined} ORDER BY {', '.join(order)}"


def level_read(view: ViewInfo, k: int) -> tuple[tuple[str, ...], dict[str, int], str, str]:
    """What the rewrite needs of level k of ``view``, memoized on the view (public
    catalog facts, the same for every query): its label columns and bin spans
    (:func:`level_columns`), its node table (``""`` if none) and the name of the release
    table a query reading it reads (the node table's own name when that table is in the
    release, else the level table's). Callers must not change the spans dict."""
    facts = view.reads.get(k)
    if facts is None:
        labels, spans = level_columns(view, k)
        node_table = view.node_table(k)
        table = view.level(k).table
        if node_table.startswith(q(view.alias) + "."):
            table = node_table.split(".", 1)[1].strip('"')
        facts = view.reads[k] = (tuple(labels), spans, node_table, table)
    return facts
