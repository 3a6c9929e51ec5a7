"""The house style (HOUSE_STYLE.md, "Formatting and linting"), held by ruff.

Both commands run over the whole checkout with ruff.toml's settings (Falcon's), from
the ruff installed next to the interpreter running the tests (requirements-dev.txt).
"""

import pathlib
import subprocess
import sys

from tests.support import ROOT

RUFF = pathlib.Path(sys.executable).parent / 'ruff'


def ruff(*arguments):
    # --no-cache: concurrent runs from other checkouts never share a cache to race on.
    return subprocess.run(
        [str(RUFF), *arguments, '--no-cache', '.'],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_ruff_check_finds_nothing():
    result = ruff('check', '--output-format=concise')
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_would_change_nothing():
    result = ruff('format', '--check')
    assert result.returncode == 0, result.stdout + result.stderr
