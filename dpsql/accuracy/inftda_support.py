"""The released support of an InfTDA view, and the linear error model over it.

**The model.** At an expanded parent u with private count c(u), InfTDA adds noise η of
variance σ²_ℓ to every child and projects onto {y ≥ 0 integer, Σy = c(u)}. Away from
zero the projection is a common shift of the children that come out positive (the
*active* set A(u), which the release shows: it is the mechanism's output), so for
i ∈ A(u)

    e_i = η_i − mean_{A(u)} η + e_u / |A(u)|.

The error is linear in the noise. For a sum with weights w over the released nodes of
level k, the weight of a parent is the mean weight of its active children, and

    Var(Σ w·e) = Σ_ℓ σ²_ℓ · Σ_{u} Σ_{i ∈ A(u)} (w_i − w̄_u)²   (+ σ²₀·w̄²_root),

evaluated level by level up the tree (:func:`linear_variance`; O(nodes touched)).

**Rows.** The planner passes one integer per node of the answer: its row in the level
table (≥ 0, the released nodes), ``-2 - (p + 2³²·j)`` for a released zero whose parent
is row p of the level above (:func:`zero_code`; j tells the parent's children apart: the
rank of the child's label, so that a join that repeats a zero repeats its code and is
seen as a repeat), and ``-1`` for a zero under a zero parent (a pruned subtree). An
answer depends on its released zeros only through their parents (:func:`split_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Sequence

import numpy as np

from dpsql.accuracy.base import distinct
from dpsql.accuracy.inftda_zeros import child_shifts

DEEP_ZERO = -1
"""Row code of a node whose parent is not released either (inside a pruned subtree)."""

ZERO_CHILD = 1 << 32
"""A released zero's code is ``-2 - (parent row + ZERO_CHILD·child)`` (:func:`zero_code`)."""


def values_at(ids: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The values at the ids ``at`` (NaN where absent) for sorted ``ids``: a level's
    stored measurements by node id or by released-zero code."""
    if ids.size == 0:
        return np.full(at.size, np.nan)
    pos = np.minimum(np.searchsorted(ids, at), ids.size - 1)
    return np.where(ids[pos] == at, values[pos], np.nan)


def zero_code(parent: Any, child: Any = 0) -> Any:
    """The row code of the released zero ``child`` (any number that tells a parent's
    children apart, below 2³¹) under row ``parent`` of the level above; the planner writes
    the same in SQL (:func:`dpsql.planner.level_rows.dense_nodes_sql`)."""
    return -2 - (parent + ZERO_CHILD * child)


def zero_parents_of(codes: np.ndarray) -> np.ndarray:
    """The parent row of each released zero code (≤ −2) in ``codes``."""
    return (-2 - codes) & (ZERO_CHILD - 1)


class Measured(NamedTuple):
    """One level's noisy InfTDA measurements (:mod:`dpsql.release.measured`): per
    released row its measurement (NaN where it was not measured), and per measured
    released zero, by its sorted :func:`zero_code`, the same."""

    x: np.ndarray
    zero_codes: np.ndarray
    zero_x: np.ndarray


@dataclass(frozen=True)
class Support:
    """The public shape of an InfTDA release, level by level (index 0 = the root).

    ``parent[k]``: for each released node of level k ≥ 1, its parent's row at level k−1
    (``parent[0]`` is empty). ``active[k]``: for each released node of level k < d, how many
    of its children were released. ``fanout[k]``: how many public children it has.
    ``bias[k]``: each released node's bootstrap bias, ``var[k]`` its bootstrap variance
    (zeros where not calibrated)."""

    parent: tuple[np.ndarray, ...]
    active: tuple[np.ndarray, ...]
    fanout: tuple[np.ndarray, ...]
    bias: tuple[np.ndarray, ...]
    var: tuple[np.ndarray, ...]
    count: tuple[np.ndarray, ...] = ()
    """Each released node's count (levels 0..d), when given."""
    linear: tuple[np.ndarray, ...] = ()
    """Each released node's linear-model variance (:func:`node_variances`), once
    :meth:`with_linear` has computed it."""
    shift: tuple[np.ndarray, ...] = ()
    """Per level k < d, how high a child of each released node can be pushed to 0
    (:func:`child_shifts`), once :meth:`with_linear` has computed it."""
    measured: tuple["Measured", ...] = ()
    """Per level 0..d (level 0: the root's), InfTDA's noisy measurements
    (:mod:`dpsql.release.measured`), in releases that store them."""

    def with_linear(self, sigma2: Sequence[float], root_sigma2: float | None) -> "Support":
        """This support with every node's linear-model variance, and how high its
        children can be pushed to 0, computed once."""
        return replace(self, linear=tuple(node_variances(self, sigma2, root_sigma2)),
                       shift=child_shifts(self.fanout[:self.depth], self.active[:self.depth],
                                          sigma2))

    @classmethod
    def from_levels(cls, parents: Sequence[np.ndarray], fanouts: Sequence[np.ndarray],
                    biases: Sequence[np.ndarray] | None = None,
                    variances: Sequence[np.ndarray] | None = None,
                    counts: Sequence[np.ndarray] | None = None) -> "Support":
        """From per-level arrays: ``parents`` of levels 1..d (each released node's parent
        row), ``fanouts`` of levels 0..d (each released node's number of public children,
        0 at the leaves; level 0 is the root: one entry if it was released, else none),
        ``biases``, ``variances`` and ``counts`` of levels 1..d (None: not given)."""
        d = len(parents)
        par = [np.zeros(0, np.int64)] + [np.asarray(p, np.int64) for p in parents]
        fan = [np.asarray(f, np.int64) for f in fanouts]
        sizes = [f.size for f in fan]
        active = [np.bincount(par[k + 1], minlength=sizes[k]).astype(np.int64)
                  for k in range(d)] + [np.zeros(sizes[d], np.int64)]
        def per_level(arrays: Sequence[np.ndarray] | None) -> tuple[np.ndarray, ...]:
            return tuple([np.zeros(sizes[0])] + [
                np.asarray(a, np.float64) if a is not None else np.zeros(sizes[k + 1])
                for k, a in enumerate(arrays if arrays is not None else [None] * d)])

        return cls(tuple(par), tuple(active), tuple(fan), per_level(biases),
                   per_level(variances), per_level(counts) if counts is not None else ())

    @property
    def depth(self) -> int:
        return len(self.parent) - 1


def linear_variance(support: Support, sigma2: Sequence[float], root_sigma2: float | None,
                    level: int, rows: np.ndarray) -> float:
    """Var(Σ error) of the released nodes ``rows`` (distinct, ≥ 0) of ``level`` under the
    linear support model (module doc), propagated up to the root."""
    idx = np.asarray(rows, dtype=np.int64)
    w = np.ones(idx.size)
    total = 0.0
    for lv in range(level, 0, -1):
        if idx.size == 0:
            return total
        p = support.parent[lv][idx]
        if p.size > 1 and np.any(p[1:] < p[:-1]):
            order = np.argsort(p, kind="stable")
            p, w = p[order], w[order]
        starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        up = p[starts]
        touched = np.diff(np.r_[starts, p.size])
        n_act = support.active[lv - 1][up].astype(np.float64)
        wbar = np.add.reduceat(w, starts) / n_act
        inside = float(np.sum((w - np.repeat(wbar, touched)) ** 2))
        outside = float(np.sum((n_act - touched) * wbar ** 2))
        total += float(sigma2[lv - 1]) * (inside + outside)
        idx, w = up, wbar
    if root_sigma2 is not None and idx.size:
        total += float(root_sigma2) * float(w[0]) ** 2
    return total


def node_variances(support: Support, sigma2: Sequence[float],
                   root_sigma2: float | None) -> list[np.ndarray]:
    """The linear-model variance of every released node, level by level (index 0 = the
    root): v_i = σ²_ℓ·(1 − 1/|A(u)|) + v_u/|A(u)|², top-down in one pass per level."""
    out = [np.full(support.fanout[0].size, float(root_sigma2 or 0.0))]
    for lv in range(1, support.depth + 1):
        p = support.parent[lv]
        a = support.active[lv - 1][p].astype(np.float64)
        out.append(float(sigma2[lv - 1]) * (1.0 - 1.0 / a) + out[lv - 1][p] / a ** 2)
    return out


class SplitRows(NamedTuple):
    """An answer's row codes split by kind (:func:`split_rows`)."""

    released: np.ndarray
    """Distinct released rows."""
    zero_parents: np.ndarray
    """The parent row of each released zero."""
    deep: int
    """How many deep zeros (inside a pruned subtree)."""
    codes: np.ndarray
    """The codes as given."""


def split_rows(rows: Any) -> SplitRows:
    """(distinct released rows, parent rows of released zeros, number of deep zeros, the
    codes); the functions that take ``rows`` also take this, so that an answer is split
    once."""
    if isinstance(rows, SplitRows):
        return rows
    r = np.asarray(rows, dtype=np.int64)
    released = distinct(r[r >= 0])[0]
    zero_parents = zero_parents_of(r[r <= -2])
    return SplitRows(released, zero_parents, int(np.count_nonzero(r == DEEP_ZERO)), r)


__all__ = ["DEEP_ZERO", "Measured", "SplitRows", "Support", "ZERO_CHILD", "linear_variance",
           "node_variances", "split_rows", "values_at", "zero_code", "zero_parents_of"]
