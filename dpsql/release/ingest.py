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
import pyarrow as pa

from dpsql.errors import DataError, SpecError
from dpsql.spec import Categorical, Range, ReleaseSpec

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
    used = [a for a in spec.attributes.values() if any(a.name in v.levels for v in spec.views)]
    # Pass 1 (the only scan of the source): look every attribute up in its public domain
    # and keep, per row, only what the policies need: the code (NULL if not found), a
    # NULL flag, and for ranges the raw value (to bin, clamp or drop it below).
    selects, joins = [], []
    for attr in used:
        sel, join = _lookup(con, attr, (hierarchy_codes or {}).get(attr.name))
        selects.extend(sel)
        if join:
            joins.append(join)
    if spec.unit.column is not None:
        selects.append(f"dpsql_src.{quote_ident(spec.unit.column)} AS dpsql_unit")
    try:
        con.execute(f"CREATE TEMP TABLE dpsql_looked_up AS SELECT {', '.join(selects)} "
                    f"FROM dpsql_src {' '.join(joins)}")
    except duckdb.Error as err:
        raise DataError(f"cannot read the source: {err}") from err
    # Pass 2: every policy count in one aggregate over the in-memory table.
    stats_sql, conditions, code_cols = [], [], []
    for attr in used:
        n = attr.name
        stats_sql.append(f"count(*) FILTER (WHERE n_{n})")
        if isinstance(attr, Range):
            bad = f"(NOT n_{n} AND (v_{n} < {attr.lower!r} OR v_{n} >= {attr.upper!r} " \
                  f"OR isnan(v_{n})))"
            stats_sql.append(f"count(*) FILTER (WHERE {bad})")
            stats_sql.append(f"count(*) FILTER (WHERE NOT n_{n} AND isnan(v_{n}))")
        else:
            stats_sql.append(f"count(*) FILTER (WHERE NOT n_{n} AND c_{n} IS NULL)")
    stats = con.execute(f"SELECT count(*), {', '.join(stats_sql)} FROM dpsql_looked_up"
                        ).fetchall()[0]
    report.rows_read = int(stats[0])
    if report.rows_read == 0:
        raise DataError("the source has no rows; a release of an empty table is meaningless. "
                        "Check the source path or the query.")
    it = iter(stats[1:])
    for attr in used:
        n = attr.name
        nulls = int(next(it))
        if nulls and attr.on_null == "error":
            raise DataError(f"attribute {n!r} has {nulls} NULL value(s); clean them, or "
                            f"set on_null = \"drop\" for attributes.{n}")
        if nulls:
            report.add(n, "dropped (NULL)", nulls)
            conditions.append(f"NOT n_{n}")
        bad = int(next(it))
        if isinstance(attr, Range):
            nan = int(next(it))
            code_cols.append(_range_code(attr, report, conditions, bad, nan))
        else:
            code_cols.append(f"c_{n}")
            if bad:
                _out_of_domain(con, attr, bad)
                report.add(n, "dropped (out of domain)" if isinstance(attr, Categorical)
                           else "dropped (not in spine)", bad)
                conditions.append(f"c_{n} IS NOT NULL")
    where = " AND ".join(conditions) if conditions else "TRUE"
    unit = spec.unit
    unit_select = ", dpsql_unit" if unit.column else ""
    if unit.column is None:
        # No bounding: the codes are a view over the looked-up rows (no second copy).
        con.execute(f"CREATE TEMP VIEW dpsql_rows AS SELECT {', '.join(code_cols)} "
                    f"FROM dpsql_looked_up WHERE {where}")
        report.rows_used = _count(con, "SELECT count(*) FROM dpsql_rows")
        return report
    con.execute(f"CREATE TEMP TABLE dpsql_coded AS SELECT {', '.join(code_cols)}{unit_select} "
                f"FROM dpsql_looked_up WHERE {where}")
    con.execute("DROP TABLE dpsql_looked_up")
    kept = _count(con, "SELECT count(*) FROM dpsql_coded")
    # Privacy rule 2: keep at most max_rows rows per unit, chosen uniformly at random
    # by a salted hash (the salt comes from the release RNG).
    codes = ", ".join(f"c_{a.name}" for a in used)
    con.execute(
        "CREATE TEMP TABLE dpsql_rows AS SELECT * EXCLUDE (dpsql_rank) FROM ("
        f"SELECT {codes}, row_number() OVER (PARTITION BY dpsql_unit ORDER BY "
        f"hash({int(salt)}, dpsql_unit, {codes})) AS dpsql_rank "
        f"FROM dpsql_coded) WHERE dpsql_rank <= {unit.max_rows}")
    con.execute("DROP TABLE dpsql_coded")
    report.rows_used = _count(con, "SELECT count(*) FROM dpsql_rows")
    report.add(unit.column, f"dropped (more than {unit.max_rows} rows per unit)",
               kept - report.rows_used)
    return report


def _lookup(con: duckdb.DuckDBPyConnection, attr, spine_codes: np.ndarray | None
            ) -> tuple[list[str], str | None]:
    """Pass-1 select items (and join) for one attribute: ``n_<a>`` (NULL flag) and
    ``c_<a>`` (domain code, NULL when not in the domain) or ``v_<a>`` (range value)."""
    name = attr.name
    nulls = " OR ".join(f"dpsql_src.{quote_ident(c)} IS NULL" for c in attr.columns)
    flag = f"({nulls}) AS n_{name}"
    if isinstance(attr, Range):
        return [flag, f"CAST(dpsql_src.{quote_ident(name)} AS DOUBLE) AS v_{name}"], None
    table, alias = f"dpsql_dom_{name}", f"dpsql_j_{name}"
    if isinstance(attr, Categorical):
        values = list(attr.values)
        key, cast = _key_type(values, f"dpsql_src.{quote_ident(name)}")
        arrow_type = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64()}[key]
        _create_from_arrow(con, table, pa.table({
            "v": pa.array(values, arrow_type),
            "code": pa.array(np.arange(len(values), dtype=np.int64))}))
        join = f"LEFT JOIN {table} AS {alias} ON {alias}.v = {cast}"
    else:
        columns = {c: pa.array([p[j] for p in attr.paths], pa.string())
                   for j, c in enumerate(attr.columns)}
        columns["code"] = pa.array(spine_codes if spine_codes is not None
                                   else np.arange(len(attr.paths), dtype=np.int64))
        _create_from_arrow(con, table, pa.table(columns))
        # A spine value has one parent, so the finest column alone finds the leaf: join on
        # it (one string hash per row) and check the coarser columns by comparison.
        finest = attr.columns[-1]
        join = (f"LEFT JOIN {table} AS {alias} ON {alias}.{quote_ident(finest)} = "
                f"CAST(dpsql_src.{quote_ident(finest)} AS VARCHAR)")
        same = " AND ".join(f"{alias}.{quote_ident(c)} = "
                            f"CAST(dpsql_src.{quote_ident(c)} AS VARCHAR)"
                            for c in attr.columns[:-1]) or "TRUE"
        return [flag, f"CASE WHEN {same} THEN {alias}.code END AS c_{name}"], join
    return [flag, f"{alias}.code AS c_{name}"], join


def _key_type(values: list, column: str) -> tuple[str, str]:
    if all(isinstance(v, str) for v in values):
        return "VARCHAR", f"CAST({column} AS VARCHAR)"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return "BIGINT", f"TRY_CAST({column} AS BIGINT)"
    return "DOUBLE", f"TRY_CAST({column} AS DOUBLE)"


def _range_code(attr: Range, report: IngestReport, conditions: list[str], bad: int,
                nan: int) -> str:
    """The bin index of a range value after the out-of-bounds policy."""
    n = attr.name
    if bad and attr.on_out_of_bounds == "error":
        raise DataError(f"range attribute {n!r} has {bad} value(s) outside "
                        f"[{attr.lower:g}, {attr.upper:g}); widen the bounds, or set "
                        f"on_out_of_bounds = \"clamp\" or \"drop\"")
    if bad and attr.on_out_of_bounds == "drop":
        report.add(n, "dropped (out of bounds)", bad)
        conditions.append(f"v_{n} >= {attr.lower!r} AND v_{n} < {attr.upper!r}")
    elif bad:
        if nan:
            raise DataError(f"range attribute {n!r} has {nan} NaN value(s); NaN cannot be "
                            "clamped into a bin: drop them in a 'sql' source")
        report.add(n, "clamped (out of bounds)", bad)
    width = (attr.upper - attr.lower) / attr.bins
    return (f"CAST(least(greatest(floor((v_{n} - {attr.lower!r}) / {width!r}), 0), "
            f"{attr.bins - 1}) AS BIGINT) AS c_{n}")


def _out_of_domain(con: duckdb.DuckDBPyConnection, attr, bad: int) -> None:
    """Raise the policy error for values outside a categorical domain or a spine."""
    if attr.on_out_of_domain != "error":
        return
    if isinstance(attr, Categorical):
        key, cast = _key_type(list(attr.values), quote_ident(attr.name))
        example = con.execute(
            f"SELECT {quote_ident(attr.name)} FROM dpsql_src WHERE {quote_ident(attr.name)} "
            f"IS NOT NULL AND {cast} NOT IN (SELECT v FROM dpsql_dom_{attr.name}) LIMIT 1"
        ).fetchall()
        shown = f", e.g. {example[0][0]!r}" if example else ""
        raise DataError(f"attribute {attr.name!r} has {bad} value(s) outside its public "
                        f"domain{shown}; add them to the domain, or set "
                        f"on_out_of_domain = \"drop\"")
    raise DataError(f"hierarchy {attr.name!r} has {bad} row(s) whose path "
                    f"({', '.join(attr.columns)}) is not in the public spine; fix the spine "
                    f"or set on_out_of_domain = \"drop\"")


def _create_from_arrow(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("dpsql_arrow_tmp", table)
    try:
        con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM dpsql_arrow_tmp")
    finally:
        con.unregister("dpsql_arrow_tmp")
