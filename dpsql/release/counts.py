"""Counting: the one place that turns rows into true counts.

Every view needs the true count of each non-empty combination of its attributes' codes
(its leaves). Views share a source, so all of them are counted in **one scan** with
``GROUP BY GROUPING SETS``: one grouping set per distinct set of attributes. Two scans of
that kind exist, and both live here, so that this module stays the scale-out seam of
DESIGN (a Spark implementation is the same two GROUP BYs in Spark SQL):

* :func:`count_keys` groups the *source* by raw keys (the raw values of categorical and
  hierarchy columns, an encoded bin for ranges). It is the fast path when rows are their
  own privacy unit: the few distinct keys are then looked up in the public domains and
  checked against the policies, weighted by their counts, instead of every row.
* :func:`count_codes` groups already coded rows (``c_<attr>`` columns): the path when a
  privacy-unit column forces row-level contribution bounding first, or when a dropped
  row must vanish from views that do not group by the attribute that dropped it.

Both feed the temporary table ``dpsql_leaves(dpsql_set, c_<attr>..., n)``; a view reads
its leaves back with :func:`leaf_counts`. ``dpsql_set`` names the attribute set
(:func:`set_key`), so views over the same attributes share one grouping set.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import duckdb
import numpy as np
import pyarrow as pa

LEAVES = "dpsql_leaves"
KEYS = "dpsql_keys"


def set_key(attributes: Iterable[str]) -> str:
    """The ``dpsql_set`` label of an attribute set (order does not matter)."""
    return ",".join(sorted(attributes))


def grouping_ids(columns: Sequence[str], sets: Sequence[Sequence[str]]) -> list[int]:
    """DuckDB's ``GROUPING(columns...)`` value for each grouping set: bit j (from the most
    significant, in ``columns`` order) is 1 when column j is *not* grouped."""
    n = len(columns)
    return [sum(1 << (n - 1 - j) for j, c in enumerate(columns) if c not in set(s))
            for s in sets]


def _grouping_sets(sets: Sequence[Sequence[str]]) -> str:
    return ", ".join("(" + ", ".join(s) + ")" for s in sets)


def create_leaves(con: duckdb.DuckDBPyConnection, attributes: Sequence[str]) -> None:
    """The empty ``dpsql_leaves`` table, with a code column for every attribute."""
    cols = "".join(f", c_{a} BIGINT" for a in attributes)
    con.execute(f"CREATE TEMP TABLE {LEAVES} (dpsql_set VARCHAR{cols}, n BIGINT)")


def count_keys(con: duckdb.DuckDBPyConnection, source: str, keys: dict[str, str],
               sets: Sequence[Sequence[str]]) -> None:
    """One scan of ``source`` grouped by raw keys: ``dpsql_keys(<keys>, n, dpsql_gid)``.

    ``keys`` maps an alias to its SQL expression over the source; each set lists aliases.
    ``dpsql_gid`` is ``GROUPING(...)`` over all aliases (see :func:`grouping_ids`)."""
    aliases = list(keys)
    inner = ", ".join(f"{expr} AS {alias}" for alias, expr in keys.items())
    cols = ", ".join(aliases)
    con.execute(
        f"CREATE TEMP TABLE {KEYS} AS SELECT {cols}, count(*)::BIGINT AS n, "
        f"GROUPING({cols}) AS dpsql_gid FROM (SELECT {inner} FROM {source}) "
        f"GROUP BY GROUPING SETS ({_grouping_sets(sets)})")


def count_codes(con: duckdb.DuckDBPyConnection, relation: str,
                sets: Sequence[Sequence[str]]) -> None:
    """One scan of the coded rows ``relation`` (``c_<attr>`` columns), grouped by every
    attribute set in ``sets``, appended to ``dpsql_leaves``."""
    attrs = sorted({a for s in sets for a in s})
    cols = [f"c_{a}" for a in attrs]
    gids = grouping_ids(cols, [[f"c_{a}" for a in s] for s in sets])
    label = "CASE " + " ".join(f"WHEN g = {g} THEN '{set_key(s)}'" for g, s in zip(gids, sets)) \
        + " END"
    grouped = _grouping_sets([[f"c_{a}" for a in s] for s in sets])
    con.execute(
        f"INSERT INTO {LEAVES} (dpsql_set, {', '.join(cols)}, n) "
        f"SELECT {label}, {', '.join(cols)}, n FROM ("
        f"SELECT {', '.join(cols)}, count(*)::BIGINT AS n, GROUPING({', '.join(cols)}) AS g "
        f"FROM {relation} GROUP BY GROUPING SETS ({grouped}))")


def leaf_counts(con: duckdb.DuckDBPyConnection, attributes: Sequence[str]) -> pa.Table:
    """The true leaf counts of a view over ``attributes``: columns ``c_<attr>`` (in the
    given order) and ``n``, one row per non-empty combination, sorted by the codes."""
    cols = ", ".join(f"c_{a}" for a in attributes)
    return con.sql(f"SELECT {cols}, n FROM {LEAVES} WHERE dpsql_set = "
                   f"'{set_key(attributes)}' ORDER BY {cols}").to_arrow_table()


def total_rows(con: duckdb.DuckDBPyConnection, attributes: Sequence[str]) -> int:
    """Rows counted for an attribute set (every set counts every used row)."""
    got = con.execute(f"SELECT coalesce(sum(n), 0) FROM {LEAVES} "
                      f"WHERE dpsql_set = '{set_key(attributes)}'").fetchall()
    return int(got[0][0])


def leaf_count_arrays(con: duckdb.DuckDBPyConnection, attributes: Sequence[str]
                      ) -> dict[str, np.ndarray]:
    """:func:`leaf_counts` as int64 numpy arrays, fetched by DuckDB straight into numpy
    (converting Arrow to numpy would import pandas, about 0.3 s on a cold start)."""
    cols = ", ".join(f"c_{a}" for a in attributes)
    got = con.sql(f"SELECT {cols}, n FROM {LEAVES} WHERE dpsql_set = "
                  f"'{set_key(attributes)}' ORDER BY {cols}").fetchnumpy()
    return {name: np.asarray(values, dtype=np.int64) for name, values in got.items()}


def as_numpy(table: pa.Table) -> dict[str, np.ndarray]:
    """Columns of a counts table as int64 numpy arrays."""
    return {name: np.asarray(table.column(name).combine_chunks(), dtype=np.int64)
            for name in table.column_names}
