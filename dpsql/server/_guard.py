"""Statement guards of ``dpsql serve``: what may run, and how untyped parameters bind.

The session router (:mod:`dpsql.server._session`) decides where a statement goes with
regexes and sqlglot; those are heuristics, and a heuristic that misreads a string literal
let a second statement run on the shared catalog database (``SELECT $$'$$ ...; DROP SCHEMA
public CASCADE --'``). So the text that is about to run is checked here with DuckDB's own
parser, the one that would run it: exactly one statement, of type SELECT.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import duckdb

from dpsql.errors import UnsupportedQueryError
from dpsql.planner.parse_sql import not_a_query
from dpsql.schema_catalog import array_items


class ReadOnlyError(UnsupportedQueryError):
    """A write (DDL/DML) sent to the read-only server: SQLSTATE 25006."""


class Refusal(UnsupportedQueryError):
    """Something ``dpsql serve`` does not support (0A000) whose message already says
    what to do instead: its ``hint`` (none unless given) replaces the generic one of the
    planner's refusals of a query's form (:func:`dpsql.server._sqlstates.hint_of`)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


MULTI = "several statements in one query string: send one statement at a time"
# DuckDB runs a PIVOT whose ON column lists no values as two statements (it first makes
# an ENUM type of the distinct values, then pivots), which a read-only server does not
# run; it was refused as "MULTI is not allowed: dpsql serve is read-only", which said
# neither what was wrong nor what to write
PIVOT_MULTI = ("a PIVOT whose ON column lists no values is not supported by dpsql serve: "
               "DuckDB runs it as two statements (it first creates a type of the "
               "column's distinct values); list the values, e.g. PIVOT (...) ON sex IN "
               "('F', 'M') USING SUM(n), or write one SELECT with a column per value "
               "(SUM(n) FILTER (WHERE sex = 'F'))")
_QUERY_START = re.compile(r"\s*[(\s]*(?:PIVOT|UNPIVOT|SELECT|WITH|FROM)\b", re.I)
# The only DuckDB statement type that runs: everything else changes state or is refused
_READ_TYPES = {"SELECT"}


def check_select(sql: str, route: str) -> None:
    """Refuse unless DuckDB's own parser reads ``sql`` as exactly one SELECT.

    The router's regex and sqlglot checks are heuristics; DuckDB's parser is the one that
    would run the text, so it decides. Several statements (``$$;$$`` and ``E'\\''``
    strings hid a second statement from the regex) get 0A000; ATTACH, DETACH, PRAGMA,
    CHECKPOINT, SET, CALL and every write get 25006; EXPLAIN gets 0A000, and so does a
    query that DuckDB runs as several statements (``MULTI``: a PIVOT without an IN list
    of values), with the form to write instead. Text DuckDB
    cannot parse is left to the planner (which transpiles PostgreSQL spellings with
    sqlglot and refuses what it cannot plan) and, on the catalog route, to DuckDB's own
    syntax error when it runs."""
    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error:
        if route == "catalog":
            raise
        return
    if len(stmts) != 1:
        raise Refusal(MULTI)
    kind = stmts[0].type.name
    if kind == "MULTI" and _QUERY_START.match(sql):  # a query DuckDB runs as several
        raise Refusal(PIVOT_MULTI)
    if kind in _READ_TYPES:
        return
    if kind == "EXPLAIN":  # a read, refused as in process (it said "by dpsql serve")
        raise not_a_query(kind)
    raise ReadOnlyError(read_only(kind.replace("_", " ")))


class UntypedText(str):
    """A Bind parameter the client sent as text without a type (OID 0)."""


_NUMBER = re.compile(r"[+-]?(?:(?:0|[1-9]\d*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spelled(value: Any) -> Any:
    """An untyped parameter as the literal it spells: a number when it spells one
    (no leading zeros: ``02139`` stays text; ``2.5`` an exact ``Decimal``, as DuckDB
    reads that literal, ``2.5e0`` a float), a list when it spells an array literal
    (``{r,p}``: psycopg sends a Python list of strings so, for ``x = ANY(%s)``), else the
    text."""
    if not isinstance(value, UntypedText):
        return value
    text = str(value).strip()
    if text.startswith("{") and text.endswith("}"):
        return [None if not quoted and item.upper() == "NULL" else spelled(
            UntypedText(item)) if not quoted else item
                for item, quoted in array_items(text[1:-1])]
    if _NUMBER.fullmatch(text):
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        if "e" in text.lower():
            return float(text)  # 1e3 is a DOUBLE literal in DuckDB
        return Decimal(text)  # 2.5 is an exact DECIMAL literal, and stays exact
    return str(value)


def read_only(what: str) -> str:
    return (f"{what} is not allowed: dpsql serve is read-only (a release is immutable); "
            "send SELECT queries, e.g. SELECT region, COUNT(*) FROM <table> GROUP BY region")


# what opens a string, quoted name, comment or dollar-quoted string, and the ``;`` that
# ends a statement; each opener's end is then found from its own start (:func:`_end_of`)
_OPENER = re.compile(r"""(?P<e>[Ee]')|(?P<q>'|")|(?P<line>--)|(?P<comment>/\*)"""
                     r"""|\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*|)\$|(?P<semi>;)""")
_NESTED = re.compile(r"/\*|\*/")
_BODY = {"e": re.compile(r"(?:[^'\\]|\\.|'')*'", re.S), "'": re.compile(r"(?:[^']|'')*'"),
         '"': re.compile(r'(?:[^"]|"")*"')}


def _end_of(sql: str, m: re.Match) -> int:
    """Where the string, quoted name, comment or dollar-quoted string that ``m`` opens
    ends (the index after it), or -1 when it is never closed. Each is found by one scan
    from its own opening, never again: the whole split stays linear in the text (a
    regex that looked for every ``$tag$``'s closing tag to the end of the text took
    18.7 s for 214 KB of unclosed tags ``$t1$ $t2$ ...``, quadratic, before the size
    limit was checked)."""
    if m.group("line"):
        nl = sql.find("\n", m.end())
        return len(sql) if nl < 0 else nl + 1
    if m.group("comment"):
        depth = 1
        for mark in _NESTED.finditer(sql, m.end()):  # PostgreSQL's block comments nest
            depth += 1 if mark.group(0) == "/*" else -1
            if not depth:
                return mark.end()
        return -1
    if m.group("tag") is not None:
        close = sql.find(m.group(0), m.end())
        return -1 if close < 0 else close + len(m.group(0))
    body = _BODY["e" if m.group("e") else m.group("q")].match(sql, m.end())
    return -1 if body is None else body.end()


def split_simple_query(sql: str) -> list[str]:
    """The statements of a simple-protocol query string, in order (PostgreSQL runs each;
    Npgsql sends its start-up type queries so, psqlODBC ``BEGIN;declare ...``): split at
    each ``;`` outside strings (``'...'``, ``E'...'``, ``$tag$...$tag$``), quoted names
    and comments; statements that are only blanks or comments are dropped. Each one is
    then routed and checked on its own (:func:`check_select`: exactly one SELECT by
    DuckDB's parser), so a split in the wrong place can only make a piece fail, never let
    a second statement run. Text this cannot read (an unclosed quote or comment) is one
    statement. Linear in the text's length (:func:`_end_of`)."""
    pieces, start, i, code = [], 0, 0, False  # code: the piece holds more than comments
    while True:
        m = _OPENER.search(sql, i)
        if m is None:
            break
        code = code or not sql[i:m.start()].isspace() and m.start() > i
        if m.group("semi"):
            if code:
                pieces.append(sql[start:m.start()])
            start, i, code = m.end(), m.end(), False
            continue
        code = code or not (m.group("line") or m.group("comment"))
        i = _end_of(sql, m)
        if i < 0:
            return [sql]
    if code or sql[i:].strip():
        pieces.append(sql[start:])
    return pieces


