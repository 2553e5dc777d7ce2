"""SCRAM-SHA-256 for ``dpsql serve``: the server side of PostgreSQL's default password
authentication (RFC 5802 with SHA-256 as RFC 7677 names it, and channel binding
``tls-server-end-point`` from RFC 5929 as ``SCRAM-SHA-256-PLUS``).

Why SCRAM and not MD5 (which buenavista offers): with MD5 the hash the client sends is a
password equivalent (whoever reads it off the wire or the server can log in), and
PostgreSQL 18 deprecates it. With SCRAM the server stores only a verifier (salt, iteration
count, StoredKey, ServerKey), the password never crosses the wire, a captured exchange
cannot be replayed (each side adds a fresh nonce), and the client checks the server too:
the server's final message proves that it knows ServerKey. Over TLS, channel binding
(``-PLUS``) ties the exchange to the server's certificate, so a machine in the middle that
terminates TLS itself cannot relay the login.

Everything here is a pure function of its inputs (no sockets): :class:`Exchange` is one
login's state machine, fed the client's two messages; :mod:`dpsql.server._wire` frames
them as PostgreSQL's SASL messages.

Decisions, following PostgreSQL (``src/backend/libpq/auth-scram.c``) where it chose:

* The user name inside SCRAM is ignored (libpq sends it empty): the start-up packet names
  the user, and one password guards the server.
* The password is prepared with SASLprep (RFC 4013) as libpq prepares it; a password
  that SASLprep rejects (a prohibited or unassigned character, bad bidirectional text) is
  used as its raw UTF-8 bytes, which is what libpq does too, so every password works.
* A verifier is written ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``
  (base64 parts), PostgreSQL's ``pg_authid.rolpassword`` format, so a verifier can be
  carried over from a PostgreSQL server. 4096 iterations, PostgreSQL's default.
* Channel binding: ``-PLUS`` is offered only over TLS and only when the certificate's
  signature hash is known (RFC 5929 §4.1: its hash, SHA-256 for MD5 and SHA-1). A client
  that says it supports channel binding (``y``) while the server offered ``-PLUS`` is
  refused: that is a downgrade (RFC 5802 §6).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass

MECHANISM = "SCRAM-SHA-256"
MECHANISM_PLUS = "SCRAM-SHA-256-PLUS"
CHANNEL_BINDING = "tls-server-end-point"
ITERATIONS = 4096  # PostgreSQL's scram_iterations default
SALT_BYTES = 16  # PostgreSQL's SCRAM_DEFAULT_SALT_LEN
NONCE_BYTES = 18  # PostgreSQL's SCRAM_RAW_NONCE_LEN
_PREFIX = "SCRAM-SHA-256$"


class ScramError(ValueError):
    """The exchange failed. ``wrong_password``: the client's proof was wrong (nothing
    more is said to the client); otherwise the message says what broke the protocol."""

    def __init__(self, message: str, wrong_password: bool = False) -> None:
        super().__init__(message)
        self.wrong_password = wrong_password


# --------------------------------------------------------------------------------------
# SASLprep (RFC 4013, a profile of stringprep, RFC 3454)
# --------------------------------------------------------------------------------------

_PROHIBITED = (stringprep.in_table_c12, stringprep.in_table_c21_c22, stringprep.in_table_c3,
               stringprep.in_table_c4, stringprep.in_table_c5, stringprep.in_table_c6,
               stringprep.in_table_c7, stringprep.in_table_c8, stringprep.in_table_c9,
               stringprep.in_table_a1)


def saslprep(password: str) -> bytes:
    """The bytes SCRAM hashes for ``password``: SASLprep's output as UTF-8, or the raw
    UTF-8 of the password when SASLprep would reject it (libpq's ``pg_saslprep`` rule).

    >>> saslprep("I\\u00adX"), saslprep("user"), saslprep("\\u2168")
    (b'IX', b'user', b'IX')
    >>> saslprep("a\\u0007b")  # a control character: prohibited, so used as it is
    b'a\\x07b'
    """
    raw = password.encode("utf-8")
    if password.isascii():
        return raw  # libpq: pure ASCII is used as it is (controls included)
    # map: non-ASCII spaces to SPACE, "commonly mapped to nothing" to nothing; then NFKC
    # with the Unicode version stringprep is defined on (3.2)
    mapped = "".join(" " if stringprep.in_table_c12(ch) else ch for ch in password
                     if not stringprep.in_table_b1(ch))
    out = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    if not out or any(test(ch) for ch in out for test in _PROHIBITED):
        return raw
    if any(stringprep.in_table_d1(ch) for ch in out):  # right-to-left text (RFC 3454 §6)
        if any(stringprep.in_table_d2(ch) for ch in out) or not (
                stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            return raw
    return out.encode("utf-8")


# --------------------------------------------------------------------------------------
# Verifiers
# --------------------------------------------------------------------------------------

def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise ScramError(f"{what} is not valid base64") from err


@dataclass(frozen=True)
class Verifier:
    """What the server keeps of a password: enough to check a login, not to log in."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(cls, password: str, salt: bytes | None = None,
                      iterations: int = ITERATIONS) -> "Verifier":
        """A verifier of ``password`` (a fresh random salt unless one is given)."""
        if salt is None:
            salt = secrets.token_bytes(SALT_BYTES)
        salted = hashlib.pbkdf2_hmac("sha256", saslprep(password), salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        return cls(iterations, salt, hashlib.sha256(client_key).digest(),
                   _hmac(salted, b"Server Key"))

    @classmethod
    def parse(cls, text: str) -> "Verifier | None":
        """The verifier written in ``text`` (PostgreSQL's format), or None when ``text``
        does not start like one (then it is a password). A text that starts like one but
        is malformed raises :class:`ScramError`: it is never taken for a password."""
        if not text.startswith(_PREFIX):
            return None
        try:
            head, keys = text[len(_PREFIX):].split("$")
            iterations, salt = head.split(":")
            stored, server = keys.split(":")
            n = int(iterations)
        except ValueError as err:
            raise ScramError(f"malformed SCRAM verifier: write it as {_PREFIX}<iterations>:"
                             "<salt>$<StoredKey>:<ServerKey> (base64 parts)") from err
        v = cls(n, _unb64(salt, "the verifier's salt"),
                _unb64(stored, "the verifier's StoredKey"),
                _unb64(server, "the verifier's ServerKey"))
        if n < 1 or not v.salt or len(v.stored_key) != 32 or len(v.server_key) != 32:
            raise ScramError("malformed SCRAM verifier: the iteration count must be positive, "
                             "the salt non-empty and both keys 32 bytes (SHA-256)")
        return v

    def __str__(self) -> str:
        return (f"{_PREFIX}{self.iterations}:{_b64(self.salt)}${_b64(self.stored_key)}:"
                f"{_b64(self.server_key)}")


# --------------------------------------------------------------------------------------
# Channel binding data: tls-server-end-point (RFC 5929 §4)
# --------------------------------------------------------------------------------------

# DER of the signatureAlgorithm OIDs (with tag and length) -> hash of the binding
_SIG_HASHES = {
    bytes.fromhex("06092a864886f70d010104"): "sha256",  # md5WithRSAEncryption -> SHA-256
    bytes.fromhex("06092a864886f70d010105"): "sha256",  # sha1WithRSAEncryption -> SHA-256
    bytes.fromhex("06092a864886f70d01010e"): "sha224",
    bytes.fromhex("06092a864886f70d01010b"): "sha256",
    bytes.fromhex("06092a864886f70d01010c"): "sha384",
    bytes.fromhex("06092a864886f70d01010d"): "sha512",
    bytes.fromhex("06072a8648ce3d0401"): "sha256",  # ecdsa-with-SHA1 -> SHA-256
    bytes.fromhex("06082a8648ce3d040301"): "sha224",
    bytes.fromhex("06082a8648ce3d040302"): "sha256",
    bytes.fromhex("06082a8648ce3d040303"): "sha384",
    bytes.fromhex("06082a8648ce3d040304"): "sha512",
}


def _der_item(data: bytes, pos: int) -> tuple[int, int]:
    """(start of the contents, end) of the DER item at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    n = data[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if not 1 <= k <= 4 or pos + k > len(data):
            raise ValueError("bad DER length")
        n = int.from_bytes(data[pos:pos + k], "big")
        pos += k
    if pos + n > len(data):
        raise ValueError("truncated DER")
    return pos, pos + n


def endpoint_binding(cert_der: bytes) -> bytes | None:
    """The ``tls-server-end-point`` channel binding data of a DER certificate: its hash
    with the hash of its signature algorithm (SHA-256 for MD5 and SHA-1), or None when
    that algorithm is not one whose hash RFC 5929 defines here (Ed25519, RSA-PSS): the
    server then does not offer ``-PLUS``, as a client could not bind either."""
    try:
        start, _ = _der_item(cert_der, 0)  # Certificate ::= SEQUENCE {
        _, tbs_end = _der_item(cert_der, start)  # tbsCertificate,
        alg_start, _ = _der_item(cert_der, tbs_end)  # signatureAlgorithm SEQUENCE { OID
        _, oid_end = _der_item(cert_der, alg_start)
    except ValueError:
        return None
    name = _SIG_HASHES.get(cert_der[alg_start:oid_end])
    return None if name is None else hashlib.new(name, cert_der).digest()


# --------------------------------------------------------------------------------------
# One exchange
# --------------------------------------------------------------------------------------

def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed SCRAM {what}: expected attribute=value, got "
                             f"{part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


class Exchange:
    """The server side of one SCRAM-SHA-256 login.

    ``binding``: the channel binding data of the TLS connection (:func:`endpoint_binding`
    of the server's certificate), or None without TLS; ``-PLUS`` is offered only with it.
    Call :meth:`mechanisms` for AuthenticationSASL, :meth:`first` with the client's
    SASLInitialResponse, :meth:`final` with its SASLResponse; :meth:`final` returns the
    server's last message only when the client's proof is right."""

    def __init__(self, verifier: Verifier, binding: bytes | None = None,
                 nonce: str | None = None) -> None:
        self.verifier = verifier
        self.binding = binding
        self._server_nonce = nonce or _b64(secrets.token_bytes(NONCE_BYTES))
        self._state = "first"
        self._gs2 = b""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def mechanisms(self) -> tuple[str, ...]:
        return (MECHANISM_PLUS, MECHANISM) if self.binding is not None else (MECHANISM,)

    @property
    def started(self) -> bool:
        """The client-first-message was received."""
        return self._state != "first"

    @property
    def done(self) -> bool:
        """The client proved it knows the password."""
        return self._state == "done"

    def first(self, mechanism: str, message: bytes) -> bytes:
        """The server-first-message for the client-first-message ``message``."""
        if self._state != "first":
            raise ScramError("unexpected SCRAM initial response")
        if mechanism not in self.mechanisms():
            raise ScramError(f"SASL mechanism {mechanism!r} is not offered: use one of "
                             f"{', '.join(self.mechanisms())}")
        text = _text(message, "client-first-message")
        flag, rest = text[:1], text[1:]
        # gs2-header: cbind flag "," [authzid] ","
        if flag == "p":
            cb, sep, rest = rest.partition(",")
            if not sep or cb != f"={CHANNEL_BINDING}":
                raise ScramError(f"unsupported channel binding {cb[1:]!r}: only "
                                 f"{CHANNEL_BINDING} is offered")
            if mechanism != MECHANISM_PLUS:
                raise ScramError("the client asked for channel binding with "
                                 f"{MECHANISM}: use {MECHANISM_PLUS}")
        elif flag in ("n", "y"):
            if not rest.startswith(","):
                raise ScramError("malformed SCRAM gs2 header")
            rest = rest[1:]
            if mechanism == MECHANISM_PLUS:
                raise ScramError(f"{MECHANISM_PLUS} without channel binding data")
            if flag == "y" and self.binding is not None:
                raise ScramError("the client supports channel binding and the server "
                                 f"offered {MECHANISM_PLUS}, yet the client did not bind: "
                                 "a downgrade, refused (RFC 5802 §6)")
        else:
            raise ScramError("malformed SCRAM gs2 header: expected n, y or p=")
        authzid, sep, bare = rest.partition(",")
        if not sep:
            raise ScramError("malformed SCRAM gs2 header")
        if authzid:
            raise ScramError("SCRAM authorization identities (a=) are not supported")
        attrs = _attributes(bare, "client-first-message")
        if attrs and attrs[0][0] == "m":
            raise ScramError("SCRAM mandatory extensions (m=) are not supported")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise ScramError("malformed SCRAM client-first-message: expected n=user,r=nonce")
        client_nonce = attrs[1][1]
        if not client_nonce or not all(0x21 <= ord(c) <= 0x7E for c in client_nonce):
            raise ScramError("malformed SCRAM nonce: printable ASCII, no comma")
        self._gs2 = text[:len(text) - len(bare)].encode("utf-8")
        self._nonce = client_nonce + self._server_nonce
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={_b64(self.verifier.salt)},"
                              f"i={self.verifier.iterations}")
        self._state = "final"
        return self._server_first.encode("ascii")

    def final(self, message: bytes) -> bytes:
        """The server-final-message (``v=<ServerSignature>``) for the client-final-message
        ``message``; raises :class:`ScramError` (``wrong_password``) on a wrong proof."""
        if self._state != "final":
            raise ScramError("unexpected SCRAM response")
        self._state = "failed"  # one try: any error below ends the exchange
        text = _text(message, "client-final-message")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final-message: no proof (p=)")
        attrs = _attributes(without_proof, "client-final-message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("malformed SCRAM client-final-message: expected c=...,r=...")
        expected_cb = self._gs2 + (self.binding if self._gs2.startswith(b"p") else b"")
        if not hmac.compare_digest(_unb64(attrs[0][1], "the channel binding"), expected_cb):
            raise ScramError("SCRAM channel binding check failed: the client saw another "
                             "server certificate (a machine in the middle?)")
        if attrs[1][1] != self._nonce:
            raise ScramError("SCRAM nonce mismatch")
        proof = _unb64(proof_part, "the SCRAM proof")
        if len(proof) != 32:
            raise ScramError("malformed SCRAM proof: 32 bytes expected")
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode("utf-8")
        signature = _hmac(self.verifier.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(),
                                   self.verifier.stored_key):
            raise ScramError("wrong password", wrong_password=True)
        self._state = "done"
        server_signature = _hmac(self.verifier.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode("ascii")


def _text(message: bytes, what: str) -> str:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScramError(f"malformed SCRAM {what}: not UTF-8") from err
    if "\x00" in text:
        raise ScramError(f"malformed SCRAM {what}: NUL byte")
    return text


__all__ = ["Exchange", "ScramError", "Verifier", "endpoint_binding", "saslprep",
           "MECHANISM", "MECHANISM_PLUS"]
