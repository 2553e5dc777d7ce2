"""PEP 249 type objects and constructors, DuckDB error translation and result
descriptions for :mod:`dpsql.dbapi` (split out to keep that module to one concept: the
connection and cursor). Public names are re-exported by :mod:`dpsql.dbapi`."""

from __future__ import annotations

import datetime as _dt
import re
import time as _time
from typing import Sequence

import duckdb

from dpsql.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

# --------------------------------------------------------------------------------------
# PEP 249 type objects and constructors
# --------------------------------------------------------------------------------------

class _TypeObject:
    """Compares equal to every DuckDB type name of one PEP 249 family."""

    def __init__(self, name: str, *bases: str) -> None:
        self.name = name
        self.bases = frozenset(bases)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _TypeObject):
            return self is other
        if isinstance(other, str):
            return _base_type(other) in self.bases
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"dpsql.dbapi.{self.name}"


def _base_type(type_name: str) -> str:
    """``"DECIMAL(18,3)"`` → ``"DECIMAL"``; ``"INTEGER[]"`` → ``"LIST"``."""
    t = type_name.strip().upper()
    if t.endswith("]"):
        return "LIST"
    return t.split("(", 1)[0].strip()


STRING = _TypeObject("STRING", "VARCHAR", "CHAR", "BPCHAR", "TEXT", "STRING", "ENUM", "UUID",
                     "JSON")
BINARY = _TypeObject("BINARY", "BLOB", "BYTEA", "VARBINARY", "BIT", "BITSTRING")
NUMBER = _TypeObject("NUMBER", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                     "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT",
                     "DOUBLE", "REAL", "DECIMAL", "NUMERIC", "BOOLEAN", "VARINT", "BIGNUM")
DATETIME = _TypeObject("DATETIME", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE",
                       "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIME WITH TIME ZONE",
                       "TIMESTAMPTZ", "TIMETZ", "INTERVAL")
ROWID = _TypeObject("ROWID")  # releases have no row ids: nothing compares equal

Date = _dt.date
Time = _dt.time
Timestamp = _dt.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> _dt.date:  # noqa: N802  (PEP 249 name)
    """The local date of a POSIX timestamp (PEP 249)."""
    return Date(*_time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> _dt.time:  # noqa: N802
    """The local time of day of a POSIX timestamp (PEP 249)."""
    return Time(*_time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> _dt.datetime:  # noqa: N802
    """The local date and time of a POSIX timestamp (PEP 249)."""
    return Timestamp(*_time.localtime(ticks)[:6])


# --------------------------------------------------------------------------------------
# DuckDB errors → dpsql errors
# --------------------------------------------------------------------------------------

_DUCK_TO_DPSQL: tuple[tuple[type, type], ...] = (
    (duckdb.DataError, DataError),
    (duckdb.IntegrityError, IntegrityError),
    (duckdb.InternalError, InternalError),
    (duckdb.NotSupportedError, NotSupportedError),
    (duckdb.ProgrammingError, ProgrammingError),
    (duckdb.OperationalError, OperationalError),
)


_INTERNAL_HINT = re.compile(r'Did you mean "(?:[^"]*dpsql[^"]*|[^"]*__l\d+)"\?', re.IGNORECASE)
"""DuckDB's suggestion of a close name when it is one of a release's internal or level
tables (``dpsql_nodes.trips__geo_mode__l4`` for a mistyped ``trip``, ``geo_mode__l1``
for ``geo_mod``): not the name the analyst meant."""


def _translate(err: duckdb.Error, sql: str | None = None) -> Error:
    """The dpsql error for a DuckDB error (raise it ``from err``)."""
    where = f" while running the planned SQL: {sql}" if sql else ""
    text = " ".join(str(err).split())  # DuckDB messages may span lines
    text = _INTERNAL_HINT.sub("SHOW TABLES lists the tables to query.", text)
    for duck_cls, ours in _DUCK_TO_DPSQL:
        if isinstance(err, duck_cls):
            if ours is InternalError:
                return InternalError(f"DuckDB internal error{where}: {text}")
            return ours(f"{text}{where}")
    return DatabaseError(f"{text}{where}")


# --------------------------------------------------------------------------------------
# Result descriptions
# --------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"^\s*DECIMAL\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*$", re.IGNORECASE)


def _describe(duck_description: Sequence[tuple] | None) -> tuple[tuple, ...] | None:
    """PEP 249 7-tuples with DuckDB type names as type codes (see module docstring)."""
    if duck_description is None:
        return None
    out = []
    for col in duck_description:
        type_name = str(col[1])
        precision = scale = None
        m = _DECIMAL.match(type_name)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
        out.append((col[0], type_name, None, None, precision, scale, None))
    return tuple(out)
