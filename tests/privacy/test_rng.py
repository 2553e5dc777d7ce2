import numpy as np
import pytest
from randomgen import AESCounter

import dpsql
from dpsql.privacy import describe_rng, is_private_rng, rng


def test_generator_is_aes_counter_mode():
    assert isinstance(rng().bit_generator, AESCounter)
    assert isinstance(rng(1).bit_generator, AESCounter)


def test_unseeded_key_comes_from_os_entropy():
    keys = {tuple(rng().bit_generator.state["s"]["seed"][:2]) for _ in range(3)}
    assert len(keys) == 3


def test_descriptions():
    assert describe_rng(None) == "os-entropy AES-CTR"
    assert is_private_rng(describe_rng(None))
    assert describe_rng(5).startswith("seeded: not private")
    assert not is_private_rng(describe_rng(5))


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_bad_seed(bad):
    with pytest.raises(dpsql.InvalidPrivacyParameterError, match="seed"):
        rng(bad)


def test_streams_are_independent_of_numpy_global_state():
    np.random.seed(0)
    a = rng(9).integers(0, 10**9, 4)
    np.random.seed(1)
    b = rng(9).integers(0, 10**9, 4)
    assert np.array_equal(a, b)
