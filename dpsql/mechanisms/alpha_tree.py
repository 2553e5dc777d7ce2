"""The α-multiplicative approximate-DP algorithm for counting on trees
(``reference/counting_on_trees.md`` §2.3–2.7, Thm 4.1), with the digest's fixes.

Trees, true counts and sensitivities follow :mod:`dpsql.mechanisms.tree_counts`. The
guarantee is per node and *multiplicative*, P[|ŵ − w| ≤ α·max(w, τ_min)] ≥ 1 − η: it is
not simultaneous, not additive and the estimates are biased, so the result is an
:class:`AlphaTreeResult`, not a :class:`~dpsql.mechanisms.base.PrivateTree`, and the
release builder does not offer it as a view mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from dpsql.errors import InternalError, InvalidPrivacyParameterError
from dpsql.mechanisms.tree_counts import _check_parents, tree_level_counts
from dpsql.privacy.budgets import ApproxDP
from dpsql.privacy.samplers import discrete_laplace
from dpsql.privacy.units import Neighbouring, histogram_sensitivity


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
    sens = histogram_sensitivity(neighbouring, max_rows)
    nb, m, l1 = sens.neighbouring, sens.max_rows, sens.l1
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


__all__ = ["AlphaSchedule", "AlphaTreeResult", "ThresholdAccuracy", "alpha_schedule",
           "alpha_tree"]
