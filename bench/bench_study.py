"""Benchmark: ``grinding study`` on Ray, 1 worker against 2, resumption, and Ray's overhead.

The study is the issue's "done when" one: 3 built-in parts (flat_plate, curved_panel,
cylinder_section) x 4 target forces (4, 5, 6, 7 N) = 12 jobs, each ``--max-passes`` passes of
``--pass-length`` m (default 5 x 50 mm), planned, optimised, simulated.

1. ``grinding study`` as a child process with ``--workers 1`` and ``--workers 2`` (a local Ray
   cluster of that many CPUs each, fresh output folders): the command's wall time, the jobs'
   time (from the pool's start), the ratio of each; and whether the two tables are identical
   (every column but wall time and worker).
2. Resumption: the same command again into the 2-worker folder runs nothing; a third run is
   stopped with SIGINT once half the jobs have a result, then started again: it runs only the
   missing jobs, and its table equals the uninterrupted one.
3. Overheads (``--overhead``, in this process): the start and shutdown of a local Ray cluster of 2
   CPUs, the memory of its processes and the CPU its own processes (not the workers) use idle; the
   round trip of a call that does nothing on Ray and on a process pool of 2
   (``concurrent.futures``); 8 tiny jobs (1 pass of 10 mm) on Ray, on the process pool and in
   process.

Run on a quiet machine (the load average is printed): ``.venv/bin/python bench/bench_study.py [--overhead]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRINDING = str(Path(sys.executable).with_name("grinding"))
PARTS = ("flat_plate", "curved_panel", "cylinder_section")
FORCES = (4, 5, 6, 7)


def study_text(max_passes: int, pass_length: float, parts: tuple[str, ...] = PARTS,
               forces: tuple[float, ...] = FORCES) -> str:
    return (f"name: bench study\nparts: [{', '.join(parts)}]\n"
            f"plan: {{max_passes: {max_passes}, pass_length: {pass_length}}}\n"
            f"grid:\n  process.target_force: [{', '.join(str(f) for f in forces)}]\n")


def run_cli(study: Path, out: Path, workers: int) -> tuple[float, dict]:
    """``grinding study --json`` as a child; (wall time s, its JSON)."""
    t0 = time.perf_counter()
    proc = subprocess.run([GRINDING, "study", str(study), "--out", str(out), "--workers", str(workers), "--json"],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"grinding study failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout)


def stop_half_way(study: Path, out: Path, jobs: int) -> tuple[int, int, float]:
    """Start the study (2 workers), SIGINT once half the jobs have a result; (exit code, results
    kept, s until the stop)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([GRINDING, "study", str(study), "--out", str(out), "--workers", "2", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and len(list(out.glob("jobs/*/result.json"))) < jobs // 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    return proc.returncode, len(list(out.glob("jobs/*/result.json"))), time.perf_counter() - t0


def tree(pid: int) -> tuple[float, int, float]:
    """pid's descendants, from ps: (resident memory, MB; how many; CPU time of those that are not Ray
    workers (``ray::...``), s: Ray's own processes)."""
    rows = subprocess.run(["ps", "-eo", "pid=,ppid=,rss=,times=,comm="], capture_output=True, text=True,
                          check=True).stdout
    children: dict[int, list[tuple[int, int, int, str]]] = {}
    for line in rows.split("\n"):
        if line.strip():
            p, pp, rss, cpu, comm = line.split(None, 4)
            children.setdefault(int(pp), []).append((int(p), int(rss), int(cpu), comm.strip()))
    total, n, own, stack = 0, 0, 0, [pid]
    while stack:
        for p, rss, cpu, comm in children.get(stack.pop(), []):
            total, n = total + rss, n + 1
            own += 0 if comm.startswith("ray::") else cpu
            stack.append(p)
    return total / 1024.0, n, float(own)


def overheads(tmp: Path) -> None:
    from robot_grinding_sim.core.study import keys
    from robot_grinding_sim.core.study.driver import run_study
    from robot_grinding_sim.core.study.pools import ProcessPool, SerialPool
    from robot_grinding_sim.core.study.ray_pool import RayPool
    from robot_grinding_sim.core.study.spec import load_study

    # a call that does nothing: the sha256 of a small file, cached in the worker after its first call
    probe = tmp / "probe.txt"
    probe.write_text("probe")
    noop = keys.file_digest
    calls = [(str(probe),)] * 200
    t0 = time.perf_counter()
    ray_pool = RayPool(workers=2)
    t_start = time.perf_counter() - t0
    list(ray_pool.map_unordered(noop, calls[:4]))  # the workers up and importing
    mb, n, cpu0 = tree(os.getpid())
    time.sleep(20.0)
    idle = (tree(os.getpid())[2] - cpu0) / 20.0
    t0 = time.perf_counter()
    list(ray_pool.map_unordered(noop, calls))
    t_ray = (time.perf_counter() - t0) / len(calls)
    t0 = time.perf_counter()
    ray_pool.close()
    t_stop = time.perf_counter() - t0
    print(f"local Ray cluster of 2 CPUs: start {t_start:.1f} s, shutdown {t_stop:.1f} s; {n} processes, "
          f"{mb:.0f} MB resident with 2 idle workers; Ray's own processes use {idle:.1%} of a core when idle "
          f"(CPU time over 20 s, 1 s resolution; {cpu0:.0f} s of CPU to start)")
    proc_pool = ProcessPool(2)
    t0 = time.perf_counter()
    list(proc_pool.map_unordered(noop, calls[:4]))
    t_pstart = time.perf_counter() - t0
    t0 = time.perf_counter()
    list(proc_pool.map_unordered(noop, calls))
    t_proc = (time.perf_counter() - t0) / len(calls)
    proc_pool.close()
    print(f"process pool of 2: first 4 calls {t_pstart:.1f} s (start); a call that does nothing: Ray "
          f"{t_ray * 1e3:.2f} ms, process pool {t_proc * 1e3:.2f} ms per call (200 calls, 2 workers)")
    (tmp / "tiny.yaml").write_text(study_text(1, 0.01, ("flat_plate", "curved_panel"), (4, 5, 6, 7)))
    study = load_study(tmp / "tiny.yaml")
    walls = {}
    for name, make in (("in process", SerialPool), ("process pool 2", lambda: ProcessPool(2)),
                       ("Ray 2", lambda: RayPool(workers=2))):
        t0 = time.perf_counter()
        rep = run_study(study, tmp / f"tiny_{name.replace(' ', '_')}", make, plots=False)
        walls[name] = (time.perf_counter() - t0, rep.progress.elapsed_s,
                       sum(r["wall_time_s"] for r in rep.rows))
    for name, (wall, jobs, busy) in walls.items():
        print(f"8 tiny jobs, {name}: {wall:.1f} s for run_study, {jobs:.1f} s from the pool's start "
              f"(the jobs' own wall times add to {busy:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-passes", type=int, default=5)
    ap.add_argument("--pass-length", type=float, default=0.05)
    ap.add_argument("--overhead", action="store_true", help="also measure Ray's overheads (part 3)")
    ap.add_argument("--keep", default=None, help="folder to keep the outputs in (default: a temporary one)")
    args = ap.parse_args()
    from robot_grinding_sim.core.study.table import differences, read_table

    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(args.keep) if args.keep else Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        study = tmp / "study.yaml"
        study.write_text(study_text(args.max_passes, args.pass_length))
        jobs = len(PARTS) * len(FORCES)
        res = {}
        for w in (1, 2):
            wall, doc = run_cli(study, tmp / f"w{w}", w)
            res[w] = (wall, doc)
            print(f"{w} worker(s): {doc['ok']} ok, {doc['failed']} failed of {doc['jobs']}; command {wall:.1f} s, "
                  f"jobs {doc['wall_time_s']:.1f} s (load {os.getloadavg()[0]:.2f})")
        (w1, d1), (w2, d2) = res[1], res[2]
        diff = differences(read_table(tmp / "w1" / "results.parquet"), read_table(tmp / "w2" / "results.parquet"))
        print(f"2 workers vs 1: {w1 / w2:.2f}x for the command, {d1['wall_time_s'] / d2['wall_time_s']:.2f}x for "
              f"the jobs; tables identical (but wall time, worker): {not diff}" + (f" {diff[:3]}" if diff else ""))
        wall, doc = run_cli(study, tmp / "w2", 2)
        print(f"again into the same folder: ran {doc['ran']} jobs, {doc['reused']} reused, {wall:.1f} s")
        code, kept, t_stop = stop_half_way(study, tmp / "stop", jobs)
        wall, doc = run_cli(study, tmp / "stop", 2)
        diff = differences(read_table(tmp / "w2" / "results.parquet"), read_table(tmp / "stop" / "results.parquet"))
        print(f"stopped by SIGINT after {t_stop:.1f} s: exit {code}, {kept} of {jobs} results kept; started again: "
              f"ran {doc['ran']} (the missing {jobs - kept}), reused {doc['reused']}; table identical to the "
              f"uninterrupted one: {not diff}")
        if args.overhead:
            overheads(tmp)


if __name__ == "__main__":
    main()
