"""A seeded gravity-model generator of Italy-scale origin/destination data.

20 regions → 110 provinces → 8,000 municipalities (defaults), with ~28.8M trips on
~500k non-zero municipality pairs, generated directly as sparse pair counts (never as
28.8M rows). Shape of the ISTAT 2011 commuting data used by od_topdown.md §4.

Model (all draws from one seeded numpy Generator):
* Provinces are split among regions and municipalities among provinces by a multinomial
  (each gets at least one); municipality ids are in tree order, so each province's and
  region's municipalities are a contiguous block.
* Populations are log-normal; coordinates are region centres (uniform in a 1000 km
  square) plus province and municipality offsets.
* Each municipality gets a self pair plus a number of distinct destinations ∝ pop^0.6,
  drawn 65% inside its province, 25% inside its region and 10% anywhere, each weighted by
  destination population (block-wise inverse-CDF sampling).
* Trip counts: every pair gets 1 trip, the rest are spread multinomially by the gravity
  weight pop_o·pop_d / (1 + dist/10 km)², with self pairs weighted ×20.
"""

from __future__ import annotations

import numpy as np


def _split(total: int, parts: int, g: np.random.Generator) -> np.ndarray:
    return 1 + g.multinomial(total - parts, g.dirichlet(np.full(parts, 2.0)))


def _pick(cum: np.ndarray, lo: np.ndarray, hi: np.ndarray, g: np.random.Generator) -> np.ndarray:
    """Weighted draws inside blocks [lo, hi) of the cumulative weights ``cum`` (len N+1)."""
    u = cum[lo] + g.random(lo.size) * (cum[hi] - cum[lo])
    return np.clip(np.searchsorted(cum, u, side="right") - 1, lo, hi - 1)


def generate(n_regions: int = 20, n_provinces: int = 110, n_munis: int = 8000,
             n_trips: int = 28_800_000, n_pairs: int = 500_000, seed: int = 2011) -> dict:
    """Return the spine (``paths``: rows of region, province, municipality names, in tree
    order) and the sparse pairs (``origin``, ``destination`` municipality codes, ``count``)."""
    g = np.random.default_rng(seed)
    prov_per_region = _split(n_provinces, n_regions, g)
    munis_per_prov = _split(n_munis, n_provinces, g)
    prov_region = np.repeat(np.arange(n_regions), prov_per_region)
    muni_prov = np.repeat(np.arange(n_provinces), munis_per_prov)
    muni_region = prov_region[muni_prov]

    centre = g.uniform(0, 1000, (n_regions, 2))
    pcentre = centre[prov_region] + g.normal(0, 60, (n_provinces, 2))
    xy = pcentre[muni_prov] + g.normal(0, 15, (n_munis, 2))
    pop = np.exp(g.normal(8.0, 1.2, n_munis))

    cum = np.concatenate(([0.0], np.cumsum(pop)))
    pstart = np.concatenate(([0], np.cumsum(munis_per_prov)))
    rstart = np.concatenate(([0], np.cumsum(np.bincount(muni_region, minlength=n_regions))))

    # distinct destinations per origin ∝ pop^0.6 (oversampled: duplicates are merged)
    w = pop ** 0.6
    k = np.maximum(1, np.round(w / w.sum() * (n_pairs - n_munis) * 1.75)).astype(np.int64)
    origin = np.repeat(np.arange(n_munis), k)
    kind = g.random(origin.size)
    lo = np.where(kind < 0.65, pstart[muni_prov[origin]],
                  np.where(kind < 0.90, rstart[muni_region[origin]], 0))
    hi = np.where(kind < 0.65, pstart[muni_prov[origin] + 1],
                  np.where(kind < 0.90, rstart[muni_region[origin] + 1], n_munis))
    dest = _pick(cum, lo, hi, g)
    origin = np.concatenate([origin, np.arange(n_munis)])
    dest = np.concatenate([dest, np.arange(n_munis)])
    key = np.unique(origin * n_munis + dest)
    if key.size > n_pairs:
        keep_self = (key // n_munis) == (key % n_munis)
        others = np.flatnonzero(~keep_self)
        drop = g.choice(others, key.size - n_pairs, replace=False)
        key = np.delete(key, drop)
    o, d = key // n_munis, key % n_munis
    dist = np.hypot(*(xy[o] - xy[d]).T)
    grav = pop[o] * pop[d] / (1.0 + dist / 10.0) ** 2
    grav[o == d] *= 20.0
    count = 1 + g.multinomial(n_trips - key.size, grav / grav.sum())
    paths = np.stack([np.char.add("R", muni_region.astype(str)),
                      np.char.add("P", muni_prov.astype(str)),
                      np.char.add("M", np.arange(n_munis).astype(str))], axis=1)
    return {"paths": paths, "origin": o.astype(np.int64), "destination": d.astype(np.int64),
            "count": count.astype(np.int64)}


if __name__ == "__main__":
    import time
    t = time.perf_counter()
    data = generate()
    print(f"{data['count'].size} pairs, {int(data['count'].sum())} trips, "
          f"{time.perf_counter() - t:.1f} s")
