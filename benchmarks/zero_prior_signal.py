"""The small-count signal n₁ of each InfTDA level's fitted zero prior (issue #18).

    .venv/bin/python benchmarks/zero_prior_signal.py [--releases 5] [--datasets ...]

Builds ``--releases`` releases of each of benchmarks/calibration.py's data sets (its
seeds, its specs) and prints, per InfTDA view and level, the n₁ the release stored
(``calibration.zero_signal``: the measurements fitted × the fitted prior's mass on
1..G, :class:`dpsql.mechanisms.inftda_prior.LevelFit`) and whether the level keeps its
fitted prior (n₁ ≥ :data:`~dpsql.mechanisms.inftda_prior.MIN_SMALL`) or the flat one.
The table in :data:`~dpsql.mechanisms.inftda_prior.MIN_SMALL`'s docstring is its output.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration import SEED_BASE, prepare  # noqa: E402


def _calibrations(model, path=()):
    """(path, calibration dict) for every calibration with a zero_signal in the model."""
    if isinstance(model, dict):
        if "zero_signal" in model:
            yield path, model
        for k, v in model.items():
            yield from _calibrations(v, path + (k,))
    elif isinstance(model, list):
        for i, v in enumerate(model):
            yield from _calibrations(v, path + (i,))


def main() -> None:
    import duckdb

    from dpsql.mechanisms.inftda_prior import MIN_SMALL
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=5)
    ap.add_argument("--datasets", default="trips,commutes,flights")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # seeded releases warn that they are not private
    table: dict[tuple, list] = {}
    for dataset in args.datasets.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            spec, _ = prepare(dataset, base)
            for i in range(args.releases):
                path = base / f"r{i}.duckdb"
                build_release(ReleaseSpec.from_dict(spec, base_dir=str(base)), path,
                              seed=SEED_BASE[dataset] + i, progress=False)
                con = duckdb.connect(str(path), read_only=True)
                for name, model in con.execute(
                        "SELECT name, error_model FROM dpsql_views ORDER BY name").fetchall():
                    for where, cal in _calibrations(json.loads(model or "{}")):
                        for k, n1 in enumerate(cal["zero_signal"], start=1):
                            table.setdefault((dataset, name, where, k), []).append(n1)
                con.close()
    print(f"MIN_SMALL = {MIN_SMALL:g}")
    print(f"{'data set':10} {'view':12} {'level':>5}  n1 per release")
    for (dataset, name, where, k), values in table.items():
        shown = " ".join("-" if v is None else f"{v:8.1f}" for v in values)
        print(f"{dataset:10} {name:12} {k:5d}  {shown}   {'/'.join(map(str, where))}")


if __name__ == "__main__":
    main()
