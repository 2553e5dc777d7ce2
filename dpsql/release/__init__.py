"""The curator's side: build a release from a spec and a table, and read it back.

``build_release`` and ``plan_release`` (its dry run) are imported on first use: the query side (planner, duck, dbapi) reads
release files through :mod:`dpsql.release.store`, and importing the builder would pull in
``dpsql.mechanisms`` and the RNG, which answering queries must never load (DESIGN,
layering)."""

from dpsql.release.store import Release, open_release

__all__ = ["Release", "build_release", "open_release", "plan_release"]


def __getattr__(name: str):  # PEP 562
    if name in ("build_release", "plan_release"):
        from dpsql.release import build

        return getattr(build, name)
    raise AttributeError(f"module 'dpsql.release' has no attribute {name!r}")
