"""The pip command that adds one of dpsql's extras to the environment it runs in.

An error that says ``pip install "dpsql[bi]"`` is right only for an install from a
package index; from a source checkout (``pip install -e .``, the way the README installs
dpsql) that command would look for a ``dpsql`` on the index instead of the checkout.
:func:`install_hint` reads how this dpsql was installed (its ``direct_url.json``,
PEP 610) and names the same source: the checkout's directory (``-e`` when it was an
editable install), the VCS URL, or the index name.
"""

from __future__ import annotations

import json
import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """``pip install ...`` for dpsql's optional dependencies ``extra`` (``bi``, ...)."""
    source = _direct_url()
    if source is None:
        checkout = Path(__file__).resolve().parents[1]
        if _not_installed() and (checkout / "pyproject.toml").exists():
            target = f"-e {shlex.quote(f'{checkout}[{extra}]')}"  # a source tree on sys.path
        else:
            target = shlex.quote(f"dpsql[{extra}]")  # from a package index
    else:
        url, info = source
        if url.startswith("file://"):  # a checkout (editable or not), or a local wheel
            path = unquote(urlparse(url).path)
            editable = "-e " if (info.get("dir_info") or {}).get("editable") else ""
            target = editable + shlex.quote(f"{path}[{extra}]")
        elif "vcs_info" in info:
            vcs = info["vcs_info"]
            rev = f"@{vcs['requested_revision']}" if vcs.get("requested_revision") else ""
            target = shlex.quote(f"dpsql[{extra}] @ {vcs.get('vcs', 'git')}+{url}{rev}")
        else:
            target = shlex.quote(f"dpsql[{extra}] @ {url}")
    return f"pip install {target}"


def _not_installed() -> bool:
    try:
        metadata.distribution("dpsql")
    except metadata.PackageNotFoundError:
        return True
    return False


def _direct_url() -> tuple[str, dict] | None:
    """(url, the parsed direct_url.json) of the installed dpsql, or None (an index
    install, or no installed distribution)."""
    try:
        text = metadata.distribution("dpsql").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    url = info.get("url")
    return (url, info) if isinstance(url, str) else None
