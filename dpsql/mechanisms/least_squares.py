"""Tree least squares: the BLUE of every node of a tree from independent noisy counts.

Problem. A tree has levels 0..d (level 0 is the root). Every node's true count is the sum
of its children's. Each node v carries one independent unbiased measurement
``y_v = x_v + noise`` with known variance σ²_v (0: known exactly, e.g. the public n under
substitution; ``inf``: not measured). We want the best linear unbiased estimator (BLUE,
i.e. the generalised least-squares solution) of every node under the constraints
parent = Σ children, and the exact variance of each estimate.

Algorithm (Hay et al. 2010, "Boosting the accuracy of differentially private histograms
through consistency", §4, generalised to arbitrary fan-out and per-node variances as in
Honaker 2015, "Efficient use of differentially private binary trees", §3; this is the
Kalman filter / Rauch–Tung–Striebel smoother on a tree, exact for tree-structured GLS):

* **Bottom-up** (estimation from below). For a leaf, ``z = y`` and ``V = σ²``. For an
  inner node v with children c, let ``s = Σ z_c`` and ``S = Σ V_c`` (the subtree-only
  estimate of x_v from below and its variance), then combine by inverse variance:
  ``z_v = (y_v/σ²_v + s/S) / (1/σ²_v + 1/S)``, ``V_v = 1/(1/σ²_v + 1/S)``.
  ``z_v`` is the BLUE of x_v from the measurements inside v's subtree.
* **Top-down** (distribute the parent's residual). The root's final estimate is
  ``x̂_root = z_root`` with variance ``Π_root = V_root``. A child c of v gets
  ``x̂_c = z_c + λ_c (x̂_v − s_v)`` with ``λ_c = V_c / S_v``; since Σ λ_c = 1 the children
  sum to the parent exactly (up to float rounding).
* **Posterior variances.** ``Π_c = V_c (1 − λ_c) + λ_c² Π_v`` (RTS smoother:
  Var(x_c | all) = Var(x_c | subtree of v) + J² (Π_v − V_v) with J = λ_c; simplify with
  V_v = S σ²/(S + σ²)). Equivalently, the estimation error decomposes as
  ``e_c = λ_c e_v + η_c`` where the innovations η of the children of one parent have
  covariance ``diag(V) − V Vᵀ / S`` (they sum to zero), and innovations of different
  parents, and the root error, are uncorrelated. :mod:`dpsql.accuracy.btree` uses this
  decomposition for exact variances of arbitrary sums of nodes.

Special values: σ² = 0 makes the measurement win outright (z = y, V = 0); σ² = inf drops
it (z = s, V = S). A node whose children include unmeasured-and-unidentified subtrees
(V = inf) passes the whole residual to them; if two or more siblings are unidentified,
they share the residual equally and keep variance inf (the data cannot tell them apart).
A node without children is a leaf of the tree wherever it sits.

Upper bounds. BLUE has the least variance among all linear unbiased estimators. So the
variance of the BLUE of any sum of nodes is at most the variance of *any* other linear
unbiased estimator of that sum, for instance the sum of the raw measurements of a
disjoint cover of the same leaves: see :func:`sum_variance_upper_bound`. An error model
that cannot afford the exact quadratic form may report that sum and mark the variance
``exact=False``: it is a true upper bound, never an underestimate.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dpsql.errors import InvalidPrivacyParameterError

__all__ = ["tree_least_squares", "sum_variance_upper_bound"]


def _check_inputs(parents: Sequence[np.ndarray], noisy: Sequence[np.ndarray],
                  variances: Sequence[object]) -> tuple[list[np.ndarray], list[np.ndarray],
                                                         list[np.ndarray]]:
    d = len(parents)
    if len(noisy) != d + 1 or len(variances) != d + 1:
        raise InvalidPrivacyParameterError(
            f"tree_least_squares needs d+1 = {d + 1} levels of noisy counts and variances "
            f"for {d} parent arrays, got {len(noisy)} and {len(variances)}")
    ys = [np.asarray(y, dtype=np.float64).ravel() for y in noisy]
    if ys[0].size != 1:
        raise InvalidPrivacyParameterError(
            f"level 0 is the root and must have exactly one node, got {ys[0].size}")
    ps: list[np.ndarray] = []
    for k, p in enumerate(parents, start=1):
        p = np.asarray(p, dtype=np.int64).ravel()
        if p.size != ys[k].size:
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] has {p.size} entries but level {k} has {ys[k].size} nodes")
        if p.size and (p[0] < 0 or p[-1] >= ys[k - 1].size or np.any(np.diff(p) < 0)):
            raise InvalidPrivacyParameterError(
                f"parents[{k - 1}] must be sorted and lie in [0, {ys[k - 1].size}): each "
                f"level's nodes are ordered by parent")
        ps.append(p)
    vs: list[np.ndarray] = []
    for k, v in enumerate(variances):
        arr = np.asarray(v, dtype=np.float64)
        try:
            arr = np.broadcast_to(arr, ys[k].shape).copy()
        except ValueError as err:
            raise InvalidPrivacyParameterError(
                f"variances[{k}] must be a scalar or have {ys[k].size} entries, "
                f"got shape {arr.shape}") from err
        if np.any(np.isnan(arr)) or np.any(arr < 0):
            raise InvalidPrivacyParameterError(
                f"variances[{k}] must be >= 0 (0 = exact, inf = not measured), got "
                f"{arr[np.isnan(arr) | (arr < 0)][:3]}")
        measured = np.isfinite(arr)
        if np.any(~np.isfinite(ys[k][measured])):
            raise InvalidPrivacyParameterError(
                f"noisy[{k}] has non-finite values at measured nodes; mark unmeasured nodes "
                "with variance inf")
        ys[k] = np.where(measured, ys[k], 0.0)
        vs.append(arr)
    return ps, ys, vs


def tree_least_squares(parents: Sequence[np.ndarray], noisy: Sequence[np.ndarray],
                       variances: Sequence[object]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """BLUE (generalised least squares) of every node of a tree, and its exact variance.

    ``parents[k-1]`` gives, for each node of level k (k = 1..d), its parent index at level
    k−1; nodes are sorted by parent. ``noisy[k]`` holds level k's measurements
    (``noisy[0]`` has one entry, the root). ``variances[k]`` is a scalar or per-node array
    (0 = exact, inf = not measured). Returns ``(estimates, posterior_variances)``, one
    float64 array per level; each parent equals the sum of its children up to rounding.
    Vectorised: one bincount/gather step per level.

    >>> est, var = tree_least_squares([np.array([0, 0])], [[10.0], [4.0, 5.0]], [1.0, 1.0])
    >>> [round(float(x), 4) for x in est[1]], round(float(est[0][0]), 4)
    ([4.3333, 5.3333], 9.6667)
    >>> [round(float(x), 4) for x in var[1]]
    [0.6667, 0.6667]
    """
    ps, ys, sig = _check_inputs(parents, noisy, variances)
    d = len(ps)
    z: list[np.ndarray] = [np.empty(0)] * (d + 1)
    V: list[np.ndarray] = [np.empty(0)] * (d + 1)
    s_sum: list[np.ndarray] = [np.empty(0)] * d   # Σ z of children, per parent
    S_fin: list[np.ndarray] = [np.empty(0)] * d   # Σ finite V of children
    n_inf: list[np.ndarray] = [np.empty(0)] * d   # number of children with V = inf
    n_ch: list[np.ndarray] = [np.empty(0)] * d    # number of children

    z[d], V[d] = ys[d].copy(), sig[d].copy()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for k in range(d, 0, -1):                       # bottom-up, level k -> k-1
            p, m = ps[k - 1], ys[k - 1].size
            Vc = V[k]
            fin = np.isfinite(Vc)
            cnt = np.bincount(p, minlength=m)
            s = np.bincount(p, weights=z[k], minlength=m)
            sf = np.bincount(p, weights=np.where(fin, Vc, 0.0), minlength=m)
            ni = np.bincount(p, weights=(~fin).astype(np.float64), minlength=m)
            S = np.where((ni > 0) | (cnt == 0), np.inf, sf)
            s_sum[k - 1], S_fin[k - 1], n_inf[k - 1], n_ch[k - 1] = s, sf, ni, cnt
            y, sv = ys[k - 1], sig[k - 1]
            # weight of the node's own measurement: S/(S+σ²), with the limits spelt out
            w = np.where(np.isinf(S), np.where(np.isinf(sv), 0.0, 1.0), S / (S + sv))
            w = np.where(sv == 0.0, 1.0, np.where(np.isinf(sv), 0.0, w))
            w = np.where((S == 0.0) & (sv > 0.0), 0.0, w)
            zv = np.where(w == 1.0, y, np.where(w == 0.0, s, w * y + (1.0 - w) * s))
            vv = np.where(np.isinf(S), sv, np.where(np.isinf(sv), S, S * sv / (S + sv)))
            vv = np.where((S == 0.0) | (sv == 0.0), 0.0, vv)
            z[k - 1], V[k - 1] = zv, vv

        x: list[np.ndarray] = [np.empty(0)] * (d + 1)
        post: list[np.ndarray] = [np.empty(0)] * (d + 1)
        x[0], post[0] = z[0].copy(), V[0].copy()
        for k in range(1, d + 1):                       # top-down, level k-1 -> k
            p = ps[k - 1]
            Vc = V[k]
            inf_c = np.isinf(Vc)
            Sp = np.where((n_inf[k - 1] > 0) | (n_ch[k - 1] == 0), np.inf, S_fin[k - 1])[p]
            nip = n_inf[k - 1][p]
            lam = np.where(nip > 0, np.where(inf_c, 1.0 / np.maximum(nip, 1.0), 0.0),
                           np.where(Sp > 0.0, Vc / Sp, 1.0 / n_ch[k - 1][p]))
            lam = np.where(np.isfinite(lam), lam, 0.0)
            r = x[k - 1][p] - s_sum[k - 1][p]
            x[k] = z[k] + lam * r
            # Π_c = V_c(1 − λ_c) + λ_c² Π_v, with V_c(1 − λ_c) = 1/(1/V_c + 1/S_{−c}).
            h = np.where(nip > 0,
                         np.where(inf_c, np.where(nip == 1, S_fin[k - 1][p], np.inf), Vc),
                         Vc * (1.0 - lam))
            h = np.where(Sp == 0.0, 0.0, h)
            pp = post[k - 1][p]
            post[k] = h + np.where(lam > 0.0, lam * lam * pp, 0.0)
    return x, post


def sum_variance_upper_bound(cover_variances: np.ndarray) -> float:
    """An upper bound on the BLUE variance of a sum: the variance of the sum of the raw
    measurements of a disjoint cover of the same leaves, Σ σ²_u.

    The raw cover sum is a linear unbiased estimator of the same quantity, and the BLUE
    (Gauss–Markov) has the least variance among those, so this never underestimates.
    Error models use it when the exact quadratic form is out of reach (``exact=False``).

    >>> sum_variance_upper_bound(np.array([2.0, 2.0, 8.0]))
    12.0
    """
    v = np.asarray(cover_variances, dtype=np.float64)
    if np.any(np.isnan(v)) or np.any(v < 0):
        raise InvalidPrivacyParameterError("cover variances must be >= 0")
    return float(v.sum())
