"""What one ``dpsql serve`` connection keeps between protocol messages: its prepared
statements and portals (PostgreSQL's names for a parsed statement and for a statement
bound to its parameters), with PostgreSQL's lifetimes.

* A **portal** is bound from a statement and keeps its own copy of the statement's text:
  closing or ``DEALLOCATE``-ing the statement leaves it working (its Execute failed with
  XX000 and the message "'s'", a KeyError, when it looked the statement up by name).
* A portal **runs once**: its first Execute (or Describe) runs the statement, and every
  later Execute reads on from where the previous one stopped (Execute with a row limit
  and PortalSuspended); a completed portal answers ``SELECT 0``. A new Bind of the same
  name starts a new portal. buenavista cached a portal's unread rows under its name and
  kept them across a new Bind, so after JDBC's ``setMaxRows(1)`` the next query on the
  connection answered the rows the previous query left unread.
* Portals **end with their transaction**: outside a ``BEGIN`` block, Sync (and the end of
  a simple Query) closes all of them; inside a block they last until it ends. buenavista
  kept them until Close, so a client that never closes its named portals filled the
  session's bound (:class:`dpsql.server._bounds.Held`, 54000).
* ``DEALLOCATE name`` / ``DEALLOCATE ALL`` / ``DISCARD ALL`` drop named statements as
  the protocol's Close does (:meth:`Context.deallocate`; ``DISCARD ALL`` the portals
  too); a name that does not exist is 26000 (invalid_sql_statement_name), as in
  PostgreSQL. They were accepted and did nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from buenavista.postgres import BVContext

from dpsql.server._bounds import Held
from dpsql.server._commands import Result
from dpsql.server._cursors import DuplicateCursorError
from dpsql.server._syntax import syntax_position
from dpsql.server._limits import OutOfMemoryError
from dpsql.server._scram import Exchange
from dpsql.server._sqlstates import (DuplicateStatementError, UnknownPortalError,
                                     UnknownStatementError)


@dataclass
class Portal:
    """A statement bound to its parameters; ``result`` once it ran (read on by Execute)."""

    sql: str
    params: list
    result_formats: list[int]
    result: Result | None = field(default=None)
    hold: bool = False  # a cursor declared WITH HOLD: outlives its transaction
    declared: str | None = None  # a SQL cursor: its DECLARE statement (pg_cursors)
    created: datetime | None = None  # a SQL cursor: when it was declared (pg_cursors)
    pending: bool = False  # declared in the open block: dropped if it does not commit


def unknown_statement(name: str) -> UnknownStatementError:
    return UnknownStatementError(f'prepared statement "{name}" does not exist')


class Context(BVContext):
    """buenavista's per-connection state, with cancel keys from :mod:`secrets`, bounded
    statements and portals (:class:`Held`) and PostgreSQL's portal lifetimes (module
    docstring). buenavista draws cancel keys with ``random`` (a Mersenne Twister,
    predictable from its outputs), so its ``__init__`` is not called: it would still
    consume ``random``."""

    def __init__(self, params: dict[str, str], rewriter: Any, taken: Any) -> None:
        self.session = None  # built after authentication (Handler.handle_post_auth)
        self.rewriter = rewriter
        self.params = params
        self.process_id = 0
        while not self.process_id or self.process_id in taken:
            self.process_id = secrets.randbits(31)
        self.secret_key = secrets.randbits(32)
        self.stmts: dict = {}  # name -> (sql, parameter type OIDs), as buenavista keeps them
        self.portals: dict[str, Portal] = {}
        self.result_cache: dict = {}  # buenavista's; unused (a Portal keeps its result)
        self.has_error = False
        self.authenticated = False
        self.salt = None  # MD5's
        self.scram: Exchange | None = None  # SCRAM's, between its messages
        self.held = Held()  # what stmts and portals keep, bounded (_bounds.Held)
        self._rows: dict[str, float] = {}  # bytes of rows each portal keeps
        self.rows_kept = 0.0
        self.reported: dict[str, str] | None = None  # settings the client was told of
        self.active: str | None = None  # the portal whose statement is running
        self.prepared_at: dict[str, datetime] = {}  # pg_prepared_statements' prepare_time
        self.plans: dict[str, list[int]] = {}  # ... and its [generic_plans, custom_plans]
        # the settings before the messages since the last Sync (an implicit transaction,
        # which an error rolls back: dpsql.server._extended)
        self.cycle_settings: tuple[dict[str, str], float] | None = None

    # -- prepared statements ---------------------------------------------------------------

    def add_statement(self, name: str, sql: str, param_oids: Any) -> None:
        """Parse: a new named statement, or the unnamed one replaced. A named statement
        that already exists is 42P05, as in PostgreSQL: a name is redefined only after a
        Close or ``DEALLOCATE`` (it was replaced silently, so a client whose two
        statements got the same name ran the second's text under the first's
        expectations). A syntax error (42601) or a table that does not exist (42P01) is
        answered here too, as PostgreSQL does (:meth:`dpsql.server._session.Session.
        check_syntax`, :meth:`~dpsql.server._session.Session.check_tables`), and the
        statement is not kept."""
        if name and name in self.stmts:
            raise DuplicateStatementError(
                f'prepared statement "{name}" already exists: Close it (or DEALLOCATE '
                f"{name}) before preparing another statement under that name, or use the "
                "unnamed statement")
        if self.session is not None:
            try:
                self.session.check_syntax(sql)  # 42601 in answer to the Parse
                self.session.check_tables(sql)  # 42P01 too
            except Exception as err:
                at = syntax_position(err, sql)
                if at is not None:
                    err.position = at  # the ErrorResponse's P field
                raise
        self.held.hold("prepared statement", name, sql)
        super().add_statement(name, sql, param_oids)
        self.prepared_at[name] = datetime.now(timezone.utc)
        self.plans[name] = [0, 0]

    def count_plan(self, name: str, parameters: int, mode: str = "auto") -> None:
        """A Bind of statement ``name``: one more plan in ``pg_prepared_statements``, as
        PostgreSQL 15 counts them (at Bind): a statement without parameters has a generic
        plan; one with parameters a custom plan for each of its first five Binds, then a
        generic one (PostgreSQL's ``plan_cache_mode = auto`` chooses generic when that
        plan is not dearer than the custom ones had been on average, as for the
        statements a release answers: this server has no plan costs). ``mode``: the
        session's ``plan_cache_mode`` (``force_custom_plan``, ``force_generic_plan``).
        They were always 0."""
        counts = self.plans.get(name)
        if counts is None:
            return
        mode = mode.strip().strip("'\"").lower()
        custom = parameters > 0 and mode != "force_generic_plan" and (
            mode == "force_custom_plan" or counts[1] < 5)
        counts[1 if custom else 0] += 1

    def close_statement(self, name: str) -> None:
        """The protocol's Close: no error for a name that does not exist."""
        if self.stmts.pop(name, None) is not None:
            self.held.drop("prepared statement", name)
            self.prepared_at.pop(name, None)
            self.plans.pop(name, None)

    def deallocate(self, name: str | None) -> None:
        """SQL ``DEALLOCATE name`` (26000 when there is none) or, ``name=None``,
        ``DEALLOCATE ALL``: every named statement (the unnamed one stays, as in
        PostgreSQL)."""
        if name is None:
            for each in [n for n in self.stmts if n != ""]:
                self.close_statement(each)
        elif name not in self.stmts:
            raise unknown_statement(name)
        else:
            self.close_statement(name)

    def statements(self) -> list[tuple[str, str, Any, datetime, list[int]]]:
        """The named prepared statements (name, text, declared parameter type OIDs, when
        prepared, its [generic, custom] plans: :meth:`count_plan`), in the order they
        were prepared: what ``pg_prepared_statements`` lists (the unnamed one is not
        listed, as in PostgreSQL)."""
        return [(n, sql, oids, self.prepared_at[n], self.plans.get(n, [0, 0]))
                for n, (sql, oids) in self.stmts.items() if n]

    def discard_all(self) -> None:
        """``DISCARD ALL``: every named statement and every portal."""
        self.deallocate(None)
        self.close_portals()

    # -- portals ---------------------------------------------------------------------------

    def add_portal(self, name: str, stmt: str, params: Any, result_formats: Any) -> None:
        """Bind: a new named portal, or the unnamed one replaced. A named portal (or SQL
        cursor) that is still open is 42P03, as in PostgreSQL: it was replaced, and a
        client that bound two queries to one name read the second where it expected the
        first's rows."""
        if stmt not in self.stmts:
            raise unknown_statement(stmt)
        if name and name in self.portals:
            raise DuplicateCursorError(f'cursor "{name}" already exists: Close the portal '
                                       "(or CLOSE the cursor) before binding another under "
                                       "that name, or use the unnamed portal")
        self.held.hold("portal", name, params)
        self.rows_kept -= self._rows.pop(name, 0)  # a new Bind: the old rows go
        self.portals[name] = Portal(self.stmts[stmt][0], params, list(result_formats))

    def portal(self, name: str) -> Portal:
        found = self.portals.get(name)
        if found is None:
            raise UnknownPortalError(f'portal "{name}" does not exist')
        return found

    def run_portal(self, name: str) -> Result:
        """The portal's result: run by its first Execute or Describe, then read on."""
        portal = self.portal(name)
        if portal.result is None:
            self.active = name  # DISCARD ALL / CLOSE ALL leave it open (close_portals)
            try:
                result = self.execute_sql(portal.sql, portal.params, portal.result_formats)
            finally:
                self.active = None
            self._keep_rows(name, result)
            portal.result = result
        return portal.result

    def _keep_rows(self, name: str, result: Result) -> None:
        """Count the rows the portal ``name`` keeps against the session's memory limit
        (53200 past it): each result is capped when it is fetched, but what open portals
        and cursors keep together was not (1,000 WITH HOLD cursors could each keep a
        result as large as the limit)."""
        size = getattr(result, "size", 0)
        limit = getattr(self.session, "memory_bytes", None)
        total = self.rows_kept - self._rows.get(name, 0) + size
        if limit is not None and total > limit:
            raise OutOfMemoryError(
                f"out of memory: the open cursors and portals of this session would keep "
                f"{total:,.0f} bytes of rows, more than its memory limit "
                f"({self.session.memory_limit}); CLOSE the cursors it no longer reads, or "
                "read them to the end and close them")
        self._rows[name], self.rows_kept = size, total

    def declare(self, name: str, sql: str, params: list, result: Result,
                hold: bool, statement: str = "") -> None:
        """SQL ``DECLARE name CURSOR FOR sql`` (``statement``: the whole DECLARE): a
        portal that already ran (:mod:`dpsql.server._cursors`)."""
        self.held.hold("portal", name, params)
        try:
            self._keep_rows(name, result)
        except OutOfMemoryError:
            self.held.drop("portal", name)
            raise
        pending = self.session is not None and self.session.in_transaction()
        self.portals[name] = Portal(sql, params, [], result, hold, statement or sql,
                                    datetime.now(timezone.utc), pending)

    def end_transaction(self, committed: bool) -> None:
        """COMMIT or ROLLBACK of a block: its SQL cursors end with it, except those
        declared ``WITH HOLD`` whose transaction committed (PostgreSQL's rule; a WITH
        HOLD cursor declared in a block that was rolled back survived, and FETCH read
        it). Protocol portals end at the Sync after it (:meth:`end_of_message_cycle`)."""
        for name, portal in list(self.portals.items()):
            if portal.declared is None:
                continue
            if portal.hold and (committed or not portal.pending):
                portal.pending = False
            else:
                self.close_portal(name)

    def cursors(self) -> list[tuple[str, Portal]]:
        """The session's open SQL cursors by name, in the order they were declared (what
        ``pg_cursors`` lists; protocol portals are not listed, as in PostgreSQL)."""
        return [(n, p) for n, p in self.portals.items() if p.declared is not None]

    def cursor(self, name: str) -> Portal:
        """The portal ``name`` for SQL's FETCH, MOVE and CLOSE: 34000 in PostgreSQL's
        words for a cursor when there is none."""
        found = self.portals.get(name)
        if found is None:
            raise UnknownPortalError(f'cursor "{name}" does not exist')
        if found.result is None:
            self.run_portal(name)
        return found

    def close_portal(self, name: str) -> None:
        """The protocol's Close: no error for a name that does not exist."""
        if self.portals.pop(name, None) is not None:
            self.held.drop("portal", name)
            self.rows_kept -= self._rows.pop(name, 0)

    def close_portals(self) -> None:
        """``CLOSE ALL`` and ``DISCARD ALL``: every portal but the one that runs them, as
        PostgreSQL's ``PortalHashTableDeleteAll`` skips the active portal (sent through
        the extended protocol they closed their own portal, and its Execute answered
        34000 ``portal "" does not exist``)."""
        for name in list(self.portals):
            if name != self.active:
                self.close_portal(name)

    def end_of_message_cycle(self) -> None:
        """Sync, or the end of a simple Query: outside a transaction block that ends the
        (implicit) transaction, and its portals with it (cursors declared ``WITH HOLD``
        excepted)."""
        if self.session is None or not self.session.in_transaction():
            for name in [n for n, p in self.portals.items() if not p.hold]:
                self.close_portal(name)

    def sync(self) -> None:
        super().sync()
        self.cycle_settings = None
        self.end_of_message_cycle()


__all__ = ["Context", "Portal", "unknown_statement"]
