"""Red team of the curator's ``domain_file`` / ``domain_column`` and ``spine_file``: a
public domain read from the sensitive source itself.

A domain is public and declared (DESIGN privacy rule 1), and it is released as such
(``dpsql_domain__<attr>``, every value, noise or not). ``domain_column`` lets a curator
name any column of a CSV with a header, so the source CSV itself was accepted as a
domain file: with a column whose values are distinct (a person id), every value of the
data went into the release as its public domain. That one mistake is refused: a domain
or spine file may not be the source file (nor a file of the source's glob). A copy of
the data under another name cannot be told from a public list, and is the curator's to
avoid (docs/spec.md).
"""

from __future__ import annotations

import duckdb
import pytest

from dpsql.errors import SpecError
from dpsql.spec import ReleaseSpec


@pytest.fixture(scope="module")
def raw_csv(tmp_path_factory, trips_data):
    """The trips source as a CSV with a person id (unique per row), and a public list."""
    d = tmp_path_factory.mktemp("domain_source")
    duckdb.sql(f"COPY (SELECT *, 'P' || row_number() OVER () AS who FROM read_parquet("
               f"'{trips_data / 'trips.parquet'}') LIMIT 300) TO '{d / 'raw.csv'}'")
    (d / "modes.csv").write_text("mode\ncar\ntrain\nbus\nbike\nwalk\nother\n")
    return d


def _spec(source: str, attribute: dict) -> dict:
    return {"name": "leak", "source": source, "neighbouring": "add_remove",
            "budget": {"rho": 1}, "attributes": {"a": attribute},
            "views": [{"name": "v", "levels": ["a"], "mechanism": "inftda"}]}


@pytest.mark.parametrize("source, domain_file", [
    ("raw.csv", "raw.csv"), ("raw.csv", "./raw.csv"), ("raw.csv", "../{dir}/raw.csv"),
    ("*.csv", "raw.csv"), ("{abs}", "raw.csv")])
def test_the_source_is_not_a_domain_file(raw_csv, source, domain_file):
    """``domain_file = "raw.csv"`` with ``domain_column = "who"`` over the source
    ``raw.csv`` built a release whose public domain listed all 300 person ids."""
    fill = {"dir": raw_csv.name, "abs": str(raw_csv / "raw.csv")}
    spec = _spec(source.format(**fill), {"kind": "categorical",
                                         "domain_file": domain_file.format(**fill),
                                         "domain_column": "who"})
    with pytest.raises(SpecError, match="is the source") as err:
        ReleaseSpec.from_dict(spec, base_dir=raw_csv)
    assert "attributes.a.domain_file" in str(err.value)


def test_the_source_is_not_a_spine_file(raw_csv):
    spec = _spec("raw.csv", {"kind": "hierarchy", "columns": ["region", "who"],
                             "spine_file": "raw.csv"})
    with pytest.raises(SpecError, match="is the source"):
        ReleaseSpec.from_dict(spec, base_dir=raw_csv)


def test_a_public_domain_file_beside_the_source_is_read(raw_csv):
    spec = _spec("raw.csv", {"kind": "categorical", "domain_file": "modes.csv",
                             "domain_column": "mode"})
    spec["attributes"] = {"mode": spec["attributes"]["a"]}
    spec["views"][0]["levels"] = ["mode"]
    got = ReleaseSpec.from_dict(spec, base_dir=raw_csv).attributes["mode"].values
    assert got == ("car", "train", "bus", "bike", "walk", "other")
