"""Privacy accounting, the secure RNG and the noise samplers.

Lowest layer of dpsql: it imports nothing else from the package but ``dpsql.errors``.
The RNG factory :func:`rng` (in :mod:`dpsql.privacy.generator`) and the samplers
(:mod:`dpsql.privacy.samplers`) are loaded on first use, so that the query side, which needs budgets to read a release's
catalog, never even loads code that draws noise (DESIGN: answering is post-processing).
"""

from __future__ import annotations

import importlib
from typing import Any

from dpsql.privacy.budgets import (
    ApproxDP,
    Budget,
    PureDP,
    ZCDP,
    budget_from_json,
    ceil_float,
    compose,
    normalise_weights,
    zcdp_epsilon,
    zcdp_rho,
)
from dpsql.privacy.calibrate import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_rho,
    gaussian_sigma_zcdp,
    laplace_scale,
)
from dpsql.privacy.units import (
    HistogramSensitivity,
    Neighbouring,
    PrivacyUnit,
    check_max_rows,
    histogram_sensitivity,
)

_LAZY = {
    "describe_rng": "dpsql.privacy.generator", "is_private_rng": "dpsql.privacy.generator",
    "rng": "dpsql.privacy.generator",
    "bernoulli_exp": "dpsql.privacy.samplers", "discrete_gaussian": "dpsql.privacy.samplers",
    "discrete_laplace": "dpsql.privacy.samplers", "gaussian": "dpsql.privacy.samplers",
    "laplace": "dpsql.privacy.samplers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpsql.privacy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ApproxDP", "Budget", "PureDP", "ZCDP", "budget_from_json", "compose",
    "zcdp_epsilon", "zcdp_rho",
    "analytic_gaussian_delta", "analytic_gaussian_sigma", "classic_gaussian_sigma",
    "gaussian_rho", "gaussian_sigma_zcdp", "laplace_scale",
    "ceil_float", "normalise_weights",
    "HistogramSensitivity", "Neighbouring", "PrivacyUnit", "check_max_rows",
    "histogram_sensitivity",
    *_LAZY,
]
