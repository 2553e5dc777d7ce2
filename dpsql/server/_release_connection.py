"""The server's connection object (buenavista's ``Connection``): one per ``dpsql
serve``, a factory of :class:`dpsql.server._session.Session` over one release file,
which keeps the open sessions (a CancelRequest finds its session here) and the
settings every new session starts from."""

from __future__ import annotations

import threading

from buenavista.core import Connection

from dpsql.schema_catalog import CatalogDatabase, default_settings
from dpsql.server._bounds import DEFAULT_MAX_STATEMENT
from dpsql.server._limits import DEFAULT_MEMORY_LIMIT, DEFAULT_STATEMENT_TIMEOUT
from dpsql.server._planning import PlanningPool
from dpsql.server._session import REPORTED_SETTINGS, SETTING_SPELLING, Session


class ReleaseConnection(Connection):
    """buenavista's Connection (a session factory) over one release file."""

    def __init__(self, release: str, alias: str, catalog: CatalogDatabase,
                 plan_cache_size: int = 256,
                 statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
                 memory_limit: str = DEFAULT_MEMORY_LIMIT, memory_bytes: int = 1 << 30,
                 max_statement_size: int = DEFAULT_MAX_STATEMENT) -> None:
        super().__init__()
        self.release = release
        self.alias = alias
        self.catalog = catalog
        self.plan_cache_size = plan_cache_size
        self.statement_timeout = statement_timeout
        self.memory_limit = memory_limit
        self.memory_bytes = memory_bytes
        self.settings = default_settings(alias)
        self._lock = threading.Lock()
        self.max_statement_size = max_statement_size
        self.planning = PlanningPool(release, alias, {n.lower() for n in catalog.tables},
                                     set(catalog.relations), max_statement_size)

    def create_session(self) -> Session:
        sess = self.new_session()
        with self._lock:
            self._sessions[sess.id] = sess
        return sess

    def close_session(self, session: Session) -> None:
        with self._lock:
            known = self._sessions.pop(session.id, None) if session else None
        if known is not None:
            known.close()

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def new_session(self) -> Session:
        return Session(self.release, self.alias, self.catalog, self.settings,
                       self.plan_cache_size, self.statement_timeout, self.memory_limit,
                       self.memory_bytes, self.planning, self.max_statement_size)

    def parameters(self) -> dict[str, str]:
        return {SETTING_SPELLING.get(k, k): self.settings[k] for k in REPORTED_SETTINGS}


__all__ = ["ReleaseConnection"]
