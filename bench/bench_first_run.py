"""Benchmark: the first run of a command on an empty numba cache, and what compiles in it.

Runs ``grinding ARGS`` (default ``demo``, the README's main job) in a child process whose
``NUMBA_CACHE_DIR`` is a fresh temporary folder (the package honours it: core/numba_cache.py), so
every kernel the job uses is compiled, then (``--second``) once more on the cache it filled.
Printed: the load average, the child's CPU time (user + system, with the processes it started and
waited for: the job's step compiled ahead in a second process, core/job/step_ahead.py; on a shared
machine the wall time moves with the load, the CPU time much less), its peak RSS, and the kernels
that the child itself compiled and that took longest to
compile, from numba's compile events (``numba.core.event``, CPU seconds of the compiling thread):
``excl`` without the kernels compiled inside it, ``incl`` with them. A kernel's ``excl`` holds
LLVM's optimisation of everything linked into it, so a deep chain of kernels shows there.

Run: ``.venv/bin/python bench/bench_first_run.py [--top N] [--second] [-- ARGS ...]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

#: the child: the compile listener, then the command; the table goes to stderr at exit
CHILD = r"""
import atexit, sys, time
from collections import defaultdict
import numba.core.event as ev

stack, excl, incl, count = [], defaultdict(float), defaultdict(float), defaultdict(int)

class Compiles(ev.Listener):
    def on_start(self, event):
        stack.append([time.process_time(), 0.0])

    def on_end(self, event):
        t0, inner = stack.pop()
        dt = time.process_time() - t0
        f = getattr(event.data.get("dispatcher"), "py_func", None)
        name = f"{f.__module__}.{f.__qualname__}" if f is not None else "?"
        excl[name] += dt - inner
        incl[name] += dt
        count[name] += 1
        if stack:
            stack[-1][1] += dt

ev.register("numba:compile", Compiles())

def table():
    top = int(sys.argv[1])
    print(f"compiling: {sum(excl.values()):.1f} s CPU in {sum(count.values())} compilations", file=sys.stderr)
    for k, v in sorted(excl.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {v:6.2f} excl {incl[k]:6.2f} incl x{count[k]:<3d} {k}", file=sys.stderr)

atexit.register(table)
from robot_grinding_sim.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(args: list[str], cache: str, top: int, cwd: str) -> tuple[float, float, float, str]:
    """(CPU s, wall s, peak RSS GB, the child's compile table) of one run of ``grinding args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(top), *args], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"grinding {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    table = proc.stderr[proc.stderr.rfind("compiling:"):]
    return cpu, wall, after.ru_maxrss / 1e6, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=25, help="rows of the compile table")
    ap.add_argument("--second", action="store_true", help="run again on the cache the first run filled")
    ap.add_argument("args", nargs="*", default=["demo"], help="grinding's arguments (default: demo)")
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="numba_cold_") as cache, tempfile.TemporaryDirectory() as cwd:
        runs = [("first run (empty cache)", run(a.args, cache, a.top, cwd))]
        if a.second:  # in a folder of its own: the job's outputs of the first run are there already
            os.mkdir(os.path.join(cwd, "second"))
            runs.append(("second run (cache warm)", run(a.args, cache, a.top, os.path.join(cwd, "second"))))
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"grinding {' '.join(a.args)}")
    for what, (cpu, wall, rss, table) in runs:
        print(f"{what}: {cpu:.1f} s CPU (user + system), {wall:.1f} s wall, peak RSS of a child <= {rss:.2f} GB")
        print(table)


if __name__ == "__main__":
    main()
