"""IntOpt: the integer Chebyshev (ℓ∞) projection onto {y ∈ ℕ₀^m : Σy = c}.

Three versions with identical output (the paper's tie-break, a *stable* ascending sort of
x; ``reference/inftda.md`` §2.3, ``reference/od_topdown.md`` §2.3–2.4):

* :func:`intopt_loop` — the paper's simple loop (Alg. 2), in Python integers. A test
  oracle only: its pass count grows with the noise magnitude (inftda §2.3, the O(c)
  claim is wrong).
* :func:`intopt` — the digest's fast exact equivalent for one vector.
* :func:`intopt_segmented` — the same for many vectors at once (one per parent of a
  tree level), in one vectorised call: no Python loop over segments.

The fast version (inftda §2.3 "A fast exact equivalent"), with T = c − Σx,
a = ⌈T/m⌉ (integer ceil, ``-((-T)//m)``, correct for negative T), z⁰ᵢ = max(a, −xᵢ),
t₀ = max|z⁰ᵢ| and Lᵢ(t) = max(−xᵢ, −t):

1. t* = the smallest t ≥ t₀ with Σᵢ Lᵢ(t) ≤ T. The digest binary-searches t; here it is
   found in closed form from the sorted x, which we need anyway for the greedy pass:
   Σᵢ Lᵢ(t) ≤ T ⇔ g(t) := Σᵢ min(xᵢ, t) ≥ Σx − c, and g is piecewise linear with breaks
   at the sorted values v₀ ≤ … ≤ v_{m−1}: on [v_{j−1}, v_j], g(t) = P_j + (m − j)·t with
   P_j = v₀ + … + v_{j−1}. With j* the first j with g(v_j) ≥ Σx − c,
   t = ⌈(Σx − c − P_{j*}) / (m − j*)⌉ and t* = max(t₀, t).
2. base = z⁰ if t* = t₀, else Lᵢ(t* − 1) (the state after the failed passes).
3. Δ = Σbase − T is removed greedily in stable ascending-x order, each entry going no
   lower than Lᵢ(t*). Output y = x + base − removed.

Guards: c = 0 returns zeros (the paper's Alg. 4 divides by zero there); an empty vector
is only valid with c = 0; c < 0 is rejected. Everything is int64 (exact for |values| well
below 2⁶²).
"""

from __future__ import annotations

import numpy as np

from dpsql.errors import InternalError, InvalidPrivacyParameterError


def _ceil_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer ⌈a/b⌉ for b > 0, exact for negative a."""
    return -((-a) // b)


def intopt_loop(x, c: int) -> list[int]:
    """The paper's simple IntOpt loop (inftda.md §2.3), in Python integers (test oracle)."""
    x = [int(v) for v in x]
    c = int(c)
    m = len(x)
    if c < 0:
        raise InvalidPrivacyParameterError(f"IntOpt needs c >= 0, got {c}")
    if m == 0:
        if c:
            raise InvalidPrivacyParameterError("IntOpt of an empty vector needs c = 0")
        return []
    big_t = c - sum(x)
    a = -((-big_t) // m)
    z = [max(a, -xi) for xi in x]
    t = max(abs(zi) for zi in z)
    order = sorted(range(m), key=lambda i: (x[i], i))
    j = 0
    s = sum(z)
    while s > big_t:
        delta = s - big_t
        i = order[j]
        new = max(z[i] - delta, -x[i], -t)
        s -= z[i] - new
        z[i] = new
        j = (j + 1) % m
        if j == 0:
            t += 1
    return [xi + zi for xi, zi in zip(x, z)]


def intopt(x, c: int) -> np.ndarray:
    """IntOpt of one integer vector x onto {y ≥ 0 integer, Σy = c} (fast, exact).

    >>> intopt([5, -3, 2, 10], 20).tolist()
    [7, 0, 1, 12]
    """
    xa = np.asarray(x, dtype=np.int64).ravel()
    return intopt_segmented(xa, np.array([0, xa.size], dtype=np.int64),
                            np.array([int(c)], dtype=np.int64))


def segment_offsets(seg_ids: np.ndarray, n_segments: int) -> np.ndarray:
    """CSR offsets (length n_segments+1) from non-decreasing segment ids."""
    seg_ids = np.asarray(seg_ids, dtype=np.int64)
    if seg_ids.size and np.any(np.diff(seg_ids) < 0):
        raise InternalError("segment ids must be non-decreasing")
    off = np.zeros(n_segments + 1, dtype=np.int64)
    np.cumsum(np.bincount(seg_ids, minlength=n_segments), out=off[1:])
    return off


def _segment_sort(x: np.ndarray, seg: np.ndarray, n_seg: int) -> np.ndarray:
    """A permutation sorting by (segment, x, original index) — i.e. a stable ascending
    sort of x within each segment. One int64 key when it fits, else ``lexsort``."""
    if x.size == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(x.min()), int(x.max())
    span = hi - lo + 1
    bits = max(span - 1, 1).bit_length()
    if (max(n_seg - 1, 1)).bit_length() + bits <= 62:
        key = np.subtract(x, lo)
        key |= np.left_shift(seg, bits)
        return np.argsort(key, kind="stable")
    return np.lexsort((x, seg))


BLOCK = 1 << 19
"""Entries :func:`intopt_segmented` works on at once (whole segments; a segment longer
than this is one block): its dozen int64 temporaries then stay small enough to be reused
by the allocator and to sit in cache, instead of being mapped and faulted in afresh."""


def _by_blocks(x: np.ndarray, ptr: np.ndarray, c: np.ndarray) -> np.ndarray:
    """:func:`intopt_segmented` over blocks of whole segments of about :data:`BLOCK`
    entries (segments are independent: the same output)."""
    y = np.empty_like(x)
    start = 0
    while start < c.size:
        stop = int(np.searchsorted(ptr, ptr[start] + BLOCK, side="right")) - 1
        stop = min(max(stop, start + 1), c.size)
        lo, hi = int(ptr[start]), int(ptr[stop])
        y[lo:hi] = intopt_segmented(x[lo:hi], ptr[start:stop + 1] - lo, c[start:stop])
        start = stop
    return y


def intopt_segmented(x, seg_ptr_or_ids, c) -> np.ndarray:
    """IntOpt of every segment of ``x`` onto its own total ``c[i]``, in one vectorised
    call. Equal, segment by segment, to :func:`intopt`.

    ``seg_ptr_or_ids`` is either CSR offsets (length len(c)+1, first 0, last len(x)) or
    non-decreasing segment ids (length len(x), values in 0..len(c)−1). The two cannot be
    confused: offsets end at len(x) while ids are at most len(c) − 1 < len(x) whenever
    the lengths coincide.

    >>> intopt_segmented([5, -3, 2, 10, 0, 0, 0], [0, 4, 7], [20, 2]).tolist()
    [7, 0, 1, 12, 0, 1, 1]
    >>> intopt_segmented([5, -3, 2, 10, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1], [20, 2]).tolist()
    [7, 0, 1, 12, 0, 1, 1]
    """
    x = np.asarray(x, dtype=np.int64)
    seg = np.asarray(seg_ptr_or_ids, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    n_seg = c.size
    if seg.size == n_seg + 1 and seg[0] == 0 and seg[-1] == x.size:
        ptr = seg
    elif seg.size == x.size:
        if seg.size and (seg.min() < 0 or seg.max() >= n_seg):
            raise InternalError("segment ids must lie in 0..len(c)-1")
        ptr = segment_offsets(seg, n_seg)
    else:
        raise InternalError("seg_ptr_or_ids must be CSR offsets (len(c)+1) or segment ids "
                            "(len(x))")
    if ptr.size != n_seg + 1 or ptr[0] != 0 or ptr[-1] != x.size or np.any(np.diff(ptr) < 0):
        raise InternalError("seg_ptr must be CSR offsets of x with one segment per c")
    if np.any(c < 0):
        raise InvalidPrivacyParameterError(f"IntOpt needs totals c >= 0, got {int(c.min())}")
    m = np.diff(ptr)
    if np.any((m == 0) & (c > 0)):
        raise InvalidPrivacyParameterError("IntOpt of an empty segment needs c = 0")
    if x.size == 0:
        return x.copy()
    if x.size > BLOCK and n_seg > 1:
        return _by_blocks(x, ptr, c)
    msafe = np.maximum(m, 1)
    nonempty = m > 0
    seg = np.repeat(np.arange(n_seg, dtype=np.int64), m)

    def rep(a: np.ndarray) -> np.ndarray:
        return np.repeat(a, m)

    def segsum(cs: np.ndarray) -> np.ndarray:  # from an inclusive cumsum with leading 0
        return cs[ptr[1:]] - cs[ptr[:-1]]

    # sort once (stable ascending x within each segment) and work in sorted space
    order = _segment_sort(x, seg, n_seg)
    del seg
    v = x[order]
    cs = np.zeros(v.size + 1, dtype=np.int64)
    np.cumsum(v, out=cs[1:])
    sx = segsum(cs)
    big_t = c - sx
    a = _ceil_div(big_t, msafe)
    first = np.minimum(ptr[:-1], v.size - 1)
    last = np.maximum(ptr[1:] - 1, 0)
    vmin, vmax = v[first], v[last]
    # z0_i = max(a, -v_i): its largest entry sits at v_min, its smallest at v_max
    t0 = np.maximum(np.maximum(a, -vmin), -np.maximum(a, -vmax))
    t0 = np.where(nonempty, np.maximum(t0, 0), 0)

    # j* = first j with g(v_j) = P_j + (m - j) v_j >= Σx − c (vectorised binary search
    # per segment; g is non-decreasing in j and g(v_{m-1}) = Σx)
    need = sx - c
    lo = np.zeros(n_seg, dtype=np.int64)
    hi = msafe - 1
    while True:
        act = lo < hi
        if not act.any():
            break
        mid = (lo + hi) // 2
        pos = ptr[:-1] + mid
        g = cs[pos] - cs[ptr[:-1]] + (m - mid) * v[np.minimum(pos, v.size - 1)]
        ok = g >= need
        hi = np.where(act & ok, mid, hi)
        lo = np.where(act & ~ok, mid + 1, lo)
    jstar = lo
    p_j = cs[ptr[:-1] + jstar] - cs[ptr[:-1]]
    t_min = _ceil_div(need - p_j, np.maximum(m - jstar, 1))
    tstar = np.maximum(t0, t_min)

    # base = z0 (t* = t0) or L(t* − 1); both are max(b, −v) with a per-segment b
    bseg = np.where(tstar > t0, 1 - tstar, a)
    # in place where it can be: every n-long temporary is a pass and a fresh allocation
    negv = np.negative(v)
    base = np.maximum(rep(bseg), negv, out=negv)
    cap = np.maximum(rep(-tstar), -v)
    np.subtract(base, cap, out=cap)
    cb = cs  # Σv's running sum is no longer needed
    np.cumsum(base, out=cb[1:])
    delta = segsum(cb) - big_t
    if np.any(delta < 0):
        raise InternalError("IntOpt start point below the required total")
    np.cumsum(cap, out=cb[1:])
    removed = rep(delta + cb[ptr[:-1]])
    removed -= cb[:-1]  # Δ − (capacity before this entry)
    np.clip(removed, 0, cap, out=removed)
    base += v
    base -= removed
    zero_c = (c == 0)
    if np.any(zero_c):
        base[rep(zero_c)] = 0
    y = np.empty_like(base)
    y[order] = base
    return y


def public_priority(ids: np.ndarray, salt: np.ndarray) -> np.ndarray:
    """A pseudo-random order key for tie-breaks, from public values only (node ids and a
    per-node released number): SplitMix64's finaliser of ``ids`` mixed with ``salt``.
    Deterministic, so a step that uses it draws no randomness; it varies with ``salt``
    across releases, so no node is always served first."""
    with np.errstate(over="ignore"):
        z = (np.asarray(ids, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             ^ np.asarray(salt, dtype=np.int64).astype(np.uint64))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def even_projection(x: np.ndarray, seg: np.ndarray, c: np.ndarray,
                    priority: np.ndarray) -> np.ndarray:
    """An ℓ∞ projection of non-negative integers ``x`` onto {y ≥ 0 integer, Σy = c[s]}
    for each segment s (``seg``: non-decreasing segment ids, one segment per entry of
    ``c``), choosing among the optimal solutions the most even change.

    IntOpt (the paper's tie-break) is optimal too, but among the many optimal solutions
    it gives a positive remainder to the largest children and takes a negative one from
    the smallest, even beyond the uniform share (x = [5, 10, 20, 30, 40] moved up by 2
    becomes [4, 10, 21, 31, 41]), so a sum of the smallest children over many parents
    drifts. Here, with T = c − Σx per segment:

    * T ≥ 0: every child gains ⌊T/m⌋ and T mod m of them one more;
    * T < 0: with t the smallest integer with Σ min(xᵢ, t) ≥ −T (the optimal ℓ∞
      distance), every child loses min(xᵢ, t − 1) and the rest is taken, one each, from
      children with xᵢ ≥ t;

    the extra units going to the children first in ``priority`` (ascending): every child
    not held at 0 changes by the same amount up to one unit, whatever its size.

    Segments already at their total (T = 0) are returned as they are, and only the others
    are worked on: the output is the same (their children gain 0 and none is eligible
    for an extra unit), and a reconciliation that moves few parents costs about one pass
    over ``x`` (none moves in benchmarks/od_scale.py's release at ρ = 100 and its
    replicates, whose 60 projections took 6.5 s to return ``x`` unchanged).

    >>> even_projection(np.array([5, 10, 20, 30, 40]), np.zeros(5, np.int64),
    ...                 np.array([107]), np.array([3, 0, 4, 1, 2], np.uint64)).tolist()
    [5, 11, 20, 31, 40]
    >>> even_projection(np.array([0, 1, 9]), np.zeros(3, np.int64), np.array([4]),
    ...                 np.array([0, 1, 2], np.uint64)).tolist()
    [0, 0, 4]
    """
    x = np.asarray(x, dtype=np.int64)
    seg = np.asarray(seg, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    if x.size == 0:
        return x.copy()
    if x.min() < 0:
        raise InternalError("even_projection needs non-negative counts")
    n_seg = c.size
    m = np.bincount(seg, minlength=n_seg)
    if np.any((m == 0) & (c > 0)) or np.any(c < 0):
        raise InternalError("even_projection: a segment without children needs c = 0")
    big_t = c - np.bincount(seg, weights=x, minlength=n_seg).astype(np.int64)
    moved = big_t != 0
    if not moved.all():
        y = x.copy()
        if moved.any():
            sub = moved[seg]
            renumber = np.cumsum(moved) - 1
            y[sub] = even_projection(x[sub], renumber[seg[sub]], c[moved],
                                     np.asarray(priority)[sub])
        return y
    msafe = np.maximum(m, 1)
    gain = np.where(big_t > 0, big_t, 0)
    # losses: the smallest t with Σ min(x, t) ≥ −T, by bisection over all segments at once
    need = np.where(big_t < 0, -big_t, 0)
    lo = np.zeros(n_seg, np.int64)  # Σ min(x, lo) < need (or need = 0)
    hi = np.zeros(n_seg, np.int64)
    np.maximum.at(hi, seg, x)       # Σ min(x, max x) = Σx ≥ need
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        ok = np.bincount(seg, weights=np.minimum(x, mid[seg]), minlength=n_seg) >= need
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    t = np.where(need > 0, hi, 0)
    base = np.where(big_t >= 0, gain // msafe, 0)[seg] - np.minimum(x, np.maximum(t - 1, 0)[seg])
    extra = np.where(big_t >= 0, gain % msafe,
                     need - np.bincount(seg, weights=np.minimum(x, np.maximum(t - 1, 0)[seg]),
                                        minlength=n_seg).astype(np.int64))
    eligible = (big_t >= 0)[seg] | (x >= t[seg])
    idx = np.flatnonzero(eligible)
    order = idx[np.lexsort((priority[idx], seg[idx]))]
    s = seg[order]
    rank = np.arange(order.size) - np.searchsorted(s, s, side="left")
    step = np.where(big_t >= 0, 1, -1)
    y = x + base
    y[order] += np.where(rank < extra[s], step[s], 0)
    return y


__all__ = ["even_projection", "intopt", "intopt_loop", "intopt_segmented",
           "public_priority", "segment_offsets"]
