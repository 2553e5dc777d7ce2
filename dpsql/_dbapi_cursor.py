"""The PEP 249 cursor of :mod:`dpsql.dbapi` (its module docstring: the decisions), in a
module of its own; import it from :mod:`dpsql.dbapi`."""

from __future__ import annotations

import copy
import warnings
from typing import Any, Iterator, Mapping, Sequence

import duckdb

from dpsql import duck
from dpsql._dbapi_types import _describe, _translate
from dpsql.errors import InterfaceError, NotSupportedError, ProgrammingError, Warning


class PublicDomainWarning(UserWarning):
    """A literal of the query is not in the public domain of the column it is compared
    with (``race = 'black'`` where the domain holds ``'Black'``): the answer counts no row
    for it, which is correct SQL but most likely a typo. The text names the closest
    public values."""


class Cursor:
    """A PEP 249 cursor of ``connection`` (a :class:`dpsql.dbapi.Connection`). Extras:
    :attr:`dp_info`, :attr:`messages`,
    :meth:`fetch_arrow_table`, :meth:`fetch_df`, :meth:`nextset`.

    ``messages`` (PEP 249's extension) lists ``(dpsql.Warning, dpsql.Warning(text))`` for
    each notice of the last ``execute`` (a literal outside a public domain:
    :mod:`dpsql.planner.check_literals`), which is also issued as a
    :class:`PublicDomainWarning` unless ``warn=False`` or ``cursor.warn_notices = False``
    (the server sends NoticeResponses instead, the CLI prints a line)."""

    def __init__(self, connection: Any, duck_cursor: duckdb.DuckDBPyConnection,
                 *, warn: bool = True) -> None:
        self.connection = connection
        self._dcur: duckdb.DuckDBPyConnection | None = duck_cursor
        self._catalog_cur: duckdb.DuckDBPyConnection | None = None  # schema discovery's
        self.arraysize = 1
        self.lastrowid = None
        self.messages: list[tuple[type, Warning]] = []
        self.warn_notices = warn
        self._reset()

    def _reset(self) -> None:
        self._pending: list[Any] = []  # planned queries of later result sets
        self._sql: str | None = None
        self._planned: Any = None  # the current result's plan; dp_info is built from it
        self._info: dict[str, Any] | None = None
        self._description: tuple[tuple, ...] | None = None
        self._duck_description: Any = None  # DuckDB's, made PEP 249 on first access
        self._has_result = False
        self._fetched = 0  # rows handed out from the current result
        self._exhausted = False

    # -- state ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._dcur is None

    def _live(self) -> duckdb.DuckDBPyConnection:
        if self._dcur is None:
            raise InterfaceError("the cursor is closed; get a new one with connection.cursor()")
        if self.connection.closed:
            raise InterfaceError("the connection is closed; open a new one with dpsql.connect()")
        return self._dcur

    def _result(self) -> duckdb.DuckDBPyConnection:
        dcur = self._live()
        if not self._has_result:
            raise InterfaceError("no result set to fetch from: call execute() first")
        return dcur if self._catalog_cur is None else self._catalog_cur

    @property
    def description(self) -> tuple[tuple, ...] | None:
        """One 7-tuple per column of the current result (None before execute). Built from
        DuckDB's description of the result on first access, not on every execute (most
        callers never read it)."""
        if self._description is None and self._duck_description is not None:
            self._description = _describe(self._duck_description)
        return self._description

    @property
    def rowcount(self) -> int:
        """-1 until the result has been fetched to its end, then its number of rows."""
        return self._fetched if self._exhausted else -1

    @property
    def dp_info(self) -> dict[str, Any] | None:
        """How the current answer was made: view, levels, mechanism, budget, error model,
        interpolation policy, notes (from the planner); ``"privacy": "seeded: not private"``
        when the answer reads a seeded release."""
        if self._info is None and self._planned is not None:  # built on first access
            self._info = self.connection._note_seeded(dict(self._planned.info))
        return None if self._info is None else copy.deepcopy(self._info)

    @property
    def query(self) -> str | None:
        """The DuckDB SQL that the planner produced for the current result."""
        return self._sql

    # -- execution -----------------------------------------------------------------------

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> "Cursor":
        """Plan ``operation`` (parameters bound as literals first) and run it."""
        self._live()
        self._reset()
        del self.messages[:]
        planned = self._plan(operation, parameters)
        self._run(planned)
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Sequence[Any]]
                    ) -> "Cursor":
        """Plan ``operation`` for every parameter set, then run the first; the others are
        further result sets, reached with :meth:`nextset`."""
        self._live()
        self._reset()
        plans = [self._plan(operation, params) for params in seq_of_parameters]
        if plans:
            self._pending = plans[1:]
            self._run(plans[0])
        return self

    def nextset(self) -> bool | None:
        """Move to the next result set of :meth:`executemany`; None when there is none."""
        self._live()
        if not self._pending:
            self._drop_result()
            return None
        planned, self._pending = self._pending[0], self._pending[1:]
        self._run(planned)
        return True

    def _plan(self, operation: str, parameters: Sequence[Any] | None) -> Any:
        if not isinstance(operation, str):
            raise ProgrammingError(
                f"the operation must be an SQL string, got {type(operation).__name__}")
        if parameters is not None and (isinstance(parameters, (str, bytes, Mapping))
                                       or not isinstance(parameters, Sequence)):
            raise ProgrammingError(
                "parameters must be a sequence (list or tuple) matching the '?' "
                f"placeholders (paramstyle qmark), got {type(parameters).__name__}")
        return self.connection._plan(operation, list(parameters) if parameters is not None
                                     else None)

    def _run(self, planned: Any) -> None:
        dcur = self._live()
        self._drop_result()
        if planned.route == "catalog":  # schema discovery: on the catalog database
            dcur, sql = duck.run_on(dcur, planned)
            self._catalog_cur = dcur
        else:
            sql = planned.sql
        try:
            dcur.execute(sql)
            description = dcur.description
        except duckdb.Error as err:
            raise _translate(err, sql) from err
        self._sql = sql
        self._planned = planned
        for text in getattr(planned, "notices", ()):
            self.messages.append((Warning, Warning(text)))
            if self.warn_notices:
                warnings.warn(text, PublicDomainWarning, stacklevel=3)
        self._info = None
        self._description = None
        self._duck_description = description
        self._has_result = description is not None
        self._fetched = 0
        self._exhausted = False

    def _drop_result(self) -> None:
        if self._catalog_cur is not None:
            self._catalog_cur.close()
            self._catalog_cur = None
        self._sql = None
        self._planned = None
        self._info = None
        self._description = None
        self._duck_description = None
        self._has_result = False
        self._fetched = 0
        self._exhausted = False

    # -- fetching ------------------------------------------------------------------------

    def _count(self, rows: list, requested: int | None) -> list:
        self._fetched += len(rows)
        if requested is None or len(rows) < requested:
            self._exhausted = True
        return rows

    def fetchone(self) -> tuple | None:
        dcur = self._result()
        if self._exhausted:
            return None
        try:
            row = dcur.fetchone()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        if row is None:
            self._exhausted = True
            return None
        self._fetched += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        dcur = self._result()
        n = self.arraysize if size is None else size
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ProgrammingError(f"fetchmany size must be a non-negative integer, got {n!r}")
        if n == 0 or self._exhausted:
            return []
        try:
            rows = dcur.fetchmany(n)
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        return self._count(rows, n)

    def fetchall(self) -> list[tuple]:
        dcur = self._result()
        if self._exhausted:
            return []
        try:
            rows = dcur.fetchall()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        return self._count(rows, None)

    def fetch_arrow_table(self) -> Any:
        """The rest of the current result as a ``pyarrow.Table``."""
        dcur = self._result()
        try:
            if self._fetched == 0 and not self._exhausted:  # the usual case: one Arrow run
                dcur.abort()  # drop the unfetched row stream of execute()
                table = dcur.sql(self._sql).to_arrow_table()
            else:
                import pyarrow as pa

                rest = [] if self._exhausted else dcur.fetchall()
                schema = dcur.sql(self._sql).limit(0).to_arrow_table().schema
                table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rest],
                                             schema=schema)
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        self._fetched += table.num_rows
        self._exhausted = True
        return table

    def fetch_df(self) -> Any:
        """The rest of the current result as a ``pandas.DataFrame`` (needs pandas)."""
        dcur = self._result()
        try:
            import pandas  # noqa: F401  (only to give a clear error when it is missing)
        except ImportError as err:
            raise NotSupportedError(
                "fetch_df() needs pandas, which is not installed: `pip install pandas`, "
                "or use fetch_arrow_table() / fetchall()") from err
        try:
            # an exhausted result gives None: answer an empty frame with the right columns
            df = dcur.sql(self._sql).limit(0).df() if self._exhausted else dcur.df()
        except duckdb.Error as err:
            raise _translate(err, self._sql) from err
        self._fetched += len(df)
        self._exhausted = True
        return df

    # -- the rest of PEP 249 -------------------------------------------------------------

    def setinputsizes(self, sizes: Any) -> None:
        """No-op (PEP 249 allows it): parameters are bound as SQL literals."""
        self._live()

    def setoutputsize(self, size: Any, column: int | None = None) -> None:
        """No-op (PEP 249 allows it): results have no large columns to pre-size."""
        self._live()

    def close(self) -> None:
        """Close the cursor; closing twice is harmless."""
        if self._dcur is None:
            return
        self._drop_result()
        dcur, self._dcur = self._dcur, None
        self._reset()
        if not self.connection.closed:
            dcur.close()

    def __iter__(self) -> Iterator[tuple]:
        return self

    def __next__(self) -> tuple:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> "Cursor":
        self._live()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Cursor", "PublicDomainWarning"]
