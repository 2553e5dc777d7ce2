"""Error models of InfTDA and of the TopDown baselines (pure functions of public values).

``inftda`` (:class:`InfTDAErrorModel`) — high-probability L∞ bounds, no variances.
Per level k the released count of *every* node (stored or not, a missing node counts 0)
satisfies, with probability ≥ 1 − β (``reference/inftda.md`` §3, Theorem 1 with the
digest's two-sided fix, generalised to per-level variances σ²_ℓ as §5.6 says):

    B_k(β) = [√(2σ₀² ln(2J/β))] + Σ_{ℓ=1..k} ( 2·√(2σ²_ℓ · ln(2J·|V_ℓ|/β)) + s )

* J = k noisy levels (+1 for the noisy root of the add/remove variant): β is split
  evenly over them (union bound). |V_ℓ| is the number of public nodes of level ℓ, which
  bounds the number of noise draws there. With σ²_ℓ = d/ρ and no root this is exactly
  Σ √((8d/ρ) ln(2kΠ|X_i|/β)).
* Proof: the deterministic recurrence |err(u)| ≤ |err(parent)| + 2‖η(parent)‖∞
  (inftda §3 steps 1–2; it needs only that the parent's private count is ≥ 0, so it also
  holds under a clamped noisy root, with |err(root)| ≤ |Z₀|) plus the discrete-Gaussian
  tail P[|Z| ≥ t] ≤ 2 exp(−t²/2σ²) (CKS Cor. 9).
* ``s`` (``rounding_slack``) is 0 for InfTDA. TDA-ℓ2 (Euclidean projection y = max(x−τ, 0)
  then rounding) uses s = 1.5: the real projection obeys the same recurrence (τ lies in
  [−H − e/m, H] when the parent error e ≥ 0 and in [−H, H + |e|] when e < 0, with
  H = ‖η‖∞, so every |yᵢ − qᵢ| ≤ |e| + 2H), and rounding to nearest then moving ±1 changes
  an entry by at most 1.5.

Sums of nodes: on the event above, a sum of m distinct nodes of level k errs by at most
m·B_k; and since all |V_k| nodes of a level sum to the (possibly noisy) root, also by at
most B_root + (|V_k| − m)·B_k. ``sum_bound`` returns the smaller. With the release's
support (which nodes came out positive, their parents and fan-outs) the answer path
tightens this further with the minimal cover: every whole sibling set is bounded
through its parent (:func:`dpsql.accuracy.inftda_bounds.cover_bound`).

**Per-answer intervals.** A release built by this version also stores a
:class:`~dpsql.accuracy.inftda_answers.Calibration` (``calibration``): the model then
gives calibrated per-answer standard errors and intervals from the linear support model
(:mod:`dpsql.accuracy.inftda_answers`), and ``sum_variance`` returns a data-free
*prediction* (``exact=False``) for the planner's choice of view. Without it (releases of
earlier versions, the TopDown baselines) the model gives bounds only, as before.

``vanilla_gauss`` (:class:`LeafGaussErrorModel`) — exact variances: independent noise of
variance σ² on every leaf, so a sum of nodes has variance σ² × (number of leaves under
them).

``stability_histogram`` (:class:`StabilityHistogramErrorModel`) — a bound: a leaf errs by
at most τ + |Laplace| (suppression below τ, or noise plus 0.5 rounding), with a union
bound over the |V_d| leaves: τ + b·ln(|V_d|/β) + 0.5 per leaf.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpsql.accuracy.base import ErrorModel, Variance, register
from dpsql.accuracy.inftda_answers import Calibration, prediction_variance
from dpsql.errors import IntegrityError, InvalidPrivacyParameterError


def _beta(beta: float) -> float:
    b = float(beta)
    if not (0.0 < b < 1.0):
        raise InvalidPrivacyParameterError(f"beta must be in (0, 1), got {beta!r}")
    return b


def _n_unique(node_ids: Any) -> int:
    return int(np.unique(np.asarray(node_ids, dtype=np.int64)).size)


@register
class InfTDAErrorModel(ErrorModel):
    """High-probability L∞ bounds of InfTDA (see the module docstring)."""

    kind = "inftda"
    counts_nodes = True  # a sum's bound depends on its number of nodes only

    def __init__(self, sigma2: Sequence[float], level_sizes: Sequence[int],
                 root_sigma2: float | None = None, rounding_slack: float = 0.0,
                 calibration: Calibration | None = None) -> None:
        self.sigma2 = tuple(float(s) for s in sigma2)
        self.level_sizes = tuple(int(n) for n in level_sizes)
        if len(self.level_sizes) != len(self.sigma2) + 1:
            raise IntegrityError("inftda error model: level_sizes must have depth+1 entries")
        if any(not (s > 0 and math.isfinite(s)) for s in self.sigma2):
            raise IntegrityError("inftda error model: every sigma2 must be finite and > 0")
        self.root_sigma2 = None if root_sigma2 is None else float(root_sigma2)
        self.rounding_slack = float(rounding_slack)
        if calibration is not None and len(calibration.kappa) != len(self.sigma2):
            raise IntegrityError("inftda error model: the calibration must have one entry "
                                 "per level")
        self.calibration = calibration

    @property
    def reads_support(self) -> bool:
        """True when answers get per-answer intervals (the release stores the support)."""
        return self.calibration is not None

    def to_params(self) -> dict[str, Any]:
        out = {"kind": self.kind, "sigma2": list(self.sigma2),
               "level_sizes": list(self.level_sizes), "root_sigma2": self.root_sigma2,
               "rounding_slack": self.rounding_slack}
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_json()
        return out

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "InfTDAErrorModel":
        cal = params.get("calibration")
        return cls(params["sigma2"], params["level_sizes"], params.get("root_sigma2"),
                   params.get("rounding_slack", 0.0),
                   None if cal is None else Calibration.from_json(cal))

    def with_calibration(self, calibration: Calibration) -> "InfTDAErrorModel":
        return InfTDAErrorModel(self.sigma2, self.level_sizes, self.root_sigma2,
                                self.rounding_slack, calibration)

    @property
    def depth(self) -> int:
        return len(self.sigma2)

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance | None:
        """None without a calibration; with one, a *prediction* for that many nodes
        (answers use the support: :mod:`dpsql.accuracy.inftda_answers`)."""
        if self.calibration is None:
            return None
        return Variance(prediction_variance(self.calibration, self.sigma2, self.root_sigma2,
                                            self.level_sizes, level, _n_unique(node_ids)),
                        exact=False)

    def _parts(self, level: int) -> int:
        return level + (1 if self.root_sigma2 is not None else 0)

    def root_bound(self, level: int, beta: float) -> float:
        """The root's share of :meth:`node_bound` (0 when n is public)."""
        if self.root_sigma2 is None:
            return 0.0
        j = max(self._parts(level), 1)
        return math.sqrt(2.0 * self.root_sigma2 * math.log(2.0 * j / _beta(beta)))

    def node_bound(self, level: int, beta: float) -> float:
        """B_k(β): with probability ≥ 1 − β every node of ``level`` errs by at most this."""
        return self.level_bounds(level, beta)[level]

    def level_bounds(self, level: int, beta: float) -> list[float]:
        """[B_0, …, B_level] on one event of probability ≥ 1 − β: β is split over the
        noisy levels up to ``level`` (and the noisy root), so every node of every level
        ℓ ≤ ``level`` errs by at most B_ℓ at once (the minimal cover needs that)."""
        if not (0 <= level <= self.depth):
            raise InvalidPrivacyParameterError(f"level {level} is outside 0..{self.depth}")
        b = _beta(beta)
        j = max(self._parts(level), 1)
        total = self.root_bound(level, b)
        out = [total]
        for lvl in range(1, level + 1):
            cells = self.level_sizes[lvl]
            total += 2.0 * math.sqrt(2.0 * self.sigma2[lvl - 1]
                                     * math.log(2.0 * j * cells / b)) + self.rounding_slack
            out.append(total)
        return out

    def sum_bound(self, level: int, node_ids: np.ndarray, beta: float) -> float:
        m = _n_unique(node_ids)
        if m == 0:
            return 0.0
        per_node = self.node_bound(level, beta)
        rest = self.level_sizes[level] - m
        return min(m * per_node, self.root_bound(level, beta) + rest * per_node)

    def level_summary(self) -> list[dict[str, Any]]:
        """Per level: σ², the bound of Theorem 1 at β = 0.05 and, when calibrated, the
        typical standard error of one node (κ_k·σ²_k: a node with many active siblings)."""
        out = []
        for k in range(1, self.depth + 1):
            stderr = None
            if self.calibration is not None:
                stderr = math.sqrt(self.calibration.kappa[k - 1] * self.sigma2[k - 1])
            out.append({"level": k, "sigma2": self.sigma2[k - 1], "stderr": stderr,
                        "bound95": self.node_bound(k, 0.05)})
        return out


def _leaves_under(leaves: Sequence[Any], level: int, node_ids: np.ndarray) -> tuple[float, bool]:
    """Total leaves under ``node_ids`` at ``level`` from the stored per-level description:
    an int (uniform), a list (explicit), or {"max": int} (an upper bound only)."""
    spec = leaves[level]
    ids = np.unique(np.asarray(node_ids, dtype=np.int64))
    if isinstance(spec, dict):
        return float(spec["max"]) * ids.size, False
    if isinstance(spec, (int, float)):
        return float(spec) * ids.size, True
    arr = np.asarray(spec, dtype=np.int64)
    return float(arr[ids].sum()), True


def describe_leaves(counts_by_level: Sequence[np.ndarray], max_list: int = 100_000) -> list:
    """The per-level ``leaves_per_node`` parameter from arrays of leaf counts per node."""
    out: list = []
    for arr in counts_by_level:
        arr = np.asarray(arr, dtype=np.int64)
        if arr.size and np.all(arr == arr[0]):
            out.append(int(arr[0]))
        elif arr.size <= max_list:
            out.append(arr.tolist())
        else:
            out.append({"max": int(arr.max())})
    return out


@register
class LeafGaussErrorModel(ErrorModel):
    """VanillaGauss: variance σ² per leaf, sums of leaves for upper levels (exact)."""

    kind = "vanilla_gauss"

    def __init__(self, sigma2: float, leaves_per_node: Sequence[Any]) -> None:
        self.sigma2 = float(sigma2)
        self.leaves_per_node = list(leaves_per_node)

    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "sigma2": self.sigma2,
                "leaves_per_node": self.leaves_per_node}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "LeafGaussErrorModel":
        return cls(params["sigma2"], params["leaves_per_node"])

    @property
    def depth(self) -> int:
        return len(self.leaves_per_node) - 1

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance | None:
        n, exact = _leaves_under(self.leaves_per_node, level, node_ids)
        return Variance(self.sigma2 * n, exact)

    def level_summary(self) -> list[dict[str, Any]]:
        out = []
        for k in range(1, self.depth + 1):
            v = self.sum_variance(k, np.array([0]))
            out.append({"level": k, "sigma2": self.sigma2, "stderr": v.stderr,
                        "bound95": self.sum_bound(k, np.array([0]), 0.05)})
        return out


@register
class StabilityHistogramErrorModel(ErrorModel):
    """The stability histogram: threshold τ, Laplace scale b, sums of leaves."""

    kind = "stability_histogram"

    def __init__(self, scale: float, threshold: float, leaves_per_node: Sequence[Any]) -> None:
        self.scale = float(scale)
        self.threshold = float(threshold)
        self.leaves_per_node = list(leaves_per_node)

    def to_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "scale": self.scale, "threshold": self.threshold,
                "leaves_per_node": self.leaves_per_node}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "StabilityHistogramErrorModel":
        return cls(params["scale"], params["threshold"], params["leaves_per_node"])

    @property
    def depth(self) -> int:
        return len(self.leaves_per_node) - 1

    def sum_variance(self, level: int, node_ids: np.ndarray) -> Variance | None:
        return None

    def sum_bound(self, level: int, node_ids: np.ndarray, beta: float) -> float:
        n_leaves, _ = _leaves_under(self.leaves_per_node, level, node_ids)
        total_leaves = _leaves_under(self.leaves_per_node, 0, np.array([0]))[0]
        per_leaf = self.threshold + self.scale * math.log(max(total_leaves, 1.0) / _beta(beta)) + 0.5
        return n_leaves * per_leaf

    def level_summary(self) -> list[dict[str, Any]]:
        return [{"level": k, "stderr": None, "bound95": self.sum_bound(k, np.array([0]), 0.05)}
                for k in range(1, self.depth + 1)]


__all__ = ["InfTDAErrorModel", "LeafGaussErrorModel", "StabilityHistogramErrorModel",
           "describe_leaves"]
