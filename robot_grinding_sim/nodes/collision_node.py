"""collision_node: contacts of the tool with the workpiece, and the arm's clearance to it.

The arm (the URDF's collision geometry), the tool and the workpiece (a mesh file) form a
:class:`~robot_grinding_sim.core.geometry.collision.CollisionScene`. On every ``joint_states`` message the
arm is moved to the measured/simulated configuration and the contacts of ``tool_link``'s
collision geometry with the workpiece are published. With a spherical tool the depth and
normal are exact (closest point on the triangles, see core.collision).

Subscribes (relative names):
- ``joint_states`` (sensor_msgs/JointState): positions of every joint of the URDF's chain (any
  order; extra joints are ignored).

Publishes:
- ``contact/points`` (sensor_msgs/PointCloud2, frame ``base_frame``, stamp of the joint state):
  one point per contact, float32 fields x, y, z (the point on the workpiece surface, m),
  normal_x, normal_y, normal_z (unit, from the workpiece towards the tool), depth (m, >= 0).
  Published for every joint state, empty when there is no contact.
- ``~/min_distance`` (std_msgs/Float64): smallest signed distance (m) between the arm's links
  (all but ``tool_link``) and the workpiece, at most ``min_distance_rate`` Hz of stamp time.
- ``~/markers`` (visualization_msgs/MarkerArray): the contact points and normals (arrows scaled
  by depth) and, once, the workpiece mesh.

Parameters: see ``PARAMS`` (``ros2 param describe``) and ``config/collision_node.yaml``. Bad
parameters (missing files, a link not in the URDF, a bad pose) stop the node at start-up naming
the parameter; bad messages (NaN, missing joints) are logged and skipped.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import Point
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.collision import CollisionScene
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded, load_robot, run_node
from robot_grinding_sim.ros.parameters import ParameterError, ParamSpec, declare_parameters

NODE_NAME = "collision_node"
WORKPIECE = "workpiece"

PARAMS = [
    ParamSpec("robot_description_file", "", "URDF of arm and tool; empty: the package's "
              "urdf/ur10e_grinding.urdf", path="file", read_only=True),
    ParamSpec("tool_link", "abrasive_head", "link whose collision geometry is the tool (a sphere "
              "gives exact depth and normal)", read_only=True, required=True),
    ParamSpec("base_frame", "", "frame of the outputs and of workpiece_pose; empty: the URDF's root "
              "link", read_only=True),
    ParamSpec("workpiece_file", "", "mesh of the workpiece (STL, OBJ, PLY, ... read by trimesh); "
              "empty: the built-in part workpiece_part", path="file", read_only=True),
    ParamSpec("workpiece_part", "curved_panel", "built-in part used when workpiece_file is empty "
              "(grinding parts lists them)", read_only=True),
    ParamSpec("workpiece_deflection", 2e-5, "chordal tolerance of the built-in part's tessellation, m",
              range=(1e-7, 1e-2), read_only=True),
    ParamSpec("workpiece_scale", 1.0, "factor on the mesh file's coordinates (0.001 for mm)",
              range=(1e-9, 1e9), read_only=True),
    ParamSpec("workpiece_pose", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "pose of the workpiece in base_frame: "
              "x y z (m) roll pitch yaw (rad, fixed axes x-y-z)", length=6, range=(-1e3, 1e3),
              read_only=True),
    ParamSpec("workpiece_closed", "auto", "treat the mesh as a solid (true), a one-sided surface "
              "(false) or decide by watertightness (auto)", choices=("auto", "true", "false"),
              read_only=True),
    ParamSpec("exact_only", True, "publish only contacts with exact depth/normal (sphere tools); "
              "others (fcl mesh-mesh) are logged once and dropped"),
    ParamSpec("min_distance_rate", 50.0, "rate of ~/min_distance in stamp time, Hz; 0: off",
              range=(0.0, 10000.0)),
    ParamSpec("marker_rate", 10.0, "rate of ~/markers in stamp time, Hz; 0: off", range=(0.0, 1000.0)),
]


def pose_from_xyzrpy(v: Any) -> np.ndarray:
    """(6,) x y z roll pitch yaw -> (4, 4) (URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll))."""
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", v[3:]).as_matrix()
    T[:3, 3] = v[:3]
    return T


class CollisionNode(Node):
    """Tool-workpiece contacts and arm clearance (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_parameters(self, PARAMS)
        self.p = p
        self.model = m = load_robot(p, NODE_NAME, links=("tool_link",))
        self.base_frame = p["base_frame"] or m.root_link
        self.scene = CollisionScene()
        self.q = np.zeros(m.nq)
        try:
            self.robot_names = self.scene.add_robot(m, self.q)
        except InputError as exc:
            raise ParameterError("robot_description_file", str(exc), NODE_NAME) from None
        self.tool_names = self.scene.robot_objects_of(p["tool_link"])
        if not self.tool_names:
            raise ParameterError("tool_link", f"link '{p['tool_link']}' has no collision geometry", NODE_NAME)
        closed = {"auto": None, "true": True, "false": False}[p["workpiece_closed"]]
        T_wp = pose_from_xyzrpy(p["workpiece_pose"])
        if p["workpiece_file"]:
            source = p["workpiece_file"]
            try:
                mesh = self.scene.add_mesh_file(WORKPIECE, source, T_wp, scale=p["workpiece_scale"],
                                                closed=closed)
            except InputError as exc:
                raise ParameterError("workpiece_file", str(exc), NODE_NAME) from None
        else:
            from robot_grinding_sim.core.geometry import parts

            source = f"built-in part {p['workpiece_part']}"
            try:
                tm = parts.build_part(p["workpiece_part"]).tessellate(p["workpiece_deflection"])
                mesh = self.scene.add_mesh(WORKPIECE, np.asarray(tm.vertices) * p["workpiece_scale"],
                                           np.asarray(tm.faces), T_wp, closed=closed)
            except InputError as exc:
                raise ParameterError("workpiece_part", str(exc), NODE_NAME) from None
        self.arm_names = [n for n in self.robot_names if n not in self.tool_names]
        self._warned_inexact = False
        self._next_md = -np.inf
        self._next_marker = -np.inf
        self._mesh_marker_sent = False

        self.pub_points = self.create_publisher(PointCloud2, "contact/points", 50)
        self.pub_md = self.create_publisher(Float64, "~/min_distance", 10)
        self.pub_markers = self.create_publisher(
            MarkerArray, "~/markers", QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.create_subscription(JointState, "joint_states",
                                 guarded(self, "joint_states")(self._on_joints), 50)
        # warm up every numerical path (numba kernels load) before the first message
        self.scene.contacts(self.tool_names[0], WORKPIECE)
        if self.arm_names:
            self.scene.min_distance(self.arm_names, [WORKPIECE])
        self.get_logger().info(
            f"tool '{p['tool_link']}' ({', '.join(self.scene.shape(n)[0] for n in self.tool_names)}) "
            f"vs workpiece {source} ({len(mesh.faces)} triangles, "
            f"{'closed' if mesh.closed else 'open'}); arm {len(self.arm_names)} objects; "
            f"frame {self.base_frame}")

    def _on_joints(self, msg: JointState) -> None:
        values = cv.joint_state_to_dict(msg, "position")
        missing = [j for j in self.model.joint_names if j not in values]
        if missing:
            raise InputError(f"joint_state: missing joints {missing} (expected {self.model.joint_names})")
        q = np.array([values[j] for j in self.model.joint_names])
        self.q = q
        self.scene.set_robot_configuration(q)
        rows = []
        for name in self.tool_names:
            for c in self.scene.contacts(name, WORKPIECE):
                if not c.exact and self.p["exact_only"]:
                    if not self._warned_inexact:
                        self._warned_inexact = True
                        self.get_logger().warning(
                            f"tool object '{name}' ({self.scene.shape(name)[0]}) touches the workpiece: its "
                            "depth is not exact (only sphere tools are); dropped (exact_only)")
                    continue
                # the scene's normal points from the workpiece (b) towards the tool (a)
                rows.append([*c.point, *c.normal, c.depth])
        stamp = msg.header.stamp
        pts = np.array(rows, dtype=float).reshape(-1, len(cv.CONTACT_FIELDS))
        self.pub_points.publish(cv.array_to_pointcloud2(pts, self.base_frame, stamp))
        t = cv.time_to_sec(stamp)
        if t < self._next_md - 1.0:  # time went backwards (sim reset): restart the rate limits
            self._next_md = self._next_marker = -np.inf
        rate = float(self.get_parameter("min_distance_rate").value)
        if rate > 0 and self.arm_names and t >= self._next_md:
            self._next_md = t + 1.0 / rate
            md = self.scene.min_distance(self.arm_names, [WORKPIECE])
            self.pub_md.publish(Float64(data=float(md.distance)))
        rate = float(self.get_parameter("marker_rate").value)
        if rate > 0 and t >= self._next_marker:
            self._next_marker = t + 1.0 / rate
            self.pub_markers.publish(self._markers(pts, stamp))

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
        points.points = [Point(x=float(r[0]), y=float(r[1]), z=float(r[2])) for r in pts]
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
            mesh = self.scene.mesh(WORKPIECE)
            T = self.scene.pose(WORKPIECE)
            tri = mesh.vertices[mesh.faces].reshape(-1, 3) @ T[:3, :3].T + T[:3, 3]
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
