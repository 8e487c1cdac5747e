"""The ``grinding`` command as a user runs it: a real subprocess of the installed console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robot_grinding_sim.cli import COMMANDS

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRINDING, *args], capture_output=True, text=True, timeout=timeout)


def test_top_level_help_lists_every_subcommand() -> None:
    out = run("--help")
    assert out.returncode == 0, out.stderr
    for name in COMMANDS:
        assert name in out.stdout, f"`grinding --help` does not list {name}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name: str) -> None:
    out = run(name, "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Usage: grinding " + name in out.stdout


def test_unknown_subcommand_is_exit_2_one_line() -> None:
    out = run("no-such-command")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-command" in lines[0]


def test_bad_option_is_exit_2_one_line() -> None:
    out = run("bounce", "--no-such-option")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--no-such-option" in lines[0]


def test_version() -> None:
    out = run("--version")
    assert out.returncode == 0 and "grinding" in out.stdout
