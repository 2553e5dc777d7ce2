"""The curator's ledger: which sources were released into a folder, with what budget.

Every release is post-processing-free for analysts, but every *build* spends budget on
its source. Building twice from the same data (a second spec, a ``--replace``, a copy
under another name) composes: the privacy loss of that data is the sum. The ledger lets
``dpsql release`` say so: each build appends an entry to ``.dpsql-ledger.json`` in the
output folder, and a build whose source fingerprint is already there is told which
releases spent how much on it so far (:attr:`IngestReport.prior_releases`).

**Where it lives.** Next to the releases, as a hidden curator-side file, *not* inside the
release: the release is what analysts see, and how often the curator released a source
(and the fingerprints) is the curator's business. It is written atomically (temporary
file, rename, folder fsync) like the release.

**The fingerprints.** The source fingerprint is a SHA-256 of the source's *identity*, not
of its content: for a file, its absolute path, size and modification time (ns); for
``duckdb:<file>:<table>``, the same of the database file plus the table name; for a
``sql`` source, the query text. Hashing content would read a possibly huge file a second
time, and a hash of the content of a small sensitive file can be confirmed by anyone
who guesses it (a dictionary attack on the data); path, size and time are metadata the
curator already holds. The price: a copy of the same data under another path or a
rewritten file counts as a new source, and an edit that keeps size and mtime would not
(neither is a realistic way to change data). The spec fingerprint is a SHA-256 of the
validated spec's canonical JSON, so two builds of one spec can be told apart from two
specs over one source.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpsql.release import files
from dpsql.spec import ReleaseSpec

LEDGER_NAME = ".dpsql-ledger.json"
LEDGER_VERSION = 1


def _sha256(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _file_identity(path: Path) -> list[str]:
    p = path.resolve()
    try:
        st = p.stat()
    except OSError:
        return [str(p), "missing"]
    return [str(p), str(st.st_size), str(st.st_mtime_ns)]


def source_fingerprint(spec: ReleaseSpec) -> str:
    """A SHA-256 of the source's identity (see the module docstring); reads no data."""
    if spec.sql is not None:
        return _sha256("sql", spec.sql)
    src = spec.source or ""
    if src.startswith("duckdb:"):
        _, file, table = (src.split(":") + ["", ""])[:3]
        return _sha256("duckdb", *_file_identity(_resolve(spec, file)), table)
    return _sha256("file", *_file_identity(_resolve(spec, src)))


def _resolve(spec: ReleaseSpec, name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else Path(spec.base_dir) / p


def spec_fingerprint(spec: ReleaseSpec) -> str:
    """A SHA-256 of the validated spec's canonical JSON."""
    return _sha256("spec", spec.to_json())


def read_ledger(folder: str | Path) -> list[dict[str, Any]]:
    """The entries of ``folder``'s ledger (empty when there is none or it is unreadable:
    the ledger informs, it never blocks a release)."""
    try:
        data = json.loads((Path(folder) / LEDGER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = data.get("releases") if isinstance(data, dict) else None
    return [e for e in entries or [] if isinstance(e, dict)]


def prior_releases(folder: str | Path, source: str) -> list[dict[str, Any]]:
    """The ledger entries of ``folder`` that released the source with this fingerprint."""
    return [e for e in read_ledger(folder) if e.get("source") == source]


def record(target: str | Path, spec: ReleaseSpec, source: str, rho: float,
           seeded: bool) -> None:
    """Append this release to the ledger of its folder (atomically)."""
    target = Path(target).resolve()
    entries = read_ledger(target.parent)
    entries.append({
        "release": target.name,
        "name": spec.name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "spec": spec_fingerprint(spec),
        "budget": spec.budget.to_json(),
        "rho": rho,
        "seeded": seeded,
    })
    ledger = target.parent / LEDGER_NAME
    tmp = files.temporary_path(ledger)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"version": LEDGER_VERSION, "releases": entries}, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        files.replace_durably(tmp, ledger)
    except OSError as err:
        if tmp.exists():
            tmp.unlink()
        raise files.write_failed(ledger, err) from err


SHOWN = 3


def spent_text(prior: list[dict[str, Any]]) -> str:
    """One line for the curator: the releases of this source so far and their total ρ.
    The last ``SHOWN`` are named; earlier ones are counted (21 trial releases in a folder
    made the warning a screenful). The total is over all of them."""
    total = sum((Fraction(str(e.get("rho", 0))) for e in prior), Fraction(0))
    each = ", ".join(f"{e.get('release')} (ρ={float(e.get('rho', 0)):.6g}, "
                     f"{e.get('created')})" for e in prior[-SHOWN:])
    if len(prior) > SHOWN:
        each = f"{len(prior) - SHOWN} earlier, then {each}"
    return (f"this source was already released into this folder {len(prior)} time(s): "
            f"{each}; ρ={float(total):.6g} spent on it so far, and this release adds its "
            "own budget to that (the privacy losses compose)")
