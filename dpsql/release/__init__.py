"""The curator's side: build a release from a spec and a table, and read it back.

``build_release`` and ``plan_release`` (its dry run) are imported on first use, and
``Release``/``open_release`` are re-exported from :mod:`dpsql.release_file`. The query
side (planner, duck, dbapi, server, sqlalchemy) and the report import
:mod:`dpsql.release_file` directly, never this package: importing the builder would pull
in ``dpsql.mechanisms`` and the RNG, which answering queries must never load (DESIGN,
layering)."""

from dpsql.release_file import Release, open_release

__all__ = ["Release", "build_release", "open_release", "plan_release"]


def __getattr__(name: str):  # PEP 562
    if name in ("build_release", "plan_release"):
        from dpsql.release import build

        return getattr(build, name)
    raise AttributeError(f"module 'dpsql.release' has no attribute {name!r}")
