"""SCRAM-SHA-256 server side (:mod:`dpsql.server._scram`) against the RFC's test vector, a
client written here from RFC 5802 §3, and certificates made with ``cryptography``.

The end-to-end checks with libpq (psycopg, psql) are in ``test_serve_tls.py``."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.server._scram import (ITERATIONS, MECHANISM, MECHANISM_PLUS, Exchange, ScramError,
                                 Verifier, endpoint_binding, saslprep)

# RFC 7677 §3: user "user", password "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
# the same verifier in PostgreSQL's pg_authid format
RFC_VERIFIER = ("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzp"
                "cXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=")


def test_rfc7677_exchange():
    v = Verifier.from_password("pencil", RFC_SALT, 4096)
    ex = Exchange(v, nonce=RFC_SERVER_NONCE)
    assert ex.mechanisms() == (MECHANISM,)
    assert ex.first(MECHANISM, RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not ex.done
    assert ex.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert ex.done


def test_verifier_text_round_trips_in_postgresql_format():
    v = Verifier.parse(RFC_VERIFIER)
    assert v == Verifier.from_password("pencil", RFC_SALT, 4096)
    assert str(v) == RFC_VERIFIER
    ex = Exchange(v, nonce=RFC_SERVER_NONCE)  # a parsed verifier checks the same login
    ex.first(MECHANISM, RFC_CLIENT_FIRST)
    assert ex.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    fresh = Verifier.from_password("pencil")
    assert fresh.iterations == ITERATIONS and len(fresh.salt) == 16
    assert fresh.salt != Verifier.from_password("pencil").salt  # a fresh salt each time


@pytest.mark.parametrize("text", [
    "SCRAM-SHA-256$4096:c2FsdA==",  # no keys
    "SCRAM-SHA-256$x:c2FsdA==$" + "A" * 44 + ":" + "A" * 44,  # iterations not a number
    "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",  # keys not 32 bytes
    "SCRAM-SHA-256$4096:!!$" + "A" * 43 + "=:" + "A" * 43 + "=",  # salt not base64
    "SCRAM-SHA-256$0:c2FsdA==$" + "A" * 43 + "=:" + "A" * 43 + "=",  # no iterations
])
def test_malformed_verifiers_are_refused_not_taken_for_passwords(text):
    with pytest.raises(ScramError, match="verifier|base64"):
        Verifier.parse(text)


def test_a_password_is_not_a_verifier():
    assert Verifier.parse("pencil") is None
    assert Verifier.parse("scram-sha-256$lower case is a password") is None


@pytest.mark.parametrize("password, prepared", [
    ("I\u00adX", "IX"),  # RFC 4013 §3 examples: soft hyphen mapped to nothing
    ("user", "user"),
    ("USER", "USER"),  # no case folding
    ("\u00aa", "a"),  # NFKC
    ("\u2168", "IX"),  # NFKC
    ("a\u00a0b", "a b"),  # non-ASCII space mapped to SPACE
    ("s3cret-\u00dc", "s3cret-\u00dc"),
])
def test_saslprep(password, prepared):
    assert saslprep(password) == prepared.encode("utf-8")


@pytest.mark.parametrize("password", [
    "\u0007",  # ASCII control: libpq uses pure ASCII as it is
    "x\u0080y",  # non-ASCII control: prohibited, so the raw bytes (libpq's fallback)
    "\u0627\u0031",  # RandALCat first but not last: bidi rule broken
    "a\u0627",  # mixes LCat and RandALCat
    "x\U000e0001y",  # a tagging character: prohibited
])
def test_saslprep_falls_back_to_the_raw_password(password):
    assert saslprep(password) == password.encode("utf-8")


# --------------------------------------------------------------------------------------
# a client, written from RFC 5802 §3
# --------------------------------------------------------------------------------------

def _hmac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


def client_login(ex: Exchange, password: str, *, gs2: str = "n,,", mechanism=MECHANISM,
                 binding: bytes = b"", nonce: str = "fyko+d2lbbFgONRv9qkxdawL",
                 tamper_nonce: bool = False) -> bytes:
    """Run a whole login against ``ex``; return the server's final message."""
    first_bare = f"n=,r={nonce}"
    server_first = ex.first(mechanism, (gs2 + first_bare).encode()).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = _hmac(salted, b"Client Key")
    stored_key = hashlib.sha256(client_key).digest()
    c = base64.b64encode(gs2.encode() + binding).decode()
    r = attrs["r"] + ("x" if tamper_nonce else "")
    without_proof = f"c={c},r={r}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, _hmac(stored_key, auth_message)))
    final = ex.final(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = _hmac(salted, b"Server Key")  # the client checks the server's proof too
    assert final == b"v=" + base64.b64encode(_hmac(server_key, auth_message))
    return final


VERIFIER = Verifier.from_password("correct horse", b"0123456789abcdef", 4096)
BINDING = hashlib.sha256(b"the server certificate").digest()


def test_right_password_logs_in_and_wrong_one_does_not():
    ex = Exchange(VERIFIER)
    client_login(ex, "correct horse")
    assert ex.done
    ex = Exchange(VERIFIER)
    with pytest.raises(ScramError) as err:
        client_login(ex, "correct horse!")
    assert err.value.wrong_password and not ex.done


def test_one_try_per_exchange():
    ex = Exchange(VERIFIER)
    with pytest.raises(ScramError):
        client_login(ex, "wrong")
    with pytest.raises(ScramError, match="unexpected"):
        ex.final(b"c=biws,r=x,p=" + base64.b64encode(bytes(32)))
    with pytest.raises(ScramError, match="unexpected"):
        ex.first(MECHANISM, b"n,,n=,r=abc")


def test_channel_binding_plus():
    ex = Exchange(VERIFIER, BINDING)
    assert ex.mechanisms() == (MECHANISM_PLUS, MECHANISM)
    client_login(ex, "correct horse", gs2="p=tls-server-end-point,,",
                 mechanism=MECHANISM_PLUS, binding=BINDING)
    assert ex.done


def test_channel_binding_to_another_certificate_fails():
    """A machine in the middle terminating TLS shows the client its own certificate: the
    client binds to that one, and the server refuses even with the right password."""
    other = hashlib.sha256(b"the attacker's certificate").digest()
    ex = Exchange(VERIFIER, BINDING)
    with pytest.raises(ScramError, match="channel binding check failed") as err:
        client_login(ex, "correct horse", gs2="p=tls-server-end-point,,",
                     mechanism=MECHANISM_PLUS, binding=other)
    assert not err.value.wrong_password and not ex.done


def test_downgrade_is_refused():
    """``y``: the client could bind but believes the server cannot. With -PLUS offered,
    someone removed it on the way (RFC 5802 §6)."""
    with pytest.raises(ScramError, match="downgrade"):
        client_login(Exchange(VERIFIER, BINDING), "correct horse", gs2="y,,")
    client_login(Exchange(VERIFIER), "correct horse", gs2="y,,")  # none offered: fine
    client_login(Exchange(VERIFIER, BINDING), "correct horse", gs2="n,,")  # can't bind


@pytest.mark.parametrize("mechanism, gs2, words", [
    (MECHANISM, "p=tls-server-end-point,,", "SCRAM-SHA-256-PLUS"),
    (MECHANISM_PLUS, "n,,", "without channel binding"),
    (MECHANISM_PLUS, "p=tls-unique,,", "unsupported channel binding"),
    ("SCRAM-SHA-1", "n,,", "not offered"),
    (MECHANISM, "n,a=admin,", "authorization"),
    (MECHANISM, "x,,", "gs2"),
])
def test_bad_first_messages(mechanism, gs2, words):
    with pytest.raises(ScramError, match=words):
        client_login(Exchange(VERIFIER, BINDING), "correct horse", gs2=gs2,
                     mechanism=mechanism, binding=BINDING)


def test_nonce_must_be_echoed():
    with pytest.raises(ScramError, match="nonce"):
        client_login(Exchange(VERIFIER), "correct horse", tamper_nonce=True)


@pytest.mark.parametrize("message", [b"", b"n,,", b"n,,r=abc", b"n,,n=,r=a,b", b"n,,m=x,n=,r=a",
                                     b"n,,n=,r=a\x00", b"\xff\xfe", b"n,,n=,r=a b"])
def test_malformed_client_first(message):
    with pytest.raises(ScramError):
        Exchange(VERIFIER).first(MECHANISM, message)


@pytest.mark.parametrize("message", [b"c=biws,r=x", b"p=abc", b"c=biws,r=x,p=!!",
                                     b"c=biws,r=x,p=" + base64.b64encode(bytes(31))])
def test_malformed_client_final(message):
    ex = Exchange(VERIFIER)
    ex.first(MECHANISM, b"n,,n=,r=abc")
    with pytest.raises(ScramError):
        ex.final(message)


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_any_password_logs_in_and_no_other_does(password, other):
    v = Verifier.from_password(password, b"salt-for-testing", 64)
    client_login(Exchange(v), password)
    if saslprep(other) != saslprep(password):
        with pytest.raises(ScramError):
            client_login(Exchange(v), other)


# --------------------------------------------------------------------------------------
# tls-server-end-point (RFC 5929 §4.1)
# --------------------------------------------------------------------------------------

def _certificate(key, algorithm) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, algorithm))
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize("make_key, algorithm, digest", [
    (lambda: ec.generate_private_key(ec.SECP256R1()), hashes.SHA256(), "sha256"),
    (lambda: ec.generate_private_key(ec.SECP384R1()), hashes.SHA384(), "sha384"),
    (lambda: rsa.generate_private_key(65537, 2048), hashes.SHA256(), "sha256"),
    (lambda: rsa.generate_private_key(65537, 2048), hashes.SHA512(), "sha512"),
])
def test_endpoint_binding_hashes_with_the_signature_hash(make_key, algorithm, digest):
    der = _certificate(make_key(), algorithm)
    assert endpoint_binding(der) == hashlib.new(digest, der).digest()


def test_no_binding_where_rfc5929_defines_none():
    assert endpoint_binding(_certificate(ed25519.Ed25519PrivateKey.generate(), None)) is None
    assert endpoint_binding(b"not a certificate") is None
    assert endpoint_binding(b"") is None
