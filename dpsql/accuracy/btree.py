"""Error model of the optimal b-ary Laplace tree with least-squares consistency (kind ``btree``).

Public parameters: the number of bins K, the fan-outs (n_1..n_h) top-down, the variance
σ²_i of one raw level-i measurement (discrete Laplace: 2q/(1−q)², q = exp(−1/scale)),
and the root's variance (0 when n is public under substitution; unmeasured under
add/remove). Level i node j covers leaf bins ``[j·L_i, (j+1)·L_i) ∩ [0, K)`` with
``L_i = Π_{t>i} n_t`` (the ``bin_spans``); padding past K is omitted (public zeros), so
the last node of a level may have fewer children (``dpsql.mechanisms.base``).

The released counts are the BLUE of the tree (``dpsql.mechanisms.least_squares``). Its
error decomposes as ``e_c = λ_c e_parent + η_c`` with ``λ_c = V_c / S_parent`` (V is the
bottom-up variance, S the sum of the children's V), where the innovations of one parent's
children have covariance ``diag(V) − V Vᵀ/S`` and are uncorrelated with everything else.
For any weighting W of the nodes (W_v = Σ_c λ_c W_c, the share of v's error carried by
the query) the variance is therefore exactly

    Var = Π_root · W_root² + Σ_parents a [ Σ_c V_c W_c² − (Σ_c V_c W_c)² / S_a ].

* :meth:`sum_variance` evaluates this for any node set in O(#nodes) (one bincount per
  level).
* :meth:`range_variance` is exact in O(h) per range, vectorised over ranges: a range is
  the difference of two prefixes, and a prefix [0, p) has fractional W only on the h
  nodes containing p strictly, so only those parents contribute (plus, for the
  covariance of the two prefixes, their common ancestors). Children fully before p are
  summed with per-level cumulative sums of V.

Every variance here is exact (``exact=True``); nothing is an upper bound.

Intervals. The noise is discrete Laplace, so an answer's error is a linear combination of
Laplace draws, not a normal: :meth:`laplace_cumulants` gives its variance and fourth
cumulant (same carry-up, over the answer's ancestors only) and
:func:`dpsql.accuracy.laplace_sum.half_width` turns them into ``dp_ci_low/high``: exact
for one draw (a one-level tree's bin under add/remove: ±1.96σ covered 0.937 at 95 %),
the matched sum of Laplaces otherwise. ``dp_stderr`` stays the exact standard error.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.errors import IntegrityError, InvalidPrivacyParameterError

__all__ = ["BTreeErrorModel", "bin_spans", "level_sizes"]


def bin_spans(fanouts: Sequence[int]) -> tuple[int, ...]:
    """Leaf bins per node by level: L_0 = Π n_i (padded), ..., L_h = 1."""
    spans = [1]
    for n in reversed(list(fanouts)):
        spans.append(spans[-1] * int(n))
    return tuple(reversed(spans))


def level_sizes(bins: int, fanouts: Sequence[int]) -> tuple[int, ...]:
    """Released nodes per level: ⌈K / L_i⌉ (nodes wholly in the padding are omitted)."""
    return tuple(-(-int(bins) // L) for L in bin_spans(fanouts))


@register
class BTreeErrorModel(ErrorModel):
    """Exact variances of BLUE counts of a padded mixed-radix tree (see module docstring).

    >>> m = BTreeErrorModel(bins=4, fanouts=(2, 2), variances=(2.0, 2.0), root_variance=0.0)
    >>> round(float(m.range_variance(np.array([0]), np.array([2]))[0]), 6)
    0.666667
    """

    kind = "btree"

    def __init__(self, bins: int, fanouts: Sequence[int], variances: Sequence[float],
                 root_variance: float | None) -> None:
        K = int(bins)
        fans = tuple(int(n) for n in fanouts)
        vs = tuple(float(v) for v in variances)
        if K < 1:
            raise InvalidPrivacyParameterError(f"bins must be >= 1, got {bins!r}")
        if not fans or any(n < 2 for n in fans):
            raise InvalidPrivacyParameterError(
                f"fanouts must be a non-empty sequence of integers >= 2, got {fanouts!r}")
        spans = bin_spans(fans)
        if spans[0] < K or spans[1] >= K:
            raise InvalidPrivacyParameterError(
                f"fanouts {fans} do not fit {K} bins: need Π n_i >= K and the top level "
                f"to have at least 2 nodes (Π n_2..n_h < K)")
        if len(vs) != len(fans) or any(not (v > 0) or math.isinf(v) for v in vs):
            raise InvalidPrivacyParameterError(
                f"variances must give one finite value > 0 per level, got {variances!r}")
        if root_variance is not None and (root_variance < 0 or math.isinf(root_variance)):
            raise InvalidPrivacyParameterError(
                f"root_variance must be >= 0 or None (unmeasured), got {root_variance!r}")
        self.bins, self.fanouts, self.variances = K, fans, vs
        self.root_variance = None if root_variance is None else float(root_variance)
        self.spans = spans
        self.sizes = level_sizes(K, fans)
        self._cache: dict[str, list[np.ndarray]] | None = None
        self._laplace = None

    # -- contract -----------------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "bins": self.bins, "fanouts": list(self.fanouts),
                "variances": list(self.variances), "root_variance": self.root_variance}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "BTreeErrorModel":
        try:
            return cls(params["bins"], params["fanouts"], params["variances"],
                       params.get("root_variance"))
        except (KeyError, TypeError) as err:
            raise IntegrityError(f"malformed btree error-model parameters {params!r}") from err

    @property
    def depth(self) -> int:
        return len(self.fanouts)

    # -- the variance recursion (public parameters only) ---------------------------------
    def _arrays(self) -> dict[str, list[np.ndarray]]:
        """Bottom-up V, children sums S, posterior Π and cumulative V per level."""
        if self._cache is not None:
            return self._cache
        h = self.depth
        V: list[np.ndarray] = [np.empty(0)] * (h + 1)
        S: list[np.ndarray] = [np.empty(0)] * (h + 1)
        V[h] = np.full(self.sizes[h], self.variances[h - 1])
        S[h] = np.full(self.sizes[h], np.inf)
        for i in range(h - 1, -1, -1):
            parent = np.arange(self.sizes[i + 1]) // self.fanouts[i]
            S[i] = np.bincount(parent, weights=V[i + 1], minlength=self.sizes[i])
            own = self.variances[i - 1] if i > 0 else self.root_variance
            if own is None:
                V[i] = S[i].copy()
            elif own == 0.0:
                V[i] = np.zeros(self.sizes[i])
            else:
                V[i] = S[i] * own / (S[i] + own)
        post: list[np.ndarray] = [V[0].copy()]
        for i in range(1, h + 1):
            parent = np.arange(self.sizes[i]) // self.fanouts[i - 1]
            lam = V[i] / S[i - 1][parent]
            post.append(V[i] * (1.0 - lam) + lam * lam * post[i - 1][parent])
        cum = [np.concatenate(([0.0], np.cumsum(v))) for v in V]
        self._cache = {"V": V, "S": S, "post": post, "cum": cum}
        return self._cache

    def node_variances(self, level: int) -> np.ndarray:
        """Posterior variance of every released node of ``level`` (the dp_var column)."""
        self._check_level(level)
        return self._arrays()["post"][level].copy()

    def _check_level(self, level: int) -> None:
        if not (0 <= int(level) <= self.depth):
            raise InvalidPrivacyParameterError(
                f"level must be in 0..{self.depth}, got {level!r}")

    # -- arbitrary node sets: O(#nodes) ----------------------------------------------------
    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance:
        """Exact variance of the sum of the released counts of ``node_ids`` at ``level``."""
        ids = self._ids(level, node_ids)
        return self.linear_variance(level, ids, np.ones(ids.size))

    def linear_variance(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                        ) -> Variance:
        """Exact variance of Σ coef·(released count) over the distinct ``node_ids``:
        the carry-up of the module doc with the node weights W = coef."""
        ids = self._ids(level, node_ids)
        a = self._arrays()
        V, S = a["V"], a["S"]
        W = np.zeros(self.sizes[level])
        W[ids] = np.asarray(coef, dtype=np.float64)
        total = 0.0
        for i in range(level - 1, -1, -1):
            parent = np.arange(self.sizes[i + 1]) // self.fanouts[i]
            vw = V[i + 1] * W
            svw = np.bincount(parent, weights=vw, minlength=self.sizes[i])
            svw2 = np.bincount(parent, weights=vw * W, minlength=self.sizes[i])
            total += float(np.sum(svw2 - svw * svw / S[i]))
            W = svw / S[i]
        total += float(a["post"][0][0] * W[0] * W[0])
        return Variance(max(total, 0.0), exact=True)

    def linear_variances(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                         ) -> np.ndarray:
        """:meth:`linear_variance` for each row of ``coef`` (m × n) at once."""
        ids = self._ids(level, node_ids)
        a = self._arrays()
        V, S = a["V"], a["S"]
        c = np.asarray(coef, dtype=np.float64)
        W = np.zeros((c.shape[0], self.sizes[level]))
        W[:, ids] = c
        total = np.zeros(c.shape[0])
        for i in range(level - 1, -1, -1):
            starts = np.arange(0, self.sizes[i + 1], self.fanouts[i])
            vw = V[i + 1] * W
            svw = np.add.reduceat(vw, starts, axis=1)
            svw2 = np.add.reduceat(vw * W, starts, axis=1)
            total += np.sum(svw2 - svw * svw / S[i], axis=1)
            W = svw / S[i]
        return np.maximum(total + a["post"][0][0] * W[:, 0] * W[:, 0], 0.0)

    def _ids(self, level: int, node_ids: np.ndarray) -> np.ndarray:
        self._check_level(level)
        ids = np.asarray(node_ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.sizes[level]):
            raise InvalidPrivacyParameterError(
                f"node ids at level {level} must lie in [0, {self.sizes[level]})")
        return ids

    def laplace_cumulants(self, level: int, node_ids: np.ndarray):
        """κ₂, P, Q of the sum of the released counts of the distinct ``node_ids`` at
        ``level`` (:class:`dpsql.accuracy.laplace_sum.Cumulants`; κ₂ = :meth:`sum_variance`)."""
        ids = np.unique(self._ids(level, node_ids))
        got = self.linear_cumulants(level, ids, np.ones(ids.size))
        # one level, root unmeasured: every count is a raw measurement or a sum of them
        return got._replace(lattice=self.depth == 1 and self.root_variance is None)

    def linear_cumulants(self, level: int, node_ids: np.ndarray, coef: np.ndarray):
        """κ₂, P, Q of Σ coef·(released count) over the distinct ``node_ids``."""
        from dpsql.accuracy.laplace_sum import LaplaceTree
        ids = self._ids(level, node_ids)
        order = np.argsort(ids, kind="stable")
        if self._laplace is None:
            a = self._arrays()
            parents = [np.arange(self.sizes[i]) // self.fanouts[i - 1]
                       for i in range(1, self.depth + 1)]
            own = [math.inf if self.root_variance is None else self.root_variance]
            self._laplace = LaplaceTree(parents, a["V"], a["S"], own + list(self.variances),
                                        [True] * (self.depth + 1))
        return self._laplace.cumulants(level, ids[order],
                                       np.asarray(coef, dtype=np.float64)[order])

    # -- ranges: O(h) each, vectorised ----------------------------------------------------
    def _prefix_terms(self, p: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray],
                                                      list[np.ndarray]]:
        """Per parent level i (0..h−1): A_a(p) (V-mass of a's children before p),
        B_a(p) (V of children wholly before p), and g at the child level (A/S of the
        partial child, 0 if p falls on a child boundary)."""
        a = self._arrays()
        V, S, cum = a["V"], a["S"], a["cum"]
        h, K = self.depth, self.bins
        A_l: list[np.ndarray] = [np.empty(0)] * h
        B_l: list[np.ndarray] = [np.empty(0)] * h
        g_child: list[np.ndarray] = [np.empty(0)] * h
        g = np.zeros(p.shape)                      # g at level h: leaves never straddle p
        inside = (p > 0) & (p < K)
        for i in range(h - 1, -1, -1):
            Lc, n = self.spans[i + 1], self.fanouts[i]
            jp = np.minimum(p // Lc, self.sizes[i + 1] - 1)
            first = (p // self.spans[i]) * n
            first = np.minimum(first, self.sizes[i + 1] - 1)
            strict_c = inside & (p % Lc != 0)
            B = np.where(inside, cum[i + 1][jp] - cum[i + 1][first], 0.0)
            partial = np.where(strict_c, V[i + 1][jp] * g, 0.0)
            A = B + partial
            A_l[i], B_l[i], g_child[i] = A, B, np.where(strict_c, g, 0.0)
            ai = np.minimum(p // self.spans[i], self.sizes[i] - 1)
            g = np.where(inside & (p % self.spans[i] != 0), A / S[i][ai], 0.0)
        return A_l, B_l, g_child

    def _root_share(self, p: np.ndarray, A0: np.ndarray) -> np.ndarray:
        S0 = self._arrays()["S"][0][0]
        return np.where(p >= self.bins, 1.0, np.where(p <= 0, 0.0, A0 / S0))

    def prefix_variance(self, p: np.ndarray) -> np.ndarray:
        """Exact variance of the released count of leaf bins [0, p), per p (vectorised)."""
        p = self._bounds(p)
        a = self._arrays()
        V, S = a["V"], a["S"]
        A_l, B_l, g_c = self._prefix_terms(p)
        var = np.zeros(p.shape)
        for i in range(self.depth):
            ai = np.minimum(p // self.spans[i], self.sizes[i] - 1)
            jp = np.minimum(p // self.spans[i + 1], self.sizes[i + 1] - 1)
            strict = (p > 0) & (p < self.bins) & (p % self.spans[i] != 0)
            term = B_l[i] + V[i + 1][jp] * g_c[i] ** 2 - A_l[i] ** 2 / S[i][ai]
            var += np.where(strict, term, 0.0)
        root = self._root_share(p, A_l[0])
        return np.maximum(var + a["post"][0][0] * root * root, 0.0)

    def range_variance(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Exact variance of the released count of leaf bins [lo, hi), per pair."""
        lo, hi = self._bounds(lo), self._bounds(hi)
        lo, hi = np.broadcast_arrays(lo, hi)
        if np.any(lo > hi):
            raise InvalidPrivacyParameterError("range_variance needs lo <= hi for every range")
        a = self._arrays()
        V, S = a["V"], a["S"]
        K = self.bins
        Al, Bl, gl = self._prefix_terms(lo)
        Ah, Bh, gh = self._prefix_terms(hi)
        var_l = np.zeros(lo.shape)
        var_h = np.zeros(lo.shape)
        cov = np.zeros(lo.shape)
        for i in range(self.depth):
            L, Lc = self.spans[i], self.spans[i + 1]
            al = np.minimum(lo // L, self.sizes[i] - 1)
            ah = np.minimum(hi // L, self.sizes[i] - 1)
            jl = np.minimum(lo // Lc, self.sizes[i + 1] - 1)
            jh = np.minimum(hi // Lc, self.sizes[i + 1] - 1)
            sl = (lo > 0) & (lo < K) & (lo % L != 0)
            sh = (hi > 0) & (hi < K) & (hi % L != 0)
            var_l += np.where(sl, Bl[i] + V[i + 1][jl] * gl[i] ** 2 - Al[i] ** 2 / S[i][al], 0.0)
            var_h += np.where(sh, Bh[i] + V[i + 1][jh] * gh[i] ** 2 - Ah[i] ** 2 / S[i][ah], 0.0)
            both = sl & sh & (al == ah)
            strict_hc = (hi < K) & (hi % Lc != 0)
            f_hi = np.where((jl == jh) & strict_hc, gh[i], 1.0)
            cross = Bl[i] + V[i + 1][jl] * gl[i] * f_hi - Al[i] * Ah[i] / S[i][al]
            cov += np.where(both, cross, 0.0)
        pr = a["post"][0][0]
        rl, rh = self._root_share(lo, Al[0]), self._root_share(hi, Ah[0])
        var_l += pr * rl * rl
        var_h += pr * rh * rh
        cov += pr * rl * rh
        out = var_l + var_h - 2.0 * cov
        return np.where(lo == hi, 0.0, np.maximum(out, 0.0))

    def _bounds(self, x: np.ndarray) -> np.ndarray:
        arr = np.asarray(x)
        if arr.dtype.kind not in "iu":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
                raise InvalidPrivacyParameterError("range bounds must be integers (bin indices)")
        arr = arr.astype(np.int64)
        if np.any(arr < 0) or np.any(arr > self.bins):
            raise InvalidPrivacyParameterError(
                f"range bounds must lie in [0, {self.bins}] (bin indices)")
        return arr

    def level_summary(self) -> list[dict[str, Any]]:
        post = self._arrays()["post"]
        z = NormalDist().inv_cdf(0.975)
        out = []
        for k in range(1, self.depth + 1):
            sd = math.sqrt(float(post[k][0]))
            out.append({"level": k, "stderr": sd, "bound95": z * sd,
                        "fanout": self.fanouts[k - 1], "bin_span": self.spans[k],
                        "raw_stderr": math.sqrt(self.variances[k - 1])})
        return out
