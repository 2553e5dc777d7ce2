"""dpsql: differentially private releases of tables, queried with plain SQL.

A curator builds a *release*: a DuckDB file holding trees of noisy counts computed
once by a privacy mechanism. Analysts query it with ordinary SQL. Every answer is
post-processing of the release, so it is consistent and costs no further budget.
"""

__version__ = "0.1.0"

from dpsql.errors import (  # noqa: E402  (re-exported public names)
    BudgetExceededError,
    DataError,
    DatabaseError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    InvalidPrivacyParameterError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    SpecError,
    SqlSyntaxError,
    UnsupportedQueryError,
    Warning,
)

__all__ = [
    "__version__",
    "BudgetExceededError",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "InvalidPrivacyParameterError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "SpecError",
    "SqlSyntaxError",
    "UnsupportedQueryError",
    "Warning",
]
