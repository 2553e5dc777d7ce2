"""`dpsql release` and `dpsql inspect` from the command line, end to end."""

from __future__ import annotations

import subprocess
import sys

import duckdb

from dpsql.cli import main


def _toml(base) -> str:
    return f"""
name = "trips"
source = "{base / 'trips.parquet'}"
neighbouring = "substitute"

[privacy_unit]
column = "traveller"
max_rows = 2

[budget]
epsilon = 2.0
delta = 1e-8

[attributes.geo]
kind = "hierarchy"
columns = ["region", "province", "city"]
spine_file = "{base / 'geo.csv'}"

[attributes.distance]
kind = "range"
lower = 0
upper = 256
bins = 128
fanout = 8

[[views]]
name = "places"
levels = ["geo"]
mechanism = "inftda"

[[views]]
name = "dist"
levels = ["distance"]
mechanism = "btree"
"""


def test_release_then_inspect(trips_data, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(_toml(trips_data))
    out = tmp_path / "out.duckdb"
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "release", str(spec), "-o",
                           str(out), "--seed", "4", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "rows used" in text and "not stored in the release" in text
    assert "places" in text and "inftda" in text and "btree" in text
    assert "(ε=2, δ=1e-08)-DP" in text
    assert "NOT private" in text  # seeded
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT neighbouring, max_rows FROM dpsql_release").fetchall() == \
        [("substitute", 2)]
    # Under substitution the total is public: the InfTDA root is exact.
    n = con.execute("SELECT sum(dp_count) FROM places__l1").fetchall()[0][0]
    assert n == con.execute(
        f"SELECT count(*) FROM (SELECT traveller, row_number() OVER (PARTITION BY traveller) r "
        f"FROM '{trips_data / 'trips.parquet'}') WHERE r <= 2").fetchall()[0][0]
    con.close()

    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "inspect", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "places" in proc.stdout and "95% bound" in proc.stdout
    assert "seeded: not private" in proc.stdout


def test_inspect_missing_file(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.duckdb")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "release" in capsys.readouterr().out
