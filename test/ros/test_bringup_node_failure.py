"""``grinding bringup --until-done`` ends when a node exits: the job cannot reach its end then (a
grinding_executive that stops at start-up on a bad parameter left the graph, and ``grinding simulate
--graph`` with it, waiting for ever). Real processes; the bad value is one only the executive reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


def test_until_done_ends_when_a_node_exits(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    r = subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", "plan", "--no-optimise", "--max-passes", "1",
                        "--pass-length", "0.01", "--out", str(plan)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    bad = tmp_path / "bad.yaml"
    bad.write_text("grinding_executive:\n  ros__parameters:\n    progress_rate: -5.0\n")
    proc = subprocess.Popen([sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--plan-file",
                             str(plan), "--start", "--until-done", "--domain-id", os.environ["ROS_DOMAIN_ID"],
                             "--params-file", str(bad)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # the graph and its nodes, not left behind
        out, err = proc.communicate(timeout=60)
        pytest.fail("bringup --until-done kept running after grinding_executive exited")
    assert proc.returncode != 0
    assert "grinding_executive exited with code" in err and "progress_rate" in err, err[-3000:]
    assert "Traceback" not in out + err
