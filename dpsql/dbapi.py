"""PEP 249 (DB-API 2.0) access to dpsql releases.

``dpsql.connect(path)`` opens an in-memory DuckDB connection and attaches the release
read-only through :func:`dpsql.duck.attach`; :meth:`Connection.attach` adds more releases
to the same connection. Every statement goes through the SQL planner (the planning step
of :func:`dpsql.duck.plan`), which checks it, binds its parameters and rewrites it onto
the release tables; DuckDB then runs the rewritten SQL. Answers are post-processing of the
release: this module imports neither ``dpsql.mechanisms`` nor the RNG (DESIGN, layering).

Decisions, and why:

* ``paramstyle = "qmark"``: DuckDB's own style (STYLE §8). The planner binds parameters as
  SQL literals in the AST *before* planning, so a parameter can never change the shape of
  a query (no injection, and the view choice sees the real value).
* ``threadsafety = 1``: threads may share the module but not a :class:`Connection`. The
  planner caches a release catalog per DuckDB connection and a cursor keeps a streaming
  DuckDB result; neither is guarded by a lock. Open one connection per thread.
* The database is read-only. ``connect(read_only=False)`` raises
  :class:`NotSupportedError` (a release is immutable: answers must stay consistent), DDL
  and DML raise :class:`NotSupportedError` from the planner, ``commit()`` is a no-op
  (PEP 249 requires the method) and so is ``rollback()``: a read-only connection never has
  pending changes, so rolling them back is vacuously done; raising would only break
  generic tools (ORMs, BI drivers) that roll back on cleanup.
* One DuckDB cursor (``con.cursor()``, a child connection that shares the attached
  releases and UDFs) per dpsql cursor, so that a partly fetched result of one cursor never
  blocks another (DuckDB 2.0 raises ``ResourceInUseException`` otherwise).
* ``rowcount`` is -1 while the size of the result is unknown; DuckDB streams results, so it
  becomes the number of rows only once the result has been fetched to the end.
* ``description`` type codes are DuckDB type names (``"BIGINT"``, ``"DECIMAL(18,3)"``),
  which compare equal to the PEP 249 type objects :data:`NUMBER`, :data:`STRING`,
  :data:`DATETIME`, :data:`BINARY` and :data:`ROWID`.
* Planning calls :func:`dpsql.planner.plan_query` on the catalog that
  :func:`dpsql.duck.attach` cached (:func:`dpsql.duck.catalog_of`): exactly what
  :func:`dpsql.duck.plan` does, minus the extra DuckDB bind it makes to report the output
  columns (0.5–1.8 ms a query), since the cursor gets them from its own execution.
* Plans are cached per connection (LRU, ``plan_cache_size`` entries, default 256), keyed
  by the SQL text and the typed parameter values, and dropped when a release is attached.
  A plan is a deterministic function of the public catalog and the query, so a cached
  plan is the plan; dashboards that re-issue a query skip the planner entirely.
* ``description`` and ``dp_info`` are built on first access, from DuckDB's description
  taken at execute time and from the plan: the same values, but a caller that never
  reads them (most do not) does not pay for them on every execute (issue #6). A plan
  put in the cache has its ``dp_info`` built first, so the cache holds no syntax trees.
* ``executemany`` plans every parameter set first (so a bad set fails before any runs);
  each set gives one result set, the first is current and :meth:`Cursor.nextset` moves to
  the next (PEP 249's optional extension, rather than silently dropping results).
* ``fetch_arrow_table()``: DuckDB 2.0 gives Arrow without a copy only from relations, so
  when nothing has been fetched yet the planned SQL is run once more as a relation (it is
  an aggregate over small release tables); after a partial fetch the remaining rows are
  converted with the result's Arrow schema.
* **Locked down** (:mod:`dpsql.lockdown`): a connection from :func:`connect` reads its
  releases and nothing else. Before its first cursor runs anything, its DuckDB database
  loses file access and its configuration is locked (:func:`dpsql.duck.lock_down`), and
  the planner refuses file readers, ``query()`` and file-like table names. The lock is
  taken at the first :meth:`Connection.cursor` (not in :func:`connect`) so that
  :meth:`Connection.attach` can add releases until then: a locked DuckDB cannot open
  another file. ``connect(..., allow_file_access=True)`` is the explicit, logged opt-out
  for a trusted analyst who joins public files.
* A release built with a seed is reproducible and therefore NOT private (DESIGN privacy
  rule 3). Attaching one emits :class:`SeededReleaseWarning` (a ``UserWarning``, so that
  Python's warning filters apply; PEP 249's ``Warning`` is an exception, raised for
  nothing here), and ``cursor.dp_info["privacy"]`` reads ``"seeded: not private"`` (next
  to the planner's boolean ``dp_info["seeded"]``).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from decimal import Decimal
from typing import Any, Mapping, Sequence

import duckdb

from dpsql import duck
from dpsql._sql import quote_ident
from dpsql._dbapi_types import (  # noqa: F401  (PEP 249 names, re-exported)
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
    _translate,
)
from dpsql._dbapi_cursor import Cursor, PublicDomainWarning  # noqa: F401 (re-exported)
from dpsql.lockdown import is_locked, note_file_access
from dpsql.planner import plan_query
from dpsql.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)

__all__ = [
    "apilevel", "threadsafety", "paramstyle", "connect", "Connection", "Cursor",
    "SeededReleaseWarning", "PublicDomainWarning", "Error", "Warning", "InterfaceError",
    "DatabaseError", "DataError", "OperationalError", "IntegrityError", "InternalError",
    "ProgrammingError", "NotSupportedError", "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "Date", "Time",
    "Timestamp", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "Binary",
]

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"

_PRIVATE_RNG = "os-entropy AES-CTR"  # dpsql.release_file.Release.seeded compares to this
SEEDED_NOTE = "seeded: not private"


class SeededReleaseWarning(UserWarning):
    """The attached release was built with a fixed seed: its noise can be reproduced, so
    it is NOT differentially private. Use such releases for tests and demos only."""


def _cache_key(operation: str, parameters: list[Any] | None) -> tuple | None:
    """A hashable key for the plan cache, or None (no caching) for unhashable values.
    Types are part of the key: ``1``, ``1.0`` and ``True`` are equal in Python but bind
    as different SQL literals."""
    if parameters is None:
        return (operation, None)
    try:
        key = (operation, tuple((type(v), str(v) if type(v) is Decimal else v)
                                for v in parameters))  # 2.50 and 2.5 write two literals
        hash(key)
    except TypeError:
        return None
    return key


# --------------------------------------------------------------------------------------
# connect / Connection
# --------------------------------------------------------------------------------------

def connect(path: str | Any, *, read_only: bool = True, name: str | None = None,
            plan_cache_size: int = 256, duckdb_config: Mapping[str, Any] | None = None,
            allow_file_access: bool = False, _stacklevel: int = 1) -> "Connection":
    """Open a DB-API connection to the release file ``path``.

    An in-memory DuckDB database is created and the release is attached read-only under
    ``name`` (default: the release's own name, which is also its logical table). Further
    releases can be added with :meth:`Connection.attach`. ``plan_cache_size`` bounds the
    per-connection plan cache (0 turns it off). ``duckdb_config`` is passed to
    ``duckdb.connect`` (e.g. ``{"threads": 2}``). ``read_only=False`` is refused: a release
    is immutable. A seeded (not private) release emits :class:`SeededReleaseWarning`.

    The connection is locked down before its first query (module docstring): no file or
    URL can be read through it. ``allow_file_access=True`` leaves file access on, for a
    trusted analyst who wants to join public files; it is logged (``dpsql`` logger,
    WARNING), and such a connection can read every file this process can.
    ``_stacklevel`` (private): how many frames above this call the warning points (the
    SQLAlchemy dialect points it at the analyst's line, past SQLAlchemy's pool).
    """
    if not isinstance(allow_file_access, bool):
        raise ProgrammingError(f"allow_file_access must be True or False, got "
                               f"{allow_file_access!r}")
    if isinstance(plan_cache_size, bool) or not isinstance(plan_cache_size, int) \
            or plan_cache_size < 0:
        raise ProgrammingError(f"plan_cache_size must be a non-negative integer, got "
                               f"{plan_cache_size!r}")
    if not read_only:
        raise NotSupportedError(
            "read_only=False: a dpsql release is immutable (its answers must stay "
            "consistent); build a new release with `dpsql release` instead")
    try:
        con = duckdb.connect(":memory:", config=dict(duckdb_config or {}))
    except duckdb.Error as err:
        raise _translate(err) from err
    conn = Connection(con, plan_cache_size, lockdown=not allow_file_access)
    try:
        conn.attach(path, name=name, _stacklevel=2 + _stacklevel)  # at connect()'s caller
    except BaseException:
        conn.close()
        raise
    if allow_file_access:
        note_file_access(f"dpsql.connect({str(path)!r})")
    return conn


class Connection:
    """A PEP 249 connection over one in-memory DuckDB database with releases attached."""

    Error = Error
    Warning = Warning
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(self, con: duckdb.DuckDBPyConnection, plan_cache_size: int = 256, *,
                 lockdown: bool = False) -> None:
        self._con: duckdb.DuckDBPyConnection | None = con
        self._lockdown = lockdown  # lock before the first cursor (module docstring)
        self._locked = False
        self._plans: OrderedDict[tuple, Any] = OrderedDict()
        self._plan_cache_size = plan_cache_size
        self._releases: dict[str, str] = {}
        self._seeded: set[str] = set()
        self._cursors: list[Cursor] = []

    # -- dpsql extensions --------------------------------------------------------------

    def attach(self, path: str | Any, name: str | None = None, *, _stacklevel: int = 2
               ) -> str:
        """Attach another release read-only; return its alias (its table name in SQL).
        A locked-down connection accepts releases until its first cursor only."""
        con = self._live()
        if self._locked:
            raise OperationalError(
                f"cannot attach {str(path)!r}: this connection is locked down (no file "
                "access) since its first query; attach every release right after "
                "dpsql.connect(), before any cursor()/execute()")
        try:
            alias = duck.attach(con, str(path), name)
        except duckdb.Error as err:
            raise _translate(err) from err
        self._plans.clear()  # the catalog changed: plans may read the new release
        self._releases[alias] = str(path)
        try:
            rng = con.execute(
                f"SELECT rng FROM {quote_ident(alias)}.dpsql_release").fetchall()
        except duckdb.Error as err:
            raise _translate(err) from err
        if not rng or rng[0][0] != _PRIVATE_RNG:
            self._seeded.add(alias)
            warnings.warn(
                f"release {alias!r} ({path}) was built with a fixed seed "
                f"({rng[0][0] if rng else 'unknown RNG'}): its noise is reproducible, so it "
                "is NOT private; use it for tests and demos only",
                SeededReleaseWarning, stacklevel=_stacklevel)
        return alias

    @property
    def locked(self) -> bool:
        """Whether the DuckDB database is locked down (no file access; see the module
        docstring)."""
        return is_locked(self._live())

    @property
    def releases(self) -> dict[str, str]:
        """Attached releases: alias → path."""
        return dict(self._releases)

    @property
    def seeded(self) -> frozenset[str]:
        """Aliases of attached releases that are seeded, hence not private."""
        return frozenset(self._seeded)

    @property
    def closed(self) -> bool:
        return self._con is None

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> "Cursor":
        """Shortcut (as in ``sqlite3``): a new cursor with ``operation`` executed."""
        return self.cursor().execute(operation, parameters)

    # -- PEP 249 -----------------------------------------------------------------------

    def cursor(self) -> "Cursor":
        """A new cursor with its own DuckDB result stream."""
        con = self._ready()
        cur = Cursor(self, con.cursor())
        self._cursors = [c for c in self._cursors if not c.closed]
        self._cursors.append(cur)
        return cur

    def close(self) -> None:
        """Close the connection and its cursors. Closing twice is harmless."""
        if self._con is None:
            return
        for cur in self._cursors:
            cur.close()
        self._cursors.clear()
        con, self._con = self._con, None
        con.close()

    def commit(self) -> None:
        """No-op: a release is read-only, so there is never anything to commit."""
        self._live()

    def rollback(self) -> None:
        """No-op: a read-only connection has no pending changes (see module docstring)."""
        self._live()

    def __enter__(self) -> "Connection":
        self._live()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise InterfaceError("the connection is closed; open a new one with dpsql.connect()")
        return self._con

    def _ready(self) -> duckdb.DuckDBPyConnection:
        """The live DuckDB connection, locked down first if this connection locks."""
        con = self._live()
        if self._lockdown and not self._locked:
            duck.lock_down(con)
            self._locked = True
        return con

    def _plan(self, operation: str, parameters: list[Any] | None) -> Any:
        """The plan of ``operation`` with ``parameters`` (cached; see module docstring)."""
        con = self._ready()
        key = _cache_key(operation, parameters) if self._plan_cache_size else None
        if key is not None and key in self._plans:
            self._plans.move_to_end(key)
            return self._plans[key]
        try:
            planned = plan_query(duck.catalog_of(con), operation, parameters)
        except Error:
            raise
        except duckdb.Error as err:
            raise _translate(err) from err
        if key is not None:
            planned.info  # built now: a cached plan must not keep the query's syntax tree
            self._plans[key] = planned
            if len(self._plans) > self._plan_cache_size:
                self._plans.popitem(last=False)
        return planned

    def _note_seeded(self, info: dict[str, Any]) -> dict[str, Any]:
        """Add ``dp_info["privacy"] = "seeded: not private"`` when the answer reads a
        seeded release (the planner's ``seeded`` flag, or an alias attached here)."""
        aliases = {r.get("alias") for r in info.get("references") or []}
        if info.get("seeded") or aliases & self._seeded:
            info["privacy"] = SEEDED_NOTE
        return info


# --------------------------------------------------------------------------------------
# Cursor
# --------------------------------------------------------------------------------------
