"""The dpsql exception hierarchy.

One root, :class:`Error`, with the PEP 249 branches under it, and the DP-specific
leaves under the branch a DB-API user would expect. Messages finish the user's
sentence: what went wrong, the offending value, and how to fix it.
"""

from __future__ import annotations


class Warning(Exception):  # noqa: A001  (PEP 249 requires this name)
    """PEP 249 ``Warning``: important warnings such as a seeded (not private) release."""


class Error(Exception):
    """Root of every error dpsql raises (PEP 249 ``Error``)."""


class InterfaceError(Error):
    """Misuse of the DB-API interface itself, e.g. a closed cursor."""


class DatabaseError(Error):
    """Errors related to the release database."""


class DataError(DatabaseError):
    """Problems with the data: values out of a public domain, NULLs, an empty table."""


class OperationalError(DatabaseError):
    """Errors in the operation of the database, not the programmer's fault."""


class IntegrityError(DatabaseError):
    """The release file is inconsistent or corrupted."""


class InternalError(DatabaseError):
    """An internal invariant broke. This is a bug in dpsql: please report it."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} (this is a bug in dpsql, please report it)")


class ProgrammingError(DatabaseError):
    """Errors in the SQL or in the arguments given to dpsql."""


class NotSupportedError(DatabaseError):
    """A method or SQL construct that dpsql does not support."""


class SqlSyntaxError(ProgrammingError):
    """SQL that does not parse. Carries ``line``, ``col`` and ``highlight``."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None,
                 highlight: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.col = col
        self.highlight = highlight


class UnsupportedQueryError(NotSupportedError):
    """SQL that is valid but that a DP release cannot answer; the message names the
    construct and the supported form to write instead."""


class QueryTooComplexError(UnsupportedQueryError):
    """SQL nested too deeply (parentheses, CASE, long AND/OR chains) for the planner to walk
    within Python's recursion limit; the message names the limit and how to flatten the
    query. The server answers it with SQLSTATE 54001 (statement_too_complex)."""


class BudgetExceededError(OperationalError):
    """A request for more privacy budget than remains."""

    def __init__(self, requested: object, remaining: object) -> None:
        super().__init__(
            f"requested {requested} but only {remaining} remains; lower the request or "
            "raise the total budget")
        self.requested = requested
        self.remaining = remaining


class InvalidPrivacyParameterError(ProgrammingError, ValueError):
    """A privacy parameter (epsilon, delta, rho, a weight, a variance) is out of range."""


class SpecError(ProgrammingError, ValueError):
    """A release spec that is malformed or inconsistent. The message names the key path."""
