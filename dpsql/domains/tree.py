"""The :class:`DomainTree`: levels 0..d over components, with arithmetic node ids."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from dpsql.domains.components import (MAX_LEVEL_SIZE, Binned, Component, Explicit, LevelInfo,
                                      as_ids)
from dpsql.errors import DataError, InternalError, SpecError

MAX_CACHED_PARENTS = 1 << 22
"""Largest parent level whose first-child offsets :meth:`DomainTree.parent` and
:meth:`DomainTree.child_ranges` cache (32 MB of int64)."""


class DomainTree:
    """A public tree of levels 0..depth over one or more components (see module doc).

    Parents and child ranges come from the components' arithmetic, and, for a level whose
    parent level has at most :data:`MAX_CACHED_PARENTS` nodes, from that level's CSR
    offsets (every parent's first child, and the end), built once by the same arithmetic
    and kept: a node's parent is then one binary search in them, and a parent's children
    two lookups (measured on the O/D tree's 2M released leaves under 880,000 parents: 26
    against 202 ms). The leaf level of the Italian O/D tree (64M nodes) is still never
    materialised; its parent level (880,000 nodes) is, once."""

    def __init__(self, components: Sequence[Component], schedule: Sequence[int]) -> None:
        self._comps = tuple(components)
        self._sched = tuple(int(c) for c in schedule)
        ncomp = len(self._comps)
        for i, comp in enumerate(self._comps):
            if self._sched.count(i) != comp.depth:
                raise InternalError("schedule does not match component depths")
        cols: dict[str, int] = {}
        for i, comp in enumerate(self._comps):
            for col in set(comp.columns):
                if col in cols:
                    raise SpecError(f"attribute {col!r} appears twice in one tree; give each "
                                    "level a distinct column name")
                cols[col] = i
        self._col_comp = cols
        lv = np.zeros((len(self._sched) + 1, ncomp), dtype=np.int64)
        for k, c in enumerate(self._sched, start=1):
            lv[k] = lv[k - 1]
            lv[k, c] += 1
        self._lv = lv
        sizes = []
        for k in range(len(self._sched) + 1):
            s = 1
            for i, comp in enumerate(self._comps):
                s *= comp.sizes[int(lv[k, i])]
            if s >= MAX_LEVEL_SIZE:
                raise SpecError(f"level {k} of this tree would have {s} nodes, more than "
                                "int64 ids allow; use fewer or coarser levels")
            sizes.append(s)
        self.level_sizes = tuple(sizes)
        self._offsets: dict[int, np.ndarray] = {}

    # -- shape -----------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self._sched)

    @property
    def attributes(self) -> tuple[str, ...]:
        out: list[str] = []
        for k in range(1, self.depth + 1):
            a = self.level_info(k).attribute
            if a not in out:
                out.append(a)
        return tuple(out)

    def size(self, k: int) -> int:
        self._check_level(k)
        return self.level_sizes[k]

    def level_info(self, k: int) -> LevelInfo:
        self._check_level(k)
        if k == 0:
            raise SpecError("level 0 is the root; it refines no attribute")
        c = self._sched[k - 1]
        return self._comps[c].level_info(int(self._lv[k, c]))

    def values(self, attribute: str) -> np.ndarray | None:
        """The public labels of a categorical or spine column, in code order (None for a
        binned attribute, whose codes are bin indices)."""
        if attribute not in self._col_comp:
            raise SpecError(f"no attribute {attribute!r} in this tree; it has "
                            f"{sorted(self._col_comp)}")
        return self._comps[self._col_comp[attribute]].values(attribute)

    def _check_level(self, k: int) -> None:
        if not (0 <= k <= self.depth):
            raise SpecError(f"level {k} is outside 0..{self.depth}")

    # -- encoding ----------------------------------------------------------------------
    def _encode(self, k: int, xs: Sequence[np.ndarray]) -> np.ndarray:
        """Ids at level k of the tuples ``xs`` (component ids at levels ``lv[k]``)."""
        tgt = self._lv[k]
        # ancestors of each component at every one of its levels 0..target
        anc = []
        for c, comp in enumerate(self._comps):
            chain = [None] * (int(tgt[c]) + 1)
            if tgt[c] > 0:
                cur = as_ids(xs[c])
                chain[int(tgt[c])] = cur
                for lvl in range(int(tgt[c]), 0, -1):
                    cur = comp.ancestor(cur, lvl, lvl - 1)
                    chain[lvl - 1] = cur
            anc.append(chain)
        n = len(xs[0]) if len(xs) else 0
        rank = np.zeros(n, dtype=np.int64)
        for s in range(1, k + 1):
            c = self._sched[s - 1]
            lvl = int(self._lv[s, c])
            comp = self._comps[c]
            t = int(tgt[c])
            step = comp.first_desc(anc[c][lvl], lvl, t) - comp.first_desc(anc[c][lvl - 1], lvl - 1, t)
            for c2, comp2 in enumerate(self._comps):
                if c2 == c or tgt[c2] == 0:
                    continue
                l2 = int(self._lv[s, c2])
                if l2 == int(tgt[c2]):
                    continue  # one descendant: itself
                base = anc[c2][l2] if anc[c2][l2] is not None else np.zeros(n, dtype=np.int64)
                step = step * comp2.n_desc(base, l2, int(tgt[c2]))
            rank += step
        return rank

    def _decode(self, k: int, ids: np.ndarray) -> list[np.ndarray]:
        """Inverse of :meth:`_encode`: component ids at levels ``lv[k]``."""
        r = as_ids(ids).copy()
        n = r.size
        tgt = self._lv[k]
        xs = [np.zeros(n, dtype=np.int64) for _ in self._comps]
        for s in range(1, k + 1):
            c = self._sched[s - 1]
            lvl = int(self._lv[s, c])
            comp = self._comps[c]
            t = int(tgt[c])
            other = None
            for c2, comp2 in enumerate(self._comps):
                if c2 == c or tgt[c2] == 0:
                    continue
                l2 = int(self._lv[s, c2])
                if l2 == int(tgt[c2]):
                    continue
                nd = comp2.n_desc(xs[c2], l2, int(tgt[c2]))
                other = nd if other is None else other * nd
            f_old = comp.first_desc(xs[c], lvl - 1, t)
            q = r if other is None else r // other
            xn = comp.ancestor(f_old + q, t, lvl)
            step = comp.first_desc(xn, lvl, t) - f_old
            r = r - (step if other is None else step * other)
            xs[c] = xn
        return xs

    def label_ranks(self, k: int, ids: Any) -> np.ndarray:
        """The rank of each node's own label at level k ≥ 1 (the label of the attribute
        that level k refines): the smallest leaf code under it, which is a categorical
        value's code, a spine prefix's smallest leaf code and a binned node's first bin.
        It tells a parent's children apart, and it is what the planner's released-zero
        codes carry (:func:`dpsql.planner.level_rows.dense_nodes_sql`)."""
        ids = self._check_ids(k, ids)
        if k == 0:
            raise SpecError("the root has no label")
        c = self._sched[k - 1]
        comp = self._comps[c]
        return comp.first_desc(self._decode(k, ids)[c], int(self._lv[k, c]), comp.depth)

    def _check_ids(self, k: int, ids: Any) -> np.ndarray:
        self._check_level(k)
        a = as_ids(ids)
        if a.size and (a.min() < 0 or a.max() >= self.level_sizes[k]):
            bad = a[(a < 0) | (a >= self.level_sizes[k])][0]
            raise DataError(f"node id {int(bad)} is outside level {k} (0..{self.level_sizes[k] - 1})")
        return a

    # -- queries -----------------------------------------------------------------------
    def parent(self, k: int, ids: Any) -> np.ndarray:
        """Parent ids (at level k−1) of nodes ``ids`` at level k ≥ 1."""
        ids = self._check_ids(k, ids)
        if k == 0:
            raise SpecError("the root has no parent")
        return self.ancestor(k, ids, k - 1)

    def _child_offsets(self, k: int, asked: int) -> np.ndarray | None:
        """CSR offsets of level k by parent (size of level k−1 plus 1), or None when level
        k−1 is larger than :data:`MAX_CACHED_PARENTS` (class doc). They are built for a
        question about ``asked`` nodes at least 1/16 of level k−1's size, so that a few
        lookups in a large tree never pay for the whole level."""
        off = self._offsets.get(k)
        size = self.level_sizes[k - 1]
        if off is None and size <= MAX_CACHED_PARENTS and 16 * asked >= size:
            first, nc = self._child_ranges(k, np.arange(self.level_sizes[k - 1],
                                                          dtype=np.int64))
            off = np.append(first, first[-1] + nc[-1])
            off.flags.writeable = False
            self._offsets[k] = off
        return off

    def ancestor(self, k: int, ids: Any, j: int) -> np.ndarray:
        """Ancestor ids at level j ≤ k of nodes ``ids`` at level k."""
        ids = self._check_ids(k, ids)
        self._check_level(j)
        if j > k:
            raise SpecError(f"ancestor level {j} is below level {k}")
        if j == k:
            return ids.copy()
        if j == 0:
            return np.zeros(ids.size, dtype=np.int64)
        if j == k - 1:
            off = self._child_offsets(k, ids.size)
            if off is not None:  # the last parent whose first child is at most the id
                return np.searchsorted(off, ids, side="right") - 1
        xs = self._decode(k, ids)
        ys = [comp.ancestor(xs[c], int(self._lv[k, c]), int(self._lv[j, c]))
              for c, comp in enumerate(self._comps)]
        return self._encode(j, ys)

    def n_children(self, k: int, parent_ids: Any) -> np.ndarray:
        """Number of children at level k of nodes ``parent_ids`` at level k−1."""
        p = self._check_ids(k - 1, parent_ids)
        off = self._child_offsets(k, p.size)
        if off is not None:
            return off[p + 1] - off[p]
        xs = self._decode(k - 1, p)
        c = self._sched[k - 1]
        lvl = int(self._lv[k, c])
        return self._comps[c].n_desc(xs[c], lvl - 1, lvl)

    def children(self, k: int, parent_ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """(child ids at level k, index into ``parent_ids`` of each child's parent), in
        the order of ``parent_ids`` and, within a parent, ascending."""
        p = self._check_ids(k - 1, parent_ids)
        first, nc = self.child_ranges(k, p)
        seg = np.repeat(np.arange(p.size, dtype=np.int64), nc)
        starts = np.cumsum(nc) - nc
        child = np.repeat(first - starts, nc) + np.arange(int(nc.sum()), dtype=np.int64)
        return child, seg

    def child_ranges(self, k: int, parent_ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """(first child id, number of children) of each parent: children are contiguous."""
        p = self._check_ids(k - 1, parent_ids)
        if k < 1:
            raise SpecError("the root level has no parents")
        off = self._child_offsets(k, p.size)
        if off is not None:
            return off[p], off[p + 1] - off[p]
        return self._child_ranges(k, p)

    def _child_ranges(self, k: int, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`child_ranges` by the components' arithmetic."""
        xs = self._decode(k - 1, p)
        c = self._sched[k - 1]
        lvl = int(self._lv[k, c])
        comp = self._comps[c]
        nc = comp.n_desc(xs[c], lvl - 1, lvl)
        xs[c] = comp.first_desc(xs[c], lvl - 1, lvl)
        return self._encode(k, xs), nc

    def labels(self, k: int, ids: Any) -> dict[str, np.ndarray]:
        """Per attribute touched by levels 1..k: value codes (categorical/spine columns) or
        ``<attr>_lo``/``<attr>_hi`` bin bounds [lo, hi) (binned attributes)."""
        ids = self._check_ids(k, ids)
        xs = self._decode(k, ids)
        out: dict[str, np.ndarray] = {}
        for c, comp in enumerate(self._comps):
            lvl = int(self._lv[k, c])
            if lvl > 0:
                out.update(comp.labels(xs[c], lvl))
        return out

    def leaf_ids(self, codes: Mapping[str, Any]) -> np.ndarray:
        """Leaf ids of records from their per-attribute codes (finest spine column's code,
        categorical code, or bin index)."""
        xs = [comp.leaf_codes(codes) for comp in self._comps]
        lens = {len(x) for x in xs}
        if len(lens) > 1:
            raise DataError(f"leaf_ids() got code arrays of different lengths {sorted(lens)}")
        return self._encode(self.depth, xs)

    def aggregate(self, ids: Any, counts: Any, from_level: int,
                  to_level: int) -> tuple[np.ndarray, np.ndarray]:
        """Sum ``counts`` of nodes ``ids`` at ``from_level`` up to ``to_level``; returns
        sorted unique ancestor ids and their sums (zero sums are kept)."""
        anc = self.ancestor(from_level, ids, to_level)
        counts = np.asarray(counts)
        if anc.size and np.any(anc[1:] < anc[:-1]):
            order = np.argsort(anc, kind="stable")
            anc, counts = anc[order], counts[order]
        if anc.size == 0:
            return anc, counts[:0]
        starts = np.flatnonzero(np.r_[True, anc[1:] != anc[:-1]])
        return anc[starts], np.add.reduceat(counts, starts)

    def parent_array(self, k: int, max_size: int = 50_000_000) -> np.ndarray:
        """Explicit int64 parent array of level k (for dense mechanisms on small levels)."""
        self._check_level(k)
        if self.level_sizes[k] > max_size:
            raise SpecError(f"level {k} has {self.level_sizes[k]} nodes, more than "
                            f"max_size={max_size}; use parent()/children() on id arrays")
        return self.parent(k, np.arange(self.level_sizes[k], dtype=np.int64))

    # -- composition and serialisation ------------------------------------------------
    @staticmethod
    def concat(*trees: "DomainTree") -> "DomainTree":
        """Under each leaf of the first tree, the whole of the next, and so on."""
        if not trees:
            raise SpecError("concat() needs at least one tree")
        comps: list[Component] = []
        sched: list[int] = []
        for t in trees:
            sched.extend(c + len(comps) for c in t._sched)
            comps.extend(t._comps)
        return DomainTree(comps, sched)

    def to_json(self) -> dict:
        return {"components": [c.to_json() for c in self._comps],
                "schedule": list(self._sched)}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "DomainTree":
        comps: list[Component] = []
        for c in data["components"]:
            if c["type"] == "binned":
                comps.append(Binned(c["name"], int(c["n_bins"]), int(c["fanout"]),
                                    bool(c.get("null_node", False))))
            elif c["type"] == "explicit":
                comps.append(Explicit(c["kind"], c["columns"],
                                       [np.asarray(v) for v in c["values"]],
                                       [as_ids(p) for p in c["parents"]]))
            else:
                raise SpecError(f"unknown domain component type {c['type']!r}")
        return DomainTree(comps, data["schedule"])

    def __repr__(self) -> str:
        return f"DomainTree(depth={self.depth}, level_sizes={self.level_sizes})"
