"""The Inspector side of the ``dpsql`` SQLAlchemy dialect: schemas, tables, columns.

What is listed, and why, is in :mod:`dpsql.sqlalchemy`'s docstring (**Catalog**,
**Columns**). The catalog comes from :func:`dpsql.release_file.open_release` for each
release the DB-API connection attached, and the column types from queries through
:mod:`dpsql.dbapi`: nothing here parses the release file itself.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import reflection

from dpsql._sql import quote_ident

COUNT_COLUMN = "dp_count"
_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                  "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
_CATALOGS: "weakref.WeakKeyDictionary[Any, tuple[tuple, dict[str, Any]]]" = \
    weakref.WeakKeyDictionary()


class Inspection:
    """Reflection methods of :class:`~dpsql.sqlalchemy.DpsqlDialect` (a mixin)."""

    default_schema_name: str | None


    def _catalog(self, connection: Any, **kw: Any) -> dict[str, Any]:
        """alias → :class:`~dpsql.release_file.Release` of every attached release.

        Read once per DB-API connection (and again only if it attaches another
        release): a release is immutable, and a file replaced on disk after the
        connection attached it is not what that connection reads. ``pandas.read_sql``
        asks ``has_table`` on every call, so re-reading the file would cost ~20 ms."""
        from dpsql.release_file import open_release

        dcon = dbapi_conn(connection)
        attached = tuple(dcon.releases.items())
        cached = _CATALOGS.get(dcon)
        if cached is None or cached[0] != attached:
            cached = (attached, {alias: open_release(path) for alias, path in attached})
            _CATALOGS[dcon] = cached
        return cached[1]

    def _release(self, connection: Any, schema: str | None, **kw: Any) -> tuple[str, Any]:
        catalog = self._catalog(connection, **kw)
        if schema is None:
            schema = self.default_schema_name or next(iter(catalog), None)
        for alias, release in catalog.items():
            if schema is not None and alias.lower() == schema.lower():
                return alias, release
        return "", None

    def _table(self, connection: Any, table_name: str, schema: str | None, **kw: Any
               ) -> tuple[str, Any, list[Any]]:
        """(alias, release, views behind the table) or NoSuchTableError."""
        alias, release = self._release(connection, schema, **kw)
        if release is not None:
            if table_name.lower() in (release.name.lower(), alias.lower()):
                return alias, release, list(release.views.values())
            for view in release.views.values():
                if view.name.lower() == table_name.lower():
                    return alias, release, [view]
        where = f"{schema}." if schema else ""
        raise sa_exc.NoSuchTableError(f"{where}{table_name}")

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return list(self._catalog(connection, **kw))

    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any
                        ) -> list[str]:
        """The release name, then its views: the names the planner accepts in FROM."""
        _, release = self._release(connection, schema, **kw)
        if release is None:
            return []
        return [release.name] + [v for v in release.views if v != release.name]

    def has_table(self, connection: Any, table_name: str, schema: str | None = None,
                  **kw: Any) -> bool:
        try:
            self._table(connection, table_name, schema, **kw)
        except sa_exc.NoSuchTableError:
            return False
        return True

    # No annotations here: SQLAlchemy 1.4's reflection.cache rebuilds the decorated
    # signature as source text and cannot re-parse string annotations (a SyntaxError at
    # import under ``from __future__ import annotations``).
    @reflection.cache
    def get_columns(self, connection, table_name, schema=None, **kw):  # type: ignore[no-untyped-def]
        """Column dicts of a logical table (module docstring, **Columns**)."""
        return self._columns(connection, table_name, schema, **kw)

    def _columns(self, connection: Any, table_name: str, schema: str | None,
                 **kw: Any) -> list[dict[str, Any]]:
        alias, release, views = self._table(connection, table_name, schema, **kw)
        names: list[str] = []
        for v in views:
            names += [a for a in v.attributes if a not in names]
        # dimensions (categorical, hierarchy) first, then binned attributes
        names.sort(key=lambda a: release.attributes[a].kind == "range")
        from dpsql.schema_catalog import range_type

        dcon = dbapi_conn(connection)
        columns = []
        for name in names:
            attr = release.attributes[name]
            if attr.kind == "range":  # typed as DESCRIBE and GROUP BY type it
                columns.append(_column(name, _sa_type(range_type(attr.value_type)),
                                       _range_comment(attr)))
                continue
            domain = f"{quote_ident(alias)}.{quote_ident(attr.domain_table)}"
            types = _probe_types(dcon, f"SELECT * FROM {domain} LIMIT 0")
            for col in attr.columns:
                columns.append(_column(col, _sa_type(types.get(col, "VARCHAR")),
                                       _label_comment(attr, col)))
        # typed as DESCRIBE types it (dpsql.schema_catalog.integer_counts)
        logical = views[0].name if len(views) == 1 and \
            views[0].name.lower() == table_name.lower() else release.name
        described = {r[0]: r[1] for r in _rows(
            dcon, f"DESCRIBE {quote_ident(alias)}.{quote_ident(logical)}")}
        columns.append(_column(COUNT_COLUMN, _sa_type(described[COUNT_COLUMN]),
                               "the differentially private count of the group: aggregate "
                               "it as COUNT(*) (or SUM(dp_count)); dp_stderr() gives its "
                               "standard error"))
        return columns

    def get_table_comment(self, connection: Any, table_name: str,
                          schema: str | None = None, **kw: Any) -> dict[str, Any]:
        alias, release, views = self._table(connection, table_name, schema, **kw)
        kind = "" if len(views) > 1 else f" view {views[0].name!r} ({views[0].mechanism})"
        return {"text": (
            f"dpsql release {release.name!r}{kind}: differentially private counts "
            f"(rho={release.rho:g}, {release.neighbouring}); query with "
            f"SELECT <columns>, COUNT(*) FROM {table_name} GROUP BY <columns>"
            + ("; built with a fixed seed: NOT private" if release.seeded else ""))}

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any
                       ) -> list[str]:
        return []  # release views are listed as tables (module docstring)

    def get_view_definition(self, connection: Any, view_name: str,
                            schema: str | None = None, **kw: Any) -> str:
        raise sa_exc.NoSuchTableError(view_name)

    def get_temp_table_names(self, connection: Any, schema: str | None = None, **kw: Any
                             ) -> list[str]:
        return []

    def get_temp_view_names(self, connection: Any, schema: str | None = None, **kw: Any
                            ) -> list[str]:
        return []

    def get_sequence_names(self, connection: Any, schema: str | None = None, **kw: Any
                           ) -> list[str]:
        return []

    def get_pk_constraint(self, connection: Any, table_name: str,
                          schema: str | None = None, **kw: Any) -> dict[str, Any]:
        self._table(connection, table_name, schema, **kw)
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(self, connection: Any, table_name: str,
                         schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_indexes(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_unique_constraints(self, connection: Any, table_name: str,
                               schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []

    def get_check_constraints(self, connection: Any, table_name: str,
                              schema: str | None = None, **kw: Any) -> list:
        self._table(connection, table_name, schema, **kw)
        return []


# --------------------------------------------------------------------------------------

def dbapi_conn(connection: Any) -> Any:
    """The :class:`dpsql.dbapi.Connection` under a SQLAlchemy connection. SQLAlchemy
    1.4 hands the dialect's first-connect hooks a Connection over the bare DB-API
    connection; otherwise ``.connection`` is the pool's wrapper."""
    from dpsql.dbapi import Connection

    under = connection.connection
    return under if isinstance(under, Connection) else under.dbapi_connection


def _probe_types(dcon: Any, sql: str) -> dict[str, str]:
    """Column name → DuckDB type name of ``sql``'s result, through the DB-API."""
    cur = dcon.cursor()
    try:
        cur.execute(sql)
        cur.fetchall()
        return {d[0]: d[1] for d in cur.description}
    finally:
        cur.close()


def _rows(dcon: Any, sql: str) -> list[tuple]:
    """The rows of ``sql``, through the DB-API."""
    cur = dcon.cursor()
    try:
        cur.execute(sql)
        return cur.fetchall()
    finally:
        cur.close()


def _sa_type(type_name: str) -> sqltypes.TypeEngine:
    t = type_name.upper()
    base = t.split("(", 1)[0].strip()
    if base in ("VARCHAR", "CHAR", "BPCHAR", "TEXT", "STRING", "ENUM", "UUID"):
        return sqltypes.String()
    if base in ("BIGINT", "HUGEINT", "UBIGINT", "UHUGEINT"):
        return sqltypes.BigInteger()
    if base in _INTEGER_TYPES:
        return sqltypes.Integer()
    if base in ("DOUBLE", "FLOAT", "REAL"):
        return sqltypes.Float()
    if base in ("DECIMAL", "NUMERIC"):
        digits = t[len(base):].strip("() ").split(",")
        if len(digits) == 2 and all(d.strip().isdigit() for d in digits):
            return sqltypes.Numeric(int(digits[0]), int(digits[1]))
        return sqltypes.Numeric()
    if base == "BOOLEAN":
        return sqltypes.Boolean()
    if base == "DATE":
        return sqltypes.Date()
    if base.startswith("TIMESTAMP"):
        return sqltypes.DateTime(timezone="TIME ZONE" in t or base == "TIMESTAMPTZ")
    return sqltypes.NullType()


def _column(name: str, type_: sqltypes.TypeEngine, comment: str) -> dict[str, Any]:
    return {"name": name, "type": type_, "nullable": False, "default": None,
            "autoincrement": False, "comment": comment}


def _label_comment(attr: Any, column: str) -> str:
    what = "categorical attribute" if attr.kind == "categorical" else \
        f"level of the {attr.name!r} hierarchy ({' > '.join(attr.columns)})"
    return (f"{what}; public values in {attr.domain_table}; use it in GROUP BY and in "
            f"WHERE (=, IN, <>, LIKE ...)")


def _range_comment(attr: Any) -> str:
    return (f"binned attribute on [{attr.lower:g}, {attr.upper:g}) in {attr.bins} bins; "
            f"use it in range predicates (WHERE {attr.name} BETWEEN lo AND hi, <, <=, >, "
            f">=), in SUM/AVG/MEDIAN, or in GROUP BY (one row per bin, holding its lower "
            f"bound, or floor({attr.name} / w) * w on whole bins); its bins are in "
            f"{attr.domain_table}")
