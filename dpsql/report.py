"""``dpsql report``: a self-contained HTML accuracy report of a release, for a data-release note.

The report shows the release's guarantee in every form, the privacy unit, the budget split
by view, and per view its per-level error (plot and table of levels / nodes / zeros), the
released counts of its first categorical level with their per-answer 95 % intervals; for
each range attribute, the released CDF with a 95 % band and the released per-bin counts.

The numbers come from :mod:`dpsql.report_data`; this module draws and writes them.

Decisions:

* **Built from the release file alone**: the catalog (:func:`open_release`) and the level
  tables through a read-only DuckDB connection; every error figure comes from the view's
  stored error model. Each view's released total carries the 95 % interval an analyst
  gets for ``SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM <view>``, asked
  through :mod:`dpsql.dbapi` (the planner: the same number, never a second formula).
  No raw data is read, so no true value can appear. It imports
  neither ``dpsql.mechanisms`` nor the RNG, and has no timestamp: same file, same report.
* **A release file is untrusted input.** Every string taken from it (release, view,
  attribute and category names, RNG text, budgets) goes through :func:`html.escape`, and
  table and column names are quoted as SQL identifiers. Plot labels escape ``$`` so a
  name cannot switch on matplotlib's mathtext.
* **The CDF band** at bin edge b is the error of the prefix range of leaves [0, b) summed
  over any leading levels (e.g. every ``mode`` of a ``mode × distance`` view), evaluated by
  the view's error model: ``range_variance`` where the model has it (Cascade, b-ary tree:
  exact, vectorised), else ``sum_variance`` of the node set (tree counts: exact), both shown
  as ±1.96 σ (normal approximation; for Laplace noise the true coverage differs). InfTDA's
  band is half the width of the calibrated per-answer 95 % interval that SQL gives for the
  prefix (``dp_ci_low``/``dp_ci_high`` of ``COUNT(*) ... WHERE attr < edge``, run on an
  analyst's connection: the planner's level and the released zeros included, so the
  report and SQL show one number; :mod:`dpsql.accuracy.inftda_answers`; pointwise, like
  the others); a release without a calibration
  (written by an earlier dpsql) shows the Theorem-1 high-probability L∞ bound at
  β = 0.05 instead, which holds for every edge at once. Each plot says which one it shows.
* **Per-answer and simultaneous.** For InfTDA the per-level table gives both the
  calibrated standard error of one node (what ``dp_stderr``/``dp_ci_*`` report, per
  answer) and Theorem 1's bound (what ``dp_bound`` reports, simultaneous over the level). Where the model
  is not vectorised, the band is evaluated at ≤ 257 evenly spaced edges. Bands are drawn
  clipped at 0 (no true count is negative); when one dwarfs the counts (InfTDA's union
  bound over many leaves), the axis keeps to the counts and the plot states the reach.
* **"Zeros"** counts the public nodes of a level whose released count is 0, including the
  nodes an integer mechanism (InfTDA) does not store.
* **matplotlib is optional** (``pip install "dpsql[report]"``) and imported lazily. Figures
  are :class:`matplotlib.figure.Figure` objects drawn on an explicit Agg canvas: pyplot is
  never imported, no backend is switched, and rcParams are only overridden inside an
  ``rc_context`` (usetex off), so the caller's matplotlib state is left as it was. PNGs
  carry no software/version metadata, so the same release gives the same images.
"""

from __future__ import annotations

import base64
import html
import io
import warnings
from pathlib import Path
from typing import Any, Iterable

import duckdb
import numpy as np

from dpsql import __version__
from dpsql._sql import quote_ident
from dpsql.dbapi import SeededReleaseWarning
from dpsql.dbapi import connect as dbapi_connect
from dpsql.errors import Error, NotSupportedError
from dpsql.report_noise import noise_rows
from dpsql.release_file import Release, ViewMeta, open_release
from dpsql.report_data import (MAX_DOMAIN_SHOWN, Z95, LevelRow, RangeCurve,
                               first_level_counts, level_rows, range_curves)

__all__ = ["build_report", "first_level_counts", "level_rows", "range_curves", "LevelRow",
           "RangeCurve"]

_OTHER_DELTAS = (1e-5, 1e-6, 1e-8, 1e-10)


# ----------------------------------------------------------------------------- plots

def _fit(ax: Any, values: np.ndarray, half: np.ndarray) -> None:
    """Scale the y axis to the released values when the error (e.g. InfTDA's union bound
    over many leaves) would flatten them, and state how far the error reaches."""
    lo, hi = min(0.0, float(np.min(values))), float(np.max(values))
    span, reach = max(hi - lo, 1.0), float(np.max(half, initial=0.0))
    if reach > span:
        ax.set_ylim(lo - 0.05 * span, hi + 0.3 * span)
        ax.text(0.01, 0.97, f"the 95% error reaches ±{reach:,.4g}, beyond this plot",
                transform=ax.transAxes, va="top", fontsize=8, color="C3")


_MAX_DRAWN = 2048
"""Steps drawn for a histogram: matplotlib's ``stairs`` takes minutes on a million bins
(measured: 230 s of a 260 s report at 10⁶ bins), and a 7-inch figure shows ~700 pixels."""


def _drawn(edges: np.ndarray, counts: np.ndarray, half: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """A histogram of more than :data:`_MAX_DRAWN` bins as steps of g consecutive bins
    each: the mean count per bin of each step (so the axis still reads "count per bin"),
    its band the mean of the bins' half-widths, and g. Fewer bins pass unchanged, g = 1."""
    K = counts.size
    if K <= _MAX_DRAWN:
        return edges, counts, half, 1
    g = -(-K // _MAX_DRAWN)
    starts = np.arange(0, K, g)
    n = np.minimum(starts + g, K) - starts
    mean = np.add.reduceat(counts, starts) / n
    band = None if half is None else np.add.reduceat(half, starts) / n
    return np.append(edges[starts], edges[-1]), mean, band, g


def _t(text: Any) -> str:
    """Plot text from the release: a literal ``$`` must not start mathtext."""
    return str(text).replace("$", r"\$")


class _Plotter:
    """Draws figures on explicit Agg canvases and returns PNG bytes."""

    def __init__(self) -> None:
        try:
            import matplotlib
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as err:
            from dpsql._install import install_hint

            raise NotSupportedError("dpsql report needs matplotlib, which is not installed: "
                                    f"{install_hint('report')}") from err
        self.mpl, self.Figure, self.Canvas = matplotlib, Figure, FigureCanvasAgg

    def _png(self, fig: Any) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=96, metadata={"Software": None})
        return buf.getvalue()

    def _figure(self) -> tuple[Any, Any]:
        fig = self.Figure(figsize=(7.2, 3.4), layout="constrained")
        self.Canvas(fig)
        return fig, fig.add_subplot()

    def level_errors(self, view: ViewMeta, rows: list[LevelRow]) -> bytes:
        fig, ax = self._figure()
        ks = [r.k for r in rows]
        sd = np.array([np.nan if r.stderr is None else r.stderr for r in rows])
        b95 = np.array([np.nan if r.bound95 is None else r.bound95 for r in rows])
        if view.error_model.reads_support:
            ax.plot(ks, sd, "o-", label="σ of one node (calibrated, per answer)")
            ax.plot(ks, Z95 * sd, "^--", label="95% interval of one node (±1.96 σ)")
            ax.plot(ks, b95, "s:", color="C3",
                    label="95% L∞ bound (Theorem 1: every node of the level at once)")
        elif not np.all(np.isnan(sd)):
            ax.plot(ks, sd, "o-", label="σ of one node (worst node of the level)")
            ax.plot(ks, b95, "s--", label="95% bound, one node (±1.96 σ)")
        else:
            ax.plot(ks, b95, "s-", color="C3",
                    label="95% high-probability L∞ bound (every node of the level at once)")
        vals = np.concatenate([sd, b95])
        vals = vals[np.isfinite(vals) & (vals > 0)]
        if vals.size and vals.max() / vals.min() > 30:
            ax.set_yscale("log")
        ax.set_xticks(ks, [f"{r.k}\n{_t(r.label)}" + (f"\nwidth {r.width_text}" if r.width else "")
                           for r in rows], fontsize=8 if len(rows) <= 8 else 6)
        ax.set_xlabel("level")
        ax.set_ylabel("error of one released count")
        ax.set_title(_t(f"{view.name} ({view.mechanism}): per-level error"), fontsize=10)
        ax.set_ylim(bottom=0 if ax.get_yscale() == "linear" else None)
        ax.grid(alpha=0.3)
        # a fixed place: "best" searches the data and warns (an error in the tests) when slow
        ax.legend(fontsize=8, loc="upper left")
        return self._png(fig)

    def cdf(self, view: ViewMeta, c: RangeCurve) -> bytes:
        """Two panels: the CDF with its band (the band is thin next to large totals), and
        the band's half-width on its own scale."""
        fig = self.Figure(figsize=(7.2, 5.0), layout="constrained")
        self.Canvas(fig)
        top, low = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
        x, mid = c.edges[c.band_at], c.cdf[c.band_at]
        step = -(-c.edges.size // (2 * _MAX_DRAWN))  # a monotone curve: every step-th edge
        shown = np.unique(np.append(np.arange(0, c.edges.size, step), c.edges.size - 1))
        top.plot(c.edges[shown], c.cdf[shown], "-", color="C0", lw=1.5,
                 label="released CDF (count below x)")
        top.fill_between(x, np.maximum(mid - c.band, 0), mid + c.band, color="C0", alpha=0.3,
                         label=_BAND_LEGEND[c.band_kind])
        _fit(top, c.cdf, c.band)
        top.set_ylabel("released count below x")
        top.set_title(_t(f"{view.name}: released CDF of {c.attribute}"), fontsize=10)
        top.legend(fontsize=8, loc="lower right")
        low.plot(x, c.band, "-", color="C3", lw=1.2)
        low.set_ylim(bottom=0)
        low.set_ylabel("95% half-width", fontsize=9)
        low.set_xlabel(_t(c.attribute))
        for ax in (top, low):
            ax.grid(alpha=0.3)
        return self._png(fig)

    def histogram(self, view: ViewMeta, c: RangeCurve) -> bytes:
        fig, ax = self._figure()
        widths = np.diff(c.edges)
        err_label = _BAND_LEGEND[c.band_kind].replace("band", "error")
        if c.counts.size <= 128:
            ax.bar(c.edges[:-1], c.counts, width=widths, align="edge", color="C0",
                   alpha=0.7, edgecolor="white", lw=0.3, label="released count per bin")
            if c.bin_half is not None:  # clipped at 0 below, like the CDF band
                below = np.clip(np.minimum(c.bin_half, c.counts), 0, None)
                ax.errorbar(c.edges[:-1] + widths / 2, c.counts, yerr=[below, c.bin_half],
                            fmt="none", ecolor="k", elinewidth=0.7, capsize=1.5,
                            label=err_label)
        else:
            edges, counts, half, g = _drawn(c.edges, c.counts, c.bin_half)
            each = "" if g == 1 else f" (each step: the mean of {g:,} bins)"
            ax.stairs(counts, edges, color="C0", label="released count per bin" + each)
            if half is not None:
                ax.stairs(counts + half, edges, baseline=np.maximum(counts - half, 0),
                          fill=True, color="C0", alpha=0.25, label=err_label)
        ax.axhline(0, color="k", lw=0.6)
        if c.bin_half is not None:
            _fit(ax, c.counts, c.bin_half)
        ax.set_xlabel(_t(c.attribute))
        ax.set_ylabel("released count")
        ax.set_title(_t(f"{view.name}: released counts per bin of {c.attribute}"), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        return self._png(fig)


# ----------------------------------------------------------------------------- HTML

def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 1e3 else f"{x:.3g}"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (callers escape what comes from the release)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


_NEIGHBOURING = {"add_remove": "add/remove one unit (the total count is private)",
                 "substitute": "substitute one unit's rows (the total count is public)"}

_CSS = (
    'body{font-family:system-ui,"Segoe UI",sans-serif;max-width:62rem;margin:2rem auto;'
    "padding:0 1rem;color:#1d1d1f;line-height:1.45}h1{font-size:1.6rem}h2{font-size:1.3rem;"
    "border-bottom:1px solid #ccc;margin-top:2.2rem}h3{font-size:1.05rem}table{border-collapse:"
    "collapse;margin:.6rem 0;font-size:.9rem}th,td{border:1px solid #ddd;padding:.25rem .55rem;"
    "text-align:left;vertical-align:top;font-variant-numeric:tabular-nums}th{background:#f4f4f6}"
    ".warn{background:#fff4d6;border:1px solid #e0b000;padding:.5rem .8rem}.note{color:#555;"
    "font-size:.9rem}img{max-width:100%;display:block;margin:.6rem 0}")


def _guarantee_section(release: Release) -> str:
    from dpsql.present import guarantee_text
    from dpsql.privacy import ZCDP

    rows = [["guarantee", _e(guarantee_text(release))],
            ["as declared", _e(release.budget.describe())],
            ["ρ-zCDP", _e(f"ρ = {release.rho:.6g}")]]
    if release.delta == 0:
        rows.append(["pure DP", _e(f"ε = {release.epsilon:.6g} (δ = 0)")])
    else:
        rows.append(["(ε, δ)-DP", _e(f"ε = {release.epsilon:.6g} at δ = {release.delta:.3g}")])
    others = []
    for d in _OTHER_DELTAS:
        try:
            eps = float(ZCDP(release.rho).to_approx(d).epsilon)
            others.append(f"ε = {eps:.4g} at δ = {d:g}")
        except (ValueError, ArithmeticError):  # a corrupt ρ: these forms are not shown
            break
    if others:
        rows.append(["(ε, δ)-DP implied by ρ", _e("; ".join(others))])
    rows += [["neighbouring", _e(_NEIGHBOURING.get(release.neighbouring, release.neighbouring))],
             ["privacy unit", _e(release.unit)],
             ["randomness", _e(release.rng)],
             ["created", _e(f"{release.created} by dpsql {release.dpsql_version} "
                            f"(release format {release.format_version})")]]
    warn = ""
    if release.seeded:
        warn = ('<p class="warn"><strong>Not private:</strong> this release was built with a '
                "fixed seed, so its noise is reproducible. Use it for tests and demos only.</p>")
    return (f'<section id="guarantee"><h2>Privacy guarantee</h2>{warn}'
            f"{_table(['form', 'value'], rows, 'guarantee')}"
            '<p class="note">The guarantee covers all views together: each view spends the '
            "share of the budget below, and the shares compose to the total.</p></section>")


def _budget_section(release: Release) -> str:
    total_w = sum(v.weight for v in release.views.values()) or 1
    rows = [[_e(v.name), _e(v.mechanism), _e(v.weight), f"{float(v.weight / total_w):.1%}",
             _e(v.budget.describe()), f"{float(v.budget.to_zcdp().rho):.6g}"]
            for v in release.views.values()]
    rows.append(["<strong>total</strong>", "", "", "100%", _e(release.budget.describe()),
                 f"{release.rho:.6g}"])
    return ('<section id="budget"><h2>Budget split by view</h2>'
            + _table(["view", "mechanism", "weight", "share", "budget", "ρ (zCDP)"], rows,
                     "budget") + "</section>")


def _noise_section(release: Release) -> str:
    rows = [[_e(x) for x in row] for row in noise_rows(release)]
    return ('<section id="noise"><h2>Sensitivity and noise by view</h2>'
            + _table(["view", "mechanism", "sensitivity", "noise"], rows, "noise")
            + '<p class="note">The sensitivity follows from the neighbouring relation and '
            "the rows each unit may contribute; each view's noise is calibrated to it and "
            "to the view's share of the budget. These are the mechanisms' public "
            "parameters, as the build recorded them.</p></section>")


_BAND_TEXT = {
    "variance": "95% band: ±1.96 σ from the exact variance of each prefix (pointwise, "
                "normal approximation)",
    "variance bound": "95% band: ±1.96 σ from an upper bound on the variance of each prefix "
                      "(pointwise, normal approximation)",
    "approximate variance": "95% band: ±1.96 σ from the reconciled view's variance of each "
                            "prefix (approximate: InfTDA shares its marginals; pointwise, "
                            "normal approximation)",
    "bound": "95% band: InfTDA high-probability L∞ bound (β = 0.05, holds for every edge at "
             "once); not a standard error",
    "calibrated": "95% band: InfTDA's calibrated per-answer interval of each prefix, as "
                  "dp_ci_low/dp_ci_high give it for COUNT(*) ... WHERE x < edge (linear "
                  "support model, bootstrap-calibrated at release time; pointwise, normal "
                  "approximation)",
}

_BAND_LEGEND = {"variance": "95% band: ±1.96 σ (exact variance)",
                "variance bound": "95% band: ±1.96 σ (variance upper bound)",
                "approximate variance": "95% band: ±1.96 σ (approximate variance)",
                "bound": "95% band: InfTDA L∞ bound (β = 0.05)",
                "calibrated": "95% band: InfTDA calibrated interval"}


def _estimate_note(view: ViewMeta) -> str:
    """The report's sentence on an InfTDA view's unbiased companion (``dp_estimate()``):
    what it is and when to prefer it, or why this view has none."""
    kept = view.info.get("measurements_kept")
    if kept is None:  # written before the release kept InfTDA's measurements
        return ""
    if not kept:
        return (" This view measured more nodes than a release keeps, so it has no "
                "unbiased estimate (<code>dp_estimate()</code> is NULL).")
    return (" <strong>Unbiased</strong>: <code>dp_estimate()</code> ± 1.96 "
            "<code>dp_estimate_stderr()</code> sums the answer's stored noisy measurements: "
            "no bias and an exact standard error, but no whole counts and wider near zero. "
            "Prefer it for a sum over a sparse tail (one category across many parents), "
            "where the integer counts' bias adds up.")


def _model_text(view: ViewMeta) -> str:
    """The error model's name; a reconciled one names the model it wraps and what the view
    agreed on ("reconciled" alone named no model)."""
    kind = view.error_params.get("kind")
    agreed = (view.info.get("reconciled") or {}).get("marginals") or []
    if kind != "reconciled" or not agreed:
        return f"<code>{_e(kind)}</code>"
    base = (view.error_params.get("base") or {}).get("kind", view.mechanism)
    with_ = "; ".join(f"{m.get('marginal')} with {', '.join(m.get('with', []))}"
                      for m in agreed)
    return f"<code>{_e(base)}</code>, reconciled ({_e(with_)})"


def _dropped_nulls_note(release: Release, view: ViewMeta) -> str:
    """Why this view's total is smaller than the others': the attributes whose NULL rows
    it leaves out (``on_null = "drop"`` acts on the views over the attribute only), or
    nothing."""
    attrs = release.spec.get("attributes", {})
    dropped = [a for a in view.attributes if attrs.get(a, {}).get("on_null") == "drop"]
    if not dropped:
        return ""
    names = ", ".join(dropped)
    return (f" Rows with a NULL {_e(names)} are not in this view (<code>on_null = "
            "\"drop\"</code>), so its total counts fewer rows than views that do not use "
            f"{'it' if len(dropped) == 1 else 'them'}.")


def _total_interval(analyst: Any, release: Release, view: ViewMeta) -> str:
    """`` (95% interval 297,386 to 299,498)``: the released total's error bar, as an
    analyst gets it from ``SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM
    <view>`` (the rows with a NULL in an attribute the view drops left out, as the view
    does); nothing when the view cannot answer it."""
    attrs = release.spec.get("attributes", {})
    where = " AND ".join(f"{quote_ident(a)} IS NOT NULL" for a in view.attributes
                         if attrs.get(a, {}).get("on_null") == "drop")
    sql = (f"SELECT COUNT(*), dp_ci_low(0.95), dp_ci_high(0.95) FROM {quote_ident(view.name)}"
           + (f" WHERE {where}" if where else ""))
    try:
        (_, low, high), = analyst.execute(sql).fetchall()
    except Error:
        return ""
    return f" (95% interval {_num(low)} to {_num(high)})"


def _view_section(plot: _Plotter, con: duckdb.DuckDBPyConnection, release: Release,
                  view: ViewMeta, analyst: Any) -> str:
    rows = level_rows(con, release, view)
    parts = [f'<section class="view" id="view-{_e(view.name)}">',
             f"<h2>View {_e(view.name)}</h2>",
             f"<p>Mechanism <strong>{_e(view.mechanism)}</strong> over "
             f"{_e(' → '.join(view.attributes))}; budget {_e(view.budget.describe())}; "
             f"error model {_model_text(view)}. "
             f"Released total: <strong>{_num(rows[0].total if rows else 0)}</strong>"
             f"{_total_interval(analyst, release, view)}."
             f"{_dropped_nulls_note(release, view)}</p>"]
    bounds_only = all(r.stderr is None for r in rows)
    parts.append('<p class="note">' + (
        "This release's InfTDA model has no calibration (an earlier dpsql wrote it): the "
        "error is its high-probability L∞ bound (Theorem 1): with probability ≥ 95% every "
        "node of a level errs by at most the bound shown, all at once." if bounds_only else
        "Two kinds of error. <strong>Per answer</strong>: σ is the calibrated standard "
        "error of one node (its 95% interval is about ±2 σ around the count less its "
        "estimated bias, at whole counts); <code>dp_stderr</code> and "
        "<code>dp_ci_low/high</code> give it "
        "for every answer, from the released support, calibrated by a bootstrap at release "
        "time. <strong>Simultaneous</strong>: the 95% bound is Theorem 1's, which holds for "
        "every node of the level at once (<code>dp_bound</code>)." + _estimate_note(view)
        if view.error_model.reads_support else
        "σ is the standard error of one released count from the view's error model (the "
        "worst node where nodes differ); the 95% bound is ±1.96 σ.") + "</p>")
    parts.append(_img(plot.level_errors(view, rows), f"per-level error of view {view.name}"))
    table_rows = []
    for r in rows:
        dom = ""
        if r.domain:
            shown = ", ".join(_e(d) for d in r.domain[:MAX_DOMAIN_SHOWN])
            dom = shown + (", …" if len(r.domain) > MAX_DOMAIN_SHOWN else "")
        adds = r.label + (f" (width {r.width_text})" if r.width else "")
        table_rows.append([str(r.k), _e(adds), _e(r.kind), _num(r.public_nodes),
                           _num(r.stored_rows), _num(r.zeros), _num(r.negatives),
                           _num(r.stderr), _num(r.bound95), dom])
    bound = ("95% bound (every node of the level at once)"
             if view.mechanism == "inftda" else "95% bound (one node)")
    parts.append(_table(["level", "adds", "kind", "public nodes", "stored rows", "zeros",
                         "negative", "σ (one node)", bound, "public values"], table_rows,
                        "levels"))
    counts = first_level_counts(con, view)
    if counts:
        lv = view.levels[0]
        more = (f" (the {len(counts)} largest of {lv.n_nodes:,} public values)"
                if lv.n_nodes > len(counts) else "")
        parts.append(f'<h3 class="counts">Released counts by {_e(lv.columns[-1])}</h3>'
                     f'<p class="note">What <code>SELECT {_e(lv.columns[-1])}, COUNT(*), '
                     "dp_ci_low(0.95), dp_ci_high(0.95) ... GROUP BY 1</code> returns"
                     f"{_e(more)}: each count with its per-answer 95% interval.</p>")
        parts.append(_table([_e(lv.columns[-1]), "released count", "95% low", "95% high"],
                            [[_e(lab), _num(c), _num(lo), _num(hi)]
                             for lab, c, lo, hi in counts], "counts"))
    for c in range_curves(con, release, view, analyst):
        band = _BAND_TEXT[c.band_kind]
        summed = (f" Summed over the {c.groups:,} nodes of the levels above "
                  f"{_e(c.attribute)}." if c.groups > 1 else "")
        parts.append(f'<h3 class="range">Range attribute {_e(c.attribute)}</h3>'
                     f'<p class="note">The CDF at each bin edge is the released count of the '
                     f"prefix range of leaves below it (level {c.level}).{summed} "
                     f"{_e(band)}; shown clipped at 0, as no true count is negative.</p>")
        parts.append(_img(plot.cdf(view, c),
                          f"released CDF of {c.attribute} in view {view.name}"))
        g = _drawn(c.edges, c.counts, None)[3]
        each = "" if g == 1 else f" (each step: the mean of {g:,} bins)"
        parts.append(_img(plot.histogram(view, c), f"released counts per bin of "
                          f"{c.attribute} in view {view.name}{each}"))
    parts.append("</section>")
    return "".join(parts)


def _views(release: Release, progress: bool) -> Iterable[ViewMeta]:
    views = list(release.views.values())
    if not progress:
        return views
    from rich.console import Console
    from rich.progress import track

    return track(views, description="report: views", console=Console(stderr=True),
                 transient=True)


def build_report(path: str | Path, out: str | Path | None = None, *,
                 progress: bool = False) -> str:
    """The accuracy report of the release at ``path`` as one self-contained HTML page
    (images embedded as PNG data URIs). Writes it to ``out`` when given. Reads only the
    release file (read-only); raises ``NotSupportedError`` without matplotlib."""
    plot = _Plotter()  # fail early, before any work, when matplotlib is missing
    release = open_release(path)  # clear errors for a missing or non-release file
    con = duckdb.connect(str(path), read_only=True)
    with warnings.catch_warnings():  # the guarantee section says a seeded release is so
        warnings.simplefilter("ignore", SeededReleaseWarning)
        analyst = dbapi_connect(str(path))
    try:
        cursor = analyst.cursor()
        cursor.warn_notices = False
        with plot.mpl.rc_context({"text.usetex": False}):
            sections = [_view_section(plot, con, release, v, cursor)
                        for v in _views(release, progress)]
    finally:
        con.close()
        analyst.close()
    title = f"Accuracy report: {release.name}"
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{_e(title)}</h1><p class=\"note\">Release file "
            f"<code>{_e(Path(path).name)}</code>; report by dpsql {_e(__version__)}. Built "
            "from the release file alone: every number and plot is a released count or comes "
            "from the error model; no true value appears.</p></header>"
            + _guarantee_section(release) + _budget_section(release)
            + _noise_section(release) + "".join(sections)
            + "</body></html>\n")
    if out is not None:
        Path(out).write_text(page, encoding="utf-8")
    return page
