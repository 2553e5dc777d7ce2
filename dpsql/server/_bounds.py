"""Bounds on one statement of ``dpsql serve``, checked before anything parses it.

Planning is pure Python (sqlglot's compiled parser holds the GIL for the whole parse), so
a large statement used to stall every other client of the server: a 0.9 MB ``IN``
list of 100,000 values took 4-7 s to plan, outside the statement timeout. Three limits,
each with its own SQLSTATE and a message that says what to write instead, are checked on
the text first, by scans that never build a syntax tree:

* **size**: at most ``max_statement_size`` bytes (default :data:`DEFAULT_MAX_STATEMENT`,
  1 MiB; ``dpsql serve --max-statement-size``): 54000 (program_limit_exceeded). A
  protocol message longer than twice that is refused before it is read (FATAL 54000,
  then the rest of it is discarded and the connection closed: :class:`MessageTooLongError`);
* **nesting depth**: at most :data:`MAX_DEPTH` levels of parentheses (outside strings and
  comments): 54001 (statement_too_complex). Deeper SQL would exhaust the planner's
  recursion (3,000 nested parentheses crashed it);
* **IN lists**: at most :data:`MAX_IN_LIST` items in one ``IN (...)`` list: 54001. A
  longer list is a table: filter by a coarser attribute, or group and join.

Statements past these bounds can still be slow to plan (1 MiB of ``UNION ALL``), so the
server plans every statement longer than :data:`INLINE_BYTES` in a planning process
(:mod:`dpsql.server._planning`), where the statement timeout can stop it.
"""

from __future__ import annotations

import re

from dpsql.errors import OperationalError, ProgrammingError

DEFAULT_MAX_STATEMENT = 1 << 20  # bytes
MAX_DEPTH = 128  # parentheses
MAX_IN_LIST = 10_000  # items of one IN list
INLINE_BYTES = 1024
"""Statements up to this size are routed and planned in the session's thread: their
worst case measured 2.7 ms (a 1 KB numeric IN list on a binned attribute); every longer
one goes to a planning process, so no client holds the server's GIL for long."""


class StatementTooLongError(OperationalError):
    """A statement or protocol message over the size limit: SQLSTATE 54000."""


class MessageTooLongError(StatementTooLongError):
    """A protocol message over :func:`max_message`: FATAL 54000, refused before it is
    read; ``unread`` is the length its header claims (what is left to discard)."""

    def __init__(self, message: str, unread: int) -> None:
        super().__init__(message)
        self.unread = unread


class StatementTooComplexError(OperationalError):
    """Parentheses nested too deep, or an IN list too long: SQLSTATE 54001."""


def check_max_statement_size(value: object) -> int:
    """``value`` as a number of bytes >= 1 KiB; a clear error for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise ProgrammingError(f"max_statement_size {value!r} must be a number of bytes of at "
                               f"least 1024 (the default is {DEFAULT_MAX_STATEMENT})")
    return value


def max_message(max_statement_size: int) -> int:
    """The largest protocol message read: twice the statement limit plus framing, so
    that a statement somewhat over the limit gets 54000 and the session goes on."""
    return 2 * max_statement_size + (64 << 10)


# strings, quoted identifiers, comments and dollar-quoted strings, skipped by the scan;
# then the tokens it counts
_SCAN = re.compile(r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?|--[^\n]*|/\*.*?(?:\*/|\Z)"
                   r"|\$(?:[A-Za-z_]\w*)?\$.*?(?:\$(?:[A-Za-z_]\w*)?\$|\Z)"
                   r"|\bIN\s*\(|[(),]", re.S | re.I)


def check_statement(text: str, max_statement_size: int, scan: bool = True) -> None:
    """Refuse ``text`` when it is over a bound (module docstring). Cheap: a length, two
    ``str.count`` calls, and a token scan only when the counts allow a violation
    (``scan=False``: the size only; the planning process scans a long statement)."""
    size = len(text.encode("utf-8"))
    if size > max_statement_size:
        raise StatementTooLongError(too_long(size, max_statement_size))
    if not scan or (text.count("(") <= MAX_DEPTH and text.count(",") < MAX_IN_LIST):
        return
    depth = 0
    lists: list[int | None] = []  # per open parenthesis: items so far of an IN list, or None
    for m in _SCAN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == ",":
            if lists and lists[-1] is not None:
                lists[-1] += 1
                if lists[-1] >= MAX_IN_LIST:
                    raise StatementTooComplexError(
                        f"statement too complex: an IN list has more than {MAX_IN_LIST:,} "
                        "items; filter on a coarser attribute (region rather than city), or "
                        "group by the attribute and join the result with your list")
        elif c == "(" or c in "Ii":  # a parenthesis, or the one opening an IN list
            depth += 1
            if depth > MAX_DEPTH:
                raise StatementTooComplexError(
                    f"statement too complex: parentheses nested more than {MAX_DEPTH} deep; "
                    "flatten the query (a CTE per level, AND instead of nested conditions)")
            lists.append(None if c == "(" else 0)
        elif c == ")":
            depth = max(depth - 1, 0)
            if lists:
                lists.pop()


MAX_HELD = 1_000
"""Prepared statements, portals and settings one session keeps (each kind)."""
MAX_HELD_BYTES = 64 << 20
"""Bytes of prepared statements' text and portals' parameters one session keeps."""
MAX_SETTING_BYTES = 8 << 10
"""Bytes of one ``SET`` value (PostgreSQL's own names are shorter than 100)."""


def _size(value: object) -> int:
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return 8 + sum(_size(v) for v in value)
    return 8


class Held:
    """What a session keeps between statements, bounded.

    The statement size limit bounds one message; nothing bounded how many a session
    kept: every named prepared statement (Parse), named portal (Bind, with its
    parameters) and ``SET`` of a new name stayed in the server's Python memory, which
    DuckDB's ``memory_limit`` does not cover, until the client left. One client could so
    fill the machine (1,000 Parses of 1 MiB: 1 GB). Now a session keeps at most
    :data:`MAX_HELD` named ones of each kind (the unnamed statement and portal, which
    every extended-protocol query replaces, always have their place),
    :data:`MAX_HELD_BYTES` of statements and parameters
    together, and settings of at most :data:`MAX_SETTING_BYTES` each; past that it gets
    54000 (program_limit_exceeded), with what to close, and the session goes on.
    PostgreSQL's own clients keep far fewer (pgjdbc caches 256 statements, psycopg 100)."""

    def __init__(self) -> None:
        self._sizes: dict[tuple[str, str], int] = {}
        self._counts: dict[str, int] = {}
        self.total = 0

    def hold(self, kind: str, name: str, value: object) -> None:
        """Account for ``value`` kept as ``kind`` (``prepared statement``, ``portal``)
        ``name``, replacing what was kept under that name; refuse it past a bound."""
        size, old = _size(value), self._sizes.get((kind, name))
        count = self._counts.get(kind, 0) + (old is None and name != "")  # unnamed: 1
        total = self.total - (old or 0) + size
        if count > MAX_HELD:
            raise StatementTooLongError(
                f"too many {kind}s: this session keeps at most {MAX_HELD:,}; close the ones "
                "it no longer uses (the protocol's Close: the driver's close()) or reconnect")
        if total > MAX_HELD_BYTES:
            raise StatementTooLongError(
                f"this session would keep {total:,} bytes of prepared statements and "
                f"parameters; the limit is {MAX_HELD_BYTES:,}: close the ones it no longer "
                "uses (the protocol's Close: the driver's close()) or reconnect")
        self._sizes[(kind, name)], self._counts[kind], self.total = size, count, total

    def drop(self, kind: str, name: str) -> None:
        old = self._sizes.pop((kind, name), None)
        if old is not None:
            self._counts[kind] -= name != ""
            self.total -= old


def check_setting(settings: dict, name: str, value: str) -> None:
    """Refuse a ``SET`` past :data:`MAX_HELD` names or :data:`MAX_SETTING_BYTES` (see
    :class:`Held`)."""
    if len(value) > MAX_SETTING_BYTES:
        raise StatementTooLongError(
            f"SET {name}: a value of {len(value):,} bytes; a setting holds at most "
            f"{MAX_SETTING_BYTES:,}")
    if name not in settings and len(settings) >= MAX_HELD:
        raise StatementTooLongError(
            f"SET {name}: this session keeps at most {MAX_HELD:,} settings; RESET or reuse "
            "the ones it has")


def too_long(size: int, limit: int) -> str:
    return (f"statement too long: {size:,} bytes, the limit is {limit:,} "
            "(dpsql serve --max-statement-size); a statement this long is a table of "
            "values: filter on a coarser attribute, or group and join the result instead")


__all__ = ["DEFAULT_MAX_STATEMENT", "INLINE_BYTES", "MAX_DEPTH", "MAX_HELD", "MAX_HELD_BYTES",
           "MAX_IN_LIST", "MAX_SETTING_BYTES", "Held", "MessageTooLongError", "check_setting",
           "StatementTooComplexError", "StatementTooLongError", "check_max_statement_size",
           "check_statement", "max_message", "too_long"]
