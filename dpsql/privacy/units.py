"""The neighbouring relation and the privacy unit, stated explicitly.

* ``Neighbouring.ADD_REMOVE``: neighbours differ by adding or removing one unit's rows;
  the total is private.
* ``Neighbouring.SUBSTITUTE``: neighbours differ by changing the values of one unit's
  kept rows, not their number; the total n is public (bounded DP). With ``max_rows`` > 1
  each unit's number of kept rows, min(rows, max_rows), is therefore not protected: the
  exact total reveals it to someone who knows every other unit (docs/spec.md says so
  and points to ``add_remove``).

A privacy unit is one row, or every row that shares a unit column, bounded to
``max_rows`` rows (the rest are dropped before counting).
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

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
    on_null: str = "error"
    """Rows whose unit id is NULL: ``"error"`` refuses the source, ``"drop"`` drops them
    (reported to the curator). Never one person: all NULL rows would be bounded together."""

    def __post_init__(self) -> None:
        check_max_rows(self.max_rows)
        if self.on_null not in ("error", "drop"):
            raise InvalidPrivacyParameterError(
                f"on_null must be 'error' or 'drop', got {self.on_null!r}")
        if self.column is None and self.max_rows != 1:
            raise InvalidPrivacyParameterError(
                "max_rows > 1 needs a unit column: with one row per person, each unit has "
                "exactly one row")

    def describe(self, neighbouring: "str | Neighbouring | None" = None) -> str:
        """Who one person is, as the release and its report state it; under
        ``substitute`` with ``max_rows`` > 1 also that each one's number of kept rows is
        public (module doc)."""
        if self.column is None:
            return "one row"
        text = f"all rows with the same {self.column} (at most {self.max_rows})"
        if neighbouring is not None and self.max_rows > 1 \
                and Neighbouring.parse(neighbouring) is Neighbouring.SUBSTITUTE:
            text += "; how many rows each keeps is public (substitute)"
        return text


def check_max_rows(max_rows: Any) -> int:
    """``max_rows`` (the contribution bound m) as a Python int, or a clear error."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, numbers.Integral) or max_rows < 1:
        raise InvalidPrivacyParameterError(f"max_rows must be an integer >= 1, got {max_rows!r}")
    return int(max_rows)


@dataclass(frozen=True)
class HistogramSensitivity:
    """How far one unit can move one level of a histogram (any partition of the rows).

    A unit owns at most m rows. Under ADD_REMOVE its rows appear or vanish: the level moves
    by at most m in L1 and m² in squared L2 (all m rows in one cell is the worst case).
    Under SUBSTITUTE its m rows may leave one cell and enter another: 2m in L1 and 2m² in
    squared L2, and the total n is public. Every mechanism derives its noise from this one
    place (DESIGN privacy rule 2); squared L2 stays an exact Fraction so that Gaussian
    calibration never rounds it down.
    """

    neighbouring: Neighbouring
    max_rows: int

    @property
    def l1(self) -> int:
        return 2 * self.max_rows if self.total_is_public else self.max_rows

    @property
    def l2_squared(self) -> Fraction:
        m2 = Fraction(self.max_rows) ** 2
        return 2 * m2 if self.total_is_public else m2

    @property
    def total_is_public(self) -> bool:
        return self.neighbouring is Neighbouring.SUBSTITUTE


def histogram_sensitivity(neighbouring: "str | Neighbouring",
                          max_rows: Any = 1) -> HistogramSensitivity:
    """Parse and check both inputs, then give the per-level sensitivity (see the class)."""
    return HistogramSensitivity(Neighbouring.parse(neighbouring), check_max_rows(max_rows))
