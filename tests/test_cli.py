import subprocess
import sys

import dpsql
from dpsql.cli import main


def test_version_flag(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert dpsql.__version__ in capsys.readouterr().out


def test_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "dpsql.cli", "--version"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.startswith("dpsql ")
