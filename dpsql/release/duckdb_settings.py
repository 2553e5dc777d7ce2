"""DuckDB's resources for a build: memory limit, threads, temporary directory, and the
errors that running out of them gives.

The spec's ``[engine]`` (:mod:`dpsql.engine_settings`) and ``dpsql release
--memory-limit/--threads/--temp-dir`` set them on the build's connection. Running out of
memory or of disk while counting is not a problem of the data, so it gets its own
one-line :class:`~dpsql.errors.OperationalError` that names the setting to change,
instead of "cannot read the source".
"""

from __future__ import annotations

import duckdb

from dpsql._sql import quote_literal
from dpsql.engine_settings import EngineSettings, size_bytes
from dpsql.errors import Error, OperationalError

_DISK_FULL = ("no space left on device", "disk is full", "max_temp_directory_size",
              "not enough space", "disk quota exceeded")


def configure(con: duckdb.DuckDBPyConnection, settings: EngineSettings) -> None:
    """Apply the memory limit, threads and temporary directory of ``settings``."""
    try:
        if settings.memory_limit is not None:
            con.execute(f"SET memory_limit = {quote_literal(settings.memory_limit)}")
        if settings.threads is not None:
            con.execute(f"SET threads = {int(settings.threads)}")
        if settings.temp_directory is not None:
            con.execute(f"SET temp_directory = {quote_literal(settings.temp_directory)}")
    except duckdb.Error as err:
        raise OperationalError(f"engine: DuckDB refused a setting: {_first_line(err)}; fix "
                               "engine.memory_limit, threads or temp_directory") from err


def memory_limit(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory limit on ``con``, in bytes."""
    text = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    return size_bytes(str(text).replace(" ", ""))


def engine_error(err: duckdb.Error, con: duckdb.DuckDBPyConnection) -> Error | None:
    """The dpsql error for running out of memory or disk while reading and counting the
    source; None for any other DuckDB error (a problem of the source)."""
    text = str(err)
    lower = text.lower()
    if any(s in lower for s in _DISK_FULL):
        where = _setting(con, "temp_directory") or "DuckDB's default .tmp directory"
        return OperationalError(f"the disk under the temporary directory ({where}) is full "
                                "while counting; set engine.temp_directory (--temp-dir) to a "
                                "disk with more free space, or raise engine.memory_limit "
                                "(--memory-limit) so that less is spilled")
    if isinstance(err, duckdb.OutOfMemoryException) or "out of memory" in lower:
        limit = _setting(con, "memory_limit") or "DuckDB's default"
        return OperationalError(f"DuckDB ran out of memory while counting (memory_limit = "
                                f"{limit}); raise engine.memory_limit (--memory-limit), lower "
                                "engine.threads (--threads), or set engine.temp_directory "
                                "(--temp-dir) on a disk with room to spill")
    return None


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    try:
        value = con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0]
    except duckdb.Error:
        return None
    return str(value) if value else None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
