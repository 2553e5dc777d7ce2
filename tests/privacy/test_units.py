"""The one place sensitivities, weight splits and conservative rounding are derived."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from dpsql.errors import InvalidPrivacyParameterError
from dpsql.privacy import (Neighbouring, PrivacyUnit, ceil_float, check_max_rows,
                           histogram_sensitivity, normalise_weights)


@pytest.mark.parametrize("m", [1, 2, 7])
def test_histogram_sensitivity_by_relation(m):
    add = histogram_sensitivity("add_remove", m)
    assert (add.l1, add.l2_squared, add.total_is_public) == (m, m * m, False)
    sub = histogram_sensitivity(Neighbouring.SUBSTITUTE, np.int64(m))
    assert (sub.l1, sub.l2_squared, sub.total_is_public) == (2 * m, 2 * m * m, True)
    assert isinstance(sub.max_rows, int) and isinstance(sub.l2_squared, Fraction)


def test_histogram_sensitivity_matches_brute_force():
    """Move m rows of one unit in every way on a 3-cell histogram and take the worst case."""
    m = 2
    worst = {"add_remove": [0, 0], "substitute": [0, 0]}
    for a in range(3):
        for b in range(3):
            for k in range(m + 1):  # the unit's rows: k in cell a, m - k in cell b
                unit = np.zeros(3, int)
                unit[a] += k
                unit[b] += m - k
                # add/remove: the neighbour lacks the unit's rows
                worst["add_remove"] = [max(worst["add_remove"][0], np.abs(unit).sum()),
                                       max(worst["add_remove"][1], (unit * unit).sum())]
                for c in range(3):  # substitute: the same m rows all moved to cell c
                    moved = unit.copy() * -1
                    moved[c] += m
                    worst["substitute"] = [max(worst["substitute"][0], np.abs(moved).sum()),
                                           max(worst["substitute"][1], (moved * moved).sum())]
    for nb, (l1, l2sq) in worst.items():
        s = histogram_sensitivity(nb, m)
        assert (s.l1, s.l2_squared) == (l1, l2sq)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_max_rows_is_checked_once_for_all(bad):
    with pytest.raises(InvalidPrivacyParameterError, match="max_rows must be an integer >= 1"):
        check_max_rows(bad)
    with pytest.raises(InvalidPrivacyParameterError, match="max_rows"):
        histogram_sensitivity("add_remove", bad)
    with pytest.raises(InvalidPrivacyParameterError, match="max_rows"):
        PrivacyUnit(column="u", max_rows=bad)


def test_substitute_says_each_units_kept_row_count_is_public():
    """Under substitute a neighbour keeps a unit's number of kept rows (the exact total
    would reveal it otherwise), so with max_rows > 1 the stated unit says that number is
    public; add_remove protects it, and one row per unit has nothing to say."""
    unit = PrivacyUnit(column="uid", max_rows=3)
    assert unit.describe() == unit.describe("add_remove") == \
        "all rows with the same uid (at most 3)"
    assert unit.describe(Neighbouring.SUBSTITUTE) == \
        "all rows with the same uid (at most 3); how many rows each keeps is public (substitute)"
    assert PrivacyUnit(column="uid").describe("substitute") == \
        "all rows with the same uid (at most 1)"
    assert PrivacyUnit().describe("substitute") == "one row"


def test_neighbouring_is_parsed():
    with pytest.raises(InvalidPrivacyParameterError, match="add_remove"):
        histogram_sensitivity("bounded", 1)


@given(st.lists(st.fractions(min_value=Fraction(1, 1000), max_value=1000), min_size=1,
                max_size=8))
def test_normalise_weights_is_exact(ws):
    out = normalise_weights(ws)
    assert sum(out) == 1
    assert all(o * ws[0] == out[0] * w for o, w in zip(out, ws))


def test_normalise_weights_errors_name_the_argument():
    with pytest.raises(InvalidPrivacyParameterError, match=r"level_weights needs 3 weights "
                                                           r"\(one per level\), got 2"):
        normalise_weights([1, 2], what="level_weights", count=3, count_hint=" (one per level)")
    with pytest.raises(InvalidPrivacyParameterError, match="level_weights weight must be > 0"):
        normalise_weights([1, 0], what="level_weights")
    with pytest.raises(InvalidPrivacyParameterError, match="at least one"):
        normalise_weights([])


@given(st.fractions(min_value=Fraction(1, 10**12), max_value=10**12))
def test_ceil_float_never_rounds_down(x):
    f = ceil_float(x)
    assert Fraction(f) >= x
    assert np.nextafter(f, 0.0) < x or Fraction(f) == x
