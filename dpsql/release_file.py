"""The release file's read side: its catalog, as the query side and the report see it.

A release is one DuckDB database (DESIGN "Release file"):

* ``dpsql_release`` — one row: format and dpsql versions, name, creation time,
  neighbouring relation, privacy unit, the total guarantee in every form (native JSON,
  ρ, and ε at ``report_delta``), the RNG description and the spec as JSON.
* ``dpsql_views`` — one row per view: name, mechanism, weight, budget share (JSON),
  levels and attributes (JSON), the error model's parameters (JSON).
* ``<view>__l<k>`` — the private nodes of level k, ``<view>__prefix`` for range views,
  ``<view>__measured`` for InfTDA views (the noisy measurements of the root and of the
  released zeros, :mod:`dpsql.release.measured`), and ``dpsql_domain__<attribute>``
  tables listing the public domains.
* The SQL macros of ``udfs/*.sql``, so that a plain DuckDB client can use them.

This module reads the catalog (:func:`open_release`, :func:`read_catalog`) into frozen
dataclasses (:class:`Release`, :class:`ViewMeta`, :class:`LevelMeta`,
:class:`AttributeMeta`). It lives outside :mod:`dpsql.release`, the curator's package, so
that reading a release never imports the builder, the mechanisms or the RNG (DESIGN,
layering). The writer is :mod:`dpsql.release.store`: it imports this module, never the
reverse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpsql._sql import quote_ident
from dpsql.accuracy import ErrorModel, load
from dpsql.accuracy.inftda_support import Measured, Support
from dpsql.domains.bin_edges import PRODUCT
from dpsql.errors import IntegrityError, OperationalError
from dpsql.privacy import Budget, budget_from_json

FORMAT_VERSION = 1

MEASURED_TABLE = "{view}__measured"
"""An InfTDA view's table of its root's and its measured released zeros' noisy
measurements (:mod:`dpsql.release.measured`)."""


@dataclass(frozen=True)
class LevelMeta:
    """One level of a view as stored: its table and the attribute it refines."""

    k: int
    table: str
    attribute: str
    kind: str  # categorical | hierarchy | range
    columns: tuple[str, ...]  # the table columns that carry this level's labels
    n_nodes: int  # size of the public domain at this level
    span: int | None = None  # range levels: bins per node

    def to_json(self) -> dict:
        return {"k": self.k, "table": self.table, "attribute": self.attribute,
                "kind": self.kind, "columns": list(self.columns), "n_nodes": self.n_nodes,
                "span": self.span}

    @classmethod
    def from_json(cls, d: dict) -> "LevelMeta":
        return cls(d["k"], d["table"], d["attribute"], d["kind"], tuple(d["columns"]),
                   d["n_nodes"], d.get("span"))


@dataclass(frozen=True)
class AttributeMeta:
    """A public attribute as the query side sees it."""

    name: str
    kind: str
    columns: tuple[str, ...]
    domain_table: str
    lower: float | None = None
    upper: float | None = None
    bins: int | None = None
    value_type: str | None = None  # range: integer | decimal | real (None: before typing)
    step: float | None = None  # range: the grid step of integer (1) and decimal values
    on_null: str = "error"  # error | drop (per view) | category (NULL is a released value)
    unit: str | None = None  # date/timestamp bins: day, week, month, hour, ... (None: width)
    edge_mode: str = PRODUCT  # range: dpsql.domains.bin_edges (a file without it: product)

    @property
    def null_category(self) -> bool:
        return self.on_null == "category"

    @property
    def width(self) -> float | None:
        if self.kind != "range":
            return None
        return (self.upper - self.lower) / self.bins  # type: ignore[operator]

    def to_json(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "columns": list(self.columns),
               "domain_table": self.domain_table, "lower": self.lower, "upper": self.upper,
               "bins": self.bins}
        if self.value_type is not None:
            out.update(value_type=self.value_type, step=self.step)
        if self.on_null != "error":
            out["on_null"] = self.on_null
        if self.unit is not None:
            out["unit"] = self.unit
        if self.kind == "range":
            out["edge_mode"] = self.edge_mode
        return out

    @classmethod
    def from_json(cls, d: dict) -> "AttributeMeta":
        """A release written before the decimal edges has no ``edge_mode``: its stored
        edges, its data's bins and so the planner's comparisons are the product edges."""
        return cls(d["name"], d["kind"], tuple(d["columns"]), d["domain_table"],
                   d.get("lower"), d.get("upper"), d.get("bins"), d.get("value_type"),
                   d.get("step"), d.get("on_null", "error"), d.get("unit"),
                   d.get("edge_mode", PRODUCT))


@dataclass(frozen=True)
class ViewMeta:
    """One view as stored in ``dpsql_views``."""

    name: str
    mechanism: str
    weight: Fraction
    budget: Budget
    levels: tuple[LevelMeta, ...]
    attributes: tuple[str, ...]
    error_params: dict[str, Any]
    prefix_table: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def error_model(self) -> ErrorModel:
        return load(self.error_params)

    def level(self, k: int) -> LevelMeta:
        return self.levels[k - 1]


@dataclass(frozen=True)
class Release:
    """A release file's catalog (everything but the node tables)."""

    path: str
    name: str
    format_version: int
    dpsql_version: str
    created: str
    neighbouring: str
    unit: str
    max_rows: int
    budget: Budget
    rho: float
    epsilon: float
    delta: float
    rng: str
    spec: dict[str, Any]
    views: dict[str, ViewMeta]
    attributes: dict[str, AttributeMeta]
    # What ingestion did (rows dropped/clamped): set by build_release for the curator;
    # data-dependent, so never stored in the file and empty when a release is opened.
    report: Any = field(default=None, compare=False, repr=False)

    @property
    def seeded(self) -> bool:
        return self.rng != "os-entropy AES-CTR"

    def view(self, name: str) -> ViewMeta:
        return self.views[name]


def open_release(path: str | Path) -> Release:
    """Read a release's catalog. The file is opened read-only and closed again."""
    p = Path(path)
    if not p.exists():
        raise OperationalError(f"release file {str(p)!r} does not exist")
    try:
        con = duckdb.connect(str(p), read_only=True)
    except duckdb.Error as err:
        raise OperationalError(f"cannot open {str(p)!r} as a DuckDB file: {err}") from err
    try:
        return read_catalog(con, str(p))
    finally:
        con.close()


def read_domains(path: str | Path, release: Release) -> dict[str, list[tuple]]:
    """The public domain of each categorical and hierarchy attribute of ``release``: its
    ``dpsql_domain__<attr>`` rows (one tuple per path, the attribute's columns in order)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {a.name: con.execute(
            "SELECT " + ", ".join(quote_ident(c) for c in a.columns)
            + f" FROM {quote_ident(a.domain_table)}").fetchall()
            for a in release.attributes.values() if a.kind != "range"}
    finally:
        con.close()


def read_catalog(con: duckdb.DuckDBPyConnection, path: str, schema: str | None = None
                 ) -> Release:
    """Read the catalog through an open connection (``schema`` = an attached alias)."""
    pre = f"{quote_ident(schema)}." if schema else ""
    try:
        cur = con.execute(f"SELECT * FROM {pre}dpsql_release")
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
    except duckdb.Error as err:
        raise IntegrityError(f"{path!r} is not a dpsql release (no dpsql_release table)"
                             ) from err
    if len(rows) != 1:
        raise IntegrityError(f"{path!r}: dpsql_release must hold one row, found {len(rows)}")
    r = dict(zip(cols, rows[0]))
    if r["format_version"] > FORMAT_VERSION:
        raise IntegrityError(f"{path!r} uses release format {r['format_version']}, newer than "
                             f"this dpsql understands ({FORMAT_VERSION}); upgrade dpsql")
    cur = con.execute(f"SELECT * FROM {pre}dpsql_views ORDER BY name")
    vcols = [d[0] for d in cur.description]
    return catalog_from_rows(path, r, [dict(zip(vcols, row)) for row in cur.fetchall()])


def read_support(con: duckdb.DuckDBPyConnection, view: ViewMeta, schema: str | None = None
                 ) -> Support:
    """The support of an InfTDA view whose error model reads it (``reads_support``):
    each released node's parent row, public fan-out, bootstrap bias and variance and count,
    level by level, in row order (the level tables' ``dp_parent``/``dp_fanout``/
    ``dp_bias``/``dp_var``/``dp_count``), with each node's linear-model variance computed
    once, and InfTDA's noisy measurements where the release stores them (``dp_measured``
    and the ``<view>__measured`` table, :mod:`dpsql.release.measured`; a release written
    before they were stored has none, and no ``dp_estimate``). All of it is the
    mechanism's public output; the query side and the report read it once."""
    pre = f"{quote_ident(schema)}." if schema else ""
    try:
        zeros = con.execute(
            f"SELECT dp_level, dp_code, dp_measured FROM "
            f"{pre}{quote_ident(MEASURED_TABLE.format(view=view.name))} "
            "ORDER BY dp_level, dp_code").fetchnumpy()
    except duckdb.CatalogException:
        zeros = None
    also = ", dp_measured" if zeros is not None else ""
    parents, fanouts, biases, variances, counts, measured = [], [], [], [], [], []
    for lv in view.levels:
        table = quote_ident(lv.table)
        try:
            cols = con.execute(f"SELECT dp_parent, dp_fanout, dp_bias, dp_var, dp_count"
                               f"{also} FROM {pre}{table} ORDER BY rowid").fetchnumpy()
        except duckdb.Error as err:
            raise IntegrityError(f"view {view.name!r}: level table {lv.table!r} lacks the "
                                 f"support columns its error model needs ({err}); the file "
                                 "is damaged or was not written by dpsql") from err
        parents.append(np.asarray(cols["dp_parent"], dtype=np.int64))
        fanouts.append(np.asarray(cols["dp_fanout"], dtype=np.int64))
        biases.append(np.asarray(cols["dp_bias"], dtype=np.float64))
        variances.append(np.asarray(cols["dp_var"], dtype=np.float64))
        counts.append(np.asarray(cols["dp_count"], dtype=np.float64))
        if zeros is not None:
            measured.append(_floats(cols["dp_measured"]))
    model = view.error_model
    root = np.full(1 if parents and parents[0].size else 0, model.level_sizes[1], np.int64)
    support = Support.from_levels(parents, [root] + fanouts, biases, variances, counts
                                  ).with_linear(model.sigma2, model.root_sigma2)
    if zeros is None:
        return support
    level = np.asarray(zeros["dp_level"], dtype=np.int64)
    codes = np.asarray(zeros["dp_code"], dtype=np.int64)
    x = _floats(zeros["dp_measured"])
    root_x = Measured(x[level == 0], np.zeros(0, np.int64), np.zeros(0))  # its row 0
    return replace(support, measured=(root_x,) + tuple(
        Measured(m, codes[level == lv.k], x[level == lv.k])
        for lv, m in zip(view.levels, measured)))


def _floats(column: Any) -> np.ndarray:
    """A numeric column as float64, NULL (a node that was not measured) as NaN."""
    if isinstance(column, np.ma.MaskedArray):
        return column.astype(np.float64).filled(np.nan)
    return np.asarray(column, dtype=np.float64)


def catalog_from_rows(path: str, r: dict[str, Any], view_rows: list[dict[str, Any]]
                      ) -> Release:
    """The :class:`Release` described by a ``dpsql_release`` row and the ``dpsql_views``
    rows (JSON columns as text), in ``name`` order."""
    attributes = {a["name"]: AttributeMeta.from_json(a) for a in json.loads(r["attributes"])}
    views: dict[str, ViewMeta] = {}
    for v in view_rows:
        views[v["name"]] = ViewMeta(
            name=v["name"], mechanism=v["mechanism"], weight=Fraction(v["weight"]),
            budget=budget_from_json(json.loads(v["budget"])),
            levels=tuple(LevelMeta.from_json(x) for x in json.loads(v["levels"])),
            attributes=tuple(json.loads(v["attributes"])),
            error_params=json.loads(v["error_model"]), prefix_table=v["prefix_table"],
            info=json.loads(v["info"]) if v["info"] else {})
    return Release(
        path=path, name=r["name"], format_version=r["format_version"],
        dpsql_version=r["dpsql_version"], created=r["created"],
        neighbouring=r["neighbouring"], unit=r["privacy_unit"], max_rows=r["max_rows"],
        budget=budget_from_json(json.loads(r["budget"])), rho=r["rho"], epsilon=r["epsilon"],
        delta=r["delta"], rng=r["rng"], spec=json.loads(r["spec"]), views=views,
        attributes=attributes)
