"""The ``grinding`` command run in this process, as its console script runs it.

``robot_grinding_sim.cli.main(argv)`` is the console script's entry point: the same parsing, errors
and exit codes. Run here, a command costs what it does, not an interpreter start and the
package's imports (2-5 s each on 2 busy cores). The tests that check the console script itself
(its exit code as a process, signals) keep a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``grinding ARGS`` in ``cwd``: its exit code, stdout and stderr, as ``subprocess.run`` gives them."""
    from robot_grinding_sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(["grinding", *args], code, out.getvalue(), err.getvalue())
