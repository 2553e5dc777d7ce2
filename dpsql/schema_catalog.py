"""The emulated catalog: a DuckDB that describes the logical tables, for schema discovery.

Catalog queries (``DESCRIBE``/``SHOW``, ``information_schema``, ``pg_catalog``, DuckDB's
``duckdb_*()`` functions; what psql's ``\\dt``/``\\d``, pgcli, psycopg, SQLAlchemy's
``postgresql`` dialect, JDBC drivers and BI tools send to list tables and columns) run on
an in-memory DuckDB, the *catalog database*, never on the release. ``dpsql serve`` shares
one among its sessions; :func:`dpsql.connect` and :func:`dpsql.attach` build one per DuckDB
instance on the first catalog query (:func:`dpsql.duck.catalog_database`).

* one database per attached release, named by its alias, whose schema (``public`` over
  the server, as PostgreSQL clients expect; ``main`` in-process, as DuckDB users do)
  holds one **empty** table per logical table: the release's own name and each view name,
  with their attribute columns plus ``dp_count``. Only the public spec describes them:
  names, kinds (the table comment), value types; never a source path, never a count. The
  physical level tables are not there, so no client lists them. (Empty tables would
  answer ``COUNT(*) = 0``: a statement is sent here only when it names no logical table.)
* DuckDB's built-in ``pg_catalog``/``information_schema`` emulation describes them, with
  what it lacks added by :mod:`dpsql.pg_emulation` (table and scalar macros, and
  :func:`fix_catalog_sql`, which rewrites PostgreSQL's spellings). ``pg_namespace`` lists
  ``pg_catalog`` and ``information_schema`` (psql's tab completion excludes tables in
  ``pg_catalog`` by its oid) and not DuckDB's ``main`` when the tables are in ``public``;
  ``pg_database`` lists the releases only (not DuckDB's ``memory``/``system``/``temp``).

The database is locked down once built (:func:`dpsql.lockdown.lock_duckdb`: no file
access, no configuration changes), like every analyst's DuckDB.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import duckdb

from dpsql._sql import quote_ident, quote_literal
from dpsql.lockdown import lock_duckdb
from dpsql.pg_emulation import (INFORMATION_SCHEMA, PG_VERSION, RELATIONS, SCALAR_MACROS,
                                VERSION_STRING, array_items, default_settings,
                                fix_catalog_sql)
from dpsql.planner.catalog import ReleaseInfo

__all__ = ["CatalogDatabase", "logical_tables", "column_comments", "integer_counts",
           "range_type", "bins_text", "fix_catalog_sql", "array_items", "default_settings",
           "RELATIONS", "INFORMATION_SCHEMA", "PG_VERSION", "VERSION_STRING"]


_VALUE_TYPES = {"integer": "BIGINT", "date": "DATE", "timestamp": "TIMESTAMP"}  # else DOUBLE


def range_type(value_type: str | None) -> str:
    """The DuckDB type of a binned attribute's column, as ``GROUP BY`` returns its bins'
    lower bounds: integer BIGINT, date DATE, timestamp TIMESTAMP, decimal and real DOUBLE."""
    return _VALUE_TYPES.get(value_type or "", "DOUBLE")


def logical_tables(con: duckdb.DuckDBPyConnection, info: ReleaseInfo
                   ) -> dict[str, list[tuple[str, str]]]:
    """The logical tables of the release ``info`` attached to ``con``: table name ->
    [(column, DuckDB type)]. The release's own name lists every attribute some view
    covers; each view lists its own. Categorical and hierarchy columns take their domain
    table's type; binned (range) attributes their value type (integer: BIGINT, date:
    DATE, decimal and real: DOUBLE); every table ends with ``dp_count``, the private
    count (``SUM(dp_count)`` is ``COUNT(*)``): BIGINT when every view behind the table
    gives integer counts (:func:`integer_counts`), as ``COUNT(*)`` then is, else DOUBLE.
    All of it is public (the spec)."""
    alias = info.alias
    types: dict[str, list[tuple[str, str]]] = {}
    for a in info.attributes.values():
        if a.kind == "range":
            types[a.name] = [(a.name, range_type(a.value_type))]
            continue
        described = {r[0]: r[1] for r in con.execute(
            f"DESCRIBE {quote_ident(alias)}.{quote_ident(a.domain_table)}").fetchall()}
        types[a.name] = [(c, described.get(c, "VARCHAR")) for c in a.columns]

    def columns(attributes: Sequence[str], views: Sequence[Any]) -> list[tuple[str, str]]:
        count = "BIGINT" if all(integer_counts(v) for v in views) else "DOUBLE"
        return [col for name in attributes for col in types[name]] + [("dp_count", count)]

    covered = [a for a in info.attributes if any(a in v.meta.attributes for v in info.views)]
    tables = {info.release.name: columns(covered, info.views)}
    for v in info.views:
        tables.setdefault(v.name, columns(v.meta.attributes, [v]))
    return tables


def integer_counts(view: Any) -> bool:
    """Whether every ``COUNT(*)`` a view (a :class:`dpsql.planner.catalog.ViewInfo`) answers
    is an integer: its level tables hold integer counts (InfTDA's: their SUM's type then
    differs from the column's, ``ViewInfo.count_type``) and no level is a range (a bound
    inside a bin is interpolated)."""
    levels = view.meta.levels
    return bool(levels) and all(view.count_type(lv.k) and lv.kind != "range" for lv in levels)


def bins_text(a: Any) -> str:
    """A binned attribute's public bins in words: ``64 bins of width 4 over [0, 256)``;
    dates and timestamps by their unit and calendar bounds (``12 bins by month over
    [2013-01-01, 2014-01-01)``)."""
    if a.value_type in ("date", "timestamp"):
        from dpsql.domains.calendar import axis_text

        lo, hi = (axis_text(a.value_type, x) for x in (a.lower, a.upper))
        unit = a.unit or ("day" if a.value_type == "date" else "second")
        return f"{a.bins} bins by {unit} over [{lo}, {hi})"
    return f"{a.bins} bins of width {a.width:g} over [{a.lower:g}, {a.upper:g})"


def column_comments(info: ReleaseInfo) -> dict[str, str]:
    """Column -> what it is (kind and public domain size or bins), from the spec."""
    out = {"dp_count": "the differentially private count: SUM(dp_count) is COUNT(*)"}
    for a in info.attributes.values():
        if a.kind == "range":
            out[a.name] = (f"binned {a.value_type or 'real'} attribute: {bins_text(a)}; "
                           "filter with ranges")
            continue
        for i, c in enumerate(a.columns):
            where = f", level {i + 1}" if a.kind == "hierarchy" else ""
            out[c] = f"{a.kind} attribute ({a.name}){where}: {info.size(c)} public values"
    return out


class CatalogDatabase:
    """The in-memory DuckDB that answers catalog queries (module docstring): one database
    per release alias (``databases``: alias -> logical table -> [(column, type)]; the
    first is the current one), its logical tables in ``schema``. Users read it through
    their own cursors; only :meth:`cursor` touches the shared connection, under a lock."""

    def __init__(self, databases: dict[str, dict[str, list[tuple[str, str]]]],
                 config: dict[str, str] | None = None, schema: str = "public",
                 comments: dict[str, dict[str, str]] | None = None) -> None:
        self.database = next(iter(databases))
        self.schema = schema
        self.tables = {t: cols for tables in databases.values() for t, cols in tables.items()}
        self._lock = threading.Lock()
        # two threads: catalog queries are small, and one client's must not take every core;
        # ``config`` adds the server's memory cap (dpsql.server._limits.duckdb_config)
        con = self._con = duckdb.connect(":memory:", config={"threads": 2, **(config or {})})
        for alias, tables in reversed(list(databases.items())):  # the first is USEd last
            con.execute(f"ATTACH ':memory:' AS {quote_ident(alias)}")
            where = f"{quote_ident(alias)}.{quote_ident(schema)}"
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {where}")
            con.execute(f"USE {where}")
            notes = (comments or {}).get(alias, {})  # column -> its comment
            for name, cols in tables.items():
                body = ", ".join(f"{quote_ident(c)} {t}" for c, t in cols)
                con.execute(f"CREATE TABLE {quote_ident(name)} ({body})")
                con.execute(f"COMMENT ON TABLE {quote_ident(name)} IS 'dpsql logical table: "
                            "differentially private counts; query with COUNT(*) ... GROUP BY'")
                for c, _ in cols:
                    if notes.get(c):
                        con.execute(f"COMMENT ON COLUMN {quote_ident(name)}."
                                    f"{quote_ident(c)} IS {quote_literal(notes[c])}")
        for stmt in SCALAR_MACROS:
            con.execute(stmt)
        pairs = ", ".join(f"'{k}': '{v}'" for k, v in default_settings(self.database).items())
        con.execute(f"CREATE MACRO dpsql_settings() AS MAP {{{pairs}}}")
        con.execute("CREATE MACRO dpsql_setting(x) AS dpsql_settings()[lower(x)], "
                    "(x, missing_ok) AS dpsql_settings()[lower(x)]")
        for rel, body in {**RELATIONS, **INFORMATION_SCHEMA}.items():
            con.execute(f"CREATE MACRO dpsql_{rel}() AS TABLE {body}")
        # no host path in its settings (duckdb_settings() answers here): no spilling
        # (catalog queries are small; otherwise allowed_directories shows the working
        # directory's .tmp) and no secrets directory (it names the home directory)
        con.execute("SET temp_directory = ''")
        con.execute("SET secret_directory = ''")
        lock_duckdb(con)  # the analysts' lock-down (dpsql.lockdown)
        self.relations = {r[0].lower() for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE internal").fetchall()} | set(RELATIONS)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            cur = self._con.cursor()
        cur.execute(f"USE {quote_ident(self.database)}.{quote_ident(self.schema)}")
        return cur

    def close(self) -> None:
        with self._lock:
            self._con.close()
