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
