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

from contextlib import contextmanager
from pathlib import Path

import pytest

from dpsql.datasets import commutes_spec, trips_spec, write_commutes, write_trips

N_ROWS = 20_000


def connect_seeded(path: Path):
    """``dpsql.connect`` on a release built with a seed on purpose (a test's), its
    not-private warning silenced."""
    import warnings

    import dpsql
    from dpsql.dbapi import SeededReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        return dpsql.connect(path)


@contextmanager
def release_and_raw(base: Path, name: str = "t"):
    """(``dpsql.connect`` on the seeded release ``base/<name>.duckdb``, a DuckDB
    connection where the view ``<name>`` is the raw ``base/<name>.parquet``): the pair an
    e2e test compares, closed after."""
    import duckdb

    raw = duckdb.connect()
    raw.execute(f"CREATE VIEW {name} AS SELECT * FROM '{base / f'{name}.parquet'}'")
    con = connect_seeded(base / f"{name}.duckdb")
    try:
        yield con, raw
    finally:
        con.close()
        raw.close()


def count_mismatches(con, raw, wheres) -> tuple[dict, list]:
    """``SELECT COUNT(*) FROM t WHERE <w>`` for each of ``wheres`` on both connections:
    the ones more than 0.5 apart (w -> (dpsql's, DuckDB's)) and DuckDB's counts."""
    wrong, counts = {}, []
    for w in wheres:
        q = f"SELECT COUNT(*) FROM t WHERE {w}"
        got, want = con.execute(q).fetchall()[0][0], raw.execute(q).fetchall()[0][0]
        counts.append(want)
        if abs(got - want) > 0.5:
            wrong[w] = (got, want)
    return wrong, counts


def same_groups(got: list, want: list) -> None:
    """Rows ``(group, count)``: the groups DuckDB gives (``want``), in its order, each
    count within 0.5; dpsql lists the released bins that hold no row too (count 0), which
    DuckDB has no row for."""
    kept = [g for g in got if abs(g[1]) > 0.5]
    assert [g[0] for g in kept] == [w[0] for w in want], (got[:5], want[:5])
    assert all(abs(g[1] - w[1]) <= 0.5 for g, w in zip(kept, want)), (got, want)
    assert all(abs(g[1]) <= 0.5 for g in got if g not in kept)


def seeded_cursor(spec, path: Path, seed: int):
    """A cursor on the release of ``spec`` (a :class:`~dpsql.spec.ReleaseSpec`) built at
    ``path`` with ``seed``: seeded on purpose, so its not-private warning is silenced."""
    from dpsql.release import build_release

    build_release(spec, path, seed=seed, progress=False)
    return connect_seeded(path).cursor()


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


# labels that look like rich markup or emoji codes: data, to be printed as written
MARKUP_LABELS = ["[bold]x", "[/]", "a :smile: [link=http://x]b"]


@pytest.fixture(scope="session")
def typed_data(tmp_path_factory) -> Path:
    """typed.parquet (seeded): an integer n, a DECIMAL(6,2) p with a point mass at 2.50,
    a date d (January 2013), a timestamp ts (two days), and a categorical c whose labels
    look like rich markup (:data:`MARKUP_LABELS`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = tmp_path_factory.mktemp("typed")
    g = np.random.default_rng(5)
    n_rows = 2000
    p = np.round(g.uniform(0, 5, n_rows), 2)
    p[:40] = 2.5
    pq.write_table(pa.table({
        "n": g.integers(0, 10, n_rows),
        "p": pa.array([f"{v:.2f}" for v in p]).cast(pa.decimal128(6, 2)),
        "d": pa.array(np.datetime64("2013-01-01") + g.integers(0, 31, n_rows).astype(
            "timedelta64[D]"), pa.date32()),
        "ts": pa.array(np.datetime64("2013-01-01T00:00:00") + g.integers(
            0, 2 * 86400, n_rows).astype("timedelta64[s]"), pa.timestamp("us")),
        "c": list(np.array(MARKUP_LABELS, dtype=object)[g.integers(0, 3, n_rows)])}),
        base / "t.parquet")
    return base


@pytest.fixture(scope="session")
def typed_release(typed_data) -> Path:
    """The exact release of :func:`typed_data` (ρ = 1e10: every count is the raw one, to
    well under 0.5), one view per attribute."""
    spec = {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": "1e10"},
            "attributes": {
                "n": {"kind": "range", "lower": 0, "upper": 10, "bins": 10},
                "p": {"kind": "range", "lower": 0, "upper": 5, "bins": 500},
                "d": {"kind": "range", "lower": "2013-01-01", "upper": "2013-02-01",
                      "width": 1},
                "ts": {"kind": "range", "lower": "2013-01-01 00:00:00",
                       "upper": "2013-01-03 00:00:00", "unit": "hour"},
                "c": {"kind": "categorical", "domain": MARKUP_LABELS}},
            "views": [{"name": f"v{a}", "levels": [a], "mechanism": "gaussian_tree"}
                      for a in ("n", "p", "d", "ts")]
            + [{"name": "vc", "levels": ["c"], "mechanism": "inftda"}]}
    return _build(typed_data, spec, "typed.duckdb", seed=1)
