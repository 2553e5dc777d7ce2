"""Tests written by a mutation audit of DESIGN's privacy rules: each one fails when a
rule's enforcing code is broken in a way no other test noticed (the mutation is named in
each docstring). Real DuckDB files, real samplers with fixed seeds."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.errors import DataError
from dpsql.mechanisms.btree import btree
from dpsql.privacy import (ApproxDP, PureDP, ZCDP, discrete_gaussian, laplace_scale, rng, zcdp_epsilon,
                           zcdp_rho)
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

MODES = ["car", "bus", "walk", "bike"]


def _write_units(base: Path, n_units: int = 300, seed: int = 3) -> None:
    """Unit u has 1 to 9 rows of random modes."""
    g = np.random.default_rng(seed)
    unit = np.repeat(np.arange(n_units), g.integers(1, 10, n_units))
    pq.write_table(pa.table({"uid": unit, "mode": g.choice(MODES, unit.size)}),
                   base / "t.parquet")


def _spec(base: Path, **changes) -> ReleaseSpec:
    data = {"name": "units", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1},
            "privacy_unit": {"column": "uid", "max_rows": 3},
            "attributes": {"mode": {"kind": "categorical", "domain": MODES}},
            "views": [{"name": "by_mode", "levels": ["mode"],
                       "mechanism": "gaussian_tree"}]}
    merged = {k: v for k, v in {**data, **changes}.items() if v is not None}
    return ReleaseSpec.from_dict(merged, base_dir=base)


def _all_text(con: duckdb.DuckDBPyConnection) -> str:
    """Every value of every table and every view's SQL in a release, as text."""
    parts = []
    for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
            parts.extend(str(v) for v in row)
    parts.extend(sql for (sql,) in con.execute("SELECT sql FROM duckdb_views() "
                                              "WHERE NOT internal").fetchall())
    parts.extend(sql or "" for (sql,) in con.execute(
        "SELECT macro_definition FROM duckdb_functions() WHERE NOT internal").fetchall())
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
# Rule 2: the bounding salt is secret: never stored
# --------------------------------------------------------------------------------------

def test_the_bounding_salt_is_stored_nowhere_in_the_release(tmp_path):
    """Mutation: the salt written into the release (e.g. in its name or info). The salt
    is the first draw of the release generator; neither its decimal nor its hex text may
    appear in any table, view, macro or anywhere in the file's bytes."""
    _write_units(tmp_path)
    out = tmp_path / "r.duckdb"
    build_release(_spec(tmp_path), out, seed=21, progress=False)
    salt = int(rng(21).integers(0, 2**62))
    con = duckdb.connect(str(out), read_only=True)
    text = _all_text(con)
    con.close()
    assert len(text) > 1000  # the scan saw the release
    for form in (str(salt), f"{salt:x}", f"{salt:X}"):
        assert form not in text
        assert form.encode() not in out.read_bytes()
    assert salt.to_bytes(8, "little") not in out.read_bytes()


# --------------------------------------------------------------------------------------
# Rule 2: noise scales follow from the sensitivity
# --------------------------------------------------------------------------------------

def test_laplace_scale_is_sensitivity_over_epsilon():
    """Mutations: ``laplace_scale`` halved, or rounded to nearest (no mechanism calls it;
    it is public API)."""
    assert laplace_scale(2, 0.5) == 4.0
    assert laplace_scale(1, 1) == 1.0
    exact = Fraction(3) / Fraction(0.7)  # a quotient whose nearest float lies below it
    assert Fraction(3 / 0.7) < exact
    assert Fraction(laplace_scale(3, 0.7)) >= exact
    assert laplace_scale(3, 0.7) == math.nextafter(3 / 0.7, math.inf)


# --------------------------------------------------------------------------------------
# Rule 3: an unseeded release is drawn from fresh OS entropy
# --------------------------------------------------------------------------------------

def _counts(path: Path) -> list:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT dp_count FROM by_mode__l1 ORDER BY mode").fetchall()
        rows += con.execute("SELECT rng FROM dpsql_release").fetchall()
    finally:
        con.close()
    return rows


def test_two_unseeded_releases_draw_different_noise(tmp_path):
    """Mutation: the release builder falls back to a fixed seed when none is given (the
    generator itself still reads OS entropy, so the RNG's own tests pass). At ρ = 0.01
    and m = 3 each of the 4 leaves has noise σ ≈ 30: all four equal by chance with
    probability below 1e-6."""
    _write_units(tmp_path)
    spec = _spec(tmp_path, budget={"rho": 0.01})
    build_release(spec, tmp_path / "a.duckdb", progress=False)
    build_release(spec, tmp_path / "b.duckdb", progress=False)
    a, b = _counts(tmp_path / "a.duckdb"), _counts(tmp_path / "b.duckdb")
    assert a[-1] == b[-1] == ("os-entropy AES-CTR",)
    assert len(a) == 5 and a[:4] != b[:4]
    # and a seed reproduces a release exactly, and says so
    build_release(spec, tmp_path / "c.duckdb", seed=5, progress=False)
    build_release(spec, tmp_path / "d.duckdb", seed=5, progress=False)
    c, d = _counts(tmp_path / "c.duckdb"), _counts(tmp_path / "d.duckdb")
    assert c == d and c[-1] == ("seeded: not private (seed=5)",)


# --------------------------------------------------------------------------------------
# Rule 5: conversions round in the conservative direction
# --------------------------------------------------------------------------------------

CONVERSIONS = [(1e-4, 1e-5), (0.013215, 1e-8), (0.5, 1e-6), (1.0, 1e-9), (10.0, 1e-12)]


@pytest.mark.parametrize("rho,delta", CONVERSIONS)
def test_a_converted_epsilon_is_never_below_the_computed_one(rho, delta):
    """Mutation: ``ZCDP.to_approx`` rounds ε one ulp down instead of up. The stored ε is an
    exact Fraction; it must be at least the float the tight conversion computed (and
    within a few ulp of it)."""
    computed = zcdp_epsilon(rho, delta)
    stored = ZCDP(rho).to_approx(delta).epsilon
    assert stored > Fraction(computed)
    assert float(stored) <= math.nextafter(computed, math.inf)


@pytest.mark.parametrize("rho,delta", CONVERSIONS)
def test_a_converted_rho_is_never_above_the_computed_one(rho, delta):
    """Mutation: ``ApproxDP.to_zcdp`` rounds ρ up instead of down. The stored ρ must be
    below the largest ρ the bisection found, and its tight conversion within ε."""
    eps = float(ZCDP(rho).to_approx(delta).epsilon)
    computed = zcdp_rho(eps, delta)
    stored = ApproxDP(eps, delta).to_zcdp().rho
    assert stored < Fraction(computed)
    assert zcdp_epsilon(float(stored), delta) <= eps


# --------------------------------------------------------------------------------------
# Rule 5: the total is split across views, never spent once per view
# --------------------------------------------------------------------------------------

def _views(path: Path) -> dict[str, tuple[dict, dict]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT name, budget, info FROM dpsql_views").fetchall()
    finally:
        con.close()
    return {name: (json.loads(budget), json.loads(info)) for name, budget, info in rows}


def _mode_view(name: str, mechanism: str, weight: int) -> dict:
    return {"name": name, "levels": ["mode"], "mechanism": mechanism, "weight": weight}


def test_view_budgets_are_shares_of_the_total_and_set_the_noise(tmp_path):
    """Mutations: every view given the whole ρ (or the whole ε) instead of its weighted
    share; a pure view's ε from a ρ share as √(4ρ) instead of √(2ρ). Each view's recorded
    budget and its per-level noise scales are checked against the formulas, with m = 3
    under add/remove (Δ₁ = Δ₂ = 3 per level) and two noisy levels (root and leaves, half
    the view's share each)."""
    _write_units(tmp_path)
    views = [_mode_view("a", "gaussian_tree", 2), _mode_view("b", "laplace_tree", 1),
             _mode_view("c", "gaussian_tree", 1)]
    build_release(_spec(tmp_path, budget={"rho": 0.5}, views=views),
                  tmp_path / "z.duckdb", seed=1, progress=False)
    got = _views(tmp_path / "z.duckdb")
    rho_a, rho_c = Fraction(got["a"][0]["rho"]), Fraction(got["c"][0]["rho"])
    eps_b = Fraction(got["b"][0]["epsilon"])
    assert (rho_a, rho_c) == (Fraction(1, 4), Fraction(1, 8))
    assert Fraction(1, 2) - Fraction(1, 10**12) < eps_b <= Fraction(1, 2)  # √(2·ρ/4)
    assert rho_a + rho_c + eps_b ** 2 / 2 <= Fraction(1, 2)  # composes within the total
    for name, rho in (("a", 0.25), ("c", 0.125)):  # σ² = Δ²/(2·ρ·½)
        for s2 in got[name][1]["noise_scales"]:
            assert s2 == pytest.approx(9 / rho, rel=1e-12) and s2 >= 9 / rho
    for b in got["b"][1]["noise_scales"]:  # b = Δ₁/(ε·½)
        assert b == pytest.approx(12.0, rel=1e-12) and b >= 12.0

    pure = [_mode_view("p", "laplace_tree", 3), _mode_view("q", "laplace_tree", 1)]
    build_release(_spec(tmp_path, budget={"epsilon": 1}, views=pure),
                  tmp_path / "e.duckdb", seed=1, progress=False)
    got = _views(tmp_path / "e.duckdb")
    assert Fraction(got["p"][0]["epsilon"]) == Fraction(3, 4)
    assert Fraction(got["q"][0]["epsilon"]) == Fraction(1, 4)
    for name, b in (("p", 8.0), ("q", 24.0)):
        assert all(s == pytest.approx(b, rel=1e-12) and s >= b
                   for s in got[name][1]["noise_scales"])


# --------------------------------------------------------------------------------------
# Rules 1 and 4: a release's noise is the exact sampler's, on every public cell
# --------------------------------------------------------------------------------------

SIX = ["car", "bus", "walk", "bike", "boat", "tram"]  # no row is a tram: a zero cell


def _one_level(base: Path, mechanism: str) -> tuple[duckdb.DuckDBPyConnection, np.ndarray]:
    g = np.random.default_rng(1)
    pq.write_table(pa.table({"mode": g.choice(SIX[:5], 3000)}), base / "t.parquet")
    spec = ReleaseSpec.from_dict({
        "name": "six", "source": "t.parquet", "neighbouring": "substitute",
        "budget": {"rho": 0.02},
        "attributes": {"mode": {"kind": "categorical", "domain": SIX}},
        "views": [{"name": "v", "levels": ["mode"], "mechanism": mechanism}]}, base_dir=base)
    build_release(spec, base / "r.duckdb", seed=3, progress=False)
    true = dict(duckdb.sql(f"SELECT mode, count(*) FROM '{base / 't.parquet'}' "
                           "GROUP BY mode").fetchall())
    return (duckdb.connect(str(base / "r.duckdb"), read_only=True),
            np.array([true.get(m, 0) for m in SIX]))


def _expected_noise() -> np.ndarray:
    """The release's first noise: the exact discrete Gaussian of σ² = Δ²/(2ρ) = 2/0.04 = 50
    (substitute, one row per unit, one noisy level), drawn from the seeded generator right
    after the bounding salt."""
    g = rng(3)
    g.integers(0, 2**62)  # the salt
    return discrete_gaussian(50.0, len(SIX), g)


def test_gaussian_tree_release_noise_is_the_exact_discrete_gaussian(tmp_path):
    """Mutations: gaussian_tree drawing a rounded continuous Gaussian, or the bootstrap's
    table sampler, for the release; noise only on non-empty cells. Under substitution
    the root is the public n, so least squares leaves each leaf at true + z − mean(z)."""
    con, true = _one_level(tmp_path, "gaussian_tree")
    info = json.loads(con.execute("SELECT info FROM dpsql_views").fetchall()[0][0])
    assert info["noise_scales"][1] == 50.0
    got = dict(con.execute("SELECT mode, dp_count FROM v__l1").fetchall())
    z = _expected_noise()
    assert np.allclose(np.array([got[m] for m in SIX]) - true, z - z.mean(), rtol=0, atol=1e-9)
    assert z[-1] != 0  # the empty cell got its own noise


def test_inftda_release_measurements_are_the_exact_discrete_gaussian(tmp_path):
    """Mutation: InfTDA drawing the bootstrap's table sampler for the release. Its stored
    measurements are true + z at every public child of the root (released nodes in
    ``dp_measured``, released zeros in ``v__measured``)."""
    con, true = _one_level(tmp_path, "inftda")
    info = json.loads(con.execute("SELECT info FROM dpsql_views").fetchall()[0][0])
    assert info["sigma2_levels"] == [50.0]
    z = _expected_noise()
    released = dict(con.execute("SELECT mode, dp_measured FROM v__l1").fetchall())
    zeros = sorted(v for (v,) in con.execute(
        "SELECT dp_measured FROM v__measured WHERE dp_level = 1").fetchall())
    assert released and len(released) + len(zeros) == len(SIX)
    for i, m in enumerate(SIX):
        if m in released:
            assert released[m] == true[i] + z[i], m
    assert zeros == sorted(float(true[i] + z[i]) for i, m in enumerate(SIX)
                           if m not in released)


# --------------------------------------------------------------------------------------
# Rule 1: a value outside the public domain is refused unless the spec says otherwise
# --------------------------------------------------------------------------------------

def test_a_value_outside_the_domain_is_refused_by_default_and_dropped_only_when_asked(tmp_path):
    """Mutation: ``on_out_of_domain`` defaulting to ``"drop"`` in a spec file (the rows
    would leave silently, and the curator never declared that population)."""
    g = np.random.default_rng(2)
    modes = list(g.choice(MODES, 500)) + ["rocket"] * 7
    pq.write_table(pa.table({"mode": modes}), tmp_path / "t.parquet")
    data = {"name": "d", "source": "t.parquet", "neighbouring": "add_remove", "budget": {"rho": 1},
            "attributes": {"mode": {"kind": "categorical", "domain": MODES}},
            "views": [{"name": "by_mode", "levels": ["mode"]}]}
    with pytest.raises(DataError, match=r"'mode' has 7 value\(s\) outside its public "
                                        r"domain, e\.g\. 'rocket'"):
        build_release(ReleaseSpec.from_dict(data, base_dir=tmp_path), tmp_path / "a.duckdb",
                      seed=1, progress=False)
    assert not (tmp_path / "a.duckdb").exists()
    data["attributes"]["mode"]["on_out_of_domain"] = "drop"
    release = build_release(ReleaseSpec.from_dict(data, base_dir=tmp_path),
                            tmp_path / "b.duckdb", seed=1, progress=False)
    assert ("mode", "dropped (out of domain)", 7) in release.report.actions
    assert release.report.rows_used == 500


# --------------------------------------------------------------------------------------
# Rule 2: noise scales are rounded up from the exact budget, never to nearest
# --------------------------------------------------------------------------------------

def test_inftda_noise_variance_is_never_below_the_exact_one(tmp_path):
    """Mutation: InfTDA's σ² = Δ²/(2ρ) rounded to the nearest float instead of up. At
    ρ = 0.23 (the float a spec's 0.23 parses to; substitute, one row per unit: Δ² = 2,
    one noisy level) the nearest float to 1/ρ lies below it, so the nearest σ² would
    spend more than ρ."""
    g = np.random.default_rng(4)
    pq.write_table(pa.table({"mode": g.choice(MODES, 400)}), tmp_path / "t.parquet")
    spec = ReleaseSpec.from_dict({
        "name": "r", "source": "t.parquet", "neighbouring": "substitute",
        "budget": {"rho": 0.23},
        "attributes": {"mode": {"kind": "categorical", "domain": MODES}},
        "views": [{"name": "v", "levels": ["mode"], "mechanism": "inftda"}]}, base_dir=tmp_path)
    build_release(spec, tmp_path / "r.duckdb", seed=1, progress=False)
    budget, info = _views(tmp_path / "r.duckdb")["v"]
    assert Fraction(budget["rho"]) == Fraction(0.23)
    exact = 2 / (2 * Fraction(0.23))
    assert Fraction(float(exact)) < exact  # the case where nearest rounds down
    (sigma2,) = info["sigma2_levels"]
    assert Fraction(sigma2) >= exact and sigma2 == math.nextafter(float(exact), math.inf)


def test_release_noise_scales_and_pure_shares_round_the_safe_way(tmp_path):
    """Mutations: gaussian_tree's σ² = Δ²/(2ρ_k) rounded to nearest instead of up; a pure
    view's ε = √(2ρ) from its ρ share rounded to nearest instead of down. At ρ = 0.23 over
    two views (one row per unit, add/remove: Δ = 1, two noisy levels) both nearest
    roundings fall on the unsafe side, so each would spend more than its share."""
    _write_units(tmp_path)
    views = [_mode_view("g", "gaussian_tree", 1), _mode_view("l", "laplace_tree", 1)]
    build_release(_spec(tmp_path, budget={"rho": 0.23}, views=views, privacy_unit=None),
                  tmp_path / "r.duckdb", seed=1, progress=False)
    got = _views(tmp_path / "r.duckdb")
    share = Fraction(got["g"][0]["rho"])
    assert share == Fraction(0.23) / 2
    exact_s2 = 1 / (2 * share / 2)  # Δ²/(2ρ_k), ρ_k = half the view's share
    assert Fraction(float(exact_s2)) < exact_s2
    assert Fraction(math.sqrt(2 * float(share))) ** 2 > 2 * share
    assert all(Fraction(s2) >= exact_s2 for s2 in got["g"][1]["noise_scales"])
    eps = Fraction(got["l"][0]["epsilon"])
    assert eps ** 2 / 2 <= share


def test_btree_noise_scales_are_never_below_the_exact_ones():
    """Mutation: btree's per-level scale Δ₁/ε_i rounded to nearest instead of up. Over
    50 bins at five budgets, some level's nearest float lies below the exact quotient
    (which levels depends on the last bits of the budget weights, i.e. on the numpy
    build's cube root: at ε = 0.3 both levels on one, only the first on another)."""
    below = 0
    for total in (0.3, 0.5, 0.7, 0.9, 1.1):
        t = btree(np.arange(50), PureDP(total), neighbouring="add_remove", rng=rng(1))
        eps = [Fraction(e) for e in t.info["epsilons"]]
        assert sum(eps) == Fraction(total)
        below += sum(Fraction(float(1 / e)) < 1 / e for e in eps)
        assert all(Fraction(b) >= 1 / e for b, e in zip(t.info["noise_scales"], eps))
    assert below > 0  # the mutation would be caught
