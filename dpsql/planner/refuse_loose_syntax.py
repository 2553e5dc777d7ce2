"""Pass 1, after the parse: refuse an INTERVAL that sqlglot reads and DuckDB's parser
rejects, and a list after ``IN`` or an operator ``<=>`` that sqlglot reads as another
predicate.

DuckDB's ``INTERVAL`` takes one number, one string or an expression in parentheses
before its unit (``INTERVAL 3 MONTH``, ``INTERVAL '-3' MONTH``, ``INTERVAL (-3) MONTH``;
``- INTERVAL 3 MONTH`` negates a whole interval). sqlglot's DuckDB dialect also reads
``INTERVAL -3 MONTH``, ``INTERVAL +3 MONTH``, ``INTERVAL 1 + 2 MONTH``, ``INTERVAL
3::INT MONTH``, ``INTERVAL NULL DAY`` and ``INTERVAL ? DAY`` and writes them back as
SQL that DuckDB runs (``INTERVAL '-3' MONTH``), so the planner answered them; each is
DuckDB's ``syntax error at or near ...``, and is refused here as DuckDB refuses it.

``BETWEEN SYMMETRIC``, which DuckDB 2's parser rejects too, stays answered on purpose:
it is standard SQL that PostgreSQL clients send to ``dpsql serve``
(tests/e2e/test_fuzz_regressions.py). The check runs only when the statement holds the
word INTERVAL, so no other statement pays for a second tokenization, and only when
DuckDB's own parser rejects the statement (it is the judge: a token rule alone refused
``CAST(NULL AS STRUCT(a INTERVAL))`` beside an INTERVAL literal).

``x IN [a, b]`` (a list after ``IN``) is DuckDB's list membership, ``list_contains([a,
b], x)``: the NULLs in the list are skipped, so ``2 NOT IN [1, NULL]`` is TRUE, and
``NULL IN []`` is FALSE. sqlglot reads it as SQL's ``x IN (a, b)`` (``2 NOT IN (1,
NULL)`` is NULL), and writes it back so: the planner answered ``k NOT IN [1, NULL]`` as
0 rows where DuckDB keeps 18,410 of 20,000, and ``c NOT IN []`` without the NULL rows.
It is refused (:func:`refuse_misread_operators`), naming the forms that say what is meant, unless
the list holds numbers only (``k IN [1, 2]``), where the two agree. So is MySQL's ``x
<=> y``, which sqlglot reads as ``x IS NOT DISTINCT FROM y`` and DuckDB refuses (no
function ``<=>``).
"""

from __future__ import annotations

import duckdb
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from dpsql.errors import SqlSyntaxError, UnsupportedQueryError
from dpsql.planner._syntax_error import _start_of

_INTERVAL_STARTS = frozenset((TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN,
                              TokenType.BYTE_STRING, TokenType.HEREDOC_STRING,
                              TokenType.NATIONAL_STRING, TokenType.RAW_STRING))
"""The tokens DuckDB's INTERVAL may start with: a number, a string, a parenthesis."""

_TYPE_BEFORE = frozenset((TokenType.ALIAS, TokenType.DCOLON))
"""Tokens after which INTERVAL is a type (``CAST(x AS INTERVAL)``, ``'1 day'::INTERVAL``)."""

_INTERVAL_FORMS = ("DuckDB's INTERVAL takes one number or string, or an expression in "
                   "parentheses, before its unit (INTERVAL 3 MONTH, INTERVAL '-3' MONTH, "
                   "INTERVAL (-3) MONTH, - INTERVAL 3 MONTH)")


def refuse_loose_syntax(sql: str, tree: exp.Expression, tokenize: object) -> None:
    """Raise :class:`~dpsql.errors.SqlSyntaxError` where ``sql`` (parsed as ``tree``)
    uses a form DuckDB's parser rejects (module docstring); ``tokenize``: the planner's
    DuckDB tokenizer's ``tokenize``."""
    if "interval" not in sql.lower():
        return
    intervals = list(tree.find_all(exp.Interval))
    if not intervals:  # a column named "interval"
        return
    try:  # what DuckDB's own parser reads is DuckDB's SQL, whatever the tokens below say
        duckdb.extract_statements(sql)  # (INTERVAL as a nested type: STRUCT(a INTERVAL))
        return
    except duckdb.Error:
        pass
    try:
        tokens: list[Token] = list(tokenize(sql))  # type: ignore[operator]
    except TokenError:
        return
    for i, t in enumerate(tokens[:-1]):
        after = tokens[i + 1]
        if t.token_type == TokenType.INTERVAL and after.token_type not in _INTERVAL_STARTS \
                and (i == 0 or tokens[i - 1].token_type not in _TYPE_BEFORE):
            raise _error(sql, after, f"{_INTERVAL_FORMS}; DuckDB rejects INTERVAL "
                                     f"followed by {after.text!r}")
    for node in intervals:
        value = node.this
        if not isinstance(value, (exp.Paren, exp.Subquery)) \
                and any(True for _ in value.iter_expressions()):
            raise SqlSyntaxError(
                f"syntax error: {_INTERVAL_FORMS}; DuckDB rejects an INTERVAL of "
                f"{value.sql('duckdb')!r} without parentheses: write INTERVAL "
                f"({value.sql('duckdb')}) {node.text('unit')}".rstrip())


def refuse_misread_operators(sql: str, tokenize: object) -> None:
    """Raise :class:`~dpsql.errors.UnsupportedQueryError` where ``sql`` has a list after
    ``IN`` (``x IN [a, b]``) or the operator ``<=>`` (module docstring); ``tokenize``:
    the planner's DuckDB tokenizer's ``tokenize``."""
    if "[" not in sql and "<=>" not in sql:
        return
    try:
        tokens: list[Token] = list(tokenize(sql))  # type: ignore[operator]
    except TokenError:
        return
    for t in tokens:
        if t.token_type == TokenType.NULLSAFE_EQ:
            line, col = _start_of(sql, t)
            raise UnsupportedQueryError(
                f"the operator <=> (line {line}, column {col}) is not DuckDB's (\"No "
                "function matches the given name and argument types '<=>'\"), nor "
                "PostgreSQL's: write x IS NOT DISTINCT FROM y")
    for i, (t, after) in enumerate(zip(tokens, tokens[1:])):
        if t.token_type == TokenType.IN and after.token_type == TokenType.L_BRACKET \
                and not _numbers_only(tokens, i + 2):
            line, col = _start_of(sql, after)
            raise UnsupportedQueryError(
                f"x IN [a, b] (a list after IN, line {line}, column {col}) is not supported: "
                "in DuckDB it is list membership, list_contains([a, b], x), which skips the "
                "NULLs in the list (2 NOT IN [1, NULL] is true, where 2 NOT IN (1, NULL) is "
                "NULL), and the planner would read it as x IN (a, b); write x IN (a, b) for "
                "SQL's IN, or x = ANY ([a, b]) of the values that are not NULL")


def refuse_list_membership(node: exp.In) -> None:
    """Raise :class:`~dpsql.errors.UnsupportedQueryError` for ``x IN <a list
    expression>``: a list parameter after IN (``x IN ?`` bound to ``[1, 2]``, psycopg's
    ``x IN %s`` with a Python list), ``x IN list_value(1, 2)``, ``x IN range(1, 3)``.
    sqlglot keeps the list as the IN's ``field``, not as its values, and DuckDB reads it
    as list membership (NULLs in the list skipped: ``NULL NOT IN []`` is true), so the
    planner would value the IN as one with no values (``k IN ?`` with ``[1, 2]`` answered
    0 rows where DuckDB keeps 743). PostgreSQL has no such form (``x IN $1`` is a syntax
    error there)."""
    field = node.args.get("field")
    if field is not None:
        raise UnsupportedQueryError(
            f"IN {field.sql('duckdb')} on {node.this.sql('duckdb')} (a list after IN, not "
            "a parenthesised list of values) is not supported: DuckDB reads it as list "
            "membership, which skips the NULLs in the list; write x = ANY (?) for a list "
            "parameter or list, or x IN (a, b)")


_NUMBER_LIST = frozenset((TokenType.NUMBER, TokenType.COMMA, TokenType.DASH))


def _numbers_only(tokens: list[Token], start: int) -> bool:
    """Whether the list that starts at ``tokens[start]`` holds numbers only (``[1, -2,
    3.5]``), at least one: there ``x IN [...]`` is ``x IN (...)`` (no NULL to skip, no
    string that the list's type would cast)."""
    seen = False
    for t in tokens[start:]:
        if t.token_type == TokenType.R_BRACKET:
            return seen
        if t.token_type not in _NUMBER_LIST:
            return False
        seen = seen or t.token_type == TokenType.NUMBER
    return False


def _error(sql: str, token: Token, why: str) -> SqlSyntaxError:
    line, col = _start_of(sql, token)
    return SqlSyntaxError(f"syntax error at line {line}, column {col} near {token.text!r}: "
                          f"{why}", line, col, token.text)


__all__ = ["refuse_list_membership", "refuse_misread_operators", "refuse_loose_syntax"]
