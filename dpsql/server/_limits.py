"""Resource limits of ``dpsql serve``: a statement timeout and a memory cap per session.

Without them one analyst could hold a core for ever (``SELECT sum(range) FROM
range(1e12)``) or exhaust the machine's memory (a large cross join); statistical offices do
not expose a server like that. Decisions:

* **Statement timeout** (``--statement-timeout``, default 300 s, 0 = none). A statement that
  runs longer is stopped with DuckDB's ``connection.interrupt()`` (it stops a running scan
  within milliseconds) and the client gets SQLSTATE 57014 (query_canceled) with a message
  naming the limit. The clock starts when the statement is routed and stops when its
  result is materialised; sending the rows is not counted (that is the client's pace).
  Session commands (``SET``, ``BEGIN`` ...) never touch DuckDB and are not timed.
  One clock thread holds every session's deadlines (:class:`_Clock`); a timer can never
  fire into a later statement: each statement is its own token, the statement ends by
  clearing the session's current token under a lock, and the clock interrupts
  (:meth:`Watchdog.fire`) only while, under that same lock, the token is still current.
  DuckDB forgets an interrupt that arrives between queries, and a dpsql statement may run
  several DuckDB queries (planning, then the query), so once expired the clock interrupts
  again every 50 ms until the statement ends. The interrupt reaches the session's
  connection, its catalog cursor and the planner's own DuckDB cursor (interrupting a
  parent connection does not stop a child cursor's query; a CancelRequest on the planner
  route used to be lost so).
  A Describe(statement) plans and binds the statement without running it
  (:meth:`Session.describe`), so a statement is run, and timed, once: by its Execute.
  A client may lower its own limit with ``SET statement_timeout`` (PostgreSQL units:
  ``5000``, ``'5s'``, ``'1min'``), never raise it: ``0`` or a longer value leaves the
  server's limit in force.
* **Memory cap** (``--memory-limit``, default ``1GB``, DuckDB's size syntax) is each
  session's DuckDB ``memory_limit``; the shared catalog database gets the same cap. No
  spilling: ``temp_directory = ''`` and ``max_temp_directory_size = '0B'``, so a query
  over the cap fails (SQLSTATE 53200, out_of_memory) instead of filling the server's
  disk with one client's temporary files; the session survives. The worst case is
  therefore about ``(max_connections + 1) x memory_limit`` of DuckDB memory. DuckDB's
  cap does not cover the Python rows a result becomes, so results are fetched in chunks
  and refused (53200) past the same size (:func:`fetch_capped`).
* Clients cannot lift either: both DuckDB databases run with ``lock_configuration =
  true``, only single SELECT statements reach DuckDB (:mod:`dpsql.server._guard`), and
  ``SET``/``RESET`` of DuckDB's resource settings (:data:`OPERATOR_SETTINGS`) are refused
  with SQLSTATE 42501 rather than silently ignored.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
import sys
import threading
import time
from datetime import date, timedelta
from datetime import time as time_of_day
from operator import itemgetter
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence
from uuid import UUID

import duckdb

from dpsql.errors import OperationalError, ProgrammingError, UnsupportedQueryError
from dpsql.lockdown import SETTINGS as LOCKDOWN_SETTINGS

DEFAULT_STATEMENT_TIMEOUT = 300.0  # seconds
DEFAULT_MEMORY_LIMIT = "1GB"
REINTERRUPT = 0.05  # seconds between interrupts once a statement has expired

# DuckDB settings that bound a session's resources or its access to files (the lock-down
# of dpsql.lockdown): set by the operator only
OPERATOR_SETTINGS = frozenset({
    "memory_limit", "max_memory", "threads", "worker_threads", "external_threads",
    "temp_directory", "max_temp_directory_size", "allocator_flush_threshold",
    "allocator_background_threads", "allowed_paths", "allowed_directories",
    "allowed_configs", "allow_unsigned_extensions", "disabled_filesystems",
    *(name for name, _ in LOCKDOWN_SETTINGS)})


class StatementTimeoutError(OperationalError):
    """A statement ran longer than the statement timeout: SQLSTATE 57014."""


class QueryCanceledError(OperationalError):
    """A statement the client cancelled (CancelRequest): SQLSTATE 57014."""


class OutOfMemoryError(OperationalError):
    """A statement needed more memory than the session's cap: SQLSTATE 53200."""


class OperatorSettingError(UnsupportedQueryError):
    """SET/RESET of a resource setting only the operator may change: SQLSTATE 42501."""


def check_statement_timeout(value: object) -> float:
    """``value`` as seconds (0 = no timeout); a clear error for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        raise ProgrammingError(f"statement_timeout {value!r} must be a number of seconds >= 0 "
                               f"(0 = no timeout; the default is {DEFAULT_STATEMENT_TIMEOUT:g})")
    return float(value)


def duckdb_config(memory_limit: str) -> dict[str, str]:
    """The DuckDB configuration that caps one database: ``memory_limit``, no spilling."""
    return {"memory_limit": memory_limit, "temp_directory": "",
            "max_temp_directory_size": "0B"}


_SHOWN = re.compile(r"([\d.]+)\s*(bytes|KiB|MiB|GiB|TiB|PiB)")
_BINARY = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
           "PiB": 1 << 50}


def check_memory_limit(value: object) -> tuple[str, int]:
    """``(value, bytes)`` if DuckDB reads ``value`` as a size (``'512MB'``, ``'2GB'``,
    ``'1.5GiB'``); the bytes are DuckDB's own reading (what it shows), not a re-parse."""
    if not isinstance(value, str) or not value.strip():
        raise ProgrammingError(f"memory_limit {value!r} must be a size such as '512MB' or "
                               f"'2GB' (the default is {DEFAULT_MEMORY_LIMIT!r})")
    value = value.strip()
    try:
        con = duckdb.connect(":memory:", config={"threads": 1, **duckdb_config(value)})
    except duckdb.Error as err:
        raise ProgrammingError(f"memory_limit {value!r} is not a size DuckDB reads: give e.g. "
                               f"'512MB' or '2GB' ({err})") from err
    try:
        shown = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    except duckdb.Error as err:
        raise ProgrammingError(f"memory_limit {value!r} is too small for DuckDB to run at "
                               "all: give at least '100MB'") from err
    finally:
        con.close()
    m = _SHOWN.fullmatch(str(shown).strip())
    if m is None:  # a DuckDB that shows sizes otherwise: no Python-side cap beyond DuckDB's
        return value, 1 << 62
    return value, int(float(m.group(1)) * _BINARY[m.group(2)])


FETCH_ROWS = 4096  # rows fetched from DuckDB at a time while a result is materialised


_NESTED = (list, tuple, dict)
_FIXED = (float, bool, date, time_of_day, timedelta, UUID)
"""Value types whose objects all have one size: a column of them is measured by one."""


def _deep_bytes(value: Any) -> int:
    """Bytes of a value with its elements (a LIST, STRUCT or MAP value: a list or dict)."""
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_deep_bytes(k) + _deep_bytes(v)
                                          for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sys.getsizeof(value) + sum(map(_deep_bytes, value))
    return sys.getsizeof(value)


def rows_bytes(rows: Sequence[Sequence[Any]]) -> int:
    """Bytes of ``rows`` as Python objects: every row and every value, nested values to
    their leaves (shared small objects and NULLs counted as values, so it errs high).
    Every row, not a sample: estimated from 16 rows of each chunk, ``CASE WHEN i % 256 =
    0 THEN '' ELSE repeat('x', 100000) END`` sampled only the empty rows, and a LIST or
    STRUCT counted its container only, so 820 MB of rows passed a 100 MB cap. Measured by
    column in C loops (``map``); a column of fixed-size values (floats, dates...) by its
    first value."""
    if not rows:
        return 0
    total = sum(map(sys.getsizeof, rows))
    for i in range(len(rows[0])):
        column = map(itemgetter(i), rows)
        first = next((v for v in map(itemgetter(i), rows) if v is not None), None)
        if first is None or isinstance(first, _FIXED):
            total += len(rows) * sys.getsizeof(first)
        else:
            total += sum(map(_deep_bytes if isinstance(first, _NESTED) else sys.getsizeof,
                             column))
    return total


def fetch_capped(fetchmany: Callable[[int], list], max_bytes: int, memory_limit: str) -> list:
    """All rows of a result, fetched :data:`FETCH_ROWS` at a time, refused (53200) once
    they would take more than ``max_bytes`` as Python objects.

    DuckDB's ``memory_limit`` bounds its own buffers, not the Python rows a result is
    turned into: ``SELECT range, range::VARCHAR FROM range(1e8)`` under a 50 MB cap took
    18 GB of the server's memory through ``fetchall()``. Each chunk is measured whole
    (:func:`rows_bytes`)."""
    rows: list = []
    used = 0.0
    while True:
        chunk = fetchmany(FETCH_ROWS)
        if not chunk:
            return rows
        used += rows_bytes(chunk)
        if used > max_bytes:
            raise OutOfMemoryError(
                f"out of memory: the result has more than {len(rows) + len(chunk)} rows and "
                f"would take more than this session's memory limit ({memory_limit}); "
                "aggregate it (GROUP BY, COUNT) or add a LIMIT, or ask the operator to raise "
                "dpsql serve --memory-limit")
        rows.extend(chunk)


_PG_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_pg_timeout(value: str) -> float | None:
    """A PostgreSQL ``statement_timeout`` value in seconds (a bare number is
    milliseconds, as in PostgreSQL); None when it is not one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(us|ms|s|min|h|d)?\s*", value, re.I)
    if m is None:
        return None
    return float(m.group(1)) * _PG_UNITS[(m.group(2) or "ms").lower()]


def pg_timeout(seconds: float) -> str:
    """Seconds as PostgreSQL shows ``statement_timeout`` (``0``, ``300s``, ``1500ms``)."""
    if seconds <= 0:
        return "0"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


class Statement:
    """One timed statement: ``expired`` turns True when the clock interrupted it."""

    __slots__ = ("done", "expired", "timeout", "dog")

    def __init__(self, timeout: float, dog: "Watchdog | None" = None) -> None:
        self.done = False
        self.expired = False
        self.timeout = timeout
        self.dog = dog  # dropped when the statement ends: the heap keeps no session alive


class _Clock:
    """One daemon thread for every session's deadlines (a heap), started on first use.

    A thread per statement cost ~0.3 ms a statement (measured: 0.69 -> 0.94 ms for a
    GROUP BY over psycopg); pushing on a heap costs microseconds. Finished statements leave
    the heap lazily (when they reach its top) or when it holds twice as many entries as
    running statements, so a server with a long timeout does not accumulate them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Statement]] = []
        self._seq = itertools.count()
        self._running = 0
        self._thread: threading.Thread | None = None

    def add(self, delay: float, stmt: Statement, new: bool = True) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="dpsql-statement-timeout")
                self._thread.start()
            self._running += new
            if len(self._heap) > 2 * self._running + 1024:
                self._heap = [e for e in self._heap if not e[2].done]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._seq), stmt))
            if self._heap[0][2] is stmt:
                self._cond.notify()

    def finished(self) -> None:
        with self._cond:
            self._running -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].done:
                        heapq.heappop(self._heap)
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        stmt = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            dog = stmt.dog
            if dog is not None and dog.fire(stmt):  # still running: again soon (docstring)
                self.add(REINTERRUPT, stmt, new=False)
            dog = stmt = None  # this frame waits next: it must keep no session alive


_CLOCK = _Clock()


class Watchdog:
    """Interrupts a session's statement that outlives its timeout (module docstring)."""

    def __init__(self, interrupt: Callable[[], None]) -> None:
        self._interrupt = interrupt
        self._lock = threading.Lock()
        self._current: Statement | None = None

    @contextmanager
    def statement(self, timeout: float) -> Iterator[Statement]:
        stmt = Statement(timeout, self)
        if timeout <= 0:
            yield stmt
            return
        with self._lock:
            self._current = stmt
        _CLOCK.add(timeout, stmt)
        try:
            yield stmt
        finally:
            with self._lock:  # from here on no interrupt can reach a later statement
                self._current = None
                stmt.done = True
                stmt.dog = None
            _CLOCK.finished()

    def fire(self, stmt: Statement) -> bool:
        """Interrupt ``stmt`` if it is still this session's running statement."""
        with self._lock:
            if self._current is not stmt or stmt.done:
                return False
            stmt.expired = True
            try:
                self._interrupt()
            except Exception:  # noqa: BLE001  (the session closed meanwhile)
                return False
            return True


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def classify(err: Exception, stmt: Statement, memory_limit: str) -> Exception:
    """The error to send for ``err``: a timeout, a cancel or an out-of-memory error when
    one of those caused it (dpsql's planner wraps DuckDB errors, so the whole cause chain
    is read), else ``err`` itself."""
    causes = list(_chain(err))
    if any(isinstance(e, duckdb.InterruptException) for e in causes):
        if stmt.expired:
            return StatementTimeoutError(
                f"canceling statement due to statement timeout: it ran longer than this "
                f"server's {stmt.timeout:g}-second limit; narrow the query (fewer groups, a "
                "smaller range, no cross join) or ask the operator to raise dpsql serve "
                "--statement-timeout")
        return QueryCanceledError("canceling statement due to user request")
    if any(isinstance(e, duckdb.OutOfMemoryException) for e in causes):
        return OutOfMemoryError(
            f"out of memory: the statement needed more than this session's memory limit "
            f"({memory_limit}); narrow the query (fewer groups, no large join or cross "
            "product) or ask the operator to raise dpsql serve --memory-limit")
    return err


def operator_setting(name: str, verb: str) -> OperatorSettingError:
    return OperatorSettingError(
        f"{verb} {name} is not allowed: {name} is a resource limit or access setting set "
        "by the server operator (dpsql serve --memory-limit, --statement-timeout; one thread per "
        "session); ask the operator to change it")
