"""``dpsql advise`` and the workload part of ``dpsql release --dry-run``; the spec
written back as TOML."""

from __future__ import annotations

from pathlib import Path

from dpsql.cli import main
from dpsql.datasets import trips_spec
from dpsql.spec import ReleaseSpec
from dpsql.workload.optimise import optimise
from dpsql.workload.toml_out import spec_toml

QUERIES = ["SELECT COUNT(*) FROM trips",
           "SELECT city, COUNT(*) FROM trips GROUP BY city",
           "SELECT COUNT(*) FROM trips WHERE distance BETWEEN 16 AND 100",
           "SELECT COUNT(*) FROM trips WHERE age < 30 AND mode = 'car'"]


def _write_spec(trips_data: Path, tmp_path: Path, workload: bool = True) -> Path:
    raw = trips_spec(1.0)
    if workload:
        raw["workload"] = {"queries": QUERIES}
    path = tmp_path / "spec.toml"
    path.write_text(spec_toml(ReleaseSpec.from_dict(raw, base_dir=trips_data)))
    return path


def test_spec_toml_round_trips(trips_data, tmp_path):
    path = _write_spec(trips_data, tmp_path)
    spec = ReleaseSpec.from_toml(path)
    assert spec == ReleaseSpec.from_dict({**trips_spec(1.0), "workload": {"queries": QUERIES}},
                                         base_dir=trips_data)
    opt = optimise(spec).spec
    (tmp_path / "opt.toml").write_text(spec_toml(opt))
    text = (tmp_path / "opt.toml").read_text()
    assert "level_weights = [" in text and "/" not in text.split("[[views]]")[1].split(
        "level_weights")[0]  # weights as exact decimals, not fractions
    assert ReleaseSpec.from_toml(tmp_path / "opt.toml") == opt


def test_advise_prints_refusals_errors_and_writes_the_spec(trips_data, tmp_path, capsys):
    spec_path = _write_spec(trips_data, tmp_path)
    extra = tmp_path / "more.sql"
    extra.write_text("-- weight: 4\nSELECT region, COUNT(*) FROM trips GROUP BY region;\n")
    out = tmp_path / "optimised.toml"
    assert main(["advise", str(spec_path), str(extra), "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 of 5 workload queries cannot be answered" in text
    assert "no single" in text and '"mode_age"' in text  # the reason, the view to add
    assert "weighted workload RMSE" in text and "optimised (" in text
    assert "no budget was spent" in text
    written = ReleaseSpec.from_toml(out)
    assert len(written.workload.queries) == 5 and written.workload.queries[4].weight == 4
    assert written.views != ReleaseSpec.from_toml(spec_path).views
    assert [v.name for v in written.views] == [v.name for v in
                                              ReleaseSpec.from_toml(spec_path).views]


def test_advise_add_views_answers_the_refused_query(trips_data, tmp_path, capsys):
    spec_path = _write_spec(trips_data, tmp_path)
    out = tmp_path / "optimised.toml"
    assert main(["advise", str(spec_path), "--add-views", "--write", str(out)]) == 0
    capsys.readouterr()
    written = ReleaseSpec.from_toml(out)
    assert "age_mode" not in {v.name for v in written.views}  # categorical first
    assert written.view("mode_age").levels == ("mode", "age")
    assert main(["release", "--dry-run", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 of 4 queries answered" in text


def test_advise_without_a_workload_is_a_usage_error(trips_data, tmp_path, capsys):
    spec_path = _write_spec(trips_data, tmp_path, workload=False)
    assert main(["advise", str(spec_path)]) == 2
    assert "no workload" in capsys.readouterr().out


def test_dry_run_shows_the_workload(trips_data, tmp_path, capsys):
    spec_path = _write_spec(trips_data, tmp_path)
    assert main(["release", "--dry-run", str(spec_path)]) == 0
    text = capsys.readouterr().out
    assert "predicted error of each workload query" in text
    assert "3 of 4 queries answered" in text and "cannot be answered" in text


def test_advise_write_to_a_missing_folder_is_one_line(trips_data, tmp_path, capsys):
    spec_path = _write_spec(trips_data, tmp_path)
    assert main(["advise", str(spec_path), "--write", str(tmp_path / "no" / "o.toml")]) == 1
    err = capsys.readouterr().err
    assert "--write: cannot write" in err and err.count("\n") == 1
