"""The demo's job with the shipped held-part cell, in process and through the node graph, per pass
against the target force.

``grinding demo --params config/cells/held_part.yaml --graph --out OUT`` (the README's main job: the
curved panel 5 um deep, 24 passes of 30 mm, the arm holding the part past the standing ball) runs the
job in process, then the same plan.json through the real node processes; its ``graph_vs_inprocess``
compares the passes over each pass's whole segment (lead-in and lead-out included). This script
also reads both bags over the pass at full force (between the lead-in and the lead-out: the window
the in-process table and the force-target optimisation average over;
``core.record.pass_forces.pass_force_means(lead_in=...)``) and prints per pass the in-process
table's mean, both bags' means along the pressing axis over that window, the graph against the
target and against the in-process run, and the largest of each. A couple of minutes on 2 cores.

Usage: .venv/bin/python bench/bench_held_part_demo.py [--out DIR] [--reuse] [--json]
(``--reuse``: read an existing DIR from an earlier run instead of running the demo.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CELL = REPO / "config" / "cells" / "held_part.yaml"


def main() -> None:
    from robot_grinding_sim.core.record.pass_forces import pass_force_means, plan_pass_timing, plan_pressing_axes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("demo_held"))
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.reuse:
        cmd = [sys.executable, "-m", "robot_grinding_sim.cli", "demo", "--params", str(CELL), "--graph",
               "--out", str(args.out), "--json"]
        env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    plan = json.loads((args.out / "plan.json").read_text())
    summary = json.loads((args.out / "summary.json").read_text())
    target, lead = plan["cell"]["process.target_force"], plan["cell"]["process.lead_in"]
    timing, axes = plan_pass_timing(plan), plan_pressing_axes(plan)
    full = {name: {p.index: p.mean_n for p in pass_force_means(args.out / name, axes=axes, timing=timing,
                                                               lead_in=lead)}
            for name in ("bag", "graph_bag")}
    segment = {r["pass"]: r for r in summary["graph_vs_inprocess"]["passes"]}
    rows = []
    for p in summary["passes"]:
        i = p["pass"]
        ip, g = full["bag"][i], full["graph_bag"][i]
        rows.append({"pass": i, "table_mean_n": p["mean_n"], "inprocess_full_n": ip, "graph_full_n": g,
                     "graph_vs_target": g / target - 1.0, "graph_vs_inprocess": g / ip - 1.0,
                     "segment_graph_vs_inprocess": segment[i]["relative_difference"]})
    worst = {k: max(abs(r[k]) for r in rows) for k in ("graph_vs_target", "graph_vs_inprocess",
                                                       "segment_graph_vs_inprocess")}
    worst["table_vs_target"] = max(abs(r["table_mean_n"] / target - 1.0) for r in rows)
    if args.json:
        print(json.dumps({"target_n": target, "lead_in_m": lead, "passes": rows, "largest": worst}, indent=1))
        return
    print(f"target {target:g} N; pass at full force between lead-in and lead-out ({lead * 1e3:.1f} mm)")
    print("pass  table N  in-proc N   graph N  graph/target  graph/in-proc  (whole segment)")
    for r in rows:
        print(f"{r['pass']:4d}  {r['table_mean_n']:7.4f}  {r['inprocess_full_n']:8.4f}  {r['graph_full_n']:8.4f}"
              f"  {r['graph_vs_target']:+11.2%}  {r['graph_vs_inprocess']:+12.3%}"
              f"  ({r['segment_graph_vs_inprocess']:+.3%})")
    print(f"largest: in-process table vs target {worst['table_vs_target']:.2%}, graph vs target "
          f"{worst['graph_vs_target']:.2%}, graph vs in-process {worst['graph_vs_inprocess']:.3%} "
          f"(whole segment {worst['segment_graph_vs_inprocess']:.3%}); graph "
          f"{summary['graph_vs_inprocess']['wall_time_s']:.0f} s wall")


if __name__ == "__main__":
    main()
