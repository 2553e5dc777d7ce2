"""The release spec: what the curator declares before any data is read.

A spec names the source, the neighbouring relation, the privacy unit, the total budget,
the public attributes (categorical lists, hierarchical spines, binned ranges) and the
views (one private tree each). It is loaded from TOML (:meth:`ReleaseSpec.from_toml`)
or built in Python, round-trips through JSON (:meth:`ReleaseSpec.to_json`), and is
validated as a whole: every error names the key path and says what is allowed.

Domains come from the spec (or files it names), never from the data: that is privacy
rule 1. Reading a ``domain_file``/``spine_file`` reads a *public* file. The attributes
are parsed in :mod:`dpsql.spec_attributes`; this module re-exports their types.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dpsql.accuracy.optimal_ranges import MAX_OPTIMAL_BINS
from dpsql.engine_settings import EngineSettings, parse_engine
from dpsql.errors import InvalidPrivacyParameterError, SpecError
from dpsql.privacy import ApproxDP, Budget, Neighbouring, PrivacyUnit, PureDP, ZCDP
from dpsql.privacy.budgets import check_usable
from dpsql.spec_attributes import (EPOCH, VALUE_TYPES, Attribute, Categorical, Hierarchy,
                                   Range, _err, _ident, _number, _only, _parse_attribute,
                                   _policy, _suggest, check_grid, day_number, on_grid)
from dpsql.spec_files import read_text
from dpsql.spec_workload import Workload, parse_workload

MECHANISMS = ("inftda", "cascade", "btree", "laplace_tree", "gaussian_tree")
GAUSSIAN_MECHANISMS = ("inftda", "cascade", "gaussian_tree")
PURE_MECHANISMS = ("btree", "laplace_tree")
RANGE_ONLY_MECHANISMS = ("cascade", "btree")
COVARIANCES = ("tree", "optimal")  # cascade: Cascade Sampling's C_k, or range-optimal



@dataclass(frozen=True)
class View:
    """One private tree: attributes in tree order, a mechanism and a budget weight."""

    name: str
    levels: tuple[str, ...]
    mechanism: str = "inftda"
    weight: Fraction = Fraction(1)
    level_weights: tuple[Fraction, ...] | None = None
    covariance: str | None = None  # cascade only: "tree" (default) or "optimal"
    interleave: bool = False
    """Alternate the attributes' levels (one level of each in turn) instead of taking
    each attribute whole: an origin/destination tree (od_topdown.md §1)."""

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "levels": list(self.levels),
                               "mechanism": self.mechanism, "weight": str(self.weight)}
        if self.level_weights is not None:
            out["level_weights"] = [str(w) for w in self.level_weights]
        if self.covariance is not None:
            out["covariance"] = self.covariance
        if self.interleave:
            out["interleave"] = True
        return out


@dataclass(frozen=True)
class ReleaseSpec:
    """Everything a release needs besides the data."""

    name: str
    neighbouring: Neighbouring
    budget: Budget
    attributes: dict[str, Attribute]
    views: tuple[View, ...]
    source: str | None = None
    sql: str | None = None
    unit: PrivacyUnit = field(default_factory=PrivacyUnit)
    report_delta: Fraction = Fraction(1, 10**9)
    base_dir: str = "."
    reconcile: bool = True
    """Make views agree on the marginals they share (dpsql.release.reconcile)."""
    workload: Workload | None = None
    """The queries the release should serve best (``[workload]``; dpsql.workload)."""
    engine: EngineSettings = field(default_factory=EngineSettings)
    """How the rows are read and counted (:mod:`dpsql.engine_settings`); not stored."""

    # ----------------------------------------------------------------------------------
    @classmethod
    def from_toml(cls, path: str | Path) -> "ReleaseSpec":
        """Load and validate a TOML spec; relative file names resolve next to it."""
        p = Path(path)
        if not p.exists():
            raise SpecError(f"spec file {str(p)!r} does not exist")
        try:
            data = tomllib.loads(read_text("spec file", p))
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{p}: malformed TOML: {err}; check quotes, brackets and "
                            "'key = value' syntax") from err
        return cls.from_dict(data, base_dir=p.resolve().parent)

    @classmethod
    def from_json(cls, text: str) -> "ReleaseSpec":
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: str | Path = ".") -> "ReleaseSpec":
        base = Path(data.get("base_dir", base_dir))
        known = {"name", "source", "sql", "neighbouring", "privacy_unit", "budget",
                 "attributes", "views", "report_delta", "base_dir", "reconcile",
                 "workload", "engine"}
        for key in data:
            if key not in known:
                raise _err(key, f"unknown key; allowed top-level keys: {', '.join(sorted(known))}"
                           + _suggest(key, known))
        name = _ident("name", data.get("name"))
        source, sql = data.get("source"), data.get("sql")
        if (source is None) == (sql is None):
            raise _err("source", "give exactly one of 'source' (a .parquet/.csv/.json path or "
                                 "'duckdb:<file>:<table>') or 'sql' (a SELECT query)")
        if source is not None and not isinstance(source, str):
            raise _err("source", f"must be a string, got {source!r}")
        if "neighbouring" not in data:
            raise _err("neighbouring", "missing; state 'add_remove' (the total is private) or "
                                       "'substitute' (the total is public)")
        try:
            neighbouring = Neighbouring.parse(data["neighbouring"])
        except InvalidPrivacyParameterError as err:
            raise _err("neighbouring", str(err)) from err
        unit = _parse_unit(data.get("privacy_unit"))
        budget = _parse_budget(data.get("budget"))
        attrs_raw = data.get("attributes")
        if not isinstance(attrs_raw, dict) or not attrs_raw:
            raise _err("attributes", "missing; declare at least one [attributes.<name>] table")
        _refuse_source_as_domain(source, attrs_raw, base)
        attributes = {k: _parse_attribute(f"attributes.{k}", k, v, base)
                      for k, v in attrs_raw.items()}
        _check_columns_unique(attributes)
        views_raw = data.get("views")
        if not isinstance(views_raw, list) or not views_raw:
            raise _err("views", "missing; declare at least one [[views]] table")
        views = tuple(_parse_view(f"views[{i}]", v, attributes, budget)
                      for i, v in enumerate(views_raw))
        names = [v.name for v in views]
        for i, n in enumerate(names):
            if n in names[:i] or n == name:
                raise _err(f"views[{i}].name", f"duplicate table name {n!r}; views and the "
                                               "release need distinct names")
        if neighbouring is Neighbouring.SUBSTITUTE:
            _refuse_per_view_drops(attributes, views)
        report_delta = _number("report_delta", data.get("report_delta", "1e-9"))
        if isinstance(budget, ApproxDP):
            report_delta = budget.delta
        if not (0 < report_delta < 1):
            raise _err("report_delta", f"must be in (0, 1), got {data.get('report_delta')!r}")
        reconcile = data.get("reconcile", True)
        if not isinstance(reconcile, bool):
            raise _err("reconcile", f"must be true or false, got {reconcile!r}")
        workload = (parse_workload(data["workload"], base) if "workload" in data else None)
        return cls(name=name, neighbouring=neighbouring, budget=budget, attributes=attributes,
                   views=views, source=source, sql=sql, unit=unit,
                   report_delta=report_delta, base_dir=str(base), reconcile=reconcile,
                   workload=workload, engine=parse_engine(data.get("engine")))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "neighbouring": self.neighbouring.value}
        if self.source is not None:
            out["source"] = self.source
        if self.sql is not None:
            out["sql"] = self.sql
        if self.unit.column is not None:
            out["privacy_unit"] = {"column": self.unit.column, "max_rows": self.unit.max_rows}
            if self.unit.on_null != "error":
                out["privacy_unit"]["on_null"] = self.unit.on_null
        b = self.budget
        if isinstance(b, ZCDP):
            out["budget"] = {"rho": str(b.rho)}
        elif isinstance(b, PureDP):
            out["budget"] = {"epsilon": str(b.epsilon)}
        else:
            out["budget"] = {"epsilon": str(b.epsilon), "delta": str(b.delta)}
        out["attributes"] = {k: a.to_json() for k, a in self.attributes.items()}
        out["views"] = [v.to_json() for v in self.views]
        out["report_delta"] = str(self.report_delta)
        out["base_dir"] = self.base_dir
        if not self.reconcile:
            out["reconcile"] = False
        if self.workload is not None:
            out["workload"] = self.workload.to_json()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def public_dict(self) -> dict[str, Any]:
        """What a release stores of its spec, for analysts: :meth:`to_dict` without the
        curator's ``source``, ``sql`` and ``base_dir`` (paths and queries on the curator's
        machine; spines are stored inline, never as paths). The curator keeps the full
        spec: it is their file; ``dpsql release`` prints where the data came from."""
        return {k: v for k, v in self.to_dict().items()
                if k not in ("source", "sql", "base_dir")}

    def origin(self) -> str:
        """Where the data came from, for the curator's eyes: the source or the SQL."""
        return f"source {self.source}" if self.source is not None else f"sql {self.sql}"

    def view(self, name: str) -> View:
        for v in self.views:
            if v.name == name:
                return v
        raise KeyError(name)


# --------------------------------------------------------------------------------------

def _parse_unit(raw: Any) -> PrivacyUnit:
    if raw is None:
        return PrivacyUnit()
    if not isinstance(raw, dict):
        raise _err("privacy_unit", "must be a table with 'column' and 'max_rows'")
    extra = set(raw) - {"column", "max_rows", "on_null"}
    if extra:
        key = sorted(extra)[0]
        raise _err(f"privacy_unit.{key}", "unknown key; allowed: column, max_rows, on_null"
                   + _suggest(key, ("column", "max_rows", "on_null")))
    column = raw.get("column")
    if not isinstance(column, str) or not column:
        raise _err("privacy_unit.column", "must name the column that identifies a person")
    max_rows = raw.get("max_rows")
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise _err("privacy_unit.max_rows", f"must be an integer >= 1, got {max_rows!r}; it "
                                            "bounds how many rows one person contributes")
    on_null = _policy("privacy_unit.on_null", raw.get("on_null", "error"), ("error", "drop"))
    return PrivacyUnit(column=column, max_rows=max_rows, on_null=on_null)


def _positive_budget(path: str, value: Any) -> Fraction:
    """A budget number as written (``-1``, not ``Fraction(-1, 1)``), refused with its key
    path when it is not positive."""
    number = _number(path, value)
    if number <= 0:
        raise _err(path, f"must be > 0, got {value!r}; a zero or negative budget releases "
                         f"nothing useful: give a positive {path.split('.')[-1]}")
    return number


def _parse_budget(raw: Any) -> Budget:
    if not isinstance(raw, dict):
        raise _err("budget", "missing; give exactly one of: rho = …, epsilon = … (pure DP), or "
                             "epsilon = … with delta = …")
    extra = set(raw) - {"rho", "epsilon", "delta"}
    if extra:
        key = sorted(extra)[0]
        raise _err(f"budget.{key}", "unknown key; allowed: rho, epsilon, delta"
                   + _suggest(key, ("rho", "epsilon", "delta")))
    try:
        if "rho" in raw:
            if "epsilon" in raw or "delta" in raw:
                raise _err("budget", "give rho alone, or epsilon (with an optional delta), "
                                     "not both")
            return check_usable(ZCDP(_positive_budget("budget.rho", raw["rho"])))
        if "epsilon" not in raw:
            raise _err("budget", "give exactly one of: rho, epsilon, or epsilon with delta")
        eps = _positive_budget("budget.epsilon", raw["epsilon"])
        if "delta" in raw:
            delta = _number("budget.delta", raw["delta"])
            if not 0 < delta < 1:
                raise _err("budget.delta", f"must be in (0, 1), got {raw['delta']!r}; typical "
                                           "values are 1e-6 to 1e-10, well below 1/n")
            return check_usable(ApproxDP(eps, delta))
        return check_usable(PureDP(eps))
    except InvalidPrivacyParameterError as err:
        if isinstance(err, SpecError):
            raise
        raise _err("budget", str(err)) from err


def _refuse_per_view_drops(attributes: dict[str, Attribute], views) -> None:
    """Under ``substitute`` each view releases its total exactly, as public. A view over an
    attribute with ``on_null = "drop"`` counts only the rows where it has a value, so its
    exact total would publish the exact number of NULLs (the other views' total minus
    it), which no substitution bound covers: refused. Rules that drop a row from every
    view (out of domain or bounds, NULL unit ids, ``max_rows``) keep one total for all
    views: the population the spec defines, whose size the curator declares public."""
    for v in views:
        for a in v.levels:
            if getattr(attributes[a], "on_null", None) == "drop":
                raise _err(f"attributes.{a}.on_null", (
                    f"\"drop\" is not allowed with neighbouring = \"substitute\": the view "
                    f"{v.name!r} over {a!r} would release its total exactly (the total is "
                    f"public under substitution), and so the exact number of rows where "
                    f"{a!r} is NULL. Use on_null = \"category\" (NULL released as a value, "
                    f"with noise) or \"error\", or neighbouring = \"add_remove\""))


def own_population_views(views: Iterable[tuple[str, Sequence[str]]],
                         on_null: Mapping[str, str]) -> set[str]:
    """The names of the views (name, attributes) that drop an attribute's NULL rows
    (``on_null[a] == "drop"``): each counts a population of its own (its own total), so
    reconciliation makes it agree with no other view. One rule for the build
    (:func:`dpsql.release.reconcile.reconcile_release`) and for what a dry run promises
    (:func:`dpsql.present.reconciled_text`)."""
    return {name for name, attrs in views if any(on_null.get(a) == "drop" for a in attrs)}


def _refuse_source_as_domain(source: str | None, attrs_raw: dict, base: Path) -> None:
    """A ``domain_file`` or ``spine_file`` may not be the source file (or one its glob
    matches): its values would be the data's, released as the public domain (privacy
    rule 1); with ``domain_column`` naming a column of distinct values (a person id),
    every one of them. A copy of the data under another name cannot be told from a
    public list: that is the curator's to avoid."""
    if source is None or source.startswith("duckdb:"):
        return
    src = (base / source).resolve()
    for name, raw in attrs_raw.items():
        for key in ("domain_file", "spine_file"):
            given = raw.get(key) if isinstance(raw, dict) else None
            if not isinstance(given, str):
                continue
            f = (base / given).resolve()
            if f == src or (any(c in source for c in "*?[") and f.match(str(src))):
                raise _err(f"attributes.{name}.{key}",
                           f"{given!r} is the source {source!r} itself: a domain read from "
                           "the data would release the data's own values as public (privacy "
                           "rule 1: domains are public and declared); give a public file "
                           "that lists the values, or list them in 'domain'")


def _check_columns_unique(attributes: dict[str, Attribute]) -> None:
    owner: dict[str, str] = {}
    for name, attr in attributes.items():
        for c in attr.columns:
            if c in owner:
                raise _err(f"attributes.{name}", f"column {c!r} is already used by attribute "
                                                 f"{owner[c]!r}")
            owner[c] = name


def _parse_view(path: str, raw: Any, attributes: dict[str, Attribute], budget: Budget) -> View:
    if not isinstance(raw, dict):
        raise _err(path, "must be a table with name, levels and mechanism")
    _only(path, raw, {"name", "levels", "mechanism", "weight", "level_weights", "covariance",
                      "interleave"})
    name = _ident(f"{path}.name", raw.get("name"))
    levels = raw.get("levels")
    if not isinstance(levels, list) or not levels:
        example = f"[{levels!r}]".replace("'", '"') if isinstance(levels, str) else \
            '["origin", "carrier"]'
        raise _err(f"{path}.levels", f"must list the attribute names in tree order, got "
                                     f"{levels!r}; e.g. levels = {example}")
    for i, lv in enumerate(levels):
        if lv not in attributes:
            raise _err(f"{path}.levels[{i}]", f"unknown attribute {lv!r}; declared attributes: "
                                              f"{', '.join(attributes)}"
                       + _suggest(lv, attributes))
        if lv in levels[:i]:
            raise _err(f"{path}.levels[{i}]", f"attribute {lv!r} appears twice")
    mech = raw.get("mechanism", "inftda")
    if mech not in MECHANISMS:
        raise _err(f"{path}.mechanism", f"unknown mechanism {mech!r}; allowed: "
                                        f"{', '.join(MECHANISMS)}" + _suggest(mech, MECHANISMS))
    if mech in RANGE_ONLY_MECHANISMS:
        if len(levels) != 1 or not isinstance(attributes[levels[0]], Range):
            raise _err(f"{path}.levels", f"mechanism {mech!r} answers range queries over one "
                                         "range attribute: give exactly one attribute of "
                                         "kind 'range' (use inftda or gaussian_tree for "
                                         "categorical levels)")
        if attributes[levels[0]].bins < 2:  # no tree to build (one bin, one count)
            raise _err(f"{path}.mechanism", f"{mech!r} is a tree over the bins of "
                                            f"{levels[0]!r}, which has 1 bin; give it at "
                                            "least 2 bins, or use inftda, gaussian_tree or "
                                            "laplace_tree (a single noisy count)")
        if attributes[levels[0]].on_null == "category":
            raise _err(f"{path}.mechanism", f"{mech!r} releases the bins of "
                                            f"{levels[0]!r} only, not the NULL node of its "
                                            "on_null = \"category\"; use gaussian_tree, "
                                            "laplace_tree or inftda for this view")
    if isinstance(budget, PureDP) and mech in GAUSSIAN_MECHANISMS:
        raise _err(f"{path}.mechanism", f"{mech!r} adds Gaussian noise, which cannot meet a "
                                        "pure ε-DP budget; use btree or laplace_tree, or give "
                                        "the budget as rho or as epsilon with delta")
    weight = _number(f"{path}.weight", raw.get("weight", 1))
    if weight <= 0:
        raise _err(f"{path}.weight", f"must be > 0, got {raw.get('weight')!r}")
    level_weights = raw.get("level_weights")
    lw = None
    if level_weights is not None:
        if not isinstance(level_weights, list) or not level_weights:
            raise _err(f"{path}.level_weights", "must be a list of positive numbers, one per "
                                                "tree level")
        lw = tuple(_number(f"{path}.level_weights[{i}]", w) for i, w in enumerate(level_weights))
        if any(w <= 0 for w in lw):
            raise _err(f"{path}.level_weights", "every weight must be > 0")
    covariance = raw.get("covariance")
    if covariance is not None:
        if mech != "cascade":
            raise _err(f"{path}.covariance", f"only the cascade mechanism takes a covariance; "
                                             f"remove it for {mech!r}")
        if covariance not in COVARIANCES:
            raise _err(f"{path}.covariance", f"must be 'tree' (Cascade Sampling, any number of "
                                             f"bins) or 'optimal' (range-optimal, at most "
                                             f"{MAX_OPTIMAL_BINS} bins), got {covariance!r}")
        bins = attributes[levels[0]].bins
        if covariance == "optimal" and bins > MAX_OPTIMAL_BINS:
            raise _err(f"{path}.covariance", f"'optimal' is dense (K² memory, K³ time) and "
                                             f"allows at most {MAX_OPTIMAL_BINS} bins; "
                                             f"{levels[0]!r} has {bins}: use 'tree' or fewer "
                                             "bins")
    interleave = raw.get("interleave", False)
    if not isinstance(interleave, bool):
        raise _err(f"{path}.interleave", f"must be true or false, got {interleave!r}")
    if interleave:
        if len(levels) < 2:
            raise _err(f"{path}.interleave", "alternates the levels of two or more "
                                             "attributes; this view lists one")
        ranged = [lv for lv in levels if isinstance(attributes[lv], Range)]
        if ranged:
            raise _err(f"{path}.interleave", f"takes categorical and hierarchy attributes "
                                             f"only; {ranged[0]!r} is a range (put range "
                                             "attributes in a view of their own, or last in "
                                             "a view without interleave)")
    return View(name, tuple(levels), mech, weight, lw, covariance, interleave)


__all__ = ["Attribute", "Categorical", "COVARIANCES", "EPOCH", "GAUSSIAN_MECHANISMS",
           "Hierarchy", "MECHANISMS", "PURE_MECHANISMS", "RANGE_ONLY_MECHANISMS", "Range",
           "ReleaseSpec", "VALUE_TYPES", "View", "check_grid", "day_number", "on_grid",
           "own_population_views"]
