"""Degenerate sources and budgets, end to end (spec → release → SQL answers): a one-row
table, and a budget so small (ρ = 1e-6) that InfTDA's noisy total is clamped to 0.

Each release is built from a real seeded table and queried through :func:`dpsql.connect`;
the checks are those a curator would make of any release: it builds, and its total's
interval is a valid one for the true count.
"""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")

ATTRS = {"c": {"kind": "categorical", "domain": ["a", "b", "c"]},
         "g": {"kind": "hierarchy", "columns": ["r", "p"],
               "spine": [["N", "n1"], ["N", "n2"], ["S", "s1"]]},
         "x": {"kind": "range", "lower": 0, "upper": 64, "bins": 16}}


def _source(base, n):
    duckdb.connect().execute(f"""
        COPY (SELECT ['a', 'b', 'c'][1 + i % 3] AS c, ['N', 'N', 'S'][1 + i % 3] AS r,
                     ['n1', 'n2', 's1'][1 + i % 3] AS p, (i * 7) % 50 AS x
              FROM range({n}) t(i)) TO '{base / f"t{n}.parquet"}'""")
    return f"t{n}.parquet"


def _cursor(base, spec, seed):
    """A cursor on the release of the raw ``spec`` built in ``base``."""
    out = base / "t.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), out, seed=seed, progress=False)
    return dpsql.connect(str(out)).cursor()


def _release(base, source, views, rho=1.0, seed=1):
    spec = {"name": "t", "source": source, "neighbouring": "add_remove",
            "budget": {"rho": rho}, "attributes": ATTRS, "views": views}
    out = base / "t.duckdb"
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), out, seed=seed,
                  progress=False, replace=True)
    return out


def _total(out):
    con = dpsql.connect(str(out))
    cur = con.cursor()
    cur.execute("SELECT COUNT(*), dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95) FROM t")
    row = cur.fetchone()
    con.close()
    return row


@pytest.mark.parametrize("views", [
    [{"name": "v_inf", "levels": ["c"]},
     {"name": "v_gt", "levels": ["c"], "mechanism": "gaussian_tree"}],
    [{"name": "v_inf", "levels": ["g"]},
     {"name": "v_lt", "levels": ["g"], "mechanism": "laplace_tree"}],
], ids=["inftda+gaussian_tree", "inftda+laplace_tree"])
def test_one_row_source_with_inftda_and_a_real_valued_tree(tmp_path, views):
    """A one-row source with an InfTDA view and a Gaussian/Laplace tree over the same
    attribute crashed the build in the reconciled error model (numpy's bincount of an
    empty level is int64, and a float division could not write into it: UFuncTypeError)."""
    out = _release(tmp_path, _source(tmp_path, 1), views)
    count, stderr, low, high = _total(out)
    assert stderr > 0 and low <= 1 <= high


def test_inftda_total_clamped_to_zero_keeps_its_variance(tmp_path):
    """ρ = 1e-6 over 100 rows: InfTDA's noisy total (σ ≈ 1,700) is clamped to 0, so it
    releases no root. Reconciliation took that missing root as exact (variance 0) and
    fixed every view's total at 0 with a standard error of √(1/12) = 0.29 and a 95 %
    interval [0, 0] for a true count of 100; the missing root is a 0 with σ²_root, and
    the interval is then about ±2,500, containing 100."""
    views = [{"name": "v_inf", "levels": ["g", "c"]},
             {"name": "v_gt", "levels": ["c"], "mechanism": "gaussian_tree"},
             {"name": "v_cas", "levels": ["x"], "mechanism": "cascade"}]
    out = _release(tmp_path, _source(tmp_path, 100), views, rho=1e-6, seed=1)
    count, stderr, low, high = _total(out)
    assert stderr > 100
    assert low <= 100 <= high


def test_attribute_null_on_every_row_under_drop_leaves_its_views_only(tmp_path):
    """Every row NULL in ``c`` (on_null = "drop") and the first view over ``c``: the
    build refused with "no rows remain after the NULL, domain and bound policies",
    because it counted the first view's rows only, while the view over ``k`` holds all
    200 (docs/spec.md: a drop leaves the views over the attribute only). It now builds:
    the report's rows used is 200, the view over ``k`` counts them, and the view over
    ``c`` is an empty view whose interval contains 0."""
    duckdb.connect().execute(f"""
        COPY (SELECT NULL::VARCHAR AS c, ['a', 'b'][1 + i % 2] AS k FROM range(200) t(i))
        TO '{tmp_path / "nulls.parquet"}'""")
    spec = {"name": "t", "source": "nulls.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1e6},
            "attributes": {"c": {"kind": "categorical", "domain": ["a", "b"],
                                 "on_null": "drop"},
                           "k": {"kind": "categorical", "domain": ["a", "b"]}},
            "views": [{"name": "v_c", "levels": ["c"]}, {"name": "v_k", "levels": ["k"]}]}
    out = tmp_path / "t.duckdb"
    release = build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), out, seed=1,
                            progress=False)
    assert release.report.rows_used == 200
    con = dpsql.connect(str(out))
    cur = con.cursor()
    cur.execute("SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k")
    assert cur.fetchall() == [("a", 100), ("b", 100)]
    cur.execute("SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM t "
                "WHERE c IS NOT NULL")
    count, low, high = cur.fetchone()
    assert count == 0 and low == 0 <= high


def test_a_source_every_policy_empties_is_refused_with_the_reason(tmp_path):
    """The refusal stays when no view has a row left, and says so."""
    duckdb.connect().execute(f"""COPY (SELECT 'z' AS k FROM range(5))
                                 TO '{tmp_path / "t.parquet"}'""")
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0},
            "attributes": {"k": {"kind": "categorical", "domain": ["a", "b"],
                                 "on_out_of_domain": "drop"}},
            "views": [{"name": "v_k", "levels": ["k"]}]}
    with pytest.raises(dpsql.DataError, match="no rows remain in any view"):
        build_release(ReleaseSpec.from_dict(spec, base_dir=tmp_path), tmp_path / "t.duckdb",
                      seed=1, progress=False)


def test_public_total_under_substitute_has_no_rounding_error(tmp_path):
    """Under substitute the total is public and exact; reconciled with an InfTDA view
    (integer) it was given the rounding variance 1/12 anyway, so a Gaussian tree's
    COUNT(*) said dp_stderr 0.289 for an exact count. An exact total rounds to itself."""
    views = [{"name": "v_inf", "levels": ["c"]},
             {"name": "v_gt", "levels": ["c"], "mechanism": "gaussian_tree"}]
    spec = {"name": "t", "source": _source(tmp_path, 300), "neighbouring": "substitute",
            "budget": {"rho": 1.0}, "attributes": ATTRS, "views": views}
    cur = _cursor(tmp_path, spec, seed=1)
    cur.execute("SELECT COUNT(*), dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95) FROM v_gt")
    assert cur.fetchone() == (300, 0.0, 300, 300)


@pytest.mark.parametrize("levels", [["c"], ["c", "x"]])
def test_inftda_sum_of_a_whole_level_under_substitute_is_exact(tmp_path, levels):
    """max_rows = 100 under substitute (σ ≈ 400 per node): COUNT(*) from an InfTDA view,
    the sum of its level-1 nodes, is the public total 2,000 with dp_stderr 0, but its
    95 % interval is [1957, 2043] here, and [0, 2000] with a range level below (the
    false-positive rule takes a sum small against σ for possible false positives). An
    exact answer's interval is [2000, 2000]: the whole level adds up to the root."""
    duckdb.connect().execute(f"""
        COPY (SELECT ['a', 'b', 'c'][1 + i % 3] AS c, (i * 7) % 50 AS x, i % 50 AS u
              FROM range(2000) t(i))
        TO '{tmp_path / "u.parquet"}'""")
    spec = {"name": "t", "source": "u.parquet", "neighbouring": "substitute",
            "budget": {"epsilon": 2.0, "delta": 1e-7},
            "privacy_unit": {"column": "u", "max_rows": 100},
            "attributes": {a: ATTRS[a] for a in levels},
            "views": [{"name": "vi", "levels": levels}]}
    cur = _cursor(tmp_path, spec, seed=1)
    cur.execute("SELECT COUNT(*), dp_stderr(), dp_ci_low(0.95), dp_ci_high(0.95) FROM vi")
    assert cur.fetchone() == (2000, 0.0, 2000, 2000)
    cur.execute("SELECT privacy_unit FROM dpsql_release")  # the exact total's price
    assert cur.fetchone()[0].endswith("how many rows each keeps is public (substitute)")


def test_an_in_list_that_skips_a_released_zero_is_not_the_exact_total(tmp_path):
    """Under substitute the total 2,000 is exact and 'c' (1 row) came out 0 (seed 2):
    ``WHERE c IN ('a', 'b')`` adds up to the released 2,000 too, but its truth is 1,999,
    so its interval must not be the total's [2000, 2000]: it reaches what one zero may
    hide below. COUNT(*), which holds the zero, stays exact."""
    duckdb.connect().execute(f"""
        COPY (SELECT CASE WHEN i = 0 THEN 'c' ELSE ['a', 'b'][1 + i % 2] END AS c
              FROM range(2000) t(i)) TO '{tmp_path / "z.parquet"}'""")
    spec = {"name": "t", "source": "z.parquet", "neighbouring": "substitute",
            "budget": {"rho": 0.5}, "attributes": {"c": ATTRS["c"]},
            "views": [{"name": "vi", "levels": ["c"]}]}
    cur = _cursor(tmp_path, spec, seed=2)
    cur.execute("SELECT COUNT(*) FROM vi WHERE c = 'c'")
    assert cur.fetchone() == (0,)
    cur.execute("SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM vi")
    assert cur.fetchone() == (2000, 2000, 2000)
    cur.execute("SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM vi "
                "WHERE c IN ('a', 'b')")
    n, lo, hi = cur.fetchone()
    assert n == 2000 and lo <= 1999 and hi == 2000
