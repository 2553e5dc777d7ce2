"""Where a syntax error is, in the analyst's words: the :class:`~dpsql.SqlSyntaxError`
for a sqlglot ``ParseError``.

sqlglot reports the token at which it gave up, which is often one word past the typo:
``SELEC 1`` parses ``SELEC`` as a column and fails at ``1``; ``FROM trips GRUOP BY x``
takes ``GRUOP`` for the table's alias and fails at ``BY``. Decisions:

* A statement whose first word is not one that starts a query (``SELEC``) is blamed on
  that word, with the closest statement keyword as a suggestion when one is close.
* Otherwise, when the word just before the failing token is a plain name that is one
  typo away from a clause keyword (``FORM``, ``GRUOP``, ``WHRE``), that word is blamed
  and the keyword suggested. Only that one word is considered: a guess further back
  would move the pointer away from where the parser actually stopped.
* Otherwise the error stays where sqlglot put it.

``line``/``col`` are 1-based and ``col`` is the column of the blamed word's *first*
character (sqlglot's own figure is the column of the token's last character).
"""

from __future__ import annotations

import difflib

from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from dpsql.errors import SqlSyntaxError

# what a query may start with (DuckDB: FROM-first queries, PIVOT statements)
_STARTS = ("SELECT", "WITH", "FROM", "VALUES", "PIVOT", "UNPIVOT", "TABLE")
_CLAUSES = ("SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET",
            "UNION", "EXCEPT", "INTERSECT", "JOIN", "BETWEEN", "DISTINCT", "ROLLUP",
            "CUBE", "QUALIFY", "WINDOW")


def syntax_error(sql: str, err: ParseError, tokenize: object) -> SqlSyntaxError:
    """The error to raise for ``err`` on ``sql`` (``tokenize``: the planner's tokenizer's
    ``tokenize``, so that the tokens are DuckDB's)."""
    first = err.errors[0] if err.errors else {}
    line, col, near = first.get("line"), first.get("col"), first.get("highlight")
    description = first.get("description", str(err))
    hint = ""
    try:
        tokens = list(tokenize(sql))  # type: ignore[operator]
    except TokenError:
        tokens = []
    blamed = _blame(tokens, line, col)
    if blamed is not None:
        token, suggestion, starts = blamed
        (line, col), near = _start_of(sql, token), token.text
        if starts:
            description = f"{token.text!r} does not start a query"
            hint = f"; did you mean {suggestion}?" if suggestion else \
                "; a query starts with SELECT, WITH or FROM"
        else:
            hint = f"; did you mean {suggestion}?"
    elif (at := _at(tokens, line, col)) is not None:
        line, col = _start_of(sql, tokens[at])
    if line is None:  # no position: sqlglot's parser failed on it (quiet_fallback)
        return SqlSyntaxError(f"syntax error: {description}; write one SELECT statement")
    return SqlSyntaxError(f"syntax error at line {line}, column {col} near {near!r}: "
                          f"{description}{hint}", line, col, near)


def _at(tokens: list[Token], line: object, col: object) -> int | None:
    """Index of the token sqlglot stopped at (it reports the token's last column)."""
    for i, t in enumerate(tokens):
        if t.line == line and t.col == col:
            return i
    return None


def _blame(tokens: list[Token], line: object, col: object
           ) -> tuple[Token, str | None, bool] | None:
    """(word to blame, suggested keyword, whether it starts its statement), or None."""
    at = _at(tokens, line, col)
    if at is None:
        return None
    start = at
    while start > 0 and tokens[start - 1].token_type != TokenType.SEMICOLON:
        start -= 1
    head = tokens[start]
    if start < at and head.token_type == TokenType.VAR and head.text.upper() not in _STARTS:
        return head, _closest(head.text, _STARTS), True
    if at > start:
        before = tokens[at - 1]
        if before.token_type == TokenType.VAR:
            suggestion = _closest(before.text, _CLAUSES)
            if suggestion is not None:
                return before, suggestion, False
    return None


def _closest(word: str, keywords: tuple[str, ...]) -> str | None:
    found = difflib.get_close_matches(word.upper(), keywords, n=1, cutoff=0.7)
    return found[0] if found else None


def _start_of(sql: str, token: Token) -> tuple[int, int]:
    """1-based (line, column) of the token's first character."""
    line = sql.count("\n", 0, token.start) + 1
    return line, token.start - (sql.rfind("\n", 0, token.start) + 1) + 1
