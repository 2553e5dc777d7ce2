"""``dpsql advise`` and the workload part of ``dpsql release --dry-run``: what the
curator sees before any budget is spent (the tables come from :mod:`dpsql.workload.show`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dpsql.errors import SpecError
from dpsql.spec import ReleaseSpec
from dpsql.spec_files import read_text
from dpsql.spec_workload import Workload, read_queries
from dpsql.workload.optimise import COVARIANCE_TRIAL_BINS, optimise
from dpsql.workload.predict import predict_spec
from dpsql.workload.show import errors_table, refused_table, summary_text, views_table
from dpsql.workload.suggest import suggestions, with_views
from dpsql.workload.toml_out import spec_toml


def print_workload(console: Any, spec: ReleaseSpec) -> None:
    """The spec's workload under its own weights: refusals, per-class errors, summary."""
    preds = predict_spec(spec)
    for table in (refused_table(preds), errors_table(preds)):
        if table is not None:
            console.print(table)
    console.print(summary_text(preds) + "; `dpsql advise` proposes a better budget split")


def run_advise(console: Any, spec_path: str, queries_path: str | None = None, *,
               write: str | None = None, add_views: bool = False, fanouts: bool = False,
               covariance_bins: int = COVARIANCE_TRIAL_BINS) -> int:
    """Print the advice on ``spec_path`` (its ``[workload]`` plus ``queries_path``) and
    write the optimised spec to ``write``; the exit status (2: no workload)."""
    spec = ReleaseSpec.from_toml(spec_path)
    queries = list(spec.workload.queries) if spec.workload else []
    if queries_path:
        queries += read_queries(read_text("queries", Path(queries_path)), queries_path)
    if not queries:
        console.print("error: no workload: give QUERIES.sql or a [workload] in the spec "
                      "(see docs/spec.md)")
        return 2
    before = predict_spec(spec, queries)
    suggested = suggestions(spec, before)
    table = refused_table(before, suggested)
    if table is not None:
        console.print(table)
    target = with_views(spec, [v for v, _ in suggested]) if add_views else spec
    result = optimise(target, queries, covariance_bins=covariance_bins, fanouts=fanouts)
    console.print(views_table(spec, result.spec))
    for line in result.changes:
        console.print(f"changed: {line}")
    console.print(errors_table(before, result.after))
    console.print(summary_text(before, result.after))
    if suggested and not add_views:
        console.print(f"{len(suggested)} view(s) would answer the refused queries: "
                      "--add-views adds them to the optimised spec")
    if write:
        out = replace(result.spec, workload=Workload(tuple(queries)))
        text = spec_toml(out, f"written by dpsql advise from {spec_path}: the budget split "
                              "optimised for the [workload] below")
        try:
            Path(write).write_text(text, encoding="utf-8")
        except OSError as err:
            raise SpecError(f"--write: cannot write {write!r}: {err.strerror or err}; "
                            "choose a writable path") from err
        console.print(f"wrote {write}: check it, then dpsql release {write} -o RELEASE")
    console.print("nothing was read and no budget was spent: these are predictions from "
                  "the views' error models")
    return 0


__all__ = ["print_workload", "run_advise"]
