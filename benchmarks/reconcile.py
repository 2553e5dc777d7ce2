"""One truth per release: the accuracy of shared marginals before and after reconciliation.

Over ``--releases`` independent releases (distinct seeds, so independent noise) of

* the trips spec of the tests and benchmarks (:func:`dpsql.datasets.trips_spec`, 50,000
  rows, ρ = 1, add/remove): five views share the total; ``geo_mode`` (InfTDA) and
  ``geo_gauss`` (Gaussian tree) share region, province and city;
* the commutes O/D example (:func:`dpsql.datasets.commutes_spec`, 200,000 commuters,
  ρ = 1, substitute: the total is public): the destination and origin trees agree on
  the total (their pair tables sit under levels the other tree lacks and are not
  reconciled: :mod:`dpsql.release.reconcile` says why), so the total must stay exact,

each release is built twice with the same seed, ``reconcile = false`` and ``true`` (the
noise is the same: reconciliation draws none), and every view's counts of each shared
marginal are compared with the truth from the raw data (a node a view does not store
counts 0). Reported per marginal: the RMSE over nodes and releases of each single view
before, and of the agreed values after; ``ratio_after_over_best`` (target ≤ 1) and
whether every view's total was identical in every reconciled release (a real-valued
view's COUNT(*) sums floats, so totals are compared to 10⁻⁶); and, per view of a shared
level, the pooled squared error over the view's own per-node variance (``dp_var``): 1
when its model is calibrated. The Gaussian tree's reconciled model is exact only when
no InfTDA view is on the chain of agreed marginals (here one is); the InfTDA view's
``dp_var`` is its bootstrap calibration on the reconciled counts.

Run: ``.venv/bin/python benchmarks/reconcile.py [--releases 200]`` →
benchmarks/results/reconcile.json (about 10 minutes for 200 releases on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402
from dpsql.datasets import commutes_spec, trips_spec, write_commutes, write_trips  # noqa: E402
from dpsql.release import build_release  # noqa: E402
from dpsql.spec import ReleaseSpec  # noqa: E402

TRIPS = {"total": ([], {"geo_mode": 1, "geo_gauss": 1, "dist": 1, "age_tree": 1,
                        "mode_dist": 1}),
         "region": (["region"], {"geo_mode": 1, "geo_gauss": 1}),
         "province": (["region", "province"], {"geo_mode": 2, "geo_gauss": 2}),
         "city": (["region", "province", "city"], {"geo_mode": 3, "geo_gauss": 3})}
COMMUTES = {"total": ([], {"work_first": 1, "home_first": 1})}


def _counts(con: duckdb.DuckDBPyConnection, table: str, cols: list[str]) -> dict:
    if not cols:
        return {(): float(con.execute(f"SELECT SUM({table.split('|')[1]}) FROM "
                                      f"{table.split('|')[0]}").fetchone()[0] or 0)}
    src, measure = table.split("|")
    sel = ", ".join(cols)
    rows = con.execute(f"SELECT {sel}, SUM({measure}) FROM {src} GROUP BY {sel}").fetchall()
    return {tuple(r[:-1]): float(r[-1]) for r in rows}


def _errors(release: Path, truth: dict, marginals: dict) -> tuple[dict, dict]:
    """Per (marginal, view): the errors of every node, and (real-valued views) the sum of
    the released per-node variances ``dp_var`` over the same nodes."""
    con = duckdb.connect(str(release), read_only=True)
    out, var = {}, {}
    for name, (cols, views) in marginals.items():
        true = truth[name]
        for view, k in views.items():
            got = _counts(con, f"{view}__l{k}|dp_count", cols)
            keys = set(true) | set(got)
            out[(name, view)] = np.array([got.get(x, 0.0) - true.get(x, 0.0) for x in keys])
            if cols:
                v = con.execute(f"SELECT SUM(dp_var) FROM {view}__l{k}").fetchone()[0]
                if v is not None:
                    var[(name, view)] = float(v)
    con.close()
    return out, var


def run_case(label: str, spec_dict: dict, base: Path, source: str, marginals: dict,
             releases: int, seed0: int) -> dict:
    raw = duckdb.connect()
    truth = {name: _counts(raw, f"read_parquet('{base / source}')|1", cols)
             for name, (cols, _) in marginals.items()}
    raw.close()
    off = ReleaseSpec.from_dict({**spec_dict, "reconcile": False}, base_dir=base)
    on = ReleaseSpec.from_dict(spec_dict, base_dir=base)
    sq: dict = {}
    totals_identical = 0
    t0 = time.perf_counter()
    for r in range(releases):
        seed = seed0 + r
        for mode, spec in (("before", off), ("after", on)):
            out = base / f"{mode}.duckdb"
            if out.exists():
                out.unlink()
            build_release(spec, out, seed=seed, progress=False)
            errs, model = _errors(out, truth, marginals)
            for (name, view), e in errs.items():
                acc = sq.setdefault((mode, name, view), [0.0, 0, 0.0])
                acc[0] += float(np.sum(e * e))
                acc[1] += e.size
                acc[2] += model.get((name, view), float("nan"))
            if mode == "after":
                # a real-valued view's total is the sum of its level-1 floats
                totals = {round(float(errs[("total", v)][0]), 6)
                          for v in marginals["total"][1]}
                totals_identical += len(totals) == 1
    rows = {}
    for name, (_, views) in marginals.items():
        before = {v: (sq[("before", name, v)][0] / sq[("before", name, v)][1]) ** 0.5
                  for v in views}
        after = {v: (sq[("after", name, v)][0] / sq[("after", name, v)][1]) ** 0.5
                 for v in views}
        best = min(before.values())
        worst_after = max(after.values())
        # real-valued views: mean squared error / mean dp_var (the error model's own
        # variance of each node), 1 when the model is calibrated
        calib = {v: sq[("after", name, v)][0] / sq[("after", name, v)][2] for v in views
                 if np.isfinite(sq[("after", name, v)][2]) and sq[("after", name, v)][2] > 0}
        rows[name] = {"rmse_before": before, "rmse_after": after,
                      "mse_over_model_variance_after": calib,
                      "best_single_view": min(before, key=before.get),
                      "ratio_after_over_best": (worst_after / best) if best > 0 else
                      (0.0 if worst_after == 0 else float("inf"))}
    return {"case": label, "releases": releases, "seconds": time.perf_counter() - t0,
            "totals_identical_fraction": totals_identical / releases, "marginals": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--out", default="reconcile")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trips_dir = Path(tmp) / "trips"
        trips_dir.mkdir()
        write_trips(trips_dir, 50_000, 0)
        od_dir = Path(tmp) / "od"
        od_dir.mkdir()
        write_commutes(od_dir)
        cases = [run_case("trips", trips_spec(1.0), trips_dir, "trips.parquet", TRIPS,
                          args.releases, 10_000),
                 run_case("commutes", commutes_spec(1.0), od_dir, "commutes.parquet",
                          COMMUTES, args.releases, 20_000)]
    worst = max(r["ratio_after_over_best"] for c in cases for r in c["marginals"].values())
    payload = {"cases": cases,
               "worst_ratio_after_over_best": worst,
               "totals_identical_fraction": min(c["totals_identical_fraction"] for c in cases),
               "targets": {"ratio_after_over_best": 1.0, "totals_identical_fraction": 1.0}}
    path = write(args.out, payload)
    for c in cases:
        for name, r in c["marginals"].items():
            print(f"{c['case']:9s} {name:18s} before " +
                  ", ".join(f"{v}={x:.3f}" for v, x in r["rmse_before"].items()) +
                  f" | after {max(r['rmse_after'].values()):.3f} "
                  f"(ratio {r['ratio_after_over_best']:.3f}) "
                  f"mse/model {r['mse_over_model_variance_after']}")
    print(f"totals identical: {payload['totals_identical_fraction']:.3f}; wrote {path}")


if __name__ == "__main__":
    main()
