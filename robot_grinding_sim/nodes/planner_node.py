"""planner_node: grinding passes on the exact CAD surface, the job trajectory, and their markers.

A thin adapter over :func:`robot_grinding_sim.core.job.plan_job.plan_job`, what ``grinding plan``
runs: the cell's parameters (config/cell.yaml: workpiece, passes, process, contact, servo,
optimise, ...) in, a plan out (with the optimisation on, the per-pass offsets and the predicted
mean force come from simulating the job in process).

With ``plan_file`` set it plans nothing: it reads that plan.json (as grinding_executive runs it)
and publishes it, so that RViz and the recorder show the plan a job runs.

Serves:
- ``~/plan`` (std_srvs/Trigger): plan again with the current parameters (or read ``plan_file``
  again). ``success`` false and the reason in ``message`` when the plan cannot be made (unreadable
  file, face index out of range, unreachable or colliding waypoint, not a plan.json, ...); nothing
  is published then and the node keeps running. On success ``message`` summarises the plan.

Publishes (latched: transient-local durability, so late subscribers get the last plan):
- ``grinding/path`` (nav_msgs/Path, frame ``base_frame``): the TCP poses of every pass waypoint,
  in the order of travel (tool z into the surface, x along travel; the TCP is the ball centre).
- ``grinding/trajectory`` (trajectory_msgs/JointTrajectory, frame ``base_frame``): the job
  trajectory (approach, engagement, dwell, passes, retreats, links, with the per-pass offsets):
  positions and velocities (cubic Hermite, as a joint_trajectory_controller interpolates them),
  ``time_from_start`` from the start of the job. The same as plan.json's ``trajectory``.
- ``grinding/plan`` (std_msgs/String): the whole plan as plan.json's text (docs/planner.md):
  what grinding_executive runs when it has no ``plan_file``.
- ``~/markers`` (visualization_msgs/MarkerArray, frame ``base_frame``): namespace ``passes``
  (one LINE_STRIP of surface points per pass), ``links`` (the linking moves of the TCP),
  ``normals`` (ARROWs of the outward normal at every ``marker_normal_every``-th waypoint) and
  ``part`` (the tessellated part as a TRIANGLE_LIST mesh marker).

Parameters: robot_grinding_sim/ros/schemas.py (``ros2 param describe /planner_node <name>``),
config/cell.yaml and config/planner_node.yaml. The cell's parameters may be changed at run time
(``ros2 param set``) and take effect at the next ``~/plan`` call; a bad value is refused naming
the parameter.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import Path as PathMsg
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.core.errors import GrindingSimError
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import run_node, stoppable
from robot_grinding_sim.ros.node_setup import set_up_node
from robot_grinding_sim.ros.schemas import node_specs

NODE_NAME = "planner_node"


class PlannerNode(Node):
    """Plans on request; publishes the path, the trajectory and the markers (module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.specs = node_specs(NODE_NAME, writable=True)
        node = set_up_node(self, NODE_NAME, writable=True, cell=False)
        self.p, self.model, self.base_frame = node.params, node.model, node.base_frame
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_path = self.create_publisher(PathMsg, "grinding/path", latched)
        self.pub_traj = self.create_publisher(JointTrajectory, "grinding/trajectory", latched)
        self.pub_markers = self.create_publisher(MarkerArray, "~/markers", latched)
        self.pub_plan = self.create_publisher(String, "grinding/plan", latched)
        self.create_service(Trigger, "~/plan", self._on_plan)
        self.last_plan = None
        self._start_timer = None
        if self.p["plan_on_start"]:
            # wall clock: on sim time the start-up plan would wait for /clock to move
            self._start_timer = self.create_timer(0.1, self._plan_once, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"ready: ~/plan plans on {self._source()} in frame {self.base_frame}")

    # ------------------------------------------------------------------------------------------
    def _value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _source(self) -> str:
        return self._value("plan_file") or self._value("workpiece.part")

    def _plan_once(self) -> None:
        if self._start_timer is not None:
            self._start_timer.cancel()
            self.destroy_timer(self._start_timer)
            self._start_timer = None
        ok, message = self.plan()
        (self.get_logger().info if ok else self.get_logger().error)(f"start-up plan: {message}")

    def _on_plan(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        ok, message = self.plan()
        response.success, response.message = ok, message
        (self.get_logger().info if ok else self.get_logger().warning)(f"~/plan: {message}")
        return response

    def plan(self) -> tuple[bool, str]:
        """Plan with the current parameters and publish; (success, message). Never raises."""
        from robot_grinding_sim.core.config import config_from_mapping
        from robot_grinding_sim.core.job.plan_job import plan_job
        from robot_grinding_sim.core.planning import plan_io

        t0 = time.perf_counter()
        try:
            cell = config_from_mapping({s.name: self._value(s.name) for s in self.specs}, allow_unknown=True)
            check, out = bool(self._value("check_collisions")), self._value("output_file")
            plan_file = self._value("plan_file")

            def compute() -> Any:  # no ROS in here: a stop leaves it behind (see stoppable)
                if plan_file:
                    text = plan_io.read_plan_text(plan_file)  # what the executive runs, as it is
                    result = plan_io.plan_from_dict(plan_io.parse_plan(text, plan_file), plan_file)
                    if result.trajectory is None:
                        raise GrindingSimError(f"{plan_file}: the plan has no job trajectory")
                    return result, text
                result = plan_job(cell, check_collisions=check)
                if out:
                    plan_io.write_plan(result, out)  # atomic
                return result, plan_io.plan_text(result)

            # tens of seconds with the optimisation: SIGINT/SIGTERM does not wait for it
            result, text = stoppable(compute)
            msgs = (*self._messages(result), String(data=text))
        except (GrindingSimError, OSError, ValueError) as exc:
            return False, f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # keep the node alive whatever happened; say what it was
            self.get_logger().error(f"planning crashed: {type(exc).__name__}: {exc}")
            return False, f"internal error: {type(exc).__name__}: {exc}"
        for pub, msg in zip((self.pub_path, self.pub_traj, self.pub_markers, self.pub_plan), msgs, strict=True):
            pub.publish(msg)
        self.last_plan = result
        s = result.summary()
        force = f"; read from {plan_file}" if plan_file else ""
        if result.force_target is not None:
            force += "; predicted mean force " + ", ".join(f"{f:.3f}" for f in
                                                         result.force_target["predicted_mean_force_n"]) + " N"
        return True, (f"{s['passes']} passes, {s['waypoints']} waypoints, trajectory "
                      f"{s.get('trajectory_points', 0)} points / {s.get('trajectory_duration_s', 0.0):.1f} s{force} "
                      f"(planned in {time.perf_counter() - t0:.1f} s)")

    # ------------------------------------------------------------------------------------------
    def _messages(self, result: Any) -> tuple[PathMsg, JointTrajectory, MarkerArray]:
        from scipy.spatial.transform import Rotation

        X = result.workpiece_pose
        R, o = X[:3, :3], X[:3, 3]
        stamp = self.get_clock().now().to_msg()
        path = PathMsg()
        path.header.frame_id, path.header.stamp = self.base_frame, stamp
        for pos, quat in zip(result.tcp_positions, result.tcp_quaternions, strict=True):
            P = pos @ R.T + o
            Q = (Rotation.from_matrix(R) * Rotation.from_quat(quat)).as_quat()
            for k in range(len(P)):
                ps = PoseStamped()
                ps.header = path.header
                T = np.eye(4)
                T[:3, :3] = Rotation.from_quat(Q[k]).as_matrix()
                T[:3, 3] = P[k]
                ps.pose = cv.matrix_to_pose(T)
                path.poses.append(ps)
        t = result.trajectory
        traj = cv.arrays_to_joint_trajectory(t.joint_names, t.times, t.positions, t.velocities, None,
                                             frame_id=self.base_frame)
        traj.header.stamp = stamp
        return path, traj, self._markers(result, stamp)

    def _markers(self, result: Any, stamp: Any) -> MarkerArray:
        X = result.workpiece_pose
        R, o = X[:3, :3], X[:3, 3]
        out = MarkerArray()
        clear = Marker()
        clear.action = Marker.DELETEALL
        out.markers.append(clear)

        def base(ns: str, mid: int, kind: int) -> Marker:
            m = Marker()
            m.header.frame_id, m.header.stamp = self.base_frame, stamp
            m.ns, m.id, m.type, m.action = ns, mid, kind, Marker.ADD
            m.pose.orientation.w = 1.0
            m.lifetime = Duration()
            return m

        for p in result.passes:
            m = base("passes", p.index, Marker.LINE_STRIP)
            m.scale.x = 0.001
            m.color.b, m.color.a = 1.0, 1.0
            m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in p.points @ R.T + o]
            out.markers.append(m)
        for k, mv in enumerate(mv for mv in result.moves if mv.kind == "link"):
            m = base("links", k, Marker.LINE_STRIP)
            m.scale.x = 0.0005
            m.color.r = m.color.g = m.color.b = 0.6
            m.color.a = 0.8
            m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in mv.positions @ R.T + o]
            out.markers.append(m)
        every = int(self._value("marker_normal_every"))
        pts = np.vstack([p.points for p in result.passes])[::every] @ R.T + o
        nrm = np.vstack([p.normals for p in result.passes])[::every] @ R.T
        for k, (a, n) in enumerate(zip(pts, nrm, strict=True)):
            m = base("normals", k, Marker.ARROW)
            m.scale.x, m.scale.y, m.scale.z = 0.0008, 0.0016, 0.002
            m.color.r, m.color.a = 1.0, 1.0
            b = a + 0.01 * n
            m.points = [Point(x=float(a[0]), y=float(a[1]), z=float(a[2])),
                        Point(x=float(b[0]), y=float(b[1]), z=float(b[2]))]
            out.markers.append(m)
        mesh = self._part_mesh(result)
        if mesh is not None:
            m = base("part", 0, Marker.TRIANGLE_LIST)
            m.scale.x = m.scale.y = m.scale.z = 1.0
            m.color.r, m.color.g, m.color.b, m.color.a = 0.75, 0.75, 0.78, 1.0
            tri = np.asarray(mesh.vertices)[np.asarray(mesh.faces)].reshape(-1, 3) @ R.T + o
            m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in tri]
            out.markers.append(m)
        return out

    def _part_mesh(self, result: Any) -> Any:
        if result.mesh is not None:
            return result.mesh
        from robot_grinding_sim.core.geometry import parts

        try:
            return parts.load_part(result.source, result.unit or None).tessellate(deflection=2e-4)
        except GrindingSimError as exc:
            self.get_logger().warning(f"no part marker: {exc}")
            return None


def main(args: list[str] | None = None) -> int:
    return run_node(PlannerNode, args)


if __name__ == "__main__":
    sys.exit(main())
