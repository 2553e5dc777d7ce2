"""Every code block in the README runs.

* The two setup commands (virtualenv + pip): the test command must be exactly the one
  ``.ci/run`` runs, which CI therefore checks; the demo is run by tests/e2e/test_demo.py.
* The TOML spec is saved as ``trips.toml``, as the README says, and used by the Python
  curator block and by ``dpsql release``.
* The Python blocks run in order in one namespace.
* Every other ``bash`` line is a ``dpsql`` command, run through the CLI. A line that is
  not one fails the test, so a new shell example cannot be left unchecked.
* The ``sql`` blocks run in a plain DuckDB connection on the release file, without
  dpsql, as the README promises; except a block whose first line is ``-- NAME.sql: …``,
  which is a file the README asks the reader to save (``queries.sql`` for
  ``dpsql advise``): it is saved under that name and used by the shell lines.
* ``text`` blocks are not code (the layout). Any other block kind fails the test.
* The benchmark table equals what ``benchmarks/summary.py`` makes from the committed
  ``benchmarks/results/*.json``, so it can never drift from them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
KINDS = {"bash", "toml", "python", "sql", "text"}


def all_blocks() -> list[tuple[str, str]]:
    """(kind, body) of every fenced block, in order."""
    out, kind, body, inside = [], "", [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if inside:
                out.append((kind, "\n".join(body) + "\n"))
                inside = False
            else:
                kind, body, inside = line[3:].strip(), [], True
        elif inside:
            body.append(line)
    assert not inside, "README.md has an unclosed code block"
    return out


def saved_file(body: str) -> str | None:
    """The file name of an ``sql`` block that the README asks to save, else None."""
    import re

    match = re.match(r"-- ([\w.-]+\.sql):", body)
    return match.group(1) if match else None


def blocks(kind: str) -> list[str]:
    return [body for k, body in all_blocks() if k == kind]


def test_every_block_has_a_kind_this_test_runs():
    kinds = [k for k, _ in all_blocks()]
    assert set(kinds) <= KINDS, f"blocks this test does not run: {set(kinds) - KINDS}"


def test_commands_that_open_a_release_are_installed_by_pip():
    """An inline command on a release file (`dpsql serve trips.duckdb`) names a program
    that `pip install -e .` puts in the venv, unless its paragraph says where else the
    program comes from (the DuckDB shell is not on PyPI in a version that reads DuckDB 2
    files)."""
    import re

    venv_bin = Path(sys.executable).parent
    paragraphs = README.read_text().split("\n\n")
    commands = 0
    for para in paragraphs:
        for prog in re.findall(r"`([a-z][\w.-]*) [^`]*\.duckdb\b[^`]*`", para):
            commands += 1
            if not (venv_bin / prog).exists():
                assert "pip does not install" in para, (
                    f"README shows `{prog} ...` on a release, but pip installs no {prog} "
                    f"into {venv_bin}: say where it comes from")
    assert commands >= 2


def test_setup_commands_are_the_ones_ci_runs():
    bash = blocks("bash")
    assert bash[0].strip().endswith(".venv/bin/dpsql demo")
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
                if ln.strip() and not ln.strip().startswith("#")]
    assert ci_lines[-1] == ".venv/bin/python -m pytest -q -n 2"
    assert bash[1].strip().endswith("&& " + ci_lines[-1])
    assert '.venv/bin/pip install -e ".[test]"' in bash[1]


def cli(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "dpsql.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    python = blocks("python")
    assert len(python) >= 3
    Path("trips.toml").write_text(blocks("toml")[0])
    namespace: dict = {}
    exec(compile(python[0], "README:curator", "exec"), namespace)
    assert Path("trips.duckdb").exists()

    # The shell lines, against the same data: the release is rebuilt seeded (tests only).
    # The files they read are the README's own blocks (queries.sql), never written here.
    saved = {saved_file(body): body for body in blocks("sql") if saved_file(body)}
    assert "queries.sql" in saved, "README runs dpsql advise on queries.sql: show it"
    for name, body in saved.items():
        Path(name).write_text(body)
    ran = []
    for body in blocks("bash")[2:]:
        for line in body.splitlines():
            line = line.split("  #")[0].strip()
            if not line:
                continue
            assert line.startswith("dpsql "), f"README shell line this test cannot run: {line}"
            args = shlex.split(line)[1:]
            if args[0] == "release":
                # the README's shell lines are an alternative to its Python block, which
                # already wrote trips.duckdb: rebuilding over it needs --replace
                args += ["--seed", "1", "--quiet", "--replace"]
            proc = cli(args)
            assert proc.returncode == 0, (line, proc.stderr)
            ran.append((args[0], proc.stdout))
    assert {"release", "inspect", "query"} <= {c for c, _ in ran}
    statements = saved["queries.sql"].count(";")
    assert any(c == "advise" and f"{statements} of {statements} queries answered" in
               " ".join(out.split()) for c, out in ran), "dpsql advise left README queries out"
    if any(c == "report" for c, _ in ran):
        assert Path("report.html").stat().st_size > 1000
    answers = [json.loads(out) for c, out in ran if c == "query" and out.lstrip().startswith("{")]
    assert answers and all(a["rows"] and a["dp_info"]["private"] for a in answers)

    with pytest.warns(UserWarning, match="not private"):  # trips.duckdb from --seed above
        for i, body in enumerate(python[1:], start=1):
            exec(compile(body, f"README:block{i}", "exec"), namespace)
    # the pandas lines give frames of DP answers, with their error columns
    import pandas as pd

    frames = {k: v for k, v in namespace.items() if isinstance(v, pd.DataFrame)}
    assert frames and all(len(f) and f.notna().all().all() for f in frames.values()), frames

    # The sql blocks: a plain DuckDB client, no dpsql functions registered.
    con = duckdb.connect("trips.duckdb", read_only=True)
    for body in blocks("sql"):
        if saved_file(body):
            continue
        code = "\n".join(line.split("--")[0] for line in body.splitlines())
        for statement in filter(str.strip, code.split(";")):
            rows = con.execute(statement).fetchall()
            assert rows, statement
    con.close()


def load_summary():
    spec = importlib.util.spec_from_file_location("bench_summary",
                                                  ROOT / "benchmarks" / "summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_summary"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_benchmark_table_matches_the_committed_results():
    summary = load_summary()
    text = README.read_text()
    assert summary.START in text and summary.END in text
    expected = summary.render_readme(text, summary.table(summary.load_results()))
    assert text == expected, "README's benchmark table is stale: run python benchmarks/summary.py"
    assert "| met |" in text or "| **not met** |" in text


def test_benchmark_rounding_never_flatters():
    summary = load_summary()
    assert summary.sig3(4.6511, summary.LOWER) == "4.66"   # lower is better: round up
    assert summary.sig3(109.89, summary.HIGHER) == "109"   # higher is better: round down
    assert summary.sig3(0.20001, summary.LOWER) == "0.201"


def test_every_benchmark_result_has_a_row_in_the_table():
    """A new benchmarks/results/<name>.json must get its headline row in summary.ROWS."""
    summary = load_summary()
    covered = {row.file for row in summary.ROWS}
    missing = sorted(set(summary.load_results()) - covered)
    assert not missing, f"benchmark results with no row in benchmarks/summary.py: {missing}"
