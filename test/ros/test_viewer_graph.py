"""The pip-path graph (``grinding bringup sim --record``) gives a viewer what it needs.

- Every topic config/grinding.rviz names is published with the type its display reads,
  ``/robot_description`` included: on the pip path description_publisher publishes it (latched,
  the URDF's text) where a ROS install runs robot_state_publisher.
- The recorder's bag replays the arm: the arm is moved by a position command, and the bag's /tf
  (computed by the recorder from /joint_states: nothing publishes /tf without tf2_msgs) composed
  with /tf_static equals Pinocchio's FK of the recorded joint states; /robot_description in the bag
  is the URDF. The bag is read with the ``mcap`` library and ``cdr_reader`` (not ``rosbags``, the
  writer).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_recorder_tf import URDF, check_tf_against_fk, read_bag
from test_rviz_config import rviz_topics

pytestmark = pytest.mark.ros

HOME = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])  # config/cell.yaml robot.home: where the arm starts
TARGET = HOME + np.array([0.25, -0.15, 0.2, 0.3, 0.2, 0.4])


def recorded_at_target(bag: Path, scratch: Path) -> bool:
    """The bag, as far as the recorder has checkpointed it, holds a joint state at TARGET (read from
    a copy: the recorder goes on writing; a copy caught mid-write reads as not yet)."""
    files = list(bag.glob("*.mcap"))
    if not files:
        return False
    shutil.copyfile(files[0], scratch)
    try:
        from cdr_reader import decode
        from mcap.reader import make_reader

        with scratch.open("rb") as fh:
            for schema, _, message in make_reader(fh).iter_messages(topics=["/joint_states"]):
                js = decode(schema.name, schema.data.decode(), message.data)
                if np.abs(np.array(js["position"]) - TARGET).max() < 2e-3:
                    return True
    except Exception:  # a chunk cut by the copy: not yet
        return False
    return False


def test_the_pip_graph_serves_the_viewer_and_its_bag_replays_the_arm(probe: Any, tmp_path: Path) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, String

    wanted = {topic: msgtype for topic, (msgtype, _) in rviz_topics().items()}
    assert wanted["/robot_description"] == "std_msgs/msg/String"
    bag = tmp_path / "bag"
    log = tmp_path / "bringup.log"
    slow = tmp_path / "slow.yaml"  # sim time at a quarter of wall time: a recorder on 2 busy cores keeps up
    slow.write_text("/**:\n  ros__parameters:\n    real_time_factor: 0.25\n")
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--record", str(bag),
                                 "--params-file", str(slow), "--domain-id", os.environ["ROS_DOMAIN_ID"]],
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    node = probe.node

    def missing() -> list[str]:
        types = dict(node.get_topic_names_and_types())
        return [t for t, ty in wanted.items() if ty not in types.get(t, []) or not node.count_publishers(t)]

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:]

    try:
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        description = probe.subscribe(String, "/robot_description", latched)
        states = probe.subscribe(JointState, "/joint_states", keep=10)
        probe.wait_for(lambda: not missing(), timeout=240, what=f"publishers of {missing()}\n{tail()}")
        probe.wait_for(lambda: description.messages and states.messages, timeout=120,
                       what=f"/robot_description and /joint_states\n{tail()}")
        assert description.last.data == URDF.read_text()
        assert [i.node_name for i in node.get_publishers_info_by_topic("/robot_description")] == \
            ["description_publisher"]

        cmd = probe.publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
        cmd.publish(Float64MultiArray(data=[float(v) for v in TARGET]))

        def reached() -> bool:
            m = states.last
            return m is not None and np.abs(np.array(m.position) - TARGET).max() < 2e-3

        probe.wait_for(reached, timeout=240, what=f"the arm at the commanded position\n{tail()}")
        probe.wait_for(lambda: recorded_at_target(bag, tmp_path / "copy.mcap"), timeout=300,
                       what=f"the recorder's bag to reach the move's end\n{tail()}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    assert code == 0, tail()

    msgs = read_bag(bag)
    ((_, stype, desc),) = msgs["/robot_description"]
    assert stype == "std_msgs/msg/String" and desc["data"] == URDF.read_text()
    figures = check_tf_against_fk(msgs, min_motion=0.35)
    print(f"graph bag /tf vs Pinocchio: {figures}")
