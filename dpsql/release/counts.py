"""Counting: the one place that turns the ingested rows into true counts.

Given a view (its attribute names, in tree order) and a DuckDB connection holding the
ingested ``dpsql_rows`` table, :func:`leaf_counts` returns the true counts of every
non-empty combination of codes as an Arrow table. This is the scale-out seam of DESIGN:
a Spark implementation of the same function (a GROUP BY in Spark SQL) can replace it.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa


def leaf_counts(con: duckdb.DuckDBPyConnection, attributes: list[str]) -> pa.Table:
    """One GROUP BY over the codes of ``attributes``: columns ``c_<attr>`` and ``n``."""
    cols = ", ".join(f"c_{a}" for a in attributes)
    return con.sql(
        f"SELECT {cols}, count(*)::BIGINT AS n FROM dpsql_rows GROUP BY {cols} "
        f"ORDER BY {cols}").to_arrow_table()


def total_rows(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM dpsql_rows").fetchall()[0][0])


def as_numpy(table: pa.Table) -> dict[str, np.ndarray]:
    """Columns of a counts table as int64 numpy arrays (zero-copy where possible)."""
    return {name: np.asarray(table.column(name).combine_chunks(), dtype=np.int64)
            for name in table.column_names}
