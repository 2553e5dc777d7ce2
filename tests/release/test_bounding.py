"""Contribution bounding with a unit column (privacy rule 2): no unit ever contributes more
than ``max_rows`` rows to any count, every view counts the same kept rows, and which rows
are kept is a random choice drawn from the release's salt, not a function of the data."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.release import counts, ingest as ingest_module
from dpsql.release.ingest import ingest
from dpsql.spec import ReleaseSpec

from bounding_paths import bounding_path  # noqa: F401  (a fixture)

BINS = 8


def _units_table(seed: int, n_units: int = 120) -> tuple[pa.Table, np.ndarray]:
    """Unit u has k_u rows (1 to 60, most above any max_rows tested), all of category
    ``who = 'u<u>'``: a count over ``who`` is then one unit's contribution (NULL ids follow
    ``[privacy_unit] on_null``: tests/release/test_unit_nulls.py). Rows of a unit are
    interleaved with the others' in the file, and spread over distance bins and modes."""
    g = np.random.default_rng(seed)
    sizes = g.integers(1, 61, n_units)
    unit = np.repeat(np.arange(n_units), sizes)
    g.shuffle(unit)
    n = unit.size
    uid = pa.array(unit)
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
def test_no_unit_contributes_more_than_max_rows_to_any_count(tmp_path, max_rows,
                                                             bounding_path):  # noqa: F811
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


def test_the_choice_is_drawn_from_the_salt(tmp_path, bounding_path):  # noqa: F811
    table, sizes = _units_table(seed=7)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, len(sizes), 2)
    runs = {salt: _leaves(spec, salt)[0] for salt in (1, 2, 3, 2**62 - 1)}
    assert _leaves(spec, 2)[0] == runs[2]  # the same salt makes the same choice
    choices = [r["who_dist"] for r in runs.values()]
    assert all(a != b for i, a in enumerate(choices) for b in choices[i + 1:])
    for r in runs.values():  # and every choice keeps exactly min(k, m) per unit
        assert r["who"] == {(u,): int(min(k, 2)) for u, k in enumerate(sizes)}


def test_a_units_kept_rows_depend_on_its_own_rows_only(tmp_path, bounding_path):  # noqa: F811
    """Bounding is a stable transformation: for one salt, adding another unit's rows
    (anywhere in the file) or reordering the source never changes which rows of this
    unit are kept. Otherwise one person joining could move every other person's counts,
    and the sensitivity of privacy rule 2 would rest on the hash behaving randomly. A key
    of the row's position in the source fails this test."""
    table, sizes = _units_table(seed=3, n_units=80)
    more, _ = _units_table(seed=4, n_units=40)
    # the newcomers are units 80..119 (category u80..u119)
    uid = pa.array(more.column("uid").to_numpy() + 80)
    more = more.set_column(0, "uid", uid).set_column(
        1, "who", pa.array([f"u{int(w[1:]) + 80}" for w in more.column("who").to_pylist()]))
    both = pa.concat_tables([more.slice(0, 500), table, more.slice(500)])
    runs = {}
    for name, t in (("alone", table), ("with_others", both), ("reversed", table.take(
            np.arange(table.num_rows)[::-1]))):
        base = tmp_path / name
        base.mkdir()
        pq.write_table(t, base / "t.parquet")
        got, _ = _leaves(_spec(base, 120, 2), salt=99)
        runs[name] = {k: n for k, n in got["who_dist"].items() if k[0] < 80}
    assert runs["alone"] == runs["with_others"] == runs["reversed"]
    assert sum(runs["alone"].values()) == int(np.minimum(sizes, 2).sum())


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


# --------------------------------------------------------------------------------------
# Uniformity: every set of max_rows of a unit's rows is equally likely to be kept
# --------------------------------------------------------------------------------------

UNITS = 3000


def _layout_table(bins_per_unit: list[int], seed: int) -> pa.Table:
    """UNITS units, each with one row in each of ``bins_per_unit`` (a repeated bin is two
    identical rows) and its own category ``who``, so that the counts per (who, bin) say
    which rows each unit kept. Shuffled through the file."""
    g = np.random.default_rng(seed)
    unit = np.repeat(np.arange(UNITS), len(bins_per_unit))
    dist = np.tile(np.asarray(bins_per_unit, dtype=float) + 0.5, UNITS)
    order = g.permutation(unit.size)
    return pa.table({"uid": unit[order], "who": [f"u{u}" for u in unit[order]],
                     "distance": dist[order]})


def _kept_sets(tmp_path: Path, table: pa.Table, max_rows: int, salt: int) -> Counter:
    """How many units kept each multiset of bins."""
    pq.write_table(table, tmp_path / "t.parquet")
    spec = ReleaseSpec.from_dict({
        "name": "uniform", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1}, "privacy_unit": {"column": "uid", "max_rows": max_rows},
        "attributes": {
            "who": {"kind": "categorical", "domain": [f"u{u}" for u in range(UNITS)]},
            "distance": {"kind": "range", "lower": 0, "upper": BINS, "bins": BINS}},
        "views": [{"name": "d", "levels": ["who", "distance"]}],
    }, base_dir=tmp_path)
    con = duckdb.connect()
    ingest(spec, con, salt=salt)
    rows = con.execute("SELECT c_who, c_distance, n FROM dpsql_leaves").fetchall()
    return _sets_of(rows)


def _sets_of(rows) -> Counter:
    per_unit: dict[int, list[int]] = {}
    for u, b, n in rows:
        per_unit.setdefault(u, []).extend([b] * n)
    return Counter(tuple(sorted(bins)) for bins in per_unit.values())


def _chances(bins: list[int], max_rows: int) -> dict[tuple[int, ...], float]:
    """The chance of each kept multiset of bins when every max_rows-subset of the rows
    is equally likely."""
    subsets = Counter(tuple(sorted(bins[i] for i in c))
                      for c in combinations(range(len(bins)), max_rows))
    total = sum(subsets.values())
    return {k: v / total for k, v in subsets.items()}


def _worst_z(kept: Counter, chances: dict[tuple[int, ...], float]) -> float:
    """The largest |z| over the possible kept sets: each unit keeps set s with chance
    ``chances[s]``, independently of the others (a binomial count)."""
    assert set(kept) <= set(chances), kept  # never a set that is not max_rows rows
    return max(abs(kept[s] - UNITS * p) / np.sqrt(UNITS * p * (1 - p))
               for s, p in chances.items())


# (bins of each unit's rows, max_rows)
LAYOUTS = {
    "three_rows_keep_one": ([0, 1, 2], 1),
    "a_repeated_row_is_two_chances": ([0, 0, 1], 1),
    "three_rows_keep_two": ([0, 1, 2], 2),
    "four_rows_keep_two": ([0, 1, 2, 3], 2),
    "four_rows_two_alike_keep_two": ([0, 0, 1, 2], 2),
}


@pytest.mark.statistical
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_set_of_max_rows_rows_is_equally_likely(tmp_path, layout,
                                                    bounding_path):  # noqa: F811
    # Within 5 standard errors, for two salts. Which rows a unit keeps must not depend
    # on their values: identical rows are two chances, and rows that differ only in
    # their last code are as likely as any others.
    bins, max_rows = LAYOUTS[layout]
    for salt in (11, 2**61 + 5):
        kept = _kept_sets(tmp_path, _layout_table(bins, seed=salt % 97), max_rows, salt)
        assert sum(kept.values()) == UNITS
        assert _worst_z(kept, _chances(bins, max_rows)) < 5, kept


@pytest.mark.statistical
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_uniformity_check_rejects_a_salted_hash_of_values(layout):
    # Power check: the same criterion fails on the choice that a salted hash of the unit
    # and the row's codes makes (dpsql's choice until this test was written). DuckDB
    # hashes several arguments by XOR-ing their hashes, so the salt cannot reorder rows
    # that differ in the last code alone, and identical rows share one key.
    bins, max_rows = LAYOUTS[layout]
    con = duckdb.connect()
    con.register("t", _layout_table(bins, seed=3))
    rows = con.execute(
        f"SELECT uid, b, count(*) FROM (SELECT uid, floor(distance)::BIGINT AS b, "
        f"row_number() OVER (PARTITION BY uid ORDER BY hash(11, uid, uid, "
        f"floor(distance)::BIGINT)) AS r FROM t) WHERE r <= {max_rows} GROUP BY ALL"
    ).fetchall()
    assert _worst_z(_sets_of(rows), _chances(bins, max_rows)) > 5
