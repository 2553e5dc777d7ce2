"""Ingest: read the sensitive source with DuckDB, check it against the public domains,
apply the spec's policies, bound each unit's contributions and count — all in SQL.

The result is the temporary table ``dpsql_leaves`` (see :mod:`dpsql.release.counts`):
for every distinct attribute set of the views, the true count of each non-empty
combination of codes (``c_<attr>``: the value's position in its public domain, the
leaf's position in the spine, or the bin index). Raw values never reach Python.

Two paths, chosen by the privacy unit; both give the same counts and the same report:

* **Rows are the unit** (no unit column): *aggregate first*. One scan groups the source
  by the raw keys of every view (``GROUPING SETS``, :func:`counts.count_keys`); the few
  distinct keys are then looked up in the public domains, and every policy count is a
  sum of key counts. Nothing row-sized is materialised. A row dropped by a policy must
  also vanish from views that do not group by the attribute that dropped it; only then
  are those views counted again, in a second scan over the coded rows (a view, not a
  table). That second read assumes a deterministic source (a file, a table, or a query
  without ``random()``/``SAMPLE``); it re-applies every validity check on its own rows.
* **A unit column**: rows must be seen one by one to keep at most ``max_rows`` per unit
  (privacy rule 2), so the coded rows are materialised once; one aggregate by unit keeps
  each unit's rows of least salted key (:func:`counts.bounding_key`: a uniform random
  choice that depends on the unit's own rows only), and they are counted in one
  ``GROUPING SETS`` scan (:func:`counts.count_bounded`).

**Attributes in no view.** ``on_out_of_domain``/``on_out_of_bounds = "drop"`` define the
population: such a row leaves every view, whether or not a view groups by the attribute
(:func:`drops_outside`). An attribute in no view is therefore read when, and only when,
it has such a rule: one more key (``dpsql_out``, which of those attributes put the row
outside) in the one scan of either path, so it costs no second read; the rows with a
bit set leave where the other drops leave, before bounding. Its other policies act on
values no view releases and are not checked.

The policies themselves are in :mod:`dpsql.release.policies`, with the report of what
they did (rows dropped, clamped, bounded away), an :class:`IngestReport`. Those counts
depend on the data, so they are printed to the curator, never stored in the release.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from dpsql._sql import quote_ident, quote_literal
from dpsql.errors import DataError, SpecError
from dpsql.release import counts, policies
from dpsql.release.domain_lookup import create_domain, lookup_codes
from dpsql.release.duckdb_settings import engine_error, memory_limit
from dpsql.release.policies import IngestReport, drops_outside
from dpsql.release.value_types import (TIMESTAMP_TYPES, bin_sql, value_sql,
                                      with_value_types)
from dpsql.spec import Categorical, Range, ReleaseSpec
from dpsql.spec_attributes import did_you_mean

NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                 "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE", "REAL")


def one_line(err: BaseException) -> str:
    """A DuckDB error's first paragraph on one line (its messages span lines: the CSV
    reader appends its whole configuration after a blank line)."""
    return " ".join(str(err).strip().split("\n\n")[0].split())


def source_sql(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection) -> str:
    """A SQL relation expression reading the spec's source.

    A ``sql`` source's relative file names resolve as ``source`` does, next to the spec
    (``base_dir``): DuckDB's ``file_search_path``, which it tries after the working
    directory, so a query that worked from the spec's folder works from any other and
    one written for the working directory keeps reading it (Spark reads its own paths)."""
    if spec.sql is not None:
        if isinstance(con, duckdb.DuckDBPyConnection):
            con.execute(f"SET file_search_path = {quote_literal(str(spec.base_dir))}")
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


def attribute_sets(spec: ReleaseSpec) -> list[tuple[str, ...]]:
    """The distinct attribute sets of the views (one grouping set each), in view order."""
    out: dict[str, tuple[str, ...]] = {}
    for v in spec.views:
        out.setdefault(counts.set_key(v.levels), tuple(sorted(v.levels)))
    return list(out.values())


def _not_a_number(con: duckdb.DuckDBPyConnection, column: str) -> str:
    """", e.g. 'x3' is not a number": a value of a text source column (a CSV's mixed
    column) that no number cast reads, for the curator's error message; "" if none."""
    ref = quote_ident(column)
    try:
        got = con.execute(f"SELECT CAST({ref} AS VARCHAR) FROM dpsql_src WHERE {ref} IS NOT "
                          f"NULL AND TRY_CAST(CAST({ref} AS VARCHAR) AS DOUBLE) IS NULL "
                          "LIMIT 1").fetchall()
    except duckdb.Error:
        return ""
    return f", e.g. {got[0][0]!r} is not a number" if got else ""


def _cast_hint(spec: ReleaseSpec, attr: Range) -> str:
    """The ``sql`` source that casts a text column to the declared date or timestamp
    (ISO text such as ``2013-01-01T06:00:00Z`` casts as written). An attribute's name is
    a plain SQL name (letters, digits, ``_``), so it needs no quotes inside the TOML
    string."""
    if attr.value_type not in ("date", "timestamp") or spec.source is None \
            or spec.source.startswith("duckdb:"):
        return ""
    col = attr.name
    return (f", e.g. sql = \"SELECT * REPLACE (CAST({col} AS {attr.value_type.upper()}) "
            f"AS {col}) FROM {quote_literal(spec.source)}\" instead of source")


def ingest(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection, salt: int,
           hierarchy_codes: dict[str, np.ndarray] | None = None) -> IngestReport:
    """Read the spec's source into ``dpsql_leaves`` (true leaf counts, codes only).

    ``salt`` seeds the per-unit random choice of rows kept by contribution bounding; the
    builder draws it from the release RNG. ``hierarchy_codes[name][i]`` is the code of
    spine row i (its leaf's node id in the public tree); by default the row index."""
    try:
        rel = source_sql(spec, con)
        con.execute(f"CREATE TEMP VIEW dpsql_src AS SELECT * FROM {rel}")
        described = con.execute("DESCRIBE dpsql_src").fetchall()
    except duckdb.Error as err:
        raise DataError(f"cannot read the source: {one_line(err)}") from err
    types = {row[0]: str(row[1]).upper() for row in described}
    needed: list[tuple[str, str]] = []  # (column, the spec key that names it)
    for attr in spec.attributes.values():
        needed.extend((c, f"attributes.{attr.name}") for c in attr.columns)
    if spec.unit.column is not None:
        needed.append((spec.unit.column, "privacy_unit.column"))
    for col, key in needed:
        if col not in types:
            hint = did_you_mean(col, types)
            hint = hint[:1].upper() + hint[1:] + " " if hint else ""
            raise DataError(f"{key}: the source has no column {col!r}; it has: "
                            f"{', '.join(types)}. {hint}Fix the spec or the source.")
    for attr in spec.attributes.values():
        if not isinstance(attr, Range):
            continue
        t = types[attr.name]
        calendar = t == "DATE" or t in TIMESTAMP_TYPES
        if attr.value_type is not None \
                and (attr.value_type in ("date", "timestamp")) != calendar:
            raise DataError(f"range attribute {attr.name!r} is declared type = "
                            f"{attr.value_type!r} but the source column has type "
                            f"{t}; cast it in a 'sql' source{_cast_hint(spec, attr)}, "
                            "or fix the type")
        if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):  # bins in which zone?
            raise DataError(f"range attribute {attr.name!r}: the source column has type {t}, "
                            "an instant, and its bins would be cut in this machine's time "
                            "zone (a release built elsewhere would differ); give it a "
                            "local time in a 'sql' source, e.g. SELECT ..., "
                            f"{attr.name} AT TIME ZONE 'UTC' AS {attr.name} (or your "
                            "office's zone)")
        if not t.startswith(NUMERIC_TYPES) and not t.startswith("DECIMAL") and not calendar:
            raise DataError(f"range attribute {attr.name!r} must be numeric, a date or a "
                            f"timestamp, but the source column has type {t}"
                            f"{_not_a_number(con, attr.name)}; cast it in a 'sql' source "
                            "or declare it categorical")
    spec = with_value_types(spec, types)
    supports = getattr(con, "check_supported", None)  # an engine that reads less (Spark)
    if supports is not None:
        supports(spec)
    used = [a for a in spec.attributes.values() if any(a.name in v.levels for v in spec.views)]
    # An attribute in no view is read only for a policy that drops rows from every view.
    outside = [a for a in spec.attributes.values() if a not in used and drops_outside(a)]
    sizes = _code_sizes(used, hierarchy_codes or {})
    for attr in used + outside:
        create_domain(con, attr, (hierarchy_codes or {}).get(attr.name))
    counts.create_leaves(con, [a.name for a in used])
    sets = attribute_sets(spec)
    try:
        if spec.unit.column is None:
            report = _ingest_by_keys(spec, con, used, outside, sets, sizes)
        else:
            report = _ingest_by_rows(spec, con, used, outside, sets, salt, sizes,
                                     types[spec.unit.column])
        report.column_types = types
        return report
    except duckdb.Error as err:
        raise (engine_error(err, con) or
               DataError(f"cannot read the source: {one_line(err)}")) from err


# --------------------------------------------------------------------------------------
# Aggregate-first path (no unit column)
# --------------------------------------------------------------------------------------

def range_key(attr: Range, value: str) -> str:
    """One BIGINT key per range value that keeps everything the policies need, so that
    grouping by it loses nothing: the bin for values in [lower, upper) (the row path's
    clamped bin), ``bins`` below, ``2·bins − 1`` at or above ``upper`` (so that
    ``key % bins`` is the clamped bin), ``3·bins − 1`` for NaN, NULL for NULL. The common
    case comes first (cheapest per row); NaN is tested before ``>= upper`` because DuckDB
    orders NaN above every number."""
    v = value_sql(attr, value)
    lo, hi, bins = repr(attr.lower), repr(attr.upper), attr.bins
    return (f"CASE WHEN {v} >= {lo} AND {v} < {hi} THEN "
            f"CAST(least({bin_sql(attr, v)}, {bins - 1}) AS BIGINT) "
            f"WHEN {v} < {lo} THEN {bins} WHEN isnan({v}) THEN {3 * bins - 1} "
            f"WHEN {v} >= {hi} THEN {2 * bins - 1} END")


def _ingest_by_keys(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection, used: list,
                    outside: list, sets: list[tuple[str, ...]], sizes: dict[str, int]
                    ) -> IngestReport:
    report = IngestReport()
    # 1. One scan: the count of every distinct raw key, per attribute set. The attributes
    #    in no view that drop rows add one key to every set: which of them drop the row.
    keys: dict[str, str] = {}
    alias: dict[tuple[str, str], str] = {}  # (attribute, column) -> key alias
    for attr in used:
        for c in attr.columns:
            a = f"dpsql_k{len(keys)}"
            alias[(attr.name, c)] = a
            src = f"dpsql_src.{quote_ident(c)}"
            keys[a] = range_key(attr, src) if isinstance(attr, Range) else src
    key_sets = [[alias[(n, c)] for n in s for c in spec.attributes[n].columns] for s in sets]
    source, out = "dpsql_src", []
    if outside:
        keys["dpsql_out"], joins = policies.outside_mask(outside)
        source = " ".join(["dpsql_src"] + joins)
        key_sets = [ks + ["dpsql_out"] for ks in key_sets]
        out = [f"{counts.KEYS}.dpsql_out"]
    counts.count_keys(con, source, keys, key_sets)
    # 2. Look the distinct keys up in the public domains (a small table).
    selects, joins = [], []
    for attr in used:
        refs = {c: f"{counts.KEYS}.{alias[(attr.name, c)]}" for c in attr.columns}
        if isinstance(attr, Range):
            ref = refs[attr.name]
            selects += [f"({ref} IS NULL) AS n_{attr.name}", f"{ref} AS c_{attr.name}"]
            continue
        sel, join = lookup_codes(attr, refs)
        selects += sel
        joins.append(join)
    con.execute(f"CREATE TEMP TABLE dpsql_coded_keys AS SELECT dpsql_gid, n, "
                f"{', '.join(out + selects)} FROM {counts.KEYS} {' '.join(joins)}")
    # 3. Every policy count is a weighted sum over the keys of one set holding the attribute.
    gids = counts.grouping_ids(counts.grouping_columns(key_sets), key_sets)
    gid_of = {a.name: next(g for g, s in zip(gids, sets) if a.name in s) for a in used}
    aggs = [f"coalesce(sum(n) FILTER (WHERE dpsql_gid = {gids[0]}), 0)"]
    for attr in used:
        aggs += policies.stats_sql(attr, f"dpsql_gid = {gid_of[attr.name]}", "n")
    aggs += policies.outside_stats(outside, f"dpsql_gid = {gids[0]}", "n")
    policy = policies.policies_from_stats(con, used, outside, aggs, "dpsql_coded_keys",
                                          report, sizes)
    dropping = {n for n, p in policy.items() if p.drop_bad}
    # 4. A set that groups by every dropping attribute drops those rows itself; the others
    #    must be counted again over the coded rows. (NULLs dropped by on_null = "drop"
    #    leave only the views over their attribute: no set needs counting again for them.)
    rescan = [s for s in sets if not dropping <= set(s)]
    for g, s in zip(gids, sets):
        if s in rescan:
            continue
        conds = [f"dpsql_gid = {g}"] + (["dpsql_out = 0"] if outside else [])
        codes = []
        for n in s:
            attr, p = spec.attributes[n], policy[n]
            if p.drop_null:
                conds.append(f"NOT n_{n}")
            keep_null = p.null_code is not None and not p.drop_null  # a NULL category
            if isinstance(attr, Range):
                if p.drop_bad:
                    conds.append(f"(n_{n} OR c_{n} < {attr.bins})" if keep_null
                                 else f"c_{n} < {attr.bins}")
                code = f"c_{n} % {attr.bins}"
            else:
                if p.drop_bad:
                    conds.append(f"(n_{n} OR c_{n} IS NOT NULL)" if keep_null
                                 else f"c_{n} IS NOT NULL")
                code = f"c_{n}"
            codes.append(f"CASE WHEN n_{n} THEN {p.null_code} ELSE {code} END"
                         if keep_null else code)
        cols = ", ".join(f"c_{n}" for n in s)
        con.execute(f"INSERT INTO {counts.LEAVES} (dpsql_set, {cols}, n) "
                    f"SELECT '{counts.set_key(s)}', {', '.join(codes)}, sum(n)::BIGINT "
                    f"FROM dpsql_coded_keys WHERE {' AND '.join(conds)} GROUP BY ALL")
    if rescan:
        _create_looked_up(con, used, outside, unit_column=None, table=False)
        code_cols, conds = _row_codes(used, outside, policy, strict=True)
        con.execute(f"CREATE TEMP VIEW dpsql_rows AS SELECT {', '.join(code_cols)} "
                    f"FROM dpsql_looked_up WHERE {' AND '.join(conds) or 'TRUE'}")
        counts.count_codes(con, "dpsql_rows", rescan)
        policies.drop_null_leaves(con, policy)
    report.rows_used = counts.rows_used(con, sets)
    return report


# --------------------------------------------------------------------------------------
# Row path (a unit column: bound each unit's rows first)
# --------------------------------------------------------------------------------------

def _create_looked_up(con: duckdb.DuckDBPyConnection, used: list, outside: list,
                      unit_column: str | None, table: bool) -> None:
    """``dpsql_looked_up``: per source row, ``n_<a>`` (NULL flag) and ``c_<a>`` (domain
    code, NULL when not in the domain) or ``v_<a>`` (range value as DOUBLE), with
    attributes in no view that drop rows ``dpsql_out`` (:func:`policies.outside_mask`),
    and with a unit column ``dpsql_unit``."""
    selects, joins = [], []
    for attr in used:
        refs = {c: f"dpsql_src.{quote_ident(c)}" for c in attr.columns}
        if isinstance(attr, Range):
            nulls = f"{refs[attr.name]} IS NULL"
            selects += [f"({nulls}) AS n_{attr.name}",
                        f"{value_sql(attr, refs[attr.name])} AS v_{attr.name}"]
            continue
        sel, join = lookup_codes(attr, refs)
        selects += sel
        joins.append(join)
    if outside:
        mask, more = policies.outside_mask(outside)
        selects.append(f"{mask} AS dpsql_out")
        joins += more
    if unit_column is not None:
        selects.append(f"dpsql_src.{quote_ident(unit_column)} AS dpsql_unit")
    kind = "TABLE" if table else "VIEW"
    con.execute(f"CREATE TEMP {kind} dpsql_looked_up AS SELECT {', '.join(selects)} "
                f"FROM dpsql_src {' '.join(joins)}")


def _row_codes(used: list, outside: list, policy: dict[str, policies.Policy],
               strict: bool) -> tuple[list[str], list[str]]:
    """Code columns and WHERE conditions over ``dpsql_looked_up``. ``strict`` also drops
    rows an ``error`` policy would have refused (for a second read of the source)."""
    code_cols, conds = [], ["dpsql_out = 0"] if outside else []
    for attr in used:
        n, p = attr.name, policy[attr.name]
        mine = []
        if p.null_code is None and strict:
            mine.append(f"NOT n_{n}")
        if isinstance(attr, Range):
            if p.drop_bad:
                mine.append(f"v_{n} >= {attr.lower!r} AND v_{n} < {attr.upper!r}")
            elif strict:
                mine.append(f"NOT isnan(v_{n})")
                if attr.on_out_of_bounds == "error":
                    mine.append(f"v_{n} >= {attr.lower!r} AND v_{n} < {attr.upper!r}")
            # the value clamped to the bounds before binning (the same bin): ±inf never
            # reaches floor, whose result Spark casts to BIGINT
            clamped = f"least(greatest(v_{n}, {attr.lower!r}), {attr.upper!r})"
            code = (f"CAST(least(greatest({bin_sql(attr, clamped)}, 0), "
                    f"{attr.bins - 1}) AS BIGINT)")
        else:
            if p.drop_bad or strict:
                mine.append(f"c_{n} IS NOT NULL")
            code = f"c_{n}"
        if p.null_code is None:  # no NULLs (or refused): as it was
            conds += mine
            code_cols.append(f"{code} AS c_{n}")
            continue
        # NULLs kept under the NULL code here; a drop removes them per view afterwards
        if mine:
            conds.append(f"(n_{n} OR ({' AND '.join(mine)}))")
        code_cols.append(f"CASE WHEN n_{n} THEN {p.null_code} ELSE {code} END AS c_{n}")
    return code_cols, conds


def _ingest_by_rows(spec: ReleaseSpec, con: duckdb.DuckDBPyConnection, used: list,
                    outside: list, sets: list[tuple[str, ...]], salt: int,
                    code_sizes: dict[str, int], unit_type: str) -> IngestReport:
    report = IngestReport()
    unit = spec.unit
    # The only scan of the source: materialised, so that checks, bounding and counts all
    # see the same rows.
    _create_looked_up(con, used, outside, unit.column, table=True)
    aggs = ["count(*)"]
    for attr in used:
        aggs += policies.stats_sql(attr, "TRUE", "1")
    aggs += policies.outside_stats(outside, "TRUE", "1")
    policy = policies.policies_from_stats(con, used, outside, aggs, "dpsql_looked_up",
                                          report, code_sizes)
    # Rows outside a domain leave here, before bounding (DESIGN: the policies, then each
    # unit's rows bounded); NULLs under on_null = "drop" leave the views over their
    # attribute after it (policies.drop_null_leaves).
    code_cols, conds = _row_codes(used, outside, policy, strict=False)
    if policies.null_units(con, unit, report):
        conds.append("dpsql_unit IS NOT NULL")
    con.execute(f"CREATE TEMP VIEW dpsql_coded AS SELECT {', '.join(code_cols)}, dpsql_unit "
                f"FROM dpsql_looked_up WHERE {' AND '.join(conds) or 'TRUE'}")
    # Privacy rule 2: each unit keeps at most max_rows rows, a uniform random choice
    # keyed by the salt (drawn from the release RNG) and by the unit's own rows only.
    buckets = (counts.bucket_count(report.rows_read, memory_limit(con))
               if isinstance(con, duckdb.DuckDBPyConnection) else 1)
    kept = counts.count_bounded(con, "dpsql_coded", code_sizes, sets, unit.max_rows, salt,
                                unit_type, buckets)
    bounded = counts.total_rows(con, sets[0])
    policies.drop_null_leaves(con, policy)
    report.rows_used = counts.rows_used(con, sets)
    report.add(unit.column, f"dropped (more than {unit.max_rows} rows per unit)",
               kept - bounded)
    return report


def _code_sizes(used: list, hierarchy_codes: dict[str, np.ndarray]) -> dict[str, int]:
    """Per attribute, a bound on its codes: every ``c_<a>`` is in ``[0, size)``. An
    attribute whose NULLs may be counted (``on_null`` drop or category) has one code
    more, its last: the NULL code."""
    out = {}
    for attr in used:
        if isinstance(attr, Range):
            out[attr.name] = attr.bins
        elif isinstance(attr, Categorical):
            out[attr.name] = len(attr.values)
        else:
            codes = hierarchy_codes.get(attr.name)
            out[attr.name] = (int(np.max(codes)) + 1 if codes is not None and len(codes)
                              else len(attr.paths))
        if attr.on_null != "error":
            out[attr.name] += 1
    return out
