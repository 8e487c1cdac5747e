"""The demo job through the node graph at exchange intervals H = 2, 1, 0.5 ms, beside the in-process job.

For each H, ``grinding demo --graph --exchange-interval H`` (with ``--set sim.dt=H`` when H is
shorter than the default 1 ms step) runs the job in process, then the same plan.json through the
real node processes (dynamics_node in lockstep with collision_node and contact_solver_node over
DDS, grinding_executive, recorder), and compares each pass's mean force along the tool axis. The
in-process job of the same run is the reference (H = 0: the model of the step's own state).

Prints one row per H: the largest per-pass difference, the graph's wall time and its real-time
factor. Several minutes per row on 2 cores.

Usage: .venv/bin/python bench/bench_graph_exchange.py [--intervals 0.002 0.001 0.0005] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_DT = 1e-3


def run(interval: float, out: Path) -> dict:
    cmd = [sys.executable, "-m", "robot_grinding_sim.cli", "demo", "--graph", "--exchange-interval", repr(interval),
           "--out", str(out), "--json"]
    if interval < DEFAULT_DT:
        cmd += ["--set", f"sim.dt={interval!r}"]
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    s = json.loads(proc.stdout)
    g = s["graph_vs_inprocess"]
    return {"H_ms": interval * 1e3, "dt_ms": s["step_s"] * 1e3, "simulated_s": s["simulated_s"],
            "passes": [(r["pass"], r["inprocess_mean_n"], r["graph_mean_n"], r["relative_difference"])
                       for r in g["passes"]],
            "max_abs_relative_difference": g["max_abs_relative_difference"], "graph_wall_s": g["wall_time_s"],
            "graph_real_time_factor": s["simulated_s"] / g["wall_time_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", type=float, nargs="+", default=[0.002, 0.001, 0.0005])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_graph_") as tmp:
        for k, h in enumerate(args.intervals):
            rows.append(run(h, Path(tmp) / f"run{k}"))
            if not args.json:
                r = rows[-1]
                per_pass = ", ".join(f"{d:+.3%}" for _, _, _, d in r["passes"])
                print(f"H {r['H_ms']:g} ms (step {r['dt_ms']:g} ms): per pass {per_pass}; max "
                      f"{r['max_abs_relative_difference']:.3%}; graph {r['graph_wall_s']:.0f} s wall for "
                      f"{r['simulated_s']:.1f} s simulated ({r['graph_real_time_factor']:.2f}x real time)", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
