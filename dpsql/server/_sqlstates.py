"""The SQLSTATE of every error ``dpsql serve`` sends: dpsql's PEP 249 hierarchy, the
server's own errors and DuckDB's, mapped onto PostgreSQL's error classes
(:func:`sqlstate_of`; the wire handler, :mod:`dpsql.server._wire`, puts it in each
ErrorResponse)."""

from __future__ import annotations

import duckdb

from dpsql.errors import (
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    QueryTooComplexError,
    SqlSyntaxError,
    UnsupportedQueryError,
)
from dpsql.server._bounds import StatementTooComplexError, StatementTooLongError
from dpsql.server._commands import (ActiveTransactionError, FailedTransactionError,
                                     NoActiveTransactionError, UnknownSavepointError,
                                     UnknownSettingError)
from dpsql.server._cursors import DeclareOutsideBlockError, DuplicateCursorError
from dpsql.server._division import DivisionByZeroError
from dpsql.server._route import UnknownTableError
from dpsql.server._guard import ReadOnlyError
from dpsql.server._limits import (OperatorSettingError, OutOfMemoryError, QueryCanceledError,
                                  StatementTimeoutError)
from dpsql.server._login import AuthenticationError, TlsRequiredError
from dpsql.server._types import ProtocolError


class TooManyConnectionsError(OperationalError):
    """More clients than ``max_connections``: SQLSTATE 53300, FATAL."""


class UnknownStatementError(ProgrammingError):
    """Bind or Describe of a prepared statement never parsed: SQLSTATE 26000."""


class DuplicateStatementError(ProgrammingError):
    """A Parse naming a prepared statement that already exists: SQLSTATE 42P05."""


class UnknownPortalError(ProgrammingError):
    """Describe or Execute of a portal never bound: SQLSTATE 34000."""


class UnknownDatabaseError(OperationalError):
    """A start-up packet naming a database the server does not serve: SQLSTATE 3D000,
    FATAL."""


# Most specific first: the first class the error is an instance of gives the code.
SQLSTATES: tuple[tuple[type[BaseException], str], ...] = (
    (ReadOnlyError, "25006"),            # read_only_sql_transaction
    (FailedTransactionError, "25P02"),   # in_failed_sql_transaction
    (ActiveTransactionError, "25001"),   # active_sql_transaction
    (NoActiveTransactionError, "25P01"),  # no_active_sql_transaction
    (UnknownSavepointError, "3B001"),    # invalid_savepoint_specification
    (UnknownSettingError, "42704"),      # undefined_object
    (AuthenticationError, "28P01"),      # invalid_password
    (TlsRequiredError, "28000"),         # invalid_authorization_specification
    (TooManyConnectionsError, "53300"),  # too_many_connections
    (UnknownDatabaseError, "3D000"),     # invalid_catalog_name
    (UnknownStatementError, "26000"),    # invalid_sql_statement_name
    (UnknownPortalError, "34000"),       # invalid_cursor_name
    (DuplicateStatementError, "42P05"),  # duplicate_prepared_statement
    (DuplicateCursorError, "42P03"),     # duplicate_cursor
    (DeclareOutsideBlockError, "25P01"),  # no_active_sql_transaction
    (StatementTimeoutError, "57014"),    # query_canceled
    (QueryCanceledError, "57014"),
    (OutOfMemoryError, "53200"),         # out_of_memory
    (StatementTooLongError, "54000"),    # program_limit_exceeded
    (StatementTooComplexError, "54001"),  # statement_too_complex
    (OperatorSettingError, "42501"),     # insufficient_privilege
    (ProtocolError, "08P01"),            # protocol_violation
    (DivisionByZeroError, "22012"),      # division_by_zero
    (UnknownTableError, "42P01"),        # undefined_table
    (QueryTooComplexError, "54001"),     # statement_too_complex
    (UnsupportedQueryError, "0A000"),    # feature_not_supported
    (SqlSyntaxError, "42601"),           # syntax_error
    (NotSupportedError, "0A000"),
    (DataError, "22000"),                # data_exception
    (IntegrityError, "23000"),           # integrity_constraint_violation
    (InternalError, "XX000"),            # internal_error
    (ProgrammingError, "42000"),         # syntax_error_or_access_rule_violation
    (OperationalError, "58000"),         # system_error
    (InterfaceError, "55000"),           # object_not_in_prerequisite_state
    (Error, "58000"),
    (duckdb.ParserException, "42601"),
    (duckdb.CatalogException, "42P01"),  # undefined_table (or other catalog object)
    (duckdb.BinderException, "42703"),   # undefined_column
    (duckdb.ConversionException, "22P02"),  # invalid_text_representation
    (duckdb.PermissionException, "42501"),  # insufficient_privilege
    (duckdb.InterruptException, "57014"),   # query_canceled
    (duckdb.OutOfMemoryException, "53200"),  # out_of_memory
    (duckdb.NotImplementedException, "0A000"),
    (duckdb.DataError, "22000"),
    (duckdb.ProgrammingError, "42000"),
    (duckdb.Error, "58000"),
)


_TRANSLATED = (DataError, IntegrityError, NotSupportedError, ProgrammingError,
               OperationalError)
"""The classes :func:`dpsql._dbapi_types._translate` turns DuckDB's errors into: such an
error raised from a DuckDB error takes that error's more precise code (a mistyped table is
42P01, as in PostgreSQL, not 42000)."""


QUERY_HINT = ("dpsql answers COUNT(*) aggregates over its logical tables; see the message "
              "for the supported form")
"""The hint of a 0A000 refusal of a query's form (the planner's: an aggregate or a
construct a release cannot answer)."""


def hint_of(err: BaseException, code: str) -> str | None:
    """The ErrorResponse's hint (field ``H``) for ``err``: its own ``hint`` when it has
    one ("" for none: a refusal of a statement, a setting or an encoding, whose message
    says what to do), else :data:`QUERY_HINT` for 0A000. Every 0A000 carried the COUNT(*)
    hint, EXPLAIN, SQL PREPARE and SET client_encoding included."""
    hint = getattr(err, "hint", None)
    if hint is not None:
        return hint or None
    return QUERY_HINT if code == "0A000" else None


def sqlstate_of(err: BaseException) -> str:
    """The PostgreSQL SQLSTATE for ``err`` (XX000 for anything unexpected)."""
    if isinstance(err, duckdb.InvalidInputException) and \
            "Division by zero" in str(err):  # an integer % or // by zero: 42000 before
        return "22012"
    cause = err.__cause__
    if type(err) in _TRANSLATED and isinstance(cause, duckdb.Error):
        code = sqlstate_of(cause)
        if code != "XX000":
            return code
    for cls, code in SQLSTATES:
        if isinstance(err, cls):
            return code
    return "XX000"


__all__ = ["SQLSTATES", "DuplicateStatementError", "TooManyConnectionsError", "UnknownPortalError",
           "UnknownStatementError", "hint_of", "sqlstate_of"]
