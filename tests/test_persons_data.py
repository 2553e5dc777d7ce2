"""The seeded persons table (dpsql.datasets.synthetic_persons): the new-user trial's scale
and the shape properties its calibration benchmark relies on (benchmarks/calibration.py
--datasets persons), checked on the data itself with plain DuckDB."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from dpsql.datasets import (INCOME_BINS, INCOME_WIDTH, persons_spec, synthetic_persons,
                            write_persons)


@pytest.fixture(scope="module")
def persons():
    table, spine = synthetic_persons(seed=2020)
    con = duckdb.connect()
    con.register("p", table)
    return table, spine, con


def test_seeded_and_deterministic():
    small, spine = synthetic_persons(n_households=2_000, seed=2020)
    again, spine2 = synthetic_persons(n_households=2_000, seed=2020)
    assert again.equals(small) and (spine2 == spine).all()
    other, _ = synthetic_persons(n_households=2_000, seed=2021)
    assert not other.equals(small)


def test_trial_scale_and_public_spine(persons):
    table, spine, con = persons
    assert 195_000 <= table.num_rows <= 205_000  # the trial's 200,326 in 80,000 households
    assert [len(set(spine[:, j])) for j in range(3)] == [6, 36, 213]
    assert len({tuple(r) for r in spine.tolist()}) == 213
    paths = con.execute("SELECT DISTINCT state, county, tract FROM p").fetchall()
    assert set(paths) <= {tuple(r) for r in spine.tolist()}
    # a county under one state, a tract under one county (a tree)
    assert con.execute("SELECT max(n) FROM (SELECT county, count(DISTINCT state) n FROM p "
                       "GROUP BY county)").fetchone()[0] == 1


def test_households_of_one_to_max_rows_people(persons):
    """Households hold 1 to 6 people (max_rows = 6: bounding drops no row, so the raw rows
    are the release's population and the benchmark's truth), live in one tract and are
    surveyed on one day."""
    _, _, con = persons
    sizes = dict(con.execute("SELECT n, count(*) FROM (SELECT household, count(*) n FROM p "
                             "GROUP BY household) GROUP BY n").fetchall())
    assert set(sizes) == {1, 2, 3, 4, 5, 6} and sum(sizes.values()) == 80_000
    assert sizes[2] > sizes[1] > sizes[3] > sizes[6]
    assert persons_spec()["privacy_unit"] == {"column": "household", "max_rows": 6}
    one = con.execute("SELECT max(t), max(d) FROM (SELECT household, count(DISTINCT tract) t, "
                      "count(DISTINCT survey_date) d FROM p GROUP BY household)").fetchone()
    assert one == (1, 1)
    with pytest.raises(ValueError, match="max_household=7"):
        synthetic_persons(n_households=10, max_household=7)


def test_tracts_of_very_unequal_sizes(persons):
    _, _, con = persons
    small, median, large = con.execute(
        "SELECT quantile_cont(n, [0.1, 0.5, 0.9]) FROM (SELECT tract, count(*) n FROM p "
        "GROUP BY tract)").fetchone()[0]
    assert large > 4 * small and 400 <= median <= 1_500


def test_income_nulls_and_a_sparse_upper_tail(persons):
    """The mechanism of the trial's failure: under each tract the income bins below
    50,000 are all populated, and most of those from 100,000 up are empty (InfTDA's false
    positives there take mass from the large low bins)."""
    _, _, con = persons
    null_share, child_nulls = con.execute(
        "SELECT avg((income IS NULL)::int), count(*) FILTER (WHERE age < 15 AND income IS "
        "NOT NULL) FROM p").fetchone()
    assert 0.15 <= null_share <= 0.35 and child_nulls == 0
    bins = con.execute(
        f"SELECT tract, least(income // {INCOME_WIDTH}, {INCOME_BINS - 1}) AS bin, count(*) "
        "FROM p WHERE income IS NOT NULL GROUP BY ALL").fetchall()
    tracts = sorted({t for t, _, _ in bins})
    index = {t: i for i, t in enumerate(tracts)}
    counts = np.zeros((len(tracts), INCOME_BINS))
    for t, b, c in bins:
        counts[index[t], b] = c
    low, high = counts[:, :10], counts[:, 20:]
    assert (low > 0).mean() >= 0.99            # the bins below 50,000: populated
    empty_high = (high == 0).mean(axis=1)      # per tract, share of empty bins >= 100,000
    assert 0.3 <= float(np.median(empty_high)) <= 0.8
    assert float(np.quantile(empty_high, 0.9)) >= 0.7  # small tracts: nearly all empty
    assert 0.70 <= low.sum() / counts.sum() <= 0.85    # most incomes are below 50,000


def test_write_persons_is_what_the_spec_reads(tmp_path):
    from dpsql.spec import ReleaseSpec

    write_persons(tmp_path, n_households=500, seed=1)
    spec = ReleaseSpec.from_dict(persons_spec(1.0), base_dir=tmp_path)
    assert [v.name for v in spec.views] == ["geo_income", "geo_sex_age", "survey", "ages"]
    lines = (tmp_path / "tracts.csv").read_text().splitlines()
    assert lines[0] == "state,county,tract" and len(lines) == 214
    written = pq.read_table(tmp_path / "persons.parquet")
    assert written.equals(synthetic_persons(n_households=500, seed=1)[0])
