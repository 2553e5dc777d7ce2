"""One BLAS thread for dpsql's small dense linear algebra.

numpy's wheels ship OpenBLAS with one worker thread per core, and those workers
busy-wait for each other between the many small calls that a LAPACK routine makes.
On an idle machine that costs nothing for a small matrix; when other processes keep the
cores busy (a shared server, CI, a notebook beside a build) the threads wait on cores
they do not get, and a small eigendecomposition becomes many times slower than on one
thread. Measured by ``benchmarks/blas_threads.py`` on 2 cores (numpy 2.4, OpenBLAS
0.3.31, pthreads), the range-optimal set-up of K bins (solver and factorisation, a fresh
process, median of 5), OpenBLAS's default two threads against one:

======  ===================  ===========================================
K       idle                 two busy processes beside it
======  ===================  ===========================================
256     0.10 s / 0.095 s     0.52 s / 0.20 s (default: 0.32 to 4.8 s)
512     0.24 s / 0.27 s      1.4 s / 0.52 s
1,024   0.98 s / 1.42 s      7.2 s / 2.9 s
======  ===================  ===========================================

So :func:`limited` caps BLAS at one thread around a dense computation on matrices of
at most :data:`MAX_SINGLE_THREAD_SIZE` rows (the range-optimal covariance's solver,
factorisation, covariance and noise draw), where one thread is as fast idle, and leaves
larger ones to BLAS's own thread count, where two threads win on an idle machine. The
README's release (a 256-bin optimal view) builds in the same time idle (0.80 s against
0.81 s) and faster under load (2.4 s against 3.3 s; every BLAS call on one thread:
1.6 s). The cap is temporary: threadpoolctl (a dependency) sets it on entry and
restores the count it found on exit, so a program that embeds dpsql keeps its own
BLAS settings (``OPENBLAS_NUM_THREADS``, ``threadpoolctl.threadpool_limits``)
everywhere else. BLAS has one thread count per process, so blocks from several Python
threads (``dpsql serve``) take turns (a lock): otherwise one thread's exit would
restore the count under another's block, or keep a cap it found set by another as the
count to restore. Only small blocks take the lock, and a factorisation is made once per
process and shape. With threadpoolctl ≥ 3.8, OpenBLAS's count is set only by the Python
thread that controls it: when the program's own thread holds that control, dpsql's cap
does nothing, as the program asked. The first use costs 2 to 40 ms (threadpoolctl
finds the loaded BLAS), then 6 µs per use.
"""

from __future__ import annotations

import importlib
import threading
from contextlib import contextmanager
from typing import Any, Iterator

MAX_SINGLE_THREAD_SIZE = 256
"""The largest matrix dimension that :func:`limited` runs on one BLAS thread."""

_lock = threading.RLock()
_controller_cache: list[Any] = []


def _controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded (numpy's), made once."""
    if not _controller_cache:
        from threadpoolctl import ThreadpoolController  # 2 to 40 ms, once

        importlib.import_module("numpy")  # its BLAS is loaded before the controller looks

        _controller_cache.append(ThreadpoolController())
    return _controller_cache[0]


@contextmanager
def limited(size: int) -> Iterator[None]:
    """One BLAS thread for the block when ``size`` (the largest matrix dimension it
    works on) is at most :data:`MAX_SINGLE_THREAD_SIZE`; BLAS's own count otherwise.

    >>> import numpy as np
    >>> with limited(256):
    ...     w = np.linalg.eigvalsh(np.eye(256))
    >>> float(w.sum())
    256.0
    """
    if size > MAX_SINGLE_THREAD_SIZE:
        yield
        return
    with _lock, _controller().limit(limits=1, user_api="blas"):
        yield
