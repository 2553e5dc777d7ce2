"""Install hints in error messages name the source this dpsql came from (dpsql._install):
``pip install "dpsql[bi]"`` cannot work from a source checkout, which is how the README
installs dpsql."""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path

import pytest

from dpsql import _install
from dpsql._install import install_hint
from dpsql.errors import NotSupportedError

ROOT = Path(__file__).resolve().parents[1]


def test_this_checkout_is_named():
    # the test venv installs dpsql with `pip install -e ".[test]"` (README, .ci/run)
    hint = install_hint("bi")
    assert hint == f"pip install -e {shlex.quote(f'{ROOT}[bi]')}"
    assert "dpsql[bi]" not in hint  # not the index name, which a checkout cannot install


@pytest.mark.parametrize("info, want", [
    (None, "pip install 'dpsql[report]'"),  # an index install has no direct_url.json
    ({"url": "file:///src/dp%20sql", "dir_info": {}}, "pip install '/src/dp sql[report]'"),
    ({"url": "file:///src/dpsql", "dir_info": {"editable": True}},
     "pip install -e '/src/dpsql[report]'"),
    ({"url": "file:///w/dpsql-0.9-py3-none-any.whl", "archive_info": {}},
     "pip install '/w/dpsql-0.9-py3-none-any.whl[report]'"),
    ({"url": "https://example.org/dpsql.git",
      "vcs_info": {"vcs": "git", "requested_revision": "v1", "commit_id": "ab"}},
     "pip install 'dpsql[report] @ git+https://example.org/dpsql.git@v1'"),
])
def test_each_kind_of_install(monkeypatch, info, want):
    monkeypatch.setattr(_install, "_direct_url",
                        lambda: None if info is None else (info["url"], info))
    monkeypatch.setattr(_install, "_not_installed", lambda: False)
    assert install_hint("report") == want


def test_a_source_tree_that_was_never_installed(monkeypatch):
    monkeypatch.setattr(_install, "_direct_url", lambda: None)
    monkeypatch.setattr(_install, "_not_installed", lambda: True)
    assert install_hint("bi") == f"pip install -e {shlex.quote(f'{ROOT}[bi]')}"


def test_serve_without_buenavista_names_the_checkout(monkeypatch):
    import dpsql.server

    monkeypatch.setitem(sys.modules, "buenavista.postgres", None)  # as if not installed
    with pytest.raises(NotSupportedError) as info:
        dpsql.server._require_buenavista()
    assert str(info.value).endswith(install_hint("bi"))
    assert str(ROOT) in str(info.value)


def test_dialect_without_sqlalchemy_names_the_checkout(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    monkeypatch.delitem(sys.modules, "dpsql.sqlalchemy", raising=False)
    monkeypatch.delitem(sys.modules, "dpsql.sqlalchemy._inspection", raising=False)
    with pytest.raises(ImportError) as info:
        importlib.import_module("dpsql.sqlalchemy")
    assert install_hint("bi") in str(info.value)
