"""Privacy accounting, the secure RNG and the noise samplers.

Lowest layer of dpsql: it imports nothing else from the package but ``dpsql.errors``.
"""

from dpsql.privacy.budgets import (
    ApproxDP,
    Budget,
    PureDP,
    ZCDP,
    budget_from_json,
    compose,
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
from dpsql.privacy.rng import describe_rng, is_private_rng, rng
from dpsql.privacy.samplers import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    gaussian,
    laplace,
)
from dpsql.privacy.units import Neighbouring, PrivacyUnit

__all__ = [
    "ApproxDP", "Budget", "PureDP", "ZCDP", "budget_from_json", "compose",
    "zcdp_epsilon", "zcdp_rho",
    "analytic_gaussian_delta", "analytic_gaussian_sigma", "classic_gaussian_sigma",
    "gaussian_rho", "gaussian_sigma_zcdp", "laplace_scale",
    "describe_rng", "is_private_rng", "rng",
    "bernoulli_exp", "discrete_gaussian", "discrete_laplace", "gaussian", "laplace",
    "Neighbouring", "PrivacyUnit",
]
