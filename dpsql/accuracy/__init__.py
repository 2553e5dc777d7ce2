"""Error models: pure functions of public parameters (see :mod:`dpsql.accuracy.base`)."""

from __future__ import annotations

import importlib
import json
import threading
import weakref
from collections import OrderedDict
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


_SHARED: "weakref.WeakValueDictionary[str, ErrorModel]" = weakref.WeakValueDictionary()
_RECENT: "OrderedDict[str, ErrorModel]" = OrderedDict()
RECENT_MODELS = 8
"""Models kept alive after their last user lets go (a connection closed and reopened
keeps its set-up); any model still referenced is shared whatever this number."""
_LOCK = threading.Lock()


def load(params: dict[str, Any]) -> ErrorModel:
    """The error model of the parameters a release stored, shared in the process.

    A model is a pure function of its parameters, so every view, level and connection
    whose stored parameters are equal gets the *same* object: a model's lazily built
    set-up (the range-optimal covariance's prefix sums: one K×K eigendecomposition) is
    then paid once per process, not once per access. Models stay shared while anything
    references them, and the :data:`RECENT_MODELS` last used are kept besides."""
    key = json.dumps(params, sort_keys=True, separators=(",", ":"))
    with _LOCK:
        model = _SHARED.get(key)
        if model is not None:
            _RECENT[key] = model
            _RECENT.move_to_end(key)
            return model
    model = _build(params)
    with _LOCK:
        model = _SHARED.setdefault(key, model)
        _RECENT[key] = model
        _RECENT.move_to_end(key)
        while len(_RECENT) > RECENT_MODELS:
            _RECENT.popitem(last=False)
    return model


def _build(params: dict[str, Any]) -> ErrorModel:
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
