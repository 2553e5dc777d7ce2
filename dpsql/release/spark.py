"""``engine = "spark"``: the row-level step of a release as Spark SQL jobs.

:class:`SparkConnection` is the second implementation of the one interface that
:mod:`dpsql.release.ingest` and :mod:`dpsql.release.counts` count through: the part of a
DuckDB connection they use (``execute`` of SQL statements, ``fetchall``,
``register``/``unregister`` of small public tables, ``DESCRIBE``), plus
:meth:`SparkConnection.count_bounded`, contribution bounding. So the reading, domain
lookups, policies and ``GROUPING SETS`` leaf counts are the very SQL that DuckDB runs,
translated to Spark SQL by sqlglot: no policy is written twice, so value types (exact
decimals, dates) and the per-attribute NULL policies hold on Spark as they do on DuckDB.
Temporary tables become checkpointed DataFrames (each computed once, as DuckDB's are),
temporary views stay lazy; a ``DELETE`` (the NULL leaves of an ``on_null = "drop"``
attribute) replaces a table by its checkpointed remaining rows.

Only the leaf counts (:meth:`SparkConnection.leaves_arrow`, as Arrow) and the policy
counts (single-row aggregates) come back to the driver; the build loads the leaf counts
into its DuckDB connection, and everything after (mechanisms, writing) is unchanged.

**Bounding** keeps each unit's ``max_rows`` rows of least key, the key of
:mod:`dpsql.release.bounding` computed bit for bit: DuckDB's 64-bit ``mix`` needs
products modulo 2⁶⁴, which Spark's ANSI ``BIGINT`` arithmetic refuses (overflow), so
they are computed from 16-bit limbs whose partial products never overflow (BIGINT
arithmetic throughout: an earlier ``DECIMAL(38, 0)`` form was exact too, but Spark's
wide decimals are Java BigDecimals, the bulk of a local release's time). The choice is then a ``row_number()`` window by unit. The salt reaches Spark
as a one-row broadcast DataFrame, not as a literal: it never appears in a query plan,
the Spark UI or a log.

Sources are read with Spark's readers: ``.parquet``, ``.csv``/``.tsv`` (header row,
inferred types), ``.json``/``.jsonl``/``.ndjson`` paths, or a ``sql`` query over the
session's tables (Spark SQL). ``duckdb:<file>:<table>`` is DuckDB's only.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import sqlglot

from dpsql.engine_settings import EngineSettings
from dpsql.errors import DataError, OperationalError, SpecError
from dpsql.release import bounding, counts

_CREATE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TEMP\s+(VIEW|TABLE)\s+(\"[^\"]+\"|\w+)"
                     r"\s+AS\s+(.*)$", re.S | re.I)
_CREATE_EMPTY = re.compile(r"^\s*CREATE\s+TEMP\s+TABLE\s+(\"[^\"]+\"|\w+)\s*\((.*)\)\s*$",
                           re.S | re.I)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\"[^\"]+\"|\w+)\s*\(([^)]*)\)\s*(SELECT\s.*)$",
                     re.S | re.I)
_DROP = re.compile(r"^\s*DROP\s+(?:TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?(\"[^\"]+\"|\w+)\s*$", re.I)
_DELETE = re.compile(r"^\s*DELETE\s+FROM\s+(\"[^\"]+\"|\w+)\s+WHERE\s+(.*)$", re.S | re.I)
_DESCRIBE = re.compile(r"^\s*DESCRIBE\s+(\"[^\"]+\"|\w+)\s*$", re.I)
_READER = re.compile(r"\b(read_parquet|read_csv_auto|read_json_auto)\('((?:[^']|'')*)'\)")
_SPARK_TYPES = {"VARCHAR": "string", "BIGINT": "bigint", "DOUBLE": "double",
                "BOOLEAN": "boolean", "INTEGER": "int"}
_DUCK_TYPES = {"bigint": "BIGINT", "int": "INTEGER", "smallint": "SMALLINT",
               "tinyint": "TINYINT", "double": "DOUBLE", "float": "FLOAT",
               "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE",
               "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP", "binary": "BLOB"}
TWO64, TWO63 = 2**64, 2**63


def _name(token: str) -> str:
    return token[1:-1].replace('""', '"') if token.startswith('"') else token


def _signed(value: int) -> int:
    value %= TWO64
    return value - TWO64 if value >= TWO63 else value


class SparkConnection:
    """The ingest/counting interface of a DuckDB connection, over a SparkSession."""

    engine_name = "spark"

    def __init__(self, session: Any, owned: bool = False, scratch: str | None = None
                 ) -> None:
        self.spark = session
        self.owned = owned
        self.scratch = scratch  # the owned session's warehouse directory, removed on close
        self._rows: list[tuple] = []
        self._parts: dict[str, tuple[Any, list[Any]]] = {}  # name -> (empty frame, parts)
        self._views: list[str] = []
        self._ids = itertools.count()

    @classmethod
    def open(cls, settings: EngineSettings, session: Any = None) -> "SparkConnection":
        """On ``session`` (a SparkSession the caller configured), or on a session started
        for ``settings.master`` (default ``local[*]``), stopped by :meth:`close`."""
        if session is not None:
            return cls(session, owned=False)
        try:
            from pyspark.sql import SparkSession
        except ImportError as err:
            raise OperationalError("engine = \"spark\" needs pyspark: pip install "
                                   "'dpsql[spark]' (and a Java runtime, 17 or later)") from err
        scratch = None
        try:
            active = SparkSession.getActiveSession()
            if active is not None and settings.master is None:
                return cls(active, owned=False)
            master = settings.master or "local[*]"
            # dpsql writes no Spark table: a warehouse of its own, not spark-warehouse/
            # left in the curator's working directory
            scratch = tempfile.mkdtemp(prefix="dpsql-spark-")
            builder = SparkSession.builder.master(master).appName("dpsql release") \
                .config("spark.ui.showConsoleProgress", "false") \
                .config("spark.sql.warehouse.dir", scratch)
            if master.startswith("local"):  # one machine: a few shuffle partitions suffice,
                # and the driver is the executor: Spark's 1g heap dies on 10M-row bounding
                builder = builder.config("spark.sql.shuffle.partitions", "8") \
                    .config("spark.driver.memory", "4g")
            return cls(builder.getOrCreate(), owned=True, scratch=scratch)
        except Exception as err:  # Java missing, bad master URL, cluster unreachable
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise OperationalError(f"cannot start Spark (master "
                                   f"{settings.master or 'local[*]'}): "
                                   f"{_first_line(err)}; check engine.master "
                                   "(--spark-master) and that Java 17+ is installed") from err

    def check_supported(self, spec: Any) -> None:
        """Refuse, in one line, what the translated SQL is not tested to bin as DuckDB
        does: timestamp attributes (DuckDB's epoch and time zones differ from Spark's
        TIMESTAMP/TIMESTAMP_NTZ readings) and calendar-month bins."""
        from dpsql.spec import Range
        for attr in spec.attributes.values():
            if not isinstance(attr, Range):
                continue
            if attr.value_type == "timestamp" or attr.unit == "month":
                what = ("a timestamp attribute" if attr.value_type == "timestamp"
                        else "calendar-month bins")
                raise SpecError(f"attributes.{attr.name}: engine = \"spark\" does not "
                                f"release {what} yet; use engine = \"duckdb\", or bin it "
                                "in a 'sql' source (an integer day or month number)")

    def close(self) -> None:
        for view in self._views:
            self.spark.catalog.dropTempView(view)
        self._views.clear()
        if self.owned:
            self.spark.stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    # -- the DuckDB-connection subset --------------------------------------------------
    def execute(self, sql: str, params: Any = None) -> "SparkConnection":
        if params:
            raise OperationalError("SparkConnection.execute takes no parameters "
                                   "(this is a bug in dpsql, please report it)")
        try:
            self._rows = self._run(sql)
        except (SpecError, DataError, OperationalError):
            raise
        except Exception as err:  # pyspark's AnalysisException, Py4JJavaError, ...
            raise DataError(f"cannot read the source (Spark): {_first_line(err)}") from err
        return self

    def fetchall(self) -> list[tuple]:
        return self._rows

    def register(self, name: str, columns: dict[str, np.ndarray]) -> None:
        """A small public table (a domain, a spine) from numpy columns."""
        from pyspark.sql.types import (BooleanType, DoubleType, LongType, StringType,
                                       StructField, StructType)
        fields, values = [], []
        for col, arr in columns.items():
            arr = np.asarray(arr)
            kind = {"i": LongType(), "u": LongType(), "f": DoubleType(),
                    "b": BooleanType()}.get(arr.dtype.kind, StringType())
            fields.append(StructField(col, kind, True))
            values.append(arr.tolist())
        frame = self.spark.createDataFrame(list(zip(*values)), StructType(fields))
        self._view(frame, name)

    def unregister(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    def leaves_arrow(self) -> pa.Table:
        """The leaf counts (``dpsql_leaves``), collected to the driver as Arrow."""
        return self.spark.table(counts.LEAVES).toArrow()

    # -- statements --------------------------------------------------------------------
    def _run(self, sql: str) -> list[tuple]:
        if sql.lstrip().upper().startswith("ATTACH"):
            raise SpecError("source: 'duckdb:<file>:<table>' sources are read by DuckDB only; "
                            "with engine = \"spark\" give a .parquet/.csv/.json path or a "
                            "'sql' query over the session's tables")
        m = _CREATE_EMPTY.match(sql)
        if m and " AS " not in m.group(2).upper():
            name = _name(m.group(1))
            schema = ", ".join(f"{col} {_SPARK_TYPES[typ.upper()]}" for col, typ in
                               (part.split() for part in m.group(2).split(",")))
            empty = self.spark.createDataFrame([], schema)
            self._parts[name] = (empty, [])
            self._view(empty, name)
            return []
        m = _CREATE.match(sql)
        if m:
            kind, name, select = m.group(1).upper(), _name(m.group(2)), m.group(3)
            query = re.match(r"^SELECT \* FROM \((.*)\)$", select, re.S)
            if name == "dpsql_src" and query and not _READER.search(select):
                frame = self.spark.sql(query.group(1))  # the spec's 'sql': Spark SQL as is
            else:
                frame = self._frame(select)
            if kind == "TABLE":
                frame = frame.localCheckpoint(eager=True)
            self._view(frame, name)
            return []
        m = _INSERT.match(sql)
        if m:
            name = _name(m.group(1))
            cols = [c.strip() for c in m.group(2).split(",")]
            frame = self._frame(m.group(3)).toDF(*cols)
            empty, parts = self._parts[name]
            parts.append(frame.localCheckpoint(eager=True))
            union = empty
            for part in parts:
                union = union.unionByName(part, allowMissingColumns=True)
            self._view(union, name)
            return []
        m = _DROP.match(sql)
        if m:
            self.spark.catalog.dropTempView(_name(m.group(1)))
            self._parts.pop(_name(m.group(1)), None)
            return []
        m = _DELETE.match(sql)
        if m:  # a table without the rows where the condition is true (not NULL)
            name = _name(m.group(1))
            kept = self._frame(f"SELECT * FROM {m.group(1)} "
                               f"WHERE NOT coalesce(({m.group(2)}), false)")
            kept = kept.localCheckpoint(eager=True)
            if name in self._parts:
                self._parts[name] = (self._parts[name][0], [kept])
            self._view(kept, name)
            return []
        m = _DESCRIBE.match(sql)
        if m:
            schema = self.spark.table(_name(m.group(1))).schema
            return [(f.name, _duck_type(f.dataType.simpleString())) for f in schema]
        if sql.lstrip().upper().startswith("SET "):
            return []
        return [tuple(row) for row in self._frame(sql).collect()]

    def _frame(self, select: str) -> Any:
        """A DataFrame for a DuckDB-dialect SELECT: file readers become Spark readers."""
        def reader(m: re.Match) -> str:
            kind, path = m.group(1), m.group(2).replace("''", "'")
            read = self.spark.read
            if kind == "read_parquet":
                frame = read.parquet(path)
            elif kind == "read_csv_auto":
                sep = "\t" if path.lower().endswith(".tsv") else ","
                frame = read.csv(path, header=True, inferSchema=True, sep=sep)
            else:
                frame = read.json(path)
            view = f"dpsql_file_{next(self._ids)}"
            self._view(frame, view)
            return view
        select = _READER.sub(reader, select)
        text = sqlglot.transpile(select, read="duckdb", write="spark")[0]
        return self.spark.sql(text)

    def _view(self, frame: Any, name: str) -> None:
        frame.createOrReplaceTempView(name)
        if name not in self._views:
            self._views.append(name)

    # -- bounding ----------------------------------------------------------------------
    def count_bounded(self, relation: str, code_sizes: dict[str, int],
                      sets: Sequence[Sequence[str]], max_rows: int, salt: int,
                      unit_type: str) -> int:
        """:func:`dpsql.release.counts.count_bounded` in Spark: the same key, the same
        kept rows, then the same ``GROUPING SETS`` counts. Returns the rows before
        bounding."""
        from pyspark.sql import Window, functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        attrs = sorted(code_sizes)
        codes = [f"c_{a}" for a in attrs]
        packed, _, bits = counts._pack_codes(code_sizes)
        grouped = (self.spark.table(relation).groupBy(*codes, "dpsql_unit")
                   .agg(F.count(F.lit(1)).alias("dpsql_n"))).localCheckpoint(eager=True)
        rows = grouped.agg(F.sum("dpsql_n")).collect()[0][0] or 0
        salt_frame = self.spark.createDataFrame(
            [(_signed(salt),)], StructType([StructField("dpsql_salt", LongType(), False)]))
        df = grouped.crossJoin(F.broadcast(salt_frame))
        df = _unit_hash(F, df, unit_type)
        df = _mix(F, df.withColumn("dpsql_s", F.col("dpsql_s").bitwiseXOR(F.col("dpsql_salt"))),
                  "dpsql_s")
        if bits <= 63:
            df = df.withColumn("dpsql_pay", F.expr(packed).cast("bigint"))
        else:
            df = df.withColumn("dpsql_pay", F.lit(0).cast("bigint"))
            for c in codes:
                df = _mix(F, df.withColumn("dpsql_pay", F.col("dpsql_pay").bitwiseXOR(
                    F.col(c).cast("bigint"))), "dpsql_pay")
        df = df.withColumn("dpsql_occ", F.explode(F.sequence(
            F.lit(0).cast("bigint"), F.col("dpsql_n") - 1)))
        df = _mix(F, df.withColumn("dpsql_key", F.col("dpsql_s").bitwiseXOR(F.col("dpsql_pay"))),
                  "dpsql_key")
        df = _mix(F, df.withColumn("dpsql_key", F.col("dpsql_key").bitwiseXOR(F.col("dpsql_occ"))),
                  "dpsql_key")
        if bits <= counts.PAYLOAD_BITS:  # DuckDB orders by (key >> bits, codes)
            first = (F.shiftrightunsigned("dpsql_key", bits) if bits
                     else F.col("dpsql_key").bitwiseXOR(F.lit(-TWO63)))
            order = [first, F.col("dpsql_pay")]
        else:  # unsigned order of the key: flip the sign bit
            order = [F.col("dpsql_key").bitwiseXOR(F.lit(-TWO63))]
        rank = F.row_number().over(Window.partitionBy("dpsql_unit").orderBy(*order))
        kept = df.withColumn("dpsql_r", rank).where(F.col("dpsql_r") <= int(max_rows))
        self._view(kept.select(*codes), "dpsql_rows")
        counts.count_codes(self, "dpsql_rows", sets)
        return int(rows)


def ingest_on_spark(spec: Any, con: Any, salt: int, hierarchy_codes: dict[str, np.ndarray],
                    session: Any = None) -> Any:
    """:func:`dpsql.release.ingest.ingest` on Spark (``session``, or one for the spec's
    engine settings); the leaf counts come back as Arrow into the DuckDB connection
    ``con``'s ``dpsql_leaves``, so that everything after is the same."""
    from dpsql.release.ingest import ingest
    rows = SparkConnection.open(spec.engine, session)
    try:
        report = ingest(spec, rows, salt, hierarchy_codes=hierarchy_codes)
        con.register("dpsql_leaves_in", rows.leaves_arrow())
        con.execute(f"CREATE TEMP TABLE {counts.LEAVES} AS SELECT * FROM dpsql_leaves_in")
        con.unregister("dpsql_leaves_in")
    finally:
        rows.close()
    return report


def _unit_hash(F: Any, df: Any, unit_type: str) -> Any:
    """``df`` with ``dpsql_s`` = ``u`` of :mod:`bounding`, a signed BIGINT (two's
    complement) from ``dpsql_unit`` of SQL type ``unit_type``."""
    null = F.lit(_signed(bounding.NULL_UNIT)).cast("bigint")
    if unit_type.upper().startswith(bounding.INTEGER_TYPES):
        df = _mix(F, df.withColumn("dpsql_s", F.col("dpsql_unit").cast("bigint")), "dpsql_s")
        return df.withColumn("dpsql_s", F.coalesce(F.col("dpsql_s"), null))
    hex16 = "substr(md5(CAST(dpsql_unit AS STRING)), 1, 16)"
    u = F.expr(_to_signed(f"CAST(conv({hex16}, 16, 10) AS DECIMAL(20, 0))"))
    return df.withColumn("dpsql_s", F.coalesce(u, null))


def _to_signed(decimal: str) -> str:
    """SQL: an unsigned value in [0, 2⁶⁴) held in a DECIMAL, as a two's-complement BIGINT."""
    return (f"CAST(pmod({decimal} + CAST({TWO63} AS DECIMAL(20, 0)), "
            f"CAST({TWO64} AS DECIMAL(21, 0))) - CAST({TWO63} AS DECIMAL(20, 0)) AS BIGINT)")


def _mulmod_sql(x: str) -> str:
    """SQL: ``x · MIX mod 2⁶⁴`` for the BIGINT ``x`` (bits as unsigned), exactly, in
    BIGINT arithmetic that never overflows (Spark's ANSI mode refuses a wrapping product):
    x in four 16-bit limbs, each partial product below 2³⁴, the carries added by hand and
    the two 32-bit halves joined with a shift (a bit operation, never checked)."""
    m = [(bounding.MIX >> (16 * i)) & 0xFFFF for i in range(4)]
    xs = [f"({x} & 65535L)", f"(shiftrightunsigned({x}, 16) & 65535L)",
          f"(shiftrightunsigned({x}, 32) & 65535L)", f"shiftrightunsigned({x}, 48)"]
    t = [" + ".join(f"{xs[i]} * {m[k - i]}L" for i in range(k + 1)) for k in range(4)]
    low = f"({t[0]} + shiftleft(({t[1]}) & 65535L, 16))"
    high = (f"((shiftrightunsigned({low}, 32) + shiftrightunsigned({t[1]}, 16) + {t[2]} + "
            f"shiftleft(({t[3]}) & 65535L, 16)) & 4294967295L)")
    return f"(shiftleft({high}, 32) | ({low} & 4294967295L))"


def _mix(F: Any, df: Any, col: str) -> Any:
    """``df`` with the BIGINT column ``col`` replaced by ``mix(col)``, one step a
    projection (so that no step is computed twice)."""
    xs = f"{col} ^ shiftrightunsigned({col}, 32)"
    df = df.withColumn(col, F.expr(xs))
    df = df.withColumn(col, F.expr(_mulmod_sql(col)))
    df = df.withColumn(col, F.expr(xs))
    df = df.withColumn(col, F.expr(_mulmod_sql(col)))
    return df.withColumn(col, F.expr(xs))


def _duck_type(spark_type: str) -> str:
    if spark_type.startswith("decimal"):
        return spark_type.upper()
    return _DUCK_TYPES.get(spark_type, spark_type.upper())


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
