"""ruff must be clean over the package, tests, benchmarks and launch files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    out = subprocess.run(
        [ruff, "check", "--no-cache", "robot_grinding_sim", "test", "bench", "launch", "setup.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
