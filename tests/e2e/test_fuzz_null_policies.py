"""Differential fuzzing of three-valued logic under each NULL policy: seeded WHERE trees
of NULL literals, IN lists with NULL, IS [NOT] DISTINCT FROM, IS [NOT] TRUE / FALSE /
NULL, constant subqueries and constant conditions, under NOT, AND and OR
(tests/e2e/null_policy_support.py), on one attribute of each policy, answered by dpsql
on an exact release and by DuckDB on the raw table.

Each COUNT(*) must be DuckDB's, or (only where the clause keeps rows whose attribute is
NULL, on an attribute with on_null = "drop", whose views left them out) refused saying
that the release cannot count them. A longer campaign:
``python tests/e2e/null_policy_support.py 20000 SEED``.
"""

from __future__ import annotations

from collections import Counter

import pytest

import null_policy_support as nps

pytestmark = [pytest.mark.filterwarnings("ignore::dpsql.dbapi.SeededReleaseWarning"),
              pytest.mark.filterwarnings("ignore::dpsql.dbapi.PublicDomainWarning")]


@pytest.fixture(scope="module")
def cons(tmp_path_factory):
    yield from nps.opened(tmp_path_factory.mktemp("fuzz_null_policies"))


def test_the_generator_is_deterministic():
    a, b = nps.NullTrees(3), nps.NullTrees(3)
    assert [a.where() for _ in range(50)] == [b.where() for _ in range(50)]


@pytest.mark.parametrize("seed", (20261127, 1))
def test_every_null_tree_is_duckdbs_count_or_the_dropped_null_refusal(cons, seed):
    con, raw = cons
    gen, kinds, bad = nps.NullTrees(seed), Counter(), []
    for _ in range(600):
        x, where = gen.where()
        kind, detail = nps.classify(con, raw, x, where)
        kinds[kind] += 1
        if kind == "wrong":
            bad.append(f"{where}\n    {detail[:300]}")
    assert not bad, "\n".join(bad[:10])
    assert kinds["equal"] >= 500, kinds


# A constant FALSE or NULL conjunct keeps no row, so a clause TRUE on the dropped NULL
# rows is no longer refused beside it: each was refused ("the release cannot count the
# rows where nd is NULL"), where DuckDB answers 0.
@pytest.mark.parametrize("where", [
    "nd IS NOT DISTINCT FROM NULL AND FALSE", "NULL AND NOT (NOT (nd IS NULL))",
    "ci IS NULL AND 1 = 2", "cd IS DISTINCT FROM 'a' AND (NULL OR NULL) IS FALSE",
])
def test_a_constant_false_conjunct_keeps_no_row_of_a_dropped_attribute(cons, where):
    con, raw = cons
    sql = f"SELECT COUNT(*) FROM t WHERE {where}"
    assert raw.execute(sql).fetchall() == [(0,)]
    assert con.execute(sql).fetchall() == [(0,)]
