"""Public domains as arrays: categorical lists, hierarchical spines, binned ordinals, and
their products (concatenation, origin/destination interleaving).

A :class:`DomainTree` has levels 0..d; level 0 is the root (one node, id 0). Node ids at a
level are 0..size-1 in *tree order*: the children of each parent are contiguous and come
in parent order, so CSR child offsets exist and the ids of the children of an ascending
list of parents are ascending.

Decisions (see ``reference/od_topdown.md`` §1 and ``reference/inftda.md`` §1):

* A tree is a list of *components* (one per attribute or spine) plus a *schedule* that
  says which component each tree level refines. A level-k node is the tuple of its
  components' nodes, and its id is the rank of that tuple in tree order. Concatenation
  ("under each node of A, the whole of B") schedules all of A then all of B, which gives
  the mixed-radix ``id = a * |B_j| + b``; the O/D destination tree alternates
  destination, origin, destination, ... (od_topdown §1). Both use one arithmetic
  encoder, so no level is ever materialised: the Italian O/D leaf level (64M nodes) costs
  nothing until ids are asked for.
* The rank of a tuple is Σ over the path of (first descendant of the node − first
  descendant of its parent) × (descendants of the other components), with descendants
  counted at the target level. Components give first-descendant and descendant counts
  arithmetically (binned attributes) or through small CSR offset arrays (categorical
  lists and spines, whose sizes are those of the public value lists).
* Components never hold a Python object per node; spines hold int64 parent/offset arrays
  and one numpy array of labels per level.
* Spine node order: at each level nodes are grouped by parent (tree order) and, within a
  parent, ordered by first appearance in ``paths``. A categorical list keeps the user's
  order. The code of a value is its node id at its level, and ``values(column)`` lists
  the labels in code order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dpsql.errors import DataError, InternalError, SpecError

_MAX_LEVEL_SIZE = 2 ** 62


def _i64(ids: Any) -> np.ndarray:
    return np.asarray(ids, dtype=np.int64)


# ----------------------------------------------------------------------------------------
# Components
# ----------------------------------------------------------------------------------------

class _Component(ABC):
    """One attribute or spine: levels 0..depth in tree order."""

    kind: str
    depth: int
    sizes: tuple[int, ...]
    columns: tuple[str, ...]  # the attribute each level 1..depth refines

    @abstractmethod
    def ancestor(self, ids: np.ndarray, frm: int, to: int) -> np.ndarray:
        """See the subclasses."""

    @abstractmethod
    def first_desc(self, ids: np.ndarray, lvl: int, target: int) -> np.ndarray:
        """First descendant at ``target`` of nodes ``ids`` at ``lvl`` (``ids`` may be the
        sentinel ``sizes[lvl]``)."""

    def n_desc(self, ids: np.ndarray, lvl: int, target: int) -> np.ndarray:
        return self.first_desc(ids + 1, lvl, target) - self.first_desc(ids, lvl, target)

    @abstractmethod
    def labels(self, ids: np.ndarray, lvl: int) -> dict[str, np.ndarray]:
        """See the subclasses."""

    @abstractmethod
    def leaf_codes(self, codes: Mapping[str, Any]) -> np.ndarray:
        """See the subclasses."""

    @abstractmethod
    def level_info(self, lvl: int) -> "LevelInfo":
        """See the subclasses."""

    def values(self, column: str) -> np.ndarray | None:
        return None

    @abstractmethod
    def to_json(self) -> dict:
        """See the subclasses."""


class _Explicit(_Component):
    """A categorical list (depth 1) or a spine: parent arrays and CSR offsets per level."""

    def __init__(self, kind: str, columns: Sequence[str], values: Sequence[np.ndarray],
                 parents: Sequence[np.ndarray]) -> None:
        self.kind = kind
        self.columns = tuple(columns)
        self.depth = len(columns)
        self._values = [np.asarray(v) for v in values]
        self._parents = [_i64(p) for p in parents]
        sizes = [1] + [len(p) for p in self._parents]
        self.sizes = tuple(sizes)
        self._offsets = []
        for lvl in range(1, self.depth + 1):
            par = self._parents[lvl - 1]
            if par.size and (np.any(np.diff(par) < 0) or par[0] < 0 or par[-1] >= sizes[lvl - 1]):
                raise InternalError("spine parents are not in tree order")
            cnt = np.bincount(par, minlength=sizes[lvl - 1])
            if np.any(cnt == 0):
                raise InternalError("a spine node has no children")
            off = np.zeros(sizes[lvl - 1] + 1, dtype=np.int64)
            np.cumsum(cnt, out=off[1:])
            self._offsets.append(off)

    def ancestor(self, ids, frm, to):
        out = _i64(ids)
        for lvl in range(frm, to, -1):
            out = self._parents[lvl - 1][out]
        return out

    def first_desc(self, ids, lvl, target):
        out = _i64(ids)
        for t in range(lvl + 1, target + 1):
            out = self._offsets[t - 1][out]
        return out

    def labels(self, ids, lvl):
        ids = _i64(ids)
        return {self.columns[j - 1]: self.ancestor(ids, lvl, j) for j in range(1, lvl + 1)}

    def leaf_codes(self, codes):
        col = self.columns[-1]
        if col not in codes:
            raise DataError(f"leaf_ids() needs codes for {col!r} (the finest column of "
                            f"{'/'.join(self.columns)}); got columns {sorted(codes)}")
        c = _i64(codes[col])
        bad = (c < 0) | (c >= self.sizes[-1])
        if np.any(bad):
            raise DataError(f"code {int(c[bad][0])} for {col!r} is outside its public domain "
                            f"0..{self.sizes[-1] - 1}")
        return c

    def level_info(self, lvl):
        return LevelInfo(attribute=self.columns[lvl - 1], kind=self.kind,
                         bin_span=None, n_bins=None)

    def values(self, column):
        return self._values[self.columns.index(column)]

    def to_json(self):
        return {"type": "explicit", "kind": self.kind, "columns": list(self.columns),
                "values": [v.tolist() for v in self._values],
                "parents": [p.tolist() for p in self._parents]}


class _Binned(_Component):
    """K ordinal bins split b-ary top-down: node x at level l covers bins
    [x·b^(L−l), (x+1)·b^(L−l)) ∩ [0, K). Purely arithmetic."""

    kind = "range"

    def __init__(self, name: str, n_bins: int, fanout: int) -> None:
        self.name = name
        self.n_bins = n_bins
        self.fanout = fanout
        depth = 1
        while fanout ** depth < n_bins:
            depth += 1
        self.depth = depth
        self.columns = (name,) * depth
        self.spans = tuple(fanout ** (depth - lvl) for lvl in range(depth + 1))
        self.sizes = tuple(-(-n_bins // s) for s in self.spans)

    def ancestor(self, ids, frm, to):
        return _i64(ids) // (self.fanout ** (frm - to))

    def first_desc(self, ids, lvl, target):
        return np.minimum(_i64(ids) * (self.fanout ** (target - lvl)), self.sizes[target])

    def labels(self, ids, lvl):
        ids = _i64(ids)
        span = self.spans[lvl]
        return {f"{self.name}_lo": ids * span,
                f"{self.name}_hi": np.minimum((ids + 1) * span, self.n_bins)}

    def leaf_codes(self, codes):
        if self.name not in codes:
            raise DataError(f"leaf_ids() needs bin indices for {self.name!r}; got columns "
                            f"{sorted(codes)}")
        c = _i64(codes[self.name])
        bad = (c < 0) | (c >= self.n_bins)
        if np.any(bad):
            raise DataError(f"bin {int(c[bad][0])} for {self.name!r} is outside 0..{self.n_bins - 1}")
        return c

    def level_info(self, lvl):
        return LevelInfo(attribute=self.name, kind="range", bin_span=self.spans[lvl],
                         n_bins=self.n_bins)

    def to_json(self):
        return {"type": "binned", "name": self.name, "n_bins": self.n_bins,
                "fanout": self.fanout}


@dataclass(frozen=True)
class LevelInfo:
    """What one tree level refines. ``bin_span`` (bins per node, the last node of the level
    may hold fewer) and ``n_bins`` are set for range levels only."""

    attribute: str
    kind: str  # "categorical" | "hierarchy" | "range"
    bin_span: int | None
    n_bins: int | None


# ----------------------------------------------------------------------------------------
# The tree
# ----------------------------------------------------------------------------------------

class DomainTree:
    """A public tree of levels 0..depth over one or more components (see module doc)."""

    def __init__(self, components: Sequence[_Component], schedule: Sequence[int]) -> None:
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
            if s >= _MAX_LEVEL_SIZE:
                raise SpecError(f"level {k} of this tree would have {s} nodes, more than "
                                "int64 ids allow; use fewer or coarser levels")
            sizes.append(s)
        self.level_sizes = tuple(sizes)

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
                cur = _i64(xs[c])
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
        r = _i64(ids).copy()
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

    def _check_ids(self, k: int, ids: Any) -> np.ndarray:
        self._check_level(k)
        a = _i64(ids)
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
        xs = self._decode(k, ids)
        ys = [comp.ancestor(xs[c], int(self._lv[k, c]), int(self._lv[j, c]))
              for c, comp in enumerate(self._comps)]
        return self._encode(j, ys)

    def n_children(self, k: int, parent_ids: Any) -> np.ndarray:
        """Number of children at level k of nodes ``parent_ids`` at level k−1."""
        p = self._check_ids(k - 1, parent_ids)
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
        comps: list[_Component] = []
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
        comps: list[_Component] = []
        for c in data["components"]:
            if c["type"] == "binned":
                comps.append(_Binned(c["name"], int(c["n_bins"]), int(c["fanout"])))
            elif c["type"] == "explicit":
                comps.append(_Explicit(c["kind"], c["columns"],
                                       [np.asarray(v) for v in c["values"]],
                                       [_i64(p) for p in c["parents"]]))
            else:
                raise SpecError(f"unknown domain component type {c['type']!r}")
        return DomainTree(comps, data["schedule"])

    def __repr__(self) -> str:
        return f"DomainTree(depth={self.depth}, level_sizes={self.level_sizes})"


# ----------------------------------------------------------------------------------------
# Constructors
# ----------------------------------------------------------------------------------------

def _name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise SpecError(f"an attribute name must be a non-empty string, got {name!r}")
    return name


def categorical(name: str, values: Iterable[Any]) -> DomainTree:
    """One level with one child per public value, in the given order."""
    name = _name(name)
    vals = list(values)
    if not vals:
        raise SpecError(f"categorical attribute {name!r} has no values; list its public "
                        "domain")
    seen: set = set()
    for v in vals:
        if v in seen:
            raise SpecError(f"categorical attribute {name!r} lists the value {v!r} twice; "
                            "public domains must list each value once")
        seen.add(v)
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    comp = _Explicit("categorical", [name], [arr], [np.zeros(len(vals), dtype=np.int64)])
    return DomainTree([comp], [0])


def hierarchy(names: Sequence[str], paths: Any) -> DomainTree:
    """A spine: one level per column of ``paths`` (one row per leaf, coarse to fine)."""
    names = [_name(n) for n in names]
    if not names:
        raise SpecError("hierarchy() needs at least one column name")
    if len(set(names)) != len(names):
        raise SpecError(f"hierarchy column names must be distinct, got {names}")
    rows = [tuple(r) for r in paths] if not isinstance(paths, np.ndarray) else None
    if rows is not None:
        if not rows:
            raise SpecError(f"hierarchy {names} has no leaf paths")
        bad = [r for r in rows if len(r) != len(names)]
        if bad:
            raise SpecError(f"leaf path {bad[0]!r} has {len(bad[0])} entries; hierarchy "
                            f"{names} needs {len(names)} (one per column)")
        cols = []
        for j in range(len(names)):
            a = np.empty(len(rows), dtype=object)
            a[:] = [r[j] for r in rows]
            cols.append(a)
    else:
        if paths.ndim != 2 or paths.shape[1] != len(names) or paths.shape[0] == 0:
            raise SpecError(f"paths must be a non-empty 2-D array with {len(names)} columns, "
                            f"got shape {paths.shape}")
        cols = [paths[:, j] for j in range(len(names))]
    n = len(cols[0])
    row_parent = np.zeros(n, dtype=np.int64)
    values, parents = [], []
    prev_labels = None
    for j, col in enumerate(cols):
        try:
            uniq, first, inv = np.unique(col, return_index=True, return_inverse=True)
        except TypeError as err:
            raise SpecError(f"column {names[j]!r} mixes values that cannot be compared; "
                            "use one type per column") from err
        inv = inv.ravel()
        # each value must have a single parent
        order = np.lexsort((row_parent, inv))
        iv, pv = inv[order], row_parent[order]
        clash = np.flatnonzero((iv[1:] == iv[:-1]) & (pv[1:] != pv[:-1]))
        if clash.size:
            i = clash[0]
            raise SpecError(
                f"{names[j]} {uniq[iv[i]]!r} appears under two parents: {names[j - 1]} "
                f"{prev_labels[pv[i]]!r} and {prev_labels[pv[i + 1]]!r}; a spine value must "
                "have one parent (rename one of them)")
        if j == len(names) - 1 and uniq.size < n:
            dup = np.flatnonzero(np.bincount(inv) > 1)[0]
            r = int(np.flatnonzero(inv == dup)[0])
            raise SpecError(f"leaf path {tuple(c[r] for c in cols)!r} appears twice; list each "
                            "leaf once")
        uparent = np.zeros(uniq.size, dtype=np.int64)
        uparent[iv] = pv
        node_order = np.lexsort((first, uparent))
        new_id = np.empty(uniq.size, dtype=np.int64)
        new_id[node_order] = np.arange(uniq.size, dtype=np.int64)
        values.append(uniq[node_order])
        parents.append(uparent[node_order])
        row_parent = new_id[inv]
        prev_labels = uniq[node_order]
    kind = "hierarchy" if len(names) > 1 else "categorical"
    return DomainTree([_Explicit(kind, names, values, parents)], [0] * len(names))


def binned(name: str, n_bins: int, fanout: int) -> DomainTree:
    """An ordinal attribute of ``n_bins`` bins split ``fanout``-ary top-down; the leaves
    are the bins, level j groups bins in spans of fanout^(depth−j) (the last node of a
    level may hold fewer; no padding)."""
    name = _name(name)
    for label, v, lo in (("n_bins", n_bins, 1), ("fanout", fanout, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise SpecError(f"{label} of {name!r} must be an integer >= {lo}, got {v!r}")
    comp = _Binned(name, int(n_bins), int(fanout))
    return DomainTree([comp], [0] * comp.depth)


def od_tree(origin: DomainTree, destination: DomainTree,
            kind: str = "destination") -> DomainTree:
    """The alternating origin/destination tree (od_topdown.md §1).

    ``kind="destination"``: levels (u0,v1), (u1,v1), (u1,v2), ... (the destination is
    split first); ``kind="origin"`` mirrors it. If the two spines have different depths,
    the deeper one's remaining levels come last."""
    if kind not in ("destination", "origin"):
        raise SpecError(f"od_tree kind must be 'destination' or 'origin', got {kind!r}")
    for label, t in (("origin", origin), ("destination", destination)):
        if not isinstance(t, DomainTree) or len(t._comps) != 1:
            raise SpecError(f"od_tree {label} must be one hierarchy, categorical or binned "
                            "tree (not a concatenation)")
    first, second = (1, 0) if kind == "destination" else (0, 1)
    depths = {0: origin.depth, 1: destination.depth}
    sched: list[int] = []
    left = dict(depths)
    while left[0] or left[1]:
        for c in (first, second):
            if left[c]:
                sched.append(c)
                left[c] -= 1
    return DomainTree([origin._comps[0], destination._comps[0]], sched)


__all__ = ["DomainTree", "LevelInfo", "binned", "categorical", "concat", "hierarchy",
           "od_tree"]

concat = DomainTree.concat
