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

import copy
import warnings
from collections import OrderedDict
from typing import Any, Iterator, Mapping, Sequence

import duckdb

from dpsql import duck
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
    _describe,
    _translate,
)
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


class PublicDomainWarning(UserWarning):
    """A literal of the query is not in the public domain of the column it is compared
    with (``race = 'black'`` where the domain holds ``'Black'``): the answer counts no row
    for it, which is correct SQL but most likely a typo. The text names the closest
    public values."""


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
        key = (operation, tuple((type(v), v) for v in parameters))
        hash(key)
    except TypeError:
        return None
    return key


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------
# connect / Connection
# --------------------------------------------------------------------------------------

def connect(path: str | Any, *, read_only: bool = True, name: str | None = None,
            plan_cache_size: int = 256, duckdb_config: Mapping[str, Any] | None = None,
            allow_file_access: bool = False) -> "Connection":
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
        conn.attach(path, name=name, _stacklevel=3)  # warn at connect()'s caller
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
                f"SELECT rng FROM {_quote_ident(alias)}.dpsql_release").fetchall()
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

class Cursor:
    """A PEP 249 cursor. Extras: :attr:`dp_info`, :attr:`messages`,
    :meth:`fetch_arrow_table`, :meth:`fetch_df`, :meth:`nextset`.

    ``messages`` (PEP 249's extension) lists ``(dpsql.Warning, dpsql.Warning(text))`` for
    each notice of the last ``execute`` (a literal outside a public domain:
    :mod:`dpsql.planner.check_literals`), which is also issued as a
    :class:`PublicDomainWarning` unless ``warn=False`` or ``cursor.warn_notices = False``
    (the server sends NoticeResponses instead, the CLI prints a line)."""

    def __init__(self, connection: Connection, duck_cursor: duckdb.DuckDBPyConnection,
                 *, warn: bool = True) -> None:
        self.connection = connection
        self._dcur: duckdb.DuckDBPyConnection | None = duck_cursor
        self._catalog_cur: duckdb.DuckDBPyConnection | None = None  # schema discovery's
        self.arraysize = 1
        self.lastrowid = None
        self.messages: list[tuple[type, Warning]] = []
        self.warn_notices = warn
        self._reset()

    def _reset(self) -> None:
        self._pending: list[Any] = []  # planned queries of later result sets
        self._sql: str | None = None
        self._planned: Any = None  # the current result's plan; dp_info is built from it
        self._info: dict[str, Any] | None = None
        self._description: tuple[tuple, ...] | None = None
        self._duck_description: Any = None  # DuckDB's, made PEP 249 on first access
        self._has_result = False
        self._fetched = 0  # rows handed out from the current result
        self._exhausted = False

    # -- state ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._dcur is None

    def _live(self) -> duckdb.DuckDBPyConnection:
        if self._dcur is None:
            raise InterfaceError("the cursor is closed; get a new one with connection.cursor()")
        if self.connection.closed:
            raise InterfaceError("the connection is closed; open a new one with dpsql.connect()")
        return self._dcur

    def _result(self) -> duckdb.DuckDBPyConnection:
        dcur = self._live()
        if not self._has_result:
            raise InterfaceError("no result set to fetch from: call execute() first")
        return dcur if self._catalog_cur is None else self._catalog_cur

    @property
    def description(self) -> tuple[tuple, ...] | None:
        """One 7-tuple per column of the current result (None before execute). Built from
        DuckDB's description of the result on first access, not on every execute (most
        callers never read it)."""
        if self._description is None and self._duck_description is not None:
            self._description = _describe(self._duck_description)
        return self._description

    @property
    def rowcount(self) -> int:
        """-1 until the result has been fetched to its end, then its number of rows."""
        return self._fetched if self._exhausted else -1

    @property
    def dp_info(self) -> dict[str, Any] | None:
        """How the current answer was made: view, levels, mechanism, budget, error model,
        interpolation policy, notes (from the planner); ``"privacy": "seeded: not private"``
        when the answer reads a seeded release."""
        if self._info is None and self._planned is not None:  # built on first access
            self._info = self.connection._note_seeded(dict(self._planned.info))
        return None if self._info is None else copy.deepcopy(self._info)

    @property
    def query(self) -> str | None:
        """The DuckDB SQL that the planner produced for the current result."""
        return self._sql

    # -- execution -----------------------------------------------------------------------

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> "Cursor":
        """Plan ``operation`` (parameters bound as literals first) and run it."""
        self._live()
        self._reset()
        del self.messages[:]
        planned = self._plan(operation, parameters)
        self._run(planned)
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Sequence[Any]]
                    ) -> "Cursor":
        """Plan ``operation`` for every parameter set, then run the first; the others are
        further result sets, reached with :meth:`nextset`."""
        self._live()
        self._reset()
        plans = [self._plan(operation, params) for params in seq_of_parameters]
        if plans:
            self._pending = plans[1:]
            self._run(plans[0])
        return self

    def nextset(self) -> bool | None:
        """Move to the next result set of :meth:`executemany`; None when there is none."""
        self._live()
        if not self._pending:
            self._drop_result()
            return None
        planned, self._pending = self._pending[0], self._pending[1:]
        self._run(planned)
        return True

    def _plan(self, operation: str, parameters: Sequence[Any] | None) -> Any:
        if not isinstance(operation, str):
            raise ProgrammingError(
                f"the operation must be an SQL string, got {type(operation).__name__}")
        if parameters is not None and (isinstance(parameters, (str, bytes, Mapping))
                                       or not isinstance(parameters, Sequence)):
            raise ProgrammingError(
                "parameters must be a sequence (list or tuple) matching the '?' "
                f"placeholders (paramstyle qmark), got {type(parameters).__name__}")
        return self.connection._plan(operation, list(parameters) if parameters is not None
                                     else None)

    def _run(self, planned: Any) -> None:
        dcur = self._live()
        self._drop_result()
        if planned.route == "catalog":  # schema discovery: on the catalog database
            dcur, sql = duck.run_on(dcur, planned)
            self._catalog_cur = dcur
        else:
            sql = planned.sql
        try:
            dcur.execute(sql)
            description = dcur.description
        except duckdb.Error as err:
            raise _translate(err, sql) from err
        self._sql = sql
        self._planned = planned
        for text in getattr(planned, "notices", ()):
            self.messages.append((Warning, Warning(text)))
            if self.warn_notices:
                warnings.warn(text, PublicDomainWarning, stacklevel=3)
        self._info = None
        self._description = None
        self._duck_description = description
        self._has_result = description is not None
        self._fetched = 0
        self._exhausted = False

    def _drop_result(self) -> None:
        if self._catalog_cur is not None:
            self._catalog_cur.close()
            self._catalog_cur = None
        self._sql = None
        self._planned = None
        self._info = None
        self._description = None
        self._duck_description = None
        self._has_result = False
        self._fetched = 0
        self._exhausted = False

    # -- fetching ------------------------------------------------------------------------

    def _count(self, rows: list, requested: int | None) -> list:
        self._fetched += len(rows)
        if requested is None or len(rows) < requested:
            self._exhausted = True
        return rows

    def fetchone(self) -> tuple | None:
        dcur = self._result()
        if self._exhausted:
            return None
        try:
            row = dcur.fetchone()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        if row is None:
            self._exhausted = True
            return None
        self._fetched += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        dcur = self._result()
        n = self.arraysize if size is None else size
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ProgrammingError(f"fetchmany size must be a non-negative integer, got {n!r}")
        if n == 0 or self._exhausted:
            return []
        try:
            rows = dcur.fetchmany(n)
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        return self._count(rows, n)

    def fetchall(self) -> list[tuple]:
        dcur = self._result()
        if self._exhausted:
            return []
        try:
            rows = dcur.fetchall()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        return self._count(rows, None)

    def fetch_arrow_table(self) -> Any:
        """The rest of the current result as a ``pyarrow.Table``."""
        dcur = self._result()
        try:
            if self._fetched == 0 and not self._exhausted:  # the usual case: one Arrow run
                dcur.abort()  # drop the unfetched row stream of execute()
                table = dcur.sql(self._sql).to_arrow_table()
            else:
                import pyarrow as pa

                rest = [] if self._exhausted else dcur.fetchall()
                schema = dcur.sql(self._sql).limit(0).to_arrow_table().schema
                table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rest],
                                             schema=schema)
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        self._fetched += table.num_rows
        self._exhausted = True
        return table

    def fetch_df(self) -> Any:
        """The rest of the current result as a ``pandas.DataFrame`` (needs pandas)."""
        dcur = self._result()
        try:
            import pandas  # noqa: F401  (only to give a clear error when it is missing)
        except ImportError as err:
            raise NotSupportedError(
                "fetch_df() needs pandas, which is not installed: `pip install pandas`, "
                "or use fetch_arrow_table() / fetchall()") from err
        try:
            # an exhausted result gives None: answer an empty frame with the right columns
            df = dcur.sql(self._sql).limit(0).df() if self._exhausted else dcur.df()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        self._fetched += len(df)
        self._exhausted = True
        return df

    # -- the rest of PEP 249 -------------------------------------------------------------

    def setinputsizes(self, sizes: Any) -> None:
        """No-op (PEP 249 allows it): parameters are bound as SQL literals."""
        self._live()

    def setoutputsize(self, size: Any, column: int | None = None) -> None:
        """No-op (PEP 249 allows it): results have no large columns to pre-size."""
        self._live()

    def close(self) -> None:
        """Close the cursor; closing twice is harmless."""
        if self._dcur is None:
            return
        self._drop_result()
        dcur, self._dcur = self._dcur, None
        self._reset()
        if not self.connection.closed:
            dcur.close()

    def __iter__(self) -> Iterator[tuple]:
        return self

    def __next__(self) -> tuple:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> "Cursor":
        self._live()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
