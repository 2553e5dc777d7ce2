"""The ``[workload]`` of a spec: the questions the curator expects analysts to ask.

A workload is public information (SQL text and weights, such as a BI tool's query log),
never data. It changes nothing in a release by itself: ``dpsql advise`` plans each query
as the planner would and optimises the spec's budget split for the weighted workload
(:mod:`dpsql.workload`). Without a workload, the spec's own weights stand.

TOML::

    [workload]
    file = "queries.sql"          # optional: statements separated by ';'
    queries = [                   # optional: inline queries
      "SELECT COUNT(*) FROM flights",
      { sql = "SELECT origin, COUNT(*) FROM flights GROUP BY origin", weight = 3 },
    ]

In a file, a comment line ``-- weight: 3`` before a statement gives it that weight (the
default is 1), and ``-- name: by_origin`` a name. The file is read when the spec is
loaded and the queries are kept inline, so a spec written back (``to_dict``) no longer
needs the file. SQL is not parsed here: a query the spec cannot answer is reported by
``dpsql advise``, not refused at load time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpsql.spec_attributes import _err, _number, _only
from dpsql.spec_files import read_text

MAX_QUERIES = 100_000
_DIRECTIVE = re.compile(r"^\s*--\s*(weight|name)\s*:\s*(\S.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class WorkloadQuery:
    """One query of the workload: its SQL, weight (> 0) and a name for reports."""

    sql: str
    weight: Fraction = Fraction(1)
    name: str = ""

    def to_json(self) -> dict[str, Any] | str:
        if self.weight == 1 and not self.name:
            return self.sql
        out: dict[str, Any] = {"sql": self.sql}
        if self.weight != 1:
            out["weight"] = str(self.weight)
        if self.name:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class Workload:
    """The workload's queries, inline (a file's are read in when the spec is loaded)."""

    queries: tuple[WorkloadQuery, ...]

    def to_json(self) -> dict[str, Any]:
        return {"queries": [q.to_json() for q in self.queries]}


def parse_workload(raw: Any, base: Path) -> Workload:
    """The ``[workload]`` table; errors name the key path (``workload.queries[2].weight``)."""
    if not isinstance(raw, dict):
        raise _err("workload", "must be a table with 'queries' (a list of SQL strings or "
                               "{sql, weight} tables) and/or 'file' (a .sql file)")
    _only("workload", raw, {"queries", "file"})
    queries: list[WorkloadQuery] = []
    if "file" in raw:
        f = raw["file"]
        if not isinstance(f, str) or not f:
            raise _err("workload.file", f"must be a path to a .sql file, got {f!r}")
        p = Path(f) if Path(f).is_absolute() else base / f
        if not p.is_file():
            raise _err("workload.file", f"{str(p)!r} does not exist; give a .sql file of "
                                        "queries separated by ';'")
        queries += read_queries(read_text("workload.file", p), "workload.file")
    inline = raw.get("queries", [])
    if not isinstance(inline, list):
        raise _err("workload.queries", "must be a list of SQL strings or {sql, weight} tables")
    for i, q in enumerate(inline):
        queries.append(_parse_query(f"workload.queries[{i}]", q))
    if not queries:
        raise _err("workload", "lists no query; give 'queries' or a 'file' with at least one")
    if len(queries) > MAX_QUERIES:
        raise _err("workload", f"has {len(queries):,} queries; at most {MAX_QUERIES:,} are "
                               "allowed (sample a query log, weighting by frequency)")
    return Workload(tuple(queries))


def _parse_query(path: str, q: Any) -> WorkloadQuery:
    if isinstance(q, str):
        q = {"sql": q}
    if not isinstance(q, dict):
        raise _err(path, f"must be an SQL string or a table {{sql, weight}}, got {q!r}")
    _only(path, q, {"sql", "weight", "name"})
    sql = q.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise _err(f"{path}.sql", "must be a non-empty SQL query")
    weight = _number(f"{path}.weight", q.get("weight", 1))
    if weight <= 0:
        raise _err(f"{path}.weight", f"must be > 0, got {q.get('weight')!r}")
    name = q.get("name", "")
    if not isinstance(name, str):
        raise _err(f"{path}.name", f"must be a string, got {name!r}")
    return WorkloadQuery(sql.strip(), weight, name)


def read_queries(text: str, path: str = "queries") -> list[WorkloadQuery]:
    """The statements of an SQL file, split at ``;`` outside quotes and comments; a
    ``-- weight: N`` / ``-- name: X`` comment line sets the next statement's weight/name."""
    out: list[WorkloadQuery] = []
    weight, name = Fraction(1), ""
    for n, (sql, directives) in enumerate(_statements(text)):
        for key, value in directives:
            if key == "weight":
                weight = _number(f"{path}: statement {n + 1}: weight", value)
                if weight <= 0:
                    raise _err(f"{path}: statement {n + 1}: weight", f"must be > 0, got {value}")
            else:
                name = value
        if sql:
            out.append(WorkloadQuery(sql, weight, name))
            weight, name = Fraction(1), ""
    return out


def _statements(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(statement, directives before it) at each ``;`` outside '…', "…", -- and /* */."""
    out: list[tuple[str, list[tuple[str, str]]]] = []
    buf: list[str] = []
    directives: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            j = i + 1
            while j < n and not (text[j] == c and not (j + 1 < n and text[j + 1] == c)):
                j += 2 if text[j] == c else 1
            buf.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            m = _DIRECTIVE.match(text[i:j])
            if m:
                directives.append((m.group(1).lower(), m.group(2)))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            buf.append(" ")
        elif c == ";":
            out.append(("".join(buf).strip(), directives))
            buf, directives = [], []
            i += 1
        else:
            buf.append(c)
            i += 1
    out.append(("".join(buf).strip(), directives))
    return out


__all__ = ["MAX_QUERIES", "Workload", "WorkloadQuery", "parse_workload", "read_queries"]
