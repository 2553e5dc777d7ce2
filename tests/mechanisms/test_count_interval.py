"""``count_interval``: a count's interval at whole counts holds exactly the whole counts
of the model's interval (so coverage of a true count, a whole number, is unchanged), and
never goes below 0."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dpsql.accuracy.base import count_interval

counts = st.floats(-50.0, 1e6, allow_nan=False)
offsets = st.floats(0.0, 1e4, allow_nan=False)


@given(counts, offsets, offsets)
def test_the_ends_are_whole_counts_holding_the_same_whole_counts(count, below, above):
    lo, hi = count_interval(count, below, above)
    assert lo == int(lo) and hi == int(hi) and 0 <= lo <= hi
    a, b = count - below, count + above
    slack = 1e-9 * max(1.0, abs(count))
    if math.floor(b + slack) >= max(math.ceil(a - slack), 0):  # a count ≥ 0 inside
        for n in range(max(int(lo) - 3, 0), int(hi) + 4):
            assert (lo <= n <= hi) == (a - slack <= n <= b + slack)
    elif b + slack < 0:  # wholly below 0 (a real-valued count): [0, 0]
        assert (lo, hi) == (0.0, 0.0)
    else:  # none inside: the two whole counts around it
        assert (lo, hi) == (max(math.floor(b), 0), max(math.ceil(a), 0))


def test_examples():
    assert count_interval(46.0, 6.8, 6.8) == (40.0, 52.0)  # [39.2, 52.8]
    assert count_interval(3.0, 5.0, 2.5) == (0.0, 5.0)  # never below 0
    assert count_interval(7.0, 0.0, 0.0) == (7.0, 7.0)  # an exact count
    assert count_interval(3.3, 0.1, 0.1) == (3.0, 4.0)  # no whole count inside
    assert count_interval(10.0, 2.0000000000001, 1.9999999999999) == (8.0, 12.0)  # float sums
    assert count_interval(5.0, math.inf, 2.0) == (0.0, 7.0)
    assert count_interval(-4.2, 1.0, 2.0) == (0.0, 0.0)
