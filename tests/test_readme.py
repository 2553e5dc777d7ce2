"""Every code block in the README runs: the Python blocks in order in one namespace, the
TOML spec through `dpsql release`, and every `dpsql …` shell line through the CLI. The two
setup commands (virtualenv + pip) are what CI itself runs, so they are checked by CI."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(README.read_text()) if kind == lang]


def test_setup_commands_are_the_ones_ci_runs():
    bash = blocks("bash")
    assert bash[0].strip().endswith("dpsql demo")
    ci = (README.parent / ".ci" / "run").read_text()
    assert "-m pytest -q" in bash[1] and ".venv/bin/python -m pytest -q" in ci


def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    python = blocks("python")
    assert len(python) >= 3
    namespace: dict = {}
    exec(compile(python[0], "README:curator", "exec"), namespace)
    assert Path("trips.duckdb").exists()
    # The TOML spec and the shell lines, against the same data.
    Path("trips.toml").write_text(blocks("toml")[0])
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    for body in blocks("bash")[2:]:
        for line in body.splitlines():
            line = line.split("#")[0].strip()
            if not line.startswith("dpsql "):
                continue
            args = shlex.split(line)[1:]
            if args[0] == "release":
                args += ["--seed", "1", "--quiet"]
            proc = subprocess.run([sys.executable, "-m", "dpsql.cli", *args],
                                  capture_output=True, text=True, env=env, timeout=300)
            assert proc.returncode == 0, (line, proc.stderr)
    with pytest.warns(UserWarning, match="not private"):  # trips.duckdb from --seed above
        for i, body in enumerate(python[1:], start=1):
            exec(compile(body, f"README:block{i}", "exec"), namespace)
