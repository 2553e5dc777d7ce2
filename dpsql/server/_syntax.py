"""Where a statement's text begins (after leading comments) and where in the client's
text a syntax error is (the ErrorResponse's position field, ``P``, where psql draws its
caret): shared by the session, the Parse (:mod:`dpsql.server._context`) and the simple
Query (:mod:`dpsql.server._wire`)."""

from __future__ import annotations

import re

from dpsql.errors import SqlSyntaxError

_COMMENT = re.compile(r"^\s*(?:--[^\n]*(?:\n|\Z)|/\*.*?\*/|;|\s)*", re.DOTALL)


def statement_text(sql: str) -> str:
    """``sql`` without its leading comments and blank space, and without trailing
    semicolons: the text a session routes."""
    return sql[_COMMENT.match(sql).end():].rstrip().rstrip(";").rstrip()


def text_start(sql: str) -> int:
    """Where in ``sql`` its :func:`statement_text` begins (0-based)."""
    return _COMMENT.match(sql).end()


def syntax_position(err: BaseException, sql: str) -> int | None:
    """Where in ``sql`` (as the client sent it, 1-based, PostgreSQL's ErrorResponse field
    ``P``) the syntax error ``err`` is, when it says (its line and column in the text
    the parser read, which is ``sql`` without leading comments); None when it does not,
    or when that place does not hold the word it names."""
    line, col = getattr(err, "line", None), getattr(err, "col", None)
    word = getattr(err, "highlight", None) or ""
    if not isinstance(err, SqlSyntaxError) or not line or not col:
        return None
    start = _COMMENT.match(sql).end()
    lines = sql[start:].split("\n")
    if line > len(lines):
        return None
    at = start + sum(len(x) + 1 for x in lines[:line - 1]) + col - 1
    if word and sql[at:at + len(word)].lower() != word.lower():
        return None
    return at + 1


__all__ = ["statement_text", "syntax_position", "text_start"]
