"""The README's main job, end to end: ``grinding demo`` as a subprocess, outputs read back."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from PIL import Image
from rosbags.typesys import Stores, get_typestore

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))


def test_demo_writes_plot_bag_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run([GRINDING, "demo", "--out", str(out), "--json"], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    # computed-torque tracking of a feasible motion: small error, torques within limits
    assert max(summary["max_tracking_error_rad"]) < np.radians(0.5)
    assert max(summary["final_error_rad"]) < 1e-3
    assert max(summary["peak_torque_fraction_of_limit"]) < 1.0

    with Image.open(out / "joint_motion.png") as img:
        assert img.size[0] > 500 and img.size[1] > 500

    # the bag, read by the mcap library (not the writer's) and decoded from CDR
    (mcap_file,) = (out / "bag").glob("*.mcap")
    store = get_typestore(Stores.ROS2_KILTED)
    states, poses = [], []
    with open(mcap_file, "rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages():
            if channel.topic == "/joint_states":
                states.append(store.deserialize_cdr(message.data, "sensor_msgs/msg/JointState"))
            elif channel.topic == "/dynamics_node/tool_pose":
                poses.append(store.deserialize_cdr(message.data, "geometry_msgs/msg/PoseStamped"))
    assert len(states) == len(poses) > 1000
    assert list(states[0].name) == summary["joints"]
    # during the pass (2.5 s .. 4.5 s) the tool tip is held 0.05 m above the base plane
    heights = [p.pose.position.z for p in poses if 2.6 < p.header.stamp.sec + p.header.stamp.nanosec * 1e-9 < 4.4]
    assert heights and np.allclose(heights, 0.05, atol=1e-3)
    assert (out / "bag" / "metadata.yaml").is_file()


def test_demo_refuses_to_overwrite_a_bag(tmp_path: Path) -> None:
    (tmp_path / "bag").mkdir()
    proc = subprocess.run([GRINDING, "demo", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "exists" in proc.stderr
