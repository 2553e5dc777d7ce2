"""Release writes survive kills and full disks, never replace a release silently, and
keep the curator's ledger (dpsql.release.files, dpsql.release.ledger)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.cli import main
from dpsql.errors import OperationalError, ProgrammingError
from dpsql.release import build_release, open_release
from dpsql.release.files import remove_stale_temporaries, temporary_path
from dpsql.release.ledger import LEDGER_NAME, read_ledger, source_fingerprint
from dpsql.spec import ReleaseSpec

SPEC = """\
name = "small"
source = "t.parquet"
neighbouring = "add_remove"
[budget]
rho = 1.0
[attributes.mode]
kind = "categorical"
domain = ["car", "bus", "walk"]
[attributes.distance]
kind = "range"
lower = 0
upper = 64
bins = 64
[[views]]
name = "mode_dist"
levels = ["mode", "distance"]
"""


def _folder(base: Path) -> Path:
    g = np.random.default_rng(0)
    pq.write_table(pa.table({"mode": g.choice(["car", "bus", "walk"], 500),
                             "distance": g.uniform(0, 64, 500)}), base / "t.parquet")
    (base / "s.toml").write_text(SPEC)
    return base


def _spec(base: Path) -> ReleaseSpec:
    return ReleaseSpec.from_toml(base / "s.toml")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --------------------------------------------------------------------------------------
# No silent replacement
# --------------------------------------------------------------------------------------

def test_an_existing_release_is_refused_without_replace(tmp_path, capsys):
    base = _folder(tmp_path)
    out = base / "r.duckdb"
    build_release(_spec(base), out, seed=1, progress=False)
    before = out.read_bytes()
    with pytest.raises(ProgrammingError, match=r"already exists; replacing a release spends "
                                               r"the privacy budget again on the same data"):
        build_release(_spec(base), out, seed=2, progress=False)
    assert out.read_bytes() == before
    assert main(["release", str(base / "s.toml"), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert "--replace" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert out.read_bytes() == before
    rebuilt = build_release(_spec(base), out, seed=2, progress=False, replace=True)
    assert out.read_bytes() != before and open_release(out).name == rebuilt.name


# --------------------------------------------------------------------------------------
# The ledger
# --------------------------------------------------------------------------------------

def test_the_ledger_records_each_release_and_warns_on_the_same_source(tmp_path, capsys):
    base = _folder(tmp_path)
    first = build_release(_spec(base), base / "a.duckdb", seed=1, progress=False)
    assert first.report.prior_releases == []
    second = build_release(_spec(base), base / "b.duckdb", seed=1, progress=False)
    assert [e["release"] for e in second.report.prior_releases] == ["a.duckdb"]
    entries = read_ledger(base)
    assert [e["release"] for e in entries] == ["a.duckdb", "b.duckdb"]
    assert entries[0]["source"] == entries[1]["source"] == source_fingerprint(_spec(base))
    assert entries[0]["budget"] == {"kind": "zcdp", "rho": "1"} and entries[0]["rho"] == 1.0
    # the ledger is the curator's: never inside the release, and it holds no data
    raw = (base / LEDGER_NAME).read_text()
    assert "t.parquet" not in raw and str(base) not in raw
    for name in ("a.duckdb", "b.duckdb"):
        con = duckdb.connect(str(base / name), read_only=True)
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        con.close()
        assert not any("ledger" in t for t in tables)
    # the CLI warns with the releases so far and the total spent on the source
    assert main(["release", str(base / "s.toml"), "-o", str(base / "c.duckdb"), "--seed",
                 "1", "-q"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: this source was already released into this folder 2 time(s): " \
           "a.duckdb (ρ=1," in out
    assert "ρ=2 spent on it so far" in out


def test_a_changed_source_or_another_folder_is_a_new_source(tmp_path):
    base = _folder(tmp_path)
    build_release(_spec(base), base / "a.duckdb", seed=1, progress=False)
    other = base / "elsewhere"
    other.mkdir()
    assert build_release(_spec(base), other / "a.duckdb", seed=1,
                         progress=False).report.prior_releases == []
    before = source_fingerprint(_spec(base))
    pq.write_table(pa.table({"mode": ["car"] * 3, "distance": [1.0, 2.0, 3.0]}),
                   base / "t.parquet")
    assert source_fingerprint(_spec(base)) != before
    assert build_release(_spec(base), base / "b.duckdb", seed=1,
                         progress=False).report.prior_releases == []


def test_an_unreadable_ledger_never_blocks_a_release(tmp_path):
    base = _folder(tmp_path)
    (base / LEDGER_NAME).write_text("{not json")
    build_release(_spec(base), base / "a.duckdb", seed=1, progress=False)
    assert [e["release"] for e in read_ledger(base)] == ["a.duckdb"]
    assert json.loads((base / LEDGER_NAME).read_text())["version"] == 1


# --------------------------------------------------------------------------------------
# Stale temporaries
# --------------------------------------------------------------------------------------

def test_only_our_temporaries_of_dead_writers_are_removed(tmp_path):
    dead = _dead_pid()
    target = tmp_path / "r.duckdb"
    ours_dead = [tmp_path / f".r.duckdb.dpsql-{dead}-0123456789abcdef.tmp",
                 tmp_path / f".r.duckdb.dpsql-{dead}-0123456789abcdef.tmp.wal",
                 tmp_path / f".{LEDGER_NAME}.dpsql-{dead}-00000000000000ff.tmp"]
    alive = [temporary_path(target),  # this process: in use
             tmp_path / f".r.duckdb.dpsql-{os.getppid()}-0123456789abcdef.tmp"]
    foreign = [tmp_path / ".r.duckdb.abc123.tmp", tmp_path / "notes.tmp",
               tmp_path / f".r.duckdb.dpsql-{dead}-xyz.tmp", tmp_path / "r.duckdb.wal"]
    for p in ours_dead + alive + foreign:
        p.write_bytes(b"x")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted(ours_dead)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in alive + foreign)


def test_fifty_random_kills_during_release_leave_the_previous_file_and_no_strays(tmp_path):
    """A writer process is SIGKILLed 50 times at seeded random moments while it rebuilds
    the release in a loop. After every kill the release opens and reads (the old file or
    a complete new one); after one more normal run, the folder holds no temporary.

    Each writer is forked from one process that has imported dpsql already, so that the
    kills land in building and writing rather than in Python's start-up."""
    base = _folder(tmp_path)
    out = base / "r.duckdb"
    build_release(_spec(base), out, seed=1, progress=False)
    zygote = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from dpsql.release import build_release
        from dpsql.spec import ReleaseSpec
        import dpsql.release.build, dpsql.mechanisms.inftda  # noqa: F401 (loaded once)
        spec = ReleaseSpec.from_toml({str(base / 's.toml')!r})
        for line in sys.stdin:
            pid = os.fork()
            if pid == 0:
                for seed in range(10**6):
                    build_release(spec, {str(out)!r}, seed=seed, progress=False, replace=True)
                os._exit(0)
            print(pid, flush=True)
            os.waitpid(pid, 0)
            print("reaped", flush=True)
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    rand = random.Random(20)
    with subprocess.Popen([sys.executable, "-c", zygote], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=env) as proc:
        for _ in range(50):
            proc.stdin.write("go\n")
            proc.stdin.flush()
            child = int(proc.stdout.readline())
            time.sleep(rand.uniform(0.0, 0.25))
            os.kill(child, 9)
            assert proc.stdout.readline().strip() == "reaped"
            release = open_release(out)
            table = release.views["mode_dist"].levels[-1].table
            con = duckdb.connect(str(out), read_only=True)
            assert con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0] > 0
            con.close()
        proc.stdin.close()
    leftovers = [p.name for p in base.iterdir() if p.name.startswith(".")
                 and p.name != LEDGER_NAME]
    build_release(_spec(base), out, seed=1, progress=False, replace=True)
    assert sorted(p.name for p in base.iterdir()) == sorted(
        [LEDGER_NAME, "r.duckdb", "s.toml", "t.parquet"]), leftovers


# --------------------------------------------------------------------------------------
# Disk full
# --------------------------------------------------------------------------------------

def test_a_full_disk_is_one_line_naming_the_folder_and_the_old_file_survives(tmp_path):
    """A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes every write past
    200 kB fail as a full disk would: the release step fails with one line, no
    traceback, and the previous release is untouched."""
    base = _folder(tmp_path)
    out = base / "r.duckdb"
    build_release(_spec(base), out, seed=1, progress=False)
    before = out.read_bytes()
    script = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        from dpsql.cli import main
        sys.exit(main(["release", {str(base / 's.toml')!r}, "-o", {str(out)!r}, "-q",
                       "--replace", "--seed", "2"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: cannot write the release into {str(base)!r}: ")
    assert "the previous 'r.duckdb' is untouched" in lines[0]
    assert out.read_bytes() == before
    assert sorted(p.name for p in base.iterdir()) == sorted(
        [LEDGER_NAME, "r.duckdb", "s.toml", "t.parquet"])


def test_an_unwritable_folder_is_one_operational_error(tmp_path):
    base = _folder(tmp_path)
    blocker = base / "file"
    blocker.write_text("x")
    with pytest.raises(OperationalError, match=r"cannot write the release into"):
        build_release(_spec(base), blocker / "r.duckdb", seed=1, progress=False)


def test_the_ledger_warning_names_the_last_releases_and_counts_the_rest():
    """21 trial releases into one folder made the warning 21 entries long; it names the
    last three, counts the others, and still totals every ρ."""
    from dpsql.release.ledger import spent_text

    prior = [{"release": f"r{i}.duckdb", "rho": 0.5, "created": f"t{i}"} for i in range(21)]
    text = spent_text(prior)
    assert "21 time(s): 18 earlier, then r18.duckdb (ρ=0.5, t18), r19.duckdb" in text, text
    assert "r17.duckdb" not in text and "ρ=10.5 spent on it so far" in text
    assert "r0.duckdb (ρ=0.5, t0);" in spent_text(prior[:1])
