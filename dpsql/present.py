"""What the CLI, the demo and the report print alike: a release's guarantee and its summary.

``dpsql release``, ``dpsql inspect`` and the demo show :func:`release_summary`; the HTML
report and the summary state the guarantee with :func:`guarantee_text`. This module imports
no other part of dpsql, so that the CLI, the demo and the report all import it and none of
them imports another (DESIGN, layering). A release here is anything with the attributes of
:class:`dpsql.release_file.Release`: a built one, a dry run's plan or a file read back.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from dpsql.domains.calendar import axis_text, edges_of
from dpsql.spec import own_population_views


def _add_row(table: Table, *cells: Any) -> None:
    """A row whose text cells are shown as written, never read as rich markup (a
    category label "[bold]x" or "[/]" is data)."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _fmt(x: Any) -> str:
    """A number as the summary shows it: whole units with separators from 1,000 up
    (``5,420``, never ``5.42e+03`` beside a ``10,357``), three significant digits below."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1e3 else f"{x:,.0f}"
    return str(x)


# With an inftda view the bound column is not "(one node)": InfTDA's is Theorem 1's bound,
# which holds for every node of the level at once; the table's caption says so.
BOUND_NOTE = ("σ: the standard error of one node. 95% bound: ±1.96 σ for one node; for "
              "inftda, Theorem 1's bound, which holds for every node of the level at once "
              "(dp_bound), so it is wider than ±1.96 σ.")


def release_summary(release: Any) -> list[Table]:
    """Rich tables describing a release: its guarantee and each view's per-level error."""
    head = Table(title=Text(f"release {release.name!r}"), show_header=False)
    _add_row(head, "guarantee", guarantee_text(release))
    _add_row(head, "neighbouring", release.neighbouring)
    _add_row(head, "privacy unit", release.unit)
    _add_row(head, "randomness", release.rng)
    _add_row(head, "created", f"{release.created} by dpsql {release.dpsql_version}")
    _add_row(head, "reconciled", reconciled_text(release))
    inftda = any(v.mechanism == "inftda" for v in release.views.values())
    views = Table(title="views", caption=BOUND_NOTE if inftda else None)
    for col in ("view", "mechanism", "budget share", "level", "refines", "nodes",
                "σ (one node)", "95% bound" if inftda else "95% bound (one node)"):
        views.add_column(col)
    for v in release.views.values():
        summary = {s["level"]: s for s in v.error_model.level_summary()}
        for lv in v.levels:
            s = summary.get(lv.k, {})
            first = lv.k == 1
            _add_row(views, v.name if first else "", _mechanism_label(v) if first else "",
                          v.budget.describe() if first else "", str(lv.k), _refines(lv),
                          f"{lv.n_nodes:,}", _fmt(s.get("stderr")), _fmt(s.get("bound95")))
    return [head, views, attribute_table(release)]


def release_record(release: Any) -> dict[str, Any]:
    """What :func:`release_summary` shows, as plain JSON-ready values (``dpsql inspect
    --format json``): the guarantee in its forms, and per view its budget and each level's
    error. ``bound95_scope`` says what a bound covers: ``"one node"``, or InfTDA's
    Theorem 1 bound, ``"every node of the level at once"``."""
    views = []
    for v in release.views.values():
        summary = {s["level"]: s for s in v.error_model.level_summary()}
        scope = "every node of the level at once" if v.mechanism == "inftda" else "one node"
        views.append({
            "name": v.name, "mechanism": v.mechanism, "budget": v.budget.describe(),
            "rho": float(v.budget.to_zcdp().rho), "attributes": list(v.attributes),
            "levels": [{"level": lv.k, "refines": _refines(lv), "nodes": lv.n_nodes,
                        "stderr": summary.get(lv.k, {}).get("stderr"),
                        "bound95": summary.get(lv.k, {}).get("bound95"),
                        "bound95_scope": scope} for lv in v.levels]})
    return {"name": release.name, "guarantee": guarantee_text(release),
            "budget": release.budget.describe(), "rho": release.rho,
            "epsilon": release.epsilon, "delta": release.delta,
            "neighbouring": release.neighbouring, "privacy_unit": release.unit,
            "randomness": release.rng, "seeded": bool(release.seeded),
            "created": release.created, "dpsql_version": release.dpsql_version,
            "reconciled": reconciled_text(release).splitlines(), "views": views,
            "attributes": {name: {"kind": a.get("kind"), "type": a.get("type"),
                                  "public_domain": _domain_text(a),
                                  "on_null": a.get("on_null", "error")}
                           for name, a in release.spec.get("attributes", {}).items()}}


_NULL_POLICY = {"error": "error (refused)", "drop": "drop", "category": "NULL category"}


def attribute_table(release: Any) -> Table:
    """Each attribute's kind, value type and NULL policy, with the views the policy
    affects (a ``drop`` leaves NULL rows out of those views only)."""
    out = Table(title="attributes")
    for col in ("attribute", "kind", "type", "public domain", "NULLs", "views over it"):
        out.add_column(col)
    views = release.spec.get("views", [])
    for name, a in release.spec.get("attributes", {}).items():
        kind = a.get("kind", "")
        vtype = ""
        if kind == "range":
            vtype = a.get("type") or "inferred at release"
            if vtype == "decimal":
                vtype += f" ({a.get('resolution'):g})"
            if vtype == "real":  # whole numbers in a float column would need "integer"
                vtype += " (x <= v is x < v)"
            if a.get("unit"):
                vtype += f", by {a['unit']}"
        over = [v["name"] for v in views if name in v.get("levels", [])]
        policy = _NULL_POLICY.get(a.get("on_null", "error"), "?")
        if kind in ("hierarchy", "range") and a.get("on_null") == "category":
            policy = "NULL branch" if kind == "hierarchy" else "NULL node"
        _add_row(out, name, kind, vtype, _domain_text(a), policy, ", ".join(over) or "none")
    return out


def _domain_text(a: dict) -> str:
    """An attribute's public domain in a few words, so that a curator sees what the spec
    declared before spending: ``16 values: 9E, AA, AS, B6, … (+12 more)`` (a header row
    read from a domain file would show here as a value), ``1,500 leaf paths``,
    ``[0, 5,000), 50 bins``; dates and timestamps by their calendar bounds,
    ``[2013-01-01, 2014-01-01), 365 bins by day`` (a bound off by a year shows here;
    a midnight is shown as its date)."""
    kind = a.get("kind")
    if kind == "categorical":
        values = a.get("domain", [])
        return f"{len(values):,} values: {_shown(values, 4)}"
    if kind == "hierarchy":
        return f"{len(a.get('spine', [])):,} leaf paths"
    if kind == "range":
        bins = f"{a.get('bins', 0):,} bins" + (f" by {a['unit']}" if a.get("unit") else "")
        if a.get("type") in ("date", "timestamp"):
            lo, hi = (axis_text(a["type"], float(a[k])).removesuffix(" 00:00:00")
                      for k in ("lower", "upper"))
            return f"[{lo}, {hi}), {bins}"
        return f"[{_fmt(float(a['lower']))}, {_fmt(float(a['upper']))}), {bins}"
    return ""


def _shown(values: list, limit: int = 8) -> str:
    """Up to ``limit`` values, then how many more: ``bike, bus, car, … (+3 more)``; all of
    them when one more would be left ("… (+1 more)" hides no space)."""
    if len(values) == limit + 1:
        limit += 1
    text = ", ".join("NULL" if v is None else str(v) for v in values[:limit])
    return text + (f", … (+{len(values) - limit:,} more)" if len(values) > limit else "")


def _edges(a: Any, labels: list[str] | None = None) -> str:
    """A binned attribute's bin edges: ``0, 4, 8, …, 252, 256 (64 bins of width 4)``;
    ``labels``: the edges as the caller spells them (dates, timestamps), by ``a.unit``."""
    if labels is None:
        shown = [_fmt(float(e)) for e in edges_of(a)]
        size = f"of width {_fmt(float(a.width))}"
    else:
        shown = list(labels)
        size = f"by {getattr(a, 'unit', None) or 'day'}"
    if len(shown) > 6:
        shown = shown[:3] + ["…"] + shown[-2:]
    return f"{', '.join(shown)} ({a.bins:,} bins {size})"


_TYPE_NAMES = {"str": "text", "int": "integer", "float": "real", "bool": "boolean"}


def column_table(release: Any, domains: dict[str, list[tuple]],
                 edges: dict[str, list[str]] | None = None) -> Table:
    """Each attribute column an analyst can name: its attribute, kind, value type, and
    its public domain (categorical and hierarchy columns: the values, truncated; binned
    attributes: the bin edges). ``domains``: attribute -> the rows of its public domain
    table (one tuple per path, in the attribute's column order); ``edges``: attribute ->
    its bin edges spelled as dates or timestamps, for calendar attributes. All of it is
    public."""
    out = Table(title="columns")
    for col in ("column", "attribute", "kind", "type", "domain (public)"):
        out.add_column(col)
    for a in release.attributes.values():
        if a.kind == "range":
            _add_row(out, a.name, a.name, "binned", a.value_type or "real",
                        _edges(a, (edges or {}).get(a.name)))
            continue
        rows = domains.get(a.name, [])
        for i, c in enumerate(a.columns):
            values = list(dict.fromkeys(r[i] for r in rows))  # the domain's order
            label = f"{len(values):,} values: {_shown(values)}"
            vtype = next((_TYPE_NAMES.get(type(v).__name__, type(v).__name__)
                          for v in values if v is not None), "—")
            _add_row(out, c, a.name, a.kind if len(a.columns) == 1 else f"{a.kind} level "
                        f"{i + 1}", vtype, label)
    return out


def reconciled_text(release: Any) -> str:
    """The marginals the views agreed on at release time, one per line, e.g.
    ``total: dist, geo_mode (integer)``; or why there are none."""
    summary = next((v.info["reconciled"]["release"] for v in release.views.values()
                    if "reconciled" in v.info), None)
    if summary is None:
        if len(release.views) <= 1:
            return "—"
        if release.spec.get("reconcile", True) is False:
            return "no (reconcile = false)"
        if str(release.created).startswith("not built"):  # a dry run draws no noise
            spec = release.spec
            own = own_population_views(
                ((v["name"], v["levels"]) for v in spec.get("views", [])),
                {a: d.get("on_null", "error") for a, d in spec.get("attributes", {}).items()})
            if len(release.views) - len(own) >= 2:  # every view shares the total
                return "when built, on shared marginals (the errors below: each view's own)"
            return ("nothing to reconcile (no two views count the same rows: "
                    f"{', '.join(sorted(own))} drop NULL rows of an attribute and each "
                    "count their own)")
        return "nothing to reconcile (no two views count the same rows over a marginal)"
    lines = [f"{m['marginal']}: {', '.join(m['views'])}" + (" (integer)" if m["integer"]
                                                            else "")
             for m in summary["marginals"]]
    lines += [f"not reconciled: {m['marginal']} ({', '.join(m['views'])}): {m['reason']}"
              for m in summary["not_reconciled"]]
    return "\n".join(lines)


def _refines(lv: Any) -> str:
    """What a level splits: a spine level's column (``home_region``: the interleaved
    levels of an O/D view tell apart), else the attribute."""
    return lv.columns[0] if lv.kind == "hierarchy" else lv.attribute


def _mechanism_label(view: Any) -> str:
    """The mechanism, plus the cascade's covariance when it is not the default tree (its
    σ column is then the largest node's, since node variances differ across a level)."""
    if view.info.get("covariance") == "optimal":
        return f"{view.mechanism} (optimal covariance; σ: largest node)"
    return view.mechanism


def guarantee_text(release: Any) -> str:
    """The release's total guarantee in its forms, e.g. ``ρ=1-zCDP; (ε=9.52, δ=1e-09)-DP``."""
    parts = [f"ρ={release.rho:.6g}-zCDP"]
    if release.delta == 0:
        parts.insert(0, f"ε={release.epsilon:.6g} pure DP")
    else:
        parts.append(f"(ε={release.epsilon:.6g}, δ={release.delta:.3g})-DP")
    return "; ".join(parts)
