"""The public attributes of a release spec: categorical lists, hierarchical spines and
binned ranges with their value types, parsed and validated from the spec's
``[attributes.<name>]`` tables (:mod:`dpsql.spec` parses the rest and re-exports these).

Domains come from the spec or from the public files it names, never from the data:
privacy rule 1. Every error names the key path and says what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from fractions import Fraction
from numbers import Real
from pathlib import Path
from typing import Any, Union

import numpy as np

from dpsql.domains.bin_edges import edge_mode
from dpsql.domains.calendar import (UNITS, edges_of, is_month_start, month_edges,
                                   months_between, to_axis)
from dpsql.errors import SpecError
from dpsql.spec_files import check_spine, read_domain_file, read_spine

VALUE_TYPES = ("integer", "decimal", "real", "date", "timestamp")
"""What a binned attribute's values are. ``integer`` and ``decimal`` values are points
on a grid (step 1, or the decimal's ``resolution``): predicates follow SQL on that grid
(``x <= 5`` keeps 5, ``x = 5`` is the cell [5, 6)) and bin edges lie on it. ``date``
values are whole days, binned as the number of days since 1970-01-01 (``lower``/``upper``
are dates, ``width`` a number of days: 1 for days, 7 for weeks, or ``unit = "day" |
"week" | "month"``). ``timestamp`` values are whole seconds, binned as the seconds since
1970-01-01 00:00:00 (``unit = "second" | "minute" | "hour" | "day" | "week" | "month"``,
or ``width`` in seconds). Calendar months have unequal lengths: see
:mod:`dpsql.domains.calendar` for how they are binned. ``real`` values are a
continuous axis, where < and <= coincide."""
EPOCH = date(1970, 1, 1)


def _is_date(value: Any) -> bool:
    if isinstance(value, date):
        return True
    try:
        date.fromisoformat(value)
    except (TypeError, ValueError):
        return _far_axis(value, "D") is not None
    return True


def _is_datetime(value: Any) -> bool:
    if isinstance(value, datetime):
        return True
    if not isinstance(value, str) or len(value) <= 10:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return _far_axis(value, "s") is not None
    return True


_FAR = {"D": re.compile(r"-?\d{4,}-\d\d-\d\d"),
        "s": re.compile(r"-?\d{4,}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")}


def _far_axis(value: Any, unit: str) -> float | None:
    """A date (``unit`` "D") or date-time ("s") string outside Python's years 1 to 9999,
    with an astronomical year as DuckDB writes it (``'-0015-03-01'`` is 16 BC,
    ``'0000-01-01'`` 1 BC), as days or seconds since 1970-01-01 (numpy's proleptic
    Gregorian calendar, DuckDB's); None for anything else."""
    if not isinstance(value, str) or not _FAR[unit].fullmatch(value.strip()):
        return None
    try:
        return float(np.datetime64(value.strip().replace(" ", "T"), unit).astype(np.int64))
    except ValueError:  # a day that does not exist: -0015-02-30
        return None


def second_number(path: str, value: Any) -> float:
    """Seconds since 1970-01-01 00:00:00 of a TOML date-time or date (its midnight), an
    ISO ``YYYY-MM-DD[ HH:MM:SS]`` string or a number of seconds (what ``to_json`` writes
    back). Date-times carry no time zone, as DuckDB's ``TIMESTAMP``."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as err:
            far = _far_axis(value, "s")
            if far is not None:
                return far
            day = _far_axis(value, "D")  # a date alone is its midnight, as 2013-03-01 is
            if day is not None:
                return day * 86400.0
            raise _err(path, f"{value!r} is not a timestamp; write YYYY-MM-DD HH:MM:SS") \
                from err
    if isinstance(value, datetime) and value.tzinfo is not None:
        raise _err(path, f"{value.isoformat()} has a time zone offset; timestamp attributes "
                         "are DuckDB TIMESTAMPs without a time zone: write the local time "
                         "without the offset")
    if isinstance(value, date):
        return to_axis("timestamp", value)
    return float(_number(path, value))


def day_number(path: str, value: Any) -> float:
    """Days since 1970-01-01 of a TOML date, an ISO ``YYYY-MM-DD`` string or a day
    number (what ``to_json`` writes back)."""
    if isinstance(value, datetime):
        value = value.date()
    if isinstance(value, str):
        try:
            value = date.fromisoformat(value)
        except ValueError as err:
            far = _far_axis(value, "D")
            if far is not None:
                return far
            raise _err(path, f"{value!r} is not a date; write YYYY-MM-DD") from err
    if isinstance(value, date):
        return float((value - EPOCH).days)
    return float(_number(path, value))
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"dp_count", "dp_var", "dp_stderr", "dp_row", "dp_parent", "dp_fanout",
             "dp_bias", "dp_measured", "dp_estimate"}


def _err(path: str, message: str) -> SpecError:
    return SpecError(f"{path}: {message}")


def did_you_mean(value: Any, choices: Any) -> str:
    """``did you mean 'max_rows'?`` (or ``'dest' or 'distance'``) for a misspelled key,
    name or option: the one or two closest of ``choices``; else an empty string."""
    import difflib

    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=2, cutoff=0.6)
    return f"did you mean {' or '.join(map(repr, close))}?" if close else ""


def _suggest(value: Any, choices: Any) -> str:
    """``; did you mean 'max_rows'?``, the end of an "unknown ..." message, or nothing."""
    text = did_you_mean(value, choices)
    return f"; {text}" if text else ""


def _ident(path: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _err(path, f"{value!r} is not a valid name; use letters, digits and _ "
                         "(not starting with a digit)")
    if value.lower() in _RESERVED or value.lower().startswith("dpsql"):
        raise _err(path, f"{value!r} is reserved by dpsql; choose another name")
    return value


def _policy(path: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _err(path, f"unknown policy {value!r}; allowed: {', '.join(allowed)}"
                         + _suggest(value, allowed))
    return value


def _one_key_type(path: str, values: list[Any]) -> None:
    """A categorical domain is matched against one source column, so its values must share
    one type (all strings, all integers, or all finite numbers) and stay distinct *as that
    type*: ``["1", 1]`` or ``[2**53, 2**53 + 1, 0.5]`` would collapse to one key and
    count a row in two cells, breaking the sensitivity (DESIGN privacy rule 2)."""
    for v in values:
        if isinstance(v, (date, datetime)):  # a TOML date: matched as the source's text
            raise _err(path, f"values must be strings or numbers, got the date {v}; quote "
                             f"it (\"{v}\")")
        if not isinstance(v, (str, Real)) or isinstance(v, bool):
            raise _err(path, f"values must be strings or numbers, got {v!r}")
    strings = [v for v in values if isinstance(v, str)]
    numbers = [v for v in values if not isinstance(v, str)]
    if strings and numbers:
        raise _err(path, f"mixes strings and numbers ({strings[0]!r}, {numbers[0]!r}); the "
                         "source column has one type: quote every value, or none")
    if numbers and not all(isinstance(v, int) for v in numbers):
        if not all(math.isfinite(float(v)) for v in numbers):
            raise _err(path, "numeric values must be finite")
        values = [float(v) for v in numbers]
    _unique(path, values)


def _unique(path: str, values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise _err(path, f"duplicate domain value {v!r}; every public value must appear "
                             "once")
        seen.add(v)
    return values


@dataclass(frozen=True)
class Categorical:
    """A categorical attribute with a public list of values."""

    name: str
    values: tuple[Any, ...]
    on_out_of_domain: str = "error"  # error | drop
    on_null: str = "error"  # error | drop | category
    # text values released as BIGINT (set at release: dpsql.release.value_types)
    integer_columns: tuple[str, ...] = ()

    kind = "categorical"

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.name,)

    @property
    def domain_values(self) -> tuple[Any, ...]:
        """The released domain: the values, and NULL last under ``on_null = "category"``."""
        return self.values + (None,) if self.on_null == "category" else self.values

    def to_json(self) -> dict:
        return {"kind": self.kind, "domain": list(self.values),
                "on_out_of_domain": self.on_out_of_domain, "on_null": self.on_null}


@dataclass(frozen=True)
class Hierarchy:
    """A public spine: one level per column; ``paths`` lists every valid leaf path."""

    name: str
    level_columns: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    on_out_of_domain: str = "error"
    on_null: str = "error"
    # spine columns released as BIGINT (set at release: dpsql.release.value_types)
    integer_columns: tuple[str, ...] = ()

    kind = "hierarchy"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.level_columns

    def to_json(self) -> dict:
        return {"kind": self.kind, "columns": list(self.level_columns),
                "spine": [list(p) for p in self.paths],
                "on_out_of_domain": self.on_out_of_domain, "on_null": self.on_null}


@dataclass(frozen=True)
class Range:
    """A numeric attribute binned into ``bins`` equal-width bins on [lower, upper).

    ``value_type`` is one of :data:`VALUE_TYPES`, or None until the release infers it
    from the source column's type; ``resolution`` is the grid step of a ``decimal``."""

    name: str
    lower: float
    upper: float
    bins: int
    fanout: Union[str, int] = "auto"
    on_out_of_bounds: str = "clamp"  # clamp | drop | error
    on_null: str = "error"
    value_type: str | None = None
    resolution: float | None = None
    unit: str | None = None  # date/timestamp: the bin unit (day, week, month, hour, ...)

    kind = "range"

    @property
    def step(self) -> float | None:
        """The grid step of integer, date (1: a day) and timestamp (1: a second) values,
        and of decimals; None for reals."""
        return 1.0 if self.value_type in ("integer", "date", "timestamp") else (
            self.resolution if self.value_type == "decimal" else None)

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.name,)

    @property
    def width(self) -> float:
        return (self.upper - self.lower) / self.bins

    @property
    def edge_mode(self) -> str:
        """How the release computes this attribute's bin edges
        (:func:`dpsql.domains.bin_edges.edge_mode`: the correctly rounded decimals)."""
        return edge_mode(self.lower, self.upper, self.bins)

    def edges(self) -> list[float]:
        """The K + 1 bin edges (calendar months for ``unit = "month"``)."""
        return [float(x) for x in edges_of(self)]

    def to_json(self) -> dict:
        out = {"kind": self.kind, "lower": self.lower, "upper": self.upper,
               "bins": self.bins, "fanout": self.fanout,
               "on_out_of_bounds": self.on_out_of_bounds, "on_null": self.on_null}
        if self.value_type is not None:
            out["type"] = self.value_type
        if self.value_type == "decimal":
            out["resolution"] = self.resolution
        if self.unit is not None:
            out["unit"] = self.unit
        return out


Attribute = Union[Categorical, Hierarchy, Range]


def _number(path: str, value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _err(path, f"must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _err(path, f"must be a finite number, got {value!r}")
    try:
        f = Fraction(str(value)) if not isinstance(value, float) else Fraction(value)
        if not math.isfinite(float(f)):
            raise OverflowError
    except (ValueError, ZeroDivisionError) as err:
        raise _err(path, f"must be a number, got {value!r}") from err
    except OverflowError as err:
        raise _err(path, f"must be a finite number within float range, got "
                         f"{str(value)[:40]!r}") from err
    return f


def _parse_attribute(path: str, name: str, raw: Any, base: Path) -> Attribute:
    _ident(path, name)
    if not isinstance(raw, dict):
        raise _err(path, "must be a table with a 'kind'")
    kind = raw.get("kind")
    on_null = _policy(f"{path}.on_null", raw.get("on_null", "error"),
                      ("error", "drop", "category"))
    if on_null == "category" and kind not in ("categorical", "hierarchy", "range"):
        raise _err(f"{path}.on_null", "\"category\" (NULL as a released value) is supported "
                                      "on categorical, hierarchy and range attributes")
    if kind == "categorical":
        _only(path, raw, {"kind", "domain", "domain_file", "domain_column",
                          "on_out_of_domain", "on_null"})
        if ("domain" in raw) == ("domain_file" in raw):
            raise _err(path, "give exactly one of 'domain' (a list of values) or 'domain_file' "
                             "(a CSV whose first column lists them)")
        if "domain_column" in raw and "domain_file" not in raw:
            raise _err(f"{path}.domain_column", "names a column of a domain_file; give the "
                                                "file, or drop domain_column")
        if "domain" in raw:
            values = raw["domain"]
            if not isinstance(values, list) or not values:
                raise _err(f"{path}.domain", "must be a non-empty list of public values")
        else:
            column = raw.get("domain_column")
            if column is not None and not isinstance(column, str):
                raise _err(f"{path}.domain_column", f"must be a column name, got {column!r}")
            values = read_domain_file(f"{path}.domain_file", base / raw["domain_file"],
                                       name, column)
        _one_key_type(f"{path}.domain", values)
        if on_null == "category" and not all(isinstance(v, str) for v in values):
            raise _err(f"{path}.on_null", "\"category\" needs a domain of strings (the NULL "
                                          "value joins them in one label column); quote the "
                                          "values, or use \"drop\"")
        return Categorical(name, tuple(values),
                           _policy(f"{path}.on_out_of_domain",
                                   raw.get("on_out_of_domain", "error"), ("error", "drop")),
                           on_null)
    if kind == "hierarchy":
        _only(path, raw, {"kind", "columns", "spine_file", "spine_columns", "spine",
                          "on_out_of_domain", "on_null"})
        cols = raw.get("columns")
        if not isinstance(cols, list) or not cols:
            raise _err(f"{path}.columns", "must list the spine's columns, coarsest first")
        cols = [_ident(f"{path}.columns", c) for c in cols]
        if ("spine" in raw) == ("spine_file" in raw):
            raise _err(path, "give exactly one of 'spine_file' (a CSV with a header row naming "
                             "the columns) or 'spine' (a list of leaf paths)")
        if "spine_columns" in raw and "spine_file" not in raw:
            raise _err(f"{path}.spine_columns", "names columns of a spine_file; give the file, "
                                                "or drop spine_columns")
        if "spine" in raw:
            paths = [tuple(str(x) for x in p) for p in raw["spine"]]
        else:
            file_cols = cols
            if "spine_columns" in raw:
                file_cols = raw["spine_columns"]
                if not isinstance(file_cols, list) or len(file_cols) != len(cols) \
                        or not all(isinstance(c, str) for c in file_cols):
                    raise _err(f"{path}.spine_columns",
                               f"must list {len(cols)} column names of the spine file, one "
                               f"per entry of columns ({', '.join(cols)}), coarsest first")
            paths = read_spine(f"{path}.spine_file", base / raw["spine_file"], file_cols)
        if not paths:
            raise _err(path, "the spine is empty")
        for i, p in enumerate(paths):
            if len(p) != len(cols):
                raise _err(f"{path}.spine[{i}]", f"has {len(p)} values but there are "
                                                 f"{len(cols)} columns")
        check_spine(path, cols, paths)
        return Hierarchy(name, tuple(cols), tuple(paths),
                         _policy(f"{path}.on_out_of_domain",
                                 raw.get("on_out_of_domain", "error"), ("error", "drop")),
                         on_null)
    if kind == "range":
        _only(path, raw, {"kind", "lower", "upper", "bins", "width", "fanout",
                          "on_out_of_bounds", "on_null", "type", "resolution", "unit"})
        value_type, resolution = _value_type(path, raw)
        if value_type is None and _is_datetime(raw.get("lower")):
            value_type = "timestamp"  # date-time bounds: a timestamp attribute
        elif value_type is None and _is_date(raw.get("lower")):
            value_type = "date"  # date bounds: a date attribute
        bound = day_number if value_type == "date" else second_number \
            if value_type == "timestamp" else (lambda p, v: float(_number(p, v)))
        missing = [k for k in ("lower", "upper") if raw.get(k) is None]
        if missing:
            raise _err(f"{path}.{missing[0]}", "missing: a range attribute needs its public "
                                               "bounds 'lower' and 'upper' (values outside "
                                               "them follow on_out_of_bounds); declare them "
                                               "from public knowledge, never from the data")
        lower = bound(f"{path}.lower", raw.get("lower"))
        upper = bound(f"{path}.upper", raw.get("upper"))
        if not lower < upper:
            raise _err(path, f"lower ({lower:g}) must be < upper ({upper:g})")
        if not math.isfinite(upper - lower):
            raise _err(path, f"upper - lower ({upper:g} - {lower:g}) overflows a float; "
                             "give bounds closer together")
        unit = raw.get("unit")
        if unit is not None:
            bins, upper = _unit_bins(path, raw, value_type, unit, lower, upper)
        elif ("bins" in raw) == ("width" in raw):
            raise _err(path, "give exactly one of 'bins' (how many) or 'width' (bin width)"
                             + (" or 'unit'" if value_type in UNITS else ""))
        elif "bins" in raw:
            bins = raw["bins"]
            if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
                raise _err(f"{path}.bins", f"must be an integer >= 1, got {bins!r}")
        else:
            width = float(_number(f"{path}.width", raw["width"]))
            if width <= 0:
                raise _err(f"{path}.width", f"must be > 0, got {width:g}")
            bins = math.ceil((upper - lower) / width - 1e-9)
            upper = lower + bins * width
        if bins > 1 << 26:
            raise _err(f"{path}.bins", f"{bins} bins is more than dpsql supports (2^26)")
        fanout = raw.get("fanout", "auto")
        if fanout != "auto" and (isinstance(fanout, bool) or not isinstance(fanout, int)
                                 or fanout < 2):
            raise _err(f"{path}.fanout", f"must be 'auto' or an integer >= 2, got {fanout!r}")
        out = Range(name, lower, upper, bins, fanout,
                    _policy(f"{path}.on_out_of_bounds", raw.get("on_out_of_bounds", "clamp"),
                            ("clamp", "drop", "error")), on_null, value_type, resolution, unit)
        if value_type is not None:
            check_grid(out, path)
        return out
    raise _err(f"{path}.kind", f"unknown kind {kind!r}; allowed: categorical, hierarchy, range"
               + _suggest(kind, ("categorical", "hierarchy", "range")))


def _unit_bins(path: str, raw: dict, value_type: str | None, unit: Any, lower: float,
               upper: float) -> tuple[int, float]:
    """(bins, upper) of a date or timestamp attribute binned by a calendar ``unit``: equal
    bins of the unit's length, or calendar months from ``lower`` (the first of a month)
    up to ``upper`` moved to the next first of a month."""
    units = UNITS.get(value_type or "")
    if units is None:
        raise _err(f"{path}.unit", "a bin unit is for date and timestamp attributes; give "
                                   "date bounds or type = \"date\" / \"timestamp\", or bin "
                                   "numbers by 'bins' or 'width'")
    if unit not in units:
        raise _err(f"{path}.unit", f"unknown unit {unit!r} for a {value_type}; allowed: "
                                   f"{', '.join(units)}{_suggest(unit, units)}")
    if "width" in raw:
        raise _err(path, "give one of 'unit' or 'width', not both")
    length = units[unit]
    if length is None:
        if not is_month_start(value_type, lower):  # type: ignore[arg-type]
            raise _err(f"{path}.lower", "month bins start on the first of a month"
                                        + (" at 00:00:00" if value_type == "timestamp" else "")
                                        + "; move lower to the first day of its month")
        bins = months_between(value_type, lower, upper)  # type: ignore[arg-type]
        upper = float(month_edges(value_type, lower, bins)[-1])  # type: ignore[arg-type]
    else:
        bins = math.ceil((upper - lower) / length - 1e-9)
        upper = lower + bins * length
    if "bins" in raw and raw["bins"] != bins:
        raise _err(f"{path}.bins", f"is {raw['bins']!r}, but [lower, upper) holds {bins} "
                                   f"{unit}s; leave bins out with a unit")
    return bins, upper


# What SQL, pandas and Python call dpsql's value types: ``type = "datetime"`` is a
# timestamp (no spelling is close enough for did_you_mean to find it).
TYPE_ALIASES = {"datetime": "timestamp", "datetime64": "timestamp", "int": "integer",
                "bigint": "integer", "int64": "integer", "float": "real", "double": "real",
                "float64": "real", "numeric": "decimal"}


def _value_type(path: str, raw: dict) -> tuple[str | None, float | None]:
    value_type = raw.get("type")
    if value_type is None:
        if "resolution" in raw:
            raise _err(f"{path}.resolution", "is the grid step of a decimal attribute; add "
                                             "type = \"decimal\", or drop resolution")
        return None, None
    if value_type not in VALUE_TYPES:
        alias = TYPE_ALIASES.get(str(value_type).lower())
        hint = f"; did you mean {alias!r}?" if alias else _suggest(value_type, VALUE_TYPES)
        raise _err(f"{path}.type", f"unknown value type {value_type!r}; allowed: "
                                   f"{', '.join(VALUE_TYPES)} (or leave it out to infer it "
                                   f"from the source column at release time){hint}")
    if value_type != "decimal":
        if "resolution" in raw:
            raise _err(f"{path}.resolution", f"only a decimal attribute has a resolution; "
                                             f"remove it for type = {value_type!r}")
        return value_type, None
    if "resolution" not in raw:
        raise _err(f"{path}.resolution", "missing: a decimal attribute needs the step of its "
                                         "values, e.g. resolution = 0.01 for cents")
    res = _number(f"{path}.resolution", raw["resolution"])
    if res <= 0:
        raise _err(f"{path}.resolution", f"must be > 0, got {raw['resolution']!r}")
    return value_type, float(res)


def on_grid(x: float, step: float) -> bool:
    """True when ``x`` is a whole multiple of ``step`` (exactly, in decimal: 0.3 is a
    multiple of 0.1 although 0.3 / 0.1 is not 3 in binary floating point)."""
    q = Fraction(repr(float(x))) / Fraction(repr(float(step)))
    return q.denominator == 1


def check_grid(attr: Range, path: str) -> None:
    """Bins of integer and decimal attributes must start and end on the values' grid, so
    that each bin holds whole values (no value is split between two bins)."""
    step = attr.step
    if step is None or attr.unit == "month":  # month edges are whole days by construction
        return
    width = Fraction(repr(attr.upper)) - Fraction(repr(attr.lower))
    width /= attr.bins
    what = {"integer": "whole numbers", "date": "whole days",
            "timestamp": "whole seconds"}.get(attr.value_type,
                                                                 f"multiples of {step:g}")
    if not (on_grid(attr.lower, step) and on_grid(attr.upper, step)
            and (width / Fraction(repr(step))).denominator == 1):
        raise _err(path, f"{attr.value_type} values need bins on their grid: lower "
                         f"({attr.lower:g}), upper ({attr.upper:g}) and the bin width "
                         f"({float(width):g}) must be {what}; change bins or width, or "
                         "declare type = \"real\" for a continuous axis")


def _only(path: str, raw: dict, allowed: set[str]) -> None:
    for key in raw:
        if key not in allowed:
            raise _err(f"{path}.{key}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
                       + _suggest(key, allowed))
