"""Ranges answered exactly: the planner predicts the error of the bins that answer.

* :func:`dpsql.planner.choose_view.bin_range` found bin indices with a tolerance of
  1e-9 bin widths: a bound 5e-10 widths below an edge was taken as the edge, and the
  error was predicted for one bin fewer than the answer and its error columns read.
"""

from __future__ import annotations

import warnings
from contextlib import closing

import pytest

import dpsql
from dpsql.dbapi import SeededReleaseWarning
from dpsql.planner.choose_view import Z95


def _connect(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededReleaseWarning)
        return dpsql.connect(path)


def _run(con, sql):
    with closing(con.cursor()) as cur:
        cur.execute(sql)
        return cur.fetchall(), cur.dp_info


def test_a_bound_a_hair_off_an_edge_is_predicted_with_its_bin(trips_release):
    """distance bins are 4 wide: 127.999999998 lies 5e-10 bins below edge 32 (128), in
    bin 31, which the answer reads (weighted) and its error columns count whole. The
    tolerance predicted bins [32, 64) (±5.31, the prediction of ``>= 128``) where the
    answer's error columns are those of [31, 64) (±7.83, as ``>= 124``)."""
    con = _connect(trips_release)
    with closing(con):
        for near, cover, edge in (("distance >= 127.999999998", "distance >= 124",
                                   "distance >= 128"),
                                  ("distance < 128.000000002", "distance < 132",
                                   "distance < 128")):
            q = "SELECT COUNT(*), dp_stderr() FROM dist WHERE "
            (row,), info = _run(con, q + near)
            (cover_row,), cover_info = _run(con, q + cover)
            assert info["interpolation"] == "uniform"
            assert info["predicted_error95"] == cover_info["predicted_error95"]
            assert info["predicted_error95"] == pytest.approx(Z95 * row[1], rel=1e-9)
            assert row[1] == cover_row[1]  # the same nodes' error
            assert info["predicted_error95"] != _run(con, q + edge)[1]["predicted_error95"]
