"""PostgreSQL types for ``dpsql serve``: DuckDB result types as PostgreSQL type OIDs with
PostgreSQL's text and binary output, and Bind parameters decoded by their declared OID.

Text output follows PostgreSQL (booleans ``t``/``f``, ``Infinity``/``NaN``, numerics
without exponent, arrays as ``{...}``), because clients parse it (psql, JDBC). Binary
output covers the fixed-width types, text, bytea, numeric, dates and times, uuid and 1-D
arrays; a type without a binary form here is sent as text and RowDescription says so.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from dpsql.errors import DataError, InterfaceError
from dpsql.schema_catalog import array_items


class ProtocolError(InterfaceError):
    """A message the server cannot decode: SQLSTATE 08P01."""


# --------------------------------------------------------------------------------------
# Types: DuckDB type name -> (OID, typlen, text encoder, binary encoder)
# --------------------------------------------------------------------------------------

def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(float(v))


def _numeric_text(v: Any) -> str:
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return _float_text(v)
    return str(v)


def _interval_text(v: Any) -> str:
    if not isinstance(v, _dt.timedelta):
        return str(v)
    secs = v.seconds
    return (f"{v.days} days {secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
            f".{v.microseconds:06d}")


def _temporal_text(v: Any) -> str:
    return v.isoformat(sep=" ") if isinstance(v, _dt.datetime) else v.isoformat()


def _json_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


_EPOCH_DATE = _dt.date(2000, 1, 1)
_EPOCH = _dt.datetime(2000, 1, 1)


def _numeric_binary(v: Any) -> bytes:
    """PostgreSQL's binary NUMERIC: base-10000 digit groups, weight, sign, display scale."""
    d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if d.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if d.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xF000 if d < 0 else 0xD000, 0)
    sign = 0x4000 if d.is_signed() and d != 0 else 0
    dscale = max(0, -int(d.as_tuple().exponent))
    whole, _, frac = format(d.copy_abs(), "f").partition(".")
    whole = whole.lstrip("0")
    whole = whole.zfill(-(-len(whole) // 4) * 4)
    frac = frac + "0" * (-len(frac) % 4)
    groups = [int(whole[i:i + 4]) for i in range(0, len(whole), 4)]
    groups += [int(frac[i:i + 4]) for i in range(0, len(frac), 4)]
    weight = len(whole) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight, sign, dscale, *groups)


def _timestamp_binary(v: _dt.datetime) -> bytes:
    if v.tzinfo is not None:
        v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    delta = v - _EPOCH
    return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000
                       + delta.microseconds)


def _time_binary(v: _dt.time) -> bytes:
    return struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000
                       + v.microsecond)


def _interval_binary(v: _dt.timedelta) -> bytes:
    return struct.pack("!qii", v.seconds * 1_000_000 + v.microseconds, v.days, 0)


_Enc = Callable[[Any], str]
_SCALARS: dict[str, tuple[int, int, _Enc, Callable[[Any], bytes] | None]] = {
    "BOOLEAN": (16, 1, lambda v: "t" if v else "f", lambda v: b"\x01" if v else b"\x00"),
    "SMALLINT": (21, 2, str, lambda v: struct.pack("!h", v)),
    "INTEGER": (23, 4, str, lambda v: struct.pack("!i", v)),
    "BIGINT": (20, 8, str, lambda v: struct.pack("!q", v)),
    "NUMERIC": (1700, -1, _numeric_text, _numeric_binary),
    "FLOAT": (700, 4, _float_text, lambda v: struct.pack("!f", v)),
    "DOUBLE": (701, 8, _float_text, lambda v: struct.pack("!d", v)),
    "TEXT": (25, -1, str, lambda v: str(v).encode("utf-8")),
    "BLOB": (17, -1, lambda v: "\\x" + bytes(v).hex(), bytes),
    "DATE": (1082, 4, _temporal_text,
             lambda v: struct.pack("!i", (v - _EPOCH_DATE).days)),
    "TIME": (1083, 8, _temporal_text, _time_binary),
    "TIMESTAMP": (1114, 8, _temporal_text, _timestamp_binary),
    "TIMESTAMPTZ": (1184, 8, _temporal_text, _timestamp_binary),
    "INTERVAL": (1186, 16, _interval_text, _interval_binary),
    "UUID": (2950, 16, str, lambda v: getattr(v, "bytes", None) or bytes.fromhex(
        str(v).replace("-", ""))),
    "JSON": (114, -1, _json_text, lambda v: _json_text(v).encode("utf-8")),
}
_ALIASES = {
    "TINYINT": "SMALLINT", "UTINYINT": "SMALLINT", "USMALLINT": "INTEGER",
    "UINTEGER": "BIGINT", "UBIGINT": "NUMERIC", "HUGEINT": "NUMERIC", "UHUGEINT": "NUMERIC",
    "DECIMAL": "NUMERIC", "VARINT": "NUMERIC", "BIGNUM": "NUMERIC", "REAL": "FLOAT",
    "VARCHAR": "TEXT", "TIMESTAMP_S": "TIMESTAMP", "TIMESTAMP_MS": "TIMESTAMP",
    "TIMESTAMP_NS": "TIMESTAMP", "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ",
    "TIME WITH TIME ZONE": "TIME", "STRUCT": "JSON", "MAP": "JSON", "UNION": "JSON",
}
_ARRAYS = {16: 1000, 21: 1005, 23: 1007, 20: 1016, 700: 1021, 701: 1022, 25: 1009,
           1700: 1231, 1082: 1182, 1114: 1115}


def _array_elem(enc: _Enc, v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (list, tuple)):
        return "{" + ",".join(_array_elem(enc, x) for x in v) + "}"
    s = enc(v)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array_binary(values: Any, elem_oid: int, enc: Callable[[Any], bytes]) -> bytes:
    """A 1-D array in PostgreSQL's binary format (lower bound 1)."""
    values = list(values)
    head = struct.pack("!iiiii", 1 if values else 0, int(any(v is None for v in values)),
                       elem_oid, len(values), 1)
    if not values:
        return head[:12]
    parts = [head]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            data = enc(v)
            parts.append(struct.pack("!i", len(data)) + data)
    return b"".join(parts)


def pg_type(duck_type: str) -> tuple[int, int, _Enc, Callable[[Any], bytes] | None]:
    """PostgreSQL (OID, typlen, text encoder, binary encoder or None) of a DuckDB type."""
    t = duck_type.strip().upper()
    if t.endswith("]"):
        inner = t[:t.rindex("[")]
        oid, _, enc, elem_bin = pg_type(inner)
        array_oid = _ARRAYS.get(oid)
        if array_oid is None:  # arrays of other types go out as text[]
            oid, elem_bin, array_oid = 25, (lambda v: enc(v).encode("utf-8")), 1009
        binary = None if inner.endswith("]") or elem_bin is None else \
            (lambda v: _array_binary(v, oid, elem_bin))
        return (array_oid, -1,
                lambda v: "{" + ",".join(_array_elem(enc, x) for x in v) + "}", binary)
    base = t.split("(", 1)[0].strip()
    base = _ALIASES.get(base, base)
    return _SCALARS.get(base, (25, -1, str, lambda v: str(v).encode("utf-8")))


# --------------------------------------------------------------------------------------
# Parameters: decoded by declared type OID
# --------------------------------------------------------------------------------------

_INT_OIDS = {20, 21, 23, 26}
_FLOAT_OIDS = {700, 701}


# array type OID -> element type OID (one-dimensional arrays: pgcli's and pgspecial's
# ``c.relkind = ANY(%s)`` with a Python list, JDBC's setArray, psycopg's list of dates)
ARRAY_ELEMENTS = {1000: 16, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701,
                  1231: 1700, 1009: 25, 1015: 1043, 1014: 1042, 1002: 18, 1003: 19,
                  1182: 1082, 1115: 1114, 1185: 1184}


def decode_param(raw: bytes | None, oid: int, fmt: int) -> Any:
    """One Bind parameter as a Python value: a scalar the planner binds as one literal,
    or a list for an array type (which DuckDB binds as a LIST: ``x = ANY($1)``).

    NUMERIC (text or binary) becomes an exact ``Decimal``, never a float (a float moved
    ``x < 2.5000000000000000001`` onto ``x < 2.5``). DATE, TIMESTAMP and TIMESTAMPTZ in
    binary become ``date``/``datetime`` values; TIMESTAMPTZ (text or binary) becomes a
    ``datetime`` with its offset, which the planner refuses with the reason
    (:mod:`dpsql.planner.refuse_time_zones`). A value that is malformed for its type is
    a :class:`~dpsql.errors.DataError` (an ErrorResponse; the session goes on)."""
    if raw is None:
        return None
    if oid in ARRAY_ELEMENTS:
        return _decode_array(raw, ARRAY_ELEMENTS[oid], fmt)
    if fmt == 1:
        try:
            return _decode_binary(raw, oid)
        except struct.error as err:
            raise DataError(f"binary parameter of {len(raw)} bytes is malformed for type "
                            f"OID {oid}") from err
    text = raw.decode("utf-8")
    try:
        if oid in _INT_OIDS:
            return int(text)
        if oid in _FLOAT_OIDS:
            return float(text)
        if oid == 1700:
            return Decimal(text)
        if oid == 1184:
            return _timestamptz_text(text)
    except (ValueError, InvalidOperation) as err:
        raise DataError(f"parameter {text!r} is not a valid value for type OID {oid}"
                        ) from err
    if oid == 16:
        return text.lower() in ("t", "true", "1", "on", "yes", "y")
    return text


def _decode_binary(raw: bytes, oid: int) -> Any:
    """A parameter in binary format (see :func:`decode_param`)."""
    if oid == 21:
        return struct.unpack("!h", raw)[0]
    if oid == 23:
        return struct.unpack("!i", raw)[0]
    if oid in (20, 26):
        return struct.unpack("!q" if len(raw) == 8 else "!I", raw)[0]
    if oid == 700:
        return struct.unpack("!f", raw)[0]
    if oid == 701:
        return struct.unpack("!d", raw)[0]
    if oid == 16:
        return raw != b"\x00"
    if oid in (25, 1043, 1042, 19, 0, 705, 114):
        return raw.decode("utf-8")
    if oid == 1700:
        return _numeric_from_binary(raw)
    if oid == 1082:
        days = struct.unpack("!i", raw)[0]
        if days in (_INFINITE_DATE, -_INFINITE_DATE - 1):
            raise DataError("the infinite date is not supported as a parameter; send a "
                            "date")
        try:
            return _EPOCH_DATE + _dt.timedelta(days=days)
        except OverflowError:
            raise DataError(f"date parameter of {days} days from 2000-01-01 is outside "
                            "the years 1 to 9999; send a date in them") from None
    if oid in (1114, 1184):
        micros = struct.unpack("!q", raw)[0]
        if micros in (_INFINITE_TIMESTAMP, -_INFINITE_TIMESTAMP - 1):
            raise DataError("the infinite timestamp is not supported as a parameter; "
                            "send a timestamp")
        try:
            value = _EPOCH + _dt.timedelta(microseconds=micros)
        except OverflowError:
            raise DataError("timestamp parameter outside the years 1 to 9999; send a "
                            "timestamp in them") from None
        return value if oid == 1114 else value.replace(tzinfo=_dt.timezone.utc)
    raise ProtocolError(f"binary parameter of type OID {oid} is not supported; send it "
                        "in text format")


_INFINITE_DATE = 0x7FFFFFFF
_INFINITE_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
_NUMERIC_SIGNS = {0x0000: 0, 0x4000: 1}
_NUMERIC_SPECIAL = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}


def _numeric_from_binary(raw: bytes) -> Decimal:
    """PostgreSQL's binary NUMERIC (the inverse of :func:`_numeric_binary`): base-10000
    digit groups from ``weight`` down, a sign and a display scale; exact."""
    ndigits, weight, sign, dscale = struct.unpack("!hhHh", raw[:8])
    if sign in _NUMERIC_SPECIAL:
        return Decimal(_NUMERIC_SPECIAL[sign])
    if sign not in _NUMERIC_SIGNS or ndigits < 0 or dscale < 0:
        raise DataError("malformed binary NUMERIC parameter")
    groups = struct.unpack(f"!{ndigits}H", raw[8:8 + 2 * ndigits])
    if any(g > 9999 for g in groups):
        raise DataError("malformed binary NUMERIC parameter")
    digits = "".join(f"{g:04d}" for g in groups)
    whole = 4 * (weight + 1)  # digits before the point
    if whole >= len(digits):
        int_part, frac = digits + "0" * (whole - len(digits)), ""
    elif whole <= 0:
        int_part, frac = "0", "0" * -whole + digits
    else:
        int_part, frac = digits[:whole], digits[whole:]
    frac = (frac + "0" * dscale)[:dscale]  # the digits past dscale are zeros
    return Decimal(("-" if sign else "") + (int_part.lstrip("0") or "0")
                   + ("." + frac if frac else ""))


def _timestamptz_text(text: str) -> _dt.datetime:
    """A TIMESTAMPTZ parameter in PostgreSQL's text form (``2013-01-02 05:30:00+02``);
    without an offset it is in the session's TimeZone, which dpsql serve reports as UTC."""
    value = _dt.datetime.fromisoformat(text.strip())
    return value if value.tzinfo is not None else value.replace(tzinfo=_dt.timezone.utc)


def _decode_array(raw: bytes, elem: int, fmt: int) -> list[Any]:
    """A one-dimensional array parameter, in PostgreSQL's text (``{a,"b c",NULL}``) or
    binary form, as a list of its decoded elements. The elements of a date or timestamp
    array in text become ``date``/``datetime`` values, as in binary: a list binds as a
    typed list literal, and DuckDB compares a date with a list of dates, not of strings
    (a scalar text date stays a string, which DuckDB casts where it compares)."""
    if fmt == 1:
        if len(raw) < 12:
            raise ProtocolError("malformed binary array parameter")
        ndim, _, _ = struct.unpack("!iii", raw[:12])
        if ndim == 0:
            return []
        if ndim != 1:
            raise DataError(f"array parameters of {ndim} dimensions are not supported; "
                            "send a one-dimensional array")
        n, _ = struct.unpack("!ii", raw[12:20])
        out, pos = [], 20
        for _ in range(n):
            size = struct.unpack("!i", raw[pos:pos + 4])[0]
            pos += 4
            out.append(None if size < 0 else decode_param(raw[pos:pos + size], elem, 1))
            pos += max(size, 0)
        return out
    text = raw.decode("utf-8").strip()
    if text.startswith("[") and "=" in text:  # optional dimension decoration: [0:2]={...}
        text = text.split("=", 1)[1].strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise DataError(f"array parameter {text[:60]!r} is not an array literal: send it "
                        "as {a,b,c}")
    out: list[Any] = []
    for item, quoted in array_items(text[1:-1]):
        if quoted:
            out.append(_temporal_element(decode_param(item.encode("utf-8"), elem, 0), elem))
        elif item.startswith("{"):
            raise DataError("array parameters of several dimensions are not supported; "
                            "send a one-dimensional array")
        else:
            out.append(None if item.upper() == "NULL" else _temporal_element(
                decode_param(item.encode("utf-8"), elem, 0), elem))
    return out


def _temporal_element(value: Any, elem: int) -> Any:
    """A date or timestamp array's element given in text (ISO, as clients send it) as a
    ``date``/``datetime`` (:func:`_decode_array`); other elements as they are."""
    if elem not in (1082, 1114) or not isinstance(value, str):
        return value
    try:
        return (_dt.date.fromisoformat if elem == 1082 else _dt.datetime.fromisoformat)(
            value.strip())
    except ValueError as err:
        raise DataError(f"array element {value!r} is not a valid "
                        f"{'date' if elem == 1082 else 'timestamp'}: send it as "
                        f"{'2013-01-31' if elem == 1082 else '2013-01-31 05:30:00'}"
                        ) from err
