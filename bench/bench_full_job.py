"""Benchmark: the full default job (``grinding simulate`` with the cell defaults: every pass of the
curved panel, the force-target optimisation, the final run, removal map and outputs), wall time,
peak memory and bag size per simulated minute.

The job runs as a child process (``grinding simulate --out <tmp> --json``) so its peak resident
memory is the child's own (``getrusage(RUSAGE_CHILDREN).ru_maxrss``). Printed: the load average,
wall time (s), the job's simulated time (optimisation + final run), peak RSS (MB), the bag's size
and size per simulated minute of the final run, the pass count and the per-pass mean forces.

Run: ``.venv/bin/python bench/bench_full_job.py [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", default=None, help="output directory to keep (default: a temporary one)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    exe = Path(sys.executable).with_name("grinding")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep) if args.keep else Path(tmp) / "job"
        t0 = time.perf_counter()
        proc = subprocess.run([str(exe), "simulate", "--out", str(out), "--json"], capture_output=True, text=True,
                              check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"grinding simulate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        s = json.loads(proc.stdout[proc.stdout.index("{"):])
        s = s.get("summary", s)
        bag = dir_size(out / "bag")
        sim = s["simulated_s"]
        opt = s["optimisation"] or {}
        means = [p["mean_n"] for p in s["passes"]]
        print(f"full default job: {len(means)} passes, {wall:.1f} s wall (target < 60 s), peak RSS {peak_mb:.0f} MB "
              f"(target <= 1024 MB), load {os.getloadavg()[0]:.1f}")
        print(f"final run {sim:.1f} s simulated in {s['wall_time_s']:.1f} s ({s['steps']} steps, {s['event_steps']} "
              f"event steps); optimisation {opt.get('simulated_s', 0.0):.1f} s simulated in "
              f"{opt.get('wall_time_s', 0.0):.1f} s; total in the job {s['total_wall_time_s']:.1f} s")
        print(f"bag {bag / 1e6:.1f} MB for {sim:.1f} s simulated: {bag / 1e6 / (sim / 60.0):.1f} MB per simulated "
              f"minute; pass means [N] min {min(means):.3f} max {max(means):.3f}; all within tolerance: "
              f"{s['all_within_tolerance']}")


if __name__ == "__main__":
    main()
