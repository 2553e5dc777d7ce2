"""Writing the curator's files so that a crash, a kill or a full disk never costs a
release: temporary names of our own, atomic renames made durable, stale temporaries
cleaned up on the next run, and no silent replacement of an existing release.

* **Our temporary names** are ``.<target name>.dpsql-<pid>-<random>.tmp`` (and DuckDB's
  ``….tmp.wal`` beside it): hidden, in the target's folder (so the rename stays on one
  file system), and carrying the writer's process id.
* **Stale temporaries** (:func:`remove_stale_temporaries`): a process killed while writing
  leaves its temporary file (and perhaps its WAL) behind. The next write into the folder
  removes those that match our naming exactly *and* whose writer process no longer
  exists. A temporary of a live process (another release being written, or this one) is
  never touched; a recycled process id only makes us keep a stale file longer, never
  delete a live one. Nothing else in the folder is looked at.
* **Durable renames** (:func:`replace_durably`): the file is fsync-ed, renamed over the
  target with :func:`os.replace` (atomic on POSIX), then the folder is fsync-ed, so that
  after a power loss the folder holds either the old release or the new one.
* **No silent replacement** (:func:`refuse_existing`): building over an existing release
  spends the budget a second time on the same data and changes the numbers of anyone
  querying the file, so it needs ``replace=True`` (``dpsql release --replace``).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from dpsql.errors import OperationalError, ProgrammingError

_TEMP = re.compile(r"^\.(?P<target>.+)\.dpsql-(?P<pid>[0-9]+)-[0-9a-f]{16}\.tmp(\.wal)?$")


def temporary_path(target: Path) -> Path:
    """A fresh temporary name for ``target``, in its folder, that :func:`remove_stale_
    temporaries` recognises (nothing is created)."""
    return target.parent / f".{target.name}.dpsql-{os.getpid()}-{secrets.token_hex(8)}.tmp"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete our temporaries in ``folder`` whose writing process is gone; return them."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TEMP.match(name)
        if m is None or _alive(int(m.group("pid"))):
            continue
        path = folder / name
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:  # another run cleaned it first
            pass
    return removed


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's) data and metadata to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, target: Path) -> None:
    """fsync ``tmp``, rename it over ``target`` atomically, then fsync the folder so the
    rename itself survives a power loss."""
    fsync_path(tmp)
    os.replace(tmp, target)
    fsync_path(target.parent)


def refuse_existing(target: str | Path, replace: bool) -> None:
    """Refuse to build over an existing release unless ``replace``."""
    p = Path(target)
    if replace or not (p.exists() or p.is_symlink()):
        return
    if p.is_dir():
        raise ProgrammingError(f"{str(p)!r} is a folder; give the release file to write, "
                               "e.g. -o release.duckdb")
    raise ProgrammingError(
        f"{str(p)!r} already exists; replacing a release spends the privacy budget again on "
        "the same data and changes the numbers of anyone querying it: pass --replace "
        "(Python: replace=True) if that is what you want, or write to a new file")


def write_failed(target: Path, err: BaseException) -> OperationalError:
    """A one-line error for a write that failed (disk full, no permission, I/O error),
    naming the folder; the previous release, if any, is untouched."""
    text = str(getattr(err, "strerror", None) or err).strip().splitlines()
    reason = text[0] if text else type(err).__name__
    if "Original error:" in reason:  # DuckDB's checkpoint failure wraps the OS error
        reason = reason.split("Original error:", 1)[1].strip()
    kept = (f"the previous {target.name!r} is untouched" if target.exists()
            else "nothing was written")
    return OperationalError(f"cannot write the release into {str(target.parent)!r}: "
                            f"{reason}; {kept}. Free space, or choose another folder (-o)")
