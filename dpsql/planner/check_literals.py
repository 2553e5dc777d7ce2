"""Pass 2b: notices for literals outside a categorical attribute's public domain.

``WHERE race = 'black'`` where the public domain holds ``'Black'`` is correct SQL whose
answer is 0: no released node carries that label. The answer stays, but the analyst is
told, with the closest public values (a case-insensitive match first, then the closest
spellings, :func:`difflib.get_close_matches`; for an integer column, the nearest
integers). The pass looks at the comparisons
``=``, ``<>``/``!=``, ``IN`` and ``NOT IN`` between a label column of a private table
reference (the release's or a view's) and string literals, in its WHERE and HAVING.
The domains are public (declared in the spec, stored in the release), so the notice
tells nothing about the data. Each entry point shows the notices: ``cursor.messages``
and a :class:`PublicDomainWarning` in process, a NoticeResponse from ``dpsql serve``, a
line on stderr from ``dpsql query``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from fractions import Fraction

from sqlglot import exp

from dpsql.errors import DataError
from dpsql.planner.find_references import Reference

MAX_SHOWN = 3


def domain_notices(refs: Sequence[Reference]) -> tuple[str, ...]:
    """One notice per (column, literal) outside the column's public domain: string
    literals against text label columns, and numbers (or their text) against integer
    label columns. A string literal that is not an integer, compared with an integer
    label column, is refused (:class:`~dpsql.errors.DataError`, as PostgreSQL refuses
    it): ``precinct = '3'`` is ``precinct = 3``, but DuckDB would fail on ``'abc'`` with
    its planned SQL and round ``'3.5'`` to 4."""
    out: list[str] = []
    for ref in refs:
        texts, integers = ref.release.domain_values, ref.release.integer_values
        if not texts and not integers:
            continue
        for arg in ("where", "having"):
            clause = ref.select.args.get(arg)
            if clause is None:
                continue
            for node in clause.find_all(exp.EQ, exp.NEQ, exp.In):
                for col, lit in _pairs(node):
                    if col.table and col.table.lower() != ref.alias.lower():
                        continue
                    name = ref.release.column_name(col.name)
                    if name in integers:
                        text = _integer_notice(name, lit, integers[name])
                    elif name in texts and lit.is_string and lit.this not in texts[name]:
                        text = _notice(name, lit.this, texts[name])
                    else:
                        continue
                    if text and text not in out:
                        out.append(text)
    return tuple(out)


def _integer_notice(column: str, lit: exp.Literal, domain: frozenset[int]) -> str | None:
    """The notice for a number outside an integer column's domain (closest: the nearest
    values); None inside it. Refuses a string that is not an integer."""
    try:  # exactly: '3.0000000000000000001' is no integer (its float is 3.0)
        value: Fraction | float = Fraction(lit.this.strip())
    except (ValueError, ZeroDivisionError):
        value = math.nan
    whole = isinstance(value, Fraction) and value.denominator == 1
    if lit.is_string and not whole:
        raise DataError(f"{lit.this!r} is not an integer, and {column!r} is an integer "
                        f"column (BIGINT); compare it with an integer, e.g. {column} = 3 "
                        f"or {column} IN (1, 2)")
    if whole and int(value) in domain:
        return None
    close = sorted(sorted(domain, key=lambda v: (abs(v - value), v))[:MAX_SHOWN])
    shown = repr(lit.this) if lit.is_string else lit.this
    return (f"{shown} is not a value of {column!r} (its public domain has {len(domain):,} "
            f"values), so no released row matches it; closest: "
            + ", ".join(str(v) for v in close))


def _pairs(node: exp.Expression):
    """(column, literal) of ``col = lit``, ``lit <> col``, ``col IN (lit, ...)``."""
    if isinstance(node, exp.In):
        col = node.this
        if isinstance(col, exp.Column):
            for x in node.expressions:
                if isinstance(x, exp.Literal):
                    yield col, x
        return
    a, b = node.this, node.expression
    if isinstance(b, exp.Column):
        a, b = b, a
    if isinstance(a, exp.Column) and isinstance(b, exp.Literal):
        yield a, b


def _notice(column: str, literal: str, domain: frozenset[str]) -> str:
    low = literal.lower()
    close = sorted(v for v in domain if v.lower() == low)
    if len(close) < MAX_SHOWN:
        close += [v for v in difflib.get_close_matches(literal, sorted(domain), MAX_SHOWN)
                  if v not in close]
    shown = ", ".join(repr(v) for v in close[:MAX_SHOWN])
    return (f"{literal!r} is not a value of {column!r} (its public domain has "
            f"{len(domain):,} values), so no released row matches it"
            + (f"; closest: {shown}" if shown else ""))
