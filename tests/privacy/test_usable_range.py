"""The usable budget range and the samplers' exactness bound: budgets whose noise cannot
be drawn exactly (or is below float resolution) are refused with the range stated, and no
sampler ever casts a non-finite or inexact draw to int64."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsql.errors import InternalError, InvalidPrivacyParameterError
from dpsql.privacy import ApproxDP, PureDP, ZCDP, rng
from dpsql.privacy.budgets import (EPSILON_RANGE, MAX_NOISE_SCALE, MIN_NOISE_SCALE,
                                   RHO_RANGE, check_usable)
from dpsql.privacy.samplers import _exact_int64, discrete_gaussian, discrete_laplace


def test_the_range_follows_from_the_noise_scales():
    assert RHO_RANGE == (2.0 ** -95, 2.0 ** 39)
    assert EPSILON_RANGE == (2.0 ** -47, 2.0 ** 20)
    # a one-level view of sensitivity 1 at either end draws noise of the extreme scales
    assert math.isclose(1 / math.sqrt(2 * RHO_RANGE[0]), MAX_NOISE_SCALE)
    assert math.isclose(1 / math.sqrt(2 * RHO_RANGE[1]), MIN_NOISE_SCALE)
    # the largest geometric magnitude of a 53-bit uniform stays an exact integer
    assert math.floor(-math.log1p(-(1 - 2.0 ** -53)) * MAX_NOISE_SCALE) < 2 ** 53


@pytest.mark.parametrize("budget", [ZCDP(RHO_RANGE[0]), ZCDP(RHO_RANGE[1]), ZCDP(1),
                                    PureDP(EPSILON_RANGE[0]), PureDP(EPSILON_RANGE[1]),
                                    ApproxDP(1, 1e-9)])
def test_budgets_inside_the_range_pass(budget):
    assert check_usable(budget) is budget


@pytest.mark.parametrize("budget", [ZCDP("1e-300"), ZCDP("1e308"), ZCDP(RHO_RANGE[1] * 2),
                                    PureDP("1e-20"), PureDP(2.0 ** 21),
                                    ApproxDP(1e7, 1e-9)])
def test_budgets_outside_the_range_are_refused_with_it(budget):
    with pytest.raises(InvalidPrivacyParameterError,
                       match=r"usable range: 2\.52e-29 <= rho <= 5\.5e\+11, "
                             r"7\.11e-15 <= epsilon <= 1\.05e\+06"):
        check_usable(budget)


def test_the_samplers_refuse_scales_beyond_exactness():
    g = rng(1)
    x = discrete_laplace(MAX_NOISE_SCALE, 1000, g)
    assert x.dtype == np.int64 and np.all(np.abs(x) < 2 ** 53)
    with pytest.raises(InvalidPrivacyParameterError, match=r"scale = .* samplers stop"):
        discrete_laplace(MAX_NOISE_SCALE * 2, 10, g)
    with pytest.raises(InvalidPrivacyParameterError, match=r"sigma2 = .* samplers stop"):
        discrete_gaussian(MAX_NOISE_SCALE ** 2 * 4, 10, g)
    for bad in (math.inf, math.nan, -1.0):
        with pytest.raises(InvalidPrivacyParameterError, match="finite"):
            discrete_gaussian(bad, 10, g)


def test_no_unchecked_cast_to_int64():
    assert _exact_int64(np.array([0.0, -3.0, 2.0 ** 52])).tolist() == [0, -3, 2 ** 52]
    for bad in (math.inf, -math.inf, math.nan, 2.0 ** 53, 1e300):
        with pytest.raises(InternalError, match="beyond 2\\^53"):
            _exact_int64(np.array([1.0, bad]))
