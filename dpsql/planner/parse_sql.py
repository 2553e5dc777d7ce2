"""Pass 1: parse the analyst's SQL (DuckDB dialect); its parameters are bound by
:mod:`dpsql.planner.bind_params`.

Syntax errors become :class:`dpsql.SqlSyntaxError` with the line and column of the word
to blame (:mod:`dpsql.planner._syntax_error`). Only queries (SELECT, set operations,
VALUES, DuckDB's PIVOT/UNPIVOT statements, with CTEs) are accepted; anything
that writes or changes the catalog is refused here, before planning. Parameters (qmark
``?`` and DuckDB's ``$1``) are replaced by AST literals *before* any analysis, so a
parameter value can never change the query's shape: it is always one literal.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
from sqlglot.helper import name_sequence
from sqlglot.tokens import TokenType

from dpsql.errors import SqlSyntaxError, UnsupportedQueryError
from dpsql.planner._sqlglot_compat import (quiet_fallback, refuse_regexp_tilde,
                                           wrap_grouping_items)
from dpsql.planner._syntax_error import syntax_error
from dpsql.planner.refuse_file_reads import reads_outside
from dpsql.planner.refuse_loose_syntax import refuse_misread_operators, refuse_loose_syntax

DIALECT = "duckdb"
_DUCKDB = Dialect.get_or_raise(DIALECT)  # looked up once, not per query
QMARK = "dpsql_qmark_"  # '?' number k is parsed as the placeholder $dpsql_qmark_k

_QUERY_TYPES = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values, exp.Pivot)
_WRITE_TYPES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter,
                exp.Merge, exp.Command)


class _Parsers(threading.local):
    """One sqlglot tokenizer, parser and generator per thread, built once instead of per
    query. ``Dialect.parse`` builds a tokenizer and a parser on every call (~15 µs of the
    compiled parse's ~45) and ``Dialect.generate`` a generator (its ``__init__`` reads a
    dozen dialect settings: ~2 µs in a tight loop, ~20 µs right after DuckDB has run a
    query). All three reset their per-call state at the start of every ``tokenize``/
    ``parse``/``generate``, except the generator's sequence of made-up alias names
    (``_t0``, ``_t1``…), which :meth:`generate` restarts so that the SQL of a query never
    depends on the queries planned before it. None of them is shared across threads.

    The generator raises where sqlglot cannot write a node in DuckDB's SQL instead of
    logging a warning and dropping part of it: ``to_char(d, 'YYYY-MM')`` (PostgreSQL's,
    which Looker and Metabase send) parses to sqlglot's ``ToChar``, whose DuckDB form
    dropped the format and ran ``CAST(d AS TEXT)``: a month's labels came out as
    ``'2013-01-01 00:00:00'`` instead of ``'2013-01'``, silently. Such a query is
    refused (:func:`generate_sql`)."""

    def __init__(self) -> None:
        self.tokenizer = _DUCKDB.tokenizer()
        self.parser = _DUCKDB.parser()
        self.generator = _DUCKDB.generator(unsupported_level=ErrorLevel.RAISE)

    def parse(self, sql: str) -> list:
        with quiet_fallback():  # dpsql refuses a Command itself (parse_walked)
            trees = self.parser.parse(wrap_grouping_items(self.tokenizer.tokenize(sql)), sql)
        for t in trees:  # the text its nodes' positions point into (written_call)
            if t is not None:
                t.meta["sql"] = sql
        return trees

    def generate(self, tree: exp.Expression) -> str:
        """``tree`` as DuckDB SQL, without copying it (it is the planner's own parse)."""
        self.generator._next_name = name_sequence("_t")
        return self.generator.generate(tree, copy=False)


_PARSERS = _Parsers()


@dataclass(slots=True)
class Scope:
    """The nodes of one SELECT itself, not of the queries nested in it (subqueries, CTE
    bodies, set operations): its columns, with the argument of the SELECT each is under
    (``"expressions"``, ``"where"``, ``"group"``...), and its aggregate and anonymous
    function calls (the only nodes an aggregate can be)."""

    columns: list[exp.Column] = field(default_factory=list)
    column_args: list[str] = field(default_factory=list)
    calls: list[exp.Expression] = field(default_factory=list)
    stars: list[exp.Expression] = field(default_factory=list)
    """Its star expressions: ``*`` (with EXCLUDE, REPLACE...; in ``COUNT(*)`` too) and
    ``COLUMNS(...)`` (a ``t.*`` column is among ``columns``)."""
    nested: bool = False  # the SELECT has a WITH or a nested query (not in these lists)


@dataclass(slots=True)
class Walked:
    """The nodes of a parsed tree of the kinds the later passes look for, sorted out in
    the one walk that :func:`walk_tree` makes, so that no pass walks the tree again.
    SELECTs come outermost first, each followed by the ones nested in it, in the order
    of the text; ``scopes`` maps ``id(select)`` to its :class:`Scope`."""

    selects: list[exp.Select] = field(default_factory=list)
    tables: list[exp.Table] = field(default_factory=list)
    ctes: list[exp.CTE] = field(default_factory=list)
    placeholders: list[exp.Placeholder] = field(default_factory=list)
    scopes: dict[int, Scope] = field(default_factory=dict)
    reads: list[exp.Expression] = field(default_factory=list)
    """Calls that belong to no scope, and calls of sqlglot's typed file readers
    (``ReadCSV``...): with the scopes' calls, every call :mod:`refuse_file_reads` checks."""


# node kinds, answered once per node class; the order matters: kinds >= _SELECT start a
# new scope, kinds >= _WRITE are refused. _SKIP: not a node (a string or flag in a list
# argument), which :func:`walk_tree` passes over as ``iter_expressions`` would.
(_OTHER, _SKIP, _COLUMN, _CALL, _LEAF, _TABLE, _CTE, _PLACEHOLDER, _READ, _STAR, _SELECT,
 _NESTED, _WRITE, _INTO) = range(14)
_NESTED_TYPES = (exp.Subquery, exp.Union, exp.Intersect, exp.Except)
_EXPR = getattr(exp, "Expr", exp.Expression)  # every node's base: Expr in sqlglot 30+
_LEAVES = (exp.Identifier, exp.Literal)  # their only expression-like arg, ``this``, is text
_COLUMN_PARTS = (exp.Identifier, exp.Star)  # a column whose name is these has no other nodes


def _kind(cls: type) -> int:
    return (_SKIP if not issubclass(cls, _EXPR) else
            _WRITE if issubclass(cls, _WRITE_TYPES) else
            _INTO if issubclass(cls, exp.Into) else
            _SELECT if issubclass(cls, exp.Select) else
            _NESTED if issubclass(cls, _NESTED_TYPES) else
            _COLUMN if issubclass(cls, exp.Column) else
            _CALL if issubclass(cls, (exp.AggFunc, exp.Anonymous)) else
            _STAR if issubclass(cls, (exp.Star, exp.Columns)) else
            _READ if issubclass(cls, exp.Func) and _typed_reader(cls) else
            _TABLE if issubclass(cls, exp.Table) else
            _CTE if issubclass(cls, exp.CTE) else
            _PLACEHOLDER if issubclass(cls, exp.Placeholder) else
            _LEAF if cls in _LEAVES else _OTHER)


def _typed_reader(cls: type) -> bool:
    """Whether a typed sqlglot function (``ReadCSV``, ``ReadParquet``...) is one that
    :mod:`~dpsql.planner.refuse_file_reads` refuses on a locked connection."""
    try:
        names = cls.sql_names()
    except Exception:  # noqa: BLE001  (an abstract class without a name)
        return False
    return any(reads_outside(n) for n in names)


class _Kinds(dict):
    """Node class -> kind, each class sorted out on first sight."""

    def __missing__(self, cls: type) -> int:
        kind = self[cls] = _kind(cls)
        return kind


_KINDS = _Kinds()


def walk_tree(tree: exp.Expression) -> Walked:
    """Sort the nodes of ``tree`` out by kind and by SELECT scope in one depth-first
    walk, and refuse writes (INSERT, ``SELECT ... INTO``...) anywhere in it.

    The walk runs scope by scope: a SELECT's arguments are walked with that SELECT as
    their scope (its WITH with none: CTE bodies are their own SELECTs), and a SELECT or
    set operation met inside a scope marks that scope ``nested`` and is walked later as
    a root of its own. Nodes outside every SELECT (a UNION's ORDER BY, a subquery's
    alias) belong to no scope. The children of a node are read from its ``args`` here,
    in ``iter_expressions``' order (a generator per node cost a fifth of the walk)."""
    walked = Walked()
    selects, tables, ctes, holders, scopes = (walked.selects, walked.tables, walked.ctes,
                                              walked.placeholders, walked.scopes)
    kinds = _KINDS
    Expr = _EXPR
    work: list[tuple[exp.Expression, Scope | None, str]] = [(tree, None, "")]
    while work:
        root, scope, arg = work.pop()
        stack = [root]
        while stack:
            node = stack.pop()
            kind = kinds[type(node)]
            if kind == _OTHER:
                pass
            elif kind == _LEAF:
                if type(node.this) is str:
                    continue  # no expression below: nothing to collect, no walk to start
            elif kind == _COLUMN:
                if scope is not None:
                    scope.columns.append(node)
                    scope.column_args.append(arg)
                if type(node.this) in _COLUMN_PARTS:
                    continue  # below are only its name parts: identifiers (or a star)
            elif kind == _SKIP:
                continue
            elif kind == _CALL:
                if scope is not None:
                    scope.calls.append(node)
                else:
                    walked.reads.append(node)
            elif kind == _READ:
                walked.reads.append(node)
            elif kind == _STAR:
                if scope is not None:
                    scope.stars.append(node)
            elif kind >= _SELECT:
                if kind >= _WRITE:
                    _refuse_writes((node,))
                if scope is not None:
                    scope.nested = True
                if node is not root or scope is not None:
                    work.append((node, None, ""))  # its own root, after this one
                    continue
                if kind == _SELECT:
                    own = scopes[id(node)] = Scope()
                    selects.append(node)
                    later = []
                    first = None
                    for key, value in node.args.items():
                        if value is None:
                            continue
                        if type(value) is list:
                            for v in value:
                                if isinstance(v, Expr):
                                    later.append((v, own, key))
                        elif key == "with_" or key == "with":  # sqlglot 30 names it with_
                            own.nested = True
                            first = (value, None, "")  # first, as in the text
                        elif isinstance(value, Expr):
                            later.append((value, own, key))
                    later.reverse()  # popped in the order of the text
                    work += later
                    if first is not None:
                        work.append(first)
                    continue
            elif kind == _TABLE:
                tables.append(node)
            elif kind == _CTE:
                ctes.append(node)
            else:  # _PLACEHOLDER
                holders.append(node)
            for value in node.args.values():  # iter_expressions, without its generator
                if type(value) is list:
                    stack += value  # anything but a node is skipped when popped
                elif isinstance(value, Expr):
                    stack.append(value)
    return walked


def columns_below(node: exp.Expression) -> tuple[list[exp.Column], bool]:
    """The columns in the subtree of ``node`` (``node`` itself if it is one), and whether
    an OR is in it: what ``find_all(exp.Column, exp.Or)`` finds, in a walk like
    :func:`walk_tree`'s (a few nodes in a WHERE conjunct or an aggregate call: a
    generator per node was most of the cost)."""
    columns: list[exp.Column] = []
    has_or = False
    kinds = _KINDS
    Expr = _EXPR
    stack = [node]
    while stack:
        node = stack.pop()
        kind = kinds[type(node)]
        if kind == _COLUMN:
            columns.append(node)
            if type(node.this) in _COLUMN_PARTS:
                continue
        elif kind == _LEAF:
            if type(node.this) is str:
                continue
        elif kind == _SKIP:
            continue
        elif not has_or and isinstance(node, exp.Or):
            has_or = True
        for value in node.args.values():
            if type(value) is list:
                stack += value
            elif isinstance(value, Expr):
                stack.append(value)
    return columns, has_or


def generate_sql(tree: exp.Expression) -> str:
    """Render a (rewritten) tree as DuckDB SQL with this thread's generator; refuse a
    tree that DuckDB's SQL cannot say as parsed (sqlglot would drop a part of it)."""
    try:
        return _PARSERS.generate(tree)
    except UnsupportedError as err:
        raise not_expressible(tree, err) from None


def not_expressible(tree: exp.Expression, err: UnsupportedError) -> UnsupportedQueryError:
    """The refusal of a query that sqlglot cannot write as DuckDB SQL without losing a
    part of it (``err`` says which), naming the call where it is one we know."""
    refuse_to_char(tree)  # the server's rewrite of "public"."t" generates before parsing
    return UnsupportedQueryError(f"this query cannot be run as written in DuckDB's SQL "
                                 f"without losing a part of it: {str(err).rstrip('.')}")


def refuse_to_char(tree: exp.Expression) -> None:
    """Refuse PostgreSQL's ``to_char(value, format)``, which Looker and Metabase send:
    sqlglot parses it to ``ToChar``, which DuckDB's SQL writes as a cast to text without
    the format, and which a pass would otherwise read (and name in its refusals) as that
    cast. The message shows the format only and says what to write."""
    call = next((c for c in tree.find_all(exp.ToChar) if c.args.get("format") is not None),
                None)
    if call is not None:
        raise UnsupportedQueryError(
            f"to_char(..., {call.args['format'].sql(DIALECT)}) is PostgreSQL's to_char, "
            "which DuckDB does not have (it would run without its format, as a cast to "
            "text): write strftime(<value>, '<format>') with DuckDB's format codes, e.g. "
            "strftime(date_trunc('month', d), '%Y-%m') for 'YYYY-MM'")


def parse_sql(sql: str) -> exp.Expression:
    """Parse one statement; refuse several statements and anything but a query."""
    return parse_walked(sql)[0]


def parse_walked(sql: str) -> tuple[exp.Expression, Walked]:
    """:func:`parse_sql`, plus its nodes sorted out by :func:`walk_tree` (one walk, which
    the later passes reuse instead of walking the tree again)."""
    if not isinstance(sql, str) or not sql.strip():
        raise SqlSyntaxError("empty query: write a SELECT statement", 1, 1, "")
    try:
        try:
            text = _number_qmarks(sql) if "?" in sql else sql  # tokenize once if no '?'
            trees = [t for t in _PARSERS.parse(text) if t is not None]
        except ParseError:
            trees = [t for t in _PARSERS.parse(sql) if t is not None]
    except ParseError as err:
        word = _first_word(sql)
        if word in _NOT_QUERIES:  # EXPORT DATABASE 'x', which sqlglot cannot parse
            raise not_a_query(word) from None
        sql, trees = _pivot_with_tail(sql, err)
    except TokenError as err:
        raise SqlSyntaxError(f"syntax error: {err}") from err
    refuse_regexp_tilde(sql, _PARSERS.tokenizer.tokenize)
    if len(trees) != 1:
        raise UnsupportedQueryError(
            f"{len(trees)} statements given; run one SELECT statement at a time")
    tree = trees[0]
    if isinstance(tree, exp.Subquery) and set(k for k, v in tree.args.items() if v) <= \
            _OUTSIDE_CLAUSES:
        tree = _select_from(tree)
    if not isinstance(tree, _QUERY_TYPES):
        what = _first_word(sql)
        if isinstance(tree, exp.Column) and what not in _NOT_QUERIES:  # VALUES, TABLE
            raise UnsupportedQueryError(
                f"{sql.strip().rstrip(';').strip()!r} is not a query: write one SELECT "
                "statement (SELECT ... FROM <release> ... GROUP BY ...)")
        if what not in _NOT_QUERIES:  # WITH ... INSERT: the statement's own kind
            what = str(tree.this).upper() if isinstance(tree, exp.Command) else \
                type(tree).__name__.upper()
        raise not_a_query(what)
    refuse_loose_syntax(sql, tree, _PARSERS.tokenizer.tokenize)
    refuse_misread_operators(sql, _PARSERS.tokenizer.tokenize)
    if _LEADING_DOT.search(sql):
        keep_leading_dots(tree, sql)
    if "to_char" in sql.lower():  # before any pass reads the call as a cast to text
        refuse_to_char(tree)
    walked = walk_tree(tree)
    return tree, walked


_LEADING_DOT = re.compile(r"(?<![0-9])[.][0-9]")  # cheap test before the exact one


def keep_leading_dots(tree: exp.Expression, sql: str) -> None:
    """Give each number written with a leading point (``.5``) its text back, in place.

    sqlglot parses ``.5`` as the literal ``0.5``, one digit more than written, and DuckDB
    keeps a literal of up to 38 digits as an exact DECIMAL and reads one of more as a
    DOUBLE: ``.12345678901234567890123456789012345678`` is the exact DECIMAL(38,38)
    but ``0.12345678901234567890123456789012345678`` the DOUBLE 0.12345678901234568. The
    literal sqlglot makes up is the one without a position in the text (a written
    ``0.5`` has one), and the tokens hold a point followed at once by its digits.

    >>> tree = _PARSERS.parse("SELECT .5, 0.5, x.y FROM t")[0]
    >>> keep_leading_dots(tree, "SELECT .5, 0.5, x.y FROM t"); tree.sql("duckdb")
    'SELECT .5, 0.5, x.y FROM t'
    """
    tokens = _PARSERS.tokenizer.tokenize(sql)
    written = {"0." + b.text for a, b in zip(tokens, tokens[1:])
               if a.token_type == TokenType.DOT and b.token_type == TokenType.NUMBER
               and b.start == a.end + 1}
    for lit in tree.find_all(exp.Literal):
        if not lit.is_string and lit.this in written and "start" not in lit.meta:
            lit.set("this", lit.this[1:])


# DuckDB statements that are not queries, named by their first word in the refusal
# (sqlglot reads CHECKPOINT as a column and cannot parse EXPORT/IMPORT DATABASE)
_NOT_QUERIES = frozenset(
    "ABORT ALTER ANALYZE ATTACH BEGIN CALL CHECKPOINT COMMENT COMMIT COPY CREATE "
    "DEALLOCATE DELETE DETACH DROP END EXECUTE EXPLAIN EXPORT FORCE GRANT IMPORT INSERT "
    "INSTALL LOAD MERGE PRAGMA PREPARE RESET REVOKE ROLLBACK SET SHOW START TRUNCATE "
    "UPDATE USE VACUUM".split())


def _pivot_with_tail(sql: str, err: ParseError) -> tuple[str, list]:
    """DuckDB's PIVOT and UNPIVOT statements end with optional ``ORDER BY`` and
    ``LIMIT``/``OFFSET`` clauses (``PIVOT (...) ON sex USING SUM(n) GROUP BY state ORDER BY
    state``), may follow a ``WITH`` list and may stand in parentheses with those clauses
    outside (``(PIVOT ...) ORDER BY state``); sqlglot parses none of these forms. Each is
    the same query as the pivot in a subquery with the clauses outside it, ``SELECT *
    FROM (PIVOT ...) ORDER BY state`` (:func:`_pivot_as_select`): that text and its trees.
    Otherwise, or when sqlglot cannot parse that either, ``err`` as a syntax error, which
    for a pivot form names the spelling that works. Parameters keep their text order."""
    try:
        tokens = _PARSERS.tokenizer.tokenize(sql)
    except TokenError:
        tokens = []
    wrapped = _pivot_as_select(sql, tokens, 0, len(tokens)) if tokens else None
    if wrapped is None:
        raise syntax_error(sql, err, _PARSERS.tokenizer.tokenize) from err
    text = _number_qmarks(wrapped) if "?" in wrapped else wrapped
    try:
        return wrapped, [t for t in _PARSERS.parse(text) if t is not None]
    except (ParseError, TokenError):
        pass
    found = syntax_error(sql, err, _PARSERS.tokenizer.tokenize)
    raise SqlSyntaxError(
        f"{found}; a PIVOT or UNPIVOT statement after WITH, in parentheses or with ORDER "
        "BY / LIMIT is read as SELECT * FROM (PIVOT ...) ORDER BY ... LIMIT ..., which "
        "did not parse either: write the pivot in that form, or check it on its own",
        found.line, found.col, found.highlight) from err


_WITH = "with_" if "with_" in exp.Select.arg_types else "with"  # sqlglot 30 / 28
_OUTSIDE_CLAUSES = {"this", _WITH, "order", "limit", "offset"}


def _select_from(tree: exp.Subquery) -> exp.Select:
    """A query in parentheses with clauses outside them, ``(SELECT ...) ORDER BY k LIMIT
    2`` (which DuckDB runs; sqlglot reads it as a bare subquery, which was refused as
    "SUBQUERY statements are not supported"), as ``SELECT * FROM (SELECT ...) ORDER BY k
    LIMIT 2``, the same query; a ``WITH`` before the parentheses stays in front.

    >>> _select_from(_PARSERS.parse("(SELECT 1 AS k) ORDER BY k")[0]).sql("duckdb")
    'SELECT * FROM (SELECT 1 AS k) ORDER BY k'
    """
    out = exp.Select(expressions=[exp.Star()]).from_(exp.Subquery(this=tree.this),
                                                     copy=False)
    for key in (_WITH, "order", "limit", "offset"):
        if tree.args.get(key) is not None:
            out.set(key, tree.args[key])
    return out


_PIVOTS = (TokenType.PIVOT, TokenType.UNPIVOT)
_TAIL = (TokenType.ORDER_BY, TokenType.LIMIT, TokenType.OFFSET)


def _pivot_as_select(sql: str, tokens: list, i: int, j: int) -> str | None:
    """The statement of ``tokens[i:j]`` with its PIVOT or UNPIVOT written as a
    subquery, or None when it is no pivot form: ``[WITH ...] PIVOT ... [ORDER BY ...]
    [LIMIT ...]`` is ``[WITH ...] SELECT * FROM (PIVOT ...) [ORDER BY ...] [LIMIT
    ...]`` (the clauses cut at the first ``ORDER BY``, ``LIMIT`` or ``OFFSET`` outside
    parentheses), and ``[WITH ...] (<a pivot form>) <clauses>`` is ``[WITH ...] SELECT
    * FROM (<that form, rewritten>) <clauses>``.

    >>> q = "WITH c AS (SELECT 1 AS k) (PIVOT c ON k IN (1)) ORDER BY 1"
    >>> t = _PARSERS.tokenizer.tokenize(q)
    >>> _pivot_as_select(q, t, 0, len(t))
    'WITH c AS (SELECT 1 AS k) SELECT * FROM (SELECT * FROM (PIVOT c ON k IN (1))) ORDER BY 1'
    """
    def text(a: int, b: int) -> str:
        return sql[tokens[a].start:tokens[b - 1].end + 1] if b > a else ""

    k = i
    if k < j and tokens[k].token_type == TokenType.WITH:  # the main statement's start
        depth, k = 0, k + 1
        while k < j:
            kind = tokens[k].token_type
            depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
            k += 1
            if depth == 0 and kind == TokenType.R_PAREN and k < j and \
                    tokens[k].token_type not in (TokenType.COMMA, TokenType.ALIAS):
                break
    if k >= j:
        return None
    head = f"{text(i, k)} " if k > i else ""
    if tokens[k].token_type in _PIVOTS:
        depth = 0
        for m in range(k, j):
            kind = tokens[m].token_type
            depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
            if depth == 0 and kind in _TAIL:
                return f"{head}SELECT * FROM ({text(k, m)}) {text(m, j)}"
        return f"{head}SELECT * FROM ({text(k, j)})"
    if tokens[k].token_type != TokenType.L_PAREN:
        return None
    depth = 0
    for close in range(k, j):
        kind = tokens[close].token_type
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if depth == 0:
            break
    else:
        return None
    inner = _pivot_as_select(sql, tokens, k + 1, close)
    if inner is None:
        return None
    tail = text(close + 1, j)
    return f"{head}SELECT * FROM ({inner}){' ' + tail if tail else ''}"


def _first_word(sql: str) -> str:
    try:
        tokens = _PARSERS.tokenizer.tokenize(sql)
    except TokenError:
        return ""
    return tokens[0].text.upper() if tokens else ""


_READS = frozenset("DESCRIBE EXPLAIN SHOW SUMMARIZE".split())
"""Statements that would only read: refused because a release answers SELECTs only (a
plan or a summary would describe the private rows), not because it is read-only."""


def not_a_query(what: str) -> UnsupportedQueryError:
    """The refusal of a statement that is not a query (``what``: its first word), the
    same at every entry point (``dpsql serve``'s guard raises it too)."""
    why = ("a release answers" if what in _READS else
           "a release is read-only and answers")
    err = UnsupportedQueryError(
        f"{what} statements are not supported: {why} SELECT queries only (write "
        "SELECT ... FROM <release> ... GROUP BY ...; the tables and columns are in "
        "information_schema)")
    err.hint = ""  # the message says what to write: no hint (dpsql serve's ErrorResponse)
    return err


def _number_qmarks(sql: str) -> str:
    """Write the k-th ``?`` of the text as ``$dpsql_qmark_k``. qmark parameters bind in
    text order, but no sqlglot tree walk visits nodes in text order (BFS reaches
    ``LIMIT ?`` before a ``WHERE ... ?``, DFS reaches a CTE last), so the order is taken
    from the tokens (which skip strings and comments). A syntax error is reported on
    the original text (parse_sql re-parses it), so its line and column are the user's."""
    try:
        tokens = _PARSERS.tokenizer.tokenize(sql)
    except TokenError:
        return sql
    # sqlglot reads ``?::`` as one token (QDCOLON, another dialect's TRY_CAST operator);
    # in DuckDB it is a parameter with a cast: ``?::INT``
    marks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"
             or t.token_type == TokenType.QDCOLON]
    for k, t in reversed(list(enumerate(marks))):
        end = t.start if t.token_type == TokenType.QDCOLON else t.end  # the '?' only
        sql = f"{sql[:t.start]}${QMARK}{k} {sql[end + 1:]}"  # ' ': `?AND` stays 2 tokens
    return sql


def _refuse_writes(nodes: Sequence[exp.Expression]) -> None:
    for node in nodes:
        if isinstance(node, _WRITE_TYPES):
            raise UnsupportedQueryError(
                f"{type(node).__name__.upper()} inside a query is not supported: a release "
                "is read-only; write a plain SELECT")
        if isinstance(node, exp.Into):
            raise UnsupportedQueryError(
                "SELECT ... INTO is not supported: a release is read-only; write a plain "
                "SELECT and store the result yourself")
