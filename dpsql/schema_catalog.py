"""The emulated catalog: a DuckDB that describes the logical tables, for schema discovery.

Catalog queries (``DESCRIBE``/``SHOW``, ``information_schema``, ``pg_catalog``, DuckDB's
``duckdb_*()`` functions; what psql's ``\\dt``/``\\d``, pgcli, psycopg, SQLAlchemy's
``postgresql`` dialect, JDBC drivers and BI tools send to list tables and columns) run on
an in-memory DuckDB, the *catalog database*, never on the release. ``dpsql serve`` shares
one among its sessions; :func:`dpsql.connect` and :func:`dpsql.attach` build one per DuckDB
instance on the first catalog query (:func:`dpsql.duck.catalog_database`).

* one database per attached release, named by its alias, whose schema (``public`` over
  the server, as PostgreSQL clients expect; ``main`` in-process, as DuckDB users do)
  holds one **empty** table per logical table: the release's own name and each view name,
  with their attribute columns plus ``dp_count``. Only the public spec describes them:
  names, kinds (the table comment), value types; never a source path, never a count. The
  physical level tables are not there, so no client lists them. (Empty tables would
  answer ``COUNT(*) = 0``: a statement is sent here only when it names no logical table.)
* DuckDB's built-in ``pg_catalog``/``information_schema`` emulation describes them. Where
  it lacks what PostgreSQL clients ask for, :func:`fix_catalog_sql` rewrites the query
  text (outside string literals only): ``OPERATOR(pg_catalog.~)`` -> ``~``, ``COLLATE
  pg_catalog.default`` dropped, ``'name'::regclass`` -> the relation's oid, other
  ``::reg*`` casts dropped, ``pg_catalog.f(...)`` -> ``f(...)``, and the relations in
  :data:`RELATIONS` -> table macros that add PostgreSQL 15's missing columns or stand in
  for missing relations (empty ``pg_inherits``, ``pg_policy``, ...); also ``x =
  ANY('{a,b}')`` -> a list, PostgreSQL's backslash escape of ``LIKE`` made explicit
  (``ESCAPE '\\'``), and a set-returning or array call in ``FROM`` named by its alias
  (Grafana's ``generate_series(...) AS i, string_to_array(...) s``). Table macros are
  functions, so they never show up as relations themselves. ``pg_namespace`` lists
  ``pg_catalog`` and ``information_schema`` (psql's tab completion excludes tables in
  ``pg_catalog`` by its oid) and not DuckDB's ``main`` when the tables are in ``public``;
  ``pg_database`` lists the releases only (not DuckDB's ``memory``/``system``/``temp``).
* ``version()`` says ``PostgreSQL 15.0 (dpsql ...)`` (SQLAlchemy and JDBC parse it),
  ``pg_get_userbyid()`` says ``dpsql``.

The database is locked down once built (:func:`dpsql.lockdown.lock_duckdb`: no file
access, no configuration changes), like every analyst's DuckDB.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

import duckdb

from dpsql import __version__
from dpsql._sql import quote_ident, quote_literal
from dpsql.lockdown import lock_duckdb
from dpsql.planner.catalog import ReleaseInfo

PG_VERSION = "15.0"
VERSION_STRING = (f"PostgreSQL {PG_VERSION} (dpsql {__version__} serve; DuckDB "
                  f"{duckdb.__version__}; answers are differentially private)")

# DuckDB type name -> PostgreSQL type OID (what clients map to their own types)
_PG_OIDS = {"BOOLEAN": 16, "TINYINT": 21, "SMALLINT": 21, "UTINYINT": 21, "INTEGER": 23,
            "USMALLINT": 23, "BIGINT": 20, "UINTEGER": 20, "UBIGINT": 1700, "HUGEINT": 1700,
            "UHUGEINT": 1700, "DECIMAL": 1700, "FLOAT": 700, "DOUBLE": 701, "VARCHAR": 1043,
            "BLOB": 17, "DATE": 1082, "TIME": 1083, "TIMESTAMP": 1114,
            "TIMESTAMP WITH TIME ZONE": 1184, "INTERVAL": 1186, "UUID": 2950}
_PG_TYPE_NAMES = {16: "boolean", 21: "smallint", 23: "integer", 20: "bigint", 700: "real",
                  701: "double precision", 1043: "character varying", 25: "text",
                  17: "bytea", 1082: "date", 1083: "time without time zone",
                  1114: "timestamp without time zone", 1184: "timestamp with time zone",
                  1186: "interval", 2950: "uuid"}

# PostgreSQL 15 relations or columns DuckDB lacks, as table macros over its emulation.
RELATIONS: dict[str, str] = {
    "pg_class": "SELECT * REPLACE (reloptions::VARCHAR[] AS reloptions, relacl::VARCHAR[] "
                "AS relacl), false AS relforcerowsecurity FROM pg_catalog.pg_class",
    "pg_database": "SELECT *, 10::BIGINT AS datdba, 6 AS encoding, 'c' AS datlocprovider, "
                   "'C' AS datcollate, 'C' AS datctype, NULL::VARCHAR AS daticulocale, "
                   "NULL::VARCHAR[] AS datacl FROM pg_catalog.pg_database WHERE datname NOT IN "
                   "('memory', 'system', 'temp', 'dpsql_nodes')",
    # the schemas of the release's database (not DuckDB's ``main`` beside ``public``), and
    # pg_catalog / information_schema: psql's completion excludes pg_catalog by its oid
    "pg_namespace": "SELECT oid, schema_name AS nspname, 10::BIGINT AS nspowner, "
                    "NULL::VARCHAR[] AS nspacl FROM duckdb_schemas() WHERE (database_name = "
                    "current_database() AND (schema_name <> 'main' OR current_schema() = "
                    "'main')) OR (database_name = 'system' AND schema_name IN ('pg_catalog', "
                    "'information_schema'))",
    "pg_collation": "SELECT *, 0::BIGINT AS collnamespace, 'c' AS collprovider, "
                    "'C' AS collcollate, 'C' AS collctype FROM pg_catalog.pg_collation",
    "pg_index": "SELECT *, false AS indnullsnotdistinct FROM pg_catalog.pg_index",
    "pg_opclass": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS opcname, true AS opcdefault "
                  "WHERE false",
    # DuckDB's atttypid is its internal type id, not the OID its own pg_type uses
    "pg_attribute": "SELECT a.* REPLACE (coalesce(m.pg_oid, 25)::BIGINT AS atttypid, CASE WHEN "
                    "c.data_type LIKE 'DECIMAL(%' THEN ((c.numeric_precision << 16) | "
                    "c.numeric_scale) + 4 ELSE -1 END AS atttypmod) FROM "
                    "pg_catalog.pg_attribute a LEFT JOIN duckdb_columns() c ON c.table_oid = "
                    "a.attrelid AND c.column_index = a.attnum LEFT JOIN (VALUES " +
                    ", ".join(f"('{k}', {v})" for k, v in _PG_OIDS.items()) +
                    ") m(duck, pg_oid) ON m.duck = split_part(c.data_type, '(', 1)",
    "pg_type": "SELECT * FROM pg_catalog.pg_type WHERE oid IS NOT NULL UNION ALL BY NAME "
               "SELECT 25::BIGINT AS oid, 'text' AS typname, (SELECT min(typnamespace) FROM "
               "pg_catalog.pg_type) AS typnamespace, -1 AS typlen, 'b' AS typtype, 'S' AS "
               "typcategory",
    "pg_inherits": "SELECT 0::BIGINT AS inhrelid, 0::BIGINT AS inhparent, 0 AS inhseqno, "
                   "false AS inhdetachpending WHERE false",
    "pg_policy": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS polname, 0::BIGINT AS polrelid, "
                 "''::VARCHAR AS polcmd, true AS polpermissive, []::BIGINT[] AS polroles, "
                 "NULL::VARCHAR AS polqual, NULL::VARCHAR AS polwithcheck WHERE false",
    "pg_statistic_ext": "SELECT 0::BIGINT AS oid, 0::BIGINT AS stxrelid, ''::VARCHAR AS "
                        "stxname, 0::BIGINT AS stxnamespace, []::INTEGER[] AS stxkeys, "
                        "-1 AS stxstattarget, []::VARCHAR[] AS stxkind WHERE false",
    "pg_publication": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS pubname, false AS "
                      "puballtables, false AS pubviaroot WHERE false",
    "pg_publication_rel": "SELECT 0::BIGINT AS oid, 0::BIGINT AS prpubid, 0::BIGINT AS "
                          "prrelid, NULL::VARCHAR AS prqual, NULL::INTEGER[] AS prattrs "
                          "WHERE false",
    "pg_publication_namespace": "SELECT 0::BIGINT AS oid, 0::BIGINT AS pnpubid, "
                                "0::BIGINT AS pnnspid WHERE false",
    "pg_trigger": "SELECT 0::BIGINT AS oid, 0::BIGINT AS tgrelid, 0::BIGINT AS tgparentid, "
                  "''::VARCHAR AS tgname, ''::VARCHAR AS tgenabled, false AS tgisinternal "
                  "WHERE false",
    "pg_rewrite": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS rulename, 0::BIGINT AS ev_class, "
                  "''::VARCHAR AS ev_type, ''::VARCHAR AS ev_enabled, false AS is_instead "
                  "WHERE false",
    "pg_partitioned_table": "SELECT 0::BIGINT AS partrelid, ''::VARCHAR AS partstrat, "
                            "0 AS partnatts WHERE false",
    "pg_foreign_table": "SELECT 0::BIGINT AS ftrelid, 0::BIGINT AS ftserver WHERE false",
    "pg_roles": "SELECT 10::BIGINT AS oid, 'dpsql' AS rolname, false AS rolsuper, "
                "false AS rolinherit, false AS rolcreatedb, false AS rolcreaterole, "
                "true AS rolcanlogin, false AS rolreplication, -1 AS rolconnlimit, "
                "'********' AS rolpassword, NULL::TIMESTAMP AS rolvaliduntil, "
                "false AS rolbypassrls, NULL::VARCHAR[] AS rolconfig",
    "pg_auth_members": "SELECT 0::BIGINT AS roleid, 0::BIGINT AS member, 0::BIGINT AS "
                       "grantor, false AS admin_option WHERE false",
    # the server's settings (what SHOW answers before any SET), all at their defaults
    "pg_settings": "SELECT name, setting, NULL::VARCHAR AS unit, 'dpsql' AS category, "
                   "'' AS short_desc, 'string' AS vartype, 'default' AS source, setting AS "
                   "boot_val, setting AS reset_val, 'internal' AS context FROM (SELECT "
                   "unnest(map_keys(dpsql_settings())) AS name, "
                   "unnest(map_values(dpsql_settings())) AS setting)",
    "pg_user": "SELECT 'dpsql' AS usename, 10::BIGINT AS usesysid, false AS usesuper",
    "pg_extension": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS extname, 0::BIGINT AS "
                    "extnamespace, ''::VARCHAR AS extversion WHERE false",
    "pg_matviews": "SELECT ''::VARCHAR AS schemaname, ''::VARCHAR AS matviewname, "
                   "''::VARCHAR AS definition WHERE false",
}

# information_schema views whose DuckDB emulation lists DuckDB's own databases and schemas
INFORMATION_SCHEMA: dict[str, str] = {
    "schemata": "SELECT * FROM information_schema.schemata WHERE (catalog_name = "
                "current_database() AND (schema_name <> 'main' OR current_schema() = 'main')) "
                "OR (catalog_name = 'system' AND schema_name IN ('pg_catalog', "
                "'information_schema'))",
}

SCALAR_MACROS = (
    "CREATE MACRO dpsql_format_type(a, b) AS CASE a::BIGINT " + " ".join(
        f"WHEN {k} THEN '{v}'" for k, v in _PG_TYPE_NAMES.items()) +
    " WHEN 1700 THEN CASE WHEN b > 4 THEN 'numeric(' || ((b - 4) >> 16) || ',' || "
    "((b - 4) & 65535) || ')' ELSE 'numeric' END ELSE format_type(a, b) END",
    f"CREATE MACRO version() AS '{VERSION_STRING}'",
    "CREATE MACRO pg_get_userbyid(x) AS 'dpsql'",
    "CREATE MACRO pg_encoding_to_char(x) AS 'UTF8'",
    "CREATE MACRO pg_backend_pid() AS 0",
    "CREATE MACRO array_upper(a, d) AS len(a)",
    "CREATE MACRO array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END",
    "CREATE MACRO has_database_privilege(a, b) AS true, (a, b, c) AS true",
    "CREATE MACRO has_table_privilege(a, b) AS true, (a, b, c) AS true",
    "CREATE MACRO has_schema_privilege(a, b) AS true, (a, b, c) AS true",
    "CREATE MACRO pg_database_size(x) AS 0::BIGINT",
    "CREATE MACRO to_regtype(x) AS (SELECT min(oid) FROM pg_catalog.pg_type WHERE typname = "
    "split_part(x, '.', -1))",
    "CREATE MACRO to_regclass(x) AS coalesce(TRY_CAST(x::VARCHAR AS BIGINT), (SELECT min(oid) "
    "FROM pg_catalog.pg_class WHERE relname = split_part(x::VARCHAR, '.', -1)))",
    "CREATE MACRO pg_get_serial_sequence(a, b) AS NULL::VARCHAR",
    "CREATE MACRO pg_table_size(x) AS 0::BIGINT",
    "CREATE MACRO pg_relation_size(x) AS 0::BIGINT",
    "CREATE MACRO pg_stat_get_numscans(x) AS 0::BIGINT",  # DBeaver's index panel
    "CREATE MACRO pg_tablespace_location(x) AS ''",
    "CREATE MACRO pg_total_relation_size(x) AS 0::BIGINT",
    "CREATE MACRO pg_get_statisticsobjdef_columns(x) AS ''",
    "CREATE MACRO pg_relation_is_publishable(x) AS false",
    "CREATE MACRO pg_get_partkeydef(x) AS NULL",
    "CREATE MACRO pg_get_expr(a, b) AS NULL::VARCHAR, (a, b, c) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_indexdef(a) AS '', (a, b, c) AS ''",
    "CREATE MACRO pg_get_triggerdef(a) AS '', (a, b) AS ''",
    "CREATE MACRO pg_get_ruledef(a) AS '', (a, b) AS ''",
    "CREATE MACRO pg_get_constraintdef(a) AS '', (a, b) AS ''",
    "CREATE MACRO pg_get_viewdef(a) AS '', (a, b) AS ''",
    # the comments from the spec (column_comments): psql's \\d+ and \\dt+, pgcli, JDBC
    "CREATE MACRO obj_description(a) AS (SELECT min(comment) FROM duckdb_tables() WHERE "
    "table_oid = a), (a, b) AS (SELECT min(comment) FROM duckdb_tables() WHERE table_oid = a)",
    # Grafana's table and column pickers quote and parse identifiers
    "CREATE MACRO quote_ident(x) AS CASE WHEN regexp_full_match(x::VARCHAR, "
    "'[a-z_][a-z0-9_$]*') THEN x::VARCHAR ELSE '\"' || replace(x::VARCHAR, '\"', '\"\"') || "
    "'\"' END",
    "CREATE MACRO parse_ident(x) AS list_transform(string_split(x::VARCHAR, '.'), lambda s: "
    "CASE WHEN starts_with(trim(s), '\"') THEN replace(trim(trim(s), '\"'), '\"\"', '\"') "
    "ELSE lower(trim(s)) END)",
    # psql's \df (dpsql's SQL functions are listed in docs/sql.md, not as pg_proc rows)
    "CREATE MACRO pg_get_function_result(x) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_function_arguments(x) AS ''",
    "CREATE MACRO pg_function_is_visible(x) AS true",
    # visible: the logical tables (the current schema) and pg_catalog's relations, as in
    # PostgreSQL; not DuckDB's information_schema views (psql's \\dp, \\dv listed them)
    "CREATE MACRO pg_table_is_visible(x) AS x IN (SELECT table_oid FROM duckdb_tables() "
    "WHERE database_name = current_database() AND schema_name = current_schema()) OR x IN "
    "(SELECT view_oid FROM duckdb_views() WHERE schema_name = 'pg_catalog' OR "
    "(database_name = current_database() AND schema_name = current_schema()))",
    "CREATE MACRO col_description(a, b) AS (SELECT min(comment) FROM duckdb_columns() WHERE "
    "table_oid = a AND column_index = b)",
    "CREATE MACRO shobj_description(a, b) AS NULL::VARCHAR",
)

_KEYWORDS = {"ON", "WHERE", "JOIN", "LEFT", "RIGHT", "INNER", "OUTER", "FULL", "CROSS",
             "NATURAL", "GROUP", "ORDER", "LIMIT", "UNION", "USING", "HAVING", "OFFSET",
             "WINDOW", "EXCEPT", "INTERSECT", "FETCH", "FOR", "LATERAL", "AND", "OR"}


def _relation(m: re.Match) -> str:
    """A catalog relation in FROM position -> its table macro, keeping or adding an alias
    so that qualified column references (``pg_class.relname``) still resolve."""
    call = f"dpsql_{m.group('rel').lower()}()"
    word = m.group("word")
    if word is not None and word.upper() not in _KEYWORDS:
        return call + m.group("alias")
    return f"{call} AS {m.group('rel').lower()}" + (m.group("alias") or "")


def default_settings(database: str) -> dict[str, str]:
    """What ``SHOW`` answers before any ``SET``; also the ParameterStatus sent on connect
    (those PostgreSQL reports: clients read server_version, encodings, DateStyle...)."""
    return {
        "server_version": PG_VERSION, "server_version_num": "150000",
        "server_encoding": "UTF8", "client_encoding": "UTF8", "datestyle": "ISO, MDY",
        "intervalstyle": "postgres", "timezone": "UTC", "integer_datetimes": "on",
        "standard_conforming_strings": "on", "is_superuser": "off",
        "search_path": "public", "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed", "transaction_read_only": "on",
        "default_transaction_read_only": "on", "max_identifier_length": "63",
        "lc_collate": "C", "lc_ctype": "C", "application_name": "",
        "dpsql_release": database, "default_table_access_method": "heap",
    }


_STRING = re.compile(r"'(?:[^']|'')*'")
_REGCLASS_LITERAL = re.compile(
    r"'(?P<name>(?:[^']|'')*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regclass\b", re.I)
_REG = ("regclass|regtype|regproc|regprocedure|regnamespace|regoper|regoperator|regrole|"
        "regconfig")
_FIXES = (
    (re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([^)\s]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+pg_catalog\s*\.\s*\"?default\"?", re.I), ""),
    (re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?(?:" + _REG + r")\b(?:\s*\[\s*\])?", re.I), ""),
    (re.compile(r"\bAS\s+(?:pg_catalog\s*\.\s*)?(?:" + _REG + r"|oid)\s*\)", re.I),
     "AS BIGINT)"),
    (re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?oid\b", re.I), "::BIGINT"),
    (re.compile(r"::\s*pg_catalog\s*\.\s*", re.I), "::"),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?current_setting\s*\(", re.I), "dpsql_setting("),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?format_type\s*\(", re.I), "dpsql_format_type("),
    (re.compile(r"\bjson_build_object\s*\(", re.I), "json_object("),
    (re.compile(r"\bpg_catalog\s*\.\s*(?!(?:" + "|".join(RELATIONS) + r")\b)(\w+)\s*\(",
                re.I), r"\1("),
    (re.compile(r"\binformation_schema\s*\.\s*(?P<rel>" + "|".join(INFORMATION_SCHEMA) +
                r")\b(?!\s*[.(])(?P<alias>\s+(?:AS\s+)?(?P<word>\w+))?", re.I), _relation),
    # pg_catalog.rel.col -> rel.col (DuckDB binds an unaliased table by its bare name)
    (re.compile(r"\b(?:pg_catalog|information_schema)\s*\.\s*(\w+)\s*\.(?=\s*\w)", re.I),
     r"\1."),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?(?P<rel>" + "|".join(RELATIONS) +
                r")\b(?!\s*[.(])(?P<alias>\s+(?:AS\s+)?(?P<word>\w+))?", re.I), _relation),
)


def _regclass(m: re.Match) -> str:
    name = m.group("name").replace("''", "'").split(".")[-1].strip('"').replace("'", "''")
    return f"(SELECT oid FROM pg_catalog.pg_class WHERE relname = '{name}' LIMIT 1)"


_CAST_REGCLASS = re.compile(r"CAST\s*\(\s*(\$\d+|'(?:[^']|'')*')\s+AS\s+(?:pg_catalog\s*\.\s*)?"
                            r"regclass\s*\)", re.I)


def array_items(body: str) -> list[tuple[str, bool]]:
    """The items of a PostgreSQL array literal's body (``r,"p q",NULL``): (text, was
    quoted), unescaped."""
    items: list[tuple[str, bool]] = []
    if not body.strip():
        return items
    cur: list[str] = []
    quoted = in_quotes = False
    i = 0
    while i < len(body):
        ch = body[i]
        if in_quotes:
            if ch == "\\" and i + 1 < len(body):
                i += 1
                cur.append(body[i])
            elif ch == '"':
                in_quotes = False
            else:
                cur.append(ch)
        elif ch == '"':
            in_quotes = quoted = True
        elif ch == ",":
            items.append(("".join(cur) if quoted else "".join(cur).strip(), quoted))
            cur, quoted = [], False
        else:
            cur.append(ch)
        i += 1
    items.append(("".join(cur) if quoted else "".join(cur).strip(), quoted))
    return items


_ANY_LITERAL = re.compile(r"\bANY\s*\(\s*'(?P<body>\{(?:[^']|'')*\})'\s*(?:::\s*(?:pg_catalog\s*\."
                          r"\s*)?\"?(?P<type>\w+)\"?\s*(?:\[\s*\])?\s*)?\)", re.I)
_NUMERIC = {"int", "int2", "int4", "int8", "integer", "bigint", "smallint", "oid", "float4",
            "float8", "numeric", "real", "double"}


def _any_literal(m: re.Match) -> str:
    """``x = ANY('{r,p}')`` (an array literal PostgreSQL coerces; psycopg's client-side
    binding of a list writes it so) -> ``x = ANY(['r', 'p'])``, a DuckDB list."""
    numeric = (m.group("type") or "").lower() in _NUMERIC
    items = []
    for item, quoted in array_items(m.group("body").replace("''", "'")[1:-1]):
        if not quoted and item.upper() == "NULL":
            items.append("NULL")
        elif numeric and re.fullmatch(r"[+-]?\d+(?:\.\d*)?", item):
            items.append(item)
        else:
            items.append(quote_literal(item))
    return "ANY([" + ", ".join(items) + "])"


_ARGS = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # a call's arguments, 3 levels deep
# PostgreSQL names the column of a set-returning function in FROM by the table alias, and
# takes an array-valued call in FROM as one row (Grafana's search_path constraint)
_SRF_ALIAS = re.compile(r"(\bFROM\s+generate_series\s*" + _ARGS + r")\s+(?:AS\s+)?(\w+)"
                        r"(?=\s*,)", re.I)
_ARRAY_IN_FROM = re.compile(r",\s*(string_to_array\s*" + _ARGS + r")\s+(?:AS\s+)?(\w+)"
                            r"(?=\s*(?:\)|WHERE\b|$))", re.I)


# PostgreSQL's LIKE escapes with a backslash by default, DuckDB's only with ESCAPE: psql's
# completion of \d geo<TAB> sends LIKE 'geo\_%'
_LIKE = re.compile(r"(\bI?LIKE\s+E?'(?:[^']|'')*')(?!\s*ESCAPE\b)", re.I)


def _like_escape(m: re.Match) -> str:
    return m.group(1) + (" ESCAPE '\\'" if "\\" in m.group(1) else "")


def fix_catalog_sql(text: str) -> str:
    """Rewrite PostgreSQL catalog SQL into what the catalog database runs (module doc)."""
    text = _CAST_REGCLASS.sub(r"to_regclass(\1)", text)
    text = _ANY_LITERAL.sub(_any_literal, text)
    text = _SRF_ALIAS.sub(r"\1 AS \2(\2)", text)
    text = _ARRAY_IN_FROM.sub(r", (SELECT \1 AS \2) AS \2(\2)", text)
    text = _LIKE.sub(_like_escape, text)
    text = _REGCLASS_LITERAL.sub(_regclass, text)
    out, last = [], 0
    for m in _STRING.finditer(text):
        out.append(_fix_code(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_fix_code(text[last:]))
    return "".join(out)


def _fix_code(code: str) -> str:
    for pattern, repl in _FIXES:
        code = pattern.sub(repl, code)
    return code


_VALUE_TYPES = {"integer": "BIGINT", "date": "DATE", "timestamp": "TIMESTAMP"}  # else DOUBLE


def range_type(value_type: str | None) -> str:
    """The DuckDB type of a binned attribute's column, as ``GROUP BY`` returns its bins'
    lower bounds: integer BIGINT, date DATE, timestamp TIMESTAMP, decimal and real DOUBLE."""
    return _VALUE_TYPES.get(value_type or "", "DOUBLE")


def logical_tables(con: duckdb.DuckDBPyConnection, info: ReleaseInfo
                   ) -> dict[str, list[tuple[str, str]]]:
    """The logical tables of the release ``info`` attached to ``con``: table name ->
    [(column, DuckDB type)]. The release's own name lists every attribute some view
    covers; each view lists its own. Categorical and hierarchy columns take their domain
    table's type; binned (range) attributes their value type (integer: BIGINT, date:
    DATE, decimal and real: DOUBLE); every table ends with ``dp_count``, the private
    count (``SUM(dp_count)`` is ``COUNT(*)``): BIGINT when every view behind the table
    gives integer counts (:func:`integer_counts`), as ``COUNT(*)`` then is, else DOUBLE.
    All of it is public (the spec)."""
    alias = info.alias
    types: dict[str, list[tuple[str, str]]] = {}
    for a in info.attributes.values():
        if a.kind == "range":
            types[a.name] = [(a.name, range_type(a.value_type))]
            continue
        described = {r[0]: r[1] for r in con.execute(
            f"DESCRIBE {quote_ident(alias)}.{quote_ident(a.domain_table)}").fetchall()}
        types[a.name] = [(c, described.get(c, "VARCHAR")) for c in a.columns]

    def columns(attributes: Sequence[str], views: Sequence[Any]) -> list[tuple[str, str]]:
        count = "BIGINT" if all(integer_counts(v) for v in views) else "DOUBLE"
        return [col for name in attributes for col in types[name]] + [("dp_count", count)]

    covered = [a for a in info.attributes if any(a in v.meta.attributes for v in info.views)]
    tables = {info.release.name: columns(covered, info.views)}
    for v in info.views:
        tables.setdefault(v.name, columns(v.meta.attributes, [v]))
    return tables


def integer_counts(view: Any) -> bool:
    """Whether every ``COUNT(*)`` a view (a :class:`dpsql.planner.catalog.ViewInfo`) answers
    is an integer: its level tables hold integer counts (InfTDA's: their SUM's type then
    differs from the column's, ``ViewInfo.count_type``) and no level is a range (a bound
    inside a bin is interpolated)."""
    levels = view.meta.levels
    return bool(levels) and all(view.count_type(lv.k) and lv.kind != "range" for lv in levels)


def bins_text(a: Any) -> str:
    """A binned attribute's public bins in words: ``64 bins of width 4 over [0, 256)``;
    dates and timestamps by their unit and calendar bounds (``12 bins by month over
    [2013-01-01, 2014-01-01)``)."""
    if a.value_type in ("date", "timestamp"):
        from dpsql.domains.calendar import from_axis

        lo, hi = (from_axis(a.value_type, x) for x in (a.lower, a.upper))
        unit = a.unit or ("day" if a.value_type == "date" else "second")
        return f"{a.bins} bins by {unit} over [{lo}, {hi})"
    return f"{a.bins} bins of width {a.width:g} over [{a.lower:g}, {a.upper:g})"


def column_comments(info: ReleaseInfo) -> dict[str, str]:
    """Column -> what it is (kind and public domain size or bins), from the spec."""
    out = {"dp_count": "the differentially private count: SUM(dp_count) is COUNT(*)"}
    for a in info.attributes.values():
        if a.kind == "range":
            out[a.name] = (f"binned {a.value_type or 'real'} attribute: {bins_text(a)}; "
                           "filter with ranges")
            continue
        for i, c in enumerate(a.columns):
            where = f", level {i + 1}" if a.kind == "hierarchy" else ""
            out[c] = f"{a.kind} attribute ({a.name}){where}: {info.size(c)} public values"
    return out


class CatalogDatabase:
    """The in-memory DuckDB that answers catalog queries (module docstring): one database
    per release alias (``databases``: alias -> logical table -> [(column, type)]; the
    first is the current one), its logical tables in ``schema``. Users read it through
    their own cursors; only :meth:`cursor` touches the shared connection, under a lock."""

    def __init__(self, databases: dict[str, dict[str, list[tuple[str, str]]]],
                 config: dict[str, str] | None = None, schema: str = "public",
                 comments: dict[str, dict[str, str]] | None = None) -> None:
        self.database = next(iter(databases))
        self.schema = schema
        self.tables = {t: cols for tables in databases.values() for t, cols in tables.items()}
        self._lock = threading.Lock()
        # two threads: catalog queries are small, and one client's must not take every core;
        # ``config`` adds the server's memory cap (dpsql.server._limits.duckdb_config)
        con = self._con = duckdb.connect(":memory:", config={"threads": 2, **(config or {})})
        for alias, tables in reversed(list(databases.items())):  # the first is USEd last
            con.execute(f"ATTACH ':memory:' AS {quote_ident(alias)}")
            where = f"{quote_ident(alias)}.{quote_ident(schema)}"
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {where}")
            con.execute(f"USE {where}")
            notes = (comments or {}).get(alias, {})  # column -> its comment
            for name, cols in tables.items():
                body = ", ".join(f"{quote_ident(c)} {t}" for c, t in cols)
                con.execute(f"CREATE TABLE {quote_ident(name)} ({body})")
                con.execute(f"COMMENT ON TABLE {quote_ident(name)} IS 'dpsql logical table: "
                            "differentially private counts; query with COUNT(*) ... GROUP BY'")
                for c, _ in cols:
                    if notes.get(c):
                        con.execute(f"COMMENT ON COLUMN {quote_ident(name)}."
                                    f"{quote_ident(c)} IS {quote_literal(notes[c])}")
        for stmt in SCALAR_MACROS:
            con.execute(stmt)
        pairs = ", ".join(f"'{k}': '{v}'" for k, v in default_settings(self.database).items())
        con.execute(f"CREATE MACRO dpsql_settings() AS MAP {{{pairs}}}")
        con.execute("CREATE MACRO dpsql_setting(x) AS dpsql_settings()[lower(x)], "
                    "(x, missing_ok) AS dpsql_settings()[lower(x)]")
        for rel, body in {**RELATIONS, **INFORMATION_SCHEMA}.items():
            con.execute(f"CREATE MACRO dpsql_{rel}() AS TABLE {body}")
        lock_duckdb(con)  # the analysts' lock-down (dpsql.lockdown)
        self.relations = {r[0].lower() for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE internal").fetchall()} | set(RELATIONS)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            cur = self._con.cursor()
        cur.execute(f"USE {quote_ident(self.database)}.{quote_ident(self.schema)}")
        return cur

    def close(self) -> None:
        with self._lock:
            self._con.close()
