"""Seeded synthetic data for the demo, the tests and the benchmarks.

:func:`synthetic_trips` makes a trips table over a public region → province → city spine,
with a trip distance (km), the traveller's age, a travel mode and a traveller id. Sizes
and skew are realistic enough to exercise every mechanism: city popularity is Zipf-like,
distances are log-normal and ages are a mixture of two normals.

:func:`gravity_od` makes origin/destination counts over a region → province →
municipality spine, the shape of the ISTAT 2011 commuting data of od_topdown.md §4, and
:func:`write_commutes` writes them as one row per commuter, the layout
:func:`commutes_spec` reads. The model (all draws from one seeded numpy Generator):

* Provinces are split among regions and municipalities among provinces by a multinomial
  (each gets at least one); municipality ids are in tree order, so each province's and
  region's municipalities are a contiguous block.
* Populations are log-normal; coordinates are region centres (uniform in a 1000 km
  square) plus province and municipality offsets.
* Each municipality gets a self pair plus a number of distinct destinations ∝ pop^0.6,
  drawn 65% inside its province, 25% inside its region and 10% anywhere, each weighted by
  destination population (block-wise inverse-CDF sampling).
* Trip counts: every pair gets 1 trip, the rest are spread multinomially by the gravity
  weight pop_o·pop_d / (1 + dist/10 km)², with self pairs weighted ×20. Pairs are
  generated as sparse counts, never as one row per trip, so Italy's scale (28.8M trips)
  costs seconds.

:func:`synthetic_persons` makes a census-like persons table (one row per person, the
household the privacy unit) over a state → county → tract spine, the shape of a new
user's trial (docs/sql.md, "InfTDA: per-answer intervals"); :func:`write_persons` writes
it and its spine, the layout :func:`persons_spec` reads. The model (one seeded Generator):

* Counties are split among states (Dirichlet(8) shares) and tracts among counties
  (Dirichlet(2)), each getting at least one: at the defaults, 6 states of 2 to 12
  counties, 36 counties of 1 to 19 tracts, 213 tracts.
* Households (80,000 by default) fall in tracts with log-normal weights (log-sd 0.8:
  the 10 % smallest tracts hold under 250 people, the 10 % largest over 1,900) and hold
  1 to 6 people (27, 34, 15.5, 13, 6.5, 4 %: mean 2.5, about 200,000 people). Larger
  households are folded into 6, the trial's ``max_rows``, so that contribution bounding
  drops no row and the raw rows are the release's population (a benchmark's truth).
* Ages: a householder of N(50, 16) in 20..95, a partner near that age (every second
  person of a couple, four in five of the second persons of larger households),
  children uniform from 0 to the householder's age − 18 (at most 30), one other in five of
  N(45, 22). Sex: 51 % F. One survey date per household, uniform over 2024.
* Income: NULL under 15 and for 8 % non-response (about 24 % NULL in all); else 15 %
  uniform on 0..12,000, 4 % a Pareto tail from 90,000 (exponent 2.5) and the rest
  log-normal (median 36,000 times a log-normal tract level of sd 0.2, × 0.55 under 25,
  log-sd 0.5). On 40 bins of 5,000 under each tract the bins below 50,000 (76 % of the
  incomes) are populated (all but one of the 2,130), while of the 20 bins from 100,000
  up a median 8 per tract are empty (15 in the tenth of tracts with most): the tail whose
  false positives take mass from the large low bins through InfTDA's shift.
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


# --------------------------------------------------------------------------------------
# Origin/destination (commuting) data
# --------------------------------------------------------------------------------------

def _split(total: int, parts: int, g: np.random.Generator, alpha: float = 2.0
           ) -> np.ndarray:
    """``total`` split among ``parts`` (each at least 1) by a multinomial over
    Dirichlet(``alpha``) shares: the smaller ``alpha``, the more unequal the parts."""
    return 1 + g.multinomial(total - parts, g.dirichlet(np.full(parts, alpha)))


def _pick(cum: np.ndarray, lo: np.ndarray, hi: np.ndarray, g: np.random.Generator) -> np.ndarray:
    """Weighted draws inside blocks [lo, hi) of the cumulative weights ``cum`` (len N+1)."""
    u = cum[lo] + g.random(lo.size) * (cum[hi] - cum[lo])
    return np.clip(np.searchsorted(cum, u, side="right") - 1, lo, hi - 1)


def gravity_od(n_regions: int = 20, n_provinces: int = 110, n_munis: int = 8000,
             n_trips: int = 28_800_000, n_pairs: int = 500_000, seed: int = 2011) -> dict:
    """Seeded gravity-model origin/destination counts (see the module doc).

    Returns the spine (``paths``: rows of region, province, municipality names, in tree
    order) and the sparse pairs (``origin``, ``destination`` municipality codes, ``count``).
    The defaults are Italy's shape: 20 regions, 110 provinces, 8,000 municipalities,
    28.8M trips on about 500k non-zero pairs (od_topdown.md §4)."""
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


def write_commutes(base: str | Path, n_trips: int = 200_000, seed: int = 2011, *,
                   n_regions: int = 6, n_provinces: int = 24, n_munis: int = 400,
                   n_pairs: int = 8_000) -> Path:
    """``commutes.parquet`` (one row per commuter: ``home_region``, ``home_province``,
    ``home_municipality``, ``work_region``, ``work_province``, ``work_municipality``,
    from :func:`gravity_od`) and the public spine ``municipalities.csv`` (``region``,
    ``province``, ``municipality``) in ``base``, the layout :func:`commutes_spec` reads.
    Returns ``base``."""
    base = Path(base)
    data = gravity_od(n_regions, n_provinces, n_munis, n_trips, n_pairs, seed)
    paths = data["paths"]
    lines = ["region,province,municipality"] + [",".join(row) for row in paths.tolist()]
    (base / "municipalities.csv").write_text("\n".join(lines) + "\n")
    pair = np.repeat(np.arange(data["count"].size), data["count"])
    cols: dict[str, pa.Array] = {}
    for side, muni in (("home", data["origin"][pair]), ("work", data["destination"][pair])):
        for j, level in enumerate(("region", "province", "municipality")):
            labels = pa.array(paths[:, j].tolist(), pa.string())
            cols[f"{side}_{level}"] = labels.take(pa.array(muni))
    write_parquet(pa.table(cols), base / "commutes.parquet")
    return base


def commutes_spec(rho: float = 1.0) -> dict:
    """The release spec (as a dict) over :func:`write_commutes`'s files: home → work
    flows under substitution (one commuter replaced by another; the total is public),
    with one public spine file read twice, in two InfTDA views that split the budget
    evenly (od_topdown.md §1):

    * ``work_first``, the paper's **destination tree**: ``interleave`` alternates the
      work and home spines, work first (work region, home region, work province, ...);
      it answers "coarse home → fine work" from one node;
    * ``home_first``, the **origin tree**, its mirror image.

    The planner answers each query from whichever view predicts the smaller error."""
    def side(name: str) -> dict:
        return {"kind": "hierarchy", "spine_file": "municipalities.csv",
                "columns": [f"{name}_region", f"{name}_province", f"{name}_municipality"],
                "spine_columns": ["region", "province", "municipality"]}
    return {
        "name": "commutes", "source": "commutes.parquet", "neighbouring": "substitute",
        "budget": {"rho": rho},
        "attributes": {"work": side("work"), "home": side("home")},
        "views": [{"name": "work_first", "levels": ["work", "home"], "interleave": True,
                   "mechanism": "inftda"},
                  {"name": "home_first", "levels": ["home", "work"], "interleave": True,
                   "mechanism": "inftda"}],
    }


# --------------------------------------------------------------------------------------
# Persons in households (a census-like table)
# --------------------------------------------------------------------------------------

HOUSEHOLD_SIZES = (0.27, 0.34, 0.155, 0.13, 0.065, 0.04)  # 1..6 people: mean 2.5
TRACT_SD = 0.8  # log-sd of the tracts' sizes
INCOME_WIDTH = 5_000
INCOME_BINS = 40
INCOME_MEDIAN = 36_000  # the log-normal body (before the tract level and the young)
INCOME_LOW = 0.15       # share of earners with 0 to 12,000 (students, part time)
INCOME_HIGH = 0.04      # share in the Pareto tail from 90,000
INCOME_TAIL = 2.5       # its exponent


def _names(prefix: np.ndarray, sep: str, index: np.ndarray) -> np.ndarray:
    return np.char.add(np.char.add(prefix.astype(str), sep), (index + 1).astype(str))


def synthetic_persons(n_households: int = 80_000, seed: int = 2020, *, n_states: int = 6,
                      n_counties: int = 36, n_tracts: int = 213,
                      max_household: int = 6) -> tuple[pa.Table, np.ndarray]:
    """A seeded persons table (Arrow) and its public state → county → tract spine (an
    array of rows: state, county, tract, in tree order). See the module doc for the
    model.

    Columns: ``household`` (int, the privacy unit), ``person`` (int, 1..size),
    ``state``, ``county``, ``tract``, ``sex`` ('F'/'M'), ``age`` (int), ``survey_date``
    (date, one per household, in 2024) and ``income`` (int, NULL for children and for
    non-response). The defaults are the new-user trial's scale (about 200,000 people).
    """
    if not 1 <= max_household <= len(HOUSEHOLD_SIZES):
        raise ValueError(f"max_household={max_household}: give 1 to "
                         f"{len(HOUSEHOLD_SIZES)} (households of more people are folded "
                         "into the largest size)")
    g = np.random.default_rng(seed)
    # the public spine: counties split among states, tracts among counties
    county_state = np.repeat(np.arange(n_states), _split(n_counties, n_states, g, 8.0))
    tract_county = np.repeat(np.arange(n_counties), _split(n_tracts, n_counties, g))
    state_names = _names(np.array("S"), "", np.arange(n_states))
    c_rank = np.arange(n_counties) - np.searchsorted(county_state, county_state)
    county_names = _names(state_names[county_state], "-C", c_rank)
    t_rank = np.arange(n_tracts) - np.searchsorted(tract_county, tract_county)
    tract_names = _names(county_names[tract_county], "-T", t_rank)
    spine = np.stack([state_names[county_state[tract_county]], county_names[tract_county],
                      tract_names], axis=1).astype(object)

    # households: tracts of very unequal sizes, sizes 1..max_household
    tract_w = np.exp(g.normal(0.0, TRACT_SD, n_tracts))
    hh_tract = np.sort(g.choice(n_tracts, size=n_households, p=tract_w / tract_w.sum()))
    p = np.asarray(HOUSEHOLD_SIZES[:max_household], dtype=np.float64)
    p[-1] += sum(HOUSEHOLD_SIZES[max_household:])
    size = 1 + g.choice(max_household, size=n_households, p=p)
    hh_day = g.integers(0, 366, n_households)  # 2024 is a leap year

    n = int(size.sum())
    hh = np.repeat(np.arange(n_households), size)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    rank = np.arange(n) - np.repeat(start, size)  # 0: householder, 1: partner, 2+: others
    # ages: a householder of 20 to 95, a partner of about the same age, then children
    # (a fifth of the others are an older relative or a lodger)
    head_age = np.clip(np.round(g.normal(50, 16, n_households)), 20, 95)
    base = head_age[hh]
    partner = np.clip(np.round(base + g.normal(-1, 5, n)), 18, 99)
    child = np.clip(np.round(g.uniform(0, 1, n) * np.clip(base - 18, 1, 30)), 0, 40)
    other = np.clip(np.round(g.normal(45, 22, n)), 0, 99)
    age = np.where(rank == 0, base, np.where(
        rank == 1, np.where(size[hh] == 2, partner, np.where(g.random(n) < 0.8, partner,
                                                               child)),
        np.where(g.random(n) < 0.8, child, other))).astype(np.int64)
    male = g.random(n) >= 0.51

    # incomes: log-normal (median 36,000) around a tract level (rich and poor
    # tracts), lower for the young; NULL under 15 and for 8% non-response
    tract_level = g.normal(0.0, 0.2, n_tracts)
    mu = np.log(INCOME_MEDIAN) + tract_level[hh_tract[hh]] + np.where(age < 25, -0.6, 0.0)
    kind = g.random(n)
    income = np.where(kind < INCOME_LOW, g.uniform(0, 12_000, n),
                      np.where(kind < 1 - INCOME_HIGH, np.exp(mu + g.normal(0.0, 0.5, n)),
                               90_000 * (1 - g.random(n)) ** (-1 / INCOME_TAIL)))
    income = np.round(income)
    has_income = (age >= 15) & (g.random(n) >= 0.08)

    table = pa.table({
        "household": hh.astype(np.int64),
        "person": (rank + 1).astype(np.int64),
        **{name: pa.array(spine[hh_tract[hh], j].tolist(), pa.string())
           for j, name in enumerate(("state", "county", "tract"))},
        "sex": pa.array(np.where(male, "M", "F").tolist(), pa.string()),
        "age": age,
        "survey_date": pa.array(np.datetime64("2024-01-01") + hh_day[hh]),
        "income": pa.array(income.astype(np.int64), pa.int64(), mask=~has_income),
    })
    return table, spine


def write_persons(base: str | Path, n_households: int = 80_000, seed: int = 2020) -> Path:
    """``persons.parquet`` (seeded :func:`synthetic_persons`) and its public spine
    ``tracts.csv`` (``state``, ``county``, ``tract``) in ``base``, the layout
    :func:`persons_spec` reads. Returns ``base``."""
    base = Path(base)
    table, spine = synthetic_persons(n_households, seed=seed)
    write_parquet(table, base / "persons.parquet")
    lines = ["state,county,tract"] + [",".join(row) for row in spine.tolist()]
    (base / "tracts.csv").write_text("\n".join(lines) + "\n")
    return base


def persons_spec(rho: float = 1.0, *, reconcile: bool = True,
                 income_fanout: int | str = "auto") -> dict:
    """The release spec (as a dict) over :func:`write_persons`'s files, the new-user
    trial's: the household is the privacy unit (``max_rows = 6``, add/remove), and ρ is
    shared evenly by four views:

    * ``geo_income``, InfTDA state → county → tract → income (40 bins of 5,000 under
      each tract, the NULL incomes a node of their own, incomes of 200,000 and more in
      the last bin);
    * ``geo_sex_age``, InfTDA state → county → tract → sex → age (one-year bins);
    * ``survey``, Cascade over the survey date by calendar month;
    * ``ages``, Cascade over age.

    The two InfTDA views share the geography, so reconciliation (``reconcile=False``
    leaves it out) agrees their states, counties and tracts. ``income_fanout`` is the
    b-ary split of the income bins under a tract (``"auto"``: 16, so three nodes of 16,
    16 and 8 bins, then the bins; 40: the 40 bins as one level of siblings)."""
    return {
        "name": "persons", "source": "persons.parquet", "neighbouring": "add_remove",
        "privacy_unit": {"column": "household", "max_rows": 6},
        "budget": {"rho": rho}, "reconcile": reconcile,
        "attributes": {
            "geo": {"kind": "hierarchy", "columns": ["state", "county", "tract"],
                    "spine_file": "tracts.csv"},
            "sex": {"kind": "categorical", "domain": ["F", "M"]},
            "age": {"kind": "range", "lower": 0, "upper": 100, "bins": 100,
                    "type": "integer", "on_out_of_bounds": "clamp"},
            "income": {"kind": "range", "lower": 0,
                       "upper": INCOME_WIDTH * INCOME_BINS, "bins": INCOME_BINS,
                       "type": "integer", "on_out_of_bounds": "clamp",
                       "on_null": "category", "fanout": income_fanout},
            "survey_date": {"kind": "range", "lower": "2024-01-01",
                            "upper": "2025-01-01", "unit": "month"},
        },
        "views": [
            {"name": "geo_income", "levels": ["geo", "income"], "mechanism": "inftda"},
            {"name": "geo_sex_age", "levels": ["geo", "sex", "age"], "mechanism": "inftda"},
            {"name": "survey", "levels": ["survey_date"], "mechanism": "cascade"},
            {"name": "ages", "levels": ["age"], "mechanism": "cascade"},
        ],
    }
