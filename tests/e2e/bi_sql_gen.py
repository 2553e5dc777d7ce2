"""The BI-tool differential hunt's release and query generator: seeded queries shaped as
Superset, Metabase, Tableau, Power BI and Looker write them (nested aggregates with
aliases, ``CAST(date_trunc(...) AS DATE)``, ``CAST(ts AS DATE)``, Metabase's auto-binning
``((floor(((x - 0.0) / w)) * w) + 0.0)``, ``COALESCE(x, 'N/A')`` and ``CASE``
labels, ``COUNT(1)``/``SUM(1)``, quoted and mixed-case names, ``"schema"."table"``,
Superset's virtual datasets and Power BI's nested filters over the table, renamed
columns and named expressions of a native query,
top-n ``IN (SELECT ... LIMIT n)`` filters and joins, ``HAVING COUNT(*) > n``, outer
``DISTINCT``, label concatenation, percentages of the total), over a release whose views
use every mechanism dpsql builds: InfTDA, the Gaussian and Laplace trees, Cascade with the
tree and the range-optimal covariance, and the b-ary Laplace tree (btree), both on
their own view (the view's name as the table) and through the logical table, where the
planner picks the view.

The table and the oracle are the SQL fuzzer's (tests/e2e/fuzz_sql_support.py): at ρ =
1e11 the noise is negligible, so dpsql must give DuckDB's numbers on the raw rows or
refuse with :class:`dpsql.UnsupportedQueryError`.

Run ``python tests/e2e/bi_sql_gen.py N SEED`` for a long campaign; the test
(tests/e2e/test_bi_differential.py) runs a bounded, fixed-seed one.
"""

from __future__ import annotations

import random
from pathlib import Path

import duckdb

import fuzz_sql_gen
import fuzz_sql_support as fz

# view -> (mechanism, levels): every mechanism but InfTDA (the SQL fuzzer's release has
# three InfTDA views; an InfTDA view reconciled with others here would have the build
# bootstrap the whole pipeline, 8 s of the test's 9), several views on the same
# attributes, so that the planner picks one
VIEWS = {
    "vch": ("gaussian_tree", ["c", "h"]), "vkn": ("gaussian_tree", ["k", "n"]),
    "vlt": ("laplace_tree", ["c", "k"]), "vhl": ("laplace_tree", ["h", "c"]),
    "vml": ("laplace_tree", ["m"]), "vtsl": ("laplace_tree", ["ts"]),
    "vbt": ("btree", ["n"]), "vdb": ("btree", ["d"]), "vpb": ("btree", ["p"]),
    "vd": ("cascade", ["d"]), "vxo": ("cascade", ["x"]),
}
COLUMNS = {"h": ["r", "pr", "ci"]}  # an attribute's columns, where it has several


def spec() -> dict:
    s = fz.spec()
    s["views"] = [{"name": v, "levels": levels, "mechanism": mech}
                  for v, (mech, levels) in VIEWS.items()]
    s["views"][list(VIEWS).index("vxo")]["covariance"] = "optimal"
    return s


def build(base: Path, name: str = "bi.duckdb") -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    if not (base / "t.parquet").exists():
        fz.write_data(base)
    out = base / name
    if not out.exists():
        build_release(ReleaseSpec.from_dict(spec(), base_dir=base), out, seed=1,
                      progress=False)
    return out


def raw_connection(base: Path) -> duckdb.DuckDBPyConnection:
    """The raw rows as ``t``, under each view's name, and as ``t.t`` (the name a
    schema-qualifying tool writes: the release's attach alias is ``t``)."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{base / 't.parquet'}')")
    con.execute("CREATE SCHEMA s; CREATE VIEW s.t AS SELECT * FROM main.t")
    for view in VIEWS:
        con.execute(f"CREATE VIEW {view} AS SELECT * FROM t")
    con.execute(fz.PUBLIC)
    return con


def attrs_of(view: str) -> list[str]:
    return [c for lv in VIEWS[view][1] for c in COLUMNS.get(lv, [lv])]


# a grouping key as BI tools render it: (SQL with {q} for the column's qualifier, and
# whether a raw-SQL tie-breaking ORDER BY / join may use it)
KEYS = {
    "c": ["{q}c", '{q}"c"', "COALESCE({q}c, 'N/A')",
          "CASE WHEN {q}c IS NULL THEN '(none)' ELSE {q}c END", "upper({q}c)",
          "CASE WHEN {q}c = 'a' THEN 'vowel' ELSE 'consonant' END", "{q}C"],
    "r": ["{q}r", '{q}"r"', "COALESCE({q}r, 'N/A')", "{q}r || ' / ' || {q}pr",
          "concat({q}r, '-', {q}pr)", "lower({q}R)"],
    "pr": ["{q}pr", "COALESCE({q}pr, 'Unknown')", "{q}pr || ''"],
    "ci": ["{q}ci", "upper({q}ci)", "CASE WHEN {q}ci IN ('n1', 'n2') THEN 'north' ELSE "
           "'other' END"],
    # k (bins of 1) and d (day bins): bins of one value, labels (any expression of them)
    "k": ["{q}k", "floor({q}k / 5) * 5", "CASE WHEN {q}k < 10 THEN 'low' ELSE 'high' END",
          "{q}k IS NULL", "COALESCE({q}k, -1)", "CAST({q}k AS VARCHAR)", "({q}k >= 10)"],
    "n": ["{q}n", "floor({q}n / 10) * 10",
          "((floor((({q}n - 0.0) / 10)) * 10) + 0.0)"],  # Metabase's auto-binning
    "d": ["CAST(date_trunc('month', {q}d) AS DATE)", "date_trunc('week', {q}d)",
          "date_trunc('year', {q}d)", "{q}d", "CAST(date_trunc('quarter', {q}d) AS DATE)",
          "DATE_TRUNC('MONTH', {q}d)::DATE", "strftime({q}d, '%Y-%m')",
          "EXTRACT(MONTH FROM {q}d)", "CAST({q}d AS VARCHAR)"],
    "m": ["date_trunc('quarter', {q}m)", "CAST(date_trunc('year', {q}m) AS DATE)",
          "date_trunc('month', {q}m)"],
    "ts": ["date_trunc('day', {q}ts)", "CAST(date_trunc('hour', {q}ts) AS TIMESTAMP)",
           "CAST(date_trunc('day', {q}ts) AS DATE)", "CAST({q}ts AS DATE)", "{q}ts::DATE"],
    "p": ["floor({q}p)", "floor({q}p * 10) / 10"],
    "x": ["floor({q}x)", "floor({q}x * 2) / 2", "((floor((({q}x - 0.0) / 0.5)) * 0.5) + 0.0)"],
}
# a renamed column's keys and a filter on it ({x}: its new name)
RENAMED = {
    "c": (["{x}", "COALESCE({x}, 'N/A')"], "{x} IS NOT NULL"),
    "r": (["{x}", "lower({x})"], "{x} <> 'E'"),
    "ci": (["{x}"], "{x} IN ('n1', 's1')"),
    "k": (["{x}", "floor({x} / 5) * 5"], "{x} < 10"),
    "n": (["{x}", "floor({x} / 10) * 10"], "{x} >= 5"),
    "d": (["date_trunc('month', {x})"], "{x} >= DATE '2013-03-01'"),
}
# a named expression in place of the renamed column (Tableau's custom SQL)
COMPUTED = {"c": "COALESCE(c, 'none')", "r": "upper(r)", "ci": "ci || '-city'",
            "k": "floor(k / 5) * 5", "d": "CAST(date_trunc('month', d) AS DATE)"}
MEASURES = ["COUNT(*)", "COUNT(1)", "SUM(1)", "count(*)", "Count(*)", "SUM(dp_count)"]


class BiGen:
    """A seeded generator of BI-tool-shaped queries: :meth:`query` gives (SQL, the number
    of key columns, the tool whose shape it is)."""

    def __init__(self, seed: int):
        self.g = random.Random(seed)
        self.filters = fuzz_sql_gen.Gen(seed + 1)

    def pick(self, xs):
        return self.g.choice(xs)

    def chance(self, p: float) -> bool:
        return self.g.random() < p

    def where(self, attrs: list[str], q: str) -> str:
        """A BI filter on ``attrs``, or the SQL fuzzer's WHERE tree; '' for none."""
        g = self.g
        if self.chance(0.35):
            return ""
        if self.chance(0.4):
            return self.filters.where(attrs)  # bare names: they bind in every shape
        a = self.pick(attrs)
        col = q + a
        forms = {
            "c": [f"{col} IN ('a', 'b')", f"({col} = 'a' OR {col} = 'c')",
                  f"({col} IS NOT NULL AND ({col} <> '' OR {col} IS NULL))",
                  f"NOT ({col} IN ('b'))", f"{col} IS NULL"],
            "r": [f"{col} IN ('N', 'S')", f"{col} <> 'E'", f"{col} NOT IN ('N')"],
            "pr": [f"{col} IN ('N1', 'S2')", f"{col} LIKE 'S%'"],
            "ci": [f"{col} = 'n1'", f"{col} IN ('s1', 's2', 'e1')"],
            "k": [f"{col} BETWEEN {g.randint(0, 9)} AND {g.randint(9, 19)}",
                  f"{col} >= {g.randint(0, 19)}", f"{col} IS NOT NULL",
                  f"({col} < 3 OR {col} >= 15)"],
            "n": [f"{col} < {g.randint(1, 99)}", f"{col} BETWEEN 1 AND {g.randint(2, 60)}",
                  f"{col} IS NOT NULL AND {col} >= {g.randint(0, 30)}"],
            "d": [f"{col} >= '2013-0{g.randint(1, 6)}-01 00:00:00' AND {col} < "
                  f"'2013-{g.randint(7, 12):02d}-01 00:00:00'",
                  f"{col} >= CAST('2013-03-01' AS DATE) AND {col} < CAST('2013-04-01' AS "
                  "DATE)",
                  f"{col} BETWEEN DATE '2013-02-01' AND DATE '2013-05-31'",
                  f"{col} >= TIMESTAMP '2013-06-01 00:00:00'"],
            "m": [f"{col} >= DATE '2012-0{g.randint(1, 9)}-01'",
                  f"{col} < '2014-0{g.randint(1, 9)}-01'"],
            "ts": [f"{col} >= TIMESTAMP '2013-01-02 00:00:00' AND {col} < TIMESTAMP "
                   f"'2013-01-0{g.randint(3, 7)} 00:00:00'"],
            "p": [f"{col} < {g.randint(1, 9)}", f"{col} >= {g.randint(0, 99) / 10:.1f}"],
            "x": [f"{col} < {g.randint(1, 63) / 8}"],
        }
        return self.pick(forms[a])

    def top_n_keys(self, attrs: list[str]) -> list[str]:
        """The columns a top-n filter or join may use: categories, and now and then the
        binned k, whose bins hold one value (answered in an IN subquery and a JOIN
        condition as a label is)."""
        cats = [a for a in attrs if a in ("c", "r", "pr", "ci")]
        return cats if cats and not self.chance(0.3) else [a for a in attrs if a == "k"]

    def keys(self, attrs: list[str], q: str, n: int) -> list[str]:
        groupable = [a for a in attrs if a in KEYS]
        cols = self.g.sample(groupable, min(n, len(groupable)))
        return [self.pick(KEYS[c]).replace("{q}", q) for c in cols]

    def query(self) -> tuple[str, int, str]:
        g = self.g
        view = self.pick(list(VIEWS))
        attrs = attrs_of(view)
        pinned = self.chance(0.6)
        tool = self.pick(["superset", "superset_ts", "superset_series", "superset_virtual",
                          "metabase", "tableau", "tableau_topn", "powerbi", "looker",
                          "percent", "having", "distinct", "topn_in", "cumulative",
                          "other", "rollup", "grand_total", "superset_dataset",
                          "powerbi_nested", "renamed"])
        table = view if pinned else "t"
        if tool == "metabase":
            return self.metabase(view if pinned else "t", attrs)
        keys = self.keys(attrs, "", self.pick([1, 1, 1, 2, 2, 3]))
        m = self.pick(MEASURES)
        w = self.where(attrs, "")
        if "n" in attrs and self.chance(0.7):  # n's NULLs are dropped: its views refuse
            w = f"{w} AND n IS NOT NULL" if w else "n IS NOT NULL"  # a count of them
        where = f" WHERE {w}" if w else ""
        kw = len(keys)
        sel = ", ".join(f'{k} AS "g{i}"' for i, k in enumerate(keys))
        grp = ", ".join(keys)
        if tool == "superset":
            order = ' ORDER BY "count" DESC' if self.chance(0.5) else ""
            return (f"SELECT {sel}, {m} AS \"count\" FROM {table}{where} GROUP BY {grp}"
                    f"{order} LIMIT 10000", kw, tool)
        if tool == "superset_ts":
            t = [a for a in attrs if a in ("d", "m", "ts")]
            if not t:
                return self.query()
            k = self.pick(KEYS[t[0]]).replace("{q}", "")
            return (f"SELECT {k} AS __timestamp, {m} AS \"count\" FROM {table}{where} "
                    f"GROUP BY {k} LIMIT 50000", 1, tool)
        if tool == "superset_series":
            plain = self.top_n_keys(attrs)
            if not plain:
                return self.query()
            a = self.pick(plain)
            lim = g.randint(1, 4)
            return (f"SELECT {a} AS {a}, {m} AS \"count\" FROM {table} JOIN (SELECT {a} AS "
                    f"{a}__, COUNT(*) AS mme_inner__ FROM {table}{where} GROUP BY {a} "
                    f"ORDER BY round(mme_inner__) DESC, {a}__ NULLS LAST LIMIT {lim}) AS "
                    f"series_limit ON {a} = {a}__{where.replace(' WHERE ', ' AND ')} GROUP BY "
                    f"{a} LIMIT 10000", 1, tool)
        if tool == "superset_virtual":
            inner = (f"SELECT {sel}, {m} AS n FROM {table}{where} GROUP BY {grp}")
            outer = ", ".join(f'"g{i}" AS "g{i}"' for i in range(kw))
            ogrp = ", ".join(f'"g{i}"' for i in range(kw))
            agg = self.pick(["SUM(n)", "MAX(n)", "MIN(n)", "AVG(n)"])  # COUNT(*): of public groups
            return (f"SELECT {outer}, {agg} AS \"{agg}\" FROM ({inner}) AS virtual_table "
                    f"GROUP BY {ogrp} ORDER BY \"{agg}\" DESC LIMIT 10000", kw, tool)
        if tool == "superset_dataset":  # a virtual dataset that only picks and filters
            cols = "*" if "dp_count" in m or self.chance(0.4) else ", ".join(attrs)
            w_in = self.where(attrs, "")
            inner = f"SELECT {cols} FROM {table}" + (f" WHERE {w_in}" if w_in else "")
            order = ' ORDER BY "count" DESC' if self.chance(0.5) else ""
            return (f'SELECT {sel}, {m} AS "count" FROM ({inner}) AS virtual_table{where} '
                    f"GROUP BY {grp}{order} LIMIT 10000", kw, tool)
        if tool == "powerbi_nested":  # Power BI's filters, one subquery per step
            q = '"_".'
            pk = self.keys(attrs, q, kw)
            psel = ", ".join(f'{k} AS "g{i}"' for i, k in enumerate(pk))
            cols = ", ".join(f'"_"."{a}"' for a in attrs)
            inner = f'select {cols} from {table} "_"'
            for depth in range(g.randint(1, 3)):
                w_in = self.where(attrs, q)
                if depth == 0 and "n" in attrs:
                    w_in = f'({w_in}) and ("_"."n" is not null)' if w_in else \
                        '("_"."n" is not null)'
                inner = (f"select {cols} from ({inner}) \"_\"" if depth else inner) + (
                    f" where {w_in}" if w_in else "")
            agg = (f'select {psel}, count(1) as "a0" from ({inner}) "_" group by '
                   f'{", ".join(pk)}')
            if self.chance(0.5):
                cols = ", ".join(f'"g{i}"' for i in range(kw))
                agg = (f'select {cols}, "a0" from ({agg}) "_" where not "a0" is null '
                       "limit 1000001")
            return agg, kw, tool
        if tool == "renamed":  # Metabase/Tableau over a native query that renames
            named = [a for a in attrs if a in RENAMED]
            if not named:
                return self.query()
            a = self.pick(named)
            x = f"{a.upper()} label"
            key = self.pick(RENAMED[a][0]).format(x=f'"{x}"')
            rest = ", ".join(b for b in attrs if b != a)
            w_in = self.where(attrs, "")
            if "n" in attrs:
                w_in = f"({w_in}) AND n IS NOT NULL" if w_in else "n IS NOT NULL"
            value = COMPUTED[a] if a in COMPUTED and self.chance(0.4) else a
            inner = (f'SELECT {value} AS "{x}"{", " + rest if rest else ""} FROM {table}'
                     + (f" WHERE {w_in}" if w_in else ""))
            w_out = (f' WHERE {RENAMED[a][1].format(x=chr(34) + x + chr(34))}'
                     if self.chance(0.5) else "")
            return (f'SELECT {key} AS "{x}", COUNT(*) AS "count" FROM ({inner}) AS "source"'
                    f'{w_out} GROUP BY 1 ORDER BY 1', 1, tool)
        if tool == "tableau":
            qk = self.keys(attrs, '"t".', kw)
            sel = ", ".join(f'{k} AS "{k.replace(chr(34), "")[:6]}:{i}:nk"'
                            for i, k in enumerate(qk))
            having = " HAVING (COUNT(1) > 0)" if self.chance(0.4) else ""
            qw = self.where(attrs, '"t".')
            qwhere = f" WHERE ({qw})" if qw else ""
            return (f'SELECT {sel}, SUM(1) AS "sum:Number of Records:ok" FROM "{table}" '
                    f'"t"{qwhere} GROUP BY {", ".join(str(i + 1) for i in range(kw))}'
                    f"{having}", kw, tool)
        if tool == "tableau_topn":
            plain = self.top_n_keys(attrs)
            if not plain:
                return self.query()
            a = self.pick(plain)
            return (f'SELECT "t"."{a}" AS "{a}", SUM(1) AS "cnt" FROM "{table}" "t" INNER '
                    f'JOIN (SELECT "t"."{a}" AS "{a}", SUM(1) AS "$__alias__0" FROM '
                    f'"{table}" "t" GROUP BY 1 ORDER BY round("$__alias__0") DESC, 1 '
                    f'NULLS LAST LIMIT {g.randint(1, 4)}) "t0" ON ("t"."{a}" IS NOT DISTINCT '
                    f'FROM "t0"."{a}") GROUP BY 1', 1, tool)
        if tool == "powerbi":
            cols = ", ".join(f'"g{i}"' for i in range(kw))
            return (f'select {cols}, "a0" from (select {sel}, count(1) as "a0" from '
                    f'{table} "_"{where} group by {grp}) "_" where not "a0" is null '
                    f"limit 1000001", kw, tool)
        if tool == "looker":
            lk = self.keys(attrs, f"{table}.", kw)
            lsel = ", ".join(f'{k} AS "{table}.g{i}"' for i, k in enumerate(lk))
            lw = self.where(attrs, f"{table}.")
            lwhere = f" WHERE {lw}" if lw else ""
            return (f'SELECT {lsel}, COUNT(*) AS "{table}.count" FROM {table} AS {table}'
                    f'{lwhere} GROUP BY {", ".join(str(i + 1) for i in range(kw))} '
                    f"ORDER BY {kw + 1} DESC, {', '.join(str(i + 1) for i in range(kw))} "
                    f"NULLS LAST LIMIT 500", kw, tool)
        if tool == "percent":
            part = f" PARTITION BY {keys[0]}" if kw > 1 and self.chance(0.5) else ""
            return (f"SELECT {sel}, {m} AS n, {m} * 100.0 / SUM({m}) OVER ({part.strip()}) "
                    f"AS pct FROM {table}{where} GROUP BY {grp}", kw, tool)
        if tool == "having":
            return (f"SELECT {sel}, {m} AS n FROM {table}{where} GROUP BY {grp} HAVING "
                    f"COUNT(*) > {g.randint(0, 900)}.5 ORDER BY n DESC", kw, tool)
        if tool == "distinct":
            return (f'SELECT DISTINCT "g0" FROM (SELECT {sel}, {m} AS n FROM {table}{where} '
                    f"GROUP BY {grp} HAVING {m} > {g.randint(0, 300)}.5) AS s", 1, tool)
        if tool == "cumulative":  # Metabase's cumulative count, Superset's running total
            return (f"SELECT {keys[0]} AS g0, {m} AS n, SUM({m}) OVER (ORDER BY {keys[0]} "
                    f"NULLS FIRST ROWS UNBOUNDED PRECEDING) AS cum FROM {table}{where} "
                    f"GROUP BY {keys[0]}", 1, tool)
        if tool == "other":  # the top categories and 'Other' (the filters apply to the
            plain = self.top_n_keys(attrs)  # top n too, as Superset's series limit)
            if not plain:
                return self.query()
            a = self.pick(plain)
            cast = f"CAST({a} AS VARCHAR)" if a == "k" else a
            return (f"SELECT CASE WHEN {a} IN (SELECT {a} FROM {table}{where} GROUP BY {a} "
                    f"ORDER BY round(COUNT(*)) DESC, {a} NULLS LAST LIMIT {g.randint(1, 3)}) THEN "
                    f"{cast} ELSE 'Other' END AS g0, {m} AS n FROM {table}{where} GROUP BY 1",
                    1, tool)
        if tool == "rollup":  # a pivot table's subtotals
            return (f"SELECT {sel}, {m} AS n FROM {table}{where} GROUP BY ROLLUP ({grp})", kw,
                    tool)
        if tool == "grand_total":  # a table and its total row
            nulls = ", ".join("NULL" for _ in keys)
            return (f"SELECT {sel}, {m} AS n FROM {table}{where} GROUP BY {grp} UNION ALL "
                    f"SELECT {nulls}, {m} FROM {table}{where}", kw, tool)
        # topn_in
        plain = self.top_n_keys(attrs)
        if not plain:
            return self.query()
        a = self.pick(plain)
        return (f"SELECT {sel}, {m} AS n FROM {table} WHERE {a} IN (SELECT {a} FROM {table} "
                f"GROUP BY {a} ORDER BY round(COUNT(*)) DESC, {a} NULLS LAST LIMIT "
                f"{g.randint(1, 3)}){where.replace(' WHERE ', ' AND ')} GROUP BY {grp}",
                kw, tool)

    def metabase(self, table: str, attrs: list[str]) -> tuple[str, int, str]:
        """Metabase's shape: every name schema-qualified and quoted."""
        q = f'"s"."{table}".' if table == "t" else f'"{table}".'
        frm = '"s"."t"' if table == "t" else f'"{table}"'
        keys = self.keys(attrs, q, self.pick([1, 1, 2]))
        sel = ", ".join(f'{k} AS "g{i}"' for i, k in enumerate(keys))
        w = self.where(attrs, q)
        where = f" WHERE {w}" if w else ""
        return (f'SELECT {sel}, count(*) AS "count" FROM {frm}{where} GROUP BY '
                f'{", ".join(keys)} ORDER BY {", ".join(keys)} ASC', len(keys), "metabase")


def campaign(base: Path, n: int, seed: int, alias: str = "s"):
    from dpsql import duck

    dp = duckdb.connect()
    duck.attach(dp, str(build(base)), name=alias)
    dp.execute(fz.PUBLIC)
    raw = raw_connection(base)
    gen = BiGen(seed)
    out = []
    for _ in range(n):
        sql, kw, tool = gen.query()
        kind, detail = fz.classify(dp, raw, sql, kw)
        out.append((kind, tool, sql, detail))
    return out


if __name__ == "__main__":
    import sys
    import warnings
    from collections import Counter

    warnings.simplefilter("ignore")
    base = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/bi-hunt")
    base.mkdir(exist_ok=True)
    res = campaign(base, int(sys.argv[1]), int(sys.argv[2]))
    print(Counter(k for k, _, _, _ in res))
    print(Counter((t, k) for k, t, _, _ in res))
    for kind, tool, q, detail in res:
        if kind != "equal":
            print(f"[{kind}/{tool}] {q}\n    {detail[:400]}")
