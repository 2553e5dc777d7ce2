"""Public domains as arrays: categorical lists, hierarchical spines, binned ordinals, and
their products (concatenation, interleaving: origin/destination trees).

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

from typing import Any, Iterable, Sequence

import numpy as np

from dpsql.domains.components import Binned, Explicit, LevelInfo
from dpsql.domains.tree import DomainTree
from dpsql.errors import SpecError

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
    comp = Explicit("categorical", [name], [arr], [np.zeros(len(vals), dtype=np.int64)])
    return DomainTree([comp], [0])


def hierarchy(names: Sequence[str], paths: Any, null_branch: bool = False) -> DomainTree:
    """A spine: one level per column of ``paths`` (one row per leaf, coarse to fine).
    ``null_branch`` adds the NULL branch of ``on_null = "category"``: one node labelled
    NULL at every level, last, each under the previous one, so every other node keeps
    its id and the NULL leaf's code is the number of paths."""
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
    if null_branch:
        for j in range(len(names)):
            labels = np.empty(len(values[j]) + 1, dtype=object)
            labels[:-1] = values[j]
            values[j] = labels  # the NULL label, last
            parents[j] = np.append(parents[j], len(values[j - 1]) - 1 if j else 0)
    kind = "hierarchy" if len(names) > 1 else "categorical"
    return DomainTree([Explicit(kind, names, values, parents)], [0] * len(names))


def binned(name: str, n_bins: int, fanout: int, null_node: bool = False) -> DomainTree:
    """An ordinal attribute of ``n_bins`` bins split ``fanout``-ary top-down; the leaves
    are the bins, level j groups bins in spans of fanout^(depth−j) (the last node of a
    level may hold fewer; no padding). ``null_node``: a NULL node beside the bins at
    every level (:class:`~dpsql.domains.components.Binned`)."""
    name = _name(name)
    for label, v, lo in (("n_bins", n_bins, 1), ("fanout", fanout, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise SpecError(f"{label} of {name!r} must be an integer >= {lo}, got {v!r}")
    comp = Binned(name, int(n_bins), int(fanout), null_node)
    return DomainTree([comp], [0] * comp.depth)


def interleave(*trees: DomainTree) -> DomainTree:
    """Round-robin levels of single-attribute trees: one level of the first, one of the
    second, ..., then the first again; a tree whose levels run out drops out of the
    turn. Two spines give od_topdown.md §1's alternating origin/destination tree (the
    first tree is split first: destination first is the paper's destination tree).

    Tree order, and so node ids, follow the schedule: a level-k node is ordered by its
    level-1 label, then its level-2 label, and so on."""
    if len(trees) < 2:
        raise SpecError("interleave() needs at least two trees; one tree is its own "
                        "levels in order")
    for i, t in enumerate(trees):
        if not isinstance(t, DomainTree) or len(t._comps) != 1:
            raise SpecError(f"interleave() tree {i + 1} must be one hierarchy, categorical "
                            "or binned tree (not a concatenation)")
    left = [t.depth for t in trees]
    sched: list[int] = []
    while any(left):
        for c, n in enumerate(left):
            if n:
                sched.append(c)
                left[c] -= 1
    return DomainTree([t._comps[0] for t in trees], sched)


def od_tree(origin: DomainTree, destination: DomainTree,
            kind: str = "destination") -> DomainTree:
    """The alternating origin/destination tree (od_topdown.md §1).

    ``kind="destination"``: levels (u0,v1), (u1,v1), (u1,v2), ... (the destination is
    split first); ``kind="origin"`` mirrors it. If the two spines have different depths,
    the deeper one's remaining levels come last. Components are stored origin first
    (either kind), so :meth:`DomainTree.to_json` is the same shape for both."""
    if kind not in ("destination", "origin"):
        raise SpecError(f"od_tree kind must be 'destination' or 'origin', got {kind!r}")
    for label, t in (("origin", origin), ("destination", destination)):
        if not isinstance(t, DomainTree) or len(t._comps) != 1:
            raise SpecError(f"od_tree {label} must be one hierarchy, categorical or binned "
                            "tree (not a concatenation)")
    if kind == "origin":
        return interleave(origin, destination)
    t = interleave(destination, origin)
    return DomainTree([origin._comps[0], destination._comps[0]], [1 - c for c in t._sched])


__all__ = ["DomainTree", "LevelInfo", "binned", "categorical", "concat", "hierarchy",
           "interleave", "od_tree"]

concat = DomainTree.concat
