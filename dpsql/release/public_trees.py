"""The public domain trees of a spec's attributes (:mod:`dpsql.domains`): a categorical
list, a hierarchy's spine, or the b-ary split of a binned attribute's bins. Built from
the spec alone (public), by the build, the dry run and the workload optimiser."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsql import domains
from dpsql.spec import Categorical, Hierarchy, Range

DEFAULT_RANGE_FANOUT = 16  # b-ary split of range levels in categorical trees (tree_cdf.md §2.5)



def range_fanout(attr: Range) -> int:
    return DEFAULT_RANGE_FANOUT if attr.fanout == "auto" else int(attr.fanout)


def attribute_tree(attr: Any) -> domains.DomainTree:
    if isinstance(attr, Categorical):
        return domains.categorical(attr.name, list(attr.domain_values))
    if isinstance(attr, Hierarchy):
        return domains.hierarchy(list(attr.level_columns), list(attr.paths),
                                 null_branch=attr.on_null == "category")
    return domains.binned(attr.name, attr.bins, range_fanout(attr),
                          null_node=attr.on_null == "category")


def hierarchy_codes(attr: Hierarchy, tree: domains.DomainTree) -> np.ndarray:
    """For each spine row, the code (node id) of its leaf in ``tree``."""
    finest = attr.level_columns[-1]
    labels = tree.values(finest)
    position = {v: i for i, v in enumerate(labels.tolist())}
    return np.array([position[p[-1]] for p in attr.paths], dtype=np.int64)


__all__ = ["DEFAULT_RANGE_FANOUT", "attribute_tree", "hierarchy_codes", "range_fanout"]
