"""Spec loading and validation: every error names its key path and says what is allowed."""

from datetime import date
from fractions import Fraction

import pytest

import dpsql
from dpsql.privacy import ApproxDP, Neighbouring, PureDP, ZCDP
from dpsql.spec import ReleaseSpec

BASE = {
    "name": "flights",
    "source": "flights.parquet",
    "neighbouring": "add_remove",
    "budget": {"rho": 1.0},
    "attributes": {
        "origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
        "distance": {"kind": "range", "lower": 0, "upper": 5000, "bins": 1024},
    },
    "views": [{"name": "route", "levels": ["origin"], "mechanism": "inftda", "weight": 2},
              {"name": "dist", "levels": ["distance"], "mechanism": "cascade"}],
}


def spec(**changes):
    data = {**BASE, **changes}
    return ReleaseSpec.from_dict(data)


def test_minimal_spec_parses():
    s = spec()
    assert s.neighbouring is Neighbouring.ADD_REMOVE
    assert s.budget == ZCDP(1)
    assert s.views[0].weight == 2
    assert s.attributes["distance"].width == pytest.approx(5000 / 1024)


def test_json_round_trip():
    s = spec(privacy_unit={"column": "tailnum", "max_rows": 5})
    again = ReleaseSpec.from_json(s.to_json())
    assert again == s


def test_toml_example_from_the_issue(tmp_path):
    (tmp_path / "geo.csv").write_text("region,province,city\nN,N1,a\nN,N1,b\nS,S1,c\n")
    (tmp_path / "spec.toml").write_text('''
name = "flights"
source = "flights.parquet"
neighbouring = "add_remove"

[privacy_unit]
column = "tailnum"
max_rows = 5

[budget]
rho = 1.0

[attributes.origin]
kind = "categorical"
domain = ["EWR", "JFK", "LGA"]
on_out_of_domain = "error"
[attributes.geo]
kind = "hierarchy"
columns = ["region", "province", "city"]
spine_file = "geo.csv"
[attributes.distance]
kind = "range"
lower = 0
upper = 5000
bins = 1024
on_out_of_bounds = "clamp"

[[views]]
name = "route"
levels = ["origin", "geo"]
mechanism = "inftda"
weight = 2
''')
    s = ReleaseSpec.from_toml(tmp_path / "spec.toml")
    assert s.unit.column == "tailnum" and s.unit.max_rows == 5
    assert s.attributes["geo"].paths[0] == ("N", "N1", "a")


@pytest.mark.parametrize("budget,expected", [
    ({"rho": 0.5}, ZCDP(Fraction(1, 2))),
    ({"epsilon": 1}, PureDP(1)),
    ({"epsilon": 1, "delta": 1e-9}, ApproxDP(1, 1e-9)),
])
def test_budget_forms(budget, expected):
    views = [{"name": "dist", "levels": ["distance"], "mechanism": "btree"}]
    assert spec(budget=budget, views=views).budget == expected


@pytest.mark.parametrize("changes,match", [
    ({"views": [{"name": "v", "levels": ["dst"]}]},
     r"views\[0\]\.levels\[0\]: unknown attribute 'dst'; declared attributes: origin, distance"),
    ({"views": [{"name": "v", "levels": ["origin"], "mechanism": "magic"}]},
     r"views\[0\]\.mechanism: unknown mechanism 'magic'; allowed: inftda, cascade"),
    ({"budget": {"rho": 0}}, r"budget\.rho: must be > 0, got 0;"),
    ({"budget": {"rho": -1}}, r"budget\.rho: must be > 0, got -1;"),
    ({"budget": {"epsilon": 1, "delta": 2}}, r"budget\.delta: must be in \(0, 1\), got 2;"),
    ({"budget": {"rho": 1, "epsilon": 1}}, r"budget: give rho alone"),
    ({"budget": {"epsilon": 1}}, r"views\[0\]\.mechanism: 'inftda' adds Gaussian noise, which "
                                 r"cannot meet a pure ε-DP budget"),
    ({"neighbouring": "swap"}, r"neighbouring: neighbouring must be 'add_remove'"),
    ({"attributes": {"origin": {"kind": "categorical", "domain": ["A", "A"]}}},
     r"attributes\.origin\.domain: duplicate domain value 'A'"),
    ({"attributes": {"origin": {"kind": "colour"}}}, r"attributes\.origin\.kind: unknown kind"),
    ({"views": [{"name": "v", "levels": ["origin"], "mechanism": "cascade"}]},
     r"views\[0\]\.levels: mechanism 'cascade' answers range queries over one range attribute"),
    ({"privacy_unit": {"column": "t", "max_rows": 0}}, r"privacy_unit\.max_rows: must be an "
                                                       r"integer >= 1"),
    ({"surprise": 1}, r"surprise: unknown key"),
])
def test_validation_messages(changes, match):
    with pytest.raises(dpsql.SpecError, match=match):
        spec(**changes)


def test_spine_child_under_two_parents():
    attrs = {"geo": {"kind": "hierarchy", "columns": ["region", "city"],
                     "spine": [["N", "x"], ["S", "x"]]}}
    views = [{"name": "v", "levels": ["geo"]}]
    with pytest.raises(dpsql.SpecError, match=r"city 'x' appears under two parents \['N'\] and "
                                               r"\['S'\]"):
        spec(attributes=attrs, views=views)


def test_spec_error_is_a_value_error():
    with pytest.raises(ValueError):
        spec(budget={"rho": "lots"})


def test_malformed_toml(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = 'x\n")
    with pytest.raises(dpsql.SpecError, match="malformed TOML"):
        ReleaseSpec.from_toml(p)


def test_missing_spec_file(tmp_path):
    with pytest.raises(dpsql.SpecError, match="does not exist"):
        ReleaseSpec.from_toml(tmp_path / "nope.toml")


@pytest.mark.parametrize("domain, message", [
    (["1", 1, 2], "mixes strings and numbers"),
    ([2 ** 53, 2 ** 53 + 1, 0.5], "duplicate domain value"),  # equal as DOUBLE keys
    ([1, 1.0], "duplicate domain value"),
    ([True, False], "strings or numbers"),
    ([1.5, float("nan")], "finite"),
    ([date(2024, 1, 1)], r"got the date 2024-01-01; quote it \(\"2024-01-01\"\)"),  # TOML
])
def test_domain_values_must_stay_distinct_as_one_key_type(domain, message):
    """Values that collide once cast to the source column's type would put one row in two
    cells and double a unit's contribution (the noise is calibrated for one)."""
    attrs = {**BASE["attributes"], "origin": {"kind": "categorical", "domain": domain}}
    with pytest.raises(dpsql.SpecError, match=r"attributes\.origin\.domain: .*" + message):
        spec(attributes=attrs)


def test_large_distinct_integers_are_a_valid_domain():
    attrs = {**BASE["attributes"], "origin": {"kind": "categorical",
                                              "domain": [2 ** 53, 2 ** 53 + 1]}}
    assert spec(attributes=attrs).attributes["origin"].values == (2 ** 53, 2 ** 53 + 1)


def test_ingest_refuses_colliding_keys_even_without_spec_validation():
    import duckdb

    from dpsql.release.domain_lookup import create_domain
    from dpsql.spec import Categorical

    con = duckdb.connect()
    with pytest.raises(dpsql.SpecError, match="collide as DOUBLE keys"):
        create_domain(con, Categorical("x", ("1", 1, 2.5)), None)


def test_cascade_covariance_choice():
    views = [{"name": "dist", "levels": ["distance"], "mechanism": "cascade",
              "covariance": "optimal"}]
    s = spec(views=views)
    assert s.views[0].covariance == "optimal"
    assert ReleaseSpec.from_json(s.to_json()) == s
    assert spec().views[1].covariance is None  # the tree covariance by default


@pytest.mark.parametrize("view,bins,message", [
    ({"mechanism": "btree", "covariance": "optimal"}, 1024,
     r"views\[0\]\.covariance: only the cascade mechanism takes a covariance"),
    ({"mechanism": "cascade", "covariance": "dense"}, 1024,
     r"views\[0\]\.covariance: must be 'tree' .* or 'optimal'"),
    ({"mechanism": "cascade", "covariance": "optimal"}, 5000,
     r"views\[0\]\.covariance: 'optimal' is dense .* at most 4096 bins; 'distance' has 5000"),
], ids=["not-cascade", "unknown", "too-many-bins"])
def test_cascade_covariance_errors(view, bins, message):
    attrs = {**BASE["attributes"],
             "distance": {"kind": "range", "lower": 0, "upper": 5000, "bins": bins}}
    with pytest.raises(dpsql.SpecError, match=message):
        spec(attributes=attrs, views=[{"name": "dist", "levels": ["distance"], **view}])


# --------------------------------------------------------------------------------------
# Interleaved (origin/destination) views and spine files read under other column names
# --------------------------------------------------------------------------------------

def _od_files(tmp_path):
    (tmp_path / "geo.csv").write_text("region,province\nN,N1\nN,N2\nS,S1\n")
    return tmp_path


def _od_spec(tmp_path, view=None, **side_changes):
    def side(name):  # a change to None removes the key
        d = {"kind": "hierarchy", "columns": [f"{name}_region", f"{name}_province"],
             "spine_file": "geo.csv", "spine_columns": ["region", "province"],
             **side_changes}
        return {k: v for k, v in d.items() if v is not None}
    data = {**BASE, "attributes": {**BASE["attributes"], "work": side("work"),
                                   "home": side("home")},
            "views": [{"name": "flows", "levels": ["work", "home"], "interleave": True,
                       **(view or {})}]}
    return ReleaseSpec.from_dict(data, base_dir=_od_files(tmp_path))


def test_interleaved_view_and_spine_columns(tmp_path):
    s = _od_spec(tmp_path)
    assert s.views[0].interleave is True
    assert s.attributes["home"].paths == (("N", "N1"), ("N", "N2"), ("S", "S1"))
    assert s.attributes["home"].columns == ("home_region", "home_province")
    assert ReleaseSpec.from_json(s.to_json()) == s
    assert spec().views[0].interleave is False  # levels are taken whole by default
    assert "interleave" not in spec().views[0].to_json()


def test_interleaved_view_from_toml(tmp_path):
    _od_files(tmp_path)
    (tmp_path / "spec.toml").write_text('''
name = "commutes"
source = "commutes.parquet"
neighbouring = "substitute"
[budget]
rho = 1
[attributes.work]
kind = "hierarchy"
columns = ["work_region", "work_province"]
spine_file = "geo.csv"
spine_columns = ["region", "province"]
[attributes.home]
kind = "hierarchy"
columns = ["home_region", "home_province"]
spine_file = "geo.csv"
spine_columns = ["region", "province"]
[[views]]
name = "flows"
levels = ["work", "home"]
interleave = true
''')
    s = ReleaseSpec.from_toml(tmp_path / "spec.toml")
    assert s.views[0].interleave and s.views[0].levels == ("work", "home")


@pytest.mark.parametrize("view,side,message", [
    ({"interleave": "yes"}, {}, r"views\[0\]\.interleave: must be true or false, got 'yes'"),
    ({"levels": ["work"]}, {}, r"views\[0\]\.interleave: alternates the levels of two or more "
                               r"attributes; this view lists one"),
    ({"levels": ["work", "distance"]}, {},
     r"views\[0\]\.interleave: takes categorical and hierarchy attributes only; 'distance' "
     r"is a range"),
    ({}, {"spine_columns": ["region"]},
     r"attributes\.work\.spine_columns: must list 2 column names of the spine file, one per "
     r"entry of columns \(work_region, work_province\)"),
    ({}, {"spine_columns": ["region", "county"]},
     r"attributes\.work\.spine_file: the spine file has no column 'county'; its header is "
     r"\['region', 'province'\]"),
    ({}, {"spine_file": None, "spine": [["N", "N1"]]},
     r"attributes\.work\.spine_columns: names columns of a spine_file; give the file, or drop "
     r"spine_columns"),
], ids=["not-bool", "one-attribute", "range", "spine-columns-length", "spine-column-missing",
        "spine-columns-without-file"])
def test_interleave_and_spine_columns_errors(tmp_path, view, side, message):
    with pytest.raises(dpsql.SpecError, match=message):
        _od_spec(tmp_path, view, **side)


def _with_null_policy(neighbouring: str, on_null: str, views=None):
    attrs = {**BASE["attributes"], "origin": {**BASE["attributes"]["origin"],
                                              "on_null": on_null}}
    return spec(neighbouring=neighbouring, attributes=attrs, **({"views": views} if views
                                                                else {}))


def test_substitution_refuses_a_view_that_drops_nulls():
    # under substitute a view's total is released exactly; a view that dropped origin's
    # NULL rows would release the exact count of them (the other views' total minus its)
    with pytest.raises(dpsql.SpecError, match=r"attributes\.origin\.on_null: \"drop\" is not "
                                              r"allowed with neighbouring = \"substitute\": "
                                              r"the view 'route' over 'origin'"):
        _with_null_policy("substitute", "drop")
    # allowed: the same policy under add/remove (noisy totals), NULL as a released
    # category, or a drop on an attribute that no view releases
    assert _with_null_policy("add_remove", "drop").neighbouring is Neighbouring.ADD_REMOVE
    assert _with_null_policy("substitute", "category").attributes["origin"].on_null == \
        "category"
    dist_only = [{"name": "dist", "levels": ["distance"], "mechanism": "cascade"}]
    assert len(_with_null_policy("substitute", "drop", dist_only).views) == 1


def test_substitution_releases_each_views_total_exactly(tmp_path):
    """The premise of the refusal above, checked on a real build: under substitute a
    view's total carries no noise, so a per-view drop would publish its NULL count."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsql.release import build_release

    pq.write_table(pa.table({"origin": ["EWR", "JFK", "LGA", "JFK"] * 50,
                             "distance": [100.0, 200.0, 300.0, 4000.0] * 50}),
                   tmp_path / "flights.parquet")
    out = tmp_path / "r.duckdb"
    build_release(ReleaseSpec.from_dict({**BASE, "neighbouring": "substitute",
                                         "budget": {"rho": 0.001}}, base_dir=tmp_path),
                  out, seed=3, progress=False)
    con = duckdb.connect(str(out), read_only=True)
    totals = [con.execute(f"SELECT SUM(dp_count) FROM {t}").fetchone()[0]
              for t in ("route__l1", "dist__l1")]
    con.close()
    assert totals == [pytest.approx(200, abs=1e-6)] * 2
