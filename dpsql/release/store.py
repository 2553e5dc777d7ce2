"""The release file: write it atomically, read its catalog back.

A release is one DuckDB database (DESIGN "Release file"):

* ``dpsql_release`` — one row: format and dpsql versions, name, creation time,
  neighbouring relation, privacy unit, the total guarantee in every form (native JSON,
  ρ, and ε at ``report_delta``), the RNG description and the spec as JSON.
* ``dpsql_views`` — one row per view: name, mechanism, weight, budget share (JSON),
  levels and attributes (JSON), the error model's parameters (JSON).
* ``<view>__l<k>`` — the private nodes of level k, ``<view>__prefix`` for range views,
  and ``dpsql_domain__<attribute>`` tables listing the public domains.
* The SQL macros of ``udfs/*.sql``, so that a plain DuckDB client can use them.

The file is written to a temporary name in the target directory and renamed over the
target only once complete and checkpointed, so a crash never leaves a half release and
never clobbers the previous file.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpsql import __version__
from dpsql.accuracy import ErrorModel, load
from dpsql.errors import IntegrityError, OperationalError
from dpsql.privacy import Budget, budget_from_json

FORMAT_VERSION = 1

# A table to write: column name -> numpy array (int → BIGINT, float → DOUBLE, bool →
# BOOLEAN, str/object → VARCHAR), or None for an all-NULL DOUBLE column (``dp_var`` of a
# mechanism without per-node variances).
Columns = dict[str, "np.ndarray | None"]


def duck_type(values: np.ndarray) -> str:
    """The DuckDB type a numpy column is stored as."""
    kind = values.dtype.kind
    if kind in "iu":
        return "BIGINT"
    if kind == "f":
        return "DOUBLE"
    if kind == "b":
        return "BOOLEAN"
    return "VARCHAR"


def create_table(con: duckdb.DuckDBPyConnection, name: str, columns: Columns,
                 temporary: bool = False) -> None:
    """``CREATE TABLE name AS`` the numpy ``columns``, each cast to its stored type.

    Numpy goes to DuckDB directly (a registered dict of arrays, zero-copy for numbers)
    rather than through ``pyarrow.array``, which imports pandas on first use: about
    0.35 s, more than a whole small release. The casts pin every column's type (an empty
    or string numpy column would otherwise come out as NULL or ENUM). DuckDB reads NaN in
    a float array as NULL; no released column holds NaN."""
    arrays = {c: a for c, a in columns.items() if a is not None}
    view = "dpsql_np_in"
    select = ", ".join(
        f'CAST("{c}" AS {duck_type(a)}) AS "{c}"' if a is not None
        else f'CAST(NULL AS DOUBLE) AS "{c}"' for c, a in columns.items())
    con.register(view, arrays)
    try:
        con.execute(f'CREATE {"TEMP " if temporary else ""}TABLE "{name}" AS '
                    f"SELECT {select} FROM {view}")
    finally:
        con.unregister(view)


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

    @property
    def width(self) -> float | None:
        if self.kind != "range":
            return None
        return (self.upper - self.lower) / self.bins  # type: ignore[operator]

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "columns": list(self.columns),
                "domain_table": self.domain_table, "lower": self.lower, "upper": self.upper,
                "bins": self.bins}

    @classmethod
    def from_json(cls, d: dict) -> "AttributeMeta":
        return cls(d["name"], d["kind"], tuple(d["columns"]), d["domain_table"],
                   d.get("lower"), d.get("upper"), d.get("bins"))


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


def udf_sql_files() -> list[tuple[str, str]]:
    """(name, text) of every macro file shipped in ``udfs/``, in name order."""
    candidates = []
    try:
        packaged = resources.files("dpsql").joinpath("udfs")
        if packaged.is_dir():
            candidates.append(packaged)
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover
        pass
    repo = Path(__file__).resolve().parents[2] / "udfs"
    if repo.is_dir():
        candidates.append(repo)
    for base in candidates:
        files = sorted((p for p in base.iterdir() if p.name.endswith(".sql")),
                       key=lambda p: p.name)
        if files:
            return [(p.name, p.read_text()) for p in files]
    return []


def write_release(path: str | Path, release_row: dict[str, Any], views: list[dict[str, Any]],
                  tables: dict[str, Columns], con: duckdb.DuckDBPyConnection | None = None
                  ) -> Release:
    """Write a complete release atomically (temporary file, checkpoint, rename), and
    return its catalog as :func:`open_release` would read it back (built from the very
    rows written, through the same parser, without reopening the file).

    The temporary file is ``ATTACH``-ed to ``con`` (the builder's own connection, so no
    second DuckDB instance is started; a fresh in-memory one when ``None``). Everything is
    written in **one transaction**: tables straight from numpy columns
    (:func:`create_table`), then one commit and one checkpoint, instead of one WAL flush
    per table. The rename happens only after the checkpoint and the detach, so a crash at
    any point leaves the previous file untouched."""
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                    dir=target.parent)
    os.close(fd)
    os.unlink(tmp_name)  # DuckDB must create the file itself
    tmp = Path(tmp_name)
    own = con is None
    if con is None:
        con = duckdb.connect()
    try:
        home = con.execute("SELECT current_database()").fetchall()[0][0]
        con.execute(f"ATTACH '{str(tmp).replace(chr(39), chr(39) * 2)}' AS dpsql_out")
        try:
            con.execute("USE dpsql_out")
            con.execute("BEGIN TRANSACTION")
            try:
                release, view_rows = _write_catalog(con, release_row, views)
                for name, columns in tables.items():
                    create_table(con, name, columns)
                for fname, sql in udf_sql_files():
                    try:
                        con.execute(sql)
                    except duckdb.Error as err:
                        raise OperationalError(f"macro file {fname} failed: {err}") from err
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("CHECKPOINT dpsql_out")
        finally:
            con.execute(f'USE "{home}"')
            con.execute("DETACH dpsql_out")
        os.replace(tmp, target)
    except BaseException:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            if leftover.exists():
                leftover.unlink()
        raise
    finally:
        if own:
            con.close()
    return catalog_from_rows(str(Path(path)), release,
                             sorted(view_rows, key=lambda v: v["name"]))


_RELEASE_COLUMNS = ("format_version", "dpsql_version", "name", "created", "neighbouring",
                    "privacy_unit", "max_rows", "budget", "rho", "epsilon", "delta", "rng",
                    "attributes", "spec")
_VIEW_COLUMNS = ("name", "mechanism", "weight", "budget", "depth", "attributes", "levels",
                 "error_model", "prefix_table", "info")


def catalog_rows(row: dict[str, Any], views: list[dict[str, Any]]
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``dpsql_release`` row and the ``dpsql_views`` rows (JSON columns as text) that
    describe a release: what :func:`write_release` stores and :func:`catalog_from_rows`
    reads."""
    values = [
        FORMAT_VERSION, __version__, row["name"], row["created"], row["neighbouring"],
        row["privacy_unit"], row["max_rows"], json.dumps(row["budget"]), row["rho"],
        row["epsilon"], row["delta"], row["rng"], json.dumps(row["attributes"]),
        json.dumps(row["spec"])]
    view_rows = []
    for v in views:
        vals = [v["name"], v["mechanism"], v["weight"], json.dumps(v["budget"]),
                len(v["levels"]), json.dumps(v["attributes"]), json.dumps(v["levels"]),
                json.dumps(v["error_model"]), v.get("prefix_table"),
                json.dumps(v.get("info", {}))]
        view_rows.append(dict(zip(_VIEW_COLUMNS, vals)))
    return dict(zip(_RELEASE_COLUMNS, values)), view_rows


def _write_catalog(con: duckdb.DuckDBPyConnection, row: dict[str, Any],
                   views: list[dict[str, Any]]
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Create and fill ``dpsql_release`` and ``dpsql_views``; return the rows written."""
    release_row, view_rows = catalog_rows(row, views)
    con.execute("""
        CREATE TABLE dpsql_release (
            format_version INTEGER, dpsql_version VARCHAR, name VARCHAR, created VARCHAR,
            neighbouring VARCHAR, privacy_unit VARCHAR, max_rows INTEGER,
            budget JSON, rho DOUBLE, epsilon DOUBLE, delta DOUBLE, rng VARCHAR,
            attributes JSON, spec JSON)""")
    con.execute("INSERT INTO dpsql_release VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                list(release_row.values()))
    con.execute("""
        CREATE TABLE dpsql_views (
            name VARCHAR, mechanism VARCHAR, weight VARCHAR, budget JSON, depth INTEGER,
            attributes JSON, levels JSON, error_model JSON, prefix_table VARCHAR, info JSON)""")
    if view_rows:
        con.executemany("INSERT INTO dpsql_views VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [list(v.values()) for v in view_rows])
    return release_row, view_rows


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


def read_catalog(con: duckdb.DuckDBPyConnection, path: str, schema: str | None = None
                 ) -> Release:
    """Read the catalog through an open connection (``schema`` = an attached alias)."""
    pre = f'"{schema}".' if schema else ""
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
