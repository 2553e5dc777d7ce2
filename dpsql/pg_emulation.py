"""PostgreSQL's catalog, emulated on DuckDB: the definitions and the query rewrite.

DuckDB has a built-in ``pg_catalog``/``information_schema`` emulation. Where it lacks what
PostgreSQL clients ask for, this module supplies the rest, for the catalog database
(:mod:`dpsql.schema_catalog`):

* :data:`RELATIONS` / :data:`INFORMATION_SCHEMA`: table macros that add PostgreSQL 15's
  missing columns or stand in for missing relations (empty ``pg_inherits``,
  ``pg_policy``, ...). Table macros are functions, so they never show up as relations
  themselves.
* :data:`SCALAR_MACROS`: ``version()`` says ``PostgreSQL 15.0 (dpsql ...)`` (SQLAlchemy
  and JDBC parse it), ``pg_get_userbyid()`` says ``dpsql``, ``format_type``,
  ``quote_ident``, ``obj_description`` ... as PostgreSQL answers them.
* :func:`fix_catalog_sql` rewrites the query text (outside string literals only):
  ``OPERATOR(pg_catalog.~)`` -> ``~``, ``COLLATE pg_catalog.default`` dropped,
  ``'name'::regclass`` -> the relation's oid, other ``::reg*`` casts dropped,
  ``pg_catalog.f(...)`` -> ``f(...)``, and the relations in :data:`RELATIONS` -> their
  table macros; also ``x = ANY('{a,b}')`` -> a list, PostgreSQL's backslash escape of
  ``LIKE`` made explicit (``ESCAPE '\\'``), and a set-returning or array call in
  ``FROM`` named by its alias (Grafana's ``generate_series(...) AS i,
  string_to_array(...) s``).
"""

from __future__ import annotations

import re

import duckdb

from dpsql import __version__
from dpsql._sql import quote_literal

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
_PG_UDT_NAMES = {16: "bool", 21: "int2", 23: "int4", 20: "int8", 700: "float4", 701: "float8",
                 1043: "varchar", 25: "text", 17: "bytea", 1082: "date", 1083: "time",
                 1114: "timestamp", 1184: "timestamptz", 1186: "interval", 2950: "uuid",
                 1700: "numeric"}


def _pg_name_of(column: str, names: dict[int, str]) -> str:
    """SQL: the PostgreSQL name (from ``names``, by type OID) of the DuckDB type name in
    ``column`` (``DECIMAL(10,2)`` by its base name); ``text`` for a type PostgreSQL lacks."""
    cases = " ".join(f"WHEN '{duck}' THEN '{names.get(oid, 'numeric')}'"
                     for duck, oid in _PG_OIDS.items())
    return f"CASE split_part({column}, '(', 1) {cases} ELSE 'text' END"


def _over_pg(pg: str, duck: str) -> str:
    """SQL: ``pg`` for PostgreSQL clients (the server's ``public`` schema), ``duck``
    in-process (``main``), where DuckDB users expect DuckDB's own answer."""
    return f"CASE WHEN current_schema() = 'main' THEN {duck} ELSE {pg} END"

# PostgreSQL 15 relations or columns DuckDB lacks, as table macros over its emulation.
RELATIONS: dict[str, str] = {
    # a table's access method is PostgreSQL's heap (pg_am), not DuckDB's index type ART
    # (psql's \\d+ said "Access method: art", "Replica Identity: ???")
    "pg_class": "SELECT * REPLACE (reloptions::VARCHAR[] AS reloptions, relacl::VARCHAR[] "
                "AS relacl, CASE WHEN relkind = 'r' THEN 2 ELSE 0 END::BIGINT AS relam, "
                "'d' AS relreplident), false AS relforcerowsecurity FROM pg_catalog.pg_class",
    "pg_am": "SELECT * FROM (VALUES (2::BIGINT, 'heap', 'heap_tableam_handler', 't'), "
             "(403, 'btree', 'bthandler', 'i')) am(oid, amname, amhandler, amtype)",
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
                    "c.numeric_scale) + 4 ELSE -1 END AS atttypmod, CASE WHEN m.pg_oid IN "
                    "(1043, 17, 1700) OR m.pg_oid IS NULL THEN 'x' ELSE 'p' END AS attstorage, "
                    "-1 AS attstattarget) FROM "
                    "pg_catalog.pg_attribute a LEFT JOIN duckdb_columns() c ON c.table_oid = "
                    "a.attrelid AND c.column_index = a.attnum LEFT JOIN (VALUES " +
                    ", ".join(f"('{k}', {v})" for k, v in _PG_OIDS.items()) +
                    ") m(duck, pg_oid) ON m.duck = split_part(c.data_type, '(', 1)",
    # the built-in types in pg_catalog, as in PostgreSQL (DuckDB files them under its
    # ``main``, which pg_namespace leaves out: Npgsql's type loading, which joins the two
    # on connect, found no type at all), typnotnull never NULL (Npgsql reads it as 't'/'f')
    "pg_type": "SELECT * REPLACE ((SELECT oid FROM duckdb_schemas() WHERE database_name = "
               "'system' AND schema_name = 'pg_catalog') AS typnamespace, coalesce(typnotnull, "
               "false) AS typnotnull) FROM (SELECT * FROM pg_catalog.pg_type WHERE oid IS NOT "
               "NULL UNION ALL BY NAME SELECT 25::BIGINT AS oid, 'text' AS typname, -1 AS "
               "typlen, 'b' AS typtype, 'S' AS typcategory WHERE NOT EXISTS (SELECT 1 FROM "
               "pg_catalog.pg_type WHERE oid = 25))",
    # no range types (Npgsql's type loading joins pg_range on connect)
    "pg_range": "SELECT 0::BIGINT AS rngtypid, 0::BIGINT AS rngsubtype, 0::BIGINT AS "
                "rngmultitypid, 0::BIGINT AS rngcollation, 0::BIGINT AS rngsubopc, "
                "''::VARCHAR AS rngcanonical, ''::VARCHAR AS rngsubdiff WHERE false",
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
    # SQL cursors are per session (dpsql.server._cursors): psycopg asks here before it
    # closes a named cursor it did not describe (a session lists its own:
    # dpsql.server._session_views)
    "pg_cursors": "SELECT ''::VARCHAR AS name, ''::VARCHAR AS statement, false AS "
                  "is_holdable, false AS is_binary, false AS is_scrollable, "
                  "NULL::TIMESTAMPTZ AS creation_time WHERE false",
    # a session's named prepared statements (dpsql.server._session_views)
    "pg_prepared_statements": "SELECT ''::VARCHAR AS name, ''::VARCHAR AS statement, "
                              "NULL::TIMESTAMPTZ AS prepare_time, []::VARCHAR[] AS "
                              "parameter_types, false AS from_sql, 0::BIGINT AS "
                              "generic_plans, 0::BIGINT AS custom_plans WHERE false",
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
    # statistics would describe the data: none, so no client reads a row count here
    # (Metabase's table list joins pg_stat_user_tables for n_live_tup)
    "pg_stat_user_tables": "SELECT 0::BIGINT AS relid, ''::VARCHAR AS schemaname, "
                           "''::VARCHAR AS relname, NULL::BIGINT AS seq_scan, NULL::BIGINT "
                           "AS idx_scan, NULL::BIGINT AS n_live_tup, NULL::BIGINT AS "
                           "n_dead_tup, NULL::TIMESTAMP AS last_analyze, NULL::TIMESTAMP AS "
                           "last_autoanalyze WHERE false",
    "pg_user": "SELECT 'dpsql' AS usename, 10::BIGINT AS usesysid, false AS usesuper",
    "pg_extension": "SELECT 0::BIGINT AS oid, ''::VARCHAR AS extname, 0::BIGINT AS "
                    "extnamespace, ''::VARCHAR AS extversion WHERE false",
    # PostgreSQL's system views (pg_catalog, information_schema), not DuckDB's own in
    # ``main`` (as pg_namespace; Metabase's privilege query reads pg_views)
    "pg_views": "SELECT * FROM pg_catalog.pg_views WHERE schemaname <> 'main' OR "
                "current_schema() = 'main'",
    # the comments (column_comments) as PostgreSQL files them: classoid is pg_class's oid,
    # which 'pg_class'::regclass gives (SQLAlchemy's get_table_comment, JDBC's REMARKS and
    # Metabase's table description join on it; DuckDB puts the database's oid there)
    "pg_description": "SELECT * REPLACE ((SELECT min(oid) FROM pg_catalog.pg_class WHERE "
                      "relname = 'pg_class') AS classoid) FROM pg_catalog.pg_description",
    # PostgreSQL's functions, not this emulation's macros (dpsql_pg_class(), version() ...),
    # which live in the release's schema: psql's \\df listed them as the release's own
    "pg_proc": "SELECT * FROM pg_catalog.pg_proc WHERE pronamespace NOT IN (SELECT oid "
               "FROM duckdb_schemas() WHERE database_name = current_database())",
    "pg_matviews": "SELECT ''::VARCHAR AS schemaname, ''::VARCHAR AS matviewname, "
                   "''::VARCHAR AS definition WHERE false",
}

# information_schema views whose DuckDB emulation lists DuckDB's own databases and schemas
INFORMATION_SCHEMA: dict[str, str] = {
    "schemata": "SELECT * FROM information_schema.schemata WHERE (catalog_name = "
                "current_database() AND (schema_name <> 'main' OR current_schema() = 'main')) "
                "OR (catalog_name = 'system' AND schema_name IN ('pg_catalog', "
                "'information_schema'))",
    # PostgreSQL's type names (Grafana picks time and metric columns by data_type;
    # Metabase reads udt_name as the column's database type), not DuckDB's (BIGINT ...)
    "columns": "SELECT * REPLACE (" + ", ".join(
        f"{_over_pg(pg, duck)} AS {duck.split(':')[0]}" for duck, pg in (
            ("data_type", _pg_name_of("data_type", _PG_TYPE_NAMES)),
            ("udt_catalog", "current_database()"), ("udt_schema", "'pg_catalog'"),
            ("udt_name", _pg_name_of("data_type", _PG_UDT_NAMES)),
            ("is_identity::VARCHAR", "'NO'"))) + ") FROM information_schema.columns",
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
    # SQL keywords for editors' highlighting and quoting (DBeaver, pgAdmin): DuckDB's
    "CREATE MACRO pg_get_keywords() AS TABLE SELECT keyword_name AS word, CASE "
    "keyword_category WHEN 'reserved' THEN 'R' WHEN 'column_name' THEN 'C' WHEN "
    "'type_function' THEN 'T' ELSE 'U' END AS catcode, true AS barelabel, "
    "keyword_category AS catdesc, 'can be bare label' AS baredesc FROM duckdb_keywords()",
    # after quote_ident and parse_ident, which they call (a macro is bound when made)
    "CREATE MACRO to_regclass(x) AS coalesce(TRY_CAST(x::VARCHAR AS BIGINT), (SELECT min(oid) "
    "FROM pg_catalog.pg_class WHERE relname = parse_ident(x::VARCHAR)[-1]))",
    # PostgreSQL's format(): %s, %I (quote_ident), %L (quote_literal), %%; DuckDB's
    # format() is fmt's ({}), so format('%s', x) said '%s' (Metabase's column types)
    "CREATE MACRO dpsql_format_arg(f, i, a) AS CASE list_filter(regexp_extract_all(f, "
    "'%.'), lambda s: s <> '%%')[i] WHEN '%I' THEN quote_ident(a) WHEN '%L' THEN coalesce("
    "'''' || replace(a::VARCHAR, '''', '''''') || '''', 'NULL') ELSE coalesce(a::VARCHAR, "
    "'') END",
    "CREATE MACRO dpsql_format(f) AS printf(f), "
    "(f, a) AS printf(regexp_replace(f, '%[IL]', '%s', 'g'), dpsql_format_arg(f, 1, a)), "
    "(f, a, b) AS printf(regexp_replace(f, '%[IL]', '%s', 'g'), dpsql_format_arg(f, 1, a), "
    "dpsql_format_arg(f, 2, b)), "
    "(f, a, b, c) AS printf(regexp_replace(f, '%[IL]', '%s', 'g'), dpsql_format_arg(f, 1, a), "
    "dpsql_format_arg(f, 2, b), dpsql_format_arg(f, 3, c)), "
    "(f, a, b, c, d) AS printf(regexp_replace(f, '%[IL]', '%s', 'g'), dpsql_format_arg(f, 1, "
    "a), dpsql_format_arg(f, 2, b), dpsql_format_arg(f, 3, c), dpsql_format_arg(f, 4, d))",
    # information_schema._pg_expandarray(a): the rows (x, n) of an array (pgjdbc's primary
    # keys and Metabase's indexes read (..._pg_expandarray(i.indkey)).n)
    "CREATE MACRO dpsql_pg_expandarray(a) AS unnest(list_transform(range(1, len(a) + 1), "
    "lambda i: {'x': a[i], 'n': i}))",
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
    # quoted catalog names, as query builders write them (Metabase's HoneySQL:
    # "pg_catalog"."pg_class" AS "c"): the same names unquoted, so the rewrites below apply
    (re.compile(r'"(pg_catalog|information_schema|_?pg_[a-z0-9_]*)"'), r"\1"),
    (re.compile(r'\b(pg_catalog|information_schema)\s*\.\s*"([a-z_][a-z0-9_]*)"'), r"\1.\2"),
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
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?format\s*\(", re.I), "dpsql_format("),
    (re.compile(r"\b(?:information_schema\s*\.\s*)?_pg_expandarray\s*\(", re.I),
     "dpsql_pg_expandarray("),
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


_CAST = re.compile(r"\bCAST\s*\(", re.I)
_AS_REGCLASS = re.compile(r"(?P<arg>.+)\s+AS\s+(?:pg_catalog\s*\.\s*)?regclass\s*", re.I | re.S)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def closing_paren(text: str, start: int) -> int | None:
    """The index of the parenthesis that closes the one just before ``start`` (quoted text
    skipped), or None."""
    depth, i = 1, start
    while i < len(text):
        if text[i] in "'\"":
            m = _QUOTED.match(text, i)
            if m is None:
                return None
            i = m.end()
            continue
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
        i += 1
    return None


def _cast_regclass(text: str) -> str:
    """``CAST(expr AS regclass)`` -> ``to_regclass(expr)``, whatever ``expr`` is: a
    parameter, a literal, Metabase's ``format('%I.%I', schema, table)`` (the generic
    ``AS regclass)`` -> ``AS BIGINT)`` of :data:`_FIXES` fails on a name). Innermost first,
    so that a cast inside another is rewritten before the outer one is matched."""
    for m in reversed(list(_CAST.finditer(text))):
        end = closing_paren(text, m.end())
        inner = None if end is None else _AS_REGCLASS.fullmatch(text, m.end(), end)
        if inner is not None:
            text = f"{text[:m.start()]}to_regclass({inner.group('arg')}){text[end + 1:]}"
    return text


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


_ANY_LITERAL = re.compile(r"\b(?P<quantifier>ANY|ALL)\s*\(\s*'(?P<body>\{(?:[^']|'')*\})'\s*(?:::\s*(?:pg_catalog\s*\."
                          r"\s*)?\"?(?P<type>\w+)\"?\s*(?:\[\s*\])?\s*)?\)", re.I)
_NUMERIC = {"int", "int2", "int4", "int8", "integer", "bigint", "smallint", "oid", "float4",
            "float8", "numeric", "real", "double"}


def _any_literal(m: re.Match) -> str:
    """``x = ANY('{r,p}')`` (an array literal PostgreSQL coerces; psycopg's client-side
    binding of a list writes it so) -> ``x = ANY(['r', 'p'])``, a DuckDB list; ``ALL``
    alike (DBeaver's keyword list: ``word <> ALL ('{a,abs,...}'::text[])``)."""
    numeric = (m.group("type") or "").lower() in _NUMERIC
    items = []
    for item, quoted in array_items(m.group("body").replace("''", "'")[1:-1]):
        if not quoted and item.upper() == "NULL":
            items.append("NULL")
        elif numeric and re.fullmatch(r"[+-]?\d+(?:\.\d*)?", item):
            items.append(item)
        else:
            items.append(quote_literal(item))
    return m.group("quantifier").upper() + "([" + ", ".join(items) + "])"


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
    text = _cast_regclass(text)
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
