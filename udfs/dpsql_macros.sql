-- dpsql SQL macros, stored in every release so that any DuckDB client can use them
-- without dpsql installed: duckdb.connect('release.duckdb') then
--   SELECT * FROM dp_level('dist', 3);
--   SELECT dp_range('dist', 'distance', 10, 50);
-- Both read only public release tables (level tables, prefix sums, the catalog).

-- dpsql_sql_text(x): x written as SQL (a string quoted, NULL as NULL), for error messages.
CREATE OR REPLACE MACRO dpsql_sql_text(x) AS CASE
    WHEN x IS NULL THEN 'NULL'
    WHEN typeof(x) = 'VARCHAR' THEN '''' || replace(CAST(x AS VARCHAR), '''', '''''') || ''''
    ELSE CAST(x AS VARCHAR) END;

-- dpsql_view_depth(view): the number of levels of a view ('view' or 'catalog.view', any
-- case), NULL for no such view. dpsql_view_levels() is written into each release with its
-- own constants: {depth: MAP view -> levels, shown: the views and their levels, as text}.
CREATE OR REPLACE MACRO dpsql_view_depth(view) AS
    dpsql_view_levels().depth[lower(string_split(CAST(view AS VARCHAR), '.')[-1])];

-- dp_level(view, k): the released nodes of level k of a view (table <view>__l<k>).
-- k must be a whole number from 1 to the view's depth, as the planner requires: '1', 1.5,
-- NULL or 7 raise an error naming the value and the levels, not "table not found" (or,
-- for '1', level 1). Everything is constant, so DuckDB raises the error while binding;
-- a macro sees types, not text, so CAST(1 AS INT) and 1 + 1 pass here (the planner
-- refuses them).
CREATE OR REPLACE MACRO dp_level(view, k) AS TABLE
    SELECT * FROM query_table(CASE
        WHEN typeof(k) NOT IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT',
                               'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT', 'UHUGEINT')
        THEN error('dp_level(' || dpsql_sql_text(view) || ', ' || dpsql_sql_text(k)
                   || '): the level k of dp_level(view, k) must be a whole-number literal, got '
                   || dpsql_sql_text(k) || '; ' || CASE
                       WHEN dpsql_view_depth(view) IS NULL
                       THEN dpsql_sql_text(view) || ' is no view; the views are: '
                            || dpsql_view_levels().shown
                       ELSE 'the levels of ' || dpsql_sql_text(view) || ' are 1 to '
                            || dpsql_view_depth(view) END)
        WHEN NOT coalesce(TRY_CAST(k AS BIGINT) BETWEEN 1 AND dpsql_view_depth(view), false)
        THEN error('dp_level(' || dpsql_sql_text(view) || ', ' || dpsql_sql_text(k)
                   || '): no such view and level; the views are: ' || dpsql_view_levels().shown)
        ELSE view || '__l' || CAST(k AS VARCHAR) END);

-- dp_attribute_bounds(attr): lower, upper and bins of a binned attribute, from the catalog.
CREATE OR REPLACE MACRO dp_attribute_bounds(attr) AS TABLE
    SELECT CAST(a ->> 'lower' AS DOUBLE) AS lower, CAST(a ->> 'upper' AS DOUBLE) AS upper,
           CAST(a ->> 'bins' AS BIGINT) AS bins
    FROM (SELECT unnest(from_json(attributes, '["JSON"]')) AS a FROM dpsql_release)
    WHERE a ->> 'name' = attr;

-- dp_cum(view, attr, x): released count of the range [lower, x), from the prefix table
-- (summed over leading groups), with uniform interpolation inside a bin.
CREATE OR REPLACE MACRO dp_cum(view, attr, x) AS (
    WITH m AS (SELECT * FROM dp_attribute_bounds(attr)),
         p AS (SELECT bin, SUM(cum) AS cum FROM query_table(view || '__prefix') GROUP BY bin),
         pos AS (SELECT LEAST(GREATEST((x - m.lower) / ((m.upper - m.lower) / m.bins), 0),
                              m.bins) AS t, m.bins AS bins FROM m),
         j AS (SELECT CAST(LEAST(floor(t), bins - 1) AS BIGINT) AS b, t FROM pos)
    SELECT p0.cum + (j.t - j.b) * (p1.cum - p0.cum)
    FROM j JOIN p AS p0 ON p0.bin = j.b JOIN p AS p1 ON p1.bin = j.b + 1
);

-- dp_range(view, attr, lo, hi): released count of the range [lo, hi) of a range view.
CREATE OR REPLACE MACRO dp_range(view, attr, lo, hi) AS
    dp_cum(view, attr, hi) - dp_cum(view, attr, lo);
