"""The components a :class:`~dpsql.domains.DomainTree` is built from: explicit value lists
and spines (CSR parent/offset arrays, one label array per level) and binned ordinals
(arithmetic). See the package docstring for the encoding they serve."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from dpsql.errors import DataError, InternalError

MAX_LEVEL_SIZE = 2 ** 62


def as_ids(ids: Any) -> np.ndarray:
    return np.asarray(ids, dtype=np.int64)


# ----------------------------------------------------------------------------------------
# Components
# ----------------------------------------------------------------------------------------

class Component(ABC):
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


class Explicit(Component):
    """A categorical list (depth 1) or a spine: parent arrays and CSR offsets per level."""

    def __init__(self, kind: str, columns: Sequence[str], values: Sequence[np.ndarray],
                 parents: Sequence[np.ndarray]) -> None:
        self.kind = kind
        self.columns = tuple(columns)
        self.depth = len(columns)
        self._values = [np.asarray(v) for v in values]
        self._parents = [as_ids(p) for p in parents]
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
        out = as_ids(ids)
        for lvl in range(frm, to, -1):
            out = self._parents[lvl - 1][out]
        return out

    def first_desc(self, ids, lvl, target):
        out = as_ids(ids)
        for t in range(lvl + 1, target + 1):
            out = self._offsets[t - 1][out]
        return out

    def labels(self, ids, lvl):
        ids = as_ids(ids)
        return {self.columns[j - 1]: self.ancestor(ids, lvl, j) for j in range(1, lvl + 1)}

    def leaf_codes(self, codes):
        col = self.columns[-1]
        if col not in codes:
            raise DataError(f"leaf_ids() needs codes for {col!r} (the finest column of "
                            f"{'/'.join(self.columns)}); got columns {sorted(codes)}")
        c = as_ids(codes[col])
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


class Binned(Component):
    """K ordinal bins split b-ary top-down: node x at level l covers bins
    [x·b^(L−l), (x+1)·b^(L−l)) ∩ [0, K). Purely arithmetic.

    ``null_node`` (``on_null = "category"``) adds a NULL node beside the bins at every
    level, last, each under the previous one (under the root at level 1): its id at
    level l is the number of bin nodes there, its bin range [K, K + 1) and its leaf code
    K. The bins and their b-ary nodes keep their ids."""

    kind = "range"

    def __init__(self, name: str, n_bins: int, fanout: int, null_node: bool = False) -> None:
        self.name = name
        self.n_bins = n_bins
        self.fanout = fanout
        self.null_node = null_node
        depth = 1
        while fanout ** depth < n_bins:
            depth += 1
        self.depth = depth
        self.columns = (name,) * depth
        self.spans = tuple(fanout ** (depth - lvl) for lvl in range(depth + 1))
        self._bin_sizes = tuple(-(-n_bins // s) for s in self.spans)
        self.sizes = tuple(s + (1 if null_node and lvl else 0)
                           for lvl, s in enumerate(self._bin_sizes))

    def ancestor(self, ids, frm, to):
        ids = as_ids(ids)
        if to == 0:
            return np.zeros_like(ids)
        out = ids // (self.fanout ** (frm - to))
        if self.null_node:
            out = np.where(ids >= self._bin_sizes[frm], self._bin_sizes[to], out)
        return out

    def first_desc(self, ids, lvl, target):
        ids = as_ids(ids)
        out = np.minimum(ids * (self.fanout ** (target - lvl)), self._bin_sizes[target])
        if not self.null_node:
            return out
        if lvl == 0:  # the root's descendants: every node; its sentinel: past the NULL
            return np.where(ids >= 1, self.sizes[target], 0)
        return np.where(ids >= self._bin_sizes[lvl],
                        self._bin_sizes[target] + (ids - self._bin_sizes[lvl]), out)

    def labels(self, ids, lvl):
        ids = as_ids(ids)
        span = self.spans[lvl]
        lo = ids * span
        hi = np.minimum((ids + 1) * span, self.n_bins)
        if self.null_node:
            null = ids >= self._bin_sizes[lvl]
            lo = np.where(null, self.n_bins, lo)
            hi = np.where(null, self.n_bins + 1, hi)
        return {f"{self.name}_lo": lo, f"{self.name}_hi": hi}

    def leaf_codes(self, codes):
        if self.name not in codes:
            raise DataError(f"leaf_ids() needs bin indices for {self.name!r}; got columns "
                            f"{sorted(codes)}")
        c = as_ids(codes[self.name])
        bad = (c < 0) | (c >= self.n_bins + self.null_node)
        if np.any(bad):
            raise DataError(f"bin {int(c[bad][0])} for {self.name!r} is outside 0..{self.n_bins - 1}")
        return c

    def level_info(self, lvl):
        return LevelInfo(attribute=self.name, kind="range", bin_span=self.spans[lvl],
                         n_bins=self.n_bins)

    def to_json(self):
        out = {"type": "binned", "name": self.name, "n_bins": self.n_bins,
               "fanout": self.fanout}
        if self.null_node:
            out["null_node"] = True
        return out


@dataclass(frozen=True)
class LevelInfo:
    """What one tree level refines. ``bin_span`` (bins per node, the last node of the level
    may hold fewer) and ``n_bins`` are set for range levels only."""

    attribute: str
    kind: str  # "categorical" | "hierarchy" | "range"
    bin_span: int | None
    n_bins: int | None
