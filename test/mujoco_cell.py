"""An emulated cell whose physics the package does not contain: MuJoCo's arm and contact.

The "measured" data that ``grinding import-log``, ``replay`` and ``calibrate`` then see (issue 25,
item 6). What is MuJoCo's here, not the package's:

- the arm: a 6-joint MJCF built from the URDF's kinematics and inertias (read with yourdfpy, not
  the package's model), each joint a motor hinge (rotor inertia, ``armature``) and a link hinge in
  series joined by a spring (``stiffness``, ``damping``): the joint's elasticity; the encoders
  (what is recorded) read the motor side, the tool goes where the links are;
- the controller: a PD on the motor hinges following the commanded positions after a delay
  (``Truth.delay`` s: the controller's latency), gravity compensated (``gravcomp``);
- the contact: MuJoCo's soft constraint (``solref``, ``solimp``: an impedance that grows with the
  depth, with friction), a sphere on a box, not the package's Kelvin-Voigt or Hunt-Crossley; the
  box is ``Truth.height_error`` m higher than the part's nominal pose (the part's height error);
- the F/T sensor: the contact wrench MuJoCo's solver gives (``mj_contactForce``) moved to the sensor
  frame, plus the tool's weight and a bias, a first-order low-pass and white noise.

Force control (``run(..., force_control=True)``): the package's driver code
(:class:`~robot_grinding_sim.core.execution.force_control.NormalForceControl`, as hardware_driver runs it,
its ``admittance.*`` the cell's) closes the loop on the compensated sensor reading every
``1 / control_rate`` s; its streamed points reach the MuJoCo controller at their time.

Records: ``t`` (N,) s, ``q`` (N, 6) rad (motor side + encoder noise), ``qd`` (N, 6) rad/s, ``w`` (N, 6)
the raw F/T reading in ``ft_sensor`` (N, N m), ``fn_true`` (N,) MuJoCo's normal contact force, every
``1 / record_rate`` s.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

JOINT_STIFFNESS = (4.0e5, 4.0e5, 2.0e5, 6.0e4, 6.0e4, 6.0e4)  # N m/rad (link side spring)
ARMATURE = (1.0, 1.0, 0.5, 0.1, 0.1, 0.1)  # kg m^2 (rotor inertia through the gear)


@dataclass
class Truth:
    """The emulated cell's truth (SI)."""

    solref: tuple[float, float] = (0.004, 1.0)
    solimp: tuple[float, ...] = (0.9, 0.98, 0.0004, 0.5, 2.0)
    #: 0: frictionless (condim 1); MuJoCo's friction cone made the ball stick-slip at 250 Hz on the plate
    friction: float = 0.0
    joint_stiffness: tuple[float, ...] = JOINT_STIFFNESS
    joint_damping_ratio: float = 0.2
    kp: tuple[float, ...] = (6.0e4, 6.0e4, 3.0e4, 4.0e3, 4.0e3, 4.0e3)
    delay: float = 0.004
    height_error: float = 8e-5
    bias: tuple[float, ...] = (0.3, -0.2, 0.5, 0.01, -0.01, 0.005)
    noise: tuple[float, ...] = (0.05, 0.05, 0.05, 0.002, 0.002, 0.002)
    cutoff_hz: float = 150.0
    encoder_noise: float = 2e-7
    timestep: float = 5e-4
    seed: int = 7
    #: the force controller's virtual damping D_a (N s/m): another cell's controller tuned unlike the
    #: package's default (6e4), which calibrate --replay --force-control must find
    admittance_damping: float = 3.0e4
    extra: dict[str, Any] = field(default_factory=dict)


def _quat(R: np.ndarray) -> str:
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return f"{w:.12g} {x:.12g} {y:.12g} {z:.12g}"


def _vec(v: Any) -> str:
    return " ".join(f"{x:.12g}" for x in np.asarray(v, dtype=float).ravel())


def build_mjcf(urdf: str, X_plate: np.ndarray, half: np.ndarray, centre: np.ndarray, tcp: str, sensor: str,
               radius: float, truth: Truth) -> tuple[str, dict[str, Any]]:
    """The MJCF text and what the cell needs of the URDF (the tool's mass and centre of mass in the
    sensor frame, the sensor's and tcp's poses in the last link's body)."""
    import yourdfpy

    robot = yourdfpy.URDF.load(urdf, build_scene_graph=False, load_meshes=False, build_collision_scene_graph=False,
                               load_collision_meshes=False)
    children: dict[str, list[Any]] = {}
    for j in robot.joint_map.values():
        children.setdefault(j.parent, []).append(j)
    moving: list[str] = []
    info: dict[str, Any] = {"frames": {}}

    def origin(j: Any) -> np.ndarray:
        return np.eye(4) if j.origin is None else np.asarray(j.origin, dtype=float)

    def inertial_xml(links: list[tuple[str, np.ndarray]]) -> str:
        """One inertial for the links merged into a body (each with its pose in the body)."""
        m_tot, c_tot, I_tot = 0.0, np.zeros(3), np.zeros((3, 3))
        parts = []
        for name, X in links:
            ine = robot.link_map[name].inertial
            if ine is None or not ine.mass:
                continue
            Xi = X @ (np.eye(4) if ine.origin is None else np.asarray(ine.origin))
            parts.append((float(ine.mass), Xi[:3, 3], Xi[:3, :3] @ np.asarray(ine.inertia) @ Xi[:3, :3].T))
        for m, c, _ in parts:
            m_tot += m
            c_tot += m * c
        if m_tot <= 0:
            return '<inertial pos="0 0 0" mass="0.001" diaginertia="1e-6 1e-6 1e-6"/>'
        c_tot /= m_tot
        for m, c, I in parts:
            d = c - c_tot
            I_tot += I + m * (float(d @ d) * np.eye(3) - np.outer(d, d))
        I_tot += 1e-6 * np.eye(3)
        return (f'<inertial pos="{_vec(c_tot)}" mass="{m_tot:.9g}" fullinertia="{I_tot[0, 0]:.9g} {I_tot[1, 1]:.9g} '
                f'{I_tot[2, 2]:.9g} {I_tot[0, 1]:.9g} {I_tot[0, 2]:.9g} {I_tot[1, 2]:.9g}"/>')

    def body(link: str, X_in: np.ndarray, depth: int) -> str:
        """The body of ``link`` (its frame X_in in the body) with the fixed links below merged in."""
        merged = [(link, X_in)]
        out_children = []
        stack = [(link, X_in)]
        while stack:
            name, X = stack.pop()
            info["frames"][name] = X
            for j in children.get(name, []):
                Xc = X @ origin(j)
                if j.type == "fixed":
                    merged.append((j.child, Xc))
                    stack.append((j.child, Xc))
                else:
                    out_children.append((j, Xc))
        xml = [inertial_xml(merged)] if depth > 0 else []
        for j, Xc in out_children:
            i = len(moving)
            moving.append(j.name)
            k = truth.joint_stiffness[i]
            axis = _vec(np.asarray(j.axis if j.axis is not None else [0, 0, 1], dtype=float))
            # the motor (rotor) and the link in series: the spring between them is the joint's elasticity
            link_inertia_guess = 5.0 if i < 3 else 0.2
            damp = 2.0 * truth.joint_damping_ratio * math.sqrt(k * link_inertia_guess)
            inner = body(j.child, np.eye(4), depth + 1)
            xml.append(
                f'<body name="{j.child}_rotor" pos="{_vec(Xc[:3, 3])}" quat="{_quat(Xc[:3, :3])}" gravcomp="1">'
                f'<inertial pos="0 0 0" mass="0.01" diaginertia="1e-5 1e-5 1e-5"/>'
                f'<joint name="{j.name}_motor" axis="{axis}" armature="{truth.extra.get("armature", ARMATURE)[i]}"/>'
                f'<body name="{j.child}" gravcomp="1">'
                f'<joint name="{j.name}" axis="{axis}" stiffness="{k:.9g}" damping="{damp:.9g}"/>'
                f'{inner}</body></body>')
        return "".join(xml)

    owner: dict[str, str] = {}

    # which body each link ends up in (for the tool geom and the sensor frame)
    def assign(link: str, body_name: str) -> None:
        owner[link] = body_name
        for j in children.get(link, []):
            assign(j.child, body_name if j.type == "fixed" else j.child)

    child_links = {j.child for j in robot.joint_map.values()}
    root = next(name for name in robot.link_map if name not in child_links)
    assign(root, "world")
    body_xml = body(root, np.eye(4), 0)
    tool_body = owner[tcp]
    info["joints"] = moving
    info["tool_body"] = tool_body
    # the tool: the sphere at the tcp, in the tool body (frames[tcp] is in that body's frame)
    X_tcp = info["frames"][tcp]
    surface = (f'condim="{3 if truth.friction > 0 else 1}" friction="{truth.friction} 0.005 0.0001" '
               f'solref="{_vec(truth.solref)}" solimp="{_vec(truth.solimp)}"')
    geom = (f'<geom name="tool" type="sphere" size="{radius:.9g}" pos="{_vec(X_tcp[:3, 3])}" contype="1" '
            f'conaffinity="0" {surface} mass="0"/>')
    body_xml = body_xml.replace(f'<body name="{tool_body}" gravcomp="1">', f'<body name="{tool_body}" gravcomp="1">'
                                + geom, 1)
    Xp = np.asarray(X_plate, dtype=float)
    c = Xp[:3, :3] @ centre + Xp[:3, 3]
    plate = (f'<geom name="plate" type="box" size="{_vec(half)}" pos="{_vec(c)}" quat="{_quat(Xp[:3, :3])}" '
             f'contype="0" conaffinity="1" {surface}/>')
    actuators = "".join(f'<motor name="{n}_m" joint="{n}_motor" gear="1" ctrllimited="false"/>' for n in moving)
    xml = (f'<mujoco model="independent_cell"><compiler angle="radian" autolimits="true"/>'
           f'<option timestep="{truth.timestep}" gravity="0 0 -9.81" integrator="implicitfast" cone="elliptic"/>'
           f'<worldbody>{plate}{body_xml}</worldbody><actuator>{actuators}</actuator></mujoco>')
    info["sensor_in_tool_body"] = info["frames"][sensor]
    return xml, info


@dataclass
class Record:
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    w: np.ndarray
    fn_true: np.ndarray


class MujocoCell:
    """The emulated cell (module docstring) for a package cell (robot, tool, sensor frame) and a plate
    at ``pose`` (the nominal part pose; the truth's box sits ``truth.height_error`` higher)."""

    def __init__(self, cell: Any, pose: Any, truth: Truth | None = None) -> None:
        import mujoco

        from robot_grinding_sim.core.geometry import parts
        from robot_grinding_sim.core.job.setup import cell_robot_model
        from robot_grinding_sim.core.planning.planner import pose_matrix
        from robot_grinding_sim.core.resources import default_urdf

        self.truth = truth or Truth()
        self.cell = cell
        self.model_pkg = cell_robot_model(cell)  # the package's model: only for the driver's code (force control)
        urdf = cell.robot.description_file or str(default_urdf())
        lo, hi = parts.load_part(cell.workpiece.part).bounds
        X = pose_matrix(pose).copy()
        X[:3, 3] += X[:3, 2] * self.truth.height_error
        from robot_grinding_sim.core.geometry.tool_contact import tool_sphere_radius

        radius = tool_sphere_radius(self.model_pkg, cell.tool.tcp_link, cell.tool.link)
        xml, self.info = build_mjcf(urdf, X, (hi - lo) / 2.0, (hi + lo) / 2.0, cell.tool.tcp_link,
                                    cell.ft_sensor.frame, radius, self.truth)
        self.m = mujoco.MjModel.from_xml_string(xml)
        self.d = mujoco.MjData(self.m)
        self.mj = mujoco
        self.motor_q = np.array([self.m.jnt_qposadr[self.m.joint(f"{n}_motor").id] for n in self.info["joints"]])
        self.link_q = np.array([self.m.jnt_qposadr[self.m.joint(n).id] for n in self.info["joints"]])
        self.motor_v = np.array([self.m.jnt_dofadr[self.m.joint(f"{n}_motor").id] for n in self.info["joints"]])
        self.tool_geom = self.m.geom("tool").id
        self.tool_body = self.m.body(self.info["tool_body"]).id
        from robot_grinding_sim.core.sim.ft import ft_sensor_model

        p = ft_sensor_model(cell, self.model_pkg).params  # the tool below the sensor (URDF inertials)
        self.tool_mass, self.tool_com = p.tool_mass, p.tool_com
        self.X_S = self.info["sensor_in_tool_body"]  # the sensor frame in the tool body

    def _contact_wrench_world(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(force (3,), torque about the world origin (3,), normal force) on the tool from the plate."""
        mj, m, d = self.mj, self.m, self.d
        F, T, fn = np.zeros(3), np.zeros(3), 0.0
        f6 = np.zeros(6)
        for i in range(d.ncon):
            con = d.contact[i]
            if self.tool_geom not in (con.geom1, con.geom2):
                continue
            mj.mj_contactForce(m, d, i, f6)
            frame = np.asarray(con.frame).reshape(3, 3)  # rows: normal, tangents (world)
            f_world = frame.T @ f6[:3]  # on geom2 from geom1 (MuJoCo: the force geom1 exerts on geom2)
            if con.geom1 == self.tool_geom:
                f_world = -f_world
            F += f_world
            T += np.cross(np.asarray(con.pos), f_world)
            fn += abs(f6[0])
        return F, T, fn

    def run(self, traj: Any, force_control: bool = False, plan_data: dict | None = None, record_rate: float = 500.0,
            control_rate: float = 500.0, tail: float = 0.3) -> Record:
        """Follow a job trajectory (the package's JointTrajectory; its interpolation is the
        controller's) from rest at its first knot; record at ``record_rate`` Hz."""
        mj, m, d, tr = self.mj, self.m, self.d, self.truth
        rng = np.random.default_rng(tr.seed)
        mj.mj_resetData(m, d)
        q0 = np.asarray(traj.positions[0], dtype=float)
        d.qpos[self.motor_q] = q0
        d.qpos[self.link_q] = 0.0
        mj.mj_forward(m, d)
        interp = traj.interpolator(self.model_pkg)
        kp = np.asarray(tr.kp)
        arm = np.asarray(tr.extra.get("armature", ARMATURE))
        kd = 2.0 * 0.9 * np.sqrt(kp * (arm + np.array([3.0, 3.0, 1.0, 0.05, 0.05, 0.05])))
        dt = m.opt.timestep
        T_end = float(traj.duration) + tail
        n_steps = int(round(T_end / dt))
        rec_every = int(round(1.0 / (record_rate * dt)))
        ctl_every = int(round(1.0 / (control_rate * dt)))
        fc = None
        if force_control:
            from robot_grinding_sim.core.execution.force_control import NormalForceControl

            fc = NormalForceControl(self.model_pkg, dataclasses.replace(self.cell.admittance,
                                                                        damping=tr.admittance_damping))
            fc.set_plan(plan_data, "plan")
            fc.command(0.0, 1e-9, list(traj.joint_names), traj.times, traj.positions, traj.velocities)
            windows = traj.pass_windows()
        arrivals: list[tuple[float, np.ndarray, np.ndarray]] = []
        point: tuple[np.ndarray, np.ndarray] | None = None
        history: list[tuple[float, np.ndarray, np.ndarray]] = []
        alpha = 1.0 - math.exp(-2.0 * math.pi * tr.cutoff_hz * dt)
        w_filt = None
        bias = np.asarray(tr.bias)
        g = np.array([0.0, 0.0, -9.81])
        out: dict[str, list] = {"t": [], "q": [], "qd": [], "w": [], "fn": []}
        for k in range(n_steps + 1):
            t = k * dt
            # the sensor: contact wrench in the sensor frame + weight + bias, low-pass, noise
            F, Tw, fn = self._contact_wrench_world()
            Rb, pb = d.xmat[self.tool_body].reshape(3, 3), d.xpos[self.tool_body]
            R_S = Rb @ self.X_S[:3, :3]
            p_S = pb + Rb @ self.X_S[:3, 3]
            F_S = R_S.T @ F
            T_S = R_S.T @ (Tw - np.cross(p_S, F))
            Wg = self.tool_mass * (R_S.T @ g)
            raw = np.r_[F_S + Wg, T_S + np.cross(self.tool_com, Wg)] + bias
            w_filt = raw if w_filt is None else w_filt + alpha * (raw - w_filt)
            # the commanded reference: the plan (position control) or the driver's streamed points
            if fc is not None and k % ctl_every == 0:
                comp = w_filt[:3] - Wg - bias[:3]  # the driver compensates with the identified tool and bias
                f_world = R_S @ comp
                tau = t
                idx = next((i for i, a, b in windows if a <= tau <= b), -1)
                fc.progress(t, idx)
                sp = fc.update(t, f_world)
                if sp is not None:
                    arrivals.append((sp.time, sp.positions, sp.velocities))
            if fc is not None:
                while arrivals and arrivals[0][0] <= t + 1e-12:
                    _, qp, vp = arrivals.pop(0)
                    point = (qp, vp)
                q_ref, qd_ref = point if point is not None else (q0, np.zeros(6))
            else:
                q_ref, qd_ref, _ = interp.sample(min(t, float(traj.duration)))
            history.append((t, np.asarray(q_ref, dtype=float), np.asarray(qd_ref, dtype=float)))
            # the controller's delay
            while len(history) > 1 and history[1][0] <= t - tr.delay + 1e-12:
                history.pop(0)
            _, q_c, qd_c = history[0]
            qm, vm = d.qpos[self.motor_q], d.qvel[self.motor_v]
            d.ctrl[:] = kp * (q_c - qm) + kd * (qd_c - vm)
            if k % rec_every == 0:
                out["t"].append(t)
                out["q"].append(qm + rng.normal(0.0, tr.encoder_noise, 6))
                out["qd"].append(vm.copy())
                out["w"].append(w_filt + rng.normal(0.0, 1.0, 6) * np.asarray(tr.noise))
                out["fn"].append(fn)
            mj.mj_step(m, d)
        return Record(*(np.asarray(out[key], dtype=float) for key in ("t", "q", "qd", "w", "fn")))


def write_rtde_csv(path: Path, rec: Record) -> None:
    """The record as UR's RTDE recording writes it (space separated, a header), by the csv module."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f, delimiter=" ")
        out.writerow(["timestamp", *(f"actual_q_{i}" for i in range(6)), *(f"actual_qd_{i}" for i in range(6)),
                      *(f"actual_TCP_force_{i}" for i in range(6))])
        for k in range(len(rec.t)):
            out.writerow([repr(float(rec.t[k])), *map(repr, rec.q[k].tolist()), *map(repr, rec.qd[k].tolist()),
                          *map(repr, rec.w[k].tolist())])
