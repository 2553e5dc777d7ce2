"""The error-model contract shared by every mechanism, the release file and the planner.

An error model is a pure function of *public* parameters (noise scales, tree shape,
budget split). A mechanism builds one; the release stores ``to_params()`` as JSON in
``dpsql_views``; the planner rebuilds it with :func:`dpsql.accuracy.load` and evaluates
it per output row. It never draws noise and never sees data.

Levels are numbered as in the release: level 0 is the root, level ``depth`` the leaves.
Node ids at a level are those of the view's public tree (``dpsql.domains``) or, for
range mechanisms, positions in the level's left-to-right order.

Two families of answer:

* **variance** (Gaussian, Laplace, Cascade, b-ary trees): ``sum_variance`` gives the
  variance of the sum of released counts over a set of nodes, exact where the model can
  say so (``exact`` is then True in the returned :class:`Variance`), otherwise a stated
  upper bound. Confidence intervals use the normal approximation of that variance,
  except where the noise is Laplace (``laplace_cumulants``: :mod:`dpsql.accuracy.laplace_sum`).
* **bound** (InfTDA): ``sum_bound`` gives a value B with P[|error| ≤ B] ≥ 1 − β.
  ``sum_variance`` returns ``None``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np

from dpsql.errors import InternalError


@dataclass(frozen=True)
class Variance:
    """The variance of a released sum; ``exact`` says whether it is exact or an upper bound."""

    value: float
    exact: bool

    @property
    def stderr(self) -> float:
        return math.sqrt(self.value)


class ErrorModel(ABC):
    """Base class of every error model. Subclasses set ``kind`` and register with
    :func:`register`."""

    kind: ClassVar[str]
    counts_nodes: ClassVar[bool] = False
    """True when :meth:`sum_variance`/:meth:`sum_bound` depend on *how many distinct*
    node ids they get, not on which nodes: any unique key per node then serves as its
    id (the planner uses that to read large sparse levels without numbering them)."""

    weighs_repeats: ClassVar[bool] = False
    """True when :meth:`sum_variance` weighs a repeated node id by how often it comes
    (the node's count summed that many times); otherwise it takes the ids as a set, and
    :mod:`dpsql.accuracy.multiset` evaluates repeats through it."""

    @property
    def reads_support(self) -> bool:
        """True when answers are evaluated on the release's support (which nodes came out
        positive, their parents, their bootstrap bias): the planner then passes each
        node's *row code* (:mod:`dpsql.accuracy.inftda_answers`), not its id, and the
        query side evaluates :mod:`dpsql.accuracy.inftda_answers` on it."""
        return False

    @abstractmethod
    def to_params(self) -> dict[str, Any]:
        """JSON-serialisable public parameters; ``load(to_params())`` rebuilds the model.
        The dict must contain ``"kind": self.kind``."""

    @classmethod
    @abstractmethod
    def from_params(cls, params: dict[str, Any]) -> "ErrorModel":
        """Inverse of :meth:`to_params`."""

    @property
    @abstractmethod
    def depth(self) -> int:
        """Number of noisy levels (the leaves are level ``depth``)."""

    @abstractmethod
    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance | None:
        """Variance of the sum of the released counts of ``node_ids`` at ``level``;
        ``None`` if this model gives bounds, not variances."""

    def gives_variance(self, level: int) -> bool:
        """True when :meth:`sum_variance` answers at ``level`` (False: bounds only).
        Models whose evaluation needs a costly set-up override it with a constant, so that
        asking costs nothing (attaching a release asks once per level)."""
        return self.sum_variance(level, np.zeros(1, dtype=np.int64)) is not None

    def sum_bound(self, level: int, node_ids: np.ndarray, beta: float) -> float:
        """B with P[|released sum − true sum| ≤ B] ≥ 1 − β for the nodes at ``level``.

        The default uses the normal approximation of :meth:`sum_variance` (two-sided)."""
        v = self.sum_variance(level, node_ids)
        if v is None:
            raise InternalError(f"{type(self).__name__} gives no variances, so it must "
                                "override sum_bound")
        return z_value(1.0 - beta) * v.stderr

    def linear_variance(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                        ) -> Variance | None:
        """The variance of Σᵢ coefᵢ·(released count of node_idsᵢ) over *distinct* ids
        with real coefficients (a quantile interval's comparison count(< x) − p·count:
        :mod:`dpsql.quantile_ci`); None if this model gives bounds, not variances.

        The default polarises over the groups of nodes with equal coefficients through
        :meth:`sum_variance`: Var(Σ_g c_g S_g) = Σ_g c_g² V_g + Σ_{g<h} c_g c_h (V_{g∪h} −
        V_g − V_h), exact when the set variances are, for up to
        :data:`MAX_COEFFICIENT_GROUPS` groups; beyond, Minkowski's (Σ_g |c_g| sd_g)², an
        upper bound (``exact=False``). Models with a weighted carry-up override it."""
        ids = np.asarray(node_ids, dtype=np.int64)
        c = np.asarray(coef, dtype=np.float64)
        values, group = np.unique(c, return_inverse=True)
        keep = values != 0.0
        sets = [ids[group == g] for g in np.flatnonzero(keep)]
        cs = values[keep]
        vs = [self.sum_variance(level, t) for t in sets]
        if any(v is None for v in vs):
            return None
        if len(sets) > MAX_COEFFICIENT_GROUPS:
            sd = sum(abs(ci) * math.sqrt(max(v.value, 0.0)) for ci, v in zip(cs, vs))
            return Variance(sd * sd, False)
        total = sum(ci * ci * v.value for ci, v in zip(cs, vs))
        exact = all(v.exact for v in vs)
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                both = self.sum_variance(level, np.concatenate((sets[i], sets[j])))
                exact = exact and both.exact
                total += cs[i] * cs[j] * (both.value - vs[i].value - vs[j].value)
        return Variance(max(float(total), 0.0), exact)

    def linear_variances(self, level: int, node_ids: np.ndarray, coef: np.ndarray
                         ) -> np.ndarray | None:
        """:meth:`linear_variance`'s values for each row of ``coef`` (m × n: m linear
        queries of the same distinct ids); models with a vectorised carry-up override it."""
        out = np.empty(np.shape(coef)[0])
        for r, c in enumerate(np.asarray(coef, dtype=np.float64)):
            v = self.linear_variance(level, node_ids, c)
            if v is None:
                return None
            out[r] = v.value
        return out

    def prefix_linear_variances(self, level: int, node_ids: np.ndarray, p: float
                                ) -> np.ndarray | None:
        """For j = 1..n−1, the variance of (1 − p)·Σ node_ids[:j] − p·Σ node_ids[j:] over
        the sorted distinct ids (a quantile interval's comparisons, one per bin edge);
        None (the default) where the model has no faster way than
        :meth:`linear_variances`."""
        return None

    def linear_cumulants(self, level: int, node_ids: np.ndarray, coef: np.ndarray) -> Any:
        """Laplace-family models with a weighted carry-up: the cumulants
        (:class:`dpsql.accuracy.laplace_sum.Cumulants`) of Σᵢ coefᵢ·(released count of
        node_idsᵢ) over distinct ids; None (the default) otherwise."""
        return None

    def laplace_cumulants(self, level: int, node_ids: np.ndarray) -> Any:
        """Laplace-family models: the variance and fourth-cumulant sums of the released sum
        over ``node_ids`` (:class:`dpsql.accuracy.laplace_sum.Cumulants`), from which
        ``dp_ci_low/high`` take their Laplace quantile; None (the default): the interval
        is ±z·σ of :meth:`sum_variance`."""
        return None

    def range_variance(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
        """Range views only: variance of the released count of leaf bins [lo, hi) for each
        pair (vectorised, O(log K) each). ``None`` for non-range models."""
        return None

    @abstractmethod
    def level_summary(self) -> list[dict[str, Any]]:
        """One dict per noisy level k = 1..depth for CLI and reports: ``level``,
        ``stderr`` (one node, or None) and ``bound95`` (one node at β = 0.05, or None)."""


MAX_COEFFICIENT_GROUPS = 8
"""Distinct coefficients :meth:`ErrorModel.linear_variance` polarises exactly."""


def count_interval(count: float, below: float, above: float) -> tuple[float, float]:
    """The interval of a count, [count − below, count + above], at whole counts.

    A count of rows is a whole number, so an interval for it holds exactly the whole
    counts between its ends: its ends are the first and last of them (never below 0).
    That gives up no coverage (a whole number lies in [lo, hi] exactly when it lies in
    [⌈lo⌉, ⌊hi⌋]) and says what the interval holds: "40 to 52", not "39.2 to 52.8".
    When no whole count lies inside (a half-width under ½, only at a standard error
    under about ¼), the ends are the two whole counts around it. An infinite end stays
    infinite (the low one 0); a NaN count or offset gives NaN ends.

    The slack that keeps a float sum of whole counts (an end at 52.000000001) on its
    whole count is relative to the offsets, plus a few units in the last place of the
    count: a slack relative to the count itself would move the ends of counts near 10⁹ a
    whole count outwards."""
    lo, hi = count - below, count + above
    if math.isnan(lo) or math.isnan(hi):
        return math.nan, math.nan
    slack = 1e-9 * max([1.0] + [abs(x) for x in (below, above) if math.isfinite(x)]) \
        + 4.0 * math.ulp(count)
    a = float(math.ceil(lo - slack)) if math.isfinite(lo) else lo
    b = float(math.floor(hi + slack)) if math.isfinite(hi) else hi
    if a > b:  # no whole count inside (both ends are finite here)
        a, b = b, a
    return max(a, 0.0), max(b, 0.0)


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def distinct(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, how often each occurs) of int64 ``ids``, by sorting:
    numpy 2.4's hashed ``np.unique`` takes 20× longer on thousands of node ids, and the
    error columns call this once per output row."""
    ordered = np.sort(np.asarray(ids, dtype=np.int64))
    if ordered.size < 2:
        return ordered, np.ones(ordered.size, np.int64)
    first = np.empty(ordered.size, bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first], np.diff(np.append(np.flatnonzero(first), ordered.size))


_REGISTRY: dict[str, type[ErrorModel]] = {}


def register(cls: type[ErrorModel]) -> type[ErrorModel]:
    """Class decorator: make ``load`` able to rebuild models of this kind."""
    _REGISTRY[cls.kind] = cls
    return cls


def registered(kind: str) -> type[ErrorModel] | None:
    return _REGISTRY.get(kind)
