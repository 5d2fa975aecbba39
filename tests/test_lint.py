"""Lint, format and types are part of the test command (`./run test`, hence CI): ruff's rules and
formatting and mypy's checks, configured in pyproject.toml ([tool.ruff], [tool.mypy])."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the tools the test extra installs, next to this interpreter


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],  # the packages of [tool.mypy]
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_tree_is_clean(command: list[str]) -> None:
    done = subprocess.run([str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"`{' '.join(command)}` found problems:\n{done.stdout}{done.stderr}"
