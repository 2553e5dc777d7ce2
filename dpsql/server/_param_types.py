"""The types of a statement's parameters that its client left open (Parse with type OID
0), inferred from where each ``$n`` stands, as PostgreSQL infers them for its
ParameterDescription: ``age > $1`` takes ``age``'s type (int8), ``region IN ($1, $2)``
``region``'s, ``distance BETWEEN $1 AND $2`` ``distance``'s, ``region = ANY($1)`` an
array of it, ``$1::int`` the cast's, ``LIMIT $1``/``OFFSET $1`` int8, ``HAVING COUNT(*) >
$1`` int8, ``date_trunc('month', ts) >= $1`` a timestamp column's.

Clients that prepare first and then encode each value by the type the server described
(asyncpg; pgjdbc for a ``setObject`` without a type) were told ``text`` for every
parameter: asyncpg then refused a Python ``int`` for ``age > $1`` ("expected str, got
int"). A parameter whose place says nothing of its type stays ``text``; a value sent in
text is still read as the literal it spells (:func:`dpsql.server._guard.spelled`), so
the inference only changes what Describe says and how a *binary* value of an open type
is decoded (a client sends binary only for the type it was told)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import sqlglot
from sqlglot import exp

from dpsql.planner._sqlglot_compat import parse_duckdb
from dpsql.server._route import _NOT_CODE
from dpsql.server._types import pg_type

TEXT = 25
INT8 = 20
_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
            exp.NullSafeNEQ, exp.Like, exp.ILike, exp.Add, exp.Sub, exp.Mul, exp.Div)


def infer_param_types(sql: str, tables: Mapping[str, Sequence[tuple[str, str]]]
                      ) -> dict[int, int]:
    """``{n: type OID}`` for the ``$n`` of ``sql`` whose place gives a type; ``tables``:
    the logical tables' columns and DuckDB types (:attr:`CatalogDatabase.tables`). Text
    sqlglot cannot parse gives nothing (Describe then says ``text``)."""
    try:
        trees = [t for t in parse_duckdb(sql) if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError):
        return {}
    if len(trees) != 1:
        return {}
    tree = trees[0]
    columns: dict[str, set[str]] = {}  # column name -> its DuckDB types in the tables read
    for table in tree.find_all(exp.Table):
        for name, dtype in tables.get(table.name.lower(), ()):
            columns.setdefault(name.lower(), set()).add(dtype)
    found: dict[int, int] = {}
    for holder in tree.find_all(exp.Placeholder):
        n = str(holder.this or "")
        if not n.isdigit():
            continue
        oid = _type_at(holder, columns)
        if oid is not None:
            found.setdefault(int(n), oid)
    return found


def _type_at(holder: exp.Expression, columns: dict[str, set[str]]) -> int | None:
    node, parent = holder, holder.parent
    while isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    if isinstance(parent, exp.Cast):
        return _oid(parent.to.sql(dialect="duckdb"))
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return INT8
    array = isinstance(parent, (exp.Any, exp.All)) or (  # ALL ($1), SOME ($1): a call
        isinstance(parent, exp.Anonymous) and parent.name.upper() in ("ALL", "SOME"))
    if array:
        node, parent = parent, parent.parent
    if isinstance(parent, _COMPARE):
        other = parent.expression if node is parent.this else parent.this
    elif isinstance(parent, exp.Between) and node is not parent.this:
        other = parent.this
    elif isinstance(parent, exp.In) and node is not parent.this:
        other = parent.this
    else:
        return None
    dtype = _duck_type(other, columns)
    if dtype is None:
        return None
    return _oid(dtype + "[]" if array else dtype)


def _duck_type(node: exp.Expression, columns: dict[str, set[str]]) -> str | None:
    """The DuckDB type of the other side of a comparison, when it is plain: a column of
    one type in the tables read, a cast, or a literal; or, as PostgreSQL 15 types them,
    ``COUNT(...)`` (bigint: ``HAVING COUNT(*) > $1``), ``EXTRACT`` (numeric) and
    ``date_trunc(unit, <timestamp>)`` (timestamp). ``date_trunc`` of a date is
    ``timestamptz`` in PostgreSQL, which this server does not take: it stays text."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Count):
        return "BIGINT"
    if isinstance(node, exp.Extract):
        return "DECIMAL"
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        inner = _duck_type(node.this, columns)
        return inner if inner is not None and inner.upper() == "TIMESTAMP" else None
    if isinstance(node, exp.Column):
        types = columns.get(node.name.lower(), set())
        return next(iter(types)) if len(types) == 1 else None
    if isinstance(node, exp.Cast):
        return node.to.sql(dialect="duckdb")
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "VARCHAR"
        return "BIGINT" if node.this.lstrip("-").isdigit() else "DECIMAL"
    return None


_OWN = {"OID": 26, "OID[]": 1028, "NAME": 19}
"""PostgreSQL types DuckDB has no name for (asyncpg's type introspection binds
``$1::oid[]``)."""


def _oid(duck_type: str) -> int | None:
    if duck_type.upper().replace(" ", "") in _OWN:
        return _OWN[duck_type.upper().replace(" ", "")]
    if duck_type.upper().startswith("INT") and not duck_type[3:4].isalnum():
        duck_type = "INTEGER" + duck_type[3:]  # sqlglot writes DuckDB's INTEGER so
    return pg_type(duck_type)[0] or None


def parameter_count(sql: str, oids: Sequence[int]) -> int:
    """The parameters of a statement: the types its Parse declared, or its highest
    ``$n`` outside strings and comments if that is more (PostgreSQL's count)."""
    code = _NOT_CODE.sub("", sql)
    return max([len(oids)] + [int(k) for k in re.findall(r"\$(\d+)", code)])


def parameter_types(sql: str, oids: Sequence[int],
                    tables: Mapping[str, Sequence[tuple[str, str]]]) -> list[int]:
    """The type OID of every parameter of ``sql`` (:func:`parameter_count` of them): the
    one its Parse declared, else as inferred from its place (:func:`infer_param_types`),
    else 0 (open: described as text)."""
    oids = list(oids) + [0] * (parameter_count(sql, oids) - len(oids))
    return open_types(sql, oids, tables)


def open_types(sql: str, oids: Sequence[int],
               tables: Mapping[str, Sequence[tuple[str, str]]]) -> list[int]:
    """``oids`` with each open (0) type as inferred from the statement (0 when its place
    says nothing: :func:`infer_param_types`)."""
    if all(oids):
        return list(oids)
    inferred = infer_param_types(sql, tables)
    return [oid or inferred.get(i + 1, 0) for i, oid in enumerate(oids)]


__all__ = ["TEXT", "infer_param_types", "open_types", "parameter_count", "parameter_types"]
