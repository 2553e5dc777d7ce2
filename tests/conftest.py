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

from dpsql.datasets import trips_spec, write_trips

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
