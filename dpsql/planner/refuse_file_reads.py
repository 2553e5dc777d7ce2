"""Pass 1b (locked connections only): refuse what would read a file or run unplanned SQL.

A locked-down connection (:mod:`dpsql.lockdown`) reads the release and nothing else.
DuckDB enforces that itself (no file system access); this pass refuses the same
statements earlier, with an error that says what was refused and why, and also refuses
what DuckDB would allow but the planner cannot see through:

* calls (anywhere: FROM, LATERAL, a subquery, a CTE, an IN list, a scalar position) of
  DuckDB functions that read files or URLs, or run SQL given as text, or reach outside
  the query (:func:`reads_outside`): ``read_*``, ``*_scan``, ``glob``, ``sniff_csv``,
  ``parquet_*``, ``query``, ``query_table``, ``json_execute_serialized_sql``,
  ``getvariable``, the profiling/logging/checkpoint table functions, ...;
* any other function in FROM (a table function) unless it is in :data:`TABLE_FUNCTIONS`
  (``range``, ``generate_series``, ``unnest``, the release's own ``dp_level`` ...):
  an allow-list, so that a table function added by a later DuckDB is refused until
  someone looks at it;
* a table name that DuckDB would read as a file (``FROM 'raw.parquet'``,
  ``FROM "/etc/passwd"``: its replacement scan): a name holding ``.``, ``/``, ``\\``,
  ``:``, ``*``, ``?`` or ``~``. No release table is named so.

Unlocked connections (``allow_file_access=True``, or :func:`dpsql.attach` on the
caller's own DuckDB connection) skip this pass: there the caller decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sqlglot import exp

from dpsql.errors import UnsupportedQueryError

_OUTSIDE = re.compile(
    r"read_\w*|\w+_scan|\w*_scan_\w*|glob|sniff_csv|parquet_\w+|query|query_table|getvariable"
    r"|json_execute_serialized_sql|checkpoint|force_checkpoint|enable_\w+|disable_\w+"
    r"|truncate_duckdb_logs|\w*grammar_extension|\w*external_resource\w*|which_secret"
    r"|duckdb_secrets|duckdb_logs\w*|python_\w+|load_\w+|install_\w+|sqlite_\w+"
    r"|postgres_\w+|mysql_\w+|iceberg_\w+|delta_\w+|st_read\w*|ducklake_\w+"
    r"|duckdb_extensions", re.I)

TABLE_FUNCTIONS = frozenset({
    "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree",
    "pg_timezone_names", "icu_calendar_names", "duckdb_keywords", "duckdb_types",
    "duckdb_functions", "duckdb_tables", "duckdb_columns", "duckdb_views",
    "duckdb_schemas", "duckdb_constraints",
    "pragma_table_info", "pragma_version", "pragma_platform",
    "dp_level", "dp_attribute_bounds"})
"""Table functions a locked connection may call in FROM: they compute rows or read
DuckDB's own catalog (``dp_level``/``dp_attribute_bounds`` are the release's macros).
Not ``duckdb_databases()``: it lists the attached release with its path on the host
(over ``dpsql serve``, a host fact; the catalog database, which has none, still answers
it)."""

_FILE_LIKE = re.compile(r"[./\\:*?~]")

HOST_SETTINGS = re.compile(r"director|path|repositor|output|file|home|secret|proxy|password"
                           r"|user|log_", re.I)
"""DuckDB settings whose value describes the host rather than the query: its directories
(``secret_directory`` holds the home directory, ``allowed_directories`` and
``temp_directory`` the working or temporary directory), files, extension repositories,
proxies and credentials. ``current_setting()`` of one is refused on a locked connection,
and so is a name that is not a literal (it could be any of them). ``duckdb_settings()``,
which lists them all, and catalog queries (psql's ``current_setting(s.name)`` over
``pg_settings``) run on the catalog database only, whose paths are empty
(:mod:`dpsql.schema_catalog`)."""


def reads_outside(name: str) -> bool:
    """Whether a DuckDB function called ``name`` reads files or URLs, runs SQL given as
    text, or reaches outside the query (see the module docstring)."""
    return _OUTSIDE.fullmatch(name) is not None


def _name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def _refused(what: str) -> UnsupportedQueryError:
    return UnsupportedQueryError(
        f"{what}: this connection reads the release only (file access is locked down for "
        "analysts); query the release's tables, or, as a trusted analyst joining public "
        "files, connect with allow_file_access=True (dpsql query --allow-file-access)")


def check_calls(calls: Iterable[exp.Expression], settings: bool = True) -> None:
    """Refuse the first call of a function that reaches outside the release, or
    (``settings``) that reads a setting that describes the host (:data:`HOST_SETTINGS`;
    the catalog database has none to show)."""
    for call in calls:
        name = _name(call)
        if name and reads_outside(name):
            raise _refused(f"{name}() is not allowed")
        if settings and name == "current_setting":
            _check_setting(call)


def _check_setting(call: exp.Expression) -> None:
    args = list(call.expressions) if isinstance(call, exp.Anonymous) else \
        [a for a in call.args.values() if isinstance(a, exp.Expression)]
    arg = args[0] if args else None
    if not (isinstance(arg, exp.Literal) and arg.is_string):
        raise _refused(f"current_setting({arg.sql('duckdb') if arg else ''}) is not allowed "
                       "(the setting's name must be a string literal)")
    if HOST_SETTINGS.search(arg.this):
        raise _refused(f"current_setting({arg.sql('duckdb')}) is not allowed (its value "
                       "describes the host: its directories, files or credentials)")


def check_tables(tables: Iterable[exp.Table], strict: bool = True) -> None:
    """Refuse a table function outside :data:`TABLE_FUNCTIONS` (``strict``; any that
    reaches outside otherwise), or a table name DuckDB would read as a file."""
    for t in tables:
        this = t.this
        if isinstance(this, exp.Func):
            name = _name(this)
            if reads_outside(name) or (strict and name not in TABLE_FUNCTIONS):
                raise _refused(f"the table function {name}() is not allowed")
        elif _FILE_LIKE.search(t.name or ""):
            raise _refused(f"the table name {t.name!r} looks like a file, which is not read")


def refuse_file_reads(walked: Any) -> None:
    """The pass: every call and table of a parsed query (see the module docstring), from
    the :class:`~dpsql.planner.parse_sql.Walked` of its one walk."""
    for scope in walked.scopes.values():
        if scope.calls:
            check_calls(scope.calls)
    check_calls(walked.reads)
    check_tables(walked.tables)


def refuse_file_reads_in(tree: exp.Expression) -> None:
    """The same checks on any parsed statement, by walking it (the server's catalog
    route; DuckDB's own catalog functions stay allowed there)."""
    check_calls(tree.find_all(exp.Func), settings=False)
    check_tables(tree.find_all(exp.Table), strict=False)


__all__ = ["HOST_SETTINGS", "TABLE_FUNCTIONS", "check_calls", "check_tables", "reads_outside",
           "refuse_file_reads", "refuse_file_reads_in"]
