"""Another arm through the node graph with only configuration: example-robot-data's Franka Panda
(7 joints, its hand replaced by a ball tool under link names the package never uses;
test/third_party_arms.py) runs one short pass of the curved panel by ``grinding simulate --graph``:
in process, then through real node processes (bringup sim, DDS on loopback, the test's own domain),
from one parameter file. The graph bag is read with the ``mcap`` library and ``cdr_reader`` (not the
package's reader): the graph's mean normal force over the pass is within 5 % of the target and
within 2 % of the in-process run's; the wrenches are in the cell's frames (tool.tcp_link,
ft_sensor.frame); the joint states are the Panda's seven joints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cdr_reader import pass_forces, read_mcap
from third_party_arms import arm_with_ball_tool, cell_values

pytestmark = pytest.mark.ros

TARGET = 5.0


def test_panda_runs_a_pass_through_the_graph(tmp_path: Path) -> None:
    urdf = arm_with_ball_tool("panda", tmp_path / "panda_grinder.urdf")
    params = tmp_path / "panda.yaml"
    params.write_text(json.dumps({"/**": {"ros__parameters": cell_values("panda", urdf)}}))
    out = tmp_path / "run"
    env = {**os.environ, "GRINDING_GRAPH_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"], "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", "simulate", "--params", str(params),
                        "--max-passes", "1", "--pass-length", "0.02", "--target-force", str(TARGET), "--graph",
                        "--out", str(out)], capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    m = read_mcap(out / "graph_bag", ["/contact/wrench", "/ft_sensor/wrench", "/grinding/progress",
                                      "/joint_states"])
    f = pass_forces(m, 0, json.loads((out / "plan.json").read_text()))  # the plan's pass window
    assert len(f) > 100
    graph = float(np.mean(f))
    summary = json.loads((out / "summary.json").read_text())
    inproc = summary["graph_vs_inprocess"]["passes"][0]["inprocess_mean_n"]
    print(f"\nPanda, one pass: in-process {inproc:.4f} N, graph {graph:.4f} N")
    assert graph == pytest.approx(TARGET, rel=0.05)
    assert graph == pytest.approx(inproc, rel=0.02)
    assert {w["header"]["frame_id"] for w in m["/contact/wrench"]} == {"tip"}
    assert {w["header"]["frame_id"] for w in m["/ft_sensor/wrench"]} == {"probe_mount"}
    assert {tuple(js["name"]) for js in m["/joint_states"]} == {tuple(f"panda_joint{i}" for i in range(1, 8))}
