"""Each view's sensitivity and noise, as the accuracy report states them.

A privacy engineer auditing a release asks first what noise was added, calibrated to
what sensitivity. Both are public parameters that the build records in each view's
``info`` (``dpsql_views``): the sensitivity derived from the neighbouring relation and
``max_rows`` (DESIGN, privacy rule 2), and the noise distribution with its scale per
level. This module turns them into one line each; it reads nothing but the catalog.
"""

from __future__ import annotations

from typing import Any, Sequence

from dpsql.release_file import Release, ViewMeta

__all__ = ["noise_rows"]

_SENSITIVITY = {
    "l2_per_level": "L2 per level",
    "l2_root": "L2 of the noisy total",
    "l1_per_level": "L1 per level",
    "l1": "L1 over all levels",
    "mahalanobis_l2": "Mahalanobis L2 (of the covariance)",
}


def _num(x: Any) -> str:
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _per_level(values: Sequence[Any]) -> str:
    """``12 per level`` when the levels agree, else each level's value in order."""
    shown = [_num(v) for v in values]
    if shown and all(s == shown[0] for s in shown):
        return f"{shown[0]} per level"
    return "by level " + ", ".join(shown)


def _sensitivity(info: dict[str, Any]) -> str:
    sens = info.get("sensitivity") or {}
    parts = [f"{_SENSITIVITY[key]} {_num(value)}" for key, value in sens.items()
             if key in _SENSITIVITY]
    rows = info.get("max_rows", sens.get("max_rows"))
    if rows is not None:
        parts.append(f"from {_num(rows)} row(s) per unit, {info.get('neighbouring', '')}")
    return "; ".join(parts) or "—"


def _root(variance: Any, info: dict[str, Any]) -> str:
    if variance is None or float(variance) == 0:
        return ("; the total is exact (substitute: it is public)"
                if info.get("neighbouring") == "substitute" else "; the total is not noised")
    return f"; the total σ² = {_num(variance)}"


def _noise(view: ViewMeta) -> str:
    info = view.info
    if "sigma2_levels" in info:  # InfTDA
        return ("discrete Gaussian, σ² " + _per_level(info["sigma2_levels"])
                + _root(info.get("sigma2_root"), info))
    if info.get("noise") == "discrete_gaussian":  # gaussian_tree: [root, level 1, ...]
        var = info.get("noise_variances") or info.get("noise_scales") or []
        return "discrete Gaussian, σ² " + _per_level(var[1:]) + _root(var[0] if var else
                                                                      None, info)
    if info.get("noise") == "discrete_laplace":  # btree, laplace_tree
        scales = info.get("noise_scales") or []
        root = scales[0] if view.mechanism == "laplace_tree" and scales else False
        levels = scales[1:] if root is not False else scales
        text = "discrete Laplace, scale b " + _per_level(levels)
        return text + ("" if root is False else f"; the total b = {_num(root)}" if root
                       else _root(None, info))
    if "sigma" in info:  # cascade
        cov = info.get("covariance", "tree")
        return (f"correlated Gaussian N(0, σ²C), C the {cov} covariance, σ = "
                f"{_num(info['sigma'])}")
    return "—"


def noise_rows(release: Release) -> list[tuple[str, str, str, str]]:
    """(view, mechanism, sensitivity, noise) for each view, e.g. ``("by_carrier",
    "inftda", "L2 per level 200; L2 of the noisy total 200; from 200 row(s) per unit,
    add_remove", "discrete Gaussian, σ² 320,000 per level; the total σ² = 320,000")``."""
    return [(v.name, v.mechanism, _sensitivity(v.info), _noise(v))
            for v in release.views.values()]
