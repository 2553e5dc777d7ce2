"""The NULL-policy table and release of tests/e2e/test_null_policies.py, and a seeded
generator of WHERE trees full of NULLs over its attributes
(tests/e2e/test_fuzz_null_policies.py).

3,000 rows; every attribute of the ``drop`` pair (cd, nd, and the hierarchy h = r → ci)
is NULL on 600 of them (every 5th row), of the ``category`` pair (cc, nc) on 750 (every
4th), and the ``error`` pair (ce, ne) is never NULL. The release is exact (ρ = 1e6,
Gaussian trees: zero noise), so its answers are the data's.

Run ``python tests/e2e/null_policy_support.py N SEED`` for a long campaign.
"""

from __future__ import annotations

import random
from pathlib import Path

import duckdb

N = 3000
ABC = ["a", "b", "c"]
SPINE = [["N", "n1"], ["N", "n2"], ["S", "s1"]]


def write_data(base: Path) -> Path:
    duckdb.connect().execute(f"""
        COPY (SELECT
            CASE WHEN i % 5 = 0 THEN NULL ELSE ['a', 'b', 'c'][1 + i % 3] END AS cd,
            CASE WHEN i % 5 = 0 THEN NULL ELSE i % 10 END AS nd,
            CASE WHEN i % 5 = 0 THEN NULL ELSE ['N', 'N', 'S'][1 + i % 3] END AS r,
            CASE WHEN i % 5 = 0 THEN NULL ELSE ['n1', 'n2', 's1'][1 + i % 3] END AS ci,
            CASE WHEN i % 4 = 0 THEN NULL ELSE ['a', 'b', 'c'][1 + i % 3] END AS cc,
            CASE WHEN i % 4 = 0 THEN NULL ELSE i % 10 END AS nc,
            ['a', 'b', 'c'][1 + i % 3] AS ce, (i * 7) % 10 AS ne,
            ['x', 'y'][1 + i % 2] AS g
          FROM range({N}) r(i)) TO '{base / "t.parquet"}'""")
    return base


SPEC = {
    "name": "t", "source": "t.parquet", "neighbouring": "add_remove",
    "budget": {"rho": 1e6},
    "attributes": {
        "cd": {"kind": "categorical", "domain": ABC, "on_null": "drop"},
        "nd": {"kind": "range", "lower": 0, "upper": 10, "bins": 10, "on_null": "drop"},
        "h": {"kind": "hierarchy", "columns": ["r", "ci"], "spine": SPINE,
              "on_null": "drop"},
        "cc": {"kind": "categorical", "domain": ABC, "on_null": "category"},
        "nc": {"kind": "range", "lower": 0, "upper": 10, "bins": 10,
               "on_null": "category"},
        # "d" is in the domain, in no row: a public group whose count is 0
        "ce": {"kind": "categorical", "domain": ABC + ["d"]},
        "ne": {"kind": "range", "lower": 0, "upper": 10, "bins": 10},
        "g": {"kind": "categorical", "domain": ["x", "y"]},
    },
    "views": [
        {"name": "vcd", "levels": ["g", "cd"], "mechanism": "gaussian_tree"},
        {"name": "vnd", "levels": ["nd"], "mechanism": "gaussian_tree"},
        {"name": "vh", "levels": ["h"], "mechanism": "gaussian_tree"},
        {"name": "vcc", "levels": ["g", "cc"], "mechanism": "gaussian_tree"},
        {"name": "vnc", "levels": ["nc"], "mechanism": "gaussian_tree"},
        {"name": "vce", "levels": ["g", "ce"], "mechanism": "gaussian_tree"},
        {"name": "vcen", "levels": ["ce", "ne"], "mechanism": "gaussian_tree"},
        {"name": "vci", "levels": ["ce"], "mechanism": "inftda"},  # sparse: no 'd' row
    ],
}


def build(base: Path) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    out = base / "t.duckdb"
    if not out.exists():
        build_release(ReleaseSpec.from_dict(SPEC, base_dir=base), out, seed=5,
                      progress=False)
    return out


def opened(base: Path):
    """Yields (dpsql's connection to the exact release, DuckDB's to the raw table) over
    ``base``, written and built if need be, then closes them (a fixture's body)."""
    import dpsql

    if not (base / "t.parquet").exists():
        write_data(base)
    con, raw = dpsql.connect(str(build(base))), duckdb.connect()
    raw.execute(f"CREATE VIEW t AS SELECT * FROM '{base / 't.parquet'}'")
    try:
        yield con, raw
    finally:
        con.close()
        raw.close()


DROPPED = ("cd", "nd", "r", "ci")
"""The columns of the attributes with on_null = "drop"."""

VALUES = {"cd": ABC + ["z"], "cc": ABC + ["z"], "ce": ABC + ["d"], "r": ["N", "S", "W"],
          "ci": ["n1", "n2", "s1", "q"], "nd": list(range(-1, 12)),
          "nc": list(range(-1, 12)), "ne": list(range(-1, 12))}


class NullTrees:
    """A seeded generator of WHERE clauses on one attribute, in three-valued logic:
    comparisons with values, NULL and constant subqueries, IN lists with NULLs, IS [NOT]
    [DISTINCT FROM] NULL, IS [NOT] TRUE / FALSE / NULL, constant conditions, under NOT,
    AND and OR."""

    def __init__(self, seed: int):
        self.g = random.Random(seed)

    def value(self, x: str) -> str:
        v = self.g.choice(VALUES[x])
        return repr(v) if isinstance(v, str) else str(v)

    def atom(self, x: str) -> str:
        g = self.g
        v, w = self.value(x), self.value(x)
        forms = [f"{x} = {v}", f"{x} <> {v}", f"{x} < {v}", f"{x} >= {v}",
                 f"{x} IN ({v}, {w})", f"{x} IN ({v}, NULL)", f"{x} NOT IN ({v}, NULL)",
                 f"{x} NOT IN ({v}, {w})", f"{x} = NULL", f"{x} <> NULL", f"{x} IS NULL",
                 f"{x} IS NOT NULL", f"{x} IS DISTINCT FROM {v}",
                 f"{x} IS NOT DISTINCT FROM {v}", f"{x} IS DISTINCT FROM NULL",
                 f"{x} IS NOT DISTINCT FROM NULL", f"{x} BETWEEN NULL AND {v}",
                 f"{x} BETWEEN {v} AND {w}", f"{x} NOT BETWEEN {v} AND NULL",
                 f"{x} = (SELECT {v})", f"{x} IN (SELECT NULL)", f"{x} NOT IN (SELECT {v})",
                 f"{x} < ANY (SELECT {v})", f"{x} >= ALL (SELECT NULL)", "NULL", "TRUE",
                 "FALSE", f"{x} = coalesce(NULL, {v})", f"{x} <> nullif({v}, {v})"]
        return g.choice(forms)

    def tree(self, x: str, depth: int) -> str:
        g = self.g
        if depth <= 0 or g.random() < 0.3:
            return self.atom(x)
        r = g.random()
        if r < 0.25:
            return f"NOT ({self.tree(x, depth - 1)})"
        if r < 0.4:
            return (f"({self.tree(x, depth - 1)}) IS {g.choice(['', 'NOT '])}"
                    f"{g.choice(['TRUE', 'FALSE', 'NULL'])}")
        op = g.choice(["AND", "OR"])
        return f"({self.tree(x, depth - 1)} {op} {self.tree(x, depth - 1)})"

    def where(self) -> tuple[str, str]:
        """(the attribute's column, a WHERE clause on it: one tree, or two ANDed)."""
        x = self.g.choice(sorted(VALUES))
        w = self.tree(x, 3)
        if self.g.random() < 0.3:
            w = f"{w} AND {self.tree(x, 2)}"
        return x, w


def classify(con, raw, x: str, where: str) -> tuple[str, str]:
    """('equal' | 'refused' | 'raw_error' | 'wrong', detail): dpsql's COUNT(*) against
    DuckDB's on the data; a refusal is right only where the clause keeps rows whose
    dropped attribute is NULL (then it must be refused, and is 'refused')."""
    import dpsql

    sql = f"SELECT COUNT(*) FROM t WHERE {where}"
    try:
        want = raw.execute(sql).fetchone()[0]
    except duckdb.Error as e:
        try:
            con.execute(sql)
        except dpsql.Error:
            return "raw_error", str(e).splitlines()[0]
        return "wrong", f"answered where DuckDB fails: {str(e).splitlines()[0]}"
    keeps_dropped = x in DROPPED and f"{x} " in f"{where} " and raw.execute(
        f"SELECT COUNT(*) FROM t WHERE ({where}) AND {x} IS NULL").fetchone()[0] > 0
    try:
        got = con.execute(sql).fetchone()[0]
    except dpsql.UnsupportedQueryError as e:
        if keeps_dropped and f"the release cannot count the rows where {x} is NULL" in str(e):
            return "refused", ""
        return "wrong", f"refused, want {want}: {e}"
    if keeps_dropped:
        return "wrong", f"answered {got}, which needs the dropped NULL rows (want {want})"
    if abs(got - want) > 0.5:
        return "wrong", f"got {got} want {want}"
    return "equal", ""


if __name__ == "__main__":
    import sys
    import tempfile
    import warnings
    from collections import Counter

    warnings.simplefilter("ignore")
    base = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tempfile.mkdtemp())
    connections = opened(base)  # kept: the generator closes them when collected
    con, raw = next(connections)
    gen, kinds = NullTrees(int(sys.argv[2])), Counter()
    for _ in range(int(sys.argv[1])):
        x, where = gen.where()
        kind, detail = classify(con, raw, x, where)
        kinds[kind] += 1
        if kind == "wrong":
            print(f"[wrong] {where}\n    {detail[:400]}")
    print(kinds)
