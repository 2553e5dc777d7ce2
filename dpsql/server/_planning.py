"""Planning processes of ``dpsql serve``: long statements are planned out of the server.

sqlglot's compiled parser holds the GIL for the whole parse, and planning a statement of
a megabyte takes seconds (measured: a 0.9 MB ``IN`` list, 4.2 s), so one client's long
statement used to stall every other client (up to 7.3 s) and ran outside the statement
timeout. Decisions:

* Statements longer than :data:`dpsql.server._bounds.INLINE_BYTES` (1 KiB) are checked
  against the bounds, routed, checked by DuckDB's parser and planned in a **planning
  process** (and their Parse is syntax-checked there: :func:`check_statement_syntax`); shorter ones (their worst case measured 2.7 ms) stay in the session's thread.
  The process returns the route and the planned SQL with its ``dp_info``; the session
  runs it on its own DuckDB (which releases the GIL and obeys ``interrupt()``).
* A small pool (:data:`PROCESSES` processes, started on the first long statement, so a
  server that never sees one never starts one) of fresh interpreters
  (``python -m dpsql.server._planning``: no ``fork`` of a threaded server, and unlike
  multiprocessing's ``spawn`` they never re-import the caller's ``__main__``), talking
  over a socket pair with multiprocessing's framing. Each attaches the release under the same alias and locks it down
  (:func:`dpsql.duck.lock_down`), so it plans exactly as the session would. They run at
  a lower priority (``nice`` + 10): a hostile client's planning takes the CPU that
  sessions leave.
* **Planning counts against the statement timeout and can be cancelled.** The session
  waits for a free process and then for the answer in 20 ms slices; when the watchdog or
  a CancelRequest interrupts the session (:meth:`Session.interrupt`), the process is
  killed (SIGKILL: a parse in compiled code cannot be interrupted otherwise), a fresh one
  is started in the background, and the client gets 57014 as for any interrupted query.
* Short statements never wait for the pool, so clients sending them are not slowed by
  clients sending long ones (``benchmarks/serve.py --hostile``).
* A planning process that dies is replaced; its statement gets an OperationalError.
  Errors cross the process boundary as (class, message) and are rebuilt as the same
  dpsql or DuckDB class, so the SQLSTATE is the one an in-process plan would give.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import duckdb

from dpsql.errors import Error, InternalError, OperationalError

logger = logging.getLogger("dpsql.server")

PROCESSES = 2
SLICE = 0.02  # seconds between checks for a cancel while waiting
START_TIMEOUT = 120.0  # seconds a new process may take to attach the release


class _Worker:
    __slots__ = ("proc", "conn")

    def __init__(self, proc: subprocess.Popen, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            self.conn.close()
        except OSError:
            pass


class PlanningPool:
    """The planning processes of one server (module docstring)."""

    def __init__(self, release: str, alias: str, logical: set[str], relations: set[str],
                 max_statement_size: int, processes: int = PROCESSES) -> None:
        self._args = (release, alias, tuple(sorted(logical)), tuple(sorted(relations)),
                      max_statement_size)
        self._size = processes
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._failed: str | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, wait: float = 0.0) -> bool:
        """Start the processes now (they start on the first long statement otherwise);
        wait up to ``wait`` seconds for all of them; True when they are all ready."""
        self._ensure()
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                if len(self._live) >= self._size:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _ensure(self) -> None:
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        for _ in range(self._size):
            self._spawn()

    def _spawn(self) -> None:
        if not self._closed:
            threading.Thread(target=self._start_one, daemon=True,
                             name="dpsql-planner-start").start()

    def _start_one(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dpsql.server._planning", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as err:
            self._failed = f"cannot start a planning process: {err}"
            ours.close()
            return
        finally:
            theirs.close()
        worker = _Worker(proc, Connection(ours.detach()))
        try:
            worker.conn.send(self._args)
            ready = worker.conn.recv() if worker.conn.poll(START_TIMEOUT) else None
        except (EOFError, OSError):
            ready = None
        if ready != "ready":
            worker.kill()
            self._failed = f"a planning process failed to start: {ready!r}"
            logger.error("%s", self._failed)
            return
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._live.add(worker)
        self._idle.put(worker)

    def _retire(self, worker: _Worker) -> None:
        """Kill ``worker`` (the signal now; reaping it, in the background) and start a
        replacement."""
        try:
            worker.proc.kill()
        except OSError:
            pass
        with self._lock:
            self._live.discard(worker)
        if not self._closed:
            threading.Thread(target=self._replace, args=(worker,), daemon=True,
                             name="dpsql-planner-start").start()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._start_one()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
        for w in workers:
            w.kill()

    # -- work ------------------------------------------------------------------------------

    def prepare(self, text: str, params: list | None, cancelled: threading.Event,
                syntax: bool = False) -> tuple[str, str, tuple | None] | None:
        """``(route, sql, planned)`` for ``text``: ``planned`` is ``(sql, info, columns, notices)``
        on the planner route, None on the catalog route. Raises what planning raised
        (rebuilt), or ``duckdb.InterruptException`` once ``cancelled`` is set.
        ``syntax``: check the syntax only (:func:`check_statement_syntax`; a Parse)."""
        self._ensure()
        worker = None
        while worker is None:
            if cancelled.is_set():
                raise duckdb.InterruptException("planning interrupted")
            if self._failed is not None and not self._live:
                raise OperationalError(f"dpsql serve cannot plan long statements: "
                                       f"{self._failed}; send a shorter statement")
            try:
                worker = self._idle.get(timeout=SLICE)
            except queue.Empty:
                continue
            if not worker.alive():
                self._retire(worker)
                worker = None
        try:
            # a megabyte does not fit in the socket's buffer: the send waits for the
            # process to read it, so it runs in a thread and a cancel is not kept waiting
            sent: list[BaseException] = []
            message = (text, params, "syntax") if syntax else (text, params)
            sender = threading.Thread(target=_send, args=(worker, message, sent),
                                      daemon=True, name="dpsql-planner-send")
            sender.start()
            while sender.is_alive():
                sender.join(SLICE)
                if cancelled.is_set() and sender.is_alive():
                    self._retire(worker)
                    worker = None
                    raise duckdb.InterruptException("planning interrupted")
            if sent:
                raise sent[0]
            while not worker.conn.poll(SLICE):
                if cancelled.is_set() or not worker.alive():
                    gone = not worker.alive()
                    self._retire(worker)
                    worker = None
                    if gone:
                        raise OperationalError("the planning process ended while planning "
                                               "this statement; send it again")
                    raise duckdb.InterruptException("planning interrupted")
            reply = worker.conn.recv()
        except (EOFError, OSError) as err:
            if worker is not None:
                self._retire(worker)
                worker = None
            raise OperationalError(f"the planning process failed: {err}; send the "
                                   "statement again") from err
        finally:
            if worker is not None:
                self._idle.put(worker)
        if reply[0] == "ok":
            return reply[1]
        raise _rebuild(*reply[1:])


def _send(worker: _Worker, message: tuple, errors: list) -> None:
    try:
        worker.conn.send(message)
    except (OSError, ValueError) as err:  # killed meanwhile: the caller has moved on
        errors.append(err if isinstance(err, OSError) else OSError(str(err)))


def _rebuild(module: str, name: str, message: str, hint: str | None = None,
             where: dict | None = None) -> Exception:
    """The exception a planning process raised, as the same class here (with its
    ``hint``, :func:`dpsql.server._sqlstates.hint_of`, and a syntax error's ``line``,
    ``col`` and ``highlight``: ``where``)."""
    cls = None
    if module.startswith(("dpsql.", "duckdb")):
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            cls = None
    if isinstance(cls, type) and issubclass(cls, Error):
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        if hint is not None:
            err.hint = hint
        for key, value in (where or {}).items():
            setattr(err, key, value)
        return err
    if isinstance(cls, type) and issubclass(cls, duckdb.Error):
        return cls(message)
    return InternalError(f"planning failed with {name}: {message}")


# --------------------------------------------------------------------------------------
# The planning process
# --------------------------------------------------------------------------------------

def _worker_main(fd: int) -> None:
    """A planning process: ``python -m dpsql.server._planning FD``, FD one end of a
    socket pair; the first message gives the release and the session's facts."""
    conn = Connection(fd)
    try:
        os.nice(10)
    except (OSError, AttributeError):
        pass
    try:
        release, alias, logical, relations, max_statement_size = conn.recv()
        from dpsql import duck

        con = duckdb.connect(":memory:", config={"threads": 1})
        duck.attach(con, release, alias, lockdown=True)
        catalog = duck.catalog_of(con)
    except BaseException as err:  # noqa: BLE001  (reported to the server)
        conn.send(f"{type(err).__name__}: {err}")
        return
    conn.send("ready")
    while True:
        try:
            text, params, *syntax = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if syntax:
                check_statement_syntax(text, set(logical), set(relations), alias,
                                       max_statement_size)
                reply: tuple = ("ok", None)
            else:
                reply = ("ok", prepare_statement(text, params, catalog, set(logical),
                                                 set(relations), alias, max_statement_size))
        except RecursionError:
            reply = ("error", "dpsql.server._bounds", "StatementTooComplexError",
                     "statement too complex: nested too deep to plan; flatten the query "
                     "(a CTE per level, fewer nested conditions)")
        except BaseException as err:  # noqa: BLE001  (sent back, rebuilt there)
            where = {k: getattr(err, k) for k in ("line", "col", "highlight")
                     if getattr(err, k, None) is not None}
            reply = ("error", type(err).__module__, type(err).__qualname__,
                     " ".join(str(err).split()), getattr(err, "hint", None), where)
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def prepare_statement(text: str, params: list | None, catalog: Any, logical: set[str],
                      relations: set[str], alias: str, max_statement_size: int
                      ) -> tuple[str, str, tuple | None]:
    """What a session does to a statement before running it, in one function: bounds,
    one statement, route, DuckDB's parser, plan. Runs in a planning process."""
    from dpsql.planner import plan_query
    from dpsql.server._bounds import check_statement
    from dpsql.server._guard import MULTI, Refusal, check_select
    from dpsql.server._route import _NOT_CODE, route_statement

    check_statement(text, max_statement_size)
    if ";" in _NOT_CODE.sub("", text):
        raise Refusal(MULTI)
    route, sql = route_statement(text, logical, relations, alias)
    check_select(sql, route)
    if route == "catalog":
        return route, sql, None
    planned = plan_query(catalog, sql, params)
    return route, sql, (planned.sql, planned.info, planned.columns, planned.notices)


def check_statement_syntax(text: str, logical: set[str], relations: set[str], alias: str,
                           max_statement_size: int) -> None:
    """A long statement's syntax, for a Parse (:meth:`dpsql.server._session.Session.
    check_syntax`): raise its syntax error (42601), the way it would run, or nothing.
    DuckDB's parser first (PostgreSQL's grammar, a fifth of a second per megabyte);
    only text it rejects is routed and read by the planner's parser (sqlglot), which
    takes PostgreSQL spellings DuckDB lacks. Past the bounds, or refused, is not a
    syntax error: the Execute answers it."""
    from dpsql.server._bounds import check_statement
    from dpsql.server._parse_checks import read_syntax
    from dpsql.server._route import route_statement

    try:
        check_statement(text, max_statement_size)
    except Error:
        return
    read_syntax(text, lambda t: route_statement(t, logical, relations, alias))


__all__ = ["PROCESSES", "PlanningPool", "check_statement_syntax", "prepare_statement"]

if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
