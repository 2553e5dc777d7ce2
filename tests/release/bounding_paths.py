"""The bounding-path fixture, shared by the bounding and bucket tests."""

from __future__ import annotations

import pytest

from dpsql.release import counts, ingest as ingest_module


@pytest.fixture(params=["codes_in_key", "arg_min", "struct"])
def bounding_path(request, monkeypatch):
    """Each way :func:`counts.count_bounded` can carry the kept codes: in the low bits of
    the key (small domains), as a packed BIGINT, or as a struct (domains too large to
    pack). Forced by shrinking the payload bits or inflating the code bounds."""
    if request.param == "arg_min" and hasattr(counts, "PAYLOAD_BITS"):
        monkeypatch.setattr(counts, "PAYLOAD_BITS", 0)
    if request.param == "struct" and hasattr(ingest_module, "_code_sizes"):
        real = ingest_module._code_sizes
        monkeypatch.setattr(ingest_module, "_code_sizes",
                            lambda *a: {k: v << 30 for k, v in real(*a).items()})
    return request.param
