"""Shared helpers for the benchmarks: timing, machine description, JSON output."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Callable

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """The minimum wall time of ``repeat`` calls (the least noisy estimate on a shared box)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def median_of(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return path
