"""The public domains as temporary tables, and the lookup of source values in them.

Ingest (:mod:`dpsql.release.ingest`) codes every source value by its position in its
attribute's public domain: a categorical value by its index in the spec's list, a
hierarchy path by its spine leaf. :func:`create_domain` writes a domain as the table
``dpsql_dom_<a>``; :func:`lookup_codes` gives the select items and the join that code
a source column (NULL when the value is not in the domain, so that the row meets the
out-of-domain policy); :func:`outside_sql` says whether a row's value is outside its
domain, spine or bounds (what a ``drop`` policy drops); :func:`refuse_out_of_domain`
raises that policy's error with an example value. The key of a categorical domain is typed exactly (:func:`key_type`): an
integer domain takes only integral values.
"""

from __future__ import annotations

import duckdb
import numpy as np

from dpsql._sql import quote_ident
from dpsql.errors import DataError, SpecError
from dpsql.release.store import create_table
from dpsql.release.value_types import value_sql
from dpsql.spec import Categorical, Hierarchy, Range


def create_domain(con: duckdb.DuckDBPyConnection, attr, spine_codes: np.ndarray | None
                   ) -> None:
    """``dpsql_dom_<a>``: a categorical domain (``v``, ``code``) or a spine (its columns,
    ``code``) as a temporary table. Ranges need none."""
    table = f"dpsql_dom_{attr.name}"
    if isinstance(attr, Categorical):
        values = list(attr.values)
        key, _ = key_type(values, "x")
        dtype = {"VARCHAR": object, "BIGINT": np.int64, "DOUBLE": np.float64}[key]
        v = np.empty(len(values), dtype=object)
        v[:] = values
        v = v.astype(dtype)
        if np.unique(v).size != v.size:  # spec validation refuses this; never count twice
            raise SpecError(f"attributes.{attr.name}.domain: values collide as {key} keys; "
                            "give each public value once, all strings or all numbers")
        create_table(con, table, {"v": v,
                                  "code": np.arange(len(values), dtype=np.int64)},
                     temporary=True)
    elif isinstance(attr, Hierarchy):
        columns: dict[str, np.ndarray | None] = {}
        for j, c in enumerate(attr.columns):
            col = np.empty(len(attr.paths), dtype=object)
            col[:] = [p[j] for p in attr.paths]
            columns[c] = col
        columns["code"] = (np.asarray(spine_codes, dtype=np.int64) if spine_codes is not None
                           else np.arange(len(attr.paths), dtype=np.int64))
        create_table(con, table, columns, temporary=True)


def lookup_codes(attr, refs: dict[str, str]) -> tuple[list[str], str]:
    """Select items ``n_<a>`` (NULL flag) and ``c_<a>`` (domain code, NULL when not in the
    domain), and the join, for a categorical or hierarchy attribute whose columns are the
    SQL expressions ``refs`` (source rows or grouped keys)."""
    nulls, code, join = _lookup(attr, refs)
    return [f"({nulls}) AS n_{attr.name}", f"{code} AS c_{attr.name}"], join


def _lookup(attr, refs: dict[str, str]) -> tuple[str, str, str]:
    """SQL of the NULL flag and of the domain code, and the join they need."""
    name = attr.name
    nulls = " OR ".join(f"{refs[c]} IS NULL" for c in attr.columns)
    table, alias = f"dpsql_dom_{name}", f"dpsql_j_{name}"
    if isinstance(attr, Categorical):
        _, cast = key_type(list(attr.values), refs[name])
        return nulls, f"{alias}.code", f"LEFT JOIN {table} AS {alias} ON {alias}.v = {cast}"
    # A spine value has one parent, so the finest column alone finds the leaf: join on it
    # and check the coarser columns by comparison.
    finest = attr.columns[-1]
    join = (f"LEFT JOIN {table} AS {alias} ON {alias}.{quote_ident(finest)} = "
            f"CAST({refs[finest]} AS VARCHAR)")
    same = " AND ".join(f"{alias}.{quote_ident(c)} = CAST({refs[c]} AS VARCHAR)"
                        for c in attr.columns[:-1]) or "TRUE"
    return nulls, f"CASE WHEN {same} THEN {alias}.code END", join


def out_of_bounds_sql(attr: Range, value: str) -> str:
    """SQL true when the range value ``value`` (:func:`value_sql`, not NULL) is outside
    ``[lower, upper)``; NaN is outside."""
    return f"({value} < {attr.lower!r} OR {value} >= {attr.upper!r} OR isnan({value}))"


def outside_sql(attr, refs: dict[str, str]) -> tuple[str, str]:
    """SQL true when a row's value of ``attr`` (columns ``refs`` of the source) is not NULL
    and outside its public domain, spine or bounds — what ``on_out_of_domain`` /
    ``on_out_of_bounds = "drop"`` drops — and the join it needs ('' for a range)."""
    if isinstance(attr, Range):
        col = refs[attr.name]
        return f"({col} IS NOT NULL AND {out_of_bounds_sql(attr, value_sql(attr, col))})", ""
    nulls, code, join = _lookup(attr, refs)
    return f"(NOT ({nulls}) AND {code} IS NULL)", join


def key_type(values: list, column: str) -> tuple[str, str]:
    """The SQL key type of a categorical domain and the expression that casts a source
    column to it; NULL where the value is not exactly a key of that type, so the row
    meets the out-of-domain policy. An integer domain takes only integral values: a plain
    ``TRY_CAST(1.5 AS BIGINT)`` is 2, which would count the row in a cell it is not in."""
    if all(isinstance(v, str) for v in values):
        return "VARCHAR", f"CAST({column} AS VARCHAR)"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        as_int = f"TRY_CAST({column} AS BIGINT)"
        return "BIGINT", (f"CASE WHEN {as_int} = TRY_CAST({column} AS DOUBLE) "
                          f"THEN {as_int} END")
    return "DOUBLE", f"TRY_CAST({column} AS DOUBLE)"


def refuse_out_of_domain(con: duckdb.DuckDBPyConnection, attr, bad: int) -> None:
    """Raise the policy error for values outside a categorical domain or a spine."""
    if attr.on_out_of_domain != "error":
        return
    if isinstance(attr, Categorical):
        key, cast = key_type(list(attr.values), quote_ident(attr.name))
        example = con.execute(
            f"SELECT {quote_ident(attr.name)} FROM dpsql_src WHERE {quote_ident(attr.name)} "
            f"IS NOT NULL AND (({cast}) IS NULL OR ({cast}) NOT IN "
            f"(SELECT v FROM dpsql_dom_{attr.name})) LIMIT 1"
        ).fetchall()
        shown = f", e.g. {example[0][0]!r}" if example else ""
        raise DataError(f"attribute {attr.name!r} has {bad} value(s) outside its public "
                        f"domain{shown}; add them to the domain, or set "
                        f"on_out_of_domain = \"drop\"")
    raise DataError(f"hierarchy {attr.name!r} has {bad} row(s) whose path "
                    f"({', '.join(attr.columns)}) is not in the public spine; fix the spine "
                    f"or set on_out_of_domain = \"drop\"")
