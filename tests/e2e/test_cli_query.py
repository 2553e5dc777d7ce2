"""`dpsql query`: SQL in, answers out, through the CLI (in-process and as a subprocess).

Counts are checked against plain DuckDB on the raw parquet with the exact release
(ρ = 1e12, STYLE §5a), and the interval columns against the row's own count.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import duckdb
import pytest

from dpsql.cli import main

BY_MODE = "SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode ORDER BY mode"
MODES = sorted(["car", "train", "bus", "bike", "walk", "plane"])


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["query", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def raw_by_mode(trips_data) -> dict[str, int]:
    src = str(trips_data / "trips.parquet")
    rows = duckdb.connect().execute(f"SELECT mode, COUNT(*) FROM '{src}' GROUP BY mode"
                                    ).fetchall()
    return {m: n for m, n in rows}


def test_table_output_has_error_column(capsys, trips_release):
    code, out, err = run(capsys, trips_release, BY_MODE)
    assert code == 0, err
    assert "mode" in out and "95% CI" in out
    assert "±" in out or "[" in out
    for mode in MODES:
        assert mode in out
    assert "6 row(s)" in out
    assert "NOT private" in err  # the fixture release is seeded


def test_table_without_error_column(capsys, trips_release):
    code, out, _ = run(capsys, trips_release, BY_MODE, "--no-ci")
    assert code == 0
    assert "CI" not in out and "±" not in out
    assert "6 row(s)" in out


def test_csv_output_matches_duckdb_on_exact_release(capsys, exact_release, raw_by_mode):
    code, out, err = run(capsys, exact_release, BY_MODE, "--format", "csv")
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["mode", "n"]  # csv carries only the columns asked for
    got = {m: float(n) for m, n in rows[1:]}
    assert [m for m, _ in rows[1:]] == MODES
    for mode, n in raw_by_mode.items():
        assert got[mode] == pytest.approx(n, abs=1e-6)


def test_csv_with_interval_columns(capsys, trips_release):
    code, out, err = run(capsys, trips_release, BY_MODE, "--format", "csv", "--ci", "0.9")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert set(rows[0]) == {"mode", "n", "dp_ci_low", "dp_ci_high"}
    for r in rows:
        assert float(r["dp_ci_low"]) <= float(r["n"]) <= float(r["dp_ci_high"])
        assert float(r["dp_ci_high"]) > float(r["dp_ci_low"])


def test_json_output(capsys, trips_release):
    code, out, err = run(capsys, trips_release, BY_MODE, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["columns"] == ["mode", "n"]
    assert [r["mode"] for r in doc["rows"]] == MODES
    assert all(isinstance(r["n"], (int, float)) for r in doc["rows"])
    assert doc["dp_info"]["privacy"] == "seeded: not private"
    assert doc["dp_info"]["view"]


def test_json_dp_info_says_each_fact_once(capsys, trips_release):
    code, out, err = run(capsys, trips_release, BY_MODE, "--format", "json")
    assert code == 0, err
    info = json.loads(out)["dp_info"]
    assert "references" not in info  # one table: its fields once, flat
    assert info["view"] and info["level_table"] and info["private"] is True
    assert out.count('"level_table"') == 1
    two = ("SELECT a.mode, a.n, b.n AS m FROM (SELECT mode, COUNT(*) AS n FROM trips "
           "GROUP BY mode) a JOIN (SELECT mode, COUNT(*) AS n FROM trips.geo_mode "
           "GROUP BY mode) b ON a.mode = b.mode")
    code, out, err = run(capsys, trips_release, two, "--format", "json")
    assert code == 0, err
    info = json.loads(out)["dp_info"]
    assert [r["table"] for r in info["references"]] == ["trips", "geo_mode"]
    assert "view" not in info and info["privacy"] == "seeded: not private"
    assert out.count('"level_table"') == 2


def test_footer_does_not_deny_error_columns_the_query_asked_for(capsys, trips_release):
    sql = ("SELECT mode, COUNT(*) AS n, dp_ci_low(0.9) AS lo, dp_ci_high(0.9) AS hi "
           "FROM trips GROUP BY mode ORDER BY mode")
    code, out, err = run(capsys, trips_release, sql)
    assert code == 0, err
    assert "lo" in out and "hi" in out and "no error columns" not in out
    code, out, err = run(capsys, trips_release,
                         "SELECT mode, COUNT(*), dp_stderr() FROM trips GROUP BY mode")
    assert code == 0, err
    assert "dp_stderr" in out and "no error columns" not in out  # PostgreSQL-like name
    # a query that does not count in its outer SELECT still gets the note
    code, out, err = run(capsys, trips_release,
                         "WITH m AS (SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode) "
                         "SELECT mode FROM m")
    assert code == 0, err
    assert "no error columns" in out


def test_parameters(capsys, exact_release, raw_by_mode):
    code, out, err = run(capsys, exact_release,
                         "SELECT COUNT(*) AS n FROM trips WHERE mode = ?", "-p", "bus",
                         "--format", "json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["n"] == pytest.approx(raw_by_mode["bus"], abs=1e-6)
    code, out, err = run(capsys, exact_release,
                         "SELECT COUNT(*) AS n FROM trips WHERE age >= ? AND age < ?",
                         "-p", "20", "-p", "40", "--format", "csv")
    assert code == 0, err
    src = str(exact_release.parent / "trips.parquet")
    want = duckdb.connect().execute(
        f"SELECT COUNT(*) FROM '{src}' WHERE age >= 20 AND age < 40").fetchone()[0]
    assert float(out.splitlines()[1]) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("sql, words", [
    ("SELECT * FROM trips", "SELECT *"),
    ("SELEC mode FROM trips", ""),
    ("DROP TABLE trips", ""),
])
def test_errors_are_one_line_and_exit_1(capsys, trips_release, sql, words):
    code, out, err = run(capsys, trips_release, sql)
    assert code == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and words in lines[0]


def test_missing_release(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "missing.duckdb", BY_MODE)
    assert code == 1
    assert err.startswith("error:") and "missing.duckdb" in err and "Traceback" not in err


def test_bad_confidence(capsys, trips_release):
    code, _, err = run(capsys, trips_release, BY_MODE, "--ci", "1.5")
    assert code == 1 and "between 0 and 1" in err


def test_query_without_count_in_outer_select_still_runs(capsys, trips_release):
    # the error columns cannot attach to this outer SELECT: the query runs as written
    sql = ("WITH m AS (SELECT mode, COUNT(*) AS n FROM trips GROUP BY mode) "
           "SELECT mode FROM m ORDER BY mode")
    code, out, err = run(capsys, trips_release, sql)
    assert code == 0, err
    for mode in MODES:
        assert mode in out


def test_query_reading_nothing_private(capsys, trips_release):
    code, out, err = run(capsys, trips_release, "SELECT 42 AS x")
    assert code == 0, err
    assert "42" in out and "CI" not in out and "no error columns" not in out
    assert "reads no private table" in out


def test_subprocess_csv_and_error(trips_release):
    ok = subprocess.run([sys.executable, "-m", "dpsql.cli", "query", str(trips_release),
                         BY_MODE, "--format", "csv"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "mode,n" and len(ok.stdout.splitlines()) == 7
    bad = subprocess.run([sys.executable, "-m", "dpsql.cli", "query", str(trips_release),
                          "SELECT * FROM trips"], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr
    assert len([x for x in bad.stderr.splitlines() if x.startswith("error:")]) == 1


def test_labels_and_names_that_look_like_markup_are_printed_as_written(capsys,
                                                                       typed_release):
    """Category labels "[bold]x", "[/]" and "a :smile: [link=http://x]b" and a column
    named "[red]n": rich read them as markup, so "[/]" crashed the table (MarkupError)
    and the others lost their brackets or became an emoji."""
    from tests.conftest import MARKUP_LABELS

    code, out, err = run(capsys, typed_release, 'SELECT c, COUNT(*) AS "[red]n" FROM t '
                                                "GROUP BY c ORDER BY c")
    assert code == 0, err
    for label in MARKUP_LABELS:
        assert label in out
    assert "[red]n" in out and "😄" not in out
    assert main(["inspect", str(typed_release), "--columns"]) == 0
    out = capsys.readouterr().out
    assert "[bold]x" in out and "[/]" in out


def test_errors_with_brackets_are_printed_as_written(capsys, typed_release):
    code, out, err = run(capsys, typed_release,
                         'SELECT COUNT(*) FROM t WHERE "[bold]col [/]" = 1')
    assert code == 1
    assert "[bold]col [/]" in err and "error:" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("sql, words", [
    ("SELECT COUNT(*) FROM trips WHERE age NOT IN [1, NULL]", "list membership"),
    ("SELECT COUNT(*) FROM trips WHERE age <=> 5", "IS NOT DISTINCT FROM"),
    ("SELECT mode, COUNT(*) AS n FROM trips WHERE age IN [3, 'x', NULL] GROUP BY mode",
     "list membership"),
])
def test_the_table_format_plans_the_text_as_written(capsys, trips_release, sql, words):
    """The table format appends its interval columns to the query. It regenerated the
    statement through sqlglot, which writes IN [..] as IN (..) and <=> as IS NOT
    DISTINCT FROM, so the planner's checks of the written text were skipped and the
    table answered (k NOT IN [1, NULL]: 0 rows, where DuckDB keeps 18,410 of the matrix
    data; k <=> 5: 376, where DuckDB refuses); --format csv refused. Both refuse now."""
    for fmt in ("table", "csv"):
        code, out, err = run(capsys, trips_release, sql, "--format", fmt)
        assert code == 1 and words in err, (fmt, out, err)


@pytest.mark.parametrize("sql", [
    "SELECT mode IS DISTINCT FROM 'car' AS f, COUNT(*) AS n FROM trips GROUP BY 1 ORDER BY 1",
    "SELECT CASE WHEN mode IS NOT DISTINCT FROM 'car' THEN 'c' END AS f, COUNT(*) AS n "
    "FROM trips GROUP BY 1 ORDER BY 1",
    "FROM trips SELECT mode, COUNT(*) AS n GROUP BY mode ORDER BY mode",
])
def test_the_table_format_s_interval_column_where_from_is_not_the_outer_from(
        capsys, trips_release, sql):
    """Splicing the interval columns before the outer FROM stopped at the FROM of IS
    [NOT] DISTINCT FROM (a syntax error, so the table lost its CI column and quoted an
    error about text the analyst never wrote), and found none in DuckDB's FROM-first
    form; both have the column again."""
    code, out, err = run(capsys, trips_release, sql)
    assert code == 0 and "95% CI" in out and "no error columns" not in err, (out, err)
