"""dpsql runs its small dense linear algebra on one BLAS thread, and only that
(:mod:`dpsql._blas`): the range-optimal solver's and factorisation's eigendecompositions
of a small K see one thread, a larger matrix keeps BLAS's count, and the count found
before is back afterwards, also when threads overlap. No timing here: the reason (25×
under load at K = 256) is measured by benchmarks/blas_threads.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dpsql import _blas
from dpsql.accuracy import optimal_ranges


def _threads() -> set[int]:
    """The live thread count of every BLAS library dpsql controls (numpy's)."""
    return {lib["num_threads"] for lib in _blas._controller().select(user_api="blas").info()}


@pytest.fixture
def two_threads():
    """BLAS at two threads for the test (whatever the machine's cores), then as before."""
    if not _threads():
        pytest.skip("numpy's BLAS is not one that threadpoolctl controls")
    with threadpool_limits(limits=2, user_api="blas"):
        assert _threads() == {2}
        yield


def test_range_optimal_eigendecompositions_run_on_one_thread(two_threads, monkeypatch):
    seen: list[set[int]] = []
    eigh = np.linalg.eigh

    def watched(a, *args, **kwargs):  # the real eigh, noting the thread count it ran with
        seen.append(_threads())
        return eigh(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", watched)
    bins = 29  # a K no other test solves: the solver and the factorisation run afresh
    lam, gap, steps = optimal_ranges.optimal_range_weights(bins)
    optimal_ranges.factorise(bins, lam)
    assert gap <= 1e-5 and len(seen) == steps + 1  # every solver step, then the factor
    assert all(s == {1} for s in seen)
    assert _threads() == {2}  # restored


def test_a_large_matrix_keeps_the_blas_thread_count(two_threads):
    with _blas.limited(_blas.MAX_SINGLE_THREAD_SIZE + 1):
        assert _threads() == {2}
    with _blas.limited(_blas.MAX_SINGLE_THREAD_SIZE):
        assert _threads() == {1}
    assert _threads() == {2}


def test_blocks_from_two_threads_take_turns_and_restore_the_count():
    before = _threads()
    if not before:
        pytest.skip("numpy's BLAS is not one that threadpoolctl controls")
    inside, seen = threading.Event(), []

    def work() -> None:
        with _blas.limited(64):
            inside.set()
            seen.append(_threads())

    first, second = threading.Thread(target=work), threading.Thread(target=work)
    with _blas.limited(64):  # holds the turn: both threads wait for it
        first.start(), second.start()
        assert not inside.wait(timeout=0.2)
    first.join(timeout=10), second.join(timeout=10)
    assert seen == [{1}, {1}] and _threads() == before
