"""A spec written back as TOML (``dpsql advise --write``): the plain file a curator reads
and edits, loaded by :meth:`dpsql.spec.ReleaseSpec.from_toml` like any other.

It is :meth:`~dpsql.spec.ReleaseSpec.to_dict` in TOML: scalars and arrays first, then
one ``[table]`` per nested table (``[attributes.geo]``, ``[budget]``, ``[workload]``) and
``[[views]]`` per view. Budget numbers keep their exact form (``"1/2"``); spines are
written inline, as a release stores them. Comments of the original file are not kept.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from dpsql.spec import ReleaseSpec

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
ORDER = ("name", "source", "sql", "neighbouring", "reconcile", "report_delta", "base_dir",
         "privacy_unit", "budget", "attributes", "views", "workload")


def spec_toml(spec: ReleaseSpec, header: str = "") -> str:
    """The TOML text of ``spec``; ``header`` lines are written first as comments."""
    data = spec.to_dict()
    keys = [k for k in ORDER if k in data] + sorted(k for k in data if k not in ORDER)
    lines = [f"# {h}" if h else "#" for h in header.splitlines()]
    scalars = [k for k in keys if not isinstance(data[k], dict) and k != "views"]
    for k in scalars:
        lines.append(f"{_key(k)} = {_value(data[k])}")
    for k in keys:
        v = data[k]
        if k == "views":
            for view in v:
                lines += ["", "[[views]]"] + [f"{_key(a)} = {_value(b)}" for a, b in view.items()]
        elif isinstance(v, dict):
            lines += _table([k], v)
    return "\n".join(lines) + "\n"


def _table(path: list[str], table: dict) -> list[str]:
    plain = {k: v for k, v in table.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in table.items() if isinstance(v, dict)}
    out: list[str] = []
    if plain or not nested:
        out += ["", f"[{'.'.join(_key(p) for p in path)}]"]
        out += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for k, v in nested.items():
        out += _table(path + [k], v)
    return out


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


_FRACTION = re.compile(r"^-?\d+/\d+$")


def _decimal(text: str) -> str:
    """A fraction the spec wrote as ``"1289/1000"`` as the exact decimal ``"1.289"`` when
    it has one (the spec reads both exactly); other strings as they are."""
    if not _FRACTION.match(text):
        return text
    f = Fraction(text)
    d = f.denominator
    twos = fives = 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1:
        return text
    digits = max(twos, fives)
    if not digits:
        return str(f.numerator)
    with localcontext() as ctx:
        ctx.prec = len(str(abs(f.numerator))) + digits + 2
        return f"{Decimal(f.numerator) / Decimal(f.denominator):.{digits}f}"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, str):
        return json.dumps(_decimal(v), ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        items = [_value(x) for x in v]
        one = "[" + ", ".join(items) + "]"
        if len(one) <= 100:
            return one
        return "[\n  " + ",\n  ".join(items) + ",\n]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


__all__ = ["spec_toml"]
