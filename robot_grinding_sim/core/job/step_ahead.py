"""The job's compiled step, compiled ahead in a second process while the first plans.

On an empty numba cache a job compiles about 70 s of kernels on one core (docs/performance.md,
"The first run"), and two thirds of it is the coupled step the simulation runs
(``compiled_step.run_batch``, the contact engine and the laws), which nothing before the first
simulation needs. :func:`start` (called by ``grinding demo``, ``simulate`` and ``plan`` before they
load the part) starts ``python -m robot_grinding_sim.core.warmup --step`` when the step is not in
the cache; that process compiles the step with the job's own argument types on a one-box mesh
(:func:`~robot_grinding_sim.core.warmup.step`) while the job loads the part, plans and builds
its trajectory on the other core, and :func:`wait` (called by the simulation before its first
batch) waits for it, so the step is then loaded from the cache instead of compiled a second time.
Whatever goes wrong in the helper, the job compiles the step itself, as without it.

``GRINDING_STEP_AHEAD=0`` turns it off.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys

#: the environment variable that turns the helper off ("0")
ENV = "GRINDING_STEP_AHEAD"
#: the longest wait for the helper before the job compiles the step itself, s
WAIT_S = 300.0

_helper: subprocess.Popen[bytes] | None = None


#: the file, in the numba cache folder (core/numba_cache.py: one per version of the kernels' source),
#: that says the step has been compiled there
MARK = "step.compiled"


def _mark_path() -> str | None:
    folder = os.environ.get("NUMBA_CACHE_DIR")
    return os.path.join(folder, MARK) if folder else None


def step_cached() -> bool:
    """Whether the step has been compiled into this cache folder (by the helper or by a job's
    simulation: :func:`mark_compiled`)."""
    path = _mark_path()
    return path is None or os.path.exists(path)  # (no folder known: as if cached, no helper)


def mark_compiled() -> None:
    """Say that the step is in the cache folder (after a simulation ran it, or the helper compiled it)."""
    path = _mark_path()
    if path is None or os.path.exists(path):
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("compiled_step.run_batch\n")
    except OSError:
        pass  # a cache folder that cannot be written: the next job starts a helper again, harmless


def start() -> bool:
    """Start the helper process when the step is not cached (and ``GRINDING_STEP_AHEAD`` is not "0");
    whether it started."""
    global _helper
    if _helper is not None or os.environ.get(ENV, "1") == "0" or step_cached():
        return False
    try:
        _helper = subprocess.Popen([sys.executable, "-m", "robot_grinding_sim.core.warmup", "--step"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return False
    atexit.register(_stop)
    return True


def wait() -> None:
    """Wait (at most :data:`WAIT_S`) for the helper, if one runs."""
    global _helper
    if _helper is None:
        return
    try:
        _helper.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        _stop()
    _helper = None


def _stop() -> None:
    if _helper is not None and _helper.poll() is None:
        _helper.kill()
        _helper.wait()
