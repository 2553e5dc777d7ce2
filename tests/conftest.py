"""Shared fixtures: seeded synthetic data and release files built from it.

``trips_release`` is a realistic release (ρ = 1). ``exact_release`` has the same views
(but the Gaussian tree) with a budget so large (ρ = 1e6) that the noise is exactly zero
for the discrete mechanisms (with overwhelming probability) and about 1e-3 for Cascade: every answer
must then equal a plain DuckDB query on the raw table, exactly for integer mechanisms and
to 0.1 for real-valued ones (STYLE §5a: DuckDB is the oracle).

``commutes_release`` / ``commutes_exact`` are the same for home → work flows in two
interleaved (origin/destination) InfTDA views, on a small seeded gravity-model geography
(:data:`COMMUTES_SHAPE`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpsql.datasets import commutes_spec, trips_spec, write_commutes, write_trips

N_ROWS = 20_000


@pytest.fixture(scope="session")
def trips_data(tmp_path_factory) -> Path:
    """A directory with trips.parquet (seeded) and its public spine geo.csv."""
    return write_trips(tmp_path_factory.mktemp("trips"), N_ROWS, seed=7)


def _build(base: Path, rho: float, name: str, exact: bool = False) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict(trips_spec(rho, gaussian_tree=not exact), base_dir=base)
    out = base / name
    build_release(spec, out, seed=11, progress=False)
    return out


@pytest.fixture(scope="session")
def trips_release(trips_data) -> Path:
    return _build(trips_data, 1.0, "trips.duckdb")


@pytest.fixture(scope="session")
def exact_release(trips_data) -> Path:
    return _build(trips_data, 1e6, "trips_exact.duckdb", exact=True)


COMMUTES_SHAPE = {"n_regions": 4, "n_provinces": 10, "n_munis": 60, "n_pairs": 900}
COMMUTES_TRIPS = 30_000


@pytest.fixture(scope="session")
def commutes_data(tmp_path_factory) -> Path:
    """commutes.parquet (one row per commuter, seeded) and municipalities.csv."""
    return write_commutes(tmp_path_factory.mktemp("commutes"), COMMUTES_TRIPS, seed=3,
                          **COMMUTES_SHAPE)


def _build_commutes(base: Path, rho: float, name: str) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    out = base / name
    build_release(ReleaseSpec.from_dict(commutes_spec(rho), base_dir=base), out, seed=13,
                  progress=False)
    return out


@pytest.fixture(scope="session")
def commutes_release(commutes_data) -> Path:
    return _build_commutes(commutes_data, 1.0, "commutes.duckdb")


@pytest.fixture(scope="session")
def commutes_exact(commutes_data) -> Path:
    return _build_commutes(commutes_data, 1e6, "commutes_exact.duckdb")
