"""description_publisher: the robot's URDF on ``robot_description``, where robot_state_publisher does not run.

On a ROS install, robot_state_publisher publishes ``/robot_description`` (and ``/tf``) and this node
is not started. The pip path has no robot_state_publisher: ``grinding bringup`` starts this node in
its place (:attr:`robot_grinding_sim.bringup.NodeSpec.stands_in_for`), so RViz's RobotModel
display (config/grinding.rviz), a Foxglove bridge and the recorder find the description the same
way. ``/tf`` it cannot publish (the pip path has no tf2_msgs package); the recorder computes it
into its bag from ``/joint_states`` (its ``computed_tf_rate`` parameter).

Publishes: ``robot_description`` (std_msgs/String, transient local, depth 1: late subscribers get
it), the text of ``robot.description_file`` (empty: the package's ``urdf/ur10e_grinding.urdf``),
once, after the URDF loaded as the other nodes load it.

Parameters: ``robot.*`` of config/cell.yaml. A URDF that does not load stops the node at start-up
naming ``robot.description_file``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from robot_grinding_sim.ros.node_base import run_node
from robot_grinding_sim.ros.node_setup import set_up_node
from robot_grinding_sim.ros.parameters import ParameterError

NODE_NAME = "description_publisher"


class DescriptionPublisher(Node):
    """Publishes the URDF text, latched (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        model = set_up_node(self, NODE_NAME, cell=False).model
        try:
            self.urdf = Path(model.source).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError("robot.description_file", f"cannot read {model.source}: {exc}", NODE_NAME) from None
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.create_publisher(String, "robot_description", qos)
        self.pub.publish(String(data=self.urdf))
        self.get_logger().info(f"robot_description: {model.source} ({len(self.urdf)} characters, "
                               f"{len(model.link_names)} links)")


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim description_publisher [--ros-args ...]``."""
    return run_node(DescriptionPublisher, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
