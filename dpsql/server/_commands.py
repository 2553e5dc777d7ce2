"""Session commands of ``dpsql serve`` and the result type every statement returns.

Session commands (``BEGIN``/``COMMIT``/``ROLLBACK``, ``SET``/``RESET``/``SHOW``,
``DISCARD``, ``DEALLOCATE``, ``SAVEPOINT``...) are answered from the session's settings
dict (``DEALLOCATE`` and ``DISCARD ALL`` drop the connection's prepared statements,
:class:`PreparedStatements`); nothing runs in DuckDB (:mod:`dpsql.server._session` routes them here). ``SET`` and
``RESET`` of DuckDB's resource settings are refused (42501), and ``SET
statement_timeout`` may only lower the server's limit (:mod:`dpsql.server._limits`).

The session imports this module, never the reverse: a command sees the session through
:class:`SessionState`, the few attributes it reads and sets.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Protocol, Sequence

from buenavista.core import BVType, QueryResult

from dpsql.errors import DataError, SqlSyntaxError, UnsupportedQueryError
from dpsql.server._bounds import check_setting
from dpsql.server._guard import Refusal
from dpsql.server._pg_parameters import PG_PARAMETERS
from dpsql.server._limits import (OPERATOR_SETTINGS, operator_setting, parse_pg_timeout,
                                  pg_timeout, rows_bytes)


class FailedTransactionError(UnsupportedQueryError):
    """A statement inside a transaction block that already failed: SQLSTATE 25P02."""


class ActiveTransactionError(UnsupportedQueryError):
    """A command that cannot run inside a transaction block: SQLSTATE 25001."""


class NoActiveTransactionError(UnsupportedQueryError):
    """``SAVEPOINT``, ``RELEASE`` or ``ROLLBACK TO`` outside a transaction block:
    SQLSTATE 25P01."""


class UnknownSavepointError(UnsupportedQueryError):
    """``RELEASE`` or ``ROLLBACK TO`` a savepoint the block does not have: SQLSTATE
    3B001."""


class UnknownSettingError(UnsupportedQueryError):
    """``SHOW``, ``SET`` or ``RESET`` of a setting the server does not know: SQLSTATE
    42704."""


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------

class Result(QueryResult):
    """A materialised result: column names, DuckDB type names, rows, command tag.

    Rows are a single iterator, so a portal that the client reads in chunks (Execute with a
    row limit) resumes where it stopped. Column types are DuckDB type names; the wire layer
    maps them to PostgreSQL type OIDs and encoders."""

    def __init__(self, names: Sequence[str] | None = None, types: Sequence[str] = (),
                 rows: Sequence[Sequence[Any]] = (), status: str = "") -> None:
        super().__init__()
        self.names = list(names) if names is not None else None
        self.types = [str(t) for t in types]
        self._rows: Iterator[Sequence[Any]] = iter(rows)
        self.row_count = len(rows)
        # bytes of the rows as Python objects (a portal or cursor that keeps the result
        # counts them: dpsql.server._context)
        self.size = rows_bytes(rows) if rows else 0
        self._status = status
        self.warnings: list[tuple[str, str]] = []  # (SQLSTATE, message): WARNING notices

    def has_results(self) -> bool:
        return self.names is not None

    def column_count(self) -> int:
        return len(self.names or ())

    def column(self, index: int) -> tuple[str, BVType]:
        return self.names[index], BVType.UNKNOWN  # type: ignore[index]

    def rows(self) -> Iterator[Sequence[Any]]:
        return self._rows

    def status(self) -> str:
        return self._status

    def tag(self, count: int) -> str:
        """The CommandComplete tag after ``count`` rows: ``SELECT 3``, ``FETCH 3``, and
        ``SHOW`` without a count, as PostgreSQL tags them (SHOW was ``SELECT 1``)."""
        status = self._status or "SELECT"
        return status if status == "SHOW" else f"{status} {count}"


def first_word(sql: str) -> str:
    m = re.match(r"[A-Za-z_]+", sql)
    return m.group(0).upper() if m else ""


# --------------------------------------------------------------------------------------
# Session commands
# --------------------------------------------------------------------------------------

class PreparedStatements(Protocol):
    """The connection's prepared statements and portals (:class:`dpsql.server._context.
    Context`), which ``DEALLOCATE`` and ``DISCARD ALL`` drop."""

    def deallocate(self, name: str | None) -> None: ...

    def discard_all(self) -> None: ...

    def end_transaction(self, committed: bool) -> None: ...

    def cursors(self) -> list[tuple[str, Any]]: ...

    def statements(self) -> list[tuple[str, str, Any, Any, Any]]: ...

    def close_portal(self, name: str) -> None: ...


class SessionState(Protocol):
    """What a session command reads and sets (:class:`dpsql.server._session.Session`)."""

    prepared: PreparedStatements | None  # set by the wire handler once authenticated

    in_txn: bool  # inside a BEGIN ... COMMIT block
    savepoints: list[tuple[str, Any]]  # the block's savepoints (name, settings), oldest first
    failed: bool  # ... and a statement in it failed: the rest is refused until its end
    settings: dict[str, str]  # what SHOW answers
    defaults: dict[str, str]  # what RESET restores (the start-up values, else the server's)
    client_timeout: float  # SET statement_timeout, in seconds (0: none)
    # in a block: the settings (and client_timeout) ROLLBACK and COMMIT restore
    txn_settings: tuple[tuple[dict[str, str], float], tuple[dict[str, str], float]] | None

    @property
    def statement_timeout(self) -> float: ...

def _begin(s: SessionState, text: str) -> Result:
    result = Result(status="BEGIN" if first_word(text) == "BEGIN" else "START TRANSACTION")
    if s.in_txn:  # PostgreSQL's warning; the block goes on
        result.warnings.append(("25001", "there is already a transaction in progress"))
    else:
        s.txn_settings = ((dict(s.settings), s.client_timeout),
                          (dict(s.settings), s.client_timeout))
    s.in_txn = True
    return result


def _outside(result: Result, s: SessionState) -> Result:
    """COMMIT or ROLLBACK outside a block: PostgreSQL's warning (and nothing else)."""
    if not s.in_txn:
        result.warnings.append(("25P01", "there is no transaction in progress"))
    return result


def _end(s: SessionState, committed: bool) -> None:
    """The end of a transaction block: its cursors end with it (:meth:`dpsql.server.
    _context.Context.end_transaction`: a ``WITH HOLD`` cursor survives a commit only)."""
    if s.in_txn and s.prepared is not None:
        s.prepared.end_transaction(committed)
    if s.txn_settings is not None:  # the block's SETs: kept by COMMIT, undone by ROLLBACK
        settings, s.client_timeout = s.txn_settings[1 if committed else 0]
        s.settings.clear()
        s.settings.update(settings)
        s.txn_settings = None
    s.in_txn = s.failed = False
    s.savepoints.clear()


def _commit(s: SessionState, text: str) -> Result:
    failed = s.failed
    result = _outside(Result(status="ROLLBACK" if failed else "COMMIT"), s)
    _end(s, committed=not failed)
    return result


def _rollback(s: SessionState, text: str) -> Result:
    m = re.match(r"ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\s+(?:SAVEPOINT\s+)?(.*)$",
                 text, re.I | re.S)
    if m:
        kept = _savepoint_index(s, m.group(1), "ROLLBACK TO SAVEPOINT") + 1
        settings, timeout, committed, opened = s.savepoints[kept - 1][1]
        for name, cursor in s.prepared.cursors() if s.prepared is not None else ():
            if not any(cursor is c for c in opened):  # declared since: closed
                s.prepared.close_portal(name)
        s.settings.clear()
        s.settings.update(settings)
        s.client_timeout = timeout
        if s.txn_settings is not None:
            s.txn_settings = (s.txn_settings[0], (dict(committed[0]), committed[1]))
        del s.savepoints[kept:]  # the savepoint stays; those after it go
        s.failed = False  # back to a savepoint: the block continues
        return Result(status="ROLLBACK")
    result = _outside(Result(status="ROLLBACK"), s)
    _end(s, committed=False)
    return result


_SAVEPOINT_NAME = re.compile(r'(?:"(?P<quoted>(?:[^"]|"")+)"|(?P<name>[A-Za-z_][\w$]*))'
                             r"\s*;?\s*$", re.S)


def _savepoint_name(text: str, what: str) -> str:
    m = _SAVEPOINT_NAME.match(text.strip())
    if m is None:
        raise SqlSyntaxError(f"syntax error in {what} {text[:60]!r}: write {what} name")
    if m.group("quoted") is not None:
        return m.group("quoted").replace('""', '"')
    return m.group("name").lower()


def _savepoint_index(s: SessionState, text: str, what: str) -> int:
    """The position of the savepoint ``text`` names (its latest, as PostgreSQL); 25P01
    outside a block, 3B001 when the block has none of that name (both were accepted,
    and a client that lost track of its savepoints was never told)."""
    name = _savepoint_name(text, what)
    if not s.in_txn:
        raise NoActiveTransactionError(f"{what} can only be used in transaction blocks: "
                                       "send BEGIN first")
    for i in range(len(s.savepoints) - 1, -1, -1):
        if s.savepoints[i][0] == name:
            return i
    raise UnknownSavepointError(f'savepoint "{name}" does not exist')


def _savepoint(s: SessionState, text: str) -> Result:
    """``SAVEPOINT name``: in a transaction block only (25P01), as in PostgreSQL; it
    remembers the settings, which ``ROLLBACK TO`` restores, and the open cursors (those
    declared after it are closed by ``ROLLBACK TO``)."""
    name = _savepoint_name(re.sub(r"^SAVEPOINT\s+", "", text, flags=re.I), "SAVEPOINT")
    if not s.in_txn:
        raise NoActiveTransactionError("SAVEPOINT can only be used in transaction blocks: "
                                       "send BEGIN first")
    kept = s.txn_settings[1] if s.txn_settings is not None else ({}, 0.0)
    opened = [c for _, c in s.prepared.cursors()] if s.prepared is not None else []
    s.savepoints.append((name, (dict(s.settings), s.client_timeout,
                                (dict(kept[0]), kept[1]), opened)))
    return Result(status="SAVEPOINT")


def _release(s: SessionState, text: str) -> Result:
    """``RELEASE [SAVEPOINT] name``: that savepoint and those after it go."""
    rest = re.sub(r"^RELEASE\s+(?:SAVEPOINT\s+)?", "", text, flags=re.I)
    del s.savepoints[_savepoint_index(s, rest, "RELEASE SAVEPOINT"):]
    return Result(status="RELEASE")


_SET = re.compile(r"SET\s+(?:SESSION\s+|LOCAL\s+|GLOBAL\s+)?(?P<name>[\w.]+)\s*"
                  r"(?:=|\bTO\b)\s*(?P<value>.*)$", re.I | re.S)
_SET_NAME = re.compile(r"(?:SET|RESET)\s+(?:SESSION\s+|LOCAL\s+|GLOBAL\s+)?\"?(?P<name>[\w.]+)",
                       re.I)


def _refuse_operator_setting(text: str) -> None:
    m = _SET_NAME.match(text)
    if m and m.group("name").lower() in OPERATOR_SETTINGS:
        raise operator_setting(m.group("name").lower(), first_word(text))


def _set_timeout(s: SessionState, value: str) -> None:
    seconds = parse_pg_timeout(value)
    if seconds is None:
        raise DataError(f"invalid value for parameter \"statement_timeout\": {value!r}; give "
                        "milliseconds (5000) or a unit ('5s', '1min'); 0 keeps the server's "
                        "limit")
    s.client_timeout = seconds
    s.settings["statement_timeout"] = pg_timeout(s.statement_timeout)


def _client_encoding(value: str) -> str:
    """``UTF8`` for any spelling of it (``utf-8``, ``unicode``, ``DEFAULT``); any other
    encoding is refused: the server sends UTF-8 only, and a client told ``SET`` would
    decode UTF-8 bytes as, say, WIN1252 (a region 'Émilie' shown as 'Ã‰milie')."""
    plain = value.strip().strip("'").replace("-", "").replace("_", "").upper()
    if plain in ("UTF8", "UNICODE", "DEFAULT"):
        return "UTF8"
    raise Refusal(
        f"client_encoding {value.strip()!r} is not supported: dpsql serve sends UTF8 only; "
        "read its answers as UTF8 (psql: \\encoding UTF8)")


def check_known(s: SessionState, text: str) -> None:
    """``SET``/``RESET`` of a parameter neither this server nor PostgreSQL knows, without a
    dot: 42704, as in PostgreSQL (``SET foo = 1`` was accepted, so a misspelt
    ``SET statment_timeout`` went unnoticed). A dotted name (``myapp.user_id``) is a
    custom setting, accepted as PostgreSQL does; so is a PostgreSQL parameter this
    server has no use for (:data:`dpsql.server._pg_parameters.PG_PARAMETERS`)."""
    m = _SET.match(text) if first_word(text) == "SET" else _SET_NAME.match(text)
    name = m.group("name").lower() if m else "all"
    if name == "all" or "." in name or name in s.settings or name in s.defaults or \
            name in PG_PARAMETERS or name in OPERATOR_SETTINGS:  # the last: 42501
        return
    raise UnknownSettingError(f'unrecognized configuration parameter "{name}": SHOW ALL '
                              "lists the settings this server knows; a setting of your "
                              f"own needs a dotted name (myapp.{name})")


def _scoped(change: Any) -> Any:
    """``SET``/``RESET`` as PostgreSQL scopes them: inside a block, ROLLBACK undoes them,
    and ``SET LOCAL`` lasts until the block ends, COMMIT included; outside a block ``SET
    LOCAL`` has no effect (PostgreSQL warns). Every SET was for the session: after
    ``BEGIN; SET application_name = 'x'; ROLLBACK`` the session kept 'x', and a ``SET
    LOCAL statement_timeout`` outlived its transaction."""
    def run(s: SessionState, text: str) -> Result:
        check_known(s, text)
        local = re.match(r"SET\s+LOCAL\b", text, re.I) is not None
        if local and not s.in_txn:  # no effect, and PostgreSQL's warning
            result = Result(status="SET")
            result.warnings.append(("25P01", "SET LOCAL can only be used in transaction "
                                             "blocks"))
            return result
        before, timeout = dict(s.settings), s.client_timeout
        result = change(s, text)
        if s.txn_settings is not None and not local:  # COMMIT keeps this change
            kept, kept_timeout = s.txn_settings[1]
            for name in set(before) | set(s.settings):
                if before.get(name) != s.settings.get(name):
                    if name in s.settings:
                        kept[name] = s.settings[name]
                    else:
                        kept.pop(name, None)
            if s.client_timeout != timeout:
                kept_timeout = s.client_timeout
            s.txn_settings = (s.txn_settings[0], (kept, kept_timeout))
        return result
    run.__doc__ = change.__doc__
    return run


def _set(s: SessionState, text: str) -> Result:
    if re.match(r"SET\s+(?:SESSION\s+|LOCAL\s+|GLOBAL\s+)?VARIABLE\b", text, re.I):
        raise Refusal("SET VARIABLE is not supported: dpsql serve keeps no "
                                    "DuckDB variables; write the value into the query")
    _refuse_operator_setting(text)
    m = _SET.match(text)
    if m:
        value = m.group("value").strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        name = m.group("name").lower()
        if name == "client_encoding":
            s.settings[name] = _client_encoding(value)
        elif name == "statement_timeout":
            _set_timeout(s, "0" if value.upper() == "DEFAULT" else value)
        else:
            check_setting(s.settings, name, value)  # 54000 past its bounds
            s.settings[name] = value
    elif re.match(r"SET\s+NAMES\s+(.+)$", text, re.I | re.S):  # client_encoding's alias
        value = re.match(r"SET\s+NAMES\s+(.+)$", text, re.I | re.S).group(1)
        s.settings["client_encoding"] = _client_encoding(value.strip())
    elif re.match(r"SET\s+(?:SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.+)$", text, re.I):
        value = re.match(r"SET\s+(?:SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.+)$", text,
                         re.I).group(1).strip().strip("'")
        check_setting(s.settings, "timezone", value)
        s.settings["timezone"] = value
    return Result(status="SET")  # SET TRANSACTION ..., SET SESSION CHARACTERISTICS: no-op


def _reset(s: SessionState, text: str) -> Result:
    """``RESET name`` / ``RESET ALL``: back to the session default (what the client sent
    at start-up, else the server's), as in PostgreSQL; a name without one is forgotten.
    (It only reset statement_timeout: ``SHOW`` kept showing the ``SET`` value.)"""
    _refuse_operator_setting(text)
    m = _SET_NAME.match(text)
    name = m.group("name").lower() if m else ""
    if name == "all":
        s.settings.clear()
        s.settings.update(s.defaults)
    elif name and name != "statement_timeout":
        if name in s.defaults:
            s.settings[name] = s.defaults[name]
        else:
            s.settings.pop(name, None)
    if name in ("statement_timeout", "all"):
        _set_timeout(s, "0")
    return Result(status="RESET")


_DESCRIPTIONS = {"transaction_read_only": "dpsql serve is read-only"}


def _show(s: SessionState, text: str) -> Result:
    name = re.sub(r"^SHOW\s+", "", text, flags=re.I).strip().strip('"').lower()
    name = {"transaction isolation level": "transaction_isolation",
            "time zone": "timezone"}.get(re.sub(r"\s+", " ", name), name)
    if name == "all":
        rows = sorted((k, v, _DESCRIPTIONS.get(k, "")) for k, v in s.settings.items())
        return Result(["name", "setting", "description"], ["VARCHAR"] * 3, rows,
                      status="SHOW")
    if name not in s.settings:
        raise UnknownSettingError(f'unrecognized configuration parameter "{name}"; SHOW ALL '
                                  "lists the settings this server knows")
    return Result([name], ["VARCHAR"], [(s.settings[name],)], status="SHOW")


def _noop(tag: str):
    def run(s: SessionState, text: str) -> Result:
        return Result(status=tag)
    return run


_DEALLOCATE = re.compile(r'DEALLOCATE\s+(?:PREPARE\s+)?(?:(?P<all>ALL)|"(?P<quoted>(?:[^"]|"")+)"'
                         r'|(?P<name>[A-Za-z_][\w$]*))\s*;?\s*$', re.I | re.S)


def _deallocate(s: SessionState, text: str) -> Result:
    """``DEALLOCATE [PREPARE] {name | ALL}``: drop the prepared statement (26000 when
    there is none) or all named ones, as the protocol's Close does; a name folds to lower
    case unless quoted (PostgreSQL's identifiers)."""
    m = _DEALLOCATE.match(text)
    if m is None:
        raise SqlSyntaxError(f"syntax error in {text[:80]!r}: write DEALLOCATE name, "
                             "DEALLOCATE PREPARE name or DEALLOCATE ALL")
    if m.group("all"):
        name = None
    elif m.group("quoted") is not None:
        name = m.group("quoted").replace('""', '"')
    else:
        name = m.group("name").lower()
    if s.prepared is not None:
        s.prepared.deallocate(name)
    return Result(status="DEALLOCATE" if name is not None else "DEALLOCATE ALL")


def _prepare_or_execute(s: SessionState, text: str) -> Result:
    """SQL ``PREPARE``/``EXECUTE``: refused as unsupported (they were refused as writes,
    25006, which they are not), saying what works: the protocol's prepared statements."""
    raise Refusal(
        f"SQL PREPARE and EXECUTE are not supported by dpsql serve ({text[:60]!r}): use "
        "your driver's prepared statements (the protocol's Parse and Bind: psycopg's "
        "prepare=True, JDBC's PreparedStatement), or send the SELECT itself")


def _discard(s: SessionState, text: str) -> Result:
    """``DISCARD ALL`` drops the prepared statements and portals and resets every setting
    (what a pooler's reset relies on), outside a transaction block only (25001);
    ``DISCARD PLANS``/``SEQUENCES``/``TEMP`` have nothing to drop here."""
    what = text.split(None, 1)[-1].upper()
    if what == "ALL":
        if s.in_txn:
            raise ActiveTransactionError("DISCARD ALL cannot run inside a transaction block: "
                                         "COMMIT or ROLLBACK first")
        if s.prepared is not None:
            s.prepared.discard_all()
        _reset(s, "RESET ALL")
    return Result(status="DISCARD " + what)


_COMMANDS = {
    "BEGIN": _begin, "START": _begin, "COMMIT": _commit, "END": _commit,
    "ROLLBACK": _rollback, "ABORT": _rollback, "SET": _scoped(_set), "RESET": _scoped(_reset), "SHOW": _show,
    "DISCARD": _discard, "DEALLOCATE": _deallocate,
    "PREPARE": _prepare_or_execute, "EXECUTE": _prepare_or_execute,
    "SAVEPOINT": _savepoint, "RELEASE": _release,
    "UNLISTEN": _noop("UNLISTEN"),
}

