"""`plan_release` (``dpsql release --dry-run``): the guarantee, budget shares and error
models of a spec, without reading any data. Error models are functions of public
parameters only (DESIGN, accuracy), so the dry run must give exactly the real build's
mechanisms' models, except InfTDA's calibration, which the build measures on the
released counts; reconciliation then conditions the real-valued ones on released
values, which a dry run cannot know."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest

from dpsql.datasets import trips_spec
from dpsql.release import build_release, plan_release
from dpsql.spec import ReleaseSpec


def _spec(base, neighbouring: str, optimal: bool) -> ReleaseSpec:
    d = trips_spec(0.5)
    d["neighbouring"] = neighbouring
    if optimal:
        d["views"].append({"name": "dist_opt", "levels": ["distance"],
                           "mechanism": "cascade", "covariance": "optimal"})
    return ReleaseSpec.from_dict(d, base_dir=base)


@pytest.mark.parametrize("neighbouring,optimal", [("add_remove", True), ("substitute", False)])
def test_dry_run_gives_the_error_models_of_the_real_build(trips_data, tmp_path,
                                                           neighbouring, optimal):
    spec = _spec(trips_data, neighbouring, optimal)
    planned = plan_release(spec, seed=5)
    reconciled = build_release(spec, tmp_path / "rec.duckdb", seed=5, progress=False)
    for name, v in reconciled.views.items():  # the mechanisms' models, before agreeing
        own = v.error_params.get("base", v.error_params)
        assert model_without_calibration(own) == \
            model_without_calibration(planned.views[name].error_params), name
    spec = replace(spec, reconcile=False)
    built = build_release(spec, tmp_path / "r.duckdb", seed=5, progress=False)
    assert planned.views.keys() == built.views.keys()
    for name, v in built.views.items():
        p = planned.views[name]
        assert (p.mechanism, p.budget, p.levels) == (v.mechanism, v.budget, v.levels)
        # InfTDA's calibration is measured on the released counts at build time: the dry
        # run shows the nominal one (kappa 1, so its stderr is sigma); the rest is equal
        assert model_without_calibration(p.error_params) == \
            model_without_calibration(v.error_params), name
        for a, b in zip(p.error_model.level_summary(), v.error_model.level_summary()):
            assert a["bound95"] == b["bound95"]
            if "calibration" in p.error_params:
                assert a["stderr"] == pytest.approx(math.sqrt(a["sigma2"]))
                assert b["stderr"] == pytest.approx(a["stderr"], rel=0.5)
            else:
                assert a == b
    assert (planned.rho, planned.epsilon, planned.delta, planned.rng) == \
        (built.rho, built.epsilon, built.delta, built.rng)


def test_dry_run_never_opens_the_source(trips_data, tmp_path):
    """The source is replaced by bytes no reader accepts: a dry run still succeeds (it
    never opened it), and a real build fails on it."""
    base = tmp_path / "data"
    base.mkdir()
    shutil.copy(trips_data / "geo.csv", base / "geo.csv")  # the public spine
    (base / "trips.parquet").write_bytes(b"not a parquet file")
    spec = ReleaseSpec.from_dict(trips_spec(), base_dir=base)
    planned = plan_release(spec)
    assert set(planned.views) == {"geo_mode", "geo_gauss", "dist", "age_tree", "mode_dist"}
    assert planned.created.startswith("not built: dry run")
    assert not planned.seeded  # the randomness line a real (unseeded) build would record
    with pytest.raises(Exception):
        build_release(spec, tmp_path / "r.duckdb", progress=False)


def test_cli_dry_run_writes_nothing(trips_data, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "trips"
source = "{tmp_path / 'missing.parquet'}"
neighbouring = "add_remove"

[budget]
rho = 1.0

[attributes.distance]
kind = "range"
lower = 0
upper = 256
bins = 128

[[views]]
name = "dist"
levels = ["distance"]
mechanism = "cascade"
""")
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "release", str(spec),
                           "--dry-run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "dist" in proc.stdout and "cascade" in proc.stdout and "σ" in proc.stdout
    assert "no data was read and nothing was written" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "release", str(spec)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "-o RELEASE" in proc.stdout + proc.stderr


def model_without_calibration(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != "calibration"}


def test_dry_run_and_inspect_show_value_types_and_null_policies(trips_data, tmp_path):
    """The attributes table: each attribute's type (declared, or inferred once built),
    its NULL policy and the views over it (those a drop affects)."""
    from rich.console import Console

    from dpsql.present import attribute_table
    from dpsql.release import open_release

    d = trips_spec(1.0)
    d["attributes"]["mode"]["on_null"] = "category"
    d["attributes"]["age"]["on_null"] = "drop"
    d["attributes"]["geo"]["on_null"] = "category"
    spec = ReleaseSpec.from_dict(d, base_dir=trips_data)

    def shown(release) -> dict[str, list[str]]:
        console = Console(width=200, record=True)
        console.print(attribute_table(release))
        rows = [line.split("│") for line in console.export_text().splitlines()
                if line.startswith("│")]
        cells = {r[1].strip(): [c.strip() for c in r[2:-1]] for r in rows}
        # the public domain column (dpsql.present._domain_text) is checked elsewhere
        return {name: c[:2] + c[3:] for name, c in cells.items()}

    planned = shown(plan_release(spec))
    assert planned["age"] == ["range", "inferred at release", "drop", "age_tree"]
    assert planned["mode"] == ["categorical", "", "NULL category", "geo_mode, mode_dist"]
    assert planned["distance"][2:] == ["error (refused)", "dist, mode_dist"]
    assert planned["geo"][:3] == ["hierarchy", "", "NULL branch"]
    d2 = trips_spec(1.0)  # a dry run reads no data: an attribute the source lacks is fine
    d2["attributes"]["duration"] = {"kind": "range", "lower": "2013-01-01",
                                    "upper": "2013-03-01", "unit": "month",
                                    "on_null": "category"}
    assert shown(plan_release(ReleaseSpec.from_dict(d2, base_dir=trips_data)))["duration"] \
        == ["range", "date, by month", "NULL node", "none"]
    out = tmp_path / "t.duckdb"
    build_release(spec, out, seed=1, progress=False)
    built = shown(open_release(out))
    assert built["age"][1] == "integer" and built["distance"][1] == "real (x <= v is x < v)"
