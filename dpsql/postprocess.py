"""Post-processing of released counts: monotone CDFs and quantiles (tree_cdf.md §2.8).

Pure functions of released numbers, so both sides use them: the b-ary tree mechanism
(its integer monotone CDF) and the query side (``MEDIAN``/``dp_quantile`` in
:mod:`dpsql.duck`), which may not import :mod:`dpsql.mechanisms`. They draw no noise and
read no data: answering is post-processing.

Decision: every quantile dpsql reports comes from one estimator, the least-squares
non-decreasing fit (PAVA) of the released cumulative counts, clipped to [0, total], with
uniform interpolation inside bins. Clipping each bin at 0 before summing (the earlier
``MEDIAN`` path) adds mass wherever noise made a bin negative, so in a long sparse tail
it shifts quantiles towards that tail; the isotonic fit of the CDF does not favour a side.
"""

from __future__ import annotations

import numpy as np

from dpsql.errors import InvalidPrivacyParameterError

__all__ = ["isotonic", "project_cdf", "monotone_cdf_from_leaves", "cdf", "quantile",
           "histogram_quantile", "merge_bins"]

def _extended_pool(means: np.ndarray, sums: np.ndarray, cnts: np.ndarray,
                   viol: np.ndarray) -> np.ndarray:
    """Which blocks start a new pool when each violating chain also absorbs the run of
    blocks to its left whose means exceed the pool's (found by binary search)."""
    nb = sums.size
    v = np.concatenate((viol, [False]))                 # v[b]: block b violates with b+1
    prev = np.concatenate(([False], viol))              # block b is the right of a violation
    ends = np.flatnonzero(prev & ~v)                    # R: right end of each chain
    starts = np.flatnonzero(v & ~prev)                  # s: left end of each chain
    lower = np.concatenate(([0], ends[:-1] + 1))        # never reach into the previous chain
    S = np.concatenate(([0.0], np.cumsum(sums)))
    C = np.concatenate(([0.0], np.cumsum(cnts)))
    lo_j, hi_j = lower, starts.copy()
    first = np.maximum(starts - 1, 0)                   # most chains stop at once
    go = (lo_j < hi_j) & (means[first] * (C[ends + 1] - C[first + 1])
                          > S[ends + 1] - S[first + 1])
    hi_j = np.where(go, first, hi_j)
    lo_j = np.where(go, lo_j, hi_j)
    act = np.flatnonzero(lo_j < hi_j)
    while act.size:
        a, b, e = lo_j[act], hi_j[act], ends[act]
        mid = (a + b) // 2
        ok = means[mid] * (C[e + 1] - C[mid + 1]) > S[e + 1] - S[mid + 1]
        hi_j[act] = np.where(ok, mid, b)
        lo_j[act] = np.where(ok, a, mid + 1)
        act = act[lo_j[act] < hi_j[act]]
    mark = np.bincount(lo_j + 1, minlength=nb + 1) - np.bincount(ends + 1, minlength=nb + 1)
    return np.cumsum(mark)[:nb] == 0


def _pava(y: np.ndarray) -> np.ndarray:
    """Unweighted isotonic (non-decreasing) regression, vectorised by rounds.

    Pooling adjacent violators in any order reaches the unique solution. A plain round
    pools every maximal chain of adjacent violating blocks s > … > R at once. When a round
    makes little progress (< 1 % of blocks), the next also lets each chain absorb the run
    of blocks to its left whose means exceed the pool's: left of a chain the means are
    non-decreasing, so that condition holds on a contiguous run ending at s and a
    vectorised binary search over prefix sums finds its start. A slow cascade (a low
    block eating its predecessors one by one, O(K) plain rounds) then costs one round."""
    sums = y.astype(np.float64).copy()
    cnts = np.ones(y.size)
    slow = False                                        # did the last round pool < 1 %?
    while sums.size > 1:
        means = sums / cnts
        viol = means[:-1] > means[1:]
        if not viol.any():
            break
        nb = sums.size
        if not slow:                                    # plain round: pool chains only
            keep = np.concatenate(([True], ~viol))
        else:
            keep = _extended_pool(means, sums, cnts, viol)
        gid = np.cumsum(keep) - 1
        sums = np.bincount(gid, weights=sums)
        cnts = np.bincount(gid, weights=cnts)
        slow = nb - sums.size < max(2, nb // 100)
    return np.repeat(sums / cnts, cnts.astype(np.int64))


def _suffix_argmin(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rev = a[::-1]
    m = np.minimum.accumulate(rev)
    new = np.empty(rev.size, dtype=bool)
    new[0] = True
    new[1:] = rev[1:] <= m[:-1]
    idx = np.maximum.accumulate(np.where(new, np.arange(rev.size), 0))
    return m[::-1], (rev.size - 1 - idx)[::-1]


def project_cdf(est: np.ndarray, total: int, *, loss: str = "l2", method: str = "pava",
                max_cells: int = 20_000_000) -> np.ndarray:
    """Integer, non-decreasing h with 0 ≤ h_1 ≤ … ≤ h_{K−1} ≤ h_K = total minimising
    Σ d(h_i, est_i) (digest §2.8; est_K is ignored, h_K = total).

    * ``method="pava"`` (squared ℓ2 only): round(clip(PAVA(est_{1..K−1}), 0, total)),
      O(K); optimal by the threshold theorem for separable convex isotonic regression
      (the digest checked it against the DP on 500 instances; our tests repeat that).
    * ``method="dp"``: the O(K·N) trellis DP with suffix minima (§2.8 [D,V]), for ``l1``
      or ``l2``; needs K·(N+1) ≤ ``max_cells`` integers of back-pointers.

    >>> project_cdf(np.array([1.4, 0.6, 2.7, 3.0]), 3).tolist()
    [1, 1, 3, 3]
    """
    y = np.asarray(est, dtype=np.float64).ravel()
    N = int(total)
    if N < 0 or not np.all(np.isfinite(y)) or y.size == 0:
        raise InvalidPrivacyParameterError(
            "project_cdf needs a non-empty finite estimate and a total >= 0")
    if loss not in ("l1", "l2"):
        raise InvalidPrivacyParameterError(f"loss must be 'l1' or 'l2', got {loss!r}")
    K = y.size
    out = np.empty(K, dtype=np.int64)
    out[-1] = N
    if K == 1:
        return out
    if method == "pava":
        if loss != "l2":
            raise InvalidPrivacyParameterError(
                "method='pava' solves squared ℓ2 only; use method='dp' for loss='l1'")
        out[:-1] = np.rint(np.clip(_pava(y[:-1]), 0.0, N)).astype(np.int64)
        return out
    if method != "dp":
        raise InvalidPrivacyParameterError(f"method must be 'pava' or 'dp', got {method!r}")
    if (K - 1) * (N + 1) > max_cells:
        raise InvalidPrivacyParameterError(
            f"the trellis DP needs {(K - 1) * (N + 1):,} cells (> max_cells={max_cells:,}); "
            "use method='pava' (squared ℓ2) or raise max_cells")
    v = np.arange(N + 1, dtype=np.float64)

    def d(i: int) -> np.ndarray:
        return np.abs(v - y[i]) if loss == "l1" else (v - y[i]) ** 2

    # one vectorised step per CDF position (the trellis is sequential in i)
    back = np.empty((K - 1, N + 1), dtype=np.int32)
    alpha = d(K - 2)
    for i in range(K - 3, -1, -1):
        sm, back[i + 1] = _suffix_argmin(alpha)
        alpha = d(i) + sm
    cur = int(np.argmin(alpha))
    out[0] = cur
    for i in range(1, K - 1):
        cur = int(back[i][cur])
        out[i] = cur
    return out


def isotonic(y: np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit of ``y`` (unweighted PAVA)."""
    return _pava(np.asarray(y, dtype=np.float64).ravel())


def monotone_cdf_from_leaves(leaf_counts: np.ndarray, total: float | None = None) -> np.ndarray:
    """Integer monotone CDF over the K bins from released leaf counts: h_j = count of bins
    0..j, with h_{K−1} = total (the public n, or the rounded released total if None)."""
    leaves = np.asarray(leaf_counts, dtype=np.float64)
    N = int(round(max(float(leaves.sum()), 0.0))) if total is None else int(total)
    return project_cdf(np.cumsum(leaves), N)


def _knots(cum: np.ndarray, edges: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    H = np.concatenate(([0.0], np.asarray(cum, dtype=np.float64)))
    K = H.size - 1
    xs = np.arange(K + 1, dtype=np.float64) if edges is None else np.asarray(edges, float)
    if xs.size != K + 1 or np.any(np.diff(xs) <= 0):
        raise InvalidPrivacyParameterError(f"edges must be {K + 1} strictly increasing values")
    return xs, H


def cdf(cum: np.ndarray, x: np.ndarray, edges: np.ndarray | None = None) -> np.ndarray:
    """F(x) = P[X < x] from a monotone CDF (:func:`monotone_cdf`), interpolating uniformly
    inside bins. ``x`` is in bin units [0, K] or, with ``edges`` (K+1 bin edges), in data
    units.

    >>> cdf(np.array([1, 3, 4]), np.array([0.5, 2.0, 3.0])).tolist()
    [0.125, 0.75, 1.0]
    """
    xs, H = _knots(cum, edges)
    N = H[-1]
    if N <= 0:
        return np.zeros(np.shape(x))
    return np.interp(np.asarray(x, dtype=np.float64), xs, H) / N


def quantile(cum: np.ndarray, p: np.ndarray, edges: np.ndarray | None = None) -> np.ndarray:
    """The smallest x with F(x) ≥ p (uniform interpolation inside bins), p in [0, 1].

    >>> quantile(np.array([1, 3, 4]), np.array([0.5, 1.0])).tolist()
    [1.5, 3.0]
    """
    xs, H = _knots(cum, edges)
    pr = np.asarray(p, dtype=np.float64)
    if np.any((pr < 0) | (pr > 1)) or np.any(np.isnan(pr)):
        raise InvalidPrivacyParameterError("quantile levels p must lie in [0, 1]")
    t = pr * H[-1]
    j = np.clip(np.searchsorted(H, t, side="left") - 1, 0, H.size - 2)
    width = H[j + 1] - H[j]
    frac = np.where(width > 0, (t - H[j]) / np.where(width > 0, width, 1.0), 0.0)
    return xs[j] + np.clip(frac, 0.0, 1.0) * (xs[j + 1] - xs[j])


def merge_bins(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The histogram of a group's released rows [lo_i, hi_i): (its bin edges, the bin of
    each row). Rows with the same lower edge share a bin (a group's leaves over other
    attributes); a gap between public bins (sparse levels store only positive nodes)
    becomes an empty bin."""
    starts, inv = np.unique(np.asarray(lo, dtype=np.float64), return_inverse=True)
    tops = np.full(starts.size, -np.inf)
    np.maximum.at(tops, inv, np.asarray(hi, dtype=np.float64))
    if np.any(tops[:-1] > starts[1:]) or np.any(tops <= starts):
        raise InvalidPrivacyParameterError("histogram_quantile needs non-overlapping bins")
    edges = np.unique(np.concatenate((starts, tops)))   # gaps become empty bins
    return edges, np.searchsorted(edges, starts)[inv]


def histogram_quantile(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       p: float) -> float | None:
    """The p-quantile of released bins [lo_i, hi_i) with released (real) counts
    (:func:`merge_bins`; public bins missing from the input count 0).
    The CDF is the isotonic fit of the cumulative counts, clipped to [0, total]
    (module doc). None when the released total is not positive.
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.size == 0:
        return None
    edges, row_bin = merge_bins(lo, hi)
    cum = np.cumsum(np.bincount(row_bin, weights=c, minlength=edges.size - 1))
    total = cum[-1]
    if not total > 0:
        return None
    fitted = np.clip(isotonic(cum[:-1]), 0.0, total)
    return float(quantile(np.concatenate((fitted, [total])), np.array([p]), edges)[0])
