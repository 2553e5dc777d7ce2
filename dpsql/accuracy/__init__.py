"""Error models: pure functions of public parameters (see :mod:`dpsql.accuracy.base`)."""

from __future__ import annotations

import importlib
from typing import Any

from dpsql.accuracy.base import ErrorModel, Variance, register, registered
from dpsql.errors import IntegrityError

# kind -> module that defines (and registers) it; imported on first use.
_MODULES = {
    "inftda": "dpsql.accuracy.inftda",
    "vanilla_gauss": "dpsql.accuracy.inftda",
    "stability_histogram": "dpsql.accuracy.inftda",
    "cascade": "dpsql.accuracy.cascade",
    "cascade2d": "dpsql.accuracy.cascade",
    "cascade_optimal": "dpsql.accuracy.optimal_ranges",
    "btree": "dpsql.accuracy.btree",
    "tree_counts": "dpsql.accuracy.tree_counts",
    "reconciled": "dpsql.accuracy.reconciled",
}


def load(params: dict[str, Any]) -> ErrorModel:
    """Rebuild an error model from the parameters a release stored."""
    kind = params.get("kind")
    cls = registered(str(kind))
    if cls is None and kind in _MODULES:
        importlib.import_module(_MODULES[kind])
        cls = registered(str(kind))
    if cls is None:
        raise IntegrityError(
            f"the release names an unknown error model {kind!r}; it was probably written by "
            "a newer dpsql: upgrade dpsql to read it")
    return cls.from_params(params)


__all__ = ["ErrorModel", "Variance", "load", "register", "registered"]
