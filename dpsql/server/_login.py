"""Start-up and login of ``dpsql serve``: TLS and the password check, as a mixin of the
protocol handler (:class:`dpsql.server._wire.Handler`), which calls these methods from its
start-up; buenavista's MD5-only login is overridden here.

* **Password authentication.** SCRAM-SHA-256 by default (:mod:`dpsql.server._scram`:
  AuthenticationSASL, SASLContinue, SASLFinal; ``-PLUS`` with channel binding over TLS),
  PostgreSQL's own default since version 14. buenavista offers only MD5 and compares with
  ``==``; MD5 stays available (``auth="md5"``) for old clients, with a fresh 4-byte salt
  per connection and :func:`hmac.compare_digest`. A wrong password gets FATAL 28P01 and
  the connection is closed, so a client cannot retry on the same socket. The user name
  is free: one password guards the server (MD5 salts the hash with the user name, so
  that check uses whatever name the client sent).
* **TLS.** With a certificate (``tls=`` an :class:`ssl.SSLContext`), an SSLRequest is
  answered ``S`` and the socket is wrapped before anything else is read; TLS is then
  *required* (a client that starts in plain text gets FATAL 28000, as under a
  ``hostssl`` rule), CancelRequests excepted (they carry only the secret key). Bytes that
  arrive after the SSLRequest but before the handshake are refused, not read as part of
  the encrypted stream (the injection PostgreSQL fixed as CVE-2021-23214).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import socket
import ssl
import struct

from buenavista.postgres import BVBuffer

from dpsql.errors import OperationalError
from dpsql.server._scram import Exchange, ScramError
from dpsql.server._types import ProtocolError

logger = logging.getLogger("dpsql.server")


class AuthenticationError(OperationalError):
    """Wrong password: SQLSTATE 28P01, FATAL, and the connection is closed."""


class TlsRequiredError(OperationalError):
    """A plain-text client of a server with TLS: SQLSTATE 28000, FATAL."""


class _SocketWriter(io.BufferedIOBase):
    """An unbuffered writer over a socket that sends every write whole (``sendall``):
    what :class:`socketserver.StreamRequestHandler` makes of a socket with
    ``wbufsize = 0``, rebuilt here for the TLS socket that replaces it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # noqa: ANN001
        self._sock.sendall(b)
        return len(b)

    def fileno(self) -> int:
        return self._sock.fileno()


class Login:
    """TLS and password methods of the protocol handler (a socketserver request handler
    whose server is a :class:`dpsql.server._listener.WireServer`)."""

    def _start_tls(self) -> bool:
        """Answer an SSLRequest with ``S`` and wrap the socket (the handshake runs under
        the start-up timeout). False, with the reason logged, when it cannot be done."""
        if self._buffered():
            logger.warning("client %s sent data after its SSL request, before the TLS "
                           "handshake: connection closed", self.client_address[0])
            return False
        self.wfile.write(b"S")
        raw = self.request
        try:
            wrapped = self.server.tls.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as err:
            logger.warning("TLS handshake with %s failed: %s", self.client_address[0], err)
            return False
        self.server.untrack(raw)
        self.server.track(wrapped)
        self.request = self.connection = wrapped
        self.rfile = wrapped.makefile("rb", self.rbufsize)
        self.wfile = _SocketWriter(wrapped)
        self.r = BVBuffer(self.rfile)
        self.tls = True
        return True

    def _close_tls(self) -> None:
        """End TLS with a close_notify alert, then close. libpq (OpenSSL 3) reports a
        connection that ends without one as an error: a cancel request over TLS would
        fail. The peer's own close_notify is waited for briefly only."""
        sock = self.request
        try:
            sock.settimeout(0.2)
            sock.unwrap()
        except (OSError, ValueError):  # ssl.SSLError and timeouts are OSErrors
            pass
        sock.close()

    def _buffered(self) -> bool:
        """Whether bytes beyond the SSLRequest were already received (in the reader's
        buffer, or waiting on the socket): a client must wait for ``S`` before the
        handshake, so such bytes were sent in plain text by someone else's design."""
        timeout = self.request.gettimeout()
        self.request.setblocking(False)
        try:
            return bool(self.rfile.peek(1))
        except OSError:
            return False
        finally:
            self.request.settimeout(timeout)

    def send_auth_request(self, ctx) -> None:  # noqa: ANN001
        """Ask for the password: SCRAM-SHA-256 (with -PLUS over TLS when the certificate
        allows channel binding) or MD5, as the server was configured; nothing when no
        password guards the server (loopback only)."""
        server = self.server
        if server.verifier is None and server.password is None:
            self.send_authentication_ok()
            self.handle_post_auth(ctx)
        elif server.auth_method == "md5":
            self.send_authentication_md5(ctx)
        else:
            ctx.scram = Exchange(server.verifier, server.binding if self.tls else None)
            body = b"".join(m.encode("ascii") + b"\x00" for m in ctx.scram.mechanisms())
            self._send_auth(10, body + b"\x00")  # AuthenticationSASL

    def _send_auth(self, code: int, data: bytes) -> None:
        self.wfile.write(struct.pack("!cii", b"R", 8 + len(data), code) + data)

    def handle_md5_password(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """Every password message ('p') before authentication (buenavista's name for its
        one method): a SASL message when SCRAM is under way, else an MD5 answer."""
        if ctx.scram is not None:
            return self._scram_step(ctx, payload or b"")
        if self.server.password is None or self.server.auth_method != "md5":
            raise ProtocolError("unexpected password message")
        user = ctx.params.get("user", "")
        secret = self.server.password
        inner = hashlib.md5((secret + user).encode("utf-8")).hexdigest()
        expected = "md5" + hashlib.md5(inner.encode("ascii") + ctx.salt).hexdigest()
        given = (payload or b"").rstrip(b"\x00")
        if hmac.compare_digest(given, expected.encode("ascii")):
            self.send_authentication_ok()
            self.handle_post_auth(ctx)
            return
        self._refuse(ctx, None)

    def _scram_step(self, ctx, payload: bytes) -> None:  # noqa: ANN001
        """SASLInitialResponse (mechanism, length, client-first) or SASLResponse
        (client-final); a malformed message or a wrong proof ends the connection."""
        exchange = ctx.scram
        try:
            if exchange.done:
                raise ScramError("unexpected SASL message after authentication")
            if not exchange.started:
                mechanism, sep, rest = payload.partition(b"\x00")
                if not sep or len(rest) < 4:
                    raise ScramError("malformed SASLInitialResponse")
                n = struct.unpack("!i", rest[:4])[0]
                data = rest[4:] if n >= 0 else b""
                if n != len(data):
                    raise ScramError("malformed SASLInitialResponse: wrong length")
                self._send_auth(11, exchange.first(mechanism.decode("ascii", "replace"),
                                                   data))
                return None
            final = exchange.final(payload)
        except ScramError as err:
            return self._refuse(ctx, err)
        self._send_auth(12, final)  # AuthenticationSASLFinal: the server proves itself
        self.send_authentication_ok()
        self.handle_post_auth(ctx)
        return None

    def _refuse(self, ctx, err: ScramError | None) -> None:  # noqa: ANN001
        """FATAL 28P01, logged, and no second try on this connection."""
        user = ctx.params.get("user", "")
        logger.warning("password authentication failed for user %r from %s%s", user,
                       self.client_address[0], f" ({err})" if err is not None else "")
        message = f'password authentication failed for user "{user}"'
        if err is not None and not err.wrong_password:
            message += f": {err}"
        self.send_error(AuthenticationError(message), fatal=True)
        self.request.shutdown(socket.SHUT_RD)  # no second try on this connection
