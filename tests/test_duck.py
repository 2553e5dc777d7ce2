"""dpsql.duck: attach, UDFs, portable macros, layering, errors, injection."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from dpsql import duck
from dpsql.errors import ProgrammingError, SqlSyntaxError, UnsupportedQueryError


@pytest.fixture(scope="module")
def con(trips_release):
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    yield c
    c.close()


def test_attach_is_idempotent_and_registers_once(trips_release):
    c = duckdb.connect()
    assert duck.attach(c, str(trips_release)) == "trips"
    assert duck.attach(c, str(trips_release)) == "trips"
    assert duck.attach(c, str(trips_release), name="other") == "other"
    assert {r.alias for r in duck.catalog_of(c).releases} == {"trips", "other"}
    n = c.sql("SELECT COUNT(*) FROM duckdb_functions() WHERE function_name = 'dp_error'"
              ).fetchall()[0][0]
    assert n == 1
    with pytest.raises(duckdb.Error):  # read-only
        c.execute("CREATE TABLE trips.x AS SELECT 1")
    c.close()


def test_attach_rejects_alias_clash(trips_release, tmp_path):
    c = duckdb.connect()
    c.execute(f"ATTACH '{tmp_path / 'x.duckdb'}' AS trips")
    with pytest.raises(ProgrammingError, match="already used"):
        duck.attach(c, str(trips_release))
    c.close()


def test_prefix_udfs(con):
    total = con.sql("SELECT dp_range_count('dist', 'distance', 0, 256)").fetchall()[0][0]
    cum = con.sql("SELECT cum FROM trips.dist__prefix ORDER BY bin").fetchall()
    assert total == pytest.approx(cum[-1][0])
    cdf, q = con.sql("SELECT dp_cdf('trips.dist', 'distance', 256), "
                     "dp_quantile('dist', 'distance', 0.5)").fetchall()[0]
    assert cdf == pytest.approx(1.0)
    back = con.sql(f"SELECT dp_cdf('dist', 'distance', {q})").fetchall()[0][0]
    assert back == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(duckdb.Error):
        con.sql("SELECT dp_range_count('geo_gauss', 'distance', 0, 1)").fetchall()


@settings(max_examples=15, deadline=None)
@given(st.floats(0, 256), st.floats(0, 256), st.floats(0, 1))
@example(0.0, 5e-324, 0.0)  # (x - lower) / width underflows to a bin edge: not aligned
@example(0.0, 1.0, 5e-324)
@example(0.0, 256.0, 1.0)  # the empty range [256, 256) at the top edge
def test_interpolated_ranges_are_additive(con, a, b, t):
    lo, hi = min(a, b), max(a, b)
    mid = lo + t * (hi - lo)
    whole = duck.sql(con, "SELECT COUNT(*) FROM dist WHERE distance >= ? AND distance < ?",
                     [lo, hi]).fetchall()[0][0]
    parts = [duck.sql(con, "SELECT COUNT(*) FROM dist WHERE distance >= ? AND distance < ?",
                      [x, y]).fetchall()[0][0] for x, y in ((lo, mid), (mid, hi))]
    assert whole == pytest.approx(sum(parts), abs=1e-6)
    udf = con.execute("SELECT dp_range_count('dist', 'distance', ?, ?)", [lo, hi]
                      ).fetchall()[0][0]
    assert whole == pytest.approx(udf, abs=1e-6)


def test_hist_quantile():
    c = np.array([0.0, 10.0, -3.0, 10.0])
    lo = np.array([0.0, 1.0, 2.0, 3.0])
    hi = lo + 1
    assert duck.hist_quantile(c, lo, hi, 0.5) == pytest.approx(2.0)
    assert duck.hist_quantile(c, lo, hi, 0.25) == pytest.approx(1.5)
    assert duck.hist_quantile(np.zeros(3), lo[:3], hi[:3], 0.5) is None


def test_macros_work_without_dpsql(trips_release):
    code = (
        "import sys, duckdb\n"
        f"con = duckdb.connect({str(trips_release)!r}, read_only=True)\n"
        "print(con.sql(\"SELECT COUNT(*) FROM dp_level('dist', 2)\").fetchall()[0][0])\n"
        "print(con.sql(\"SELECT dp_range('dist', 'distance', 8, 48)\").fetchall()[0][0])\n"
        "print(con.sql(\"SELECT dp_range('mode_dist', 'distance', 0, 256)\").fetchall()[0][0])\n"
        "assert not any(m == 'dpsql' or m.startswith('dpsql.') for m in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) == 4
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    want = duck.sql(c, "SELECT COUNT(*) FROM dist WHERE distance >= 8 AND distance < 48"
                    ).fetchall()[0][0]
    total = c.sql("SELECT SUM(dp_count) FROM trips.mode_dist__l1").fetchall()[0][0]
    c.close()
    assert float(out[1]) == pytest.approx(want, abs=1e-6)
    assert float(out[2]) == pytest.approx(total)


VIEWS_SHOWN = ("'age_tree' (levels 1-2), 'dist' (levels 1-6), 'geo_gauss' (levels 1-3), "
               "'geo_mode' (levels 1-4), 'mode_dist' (levels 1-3)")


@pytest.mark.parametrize("view, k, message", [
    ("'dist'", "'1'", "got '1'; the levels of 'dist' are 1 to 6"),
    ("'dist'", "1.5", "got 1.5; the levels of 'dist' are 1 to 6"),
    ("'dist'", "2.0", "got 2.0; the levels of 'dist' are 1 to 6"),
    ("'dist'", "NULL", "got NULL; the levels of 'dist' are 1 to 6"),
    ("'nope'", "1.5", f"got 1.5; 'nope' is no view; the views are: {VIEWS_SHOWN}"),
    ("'dist'", "7", f"no such view and level; the views are: {VIEWS_SHOWN}"),
    ("'dist'", "0", f"no such view and level; the views are: {VIEWS_SHOWN}"),
    ("'nope'", "1", f"no such view and level; the views are: {VIEWS_SHOWN}"),
])
def test_stored_dp_level_refuses_what_the_planner_refuses(trips_release, view, k, message):
    """The macro stored for plain DuckDB clients read level 1 for dp_level('dist', '1'),
    and for 1.5, 2.0 or 7 failed with "Table with name dist__l1.5 does not exist"; it now
    refuses them while binding, naming the value and the levels as the planner does."""
    con = duckdb.connect(str(trips_release), read_only=True)
    try:
        with pytest.raises(duckdb.InvalidInputException) as got:
            con.sql(f"SELECT COUNT(*) FROM dp_level({view}, {k})").fetchall()
    finally:
        con.close()
    assert str(got.value).split("Error: ", 1)[1] == f"dp_level({view}, {k}): " + (
        message if message.startswith("no such") else
        "the level k of dp_level(view, k) must be a whole-number literal, " + message)


def test_stored_dp_level_reads_the_level_table(trips_release):
    """A whole-number level (any integer type, any case, 'catalog.view') reads the level
    table, as before."""
    con = duckdb.connect(str(trips_release), read_only=True)
    want = con.sql("SELECT * FROM dist__l2 ORDER BY ALL").fetchall()
    for view, k in [("'dist'", "2"), ("'DIST'", "2"), ("'trips.dist'", "2"),
                    ("'dist'", "CAST(2 AS UTINYINT)"), ("'dist'", "2::HUGEINT")]:
        assert con.sql(f"SELECT * FROM dp_level({view}, {k}) ORDER BY ALL").fetchall() == want
    assert con.sql("SELECT COUNT(*) FROM dp_level('geo_mode', 4)").fetchall() == \
        con.sql("SELECT COUNT(*) FROM geo_mode__l4").fetchall()
    con.close()


def _imported_by_query_side(prefixes: tuple[str, ...]) -> str:
    code = ("import sys, dpsql.duck, dpsql.planner\n"
            f"print([m for m in sys.modules if m.startswith({prefixes!r})])\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_query_side_never_imports_mechanisms():
    assert _imported_by_query_side(("dpsql.mechanisms", "dpsql.release.build",
                                    "dpsql.release.ingest")) == "[]"


def test_query_side_reads_releases_without_the_builders_package():
    # the catalog reader is dpsql.release_file; dpsql.release (the curator's package) stays unloaded
    code = ("import sys, dpsql.duck, dpsql.planner, dpsql.dbapi\n"
            "print(sorted(m for m in sys.modules\n"
            "             if m == 'dpsql.release' or m.startswith('dpsql.release.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_query_side_never_loads_the_rng_modules():
    assert _imported_by_query_side(("dpsql.privacy.generator",
                                    "dpsql.privacy.samplers")) == "[]"


UNSUPPORTED = [
    ("SELECT * FROM trips", "SELECT \\*"),
    ("SELECT t.* FROM trips AS t", "SELECT \\*"),
    ("SELECT region FROM trips", "row-level access"),
    # DISTINCT is a GROUP BY (answered), except where it keeps rows
    ("SELECT DISTINCT ON (region) region, mode FROM trips", "row-level access"),
    ("SELECT DISTINCT region, row_number() OVER () FROM trips", "row-level access"),
    ("SELECT DISTINCT * FROM trips", "SELECT \\*"),
    ("SELECT DISTINCT distance FROM trips", "without an aggregate"),
    ("SELECT region, distance, COUNT(*) FROM trips GROUP BY ALL", "no single view"),
    ("SELECT region, distance FROM trips GROUP BY ALL", "without an aggregate"),
    ("SELECT distance * 2, COUNT(*) FROM trips GROUP BY 1", "binned attribute"),
    ("SELECT SUM(mode) FROM trips", "categorical attribute"),
    ("SELECT AVG(region) FROM trips", "categorical attribute"),
    ("SELECT MIN(age) FROM trips", "MIN"),
    ("SELECT COUNT(DISTINCT mode) FROM trips", "COUNT\\(DISTINCT"),
    ("SELECT colour, COUNT(*) FROM trips GROUP BY colour", "not an attribute"),
    ("SELECT age, COUNT(*) FROM geo_mode GROUP BY age", "are in no view"),
    ("SELECT region, COUNT(*) FROM trips WHERE age < 30 GROUP BY region", "no single view"),
    ("SELECT COUNT(*) FROM geo_gauss WHERE age < 30", "are in no view"),
    ("SELECT COUNT(*) FROM trips WHERE mode = 'car' OR region = 'R1'", "OR across"),
    ("SELECT COUNT(*) FROM trips WHERE distance < 5 OR mode = 'car'", "OR across"),
    ("SELECT COUNT(*) FROM trips WHERE distance = 5", "real-valued attribute"),
    ("SELECT COUNT(*) FROM trips WHERE distance < age", "numeric literal"),
    ("DELETE FROM trips", "DELETE"),
    ("DROP TABLE trips", "DROP"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM trips", "CREATE"),
    ("INSERT INTO trips VALUES (1)", "INSERT"),
    ("SELECT COUNT(*) FROM trips a JOIN trips b ON a.region = b.region", "two private"),
    ("SELECT dp_stderr() FROM (SELECT COUNT(*) FROM trips)", "dp_stderr"),
    ("SELECT region, dp_stderr() FROM trips GROUP BY region", "COUNT"),
    ("SELECT COUNT(*), dp_ci_low(95) FROM trips", "in \\(0, 1\\)"),
    ("SELECT SUM(r.x) FROM trips t JOIN (SELECT 1 AS x, 'R1' AS region) r "
     "ON t.region = r.region", "joined"),
    ("SELECT COUNT(*) FROM trips; SELECT 1", "one SELECT"),
    ("SELECT MEDIAN(mode) FROM trips", "not a binned"),
    ("SELECT COUNT(*) OVER () FROM trips", "row-level"),
    ("SELECT mode, COUNT(*) FILTER (WHERE region = 'R1') FROM trips GROUP BY mode", "FILTER"),
    ("SELECT COUNT(*) FROM trips USING SAMPLE 10%", "sampling"),
    ("SELECT COUNT(*) FROM trips TABLESAMPLE (10 PERCENT)", "sampling"),
    # an outer join that pads the private side: SQL's COUNT(*) counts the padded row as 1
    ("SELECT r.x, COUNT(*) FROM (SELECT 'R9' AS x) r LEFT JOIN trips t ON t.region = r.x "
     "GROUP BY r.x", "pad the private table"),
    ("SELECT r.x, COUNT(1) FROM trips t RIGHT JOIN (SELECT 'R9' AS x) r ON t.region = r.x "
     "GROUP BY r.x", "pad the private table"),
    ("SELECT r.x, SUM(1) FROM trips t FULL JOIN (SELECT 'R9' AS x) r ON t.region = r.x "
     "GROUP BY r.x", "pad the private table"),
    ("SELECT r.x, COUNT(*) FROM (SELECT 'a' AS x) r CROSS JOIN trips t "
     "LEFT JOIN (SELECT 'R1' AS y) s ON s.y = t.region RIGHT JOIN (SELECT 1 AS z) u ON TRUE "
     "GROUP BY r.x", "pad the private table"),
    ("SELECT r.x, COUNT(*) FROM trips t POSITIONAL JOIN (SELECT 'a' AS x) r GROUP BY r.x",
     "POSITIONAL"),
    ("SELECT r.x, COUNT(t.mode) FROM (SELECT 'a' AS x) r POSITIONAL JOIN trips t "
     "GROUP BY r.x", "POSITIONAL"),
    ("SELECT COUNT(*) FROM trips WHERE EXISTS (SELECT 1 FROM (SELECT 1) AS v(x) "
     "WHERE trips.distance < 40)", "is used inside a subquery"),
    ("SELECT COUNT(*) FROM trips WHERE region IN (SELECT 'R1' WHERE dp_count > 3)",
     "dp_count in WHERE"),
    # PIVOT aggregates the rows it is given: the private table only in an aggregating SELECT
    ("PIVOT trips ON mode USING COUNT(*) GROUP BY region", "may only appear in the FROM"),
    # constants summed over the private rows are not counts dpsql can back (SUM(1) is)
    ("SELECT SUM(2) FROM trips", "SUM\\(2\\) over the private table is not supported"),
    ("SELECT region, MAX(1) FROM trips GROUP BY region", "MAX\\(1\\) over the private"),
    # NATURAL joins on every shared name, and node rows carry only the names a query uses
    ("SELECT mode, COUNT(*) FROM trips NATURAL JOIN (SELECT 'R1' AS region, 'car' AS mode) "
     "GROUP BY mode", "NATURAL JOIN"),
    ("SELECT COUNT(*) FROM (SELECT 'R1' AS region) p NATURAL LEFT JOIN trips", "NATURAL JOIN"),
    # an output alias named like a column of the node, prefix or bin rows would bind there
    ("SELECT mode, COUNT(*) AS rowid FROM trips GROUP BY mode HAVING rowid > 3000",
     "alias 'rowid' is used in HAVING"),
    ("SELECT mode, COUNT(*) AS bin FROM mode_dist WHERE distance < 40 GROUP BY mode "
     "HAVING bin > 3000", "alias 'bin' is used in HAVING"),
    ("SELECT UPPER(mode) AS cum, COUNT(*) FROM mode_dist WHERE distance < 40 GROUP BY cum",
     "alias 'cum' is used in GROUP"),
    ("SELECT UPPER(mode) AS dp_var, COUNT(*) FROM trips WHERE dp_var = 'CAR' GROUP BY 1",
     "alias 'dp_var' is used in WHERE"),
    ("SELECT mode AS distance_lo, COUNT(*) FROM mode_dist GROUP BY distance_lo",
     "alias 'distance_lo' is used in GROUP"),
]


@pytest.mark.parametrize("query,message", UNSUPPORTED)
def test_unsupported_forms_raise_specific_errors(con, query, message):
    with pytest.raises(UnsupportedQueryError, match=message):
        duck.plan(con, query)


@pytest.mark.parametrize("query", [
    # the private side is never padded: COUNT(*) is exactly the release's count
    "SELECT r.x, COUNT(*) FROM trips t LEFT JOIN (SELECT 'R1' AS x) r ON t.region = r.x "
    "GROUP BY r.x",
    "SELECT r.x, COUNT(*) FROM (SELECT 'R1' AS x) r RIGHT JOIN trips t ON t.region = r.x "
    "GROUP BY r.x",
    "SELECT r.x, COUNT(*) FROM trips t JOIN (SELECT 'R1' AS x) r ON t.region = r.x "
    "GROUP BY r.x",
    # padded, but these skip the padded row as SQL does: 0 where nothing matched
    "SELECT r.x, COUNT(t.mode) FROM (SELECT 'R9' AS x) r LEFT JOIN trips t "
    "ON t.region = r.x GROUP BY r.x",
    "SELECT r.x, SUM(t.dp_count) FROM (SELECT 'R9' AS x) r LEFT JOIN trips t "
    "ON t.region = r.x GROUP BY r.x",
])
def test_outer_joins_that_count_private_rows_only_are_planned(con, query):
    assert duck.sql(con, query).fetchall()


def test_different_units_are_refused(trips_release, exact_release, tmp_path):
    from dataclasses import replace
    from dpsql.planner import plan_query
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    duck.attach(c, str(exact_release), name="exact")
    cat = duck.catalog_of(c)
    other = replace(cat.releases[1], release=replace(cat.releases[1].release,
                                                     neighbouring="substitute"))
    cat2 = cat.with_release(other)
    q = ("SELECT * FROM (SELECT COUNT(*) FROM trips.trips) a, "
         "(SELECT COUNT(*) FROM exact.trips) b")
    assert duck.sql(c, q).fetchall()
    with pytest.raises(UnsupportedQueryError, match="different privacy units"):
        plan_query(cat2, q)
    c.close()


def test_syntax_errors_carry_position(con):
    with pytest.raises(SqlSyntaxError) as e:
        duck.plan(con, "SELECT COUNT(*)\nFROM trips WHERE")
    assert e.value.line == 2 and e.value.col is not None


def test_a_parameter_may_carry_a_cast(con):
    """``?::INT`` (one token to sqlglot) is a parameter with a cast, bound in text order;
    a cast is DuckDB's (dpsql.planner.fold_constants): ``30.5::INT`` is 31, ``'30'::INT``
    30, as on the data."""
    plain = duck.sql(con, "SELECT mode, COUNT(*) FROM mode_dist WHERE distance < ? AND "
                          "mode = ? GROUP BY mode", [32, "car"]).fetchall()
    for q in ("SELECT mode, COUNT(*) FROM mode_dist WHERE distance < ?::INT AND "
              "mode = ?::VARCHAR GROUP BY mode",
              "SELECT mode, COUNT(*) FROM mode_dist WHERE distance < ?::DOUBLE AND "
              "mode = ? GROUP BY mode",
              "SELECT mode, COUNT(*) FROM mode_dist WHERE distance < TRY_CAST(? AS BIGINT) "
              "AND mode = ? GROUP BY mode"):
        assert duck.sql(con, q, [32, "car"]).fetchall() == plain
    assert duck.sql(con, "SELECT COUNT(*) FROM trips WHERE age BETWEEN $1::INT AND $2",
                    [20, 40]).fetchall() == duck.sql(
        con, "SELECT COUNT(*) FROM trips WHERE age BETWEEN 20 AND 40").fetchall()
    for q, params, bound in (("SELECT COUNT(*) FROM trips WHERE age < ?::INT", [30.5], 31),
                             ("SELECT COUNT(*) FROM trips WHERE age < ?::DECIMAL(4, 1)", [30],
                              30),
                             ("SELECT COUNT(*) FROM trips WHERE age < ?::TINYINT", [30], 30),
                             ("SELECT COUNT(*) FROM trips WHERE age < ?::INT", ["30"], 30)):
        assert duck.sql(con, q, params).fetchall() == duck.sql(
            con, f"SELECT COUNT(*) FROM trips WHERE age < {bound}").fetchall()


def test_parameters_never_change_the_shape(con):
    evil = "car' OR 1=1 --"
    rows = duck.sql(con, "SELECT COUNT(*) FROM trips WHERE mode = ?", [evil]).fetchall()
    assert rows == [(0,)]
    with pytest.raises(ProgrammingError, match="placeholders"):
        duck.plan(con, "SELECT COUNT(*) FROM trips WHERE mode = ?", [])
    with pytest.raises(ProgrammingError):
        duck.plan(con, "SELECT COUNT(*) FROM trips WHERE mode = ?", [object()])


def test_injection_in_literals_and_identifiers_is_harmless(con):
    rows = duck.sql(con, "SELECT COUNT(*) FROM trips WHERE mode = 'x''); DROP TABLE t; --'"
                    ).fetchall()
    assert rows == [(0,)]
    with pytest.raises(UnsupportedQueryError):
        duck.plan(con, 'SELECT "mode""; DROP", COUNT(*) FROM trips GROUP BY 1')
    assert con.sql("SELECT COUNT(*) FROM trips.dpsql_views").fetchall()[0][0] == 5


def test_public_queries_pass_through(con):
    planned = duck.plan(con, "SELECT name FROM trips.dpsql_views ORDER BY name")
    assert planned.info["private"] is False
    assert duck.sql(con, "SELECT COUNT(*) FROM trips.geo_gauss__l1").fetchall() == [(4,)]


def test_sparse_levels_get_node_tables_and_work_without_them(trips_release):
    c = duckdb.connect()
    duck.attach(c, str(trips_release))
    view = duck.catalog_of(c).find_view("geo_mode")
    assert all(t.startswith("dpsql_nodes.") for t in view.node_tables[3:])
    n_public = view.meta.level(4).n_nodes
    assert c.sql(f"SELECT COUNT(*) FROM {view.node_table(4)}").fetchall()[0][0] == n_public
    q = ("SELECT mode, COUNT(*), dp_bound(0.05) FROM geo_mode WHERE region = 'R1' "
         "GROUP BY mode ORDER BY mode")
    want = duck.sql(c, q).fetchall()
    c.close()
    # a read-only database instance cannot host the node tables: joins per query instead
    ro = duckdb.connect(str(trips_release), read_only=True)
    duck.attach(ro, str(trips_release), name="again")
    view = duck.catalog_of(ro).find_view("again.geo_mode")
    assert view.node_table(4) == ""
    assert duck.sql(ro, q.replace("FROM geo_mode", "FROM again.geo_mode")).fetchall() == want
    ro.close()


@pytest.mark.parametrize("fixture", ["trips_release", "commutes_release"])
def test_node_table_rowid_is_the_node_id(request, fixture):
    """A sparse level's node table lists every public node in node-id order: row i is
    node i of the public tree the mechanism ran on (domains kept in the curator's order,
    not sorted; interleaved levels in level order), for every level."""
    from dpsql import domains
    from dpsql.release.build import attribute_tree
    from dpsql.spec import ReleaseSpec

    path = request.getfixturevalue(fixture)
    c = duckdb.connect()
    duck.attach(c, str(path))
    release = duck.catalog_of(c).releases[0]
    # the stored spec is its public part (no source): any source name rebuilds the trees
    spec = ReleaseSpec.from_dict({**release.release.spec, "source": "unused.parquet"})
    checked = 0
    for view in release.views:
        if view.dense:
            continue
        sv = spec.view(view.meta.name)
        combine = domains.interleave if sv.interleave else domains.concat
        tree = combine(*(attribute_tree(spec.attributes[a]) for a in sv.levels))
        for lv in view.meta.levels:
            table = view.node_table(lv.k)  # the level table itself when it is complete
            assert table, (view.meta.name, lv.k)
            rel = c.sql(f"SELECT * FROM {table} ORDER BY rowid")
            rows = dict(zip(rel.columns, zip(*rel.fetchall())))
            labels = tree.labels(lv.k, np.arange(tree.size(lv.k)))
            for col, codes in labels.items():
                if col.endswith("_hi"):
                    continue
                if col.endswith("_lo"):  # a bin: its first bin index
                    got = rows[col[:-3] + "_bin_lo"]
                    want = codes
                else:
                    got, want = rows[col], tree.values(col)[codes]
                assert list(got) == list(want), (view.meta.name, lv.k, col)
            checked += 1
    assert checked >= 4
    c.close()


@pytest.mark.parametrize("fixture", ["trips_release", "commutes_release"])
def test_unordered_node_rows_carry_a_unique_key_per_public_node(request, fixture):
    """The per-query form of a sparse level for a node-counting model (InfTDA): every
    public node once, each with its own dp_key, so the bound counts the right nodes."""
    from dpsql.planner.level_rows import dense_nodes_sql

    c = duckdb.connect()
    duck.attach(c, str(request.getfixturevalue(fixture)))
    release = duck.catalog_of(c).releases[0]
    sparse = [v for v in release.views if not v.dense]
    assert sparse and all(v.model.counts_nodes for v in sparse)
    for view in sparse:
        for lv in view.meta.levels:
            sql = dense_nodes_sql(view, lv.k, release.attributes, release.size)
            assert "ORDER BY" not in sql and "row_number" not in sql
            n, keys, total = c.execute(f"SELECT count(*), count(DISTINCT dp_key), "
                                       f"sum(dp_count) FROM ({sql})").fetchone()
            assert n == keys == lv.n_nodes, (view.meta.name, lv.k)
            assert total == c.execute(f"SELECT sum(dp_count) FROM "
                                      f"{view.node_table(lv.k)}").fetchone()[0]
    c.close()


def test_one_node_per_group_keeps_sql_errors(con):
    # grouped by province alone, region is neither grouped nor aggregated: DuckDB's error
    with pytest.raises(ProgrammingError, match="GROUP BY"):
        duck.plan(con, "SELECT region, province, COUNT(*) FROM geo_gauss GROUP BY province")
    planned = duck.plan(con, "SELECT province, COUNT(*) FROM geo_gauss GROUP BY province")
    assert "GROUP BY" not in planned.sql  # one node per province: no aggregation needed


def test_grouped_ranges_read_the_prefix_table(con):
    q = "SELECT mode, COUNT(*) AS n FROM mode_dist WHERE distance >= 8 AND distance < 40 " \
        "GROUP BY mode ORDER BY mode"
    planned = duck.plan(con, q)
    assert planned.info["read_table"] == "mode_dist__prefix"
    assert planned.info["level_table"] == "mode_dist__l3"
    by_leaves = con.sql(
        "SELECT d.mode, COALESCE(SUM(l.dp_count), 0) FROM (SELECT DISTINCT mode FROM "
        "trips.dpsql_domain__mode) AS d LEFT JOIN trips.mode_dist__l3 AS l ON l.mode = d.mode "
        "AND l.distance_lo >= 8 AND l.distance_hi <= 40 GROUP BY d.mode ORDER BY d.mode"
    ).fetchall()
    got = con.sql(planned.sql).fetchall()
    assert got == by_leaves and con.sql(planned.sql).types[1] == "BIGINT"
    # error columns need the nodes: the level table, not the prefix
    info = duck.plan(con, q.replace("AS n", "AS n, dp_bound(0.05)")).info
    assert info["read_table"] == "mode_dist__l3"


def test_range_predictions_precomputed_or_memoized_agree(trips_release, monkeypatch):
    queries = ["SELECT COUNT(*) FROM trips WHERE distance >= 8 AND distance < 48",
               "SELECT COUNT(*) FROM trips WHERE age BETWEEN 17.5 AND 60",
               "SELECT COUNT(*) FROM dist WHERE distance >= 256"]
    pre = duckdb.connect()
    duck.attach(pre, str(trips_release))
    assert duck.catalog_of(pre).find_view("dist").range_errors is not None
    monkeypatch.setattr(duck, "MAX_PRECOMPUTED_BINS", 0)
    lazy = duckdb.connect()
    duck.attach(lazy, str(trips_release))
    view = duck.catalog_of(lazy).find_view("dist")
    assert view.range_errors is None
    for q in queries:
        want = duck.plan(pre, q).info["candidates"]
        assert duck.plan(lazy, q).info["candidates"] == want  # computed, then memoized
        assert duck.plan(lazy, q).info["candidates"] == want
    assert any(k[0] == "range" for k in view.predictions)
    pre.close()
    lazy.close()


def test_median_and_dp_quantile_are_one_estimator(con):
    """MEDIAN() (a group's histogram) and the dp_quantile UDF (the prefix table) give the same
    number: both invert the isotonic fit of the released CDF (dpsql.postprocess)."""
    for p in (0.1, 0.5, 0.9):
        udf = con.sql(f"SELECT dp_quantile('dist', 'distance', {p})").fetchall()[0][0]
        planned = duck.sql(con, f"SELECT dp_quantile(distance, {p}) FROM dist").fetchall()[0][0]
        assert planned == pytest.approx(udf, rel=1e-9, abs=1e-9)
    med = duck.sql(con, "SELECT MEDIAN(distance) FROM dist").fetchall()[0][0]
    assert med == pytest.approx(con.sql("SELECT dp_quantile('dist', 'distance', 0.5)"
                                        ).fetchall()[0][0], rel=1e-9)


@pytest.mark.statistical
def test_quantile_does_not_lean_into_a_noisy_sparse_tail():
    """Clipping negative bins at 0 adds mass to a sparse tail and drags the median into it;
    the isotonic CDF fit does not. Truth: 50 rows in bin 0, 50 in bin 1, nothing after."""
    rng = np.random.default_rng(7)
    k = 200
    lo = np.arange(k, dtype=float)
    clipped, fitted = [], []
    for _ in range(200):
        c = np.zeros(k)
        c[:2] = 50
        c += rng.normal(0, 1, k)  # the noisy total stays near 100 (sd 14)
        fitted.append(duck.hist_quantile(c, lo, lo + 1, 0.5))
        pos = np.maximum(c, 0)
        cum = np.cumsum(pos)
        j = int(np.searchsorted(cum, 0.5 * cum[-1]))
        clipped.append(j + (0.5 * cum[-1] - (cum[j] - pos[j])) / pos[j])
    # true median 1.0; clipping adds E[max(Z, 0)]·198 ≈ 79 rows of phantom mass to the tail
    assert abs(np.median(fitted) - 1.0) < 0.1      # measured 0.98 (each draw sd 0.14)
    assert np.median(clipped) > 1.5                # measured 1.78: leans into the tail


def test_connections_sharing_one_instance_share_the_attachment(trips_release, tmp_path):
    """Two duckdb.connect() of one file (and cursors) are one DuckDB instance: functions and
    ATTACHes are shared, so attaching through each must work and see the same releases."""
    db = str(tmp_path / "analysis.duckdb")
    c1, c2 = duckdb.connect(db), duckdb.connect(db)
    assert duck.attach(c1, str(trips_release)) == "trips"
    assert duck.attach(c2, str(trips_release)) == "trips"
    assert duck.attach(c1.cursor(), str(trips_release)) == "trips"
    q = "SELECT region, COUNT(*), dp_stderr() FROM trips GROUP BY region ORDER BY region"
    assert duck.sql(c2, q).fetchall() == duck.sql(c1, q).fetchall()
    assert c2.sql("SELECT dp_quantile('dist', 'distance', 0.5)").fetchall()[0][0] is not None
    c1.close()
    c2.close()


def test_inftda_answers_are_memoised_per_view_and_node_set(trips_release, exact_release):
    """An InfTDA answer's error columns are computed once per (view, level, confidence,
    node set) and reused (dp_ci_low/high of a row; groups holding the same nodes; a
    re-issued query). Two releases attached side by side hold the same node codes with
    other supports: each answers as it does attached alone, in either order."""
    q = ("SELECT region, COUNT(*), dp_stderr(), dp_ci_low(0.9), dp_ci_high(0.9) "
         "FROM {}.geo_mode GROUP BY region ORDER BY region")

    def alone(path, alias):
        c = duckdb.connect()
        duck.attach(c, str(path), alias)
        return duck.sql(c, q.format(alias)).fetchall()

    expected = {"a": alone(trips_release, "a"), "b": alone(exact_release, "b")}
    assert expected["a"] != expected["b"]
    c = duckdb.connect()
    duck.attach(c, str(trips_release), "a")
    duck.attach(c, str(exact_release), "b")
    for alias in ("a", "b", "a", "b"):
        assert duck.sql(c, q.format(alias)).fetchall() == expected[alias]
