"""contact_solver_node: the contact side of the coupled step, and the simulated F/T sensor.

A thin adapter over :class:`robot_grinding_sim.core.sim.coupled_step.ContactSide`, the code the
in-process job runs: for every ``contact/points`` message (collision_node, one per joint state)
and the joint state of the same stamp, it computes the reduced-order model of the contact along
its normal (effective mass of the arm at the tool, the law's stiffness and damping for that mass,
the gap and its rate, the tangential grinding force per newton) and the contact force at that
state (``contact.*`` of config/cell.yaml: Kelvin-Voigt F = max(0, K d + D d'), or the
Hunt-Crossley family).

Subscribes: ``contact/points`` (sensor_msgs/PointCloud2, fields x y z normal_x normal_y normal_z
depth stiffness, frame ``base_frame``; the deepest point is the contact, with its stiffness: a
tool with a patch's k_w A_c, -1 the law's own), ``joint_states``
(sensor_msgs/JointState; positions and velocities, matched to the points by stamp).

Publishes (stamp of the joint state):
- ``contact/model`` (std_msgs/Float64MultiArray): the model, ``data`` in the order of
  :data:`~robot_grinding_sim.core.sim.coupled_step.LAYOUT` (t, law id, stiffness, damping, cr,
  exponent, v_floor, mass, gap, rate, normal xyz, point xyz, centre xyz, tangential xyz), or the
  one value ``[t]`` when nothing is near; dynamics_node integrates it in closed form (docs/contact.md).
- ``contact/wrench`` (geometry_msgs/WrenchStamped, frame ``tool.tcp_link``): the contact force on
  the tool at that state (normal + tangential) and its torque about the tcp, in tcp axes.
- ``ft_sensor/wrench`` (WrenchStamped, frame ``ft_sensor.frame``) when ``publish_ft``: what the
  F/T sensor model reads (core.sim.ft: the wrench moved to the sensor, tool gravity from the URDF,
  bias, noise, low-pass, tare).

- the removal map when ``removal.enabled`` and the part is a CAD face: the depth removed so far by
  Preston's law (:mod:`robot_grinding_sim.core.contact.preston`, the in-process job's code, fed with
  each solved state) on the job's own grid (``plan_file`` given: the grid of the in-process job and
  of the plan's prediction, :func:`~robot_grinding_sim.core.job.removal.pass_grid`, over the passes'
  region of every face they touch; else the whole of the first face, drawn only: its map would be
  about a million nodes), as (:mod:`robot_grinding_sim.core.record.removal_map`, docs/contact.md):

  - ``grinding/removal_nodes`` (sensor_msgs/PointCloud2, latched, frame ``base_frame``, once; with
    ``plan_file``): the grid's nodes with their normal, area, face and (row, col) in the face's
    (u, v) layout;
  - ``grinding/removal_depth`` (std_msgs/Float64MultiArray; with ``plan_file``): the depth at each node (m), every
    1 / ``removal_marker_rate`` s of ROS time while it changes and as each contact ends (the last
    one is the map of the run);
  - ``grinding/removal`` (visualization_msgs/MarkerArray, frame ``base_frame``): one vertex-coloured
    TRIANGLE_LIST per face over the removed region, for viewers, with the depth (when listened to).

Services: ``~/tare`` (std_srvs/Trigger): zero the simulated sensor at its current reading.

Bad messages (NaN, missing fields, missing joints, a frame other than ``base_frame``) are logged
and skipped; a bad parameter stops the node at start-up naming it.
"""

from __future__ import annotations

import sys
from array import array
from collections import OrderedDict
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.removal_map import DEPTH_LABEL
from robot_grinding_sim.core.record.removal_map import NODE_FIELDS as REMOVAL_NODE_FIELDS
from robot_grinding_sim.core.sim.coupled_step import ContactSide
from robot_grinding_sim.core.sim.ft import ft_sensor_model, sensor_inputs
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import wire
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.node_setup import declare_node_parameters, load_cell
from robot_grinding_sim.ros.parameters import ParameterError
from robot_grinding_sim.ros.workpiece import load_workpiece

NODE_NAME = "contact_solver_node"
#: joint states kept for matching contact points by stamp
JOINT_STATE_BUFFER = 256


class ContactSolverNode(Node):
    """The contact side of the coupled step (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.p = p = declare_node_parameters(self, NODE_NAME)
        links = ("tool.tcp_link",) + (("ft_sensor.frame",) if p["publish_ft"] else ())
        node = load_cell(p, NODE_NAME, links=links)
        cell = node.cell
        self.tcp = cell.tool.tcp_link
        self.model = m = node.model
        self.base_frame = node.base_frame
        try:
            self.side = ContactSide(m, cell.contact, self.tcp, cell.tool.spindle_speed)
        except InputError as exc:
            raise ParameterError("contact.model", str(exc), NODE_NAME) from None
        self.ft = None
        if p["publish_ft"]:
            try:
                self.ft = ft_sensor_model(cell, m)
            except InputError as exc:
                raise ParameterError("ft_sensor.tool_mass", str(exc), NODE_NAME) from None
            self.ft_frame = cell.ft_sensor.frame
            self.pub_ft = self.create_publisher(WrenchStamped, "ft_sensor/wrench", wire.STREAM_DEPTH)
            self.ft_writer = wire.wrench_stamped_bytes(self.ft_frame)
            self.create_service(Trigger, "~/tare", self._on_tare)
            par = self.ft.params
            self.get_logger().info(f"F/T sensor model at '{self.ft_frame}': tool {par.tool_mass:.3f} kg at "
                                   f"{np.round(par.tool_com, 4).tolist()} m")
        self._states: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._pending: OrderedDict[int, tuple[Any, np.ndarray]] = OrderedDict()
        self.pub_model = self.create_publisher(Float64MultiArray, "contact/model", wire.STREAM_DEPTH)
        self.pub_wrench = self.create_publisher(WrenchStamped, "contact/wrench", wire.STREAM_DEPTH)
        # the 1 kHz topics as bytes (ros/wire.py): rclpy's message objects were most of the work
        self.js_reader = wire.JointStateReader(m.joint_names, "joint_state")
        self.points_reader = wire.PointCloudReader(self.base_frame)
        self.model_writer = wire.ContactModelWriter()
        self.wrench_writer = wire.wrench_stamped_bytes(self.tcp)
        self.create_subscription(JointState, "joint_states", guarded(self, "joint_states")(self._on_joints), 50,
                                 raw=True)
        self.create_subscription(PointCloud2, "contact/points", guarded(self, "contact/points")(self._on_points), 50,
                                 raw=True)
        self.removal = None
        self._removal_t: float | None = None
        self._removal_shown = -1.0
        if cell.removal.enabled and p["removal_marker_rate"] > 0:
            self._start_removal(p, cell)
        q0 = np.zeros(m.nq)
        self.side.kinematics(q0)  # numba kernels load before the first message
        self.get_logger().info(f"model {cell.contact.model}, K {cell.contact.stiffness:g}, cr {cell.contact.cr:g}; "
                               f"wrench in '{self.tcp}', contact points in '{self.base_frame}'")

    def _start_removal(self, p: dict[str, Any], cell: Any) -> None:
        from robot_grinding_sim.core.contact.preston import face_grid, join_grids
        from robot_grinding_sim.core.job.removal import pass_grid
        from robot_grinding_sim.core.job.setup import job_tool, static_penetration
        from robot_grinding_sim.core.planning.plan_io import plan_from_dict, read_plan
        from robot_grinding_sim.core.record.removal_map import node_table

        part, faces, X_BP, source = load_workpiece(p, self.model, NODE_NAME)
        if getattr(part.face(faces[0]), "is_mesh", False):
            self.get_logger().warning(f"no removal map: {source} is a mesh (it needs a CAD face)")
            return
        try:
            self.tool = job_tool(self.model, cell)  # the pressure under its own footprint
        except InputError as exc:
            raise ParameterError("contact.model" if "contact.model" in str(exc) else "tool.link", str(exc),
                                 NODE_NAME) from None
        passes = None
        if p["plan_file"]:  # the job's grid: the passes' region, as the in-process job's map
            try:
                passes = plan_from_dict(read_plan(p["plan_file"]), p["plan_file"]).passes
            except InputError as exc:
                raise ParameterError("plan_file", str(exc), NODE_NAME) from None
            source = f"{source}, the passes of {p['plan_file']}"
        try:
            if passes is not None:
                self.removal = pass_grid(cell, passes, part, X_BP, self.tool, static_penetration(self.tool, cell))
            else:
                self.removal = join_grids([face_grid(part.face(faces[0]), cell.removal.grid_spacing, X_BP,
                                                     preston_coefficient=cell.removal.kp,
                                                     pressure=cell.removal.pressure)], [faces[0]])
        except InputError as exc:
            raise ParameterError("removal.grid_spacing", str(exc), NODE_NAME) from None
        self.spindle_speed = cell.tool.spindle_speed
        self.pub_removal = self.create_publisher(MarkerArray, "grinding/removal", 2)
        self.pub_removal_depth = None
        self._depth_shown = 0.0
        if passes is not None:  # the map itself only on the job's grid: a whole face at 0.2 mm is ~1M nodes
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.pub_removal_nodes = self.create_publisher(PointCloud2, "grinding/removal_nodes", latched)
            self.pub_removal_depth = self.create_publisher(Float64MultiArray, "grinding/removal_depth", 10)
            self.pub_removal_nodes.publish(cv.array_to_pointcloud2(node_table(self.removal), self.base_frame,
                                                                   self.get_clock().now().to_msg(),
                                                                   REMOVAL_NODE_FIELDS))
        self.create_timer(1.0 / p["removal_marker_rate"], guarded(self, "removal map")(self._publish_removal))
        rc = cell.removal
        self.get_logger().info(f"removal map: {source}, {int(self.removal.inside.sum())} nodes every "
                               f"{rc.grid_spacing * 1e3:g} mm on {len(self.removal.blocks)} face(s), "
                               f"k_p {rc.kp:g} m^2/N")

    def _remove(self, t: float, q: np.ndarray, qd: np.ndarray, rom: Any) -> None:
        from robot_grinding_sim.core.job.removal import accumulate_state

        if (rom is None or rom.gap >= 0.0) and self.removal.work != self._depth_shown:
            self._publish_depth()  # a contact has ended: its removal is in the map at once
        if self._removal_t is not None and 0.0 <= t - self._removal_t < self.p["removal_interval"]:
            return  # this state is inside the interval the next one taken stands for
        prev, self._removal_t = self._removal_t, t
        if rom is None or prev is None or not 0.0 < t - prev < 0.1 + self.p["removal_interval"] or rom.gap >= 0.0:
            return
        force = self.side.normal_force(rom)
        if force > 0.0:
            kin = self.side.kinematics(q, need_minv=False)  # computed for this very state by from_rows
            accumulate_state(self.removal, self.model, self.tcp, self.spindle_speed, kin.X, q, qd, rom.point,
                             rom.normal, force, -rom.gap, t - prev, self.tool, J_tcp=kin.J)

    def _publish_depth(self) -> None:
        """grinding/removal_depth: the depth at each node of grinding/removal_nodes, m."""
        self._depth_shown = self.removal.work
        if self.pub_removal_depth is None:
            return
        d = self.removal.depth
        msg = Float64MultiArray()
        msg.layout.dim = [MultiArrayDimension(label=DEPTH_LABEL, size=len(d), stride=len(d))]
        msg.data = array("d", d.tobytes())
        self.pub_removal_depth.publish(msg)

    def _publish_removal(self) -> None:
        if self.removal.work != self._depth_shown:
            self._publish_depth()
        # a display (RViz, the recorder): with no one listening, building it only stalls the loop
        if self.pub_removal.get_subscription_count() == 0:
            return
        volume = self.removal.volume()
        if volume == self._removal_shown:
            return
        self._removal_shown = volume
        V, T, depth = self.removal.display_mesh(self.p["removal_marker_cell"],
                                                self.p["removal_marker_max_triangles"] // 2)
        stamp = self.get_clock().now()
        if len(T) == 0:
            self.pub_removal.publish(cv.removal_to_marker_array(V, T, depth, self.base_frame, stamp.to_msg()))
            return
        # as bytes: through rclpy's objects a map of a few passes held this node (and the loop) 0.5 s
        self.pub_removal.publish(wire.triangle_marker_bytes(V, T, cv.depth_colors(depth), self.base_frame,
                                                            stamp.nanoseconds, "removal"))

    def _on_joints(self, data: bytes) -> None:
        key, q, qd = self.js_reader.read(data, need_velocity=True)
        if qd is None:
            qd = np.zeros_like(q)
        self._states[key] = (q, qd)
        while len(self._states) > JOINT_STATE_BUFFER:
            self._states.popitem(last=False)
        pending = self._pending.pop(key, None)
        if pending is not None:
            self._solve(*pending, q, qd)

    def _on_tare(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        offset = self.ft.tare()
        response.success = True
        response.message = f"tared at {np.round(offset, 4).tolist()}"
        return response

    def _on_points(self, data: bytes) -> None:
        frame, key, rows = self.points_reader.read(data)
        if frame not in ("", self.base_frame):
            raise InputError(f"contact/points in frame '{frame}', expected '{self.base_frame}'")
        if not np.isfinite(rows).all():
            raise InputError("contact/points: NaN or inf values")
        state = self._states.get(key) if key else (next(reversed(self._states.values())) if self._states else None)
        if state is None:  # its joint state is still on its way: solve when it comes
            self._pending[key] = (key, rows)
            while len(self._pending) > JOINT_STATE_BUFFER:
                self._pending.popitem(last=False)
            return
        self._solve(key, rows, *state)

    def _solve(self, stamp: int, rows: np.ndarray, q: np.ndarray, qd: np.ndarray) -> None:
        t = stamp * 1e-9
        rom = self.side.from_rows(t, q, qd, rows)
        self.pub_model.publish(wire.contact_model_bytes(self.model_writer, rom, t))
        if self.removal is not None:
            self._remove(t, q, qd, rom)
        # the wrench and the F/T reading are outputs (recorder, RViz, the comparison); nobody in the
        # loop waits for them, so with no one listening they cost nothing
        wrench_out = self.pub_wrench.get_subscription_count() > 0
        ft_out = self.ft is not None and self.pub_ft.get_subscription_count() > 0
        if not (wrench_out or ft_out):
            return
        w = np.zeros(6) if rom is None else self.side.wrench(rom)
        if wrench_out:
            self.pub_wrench.publish(self.wrench_writer.encode(stamp, w))
        if ft_out:
            # the tcp's pose at q is from_rows' (cached): a sensor that carries the tool is rigidly
            # mounted to it (one that carries a held part takes the arm's kinematics)
            R_WS, X_S_tcp = sensor_inputs(self.ft, self.model, self.ft_frame, q,
                                          self.side.kinematics(q, need_minv=False).X[:3, :3])
            self.pub_ft.publish(self.ft_writer.encode(stamp, self.ft.measure(w, R_WS, t, X_S_tcp)))


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim contact_solver_node [--ros-args ...]``."""
    return run_node(ContactSolverNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
