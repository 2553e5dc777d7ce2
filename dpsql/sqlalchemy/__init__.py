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
  in a URL: ``name`` (the alias, default the release name), ``plan_cache_size``,
  ``threads`` (DuckDB's setting) and ``allow_file_access`` (``true`` leaves file access
  on: the opt-out of :mod:`dpsql.lockdown`; every connection is locked down otherwise). Any other key is refused with the list of accepted
  ones; ``connect_args={"duckdb_config": {...}}`` passes the rest. A missing file is an
  :class:`~dpsql.errors.OperationalError` that names the absolute path it looked for
  and the slash convention; SQLAlchemy wraps it as ``sqlalchemy.exc.OperationalError``.
* **SQL rendering.** The compiler is SQLAlchemy's PostgreSQL compiler (with its type
  compiler and identifier quoting) on a plain :class:`DefaultDialect`, not a subclass of
  the PostgreSQL dialect: DuckDB's grammar is PostgreSQL's, and sqlglot's DuckDB reader
  (the planner's parser) accepts what that compiler emits, while the PostgreSQL dialect
  itself would run ``pg_catalog`` queries on connect and on reflection. Where DuckDB's
  meaning differs, the compiler says so: ``/`` is true division in DuckDB
  (``div_is_floordiv = False``, so ``//`` renders ``FLOOR(a / b)``); backslashes in
  string literals are not escapes; ``regexp_match`` (PostgreSQL's ``~``, a partial
  match) renders DuckDB's ``regexp_matches(x, pattern)`` by name, the one spelling
  every sqlglot version dpsql accepts reads the same way; a column of a
  schema-qualified table is qualified by the table name only (``geo_mode.city``: the
  planner renames the table, see :meth:`DpsqlCompiler.visit_column`); ``FOR UPDATE`` is
  refused at
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
* **Columns.** The label columns of the table's attributes (dimensions first, then
  binned attributes), then ``dp_count``.
  Categorical and hierarchy columns take the type of their public domain table (a
  ``VARCHAR`` domain gives ``String``, an integer one ``BigInteger``); a binned attribute
  is one column named after the attribute, typed as ``DESCRIBE`` and ``GROUP BY`` type it
  (:func:`dpsql.schema_catalog.range_type`: integer values ``BigInteger``, dates
  ``Date``, timestamps ``DateTime``, decimal and real values ``Float``), used in range
  predicates (``distance BETWEEN 10 AND 50``).
  ``dp_count`` is typed as ``DESCRIBE`` types it (``BigInteger`` when every view
  behind the table gives integer counts and none has a binned level, whose interpolated
  ranges give fractions: :func:`dpsql.schema_catalog.integer_counts`; otherwise
  ``Float``). Types are read through :mod:`dpsql.dbapi` (a ``LIMIT 0`` query on the
  public domain table, ``DESCRIBE`` of the logical table), the catalog
  through :func:`dpsql.release_file.open_release`: nothing re-parses the file. Column
  and table comments say how to use each column. There are no keys or indexes.
* ``supports_statement_cache = True``: compiled SQL depends only on the statement and
  this dialect's constants, so SQLAlchemy may cache it (on top of the DB-API plan cache).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

try:
    from sqlalchemy import exc as sa_exc
    from sqlalchemy import schema as sa_schema
    from sqlalchemy.dialects.postgresql.base import (
        PGCompiler,
        PGIdentifierPreparer,
        PGTypeCompiler,
    )
    from sqlalchemy.engine import default
    from sqlalchemy.sql import compiler
    from sqlalchemy.sql import sqltypes
except ImportError as _err:  # pragma: no cover  (the bi extra is installed in CI)
    from dpsql._install import install_hint

    raise ImportError("dpsql.sqlalchemy needs SQLAlchemy, which is not installed: "
                      f"`{install_hint('bi')}`") from _err

from dpsql import __version__
from dpsql.errors import OperationalError
from dpsql.sqlalchemy._inspection import Inspection, dbapi_conn

__all__ = ["DpsqlDialect", "DpsqlCompiler"]

_URL_OPTIONS = ("name", "plan_cache_size", "threads", "allow_file_access")


class DpsqlCompiler(PGCompiler):
    """PostgreSQL's SQL compiler with DuckDB's meaning where the two differ."""

    def visit_column(self, column: Any, add_to_result_map: Any = None,
                     include_table: bool = True, **kw: Any) -> str:
        """``geo_mode.city``, never ``trips.geo_mode.city``: the planner replaces
        ``FROM trips.geo_mode`` by a subquery named ``geo_mode``, which a three-part
        column name no longer reaches. Two tables of one SELECT with the same name in
        two schemas (two attached releases) would then be ambiguous: DuckDB says so
        (no wrong answer), and aliasing them (``.alias()``) resolves it."""
        table = column.table
        if (include_table and isinstance(table, sa_schema.Table) and table.schema
                and not column.is_literal):
            name = super().visit_column(column, add_to_result_map=add_to_result_map,
                                        include_table=False, **kw)
            return f"{self.preparer.quote(table.name)}.{name}"
        return super().visit_column(column, add_to_result_map=add_to_result_map,
                                    include_table=include_table, **kw)

    def visit_regexp_match_op_binary(self, binary: Any, operator: Any, **kw: Any) -> str:
        """``regexp_matches(x, pattern[, flags])``: DuckDB's partial match, which is what
        PostgreSQL's ``~`` means. Not ``~`` itself: sqlglot before 30.27 reads DuckDB's
        ``~`` as a full match (the planner then refuses it, see
        :mod:`dpsql.planner._sqlglot_compat`)."""
        return self._regexp_matches(binary, kw)

    def visit_not_regexp_match_op_binary(self, binary: Any, operator: Any, **kw: Any
                                         ) -> str:
        return f"NOT {self._regexp_matches(binary, kw)}"

    def _regexp_matches(self, binary: Any, kw: dict) -> str:
        args = [self.process(binary.left, **kw), self.process(binary.right, **kw)]
        flags = binary.modifiers["flags"]
        if isinstance(flags, str):  # DuckDB's options: 'i' (case-insensitive), 's', 'm'...
            args.append(self.render_literal_value(flags, sqltypes.STRINGTYPE))
        elif flags is not None:  # SQLAlchemy before 1.4.4x keeps them as a bound literal
            args.append(self.process(flags, **kw))
        return f"regexp_matches({', '.join(args)})"

    def for_update_clause(self, select: Any, **kw: Any) -> str:
        raise sa_exc.CompileError(
            "FOR UPDATE / FOR SHARE locks rows for writing, but a dpsql release is "
            "read-only; drop .with_for_update()")


_OWN = tuple(str(Path(f).parent) + os.sep for f in (__file__, sa_exc.__file__))
"""The directories of dpsql's dialect and of SQLAlchemy (frames :func:`_caller_level`
skips; dpsql's other modules lie under ``site-packages`` once installed, or are not on
the path between the analyst and the pool)."""


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside dpsql, SQLAlchemy and installed
    packages (the analyst's ``pd.read_sql(...)`` or ``engine.connect()``): a warning
    raised while SQLAlchemy's pool connects is then reported at the line that asked for
    the connection, not inside SQLAlchemy or pandas (Python 3.12's
    ``skip_file_prefixes``, on 3.10 too). When every frame is such code, the outermost.
    Level 1 is the caller of this function."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _library(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _library(filename: str) -> bool:
    return filename.startswith(_OWN) or any(
        f"{os.sep}{d}{os.sep}" in filename for d in ("site-packages", "dist-packages"))


class DpsqlDialect(Inspection, default.DefaultDialect):
    """SQLAlchemy dialect over :mod:`dpsql.dbapi` (see the module docstring); the
    Inspector side is :class:`~dpsql.sqlalchemy._inspection.Inspection`."""

    name = "dpsql"
    driver = "dpsql"
    supports_statement_cache = True

    statement_compiler = DpsqlCompiler
    ddl_compiler = compiler.DDLCompiler
    type_compiler_cls = PGTypeCompiler  # SQLAlchemy 2.x
    type_compiler = PGTypeCompiler  # 1.4 (2.x instantiates this one too when set)
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

    @staticmethod
    def dbapi(**kwargs: Any) -> Any:
        """The DB-API module, for SQLAlchemy 1.4 (``create_engine`` calls
        ``dialect_cls.dbapi()``; 2.x calls :meth:`import_dbapi` and stores the module
        on the instance as ``dbapi``). A static method, so that 2.x does not take it for
        the deprecated ``dbapi()`` classmethod."""
        from dpsql import dbapi

        return dbapi

    @classmethod
    def import_dbapi(cls) -> Any:
        return cls.dbapi()

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
        if "allow_file_access" in opts:
            value = _single(opts, "allow_file_access").lower()
            if value not in ("true", "false"):
                raise sa_exc.ArgumentError(f"the dpsql URL option allow_file_access={value!r} "
                                           "must be true or false")
            kwargs["allow_file_access"] = value == "true"
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
        # a seeded release's warning at the analyst's line, not inside SQLAlchemy's pool
        # (no warnings.catch_warnings here: it swaps process-wide state, and two pool
        # threads connecting at once left every later warning in a dead list)
        return self.dbapi.connect(*cargs, _stacklevel=_caller_level(),  # 1.4: no loaded_dbapi
                                  **cparams)

    def _get_server_version_info(self, connection: Any) -> tuple:
        return tuple(int(p) if p.isdigit() else p for p in __version__.split("."))

    def _get_default_schema_name(self, connection: Any) -> str | None:
        aliases = list(dbapi_conn(connection).releases)
        return aliases[0] if aliases else None

    def get_isolation_level_values(self, dbapi_conn: Any) -> list[str]:
        return ["AUTOCOMMIT"]

    def get_isolation_level(self, dbapi_conn: Any) -> str:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_conn: Any, level: str) -> None:
        """Only ``AUTOCOMMIT``, which is what a read-only release always is."""
        if level != "AUTOCOMMIT":  # 2.x checks the values first, 1.4 does not
            raise sa_exc.ArgumentError(f"isolation level {level!r}: a dpsql release is "
                                       "read-only, the only level is AUTOCOMMIT")

    def is_disconnect(self, e: Exception, connection: Any, cursor: Any) -> bool:
        return "is closed" in str(e)


# --------------------------------------------------------------------------------------

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
