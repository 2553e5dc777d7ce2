"""Contribution bounding with a unit column (privacy rule 2): no unit ever contributes more
than ``max_rows`` rows to any count, every view counts the same kept rows, and which rows
are kept is a random choice drawn from the release's salt, not a function of the data."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.release import counts, ingest as ingest_module
from dpsql.release.ingest import ingest
from dpsql.spec import ReleaseSpec

BINS = 8


def _units_table(seed: int, n_units: int = 120) -> tuple[pa.Table, np.ndarray]:
    """Unit u has k_u rows (1 to 60, most above any max_rows tested), all of category
    ``who = 'u<u>'``: a count over ``who`` is then one unit's contribution. The last unit
    id is NULL (one unit, like any other). Rows of a unit are interleaved with the
    others' in the file, and spread over distance bins and modes."""
    g = np.random.default_rng(seed)
    sizes = g.integers(1, 61, n_units)
    unit = np.repeat(np.arange(n_units), sizes)
    g.shuffle(unit)
    n = unit.size
    uid = pa.array(unit, mask=unit == n_units - 1)
    return pa.table({
        "uid": uid,
        "who": [f"u{u}" for u in unit],
        "mode": g.choice(["car", "bus", "walk"], n),
        "distance": g.uniform(0, BINS, n),
    }), sizes


def _spec(base: Path, n_units: int, max_rows: int) -> ReleaseSpec:
    return ReleaseSpec.from_dict({
        "name": "bounded", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1},
        "privacy_unit": {"column": "uid", "max_rows": max_rows},
        "attributes": {
            "who": {"kind": "categorical", "domain": [f"u{u}" for u in range(n_units)]},
            "mode": {"kind": "categorical", "domain": ["car", "bus", "walk"]},
            "distance": {"kind": "range", "lower": 0, "upper": BINS, "bins": BINS},
        },
        "views": [
            {"name": "who", "levels": ["who"]},
            {"name": "who_dist", "levels": ["who", "distance"]},
            {"name": "mode_dist", "levels": ["mode", "distance"]},
        ],
    }, base_dir=base)


def _leaves(spec: ReleaseSpec, salt: int) -> tuple[dict, ingest_module.IngestReport]:
    con = duckdb.connect()
    report = ingest(spec, con, salt=salt)
    got = {}
    for v in spec.views:
        table = counts.as_numpy(counts.leaf_counts(con, list(v.levels)))
        got[v.name] = {tuple(int(table[f"c_{a}"][i]) for a in v.levels): int(table["n"][i])
                       for i in range(len(table["n"]))}
    return got, report


@pytest.mark.parametrize("max_rows", [1, 2, 5])
def test_no_unit_contributes_more_than_max_rows_to_any_count(tmp_path, max_rows):
    table, sizes = _units_table(seed=max_rows)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, len(sizes), max_rows)
    got, report = _leaves(spec, salt=12345)
    want = np.minimum(sizes, max_rows)
    # Level 1 of 'who' and 'who_dist': one unit's contribution, exactly min(k, m).
    assert got["who"] == {(u,): int(want[u]) for u in range(len(sizes))}
    per_unit = np.zeros(len(sizes), dtype=np.int64)
    for (u, _), n in got["who_dist"].items():
        per_unit[u] += n
        assert n <= max_rows
    assert per_unit.tolist() == want.tolist()
    # Every kept row is one of the unit's rows (never invented, never moved).
    true = {}
    for u, d in zip(table.column("who").to_pylist(), table.column("distance").to_numpy()):
        key = (int(u[1:]), int(d))
        true[key] = true.get(key, 0) + 1
    assert all(n <= true[k] for k, n in got["who_dist"].items())
    # All views count the same kept rows: the distance margins agree.
    margin = {}
    for view in ("who_dist", "mode_dist"):
        m = np.zeros(BINS, dtype=np.int64)
        for key, n in got[view].items():
            m[key[1]] += n
        margin[view] = m.tolist()
    assert margin["who_dist"] == margin["mode_dist"]
    assert report.rows_used == int(want.sum())
    dropped = int(sizes.sum() - want.sum())
    assert ("uid", f"dropped (more than {max_rows} rows per unit)", dropped) \
        in report.actions


def test_the_choice_is_drawn_from_the_salt(tmp_path):
    table, sizes = _units_table(seed=7)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, len(sizes), 2)
    runs = {salt: _leaves(spec, salt)[0] for salt in (1, 2, 3, 2**62 - 1)}
    assert _leaves(spec, 2)[0] == runs[2]  # the same salt makes the same choice
    choices = [r["who_dist"] for r in runs.values()]
    assert all(a != b for i, a in enumerate(choices) for b in choices[i + 1:])
    for r in runs.values():  # and every choice keeps exactly min(k, m) per unit
        assert r["who"] == {(u,): int(min(k, 2)) for u, k in enumerate(sizes)}


def test_every_row_of_a_unit_can_be_the_one_kept(tmp_path):
    # One unit with a row in each distance bin, max_rows = 1: over 60 salts each bin is
    # kept at least once (a bin is missed with probability about 8·(7/8)^60 = 3e-3;
    # the salts are fixed, so the test is deterministic).
    table = pa.table({"uid": np.zeros(BINS, dtype=np.int64), "who": ["u0"] * BINS,
                      "mode": ["car"] * BINS, "distance": np.arange(BINS) + 0.5})
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, 1, 1)
    kept = set()
    for salt in range(60):
        got, _ = _leaves(spec, salt)
        assert sum(got["who_dist"].values()) == 1
        kept |= {d for (_, d) in got["who_dist"]}
    assert kept == set(range(BINS))
