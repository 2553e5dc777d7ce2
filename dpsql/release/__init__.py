"""The curator's side: build a release from a spec and a table, and read it back."""

from dpsql.release.build import build_release
from dpsql.release.store import Release, open_release

__all__ = ["Release", "build_release", "open_release"]
