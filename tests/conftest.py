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


def _build(base: Path, spec: dict, name: str, seed: int) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    out = base / name
    build_release(ReleaseSpec.from_dict(spec, base_dir=base), out, seed=seed, progress=False)
    return out


@pytest.fixture(scope="session")
def trips_release(trips_data) -> Path:
    return _build(trips_data, trips_spec(1.0), "trips.duckdb", seed=11)


@pytest.fixture(scope="session")
def exact_release(trips_data) -> Path:
    return _build(trips_data, trips_spec(1e6, gaussian_tree=False), "trips_exact.duckdb",
                  seed=11)


COMMUTES_SHAPE = {"n_regions": 4, "n_provinces": 10, "n_munis": 60, "n_pairs": 900}
COMMUTES_TRIPS = 30_000


@pytest.fixture(scope="session")
def commutes_data(tmp_path_factory) -> Path:
    """commutes.parquet (one row per commuter, seeded) and municipalities.csv."""
    return write_commutes(tmp_path_factory.mktemp("commutes"), COMMUTES_TRIPS, seed=3,
                          **COMMUTES_SHAPE)


@pytest.fixture(scope="session")
def commutes_release(commutes_data) -> Path:
    return _build(commutes_data, commutes_spec(1.0), "commutes.duckdb", seed=13)


@pytest.fixture(scope="session")
def commutes_exact(commutes_data) -> Path:
    return _build(commutes_data, commutes_spec(1e6), "commutes_exact.duckdb", seed=13)


@pytest.fixture(scope="module")
def exact_con(exact_release):
    """:func:`dpsql.connect` on the exact release (seeded on purpose: not warned)."""
    import warnings

    import dpsql
    from dpsql.dbapi import SeededReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        c = dpsql.connect(exact_release)
    yield c
    c.close()
