"""Unit-column releases at scale under a memory cap, and Spark local against DuckDB (issue 22).

    .venv/bin/python benchmarks/scale.py [--rows 10000000 50000000 150000000] [--spark-rows N]
                                         [--quick]

The data and spec are ``benchmarks/release.py``'s (a 10k-leaf spine and a 1,024-bin range,
two views), with the privacy unit ``person_id`` (rows / 5 people, at most 3 rows each).

**DuckDB under a cap.** For each row count, ``dpsql release`` with ``[engine]
memory_limit`` (1GB up to 50M rows, 4GB above) against its reference in the same run:
*bare bucketed DuckDB*, the same bounding written by hand (each person's identical rows
counted and expanded with their occurrence number, the 3 of least salted key kept by a
top-n aggregate per person, then the GROUPING SETS counts) over the same K buckets of
people (``hash(person_id) % K``) and the same memory limit, the counts added. Each run is a
fresh subprocess; peak RSS is its VmHWM. Targets: peak RSS ≤ 1.5 GB at 10M and 50M rows;
at 150M rows capped at 4 GB, peak RSS ≤ 5 GB and time ≤ 3× the reference.

**Spark local.** The same unit-column release with ``engine = "spark"`` on ``local[2]``
(the machine's cores) at ``--spark-rows`` rows, against the DuckDB release of the same
file, and Spark's fixed start-up cost (a session started and one trivial job). Reported,
no target: Spark is for data that does not live on this machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write  # noqa: E402
from release import BIN, MAX_ROWS, PEAK, make_data  # noqa: E402

RUN_RELEASE = PEAK + """
import sys, time
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec
t0 = time.perf_counter()
build_release(ReleaseSpec.from_toml(sys.argv[1]), sys.argv[2], progress=False)
print(time.perf_counter() - t0, PEAK(), file=sys.stderr)
"""

RUN_BUCKETED = PEAK + """
import sys, time, duckdb
path, limit, k, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
con = duckdb.connect()
con.execute(f"SET memory_limit = '{limit}'")
con.execute(f"SET temp_directory = '{tmp}'")
t0 = time.perf_counter()
KEY = ("hash(xor(hash(xor(hash(xor(hash(person_id), 8817263544019::UBIGINT)), "
       "hash(region, province, city, b))), occ::UBIGINT))")
parts = []
for b in range(k):
    rows = (f"(SELECT *, unnest(range(n)) AS occ FROM (SELECT person_id, region, province, "
            f"city, {BIN} AS b, count(*) AS n FROM '{path}' WHERE hash(person_id) % {k} = {b} "
            "GROUP BY ALL))")
    parts.append(con.execute(
        f"SELECT r.region, r.province, r.city, r.b, count(*) FROM (SELECT unnest(arg_min("
        f"struct_pack(region := region, province := province, city := city, b := b), "
        f"{KEY}, {MAX_ROWS})) AS r FROM {rows} GROUP BY person_id) "
        "GROUP BY GROUPING SETS ((r.region, r.province, r.city), (r.b))").fetchall())
totals = {}
for part in parts:
    for *key, n in part:
        totals[tuple(key)] = totals.get(tuple(key), 0) + n
print(time.perf_counter() - t0, PEAK(), file=sys.stderr)
""".replace("{BIN}", BIN).replace("{MAX_ROWS}", str(MAX_ROWS))

SPARK_START = PEAK + """
import sys, time
t0 = time.perf_counter()
from pyspark.sql import SparkSession
s = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
s.range(10).count()
print(time.perf_counter() - t0, PEAK(), file=sys.stderr)
s.stop()
"""


def _run(code: str, *args: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    seconds, rss = out.stderr.split()[-2:]
    return float(seconds), float(rss)


def _spec(base: Path, name: str, engine: str) -> str:
    text = (base / "spec_units.toml").read_text()
    path = base / name
    path.write_text(engine + "\n" + text)
    return str(path)


def duckdb_capped(rows: int) -> dict:
    from dpsql.engine_settings import size_bytes
    from dpsql.release.counts import bucket_count
    limit = "1GB" if rows <= 50_000_000 else "4GB"
    k = bucket_count(rows, size_bytes(limit))
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        base = Path(tmp)
        t0 = time.perf_counter()
        make_data(rows, base)
        made = time.perf_counter() - t0
        spill = base / "spill"
        spill.mkdir()
        spec = _spec(base, "capped.toml", f'engine = {{ memory_limit = "{limit}", '
                                          f'temp_directory = "{spill}" }}')
        bare = _run(RUN_BUCKETED, str(base / "big.parquet"), limit, str(k), str(spill))
        release = _run(RUN_RELEASE, spec, str(base / "out.duckdb"))
        parquet_mb = (base / "big.parquet").stat().st_size / 2**20
    budget_mb = 5 * 1024 if rows > 50_000_000 else 1.5 * 1024
    out = {"rows": rows, "memory_limit": limit, "buckets": k, "parquet_mb": parquet_mb,
           "data_generation_seconds": made,
           "seconds": {"bare_bucketed_duckdb": bare[0], "dpsql_release": release[0]},
           "peak_rss_mb": {"bare_bucketed_duckdb": bare[1], "dpsql_release": release[1]},
           "ratio_release_vs_bare": release[0] / bare[0],
           "targets": {"peak_rss_mb_release": f"<= {budget_mb:g}"}}
    if rows > 50_000_000:
        out["targets"]["ratio_release_vs_bare"] = "<= 3"
    out["targets_met"] = release[1] <= budget_mb and (
        rows <= 50_000_000 or out["ratio_release_vs_bare"] <= 3)
    print(json.dumps(out), flush=True)
    return out


def spark_local(rows: int) -> dict:
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        base = Path(tmp)
        make_data(rows, base)
        duck = _run(RUN_RELEASE, str(base / "spec_units.toml"), str(base / "d.duckdb"))
        start = _run(SPARK_START)
        spec = _spec(base, "spark.toml", 'engine = { name = "spark", master = "local[2]" }')
        spark = _run(RUN_RELEASE, spec, str(base / "s.duckdb"))
    out = {"rows": rows, "master": "local[2]",
           "seconds": {"duckdb_release": duck[0], "spark_release": spark[0],
                       "spark_session_start": start[0]},
           "ratio_spark_vs_duckdb": spark[0] / duck[0],
           "ratio_spark_after_start_vs_duckdb": (spark[0] - start[0]) / duck[0],
           "peak_rss_mb_driver": {"duckdb_release": duck[1], "spark_release": spark[1]}}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="*", default=[10_000_000, 50_000_000,
                                                           150_000_000])
    ap.add_argument("--spark-rows", type=int, default=10_000_000)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="keep the sizes (and the Spark run) of the last results file")
    ap.add_argument("--quick", action="store_true", help="1M rows, Spark at 200k rows")
    args = ap.parse_args()
    rows = [1_000_000] if args.quick else args.rows
    name = "scale_quick" if args.quick else "scale"
    result: dict = {"max_rows": MAX_ROWS, "duckdb_capped": []}
    if args.merge and (RESULTS / f"{name}.json").exists():  # add to an earlier run's sizes
        earlier = json.loads((RESULTS / f"{name}.json").read_text())
        result.update({k: v for k, v in earlier.items() if k not in ("benchmark", "machine")})
    for r in rows:  # written after each size: a long run that is stopped keeps what it did
        result["duckdb_capped"] = [x for x in result["duckdb_capped"] if x["rows"] != r]
        result["duckdb_capped"].append(duckdb_capped(r))
        write(name, result)
    if not args.no_spark and shutil.which("java"):
        result["spark_local"] = spark_local(200_000 if args.quick else args.spark_rows)
    print(write(name, result))


if __name__ == "__main__":
    main()
