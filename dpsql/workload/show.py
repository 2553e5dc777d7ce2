"""What ``dpsql advise`` and ``dpsql release --dry-run`` print about a workload: tables,
returned (STYLE §7: return, don't print), shared by the CLI and any notebook.

Queries with the same view, level and predicted errors are one row (a *class*): sixteen
``carrier = …`` points answered by one level are one line, "(+15 alike)". Errors are
root mean squared errors of one output row (the square root of the predicted variance;
for a view whose model gives bounds, the 95 % bound / 1.96, marked ``≈``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from dpsql.spec import ReleaseSpec
from dpsql.workload.predict import Prediction, weighted_mse

MAX_TEXT = 70


def _short(text: str, n: int = MAX_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _label(p: Prediction) -> str:
    return p.query.name or _short(p.query.sql)


def _rmse(p: Prediction | None) -> str:
    if p is None or p.variance is None:
        return "—"
    mark = "≈" if p.family == "bound" else ""
    return f"{mark}{math.sqrt(p.variance):,.2f}"


def classes(before: Sequence[Prediction], after: Sequence[Prediction] | None = None
            ) -> list[tuple[Prediction, Prediction | None, int]]:
    """(first query, its optimised prediction, how many alike) per class, in order."""
    after = list(after) if after is not None else [None] * len(before)
    seen: dict[tuple, int] = {}
    out: list[list] = []
    for b, a in zip(before, after):
        if b.variance is None:
            continue
        key = (b.views, round(b.variance, 9), None if a is None else
               (a.views, round(a.variance or 0.0, 9)))
        if key in seen:
            out[seen[key]][2] += 1
        else:
            seen[key] = len(out)
            out.append([b, a, 1])
    return [tuple(x) for x in out]


def refused_table(predictions: Sequence[Prediction],
                  suggested: Sequence[tuple] = ()) -> Table | None:
    """The queries the spec cannot answer, the planner's reason, and the view to add."""
    refused = [p for p in predictions if p.variance is None]
    if not refused:
        return None
    fix = {id(p): view for view, preds in suggested for p in preds}
    t = Table(title=f"{len(refused)} of {len(predictions)} workload queries cannot be "
                    "answered by this spec", title_justify="left")
    for c in ("query", "why", "smallest change that answers it"):
        t.add_column(c, overflow="fold")
    for p in refused:
        view = fix.get(id(p))
        change = (f'add [[views]] name = "{view.name}", levels = '
                  f'{list(view.levels)}' if view is not None else "")
        t.add_row(Text(_label(p)), Text(_short(p.refused or "", 110)), Text(change))
    return t


def views_table(spec: ReleaseSpec, optimised: ReleaseSpec) -> Table:
    """Each view's weight, level weights and covariance: as written, and optimised."""
    t = Table(title="budget split (weights are proportions; the total is unchanged)",
              title_justify="left")
    for c in ("view", "mechanism", "weight", "optimised", "level_weights", "optimised ",
              "covariance"):
        t.add_column(c)
    before = {v.name: v for v in spec.views}
    wb = sum(v.weight for v in spec.views)
    wa = sum(v.weight for v in optimised.views)
    for v in optimised.views:
        b = before.get(v.name)
        share_b = f"{float(b.weight):g} ({float(b.weight / wb):.1%})" if b else "new"
        lw_b = _weights(b.level_weights) if b else ""
        cov = v.covariance or ("tree" if v.mechanism == "cascade" else "")
        if b is not None and b.covariance != v.covariance:
            cov = f"{b.covariance or 'tree'} → {v.covariance}"
        t.add_row(v.name, v.mechanism, share_b, f"{float(v.weight):g} "
                  f"({float(v.weight / wa):.1%})", lw_b, _weights(v.level_weights), cov)
    return t


def _weights(lw) -> str:
    return "equal" if not lw else ", ".join(f"{float(w):g}" for w in lw)


def errors_table(before: Sequence[Prediction], after: Sequence[Prediction] | None = None,
                 title: str = "predicted error of each workload query (RMSE of one row)"
                 ) -> Table:
    """Per class: the view and level read, the predicted RMSE as written (and optimised)."""
    t = Table(title=title, title_justify="left")
    t.add_column("query (class)", overflow="fold")
    t.add_column("weight", justify="right")
    t.add_column("view, level")
    t.add_column("as written" if after is not None else "RMSE", justify="right")
    if after is not None:
        t.add_column("view, level ")
        t.add_column("optimised", justify="right")
        t.add_column("ratio", justify="right")
    for b, a, n in classes(before, after):
        label = _label(b) + (f" (+{n - 1} alike)" if n > 1 else "")
        row = [Text(label), f"{float(b.query.weight):g}", _where(b), _rmse(b)]
        if after is not None:
            ratio = (math.sqrt(a.variance / b.variance) if a and a.variance is not None
                     and b.variance else None)
            row += [_where(a), _rmse(a), "—" if ratio is None else f"{ratio:.2f}"]
        t.add_row(*row)
    return t


def _where(p: Prediction | None) -> str:
    if p is None:
        return ""
    return "; ".join(f"{v} l{k}" for v, k in p.views)


def summary_text(before: Sequence[Prediction], after: Sequence[Prediction] | None = None
                 ) -> str:
    """The weighted workload RMSE as written (and optimised, with the ratio)."""
    rb = math.sqrt(weighted_mse(before))
    answered = sum(p.variance is not None for p in before)
    text = (f"weighted workload RMSE: {rb:,.3f} as written ({answered} of {len(before)} "
            "queries answered)")
    if after is not None:
        ra = math.sqrt(weighted_mse(after))
        text += f"; {ra:,.3f} optimised ({ra / rb:.2f}x)" if rb else f"; {ra:,.3f} optimised"
    return text


__all__ = ["classes", "errors_table", "refused_table", "summary_text", "views_table"]
