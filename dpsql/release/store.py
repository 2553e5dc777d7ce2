"""The release file's writer: the curator's side of the format.

:func:`write_release` writes a complete release (the layout is described in
:mod:`dpsql.release_file`, which also reads it back): the catalog tables ``dpsql_release``
and ``dpsql_views`` (:func:`catalog_rows`), the node, prefix and domain tables from numpy
columns (:func:`create_table`) and the SQL macros of ``udfs/*.sql`` (with the release's
own constants in :func:`view_levels_macro`).

The file is written to a temporary name in the target directory and renamed over the
target only once complete and checkpointed, so a crash never leaves a half release and
never clobbers the previous file; the temporaries of a killed writer are removed by the
next write into the folder (:mod:`dpsql.release.files`).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpsql import __version__
from dpsql._sql import quote_literal
from dpsql.errors import OperationalError
from dpsql.release import files
from dpsql.release_file import FORMAT_VERSION, Release, catalog_from_rows

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


def view_levels_macro(views: list[dict[str, Any]]) -> str:
    """The ``dpsql_view_levels()`` macro of a release: its views' depths as constants, which
    the stored ``dp_level`` macro checks a level against while DuckDB binds it (a table
    macro can read no table for that: ``query_table`` takes constants only).

    >>> print(view_levels_macro([{"name": "dist", "levels": [1, 2]}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    CREATE OR REPLACE MACRO dpsql_view_levels() AS
        {'depth': CAST(MAP {'dist': 2} AS MAP(VARCHAR, BIGINT)), 'shown': '''dist'' (levels 1-2)'}
    """
    ordered = sorted(views, key=lambda v: v["name"])
    depth = ", ".join(f"{quote_literal(v['name'].lower())}: {len(v['levels'])}" for v in ordered)
    shown = ", ".join(f"'{v['name']}' (levels 1-{len(v['levels'])})" for v in ordered)
    return ("CREATE OR REPLACE MACRO dpsql_view_levels() AS "
            f"{{'depth': CAST(MAP {{{depth}}} AS MAP(VARCHAR, BIGINT)), "
            f"'shown': {quote_literal(shown or 'none')}}}")


def write_release(path: str | Path, release_row: dict[str, Any], views: list[dict[str, Any]],
                  tables: dict[str, Columns], con: duckdb.DuckDBPyConnection | None = None
                  ) -> Release:
    """Write a complete release atomically (temporary file, checkpoint, rename), and
    return its catalog as :func:`dpsql.release_file.open_release` would read it back (built from the very
    rows written, through the same parser, without reopening the file).

    The temporary file is ``ATTACH``-ed to ``con`` (the builder's own connection, so no
    second DuckDB instance is started; a fresh in-memory one when ``None``). Everything is
    written in **one transaction**: tables straight from numpy columns
    (:func:`create_table`), then one commit and one checkpoint, instead of one WAL flush
    per table. The rename happens only after the checkpoint and the detach, so a crash at
    any point leaves the previous file untouched."""
    target = Path(path).resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.write_failed(target, err) from err
    files.remove_stale_temporaries(target.parent)  # left by a writer that was killed
    tmp = files.temporary_path(target)  # DuckDB creates the file itself
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
                con.execute(view_levels_macro(views))
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
        files.replace_durably(tmp, target)
    except BaseException as err:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            if leftover.exists():
                leftover.unlink()
        if isinstance(err, (duckdb.IOException, OSError)):  # disk full, permissions, ...
            raise files.write_failed(target, err) from err
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
    describe a release: what :func:`write_release` stores and
    :func:`dpsql.release_file.catalog_from_rows` reads."""
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
