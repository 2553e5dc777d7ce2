"""The build's progress display appears only for builds that run long enough to need it,
follows the stages once shown, and is always torn down."""

from __future__ import annotations

from dpsql.release.build import _Progress


def test_a_short_build_never_starts_the_display():
    bar = _Progress(True, delay=60)
    with bar:
        bar.stage("counting")
    assert bar._progress is None and bar._done
    bar._timer.join(5)  # cancelled: the thread ends without showing anything
    assert not bar._timer.is_alive() and bar._progress is None


def test_a_long_build_shows_the_current_stage_then_tears_down():
    bar = _Progress(True, delay=0.01)
    with bar:
        bar.stage("reading")
        bar._timer.join()  # the delay has passed: the display is up
        assert bar._progress is not None
        task = bar._progress.tasks[0]
        assert task.description == "reading"
        bar.stage("writing")
        assert task.description == "writing"
    assert bar._progress is None


def test_disabled_display_starts_nothing():
    bar = _Progress(False)
    with bar:
        bar.stage("x")
    assert bar._timer is None and bar._progress is None


def _stages(monkeypatch, data, spec: dict, out) -> list[str]:
    """The stage texts a real build of ``spec`` shows, in order."""
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    shown: list[str] = []
    monkeypatch.setattr(_Progress, "stage", lambda self, text: shown.append(text))
    build_release(ReleaseSpec.from_dict(spec, base_dir=data), out, seed=3, progress=False)
    return shown


def test_the_stages_say_which_view_of_how_many_and_which_replicate(
        trips_data, tmp_path, monkeypatch):
    from dpsql.datasets import trips_spec

    spec = trips_spec(1.0)
    n = len(spec["views"])
    shown = _stages(monkeypatch, trips_data, spec, tmp_path / "a.duckdb")
    for i, view in enumerate(spec["views"], 1):
        assert f"view {i} of {n} ({view['name']}): counting" in shown
        assert f"view {i} of {n} ({view['name']}): {view['mechanism']}" in shown
    # reconciled views: one bootstrap of the whole pipeline, counted by replicate
    replicates = [t for t in shown if t.startswith("calibrating the error models: replicate")]
    assert replicates[0].startswith("calibrating the error models: replicate 1 of ")
    B = int(replicates[0].split(" of ")[1].split()[0])
    assert len(replicates) == B > 1
    assert shown[-1] == "writing the release"


def test_views_calibrated_alone_count_their_replicates(trips_data, tmp_path, monkeypatch):
    from dpsql.datasets import trips_spec

    spec = {**trips_spec(1.0), "reconcile": False}
    shown = _stages(monkeypatch, trips_data, spec, tmp_path / "b.duckdb")
    for name, k in (("geo_mode", 1), ("mode_dist", 2)):
        mine = [t for t in shown if t.startswith(f"view {name} ({k} of 2 InfTDA views): "
                                                 "calibrating the error model, replicate ")]
        assert mine and mine[0].endswith("replicate 1 of " + mine[-1].split(" of ")[-1])
        assert len(mine) == int(mine[-1].split(" of ")[-1]) > 1
