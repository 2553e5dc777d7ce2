"""What differs between the sqlglot versions dpsql accepts (``sqlglot>=28.10`` in
pyproject.toml: Superset 6.1 pins 28.x, newer installs get 30+).

* **DuckDB's ``~`` and ``!~``.** DuckDB 2 reads ``x ~ 'p'`` as a partial
  regular-expression match (``regexp_matches``, PostgreSQL's meaning). sqlglot up to
  30.26 reads it as a *full* match and writes ``REGEXP_FULL_MATCH`` into the planned
  SQL, a different filter from the one the analyst wrote. Where this sqlglot does so
  (checked once, on what it writes for ``a ~ 'b'``), a statement with ``~`` is refused,
  naming the function that means the same on every version; the SQLAlchemy dialect
  renders ``regexp_match`` that way already. Elsewhere this module does nothing.
* **sqlglot's Command fallback warning.** sqlglot parses statements it does not know
  (``CALL f()``, ``LOAD x``, ``RESET x``, ``EXPLAIN ...``) as a raw Command and logs a
  WARNING saying so, which, with no logging set up, Python prints to the terminal before
  dpsql's own refusal. dpsql refuses every Command itself, so :func:`parse_duckdb` and
  :func:`quiet_fallback` drop that one warning while dpsql parses (in this thread only:
  an application's own use of sqlglot keeps it).
* **Crashes of sqlglot's parser** (``SHOW ALL``: an ``IndexError``) are a ParseError
  while dpsql parses (:func:`quiet_fallback`).
* **Predicates inside ROLLUP, CUBE and GROUPING SETS.** DuckDB (and PostgreSQL) take
  any expression as an item: ``GROUP BY ROLLUP (c IS NULL)``, ``CUBE (name LIKE 'A%')``,
  ``GROUPING SETS (x > 3, ())``. sqlglot 28 and 30 read an item only up to a bitwise
  operator, so an item with a comparison, ``IS``, ``LIKE``, ``BETWEEN``, ``IN``, ``NOT``,
  ``AND`` or ``OR`` was a syntax error, while ``ROLLUP ((c IS NULL))`` parsed.
  :func:`wrap_grouping_items` puts such an item in parentheses, in the token list, before
  sqlglot parses it (the same grouping: a parenthesised single expression is that
  expression). It works on tokens, so strings, comments, dollar quotes and quoted names
  are never touched, and each added parenthesis takes its neighbour's position, so that
  a syntax error elsewhere is still reported where the analyst wrote it. sqlglot's
  parser is compiled (mypyc), so its grouping-item rule cannot be overridden.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

import sqlglot
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from dpsql.errors import UnsupportedQueryError

# what this sqlglot writes for DuckDB's `~` (28.x-30.26: REGEXP_FULL_MATCH; 30.27+:
# REGEXP_MATCHES)
TILDE_IS_FULL_MATCH = "FULL_MATCH" in sqlglot.transpile("SELECT a ~ 'b'", read="duckdb",
                                                        write="duckdb")[0].upper()
_TILDE = sqlglot.Dialect.get_or_raise("duckdb").tokenize("~")[0].token_type  # its name varies


def refuse_regexp_tilde(sql: str, tokenize: object) -> None:
    """Raise if ``sql`` uses ``~``/``!~`` and this sqlglot would change its meaning
    (``tokenize``: the planner's DuckDB tokenizer's ``tokenize``)."""
    if not TILDE_IS_FULL_MATCH or "~" not in sql:
        return
    try:
        tokens = tokenize(sql)  # type: ignore[operator]
    except TokenError:
        return
    if any(t.token_type == _TILDE for t in tokens):
        raise UnsupportedQueryError(
            f"the regular-expression operator ~ is not supported with sqlglot "
            f"{sqlglot.__version__}, which reads it as a whole-string match where DuckDB "
            "matches anywhere in the string; write regexp_matches(x, 'pattern') (NOT "
            "regexp_matches(...) for !~), or regexp_full_match(x, 'pattern') for a "
            "whole-string match, or install sqlglot >= 30.27")


class _Quiet(threading.local):
    depth = 0


_QUIET = _Quiet()
_FALLBACK = "Falling back to parsing as a 'Command'"


class _DropFallback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_QUIET.depth and _FALLBACK in str(record.msg))


_SQLGLOT_LOGGER = logging.getLogger("sqlglot")
if not any(isinstance(f, _DropFallback) for f in _SQLGLOT_LOGGER.filters):
    _SQLGLOT_LOGGER.addFilter(_DropFallback())


@contextmanager
def quiet_fallback() -> Iterator[None]:
    """Drop sqlglot's "Falling back to parsing as a 'Command'" warning in this block, and
    make a crash of sqlglot's parser a :class:`~sqlglot.errors.ParseError`.

    sqlglot's parser itself fails on some statements it does not know: ``SHOW ALL`` (a
    DuckDB statement) raised a bare ``IndexError`` from sqlglot's ``_parse_show``, which
    reached the analyst as "list index out of range" at every entry point. Every caller
    turns a ParseError into dpsql's syntax error or refusal."""
    _QUIET.depth += 1
    try:
        yield
    except (IndexError, KeyError, AttributeError, TypeError, ValueError) as err:
        raise ParseError(f"this statement cannot be read ({type(err).__name__} in "
                         f"sqlglot {sqlglot.__version__}'s parser)") from err
    finally:
        _QUIET.depth -= 1


def parse_duckdb(sql: str) -> list:
    """``sqlglot.parse(sql, read="duckdb")`` without the Command fallback warning, with
    predicates in ROLLUP, CUBE and GROUPING SETS read as DuckDB reads them
    (:func:`wrap_grouping_items`)."""
    with quiet_fallback():
        return _DUCKDB.parser().parse(wrap_grouping_items(_DUCKDB.tokenize(sql)), sql)


_DUCKDB = sqlglot.Dialect.get_or_raise("duckdb")
_T = TokenType
_GROUPINGS = frozenset((_T.ROLLUP, _T.CUBE, _T.GROUPING_SETS))
_OPENS = frozenset((_T.L_PAREN, _T.L_BRACKET, _T.L_BRACE, _T.CASE))
_CLOSES = frozenset((_T.R_PAREN, _T.R_BRACKET, _T.R_BRACE, _T.END))
_PARSER = type(_DUCKDB.parser())
_PREDICATES = frozenset().union(
    *(getattr(_PARSER, k, {}) for k in ("EQUALITY", "COMPARISON", "RANGE_PARSERS",
                                        "CONJUNCTION", "DISJUNCTION")),
    (_T.NOT, _T.IS, _T.IN, _T.LIKE, _T.ILIKE, _T.BETWEEN, _T.AND, _T.OR, _T.EQ, _T.NEQ,
     _T.GT, _T.GTE, _T.LT, _T.LTE, _T.NULLSAFE_EQ),
    (t for t in (getattr(_T, n, None) for n in ("ISNULL", "NOTNULL", "GLOB", "SIMILAR_TO",
                                                 "RLIKE", "IRLIKE")) if t is not None))
"""The tokens of an operator that sqlglot reads above a bitwise expression: the
parser's own tables (the operator classes of its comparison, range, AND and OR rules),
and the common ones by name should a version lack a table."""


def wrap_grouping_items(tokens: list) -> list:
    """``tokens`` with each item of a ``ROLLUP (...)``, ``CUBE (...)`` or ``GROUPING SETS
    (...)`` that holds a predicate operator outside any bracket (:data:`_PREDICATES`)
    put in parentheses (module doc); the same list when there is none. An item that is
    already one parenthesised group, a nested ROLLUP/CUBE/GROUPING SETS, or holds no
    such operator is left as it is."""
    if not any(t.token_type in _GROUPINGS for t in tokens):
        return tokens
    out: list = []
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        out.append(t)
        i += 1
        if t.token_type not in _GROUPINGS or i >= n or tokens[i].token_type != _T.L_PAREN:
            continue
        out.append(tokens[i])  # the list's '('
        i += 1
        item: list = []
        depth = 0
        while i < n:
            u = tokens[i]
            if depth == 0 and u.token_type in (_T.COMMA, _T.R_PAREN):
                out.extend(_wrapped(item))
                item = []
                if u.token_type == _T.R_PAREN:
                    break  # its ')' is appended by the outer loop
                out.append(u)
                i += 1
                continue
            depth += (u.token_type in _OPENS) - (u.token_type in _CLOSES)
            item.append(u)
            i += 1
        else:
            out.extend(item)  # no closing ')': left for the parser to report
    return out


def _wrapped(item: list) -> list:
    """One grouping item's tokens, in parentheses when it holds a predicate operator
    outside brackets (nested groupings inside it wrapped in turn)."""
    if not item:
        return item
    if item[0].token_type in _GROUPINGS:
        return wrap_grouping_items(item)
    depth, bare = 0, False
    for u in item:
        if depth == 0 and u.token_type in _PREDICATES:
            bare = True
        depth += (u.token_type in _OPENS) - (u.token_type in _CLOSES)
    item = wrap_grouping_items(item)  # a grouping nested in a parenthesised item
    if not bare:
        return item
    first, last = item[0], item[-1]
    return [Token(_T.L_PAREN, "(", first.line, first.col, first.start, first.start),
            *item, Token(_T.R_PAREN, ")", last.line, last.col, last.end, last.end)]
