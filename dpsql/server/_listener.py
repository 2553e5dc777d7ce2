"""The listening side of ``dpsql serve``: buenavista's threading server, one thread and
one session per client (:class:`WireServer`), which speaks the protocol through
:class:`dpsql.server._wire.Handler`; who may connect (:func:`is_loopback`) and how many
at once, and the client sockets to end on shutdown."""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import sys
import threading
from typing import Any

from buenavista.postgres import BuenaVistaServer

from dpsql.server._bounds import DEFAULT_MAX_STATEMENT, MessageTooLongError, max_message
from dpsql.server._scram import Verifier
from dpsql.server._wire import STARTUP_TIMEOUT, Handler, UnknownMessageError

logger = logging.getLogger("dpsql.server")


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP literal, possibly IPv4-mapped IPv6) is loopback."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


class _ClientGone(logging.Filter):
    """Drops buenavista's traceback of a client that went away (a reset or a broken
    pipe while it read or wrote): :meth:`WireServer.handle_error` logs it in one line;
    and of a start-up timeout or an oversized or unknown message, which the handler
    reports in one line (``-v``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, (ConnectionError, TimeoutError, MessageTooLongError,
                                    UnknownMessageError))


logging.getLogger("buenavista.postgres").addFilter(_ClientGone())


class WireServer(BuenaVistaServer):
    """buenavista's threading server: one thread and one session per client; accepts
    non-loopback clients only when a password is set; tracks client sockets so that
    :meth:`close_clients` can end them on shutdown."""

    daemon_threads = False
    block_on_close = True  # server_close() waits for the client threads to finish

    def __init__(self, address: tuple, family: int, conn: Any, password: str | None,
                 max_connections: int = 64, startup_timeout: float = STARTUP_TIMEOUT, *,
                 verifier: Verifier | None = None, auth_method: str = "scram-sha-256",
                 tls: ssl.SSLContext | None = None, binding: bytes | None = None,
                 max_statement_size: int = DEFAULT_MAX_STATEMENT,
                 database: str | None = None) -> None:
        self.address_family = family
        self.database = database  # the one database name clients may ask for
        self.max_message = max_message(max_statement_size)
        self.password = password  # plain text: needed by MD5 only
        self.verifier = verifier if verifier is not None or password is None else \
            Verifier.from_password(password)
        self.auth_method = auth_method
        self.tls = tls
        self.binding = binding  # tls-server-end-point data of the certificate, or None
        self.max_connections = max_connections
        self.startup_timeout = startup_timeout
        self._slots = 0
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()
        guarded = self.verifier is not None
        super().__init__(address, conn, auth={} if guarded else None)  # the checks are ours
        self.RequestHandlerClass = Handler

    def verify_request(self, request, client_address) -> bool:  # noqa: ANN001
        return self.verifier is not None or is_loopback(client_address[0])

    def take_slot(self) -> bool:
        """Admit one more client, unless ``max_connections`` are already served."""
        with self._clients_lock:
            if self._slots >= self.max_connections:
                return False
            self._slots += 1
            return True

    def release_slot(self) -> None:
        with self._clients_lock:
            self._slots -= 1

    def track(self, sock: socket.socket) -> None:
        with self._clients_lock:
            self._clients.add(sock)

    def untrack(self, sock: socket.socket) -> None:
        with self._clients_lock:
            self._clients.discard(sock)

    def close_clients(self) -> None:
        with self._clients_lock:
            clients = list(self._clients)
        for sock in clients:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        """A client that went away mid-conversation (a reset, a broken pipe: a killed
        BI tool, a dropped network) is one log line; anything else keeps its traceback."""
        err = sys.exc_info()[1]
        if isinstance(err, ConnectionError):
            logger.info("client %s went away: %s", client_address, err)
            return
        logger.exception("error while serving %s", client_address)


__all__ = ["WireServer", "is_loopback"]
