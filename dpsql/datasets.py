"""Seeded synthetic data for the demo, the tests and the benchmarks.

:func:`synthetic_trips` makes a trips table over a public region → province → city spine,
with a trip distance (km), the traveller's age, a travel mode and a traveller id. Sizes
and skew are realistic enough to exercise every mechanism: city popularity is Zipf-like,
distances are log-normal and ages are a mixture of two normals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

MODES = ("car", "train", "bus", "bike", "walk")


@dataclass(frozen=True)
class Spine:
    """A public region → province → city spine."""

    regions: np.ndarray
    provinces: np.ndarray
    cities: np.ndarray

    def paths(self) -> list[tuple[str, str, str]]:
        return list(zip(self.regions.tolist(), self.provinces.tolist(), self.cities.tolist()))

    def to_csv(self, path: str | Path) -> Path:
        p = Path(path)
        lines = ["region,province,city"] + [",".join(row) for row in self.paths()]
        p.write_text("\n".join(lines) + "\n")
        return p


def make_spine(n_regions: int = 4, provinces_per_region: int = 3,
               cities_per_province: int = 5) -> Spine:
    """A regular spine with names like R1, R1-P2, R1-P2-C3."""
    r = np.arange(n_regions).repeat(provinces_per_region * cities_per_province)
    p = np.tile(np.arange(provinces_per_region).repeat(cities_per_province), n_regions)
    c = np.tile(np.arange(cities_per_province), n_regions * provinces_per_region)
    regions = np.char.add("R", (r + 1).astype(str))
    provinces = np.char.add(np.char.add(regions, "-P"), (p + 1).astype(str))
    cities = np.char.add(np.char.add(provinces, "-C"), (c + 1).astype(str))
    return Spine(regions.astype(object), provinces.astype(object), cities.astype(object))


def synthetic_trips(n: int = 50_000, seed: int = 0, spine: Spine | None = None,
                    travellers: int | None = None) -> tuple[pa.Table, Spine]:
    """A seeded trips table (Arrow) and its public spine.

    Columns: ``traveller`` (int), ``region``, ``province``, ``city``, ``mode``,
    ``distance`` (km, float), ``age`` (int). Some travellers make several trips."""
    spine = spine or make_spine()
    gen = np.random.default_rng(seed)
    n_cities = len(spine.cities)
    weights = 1.0 / np.arange(1, n_cities + 1) ** 0.9
    weights = gen.permutation(weights)
    weights /= weights.sum()
    city = gen.choice(n_cities, size=n, p=weights)
    distance = np.round(np.exp(gen.normal(2.6, 0.9, n)), 2)
    young = gen.random(n) < 0.55
    age = np.where(young, gen.normal(31, 8, n), gen.normal(57, 11, n))
    age = np.clip(np.round(age), 16, 99).astype(np.int64)
    mode_p = np.array([0.45, 0.2, 0.15, 0.12, 0.08])
    mode = np.asarray(MODES, dtype=object)[gen.choice(len(MODES), size=n, p=mode_p)]
    n_travellers = travellers or max(1, n // 3)
    traveller = gen.integers(0, n_travellers, n)
    table = pa.table({
        "traveller": traveller.astype(np.int64),
        "region": pa.array(spine.regions[city].tolist(), pa.string()),
        "province": pa.array(spine.provinces[city].tolist(), pa.string()),
        "city": pa.array(spine.cities[city].tolist(), pa.string()),
        "mode": pa.array(mode.tolist(), pa.string()),
        "distance": distance,
        "age": age,
    })
    return table, spine


def write_parquet(table: pa.Table, path: str | Path) -> Path:
    p = Path(path)
    pq.write_table(table, p)
    return p


def write_trips(base: str | Path, n: int, seed: int) -> Path:
    """``trips.parquet`` (seeded :func:`synthetic_trips`) and its public spine ``geo.csv``
    in ``base``, the layout :func:`trips_spec` reads. Returns ``base``."""
    base = Path(base)
    table, spine = synthetic_trips(n, seed=seed)
    write_parquet(table, base / "trips.parquet")
    spine.to_csv(base / "geo.csv")
    return base


def trips_spec(rho: float = 1.0, *, gaussian_tree: bool = True) -> dict:
    """The release spec (as a dict) over :func:`write_trips`'s files that the tests and
    benchmarks share: every mechanism once. ``gaussian_tree=False`` leaves out the one
    real-valued per-node view (at huge ρ its variance underflows to 0)."""
    views = [
        {"name": "geo_mode", "levels": ["geo", "mode"], "mechanism": "inftda", "weight": 2},
        {"name": "geo_gauss", "levels": ["geo"], "mechanism": "gaussian_tree"},
        {"name": "dist", "levels": ["distance"], "mechanism": "cascade"},
        {"name": "age_tree", "levels": ["age"], "mechanism": "btree"},
        {"name": "mode_dist", "levels": ["mode", "distance"], "mechanism": "inftda"},
    ]
    return {
        "name": "trips", "source": "trips.parquet", "neighbouring": "add_remove",
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
        "views": [v for v in views if gaussian_tree or v["mechanism"] != "gaussian_tree"],
    }
