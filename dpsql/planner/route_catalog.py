"""Pass 0: schema discovery goes to the catalog database, not to the release.

An analyst (or a tool) learns the logical tables' names and columns with ``DESCRIBE t``,
``SHOW t``, ``SHOW TABLES``, ``SHOW ALL TABLES``, MySQL's ``SHOW COLUMNS FROM t`` (read as
``DESCRIBE t``), or queries over ``information_schema``, ``pg_catalog`` and DuckDB's
``duckdb_*()`` functions. None of them reads a count: they describe the public spec. So
they run on the *catalog database* (:mod:`dpsql.schema_catalog`: one empty table per
logical table, the release's physical tables absent), and :func:`route_catalog` decides
which statements go there, from the text and the logical table names only:

* a discovery statement (above) whose table, if any, is a logical table or a catalog
  relation;
* a query whose every table is a catalog relation (``information_schema.*``,
  ``pg_catalog.*``, ``pg_*``, ``duckdb_*``, a table function such as ``duckdb_columns()``)
  and that names no logical table. ``query()``/``query_table()``, which name a table
  inside a string, are refused there: the empty placeholder tables would answer
  ``COUNT(*) = 0``, and dpsql never gives a wrong number.

``SUMMARIZE`` of a logical table would summarise rows, which a release does not have: it
is refused with the aggregate to write instead. Everything else is planned as before. A
cheap test on the text comes first (a first word, three substrings), so that ordinary
queries pay a few microseconds.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from dpsql.errors import UnsupportedQueryError
from dpsql.planner._sqlglot_compat import parse_duckdb
from dpsql.planner.refuse_file_reads import refuse_file_reads_in
from dpsql.planner.resolve_helpers import HELPERS

CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema"})
_WORDS = ("describe", "desc", "show", "summarize")
_MARKS = ("pg_", "duckdb_", "information_schema")
_SHOW_TABLES = re.compile(r"^\s*SHOW\s+(?:ALL\s+)?TABLES\s*;?\s*$", re.I)
_SHOW_COLUMNS = re.compile(r"^\s*SHOW\s+(?:FULL\s+)?(?:COLUMNS|FIELDS)\s+(?:FROM|IN)\s+"
                           r"(?P<table>[\w\".]+)(?:\s+(?:FROM|IN)\s+(?P<db>[\w\"]+))?\s*;?\s*$",
                           re.I)
_DESCRIBE = re.compile(r"^\s*(?:DESCRIBE|DESC|SHOW)\s+(?P<table>[\w\".]+)\s*;?\s*$", re.I)
_LIMIT_0 = re.compile(r"\blimit\s+0\b")
BY_NAME = re.compile(r"\b(?:query|query_table)\s*\(", re.I)


def by_name() -> str:
    return ("query() and query_table() are not supported: name the table in FROM, e.g. "
            "SELECT COUNT(*) FROM <table>")


def discovery_sql(text: str, logical: set[str]) -> str | None:
    """The catalog statement for a discovery statement about the logical tables, or
    None: ``SHOW [ALL] TABLES``; ``DESCRIBE t``, ``DESC t``, ``SHOW t``, ``SHOW COLUMNS
    FROM t [FROM db]`` (-> ``DESCRIBE [db.]t``) when ``t`` (lower case) is logical."""
    if _SHOW_TABLES.match(text):
        return text.strip().rstrip(";").strip()
    m = _SHOW_COLUMNS.match(text) or _DESCRIBE.match(text)
    if m is None:
        return None
    table = m.group("table")
    name = table.split(".")[-1].strip('"').lower()
    if name not in logical:
        return None
    db = m.groupdict().get("db")
    return f"DESCRIBE {db}.{table}" if db else f"DESCRIBE {table}"


def route_catalog(text: str, logical: set[str], relations: set[str] = frozenset(),
                  locked: bool = False) -> str | None:
    """The SQL to run on the catalog database for ``text``, or None to plan it
    (module docstring). ``logical``: the logical table names, lower case; ``relations``:
    other relation names of the catalog database (lower case); ``locked``: refuse file
    reads as the planner does on a locked-down connection."""
    lower = text.lower()  # a few microseconds; a case-insensitive regex took ten times that
    if not (lower.lstrip().startswith(_WORDS) or any(m in lower for m in _MARKS)
            or ("limit" in lower and _LIMIT_0.search(lower))):
        return None
    found = discovery_sql(text, logical)
    if found is not None:
        return found
    try:
        trees = [t for t in parse_duckdb(text) if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError):
        return None  # the planner reports it
    if len(trees) != 1:
        return None
    tree = trees[0]
    if isinstance(tree, exp.Summarize):
        _refuse_summarize(tree, logical)
        return None
    if not isinstance(tree, (exp.Query, exp.Describe)):
        return None
    if not catalog_only(tree, logical, relations):
        probe = shape_probe(tree, logical, set(relations), ("",))
        if probe is None:
            return None
        if locked:
            refuse_file_reads_in(probe)
        return probe.sql(dialect="duckdb")
    if BY_NAME.search(text):  # on the text: however sqlglot names the call
        raise UnsupportedQueryError(by_name())
    if locked:
        refuse_file_reads_in(tree)
    return text


def catalog_only(tree: exp.Expression, logical: set[str], relations: set[str],
                 home: tuple[str, ...] = ("",), tableless: bool = False) -> bool:
    """Whether every table ``tree`` reads is a catalog relation (or a table function or
    CTE) and none is logical. ``home``: schema names under which a logical table is
    written (``public`` over the server, the release alias). ``tableless``: whether a
    statement that reads no table at all counts (``SELECT version()`` over the server,
    whose session DuckDB would answer as DuckDB; in-process it runs where it is)."""
    if any(f.name.lower() in HELPERS for f in tree.find_all(exp.Anonymous)):
        return False  # the release's helpers (dp_level, ...): the planner resolves them
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    seen = False
    for t in tree.find_all(exp.Table):
        name, db = t.name.lower(), (t.text("db") or "").lower()
        if not name:  # a table function: duckdb_tables(), pragma_table_info('t')...
            seen = True
            continue
        if not db and name in ctes:
            continue
        if name in logical and db in home + ("",):
            return False
        if db in CATALOG_SCHEMAS or (not db and (name in relations or
                                                 name.startswith(("pg_", "duckdb_")))):
            seen = True
            continue
        return False
    return seen or tableless or isinstance(tree, exp.Describe)


def shape_probe(tree: exp.Expression, logical: set[str], relations: set[str],
                home: tuple[str, ...]) -> exp.Expression | None:
    """The statement for the catalog database when ``tree`` is a row-level SELECT of
    logical tables with ``LIMIT 0``, else None.

    Such a statement probes the result's columns and asks for no row: Metabase checks that
    it may read a table with ``SELECT TRUE AS "_" FROM "public"."trips" WHERE 1 <> 1 LIMIT
    0`` (and leaves out every table whose probe fails), other tools read a query's columns
    with ``SELECT * FROM t LIMIT 0``. The planner refuses a row-level read; the catalog
    database answers it from the empty logical tables: their public columns (never the
    release's dp_var, dp_parent ...) and no row, the exact answer whatever the data. A
    statement with an aggregate, GROUP BY or DISTINCT anywhere goes to the planner, whose
    column types are the real query's. ``home``: the schema names under which a logical
    table is written (``public`` over the server, the release alias)."""
    if not isinstance(tree, exp.Select):
        return None
    limit = tree.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    if not (isinstance(count, exp.Literal) and count.is_int and int(count.this) == 0):
        return None
    if tree.find(exp.AggFunc, exp.Group, exp.Distinct) is not None:
        return None
    if not any(t.name.lower() in logical for t in tree.find_all(exp.Table)):
        return None
    probe = tree.copy()
    home = set(home) | {""}  # public.trips, trips.trips: where the catalog database has it
    for t in probe.find_all(exp.Table):
        if t.name.lower() in logical and (t.text("db") or "").lower() in home \
                and not t.text("catalog"):
            t.set("db", None)
    for c in probe.find_all(exp.Column):  # Metabase: "public"."trips"."mode"
        if c.table.lower() in logical and c.text("db").lower() in home \
                and not c.text("catalog"):
            c.set("db", None)
    # every table a logical table (now unqualified), a catalog relation or a table function
    if not catalog_only(probe, set(), relations | logical):
        return None
    return probe


def _refuse_summarize(tree: exp.Summarize, logical: set[str]) -> None:
    names = {t.name.lower() for t in tree.find_all(exp.Table)}
    hit = sorted(names & logical)
    if hit:
        raise UnsupportedQueryError(
            f"SUMMARIZE {hit[0]} is not supported: a release has no rows to summarise, only "
            f"released counts. Write DESCRIBE {hit[0]} for its columns, SELECT <column>, "
            f"COUNT(*) FROM {hit[0]} GROUP BY <column> for a categorical column's counts, "
            f"or MEDIAN(<column>) / dp_quantile(<column>, p) for a binned one")


__all__ = ["route_catalog", "discovery_sql", "catalog_only", "shape_probe", "CATALOG_SCHEMAS",
           "BY_NAME"]
