"""``count_interval``: a count's interval at whole counts holds exactly the whole counts
of the model's interval (so the coverage of a true count, a whole number, is unchanged),
never goes below 0, and stays exact for counts up to 10¹² (checked against exact rational
arithmetic on values a float holds exactly)."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from dpsql.accuracy.base import count_interval

# dyadic values: their float sums and differences are exact, so Fraction is the oracle
counts = st.builds(lambda k, j: k + j / 8, st.integers(-50, 10 ** 12), st.integers(0, 7))
offsets = st.builds(lambda m: m / 16, st.integers(0, 160_000))


@given(counts, offsets, offsets)
def test_the_ends_are_the_whole_counts_inside(count, below, above):
    lo, hi = count_interval(count, below, above)
    a = math.ceil(Fraction(count) - Fraction(below))
    b = math.floor(Fraction(count) + Fraction(above))
    if b < 0:  # wholly below 0 (a real-valued count): [0, 0]
        expected = (0, 0)
    elif a <= b:  # the whole counts inside, from 0 up
        expected = (max(a, 0), b)
    else:  # none inside: the two whole counts around it
        expected = (max(b, 0), a)
    assert (lo, hi) == expected


def test_examples():
    assert count_interval(46.0, 6.8, 6.8) == (40.0, 52.0)  # [39.2, 52.8]
    assert count_interval(3.0, 5.0, 2.5) == (0.0, 5.0)  # never below 0
    assert count_interval(7.0, 0.0, 0.0) == (7.0, 7.0)  # an exact count
    assert count_interval(3.3, 0.1, 0.1) == (3.0, 4.0)  # no whole count inside
    assert count_interval(10.0, 2.0000000000001, 1.9999999999999) == (8.0, 12.0)  # float sums
    assert count_interval(0.1 + 0.2, 0.3, 1.7) == (0.0, 2.0)
    assert count_interval(1e9, 3.5, 3.5) == (999999997.0, 1000000003.0)  # no slack of 1
    assert count_interval(-4.2, 1.0, 2.0) == (0.0, 0.0)
    assert count_interval(5.0, math.inf, 2.3) == (0.0, 7.0)  # the finite end still whole
    assert count_interval(5.0, 1.2, math.inf) == (4.0, math.inf)
    assert all(math.isnan(x) for x in count_interval(math.nan, 1.0, 1.0))
