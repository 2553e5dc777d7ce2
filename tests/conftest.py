"""Shared fixtures: seeded synthetic data and release files built from it.

``trips_release`` is a realistic release (ρ = 1). ``exact_release`` has the same views
(but the Gaussian tree) with a budget so large (ρ = 1e6) that the noise is exactly zero
for the discrete mechanisms (with overwhelming probability) and about 1e-3 for Cascade: every answer
must then equal a plain DuckDB query on the raw table, exactly for integer mechanisms and
to 0.1 for real-valued ones (STYLE §5a: DuckDB is the oracle).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpsql.datasets import synthetic_trips, write_parquet

N_ROWS = 20_000


def trips_spec(base: Path, rho: float, exact: bool = False) -> dict:
    spec = {
        "name": "trips",
        "source": "trips.parquet",
        "neighbouring": "add_remove",
        "budget": {"rho": rho},
        "attributes": {
            "geo": {"kind": "hierarchy", "columns": ["region", "province", "city"],
                    "spine_file": "geo.csv"},
            "mode": {"kind": "categorical",
                     "domain": ["car", "train", "bus", "bike", "walk", "plane"]},
            "distance": {"kind": "range", "lower": 0, "upper": 256, "bins": 64,
                         "on_out_of_bounds": "clamp"},
            "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100},
        },
        "views": [
            {"name": "geo_mode", "levels": ["geo", "mode"], "mechanism": "inftda",
             "weight": 2},
            {"name": "geo_gauss", "levels": ["geo"], "mechanism": "gaussian_tree"},
            {"name": "dist", "levels": ["distance"], "mechanism": "cascade"},
            {"name": "age_tree", "levels": ["age"], "mechanism": "btree"},
            {"name": "mode_dist", "levels": ["mode", "distance"], "mechanism": "inftda"},
        ],
    }
    if exact:  # the discrete Gaussian's variance underflows to 0 at rho = 1e6
        spec["views"] = [v for v in spec["views"] if v["mechanism"] != "gaussian_tree"]
    return spec


@pytest.fixture(scope="session")
def trips_data(tmp_path_factory) -> Path:
    """A directory with trips.parquet (seeded) and its public spine geo.csv."""
    base = tmp_path_factory.mktemp("trips")
    table, spine = synthetic_trips(N_ROWS, seed=7)
    write_parquet(table, base / "trips.parquet")
    spine.to_csv(base / "geo.csv")
    return base


def _build(base: Path, rho: float, name: str, exact: bool = False) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict(trips_spec(base, rho, exact), base_dir=base)
    out = base / name
    build_release(spec, out, seed=11, progress=False)
    return out


@pytest.fixture(scope="session")
def trips_release(trips_data) -> Path:
    return _build(trips_data, 1.0, "trips.duckdb")


@pytest.fixture(scope="session")
def exact_release(trips_data) -> Path:
    return _build(trips_data, 1e6, "trips_exact.duckdb", exact=True)
