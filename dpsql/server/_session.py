"""One client session of ``dpsql serve``: route each statement, answer it, keep no state
that another session can see.

Every statement a client sends goes one of four ways (:meth:`Session.execute_sql`):

1. **Session commands** (:mod:`dpsql.server._commands`: ``BEGIN``/``COMMIT``/``ROLLBACK``,
   ``SET``/``RESET``/``SHOW``, ``DISCARD``, ``DEALLOCATE``, ``SAVEPOINT``...) are answered
   here, from a per-session settings dict; nothing runs in DuckDB. Transactions are
   bookkeeping only (a release is read-only), but they follow PostgreSQL: after an error
   inside a transaction block, every statement but ``ROLLBACK``/``COMMIT`` is refused with
   25P02 until the block ends, so that clients that rely on that state (psycopg,
   SQLAlchemy) see what they expect.
2. **Writes** (INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, COPY, GRANT ...) are refused
   with SQLSTATE 25006 (read_only_sql_transaction). Whatever the route, the text that is
   about to run must be exactly one SELECT by DuckDB's own parser
   (:func:`dpsql.server._guard.check_select`): ATTACH, PRAGMA, CHECKPOINT ... get 25006,
   a second statement (even hidden in a ``$$...$$`` string) 0A000. (A simple query's
   several statements are split first and each comes here on its own:
   :func:`dpsql.server._guard.split_simple_query`.)
3. **Catalog queries** — statements whose every table is a catalog relation
   (``pg_catalog.*``, ``information_schema.*``, ``pg_*``, ``duckdb_*``) or that read no
   table at all (``SELECT version()``, ``SELECT current_schema()``) — run on the shared
   *catalog database*: an in-memory DuckDB whose ``public`` schema holds one **empty**
   table per logical table (the release's own name and each view name, with their
   attribute columns plus ``dp_count``). DuckDB's built-in ``pg_catalog`` and
   ``information_schema`` emulation then lists exactly the logical tables, never the
   physical level tables, and psql's ``\\dt``/``\\d`` and the SQLAlchemy/JDBC
   introspection queries work. A few PostgreSQL spellings DuckDB lacks are rewritten on
   this path only (``OPERATOR(pg_catalog.~)``, ``COLLATE pg_catalog.default``,
   ``::regclass``, ``pg_catalog.f(...)`` calls), and ``version()`` and
   ``pg_get_userbyid()`` are macros. Empty tables could answer ``COUNT(*) = 0``, so the
   router sends a statement here only when it names no logical table, and refuses
   ``query()``/``query_table()`` (which name a table inside a string) here.
4. **Everything else** goes through the dpsql planner on the session's own
   :class:`dpsql.dbapi.Connection` (per-session plan cache; the same planning as
   ``dpsql.connect``, so the answers are the same). ``public.<table>`` is read as the
   logical table, because BI tools qualify names with the schema they listed.

Each session opens its own in-memory DuckDB (one thread) with the release attached
read-only (about 0.1 s, once the client is authenticated), so that no DuckDB connection is shared between threads and no state leaks
between clients; querying is post-processing, so nothing needs to be shared. Both DuckDB
databases are locked down like every analyst entry point (:mod:`dpsql.lockdown`:
``enable_external_access = false``, ``lock_configuration = true``, no extension loading,
and the planner refuses file readers, :mod:`dpsql.planner.refuse_file_reads`; the
catalog route runs the same check on its statements): a network client cannot read the
server's files (``read_csv('/etc/passwd')``), attach other databases or turn the setting
back on.

Sessions are made by :class:`dpsql.server._release_connection.ReleaseConnection`;
where a statement's text begins and where its syntax error is:
:mod:`dpsql.server._syntax`.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Sequence

import duckdb
from buenavista.core import Session as _BVSession

from dpsql import duck
from dpsql.planner import PlannedQuery
from dpsql.planner.route_catalog import discovery_sql
from dpsql.dbapi import Connection as DbapiConnection
from dpsql.dbapi import Cursor as PlannerCursor
from dpsql.errors import UnsupportedQueryError
from dpsql.schema_catalog import CatalogDatabase
from dpsql.server._commands import _COMMANDS as _SESSION_COMMANDS
from dpsql.server._commands import FailedTransactionError, Result
from dpsql.server._cursors import CURSOR_COMMANDS, declare, fetch_shape
from dpsql.server._session_views import with_session_views
from dpsql.server._commands import first_word as _first_word
from dpsql.server._parse_checks import check_plan, check_syntax, check_tables
from dpsql.server._route import _NOT_CODE, Routed, routed_statement, without_comments
from dpsql.server._syntax import statement_text
from dpsql.server._guard import MULTI, Refusal, UntypedText, check_select, spelled
from dpsql.server._bounds import (DEFAULT_MAX_STATEMENT, INLINE_BYTES, MAX_SETTING_BYTES,
                                  check_statement)
from dpsql.server._limits import (DEFAULT_MEMORY_LIMIT, DEFAULT_STATEMENT_TIMEOUT, Watchdog,
                                  classify, duckdb_config, fetch_capped, pg_timeout)

logger = logging.getLogger("dpsql.server")


ROUTE_CACHE_SIZE = 256


# --------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------

_COMMANDS: dict[str, Any] = {**_SESSION_COMMANDS, **CURSOR_COMMANDS, "DECLARE": declare}
"""Statements the session answers itself (never sent to DuckDB as they are): session
commands and SQL cursors (``DECLARE`` runs its query through the session)."""


class Session(_BVSession):
    """One client's session: its planner connection, catalog cursor and settings."""

    def __init__(self, release: str, alias: str, catalog: CatalogDatabase,
                 parameters: dict[str, str], plan_cache_size: int,
                 statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
                 memory_limit: str = DEFAULT_MEMORY_LIMIT,
                 memory_bytes: int = 1 << 30, planning: Any = None,
                 max_statement_size: int = DEFAULT_MAX_STATEMENT) -> None:
        super().__init__()
        # threads=1: a session answers one client; several threads per session would let
        # one client's heavy query take every core from the others (and cost ~10 threads
        # per connection). The memory cap and no spilling: dpsql.server._limits.
        con = duckdb.connect(":memory:", config={"threads": 1,
                                                 **duckdb_config(memory_limit)})
        dbapi = cur = None
        try:
            duck.attach(con, release, alias, lockdown=True)  # dpsql.duck.lock_down
            # dbapi.connect() would warn about a seeded release once per client; serve()
            # warns once at start-up instead, so the session wraps the attached connection.
            dbapi = DbapiConnection(con, plan_cache_size)
            cur = catalog.cursor()
        except BaseException:  # close what was opened: a failed start-up leaks nothing
            for opened in (cur, dbapi, con):
                if opened is not None:
                    try:
                        opened.close()
                    except Exception:  # noqa: BLE001  (already closed)
                        pass
            raise
        self.dbapi = dbapi
        self._duck = con
        self.alias = alias
        self.catalog = catalog
        self.catalog_cur = cur
        self.settings = dict(parameters)
        self.server_timeout = statement_timeout
        self.client_timeout = 0.0  # SET statement_timeout: may lower the server's, not raise
        self.settings["statement_timeout"] = pg_timeout(statement_timeout)
        self.defaults = dict(self.settings)  # what RESET restores (start_up() adds to it)
        self.memory_limit = memory_limit
        self.memory_bytes = memory_bytes  # the same cap on a result's Python rows
        self.watchdog = Watchdog(self.interrupt)
        self._running: duckdb.DuckDBPyConnection | None = None  # the planner's DuckDB cursor
        self._running_lock = threading.Lock()
        self.in_txn = False
        self.failed = False
        self.savepoints: list[tuple[str, Any]] = []  # the block's, oldest first (_commands)
        self.txn_settings = None  # in a block: what ROLLBACK / COMMIT restore (_commands)
        self.prepared = None  # the connection's statements (_context.Context), for DEALLOCATE
        self.logical = {name.lower() for name in catalog.tables}
        self._routes: OrderedDict[str, tuple[str, str]] = OrderedDict()
        # statements over INLINE_BYTES are planned in a process (dpsql.server._planning)
        self.planning = planning
        self.max_statement_size = max_statement_size
        self._cancel = threading.Event()  # set by interrupt(): stops waiting for a plan

    # -- buenavista Session API ----------------------------------------------------------

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.catalog_cur

    def close(self) -> None:
        self.dbapi.close()
        self.catalog_cur.close()

    def in_transaction(self) -> bool:
        return self.in_txn

    def start_up(self, params: dict[str, str]) -> None:
        """The settings the client sent in its startup packet (``application_name``,
        ``DateStyle``...): the session's values and its defaults for RESET, as in
        PostgreSQL (:data:`_FROM_STARTUP`); ``client_encoding`` stays UTF8, the only
        one sent (libpq's ``auto`` asks for it)."""
        for key, value in params.items():
            if key.lower() in _FROM_STARTUP and len(value) <= MAX_SETTING_BYTES:
                self.settings[key.lower()] = self.defaults[key.lower()] = value

    def reported(self) -> dict[str, str]:
        """The settings a client is told of with ParameterStatus, as it spells them."""
        return {SETTING_SPELLING.get(k, k): self.settings.get(k, "") for k in REPORTED_SETTINGS}

    def interrupt(self) -> None:
        """Cancel the running statement (a PostgreSQL CancelRequest, or the statement
        timeout): the session's connection, its catalog cursor and the planner's cursor."""
        self._cancel.set()
        if not self.dbapi.closed:
            self._duck.interrupt()
            self.catalog_cur.interrupt()
            with self._running_lock:
                if self._running is not None:
                    self._running.interrupt()

    def transaction_status(self) -> bytes:
        """The ReadyForQuery status byte: idle, in a block, or in a failed block."""
        if not self.in_txn:
            return b"I"
        return b"E" if self.failed else b"T"

    def execute_sql(self, sql: str, params: Sequence[Any] | None = None) -> Result:
        text = statement_text(sql)
        word = _first_word(text)
        if self.failed and word not in ("ROLLBACK", "ABORT", "COMMIT", "END"):
            raise FailedTransactionError(
                "current transaction is aborted, commands ignored until end of transaction "
                "block: send ROLLBACK")
        try:
            return self._timed(text, word, list(params) if params else None)
        except Exception:
            if self.in_txn:
                self.failed = True
            raise

    @property
    def statement_timeout(self) -> float:
        """Seconds a statement may run (0 = no limit): the server's, or the client's own
        lower ``SET statement_timeout``."""
        server, client = self.server_timeout, self.client_timeout
        if client <= 0:
            return server
        return client if server <= 0 else min(server, client)

    def _timed(self, text: str, word: str, params: list | None, shape: bool = False
               ) -> Result:
        """:meth:`_execute_params` under the statement timeout; a DuckDB interrupt or
        out-of-memory error, however the planner wrapped it, becomes a 57014 (timeout or
        cancel) or 53200 error that says what happened (:func:`_limits.classify`).
        ``shape``: plan and bind only, a result with columns and no rows (Describe)."""
        if not text or word in _COMMANDS:  # session commands never reach DuckDB
            return self._execute_params(text, word, params, shape)
        self._cancel.clear()
        with self.watchdog.statement(self.statement_timeout) as stmt:
            try:
                return self._execute_params(text, word, params, shape)
            except Exception as err:
                mapped = classify(err, stmt, self.memory_limit)
                if mapped is err:
                    raise
                raise mapped from err

    def _execute_params(self, text: str, word: str, params: list | None,
                        shape: bool = False) -> Result:
        """Untyped parameters (:class:`UntypedText`, OID 0: node-postgres sends all its
        parameters so) are read as the literal they spell: ``50`` binds as a number, which
        is what the planner needs for a range bound. If that fails and some parameter was
        read as a number, the statement runs once more with them as text (``WHERE zip =
        $1``). Both readings fail loudly on a type mismatch, so no wrong number results."""
        if not params or not any(isinstance(p, UntypedText) for p in params):
            return self._execute(text, word, params, shape)
        literal = [spelled(p) for p in params]
        plain = [str(p) if isinstance(p, UntypedText) else p for p in params]
        if literal == plain:
            return self._execute(text, word, plain, shape)
        try:
            return self._execute(text, word, literal, shape)
        except (Exception, duckdb.Error) as first:  # noqa: BLE001
            try:
                return self._execute(text, word, plain, shape)
            except (Exception, duckdb.Error):  # noqa: BLE001
                raise first from None  # the documented reading's error is the one to show

    def describe(self, sql: str, params: Sequence[Any] | None,
                 other: Sequence[Any] | None = None) -> Result | None:
        """The result shape of ``sql`` for Describe(statement), or None (NoData) when it
        cannot be found. Never changes the session: session commands are not run, a
        failure is swallowed and the transaction state is left as it was (issue: a
        Describe used to run the statement through :meth:`execute_sql`, whose failure
        marked the block failed and made the client's real Execute fail with 25P02).

        The statement is planned and bound, never run: DuckDB binds a relation without
        executing it, and binding gives exactly the column names and types that running
        gives. So a Describe costs a plan and a bind, not a second run of the query, and a
        statement that would hit the timeout is timed once, by its Execute (it used to run
        to the limit twice: once for Describe, once for Execute).

        ``params`` are dummy values (None: there are none of the parameters' types). When
        the planner refuses the statement with them (0A000), it is planned again with
        ``other`` dummies: refused again, the refusal is raised, as a statement refused
        whatever its values (``date_trunc('decade', ts) >= $1``: the planner knows no
        such unit) is answered at Describe rather than with NoData, which told a client
        that prepares (asyncpg, JDBC) that it returns no rows; planned, its shape is
        answered. Not inside a transaction block, where the
        error would fail the block (NoData there, and the Execute refuses it)."""
        text = statement_text(sql)
        word = _first_word(text)
        if word == "FETCH" and not self.failed:  # the cursor's columns, no row read
            return fetch_shape(self, without_comments(text))
        if not text or self.failed or params is None or (word in _COMMANDS and not (
                word == "SHOW" and discovery_sql(text, self.logical))):
            return None
        try:
            result = self._shape_of(text, word, params)
        except UnsupportedQueryError as refused:
            if type(refused).__module__ != "dpsql.errors" or other is None or self.in_txn:
                return None  # the server's own refusals (a write...): the Execute says
            try:
                result = self._shape_of(text, word, other)
            except UnsupportedQueryError:
                raise type(refused)(f"{refused} (planned with sample values of the "
                                    "parameters: refused whatever their values)") from None
            except (Exception, duckdb.Error):  # noqa: BLE001  (unknown until Bind)
                return None
        except (Exception, duckdb.Error):  # noqa: BLE001  (unknown until Bind)
            return None
        return result if result.has_results() else None

    def _shape_of(self, text: str, word: str, params: Sequence[Any]) -> Result:
        return self._timed(text, word, list(params) if params else None, shape=True)

    def check_syntax(self, sql: str) -> None:
        """Parse: 42601 for a syntax error (:mod:`dpsql.server._parse_checks`)."""
        check_syntax(self, sql, _COMMANDS)

    def check_tables(self, sql: str, offset: int = 0) -> None:
        """Parse (and a simple Query's statement, ``offset`` into its string): 42P01 for
        a table that does not exist (:mod:`dpsql.server._parse_checks`); in a block, the
        block fails, as for any error."""
        try:
            check_tables(self, sql, _COMMANDS, offset)
        except Exception:
            if self.in_txn:
                self.failed = True
            raise

    def check_plan(self, sql: str) -> None:
        """Bind: 22012 for a constant division by zero (:mod:`dpsql.server._parse_checks`)."""
        check_plan(self, sql, _COMMANDS)

    # -- routing -------------------------------------------------------------------------

    def _execute(self, text: str, word: str, params: list | None, shape: bool = False
                 ) -> Result:
        if not text:
            return Result(status="EMPTY")
        long = len(text) > INLINE_BYTES
        check_statement(text, self.max_statement_size, scan=not long)  # 54000 / 54001
        if long and self.planning is not None and word not in _COMMANDS:
            return self._execute_planned(text, params, shape)
        if ";" in _NOT_CODE.sub("", text):
            raise Refusal(MULTI)
        if word == "DECLARE":  # its query, with the parameters, runs as any statement
            return declare(self, without_comments(text), params)
        command = _COMMANDS.get(word)
        if command is not None and not (word == "SHOW" and discovery_sql(text, self.logical)):
            return command(self, without_comments(text))  # SHOW TABLES: the catalog's
        route, sql = self._route_cached(text, planned=not shape)
        if route == "catalog":
            sql = with_session_views(self, sql)  # pg_cursors...: this session's own
        logger.debug("%s <- %s", route, sql)
        # belt and braces: the statement that runs is exactly one SELECT, by DuckDB's parser
        check_select(sql, route)
        if shape:
            return self._shape(route, sql, params)
        if route == "catalog":
            return self._run_catalog(sql, params)
        return self._run_planner(sql, params)

    def _execute_planned(self, text: str, params: list | None, shape: bool) -> Result:
        """A long statement: bounds, route, DuckDB's parser and planning in a planning
        process (:mod:`dpsql.server._planning`), under the statement timeout; then run
        here like any other."""
        route, sql, planned = self.planning.prepare(text, params, self._cancel)
        logger.debug("%s (planning process) <- %s", route, sql[:200])
        if route == "catalog":
            sql = with_session_views(self, sql)
            return self._shape(route, sql, params) if shape else \
                self._run_catalog(sql, params)
        plan = PlannedQuery(*planned)
        if shape:
            rel = self._duck.sql(plan.sql)
            return Result(rel.columns, [str(t) for t in rel.types], ())
        return self._run_planner(sql, params, plan)

    def _shape(self, route: str, sql: str, params: list | None) -> Result:
        """The columns of ``sql`` without running it: the planner's SQL (or the catalog
        query) bound as a DuckDB relation, which executes nothing until fetched."""
        if route == "catalog":
            rel = self.catalog_cur.sql(sql, params=params) if params else \
                self.catalog_cur.sql(sql)
        else:
            # through the connection's plan cache: an Execute of the same text and
            # parameters (a statement without any, as JDBC prepares) reuses this plan
            rel = self._duck.sql(self.dbapi._plan(sql, params).sql)
        return Result(rel.columns, [str(t) for t in rel.types], ())

    def _route_cached(self, text: str, planned: bool = True) -> tuple[str, str]:
        """:meth:`route`, remembered per statement text (a deterministic function of the
        text and the public catalog): dashboards re-issue the same statements, and the
        sqlglot parse is most of the routing cost. ``planned``: raise what PostgreSQL
        raises when it plans the statement (a constant division by zero, 22012); a
        Parse or a Describe does not plan it."""
        hit = self._routed(text)
        if planned and hit.problem is not None:
            raise type(hit.problem)(str(hit.problem))  # a new one: the cached one is kept clean
        return hit.route, hit.sql

    def _routed(self, text: str) -> Routed:
        hit = self._routes.get(text)
        if hit is not None:
            self._routes.move_to_end(text)
            return hit
        hit = self._routes[text] = self.route(text)
        if len(self._routes) > ROUTE_CACHE_SIZE:
            self._routes.popitem(last=False)
        return hit

    def route(self, text: str) -> Routed:
        """Where ``text`` goes (:func:`dpsql.server._route.routed_statement`); raises
        :class:`ReadOnlyError` on writes."""
        return routed_statement(text, self.logical, self.catalog.relations, self.alias)


    def _run_catalog(self, sql: str, params: list | None) -> Result:
        # execute + fetchmany, not .sql(): DuckDB 2.0 relations cannot be fetched in chunks,
        # and the rows are fetched in chunks to cap their size (_limits.fetch_capped)
        cur = self.catalog_cur
        cur.execute(sql, params) if params else cur.execute(sql)
        if cur.description is None:
            return Result(status="SELECT 0")
        names = [d[0] for d in cur.description]
        types = [str(d[1]) for d in cur.description]
        return Result(names, types, fetch_capped(cur.fetchmany, self.memory_bytes,
                                                 self.memory_limit))

    def _run_planner(self, sql: str, params: list | None,
                     plan: PlannedQuery | None = None) -> Result:
        # The DuckDB child cursor is made here, not by dbapi.cursor(), so that interrupt()
        # can reach it: interrupting the parent connection does not stop a child's query.
        # ``plan``: made by a planning process; the cursor runs it as its own plan.
        child = self._duck.cursor()
        cur = PlannerCursor(self.dbapi, child, warn=False)  # notices go to the client
        with self._running_lock:
            self._running = child
        try:
            if plan is None:
                cur.execute(sql, params)
            else:
                cur._run(plan)
            if cur.description is None:
                return Result(status=_first_word(sql))
            rows = fetch_capped(cur.fetchmany, self.memory_bytes, self.memory_limit)
            result = Result([d[0] for d in cur.description], [d[1] for d in cur.description],
                            rows)
            result.notices = [str(m[1]) for m in cur.messages]  # sent as NoticeResponses
            return result
        finally:
            with self._running_lock:
                self._running = None
            cur.close()
            child.close()

_FROM_STARTUP = frozenset(("application_name", "datestyle", "intervalstyle", "timezone"))
"""Startup-packet parameters that set the session's setting of the same name (the rest
are the server's facts, UTF8 as the only encoding, or the connection's own)."""

REPORTED_SETTINGS = ("server_version", "server_encoding", "client_encoding", "datestyle",
                     "intervalstyle", "timezone", "integer_datetimes",
                     "standard_conforming_strings", "is_superuser", "application_name",
                     "default_transaction_read_only")
"""The settings a client is told of with ParameterStatus (PostgreSQL's reported ones)."""
SETTING_SPELLING = {"datestyle": "DateStyle", "intervalstyle": "IntervalStyle",
                    "timezone": "TimeZone"}
