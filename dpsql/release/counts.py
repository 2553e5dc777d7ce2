"""Counting: the one place that turns rows into true counts.

Every view needs the true count of each non-empty combination of its attributes' codes
(its leaves). Views share a source, so all of them are counted in **one scan** with
``GROUP BY GROUPING SETS``: one grouping set per distinct set of attributes. Two scans of
that kind exist, and both live here, so that this module stays the scale-out seam of
DESIGN (a Spark implementation is the same GROUP BYs in Spark SQL):

* :func:`count_keys` groups the *source* by raw keys (the raw values of categorical and
  hierarchy columns, an encoded bin for ranges). It is the fast path when rows are their
  own privacy unit: the few distinct keys are then looked up in the public domains and
  checked against the policies, weighted by their counts, instead of every row.
* :func:`count_codes` groups already coded rows (``c_<attr>`` columns): the path when a
  dropped row must vanish from views that do not group by the attribute that dropped it.
* :func:`count_bounded` is :func:`count_codes` after contribution bounding, when a
  privacy-unit column forces it: one aggregate by unit keeps each unit's rows of least
  key, then the same ``GROUPING SETS`` scan counts them.

All feed the temporary table ``dpsql_leaves(dpsql_set, c_<attr>..., n)``; a view reads
its leaves back with :func:`leaf_counts`. ``dpsql_set`` names the attribute set
(:func:`set_key`), so views over the same attributes share one grouping set.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.release import bounding
from dpsql.release.bounding import PAYLOAD_BITS

LEAVES = "dpsql_leaves"
KEYS = "dpsql_keys"


def set_key(attributes: Iterable[str]) -> str:
    """The ``dpsql_set`` label of an attribute set (order does not matter)."""
    return ",".join(sorted(attributes))


def grouping_ids(columns: Sequence[str], sets: Sequence[Sequence[str]]) -> list[int]:
    """The ``grouping_id(columns...)`` value (DuckDB's and Spark's alike) of each grouping
    set: bit j (from the most significant, in ``columns`` order) is 1 when column j is
    *not* grouped."""
    n = len(columns)
    return [sum(1 << (n - 1 - j) for j, c in enumerate(columns) if c not in set(s))
            for s in sets]


def grouping_columns(sets: Sequence[Sequence[str]]) -> list[str]:
    """The grouping columns in order of first appearance in ``sets``: the order of the
    ``grouping_id`` arguments (Spark requires exactly that order; DuckDB takes any)."""
    return list(dict.fromkeys(c for s in sets for c in s))


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
    ``dpsql_gid`` is ``grouping_id(...)`` over :func:`grouping_columns` of the sets (see
    :func:`grouping_ids`)."""
    aliases = list(keys)
    inner = ", ".join(f"{expr} AS {alias}" for alias, expr in keys.items())
    cols = ", ".join(aliases)
    con.execute(
        f"CREATE TEMP TABLE {KEYS} AS SELECT {cols}, count(*)::BIGINT AS n, "
        f"grouping_id({', '.join(grouping_columns(sets))}) AS dpsql_gid "
        f"FROM (SELECT {inner} FROM {source}) GROUP BY GROUPING SETS ({_grouping_sets(sets)})")


def count_codes(con: duckdb.DuckDBPyConnection, relation: str,
                sets: Sequence[Sequence[str]], target: str = LEAVES) -> None:
    """One scan of the coded rows ``relation`` (``c_<attr>`` columns), grouped by every
    attribute set in ``sets``, appended to ``target`` (``dpsql_leaves``)."""
    attrs = sorted({a for s in sets for a in s})
    cols = [f"c_{a}" for a in attrs]
    coded = [[f"c_{a}" for a in s] for s in sets]
    order = grouping_columns(coded)
    gids = grouping_ids(order, coded)
    label = "CASE " + " ".join(f"WHEN g = {g} THEN '{set_key(s)}'" for g, s in zip(gids, sets)) \
        + " END"
    grouped = _grouping_sets([[f"c_{a}" for a in s] for s in sets])
    con.execute(
        f"INSERT INTO {target} (dpsql_set, {', '.join(cols)}, n) "
        f"SELECT {label}, {', '.join(cols)}, n FROM ("
        f"SELECT {', '.join(cols)}, count(*)::BIGINT AS n, "
        f"grouping_id({', '.join(order)}) AS g "
        f"FROM {relation} GROUP BY GROUPING SETS ({grouped}))")


def bucket_count(rows: int, memory_limit_bytes: int) -> int:
    """How many buckets of units :func:`count_bounded` counts one after the other so that
    one bucket's aggregates fit in about a third of DuckDB's memory limit: about
    :data:`BYTES_PER_ROW` bytes per coded row (measured: the aggregates by unit and codes
    and by unit, at 10M-50M rows), the rest left to the scan and the coded rows. The
    buckets never change the result, only the peak memory and the number of scans."""
    budget = max(1, memory_limit_bytes // 3)
    return max(1, min(MAX_BUCKETS, -(-int(rows) * BYTES_PER_ROW // budget)))


BYTES_PER_ROW = 120
MAX_BUCKETS = 4096


def count_bounded(con: duckdb.DuckDBPyConnection, relation: str, code_sizes: dict[str, int],
                  sets: Sequence[Sequence[str]], max_rows: int, salt: int,
                  unit_type: str, buckets: int = 1) -> int:
    """Keep each unit's ``max_rows`` rows of least bounding key (:mod:`bounding`), then
    count them as :func:`count_codes` does. Returns the number of rows before bounding.

    ``relation`` holds coded rows: ``c_<attr>`` (a code in ``[0, code_sizes[attr])``)
    and ``dpsql_unit`` (NULL is one unit, as in GROUP BY) of SQL type ``unit_type``.
    On a Spark connection (:mod:`dpsql.release.spark`) the same bounding runs there, by
    the same key. Identical rows of a unit are first counted
    (one hash aggregate by unit and codes) and expanded again with their occurrence
    number, which the key needs. One hash aggregate by unit then keeps the codes of the
    rows of least key in a bounded heap per unit, so at most m rows per unit survive by
    construction. The codes travel packed into one integer (mixed radix,
    :func:`_pack_codes`):

    * up to :data:`PAYLOAD_BITS` bits: in the low bits of the key itself, and the
      aggregate is ``min(key_with_codes, m)`` (``min`` for m = 1), DuckDB's cheapest;
    * up to 63 bits: ``arg_min(codes, key, m)``; beyond: the same over a struct.

    **Bounded memory**: both aggregates hold a group per unit, about
    :data:`BYTES_PER_ROW` bytes per row. With ``buckets = K > 1`` the units are split by
    their salted hash (``s mod K``) and each bucket is bounded and counted on its own, its
    leaf counts added to the others'; a unit lies in one bucket, so the kept rows and the
    counts are exactly those of one pass, at about 1/K of the memory and K scans of the
    coded rows (:func:`bucket_count` sizes K from the memory limit).

    A ``row_number() OVER (PARTITION BY unit ORDER BY key) <= m`` filter keeps the same
    rows, but DuckDB runs it as a top-n aggregate over whole rows (a struct) and a join
    back: several times the time and memory. In Spark the same step is that window
    (:mod:`dpsql.release.spark`)."""
    if getattr(con, "engine_name", "duckdb") == "spark":
        return con.count_bounded(relation, code_sizes, sets, max_rows, salt, unit_type)
    unit_hash = bounding.duckdb_unit_hash("dpsql_unit", unit_type)
    m = int(max_rows)
    packed, decode, bits = _pack_codes(code_sizes)
    attrs = sorted(code_sizes)
    codes = ", ".join(f"c_{a}" for a in attrs)
    payload = (f"({packed})::UBIGINT" if bits <= 63
               else bounding.duckdb_chained_payload([f"c_{a}" for a in attrs]))
    salted = bounding.duckdb_salted(unit_hash, salt)
    key = bounding.duckdb_key("dpsql_s", "dpsql_pay", "dpsql_occ")
    top = "" if m == 1 else f", {m}"
    if bits <= PAYLOAD_BITS:
        mask = (1 << bits) - 1
        choose = f"min((dpsql_key >> {bits} << {bits}) | ({packed})::UBIGINT{top})"
        code = f"(dpsql_x & {mask})::BIGINT"
    else:
        choose = f"arg_min({packed}, dpsql_key{top})"
        code = "dpsql_x"
    kept = "dpsql_kept" if m == 1 else "unnest(dpsql_kept)"
    k = max(1, int(buckets))
    target = LEAVES if k == 1 else "dpsql_leaves_part"
    if k > 1:
        cols = "".join(f", c_{a} BIGINT" for a in sorted({a for s in sets for a in s}))
        con.execute(f"CREATE TEMP TABLE {target} (dpsql_set VARCHAR{cols}, n BIGINT)")
    rows = 0
    for b in range(k):
        where = "" if k == 1 else f"WHERE {salted} % {k} = {b}"
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW dpsql_keyed AS SELECT *, {key} AS dpsql_key FROM ("
            f"SELECT {codes}, dpsql_unit, dpsql_pay, unnest(range(dpsql_n)) AS dpsql_occ, "
            f"{salted} AS dpsql_s FROM (SELECT {codes}, dpsql_unit, {payload} AS dpsql_pay, "
            f"count(*) AS dpsql_n FROM {relation} {where} GROUP BY ALL))")
        con.execute(f"CREATE OR REPLACE TEMP TABLE dpsql_units AS SELECT count(*) AS k, "
                    f"{choose} AS dpsql_kept FROM dpsql_keyed GROUP BY dpsql_unit")
        rows += int(con.execute("SELECT coalesce(sum(k), 0) FROM dpsql_units").fetchall()[0][0])
        con.execute(f"CREATE OR REPLACE TEMP VIEW dpsql_rows AS SELECT {decode} FROM (SELECT "
                    f"{code} AS dpsql_p FROM (SELECT {kept} AS dpsql_x FROM dpsql_units))")
        count_codes(con, "dpsql_rows", sets, target=target)
        con.execute("DROP TABLE dpsql_units")
    if k > 1:
        cols = ", ".join(f"c_{a}" for a in sorted({a for s in sets for a in s}))
        con.execute(f"INSERT INTO {LEAVES} (dpsql_set, {cols}, n) SELECT dpsql_set, {cols}, "
                    f"sum(n)::BIGINT FROM {target} GROUP BY ALL")
        con.execute(f"DROP TABLE {target}")
    return rows


def _pack_codes(code_sizes: dict[str, int]) -> tuple[str, str, int]:
    """SQL packing the ``c_<attr>`` columns into one value ``dpsql_p``, the select list
    unpacking them, and the bits the packed value needs (64 or more: a struct)."""
    attrs = sorted(code_sizes)
    strides, span = {}, 1
    for a in attrs:
        strides[a] = span
        span *= max(1, int(code_sizes[a]))
    bits = (span - 1).bit_length()
    if bits > 63:
        return ("struct_pack(" + ", ".join(f"c_{a} := c_{a}" for a in attrs) + ")",
                ", ".join(f"dpsql_p.c_{a} AS c_{a}" for a in attrs), bits)
    packed = " + ".join(f"c_{a} * {strides[a]}" for a in attrs)
    decode = ", ".join(f"(dpsql_p // {strides[a]}) % {max(1, int(code_sizes[a]))} AS c_{a}"
                       for a in attrs)
    return packed, decode, bits


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


def rows_used(con: duckdb.DuckDBPyConnection, sets: Sequence[Sequence[str]]) -> int:
    """Rows counted by the view that counts the most: every used row, less those an
    ``on_null = "drop"`` attribute leaves out of the views over it only (the first view's
    count would say 0 for a release whose first view is over an all-NULL attribute while
    the other views count every row)."""
    return max(total_rows(con, s) for s in sets)


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
