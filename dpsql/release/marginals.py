"""Which marginals the views of a release share, and how their nodes line up.

A level of a view is a **marginal**: the counts of the data grouped by the attribute
prefixes that levels 1..k have refined. Its key lists, per attribute touched, an item
``("c", attribute, depth)`` (a categorical attribute or the first ``depth`` columns of a
spine) or ``("r", attribute, span)`` (bins of ``span`` leaf bins of a range attribute),
sorted by attribute. Two levels of two views with the same key hold the same marginal,
whatever the order or interleaving of their levels: ``geo_mode`` = [geo, mode] and
``geo_gauss`` = [geo] share region, province and city; the two O/D trees of the commutes
example share (work region, home region) and every finer pair. The total (level 0) has
the empty key and every view shares it.

A node of a marginal has a **code**: the per-item codes (a spine column's node id at its
depth, a categorical code, ``first bin // span``, or for a range's NULL node the slot
after its bins: :func:`range_part`) in mixed radix over the items' public domain sizes,
so nodes of different views are matched by plain integer keys. Coarsening a code (to a
key whose items are each implied by the finer one) uses the attribute's own public
tree. Range views (Cascade, b-ary tree) are matched on their total only; their
finer levels get no key (:mod:`dpsql.release.reconcile` says why).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpsql import domains
from dpsql.spec import Range

Item = tuple[str, str, int]
Key = tuple[Item, ...]


class ViewLevels:
    """The marginal key of every level of one view, and the codes of its nodes."""

    def __init__(self, spec: Any, view: Any, dtree: domains.DomainTree | None,
                 trees: dict[str, domains.DomainTree]) -> None:
        self.spec, self.view, self.dtree, self.trees = spec, view, dtree, trees
        self.keys: list[Key | None] = [()]
        if dtree is None:
            return
        column_attr = {c: a for a in view.levels
                       for c in (spec.attributes[a].columns
                                 if not isinstance(spec.attributes[a], Range) else (a,))}
        state: dict[str, tuple[str, int]] = {}
        for k in range(1, dtree.depth + 1):
            info = dtree.level_info(k)
            a = column_attr[info.attribute]
            if info.kind == "range":
                state[a] = ("r", int(info.bin_span))
            else:
                state[a] = ("c", state.get(a, ("c", 0))[1] + 1)
            self.keys.append(tuple(sorted((kind, name, n) for name, (kind, n) in state.items())))

    def key(self, k: int) -> Key | None:
        return self.keys[k] if k < len(self.keys) else None

    def codes(self, k: int, ids: np.ndarray) -> np.ndarray:
        """The marginal codes of nodes ``ids`` of level ``k``."""
        key = self.keys[k]
        if not key:
            return np.zeros(len(ids), dtype=np.int64)
        labels = self.dtree.labels(k, ids)
        parts = []
        for kind, a, n in key:
            if kind == "r":
                parts.append(range_part(self.spec, a, n, labels[f"{a}_lo"]))
            else:
                parts.append(np.asarray(labels[self.spec.attributes[a].columns[n - 1]],
                                        dtype=np.int64))
        return encode(parts, radices(key, self.spec, self.trees))


def _bin_slots(spec: Any, a: str, span: int) -> tuple[int, bool]:
    """(how many nodes of ``span`` leaf bins the range attribute ``a`` has, whether it has
    a NULL node beside them): the NULL node (``on_null = "category"``, its leaf code K =
    bins) takes the slot after the bins' at every span."""
    attr = spec.attributes[a]
    return -(-int(attr.bins) // span), getattr(attr, "on_null", None) == "category"


def range_part(spec: Any, a: str, span: int, first_bins: np.ndarray) -> np.ndarray:
    """The code of a range item for nodes whose first leaf bins are ``first_bins``: the
    node's index at ``span`` (``first bin // span``), and for the NULL node (first bin K)
    its own slot, ⌈K / span⌉. (``K // span`` put it on the last bin node when the span
    does not divide K, and on the next item's first node when it does: reconciliation
    then mixed a range attribute's NULL rows into its bins, or dropped them.)"""
    slots, null = _bin_slots(spec, a, span)
    first = np.asarray(first_bins, dtype=np.int64)
    part = first // span
    return np.where(first >= int(spec.attributes[a].bins), slots, part) if null else part


def radices(key: Key, spec: Any, trees: dict[str, domains.DomainTree]) -> list[int]:
    out = []
    for kind, a, n in key:
        if kind == "r":
            slots, null = _bin_slots(spec, a, n)
            out.append(slots + int(null))
        else:
            out.append(int(trees[a].level_sizes[n]))
    return out


def encode(parts: Sequence[np.ndarray], radix: Sequence[int]) -> np.ndarray:
    code = np.zeros(len(parts[0]) if parts else 1, dtype=np.int64)
    for p, r in zip(parts, radix):
        code = code * int(r) + np.asarray(p, dtype=np.int64)
    return code


def decode(code: np.ndarray, radix: Sequence[int]) -> list[np.ndarray]:
    parts = []
    rest = np.asarray(code, dtype=np.int64)
    for r in reversed(radix):
        parts.append(rest % int(r))
        rest = rest // int(r)
    return parts[::-1]


def size(key: Key, spec: Any, trees: dict[str, domains.DomainTree]) -> int:
    out = 1
    for r in radices(key, spec, trees):
        out *= r
    return out


def is_coarser(coarse: Key, fine: Key) -> bool:
    """True when every node of ``fine`` lies inside one node of ``coarse``."""
    by_attr = {a: (kind, n) for kind, a, n in fine}
    for kind, a, n in coarse:
        if a not in by_attr or by_attr[a][0] != kind:
            return False
        m = by_attr[a][1]
        if kind == "c" and n > m:
            return False
        if kind == "r" and (n < m or n % m):
            return False
    return True


def coarsen(codes: np.ndarray, fine: Key, coarse: Key, spec: Any,
            trees: dict[str, domains.DomainTree]) -> np.ndarray:
    """The codes in ``coarse`` of the nodes with ``codes`` in ``fine`` (``is_coarser``)."""
    if not coarse:
        return np.zeros(len(codes), dtype=np.int64)
    parts = dict(zip((a for _, a, _ in fine), decode(codes, radices(fine, spec, trees))))
    depth = {a: n for _, a, n in fine}
    out = []
    for kind, a, n in coarse:
        if kind == "r":  # the fine node's first bin, coarsened (the NULL node's is K)
            out.append(range_part(spec, a, n, parts[a] * depth[a]))
        elif depth[a] == n:
            out.append(parts[a])
        else:
            out.append(trees[a].ancestor(depth[a], parts[a], n))
    return encode(out, radices(coarse, spec, trees))


def label(key: Key, spec: Any) -> str:
    """A marginal in words: ``total``, ``province``, ``mode × distance (bins of 16)``."""
    if not key:
        return "total"
    out = []
    for kind, a, n in key:
        if kind == "r":
            out.append(f"{a} (bins of {n})" if n > 1 else a)
        else:
            out.append(spec.attributes[a].columns[n - 1])
    return " × ".join(out)


def order(keys: Sequence[Key], spec: Any, trees: dict[str, domains.DomainTree]) -> list[Key]:
    """Coarse before fine: by public size, then depth, then wider bins first."""
    def rank(key: Key) -> tuple[int, int, int]:
        depth = sum(n for kind, _, n in key if kind == "c")
        spans = sum(n for kind, _, n in key if kind == "r")
        return size(key, spec, trees), depth + len(key), -spans
    return sorted(keys, key=lambda k: (rank(k), k))


__all__ = ["Item", "Key", "ViewLevels", "coarsen", "decode", "encode", "is_coarser",
           "label", "order", "radices", "size"]
