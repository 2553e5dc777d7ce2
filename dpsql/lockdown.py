"""The lock-down of a DuckDB database that answers analysts: no file, no URL, no new code.

A release is safe to query because it holds no raw data. An analyst's DuckDB connection
could still read the raw data itself (``read_parquet('<the curator's source>')``,
``read_csv('/etc/passwd')``, ``glob('*')``) and mix it into an answer. So every analyst
entry point (:func:`dpsql.connect`, ``dpsql query``, ``dpsql serve``, the SQLAlchemy
dialect, and :func:`dpsql.attach` with ``lockdown=True``) locks its DuckDB once the
release is attached, with :data:`SETTINGS`:

* ``enable_external_access = false``: DuckDB refuses every file system and network
  operation (its table functions, ``COPY``, ``ATTACH``, ``INSTALL``/``LOAD``,
  ``EXPORT``). Databases attached before stay readable: the release itself.
* no extension is loaded or installed behind a query's back (``autoload_known_extensions``,
  ``autoinstall_known_extensions``, ``allow_community_extensions``): the functions
  available are those of the core build, known in advance;
* ``python_enable_replacements = false``: a table name never reads a Python variable of
  the calling code (DuckDB's replacement scan of pandas/Arrow objects);
* ``allow_persistent_secrets = false``: no secret is read from or written to disk;
* ``lock_configuration = true``, last: no ``SET``/``RESET`` can undo the above.

The planner also refuses, on a locked connection, the statements that would read a
file or run SQL it has not planned (:mod:`dpsql.planner.refuse_file_reads`), so that the
analyst gets a clear error rather than DuckDB's permission error, and so that
``query()``/``query_table()`` (which DuckDB allows) are refused too.

The opt-out is explicit and logged: ``dpsql.connect(path, allow_file_access=True)`` /
``dpsql query --allow-file-access`` leave the connection unlocked, for a trusted analyst
who wants to join public files. :func:`note_file_access` logs it on the ``dpsql`` logger
at WARNING level (Python prints such records on stderr when no logging is configured).
"""

from __future__ import annotations

import logging

import duckdb

from dpsql.errors import OperationalError

SETTINGS: tuple[tuple[str, str], ...] = (
    ("enable_external_access", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("python_enable_replacements", "false"),
    ("allow_persistent_secrets", "false"),
    ("lock_configuration", "true"),  # last: it freezes the others
)

logger = logging.getLogger("dpsql")


def lock_duckdb(con: duckdb.DuckDBPyConnection) -> None:
    """Apply :data:`SETTINGS` to ``con``'s DuckDB database (idempotent)."""
    if is_locked(con):
        return
    try:
        for name, value in SETTINGS:
            con.execute(f"SET {name} = {value}")
    except duckdb.Error as err:
        raise OperationalError(f"cannot lock down the DuckDB connection: {err}") from err


def is_locked(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con``'s database runs without file access and with its configuration
    locked."""
    try:
        row = con.execute("SELECT current_setting('enable_external_access'), "
                          "current_setting('lock_configuration')").fetchall()[0]
    except duckdb.Error as err:
        raise OperationalError(f"cannot read the DuckDB settings: {err}") from err
    return (not row[0]) and bool(row[1])


def note_file_access(where: str) -> None:
    """Log that ``where`` (e.g. ``dpsql.connect('trips.duckdb')``) runs unlocked."""
    logger.warning("%s: file access allowed (allow_file_access): queries may read any file "
                   "or URL this process can reach and join it with the release; for trusted "
                   "analysts only", where)


__all__ = ["SETTINGS", "is_locked", "lock_duckdb", "note_file_access"]
