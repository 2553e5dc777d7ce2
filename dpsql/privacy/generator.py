"""The one RNG factory: AES counter mode keyed from OS entropy.

There is no global RNG in dpsql. Code that draws noise receives a
:class:`numpy.random.Generator` from :func:`rng` and passes it down explicitly.
"""

from __future__ import annotations

import os

import numpy as np
from randomgen import AESCounter

from dpsql.errors import InvalidPrivacyParameterError

PRIVATE_DESCRIPTION = "os-entropy AES-CTR"


def rng(seed: int | None = None) -> np.random.Generator:
    """A numpy Generator over randomgen's AES-128 counter-mode bit generator.

    With ``seed=None`` (the default, and the only private choice) the 128-bit AES key is
    read from ``os.urandom``. An integer seed makes the stream reproducible for tests and
    demos; anything built with it must be labelled with :func:`describe_rng` as
    ``seeded: not private``.

    >>> g = rng(7); int(g.integers(0, 1000)) == int(rng(7).integers(0, 1000))
    True
    """
    if seed is None:
        key = int.from_bytes(os.urandom(16), "little")
        return np.random.Generator(AESCounter(key=key))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidPrivacyParameterError(
            f"seed must be a non-negative integer or None, got {seed!r}")
    return np.random.Generator(AESCounter(seed=int(seed)))


def describe_rng(seed: int | None) -> str:
    """How a release's noise was drawn, as recorded in the release file."""
    if seed is None:
        return PRIVATE_DESCRIPTION
    return f"seeded: not private (seed={int(seed)})"


def is_private_rng(description: str) -> bool:
    """True if a recorded RNG description is the private, OS-keyed generator."""
    return description == PRIVATE_DESCRIPTION
