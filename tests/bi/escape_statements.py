"""The escape suite's statements: attempts to read a file other than the release through
an analyst entry point (tests/bi/test_escape.py runs each against every entry point).

Each is a template over ``{secret}`` (a planted text/CSV file), ``{raw}`` (a planted raw
data parquet file, the kind of file a curator releases from), ``{rawdb}`` (a planted
DuckDB database), ``{dir}`` (their folder) and ``{out}`` (a path that must never be
written). Grouped by the trick they try.
"""

from __future__ import annotations

FILE_READERS = [
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_csv_auto('{secret}')",
    "SELECT * FROM read_csv('{secret}', header = false, columns = {{'a': 'VARCHAR'}})",
    "SELECT * FROM read_csv('{secret}', sep => ',')",
    "SELECT * FROM read_parquet('{raw}')",
    "SELECT * FROM read_parquet(['{raw}'])",
    "SELECT * FROM parquet_scan('{raw}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_blob('{secret}')",
    "SELECT * FROM read_json('{secret}')",
    "SELECT * FROM read_json_auto('{secret}')",
    "SELECT * FROM read_ndjson('{secret}')",
    "SELECT * FROM read_json_objects('{secret}')",
    "SELECT * FROM read_ndjson_objects('{secret}')",
    "SELECT * FROM glob('{dir}/*')",
    "SELECT * FROM sniff_csv('{secret}')",
    "SELECT * FROM parquet_metadata('{raw}')",
    "SELECT * FROM parquet_schema('{raw}')",
    "SELECT * FROM parquet_file_metadata('{raw}')",
    "SELECT * FROM parquet_kv_metadata('{raw}')",
    "SELECT * FROM read_duckdb('{rawdb}', table_name => 'raw')",
    "SELECT * FROM '{raw}'",
    "SELECT * FROM \"{raw}\"",
    "FROM '{secret}'",
    "SELECT * FROM '{dir}/*.parquet'",
    "SELECT * FROM read_text('{dir}/../' || '{dirname}/secret.txt')",
    "SELECT content FROM read_text('{secret}') t(content)",
    "FROM read_text('{secret}') SELECT content",
    "SELECT list(content) FROM read_text('{secret}')",
    "SELECT * FROM pragma_table_info('{raw}')",
]

STATEMENTS = [
    "ATTACH '{rawdb}' AS r",
    "ATTACH '{rawdb}' AS r (READ_ONLY)",
    "COPY (SELECT 1 AS x) TO '{out}'",
    "COPY (SELECT COUNT(*) FROM trips) TO '{out}' (FORMAT csv)",
    "COPY trips FROM '{secret}'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "LOAD '{dir}/evil.duckdb_extension'",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET enable_external_access",
    "SET allowed_paths = ['{secret}']",
    "SET allowed_directories = ['{dir}']",
    "SET python_enable_replacements = true",
    "PRAGMA enable_external_access",
    "EXPORT DATABASE '{out}'",
    "IMPORT DATABASE '{dir}'",
    "CALL glob('{dir}/*')",
    "SET VARIABLE s = (SELECT content FROM read_text('{secret}'))",
    "CREATE TABLE x AS SELECT * FROM read_text('{secret}')",
    "CREATE VIEW v AS SELECT * FROM read_parquet('{raw}')",
    "DESCRIBE SELECT * FROM read_parquet('{raw}')",
    "SUMMARIZE SELECT * FROM read_parquet('{raw}')",
    "EXPLAIN SELECT * FROM read_text('{secret}')",
    "PIVOT '{raw}' ON mode USING COUNT(*)",
    # COPY (query) TO STDOUT runs its query as a SELECT sent alone (dpsql.server._copy)
    "COPY (SELECT * FROM read_text('{secret}')) TO STDOUT",
    "COPY (SELECT * FROM read_parquet('{raw}')) TO STDOUT WITH CSV HEADER",
    "COPY (SELECT region, COUNT(*) FROM trips WHERE region IN (SELECT region FROM "
    "read_parquet('{raw}')) GROUP BY region) TO STDOUT",
    "COPY (SELECT * FROM read_text('{secret}')) TO STDOUT; SELECT 1",
    "COPY (SELECT content FROM read_text('{secret}')) TO '{out}'",
]

TRICKS = [
    "SELECT 1; SELECT * FROM read_text('{secret}')",
    "SELECT COUNT(*) FROM trips; SELECT * FROM read_text('{secret}')",
    "SELECT $$;$$ AS x; SELECT * FROM read_text('{secret}')",
    "SELECT E'\\\\';' AS x; SELECT * FROM read_text('{secret}') --'",
    "SELECT * FROM \"read_text\"('{secret}')",
    "SELECT * FROM READ_TEXT('{secret}')",
    "SELECT * FROM main.read_text('{secret}')",
    "SELECT * FROM system.main.read_text('{secret}')",
    "SELECT * FROM read_text/**/('{secret}')",
    "SELECT * FROM read_text ( '{secret}' )",
    "SELECT * FROM read_text('{secret}') -- a comment",
    "/* a comment */ SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_text(concat('{dir}', '/secret.txt'))",
    "SELECT * FROM read_text(['{secret}'])",
    "SELECT * FROM read_text('{secret}'::VARCHAR)",
    "SELECT * FROM query('SELECT * FROM read_text(''{secret}'')')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM query_table('{raw}')",
    "SELECT * FROM query_table('trips__l1')",
    "SELECT getvariable('s')",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql("
    "'SELECT * FROM read_text(''{secret}'')'))",
    "VALUES ((SELECT content FROM read_text('{secret}')))",
    "SELECT * FROM unnest((SELECT list(content) FROM read_text('{secret}')))",
]

NESTED = [
    "SELECT COUNT(*) FROM trips WHERE region IN (SELECT region FROM read_parquet('{raw}'))",
    "SELECT region, COUNT(*) FROM trips WHERE region IN "
    "(SELECT region FROM read_parquet('{raw}') WHERE who LIKE 'RAW%') GROUP BY region",
    "WITH r AS (SELECT * FROM read_parquet('{raw}')) SELECT * FROM r",
    "WITH r AS (SELECT * FROM read_parquet('{raw}')) SELECT region, COUNT(*) FROM trips "
    "WHERE region IN (SELECT region FROM r) GROUP BY region",
    "SELECT region, COUNT(*) FROM trips GROUP BY region UNION ALL "
    "SELECT region, COUNT(*) FROM read_parquet('{raw}') GROUP BY region",
    "SELECT who FROM read_parquet('{raw}') UNION SELECT 'x'",
    "SELECT * FROM (SELECT * FROM read_parquet('{raw}')) s",
    "SELECT (SELECT who FROM read_parquet('{raw}') LIMIT 1)",
    "SELECT t.region, x.who FROM (SELECT region, COUNT(*) AS n FROM trips GROUP BY region) t, "
    "LATERAL (SELECT who FROM read_parquet('{raw}') r WHERE r.region = t.region LIMIT 1) x",
    "SELECT * FROM range(3) r, LATERAL read_text('{secret}')",
    "SELECT region, COUNT(*) FROM trips JOIN read_parquet('{raw}') USING (region) "
    "GROUP BY region",
    "SELECT COUNT(*) FROM trips WHERE EXISTS (SELECT 1 FROM read_text('{secret}'))",
    "SELECT region, COUNT(*) AS n, (SELECT max(who) FROM read_parquet('{raw}')) AS w "
    "FROM trips GROUP BY region",
    "SELECT * FROM (SELECT region, COUNT(*) AS n FROM trips GROUP BY region) t "
    "JOIN (SELECT region, max(who) AS w FROM read_parquet('{raw}') GROUP BY region) r "
    "USING (region)",
    "SELECT * FROM (PIVOT read_parquet('{raw}') ON mode USING COUNT(*))",
    "SELECT COUNT(*) FROM trips WHERE mode IN ('car', (SELECT max(mode) FROM "
    "read_parquet('{raw}')))",
    "SELECT region, COUNT(*) FROM trips GROUP BY region HAVING COUNT(*) > "
    "(SELECT COUNT(*) FROM read_parquet('{raw}'))",
    # a projection subquery is read as the table (inline_subqueries): not its file read
    "SELECT mode, COUNT(*) FROM (SELECT * FROM trips WHERE EXISTS (SELECT 1 FROM "
    "read_text('{secret}'))) AS virtual_table GROUP BY mode",
    "WITH v AS (SELECT mode FROM trips WHERE age < (SELECT COUNT(*) FROM "
    "read_parquet('{raw}'))) SELECT mode, COUNT(*) FROM v GROUP BY mode",
]

URLS = [
    "SELECT * FROM read_csv('https://example.com/x.csv')",
    "SELECT * FROM read_parquet('s3://bucket/raw.parquet')",
    "SELECT * FROM 'https://example.com/raw.parquet'",
    "SELECT * FROM read_text('http://127.0.0.1:9/secret')",
]

HELPERS = [  # the release's public helpers, resolved by the planner: never a way out
    "SELECT * FROM dp_level('{raw}', 1)",
    "SELECT * FROM dp_level('{rawdb}', 1)",
    "SELECT * FROM dp_level((SELECT '{raw}'), 1)",
    "SELECT * FROM dp_level('dist' || (SELECT content FROM read_text('{secret}')), 1)",
    "SELECT * FROM dp_attribute_bounds('{secret}')",
    "SELECT dp_range('{raw}', 'distance', 0, 10)",
    "SELECT dp_cum('{raw}', 'distance', 10)",
    "SELECT * FROM trips.dp_level('{raw}', 1)",
]
# schema discovery (DESCRIBE, SHOW, information_schema, pg_catalog, duckdb_*()) runs on the
# catalog database: a file read hidden in it must be refused like anywhere else
DISCOVERY = [
    "DESCRIBE '{raw}'",
    "DESCRIBE read_parquet('{raw}')",
    "SHOW '{raw}'",
    "SUMMARIZE '{raw}'",
    "SUMMARIZE read_parquet('{raw}')",
    "SELECT * FROM information_schema.tables, read_text('{secret}')",
    "SELECT table_name FROM information_schema.tables WHERE table_name IN "
    "(SELECT content FROM read_text('{secret}'))",
    "SELECT relname FROM pg_catalog.pg_class UNION ALL SELECT who FROM read_parquet('{raw}')",
    "SELECT * FROM duckdb_columns(), read_parquet('{raw}')",
    "SELECT * FROM pg_catalog.pg_namespace n JOIN glob('{dir}/*') g ON true",
    "SELECT * FROM information_schema.columns WHERE column_name = "
    "(SELECT max(who) FROM '{raw}')",
    "SELECT * FROM pragma_table_info('{rawdb}')",
]

ALL = FILE_READERS + STATEMENTS + TRICKS + NESTED + URLS + HELPERS + DISCOVERY

# star expressions on the private table: they would expand to the columns of the release
# table the planner rewrites it onto (dp_count, dp_var, dp_parent, dp_fanout, dp_bias...),
# not to its attributes, and select, group or filter by them (not in ALL: they read no file)
STAR_FORMS = [
    "SELECT COLUMNS(*), COUNT(*) FROM trips GROUP BY ALL",
    "SELECT COLUMNS('.*') FROM trips GROUP BY ALL",
    "SELECT region, COUNT(*), COLUMNS('dp_.*') FROM trips GROUP BY ALL",
    "SELECT COLUMNS(c -> c LIKE 'dp%') FROM trips GROUP BY ALL",
    "SELECT COLUMNS(['dp_var', 'dp_count']), COUNT(*) FROM trips GROUP BY ALL",
    "SELECT *COLUMNS('dp_.*'), COUNT(*) FROM trips GROUP BY ALL",
    "SELECT * LIKE 'dp%', COUNT(*) FROM trips GROUP BY ALL",
    "SELECT * SIMILAR TO 'dp_.*', COUNT(*) FROM trips GROUP BY ALL",
    "SELECT * EXCLUDE (mode), COUNT(*) FROM trips GROUP BY ALL",
    "SELECT * REPLACE (upper(mode) AS mode), COUNT(*) FROM trips GROUP BY ALL",
    "SELECT t.*, COUNT(*) FROM trips t GROUP BY ALL",
    "SELECT COLUMNS(t.*), COUNT(*) FROM trips t GROUP BY ALL",
    "SELECT region, COUNT(*) FROM trips WHERE COLUMNS('dp_p.*') = 0 GROUP BY region",
    "SELECT COUNT(*) FROM trips WHERE COLUMNS('dp_count') > 100",
    "SELECT region, COUNT(*) FROM trips GROUP BY region HAVING MAX(COLUMNS('dp_var')) >= 0",
    "SELECT region, COUNT(*) FROM trips GROUP BY region ORDER BY COLUMNS('dp_var')",
    "SELECT {'a': *}, COUNT(*) FROM trips GROUP BY ALL",
    # through a projection subquery, which is read as the table (inline_subqueries)
    "SELECT v.*, COUNT(*) FROM (SELECT * FROM trips) v GROUP BY ALL",
    "SELECT COLUMNS('dp_.*'), COUNT(*) FROM (SELECT * FROM trips) v GROUP BY ALL",
]

# volatile functions where the release would evaluate them once per released node
VOLATILE_FORMS = [
    "SELECT COUNT(*) FROM trips WHERE random() < 0.5",
    "SELECT region, COUNT(*) FROM trips GROUP BY region, gen_random_uuid()",
]

# ``LIMIT 0`` probes of a logical table are answered from the catalog database (its
# public columns, no row): a file read hidden in one is refused there as anywhere else
SHAPE_PROBES = [
    "SELECT * FROM trips, read_text('{secret}') LIMIT 0",
    "SELECT TRUE AS \"_\" FROM trips WHERE 1 <> 1 AND EXISTS (SELECT 1 FROM "
    "read_parquet('{raw}')) LIMIT 0",
    "SELECT * FROM trips JOIN read_parquet('{raw}') USING (region) LIMIT 0",
    "SELECT mode, (SELECT max(who) FROM read_parquet('{raw}')) AS w FROM trips LIMIT 0",
    "SELECT * FROM trips WHERE mode = (SELECT content FROM read_text('{secret}')) LIMIT 0",
    "SELECT * FROM trips LIMIT 0 OFFSET (SELECT COUNT(*) FROM read_text('{secret}'))",
    "WITH r AS (SELECT * FROM read_parquet('{raw}')) SELECT * FROM trips, r LIMIT 0",
]

ALL = ALL + SHAPE_PROBES

# host information: DuckDB settings whose value is a host path (secret_directory names the
# home directory, allowed_directories the working directory's .tmp), and functions whose
# error names one (duckdb_extensions() names the extension directory under the home). Not
# in ALL: no planted file is read; test_escape checks that no entry point shows the home,
# the working directory or the release's directory.
HOST_INFO = [
    "SELECT current_setting('secret_directory')",
    "SELECT current_setting('allowed_directories')",
    "SELECT region, current_setting('secret_directory') AS s, COUNT(*) FROM trips "
    "GROUP BY ALL",
    "SELECT current_setting('allowed_directories') AS d, COUNT(*) FROM trips",
    "SELECT current_setting(n) AS v, COUNT(*) FROM trips, (SELECT 'secret_directory' AS n) "
    "GROUP BY ALL",
    "SELECT pg_catalog.current_setting('secret_directory') AS s, COUNT(*) FROM trips",
    "SELECT \"current_setting\"('secret_directory') FROM duckdb_tables() LIMIT 1",
    "SELECT current_setting('allowed_directories') FROM information_schema.tables LIMIT 1",
    "SELECT name, value FROM duckdb_settings()",
    "SELECT (SELECT value FROM duckdb_settings() WHERE name = 'secret_directory') AS s, "
    "COUNT(*) FROM trips",
    "SELECT COUNT(*) FROM trips, duckdb_settings() WHERE value LIKE '/%'",
    "SELECT * FROM duckdb_extensions()",
    "SELECT COUNT(*) FROM trips, duckdb_extensions()",
    # duckdb_databases() lists the attached release with its path on the host
    "SELECT path FROM duckdb_databases()",
    "SELECT (SELECT COUNT(*) FROM trips) AS n, path FROM duckdb_databases()",
    "SELECT region, COUNT(*), (SELECT max(path) FROM duckdb_databases()) FROM trips "
    "GROUP BY 1",
    "WITH t AS (SELECT COUNT(*) AS n FROM trips) SELECT * FROM t, duckdb_databases()",
]
