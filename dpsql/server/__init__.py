"""``dpsql serve``: a PostgreSQL wire-protocol server over the dpsql planner.

BI tools (Metabase, Tableau, Superset, DBeaver), ``psql``, psycopg, JDBC and SQLAlchemy's
``postgresql+psycopg://`` dialect connect to it as to a read-only PostgreSQL database whose
tables are the release's logical tables. Every query is planned by dpsql exactly as
:func:`dpsql.connect` plans it, so the answers are the same DP answers (post-processing of
the release: no budget is spent, and no client can see anything but the release).

Library choice (issue #8). Two maintained Python libraries speak the server side of the
protocol:

* ``riffq`` 0.1.11 ships only an sdist that builds a Rust extension with crates fetched
  from the network at install time; it does not build offline (CI, air-gapped statistical
  offices), so it is not a dependency we can ask curators to install.
* ``buenavista`` 0.5 is pure Python (``socketserver``), with a DuckDB backend. Its
  protocol layer is used here; its DuckDB backend is not (it executes client SQL on a
  shared DuckDB connection). What it lacks — SQLSTATE codes, constant-time password
  checks, typed parameters, PostgreSQL type OIDs and text output, real transaction
  status — is added by subclassing in :mod:`dpsql.server._wire` (its server in
  :mod:`dpsql.server._listener`, the SQLSTATEs in :mod:`dpsql.server._sqlstates`);
  routing, the emulated catalog and the sessions are in :mod:`dpsql.server._session`.

Security decisions:

* Read-only: writes get SQLSTATE 25006; the DuckDB databases cannot read files or be
  reconfigured (``enable_external_access = false``, ``lock_configuration = true``).
* Loopback by default. Listening on any other address needs a password file; without one
  :func:`serve` refuses (and ``dpsql serve`` exits with status 1 and says why).
* Passwords are checked with SCRAM-SHA-256 (PostgreSQL's default since 14: the password
  never crosses the wire and the client authenticates the server too), ``-PLUS`` with
  channel binding over TLS; ``auth="md5"`` keeps PostgreSQL's older MD5 challenge for
  clients that predate SCRAM. See :mod:`dpsql.server._scram`.
* The password file is refused when group or others may read or write it (libpq's rule for
  ``.pgpass``): ``chmod 600`` it. Its first line is the password, or better a SCRAM
  verifier (``SCRAM-SHA-256$4096:...``, written by ``dpsql passwd FILE`` or copied from
  PostgreSQL's ``pg_authid``), so that the server's disk holds no password at all; any
  user name is accepted with it.
* TLS with ``tls_cert``/``tls_key`` (PEM; the key file is refused unless ``chmod 600``,
  PostgreSQL's rule for ``ssl_key_file``): TLS 1.2 or newer, and then required of every
  client. Without it, listening beyond loopback is refused: queries and answers (and,
  with MD5, the password's hash) would cross the network in plain text, and a warning is
  not enough for a server that carries passwords. Use TLS, or an SSH tunnel (``ssh -L
  5433:127.0.0.1:5433 host``) to a loopback server; ``allow_unencrypted=True``
  (``--allow-unencrypted``, for a network the operator trusts) serves it anyway, with
  :class:`UnencryptedServerWarning`.

SQLSTATE mapping (:data:`SQLSTATES`): UnsupportedQueryError 0A000, SqlSyntaxError 42601,
read-only violations 25006, ProgrammingError 42000, DataError 22000, IntegrityError 23000,
InternalError XX000, OperationalError 58000, wrong password 28P01, TLS required 28000,
too many clients 53300, statement timeout or cancel 57014, out of memory 53200, SET of a
resource limit or access setting 42501, statement too long 54000, too complex 54001.

Resource limits: a session (an in-memory DuckDB with the release attached, ~10 MB) is
built only after the password is checked; a client has 10 s to finish start-up and
authentication; at most ``max_connections`` clients (default 64) are served at once;
each session's DuckDB runs one thread; a statement over ``max_statement_size`` (1 MiB)
gets 54000, nesting and IN lists past their bounds 54001, a protocol message over twice
the limit is refused before it is read (:mod:`dpsql.server._bounds`); statements over
1 KiB are planned in planning processes (:mod:`dpsql.server._planning`); a statement is
interrupted after ``statement_timeout`` seconds (default 300,
57014) and each session's DuckDB is capped at ``memory_limit`` (default 1GB, no spilling to
disk, 53200): see :mod:`dpsql.server._limits`.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
import stat
import threading
import warnings
from pathlib import Path
from typing import Any

from dpsql.errors import NotSupportedError, OperationalError, ProgrammingError

__all__ = ["Server", "serve", "SQLSTATES", "sqlstate_of",
           "UnencryptedServerWarning", "write_verifier"]

AUTH_METHODS = ("scram-sha-256", "md5")


class UnencryptedServerWarning(UserWarning):
    """``dpsql serve`` listens beyond loopback without TLS."""


def _require_buenavista() -> None:
    try:
        importlib.import_module("buenavista.postgres")
    except ImportError as err:
        from dpsql._install import install_hint

        raise NotSupportedError("dpsql serve needs the optional package buenavista: "
                                f"{install_hint('bi')}") from err


def __getattr__(name: str) -> Any:  # SQLSTATES / sqlstate_of without importing eagerly
    if name in ("SQLSTATES", "sqlstate_of"):
        _require_buenavista()
        from dpsql.server import _sqlstates
        return getattr(_sqlstates, name)
    raise AttributeError(f"module 'dpsql.server' has no attribute {name!r}")


def _read_private(path: str | os.PathLike, what: str, hint: str) -> str:
    """The text of ``path``, refused when it is missing or readable/writable by group or
    others (libpq's ``.pgpass`` rule, PostgreSQL's for its key file)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or "not UTF-8 text"
        raise ProgrammingError(f"cannot read the {what} {str(p)!r}: {reason}; {hint}") from err
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ProgrammingError(
            f"the {what} {str(p)!r} is accessible by group or others (mode "
            f"{stat.S_IMODE(mode):03o}); restrict it with `chmod 600 {p}`")
    return text


def read_password_file(path: str | os.PathLike) -> str:
    """The first line of ``path``: a password or a SCRAM verifier. Refused when the file is
    missing, empty, or readable/writable by group or others (libpq's ``.pgpass`` rule)."""
    p = Path(path)
    text = _read_private(p, "password file", "write the password on its first line")
    password = text.splitlines()[0] if text else ""
    if not password:
        raise ProgrammingError(f"the password file {str(p)!r} is empty: write the password "
                               "on its first line")
    return password


def write_verifier(path: str | os.PathLike, password: str) -> str:
    """Write a SCRAM-SHA-256 verifier of ``password`` (fresh salt, 4096 iterations) as
    the first line of a new file ``path`` with mode 600, for ``--password-file``; return
    the verifier. An existing file is refused (nothing is overwritten)."""
    from dpsql.server._scram import Verifier

    if not password:
        raise ProgrammingError("the password is empty: choose one")
    text = f"{Verifier.from_password(password)}\n"
    p = Path(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as err:
        raise ProgrammingError(f"{str(p)!r} exists; remove it first or pick another "
                               "file (it is never overwritten)") from err
    except OSError as err:
        raise ProgrammingError(f"cannot create {str(p)!r}: {err.strerror}") from err
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    return text.strip()


def _credentials(password_file: str | os.PathLike | None, auth: str
                 ) -> tuple[str | None, Any]:
    """(plain-text password or None, SCRAM verifier or None) from the password file."""
    from dpsql.server._scram import ScramError, Verifier

    if auth not in AUTH_METHODS:
        raise ProgrammingError(f"auth {auth!r} is not offered: use one of "
                               f"{', '.join(AUTH_METHODS)} (scram-sha-256 unless a client "
                               "predates it)")
    if password_file is None:
        return None, None
    line = read_password_file(password_file)
    try:
        verifier = Verifier.parse(line)
    except ScramError as err:
        raise ProgrammingError(f"the password file {str(password_file)!r}: {err}") from err
    if verifier is None:
        return line, Verifier.from_password(line)
    if auth == "md5":
        raise ProgrammingError(
            f"the password file {str(password_file)!r} holds a SCRAM verifier, and MD5 needs "
            "the password itself; use --auth scram-sha-256 (supported by libpq 10+, JDBC "
            "42.2+, Npgsql 3.2+), or put the password in the file")
    return None, verifier


def _tls(cert: str | os.PathLike | None, key: str | os.PathLike | None
         ) -> tuple[Any, bytes | None]:
    """(server SSLContext, tls-server-end-point channel binding data or None), or
    (None, None) without a certificate."""
    if cert is None:
        if key is not None:
            raise ProgrammingError("--tls-key needs --tls-cert (the certificate to serve)")
        return None, None
    import ssl

    from dpsql.server._scram import endpoint_binding

    # the key (its own file, or inside the certificate file) must be private
    _read_private(key if key is not None else cert, "TLS key file",
                  "give the PEM private key of the certificate")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # PostgreSQL's ssl_min_protocol_version
    try:
        ctx.load_cert_chain(str(cert), None if key is None else str(key))
        pem = Path(cert).read_text(encoding="ascii", errors="replace")
    except (OSError, ssl.SSLError) as err:
        raise ProgrammingError(
            f"cannot load the TLS certificate {str(cert)!r}"
            + (f" with the key {str(key)!r}" if key is not None else "")
            + f": {getattr(err, 'strerror', None) or err}; give the PEM certificate (chain) "
            "and the PEM private key that belongs to it") from err
    # channel binding hashes the server's own certificate: the first one of the chain
    first = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", pem, re.S)
    binding = endpoint_binding(ssl.PEM_cert_to_DER_cert(first.group(0))) if first else None
    return ctx, binding


def _resolve(host: str, port: int) -> tuple[int, tuple, bool]:
    """(address family, bind address, loopback?) for ``host``."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise ProgrammingError(f"--host {host!r} does not resolve: {err.strerror}; give an "
                               "IP address such as 127.0.0.1") from err
    from dpsql.server._listener import is_loopback

    loopback = bool(host) and all(is_loopback(info[4][0]) for info in infos)
    family, _, _, _, sockaddr = infos[0]
    return family, (sockaddr[0], port), loopback


class Server:
    """A running ``dpsql serve`` (returned by :func:`serve`): stop it with :meth:`stop` or
    by leaving a ``with`` block. ``url`` is a libpq connection URI for it."""

    def __init__(self, wire: Any, catalog: Any, conn: Any, release: str, alias: str,
                 host: str) -> None:
        self._wire = wire
        self._catalog = catalog
        self._conn = conn
        self.release = release
        self.database = alias
        self.host = host
        self.port: int = wire.server_address[1]
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._thread = threading.Thread(target=wire.serve_forever, kwargs={
            "poll_interval": 0.1}, name=f"dpsql-serve-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        tls = "?sslmode=require" if self.tls else ""
        return f"postgresql://{host}:{self.port}/{self.database}{tls}"

    @property
    def tls(self) -> bool:
        """Clients must use TLS."""
        return self._wire.tls is not None

    @property
    def auth(self) -> str | None:
        """The password check (``"scram-sha-256"`` or ``"md5"``), or None without one."""
        return self._wire.auth_method if self._wire.verifier is not None else None

    @property
    def running(self) -> bool:
        return not self._stopped.is_set()

    @property
    def sessions(self) -> int:
        """Clients connected now."""
        return len(self._conn.sessions())

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (True) or ``timeout`` seconds pass (False)."""
        return self._stopped.wait(timeout)

    def stop(self) -> None:
        """Stop accepting clients, end the open sessions (a running query is interrupted)
        and wait for their threads. Calling it twice is harmless."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._wire.shutdown()
            for session in self._conn.sessions():
                session.interrupt()
            self._wire.close_clients()
            self._wire.server_close()
            self._thread.join()
            self._conn.planning.close()
            self._catalog.close()
            self._stopped.set()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<dpsql Server {self.url} ({self.release}), {state}>"


def serve(release: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 5433,
          password_file: str | os.PathLike | None = None, name: str | None = None,
          plan_cache_size: int = 256, max_connections: int = 64,
          statement_timeout: float = 300.0, memory_limit: str = "1GB",
          auth: str = "scram-sha-256", tls_cert: str | os.PathLike | None = None,
          tls_key: str | os.PathLike | None = None, allow_unencrypted: bool = False,
          max_statement_size: int = 1 << 20) -> Server:
    """Serve the release file ``release`` over the PostgreSQL protocol, in a background
    thread; return the running :class:`Server`.

    ``port=0`` picks a free port (read it from ``Server.port``). ``max_connections``
    caps the clients served at once (those still authenticating included); the next one
    gets FATAL 53300 (too_many_connections). ``statement_timeout`` (seconds, 0 = none)
    interrupts a longer statement (57014); ``memory_limit`` (DuckDB size syntax) caps each
    session's DuckDB, without spilling to disk (53200). ``name`` is the database
    name clients see (default: the release name). A seeded (not private) release emits
    :class:`dpsql.dbapi.SeededReleaseWarning` once, here.

    ``password_file``: its first line is the password or a SCRAM verifier; ``auth`` is
    ``"scram-sha-256"`` (default) or ``"md5"``. ``tls_cert``/``tls_key``: PEM files
    (the key may sit in the certificate file); with them every client must use TLS.
    Without them only loopback is served, unless ``allow_unencrypted=True`` (which warns
    with :class:`UnencryptedServerWarning`).

    ``max_statement_size`` (bytes, default 1 MiB) bounds a statement (54000 beyond);
    nesting depth and IN lists are bounded too (54001), and statements over 1 KiB are
    planned in planning processes under the statement timeout
    (:mod:`dpsql.server._bounds`, :mod:`dpsql.server._planning`).

    The server runs in this process's threads, so a client in the same process must not
    hold the GIL while it waits for an answer: psycopg's C implementation does so in
    libpq's blocking ``PGconn.describe_prepared``, ``close_prepared`` and
    ``close_portal`` (never in ``connection.execute``), which then wait forever. Use
    their ``send_*`` forms, or connect from another process (as ``dpsql serve`` serves).
    """
    _require_buenavista()
    import duckdb

    from dpsql import duck
    from dpsql.dbapi import _PRIVATE_RNG, SeededReleaseWarning
    from dpsql.server._bounds import check_max_statement_size
    from dpsql.schema_catalog import CatalogDatabase, column_comments, logical_tables
    from dpsql.server._limits import check_memory_limit, check_statement_timeout, duckdb_config
    from dpsql.server._release_connection import ReleaseConnection
    from dpsql.server._listener import WireServer

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ProgrammingError(f"port {port!r} is not a TCP port: give 0..65535 (0 picks a "
                               "free port)")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or \
            max_connections < 1:
        raise ProgrammingError(f"max_connections {max_connections!r} must be a positive "
                               "integer (the default is 64)")
    statement_timeout = check_statement_timeout(statement_timeout)
    memory_limit, memory_bytes = check_memory_limit(memory_limit)
    max_statement_size = check_max_statement_size(max_statement_size)
    family, address, loopback = _resolve(host, port)
    password, verifier = _credentials(password_file, auth)
    tls, binding = _tls(tls_cert, tls_key)
    if not loopback and verifier is None:
        raise ProgrammingError(
            f"refusing to listen on {host!r} without a password: only loopback addresses "
            "(127.0.0.1, ::1, localhost) may be served without one; pass --password-file "
            "(and --tls-cert/--tls-key, or use an SSH tunnel)")
    if not loopback and tls is None and not allow_unencrypted:
        raise ProgrammingError(
            f"refusing to listen on {host!r} without TLS: queries and answers would cross "
            "the network in plain text; pass --tls-cert and --tls-key (or serve 127.0.0.1 "
            "behind an SSH tunnel), or --allow-unencrypted on a network you trust")
    if not loopback and tls is None:
        warnings.warn(f"serving {host!r} without TLS: queries and answers cross the network "
                      "in plain text (the password does not, with SCRAM); pass --tls-cert "
                      "and --tls-key, or serve loopback behind an SSH tunnel",
                      UnencryptedServerWarning, stacklevel=2)
    path = str(Path(release))
    # the probe runs under the sessions' memory cap: a cap too small to open the release
    # fails here, at start-up, not in every client's session
    probe = duckdb.connect(":memory:", config={"threads": 1, **duckdb_config(memory_limit)})
    try:
        alias = duck.attach(probe, path, name)
        rng = probe.execute(f'SELECT rng FROM "{alias}".dpsql_release').fetchall()
        info = next(r for r in duck.catalog_of(probe).releases if r.alias == alias)
        tables = logical_tables(probe, info)
        comments = column_comments(info)
    except duckdb.OutOfMemoryException as err:
        raise OperationalError(f"memory_limit {memory_limit!r} is too small to open the "
                               f"release {path!r}: raise --memory-limit ({err})") from err
    except duckdb.Error as err:
        raise OperationalError(f"cannot read {path!r} as a dpsql release: {err}") from err
    finally:
        probe.close()
    if not rng or rng[0][0] != _PRIVATE_RNG:
        warnings.warn(f"release {alias!r} ({path}) was built with a fixed seed: its noise is "
                      "reproducible, so it is NOT private; serve it for tests and demos only",
                      SeededReleaseWarning, stacklevel=2)
    catalog = CatalogDatabase({alias: tables}, duckdb_config(memory_limit), comments={alias: comments})
    conn = ReleaseConnection(path, alias, catalog, plan_cache_size, statement_timeout,
                             memory_limit, memory_bytes, max_statement_size)
    try:
        wire = WireServer(address, family, conn, password, max_connections,
                          verifier=verifier, auth_method=auth, tls=tls, binding=binding,
                          max_statement_size=max_statement_size, database=alias)
    except OSError as err:
        catalog.close()
        conn.planning.close()
        raise OperationalError(f"cannot listen on {host}:{port}: {err.strerror}; pick "
                               "another --port (0 picks a free one)") from err
    return Server(wire, catalog, conn, path, alias, wire.server_address[0])
