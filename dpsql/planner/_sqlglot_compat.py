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
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

import sqlglot
from sqlglot.errors import ParseError, TokenError

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
    """``sqlglot.parse(sql, read="duckdb")`` without the Command fallback warning."""
    with quiet_fallback():
        return sqlglot.parse(sql, read="duckdb")
