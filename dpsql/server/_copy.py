"""``COPY (query) TO STDOUT`` over ``dpsql serve``: psql's ``\\copy (SELECT ...) TO
'file.csv' WITH CSV HEADER`` (and DBeaver's or pgAdmin's export) sends it.

The query inside runs exactly as if it were sent alone (:meth:`Session.execute_sql`: the
same routing, planner and lock-down); only its rows travel differently, as CopyData
messages in PostgreSQL's text or CSV format, so nothing can be read this way that a
SELECT cannot read. ``COPY trips TO STDOUT`` (a table) would copy its rows, which a
release does not have: it is refused with the aggregate to write instead. ``COPY ... FROM``
and ``COPY ... TO 'file'`` are writes on the server and keep their refusal (25006).
Supported options: ``FORMAT text|csv`` (or ``CSV``), ``HEADER``, ``DELIMITER``, ``NULL``;
others (``BINARY``, ``QUOTE``, ``FORCE_QUOTE`` ...) are refused by name.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

from dpsql.pg_emulation import closing_paren
from dpsql.server._commands import _COMMANDS, Result, first_word
from dpsql.server._guard import MULTI, Refusal
from dpsql.server._types import pg_type

_COPY_QUERY = re.compile(r"\s*COPY\s*\(", re.I)
_COPY_TABLE = re.compile(r"\s*COPY\s+(?P<table>[\w.\"]+)\s*(?:\([^)]*\)\s*)?TO\s+STDOUT\b",
                         re.I)
_TO_STDOUT = re.compile(r"TO\s+STDOUT\b(?P<options>.*)$", re.I | re.S)
_TOKEN = re.compile(r"'(?:[^']|'')*'|[\w-]+")
_TRUE = {"true", "on", "1", "yes"}
_FALSE = {"false", "off", "0", "no"}


@dataclass(frozen=True)
class CopyOut:
    """A ``COPY (query) TO STDOUT``: the query and the format of its rows."""

    query: str
    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"


def parse_copy_out(sql: str) -> CopyOut | None:
    """The :class:`CopyOut` that ``sql`` asks for, or None when it is no ``COPY ... TO
    STDOUT``; raises :class:`dpsql.server._guard.Refusal` (0A000) for a table's rows or an option this
    server does not write."""
    m = _COPY_TABLE.match(sql)
    if m is not None:
        table = m.group("table")
        raise Refusal(
            f"COPY {table} TO STDOUT would copy the table's rows, which a release does not "
            f"have: write COPY (SELECT <columns>, COUNT(*) FROM {table} GROUP BY <columns>) "
            "TO STDOUT (psql: \\copy (SELECT ...) TO 'file.csv' WITH CSV HEADER)")
    m = _COPY_QUERY.match(sql)
    end = closing_paren(sql, m.end()) if m is not None else None
    if end is None:
        return None
    out = _TO_STDOUT.match(sql[end + 1:].strip().rstrip(";").strip())
    if out is None:
        return None  # TO 'file', TO PROGRAM: the server's files, refused as a write
    query = sql[m.end():end].strip()
    # SET, SHOW, BEGIN ..., and the cursor commands but FETCH: refused before they run
    if first_word(query) in _COMMANDS or first_word(query) in ("DECLARE", "MOVE", "CLOSE"):
        raise Refusal(
            f"COPY ({query[:60]}) TO STDOUT needs a query that returns rows: write COPY "
            "(SELECT ...) TO STDOUT")
    return _options(query, out.group("options"))


def _options(query: str, text: str) -> CopyOut:
    """PostgreSQL's option list, new (``WITH (FORMAT csv, HEADER)``) or old (``WITH CSV
    HEADER DELIMITER ','``) spelling."""
    if ";" in re.sub(r"'(?:[^']|'')*'", "", text):
        raise Refusal(MULTI)
    words = _TOKEN.findall(text)
    if words and words[0].upper() == "WITH":
        words = words[1:]
    opts: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i].upper()
        value = words[i + 1] if i + 1 < len(words) else None
        if value is not None and value.upper() == "AS":
            i += 1
            value = words[i + 1] if i + 1 < len(words) else None
        if word == "CSV":
            opts["csv"], i = True, i + 1
        elif word == "FORMAT" and value is not None and value.strip("'").lower() in (
                "csv", "text"):
            opts["csv"], i = value.strip("'").lower() == "csv", i + 2
        elif word == "HEADER":
            flag = (value or "").strip("'").lower()
            opts["header"] = flag not in _FALSE
            i += 2 if flag in _TRUE | _FALSE else 1
        elif word in ("DELIMITER", "NULL") and value is not None and value.startswith("'"):
            opts[word.lower()] = value[1:-1].replace("''", "'")
            i += 2
        else:
            raise Refusal(
                f"COPY ... TO STDOUT option {words[i]!r} is not supported: use FORMAT text "
                "or csv, HEADER, DELIMITER '<char>' and NULL '<text>'")
    if "csv" in opts and opts["csv"] and "delimiter" not in opts:
        opts["delimiter"] = ","
    if opts.get("csv") and "null" not in opts:
        opts["null"] = ""
    return CopyOut(query, **opts)


def _text_field(value: str, copy: CopyOut) -> str:
    return (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r").replace(copy.delimiter, "\\" + copy.delimiter))


def _csv_field(value: str, copy: CopyOut) -> str:
    if value == "" or any(c in value for c in (copy.delimiter, '"', "\n", "\r")) \
            or value == copy.null:
        return '"' + value.replace('"', '""') + '"'
    return value


def copy_lines(result: Result, copy: CopyOut):  # noqa: ANN201  (an iterator of bytes)
    """The CopyData payloads of ``result``: a header line if asked, then one per row."""
    field = _csv_field if copy.csv else _text_field
    texts: list[Callable[[Any], str]] = [pg_type(t)[2] for t in result.types]
    if copy.header:
        yield (copy.delimiter.join(field(n, copy) for n in result.names or []) + "\n").encode()
    for row in result.rows():
        yield (copy.delimiter.join(copy.null if v is None else field(enc(v), copy)
                                   for v, enc in zip(row, texts)) + "\n").encode("utf-8")


def copy_out_response(ncols: int) -> bytes:
    """CopyOutResponse: text format overall and per column."""
    body = struct.pack("!bh", 0, ncols) + struct.pack(f"!{ncols}h", *([0] * ncols))
    return struct.pack("!ci", b"H", len(body) + 4) + body


__all__ = ["CopyOut", "parse_copy_out", "copy_lines", "copy_out_response"]
