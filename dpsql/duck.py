"""Attach a release to any DuckDB connection and query it with dpsql's SQL surface.

``attach`` ATTACHes the release file READ_ONLY under an alias (default: the release
name), reads its catalog once, and registers dpsql's Python UDFs on the connection
(once per connection: registration is idempotent). ``plan`` / ``sql`` / ``execute`` run
the planner (:mod:`dpsql.planner`) and DuckDB. ``attach(..., lockdown=True)`` and
:func:`lock_down` lock the connection down afterwards (:mod:`dpsql.lockdown`: no file
access, configuration locked, file reads refused by the planner); every analyst entry
point uses :func:`lock_down`, while a plain :func:`attach` leaves the caller's own
connection as it is.

Attaching also precomputes what the planner would otherwise redo per query (all of it
public: domains, the catalog, the error models' parameters): a node table for every
sparse level of up to 250,000 public nodes, in the in-memory database ``dpsql_nodes``
ATTACHed to the connection's instance (so every cursor sees it; a read-only instance
cannot host one, and its sparse levels are then densified per query); which hierarchy
columns determine their ancestors; whether each prefix table covers every public group;
and the predicted error of every bin range of a one-attribute range view. ``plan`` binds
the planned SQL once in DuckDB to report its output columns; ``sql``, ``execute`` and
:mod:`dpsql.dbapi` do not (DuckDB's own errors are translated when they run it).

The UDFs the planned SQL calls (error columns, intervals, histogram quantiles, prefix
sums) are in :mod:`dpsql.duck_udfs`.

This module imports :mod:`dpsql.accuracy` (through the planner) but never
:mod:`dpsql.mechanisms` or the RNG: answering queries is post-processing.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpsql import duck_udfs
from dpsql._sql import quote_ident, quote_literal
from dpsql.accuracy.inftda_support import Support
from dpsql.duck_udfs import hist_quantile
from dpsql.errors import OperationalError, ProgrammingError
from dpsql.lockdown import is_locked, lock_duckdb
from dpsql.planner import PlannedQuery, plan_query
from dpsql.planner.catalog import Catalog, ReleaseInfo, ViewInfo
from dpsql.release_file import read_catalog, read_support


@dataclass
class _State:
    catalog: Catalog = field(default_factory=Catalog)
    prefixes: dict[str, np.ndarray] = field(default_factory=dict)  # view key -> cum[K+1]
    supports: dict[str, Support] = field(default_factory=dict)  # view key -> its support
    answers: dict[tuple, tuple[float, float, float]] = field(default_factory=dict)
    """(view key, level, confidence, digest of the node codes) -> an InfTDA answer's
    (se, below, above) (:mod:`dpsql.duck_udfs`); emptied when a release is attached."""
    registered: bool = False
    schema_db: Any = None  # the catalog database (dpsql.schema_catalog), built on first use


_STATES: "weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _State]" = \
    weakref.WeakKeyDictionary()
_BY_INSTANCE: "weakref.WeakValueDictionary[str, _State]" = weakref.WeakValueDictionary()


def _state(con: duckdb.DuckDBPyConnection) -> _State:
    """The attach state of ``con``'s DuckDB *instance*.

    ATTACHed databases and registered functions belong to the instance, which cursors and
    a second ``duckdb.connect()`` of the same file share. So the state is shared too: it
    is found through a token stored in the instance's :data:`NODES_DB`, and attaching
    through a second connection object neither re-registers the UDFs (DuckDB refuses a
    duplicate) nor hides the first connection's releases from them. Where the instance
    cannot host :data:`NODES_DB` (read-only), the state is per connection object.
    """
    st = _STATES.get(con)
    if st is None:
        token = _instance_token(con)
        st = _BY_INSTANCE.get(token) if token else None
        if st is None:
            st = _State()
            if token:
                _BY_INSTANCE[token] = st
        _STATES[con] = st
    return st


def _instance_token(con: duckdb.DuckDBPyConnection) -> str | None:
    if not _nodes_db(con):
        return None
    try:
        con.execute(f"CREATE TABLE IF NOT EXISTS {NODES_DB}.dpsql_instance AS "
                    "SELECT CAST(uuid() AS VARCHAR) AS token")
        return str(con.execute(f"SELECT token FROM {NODES_DB}.dpsql_instance").fetchall()[0][0])
    except duckdb.Error:
        return None


def catalog_of(con: duckdb.DuckDBPyConnection) -> Catalog:
    """The catalog of every release attached to ``con`` through :func:`attach`."""
    return _state(con).catalog


def attach(con: duckdb.DuckDBPyConnection, path: str, name: str | None = None, *,
           lockdown: bool = False) -> str:
    """ATTACH the release at ``path`` read-only under ``name`` (default: the release
    name), register the UDFs and cache the catalog on ``con``; return the alias.

    ``lockdown=True`` then locks ``con``'s database down (:func:`lock_down`): no file
    access, no configuration change, and the planner refuses file reads. Attach every
    release first (a locked database cannot open another file), and give
    ``lockdown=True`` to the last :func:`attach`."""
    p = Path(path)
    if not p.exists():
        raise OperationalError(f"release file {str(p)!r} does not exist")
    if is_locked(con):
        raise OperationalError(
            f"cannot attach {str(p)!r}: this DuckDB connection is locked down (no file "
            "access); attach every release before locking, e.g. dpsql.attach(con, a); "
            "dpsql.attach(con, b, lockdown=True)")
    st = _state(con)
    if name is None:
        probe = duckdb.connect()
        try:
            probe.execute(f"ATTACH {quote_literal(p)} AS dpsql_probe (READ_ONLY)")
            name = probe.execute("SELECT name FROM dpsql_probe.dpsql_release").fetchall()[0][0]
        except duckdb.Error as err:
            raise OperationalError(f"cannot read {str(p)!r} as a dpsql release: {err}"
                                   ) from err
        finally:
            probe.close()
    attached = {r[0]: r[1] for r in con.execute(
        "SELECT database_name, path FROM duckdb_databases()").fetchall()}
    if name in attached:
        if attached[name] is None or Path(attached[name]).resolve() != p.resolve():
            raise ProgrammingError(f"the alias {name!r} is already used by another database; "
                                   "pass name= to attach the release under another alias")
    else:
        try:
            con.execute(f"ATTACH {quote_literal(p)} AS {quote_ident(name)} (READ_ONLY)")
        except duckdb.Error as err:
            raise OperationalError(f"cannot attach {str(p)!r}: {err}") from err
    release = read_catalog(con, str(p), schema=name)
    facts = _table_facts(con, name, release)
    views = []
    for vm in release.views.values():
        v = _view_info(con, name, vm, release.attributes, facts)
        views.append(v)
        if vm.prefix_table:
            prefix_table = f"{quote_ident(name)}.{quote_ident(vm.prefix_table)}"
            cum = con.execute(f"SELECT SUM(cum) FROM {prefix_table} "
                              "GROUP BY bin ORDER BY bin").fetchall()
            st.prefixes[v.key] = np.array([c[0] for c in cum], dtype=np.float64)
        if v.model.reads_support:
            st.supports[v.key] = read_support(con, vm, schema=name)
            st.answers.clear()
    sizes, determines = [], []
    for a in release.attributes.values():
        if a.kind == "range":
            continue
        for i, c in enumerate(a.columns):
            n, n_paths = facts[("domain", a.name, i)]
            sizes.append((c, int(n)))
            if i and n == n_paths:  # each value of c sits under one path of ancestors
                determines.append((c, tuple(a.columns[:i])))
    st.catalog = st.catalog.with_release(ReleaseInfo(
        name, release, tuple(views), tuple(sizes), tuple(determines),
        domains=_label_domains(con, name, release, "VARCHAR"),
        integer_domains=_label_domains(con, name, release, "BIGINT")))
    if st.schema_db is not None:  # describes the releases attached before: built anew
        st.schema_db.close()
        st.schema_db = None
    register(con)
    if lockdown:
        lock_down(con)
    return name


def _label_domains(con: duckdb.DuckDBPyConnection, alias: str, release: Any, of_type: str
                   ) -> tuple[tuple[str, tuple], ...]:
    """The public values of every label column (categorical and spine columns) of type
    ``of_type`` (VARCHAR: text, BIGINT: integer), read once from the domain tables."""
    typed = set(con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ? "
        "AND data_type = ?", [alias, of_type]).fetchall())
    out = []
    for a in release.attributes.values():
        if a.kind == "range" or not a.domain_table:
            continue
        table = f"{quote_ident(alias)}.{quote_ident(a.domain_table)}"
        for c in a.columns:
            if (a.domain_table, c) in typed:
                values = con.execute(f"SELECT DISTINCT {quote_ident(c)} FROM {table} "
                                     f"WHERE {quote_ident(c)} IS NOT NULL").fetchall()
                out.append((c, tuple(sorted(v[0] for v in values))))
    return tuple(out)


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Lock ``con``'s database down for analysts, after the releases are attached (and
    their sparse levels densified into :data:`NODES_DB`): DuckDB's settings of
    :data:`dpsql.lockdown.SETTINGS`, and a planner that refuses file reads
    (:mod:`dpsql.planner.refuse_file_reads`). Every analyst entry point calls this one
    function; calling it twice is harmless."""
    lock_duckdb(con)
    st = _state(con)
    if not st.catalog.locked:
        st.catalog = st.catalog.locked_down()


def _table_facts(con: duckdb.DuckDBPyConnection, alias: str, release: Any) -> dict:
    """The public facts the catalog needs, in few DuckDB round trips: per level table
    (row count, type of ``dp_count``, type of its SUM; one UNION ALL), per prefix table
    (row count, column names), per hierarchy column (distinct values, distinct paths from
    the top)."""
    parts, keys = [], []
    for vm in release.views.values():
        for lv in vm.levels:
            keys.append(("level", lv.table))
            parts.append(f"SELECT COUNT(*), typeof(any_value(dp_count)), typeof(SUM(dp_count)) "
                         f"FROM {quote_ident(alias)}.{quote_ident(lv.table)}")
        if vm.prefix_table:
            keys.append(("prefix", vm.prefix_table))
            parts.append(f"SELECT COUNT(*), NULL, NULL FROM "
                         f"{quote_ident(alias)}.{quote_ident(vm.prefix_table)}")
    facts: dict = {}
    if parts:
        rows = con.execute(" UNION ALL ".join(f"SELECT {i} AS i, * FROM ({q})"
                                             for i, q in enumerate(parts))).fetchall()
        for i, n, x, y in rows:
            facts[keys[i]] = (n, x, y)
    for vm in release.views.values():
        if vm.prefix_table:
            facts[("columns", vm.prefix_table)] = [d[0] for d in con.execute(
                f"SELECT * FROM {quote_ident(alias)}.{quote_ident(vm.prefix_table)} LIMIT 0"
            ).description]
    for a in release.attributes.values():  # public spines: counted in Python (faster
        if a.kind == "range":              # than COUNT(DISTINCT) on tables this small)
            continue
        rows = con.execute(
            f"SELECT DISTINCT {', '.join(quote_ident(c) for c in a.columns)} "
            f"FROM {quote_ident(alias)}.{quote_ident(a.domain_table)}").fetchall()
        for i in range(len(a.columns)):
            facts[("domain", a.name, i)] = (len({r[i] for r in rows}),
                                            len({r[:i + 1] for r in rows}))
    return facts


MAX_PRECOMPUTED_BINS = 128  # range predictions at attach: ~20 ms, 130 kB at 128 bins
# (86 ms at 256 bins, 366 ms at 512); larger views are predicted per query and memoized
NODES_DB = "dpsql_nodes"
"""An in-memory database ATTACHed to the connection's instance (so every cursor sees
it) holding the node tables of sparse levels: ``dpsql_nodes."<alias>__<level table>"``."""


def _nodes_db(con: duckdb.DuckDBPyConnection) -> bool:
    """Attach :data:`NODES_DB` if needed; False where DuckDB does not allow it (a
    read-only database instance, external access disabled): sparse levels are then
    densified per query instead."""
    try:
        con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {NODES_DB}")
    except duckdb.Error:
        return False
    return True


def _view_info(con: duckdb.DuckDBPyConnection, alias: str, vm: Any, attributes: dict,
               facts: dict) -> ViewInfo:
    """The view's catalog entry, with a node table for every level (see
    :mod:`dpsql.planner.rewrite_query`): the level table itself when it holds every
    public node, else a densified copy in :data:`NODES_DB` when small enough."""
    from dpsql.planner.catalog import MAX_MATERIALIZED_NODES
    from dpsql.planner.choose_view import range_errors
    from dpsql.planner.level_rows import dense_nodes_sql

    levels = [(lv, *facts[("level", lv.table)]) for lv in vm.levels]
    dense = all(n == lv.n_nodes for lv, n, _, _ in levels)
    v = ViewInfo(alias, vm, dense, vm.error_model)
    tables, types, creates = [], [], []
    for lv, n, col_type, sum_type in levels:
        if n == lv.n_nodes:
            tables.append(f"{quote_ident(alias)}.{quote_ident(lv.table)}")
        elif lv.n_nodes <= MAX_MATERIALIZED_NODES and _nodes_db(con):
            # COALESCE(dp_count, 0) keeps dp_count's type: so do the types below
            table = f"{NODES_DB}.{quote_ident(f'{alias}__{lv.table}')}"
            creates.append(f"CREATE OR REPLACE TABLE {table} AS "
                           + dense_nodes_sql(v, lv.k, attributes))
            tables.append(table)
        else:
            tables.append("")
        types.append(sum_type if sum_type != col_type and col_type != "NULL" else "")
    if creates:
        con.execute("; ".join(creates))
    prefix = None
    if vm.prefix_table:
        cols = facts.get(("columns", vm.prefix_table), [])
        last = attributes[vm.attributes[-1]]
        first = next(lv.k for lv in vm.levels if lv.attribute == last.name)
        groups = vm.level(first - 1).n_nodes if first > 1 else 1
        n = facts[("prefix", vm.prefix_table)][0]
        if last.kind == "range" and cols[-2:] == ["bin", "cum"] \
                and n == groups * (last.bins + 1):
            prefix = (f"{quote_ident(alias)}.{quote_ident(vm.prefix_table)}", tuple(cols[:-2]))
    ranges = None
    if len(vm.attributes) == 1 and attributes[vm.attributes[0]].kind == "range" \
            and attributes[vm.attributes[0]].bins <= MAX_PRECOMPUTED_BINS:
        ranges = range_errors(v, attributes[vm.attributes[0]].bins)
    bounds = tuple(not v.model.gives_variance(lv.k) for lv in vm.levels)
    dropped = frozenset(a for a in vm.attributes if attributes[a].on_null == "drop")
    return replace(v, node_tables=tuple(tables), count_types=tuple(types),
                   prefix=prefix, bound_levels=bounds, range_errors=ranges,
                   null_dropped=dropped)


def catalog_database(con: duckdb.DuckDBPyConnection) -> Any:
    """The catalog database (:class:`dpsql.schema_catalog.CatalogDatabase`) describing
    the releases attached to ``con``'s instance, their logical tables in schema ``main``
    of a database named by each alias; built on the first catalog query, anew after
    another attach. Schema discovery (:mod:`dpsql.planner.route_catalog`) runs there."""
    st = _state(con)
    if st.schema_db is None:
        from dpsql.schema_catalog import CatalogDatabase, column_comments, logical_tables

        if not st.catalog.releases:
            raise ProgrammingError("no release is attached: dpsql.attach(con, path) first")
        infos = st.catalog.releases
        st.schema_db = CatalogDatabase({r.alias: logical_tables(con, r) for r in infos},
                                       schema="main",
                                       comments={r.alias: column_comments(r) for r in infos})
    return st.schema_db


def run_on(con: duckdb.DuckDBPyConnection, planned: PlannedQuery
           ) -> tuple[duckdb.DuckDBPyConnection, str]:
    """(the DuckDB connection that runs ``planned``, the SQL it runs): ``con`` and the
    planned SQL, or for schema discovery a cursor of the catalog database and the SQL
    with PostgreSQL's catalog spellings rewritten (:func:`~dpsql.schema_catalog.
    fix_catalog_sql`)."""
    if planned.route != "catalog":
        return con, planned.sql
    from dpsql.schema_catalog import fix_catalog_sql

    return catalog_database(con).cursor(), fix_catalog_sql(planned.sql)


def plan(con: duckdb.DuckDBPyConnection, query: str, params: Sequence | None = None
         ) -> PlannedQuery:
    """Plan ``query``: DuckDB SQL over the attached release tables, its info, columns."""
    planned = plan_query(catalog_of(con), query, params)
    runner, text = run_on(con, planned)
    try:
        cols = tuple(runner.sql(text).columns)
    except duckdb.Error as err:
        raise _translate(err, planned.sql) from err
    return replace(planned, columns=cols)


def sql(con: duckdb.DuckDBPyConnection, query: str, params: Sequence | None = None
        ) -> duckdb.DuckDBPyRelation:
    """``con.sql`` over the planned query: a lazy DuckDB relation.

    Planning errors are dpsql's (:class:`~dpsql.UnsupportedQueryError`...), and so are
    DuckDB's errors binding the planned SQL. The relation runs later, when it is fetched
    or composed, outside this function: errors *then* (an interrupt, DuckDB running out
    of memory) are DuckDB's own exceptions. Use :func:`execute` or :func:`dpsql.connect`
    where every error must be a dpsql error."""
    planned = plan_query(catalog_of(con), query, params)
    runner, text = run_on(con, planned)
    try:
        return runner.sql(text)
    except duckdb.Error as err:
        raise _translate(err, text) from err


def execute(con: duckdb.DuckDBPyConnection, query: str, params: Sequence | None = None
            ) -> tuple[duckdb.DuckDBPyConnection, dict]:
    """Run the planned query with ``con.execute``; return (result cursor, dp_info)."""
    planned = plan_query(catalog_of(con), query, params)
    runner, text = run_on(con, planned)
    try:
        return runner.execute(text), planned.info
    except duckdb.Error as err:
        raise _translate(err, text) from err


def _translate(err: duckdb.Error, sql_text: str) -> Exception:
    if isinstance(err, (duckdb.BinderException, duckdb.CatalogException,
                        duckdb.ParserException)):
        return ProgrammingError(f"DuckDB rejected the planned query: {err}")
    return OperationalError(f"DuckDB failed on the planned query: {err}")


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Register dpsql's UDFs (:mod:`dpsql.duck_udfs`) on ``con``'s instance (once; later
    calls do nothing)."""
    duck_udfs.register(con, _state(con))

__all__ = ["attach", "catalog_database", "catalog_of", "execute", "hist_quantile", "lock_down", "plan", "register",
           "sql"]
