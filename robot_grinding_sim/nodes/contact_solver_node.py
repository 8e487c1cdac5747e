"""contact_solver_node: the contact force on the tool from the contact points, and the simulated
F/T sensor reading.

For every ``contact/points`` message (published by collision_node for every joint state, empty
when nothing touches) the force of each contact is computed along its normal with the configured
model and the arm's effective mass at that point and normal, summed into one wrench on the tool:

- ``kelvin_voigt`` (default): F = max(0, K d + D d'), D realising the coefficient of restitution
  ``cr`` for the effective mass m = 1 / (n^T J M^-1 J^T n) (core.contact.KelvinVoigt, clamped
  convention), or the fixed ``damping`` when >= 0.
- ``hunt_crossley`` / ``lankarani_nikravesh`` / ``flores``: F = max(0, K d^n (1 + alpha d')),
  alpha from ``cr`` and the approach speed at the start of the contact (core.contact.HuntCrossley).

d is the contact depth, d' = -n . v its rate, v the velocity of the contact point moving with
``tcp_link`` (J(q) qd, from the joint velocities of the latest ``joint_states``; 0 if none).

Subscribes: ``contact/points`` (sensor_msgs/PointCloud2, fields x y z normal_x normal_y normal_z
depth, frame ``base_frame``), ``joint_states`` (sensor_msgs/JointState).

Publishes:
- ``contact/wrench`` (geometry_msgs/WrenchStamped, frame ``tcp_link``): the contact force on the
  tool and its torque about the tcp, in tcp axes; stamp of the contact points.
- ``ft_sensor/wrench`` (geometry_msgs/WrenchStamped, frame ``ft_frame``) when ``publish_ft``: the
  reading of the simulated sensor (core.ft: the contact wrench moved to the sensor, plus tool
  gravity, bias, noise, first-order low-pass, tare).

Services: ``~/tare`` (std_srvs/Trigger): zero the simulated sensor at its current reading.

Bad messages (NaN, missing fields, missing joints, a frame other than ``base_frame``) are logged
and skipped; a bad parameter stops the node at start-up naming it.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState, PointCloud2
from std_srvs.srv import Trigger

from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams
from robot_grinding_sim.core.contact.laws import HuntCrossley, KelvinVoigt
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded, load_robot, run_node
from robot_grinding_sim.ros.parameters import ParameterError, ParamSpec, declare_parameters

NODE_NAME = "contact_solver_node"
MODELS = ("kelvin_voigt", "hunt_crossley", "lankarani_nikravesh", "flores")

PARAMS = [
    ParamSpec("robot_description_file", "", "URDF of arm and tool; empty: the package's "
              "urdf/ur10e_grinding.urdf", path="file", read_only=True),
    ParamSpec("tcp_link", "tcp", "frame of contact/wrench (torque about its origin); the contact "
              "points move with this link", read_only=True, required=True),
    ParamSpec("base_frame", "", "frame of the contact points; empty: the URDF's root link", read_only=True),
    ParamSpec("model", "kelvin_voigt", "normal force model", choices=MODELS, read_only=True),
    ParamSpec("stiffness", 1.0e5, "contact stiffness K, N/m (Hunt-Crossley family: N/m^exponent)",
              range=(1e-3, 1e12), read_only=True),
    ParamSpec("cr", 0.5, "coefficient of restitution realised by the damping", range=(0.01, 1.0),
              read_only=True),
    ParamSpec("damping", -1.0, "Kelvin-Voigt damping D, N s/m; < 0: from cr and the effective mass",
              range=(-1.0, 1e9), read_only=True),
    ParamSpec("exponent", 1.5, "Hunt-Crossley exponent n (1.5: Hertz sphere)", range=(1.0, 3.0),
              read_only=True),
    ParamSpec("v_floor", 1e-3, "Hunt-Crossley: smallest approach speed for alpha, m/s", range=(1e-9, 10.0),
              read_only=True),
    ParamSpec("effective_mass", 0.0, "effective mass along the normal, kg; 0: from the arm's dynamics "
              "at the contact point and normal", range=(0.0, 1e6), read_only=True),
    ParamSpec("publish_ft", True, "publish ft_sensor/wrench from the sensor model", read_only=True),
    ParamSpec("ft_frame", "ft_sensor", "link of the F/T sensor's measuring face", read_only=True),
    ParamSpec("ft_tool_mass", -1.0, "mass below the measuring face, kg; < 0: the URDF inertials of the "
              "links below ft_frame", range=(-1.0, 1000.0), read_only=True),
    ParamSpec("ft_tool_com", [0.0, 0.0, 0.0], "centre of mass below the measuring face in ft_frame, m "
              "(used when ft_tool_mass >= 0)", length=3, range=(-10.0, 10.0), read_only=True),
    ParamSpec("ft_bias", [0.0] * 6, "sensor offset Fx Fy Fz Tx Ty Tz, N and N m", length=6,
              range=(-1e4, 1e4), read_only=True),
    ParamSpec("ft_noise_std", [0.0] * 6, "white noise standard deviation per channel, N and N m",
              length=6, range=(0.0, 1e3), read_only=True),
    ParamSpec("ft_cutoff_hz", 0.0, "first-order low-pass cut-off, Hz; 0: no filter", range=(0.0, 1e6),
              read_only=True),
    ParamSpec("ft_seed", 0, "seed of the noise", range=(0, 2**31 - 1), read_only=True),
    ParamSpec("gravity", [0.0, 0.0, -9.81], "gravity in base_frame, m/s^2", length=3,
              range=(-100.0, 100.0), read_only=True),
]


def tool_mass_below(urdf: str, model: Any, frame: str) -> tuple[float, np.ndarray]:
    """Mass (kg) and centre of mass (3,) in ``frame`` of the URDF links below ``frame`` (its
    descendants through joints; the frame's own link excluded: it is the sensor itself)."""
    import yourdfpy

    robot = yourdfpy.URDF.load(urdf, build_scene_graph=False, load_meshes=False,
                               build_collision_scene_graph=False, load_collision_meshes=False)
    children: dict[str, list[str]] = {}
    for j in robot.joint_map.values():
        children.setdefault(j.parent, []).append(j.child)
    below, stack = [], list(children.get(frame, []))
    while stack:
        link = stack.pop()
        below.append(link)
        stack += children.get(link, [])
    q0 = np.zeros(model.nq)
    T_S = np.linalg.inv(model.fk(q0, frame))
    mass, moment = 0.0, np.zeros(3)
    for link in below:
        inertial = robot.link_map[link].inertial
        if inertial is None or inertial.mass is None or link not in model.link_names:
            continue
        origin = np.eye(4) if inertial.origin is None else np.asarray(inertial.origin)
        c = (T_S @ model.fk(q0, link) @ origin)[:3, 3]
        mass += float(inertial.mass)
        moment += float(inertial.mass) * c
    return mass, (moment / mass if mass > 0 else np.zeros(3))


class ContactSolverNode(Node):
    """Contact wrench and simulated F/T reading (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_parameters(self, PARAMS)
        self.p = p
        self.model = m = load_robot(p, NODE_NAME, links=("tcp_link",) + (("ft_frame",) if p["publish_ft"] else ()))
        self.base_frame = p["base_frame"] or m.root_link
        self.tcp = p["tcp_link"]
        if p["model"] == "kelvin_voigt":
            self.law: Any = KelvinVoigt(p["stiffness"], cr=p["cr"],
                                        damping=p["damping"] if p["damping"] >= 0 else None)
        else:
            law = {"hunt_crossley": "exact"}.get(p["model"], p["model"])
            self.law = HuntCrossley(p["stiffness"], cr=p["cr"], exponent=p["exponent"], law=law,
                                    v_floor=p["v_floor"])
        self._alpha: float | None = None  # Hunt-Crossley: fixed at the start of each contact
        self.q: np.ndarray | None = None
        self.qd = np.zeros(m.nq)
        self.ft: FTSensorModel | None = None
        if p["publish_ft"]:
            q0 = np.zeros(m.nq)
            X_S_tcp = np.linalg.inv(m.fk(q0, p["ft_frame"])) @ m.fk(q0, self.tcp)
            if p["ft_tool_mass"] >= 0:
                mass, com = p["ft_tool_mass"], np.asarray(p["ft_tool_com"])
            else:
                mass, com = tool_mass_below(m.source, m, p["ft_frame"])
            try:
                self.ft = FTSensorModel(FTSensorParams(
                    X_S_tcp=X_S_tcp, tool_mass=mass, tool_com=com, gravity=p["gravity"], bias=p["ft_bias"],
                    noise_std=p["ft_noise_std"], cutoff_hz=p["ft_cutoff_hz"] or None, seed=p["ft_seed"]))
            except InputError as exc:
                raise ParameterError("ft_tool_mass", str(exc), NODE_NAME) from None
            self.pub_ft = self.create_publisher(WrenchStamped, "ft_sensor/wrench", 50)
            self.create_service(Trigger, "~/tare", self._on_tare)
            self.get_logger().info(f"F/T sensor model at '{p['ft_frame']}': tool {mass:.3f} kg at "
                                   f"{np.round(com, 4).tolist()} m")
        self.pub_wrench = self.create_publisher(WrenchStamped, "contact/wrench", 50)
        self.create_subscription(JointState, "joint_states", guarded(self, "joint_states")(self._on_joints), 50)
        self.create_subscription(PointCloud2, "contact/points",
                                 guarded(self, "contact/points")(self._on_points), 50)
        m.effective_mass(np.zeros(m.nq), self.tcp, m.fk(np.zeros(m.nq), self.tcp)[:3, 3], [0, 0, 1.0])  # warm
        self.get_logger().info(f"model {p['model']}, K {p['stiffness']:g}, cr {p['cr']:g}; wrench in "
                               f"'{self.tcp}', contact points in '{self.base_frame}'")

    def _on_joints(self, msg: JointState) -> None:
        pos = cv.joint_state_to_dict(msg, "position")
        missing = [j for j in self.model.joint_names if j not in pos]
        if missing:
            raise InputError(f"joint_state: missing joints {missing} (expected {self.model.joint_names})")
        vel = cv.joint_state_to_dict(msg, "velocity")
        self.q = np.array([pos[j] for j in self.model.joint_names])
        self.qd = np.array([vel.get(j, 0.0) for j in self.model.joint_names])

    def _on_tare(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.ft is not None
        offset = self.ft.tare()
        response.success = True
        response.message = f"tared at {np.round(offset, 4).tolist()}"
        return response

    def solve(self, points: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Wrench (6,) on the tool at the tcp in tcp axes from contact rows (N, 7) in base_frame."""
        m = self.model
        T_tcp = m.fk(q, self.tcp)
        force, torque = np.zeros(3), np.zeros(3)
        if len(points) == 0:
            self._alpha = None
            return np.zeros(6)
        for x, y, z, nx, ny, nz, depth in points:
            p = np.array([x, y, z])
            n = np.array([nx, ny, nz])
            norm = np.linalg.norm(n)
            if not 0.9 < norm < 1.1:
                raise InputError(f"contact/points: normal {n.tolist()} is not a unit vector")
            if depth < 0:
                raise InputError(f"contact/points: negative depth {depth}")
            n = n / norm
            J = m.jacobian(q, self.tcp, p)[:3]
            dd = -float(n @ (J @ qd))  # > 0 while the tool moves into the part
            if isinstance(self.law, KelvinVoigt):
                mass = self.p["effective_mass"] or m.effective_mass(q, self.tcp, p, n)
                f = float(self.law.force(depth, dd, mass)) if np.isfinite(mass) else self.law.stiffness * depth
            else:
                if self._alpha is None:
                    self._alpha = self.law.alpha(max(dd, 0.0))
                f = float(self.law.force(depth, dd, self._alpha))
            force += f * n
            torque += np.cross(p - T_tcp[:3, 3], f * n)
        R = T_tcp[:3, :3]
        return np.r_[R.T @ force, R.T @ torque]

    def _on_points(self, msg: PointCloud2) -> None:
        if msg.header.frame_id not in ("", self.base_frame):
            raise InputError(f"contact/points in frame '{msg.header.frame_id}', expected '{self.base_frame}'")
        pts = cv.pointcloud2_to_array(msg)
        if not np.isfinite(pts).all():
            raise InputError("contact/points: NaN or inf values")
        if self.q is None:
            raise InputError("no joint_states received yet: cannot place the contacts on the arm")
        w = self.solve(pts, self.q, self.qd)
        stamp = msg.header.stamp
        self.pub_wrench.publish(cv.array_to_wrench_stamped(w, self.tcp, stamp))
        if self.ft is not None:
            R_WS = self.model.fk(self.q, self.p["ft_frame"])[:3, :3]
            reading = self.ft.measure(w, R_WS, cv.time_to_sec(stamp))
            self.pub_ft.publish(cv.array_to_wrench_stamped(reading, self.p["ft_frame"], stamp))


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim contact_solver_node [--ros-args ...]``."""
    return run_node(ContactSolverNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
