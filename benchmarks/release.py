"""Whole-release time against a bare DuckDB GROUP BY over the same parquet file.

    .venv/bin/python benchmarks/release.py [--rows 10000000] [--quick]

A 10M-row parquet file (seeded), a 3-level region → province → city spine with about
10k leaves (InfTDA view) and one 1,024-bin range view (Cascade). The reference is the
aggregation a release cannot avoid: one GROUP BY per view over the same file, in the same
run. Targets (issue "Release builder"): ≤ 3× the bare aggregation; peak memory ≤ 2 GB.
The release runs in a subprocess so that its peak RSS is measured alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

SPINE = (20, 25, 20)  # regions, provinces per region, cities per province: 10,000 leaves


def make_data(rows: int, base: Path) -> None:
    gen = np.random.default_rng(42)
    r, p, c = SPINE
    leaves = r * p * c
    region = np.arange(leaves) // (p * c)
    province = np.arange(leaves) // c
    with open(base / "geo.csv", "w") as fh:
        fh.write("region,province,city\n")
        for i in range(leaves):
            fh.write(f"R{region[i]},P{province[i]},C{i}\n")
    weights = 1.0 / np.arange(1, leaves + 1) ** 1.1
    weights = gen.permutation(weights / weights.sum())
    writer = None
    chunk = 2_000_000
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        city = gen.choice(leaves, size=n, p=weights)
        table = pa.table({
            "region": pa.array(np.char.add("R", region[city].astype(str))),
            "province": pa.array(np.char.add("P", province[city].astype(str))),
            "city": pa.array(np.char.add("C", city.astype(str))),
            "distance": np.exp(gen.normal(6.0, 1.0, n)).clip(0, 4999),
        })
        if writer is None:
            writer = pq.ParquetWriter(base / "big.parquet", table.schema)
        writer.write_table(table)
    writer.close()
    (base / "spec.toml").write_text("""
name = "big"
source = "big.parquet"
neighbouring = "add_remove"
[budget]
rho = 1.0
[attributes.geo]
kind = "hierarchy"
columns = ["region", "province", "city"]
spine_file = "geo.csv"
[attributes.distance]
kind = "range"
lower = 0
upper = 5000
bins = 1024
[[views]]
name = "geo"
levels = ["geo"]
mechanism = "inftda"
[[views]]
name = "dist"
levels = ["distance"]
mechanism = "cascade"
""")


RUN_RELEASE = """
import resource, sys, time
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
t0 = time.perf_counter()
build_release(ReleaseSpec.from_toml(sys.argv[1]), sys.argv[2], progress=False)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

RUN_BARE = """
import resource, sys, time, duckdb
con = duckdb.connect()
t0 = time.perf_counter()
p = sys.argv[1]
con.execute(f"SELECT region, province, city, count(*) FROM '{p}' GROUP BY ALL").fetchall()
con.execute(f"SELECT floor(distance / (5000 / 1024)), count(*) FROM '{p}' GROUP BY 1").fetchall()
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _run(code: str, *args: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True)
    seconds, rss = out.stdout.split()
    return float(seconds), float(rss)


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="1M rows, one repetition")
    args = ap.parse_args()
    rows = 1_000_000 if args.quick else args.rows
    reps = 1 if args.quick else 3
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        t0 = time.perf_counter()
        make_data(rows, base)
        gen_s = time.perf_counter() - t0
        bare, rel = [], []
        for _ in range(reps):
            bare.append(_run(RUN_BARE, str(base / "big.parquet")))
            rel.append(_run(RUN_RELEASE, str(base / "spec.toml"), str(base / "out.duckdb")))
        size = (base / "out.duckdb").stat().st_size
    bare_s = min(b[0] for b in bare)
    rel_s = min(r[0] for r in rel)
    peak = max(r[1] for r in rel)
    result = {
        "rows": rows, "spine_leaves": int(np.prod(SPINE)), "range_bins": 1024,
        "data_generation_seconds": gen_s,
        "seconds": {"bare_duckdb_group_by": bare_s, "dpsql_release": rel_s},
        "ratio_release_vs_bare": rel_s / bare_s,
        "peak_rss_mb_release": peak,
        "release_file_mb": size / 2**20,
        "targets": {"ratio_release_vs_bare": "<= 3", "peak_rss_mb_release": "<= 2048"},
    }
    result["targets_met"] = result["ratio_release_vs_bare"] <= 3 and peak <= 2048
    path = write("release" + ("_quick" if args.quick else ""), result)
    print(json.dumps({k: result[k] for k in ("seconds", "ratio_release_vs_bare",
                                             "peak_rss_mb_release", "targets_met")}, indent=2))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
