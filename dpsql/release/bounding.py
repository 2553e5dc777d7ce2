"""The bounding key: which of a unit's rows contribution bounding keeps, defined exactly.

Each unit keeps its ``max_rows`` rows of least key (privacy rule 2). The key is a keyed
hash that **depends on the unit's own rows and the secret salt only**, and it is defined
here bit for bit, so that every engine computes the same key and so keeps the same rows
(DuckDB natively, Spark in SQL: ``tests/release/test_spark.py`` checks they agree, and
:func:`reference_keys` is the specification both are tested against).

All values are unsigned 64-bit integers; ``⊕`` is XOR and ``mix`` is DuckDB's ``hash`` of
a 64-bit integer (the murmur3-style finaliser, a bijection)::

    mix(x) = x ⊕= x >> 32; x *= 0xd6e8feb86659fd93; x ⊕= x >> 32;
             x *= 0xd6e8feb86659fd93; x ⊕= x >> 32      (products mod 2⁶⁴)

* ``u``, the unit's hash: ``mix(id)`` for an integer id (its value as a signed 64-bit
  integer, two's complement); for any other id (text, …) the first 16 hex digits of
  ``md5`` of its text; for a NULL id (one unit, as in GROUP BY) the constant
  :data:`NULL_UNIT` (DuckDB's hash of NULL).
* ``s = mix(u ⊕ salt)``: the salted unit hash. It also picks the unit's counting
  bucket, ``s mod K`` (:mod:`dpsql.release.counts`), which changes nothing in the result.
* ``payload``: the row's codes packed in mixed radix (attributes in name order, the
  first varying fastest) when that fits in 63 bits; otherwise ``p = 0`` and
  ``p = mix(p ⊕ c)`` over the codes in name order.
* ``key = mix(mix(s ⊕ payload) ⊕ occ)``, where ``occ`` is 0, 1, … among the unit's
  rows with the same codes (identical rows are separate chances).

A unit keeps its rows in ascending key order. When the payload fits in
:data:`PAYLOAD_BITS` bits, the ordering is that of ``(key >> bits, payload)`` (DuckDB
carries the codes in the key's low bits; the key still has ≥ 40 random bits).
"""

from __future__ import annotations

import hashlib

import numpy as np

MIX = 0xD6E8FEB86659FD93
NULL_UNIT = 13787848793156543929
# A unit's kept codes ride in the low bits of its rows' keys when they need at most this
# many bits: the key keeps >= 40 random bits, so two rows of a unit of k rows tie (and are
# ordered by their codes instead) with probability below k²·2⁻⁴¹.
PAYLOAD_BITS = 24
INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                 "UINTEGER")


def mix64(x: np.ndarray) -> np.ndarray:
    """:func:`mix` over a uint64 array (the reference, wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(32)
        x *= np.uint64(MIX)
        x ^= x >> np.uint64(32)
        x *= np.uint64(MIX)
        x ^= x >> np.uint64(32)
    return x


def reference_unit_hash(unit: object) -> int:
    """``u`` for one unit id (Python int, str, or None)."""
    if unit is None:
        return NULL_UNIT
    if isinstance(unit, (int, np.integer)) and not isinstance(unit, bool):
        return int(mix64(np.array([int(unit) & (2**64 - 1)], dtype=np.uint64))[0])
    return int(hashlib.md5(str(unit).encode()).hexdigest()[:16], 16)


def reference_keys(units: list, payloads: np.ndarray, occ: np.ndarray, salt: int
                   ) -> np.ndarray:
    """The key of each row (uint64), from the definition above."""
    u = np.array([reference_unit_hash(x) for x in units], dtype=np.uint64)
    s = mix64(u ^ np.uint64(salt))
    return mix64(mix64(s ^ np.asarray(payloads, dtype=np.uint64)) ^
                 np.asarray(occ, dtype=np.uint64))


# --------------------------------------------------------------------------------------
# DuckDB
# --------------------------------------------------------------------------------------

def duckdb_unit_hash(column: str, sql_type: str) -> str:
    """DuckDB SQL for ``u`` of the unit column ``column`` of type ``sql_type``."""
    t = sql_type.upper()
    if t == "UBIGINT" or t.startswith(INTEGER_TYPES):
        cast = column if t == "UBIGINT" else f"CAST({column} AS BIGINT)"
        return f"hash({cast})"  # hash(NULL) is NULL_UNIT
    text = f"CAST({column} AS VARCHAR)"
    return f"coalesce(('0x' || md5({text})[1:16])::UBIGINT, {NULL_UNIT}::UBIGINT)"


def duckdb_salted(unit_hash: str, salt: int) -> str:
    """DuckDB SQL for ``s``."""
    return f"hash(xor({unit_hash}, {int(salt)}::UBIGINT))"


def duckdb_key(salted: str, payload: str, occ: str) -> str:
    """DuckDB SQL for ``key`` from the SQL of ``s``, ``payload`` and ``occ``."""
    return f"hash(xor(hash(xor({salted}, {payload})), {occ}::UBIGINT))"


def duckdb_chained_payload(columns: list[str]) -> str:
    """DuckDB SQL for a payload of more than 63 bits (the codes chained through mix)."""
    p = "0::UBIGINT"
    for c in columns:
        p = f"hash(xor({p}, {c}::UBIGINT))"
    return p
