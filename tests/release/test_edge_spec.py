"""Awkward but legal specs, and wrong ones refused before any data is read, with the key
path, the offending value and the fix."""

from __future__ import annotations

import pytest

from dpsql.errors import SpecError
from dpsql.spec import ReleaseSpec


def _spec(views, **attrs):
    return {"name": "t", "source": "t.parquet", "neighbouring": "add_remove",
            "budget": {"rho": 1.0}, "attributes": attrs, "views": views}


@pytest.mark.parametrize("mech", ["cascade", "btree"])
def test_range_tree_mechanism_over_one_bin_is_refused_in_the_spec(tmp_path, mech):
    """A one-bin range under cascade wrote a release that dpsql.connect could not attach
    (StopIteration in duck._view_info: the view had no level table), and under btree the
    build refused only after reading the data. Both are refused in the spec now."""
    raw = _spec([{"name": "v", "levels": ["x"], "mechanism": mech}],
                x={"kind": "range", "lower": 0, "upper": 5, "bins": 1})
    with pytest.raises(SpecError, match=r"views\[0\]\.mechanism.*1 bin.*at least 2 bins"):
        ReleaseSpec.from_dict(raw, base_dir=tmp_path)
