"""Which engine runs a release's row-level step, and with what resources.

The spec's ``[engine]`` table (or ``engine = "spark"`` alone) and the matching
``dpsql release`` options (``--engine``, ``--memory-limit``, ``--threads``,
``--temp-dir``, ``--spark-master``) say how the rows are read and counted; they change
nothing in the release itself (the same spec and salt give the same counts on either
engine), so they are *not* stored in the release: a temporary directory or a cluster
address is the curator's business, not the analyst's.

* ``name``: ``"duckdb"`` (default: one machine, any row count within its disk) or
  ``"spark"`` (the row-level step runs as Spark SQL jobs; see docs/spec.md).
* ``memory_limit``: DuckDB's ``memory_limit`` (e.g. ``"4GB"``); default DuckDB's own
  (80 % of the machine's memory). Counting with a unit column sizes its buckets from it.
* ``threads``: DuckDB's thread count (default: one per core).
* ``temp_directory``: where DuckDB spills what does not fit in memory (default DuckDB's
  ``<database>.tmp`` / ``.tmp`` next to the working directory).
* ``master``: the Spark master URL for ``name = "spark"`` (default ``local[*]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from dpsql.errors import SpecError

ENGINES = ("duckdb", "spark")
_KEYS = ("name", "memory_limit", "threads", "temp_directory", "master")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class EngineSettings:
    """How the row-level step runs (never stored in a release)."""

    name: str = "duckdb"
    memory_limit: str | None = None
    threads: int | None = None
    temp_directory: str | None = None
    master: str | None = None

    def with_overrides(self, **values: Any) -> "EngineSettings":
        """These settings with every value that is not ``None`` replaced (the CLI's
        options over the spec's), validated as the spec's are."""
        given = {k: v for k, v in values.items() if v is not None}
        merged = {**{k: getattr(self, k) for k in _KEYS}, **given}
        return parse_engine({k: v for k, v in merged.items() if v is not None},
                            path="engine (command line)") if given else replace(self)


def size_bytes(text: str) -> int:
    """``"4GB"`` → 4·10⁹ bytes, ``"1.5GiB"`` → 1.5·2³⁰ (DuckDB's units)."""
    m = _SIZE.match(text)
    if m is None:
        raise SpecError(f"engine.memory_limit: {text!r} is not a size; write e.g. \"4GB\", "
                        "\"512MB\" or \"2GiB\"")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_engine(raw: Any, path: str = "engine") -> EngineSettings:
    """The spec's ``engine``: a name (``"duckdb"``/``"spark"``) or a table of settings."""
    if raw is None:
        return EngineSettings()
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: must be \"duckdb\", \"spark\" or a table with keys "
                        f"{', '.join(_KEYS)}")
    for key in raw:
        if key not in _KEYS:
            raise SpecError(f"{path}.{key}: unknown key; allowed: {', '.join(_KEYS)}")
    name = raw.get("name", "duckdb")
    if name not in ENGINES:
        raise SpecError(f"{path}.name: unknown engine {name!r}; allowed: {', '.join(ENGINES)}")
    memory = raw.get("memory_limit")
    if memory is not None:
        if not isinstance(memory, str):
            raise SpecError(f"{path}.memory_limit: must be a size string such as \"4GB\", got "
                            f"{memory!r}")
        if size_bytes(memory) < 64 * 2**20:
            raise SpecError(f"{path}.memory_limit: {memory!r} is below 64MiB; DuckDB cannot "
                            "count in less: give at least \"256MB\"")
    threads = raw.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise SpecError(f"{path}.threads: must be an integer >= 1, got {threads!r}")
    temp = raw.get("temp_directory")
    if temp is not None and (not isinstance(temp, str) or not temp):
        raise SpecError(f"{path}.temp_directory: must be a directory path, got {temp!r}")
    master = raw.get("master")
    if master is not None:
        if not isinstance(master, str) or not master:
            raise SpecError(f"{path}.master: must be a Spark master URL such as \"local[*]\" "
                            f"or \"spark://host:7077\", got {master!r}")
        if name != "spark":
            raise SpecError(f"{path}.master: is a Spark setting; set name = \"spark\" too, or "
                            "remove it")
    return EngineSettings(name, memory, threads, temp, master)
