"""Pass 1d: read a BI tool's projection subquery over the private table as the table.

Superset's virtual datasets, Power BI and Metabase wrap the private table in a derived
table that only picks, renames and filters rows, and aggregate outside it::

    SELECT mode, COUNT(*) AS count FROM (SELECT * FROM trips) AS virtual_table GROUP BY mode
    SELECT "_"."c", count(1) FROM (SELECT "_"."c" FROM "t" "_" WHERE "_"."c" IS NOT NULL) "_"
        GROUP BY "_"."c"

Each is exactly an aggregate of the private table. This pass rewrites, in place, a
derived table (``FROM (subquery) alias``, in the FROM clause or a join) whose subquery
is **plain**: a SELECT of one private table with only bare columns (``c``, ``b.c``),
renames (``c AS x``), ``*`` / ``b.*``, named deterministic expressions of the table's
columns (``COALESCE(c, 'N/A') AS x``, ``1 AS one``) and a WHERE of the table's own
columns with no nested query but constant ones. The derived table becomes the private
table under the derived table's alias, the subquery's WHERE is AND-ed into the outer
WHERE, and the outer query's names of the subquery's columns become the table's
(``virtual_table.x`` -> ``virtual_table.c``, an unqualified renamed ``x`` -> ``alias.c``,
a computed ``x`` -> its expression, in parentheses under an operator; an outer ``*`` or
``alias.*`` -> the subquery's columns under their names). Putting a deterministic
expression in place of its name is exact in SQL (on the rows, each use computes the same
value), so the planner then answers, or refuses, the expression as it would if the
analyst had written it there. Nested plain subqueries (Power BI nests two or
three) are inlined innermost first, and a CTE whose body is plain is inlined where a FROM
or JOIN names it (the CTE is dropped when nothing else names it).

What comes out is an ordinary query over the private table: every later pass (the
references, the refusals, the lock-down, the error columns) plans it as if the analyst
had written it so. The pass reads only the syntax tree, never data.

It leaves a subquery as it is (for :mod:`~dpsql.planner.find_references` to refuse as
row-level access) whenever inlining could change an answer or reach what the subquery
hides:

* the subquery has DISTINCT, GROUP BY, HAVING, aggregates, window functions, ORDER BY,
  LIMIT/OFFSET, QUALIFY, a join, a WITH, a sample, an unnamed expression in its SELECT
  list, a volatile function or a nested query with a column in its SELECT list or WHERE
  (a constant one, ``c = (SELECT 'z')``, means the same anywhere), or a column list on
  its alias;
* it is on the side of an outer join that can be padded with NULLs and has a WHERE
  (a filter there belongs to the join's ON, not to the WHERE) or an expression (on a
  padded row ``COALESCE(c, 'N/A')`` is 'N/A', where the subquery's column is NULL), or
  the outer SELECT joins with USING or NATURAL (which name columns by the subquery's
  names);
* the outer query names a column of the private table that the subquery does not select
  (``SELECT region ... FROM (SELECT mode FROM trips) v``; ``dp_count`` and the release
  tables' own columns included), names ``alias.<column>`` the subquery does not have,
  uses the alias as a row value, orders by (ORDER BY, QUALIFY: where DuckDB binds a
  name to an output before a column) the name of a renamed column that is also an
  output's for something else, has a star with modifiers or ``COLUMNS(...)``, or a
  nested query of it names a renamed column unqualified (its binding depends on the
  nested query's own tables). Elsewhere (WHERE, GROUP BY, HAVING, the SELECT list)
  DuckDB binds a name to the FROM clause's column first, as the rewrite does.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.planner._names import cte_named, home_catalog, names_cte
from dpsql.planner.catalog import Catalog, ReleaseInfo
from dpsql.planner.classify_calls import MEASURE
from dpsql.planner.parse_sql import Walked, walk_tree
from dpsql.planner.refuse_volatile import volatile_name

_PLAIN_ARGS = frozenset(("expressions", "from", "from_", "where"))
"""The only arguments a plain subquery's SELECT may have."""
_TABLE_ARGS = frozenset(("this", "db", "catalog", "alias"))
_SUBQUERY_ARGS = frozenset(("this", "alias"))
_MAX_ROUNDS = 8  # CTE bodies inlined into CTE bodies: one level per round


@dataclass(frozen=True)
class _Plain:
    """A plain subquery: its table, the table's release, its outputs in order (output
    name, its value: a column of the table, or a deterministic expression of them) and
    its WHERE condition (or None)."""

    table: exp.Table
    release: ReleaseInfo
    outputs: tuple[tuple[str, exp.Expression], ...]
    where: exp.Expression | None

    def source(self, name: str) -> exp.Expression | None:
        """The value of the output ``name`` (case-insensitive), or None."""
        low = name.lower()
        return next((v for o, v in self.outputs if o.lower() == low), None)

    def renamed(self, name: str) -> bool:
        """Whether the output ``name`` is not the table's column of that name."""
        v = self.source(name)
        return v is not None and not (isinstance(v, exp.Column)
                                      and v.name.lower() == name.lower())

    @property
    def computed(self) -> bool:
        return any(not isinstance(v, exp.Column) for _, v in self.outputs)

    def output(self, name: str) -> str:
        """The output ``name`` as the subquery spells it, which DuckDB gives an outer
        bare column of it (``SELECT mode FROM (SELECT c AS "Mode" ...)`` is ``Mode``)."""
        low = name.lower()
        return next(o for o, _ in self.outputs if o.lower() == low)


def inline_subqueries(tree: exp.Expression, walked: Walked, catalog: Catalog) -> Walked:
    """Inline, in place, the plain subqueries over a private table in ``tree``; returns
    ``walked`` (the index of ``tree``'s nodes), walked again if the tree changed."""
    if not catalog.releases or not any(s.nested for s in walked.scopes.values()):
        return walked  # no derived table, no CTE: nothing to inline
    for _ in range(_MAX_ROUNDS):
        changed = _inline_derived(walked, catalog)
        changed = _inline_ctes(walked, catalog) or changed
        if not changed:
            break
        walked = walk_tree(tree)
    return walked


def inline_hint(select: exp.Select) -> str:
    """The end of the row-level refusal of ``select`` when it is a subquery of FROM or
    a CTE's body: what this pass would have read as the table itself."""
    node = select.parent
    while isinstance(node, exp.SetOperation):  # a UNION's branch: the UNION's place
        node = node.parent
    if not isinstance(node, exp.CTE) and not (isinstance(node, exp.Subquery) and isinstance(
            node.parent, (exp.From, exp.Join))):
        return ""
    return ("; a subquery over it (in FROM, or a CTE) is read as the table itself only "
            "when it selects columns (c, c AS x, *, deterministic expressions with a name) "
            "and filters them with a deterministic WHERE, and the query around it names "
            "only the columns it selects: no DISTINCT, GROUP BY, ORDER BY, LIMIT, joins, "
            "set operations or volatile functions in it, and no WHERE or expression in it "
            "on the NULL side of an outer join; move those into the outer query, or "
            "aggregate inside the subquery")


# ---- derived tables -----------------------------------------------------------------

def _inline_derived(walked: Walked, catalog: Catalog) -> bool:
    changed = False
    for select in reversed(walked.selects):  # innermost first: nested ones become plain
        joins = select.args.get("joins") or []
        frm = select.args.get("from_") or select.args.get("from")
        sources = ([frm.this] if frm is not None else []) + [j.this for j in joins]
        for i, source in enumerate(sources):
            if not isinstance(source, exp.Subquery):
                continue
            plain = None if _has_args(source, _SUBQUERY_ARGS) else _plain(
                source.this, source.args.get("alias"), catalog)
            if plain is None or not _outer_allows(select, source, i, joins, plain):
                continue
            _inline(select, source, plain)
            changed = True
    return changed


def _plain(inner: exp.Expression, alias: exp.TableAlias | None, catalog: Catalog
           ) -> _Plain | None:
    """The query ``inner`` (of a derived table or a CTE named ``alias``) as a
    :class:`_Plain`, or None if it is not one."""
    if not isinstance(inner, exp.Select) or alias is None or alias.columns or not alias.name \
            or _has_args(inner, _PLAIN_ARGS):
        return None
    frm = inner.args.get("from_") or inner.args.get("from")
    table = frm.this if frm is not None else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier) \
            or _has_args(table, _TABLE_ARGS) or (table.args.get("alias") is not None
                                                 and table.args["alias"].columns):
        return None
    if names_cte(table):
        return None
    hit = catalog.resolve_table(home_catalog(table), table.name)
    if hit is None:
        return None
    release, views = hit
    name = table.alias_or_name.lower()

    def own(col: exp.Column) -> bool:  # a column of the table, as named in the subquery
        q = col.table
        return not col.args.get("db") and (not q or q.lower() == name) and \
            isinstance(col.this, exp.Identifier) and (
                release.column_attribute(col.name) is not None or col.name.lower() == MEASURE)

    outputs: list[tuple[str, exp.Expression]] = []
    for e in inner.expressions:
        if _is_star(e, name):
            outputs += [(c, exp.column(c)) for c in _table_columns(table, release, views)]
        elif isinstance(e, exp.Column) and own(e):  # named as the table names it
            outputs.append((release.column_name(e.name) or e.name.lower(), e))
        elif isinstance(e, exp.Alias) and e.alias and (
                own(e.this) if isinstance(e.this, exp.Column) else _computed(e.this, own)):
            outputs.append((e.alias, e.this))
        else:
            return None
    if len({o.lower() for o, _ in outputs}) != len(outputs):
        return None  # a name twice: the outer query's use of it is ambiguous
    where = inner.args.get("where")
    cond = where.this if where is not None else None
    if cond is not None and not _own_condition(cond, own):
        return None
    return _Plain(table, release, tuple(outputs), cond)


def _computed(value: exp.Expression, own) -> bool:
    """Whether ``value`` (``<value> AS x`` in the subquery) is a deterministic
    expression of the table's columns, which the outer query may have in its place:
    :func:`_own_condition`'s test, on a function call, CASE, cast, operator or literal."""
    return not isinstance(value, (exp.Query, exp.Subquery)) and _own_condition(value, own)


def _own_condition(cond: exp.Expression, own) -> bool:
    """Whether the WHERE condition ``cond`` is a deterministic row filter on the
    subquery's table alone (``own(column)``): no aggregate, window, star or volatile
    function, and no nested query but constant ones (no column in them: ``c = (SELECT
    'z')``), whose meaning does not depend on where the condition stands."""
    stack = [cond]
    while stack:
        node = stack.pop()
        if volatile_name(node) is not None:
            return False
        if isinstance(node, exp.Query):
            if node.find(exp.Column) is not None or any(
                    volatile_name(n) is not None for n in node.walk()):
                return False
            continue
        if isinstance(node, (exp.AggFunc, exp.Window, exp.Star, exp.Columns,
                             exp.Placeholder)):
            return False
        if isinstance(node, exp.Column) and not own(node):
            return False
        stack.extend(node.iter_expressions())
    return True


def _has_args(node: exp.Expression, allowed: frozenset[str]) -> bool:
    """Whether ``node`` has a set argument outside ``allowed``."""
    return any(v not in (None, [], False) and k not in allowed for k, v in node.args.items())


def _is_star(e: exp.Expression, qualifier: str) -> bool:
    """A bare ``*`` or ``<qualifier>.*``, without EXCLUDE/REPLACE/RENAME."""
    if isinstance(e, exp.Star):
        return not _has_args(e, frozenset())
    return isinstance(e, exp.Column) and isinstance(e.this, exp.Star) \
        and not _has_args(e.this, frozenset()) and not e.args.get("db") \
        and (e.table or "").lower() == qualifier


def _table_columns(table: exp.Table, release: ReleaseInfo, views) -> list[str]:
    """The columns of a logical table in order, as the schema catalog lists them
    (:func:`dpsql.schema_catalog.logical_tables`): for a table that names one view, that
    view's attributes, else every attribute some view covers; then ``dp_count``."""
    if len(views) == 1 and views[0].name.lower() == table.name.lower():
        names = list(views[0].meta.attributes)
    else:
        names = [a for a in release.attributes if any(a in v.meta.attributes
                                                       for v in views)]
    out = []
    for name in names:
        a = release.attributes[name]
        out += [a.name] if a.kind == "range" else list(a.columns)
    return out + [MEASURE]


def _outer_allows(select: exp.Select, sub: exp.Subquery, i: int, joins: list[exp.Join],
                  plain: _Plain) -> bool:
    """Whether inlining ``sub`` (source ``i`` of ``select``: 0 is the FROM item) keeps
    every name of ``select`` bound as before and every answer the same."""
    alias = sub.alias.lower()
    for k, j in enumerate(joins):
        if j.args.get("using") or j.method:  # NATURAL, ASOF, POSITIONAL
            return False
        if k == i - 1 and (j.kind or "").upper() not in ("", "INNER", "CROSS", "OUTER"):
            return False  # SEMI/ANTI: the subquery's columns are not the outer query's
    if (plain.where is not None or plain.computed) and _padded(i, joins):
        return False  # a padded row's NULLs are no row of the table: its filter and
        # its expressions (COALESCE(c, 'N/A')) hold on the table's rows, not on them
    release = plain.release
    hidden = release.internal_columns | {MEASURE}

    def hides(name: str) -> bool:  # a name the table has and the subquery does not
        low = name.lower()
        return plain.source(name) is None and (
            release.column_attribute(name) is not None or low in hidden or low == alias)

    ordering = {c.name.lower() for key in ("order", "qualify")
                if select.args.get(key) is not None
                for c in select.args[key].find_all(exp.Column) if not c.table}
    for e in select.expressions:
        if isinstance(e, exp.Alias):
            # ORDER BY (and QUALIFY) bind a name to the output first, where the
            # rewrite puts the column: an output named like a renamed column, for
            # something else, must not be named there
            name, value = e.alias, e.this
            if name.lower() in ordering and plain.renamed(name) and not (
                    isinstance(value, exp.Column) and isinstance(value.this, exp.Identifier)
                    and value.name.lower() == name.lower()
                    and (value.table or "").lower() in ("", alias)):
                return False
        elif isinstance(e, exp.Star) and (_has_args(e, frozenset()) or joins):
            return False
    for node, nested in _outer_nodes(select, sub):
        if isinstance(node, exp.Columns):
            return False
        if isinstance(node, (exp.Table, exp.Subquery)) and nested and \
                node.alias_or_name.lower() == alias:
            return False  # a nested query's own source of the same name
        if not isinstance(node, exp.Column):
            continue
        q = node.table
        if q and q.lower() == alias:
            if node.args.get("db"):
                return False
            if isinstance(node.this, exp.Star):
                if nested or node.parent is not select or _has_args(node.this, frozenset()):
                    return False
                continue
            if plain.source(node.name) is None:
                return False  # alias.<column> the subquery does not have
        elif not q:
            if hides(node.name) or (nested and plain.renamed(node.name)):
                return False
    return True


def _padded(i: int, joins: list[exp.Join]) -> bool:
    """Whether source ``i`` (0: the FROM item, k: the k-th join's) can be padded with
    NULLs by an outer join: its own LEFT/FULL join, or a later RIGHT/FULL one."""
    if i > 0 and (joins[i - 1].side or "").upper() in ("LEFT", "FULL"):
        return True
    return any((j.side or "").upper() in ("RIGHT", "FULL") for j in joins[i:])


def _outer_nodes(select: exp.Select, sub: exp.Subquery):
    """Every node under ``select`` but those of ``sub`` and of its WITH (whose CTE
    bodies cannot name its FROM items), with whether it lies in a query nested in
    ``select``."""
    stack = [(select, False)]
    own_with = select.args.get("with_") or select.args.get("with")
    while stack:
        node, nested = stack.pop()
        if node is sub or node is own_with:
            continue
        yield node, nested
        below = nested or (node is not select and isinstance(node, (exp.Query,
                                                                    exp.Subquery)))
        for child in node.iter_expressions():
            stack.append((child, below))


def _inline(select: exp.Select, sub: exp.Subquery, plain: _Plain) -> None:
    alias_id = sub.args["alias"].this.copy()
    alias = alias_id.name.lower()
    outer = [n for n, _ in _outer_nodes(select, sub) if isinstance(n, exp.Column)]
    table = plain.table
    table.set("alias", exp.TableAlias(this=alias_id.copy()))
    where = plain.where
    if where is not None:
        for col in list(where.find_all(exp.Column)):
            col.set("table", alias_id.copy())
        old = select.args.get("where")
        cond = exp.paren(where, copy=False) if old is None else exp.And(
            this=exp.paren(where, copy=False), expression=exp.paren(old.this, copy=False))
        select.set("where", exp.Where(this=cond))
    sub.replace(table)
    for col in outer:
        q = col.table
        if q and q.lower() != alias or isinstance(col.this, exp.Star):
            continue
        name = col.name
        value = plain.source(name)
        if value is None:
            continue
        new = col if not plain.renamed(name) else _placed(value, alias_id, col.parent)
        if col.parent is select and col.arg_key == "expressions":
            shown = plain.output(name)  # the output's name, as DuckDB gives it
            if not isinstance(value, exp.Column) or \
                    shown != plain.release.column_name(value.name):
                new = exp.alias_(new.copy() if new is col else new,
                                 exp.to_identifier(shown, quoted=True))
        if new is not col:
            col.replace(new)
    expanded = []
    for e in select.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
                                       and (e.table or "").lower() == alias):
            expanded += [exp.alias_(_placed(v, alias_id, select),
                                    exp.to_identifier(o, quoted=True))
                         for o, v in plain.outputs]
        else:
            expanded.append(e)
    if len(expanded) != len(select.expressions) or any(
            a is not b for a, b in zip(expanded, select.expressions)):
        select.set("expressions", expanded)


def _placed(value: exp.Expression, alias: exp.Identifier, parent: exp.Expression | None
            ) -> exp.Expression:
    """A copy of the subquery's output ``value`` with its columns qualified by the
    table's new alias, in parentheses where it is an operand of an operator."""
    out = value.copy()
    for col in [out] if isinstance(out, exp.Column) else list(out.find_all(exp.Column)):
        col.set("table", alias.copy())
        col.set("db", None)
        col.set("catalog", None)
    if isinstance(out, (exp.Binary, exp.Unary, exp.Predicate)) and isinstance(
            parent, (exp.Binary, exp.Unary, exp.Predicate)):
        out = exp.paren(out, copy=False)
    return out


# ---- CTEs ---------------------------------------------------------------------------

def _inline_ctes(walked: Walked, catalog: Catalog) -> bool:
    """Put the body of each plain CTE in place of the FROM and JOIN items that name it
    (as a derived table, which the next round inlines); drop a CTE nothing names any
    more. A recursive WITH is left as it is."""
    changed = False
    for cte in walked.ctes:
        with_ = cte.parent
        if not isinstance(with_, exp.With) or with_.args.get("recursive") or \
                cte.args.get("alias") is None or cte.args["alias"].columns or \
                cte.args.get("materialized") is not None:
            continue
        body = cte.this
        if _plain(body, cte.args["alias"], catalog) is None:
            continue
        name = cte.alias.lower()
        uses = [t for t in walked.tables if t.name.lower() == name and cte_named(t) is cte]
        placed = [t for t in uses if t.arg_key == "this" and isinstance(t.parent, (
            exp.From, exp.Join)) and not _has_args(t, _TABLE_ARGS - {"db", "catalog"})
            and not t.args.get("db")]
        if not placed:
            continue
        for t in placed:
            alias = t.args.get("alias")
            if alias is not None and alias.columns:
                continue
            ident = alias.this.copy() if alias is not None else exp.to_identifier(
                cte.alias, quoted=True)
            t.replace(exp.Subquery(this=body.copy(), alias=exp.TableAlias(this=ident)))
            changed = True
        if all(t.parent is None or cte_named(t) is not cte for t in uses) and all(
                t in placed for t in uses):
            ctes = [c for c in with_.expressions if c is not cte]
            if ctes:
                with_.set("expressions", ctes)
            else:
                with_.pop()
    return changed
