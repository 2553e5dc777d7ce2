"""Value types of binned attributes: inferred from the source's column types, and the
exact bin of a value on its grid.

A spec may declare ``type`` on a range attribute (:data:`dpsql.spec.VALUE_TYPES`); where
it does not, the release infers it from the source column's DuckDB type, once, before
reading any row (a column's type is schema, not data): integer types give ``integer``,
``DECIMAL(p, s)`` gives ``decimal`` with resolution 10^-s, ``DATE`` gives ``date``,
``TIMESTAMP`` (any precision) gives ``timestamp``, floating-point types ``real``.
An inferred grid type whose bins do not lie on the grid is refused with the fix (declare
``type = "real"`` to keep the continuous axis, or change the bins), as a declared one is
by the spec. The inferred types are written into the release's spec and attribute
metadata, which is where the query side reads them.

Categorical and spine columns keep an integer source column's type the same way
(:func:`integer_columns`): a column whose public values are text (every spine value, a
``domain_file``'s values, a quoted domain) is released as BIGINT when the source column
has an integer type and each public value is an integer's plain decimal text (``7``,
``-3``; not ``07``, ``+3`` or a value beyond BIGINT), which is exactly the text DuckDB
gives such a column when the build matches rows to the domain. Domains written as numbers
(``domain = [1, 2, 3]``) are integers as declared; every other text column stays VARCHAR.

Decision: the type is stored, not cast on the query side. The level, prefix and domain
tables hold those labels as BIGINT (:func:`dpsql.release.view_tables.label_values`), as
integer domains always were, so the query side has one code path: every result, the
emulated catalog (``DESCRIBE``, ``information_schema``, ``pg_attribute``, which take a
label column's type from its domain table), the wire types, the dialect and ``dpsql
inspect --columns`` read the type from the tables. The format is unchanged (version 1
always allowed BIGINT label columns); a release written before keeps its VARCHAR spine
labels and is described as VARCHAR everywhere, consistently. Only the labels' type
changes: the public trees, node order and codes are those of the text values.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from dpsql.domains.bin_edges import DECIMAL, edge_sql
from dpsql.domains.calendar import month_bin_sql
from dpsql.errors import DataError, SpecError
from dpsql.spec import Categorical, Hierarchy, Range, ReleaseSpec, check_grid

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                 "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT")
TIMESTAMP_TYPES = ("TIMESTAMP", "DATETIME", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
                   "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ")
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")
_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def infer_value_type(column_type: str) -> tuple[str, float | None]:
    """(value type, resolution) of a source column of DuckDB type ``column_type``."""
    t = column_type.upper()
    if t == "DATE":
        return "date", None
    if t in TIMESTAMP_TYPES:
        return "timestamp", None
    if t in INTEGER_TYPES:
        return "integer", None
    m = _DECIMAL.match(t)
    if m:
        scale = int(m.group(2))
        return ("integer", None) if scale == 0 else ("decimal", float(Fraction(1, 10**scale)))
    return "real", None


def integer_columns(attr: Categorical | Hierarchy, column_types: dict[str, str]
                    ) -> tuple[str, ...]:
    """The columns of ``attr`` whose text values are released as BIGINT (module
    docstring): an integer source column, and every public value an integer's plain
    decimal text that fits a BIGINT."""
    out = []
    for j, c in enumerate(attr.columns):
        if c not in column_types or infer_value_type(column_types[c])[0] != "integer":
            continue
        values = set(attr.values) if isinstance(attr, Categorical) else \
            {p[j] for p in attr.paths}
        if all(isinstance(v, str) and _INTEGER_TEXT.fullmatch(v)
               and -2**63 <= int(v) < 2**63 for v in values):
            out.append(c)
    return tuple(out)


def with_value_types(spec: ReleaseSpec, column_types: dict[str, str]) -> ReleaseSpec:
    """``spec`` with every range attribute's value type set (declared ones kept, the
    others inferred from ``column_types``: column name -> DuckDB type), and the text
    columns of categorical and spine attributes that keep an integer type marked
    (:func:`integer_columns`)."""
    changed: dict = {}
    for name, attr in spec.attributes.items():
        if isinstance(attr, (Categorical, Hierarchy)):
            ints = integer_columns(attr, column_types)
            if ints != attr.integer_columns:
                changed[name] = replace(attr, integer_columns=ints)
            continue
        if attr.value_type is not None:
            continue
        vt, res = infer_value_type(column_types[attr.name])
        typed = replace(attr, value_type=vt, resolution=res)
        try:
            check_grid(typed, f"attributes.{name}")
        except SpecError as err:
            raise DataError(f"{err} (the type {vt!r} was inferred from the source column's "
                            f"type {column_types[attr.name]})") from err
        changed[name] = typed
    if not changed:
        return spec
    return replace(spec, attributes={**spec.attributes, **changed})


def value_sql(attr: Range, column: str) -> str:
    """The source column as the DOUBLE the bins are cut on: a date's day number (days
    since 1970-01-01), a timestamp's whole seconds since 1970-01-01 00:00:00 (a fraction
    of a second is cut off: the attribute's grid is the second), any other value as
    itself. A TIMESTAMP WITH TIME ZONE source column is refused before this (ingest: its
    bins would depend on the building machine's time zone)."""
    if attr.value_type == "date":
        return f"CAST(date_diff('day', DATE '1970-01-01', CAST({column} AS DATE)) AS DOUBLE)"
    if attr.value_type == "timestamp":
        return f"floor(epoch(CAST({column} AS TIMESTAMP)))"
    return f"CAST({column} AS DOUBLE)"


def bin_sql(attr: Range, value: str) -> str:
    """SQL for the (unclamped) leaf bin of ``value``, a DOUBLE expression, exact on the
    value's grid: a decimal is first snapped to its grid index, so that 0.3 with bins of
    0.1 falls in bin 3, not in bin 2 as ``floor(0.3 / 0.1)`` would put it. Any other
    value is in bin b when edge b <= value < edge b + 1 (the edges the release stores,
    :mod:`dpsql.domains.bin_edges`): ``floor((value - lower) / width)`` is within one of
    b, and is moved by comparing with its two edges, so a real 0.3 with bins of 0.1
    is in bin 3 (floor gives 2, as 0.3 / 0.1 = 2.9999999999999996)."""
    if attr.unit == "month":
        return month_bin_sql(attr.value_type, attr.lower, value)  # type: ignore[arg-type]
    width = (attr.upper - attr.lower) / attr.bins
    if attr.value_type != "decimal":
        guess = f"floor(({value} - {attr.lower!r}) / {width!r})"
        if attr.edge_mode != DECIMAL:
            return guess
        edge = (attr.lower, attr.upper, attr.bins)
        g = f"CAST({guess} AS BIGINT)"
        return (f"({g} + CAST({value} >= {edge_sql(*edge, g + ' + 1')} AS BIGINT) - "
                f"CAST({value} < {edge_sql(*edge, g)} AS BIGINT))")
    step = Fraction(repr(attr.resolution))
    lo = Fraction(repr(attr.lower)) / step
    w = Fraction(repr(attr.upper)) / step - lo
    w /= attr.bins
    return (f"floor((round({value} / {float(step)!r}) - {int(lo)}) / {int(w)})")
