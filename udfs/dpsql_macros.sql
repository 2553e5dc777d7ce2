-- dpsql SQL macros, stored in every release so that any DuckDB client can use them
-- without dpsql installed: duckdb.connect('release.duckdb') then
--   SELECT * FROM dp_level('dist', 3);
--   SELECT dp_range('dist', 'distance', 10, 50);
-- Both read only public release tables (level tables, prefix sums, the catalog).

-- dp_level(view, k): the released nodes of level k of a view (table <view>__l<k>).
CREATE OR REPLACE MACRO dp_level(view, k) AS TABLE
    SELECT * FROM query_table(view || '__l' || CAST(k AS VARCHAR));

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
