"""SQLAlchemy dialect ``dpsql``: ``create_engine("dpsql:///release.duckdb")``.

It makes a release usable from SQLAlchemy Core, ``pandas.read_sql`` and BI tools that
speak SQLAlchemy (Superset). It is registered through the ``sqlalchemy.dialects`` entry
point (``dpsql = "dpsql.sqlalchemy:DpsqlDialect"`` in ``pyproject.toml``), so no import
or ``registry.register`` call is needed. Every statement goes through :mod:`dpsql.dbapi`,
hence through the planner: SQLAlchemy only renders SQL and reads the catalog. It needs
the ``bi`` extra (``pip install 'dpsql[bi]'``); nothing else in dpsql imports it.

Decisions, and why:

* **URL.** ``dpsql:///relative/path.duckdb`` is relative to the working directory and
  ``dpsql:////abs/path.duckdb`` (four slashes) is absolute: SQLite's convention, which
  SQLAlchemy users know, and what ``f"dpsql:///{path}"`` gives for either kind of path.
  Query-string options are the keyword arguments of :func:`dpsql.dbapi.connect` that fit
  in a URL: ``name`` (the alias, default the release name), ``plan_cache_size`` and
  ``threads`` (DuckDB's setting). Any other key is refused with the list of accepted
  ones; ``connect_args={"duckdb_config": {...}}`` passes the rest. A missing file is an
  :class:`~dpsql.errors.OperationalError` that names the absolute path it looked for
  and the slash convention; SQLAlchemy wraps it as ``sqlalchemy.exc.OperationalError``.
* **SQL rendering.** The compiler is SQLAlchemy's PostgreSQL compiler (with its type
  compiler and identifier quoting) on a plain :class:`DefaultDialect`, not a subclass of
  the PostgreSQL dialect: DuckDB's grammar is PostgreSQL's, and sqlglot's DuckDB reader
  (the planner's parser) accepts what that compiler emits, while the PostgreSQL dialect
  itself would run ``pg_catalog`` queries on connect and on reflection. Where DuckDB's
  meaning differs, the compiler says so: ``/`` is true division in DuckDB
  (``div_is_floordiv = False``, so ``//`` renders ``FLOOR(a / b)``); ``~`` is a *full*
  regex match in DuckDB, so ``regexp_match`` renders ``regexp_matches(x, pattern)``
  (PostgreSQL's partial-match meaning); backslashes in string literals are not escapes;
  ``OFFSET`` without ``LIMIT`` renders plain ``OFFSET``; a column of a schema-qualified
  table is qualified by the table name only (``geo_mode.city``: the planner renames
  the table, see :meth:`DpsqlCompiler.visit_column`); ``FOR UPDATE`` is refused at
  compile time (a release is read-only). ``paramstyle`` is qmark, as in
  :mod:`dpsql.dbapi`; the planner binds parameters as literals before planning, so
  ``LIMIT ?`` and ``age < ?`` are planned with their values.
* **Read-only.** DDL and DML are rendered (generic DDL compiler) and sent to the DB-API,
  where the planner refuses them with :class:`~dpsql.errors.UnsupportedQueryError`;
  SQLAlchemy wraps that as ``sqlalchemy.exc.NotSupportedError`` (``.orig`` is dpsql's
  error, its message says what to do). ``commit``/``rollback`` are no-ops and the only
  isolation level is ``AUTOCOMMIT``: nothing is ever pending.
* **Catalog.** Schemas are the attached releases' aliases (one per URL: the release
  name unless ``?name=`` says otherwise), so ``FROM trips.trips`` and ``FROM trips``
  both reach the planner's logical table. Tables are what the planner accepts in FROM:
  the release name and each view name. Release views are listed as **tables**, not SQL
  views, and ``get_view_names`` is empty: they have no SQL definition to show, are
  queried exactly like the release table, and BI tools list tables (Superset's dataset
  picker, Metabase). The release's physical tables (level, prefix and domain tables)
  are not listed: they are implementation, and queries should name logical tables.
* **Columns.** The label columns of the table's attributes, then ``dp_count``.
  Categorical and hierarchy columns take the type of their public domain table (a
  ``VARCHAR`` domain gives ``String``); a binned attribute is one ``Float`` column named
  after the attribute, since the planner accepts it in numeric range predicates
  (``distance BETWEEN 10 AND 50``) and bins are interpolated on a continuous axis.
  ``dp_count`` is ``BigInteger`` when ``COUNT(*)`` on every view behind the table
  returns an integer type and no such view has a binned level (an interpolated range
  gives fractions); otherwise ``Float``. Types are read through :mod:`dpsql.dbapi` (a
  ``LIMIT 0`` query on the public domain table, a planned ``COUNT(*)``), the catalog
  through :func:`dpsql.release.store.open_release`: nothing re-parses the file. Column
  and table comments say how to use each column. There are no keys or indexes.
* ``supports_statement_cache = True``: compiled SQL depends only on the statement and
  this dialect's constants, so SQLAlchemy may cache it (on top of the DB-API plan cache).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    from sqlalchemy import exc as sa_exc
    from sqlalchemy import schema as sa_schema
    from sqlalchemy import types as sqltypes
    from sqlalchemy.dialects.postgresql.base import (
        PGCompiler,
        PGIdentifierPreparer,
        PGTypeCompiler,
    )
    from sqlalchemy.engine import default, reflection
    from sqlalchemy.sql import compiler
except ImportError as _err:  # pragma: no cover  (the bi extra is installed in CI)
    raise ImportError(
        "dpsql.sqlalchemy needs SQLAlchemy, which is not installed: "
        "`pip install 'dpsql[bi]'`") from _err

from dpsql import __version__
from dpsql.errors import OperationalError, ProgrammingError

__all__ = ["DpsqlDialect", "DpsqlCompiler"]

_URL_OPTIONS = ("name", "plan_cache_size", "threads")
COUNT_COLUMN = "dp_count"
_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                  "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}


class DpsqlCompiler(PGCompiler):
    """PostgreSQL's SQL compiler with DuckDB's meaning where the two differ."""

    def visit_regexp_match_op_binary(self, binary: Any, operator: Any, **kw: Any) -> str:
        return self._regexp_matches(binary, kw)

    def visit_not_regexp_match_op_binary(self, binary: Any, operator: Any, **kw: Any
                                         ) -> str:
        return "NOT " + self._regexp_matches(binary, kw)

    def _regexp_matches(self, binary: Any, kw: dict) -> str:
        args = [self.process(binary.left, **kw), self.process(binary.right, **kw)]
        flags = binary.modifiers.get("flags")
        if flags is not None:
            args.append(self.render_literal_value(flags, sqltypes.STRINGTYPE))
        return f"regexp_matches({', '.join(args)})"

    def visit_column(self, column: Any, add_to_result_map: Any = None,
                     include_table: bool = True, **kw: Any) -> str:
        """``geo_mode.city``, never ``trips.geo_mode.city``: the planner replaces
        ``FROM trips.geo_mode`` by a subquery named ``geo_mode``, which a three-part
        column name no longer reaches. Safe because a URL attaches one release, so two
        tables of one query never share a name across schemas."""
        table = column.table
        if (include_table and isinstance(table, sa_schema.Table) and table.schema
                and not column.is_literal):
            name = super().visit_column(column, add_to_result_map=add_to_result_map,
                                        include_table=False, **kw)
            return f"{self.preparer.quote(table.name)}.{name}"
        return super().visit_column(column, add_to_result_map=add_to_result_map,
                                    include_table=include_table, **kw)

    def limit_clause(self, select: Any, **kw: Any) -> str:
        text = ""
        if select._limit_clause is not None:
            text += " \n LIMIT " + self.process(select._limit_clause, **kw)
        if select._offset_clause is not None:
            text += " \n OFFSET " + self.process(select._offset_clause, **kw)
        return text

    def for_update_clause(self, select: Any, **kw: Any) -> str:
        raise sa_exc.CompileError(
            "FOR UPDATE / FOR SHARE locks rows for writing, but a dpsql release is "
            "read-only; drop .with_for_update()")


class DpsqlDialect(default.DefaultDialect):
    """SQLAlchemy dialect over :mod:`dpsql.dbapi` (see the module docstring)."""

    name = "dpsql"
    driver = "dpsql"
    supports_statement_cache = True

    statement_compiler = DpsqlCompiler
    ddl_compiler = compiler.DDLCompiler
    type_compiler_cls = PGTypeCompiler
    preparer = PGIdentifierPreparer

    default_paramstyle = "qmark"
    div_is_floordiv = False
    _backslash_escapes = False  # read by PostgreSQL's literal rendering
    _supports_jsonb_subscripting = False
    supports_native_enum = False
    supports_native_boolean = True
    supports_native_decimal = True
    supports_comments = True
    inline_comments = False
    supports_sane_rowcount = False
    supports_sane_multi_rowcount = False
    supports_alter = False
    supports_sequences = False
    supports_server_side_cursors = False
    supports_default_values = False
    supports_empty_insert = False
    supports_multivalues_insert = False
    insert_returning = update_returning = delete_returning = False
    postfetch_lastrowid = False
    supports_is_distinct_from = True
    requires_name_normalize = False

    # -- connecting ---------------------------------------------------------------------

    @classmethod
    def import_dbapi(cls) -> Any:
        from dpsql import dbapi

        return dbapi

    def create_connect_args(self, url: Any) -> tuple[list, dict]:
        """``(path,)`` and the dbapi keywords from the URL (see the module docstring)."""
        if url.host or url.port or url.username or url.password:
            raise sa_exc.ArgumentError(
                f"a dpsql URL names a local release file, not a server: got host/user "
                f"parts in {url.render_as_string(hide_password=True)!r}; write "
                "dpsql:///relative/path.duckdb or dpsql:////absolute/path.duckdb")
        if not url.database:
            raise sa_exc.ArgumentError(
                "the dpsql URL names no release file; write dpsql:///relative/path.duckdb "
                "or dpsql:////absolute/path.duckdb")
        opts = dict(url.query)
        unknown = sorted(set(opts) - set(_URL_OPTIONS))
        if unknown:
            raise sa_exc.ArgumentError(
                f"unknown dpsql URL option(s) {unknown}; accepted: {list(_URL_OPTIONS)} "
                "(pass other DuckDB settings as connect_args={'duckdb_config': {...}})")
        kwargs: dict[str, Any] = {}
        if "name" in opts:
            kwargs["name"] = _single(opts, "name")
        if "plan_cache_size" in opts:
            kwargs["plan_cache_size"] = _integer(opts, "plan_cache_size")
        if "threads" in opts:
            kwargs["_url_duckdb_config"] = {"threads": _integer(opts, "threads")}
        return [url.database], kwargs

    def connect(self, *cargs: Any, **cparams: Any) -> Any:
        """Open the DB-API connection; a missing release file names the path looked at."""
        if cargs and isinstance(cargs[0], (str, os.PathLike)):
            path = Path(cargs[0])
            if not path.exists():
                raise OperationalError(
                    f"no release file at {str(path.absolute())!r}; dpsql URLs follow "
                    "SQLite's convention: dpsql:///relative/path.duckdb is relative to the "
                    "working directory, dpsql:////absolute/path.duckdb (four slashes) is "
                    "absolute")
        from_url = cparams.pop("_url_duckdb_config", None)
        if from_url:  # URL settings, then connect_args={"duckdb_config": ...} on top
            cparams["duckdb_config"] = {**from_url, **(cparams.get("duckdb_config") or {})}
        return self.loaded_dbapi.connect(*cargs, **cparams)

    def _get_server_version_info(self, connection: Any) -> tuple:
        return tuple(int(p) if p.isdigit() else p for p in __version__.split("."))

    def _get_default_schema_name(self, connection: Any) -> str | None:
        aliases = list(_dbapi_conn(connection).releases)
        return aliases[0] if aliases else None

    def get_isolation_level_values(self, dbapi_conn: Any) -> list[str]:
        return ["AUTOCOMMIT"]

    def get_isolation_level(self, dbapi_conn: Any) -> str:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_conn: Any, level: str) -> None:
        """Only ``AUTOCOMMIT``, which is what a read-only release always is."""
        if level != "AUTOCOMMIT":  # SQLAlchemy checks the values first; be explicit
            raise ProgrammingError(f"isolation level {level!r}: a dpsql release is "
                                   "read-only, the only level is AUTOCOMMIT")

    def is_disconnect(self, e: Exception, connection: Any, cursor: Any) -> bool:
        return "is closed" in str(e)

    # -- reflection ---------------------------------------------------------------------

    @reflection.cache
    def _catalog(self, connection: Any, **kw: Any) -> dict[str, Any]:
        """alias → :class:`~dpsql.release.store.Release` of every attached release."""
        from dpsql.release.store import open_release

        return {alias: open_release(path)
                for alias, path in _dbapi_conn(connection).releases.items()}

    def _release(self, connection: Any, schema: str | None, **kw: Any) -> tuple[str, Any]:
        catalog = self._catalog(connection, **kw)
        if schema is None:
            schema = self.default_schema_name or next(iter(catalog), None)
        for alias, release in catalog.items():
            if schema is not None and alias.lower() == schema.lower():
                return alias, release
        return "", None

    def _table(self, connection: Any, table_name: str, schema: str | None, **kw: Any
               ) -> tuple[str, Any, list[Any]]:
        """(alias, release, views behind the table) or NoSuchTableError."""
        alias, release = self._release(connection, schema, **kw)
        if release is not None:
            if table_name.lower() in (release.name.lower(), alias.lower()):
                return alias, release, list(release.views.values())
            for view in release.views.values():
                if view.name.lower() == table_name.lower():
                    return alias, release, [view]
        where = f"{schema}." if schema else ""
        raise sa_exc.NoSuchTableError(f"{where}{table_name}")

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return list(self._catalog(connection, **kw))

    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any
                        ) -> list[str]:
        """The release name, then its views: the names the planner accepts in FROM."""
        _, release = self._release(connection, schema, **kw)
        if release is None:
            return []
        return [release.name] + [v for v in release.views if v != release.name]

    def has_table(self, connection: Any, table_name: str, schema: str | None = None,
                  **kw: Any) -> bool:
        try:
            self._table(connection, table_name, schema, **kw)
        except sa_exc.NoSuchTableError:
            return False
        return True

    @reflection.cache
    def get_columns(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list[dict[str, Any]]:
        alias, release, views = self._table(connection, table_name, schema, **kw)
        names = []
        for v in views:
            names += [a for a in v.attributes if a not in names]
        dcon = _dbapi_conn(connection)
        columns = []
        for name in names:
            attr = release.attributes[name]
            if attr.kind == "range":
                columns.append(_column(name, sqltypes.Float(), _range_comment(attr)))
                continue
            types = _probe_types(dcon, f"SELECT * FROM {_q(alias)}.{_q(attr.domain_table)} "
                                       "LIMIT 0")
            for col in attr.columns:
                columns.append(_column(col, _sa_type(types.get(col, "VARCHAR")),
                                       _label_comment(attr, col)))
        integer = all(_integer_count(dcon, alias, v) for v in views)
        columns.append(_column(COUNT_COLUMN,
                               sqltypes.BigInteger() if integer else sqltypes.Float(),
                               "the differentially private count of the group: aggregate "
                               "it as COUNT(*) (or SUM(dp_count)); dp_stderr() gives its "
                               "standard error"))
        return columns

    def get_table_comment(self, connection: Any, table_name: str,
                          schema: str | None = None, **kw: Any) -> dict[str, Any]:
        alias, release, views = self._table(connection, table_name, schema, **kw)
        kind = "" if len(views) > 1 else f" view {views[0].name!r} ({views[0].mechanism})"
        return {"text": (
            f"dpsql release {release.name!r}{kind}: differentially private counts "
            f"(rho={release.rho:g}, {release.neighbouring}); query with "
            f"SELECT <columns>, COUNT(*) FROM {table_name} GROUP BY <columns>"
            + ("; built with a fixed seed: NOT private" if release.seeded else ""))}

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any
                       ) -> list[str]:
        return []  # release views are listed as tables (module docstring)

    def get_view_definition(self, connection: Any, view_name: str,
                            schema: str | None = None, **kw: Any) -> str:
        raise sa_exc.NoSuchTableError(view_name)

    def get_temp_table_names(self, connection: Any, schema: str | None = None, **kw: Any
                             ) -> list[str]:
        return []

    def get_temp_view_names(self, connection: Any, schema: str | None = None, **kw: Any
                            ) -> list[str]:
        return []

    def get_sequence_names(self, connection: Any, schema: str | None = None, **kw: Any
                           ) -> list[str]:
        return []

    def get_pk_constraint(self, connection: Any, table_name: str,
                          schema: str | None = None, **kw: Any) -> dict[str, Any]:
        self._table(connection, table_name, schema, **kw)
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(self, connection: Any, table_name: str,
                         schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_indexes(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_unique_constraints(self, connection: Any, table_name: str,
                               schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_check_constraints(self, connection: Any, table_name: str,
                              schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []


# --------------------------------------------------------------------------------------

def _dbapi_conn(connection: Any) -> Any:
    """The :class:`dpsql.dbapi.Connection` under a SQLAlchemy connection."""
    return connection.connection.dbapi_connection


def _single(opts: dict, key: str) -> str:
    value = opts[key]
    if not isinstance(value, str):
        raise sa_exc.ArgumentError(f"the dpsql URL gives {key!r} {len(value)} times; give "
                                   "it once")
    return value


def _integer(opts: dict, key: str) -> int:
    value = _single(opts, key)
    if not value.isdigit():
        raise sa_exc.ArgumentError(f"the dpsql URL option {key}={value!r} must be a "
                                   "non-negative integer")
    return int(value)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _probe_types(dcon: Any, sql: str) -> dict[str, str]:
    """Column name → DuckDB type name of ``sql``'s result, through the DB-API."""
    cur = dcon.cursor()
    try:
        cur.execute(sql)
        cur.fetchall()
        return {d[0]: d[1] for d in cur.description}
    finally:
        cur.close()


def _integer_count(dcon: Any, alias: str, view: Any) -> bool:
    """Whether every COUNT(*) read from ``view`` is an integer (module docstring)."""
    if any(level.kind == "range" for level in view.levels):
        return False
    types = _probe_types(dcon, f"SELECT COUNT(*) AS n FROM {_q(alias)}.{_q(view.name)}")
    return types["n"].upper() in _INTEGER_TYPES


def _sa_type(type_name: str) -> sqltypes.TypeEngine:
    t = type_name.upper()
    base = t.split("(", 1)[0].strip()
    if base in ("VARCHAR", "CHAR", "BPCHAR", "TEXT", "STRING", "ENUM", "UUID"):
        return sqltypes.String()
    if base in ("BIGINT", "HUGEINT", "UBIGINT", "UHUGEINT"):
        return sqltypes.BigInteger()
    if base in _INTEGER_TYPES:
        return sqltypes.Integer()
    if base in ("DOUBLE", "FLOAT", "REAL"):
        return sqltypes.Float()
    if base in ("DECIMAL", "NUMERIC"):
        digits = t[len(base):].strip("() ").split(",")
        if len(digits) == 2 and all(d.strip().isdigit() for d in digits):
            return sqltypes.Numeric(int(digits[0]), int(digits[1]))
        return sqltypes.Numeric()
    if base == "BOOLEAN":
        return sqltypes.Boolean()
    if base == "DATE":
        return sqltypes.Date()
    if base.startswith("TIMESTAMP"):
        return sqltypes.DateTime(timezone="TIME ZONE" in t or base == "TIMESTAMPTZ")
    return sqltypes.NullType()


def _column(name: str, type_: sqltypes.TypeEngine, comment: str) -> dict[str, Any]:
    return {"name": name, "type": type_, "nullable": False, "default": None,
            "autoincrement": False, "comment": comment}


def _label_comment(attr: Any, column: str) -> str:
    what = "categorical attribute" if attr.kind == "categorical" else \
        f"level of the {attr.name!r} hierarchy ({' > '.join(attr.columns)})"
    return (f"{what}; public values in {attr.domain_table}; use it in GROUP BY and in "
            f"WHERE (=, IN, <>, LIKE ...)")


def _range_comment(attr: Any) -> str:
    return (f"binned attribute on [{attr.lower:g}, {attr.upper:g}) in {attr.bins} bins; "
            f"use it in range predicates (WHERE {attr.name} BETWEEN lo AND hi, <, <=, >, "
            f">=) or in SUM/AVG/MEDIAN, not in GROUP BY; its bins are in "
            f"{attr.domain_table}")
