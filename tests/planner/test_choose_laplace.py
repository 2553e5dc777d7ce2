"""The planner ranks views by the half-width of the 95 % interval each would give, and a
Laplace-family view's interval is the Laplace-sum quantile (dpsql/accuracy/laplace_sum.py),
not ±1.96σ.

A Gaussian tree ``g`` and a b-ary (Laplace) tree ``b`` over one age axis, ``b`` with 2.6
times the budget: one age bin has 1.96σ = 6.25 from ``g`` and 5.86 from ``b``, so ranking by
1.96σ chose ``b``, whose interval (one Laplace draw dominates: 2.12σ) is ±6.33, wider than
``g``'s ±6.25. The planner now ranks by the intervals themselves and chooses ``g``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning")


@pytest.fixture(scope="module")
def release(trips_data, tmp_path_factory):
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict({
        "name": "t", "source": "trips.parquet", "neighbouring": "add_remove",
        "budget": {"rho": "0.5"},
        "attributes": {"age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100}},
        "views": [{"name": "g", "levels": ["age"], "mechanism": "gaussian_tree"},
                  {"name": "b", "levels": ["age"], "mechanism": "btree", "weight": "2.6"}],
    }, base_dir=trips_data)
    out = tmp_path_factory.mktemp("choose_laplace") / "t.duckdb"
    build_release(spec, out, seed=3, progress=False)
    return out


def _half(cur, view: str, where: str) -> tuple[float, float]:
    """(the planner's predicted half-width, 1.96·dp_stderr) of the view's answer."""
    cur.execute(f"SELECT COUNT(*), dp_stderr() FROM {view} WHERE {where}")
    return cur.dp_info["predicted_error95"], 1.959963984540054 * cur.fetchone()[1]


def test_a_laplace_view_is_ranked_by_its_laplace_interval(release):
    import dpsql

    con = dpsql.connect(str(release))
    try:
        cur = con.cursor()
        g, g_normal = _half(cur, "g", "age = 40")
        b, b_normal = _half(cur, "b", "age = 40")
        assert g == pytest.approx(g_normal, rel=1e-9)  # Gaussian: ±1.96σ is its interval
        assert b_normal < g_normal  # what 1.96σ ranked first
        assert b == pytest.approx(2.1183 / 1.96 * b_normal, rel=2e-3)  # one Laplace draw
        assert g < b
        cur.execute("SELECT COUNT(*) FROM t WHERE age = 40")
        assert cur.dp_info["view"] == "g", cur.dp_info["candidates"]
        # ranges and scattered sets too: the prediction of a pinned view is its interval
        for where in ("age BETWEEN 10 AND 19", "age NOT IN (40, 41)"):
            b, b_normal = _half(cur, "b", where)
            assert b > b_normal
    finally:
        con.close()
