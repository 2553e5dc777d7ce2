"""The differential SQL fuzzer's query generator (tests/e2e/fuzz_sql_support.py holds
the table, the release and the oracle): seeded queries over the logical table ``t`` and
its views, valid DuckDB SQL on the raw table, spelling bounds in every way DuckDB reads
them (constant expressions, strings, NULLs, constant subqueries).

Run ``python tests/e2e/fuzz_sql_gen.py N SEED [DIR]`` for a long campaign; the test
(tests/e2e/test_fuzz_sql.py) runs a bounded, fixed-seed one.
"""

from __future__ import annotations

import datetime
import random
import re
from collections import Counter
from pathlib import Path

import fuzz_sql_support as fz
from fuzz_sql_support import VIEWS


class Gen:
    """A seeded generator of queries over the logical table ``t``."""

    CATS = {"c": ["a", "b", "c", "z"], "r": ["N", "S", "E", "W"],
            "pr": ["N1", "N2", "S1", "S2", "E1", "X9"],
            "ci": ["n1", "n2", "n3", "s1", "s2", "s3", "e1", "q"]}

    def __init__(self, seed: int):
        self.g = random.Random(seed)

    def pick(self, xs):
        return self.g.choice(xs)

    def chance(self, p: float) -> bool:
        return self.g.random() < p

    # -- literals
    NULL_TYPES = {"n": "INT", "k": "BIGINT", "p": "DECIMAL(6, 2)", "x": "DOUBLE", "d": "DATE",
                  "m": "DATE", "ts": "TIMESTAMP"}

    def lit(self, attr: str) -> str:
        if self.chance(0.05):
            return self.null_value(attr)
        if self.chance(0.25):
            return self.spelled(attr)
        g = self.g
        if attr in ("n", "k"):
            hi = 100 if attr == "n" else 20
            r = g.random()
            if r < 0.6:
                return str(g.randint(-3, hi + 3))
            if r < 0.8:
                return f"{g.randint(-1, hi)}.5"
            if r < 0.9:
                return f"{g.randint(0, hi)}.0"
            return f"CAST({g.randint(0, hi)} AS BIGINT)"
        if attr == "p":
            r = g.random()
            if r < 0.5:
                return f"{g.randint(-10, 1010) / 100:.2f}"
            if r < 0.7:
                return "2.5" if g.random() < 0.5 else "2.50"
            if r < 0.85:
                return f"{g.randint(0, 10000) / 1000:.3f}"
            return str(g.randint(-1, 11))
        if attr == "x":
            return str(g.randint(-2, 66) / 8)
        if attr == "d":
            day = datetime.date(2013, 1, 1) + datetime.timedelta(days=g.randint(-5, 370))
            form = g.random()
            if form < 0.4:
                return f"DATE '{day}'"
            if form < 0.8:
                return f"'{day}'"
            return f"CAST('{day}' AS DATE)"
        if attr == "m":
            y, mo = g.randint(2011, 2015), g.randint(1, 12)
            first = datetime.date(y, mo, 1)
            return f"DATE '{first}'"
        return "'" + self.pick(self.CATS[attr]) + "'"

    def null_value(self, attr: str) -> str:
        """A NULL as a bound: the literal, a typed one, a constant expression or a
        constant subquery DuckDB values as NULL (every comparison with it is unknown)."""
        v = self.lit(attr) if attr != "ts" else "TIMESTAMP '2013-01-02 00:00:00'"
        return self.pick(["NULL", f"CAST(NULL AS {self.NULL_TYPES.get(attr, 'VARCHAR')})",
                          f"nullif({v}, {v})", "(SELECT NULL)", f"(SELECT nullif({v}, {v}))"])

    def spelled(self, attr: str) -> str:
        """A value written as DuckDB also accepts it, on the same grid as :meth:`lit`'s:
        a constant expression DuckDB folds (``(10 + 5)``, ``CAST('7' AS SMALLINT)``, ``DATE
        '2013-01-31' + INTERVAL 1 MONTH``, ``TIMESTAMP '...' + INTERVAL 3 HOUR``), a number
        in quotes, a date or time without zero padding (``'2013-1-5'``)."""
        g = self.g
        if self.chance(0.15):  # a constant subquery, a COALESCE: the value itself
            v = self.lit(attr)
            return self.pick([f"(SELECT {v})", f"coalesce(NULL, {v})", f"(SELECT {v} AS v)"])
        if attr in ("n", "k"):
            v = g.randint(-2, 100 if attr == "n" else 20)
            a = g.randint(-5, 5)
            return self.pick([f"({v - a} + {a})", f"'{v}'", f"CAST('{v}' AS SMALLINT)",
                              f"({2 * v + 1} // 2)", f"{v}.0::FLOAT", f"({v * 2} / 2)",
                              f"CAST({v} AS DECIMAL(5, 1))"])
        if attr == "p":
            v = g.randint(-10, 1010)
            return self.pick([f"'{v / 100:.2f}'", f"({v / 100:.2f} + 0.5)",
                              f"CAST({v / 100:.2f} AS DECIMAL(6, 2))", f"({v} / 100)"])
        if attr == "x":
            v = g.randint(-2, 66)
            return self.pick([f"'{v / 8}'", f"({v} / 8)", f"({v / 8} + 0.125)"])
        if attr == "d":
            day = datetime.date(2013, 1, 1) + datetime.timedelta(days=g.randint(-5, 370))
            k = g.randint(0, 40)
            back = day - datetime.timedelta(days=k)
            month_end = datetime.date(2013, g.randint(1, 12), 28) + datetime.timedelta(
                days=g.randint(0, 3))
            while month_end.day < 28:  # the 28th to the last day of a month
                month_end -= datetime.timedelta(days=1)
            return self.pick([
                f"'{day.year}-{day.month}-{day.day}'", f"DATE '{day.year}-{day.month}-{day.day}'",
                f"DATE '{back}' + INTERVAL {k} DAY", f"DATE '{back}' + {k}",
                f"DATE '{day + datetime.timedelta(days=1)}' - INTERVAL '1 day'",
                f"DATE '{month_end}' + INTERVAL {g.randint(1, 3)} MONTH",
                f"TIMESTAMP '{back} 00:00:00' + INTERVAL {k * 24} HOUR"])
        if attr == "m":
            y, mo, k = g.randint(2011, 2015), g.randint(1, 12), g.randint(-3, 14)
            return self.pick([f"DATE '{y}-{mo}-1'",
                              f"DATE '{datetime.date(y, mo, 1)}' + INTERVAL ({k}) MONTH"])
        return "'" + self.pick(self.CATS[attr]) + "'"

    # -- atoms on one attribute
    def atom(self, attr: str) -> str:
        g = self.g
        ops = ["=", "<>", "<", "<=", ">", ">="]
        if attr in ("x", "m"):
            ops = ["<", "<=", ">", ">="] if attr == "x" else ["<", ">="]
        kinds = ["cmp", "cmp", "between", "in", "null"]
        if attr in ("x", "m"):
            kinds = ["cmp", "cmp", "between", "null"]
        if attr in self.CATS:
            kinds = ["cmp", "in", "in", "null", "like"]
            ops = ["=", "<>"]
        if attr == "ts":
            return self.ts_atom()
        kind = "odd" if self.chance(0.12) else self.pick(kinds)
        if kind == "cmp":
            op, lit = self.pick(ops), self.lit(attr)
            if attr == "m" and op == "<=":
                op = "<"
            if self.chance(0.1):  # of a one-row constant subquery: the comparison
                return f"{attr} {op} {self.pick(['ANY', 'ALL', 'SOME'])} (SELECT {lit})"
            if self.chance(0.06) and attr not in ("x", "m"):
                return f"{attr} IS {self.pick(['', 'NOT '])}DISTINCT FROM {lit}"
            if self.chance(0.2):
                flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}
                return f"{lit} {flip[op]} {attr}"
            return f"{attr} {op} {lit}"
        if kind == "between":
            a, b = self.lit(attr), self.lit(attr)
            if attr == "m":  # month bins: from a first day to a last day of a month
                y, mo = self.g.randint(2011, 2015), self.g.randint(1, 12)
                last = datetime.date(y + mo // 12, mo % 12 + 1, 1) - datetime.timedelta(1)
                b = f"'{last}'"
            return f"{attr} {'NOT ' if self.chance(0.3) else ''}BETWEEN {a} AND {b}"
        if kind == "in":
            vals = ", ".join(self.lit(attr) for _ in range(g.randint(1, 4)))
            return f"{attr} {'NOT ' if self.chance(0.3) else ''}IN ({vals})"
        if kind == "odd":
            return self.odd(attr)
        if kind == "like":
            return f"{attr} LIKE '{self.pick(['n%', '%1', 's_', '%'])}'"
        return f"{attr} IS {'NOT ' if self.chance(0.5) else ''}NULL"

    def ts_atom(self) -> str:
        """A timestamp on hour bins: hour starts for < and >=, last seconds of an hour for
        <= and > (whole seconds: the same edge), midnights as DATEs; no interpolation."""
        g = self.g
        hour = datetime.datetime(2013, 1, 1) + datetime.timedelta(hours=g.randint(-3, 172))
        k = g.randint(0, 30)
        start = self.pick([f"TIMESTAMP '{hour}'", f"TIMESTAMP '{hour}'", f"'{hour}'",
                           f"TIMESTAMP '{hour - datetime.timedelta(hours=k)}' + INTERVAL {k} HOUR",
                           f"DATE '{hour.date()}' + INTERVAL {hour.hour} HOUR",
                           f"'{hour.year}-{hour.month}-{hour.day} {hour.hour}:0:0'"])
        end = self.pick([f"TIMESTAMP '{hour + datetime.timedelta(seconds=3599)}'",
                         f"TIMESTAMP '{hour}' + INTERVAL 3599 SECOND",
                         f"TIMESTAMP '{hour + datetime.timedelta(hours=1)}' - INTERVAL 1 SECOND"])
        r = g.random()
        if r < 0.04:
            return (f"ts {'NOT ' if self.chance(0.5) else ''}BETWEEN "
                    f"{self.null_value('ts')} AND {start}")
        if r < 0.15:
            return f"ts {self.pick(['<', '>='])} DATE '{hour.date()}'"
        if r < 0.45:
            return f"ts {self.pick(['<', '>='])} {start}"
        if r < 0.7:
            return f"ts {self.pick(['<=', '>'])} {end}"
        if r < 0.9:
            other = hour + datetime.timedelta(hours=g.randint(-5, 30), seconds=3599)
            return (f"ts {'NOT ' if self.chance(0.3) else ''}BETWEEN {start} AND "
                    f"TIMESTAMP '{other}'")
        return f"ts IS {'NOT ' if self.chance(0.5) else ''}NULL"

    def odd(self, attr: str) -> str:
        """Less common spellings: NULL literals, IS DISTINCT FROM, casts, functions of
        one attribute, arithmetic on the column."""
        lit = self.lit(attr)
        forms = [f"{attr} IN ({lit}, NULL)", f"{attr} NOT IN ({lit}, NULL)",
                 f"{attr} = NULL", f"{attr} <> NULL", f"{attr} IS DISTINCT FROM {lit}",
                 f"{attr} IS NOT DISTINCT FROM {lit}", f"{attr} IS DISTINCT FROM NULL",
                 f"coalesce({attr} = {lit}, TRUE)", f"NOT {attr} IS NULL",
                 f"({attr} = {lit}) IS TRUE", f"({attr} = {lit}) IS NOT FALSE",
                 f"{attr} BETWEEN NULL AND {lit}", f"{attr} >= ALL (SELECT {lit})",
                 f"{attr} IN (SELECT {lit})", f"{attr} NOT IN (SELECT {lit})",
                 f"{attr} = ANY (SELECT {lit})", f"{attr} IN ({lit})"]
        if attr in self.CATS:
            forms += [f"coalesce({attr}, 'zz') = 'zz'", f"upper({attr}) = upper({lit})",
                      f"{attr} || 'x' = {lit} || 'x'", f"length({attr}) = 2",
                      f"{attr} > {lit}", f"{attr} <= {lit}", f"{attr} ILIKE 'N%'",
                      f"CASE WHEN {attr} = {lit} THEN TRUE ELSE FALSE END",
                      f"{attr} IN (SELECT label FROM pub)",
                      f"{attr} NOT IN (SELECT label FROM pub)",
                      f"{attr} GLOB '[ns]*'", f"{attr} SIMILAR TO 'n.'"]
        if attr in ("c", "k", "n"):  # correlated: answered on labels, refused on bins
            col = "label" if attr == "c" else "w"
            forms += [f"EXISTS (SELECT 1 FROM pub WHERE pub.{col} = {attr})",
                      f"NOT EXISTS (SELECT 1 FROM pub WHERE {col} = t.{attr})"]
        if attr in ("n", "k", "p", "x"):
            forms += [f"{attr} + 1 < {lit}", f"-{attr} < -{lit}", f"{attr} * 2 <= {lit}",
                      f"CAST({attr} AS DOUBLE) < {lit}", f"abs({attr}) >= {lit}",
                      f"{attr} < {lit} + 1", f"{attr} = {attr}", f"{attr} >= {attr} - 1",
                      f"coalesce({attr}, -1) < {lit}", f"{attr} % 2 = 0",
                      f"{attr}::VARCHAR = '5'", f"{attr} < {lit}::INT",
                      f"{attr} BETWEEN {lit} AND {lit} + 3",
                      f"{attr} < (SELECT max(w) FROM pub)", f"{attr} < ?"]
        if attr in ("d", "m"):
            forms += [f"{attr} < {lit} + INTERVAL 1 MONTH", f"year({attr}) = 2013",
                      f"{attr} < now()", f"{attr} >= TIMESTAMP '2013-05-01 00:00:00'",
                      f"{attr} < '2013-05-01'::TIMESTAMP", f"{attr} = {attr}"]
        if attr in ("x", "m"):  # no points: a day inside a month bin interpolates
            forms = [f for f in forms if not any(t in f for t in (" IN ", "DISTINCT", " = "))]
        if attr == "m":  # NOT (m BETWEEN NULL AND day) is m > day: inside a month bin
            forms = [f for f in forms if "BETWEEN NULL" not in f]
        return self.pick(forms).replace(" < ?", " < 5")

    def tree(self, attr: str, depth: int) -> str:
        if depth <= 0 or self.chance(0.45):
            return self.atom(attr)
        r = self.g.random()
        if r < 0.05:  # three-valued: IS [NOT] TRUE / FALSE / NULL of a predicate
            return (f"({self.tree(attr, depth - 1)}) IS {self.pick(['', 'NOT '])}"
                    f"{self.pick(['TRUE', 'FALSE', 'NULL'])}")
        if r < 0.2:
            return f"NOT ({self.tree(attr, depth - 1)})"
        op = "AND" if r < 0.55 else "OR"
        return f"({self.tree(attr, depth - 1)} {op} {self.tree(attr, depth - 1)})"

    ATTRS = ["n", "p", "x", "d", "m", "c", "k", "r", "pr", "ci", "ts"]

    VIEW_ATTRS = [["r", "pr", "ci"], ["c", "r", "pr", "ci"], ["c", "k"], ["k", "n"], ["n"],
                  ["p"], ["c", "x"], ["d"], ["m"], ["ts"]]

    def where(self, allowed: list[str]) -> str:
        attrs = self.g.sample(allowed, self.g.randint(1, min(3, len(allowed))))
        parts = [self.tree(a, 2) for a in attrs]
        if len(parts) > 1 and self.chance(0.1):  # OR across attributes: refused or right
            return " OR ".join(parts)
        if len(parts) > 1 and self.chance(0.1):
            return f"NOT ({parts[0]} AND {parts[1]})" + "".join(
                f" AND {p}" for p in parts[2:])
        return " AND ".join(parts)

    GROUPABLE = ["c", "k", "r", "pr", "ci", "n", "d", "m", "p", "ts"]

    def key_expr(self, col: str) -> str:
        if col == "d" and self.chance(0.5):
            return f"date_trunc('{self.pick(['month', 'week', 'year'])}', d)"
        if col == "ts":  # GROUP BY ts would be one row per hour bin, not per second
            return f"date_trunc('{self.pick(['hour', 'day', 'week'])}', ts)"
        if col == "m":  # GROUP BY m is one row per month bin, not per day (docs/sql.md)
            return f"date_trunc('{self.pick(['quarter', 'year', 'month'])}', m)"
        if col == "c" and self.chance(0.2):
            return "CASE WHEN c = 'a' THEN 'A' WHEN c IS NULL THEN 'none' ELSE 'other' END"
        if col == "k" and self.chance(0.2):
            return "CASE WHEN k < 10 THEN 'low' ELSE 'high' END"
        if col == "ci" and self.chance(0.15):
            return "upper(ci)"
        if col in ("n", "k") and self.chance(0.3):
            w = self.pick([2, 5, 10])
            return self.pick([f"floor({col} / {w}) * {w}",
                              f"width_bucket({col}, 0, {20 if col == 'k' else 100}, 4)"])
        if col == "p" and self.chance(0.5):
            return self.pick(["floor(p)", "floor(p * 2) / 2"])
        return col

    def query(self) -> str:
        g = self.g
        allowed = self.pick(self.VIEW_ATTRS) if self.chance(0.95) else self.ATTRS
        groupable = [c for c in self.GROUPABLE if c in allowed]
        ncols = min(len(groupable), self.pick([0, 1, 1, 1, 2, 2, 3]))
        cols = g.sample(groupable, ncols)
        keys = [self.key_expr(c) for c in cols]
        aliases = [f"g{i}" for i in range(len(keys))]
        if self.chance(0.2):  # output names that are also attribute names
            free = [a for a in self.ATTRS if a not in cols]
            aliases = [self.pick([a, c]) if c not in aliases else a
                       for a, c in zip(aliases, g.sample(free, len(aliases)))]
        aggs = [self.pick(["COUNT(*)", "COUNT(*)", "COUNT(*)", "SUM(dp_count)"])]
        if self.chance(0.3):
            extra = ["COUNT(c)", "COUNT(k)", "SUM(1)", "COUNT(1)", "COUNT(ci)", "COUNT(r)",
                     "COUNT(*) * 2", "SUM(k)", "COUNT(n)", "COUNT(*) - COUNT(c)",
                     "COUNT(pr)", "SUM(n)", "AVG(k)", "SUM(p)", "AVG(n)",
                     "COUNT(*) + COUNT(k)", "round(AVG(p), 6)", "COUNT(ts)", "COUNT(d)",
                     "count_star()", "fsum(1)", "entropy(c)", "mean(k)", "list(r)"]
            if self.chance(0.9):  # mostly of the attributes at hand (else: refused)
                extra = [e for e in extra if not set(re.findall(r"\((\w+)\)", e))
                         - set(allowed) - {"1"}]
            aggs.append(self.pick(extra))
        if self.chance(0.1):
            aggs = [self.pick(["COUNT(*) / 2", "SUM(1) * 3", "COUNT(*) * 1.5"])]
        where = f" WHERE {self.where(allowed)}" if self.chance(0.85) else ""
        if "n" in cols and "n" not in where and self.chance(0.8):
            where = (where + " AND " if where else " WHERE ") + "n IS NOT NULL"
        names = [f"a{i}" for i in range(len(aggs))]
        if self.chance(0.25):
            free = [a for a in self.ATTRS if a not in aliases]
            names = g.sample(free, len(names))
        select = [f"{k} AS {a}" for k, a in zip(keys, aliases)] + \
                 [f"{a} AS {n}" for n, a in zip(names, aggs)]
        group = ""
        if keys:
            style = g.random()
            ref = aliases if self.chance(0.5) else keys
            if style < 0.55:
                group = " GROUP BY " + ", ".join(ref)
            elif style < 0.7:
                group = f" GROUP BY ROLLUP ({', '.join(ref)})"
            elif style < 0.8:
                group = f" GROUP BY CUBE ({', '.join(ref)})"
            elif style < 0.9:
                sets = ["(" + ", ".join(g.sample(ref, g.randint(0, len(ref)))) + ")"
                        for _ in range(g.randint(1, 3))]
                group = f" GROUP BY GROUPING SETS ({', '.join(sets)})"
            else:
                group = " GROUP BY ALL"
        elif self.chance(0.1):
            group = " GROUP BY ()"
        having = ""
        if keys and self.chance(0.2):
            measure = "COUNT(*)" if aggs[0] != "COUNT(*)" or self.chance(0.5) else names[0]
            having = f" HAVING {measure} {self.pick(['>', '<', '>='])} {g.randint(0, 400)}.5"
        tab = "t"
        if allowed in self.VIEW_ATTRS and self.chance(0.3):  # pinned to the view
            tab = VIEWS[self.VIEW_ATTRS.index(allowed)] + " AS t"
        body = f"SELECT {', '.join(select)} FROM {tab}{where}{group}{having}"
        shape = g.random()
        kw = len(keys)
        if shape < 0.1 and keys and aggs[0] == "COUNT(*)":  # over the aggregated rows
            extra = self.pick([
                "SUM(COUNT(*)) OVER () AS tot",
                f"rank() OVER (ORDER BY round(COUNT(*)) DESC, {', '.join(keys)}) AS rk",
                "COUNT(*) * 100.0 / SUM(COUNT(*)) OVER () AS share",
                f"{names[0]} * 2 AS twice"])
            tail = self.pick(["", " QUALIFY SUM(COUNT(*)) OVER () > 0",
                              f" ORDER BY COUNT(*) DESC, {', '.join(aliases)} NULLS FIRST"])
            if "ORDER BY" in tail and (group.startswith(" GROUP BY ALL") or "(" in group):
                tail = ""
            return body.replace(" FROM ", f", {extra} FROM ", 1) + tail, kw
        if shape < 0.12 and not keys:  # a union of two counts, a scalar subquery
            other = f"SELECT COUNT(*) AS a0 FROM {tab}" + (
                f" WHERE {self.where(allowed)}" if self.chance(0.7) else "")
            return self.pick([f"SELECT 1 AS part, * FROM ({body}) UNION ALL "
                              f"SELECT 2, * FROM ({other})",
                              f"SELECT ({body}) - ({other}) AS diff"]), 0
        if shape < 0.15:
            return f"WITH q AS ({body}) SELECT * FROM q", kw
        if shape < 0.25:
            return f"SELECT SUM({names[0]}) AS s, MAX({names[0]}) AS mx FROM ({body}) AS s", 0
        if shape < 0.35 and keys:
            order = ", ".join(aliases)
            if aggs[0] == "COUNT(*)" and self.chance(0.4):
                order = f"{names[0]} DESC, {order}"
            return f"{body} ORDER BY {order} NULLS FIRST LIMIT {g.randint(1, 6)}", kw
        if shape < 0.4 and "c" in cols and keys[cols.index("c")] == "c":
            return (f"WITH q AS ({body}) SELECT pub.kind, SUM(q.{names[0]}) AS n FROM q "
                    f"JOIN pub ON q.g{cols.index('c')} = pub.label GROUP BY pub.kind", 1)
        if shape < 0.45 and "c" in allowed:
            return (f"SELECT pub.kind, COUNT(*) AS n FROM {tab} JOIN pub ON t.c = pub.label"
                    f"{where} GROUP BY pub.kind", 1)
        if shape < 0.53 and "k" in allowed:
            w = f" WHERE {self.where([a for a in allowed if a != 'c'])}" if where else ""
            join = self.pick(["t.k = pub.w", "t.k < pub.w", "t.k >= pub.w"])
            return (f"SELECT pub.kind, COUNT(*) AS n FROM {tab} JOIN pub ON {join}{w} "
                    f"GROUP BY pub.kind", 1)
        if shape < 0.56 and cols and all(k == c for k, c in zip(keys, cols)) \
                and not set(cols) & {"n", "k", "d", "m", "p"}:
            return f"SELECT DISTINCT {', '.join(cols)} FROM {tab}{where}", len(cols)
        if shape < 0.5 and "c" in allowed:
            w = where or " WHERE TRUE"
            return f"SELECT COUNT(*) FROM {tab}{w} AND c IN (SELECT label FROM pub WHERE w < 3)", 0
        return body, kw


def campaign(base: Path, n: int, seed: int):
    release = fz.build(base)
    raw, dp = fz.raw_connection(base), fz.dp_connection(release)
    gen = Gen(seed)
    results = []
    for _ in range(n):
        q, kw = gen.query()
        kind, detail = fz.classify(dp, raw, q, kw)
        results.append((kind, q, detail))
    return results


if __name__ == "__main__":
    import sys
    import warnings

    warnings.simplefilter("ignore")
    base = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/fuzz-data")
    base.mkdir(exist_ok=True)
    if not (base / "t.parquet").exists():
        fz.write_data(base)
    res = campaign(base, int(sys.argv[1]), int(sys.argv[2]))
    print(Counter(k for k, _, _ in res))
    for kind, q, detail in res:
        if kind not in ("equal",):
            print(f"[{kind}] {q}\n    {detail[:400]}")
