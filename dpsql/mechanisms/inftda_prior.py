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
prior (None). A dense level, whose counts lie far above its window, gets a nearly flat
window (the penalty pulls the polynomial to a constant), and so about the flat reach.
"""

from __future__ import annotations

import math

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


def fit_prior(measurements: np.ndarray, sigma: float, window: int,
              iterations: int = 200) -> np.ndarray | None:
    """The prior of counts 0..``window`` (normalised over the window) fitted to one
    level's ``measurements`` (NaN: not measured) of noise scale ``sigma``; None when the
    window holds fewer than :data:`MIN_MEASURED` of them (module doc)."""
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
    total = float(inside.sum())
    if not total > 0:
        return None
    return inside / total


__all__ = ["DEGREE", "MIN_MEASURED", "OUTSIDE_SIGMAS", "PENALTY", "WINDOW_SIGMAS",
           "fit_prior", "prior_window"]
