"""Ingest: read the sensitive source with DuckDB, check it against the public domains,
apply the spec's policies, and bound each unit's contributions — all in SQL.

The result is a DuckDB table ``dpsql_rows`` with one integer code column per attribute
(``c_<attr>``: the value's position in its public domain, the leaf's position in the
spine, or the bin index) and nothing else. Raw values never reach Python.

What the policies did (rows dropped, clamped, bounded away) is reported to the curator in
an :class:`IngestReport`. Those counts depend on the data, so they are printed, never
stored in the release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from dpsql.errors import DataError, SpecError
from dpsql.spec import Categorical, Hierarchy, Range, ReleaseSpec

NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                 "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE", "REAL")


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


@dataclass
class IngestReport:
    """What ingestion did to the rows. Shown to the curator; never stored in a release."""

    rows_read: int = 0
    rows_used: int = 0
    actions: list[tuple[str, str, int]] = field(default_factory=list)  # (attr, action, rows)

    def add(self, attribute: str, action: str, rows: int) -> None:
        if rows:
            self.actions.append((attribute, action, int(rows)))


def source_sql(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection) -> str:
    """A SQL relation expression reading the spec's source."""
    if spec.sql is not None:
        return f"({spec.sql})"
    src = spec.source or ""
    if src.startswith("duckdb:"):
        parts = src.split(":")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise SpecError(f"source: {src!r} is not of the form 'duckdb:<file>:<table>'")
        path = _resolve(spec, parts[1])
        if not path.exists():
            raise SpecError(f"source: DuckDB file {str(path)!r} does not exist")
        con.execute(f"ATTACH {quote_literal(str(path))} AS dpsql_source (READ_ONLY)")
        return f"dpsql_source.{quote_ident(parts[2])}"
    path = _resolve(spec, src)
    if not path.exists():
        raise SpecError(f"source: file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    readers = {".parquet": "read_parquet", ".csv": "read_csv_auto", ".tsv": "read_csv_auto",
               ".json": "read_json_auto", ".jsonl": "read_json_auto",
               ".ndjson": "read_json_auto"}
    if suffix not in readers:
        raise SpecError(f"source: cannot read {path.name!r}; use a .parquet, .csv or .json "
                        "file, 'duckdb:<file>:<table>', or a 'sql' query")
    return f"{readers[suffix]}({quote_literal(str(path))})"


def _resolve(spec: ReleaseSpec, name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else Path(spec.base_dir) / p


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    return int(con.execute(sql).fetchall()[0][0])


def ingest(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection, salt: int,
           hierarchy_codes: dict[str, np.ndarray] | None = None) -> IngestReport:
    """Create ``dpsql_rows`` (codes only) in ``con`` from the spec's source.

    ``salt`` seeds the per-unit random choice of rows kept by contribution bounding; the
    builder draws it from the release RNG. ``hierarchy_codes[name][i]`` is the code of
    spine row i (its leaf's node id in the public tree); by default the row index."""
    report = IngestReport()
    try:
        rel = source_sql(spec, con)
        con.execute(f"CREATE TEMP VIEW dpsql_src AS SELECT * FROM {rel}")
        described = con.execute("DESCRIBE dpsql_src").fetchall()
    except duckdb.Error as err:
        raise DataError(f"cannot read the source: {err}") from err
    types = {row[0]: str(row[1]).upper() for row in described}
    needed: list[str] = []
    for attr in spec.attributes.values():
        needed.extend(attr.columns)
    if spec.unit.column is not None:
        needed.append(spec.unit.column)
    for col in needed:
        if col not in types:
            raise DataError(f"the source has no column {col!r}; it has: "
                            f"{', '.join(types)}. Fix the spec or the source.")
    for attr in spec.attributes.values():
        if isinstance(attr, Range) and not types[attr.name].startswith(NUMERIC_TYPES) \
                and not types[attr.name].startswith("DECIMAL"):
            raise DataError(f"range attribute {attr.name!r} must be numeric, but the source "
                            f"column has type {types[attr.name]}; cast it in a 'sql' source "
                            "or declare it categorical")
    report.rows_read = _count(con, "SELECT count(*) FROM dpsql_src")
    if report.rows_read == 0:
        raise DataError("the source has no rows; a release of an empty table is meaningless. "
                        "Check the source path or the query.")

    used = {a.name: a for a in spec.attributes.values()
            if any(a.name in v.levels for v in spec.views)}
    conditions: list[str] = []  # WHERE clauses applied in order
    selects: list[str] = []
    joins: list[str] = []
    for attr in used.values():
        # NULL policy.
        null_sql = " OR ".join(f"{quote_ident(c)} IS NULL" for c in attr.columns)
        nulls = _count(con, f"SELECT count(*) FROM dpsql_src WHERE {null_sql}")
        if nulls and attr.on_null == "error":
            raise DataError(f"attribute {attr.name!r} has {nulls} NULL value(s); clean them, or "
                            f"set on_null = \"drop\" for attributes.{attr.name}")
        if nulls:
            report.add(attr.name, "dropped (NULL)", nulls)
            conditions.append(f"NOT ({null_sql})")
        selects.append(_code_expr(con, attr, report, conditions, joins,
                                  (hierarchy_codes or {}).get(attr.name)))
    where = " AND ".join(conditions) if conditions else "TRUE"
    unit = spec.unit
    unit_select = f", {quote_ident(unit.column)} AS dpsql_unit" if unit.column else ""
    con.execute(
        f"CREATE TEMP TABLE dpsql_coded AS SELECT {', '.join(selects)}{unit_select} "
        f"FROM dpsql_src {' '.join(joins)} WHERE {where}")
    kept = _count(con, "SELECT count(*) FROM dpsql_coded")
    if unit.column is not None:
        # Privacy rule 2: keep at most max_rows rows per unit, chosen uniformly at random
        # by a salted hash (the salt comes from the release RNG).
        codes = ", ".join(f"c_{a}" for a in used)
        con.execute(
            "CREATE TEMP TABLE dpsql_rows AS SELECT * EXCLUDE (dpsql_rank) FROM ("
            f"SELECT {codes}, row_number() OVER (PARTITION BY dpsql_unit ORDER BY "
            f"hash({int(salt)}, dpsql_unit, {codes})) AS dpsql_rank "
            f"FROM dpsql_coded) WHERE dpsql_rank <= {unit.max_rows}")
        con.execute("DROP TABLE dpsql_coded")
        report.rows_used = _count(con, "SELECT count(*) FROM dpsql_rows")
        report.add(unit.column, f"dropped (more than {unit.max_rows} rows per unit)",
                   kept - report.rows_used)
    else:
        con.execute("ALTER TABLE dpsql_coded RENAME TO dpsql_rows")
        report.rows_used = kept
    return report


def _code_expr(con: duckdb.DuckDBPyConnection, attr, report: IngestReport,
               conditions: list[str], joins: list[str],
               spine_codes: np.ndarray | None = None) -> str:
    """SQL for the attribute's integer code; registers policy filters and joins."""
    name = attr.name
    if isinstance(attr, Range):
        col = f"CAST({quote_ident(name)} AS DOUBLE)"
        out = f"({col} < {attr.lower!r} OR {col} >= {attr.upper!r} OR isnan({col}))"
        bad = _count(con, f"SELECT count(*) FROM dpsql_src WHERE {out}")
        if bad and attr.on_out_of_bounds == "error":
            raise DataError(f"range attribute {name!r} has {bad} value(s) outside "
                            f"[{attr.lower:g}, {attr.upper:g}); widen the bounds, or set "
                            f"on_out_of_bounds = \"clamp\" or \"drop\"")
        if bad and attr.on_out_of_bounds == "drop":
            report.add(name, "dropped (out of bounds)", bad)
            conditions.append(f"NOT {out}")
        elif bad:
            nan = _count(con, f"SELECT count(*) FROM dpsql_src WHERE isnan({col})")
            if nan:
                raise DataError(f"range attribute {name!r} has {nan} NaN value(s); NaN cannot "
                                "be clamped into a bin: drop them in a 'sql' source")
            report.add(name, "clamped (out of bounds)", bad)
        width = (attr.upper - attr.lower) / attr.bins
        return (f"CAST(least(greatest(floor(({col} - {attr.lower!r}) / {width!r}), 0), "
                f"{attr.bins - 1}) AS BIGINT) AS c_{name}")
    if isinstance(attr, Categorical):
        table = f"dpsql_dom_{name}"
        values = list(attr.values)
        if all(isinstance(v, str) for v in values):
            key, cast = "VARCHAR", f"CAST({quote_ident(name)} AS VARCHAR)"
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            key, cast = "BIGINT", f"TRY_CAST({quote_ident(name)} AS BIGINT)"
        else:
            key, cast = "DOUBLE", f"TRY_CAST({quote_ident(name)} AS DOUBLE)"
        con.execute(f"CREATE TEMP TABLE {table} (v {key}, code BIGINT)")
        con.executemany(f"INSERT INTO {table} VALUES (?, ?)",
                        [(v, i) for i, v in enumerate(values)])
        match = f"{cast} IN (SELECT v FROM {table})"
        bad = _count(con, f"SELECT count(*) FROM dpsql_src WHERE {quote_ident(name)} IS NOT "
                          f"NULL AND NOT ({match})")
        if bad:
            example = con.execute(
                f"SELECT {quote_ident(name)} FROM dpsql_src WHERE {quote_ident(name)} IS NOT "
                f"NULL AND NOT ({match}) LIMIT 1").fetchall()[0][0]
            if attr.on_out_of_domain == "error":
                raise DataError(f"attribute {name!r} has {bad} value(s) outside its public "
                                f"domain, e.g. {example!r}; add them to the domain, or set "
                                f"on_out_of_domain = \"drop\"")
            report.add(name, "dropped (out of domain)", bad)
        alias = f"dpsql_j_{name}"
        joins.append(f"JOIN {table} AS {alias} ON {alias}.v = {cast}")
        return f"{alias}.code AS c_{name}"
    if isinstance(attr, Hierarchy):
        table = f"dpsql_dom_{name}"
        cols = ", ".join(f"{quote_ident(c)} VARCHAR" for c in attr.columns)
        con.execute(f"CREATE TEMP TABLE {table} ({cols}, code BIGINT)")
        con.executemany(
            f"INSERT INTO {table} VALUES ({', '.join('?' for _ in attr.columns)}, ?)",
            [(*p, int(spine_codes[i]) if spine_codes is not None else i)
             for i, p in enumerate(attr.paths)])
        alias = f"dpsql_j_{name}"
        on = " AND ".join(f"{alias}.{quote_ident(c)} = CAST(dpsql_src.{quote_ident(c)} AS VARCHAR)"
                          for c in attr.columns)
        bad = _count(con, f"SELECT count(*) FROM dpsql_src LEFT JOIN {table} AS {alias} ON {on} "
                          f"WHERE {alias}.code IS NULL AND " +
                          " AND ".join(f"dpsql_src.{quote_ident(c)} IS NOT NULL"
                                       for c in attr.columns))
        if bad:
            if attr.on_out_of_domain == "error":
                raise DataError(f"hierarchy {name!r} has {bad} row(s) whose path "
                                f"({', '.join(attr.columns)}) is not in the public spine; fix "
                                f"the spine or set on_out_of_domain = \"drop\"")
            report.add(name, "dropped (not in spine)", bad)
        joins.append(f"JOIN {table} AS {alias} ON {on}")
        return f"{alias}.code AS c_{name}"
    raise SpecError(f"unknown attribute kind for {name!r}")  # pragma: no cover
