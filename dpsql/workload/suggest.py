"""The smallest change of views that answers a query no view covers: one new view over
exactly the attributes the query uses together.

Its levels put categorical and hierarchy attributes first, in the order the spec declares
them, and range attributes last (a range level is then split b-ary under the others, and
a range in last place keeps its prefix table, so ranges cost O(1) per group). The
mechanism is InfTDA, the default: sparse, integer and consistent, for any mix of levels.
A suggestion is one ``[[views]]`` table; adding it takes a share of the budget from the
others, which the optimiser then re-splits (``dpsql advise --add-views``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from dpsql.spec import Range, ReleaseSpec, View
from dpsql.workload.predict import Prediction

MAX_NAME = 60


def suggested_view(spec: ReleaseSpec, needs: Iterable[str], taken: set[str]) -> View:
    """A view over the attributes ``needs`` (names in ``taken`` are avoided)."""
    order = list(spec.attributes)
    levels = sorted(needs, key=lambda a: (isinstance(spec.attributes[a], Range),
                                          order.index(a)))
    base = "_".join(levels)[:MAX_NAME]
    name, i = base, 2
    while name.lower() in taken:
        name, i = f"{base}_{i}", i + 1
    return View(name, tuple(levels), "inftda")


def suggestions(spec: ReleaseSpec, predictions: Sequence[Prediction]
                ) -> list[tuple[View, list[Prediction]]]:
    """One new view per set of attributes that refused queries need, with those queries."""
    taken = {spec.name.lower()} | {v.name.lower() for v in spec.views}
    groups: dict[frozenset[str], list[Prediction]] = {}
    for p in predictions:
        if p.needs and all(a in spec.attributes for a in p.needs):
            groups.setdefault(p.needs, []).append(p)
    out = []
    for needs, preds in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        view = suggested_view(spec, needs, taken)
        taken.add(view.name.lower())
        out.append((view, preds))
    return out


def with_views(spec: ReleaseSpec, views: Sequence[View]) -> ReleaseSpec:
    """``spec`` with ``views`` added (weight 1 each, before any optimisation)."""
    return replace(spec, views=spec.views + tuple(views))


__all__ = ["suggested_view", "suggestions", "with_views"]
