"""What every mechanism returns: a :class:`PrivateTree`.

A private tree holds, for each level k = 0..depth (0 = root, depth = leaves), the node
ids that the mechanism releases and their private counts, plus the error model and the
privacy loss actually spent. The release writer turns it into ``<view>__l<k>`` tables.

Conventions every mechanism follows (tests check them on every mechanism):

* **Consistency.** Each released level equals the aggregate of the level below it,
  exactly for integer mechanisms and to float rounding for real-valued ones (the
  release build then makes those exact: :mod:`dpsql.release.exact_sums`).
* **Ids.** ``ids`` are int64 and strictly ascending. For trees over a public domain
  (``dpsql.domains``) they are that tree's node ids. For range mechanisms over K bins
  they are positions in level order: node j at level k covers leaf bins
  ``[j*bin_spans[k], (j+1)*bin_spans[k]) ∩ [0, K)``. Padding cells past K are public
  zeros: they are never released, nodes wholly in the padding are omitted, and a node
  that straddles K holds the sum of its released leaves.
* **Sparsity.** Integer mechanisms (InfTDA) release only positive nodes; real-valued
  mechanisms release every node of the public domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpsql.accuracy.base import ErrorModel
from dpsql.privacy.budgets import Budget


@dataclass(frozen=True)
class PrivateLevel:
    """The released nodes of one level."""

    ids: np.ndarray
    counts: np.ndarray
    variance: np.ndarray | None = None  # per-node variance (the dp_var column), if any


@dataclass(frozen=True)
class PrivateTree:
    """The output of one mechanism run over one view."""

    mechanism: str
    levels: tuple[PrivateLevel, ...]
    error_model: ErrorModel
    loss: Budget
    sensitivity: dict[str, float] = field(default_factory=dict)
    bin_spans: tuple[int, ...] | None = None  # range mechanisms: leaf bins per node, by level
    draws: int = 0  # noise values drawn (for audits and tests)
    info: dict[str, Any] = field(default_factory=dict)  # public, JSON-serialisable extras
    measured: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None
    """InfTDA's noisy measurements, per level 0..d: the ids of every node it measured
    (the root; all public children of the nodes kept at level k−1) and their noisy counts
    (true count + noise, before the projection and the clamp of a noisy root; a public
    total is its own measurement), when the run was asked to keep them
    (``keep_measured``). They are the mechanism's output as much as the projected counts
    are (the projection is post-processing of them); the release stores what the
    unbiased estimates (``dp_estimate``) need (:mod:`dpsql.release.measured`)."""

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    @property
    def leaves(self) -> PrivateLevel:
        return self.levels[-1]
