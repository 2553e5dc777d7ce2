"""``dpsql serve`` with TLS and SCRAM-SHA-256, against libpq (psycopg 3, the Debian
``psql`` binary) and raw sockets. Certificates come from a throwaway CA (``trustme``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time

import psycopg
import pytest
import trustme

import dpsql
from dpsql.errors import ProgrammingError
from dpsql.server import serve, write_verifier
from tests.bi.pg_client import (cancelled_errors, cli_server, read_message,
                                 startup_packet)

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

PASSWORD = "s3cret-Ü"
SSL_REQUEST = struct.pack("!II", 8, 80877103)


def _key_type(name):
    return getattr(trustme.KeyType, name)


@pytest.fixture(scope="module", params=["ECDSA", "RSA"])
def tls_files(request, tmp_path_factory):
    """A CA, and a certificate for localhost/127.0.0.1 signed by it (ECDSA, then RSA)."""
    d = tmp_path_factory.mktemp(f"tls-{request.param.lower()}")
    ca = trustme.CA(key_type=_key_type(request.param))
    cert = ca.issue_cert("localhost", "127.0.0.1", key_type=_key_type(request.param))
    cert.cert_chain_pems[0].write_to_path(str(d / "cert.pem"))
    cert.private_key_pem.write_to_path(str(d / "key.pem"))
    (d / "key.pem").chmod(0o600)
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    combined = d / "combined.pem"  # certificate and key in one file
    combined.write_bytes((d / "cert.pem").read_bytes() + (d / "key.pem").read_bytes())
    combined.chmod(0o600)
    pw = d / "pw"
    pw.write_text(PASSWORD + "\n", encoding="utf-8")
    pw.chmod(0o600)
    return d


@pytest.fixture(scope="module")
def tls_server(trips_release, tls_files):
    srv = serve(trips_release, port=0, password_file=tls_files / "pw",
                tls_cert=tls_files / "cert.pem", tls_key=tls_files / "key.pem")
    yield srv
    srv.stop()


def _connect(srv, tls_files=None, **kw):
    params = {"host": "127.0.0.1", "port": srv.port, "dbname": srv.database,
              "user": "analyst", "password": PASSWORD, "connect_timeout": 10}
    if tls_files is not None:
        params.update(sslmode="verify-full", sslrootcert=str(tls_files / "ca.pem"))
    params.update(kw)
    return psycopg.connect(**params)


def _no_sessions_left(srv) -> None:
    """No session is open (a closed client's session ends once the server sees it)."""
    deadline = time.monotonic() + 60  # generous: polling ends as soon as it holds
    while srv.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.sessions == 0


# --------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------

def test_verified_tls_with_channel_binding_gives_the_same_answers(tls_server, tls_files,
                                                                  trips_release):
    sql = "SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region"
    with _connect(tls_server, tls_files, channel_binding="require",
                  require_auth="scram-sha-256") as con:
        assert con.pgconn.ssl_in_use
        got = con.execute(sql).fetchall()
    with dpsql.connect(trips_release) as local:
        assert got == [tuple(r) for r in local.execute(sql).fetchall()]
    assert tls_server.tls and tls_server.auth == "scram-sha-256"
    assert tls_server.url.endswith("?sslmode=require")


def test_plain_text_clients_are_refused(tls_server):
    with pytest.raises(psycopg.OperationalError, match="requires TLS"):
        _connect(tls_server, sslmode="disable")
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as s:
        s.sendall(startup_packet())
        kind, body = read_message(s)
        assert kind == b"E" and b"C28000\x00" in body and b"SFATAL\x00" in body
        assert s.recv(1) == b""  # and the connection is closed
    _no_sessions_left(tls_server)


def test_wrong_password_over_tls(tls_server, tls_files):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _connect(tls_server, tls_files, password="wrong")


def test_the_client_checks_the_certificate(tls_server, tmp_path):
    other = trustme.CA()  # a CA that did not sign the server's certificate
    other.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        _connect(tls_server, sslmode="verify-full", sslrootcert=str(tmp_path / "other.pem"))


def test_cancel_over_tls(tls_server, tls_files):
    """libpq sends the CancelRequest over TLS too (it repeats the SSLRequest first)."""
    with _connect(tls_server, tls_files, autocommit=True) as con:
        errors = cancelled_errors(con, "SELECT COUNT(*) FROM range(1000000000000)")
        assert [e.sqlstate for e in errors] == ["57014"]
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_bytes_sent_before_the_handshake_are_refused(tls_server, tls_files):
    """SSLRequest and a plain-text startup packet in one write: the server must not
    answer 'S' and later read those bytes as if they came through TLS
    (CVE-2021-23214 in PostgreSQL)."""
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as s:
        s.sendall(SSL_REQUEST + startup_packet())
        assert s.recv(1) == b""  # closed, no 'S'
    with _connect(tls_server, tls_files) as con:  # and the server is fine
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_a_failed_handshake_ends_only_that_connection(tls_server, tls_files):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as s:
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        s.sendall(b"this is not a TLS ClientHello" * 4)
        try:
            while s.recv(100):  # perhaps an alert; then the server closes
                pass
        except ConnectionResetError:
            pass
    assert tls_server._wire.tls.minimum_version == ssl.TLSVersion.TLSv1_2
    with _connect(tls_server, tls_files) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)
    _no_sessions_left(tls_server)


def test_certificate_and_key_in_one_file(trips_release, tls_files):
    with serve(trips_release, port=0, password_file=tls_files / "pw",
               tls_cert=tls_files / "combined.pem") as srv:
        with _connect(srv, tls_files, channel_binding="require") as con:
            assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)


def test_tls_without_a_password_on_loopback(trips_release, tls_files):
    with serve(trips_release, port=0, tls_cert=tls_files / "cert.pem",
               tls_key=tls_files / "key.pem") as srv:
        assert srv.auth is None and srv.tls
        with _connect(srv, tls_files, password="") as con:
            assert con.pgconn.ssl_in_use


def test_bad_tls_settings_are_refused(trips_release, tls_files, tmp_path):
    key = tmp_path / "key.pem"
    key.write_bytes((tls_files / "key.pem").read_bytes())
    key.chmod(0o644)
    with pytest.raises(ProgrammingError, match="chmod 600"):
        serve(trips_release, port=0, tls_cert=tls_files / "cert.pem", tls_key=key)
    with pytest.raises(ProgrammingError, match="cannot read the TLS key file"):
        serve(trips_release, port=0, tls_cert=tls_files / "cert.pem",
              tls_key=tmp_path / "missing.pem")
    with pytest.raises(ProgrammingError, match="cannot load the TLS certificate"):
        serve(trips_release, port=0, tls_cert=tmp_path / "missing.pem",
              tls_key=tls_files / "key.pem")
    stranger = tmp_path / "stranger.pem"  # a key that does not belong to the certificate
    trustme.CA().issue_cert("localhost").private_key_pem.write_to_path(str(stranger))
    stranger.chmod(0o600)
    with pytest.raises(ProgrammingError, match="cannot load the TLS certificate"):
        serve(trips_release, port=0, tls_cert=tls_files / "cert.pem", tls_key=stranger)
    with pytest.raises(ProgrammingError, match="--tls-key needs --tls-cert"):
        serve(trips_release, port=0, tls_key=tls_files / "key.pem")


# --------------------------------------------------------------------------------------
# SCRAM and MD5
# --------------------------------------------------------------------------------------

@pytest.fixture()
def password_file(tmp_path):
    p = tmp_path / "pw"
    p.write_text(PASSWORD + "\n", encoding="utf-8")
    p.chmod(0o600)
    return p


def test_scram_is_the_default(trips_release, password_file):
    with serve(trips_release, port=0, password_file=password_file) as srv:
        assert srv.auth == "scram-sha-256" and not srv.tls
        with _connect(srv, sslmode="disable", require_auth="scram-sha-256") as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="SASL"):
            _connect(srv, sslmode="disable", require_auth="md5")
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(startup_packet())
            kind, body = read_message(s)  # AuthenticationSASL, no -PLUS without TLS
            assert kind == b"R" and body == struct.pack("!i", 10) + b"SCRAM-SHA-256\x00\x00"


def test_md5_on_request(trips_release, password_file):
    with serve(trips_release, port=0, password_file=password_file, auth="md5") as srv:
        assert srv.auth == "md5"
        with _connect(srv, sslmode="disable", require_auth="md5") as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            _connect(srv, sslmode="disable", password="wrong")
        with pytest.raises(psycopg.OperationalError):
            _connect(srv, sslmode="disable", require_auth="scram-sha-256")


def test_a_verifier_file_holds_no_password(trips_release, tmp_path):
    path = tmp_path / "verifier"
    text = write_verifier(path, PASSWORD)
    assert path.read_text().strip() == text and text.startswith("SCRAM-SHA-256$4096:")
    assert PASSWORD not in path.read_text(encoding="utf-8")
    assert (path.stat().st_mode & 0o777) == 0o600
    with serve(trips_release, port=0, password_file=path) as srv:
        with _connect(srv, sslmode="disable") as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            _connect(srv, sslmode="disable", password=text)  # the verifier is no password
    with pytest.raises(ProgrammingError, match="MD5 needs the password itself"):
        serve(trips_release, port=0, password_file=path, auth="md5")
    with pytest.raises(ProgrammingError, match="never overwritten"):
        write_verifier(path, "another")
    with pytest.raises(ProgrammingError, match="empty"):
        write_verifier(tmp_path / "v2", "")


def test_a_malformed_verifier_is_refused(trips_release, tmp_path):
    path = tmp_path / "pw"
    path.write_text("SCRAM-SHA-256$4096:c2FsdA==\n")
    path.chmod(0o600)
    with pytest.raises(ProgrammingError, match="malformed SCRAM verifier"):
        serve(trips_release, port=0, password_file=path)


def test_an_unknown_auth_method_is_refused(trips_release, password_file):
    with pytest.raises(ProgrammingError, match="scram-sha-256, md5"):
        serve(trips_release, port=0, password_file=password_file, auth="trust")


def test_malformed_sasl_messages_end_the_connection(trips_release, password_file):
    with serve(trips_release, port=0, password_file=password_file) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(startup_packet())
            assert read_message(s)[0] == b"R"
            body = b"SCRAM-SHA-256\x00" + struct.pack("!i", 99) + b"n,,n=,r=abc"
            s.sendall(b"p" + struct.pack("!I", len(body) + 4) + body)
            kind, msg = read_message(s)
            assert kind == b"E" and b"C28P01\x00" in msg and b"wrong length" in msg
        _no_sessions_left(srv)


# --------------------------------------------------------------------------------------
# real clients from the command line
# --------------------------------------------------------------------------------------

def test_psql_over_verified_tls(tls_server, tls_files):
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql not found: .ci/run installs Debian postgresql-client")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PGCONNECT_TIMEOUT="10", PGSSLMODE="verify-full",
               PGSSLROOTCERT=str(tls_files / "ca.pem"), PGCHANNELBINDING="require",
               PGPASSWORD=PASSWORD)
    out = subprocess.run(
        [psql, "-X", "-A", "-t", "-h", "localhost", "-p", str(tls_server.port), "-U", "analyst",
         "-d", tls_server.database, "-c", "SELECT COUNT(*) > 0 FROM trips"],
        capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "t"


def test_cli_passwd_then_serve_with_tls(trips_release, tls_files, tmp_path):
    verifier = tmp_path / "verifier"
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "passwd", str(verifier)],
                         input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert verifier.read_text().startswith("SCRAM-SHA-256$")
    again = subprocess.run([sys.executable, "-m", "dpsql.cli", "passwd", str(verifier)],
                           input="x\n", capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "never overwritten" in again.stderr
    with cli_server(trips_release, "--password-file", verifier, "--tls-cert",
                    tls_files / "cert.pem", "--tls-key", tls_files / "key.pem") as (
            proc, port, line):
        assert "scram-sha-256" in line and "TLS required" in line, line
        with psycopg.connect(host="127.0.0.1", port=port, dbname="trips", user="x",
                             password=PASSWORD, sslmode="verify-full",
                             sslrootcert=str(tls_files / "ca.pem")) as con:
            assert con.execute("SELECT COUNT(*) > 0 FROM trips").fetchone() == (True,)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_cli_refuses_beyond_loopback_without_tls(trips_release, password_file):
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "serve", str(trips_release),
                          "--host", "0.0.0.0", "--port", "0", "--password-file",
                          str(password_file)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "without TLS" in out.stderr and "--tls-cert" in out.stderr
    assert "--allow-unencrypted" in out.stderr and "Traceback" not in out.stderr


def test_cli_warns_when_serving_beyond_loopback_without_tls(trips_release, password_file):
    with cli_server(trips_release, "--host", "0.0.0.0", "--password-file",
                    password_file, "--allow-unencrypted") as (proc, _, line):
        assert "no TLS" in line, line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert "without TLS" in proc.stderr.read()
