"""Error model of a real-valued view after reconciliation (kind ``"reconciled"``).

:mod:`dpsql.release.reconcile` makes the views of a release agree on the marginals they
share. A real-valued view (Gaussian/Laplace tree, Cascade, b-ary tree) is updated by
Gaussian conditioning on its deepest shared level D (D = 0: the total): with x̂ its
released estimate (error e, covariance Σ), H the aggregation of its nodes to level D and
c the agreed level-D values,

    x̂' = x̂ + K (c − H x̂),        K = Σ Hᵀ (H Σ Hᵀ)⁻¹.

**Derivation of the new covariance.** The agreed values are c = x_D + e_c, where e_c is a
linear combination of this view's level-≤D errors (``H e``, the upper levels being sums
of level D) and of the other views' errors, which are independent of this view's. So
Cov(e, e_c) = Σ Hᵀ Aᵀ for some A, and the new error is
e' = (I − K H) e + K e_c. Since (I − K H) Σ Hᵀ = Σ Hᵀ − Σ Hᵀ = 0, the cross terms vanish:

    Cov(e') = Σ − Σ Hᵀ (H Σ Hᵀ)⁻¹ H Σ  +  K C Kᵀ,        C = Cov(e_c),

the conditional covariance given the true level-D counts, plus the agreed values'
uncertainty carried down by the gains K. For a weighted node set with coefficients f,
Var(fᵀ e') = Var(fᵀ e | x_D) + bᵀ C b with b = Kᵀ f.

* **Tree counts** (least squares on a tree, :mod:`dpsql.accuracy.tree_counts`): the
  posterior is Markov on the tree, so given level D the subtrees below its nodes are
  independent, each with the base model's own upward variances z, sums Z and gains
  g = z/Z (the smoother's regression slope of a child on its parent). Var(fᵀe | x_D) is
  the base model's carry-up stopped at level D (no root term), and b is the coefficient
  it carries up to each level-D node (the product of gains). A set above D is a sum of
  level-D nodes: conditional variance 0 and b = f spread over its level-D descendants.
* **Range views** (Cascade, b-ary tree) share only the total (D = 0, H = 1ᵀ):
  Var(fᵀe') = Var(fᵀe) − Cov(fᵀe, T)²·(V_T − C)/V_T², with
  Cov(S, T) = (V_T + Var(S) − Var(Sᶜ))/2 for the complement Sᶜ at the same level and,
  for a bin range, Cov([lo, hi), T) = (V[0, hi) + V[lo, K) − V[0, lo) − V[hi, K))/2.

**C, the agreed marginal's covariance**, follows the combination of
:mod:`dpsql.release.reconcile` down its chain of agreed marginals (the total, then each
finer one given its agreed parents). At the total, C is the precision-combined variance
w₀ = 1/Σ 1/vᵥ (the views are independent). At a finer marginal each view v first moves to
its agreed parents: y'ᵥ = yᵥ + Gᵥ(P − yᵥ,parent) with Gᵥ its own gain from the parent level,
so y'ᵥ − x = εᵥ + Gᵥ e_P, where εᵥ is v's innovation below its parent level: uncorrelated
with every level-≤parent error (the same argument as above), hence with e_P and with
the other views. The node values are r̂ = Σᵥ λᵥ y'ᵥ (λ ∝ 1/Var εᵥ, summing to 1) and
r = r̂ + g(P − Σ_sib r̂) with g = w/Σ_sib w. For coefficients b on a sibling group,
with β = Σ gᵢbᵢ and dᵢ = bᵢ − β,

    bᵀe_r = Σᵥ Σᵢ dᵢλᵥᵢ εᵥᵢ + (Σᵢ dᵢ κᵢ + β) e_P,        κᵢ = Σᵥ λᵥᵢ Gᵥᵢ,

so bᵀCb = Σᵥ Var(Σᵢ dᵢλᵥᵢ εᵥᵢ) plus the parent marginal's form for the carried
coefficient, recursively up to w₀. Var(Σ cᵢ εᵥᵢ) is view v's own carry-up from the
marginal's level to the parent's, with its upward variances z, sums Z = Σ_children z and
gains g: V += Σ A²z − (Σ A z)²/Z per group, A ← Σ g A. For a least-squares tree these are
its exact arrays, so C is exact when every view of the chain is real-valued. For InfTDA
they are the linear support model (z = σ²_{l−1} on released nodes, g = 1/A), and a node
a view did not release counts as independent noise of variance σ²_{l−1}: approximate,
as is the rounding of integer marginals below the total. A rounded total adds 1/12 to w₀
(the rounding error is close to uniform on ±0.5 and independent of the estimate once its
standard deviation is ≥ 1, Sheppard's correction), and an InfTDA root is plain discrete
Gaussian noise, so ``exact`` (stored) is True when the chain is the total alone or holds
no InfTDA view, and False otherwise: the variances are then a calibrated approximation
(``benchmarks/reconcile.py`` measures it), not an upper bound.

**Calibrating an approximate chain.** Where the chain holds an InfTDA view, the linear
support model misses InfTDA's structured bias and its variance effects, and those reach
the agreed values (measured on the trips data: the Gaussian tree's reconciled cities had
a mean squared error 1.2× the model's, 95 % intervals covered 0.916). The release's
calibration bootstrap (:mod:`dpsql.release.bootstrap`) re-runs the whole pipeline and
measures the agreed values' mean squared error at level D; ``scale`` (stored) is the
ratio of what it finds beyond the total's share to the model's part below the total,
over the level-D nodes, and multiplies that part of bᵀCb in every variance. The
total's own variance w₀ (an InfTDA root is plain discrete Gaussian noise) and the
conditional part below D (the view's own noise) stay exact.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.errors import InvalidPrivacyParameterError

__all__ = ["Chain", "ReconciledErrorModel", "gains"]


def gains(w: np.ndarray, parent: np.ndarray, n_parent: int) -> tuple[np.ndarray, np.ndarray]:
    """(g, W): each node's share g = w/W of its group's correction towards the agreed
    parent (1/siblings when the group's variances are all 0) and W = Σ_group w."""
    W = np.bincount(parent, weights=w, minlength=n_parent)
    cnt = np.bincount(parent, minlength=n_parent).astype(np.float64)
    Wp = W[parent]
    g = np.where(Wp > 0, w / np.where(Wp > 0, Wp, 1.0), 1.0 / np.maximum(cnt[parent], 1.0))
    return g, W


def _agg(parent: np.ndarray, n_up: int, X: np.ndarray) -> np.ndarray:
    """Row-wise sums of X (m × n) by ``parent`` (n) into m × n_up. Always float64:
    numpy's bincount of an empty input returns int64 zeros even with weights (a level
    with no released node, e.g. a one-row source), which a float division cannot write
    into."""
    m = X.shape[0]
    idx = (np.arange(m, dtype=np.int64)[:, None] * n_up + parent[None, :]).ravel()
    out = np.bincount(idx, weights=X.ravel(), minlength=m * n_up)
    return out.astype(np.float64, copy=False).reshape(m, n_up)


def _sole_parents(step: dict[str, Any]) -> np.ndarray:
    """Which parents of a chain step have their only released child marked ``sole`` (an
    InfTDA node with a variance of its own given its parent: release/reconcile.py, step
    2); none in chains written before."""
    out = np.zeros(int(step["n_up"]), bool)
    if "sole" in step:
        out[np.asarray(step["parent"], np.int64)[np.asarray(step["sole"], bool)]] = True
    return out


class Chain:
    """A chain of agreed marginals (the JSON of :mod:`dpsql.release.reconcile`) as numpy
    arrays, evaluated for many coefficient vectors at once."""

    def __init__(self, chain: Sequence[dict[str, Any]]) -> None:
        f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        i = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
        self.w0 = float(chain[0].get("var", chain[0]["w"][0]))
        self.size = len(chain[-1]["w"])
        self.steps = []
        for s in range(1, len(chain)):
            st = chain[s]
            parent = i(st["parent"])
            n_par = len(chain[s - 1]["w"])
            g, _ = gains(f(st["w"]), parent, n_par)
            members = []
            for m in st["members"]:
                node = i(m["node"])
                levels = [(f(x["z"]), f(x["g"]), i(x["parent"]), int(x["n_up"]),
                           _sole_parents(x)) for x in m["steps"]]
                members.append((f(m["lam"]), node, float(m["miss"]), int(m["size"]), levels))
            self.steps.append((parent, n_par, g, f(st["kappa"]), members))

    def variance(self, B: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """bᵀ C b for each row b of ``B`` (coefficients on the last marginal's nodes),
        the part below the total multiplied by ``scale`` (the total's own, w₀, is exact)."""
        bb = np.atleast_2d(np.asarray(B, dtype=np.float64))
        total = np.zeros(bb.shape[0])
        for parent, n_par, g, kappa, members in reversed(self.steps):
            beta = _agg(parent, n_par, bb * g)
            d = bb - beta[:, parent]
            for lam, node, miss, size, levels in members:
                c = d * lam
                here = node >= 0
                total += (c[:, ~here] ** 2).sum(axis=1) * miss
                if levels:
                    A = np.zeros((bb.shape[0], size))
                    A[:, node[here]] = c[:, here]
                    for z, gl, par, n_up, sole in levels:
                        Z = np.bincount(par, weights=z, minlength=n_up)
                        az = _agg(par, n_up, A * z)
                        corr = np.divide(az * az, Z, out=np.zeros_like(az),
                                         where=(Z > 0) & ~sole)
                        total += (A * A * z).sum(axis=1) - corr.sum(axis=1)
                        A = _agg(par, n_up, A * gl)
            bb = _agg(parent, n_par, d * kappa) + beta
        return np.maximum(scale * total + bb[:, 0] ** 2 * self.w0, 0.0)

    def posterior(self, scale: float = 1.0, batch: int = 256) -> np.ndarray:
        """Variance of each node of the last marginal (the diagonal of C)."""
        out = np.empty(self.size)
        for start in range(0, self.size, batch):
            stop = min(start + batch, self.size)
            B = np.zeros((stop - start, self.size))
            B[np.arange(stop - start), np.arange(start, stop)] = 1.0
            out[start:stop] = self.variance(B, scale)
        return out


@register
class ReconciledErrorModel(ErrorModel):
    """A real-valued view's error model after it was conditioned on the agreed values of
    its level ``level`` (module docstring: the derivation).

    >>> from dpsql.accuracy.tree_counts import TreeCountsErrorModel
    >>> base = TreeCountsErrorModel([1, 2], [1.0, 1.0], fanouts=[[[2, 1]]])
    >>> m = ReconciledErrorModel(base.to_params(), 0, [{"w": [0.0]}], [0], exact=True)
    >>> round(m.sum_variance(0, np.array([0])).value, 4), round(m.sum_variance(1, np.array([0])).value, 4)
    (0.0, 0.5)
    """

    kind = "reconciled"

    def __init__(self, base: dict[str, Any], level: int, chain: Sequence[dict[str, Any]],
                 node: Sequence[int], exact: bool = False,
                 spans: Sequence[int] | None = None, scale: float = 1.0) -> None:
        from dpsql.accuracy import load
        self._base_params = dict(base)
        self.base = load(self._base_params)
        self.level = int(level)
        self._chain = [dict(c) for c in chain]
        self._prepared = Chain(self._chain)
        self._cdiag: tuple[np.ndarray, np.ndarray] | None = None
        self._node_cache: dict[int, np.ndarray] = {}
        self._node = np.asarray(node, dtype=np.int64)
        self._exact = bool(exact)
        self.scale = float(scale)
        if not np.isfinite(self.scale) or self.scale <= 0:
            raise InvalidPrivacyParameterError(
                f"reconciled error model: scale must be positive, got {scale!r}")
        self._spans = None if spans is None else [int(s) for s in spans]
        if not 0 <= self.level <= self.base.depth or not self._chain:
            raise InvalidPrivacyParameterError(
                f"reconciled error model: level {level} outside 0..{self.base.depth}")
        self._tree = self.base.kind == "tree_counts"
        if not self._tree and self.level != 0:
            raise InvalidPrivacyParameterError(
                f"reconciled error model: a {self.base.kind} view can only share its total")
        if self._tree:
            self._shape = self.base.shape()
        else:
            self._vt = self.base.sum_variance(0, np.zeros(1, np.int64)).value

    # ---------------------------------------------------------------- contract
    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "base": self._base_params, "level": self.level,
                "chain": self._chain, "node": self._node.tolist(), "exact": self._exact,
                "spans": self._spans, "scale": self.scale}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "ReconciledErrorModel":
        try:
            return cls(params["base"], params["level"], params["chain"], params["node"],
                       params.get("exact", False), params.get("spans"),
                       params.get("scale", 1.0))
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidPrivacyParameterError(
                f"malformed reconciled error-model parameters: {err}") from err

    @property
    def depth(self) -> int:
        return self.base.depth

    @property
    def exact_chain(self) -> bool:
        """Whether the agreed part is exact (no InfTDA view in the chain)."""
        return self._exact

    @property
    def chain(self) -> list[dict[str, Any]]:
        return self._chain

    def _agreed(self, b_level: np.ndarray) -> float:
        """bᵀ C b for coefficients on this view's level-D nodes (its part below the
        total times ``scale``)."""
        bb = np.bincount(self._node, weights=b_level, minlength=self._prepared.size)
        return float(self._prepared.variance(bb, self.scale)[0])

    def agreed_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """(the total's share, the unscaled part below it) of bᵀCb for each level-D node
        alone: what the calibration bootstrap compares its measurement with."""
        if self._cdiag is None:
            self._cdiag = (self._prepared.posterior(0.0), self._prepared.posterior(1.0))
        root, whole = self._cdiag
        return root[self._node], (whole - root)[self._node]

    def with_scale(self, scale: float) -> "ReconciledErrorModel":
        """This model with the part of bᵀCb below the total multiplied by ``scale``."""
        return ReconciledErrorModel(self._base_params, self.level, self._chain, self._node,
                                    self._exact, self._spans, scale)

    # ------------------------------------------------------------- tree counts
    def _carry(self, k: int, ids: np.ndarray, coef: np.ndarray) -> tuple[float, np.ndarray]:
        """Conditional variance given level D, and the coefficients b carried up to it."""
        s, D = self._shape, self.level
        size_d = len(s.P[D])
        A = coef.astype(np.float64)
        if k < D:  # a sum of level-D nodes: spread f over the descendants
            dense = np.zeros(len(s.P[k]))
            np.add.at(dense, ids, A)
            anc = np.arange(size_d, dtype=np.int64)
            for lvl in range(D, k, -1):
                anc = s.parents[lvl - 1][anc]
            return 0.0, dense[anc]
        V = 0.0
        for lvl in range(k, D, -1):
            p = s.parents[lvl - 1][ids]
            starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
            zz = s.z[lvl][ids]
            Zp = s.Z[lvl - 1][p[starts]]
            az = np.add.reduceat(A * zz, starts)
            corr = np.divide(az * az, Zp, out=np.zeros_like(az), where=Zp > 0)
            V += float(np.sum(A * A * zz) - corr.sum())
            A = np.add.reduceat(A * s.g[lvl][ids], starts)
            ids = p[starts]
        b = np.zeros(size_d)
        b[ids] = A
        return max(V, 0.0), b

    # ----------------------------------------------------------------- ranges
    def cov_with_total(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Range views: Cov(released [lo, hi), released total) under the base model."""
        K = self._spans_bins()
        zero, top = np.zeros_like(lo), np.full_like(hi, K)
        rv = self._rv
        return (rv(zero, hi) + rv(lo, top) - rv(zero, lo) - rv(hi, top)) / 2.0

    def _rv(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        out = np.zeros(lo.shape, dtype=np.float64)
        ok = hi > lo
        if ok.any():
            out[ok] = self.base.range_variance(lo[ok], hi[ok])
        return out

    def _spans_bins(self) -> int:
        return int(getattr(self.base, "bins"))

    def _shrink(self) -> float:
        """(V_T − C)/V_T²: how much of Cov(S, T)² the conditioning removes."""
        if self._vt <= 0:
            return 0.0
        c = self._prepared.w0
        return (self._vt - c) / (self._vt * self._vt)

    # ---------------------------------------------------------------- answers
    @property
    def weighs_repeats(self) -> bool:  # type: ignore[override]
        """A tree's variances weigh a repeated id (its coefficient); a range view's take
        the ids as a set."""
        return self._tree

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance:
        k = int(level)
        if isinstance(level, bool) or not 0 <= k <= self.depth:
            raise InvalidPrivacyParameterError(f"level must be in 0..{self.depth}, got {level!r}")
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        uniq, coef = np.unique(ids, return_counts=True)
        if uniq.size == 0:
            return Variance(0.0, True)
        if self._tree:
            size = len(self._shape.P[k])
            if uniq[0] < 0 or uniq[-1] >= size:
                raise InvalidPrivacyParameterError(
                    f"node ids at level {k} must lie in [0, {size})")
            if uniq.size == 1:  # one node (a GROUP BY row): the level's cached variances
                if k not in self._node_cache:
                    self._node_cache[k] = self.node_variances(k)
                return Variance(float(coef[0]) ** 2 * float(self._node_cache[k][uniq[0]]),
                                self._exact)
            cond, b = self._carry(k, uniq, coef)
            return Variance(cond + self._agreed(b), self._exact)
        base = self.base.sum_variance(k, uniq)
        size = len(self._level_ranges(k)[0])
        rest = np.setdiff1d(np.arange(size, dtype=np.int64), uniq, assume_unique=True)
        v_rest = self.base.sum_variance(k, rest).value if rest.size else 0.0
        cov = (self._vt + base.value - v_rest) / 2.0
        return Variance(max(base.value - cov * cov * self._shrink(), 0.0),
                        self._exact and base.exact)

    def linear_variance(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                        ) -> Variance:
        """A tree: the variance of Σ coef·(released count) over the distinct ``node_ids``
        (the carry of :meth:`sum_variance` with real weights); a range view: the default
        polarisation."""
        if not self._tree:
            return super().linear_variance(level, node_ids, coef)
        got = self.linear_variances(level, node_ids, np.asarray(coef)[None, :])
        return Variance(float(got[0]), self._exact)

    def linear_variances(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                         ) -> np.ndarray:
        """:meth:`linear_variance` for each row of ``coef`` (m × n); the agreed part of
        every row in one evaluation of the chain."""
        c = np.asarray(coef, dtype=np.float64)
        if not self._tree:
            return super().linear_variances(level, node_ids, c)
        k = int(level)
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        size = len(self._shape.P[k])
        if ids.size and (ids.min() < 0 or ids.max() >= size):
            raise InvalidPrivacyParameterError(
                f"node ids at level {k} must lie in [0, {size})")
        uniq, inv = np.unique(ids, return_inverse=True)
        if uniq.size == 0:
            return np.zeros(c.shape[0])
        if inv.size == uniq.size:  # distinct ids: the columns in id order
            W = np.empty_like(c)
            W[:, inv] = c
        else:
            W = np.stack([np.bincount(inv, weights=row, minlength=uniq.size) for row in c])
        if k >= self.level:
            cond, b = self._carry_rows(k, uniq, W)
        else:
            parts = [self._carry(k, uniq, w) for w in W]
            cond = np.array([x[0] for x in parts])
            b = np.stack([x[1] for x in parts])
        bb = np.zeros((c.shape[0], self._prepared.size))
        np.add.at(bb.T, self._node, b.T)  # level-D nodes onto the chain's last marginal
        return cond + self._prepared.variance(bb, self.scale)

    def _carry_rows(self, k: int, ids: np.ndarray, A: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_carry` of every row of ``A`` (m × ids) at once, for k ≥ D."""
        s, D = self._shape, self.level
        V = np.zeros(A.shape[0])
        for lvl in range(k, D, -1):
            p = s.parents[lvl - 1][ids]
            starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
            zz = s.z[lvl][ids]
            Zp = s.Z[lvl - 1][p[starts]]
            az = np.add.reduceat(A * zz, starts, axis=1)
            corr = np.divide(az * az, Zp, out=np.zeros_like(az), where=Zp > 0)
            V += np.sum(A * A * zz, axis=1) - corr.sum(axis=1)
            A = np.add.reduceat(A * s.g[lvl][ids], starts, axis=1)
            ids = p[starts]
        b = np.zeros((A.shape[0], len(s.P[D])))
        b[:, ids] = A
        return np.maximum(V, 0.0), b

    def laplace_cumulants(self, level: int, node_ids: np.ndarray) -> Any:
        """A Laplace-family base (btree, laplace_tree): the reconciled variance with the
        base's shape (its fourth-cumulant sums scaled by (κ₂'/κ₂)², so the same effective
        number of Laplace terms, :mod:`dpsql.accuracy.laplace_sum`); None otherwise.
        An approximation on the wide side: conditioning on the total mixes in a near-normal
        share of the many-term total, which thins the tails."""
        cum = self.base.laplace_cumulants(level, node_ids)
        if cum is None or cum.k2 <= 0:
            return cum
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        if ids.size == 1 and not self._tree:  # a GROUP BY row: the level's cached variances
            k = int(level)
            if k not in self._node_cache:
                self._node_cache[k] = self.node_variances(k)
            v = float(self._node_cache[k][ids[0]])
        else:
            v = self.sum_variance(level, ids).value
        r = v / cum.k2
        return cum._replace(k2=v, p=cum.p * r * r, q=cum.q * r * r, lattice=False)

    def linear_cumulants(self, level: int, node_ids: np.ndarray, coef: np.ndarray) -> Any:
        """:meth:`laplace_cumulants` for Σ coef·(released count) over distinct ids: the
        base's weighted cumulants at the reconciled variance (the same shape, the same
        approximation on the wide side); None for a base without them."""
        cum = self.base.linear_cumulants(level, node_ids, coef)
        if cum is None or cum.k2 <= 0:
            return cum
        v = self.linear_variance(level, node_ids, coef).value
        r = v / cum.k2
        return cum._replace(k2=v, p=cum.p * r * r, q=cum.q * r * r, lattice=False)

    def range_variance(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
        base = self.base.range_variance(lo, hi)
        if base is None or self._tree:
            return None
        lo_a, hi_a = np.broadcast_arrays(np.asarray(lo, dtype=np.int64),
                                         np.asarray(hi, dtype=np.int64))
        cov = self.cov_with_total(lo_a.ravel(), hi_a.ravel()).reshape(lo_a.shape)
        return np.maximum(np.asarray(base) - cov * cov * self._shrink(), 0.0)

    def _level_ranges(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        K = self._spans_bins()
        span = int(self._spans[k]) if self._spans else 1
        n = -(-K // span)
        lo = np.arange(n, dtype=np.int64) * span
        return lo, np.minimum(lo + span, K)

    def node_variances(self, level: int) -> np.ndarray:
        """The variance of every node of ``level`` (the dp_var column), vectorised."""
        k = int(level)
        if not self._tree:
            lo, hi = self._level_ranges(k)
            cov = self.cov_with_total(lo, hi)
            return np.maximum(self._rv(lo, hi) - cov * cov * self._shrink(), 0.0)
        s, D = self._shape, self.level
        if k < D:
            out = np.empty(len(s.P[k]))
            for i in range(out.size):
                _, b = self._carry(k, np.array([i]), np.ones(1))
                out[i] = self._agreed(b)
            return out
        root, below = self.agreed_parts()
        cdiag = root + self.scale * below
        P = np.zeros(len(s.P[D]))
        G = np.ones(len(s.P[D]))
        anc = np.arange(len(s.P[D]), dtype=np.int64)
        for lvl in range(D + 1, k + 1):
            p = s.parents[lvl - 1]
            Zp = s.Z[lvl - 1][p]
            P = np.where(Zp > 0, s.z[lvl] - s.g[lvl] ** 2 * (Zp - P[p]), 0.0)
            G = G[p] * s.g[lvl]
            anc = anc[p]
        return np.maximum(P, 0.0) + G * G * cdiag[anc]

    def level_summary(self) -> list[dict[str, Any]]:
        out = []
        for row in self.base.level_summary():
            k = int(row["level"])
            v = self.node_variances(k)
            worst, best = float(np.sqrt(v.max())), float(np.sqrt(v.min()))
            out.append({**row, "stderr": worst, "bound95": 1.959963984540054 * worst,
                        "stderr_min": best, "exact": self._exact, "reconciled": True})
        return out
