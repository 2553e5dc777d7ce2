"""Ingest and counting on messy data: the aggregate-first path (rows are the unit) and the
row path (a unit column) must give exactly the leaf counts and the policy report that an
independent numpy oracle computes row by row."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql.release import build_release, open_release
from dpsql.release import bounding, counts
from dpsql.release.ingest import attribute_sets, ingest
from dpsql.spec import ReleaseSpec

SPINE = [("N", "N1", "a"), ("N", "N1", "b"), ("N", "N2", "c"), ("S", "S1", "d"),
         ("S", "S1", "e"), ("S", "S2", "f")]
MODES = ["car", "train", "bus"]
LOWER, UPPER, BINS = 0.0, 100.0, 10


def _messy(n: int, seed: int, nan: bool = True) -> pa.Table:
    """Rows with every kind of trouble: unknown cities, paths that contradict the spine,
    NULLs, unknown modes, values below/above the bounds, ±inf, NaN."""
    g = np.random.default_rng(seed)
    leaf = g.integers(0, len(SPINE), n)
    region = [SPINE[i][0] for i in leaf]
    province = [SPINE[i][1] for i in leaf]
    city = [SPINE[i][2] for i in leaf]
    for i in g.choice(n, n // 20, replace=False):
        city[i] = "zz"  # not in the spine
    for i in g.choice(n, n // 25, replace=False):
        region[i] = "S" if region[i] == "N" else "N"  # contradicts the spine
    for i in g.choice(n, n // 30, replace=False):
        province[i] = None
    mode = g.choice(MODES + ["rocket"], n, p=[0.4, 0.3, 0.25, 0.05]).astype(object)
    mode[g.choice(n, n // 40, replace=False)] = None
    dist = g.uniform(-20, 130, n)
    dist[g.choice(n, n // 50, replace=False)] = np.inf
    dist[g.choice(n, n // 50, replace=False)] = -np.inf
    if nan:
        dist[g.choice(n, n // 60, replace=False)] = np.nan
    dist_arr = pa.array(dist, mask=g.random(n) < 0.03)  # NULLs as well as NaN
    return pa.table({"uid": np.arange(n), "region": region, "province": province,
                     "city": city, "mode": pa.array(list(mode), pa.string()),
                     "distance": dist_arr})


def _spec(base: Path, unit: bool, geo: str = "drop", mode: str = "drop",
          dist: str = "drop", views=None) -> ReleaseSpec:
    data = {
        "name": "messy", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1},
        "attributes": {
            "geo": {"kind": "hierarchy", "columns": ["region", "province", "city"],
                    "spine": [list(p) for p in SPINE], "on_out_of_domain": geo,
                    "on_null": "drop"},
            "mode": {"kind": "categorical", "domain": MODES, "on_out_of_domain": mode,
                     "on_null": "drop"},
            "distance": {"kind": "range", "lower": LOWER, "upper": UPPER, "bins": BINS,
                         "on_out_of_bounds": dist, "on_null": "drop"},
        },
        "views": views or [
            {"name": "geo_mode", "levels": ["geo", "mode"]},
            {"name": "dist", "levels": ["distance"], "mechanism": "cascade"},
            {"name": "mode_dist", "levels": ["mode", "distance"]},
            {"name": "mode_geo", "levels": ["mode", "geo"]},  # same set as geo_mode
        ],
    }
    if unit:
        data["privacy_unit"] = {"column": "uid", "max_rows": 1}
    return ReleaseSpec.from_dict(data, base_dir=base)


def _oracle(table: pa.Table, spec: ReleaseSpec) -> tuple[dict, dict]:
    """Row by row in numpy: each attribute's code (or why the row is dropped), then the
    counts of every attribute set over the rows that survive its policies: a row dropped
    as out of domain or bounds leaves every view; a NULL under on_null = "drop" leaves
    the views over that attribute only. ``codes``/``keep``: the rows kept by the first
    kind of policy, NULLs counted under the attribute's NULL code (one past its codes)."""
    cols = {c: table.column(c).to_pylist() for c in table.column_names}
    n = table.num_rows
    path_code = {p: i for i, p in enumerate(SPINE)}
    code, null, bad = {}, {}, {}
    geo = list(zip(cols["region"], cols["province"], cols["city"]))
    null["geo"] = np.array([any(x is None for x in p) for p in geo])
    code["geo"] = np.array([path_code.get(p, -1) for p in geo])
    bad["geo"] = ~null["geo"] & (code["geo"] < 0)
    null["mode"] = np.array([m is None for m in cols["mode"]])
    code["mode"] = np.array([MODES.index(m) if m in MODES else -1 for m in cols["mode"]])
    bad["mode"] = ~null["mode"] & (code["mode"] < 0)
    d = np.array([np.nan if x is None else x for x in cols["distance"]], dtype=float)
    null["distance"] = np.array([x is None for x in cols["distance"]])
    with np.errstate(invalid="ignore"):
        bad["distance"] = ~null["distance"] & ((d < LOWER) | (d >= UPPER) | np.isnan(d))
        b = np.floor((d - LOWER) / ((UPPER - LOWER) / BINS))
        code["distance"] = np.clip(np.nan_to_num(b, nan=-1, posinf=BINS, neginf=-1),
                                   0, BINS - 1).astype(int)
    null_code = {"geo": len(SPINE), "mode": len(MODES), "distance": BINS}
    keep = np.ones(n, bool)
    used = {a for v in spec.views for a in v.levels}
    for a, attr in spec.attributes.items():
        code[a] = np.where(null[a], null_code[a], code[a])
        dropping = getattr(attr, "on_out_of_domain", None) == "drop" or \
            getattr(attr, "on_out_of_bounds", None) == "drop"
        if dropping:  # out of the population, whether or not a view uses the attribute
            keep &= ~bad[a]
    leaves, used_rows = {}, None
    for s in attribute_sets(spec):
        mine = keep.copy()
        for a in s:
            mine &= ~null[a]
        used_rows = max(int(mine.sum()), used_rows or 0)  # the fullest view's rows
        keys = np.stack([code[a][mine] for a in s], axis=1)
        uniq, cnt = np.unique(keys, axis=0, return_counts=True)
        leaves[counts.set_key(s)] = {tuple(int(x) for x in k): int(c)
                                     for k, c in zip(uniq, cnt)}
    stats = {a: (int(null[a].sum()), int(bad[a].sum())) for a in spec.attributes if a in used}
    return leaves, {"rows_read": n, "rows_used": used_rows, "stats": stats, "bad": bad,
                    "codes": {a: code[a][keep] for a in used}, "keep": keep,
                    "null_code": null_code}


def _ingested(spec: ReleaseSpec) -> tuple[dict, dpsql.release.ingest.IngestReport]:
    con = duckdb.connect()
    report = ingest(spec, con, salt=1)
    got = {}
    for s in attribute_sets(spec):
        table = counts.as_numpy(counts.leaf_counts(con, list(s)))
        got[counts.set_key(s)] = {tuple(int(table[f"c_{a}"][i]) for a in s): int(table["n"][i])
                                  for i in range(len(table["n"]))}
    return got, report


@pytest.mark.parametrize("unit", [False, True], ids=["keys", "rows"])
@pytest.mark.parametrize("seed", [1, 2])
def test_leaf_counts_and_report_match_a_row_by_row_oracle(tmp_path, unit, seed):
    table = _messy(3000, seed)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, unit)
    got, report = _ingested(spec)
    want, facts = _oracle(table, spec)
    assert got == want
    assert report.rows_read == facts["rows_read"]
    assert report.rows_used == facts["rows_used"]
    actions = {(a, what): rows for a, what, rows in report.actions}
    for a, (nulls, bad) in facts["stats"].items():
        assert actions[(a, "dropped (NULL) from the views over it")] == nulls
        kind = {"geo": "dropped (not in spine)", "mode": "dropped (out of domain)",
                "distance": "dropped (out of bounds)"}[a]
        assert actions[(a, kind)] == bad


@pytest.mark.parametrize("unit", [False, True], ids=["keys", "rows"])
def test_clamping_keeps_rows_and_counts_them(tmp_path, unit):
    table = _messy(2000, 3, nan=False)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, unit, dist="clamp")
    got, report = _ingested(spec)
    want, facts = _oracle(table, spec)
    assert got == want
    assert ("distance", "clamped (out of bounds)", facts["stats"]["distance"][1]) \
        in report.actions


@pytest.mark.parametrize("unit", [False, True], ids=["keys", "rows"])
def test_nan_cannot_be_clamped(tmp_path, unit):
    pq.write_table(_messy(500, 4), tmp_path / "t.parquet")
    with pytest.raises(dpsql.DataError, match=r"'distance' has \d+ NaN value\(s\)"):
        _ingested(_spec(tmp_path, unit, dist="clamp"))


def test_a_drop_reaches_views_without_the_dropping_attribute(tmp_path):
    # 'mode' drops rows out of its domain; the view over distance alone must lose them
    # too (it is counted a second time, over the coded rows), while the set holding mode
    # is not. 'geo', in no view, drops its rows off the spine from both. NULLs
    # (on_null = "drop") leave the views over their attribute only.
    table = _messy(2000, 5, nan=False)
    pq.write_table(table, tmp_path / "t.parquet")
    views = [{"name": "m", "levels": ["mode"]},
             {"name": "d", "levels": ["distance"], "mechanism": "cascade"}]
    spec = _spec(tmp_path, False, dist="clamp", views=views)
    got, report = _ingested(spec)
    want, facts = _oracle(table, spec)
    assert got == want
    # every view loses the out-of-domain modes; each loses only its own NULLs
    for a in ("distance", "mode"):
        nulls = table.column(a).is_null().to_numpy(zero_copy_only=False)
        assert sum(got[a].values()) == int((facts["keep"] & ~nulls).sum())
    assert facts["keep"].sum() < report.rows_read


@pytest.mark.parametrize("unit", [False, True], ids=["keys", "rows"])
@pytest.mark.parametrize("unused", ["geo", "mode", "distance"])
def test_an_attribute_in_no_view_still_drops_its_rows_outside_the_domain(tmp_path, unit,
                                                                         unused):
    # The spec's out-of-domain / out-of-bounds "drop" defines the population, whether or
    # not a view groups by the attribute: every view loses those rows. Its on_null =
    # "drop" leaves the views over it only, and there are none: NULL rows stay.
    table = _messy(3000, 8)
    pq.write_table(table, tmp_path / "t.parquet")
    views = {"geo": [{"name": "m", "levels": ["mode"]},
                     {"name": "d", "levels": ["distance"], "mechanism": "cascade"}],
             "mode": [{"name": "g", "levels": ["geo"]},
                      {"name": "gd", "levels": ["geo", "distance"]}],
             "distance": [{"name": "gm", "levels": ["geo", "mode"]}]}[unused]
    spec = _spec(tmp_path, unit, views=views)
    got, report = _ingested(spec)
    want, facts = _oracle(table, spec)
    assert got == want
    bad = int(facts["bad"][unused].sum())
    assert 0 < bad and facts["keep"].sum() < report.rows_read == table.num_rows
    actions = {(a, what): rows for a, what, rows in report.actions}
    kind = {"geo": "dropped (not in spine)", "mode": "dropped (out of domain)",
            "distance": "dropped (out of bounds)"}[unused]
    assert actions[(unused, kind)] == bad
    assert (unused, "dropped (NULL) from the views over it") not in actions
    assert report.rows_used == facts["rows_used"]


def _clean(seed: int, modes: list[str]) -> pa.Table:
    """1,000 rows on the spine, modes drawn from ``modes``, no NULLs."""
    g = np.random.default_rng(seed)
    leaf = g.integers(0, len(SPINE), 1000)
    return pa.table({"uid": np.arange(1000),
                     "region": [SPINE[i][0] for i in leaf],
                     "province": [SPINE[i][1] for i in leaf],
                     "city": [SPINE[i][2] for i in leaf],
                     "mode": g.choice(modes, 1000), "distance": g.uniform(-5, 120, 1000)})


def test_every_view_shares_one_scan_of_the_source(tmp_path, monkeypatch):
    # Clean data, no unit column: one query reads the source, and it groups by every set.
    table = _clean(6, MODES)
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, False, geo="error", mode="error", dist="clamp")
    calls = []
    real = counts.count_keys
    monkeypatch.setattr(counts, "count_keys",
                        lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    monkeypatch.setattr(counts, "count_codes", lambda *a, **k: pytest.fail("second scan"))
    got, report = _ingested(spec)
    assert len(calls) == 1 and len(calls[0]) == len(attribute_sets(spec)) == 3
    assert got == _oracle(table, spec)[0]
    assert report.rows_used == report.rows_read == 1000


def test_an_attribute_in_no_view_drops_its_rows_in_that_one_scan(tmp_path, monkeypatch):
    # Clean geo and distance in the views; mode, in no view, drops its unknown modes. Its
    # drop rides on the one scan (a key of every set): no second read of the source.
    table = _clean(9, MODES + ["rocket"])
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, False, geo="error", mode="drop", dist="clamp",
                 views=[{"name": "g", "levels": ["geo"]},
                        {"name": "gd", "levels": ["geo", "distance"]}])
    monkeypatch.setattr(counts, "count_codes", lambda *a, **k: pytest.fail("second scan"))
    got, report = _ingested(spec)
    want, facts = _oracle(table, spec)
    rockets = int(np.sum(table.column("mode").to_numpy(zero_copy_only=False) == "rocket"))
    assert got == want and rockets > 0
    assert ("mode", "dropped (out of domain)", rockets) in report.actions
    assert report.rows_used == report.rows_read - rockets == facts["rows_used"]


def test_grouping_ids_agree_with_duckdb():
    con = duckdb.connect()
    sets = [["a", "c"], ["b"], ["a", "b", "c"]]
    got = con.execute("SELECT GROUPING(a, b, c) AS g FROM (SELECT 1 a, 2 b, 3 c) "
                      "GROUP BY GROUPING SETS ((a, c), (b), (a, b, c)) ORDER BY g").fetchall()
    assert sorted(g for (g,) in got) == sorted(counts.grouping_ids(["a", "b", "c"], sets))


def test_build_returns_the_catalog_it_wrote(trips_data, tmp_path):
    from dpsql.datasets import trips_spec
    spec = ReleaseSpec.from_dict(trips_spec(1.0), base_dir=trips_data)
    built = build_release(spec, tmp_path / "r.duckdb", seed=3, progress=False)
    assert built == open_release(tmp_path / "r.duckdb")
    assert built.report.rows_used == built.report.rows_read > 0


def test_building_a_release_imports_neither_pandas_nor_the_query_side(trips_data, tmp_path):
    # pandas is optional (pyarrow.array would import it: ~0.3 s of a cold release); the
    # builder must not need it, with or without a unit column.
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from pathlib import Path
from dpsql.datasets import trips_spec
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
base = Path({str(trips_data)!r})
for unit in (None, {{"column": "traveller", "max_rows": 2}}):
    data = trips_spec(1.0)
    if unit:
        data["privacy_unit"] = unit
    build_release(ReleaseSpec.from_dict(data, base_dir=base), {str(tmp_path / 'r.duckdb')!r},
                  seed=1, progress=False, replace=True)
print(sorted(m for m in ("pandas", "dpsql.planner", "dpsql.dbapi") if m in sys.modules))
"""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("max_rows", [1, 3, 40])
def test_bounding_equals_ranking_every_unit(tmp_path, max_rows):
    # Units of every size (and NULL ids, dropped by on_null = "drop"): the rows kept must
    # be exactly those of ranking every unit's rows by the bounding key (row_number()
    # over the unit, as privacy rule 2 states it), whatever the builder's plan.
    from dpsql.release.ingest import _code_sizes

    table = _messy(3000, 7, nan=False)
    g = np.random.default_rng(8)
    uid = g.zipf(1.6, table.num_rows) % 200
    table = table.set_column(0, "uid", pa.array(uid, mask=g.random(table.num_rows) < 0.02))
    pq.write_table(table, tmp_path / "t.parquet")
    spec = _spec(tmp_path, True, dist="clamp")
    spec = ReleaseSpec.from_dict({**spec.to_dict(), "privacy_unit": {
        "column": "uid", "max_rows": max_rows, "on_null": "drop"}}, base_dir=tmp_path)
    got, report = _ingested(spec)
    _, facts = _oracle(table, spec)
    used = [a for a in spec.attributes if a in facts["codes"]]
    con = duckdb.connect()
    con.register("coded", {**{f"c_{a}": facts["codes"][a] for a in used},
                           "u": uid[facts["keep"]].astype(np.float64)})
    con.execute("CREATE TABLE coded2 AS SELECT * EXCLUDE (u), "
                "CASE WHEN isnan(u) THEN NULL ELSE u::BIGINT END AS dpsql_unit FROM coded")
    nulls = table.column("uid").is_null().to_numpy(zero_copy_only=False)[facts["keep"]]
    con.execute("UPDATE coded2 SET dpsql_unit = NULL WHERE rowid IN (SELECT unnest(?))",
                [np.flatnonzero(nulls).tolist()])
    packed, _, bits = counts._pack_codes(_code_sizes([spec.attributes[a] for a in used], {}))
    assert bits <= 63
    codes = ", ".join(f"c_{a}" for a in used)
    salted = bounding.duckdb_salted(bounding.duckdb_unit_hash("dpsql_unit", "BIGINT"),
                                    1)  # the salt _ingested uses
    key = bounding.duckdb_key(salted, "dpsql_pay", "dpsql_occ")
    con.execute(f"CREATE TABLE ranked AS SELECT *, row_number() OVER (PARTITION BY "
                f"dpsql_unit ORDER BY {key}) AS r FROM (SELECT *, ({packed})::UBIGINT AS "
                f"dpsql_pay, row_number() OVER (PARTITION BY dpsql_unit, {codes}) - 1 AS "
                "dpsql_occ FROM coded2 WHERE dpsql_unit IS NOT NULL)")
    want = {}
    for s in attribute_sets(spec):
        cols = ", ".join(f"c_{a}" for a in s)
        not_null = "".join(f" AND c_{a} <> {facts['null_code'][a]}" for a in s)
        rows = con.execute(f"SELECT {cols}, count(*) FROM ranked WHERE r <= {max_rows}"
                           f"{not_null} GROUP BY ALL").fetchall()
        want[counts.set_key(s)] = {tuple(r[:-1]): r[-1] for r in rows}
    assert got == want
    heavy = sum(max(0, k - max_rows) for k in np.unique(
        uid[facts["keep"]][~nulls], return_counts=True)[1])
    assert report.rows_used == max(sum(w.values()) for w in want.values())  # fullest view
    null_ids = int(table.column("uid").null_count)
    assert null_ids and ("uid", "dropped (NULL privacy-unit id)", null_ids) in report.actions
    if heavy:
        assert ("uid", f"dropped (more than {max_rows} rows per unit)", heavy) in report.actions


@pytest.mark.parametrize("unit", [False, True], ids=["keys", "rows"])
@pytest.mark.parametrize("column", [pa.array([1.0, 2.0, 1.5, 3.0, 2.5, 2.0, None]),
                                    pa.array(["1", "2", "1.5", "3", "2.5", "2", None])],
                         ids=["double", "varchar"])
def test_integer_domain_takes_only_integral_values(tmp_path, unit, column):
    """1.5 and 2.5 are not keys of the domain [1, 2, 3]: casting would round them into
    cells 2 and 3 and count those rows where they are not. They meet the policy instead."""
    pq.write_table(pa.table({"uid": np.arange(7), "k": column}), tmp_path / "t.parquet")

    def spec(policy: str) -> ReleaseSpec:
        data = {"name": "ints", "source": "t.parquet", "neighbouring": "add_remove",
                "budget": {"rho": 1},
                "attributes": {"k": {"kind": "categorical", "domain": [1, 2, 3],
                                     "on_out_of_domain": policy, "on_null": "drop"}},
                "views": [{"name": "v", "levels": ["k"], "mechanism": "inftda"}]}
        if unit:
            data["privacy_unit"] = {"column": "uid", "max_rows": 1}
        return ReleaseSpec.from_dict(data, base_dir=tmp_path)

    got, report = _ingested(spec("drop"))
    assert got[counts.set_key(("k",))] == {(0,): 1, (1,): 2, (2,): 1}
    assert ("k", "dropped (out of domain)", 2) in report.actions
    with pytest.raises(dpsql.DataError, match=r"'k' has 2 value\(s\) outside its public "
                                              r"domain, e\.g\. .*1\.5"):
        _ingested(spec("error"))
