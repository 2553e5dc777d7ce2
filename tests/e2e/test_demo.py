"""`dpsql demo` runs end to end on built-in data and labels itself as a demo."""

import subprocess
import sys


def test_demo_runs_and_shows_answers_next_to_truth(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "demo", "--rows", "5000",
                           "--workdir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "NOT a private release" in out
    for title in ("Trips per region", "Trips between 10 and 50 km", "Median age"):
        assert title in out
    assert "truth (demo only)" in out
    assert (tmp_path / "trips.toml").exists() and (tmp_path / "trips.duckdb").exists()
