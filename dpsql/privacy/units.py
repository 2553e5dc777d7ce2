"""The neighbouring relation and the privacy unit, stated explicitly.

* ``Neighbouring.ADD_REMOVE``: neighbours differ by adding or removing one unit's rows;
  the total is private.
* ``Neighbouring.SUBSTITUTE``: neighbours differ by changing one unit's rows; the total n
  is public (bounded DP).

A privacy unit is one row, or every row that shares a unit column, bounded to
``max_rows`` rows (the rest are dropped before counting).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from dpsql.errors import InvalidPrivacyParameterError


class Neighbouring(str, enum.Enum):
    ADD_REMOVE = "add_remove"
    SUBSTITUTE = "substitute"

    @classmethod
    def parse(cls, value: "str | Neighbouring") -> "Neighbouring":
        if isinstance(value, Neighbouring):
            return value
        try:
            return cls(str(value))
        except ValueError as err:
            raise InvalidPrivacyParameterError(
                f"neighbouring must be 'add_remove' (the total is private) or 'substitute' "
                f"(the total is public), got {value!r}") from err


@dataclass(frozen=True)
class PrivacyUnit:
    """One person: a row (``column=None``) or all rows sharing ``column``, at most
    ``max_rows`` of them."""

    column: str | None = None
    max_rows: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int) \
                or self.max_rows < 1:
            raise InvalidPrivacyParameterError(
                f"max_rows must be an integer >= 1, got {self.max_rows!r}")
        if self.column is None and self.max_rows != 1:
            raise InvalidPrivacyParameterError(
                "max_rows > 1 needs a unit column: with one row per person, each unit has "
                "exactly one row")

    def describe(self) -> str:
        if self.column is None:
            return "one row"
        return f"all rows with the same {self.column} (at most {self.max_rows})"
