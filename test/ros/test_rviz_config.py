"""config/grinding.rviz shows what the graph publishes: every topic a display names is published, with
the type the display reads and a durability it can receive.

The .rviz file is parsed as YAML (RViz 2's format); each display's class gives the message type it
subscribes to. ``grinding bringup sim`` starts the pip-path graph as real processes; the topics and
their publishers' QoS are read from the running graph with rclpy. ``/robot_description`` comes from
description_publisher there (robot_state_publisher on a ROS install: the test checks that the
graph description starts it there); ``/tf`` is no display topic (RViz's TF display listens to it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rclpy.qos import DurabilityPolicy

from robot_grinding_sim import bringup as bu

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
#: rviz_default_plugins display class -> the message type it subscribes to
DISPLAY_TYPES = {
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Marker": "visualization_msgs/msg/Marker",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/Wrench": "geometry_msgs/msg/WrenchStamped",
    "rviz_default_plugins/Pose": "geometry_msgs/msg/PoseStamped",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/RobotModel": "std_msgs/msg/String",
}


def rviz_topics() -> dict[str, tuple[str, str]]:
    """topic -> (message type, durability asked) of every enabled display with a topic."""
    doc = yaml.safe_load((REPO / "config" / "grinding.rviz").read_text())
    out = {}
    for d in doc["Visualization Manager"]["Displays"]:
        cls = d.get("Class", "")
        topic = d.get("Description Topic") or d.get("Topic")
        if not d.get("Enabled", True) or not isinstance(topic, dict):
            continue
        assert cls in DISPLAY_TYPES, f"display {d.get('Name')}: class {cls} not in the table of this test"
        out[topic["Value"]] = (DISPLAY_TYPES[cls], topic.get("Durability Policy", "Volatile"))
    return out


def test_every_topic_in_the_rviz_config_is_published_by_the_graph(probe, tmp_path) -> None:
    wanted = rviz_topics()
    assert {"/grinding/removal", "/contact/wrench", "/grinding/progress_markers", "/robot_description"} <= set(wanted)
    assert {s.package for s in bu.graph("sim")} >= {"robot_state_publisher"}
    domain = os.environ["ROS_DOMAIN_ID"]
    log = tmp_path / "bringup.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--domain-id",
                                 domain], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    node = probe.node
    check = wanted

    def missing() -> list[str]:
        types = dict(node.get_topic_names_and_types())
        return [t for t, (ty, _) in check.items() if ty not in types.get(t, []) or not node.count_publishers(t)]

    try:
        probe.wait_for(lambda: not missing(), timeout=240,
                       what=f"publishers of {missing()} (log: {log.read_text(errors='replace')[-2000:]})")
        for topic, (_, durability) in check.items():
            if durability == "Transient Local":  # RViz then only hears transient-local publishers
                infos = node.get_publishers_info_by_topic(topic)
                assert infos and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos), topic
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=90)
