"""Error model of the per-node Laplace / Gaussian tree baselines (kind ``"tree_counts"``).

The baselines (:mod:`dpsql.mechanisms.tree_counts`, ``reference/counting_on_trees.md``
§2.2 B1/B2) add independent noise of variance σ²_k to every node of level k and then take
the BLUE under the constraints parent = Σ children (:mod:`dpsql.mechanisms.least_squares`).
The error of a released count is therefore a fixed linear function of the noise, and its
variance depends only on public quantities: the per-level noise variances σ²_k and the
shape of the tree.

Parameters stored (``to_params``):

* ``level_sizes``: nodes per level 0..d;
* ``noise_variances``: σ²_k per level (the *exact* variance of the sampled noise — for the
  discrete samplers this is computed from the pmf, not the nominal scale); 0 at a public
  root (substitution), and 0 wherever a huge budget makes the discrete noise's variance
  underflow (the noise is then zero with probability 1 − 10⁻³⁰⁰ or so);
* ``fanouts``: the tree shape, as run-length-encoded child counts of each level 0..d−1
  (``[[fanout, run], ...]``; one pair for a regular level). The exact posterior variance of
  a node depends on the shape, which is public; run-length encoding keeps regular trees
  tiny. ``fanouts`` may be ``None``: the model then answers with the upper bound below.

Exact variances. Write ``z_v`` for the variance of the BLUE of node v from the measurements
inside its own subtree (bottom-up: ``1/z_v = 1/σ²_v + 1/Z_v``, ``Z_v = Σ_children z_c``;
a childless node is a leaf wherever it sits, as in the least-squares module), and ``P_v``
for its posterior variance (top-down RTS smoother: ``P_c = z_c − g_c²(Z_v − P_v)``,
``g_c = z_c/Z_v``). For a weighted sum Σ f_a x̂_a over nodes of one level, carry up the
tree the coefficient ``A_v`` of the parent's value and the conditional variance ``V_v``:
``A_v = Σ_c g_c A_c`` and ``V_v = Σ_c V_c + Σ_c A_c² z_c − (Σ_c A_c z_c)²/Z_v`` (the
children's innovations have covariance diag(z) − z zᵀ/Z given the parent). At the root
the variance is ``V_root + A_root² P_root``. This touches only the ancestors of the set:
O(|S|·d) per call, exact (``Variance.exact = True``).

Upper bound without the shape. BLUE has the least variance among linear unbiased
estimators (Gauss–Markov), and Σ_a f_a y_a (the raw measurements) is one of them, so
``Σ_a f_a² σ²_k`` never underestimates; it is returned with ``exact=False``.

Bounds (``sum_bound``) use the normal approximation of the variance, as the base contract
states. For Gaussian noise the BLUE error is exactly (discrete-)Gaussian; for Laplace noise
it is a sum of Laplace variables: ``dp_ci_low/high`` then come from
:meth:`TreeCountsErrorModel.laplace_cumulants` and
:func:`dpsql.accuracy.laplace_sum.half_width` (exact for one Laplace draw, the sum of
Laplaces with the same fourth cumulant otherwise), not from ±z·σ.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.errors import InvalidPrivacyParameterError

__all__ = ["TreeCountsErrorModel", "encode_fanouts", "decode_fanouts", "posterior_variances"]


def encode_fanouts(parents: Sequence[np.ndarray], level_sizes: Sequence[int]) -> list:
    """Run-length encoding of the child counts of each level 0..d−1.

    >>> encode_fanouts([np.array([0, 0, 0]), np.array([0, 0, 1, 2, 2])], [1, 3, 5])
    [[[3, 1]], [[2, 1], [1, 1], [2, 1]]]
    """
    out = []
    for k, p in enumerate(parents):
        f = np.bincount(np.asarray(p, dtype=np.int64), minlength=int(level_sizes[k]))
        if f.size == 0:
            out.append([])
            continue
        starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
        runs = np.diff(np.r_[starts, f.size])
        out.append([[int(v), int(r)] for v, r in zip(f[starts], runs)])
    return out


def decode_fanouts(encoded: Sequence[Sequence[Sequence[int]]],
                   level_sizes: Sequence[int]) -> list[np.ndarray]:
    """Inverse of :func:`encode_fanouts`: the parents arrays of levels 1..d."""
    parents = []
    for k, pairs in enumerate(encoded):
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        fan = np.repeat(arr[:, 0], arr[:, 1])
        if fan.size != int(level_sizes[k]) or np.any(fan < 0) \
                or int(fan.sum()) != int(level_sizes[k + 1]):
            raise InvalidPrivacyParameterError(
                f"fanouts of level {k} do not match level sizes {list(level_sizes)}")
        parents.append(np.repeat(np.arange(fan.size, dtype=np.int64), fan))
    return parents


class _Shape:
    """Upward variances z, children sums Z, gains g and posterior variances P."""

    def __init__(self, parents: list[np.ndarray], sizes: list[int],
                 noise_variances: Sequence[float]) -> None:
        d = len(parents)
        self.parents = parents
        z: list[np.ndarray] = [np.empty(0)] * (d + 1)
        Z: list[np.ndarray] = [np.empty(0)] * (d + 1)
        z[d] = np.full(sizes[d], float(noise_variances[d]))
        Z[d] = np.full(sizes[d], np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(d - 1, -1, -1):
                cnt = np.bincount(parents[k], minlength=sizes[k])
                zs = np.bincount(parents[k], weights=z[k + 1], minlength=sizes[k])
                Z[k] = np.where(cnt == 0, np.inf, zs)        # childless: a leaf
                v = float(noise_variances[k])
                if v == 0.0:
                    z[k] = np.zeros(sizes[k])
                else:
                    z[k] = np.where(np.isinf(Z[k]), v,
                                    np.where(Z[k] == 0.0, 0.0, v * Z[k] / (v + Z[k])))
            g: list[np.ndarray] = [np.ones(1)] + [np.empty(0)] * d
            P: list[np.ndarray] = [z[0].copy()] + [np.empty(0)] * d
            for k in range(1, d + 1):
                Zp = Z[k - 1][parents[k - 1]]
                g[k] = np.where(Zp > 0.0, z[k] / Zp, 0.0)
                P[k] = np.where(Zp > 0.0, z[k] - g[k] * g[k] * (Zp - P[k - 1][parents[k - 1]]),
                                0.0)
        self.z, self.Z, self.g, self.P = z, Z, g, P

    def sum_variance(self, level: int, ids: np.ndarray, coef: np.ndarray) -> float:
        return float(self.sum_variances(level, ids, np.asarray(coef)[None, :])[0])

    def sum_variances(self, level: int, ids: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """The variance of Σ coef[r]·(count of ids) for each row r of ``coef`` (m × n),
        over the sorted distinct ``ids``: the carry-up of every row at once."""
        A = np.asarray(coef, dtype=np.float64)
        V = np.zeros_like(A)
        if not ids.size:
            return np.zeros(A.shape[0])
        for k in range(level, 0, -1):
            p = self.parents[k - 1][ids]
            starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
            zz = self.z[k][ids]
            Zp = self.Z[k - 1][p[starts]]
            a_g = np.add.reduceat(A * self.g[k][ids], starts, axis=1)
            az = np.add.reduceat(A * zz, starts, axis=1)
            corr = np.divide(az * az, Zp, out=np.zeros_like(az), where=Zp > 0)
            V = np.add.reduceat(V + A * A * zz, starts, axis=1) - corr
            ids, A = p[starts], a_g
        return V[:, 0] + A[:, 0] * A[:, 0] * self.P[0][0]

    def prefix_variances(self, level: int, ids: np.ndarray, p: float) -> np.ndarray:
        """Var(D_j) for j = 1..n−1 of D_j = (1 − p)·Σ ids[:j] − p·Σ ids[j:] over the sorted
        distinct ``ids`` (a quantile interval's comparisons, :mod:`dpsql.quantile_ci`),
        all j in O(n·depth), where :meth:`sum_variances` of the same rows costs O(n²·depth).

        At every level D_j's coefficients are (1 − p)·a below one node, that node's own
        f_j, and −p·a above it, a being the carry-up of all ones (the same for every j).
        A parent's term Σ A²z − (Σ A z)²/Z is then (1 − p)² or p² times its term with
        A = a for a parent wholly below or above that node (cumulated over the parents),
        and a few cumulative sums over the children for the node's own parent, which is
        the node carried up, with f = (1 − p)·Σ_below a·g + f·g − p·Σ_above a·g."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size < 2:
            return np.zeros(0)
        q = 1.0 - p
        s = np.arange(1, ids.size)          # each D_j's own node: the first above the edge
        f = np.full(s.size, -p)
        a = np.ones(ids.size)
        V = np.zeros(s.size)
        for k in range(level, 0, -1):
            par = self.parents[k - 1][ids]
            new = np.r_[True, par[1:] != par[:-1]]
            starts = np.flatnonzero(new)
            seg = np.cumsum(new) - 1
            ends = np.r_[starts[1:], ids.size]
            zz, gg = self.z[k][ids], self.g[k][ids]
            Zp = self.Z[k - 1][par[starts]]
            inv = np.divide(1.0, Zp, out=np.zeros_like(Zp), where=(Zp > 0) & np.isfinite(Zp))
            ct = np.r_[0.0, np.cumsum(a * a * zz)]
            cr = np.r_[0.0, np.cumsum(a * zz)]
            cg = np.r_[0.0, np.cumsum(a * gg)]
            F = (ct[ends] - ct[starts]) - (cr[ends] - cr[starts]) ** 2 * inv
            cF = np.r_[0.0, np.cumsum(F)]
            sg = seg[s]
            st, en = starts[sg], ends[sg]
            lin = q * (cr[s] - cr[st]) + f * zz[s] - p * (cr[en] - cr[s + 1])
            V += q * q * cF[sg] + p * p * (cF[-1] - cF[sg + 1]) + (
                q * q * (ct[s] - ct[st]) + f * f * zz[s] + p * p * (ct[en] - ct[s + 1])
                - lin * lin * inv[sg])
            f = q * (cg[s] - cg[st]) + f * gg[s] - p * (cg[en] - cg[s + 1])
            s = sg
            a = np.add.reduceat(a * gg, starts)
            ids = par[starts]
        return np.maximum(V + f * f * self.P[0][0], 0.0)


def posterior_variances(parents: Sequence[np.ndarray],
                        noise_variances: Sequence[float]) -> list[np.ndarray]:
    """Exact BLUE posterior variance of every node, from the shape and σ²_k alone.

    >>> [v.round(4).tolist() for v in posterior_variances([np.array([0, 0])], [1.0, 1.0])]
    [[0.6667], [0.6667, 0.6667]]
    """
    ps = [np.asarray(p, dtype=np.int64) for p in parents]
    sizes = [1] + [p.size for p in ps]
    return [p.copy() for p in _Shape(ps, sizes, noise_variances).P]


@register
class TreeCountsErrorModel(ErrorModel):
    """Variances of the least-squares Laplace / Gaussian tree baselines.

    >>> m = TreeCountsErrorModel([1, 2], [1.0, 1.0], fanouts=[[[2, 1]]])
    >>> v1, v2 = m.sum_variance(1, np.array([0])), m.sum_variance(1, np.array([0, 1]))
    >>> round(v1.value, 4), round(v2.value, 4), v2.exact
    (0.6667, 0.6667, True)
    """

    kind = "tree_counts"
    weighs_repeats = True

    def __init__(self, level_sizes: Sequence[int], noise_variances: Sequence[float],
                 fanouts: Sequence | None = None, noise: str = "") -> None:
        sizes = [int(s) for s in level_sizes]
        if len(sizes) < 2 or sizes[0] != 1 or any(s < 1 for s in sizes):
            raise InvalidPrivacyParameterError(
                f"level_sizes must start with the root (1) and list >= 1 node per level, "
                f"got {sizes}")
        var = [float(v) for v in noise_variances]
        if len(var) != len(sizes) or any(not (v >= 0.0) or math.isinf(v) for v in var):
            raise InvalidPrivacyParameterError(
                f"noise_variances must give one finite variance >= 0 per level "
                f"({len(sizes)}), got {var}")
        self._sizes = sizes
        self._var = var
        self._noise = str(noise)
        self._fanouts = None if fanouts is None else [
            [[int(a), int(b)] for a, b in lvl] for lvl in fanouts]
        self._shape: _Shape | None = None
        self._laplace = None
        if self._fanouts is not None:
            if len(self._fanouts) != len(sizes) - 1:
                raise InvalidPrivacyParameterError(
                    f"fanouts must describe levels 0..{len(sizes) - 2}, got "
                    f"{len(self._fanouts)} levels")
            self._parents = decode_fanouts(self._fanouts, sizes)

    @classmethod
    def from_parents(cls, parents: Sequence[np.ndarray], noise_variances: Sequence[float],
                     noise: str = "") -> "TreeCountsErrorModel":
        """The model of a tree given by its parents arrays (its shape is stored)."""
        sizes = [1] + [len(p) for p in parents]
        return cls(sizes, noise_variances, encode_fanouts(parents, sizes), noise)

    # ---------------------------------------------------------------- contract
    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "level_sizes": list(self._sizes),
                "noise_variances": list(self._var), "fanouts": self._fanouts,
                "noise": self._noise}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "TreeCountsErrorModel":
        try:
            return cls(params["level_sizes"], params["noise_variances"],
                       params.get("fanouts"), params.get("noise", ""))
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, InvalidPrivacyParameterError):
                raise
            raise InvalidPrivacyParameterError(
                f"malformed tree_counts error-model parameters: {err}") from err

    @property
    def depth(self) -> int:
        return len(self._sizes) - 1

    @property
    def noise_variances(self) -> list[float]:
        return list(self._var)

    def _get_shape(self) -> _Shape | None:
        if self._fanouts is None:
            return None
        if self._shape is None:
            self._shape = _Shape(self._parents, self._sizes, self._var)
        return self._shape

    def shape(self) -> _Shape:
        """The smoother's arrays by level: ``parents``, upward variances ``z``, children
        sums ``Z``, gains ``g = z/Z`` and posterior variances ``P`` (read-only use)."""
        shape = self._get_shape()
        if shape is None:
            raise InvalidPrivacyParameterError(
                "this tree_counts error model has no stored shape (fanouts)")
        return shape

    def posterior(self, level: int) -> np.ndarray | None:
        """Per-node posterior variances of ``level`` (None without the shape)."""
        shape = self._get_shape()
        return None if shape is None else shape.P[self._level(level)].copy()

    def _level(self, level: int) -> int:
        if isinstance(level, bool) or not 0 <= int(level) <= self.depth:
            raise InvalidPrivacyParameterError(
                f"level must be in 0..{self.depth}, got {level!r}")
        return int(level)

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance:
        k = self._level(level)
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self._sizes[k]):
            raise InvalidPrivacyParameterError(
                f"node ids at level {k} must lie in [0, {self._sizes[k]})")
        uniq, coef = np.unique(ids, return_counts=True)
        shape = self._get_shape()
        if uniq.size == 0:
            return Variance(0.0, True)
        if shape is None:
            return Variance(float((coef.astype(np.float64) ** 2).sum() * self._var[k]), False)
        if uniq.size == 1:
            return Variance(float(coef[0] ** 2 * shape.P[k][uniq[0]]), True)
        return Variance(max(shape.sum_variance(k, uniq, coef), 0.0), True)

    def linear_variance(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                        ) -> Variance:
        """The variance of Σ coef·(released count) over the distinct ``node_ids``: the
        smoother's carry-up with real weights (exact with the shape stored)."""
        k = self._level(level)
        uniq, inv = np.unique(self._check_ids(k, node_ids), return_inverse=True)
        w = np.bincount(inv, weights=np.asarray(coef, dtype=np.float64), minlength=uniq.size)
        shape = self._get_shape()
        if uniq.size == 0:
            return Variance(0.0, True)
        if shape is None:
            return Variance(float((w ** 2).sum() * self._var[k]), False)
        return Variance(max(shape.sum_variance(k, uniq, w), 0.0), True)

    def linear_variances(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                         ) -> np.ndarray:
        """:meth:`linear_variance` for each row of ``coef`` (m × n) at once."""
        k = self._level(level)
        ids = self._check_ids(k, node_ids)
        c = np.asarray(coef, dtype=np.float64)
        shape = self._get_shape()
        if shape is None or ids.size == 0:
            return super().linear_variances(level, ids, c)
        order = np.argsort(ids, kind="stable")
        if np.any(np.diff(ids[order]) == 0):
            return super().linear_variances(level, ids, c)
        return np.maximum(shape.sum_variances(k, ids[order], c[:, order]), 0.0)

    def prefix_linear_variances(self, level: int, node_ids: np.ndarray, p: float
                                ) -> np.ndarray | None:
        """The variances of a quantile interval's comparisons over the sorted distinct
        ``node_ids`` (:meth:`_Shape.prefix_variances`); None without the shape."""
        k = self._level(level)
        ids = self._check_ids(k, node_ids)
        shape = self._get_shape()
        if shape is None or ids.size < 2 or np.any(np.diff(ids) <= 0):
            return None
        return shape.prefix_variances(k, ids, float(p))

    def linear_cumulants(self, level: int, node_ids: np.ndarray, coef: np.ndarray):
        """κ₂, P, Q of Σ coef·(released count) over the distinct ``node_ids`` of a
        Laplace tree with its shape stored; None otherwise."""
        if self.laplace_cumulants(level, np.zeros(0, dtype=np.int64)) is None:
            return None  # Gaussian noise or no shape (and the Laplace tree is built)
        k = self._level(level)
        uniq, inv = np.unique(self._check_ids(k, node_ids), return_inverse=True)
        w = np.bincount(inv, weights=np.asarray(coef, dtype=np.float64), minlength=uniq.size)
        return self._laplace.cumulants(k, uniq, w)

    def _check_ids(self, k: int, node_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self._sizes[k]):
            raise InvalidPrivacyParameterError(
                f"node ids at level {k} must lie in [0, {self._sizes[k]})")
        return ids

    def laplace_cumulants(self, level: int, node_ids: np.ndarray):
        """κ₂, P, Q (:class:`dpsql.accuracy.laplace_sum.Cumulants`) of the released sum over
        ``node_ids`` (a repeated id counts as often) of a Laplace tree with its shape
        stored; None for Gaussian noise or without the shape."""
        if self._noise not in ("laplace", "discrete_laplace"):
            return None
        shape = self._get_shape()
        if shape is None:
            return None
        k = self._level(level)
        ids = np.asarray(node_ids, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self._sizes[k]):
            raise InvalidPrivacyParameterError(
                f"node ids at level {k} must lie in [0, {self._sizes[k]})")
        if self._laplace is None:
            from dpsql.accuracy.laplace_sum import LaplaceTree
            disc = self._noise == "discrete_laplace"
            self._laplace = LaplaceTree(shape.parents, shape.z, shape.Z, self._var,
                                        [disc] * len(self._var))
        uniq, coef = np.unique(ids, return_counts=True)
        return self._laplace.cumulants(k, uniq, coef)

    def level_summary(self) -> list[dict[str, Any]]:
        """Per level: the worst node's posterior standard error (``stderr``), its 95 %
        normal bound, the best node's, and the raw noise standard deviation."""
        out = []
        shape = self._get_shape()
        for k in range(1, self.depth + 1):
            noise_sd = math.sqrt(self._var[k])
            if shape is None:
                worst = best = noise_sd
            else:
                worst = math.sqrt(float(shape.P[k].max()))
                best = math.sqrt(float(shape.P[k].min()))
            out.append({"level": k, "nodes": self._sizes[k], "stderr": worst,
                        "bound95": 1.959963984540054 * worst, "stderr_min": best,
                        "noise_stderr": noise_sd, "exact": shape is not None})
        return out
