"""What the planner knows about the attached releases: a frozen, public-only catalog.

Built once per attach by :mod:`dpsql.duck` from the release catalog (``dpsql_release``,
``dpsql_views``) plus a few public facts read from the release tables: the number of
public values of every categorical/hierarchy column (domain tables) and whether each
view's level tables are dense (one row per public node, in node-id order, so that
``rowid`` *is* the node id of :mod:`dpsql.mechanisms.base`) or sparse (InfTDA stores only
positive nodes; the planner then joins the level onto its public domain so that absent
nodes read as 0 and count towards the error bound). Nothing here is data-dependent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpsql.accuracy import ErrorModel
from dpsql.release.store import AttributeMeta, LevelMeta, Release, ViewMeta


@dataclass(frozen=True)
class ViewInfo:
    """One view of one attached release."""

    alias: str  # the ATTACH alias of its release
    meta: ViewMeta
    dense: bool  # every level table holds every public node, rowid = node id
    model: ErrorModel

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        """The string the error UDFs use to find this view: ``alias.view``."""
        return f"{self.alias}.{self.meta.name}"

    def level(self, k: int) -> LevelMeta:
        return self.meta.level(k)


@dataclass(frozen=True)
class ReleaseInfo:
    """One attached release: its catalog and public domain sizes."""

    alias: str
    release: Release
    views: tuple[ViewInfo, ...]
    column_sizes: tuple[tuple[str, int], ...]  # categorical/hierarchy column -> #values

    @property
    def attributes(self) -> dict[str, AttributeMeta]:
        return self.release.attributes

    def size(self, column: str) -> int:
        return dict(self.column_sizes).get(column, 1)

    def column_attribute(self, column: str) -> AttributeMeta | None:
        """The attribute a logical-table column belongs to (range attributes by name)."""
        for a in self.release.attributes.values():
            if a.kind == "range" and a.name == column:
                return a
            if a.kind != "range" and column in a.columns:
                return a
        return None

    def units_key(self) -> tuple[Any, ...]:
        """What must agree for two releases to be combined in one query."""
        return (self.release.neighbouring, self.release.unit, self.release.max_rows)


@dataclass(frozen=True)
class Catalog:
    """Every release attached to one connection."""

    releases: tuple[ReleaseInfo, ...] = ()

    def with_release(self, info: ReleaseInfo) -> "Catalog":
        kept = tuple(r for r in self.releases if r.alias != info.alias)
        return Catalog(kept + (info,))

    def find_view(self, key: str) -> ViewInfo | None:
        """A view by ``alias.view`` or, if unambiguous, by bare view name."""
        matches = [v for r in self.releases for v in r.views
                   if key in (v.key, v.name)]
        return matches[0] if len(matches) == 1 else None

    def resolve_table(self, db: str, name: str) -> tuple[ReleaseInfo, tuple[ViewInfo, ...]] | None:
        """The release and candidate views a FROM-clause table name denotes, or None if it
        is not a logical table (a public table, a CTE, a release's physical table)."""
        lname, ldb = name.lower(), db.lower()
        for r in self.releases:
            if ldb and ldb != r.alias.lower():
                continue
            if lname in (r.release.name.lower(), r.alias.lower()):
                return r, r.views
            for v in r.views:
                if lname == v.name.lower():
                    return r, (v,)
        return None
