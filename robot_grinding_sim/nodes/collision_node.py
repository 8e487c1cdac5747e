"""collision_node: where the tool touches the part, and the arm's clearance to it.

A thin adapter over :mod:`robot_grinding_sim.core.geometry.tool_contact`, the same contact query
the in-process job uses (:func:`~robot_grinding_sim.core.job.setup.contact_query`): the tool is the
collision primitive of ``tool.link`` as ``tool.shape`` (a ball centred on ``tool.tcp_link``, a
wheel on its periphery, a pad, a disc on its face: core/geometry/tools.py; a tool with a patch
takes the Winkler law, ``contact.*``, its onset stiffness from ``process.target_force``); the
workpiece (``workpiece.*`` of config/cell.yaml: a built-in part or a CAD/mesh file, its ground
face, its pose) answers from its exact CAD surface (one face of a CAD part) or from its triangles
(mesh parts). The arm's other links are checked against the part for clearance.

Subscribes (relative names):
- ``joint_states`` (sensor_msgs/JointState): positions of every joint of the URDF's chain (any
  order; extra joints are ignored).

Publishes:
- ``contact/points`` (sensor_msgs/PointCloud2, frame ``base_frame``, stamp of the joint state),
  for every joint state: one point while the tool's gap to the part is below ``contact_margin``,
  none otherwise; float64 fields x, y, z (the closest point on the part, m; a patch's
  pressure-weighted centre), normal_x, normal_y, normal_z (unit, out of the part towards the
  tool), depth (penetration, m; negative: the gap of a near contact; a patch: its equivalent
  penetration F / K), stiffness (a patch's k_w A_c, N/m; -1 for the ball: the law's own):
  core/geometry/tool_contact.py ``CONTACT_ROW``.
- ``~/min_distance`` (std_msgs/Float64): smallest signed distance (m) between the arm's links
  (all but the tool) and the part, at most ``min_distance_rate`` Hz of stamp time.
- ``~/markers`` (visualization_msgs/MarkerArray): the contact point and normal and, once, the part.

Parameters: ``ros2 param describe /collision_node <name>``; robot_grinding_sim/ros/schemas.py.
Bad parameters (missing files, a link not in the URDF, a tool whose shape or law does not fit)
stop the node at start-up naming the parameter; bad messages (NaN, missing joints) are logged and
skipped.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import Point
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.core.geometry.tool_contact import (
    WORKPIECE,
)
from robot_grinding_sim.ros import wire
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.node_setup import set_up_node
from robot_grinding_sim.ros.workpiece import tool_scene

NODE_NAME = "collision_node"


class CollisionNode(Node):
    """Tool-workpiece contact and arm clearance (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        node = set_up_node(self, NODE_NAME, links=("tool.tcp_link", "tool.link"))
        self.p = p = node.params
        tool = node.cell.tool
        self.model = m = node.model
        self.tcp = tool.tcp_link
        self.base_frame = node.base_frame
        ts = tool_scene(p, m, NODE_NAME, node.cell)
        self.scene, self.query = ts.scene, ts.query
        self.part_mesh = ts.part.tessellate(deflection=node.cell.workpiece.deflection)  # the whole part, for display
        self.X_BP = ts.X_BP
        robot_names = self.scene.add_robot(m, np.zeros(m.nq))
        tool_objects = set(self.scene.robot_objects_of(tool.link))
        self.arm_names = [n for n in robot_names if n not in tool_objects]
        self.margin = float(p["contact_margin"])
        self._next_md = -np.inf
        self._next_marker = -np.inf
        self._mesh_marker_sent = False

        self.pub_points = self.create_publisher(PointCloud2, "contact/points", 50)
        # the 1 kHz topics as bytes (ros/wire.py): rclpy's message objects were most of the work
        self.js_reader = wire.JointStateReader(m.joint_names, "joint_state")
        self.points_writer = wire.PointCloudWriter(self.base_frame)
        self.pub_md = self.create_publisher(Float64, "~/min_distance", 10)
        self.pub_markers = self.create_publisher(
            MarkerArray, "~/markers", QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.create_subscription(JointState, "joint_states", guarded(self, "joint_states")(self._on_joints), 50,
                                 raw=True)
        self.min_distance_rate = float(p["min_distance_rate"])
        self.marker_rate = float(p["marker_rate"])
        self.add_post_set_parameters_callback(self._on_set)
        # every numerical path once (numba kernels load) before the first message
        self.query.query(m.fk(np.zeros(m.nq), self.tcp))
        if self.arm_names:
            self.scene.min_distance(self.arm_names, [WORKPIECE])
        self.get_logger().info(
            f"{ts.tool.shape} tool r = {ts.radius * 1e3:g} mm at '{self.tcp}' vs {ts.source} "
            f"({'exact CAD surface' if ts.exact else 'triangles'}); {len(self.arm_names)} arm objects; "
            f"frame {self.base_frame}")

    def _on_set(self, params: list[Any]) -> None:
        for prm in params:
            if prm.name in ("min_distance_rate", "marker_rate"):
                setattr(self, prm.name, float(prm.value))

    def _on_joints(self, data: bytes) -> None:
        ns, q, _ = self.js_reader.read(data)
        rows = self.query.rows(self.model.fk(q, self.tcp), self.margin)  # the tcp pose: a tool with a patch turns
        self.pub_points.publish(self.points_writer.encode(ns, rows))
        t = ns * 1e-9
        if t < self._next_md - 1.0:  # time went backwards (sim reset): restart the rate limits
            self._next_md = self._next_marker = -np.inf
        # ~/min_distance and ~/markers are for viewers, the recorder and monitors: computed only
        # for someone (this callback is on the lockstep loop's path)
        rate = self.min_distance_rate
        if rate > 0 and self.arm_names and t >= self._next_md and self.pub_md.get_subscription_count() > 0:
            self._next_md = t + 1.0 / rate
            self.scene.set_robot_configuration(q)
            md = self.scene.min_distance(self.arm_names, [WORKPIECE])
            self.pub_md.publish(Float64(data=float(md.distance)))
        rate = self.marker_rate
        if rate > 0 and t >= self._next_marker and self.pub_markers.get_subscription_count() > 0:
            self._next_marker = t + 1.0 / rate
            self.pub_markers.publish(self._markers(rows, wire.time_msg(ns)))

    def _markers(self, pts: np.ndarray, stamp: Any) -> MarkerArray:
        out = MarkerArray()
        points = Marker()
        points.header.frame_id = self.base_frame
        points.header.stamp = stamp
        points.ns, points.id, points.type = "contacts", 0, Marker.SPHERE_LIST
        points.action = Marker.ADD
        points.pose.orientation.w = 1.0
        points.scale.x = points.scale.y = points.scale.z = 0.004
        points.color.r, points.color.a = 1.0, 1.0
        points.points = [Point(x=float(r[0]), y=float(r[1]), z=float(r[2])) for r in pts if r[6] > 0]
        out.markers.append(points)
        arrows = Marker()
        arrows.header = points.header
        arrows.ns, arrows.id, arrows.type = "normals", 0, Marker.LINE_LIST
        arrows.action = Marker.ADD
        arrows.pose.orientation.w = 1.0
        arrows.scale.x = 0.001
        arrows.color.g, arrows.color.a = 1.0, 1.0
        for r in pts:
            tip = r[:3] + r[3:6] * max(0.02, 100.0 * r[6])  # at least 2 cm, 100x the depth
            arrows.points += [Point(x=float(r[0]), y=float(r[1]), z=float(r[2])),
                              Point(x=float(tip[0]), y=float(tip[1]), z=float(tip[2]))]
        out.markers.append(arrows)
        if not self._mesh_marker_sent:
            self._mesh_marker_sent = True
            mesh, T = self.part_mesh, self.X_BP
            tri = np.asarray(mesh.vertices)[np.asarray(mesh.faces)].reshape(-1, 3) @ T[:3, :3].T + T[:3, 3]
            wp = Marker()
            wp.header = points.header
            wp.ns, wp.id, wp.type = "workpiece", 0, Marker.TRIANGLE_LIST
            wp.action = Marker.ADD
            wp.pose.orientation.w = 1.0
            wp.scale.x = wp.scale.y = wp.scale.z = 1.0
            wp.color.r = wp.color.g = wp.color.b = 0.7
            wp.color.a = 1.0
            wp.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in tri]
            out.markers.append(wp)
        return out


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim collision_node [--ros-args ...]``."""
    return run_node(CollisionNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
