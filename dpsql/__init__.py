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
    "connect",
]

# Query-side entry points (dpsql.connect: PEP 249; dpsql.sql / dpsql.attach: dpsql.duck),
# imported on first use so that `import dpsql` stays light.
_LAZY = {"connect": ("dpsql.dbapi", "connect"), "sql": ("dpsql.duck", "sql"),
         "attach": ("dpsql.duck", "attach")}


def __getattr__(name: str):  # PEP 562
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpsql' has no attribute {name!r}")
