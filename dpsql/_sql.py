"""Quoting for the SQL that dpsql writes itself: identifiers (from the catalog or the
spec, never trusted to be plain) and string literals. The release side and the query side
both use this one pair; it imports nothing, so any layer may.

>>> quote_ident('trips"; DROP TABLE x; --')
'"trips""; DROP TABLE x; --"'
>>> quote_literal("O'Hare")
"'O''Hare'"
"""

from __future__ import annotations


def quote_ident(name: object) -> str:
    """``name`` as a DuckDB identifier: in double quotes, its double quotes doubled."""
    return '"' + str(name).replace('"', '""') + '"'


def quote_literal(value: object) -> str:
    """``value`` as a DuckDB string literal: in single quotes, its single quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


__all__ = ["quote_ident", "quote_literal"]
