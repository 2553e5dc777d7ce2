"""Tests of dpsql.domains: constructors, error messages, tree order, O/D shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsql.domains import (DomainTree, binned, categorical, concat, hierarchy, interleave,
                           od_tree)
from dpsql.errors import DataError, SpecError

GEO = [("R1", "P1", "C1"), ("R2", "P3", "C5"), ("R1", "P1", "C2"), ("R1", "P2", "C3"),
       ("R2", "P3", "C4")]


def check_tree(tree: DomainTree) -> None:
    """Tree-order invariants on every level (small trees only)."""
    for k in range(1, tree.depth + 1):
        ids = np.arange(tree.size(k))
        par = tree.parent(k, ids)
        assert np.all(np.diff(par) >= 0)
        assert par.min() == 0 and par.max() == tree.size(k - 1) - 1
        child, seg = tree.children(k, np.arange(tree.size(k - 1)))
        assert np.array_equal(child, ids)
        assert np.array_equal(seg, par)
        assert np.array_equal(np.bincount(par, minlength=tree.size(k - 1)),
                              tree.n_children(k, np.arange(tree.size(k - 1))))
        for j in range(k + 1):
            a = ids
            for step in range(k, j, -1):
                a = tree.parent(step, a)
            assert np.array_equal(tree.ancestor(k, ids, j), a)
    d = tree.depth
    leaves = np.arange(tree.size(d))
    lab = tree.labels(d, leaves)
    codes = {}
    for key, val in lab.items():
        if key.endswith("_lo"):
            codes[key[:-3]] = val
        elif not key.endswith("_hi"):
            codes[key] = val
    assert np.array_equal(tree.leaf_ids(codes), leaves)
    assert np.array_equal(tree.parent_array(d), tree.parent(d, leaves))
    back = DomainTree.from_json(tree.to_json())
    assert back.level_sizes == tree.level_sizes
    assert np.array_equal(back.parent(d, leaves), tree.parent(d, leaves))


def test_categorical_shape_and_values():
    t = categorical("mode", ["car", "bus", "bike"])
    assert t.depth == 1 and t.level_sizes == (1, 3)
    assert list(t.values("mode")) == ["car", "bus", "bike"]
    assert t.level_info(1).kind == "categorical"
    check_tree(t)


def test_categorical_duplicate_names_value():
    with pytest.raises(SpecError, match="'bus' twice"):
        categorical("mode", ["car", "bus", "bus"])
    with pytest.raises(SpecError, match="no values"):
        categorical("mode", [])


def test_hierarchy_order_and_sizes():
    h = hierarchy(["region", "province", "city"], GEO)
    assert h.level_sizes == (1, 2, 3, 5)
    assert list(h.values("region")) == ["R1", "R2"]
    assert list(h.values("province")) == ["P1", "P2", "P3"]
    # within a parent, first appearance order: C5 is listed before C4
    assert list(h.values("city")) == ["C1", "C2", "C3", "C5", "C4"]
    assert h.level_info(2).kind == "hierarchy"
    check_tree(h)


def test_hierarchy_child_under_two_parents_names_both():
    bad = GEO + [("R2", "P2", "C9")]
    with pytest.raises(SpecError, match=r"province 'P2' appears under two parents: "
                                        r"region 'R1' and 'R2'"):
        hierarchy(["region", "province", "city"], bad)


def test_hierarchy_duplicate_leaf_path():
    with pytest.raises(SpecError, match=r"\('R1', 'P1', 'C1'\) appears twice"):
        hierarchy(["region", "province", "city"], GEO + [("R1", "P1", "C1")])


def test_hierarchy_bad_rows():
    with pytest.raises(SpecError, match="needs 3"):
        hierarchy(["a", "b", "c"], [("x", "y")])
    with pytest.raises(SpecError, match="distinct"):
        hierarchy(["a", "a"], [("x", "y")])


def test_binned_not_power_of_fanout():
    b = binned("dist", 10, 3)
    assert b.level_sizes == (1, 2, 4, 10)
    info = b.level_info(1)
    assert (info.kind, info.bin_span, info.n_bins) == ("range", 9, 10)
    lab = b.labels(1, np.array([0, 1]))
    assert lab["dist_lo"].tolist() == [0, 9] and lab["dist_hi"].tolist() == [9, 10]
    assert b.n_children(2, np.arange(2)).tolist() == [3, 1]
    check_tree(b)
    assert binned("x", 1, 2).level_sizes == (1, 1)
    with pytest.raises(SpecError, match="fanout"):
        binned("x", 10, 1)


def test_concat_is_mixed_radix():
    a, b = categorical("a", range(3)), categorical("b", range(4))
    t = concat(a, b)
    assert t.level_sizes == (1, 3, 12)
    lab = t.labels(2, np.arange(12))
    assert np.array_equal(np.arange(12), lab["a"] * 4 + lab["b"])
    with pytest.raises(SpecError, match="appears twice"):
        concat(a, a)


def test_concat_view_categorical_hierarchy_range():
    t = concat(categorical("o", ["x", "y"]), hierarchy(["r", "p", "c"], GEO),
               binned("d", 10, 3))
    assert t.depth == 7 and t.level_sizes[-1] == 2 * 5 * 10
    assert t.attributes == ("o", "r", "p", "c", "d")
    check_tree(t)


def _spine(prefix: str, sizes: tuple[int, ...]):
    rows, names = [], [f"{prefix}{j}" for j in range(len(sizes))]

    def rec(path, level):
        if level == len(sizes):
            rows.append(tuple(path))
            return
        for i in range(sizes[level]):
            rec(path + [f"{path[-1] if path else prefix}.{i}"], level + 1)
    rec([], 0)
    return hierarchy(names, rows)


def test_od_tree_level_sizes():
    o = hierarchy(["or", "op", "oc"], GEO)
    d = hierarchy(["dr", "dp", "dc"], [(r.replace("R", "S"), p.replace("P", "Q"),
                                        c.replace("C", "D")) for r, p, c in GEO])
    p = [1, 2, 3, 5]
    dest = od_tree(o, d, "destination")
    assert dest.level_sizes == (1, 2, 4, 6, 9, 15, 25)
    for j in range(3):
        assert dest.size(2 * j) == p[j] ** 2
        assert dest.size(2 * j + 1) == p[j] * p[j + 1]
    check_tree(dest)
    orig = od_tree(o, d, "origin")
    check_tree(orig)
    # the same leaves (as O/D pairs) and the same even levels; different odd-level kinds
    for k in (2, 4, 6):
        lo, ld = orig.labels(k, np.arange(orig.size(k))), dest.labels(k, np.arange(dest.size(k)))
        assert sorted(zip(*lo.values())) == sorted(zip(*[ld[c] for c in lo]))
    assert dest.level_info(1).attribute == "dr" and orig.level_info(1).attribute == "or"


def test_od_tree_italy_scale_is_implicit():
    o = _spine("o", (4, 5, 6))
    d = _spine("d", (4, 5, 6))
    t = od_tree(o, d)
    assert t.size(6) == 120 ** 2
    big = od_tree(_spine("o", (20, 6, 70)), _spine("d", (20, 6, 70)))
    assert big.size(6) == 8400 ** 2
    # children of a few level-5 nodes, without materialising the level
    parents = np.array([0, 17, big.size(5) - 1])
    child, seg = big.children(6, parents)
    assert np.array_equal(big.parent(6, child), parents[seg])
    with pytest.raises(SpecError, match="max_size"):
        big.parent_array(6)


def test_od_tree_rejects_concatenation():
    with pytest.raises(SpecError, match="one hierarchy"):
        od_tree(concat(categorical("a", [1]), categorical("b", [2])), categorical("c", [1]))


def test_interleave_is_round_robin_and_orders_nodes_by_level_labels():
    a = hierarchy(["a0", "a1", "a2"], GEO)
    b = categorical("b", ["y", "x"])
    c = binned("c", 4, 2)
    t = interleave(a, b, c)
    assert [t.level_info(k).attribute for k in range(1, t.depth + 1)] == \
        ["a0", "b", "c", "a1", "c", "a2"]
    check_tree(t)
    # tree order: a level-k node sorts by its level-1 code, then its level-2 code, ...
    k = 4
    lab = t.labels(k, np.arange(t.size(k)))  # codes (bin edges for c)
    keys = list(zip(lab["a0"], lab["b"], lab["c_lo"], lab["a1"]))
    assert keys == sorted(keys) and len(set(keys)) == t.size(k)
    # two trees: the O/D trees, either way round
    pairs = [("R1", "P1"), ("R2", "P3"), ("R1", "P2")]
    o, d = hierarchy(["or", "op"], pairs), hierarchy(["dr", "dp"], pairs)
    for first, second, kind in ((d, o, "destination"), (o, d, "origin")):
        x, y = interleave(first, second), od_tree(o, d, kind)
        assert x.level_sizes == y.level_sizes
        for k in range(1, x.depth + 1):
            assert x.level_info(k) == y.level_info(k)
            lx, ly = x.labels(k, np.arange(x.size(k))), y.labels(k, np.arange(y.size(k)))
            assert set(lx) == set(ly) and all(np.array_equal(lx[c], ly[c]) for c in lx)


def test_interleave_errors():
    with pytest.raises(SpecError, match="at least two"):
        interleave(categorical("a", [1]))
    with pytest.raises(SpecError, match="tree 2 must be one"):
        interleave(categorical("a", [1]), concat(categorical("b", [2]), categorical("c", [3])))


def test_leaf_ids_errors():
    t = concat(categorical("a", range(3)), binned("d", 10, 4))
    with pytest.raises(DataError, match="outside"):
        t.leaf_ids({"a": [0, 5], "d": [0, 0]})
    with pytest.raises(DataError, match="bin 10"):
        t.leaf_ids({"a": [0], "d": [10]})
    with pytest.raises(DataError, match="needs"):
        t.leaf_ids({"a": [0]})
    with pytest.raises(DataError, match="outside level"):
        t.parent(2, [t.size(2)])


def test_aggregate_sums_to_upper_levels():
    t = concat(categorical("a", range(3)), binned("d", 10, 4))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, t.size(3), 50)
    cnt = rng.integers(0, 9, 50)
    for j in range(3):
        ai, ac = t.aggregate(ids, cnt, 3, j)
        assert ac.sum() == cnt.sum()
        dense = np.bincount(t.ancestor(3, ids, j), weights=cnt, minlength=t.size(j))
        assert np.array_equal(dense[ai], ac)
        assert np.all(np.diff(ai) > 0)


components = st.one_of(
    st.integers(1, 4).map(lambda m: ("cat", m)),
    st.tuples(st.integers(1, 9), st.integers(2, 4)).map(lambda t: ("bin",) + t),
    st.lists(st.integers(1, 3), min_size=1, max_size=3).map(lambda s: ("spine", tuple(s))),
)


def _build(spec, prefix):
    if spec[0] == "cat":
        return categorical(prefix, list(range(spec[1])))
    if spec[0] == "bin":
        return binned(prefix, spec[1], spec[2])
    return _spine(prefix, spec[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(components, min_size=1, max_size=3), st.booleans())
def test_random_trees_keep_tree_order(specs, od):
    trees = [_build(s, f"x{i}") for i, s in enumerate(specs)]
    if od and len(trees) >= 2:
        tree = od_tree(trees[0], trees[1], "origin" if len(specs) == 3 else "destination")
    else:
        tree = concat(*trees)
    if tree.level_sizes[-1] > 3000:
        return
    check_tree(tree)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(components, min_size=1, max_size=3), st.booleans(), st.booleans(),
       st.integers(0, 2**32))
def test_cached_offsets_answer_as_the_arithmetic(specs, od, null_node, seed):
    """parent, ancestor one level up, child_ranges, n_children and aggregate from the
    cached CSR offsets (DomainTree class doc) equal the components' arithmetic, on all
    nodes of a level and on a few (which do not build the offsets)."""
    from dpsql.domains import tree as tree_mod

    trees = [_build(s, f"x{i}") for i, s in enumerate(specs)]
    if null_node:
        trees.append(binned("z", 5, 2, null_node=True))
    tree = (od_tree(trees[0], trees[1], "origin") if od and len(trees) >= 2
            else concat(*trees))
    if tree.level_sizes[-1] > 3000:
        return
    plain = DomainTree.from_json(tree.to_json())
    rng = np.random.default_rng(seed)
    for k in range(1, tree.depth + 1):
        ids = np.arange(tree.size(k))
        parents = np.arange(tree.size(k - 1))
        few = np.sort(rng.integers(0, tree.size(k), 1 + tree.size(k) // 40))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tree_mod, "MAX_CACHED_PARENTS", -1)  # arithmetic only
            want = (plain.parent(k, ids), plain.child_ranges(k, parents),
                    plain.n_children(k, parents), plain.parent(k, few),
                    plain.aggregate(few, np.ones(few.size, np.int64), k, k - 1))
        assert not plain._offsets
        got = (tree.parent(k, ids), tree.child_ranges(k, parents),
               tree.n_children(k, parents), tree.parent(k, few),
               tree.aggregate(few, np.ones(few.size, np.int64), k, k - 1))
        assert k in tree._offsets
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[2], want[2])
        assert all(np.array_equal(a, b) for a, b in zip(got[1], want[1]))
        assert np.array_equal(got[3], want[3])
        assert all(np.array_equal(a, b) for a, b in zip(got[4], want[4]))


def test_a_few_lookups_do_not_build_a_levels_offsets():
    tree = concat(categorical("a", range(50)), binned("b", 100, 10))  # 50, 500, 5000
    assert tree.parent(3, np.array([7, 4999])).tolist() == [0, 499]
    assert 3 not in tree._offsets  # 2 ids under 500 parents: the arithmetic
    assert tree.parent(3, np.arange(0, 5000, 50)).tolist() == list(range(0, 500, 5))
    assert 3 in tree._offsets
