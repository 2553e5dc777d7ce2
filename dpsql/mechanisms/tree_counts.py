"""Counting on any public tree: per-node Laplace / Gaussian baselines and the
α-multiplicative approximate-DP algorithm (``reference/counting_on_trees.md``).

A tree is given by ``parents``: ``parents[k-1][j]`` is the parent (at level k−1) of node j
of level k, for k = 1..d, with each level's nodes sorted by parent; level 0 is the root.
True counts are the leaf counts (level d); upper levels are sums (:func:`tree_level_counts`).
So descendants of any node form one contiguous block of every lower level, which lets
every step below run once per level over whole arrays.

Sensitivity (derived, DESIGN rule 2). A unit has at most ``m = max_rows`` rows and each
row reaches one leaf, so it touches every level. Per level the change has L1 norm ≤ m and
L2 ≤ m under add/remove; under substitution m rows may leave some nodes and m arrive at
others: L1 ≤ 2m, L2 ≤ √2·m, and the root n is public.

**Baselines** (digest §2.2 B1/B2): noise on every node of every noisy level, then the BLUE
(:func:`dpsql.mechanisms.least_squares.tree_least_squares`). The budget is split across
the noisy levels (uniform, or ``level_weights``) and composed sequentially; within a level
the L1/L2 sensitivity calibrates the noise. Noise is discrete (exact integer samplers on
integer counts, digest E11) by default:

* Laplace, ``PureDP(ε)``: discrete Laplace of scale ``b_k = L1/ε_k``, ε_k = w_k·ε.
* Gaussian, ``ZCDP(ρ)``: discrete Gaussian with ``σ²_k = L2²/(2ρ_k)``, ρ_k = w_k·ρ
  (CKS 2020: the multivariate discrete Gaussian is exactly as zCDP as the continuous one).
* Gaussian, ``ApproxDP(ε, δ)`` with discrete noise: the largest ρ whose tight conversion
  gives (ε, δ) (:meth:`ApproxDP.to_zcdp`), then as above. The analytic Gaussian
  (Balle–Wang) curve is exact only for *continuous* noise — no theorem gives it for the
  multivariate discrete Gaussian — so it is used only with ``discrete=False``: the whole
  release is one Gaussian mechanism once each level is scaled by 1/σ_k, and with
  ``σ²_k = s²·L2²/w_k`` its scaled L2 sensitivity is exactly 1, so ``s`` is the analytic
  σ for sensitivity 1 (this also fixes digest E10: valid for ε ≥ 1).

The noise variances stored in the error model are the exact variances of the samplers
(discrete Laplace: 2q/(1−q)² with q = e^{−1/b}; discrete Gaussian: from its pmf).

**α-algorithm** (digest §2.3–2.7, Thm 4.1): see :func:`alpha_tree`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.tree_counts import TreeCountsErrorModel, encode_fanouts
from dpsql.errors import DataError, InternalError, InvalidPrivacyParameterError
from dpsql.mechanisms.base import PrivateLevel, PrivateTree
from dpsql.mechanisms.least_squares import tree_least_squares
from dpsql.privacy.budgets import ApproxDP, Budget, PureDP, ZCDP
from dpsql.privacy.calibrate import analytic_gaussian_sigma
from dpsql.privacy.samplers import discrete_gaussian, discrete_laplace, gaussian, laplace
from dpsql.privacy.units import Neighbouring

__all__ = ["tree_level_counts", "laplace_tree", "gaussian_tree", "alpha_schedule",
           "alpha_tree", "AlphaSchedule", "AlphaTreeResult", "ThresholdAccuracy"]


# ------------------------------------------------------------------------------ trees
def _check_parents(parents: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    if len(parents) < 1:
        raise InvalidPrivacyParameterError(
            "a tree needs at least one level below the root: give parents[0] for level 1")
    ps, sizes = [], [1]
    for k, p in enumerate(parents, start=1):
        arr = np.asarray(p)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] must be a 1-d integer array, got {arr.dtype} {arr.shape}")
        arr = arr.astype(np.int64)
        if arr.size == 0 or arr[0] < 0 or arr[-1] >= sizes[-1] or np.any(np.diff(arr) < 0):
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] must be non-empty, sorted and lie in [0, {sizes[-1]}): "
                "each level's nodes are ordered by parent")
        ps.append(arr)
        sizes.append(arr.size)
    return ps, sizes


def _segment_sum(parents: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by sorted ``parents`` (empty groups: 0)."""
    cs = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    bounds = np.searchsorted(parents, np.arange(size + 1))
    return cs[bounds[1:]] - cs[bounds[:-1]]


def tree_level_counts(parents: Sequence[np.ndarray], leaf_counts: np.ndarray) -> list[np.ndarray]:
    """True counts of every level 0..d (int64, exact) from the leaf counts.

    >>> [c.tolist() for c in tree_level_counts([np.array([0, 0]), np.array([0, 1, 1])],
    ...                                         np.array([3, 1, 2]))]
    [[6], [3, 3], [3, 1, 2]]
    """
    ps, sizes = _check_parents(parents)
    x = np.asarray(leaf_counts)
    if x.shape != (sizes[-1],) or (x.size and not np.issubdtype(x.dtype, np.integer)):
        raise DataError(f"leaf_counts must be {sizes[-1]} integers (one per leaf of level "
                        f"{len(ps)}), got {x.dtype} {x.shape}")
    x = x.astype(np.int64)
    if np.any(x < 0):
        raise DataError(f"leaf counts must be >= 0, found {int(x.min())}")
    out = [x]
    for k in range(len(ps), 0, -1):
        out.append(_segment_sum(ps[k - 1], out[-1], sizes[k - 1]))
    return out[::-1]


def _sensitivity(neighbouring: object, max_rows: int) -> tuple[Neighbouring, int, int, float]:
    nb = Neighbouring.parse(neighbouring)
    if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) \
            or max_rows < 1:
        raise InvalidPrivacyParameterError(f"max_rows must be an integer >= 1, got {max_rows!r}")
    m = int(max_rows)
    if nb is Neighbouring.SUBSTITUTE:
        return nb, m, 2 * m, math.sqrt(2.0) * m
    return nb, m, m, float(m)


# ------------------------------------------------------------------------- baselines
def _level_weights(weights: Sequence[float] | None, n_noisy: int, first: int) -> list[Fraction]:
    if weights is None:
        return [Fraction(1, n_noisy)] * n_noisy
    w = list(weights)
    if len(w) != n_noisy:
        raise InvalidPrivacyParameterError(
            f"level_weights needs one weight per noisy level {first}..{first + n_noisy - 1} "
            f"({n_noisy}), got {len(w)}; under substitution the root is public and has none")
    try:
        fr = [Fraction(x) for x in w]
    except (TypeError, ValueError) as err:
        raise InvalidPrivacyParameterError(f"level_weights must be numbers, got {w}") from err
    if any(x <= 0 for x in fr):
        raise InvalidPrivacyParameterError(f"level_weights must be > 0, got {w}")
    s = sum(fr)
    return [x / s for x in fr]


def _dlap_variance(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (-math.expm1(-1.0 / scale)) ** 2


def _dgauss_variance(sigma2: float) -> float:
    if sigma2 > 400.0:  # |Var − σ²| < σ²·e^{−2π²σ²}·poly: far below float resolution
        return sigma2
    half = int(math.ceil(14.0 * math.sqrt(sigma2))) + 2
    x = np.arange(-half, half + 1, dtype=np.float64)
    p = np.exp(-x * x / (2.0 * sigma2))
    return float((x * x * p).sum() / p.sum())


def _baseline(kind: str, parents, leaf_counts, budget: Budget, neighbouring, max_rows: int,
              rng: np.random.Generator, level_weights, discrete: bool) -> PrivateTree:
    ps, sizes = _check_parents(parents)
    counts = tree_level_counts(ps, leaf_counts)
    nb, m, l1, l2 = _sensitivity(neighbouring, max_rows)
    d = len(ps)
    first = 1 if nb is Neighbouring.SUBSTITUTE else 0
    weights = _level_weights(level_weights, d + 1 - first, first)
    noise_var = [0.0] * (d + 1)
    scales: dict[int, float] = {}
    if kind == "laplace":
        if not isinstance(budget, PureDP):
            raise InvalidPrivacyParameterError(
                f"laplace_tree needs a PureDP budget, got {type(budget).__name__}; use "
                "gaussian_tree for zCDP or (ε, δ) budgets")
        for w, k in zip(weights, range(first, d + 1)):
            b = l1 / float(budget.epsilon * w)
            scales[k] = b
            noise_var[k] = _dlap_variance(b) if discrete else 2.0 * b * b
        noise_name = "discrete_laplace" if discrete else "laplace"
    else:
        if isinstance(budget, ZCDP) or (isinstance(budget, ApproxDP) and discrete):
            rho = budget.to_zcdp().rho
            s2 = {k: l2 * l2 / (2.0 * float(rho * w)) for w, k in zip(weights, range(first, d + 1))}
        elif isinstance(budget, ApproxDP):
            s = analytic_gaussian_sigma(1.0, float(budget.epsilon), float(budget.delta))
            s2 = {k: s * s * l2 * l2 / float(w) for w, k in zip(weights, range(first, d + 1))}
        else:
            raise InvalidPrivacyParameterError(
                f"gaussian_tree needs a ZCDP or ApproxDP budget, got {type(budget).__name__}; "
                "use laplace_tree for pure DP")
        for k, v in s2.items():
            scales[k] = v
            noise_var[k] = _dgauss_variance(v) if discrete else v
        noise_name = "discrete_gaussian" if discrete else "gaussian"
    noisy: list[np.ndarray] = []
    draws = 0
    for k in range(d + 1):
        if k < first:
            noisy.append(counts[k].astype(np.float64))
            continue
        n = sizes[k]
        if kind == "laplace":
            z = discrete_laplace(scales[k], n, rng) if discrete else laplace(scales[k], n, rng)
        else:
            z = discrete_gaussian(scales[k], n, rng) if discrete else gaussian(scales[k], n, rng)
        noisy.append(counts[k].astype(np.float64) + z)
        draws += n
    est, post = tree_least_squares(ps, noisy, noise_var)
    model = TreeCountsErrorModel(sizes, noise_var, encode_fanouts(ps, sizes), noise_name)
    levels = tuple(PrivateLevel(np.arange(sizes[k], dtype=np.int64),
                                np.asarray(est[k], dtype=np.float64),
                                np.asarray(post[k], dtype=np.float64)) for k in range(d + 1))
    info = {"neighbouring": nb.value, "max_rows": m, "noise": noise_name,
            "level_weights": [str(w) for w in weights], "noisy_levels": list(range(first, d + 1)),
            "noise_scales": [scales.get(k) for k in range(d + 1)],
            "noise_variances": noise_var}
    return PrivateTree(mechanism=f"{kind}_tree", levels=levels, error_model=model, loss=budget,
                       sensitivity={"l1_per_level": float(l1), "l2_per_level": float(l2)},
                       draws=draws, info=info)


def laplace_tree(parents: Sequence[np.ndarray], leaf_counts: np.ndarray, budget: PureDP, *,
                 neighbouring: Neighbouring | str, max_rows: int = 1,
                 rng: np.random.Generator, level_weights: Sequence[float] | None = None,
                 discrete: bool = True) -> PrivateTree:
    """ε-DP counts of every node: (discrete) Laplace noise per node, then least squares.

    The budget is split over the noisy levels (0..d under add/remove, 1..d under
    substitution, where the root is the public n) by ``level_weights`` (uniform if None);
    level k gets scale ``L1/ε_k``. Per-node ``variance`` is the exact BLUE posterior.

    >>> from dpsql.privacy import rng
    >>> t = laplace_tree([np.array([0, 0])], np.array([5, 7]), PureDP(1),
    ...                  neighbouring="add_remove", rng=rng(0))
    >>> abs(float(t.levels[0].counts[0]) - float(t.levels[1].counts.sum())) < 1e-9
    True
    """
    return _baseline("laplace", parents, leaf_counts, budget, neighbouring, max_rows, rng,
                     level_weights, discrete)


def gaussian_tree(parents: Sequence[np.ndarray], leaf_counts: np.ndarray,
                  budget: ZCDP | ApproxDP, *, neighbouring: Neighbouring | str,
                  max_rows: int = 1, rng: np.random.Generator,
                  level_weights: Sequence[float] | None = None,
                  discrete: bool = True) -> PrivateTree:
    """ρ-zCDP or (ε, δ)-DP counts of every node: Gaussian noise per node, then least squares.

    Discrete Gaussian noise by default (zCDP-calibrated; an (ε, δ) budget is converted with
    the tight CKS conversion). ``discrete=False`` adds continuous Gaussian noise and, for
    (ε, δ), uses the analytic Gaussian calibration (module docstring).

    >>> from dpsql.privacy import rng
    >>> t = gaussian_tree([np.array([0, 0])], np.array([5, 7]), ZCDP("0.5"),
    ...                   neighbouring="substitute", rng=rng(0))
    >>> float(t.levels[0].counts[0]), float(t.levels[0].variance[0])
    (12.0, 0.0)
    """
    return _baseline("gaussian", parents, leaf_counts, budget, neighbouring, max_rows, rng,
                     level_weights, discrete)


# ------------------------------------------------------------ truncated discrete Laplace
def _tl_radius(scale: np.ndarray, shift: float, log_delta: np.ndarray) -> np.ndarray:
    """Smallest integer R ≥ shift such that the truncated discrete Laplace
    P[k] ∝ q^|k| on [−R, R] (q = e^{−1/scale}) puts mass ≤ δ on its last ``shift`` points.

    That edge mass is the δ of releasing f + noise for an integer query of L1 sensitivity
    ``shift`` (also for a vector query: the mass is superadditive over coordinates), and
    inside the common support the pmf ratio is ≤ e^{shift/scale}. Closed form: with
    Y = q^{R+1}, mass = Y(q^{−Δ}−1)/(1+q−2Y) ≤ δ ⟺ Y ≤ δ(1+q)/(q^{−Δ} − 1 + 2δ)."""
    scale = np.asarray(scale, dtype=np.float64)
    delta = np.exp(log_delta)
    q = np.exp(-1.0 / scale)
    r = np.ceil(scale * (np.log(np.expm1(shift / scale) + 2.0 * delta) - log_delta
                         - np.log1p(q)) - 1.0 - 1e-9)
    r = np.maximum(r, shift)
    # guard against float rounding: bump while the exact edge mass exceeds δ
    for _ in range(3):
        mass = _tl_edge_mass(scale, r, shift)
        r = np.where(mass > delta * (1.0 - 1e-12), r + 1.0, r)
    return r


def _tl_edge_mass(scale: np.ndarray, radius: np.ndarray, shift: float) -> np.ndarray:
    q = np.exp(-1.0 / scale)
    y = np.exp(-(radius + 1.0) / scale)
    return y * np.expm1(shift / scale) / (1.0 + q - 2.0 * y)


def _trunc_dlap(scale: float, radius: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of the discrete Laplace of ``scale`` conditioned on |k| ≤ radius (rejection)."""
    out = discrete_laplace(scale, n, rng)
    bad = np.flatnonzero(np.abs(out) > radius)
    while bad.size:
        out[bad] = discrete_laplace(scale, bad.size, rng)
        bad = bad[np.abs(out[bad]) > radius]
    return out


def _dlap_margin(scale: np.ndarray, log_fail: np.ndarray) -> np.ndarray:
    """Smallest integer t ≥ 0 with P[|X| > t] ≤ e^{log_fail} for the discrete Laplace:
    P[|X| ≥ t+1] = 2q^{t+1}/(1+q)."""
    q = np.exp(-1.0 / scale)
    t = np.ceil(scale * (math.log(2.0) - np.log1p(q) - log_fail) - 1.0)
    return np.maximum(t, 0.0)


# ------------------------------------------------------------------ the α-algorithm
@dataclass(frozen=True, eq=False)
class AlphaSchedule:
    """Every parameter of the α-algorithm, fixed from public inputs before data is read.

    Arrays are indexed by rung i = 1..I (entry i−1), I = enough rungs for any int64 total.
    ``margin`` is the SVT accuracy Δ_i, ``radius`` the truncation R_i of the per-node
    noise; ``tau_min_required`` the smallest τ_min for which every rung meets
    Δ_i + 2R_i ≤ β·τ_i (which also gives Δ_i ≤ βτ_i and c(τ_i − Δ_i) > M_i)."""

    alpha: float
    beta: float
    ratio: float
    cutoff: int
    eta: float
    depth: int
    tau_min: float
    tau_min_required: float
    neighbouring: str
    sensitivity: int
    budget: ApproxDP
    root_budget: ApproxDP | None
    rung_budget: ApproxDP
    clip_budget: ApproxDP | None
    root_scale: float
    root_radius: float
    clip_scale: float
    clip_radius: float
    epsilon: np.ndarray
    delta: np.ndarray
    log_eta: np.ndarray
    query_scale: np.ndarray
    threshold_scale: np.ndarray
    node_scale: np.ndarray
    margin: np.ndarray
    radius: np.ndarray

    def thresholds(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(τ_i, M_i) for i = 1..n: M_i = α·τ_min·r^i and τ_i = α·τ_min·r^{i−1}/(1+β),
        so that M_i = (1+α)(1−β)τ_i = (1+β)τ_{i+1} (digest §2.6, exponent fixed per E3)."""
        i = np.arange(1, n + 1, dtype=np.float64)
        base = self.alpha * self.tau_min
        return base * self.ratio ** (i - 1) / (1.0 + self.beta), base * self.ratio ** i

    def rungs_for(self, bound: float) -> int:
        """ℓ = max(1, ⌈ln(M/(α τ_min))/ln r⌉), bumped until M_ℓ ≥ M (digest E6)."""
        base = self.alpha * self.tau_min
        ell = max(1, math.ceil(math.log(max(bound, base) / base) / math.log(self.ratio)))
        while base * self.ratio ** ell < bound:
            ell += 1
        if ell > self.epsilon.size:
            raise InternalError(f"{ell} rungs needed but only {self.epsilon.size} planned")
        return ell


@dataclass(frozen=True)
class ThresholdAccuracy:
    """The guarantee of :func:`alpha_tree`: for every node u *separately*,
    P[|ŵ_u − w_u| ≤ alpha·max(w_u, tau_min)] ≥ 1 − eta (Problem 3.1, Lemma 4.6).

    Not simultaneous over nodes, not additive (a parent is not the sum of its children),
    not unbiased, and not a variance: it does not fit the additive ErrorModel contract.
    ``mrmse_bound`` bounds E[max(|ŵ_u − w_u| − alpha·w_u, 0)²]^{1/2} for every node
    (ClipWrapper, Lemma 3.3: √((alpha·tau_min)² + 4η R²)); ``additive_bound`` = 2R holds
    for every node on every run (the clamp interval contains w). Both are None without
    the wrapper. In practice 2R ≪ alpha·tau_min, so the clamp, not the multiplicative
    bucket, decides the final accuracy of all but the largest counts."""

    alpha: float
    tau_min: float
    eta: float
    mrmse_bound: float | None
    additive_bound: float | None = None

    def allowance(self, true_counts: np.ndarray) -> np.ndarray:
        """alpha·max(w, tau_min) for each true count w."""
        return self.alpha * np.maximum(np.asarray(true_counts, dtype=np.float64), self.tau_min)

    def describe(self) -> str:
        return (f"each node separately: |error| <= {self.alpha:g}*max(count, {self.tau_min:.6g})"
                f" with probability >= {1 - self.eta:.6g} (multiplicative, not additive)")


@dataclass(frozen=True)
class AlphaTreeResult:
    """Per-node estimates of every level 0..d, the guarantee, and the privacy ledger."""

    estimates: tuple[np.ndarray, ...]
    unclipped: tuple[np.ndarray, ...]
    accuracy: ThresholdAccuracy
    schedule: AlphaSchedule
    loss: ApproxDP
    ledger: tuple[tuple[str, Fraction, Fraction], ...]
    info: dict[str, Any] = field(default_factory=dict)


def alpha_schedule(depth: int, budget: ApproxDP, *, alpha: float,
                   neighbouring: Neighbouring | str, max_rows: int = 1,
                   eta: float | None = None, tau_min: float | None = None,
                   clip: bool = True) -> AlphaSchedule:
    """The public plan of :func:`alpha_tree` for a tree with levels 0..``depth``.

    Budget split (Thm 4.1): (ε/2, δ/2) for the ClipWrapper (if ``clip``), the rest for
    Estimation, of which half bounds the root (add/remove only; under substitution n is
    public and the rungs get it all). Rung i gets ε_i = ε_R·i·r^{−(i−1)}/C with
    C = (r/(r−1))², the *convergent* schedule of digest E1 (the paper's r^{+(i−1)}
    diverges), times 1 − 10⁻⁹ so that float rounding never overspends; δ_i likewise.
    Inside a rung: SVT at ε_i/2 (threshold noise 4cΔ/ε_i, query noise 8cΔ/ε_i) and at
    most c truncated passes at (ε_i/(2c), δ_i/c) each — the text's δ/c (digest E5),
    accounted exactly. The cutoff is the integer c = ⌈1+α⌉ = 2 (digest E4).

    Noise is the discrete Laplace (exact sampler) and its truncation to [−R, R]; margins and
    radii are computed for those distributions, and τ_min is the smallest value meeting the
    exact per-rung conditions (digest E16) rather than the looser closed form of Cor. 4.7.
    The SVT margin is Δ_i = t_q + t_t, the smallest integers with
    (d+1)·P[|ν| > t_q] ≤ η_i/2 over the at most d+1 query draws and
    min(d+1, c)·P[|ρ| > t_t] ≤ η_i/2 over the thresholds compared against (exact discrete
    Laplace tails), so with probability ≥ 1 − η_i: ⊤ ⇒ f ≥ τ − Δ and ⊥ ⇒ f < τ + Δ.
    Sensitivity Δ = L1 per level (m, or 2m under substitution) is used for every query:
    a unit's changes spread over the trees of a rung's forest sum to at most Δ, and every
    step's loss is linear in the change it sees (SVT, Laplace) or superadditive (the δ of
    truncation), so parallel composition over the forest still gives (ε_i, δ_i).
    """
    if not isinstance(budget, ApproxDP):
        raise InvalidPrivacyParameterError(
            f"the α-algorithm is (ε, δ)-DP and needs an ApproxDP budget, got "
            f"{type(budget).__name__}")
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise InvalidPrivacyParameterError(
            f"alpha must be in (0, 1), got {alpha!r}; for alpha >= 1 all-zero output already "
            "meets the guarantee")
    d = int(depth)
    if d < 1:
        raise InvalidPrivacyParameterError(f"depth must be >= 1, got {depth!r}")
    nb, m, l1, _ = _sensitivity(neighbouring, max_rows)
    levels = d + 1                                          # the paper's d (nodes on a path)
    e = min(1.0 / levels ** 2, 0.25) if eta is None else float(eta)
    if not 0.0 < e < 1.0:
        raise InvalidPrivacyParameterError(f"eta must be in (0, 1), got {eta!r}")
    half = Fraction(1, 2)
    est, clip_b = (budget.scale(half), budget.scale(half)) if clip else (budget, None)
    if nb is Neighbouring.SUBSTITUTE:
        root_b, rung_b = None, est
    else:
        root_b, rung_b = est.scale(half), est.scale(half)
    root_scale = root_radius = 0.0
    if root_b is not None:
        root_scale = m / float(root_b.epsilon)
        root_radius = float(_tl_radius(root_scale, m, math.log(float(root_b.delta))))
    clip_scale = clip_radius = 0.0
    if clip_b is not None:
        noisy_levels = d if nb is Neighbouring.SUBSTITUTE else d + 1
        clip_scale = l1 * noisy_levels / float(clip_b.epsilon)
        clip_radius = float(_tl_radius(clip_scale, l1,
                                       math.log(float(clip_b.delta) / noisy_levels)))
    beta = a / (6.0 + 5.0 * a)
    r = 1.0 + 2.0 * a / 3.0
    c = math.ceil(1.0 + a)                                  # = M_i/((1−β)τ_i) rounded up
    n_rungs = math.ceil(math.log(2.0 ** 64 / a) / math.log(r)) + 2
    i = np.arange(1, n_rungs + 1, dtype=np.float64)
    log_w = np.log(i) - (i - 1.0) * math.log(r) - 2.0 * math.log(r / (r - 1.0)) \
        + math.log1p(-1e-9)
    eps = np.exp(math.log(float(rung_b.epsilon)) + log_w)
    log_delta = math.log(float(rung_b.delta)) + log_w
    log_eta = math.log(e) - i * math.log(2.0) + math.log1p(-1e-12)   # η_i = η/2^i
    threshold_scale = 4.0 * c * l1 / eps
    query_scale = 8.0 * c * l1 / eps
    node_scale = 2.0 * c * l1 / eps
    fail = log_eta - math.log(2.0)
    margin = (_dlap_margin(query_scale, fail - math.log(levels))
              + _dlap_margin(threshold_scale, fail - math.log(min(levels, c))))
    radius = _tl_radius(node_scale, l1, log_delta - math.log(c))
    need = (margin + 2.0 * radius) * (1.0 + beta) / (beta * a * r ** (i - 1.0))
    required = float(need.max()) * (1.0 + 1e-12)  # float slack for the check below
    t = required if tau_min is None else float(tau_min)
    if not t >= required or math.isinf(t):
        raise InvalidPrivacyParameterError(
            f"tau_min={tau_min!r} is below the {required:.6g} this budget, alpha and depth "
            "need for the accuracy guarantee; give a larger tau_min or leave it None")
    sched = AlphaSchedule(
        alpha=a, beta=beta, ratio=r, cutoff=c, eta=e, depth=d, tau_min=t,
        tau_min_required=required, neighbouring=nb.value, sensitivity=l1, budget=budget,
        root_budget=root_b, rung_budget=rung_b, clip_budget=clip_b, root_scale=root_scale,
        root_radius=root_radius, clip_scale=clip_scale, clip_radius=clip_radius,
        epsilon=eps, delta=np.exp(log_delta), log_eta=log_eta, query_scale=query_scale,
        threshold_scale=threshold_scale, node_scale=node_scale, margin=margin, radius=radius)
    tau, big_m = sched.thresholds(n_rungs)
    if not (np.all(c * (tau - margin) > big_m) and np.all(margin + 2 * radius <= beta * tau)):
        raise InternalError("the α-schedule violates its own per-rung conditions")
    return sched


def _classify(counts, parents, sizes, tid, tau, margin, radius, sched, k_rung, rng):
    """Classification (Alg. 1) on every tree of the current forest at once, deepest level
    first. One streaming SVT instance per tree (digest E17): a per-tree noisy threshold and
    ⊤ counter; empty levels issue no query. Returns ⊤ masks per level and counters."""
    d = len(parents)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n_tot = int(offsets[-1])
    c = sched.cutoff
    bq, bt = float(sched.query_scale[k_rung]), float(sched.threshold_scale[k_rung])
    bn = float(sched.node_scale[k_rung])
    ntop = np.zeros(n_tot, dtype=np.int64)
    rho = np.zeros(n_tot, dtype=np.float64)
    roots = np.concatenate([np.flatnonzero(tid[k] == offsets[k] + np.arange(sizes[k]))
                            + offsets[k] for k in range(d + 1)])
    rho[roots] = discrete_laplace(bt, roots.size, rng)
    draws = roots.size
    top: list[np.ndarray] = [np.empty(0, dtype=bool)] * (d + 1)
    for k in range(d, -1, -1):
        active = tid[k] >= 0
        lab = np.zeros(sizes[k], dtype=bool)
        if k < d:
            lab = (np.bincount(parents[k][top[k + 1]], minlength=sizes[k]) > 0) & active
        cand = np.flatnonzero(active & ~lab)
        if cand.size:
            t = tid[k][cand]
            starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
            f = np.maximum.reduceat(counts[k][cand], starts)
            rt = t[starts]
            live = np.flatnonzero(ntop[rt] < c)
            nu = discrete_laplace(bq, live.size, rng)
            yes = np.zeros(starts.size, dtype=bool)
            yes[live] = f[live] + nu >= tau + rho[rt[live]]
            hit = rt[yes]
            ntop[hit] += 1
            rho[hit] = discrete_laplace(bt, hit.size, rng)
            sel = cand[np.repeat(yes, np.diff(np.r_[starts, cand.size]))]
            noisy = counts[k][sel] + _trunc_dlap(bn, radius, sel.size, rng)
            lab[sel[noisy >= tau - margin - radius]] = True
            draws += live.size + hit.size + sel.size
        top[k] = lab
    return top, {"svt_top_max": int(ntop.max(initial=0)), "draws": int(draws)}


def _next_forest(top, tid, parents, sizes):
    """Tree ids of the next rung: every maximal ⊥-subtree of the current forest (digest
    E2), identified by the global id of its root; −1 for nodes that got an estimate."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    new: list[np.ndarray] = []
    prev_bottom = prev_new = None
    for k in range(len(sizes)):
        bottom = (tid[k] >= 0) & ~top[k]
        gid = offsets[k] + np.arange(sizes[k], dtype=np.int64)
        if k == 0:
            nt = np.where(bottom, gid, -1)
        else:
            par = parents[k - 1]
            nt = np.where(bottom, np.where(prev_bottom[par], prev_new[par], gid), -1)
        new.append(nt)
        prev_bottom, prev_new = bottom, nt
    return new


def alpha_tree(parents: Sequence[np.ndarray], leaf_counts: np.ndarray, budget: ApproxDP, *,
               alpha: float, rng: np.random.Generator, neighbouring: Neighbouring | str,
               max_rows: int = 1, eta: float | None = None, tau_min: float | None = None,
               midpoint: bool = False, clip: bool = True) -> AlphaTreeResult:
    """The α-multiplicative (ε, δ)-DP tree counts of Ghazi et al. (Thm 4.1), corrected.

    Pipeline: bound the root (M = n + R0 + TruncLap, so n ≤ M ≤ n + 2R0; M = n under
    substitution), then rungs i = ℓ..1 top-down: Classification (Alg. 1) of every tree of
    the forest against τ_i; ⊤ nodes get M_i, and every *maximal* ⊥-subtree goes on to the
    next rung (digest E2); what remains after rung 1 gets M_0 = α·τ_min. Finally the
    ClipWrapper clamps each estimate to [w'' − R, w'' + R] around a truncated-noise count,
    which never increases the error and bounds it by 2R. With ``midpoint`` the estimate is
    the middle of the bucket instead of its top (digest E14), halving the guarantee's α.

    Returned guarantee (:class:`ThresholdAccuracy`): per node, P[|ŵ − w| ≤
    α·max(w, τ_min)] ≥ 1 − η. It is multiplicative and per node, so the result is not a
    :class:`PrivateTree` (whose error model is additive and whose levels are consistent).

    >>> from dpsql.privacy import rng
    >>> out = alpha_tree([np.array([0, 0])], np.array([0, 0]), ApproxDP(1, "1e-6"), alpha=0.5,
    ...                  rng=rng(0), neighbouring="add_remove")
    >>> bool(np.all(out.unclipped[1] == 0.5 * out.accuracy.tau_min))
    True
    """
    ps, sizes = _check_parents(parents)
    counts = tree_level_counts(ps, leaf_counts)
    d = len(ps)
    sched = alpha_schedule(d, budget, alpha=alpha, neighbouring=neighbouring,
                           max_rows=max_rows, eta=eta, tau_min=tau_min, clip=clip)
    ledger: list[tuple[str, Fraction, Fraction]] = []
    n = int(counts[0][0])
    draws = 0
    if sched.root_budget is not None:
        noise = int(_trunc_dlap(sched.root_scale, sched.root_radius, 1, rng)[0])
        bound = n + sched.root_radius + noise
        ledger.append(("root bound", sched.root_budget.epsilon, sched.root_budget.delta))
        draws += 1
    else:
        bound = float(n)
    ell = sched.rungs_for(bound)
    tau_all, m_all = sched.thresholds(ell)
    est = [np.full(s, np.nan) for s in sizes]
    tid = [np.zeros(s, dtype=np.int64) for s in sizes]
    svt_top_max = 0
    transitions_max = 0
    for i in range(ell, 0, -1):
        j = i - 1
        tau, big_m = float(tau_all[j]), float(m_all[j])
        top, stats = _classify(counts, ps, sizes, tid, tau, float(sched.margin[j]),
                               float(sched.radius[j]), sched, j, rng)
        value = (big_m + (1.0 - sched.beta) * tau) / 2.0 if midpoint else big_m
        for k in range(d + 1):
            est[k][top[k]] = value
        transitions_max = max(transitions_max, _max_transitions(top, tid, ps, sizes))
        tid = _next_forest(top, tid, ps, sizes)
        eps_i, delta_i = Fraction(float(sched.epsilon[j])), Fraction(float(sched.delta[j]))
        ledger.append((f"rung {i}", eps_i, delta_i))
        svt_top_max = max(svt_top_max, stats["svt_top_max"])
        draws += stats["draws"]
    m0 = sched.alpha * sched.tau_min
    for k in range(d + 1):
        est[k][tid[k] >= 0] = m0 / 2.0 if midpoint else m0
    unclipped = tuple(est)
    final = unclipped
    if clip:
        noisy_from = 1 if sched.neighbouring == Neighbouring.SUBSTITUTE.value else 0
        share = sched.clip_budget.scale(Fraction(1, d + 1 - noisy_from))
        out = [unclipped[0].copy()] if noisy_from else []
        if noisy_from:
            out[0][:] = n
        for k in range(noisy_from, d + 1):
            w2 = counts[k] + _trunc_dlap(sched.clip_scale, sched.clip_radius, sizes[k], rng)
            out.append(np.clip(unclipped[k], w2 - sched.clip_radius, w2 + sched.clip_radius))
            ledger.append((f"clip level {k}", share.epsilon, share.delta))
            draws += sizes[k]
        final = tuple(out)
    total_e = sum((e for _, e, _ in ledger), Fraction(0))
    total_d = sum((dl for _, _, dl in ledger), Fraction(0))
    if total_e > budget.epsilon or total_d > budget.delta:
        raise InternalError(f"the α-algorithm's ledger ({total_e}, {total_d}) exceeds its budget")
    a_eff = sched.alpha / 2.0 if midpoint else sched.alpha
    mrmse = (math.sqrt((a_eff * sched.tau_min) ** 2 + 4.0 * sched.eta * sched.clip_radius ** 2)
             if clip else None)
    acc = ThresholdAccuracy(alpha=a_eff, tau_min=sched.tau_min, eta=sched.eta, mrmse_bound=mrmse,
                            additive_bound=2.0 * sched.clip_radius if clip else None)
    info = {"root_bound": float(bound), "rungs": ell, "draws": draws,
            "svt_top_max": svt_top_max, "transitions_max": transitions_max,
            "spent": (str(total_e), str(total_d))}
    return AlphaTreeResult(estimates=final, unclipped=unclipped, accuracy=acc, schedule=sched,
                           loss=budget, ledger=tuple(ledger), info=info)


def _max_transitions(top, tid, parents, sizes) -> int:
    """Largest number of transition nodes (⊤ with no ⊤ child) in one tree of a rung."""
    d = len(parents)
    ids = []
    for k in range(d + 1):
        trans = top[k].copy()
        if k < d:
            trans &= ~(np.bincount(parents[k][top[k + 1]], minlength=sizes[k]) > 0)
        ids.append(tid[k][trans])
    allids = np.concatenate(ids)
    return int(np.bincount(allids).max()) if allids.size else 0
