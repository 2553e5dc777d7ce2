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

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dpsql.accuracy import ErrorModel
from dpsql.release_file import AttributeMeta, LevelMeta, Release, ViewMeta


MAX_RESOLVED = 4096
"""At most this many table names are memoized per catalog (see Catalog.resolve_table)."""

MAX_MATERIALIZED_NODES = 250_000
"""Sparse levels with at most this many public nodes get a node table at attach time
(about 50 bytes a node); larger ones are densified per query (see rewrite_query)."""


@dataclass(frozen=True)
class ViewInfo:
    """One view of one attached release.

    ``node_tables[k-1]`` is the SQL name of a table holding every public node of level k
    in a fixed order (``rowid`` = node id), or ``""`` when there is none (a large sparse
    level). ``count_types[k-1]`` is the type ``SUM(dp_count)`` has at level k when it
    differs from ``dp_count``'s own type (``"HUGEINT"`` for integer counts), else ``""``.
    Both are facts of the public catalog, computed once by :func:`dpsql.duck.attach`,
    as are the range predictions below (the planner ranks views by them; evaluating the
    error model per query cost 0.1-0.2 ms per candidate view)."""

    alias: str  # the ATTACH alias of its release
    meta: ViewMeta
    dense: bool  # every level table holds every public node, rowid = node id
    model: ErrorModel
    node_tables: tuple[str, ...] = ()
    count_types: tuple[str, ...] = ()
    prefix: tuple[str, tuple[str, ...]] | None = None
    """``(SQL name, label columns)`` of the view's prefix table when it holds one row per
    public leading group and bin (so a range over the last attribute is two rows a group,
    absent groups included); None otherwise."""
    bound_levels: tuple[bool, ...] = ()
    """Per level: True when the error model gives bounds, not variances (InfTDA)."""
    null_dropped: frozenset[str] = frozenset()
    """Attributes of the view whose NULL rows it left out (``on_null = "drop"``)."""
    range_errors: Any = field(default=None, compare=False, repr=False)
    """For a one-attribute range view: the predicted 95 % half-width of every bin range,
    ``range_errors[b0, b1]`` for b0 < b1 (numpy, precomputed at attach; None if not)."""

    predictions: dict = field(default_factory=dict, compare=False, repr=False)
    """Memo of the planner's (level, m) predictions (see choose_view)."""
    reads: dict = field(default_factory=dict, compare=False, repr=False)
    """Memo of the rewrite's facts of each level it reads (see rewrite_query.level_read)."""

    def bound_model(self, k: int) -> bool:
        if k <= len(self.bound_levels):
            return self.bound_levels[k - 1]
        return self.model.sum_variance(k, np.zeros(1, dtype=np.int64)) is None

    def node_table(self, k: int) -> str:
        return self.node_tables[k - 1] if k <= len(self.node_tables) else ""

    def count_type(self, k: int) -> str:
        return self.count_types[k - 1] if k <= len(self.count_types) else ""

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        """The string the error UDFs use to find this view: ``alias.view``."""
        return f"{self.alias}.{self.meta.name}"

    def level(self, k: int) -> LevelMeta:
        return self.meta.level(k)

    # Facts of the view's public metadata that the planner asks about on every query,
    # computed on first use (once per attached view, never per query).

    @cached_property
    def attribute_set(self) -> frozenset[str]:
        return frozenset(self.meta.attributes)

    @cached_property
    def column_levels(self) -> dict[str, int]:
        """Label column -> the first level that resolves it (its columns, or the name of
        a categorical attribute)."""
        out: dict[str, int] = {}
        for lv in self.meta.levels:
            for c in lv.columns:
                out.setdefault(c, lv.k)
            if lv.kind == "categorical":
                out.setdefault(lv.attribute, lv.k)
        return out

    @cached_property
    def attribute_levels(self) -> dict[str, tuple[LevelMeta, ...]]:
        """Attribute -> its levels, coarsest first."""
        out: dict[str, list[LevelMeta]] = {}
        for lv in self.meta.levels:
            out.setdefault(lv.attribute, []).append(lv)
        return {a: tuple(lvs) for a, lvs in out.items()}


@dataclass(frozen=True)
class ReleaseInfo:
    """One attached release: its catalog and public domain sizes."""

    alias: str
    release: Release
    views: tuple[ViewInfo, ...]
    column_sizes: tuple[tuple[str, int], ...]  # categorical/hierarchy column -> #values
    determines: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Hierarchy column -> the coarser columns its value determines (a province name
    that occurs under one region only determines that region), from the public domain."""
    choices: dict = field(default_factory=dict, compare=False, repr=False)
    """Memo of the planner's view choices by reference signature (see choose_view)."""
    domains: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Text label column -> its public values (for the notice on a literal outside them:
    :mod:`~dpsql.planner.check_literals`)."""

    integer_domains: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """Integer (BIGINT) label column -> its public values (the same notice; a string
    literal against it must be an integer)."""

    @cached_property
    def domain_values(self) -> dict[str, frozenset[str]]:
        return {c: frozenset(v) for c, v in self.domains}

    @cached_property
    def integer_values(self) -> dict[str, frozenset[int]]:
        return {c: frozenset(v) for c, v in self.integer_domains}

    def closure(self, columns) -> set[str]:
        """``columns`` plus every column they determine."""
        out = set(columns)
        for c, coarser in self.determines:
            if c in out:
                out.update(coarser)
        return out

    @property
    def attributes(self) -> dict[str, AttributeMeta]:
        return self.release.attributes

    def size(self, column: str) -> int:
        return self._sizes.get(column, 1)

    @cached_property
    def _sizes(self) -> dict[str, int]:
        return dict(self.column_sizes)

    def column_attribute(self, column: str) -> AttributeMeta | None:
        """The attribute a logical-table column belongs to (range attributes by name).
        Names match case-insensitively, as DuckDB's identifiers do (quoted or not)."""
        a = self._columns.get(column)
        if a is None:
            name = self._spelling.get(column.lower())
            a = None if name is None else self._columns[name]
        return a

    def column_name(self, column: str) -> str | None:
        """The declared spelling of an attribute column (``MODE`` -> ``mode``), or None."""
        return column if column in self._columns else self._spelling.get(column.lower())

    @cached_property
    def _spelling(self) -> dict[str, str]:
        return {c.lower(): c for c in reversed(list(self._columns))}

    @cached_property
    def _columns(self) -> dict[str, AttributeMeta]:
        out: dict[str, AttributeMeta] = {}
        for a in self.release.attributes.values():
            for c in ((a.name,) if a.kind == "range" else a.columns):
                out.setdefault(c, a)
        return out

    @cached_property
    def internal_columns(self) -> frozenset[str]:
        """Lower-case names of the columns that a rewritten query reads besides the
        attributes: node tables' ``rowid``/``dp_var``/``dp_node``/``dp_row`` (and InfTDA
        level tables' ``dp_parent``/``dp_fanout``/``dp_bias``), prefix tables'
        ``bin``/``cum``, and each binned attribute's ``<attr>_lo``/``_hi``/``_bin_lo``/
        ``_bin_hi``. An output alias of one of these names would bind to the column in
        WHERE, GROUP BY or HAVING, so the planner refuses it there."""
        names = {"rowid", "dp_var", "dp_node", "dp_row", "dp_parent", "dp_fanout",
                 "dp_bias", "bin", "cum"}
        for a in self.release.attributes.values():
            if a.kind == "range":
                names.update(f"{a.name}{s}".lower() for s in ("_lo", "_hi", "_bin_lo",
                                                              "_bin_hi"))
        return frozenset(names - {c.lower() for c in self._columns})  # attributes bind alike

    @cached_property
    def table_names(self) -> frozenset[str]:
        """Lower-case names of the release file's own tables (domains, levels, prefix
        sums, the catalog), which the planner qualifies with the alias when a query names
        them unqualified (:mod:`~dpsql.planner.resolve_helpers`)."""
        names = {"dpsql_release", "dpsql_views"}
        names.update(a.domain_table.lower() for a in self.release.attributes.values()
                     if a.domain_table)
        for v in self.views:
            names.update(lv.table.lower() for lv in v.meta.levels)
            if v.meta.prefix_table:
                names.add(v.meta.prefix_table.lower())
        return frozenset(names)

    def units_key(self) -> tuple[Any, ...]:
        """What must agree for two releases to be combined in one query."""
        return (self.release.neighbouring, self.release.unit, self.release.max_rows)


@dataclass(frozen=True)
class Catalog:
    """Every release attached to one connection."""

    releases: tuple[ReleaseInfo, ...] = ()
    locked: bool = False
    """The connection is locked down (:mod:`dpsql.lockdown`): the planner refuses what
    would read a file (:mod:`dpsql.planner.refuse_file_reads`)."""
    resolved: dict = field(default_factory=dict, compare=False, repr=False)
    """Memo of :meth:`resolve_table` by (db, name) as written: a catalog is never
    changed (attaching makes a new one), so neither is the answer. At most
    :data:`MAX_RESOLVED` names are kept (a query may name any number of public tables)."""

    @cached_property
    def logical_names(self) -> frozenset[str]:
        """Lower-case names of the logical tables: each release's name and alias, and
        its view names."""
        return frozenset(n.lower() for r in self.releases for n in
                         (r.release.name, r.alias, *(v.name for v in r.views)))

    def with_release(self, info: ReleaseInfo) -> "Catalog":
        kept = tuple(r for r in self.releases if r.alias != info.alias)
        return Catalog(kept + (info,), self.locked)

    def locked_down(self) -> "Catalog":
        """This catalog, for a locked-down connection."""
        return Catalog(self.releases, True)

    def find_view(self, key: str) -> ViewInfo | None:
        """A view by ``alias.view`` or, if unambiguous, by bare view name."""
        matches = [v for r in self.releases for v in r.views
                   if key in (v.key, v.name)]
        return matches[0] if len(matches) == 1 else None

    def resolve_table(self, db: str, name: str) -> tuple[ReleaseInfo, tuple[ViewInfo, ...]] | None:
        """The release and candidate views a FROM-clause table name denotes, or None if it
        is not a logical table (a public table, a CTE, a release's physical table)."""
        key = (db, name)
        try:
            return self.resolved[key]
        except KeyError:
            pass
        hit = self._resolve(db.lower(), name.lower())
        if len(self.resolved) < MAX_RESOLVED:
            self.resolved[key] = hit
        return hit

    def _resolve(self, ldb: str, lname: str
                 ) -> tuple[ReleaseInfo, tuple[ViewInfo, ...]] | None:
        for r in self.releases:
            if ldb and ldb != r.alias.lower():
                continue
            if lname in (r.release.name.lower(), r.alias.lower()):
                return r, r.views
            for v in r.views:
                if lname == v.name.lower():
                    return r, (v,)
        return None
