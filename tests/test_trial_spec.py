"""A new user's trial of the spec: the mistakes a newcomer makes first, and what the
error says. Each message names the key path, the offending value as written, and what
to write instead (STYLE §4)."""

from __future__ import annotations

import pytest

import dpsql
from dpsql.spec import ReleaseSpec

BASE = {
    "name": "flights", "source": "flights.parquet", "neighbouring": "add_remove",
    "privacy_unit": {"column": "tailnum", "max_rows": 200},
    "budget": {"rho": 0.5},
    "attributes": {
        "origin": {"kind": "categorical", "domain": ["EWR", "JFK", "LGA"]},
        "distance": {"kind": "range", "lower": 0, "upper": 5000, "width": 100},
    },
    "views": [{"name": "by_origin", "levels": ["origin"], "mechanism": "inftda"},
              {"name": "dist", "levels": ["distance"], "mechanism": "cascade"}],
}


def refused(**changes) -> str:
    with pytest.raises(dpsql.SpecError) as info:
        ReleaseSpec.from_dict({**BASE, **changes})
    return str(info.value)


def test_a_negative_budget_names_its_key_and_the_value_as_written():
    """Was `budget: rho must be > 0, got Fraction(-1, 1); ...`."""
    msg = refused(budget={"rho": -1})
    assert msg.startswith("budget.rho: must be > 0, got -1;") and "Fraction" not in msg
    assert refused(budget={"epsilon": 1, "delta": 2}).startswith(
        "budget.delta: must be in (0, 1), got 2;")


def test_a_range_without_bounds_says_they_are_missing():
    """Was `attributes.distance.lower: must be a number, got None`."""
    msg = refused(attributes={**BASE["attributes"],
                              "distance": {"kind": "range", "upper": 5000, "width": 100}})
    assert msg.startswith("attributes.distance.lower: missing:"), msg
    assert "'lower' and 'upper'" in msg and "None" not in msg


@pytest.mark.parametrize("changes,suggestion", [
    ({"neighboring": "add_remove"}, "did you mean 'neighbouring'?"),
    ({"privacy_unit": {"column": "tailnum", "max_row": 200}}, "did you mean 'max_rows'?"),
    ({"budget": {"rhoo": 1}}, "did you mean 'rho'?"),
    ({"views": [{"name": "d", "levels": ["distanc"], "mechanism": "cascade"}]},
     "did you mean 'distance'?"),
    ({"views": [{"name": "d", "levels": ["distance"], "mechanism": "cascde"}]},
     "did you mean 'cascade'?"),
    ({"views": [{"name": "d", "levels": ["distance"], "mechanism": "cascade", "wieght": 2}]},
     "did you mean 'weight'?"),
    ({"attributes": {**BASE["attributes"], "origin": {"kind": "categorical", "domain": ["A"],
                                                      "on_nul": "drop"}}},
     "did you mean 'on_null'?"),
    ({"attributes": {**BASE["attributes"], "origin": {"kind": "categoric", "domain": ["A"]}}},
     "did you mean 'categorical'?"),
    ({"privacy_unit": {"column": "tailnum", "max_rows": 2, "on_null": "dorp"}},
     "did you mean 'drop'?"),
])
def test_a_misspelled_key_or_name_gets_the_closest_one(changes, suggestion):
    """A typo was answered with the list of allowed names alone; now the message ends
    with the closest one."""
    assert refused(**changes).endswith(suggestion)


def test_no_suggestion_when_nothing_is_close():
    msg = refused(views=[{"name": "d", "levels": ["dst"]}])
    assert msg == ("views[0].levels[0]: unknown attribute 'dst'; declared attributes: "
                   "origin, distance")
