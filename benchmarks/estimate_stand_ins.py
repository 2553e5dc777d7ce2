"""Coverage of ``dp_estimate()`` where reconciliation left released nodes unmeasured.

Two InfTDA views over one hierarchy (the trips data: geo → mode and geo → distance) at a
small ρ, so that one view's run prunes cities the other keeps: reconciliation then makes
nodes positive under a parent the run pruned, which InfTDA never measured. Before they
stood in with their calibrated count, every answer holding one had ``dp_estimate()``
NULL (docs/sql.md, "InfTDA: the unbiased estimate").

Each seed is a real release (its own noise); every answer's estimate, standard error
and the truth are written to a JSON file. Run it once with the code before the change
and once after, on the same seeds (the releases are the same: the change is in
answering only), then compare::

    python benchmarks/estimate_stand_ins.py --out after.json
    <old checkout>/.venv/bin/python benchmarks/estimate_stand_ins.py --out before.json
    python benchmarks/estimate_stand_ins.py --compare before.json after.json

The comparison prints, per query, the NULL share before and after, the coverage of
estimate ± 1.96·se over the answers that used to be NULL (with its binomial standard
error) and over the others, and how many of the others changed (should be 0: compared
as the doubles' repr).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import warnings
from pathlib import Path

RHO = 5e-4
N_ROWS = 20_000
QUERIES = {
    "region_mode": "SELECT region || '/' || mode AS k, COUNT(*) AS n {e} FROM trips "
                   "GROUP BY region, mode",
    "province_mode": "SELECT province || '/' || mode AS k, COUNT(*) AS n {e} FROM trips "
                     "GROUP BY province, mode",
    "city_mode": "SELECT city || '/' || mode AS k, COUNT(*) AS n {e} FROM trips "
                 "GROUP BY city, mode",
    "region_dist_lt40": "SELECT region AS k, COUNT(*) AS n {e} FROM trips "
                        "WHERE distance < 40 GROUP BY region",
    "province_dist_lt40": "SELECT province AS k, COUNT(*) AS n {e} FROM trips "
                          "WHERE distance < 40 GROUP BY province",
    "city_dist_lt40": "SELECT city AS k, COUNT(*) AS n {e} FROM trips "
                      "WHERE distance < 40 GROUP BY city",
}
EXTRA = ", dp_estimate() AS est, dp_estimate_stderr() AS se"


def spec(rho: float = RHO) -> dict:
    """The trips spec with two InfTDA views sharing the geography."""
    from dpsql.datasets import trips_spec

    s = trips_spec(rho)
    s["views"] = [
        {"name": "geo_mode", "levels": ["geo", "mode"], "mechanism": "inftda", "weight": 2},
        {"name": "geo_dist", "levels": ["geo", "distance"], "mechanism": "inftda"}]
    return s


def run(seeds: list[int], out: Path) -> None:
    import duckdb

    import dpsql
    from dpsql.datasets import write_trips
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    warnings.simplefilter("ignore")
    base = Path(tempfile.mkdtemp(prefix="est_stand_ins_"))
    write_trips(base, N_ROWS, seed=7)
    raw = duckdb.connect()
    raw.execute(f"CREATE VIEW trips AS SELECT * FROM '{base / 'trips.parquet'}'")
    truth = {q: dict(raw.execute(sql.format(e="")).fetchall()) for q, sql in QUERIES.items()}
    rows = []
    for seed in seeds:
        path = base / f"r{seed}.duckdb"
        build_release(ReleaseSpec.from_dict(spec(), base_dir=base), path, seed=seed,
                      progress=False, replace=True)
        con = dpsql.connect(path)
        for q, sql in QUERIES.items():
            cur = con.cursor()
            cur.execute(sql.format(e=EXTRA))
            for k, n, est, se in cur.fetchall():
                rows.append({"seed": seed, "query": q, "key": k, "n": n,
                             "est": None if est is None else repr(est),
                             "se": None if se is None else repr(se),
                             "truth": truth[q].get(k, 0)})
        con.close()
        path.unlink()
    out.write_text(json.dumps(rows))


def compare(before: Path, after: Path) -> None:
    b = {(r["seed"], r["query"], r["key"]): r for r in json.loads(before.read_text())}
    a = {(r["seed"], r["query"], r["key"]): r for r in json.loads(after.read_text())}
    assert b.keys() == a.keys(), "not the same releases"
    print(f"{'query':20} {'answers':>7} {'NULL before':>11} {'NULL after':>10} "
          f"{'cover (was NULL)':>17} {'cover (others)':>14} {'changed':>7}")
    for q in dict.fromkeys(k[1] for k in b):
        keys = [k for k in b if k[1] == q]
        was = [k for k in keys if b[k]["est"] is None]
        others = [k for k in keys if b[k]["est"] is not None]
        changed = sum((a[k]["est"], a[k]["se"]) != (b[k]["est"], b[k]["se"]) for k in others)

        def cover(ks):
            ks = [k for k in ks if a[k]["est"] is not None]
            if not ks:
                return "-"
            hit = sum(abs(float(a[k]["est"]) - a[k]["truth"]) <= 1.96 * float(a[k]["se"])
                      for k in ks)
            p = hit / len(ks)
            return f"{p:.3f}±{math.sqrt(max(p * (1 - p), 1e-9) / len(ks)):.3f}"
        null_after = sum(a[k]["est"] is None for k in keys)
        print(f"{q:20} {len(keys):7d} {len(was):11d} {null_after:10d} {cover(was):>17} "
              f"{cover(others):>14} {changed:7d}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        run(list(range(1, args.seeds + 1)), args.out or Path("estimate_stand_ins.json"))


if __name__ == "__main__":
    main()
