"""The spec's row policies at ingest: what to do with NULLs, values outside a public
domain or spine, values out of bounds, and NULL privacy-unit ids; and the report of what
they did, shown to the curator and never stored.

Both ingest paths (:mod:`dpsql.release.ingest`) first compute one statistics aggregate
(:func:`stats_sql`, :func:`outside_stats`: per attribute its NULLs and bad values), then
:func:`policies_from_stats` refuses what an ``error`` policy refuses, reports what is
dropped or clamped, and says per attribute what to drop (:class:`Policy`).

Two kinds of drop differ in reach:

* **Outside the domain** (``on_out_of_domain`` / ``on_out_of_bounds = "drop"``,
  :func:`drops_outside`): the row leaves **every** view, whether or not a view uses the
  attribute: the rule defines the population. An attribute in no view is read for this
  rule alone (:func:`outside_mask`). These rows leave before contribution bounding.
* **NULL** (``on_null = "drop"``): the row leaves the views over the attribute only
  (:func:`drop_null_leaves`, after bounding); an attribute in no view drops no row.

Both are public rules applied to one row at a time, so neither changes a sensitivity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from dpsql._sql import quote_ident
from dpsql.errors import DataError
from dpsql.release import counts
from dpsql.release.domain_lookup import out_of_bounds_sql, outside_sql, refuse_out_of_domain
from dpsql.spec import Categorical, Range


@dataclass
class IngestReport:
    """What ingestion did to the rows. Shown to the curator; never stored in a release."""

    rows_read: int = 0
    rows_used: int = 0  # rows of the view that counts the most (counts.rows_used)
    actions: list[tuple[str, str, int]] = field(default_factory=list)  # (attr, action, rows)
    null_units: int = 0  # rows dropped for a NULL privacy-unit id (on_null = "drop")
    # earlier releases of the same source into the output folder (dpsql.release.ledger)
    prior_releases: list[dict] = field(default_factory=list)
    column_types: dict[str, str] = field(default_factory=dict)  # the source's schema

    def add(self, attribute: str, action: str, rows: int) -> None:
        if rows:
            self.actions.append((attribute, action, int(rows)))


@dataclass(frozen=True)
class Policy:
    """What the policies decided for one attribute, given its NULL and bad-value counts.

    NULLs under ``drop`` or ``category`` are counted under the attribute's *NULL code*
    (one past its largest code: ``ingest._code_sizes`` without the extra code); a
    ``drop`` then removes those leaves from the views over the attribute only
    (:func:`drop_null_leaves`), so the other views keep the rows, and a ``category``
    keeps them as the public NULL value of the domain."""

    drop_null: bool
    drop_bad: bool  # out of domain / spine / bounds; clamping is not a drop
    null_code: int | None = None  # the code NULLs are counted under (None: no NULLs)

    @property
    def drops(self) -> bool:
        return self.drop_null or self.drop_bad


def drops_outside(attr) -> bool:
    """Whether ``attr``'s policy drops rows outside its domain, spine or bounds. Such a
    row leaves every view, whether or not a view uses ``attr``: the policy defines the
    population. (``on_null = "drop"`` does not: it leaves the views over ``attr`` only.)"""
    if isinstance(attr, Range):
        return attr.on_out_of_bounds == "drop"
    return attr.on_out_of_domain == "drop"


def _dropped(attr) -> str:
    """The report's words for rows dropped outside ``attr``'s domain."""
    if isinstance(attr, Range):
        return "dropped (out of bounds)"
    return "dropped (out of domain)" if isinstance(attr, Categorical) else \
        "dropped (not in spine)"


def outside_mask(outside: list) -> tuple[str, list[str]]:
    """SQL over source rows (``dpsql_src``) of ``dpsql_out``, a BIGINT whose bit i is set
    when the row's value of ``outside[i]`` (attributes in no view, :func:`drops_outside`)
    is outside its domain, and the joins it needs. The rows with ``dpsql_out = 0`` are
    kept."""
    terms, joins = [], []
    for i, attr in enumerate(outside):
        cond, join = outside_sql(attr, {c: f"dpsql_src.{quote_ident(c)}" for c in attr.columns})
        terms.append(f"CASE WHEN {cond} THEN {1 << i} ELSE 0 END")
        joins += [join] if join else []
    return f"CAST({' + '.join(terms) or '0'} AS BIGINT)", joins


def outside_stats(outside: list, where: str, weight: str) -> list[str]:
    """Aggregates giving, per attribute of ``outside``, the rows outside its domain."""
    return [f"coalesce(sum({weight}) FILTER (WHERE {where} AND (dpsql_out & {1 << i}) <> 0), 0)"
            for i in range(len(outside))]


def _apply_policies(con: duckdb.DuckDBPyConnection, used: list, stats: list[tuple[int, ...]],
                    report: IngestReport, sizes: dict[str, int]) -> dict[str, Policy]:
    """Raise the first policy error, record what was dropped or clamped, and say per
    attribute what to drop. ``stats[i]`` = (NULLs, bad values[, NaNs]) of ``used[i]``."""
    out = {}
    for attr, st in zip(used, stats):
        n = attr.name
        nulls, bad = int(st[0]), int(st[1])
        if nulls and attr.on_null == "error":
            raise DataError(f"attribute {n!r} has {nulls} NULL value(s); clean them, or "
                            f"set on_null = \"drop\" (drops them from the views over {n!r} "
                            f"only) or \"category\" for attributes.{n}")
        report.add(n, "dropped (NULL) from the views over it" if attr.on_null == "drop"
                   else "kept as the NULL category", nulls)
        if isinstance(attr, Range):
            nan = int(st[2])
            if bad and attr.on_out_of_bounds == "error":
                raise DataError(f"range attribute {n!r} has {bad} value(s) outside "
                                f"{_bounds_text(attr)}; widen the bounds, or set "
                                f"on_out_of_bounds = \"clamp\" or \"drop\"")
            if bad and attr.on_out_of_bounds == "drop":
                report.add(n, _dropped(attr), bad)
            elif bad:
                if nan:
                    raise DataError(f"range attribute {n!r} has {nan} NaN value(s); NaN "
                                    "cannot be clamped into a bin: drop them in a 'sql' source")
                report.add(n, "clamped (out of bounds)", bad)
            drop_bad = bool(bad) and attr.on_out_of_bounds == "drop"
        else:
            if bad:
                refuse_out_of_domain(con, attr, bad)
                report.add(n, _dropped(attr), bad)
            drop_bad = bool(bad)
        out[n] = Policy(drop_null=bool(nulls) and attr.on_null == "drop", drop_bad=drop_bad,
                         null_code=sizes[n] - 1 if nulls else None)
    return out


def drop_null_leaves(con: duckdb.DuckDBPyConnection, policy: dict[str, Policy]) -> None:
    """Remove the NULL-code leaves of ``on_null = "drop"`` attributes: from the views over
    the attribute only (its code column is NULL in the other attribute sets)."""
    for n, p in policy.items():
        if p.drop_null:
            con.execute(f"DELETE FROM {counts.LEAVES} WHERE c_{n} = {p.null_code}")


def _bounds_text(attr: Range) -> str:
    """``[lower, upper)`` as the spec wrote them: dates and timestamps as such, not as the
    day or second numbers the bins are cut on (``[1.57784e+09, 1.58043e+09)``)."""
    if attr.value_type in ("date", "timestamp"):
        from dpsql.domains.calendar import axis_text

        return f"[{axis_text(attr.value_type, attr.lower)}, " \
            f"{axis_text(attr.value_type, attr.upper)})"
    return f"[{attr.lower:g}, {attr.upper:g})"


def stats_sql(attr, where: str, weight: str) -> list[str]:
    """Aggregates giving (NULLs, bad[, NaN]) for ``attr`` over looked-up rows or keys."""
    n = attr.name

    def total(cond: str) -> str:
        return f"coalesce(sum({weight}) FILTER (WHERE {where} AND {cond}), 0)"
    if isinstance(attr, Range):
        if weight == "1":  # rows: the raw value v_<a>
            bad = out_of_bounds_sql(attr, f"v_{n}")
            return [total(f"n_{n}"), total(f"NOT n_{n} AND {bad}"),
                    total(f"NOT n_{n} AND isnan(v_{n})")]
        return [total(f"n_{n}"), total(f"NOT n_{n} AND c_{n} >= {attr.bins}"),
                total(f"NOT n_{n} AND c_{n} >= {2 * attr.bins}")]
    return [total(f"n_{n}"), total(f"NOT n_{n} AND c_{n} IS NULL")]


def null_units(con: duckdb.DuckDBPyConnection, unit, report: IngestReport) -> int:
    """Apply ``[privacy_unit] on_null`` to rows whose unit id is NULL; return how many are
    dropped. Bounding groups by the id, so NULL rows would be one "person" cut to
    ``max_rows``: they are refused (``error``, the default) or dropped and reported on a
    line of their own (``drop``), never silently bounded together."""
    nulls = int(con.execute("SELECT count(*) FROM dpsql_looked_up WHERE dpsql_unit IS NULL"
                            ).fetchall()[0][0])
    if nulls and unit.on_null == "error":
        raise DataError(f"privacy unit column {unit.column!r} has {nulls:,} NULL value(s); a "
                        "NULL id is nobody's, so those rows cannot be bounded per person: "
                        "fill in the ids, or set on_null = \"drop\" under [privacy_unit]")
    report.null_units = nulls
    report.add(unit.column, "dropped (NULL privacy-unit id)", nulls)
    return nulls


def policies_from_stats(con: duckdb.DuckDBPyConnection, used: list, outside: list,
                         aggs: list[str], table: str, report: "IngestReport",
                         sizes: dict[str, int]) -> dict:
    """Run the one statistics aggregate (rows read, then per attribute the policy counts of
    :func:`stats_sql`, then :func:`outside_stats`), refuse an empty source, apply the
    policies and report the rows dropped outside the domains of ``outside``."""
    stats = con.execute(f"SELECT {', '.join(aggs)} FROM {table}").fetchall()[0]
    report.rows_read = int(stats[0])
    if report.rows_read == 0:
        raise DataError("the source has no rows; a release of an empty table is meaningless. "
                        "Check the source path or the query.")
    per_attr, pos = [], 1
    for attr in used:
        k = 3 if isinstance(attr, Range) else 2
        per_attr.append(stats[pos:pos + k])
        pos += k
    policy = _apply_policies(con, used, per_attr, report, sizes)
    for attr, bad in zip(outside, stats[pos:]):
        report.add(attr.name, _dropped(attr), bad)
    return policy
