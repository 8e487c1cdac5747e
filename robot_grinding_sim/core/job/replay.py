"""Replay: the model's force along a measured run's joint states (``grinding replay``).

Input: the measured joint states (t (N,) s, q (N, n) rad, qd or None), the part at its pose in
``base_link`` (a CAD file or built-in part and a pose, or a plan.json's), the cell. Output: the
model's contact force at every sample, as the in-process job computes it
(:class:`~robot_grinding_sim.core.sim.coupled_step.ContactSide`: the ball tool's contact on the
exact surface, :class:`~robot_grinding_sim.core.geometry.tool_contact.ToolContactQuery`, the
effective mass, the contact law and its damping, the tangential grinding force), written as a bag
that ``grinding compare`` takes.

Two modes:

- **position** (:func:`replay_path`): the arm is where the joint states say; the force at each
  sample is the law's at the tool's penetration and its rate there (``qd`` from the joint states,
  else finite differences of ``q``). No servo: the measured path is the arm's.
- **force control** (:func:`replay_force_control`): on a force-controlled run the measured path
  already holds the contact (the controller moved the tool until the force was the target), so
  the path alone says little about the force. The replay then runs the driver's controller
  (:class:`~robot_grinding_sim.core.execution.force_control.NormalForceControl`, the same code
  hardware_driver runs, with ``admittance.*`` of the cell or as given) on the plan that ran,
  every control period, with the simulated force; the arm is the job's coupled step (its servo,
  ``servo.*``, following each streamed point as its trajectory controller would, and the contact
  side); the plan's clock is found from the measured joint states (:func:`plan_clock_offset`).

``surface_offset`` (m) moves the part's surface along its outward normal (> 0: the part is
thicker, or higher, than its CAD at its pose): the part's height error that ``grinding
calibrate`` fits with the stiffness.

The measured wrench is made comparable (:func:`measured_contact_wrench`): with what the import
declared (its frame, raw or compensated), the tool's weight and the sensor's bias removed (a raw
reading: the cell's ``ft_sensor.*``) and the wrench moved to the tcp, in tcp axes, as the
simulated ``/contact/wrench``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import AdmittanceConfig, CellConfig
from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

#: UR's controller "base" frame (RTDE's actual_TCP_force) is ur_description's base_link turned by pi
#: about z; used when the robot's URDF has no link "base"
UR_BASE = "base"


@dataclass
class ReplayScene:
    """The cell's robot and the part at its pose, with the contact query the job uses.

    Attributes: cell, model (RobotModel, tip = tcp), query (ToolContactQuery), X_BP (4, 4) the part's
    pose in base_link, faces, source (the part), radius (the ball tool's, m), plan_data (or None).
    """

    cell: CellConfig
    model: Any
    query: Any
    X_BP: FloatArray
    faces: list[int]
    source: str
    radius: float
    plan_data: dict[str, Any] | None = None


def pose_matrix(pose: Any) -> FloatArray:
    """(4, 4) from 'x y z roll pitch yaw' (6,) m, rad (or a (4, 4))."""
    from robot_grinding_sim.core.planning.planner import pose_matrix as pm

    return np.asarray(pm(pose), dtype=float)


def replay_scene(cell: CellConfig, part: str | None = None, pose: Any = None, faces: list[int] | None = None,
                 plan_file: str | None = None) -> ReplayScene:
    """The scene of a replay: the part of ``plan_file`` at its pose (``pose`` moves it), or ``part``
    at ``pose`` (required then) on ``faces`` (default: the face the planner would grind).

    Raises:
        InputError: no part, no pose, a face out of range, a tool the plan was not made for.
    """
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, tool_sphere_radius, workpiece_scene
    from robot_grinding_sim.core.job.setup import cell_robot_model
    from robot_grinding_sim.core.planning.planner import default_face

    model = cell_robot_model(cell)
    radius = tool_sphere_radius(model, cell.tool.tcp_link, cell.tool.link)
    wp = cell.workpiece
    plan_data = None
    if plan_file is not None:
        from robot_grinding_sim.core.planning.plan_io import plan_from_dict, read_plan

        plan_data = read_plan(plan_file)
        plan = plan_from_dict(plan_data, plan_file)
        if part is None:
            part = plan.source
            faces = faces or list(plan.faces)
        X = plan.workpiece_pose if pose is None else pose_matrix(pose)
    else:
        if part is None:
            raise InputError("no part: give --part CAD (a STEP/IGES/STL file or a built-in part) or --plan")
        if pose is None:
            raise InputError("no --pose: the part's pose in base_link ('x y z roll pitch yaw', m, rad) is "
                             "needed; `grinding register` finds it from touch points")
        X = pose_matrix(pose)
    solid = parts.load_part(part, wp.unit or None)
    face_list = [default_face(solid)] if not faces else [int(f) for f in faces]
    for f in face_list:
        solid.face(f)  # InputError when out of range
    closed = {"auto": None, "true": True, "false": False}[wp.closed]
    scene, _ = workpiece_scene(solid, face_list, X, radius, wp.deflection, closed)
    return ReplayScene(cell, model, ToolContactQuery(scene), np.asarray(X, dtype=float), face_list,
                       str(getattr(solid, "source", part)), radius, plan_data)


# --------------------------------------------------------------------------------------------------
# frames of measured wrenches


def frame_poses(model: Any, frame: str, q: FloatArray) -> FloatArray:
    """(K, 4, 4) the pose of ``frame`` in base_link at configurations q (K, n): a link of the robot,
    or UR's controller frame ``base`` (ur_description's base_link turned by pi about z) when the
    robot has no link of that name.

    Raises:
        InputError: a frame the robot does not have.
    """
    q = np.asarray(q, dtype=float).reshape(-1, model.nq)
    if frame in model.link_names:
        return np.asarray(model.fk(q, frame)).reshape(-1, 4, 4)
    if frame == UR_BASE and model.root_link in model.link_names:
        X = np.eye(4)
        X[:2, :2] = [[-1.0, 0.0], [0.0, -1.0]]
        return np.broadcast_to(X, (len(q), 4, 4)).copy()
    raise InputError(f"wrench frame {frame!r} is not a link of {model.source} (links: "
                     f"{', '.join(model.link_names)})")


def measured_contact_wrench(cell: CellConfig, model: Any, frame: str, raw: bool, W: FloatArray, q: FloatArray,
                            ft_params: Any = None) -> FloatArray:
    """The measured wrenches W (K, 6) in ``frame`` at configurations q (K, n) as the contact wrench on
    the tool at the tcp, in tcp axes (K, 6) (what the simulation writes on ``/contact/wrench``).

    A raw reading (``raw``) has the tool's weight and the bias removed first, with ``ft_params``
    (an :class:`~robot_grinding_sim.core.contact.ft_sensor.FTSensorParams`; default the cell's sensor
    model's): it must be in the sensor's frame, ``ft_sensor.frame``.

    With a part the robot holds (a :class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel`),
    the tool stands in the cell: the tcp's pose is the fixed one in the root frame, and a wrench in a
    frame that moves with the arm (a sensor between the flange and the part) is the one on the
    part, the opposite of the contact wrench on the tool (the weight removed is the part's too).

    Raises:
        InputError: a raw reading in another frame than the sensor's, an unknown frame.
    """
    from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    W = np.asarray(W, dtype=float).reshape(-1, 6).copy()
    q = np.asarray(q, dtype=float).reshape(-1, model.nq)
    X_F = frame_poses(model, frame, q)
    on_part = False
    if getattr(model, "holder_link", None) is not None and frame != cell.tool.tcp_link:
        from robot_grinding_sim.core.sim.ft import carries_part

        X_T = np.broadcast_to(model.X_BT, X_F.shape)  # the standing tcp, where X_F is: the root frame
        on_part = frame in model.link_names and carries_part(model, frame)
    else:
        X_T = np.asarray(model.fk(q, cell.tool.tcp_link)).reshape(-1, 4, 4)
    if raw:
        if frame != cell.ft_sensor.frame:
            raise InputError(f"the wrench is raw (tool weight and bias in) but in frame {frame!r}: a raw reading is "
                             f"the sensor's, in ft_sensor.frame {cell.ft_sensor.frame!r}")
        sensor = FTSensorModel(ft_params) if ft_params is not None else ft_sensor_model(cell, model)
        p = sensor.params
        g = np.einsum("kji,j->ki", X_F[:, :3, :3], np.asarray(p.gravity, dtype=float)) * p.tool_mass  # m R^T g
        W[:, :3] -= g + p.bias[:3]
        W[:, 3:] -= np.cross(p.tool_com, g) + p.bias[3:]
    # to the tcp: X_tcp_F = X_T^-1 X_F, force and torque rotated, the torque about the tcp
    R_TF = np.einsum("kji,kjl->kil", X_T[:, :3, :3], X_F[:, :3, :3])
    p_TF = np.einsum("kji,kj->ki", X_T[:, :3, :3], X_F[:, :3, 3] - X_T[:, :3, 3])
    F = np.einsum("kij,kj->ki", R_TF, W[:, :3])
    T = np.einsum("kij,kj->ki", R_TF, W[:, 3:]) + np.cross(p_TF, F)
    return -np.hstack([F, T]) if on_part else np.hstack([F, T])


# --------------------------------------------------------------------------------------------------
# the replays


@dataclass
class ReplayResult:
    """The model along a run: t (K,) s (the measured clock), fn (K,) normal force N, wrench (K, 6) the
    contact wrench on the tool in tcp axes (N, N m, torque about the tcp), depth (K,) m
    (penetration; negative: gap), q (K, n) the arm's joints (the measured ones, or the simulated
    arm's under force control), correction (K,) m the controller's along the normal (force control).
    """

    t: FloatArray
    fn: FloatArray
    wrench: FloatArray
    depth: FloatArray
    q: FloatArray
    correction: FloatArray | None = None
    notes: list[str] = field(default_factory=list)


def joint_velocities(t: FloatArray, q: FloatArray) -> FloatArray:
    """(N, n) rad/s by finite differences of q (N, n) over t (N,) s (central inside, one-sided at the ends)."""
    if len(t) < 2:
        return np.zeros_like(q)
    return np.gradient(np.asarray(q, dtype=float), np.asarray(t, dtype=float), axis=0)


class _Contact:
    """The contact side of the coupled step at given joint states (the force the job's step has at
    the end of a step), with the surface moved by ``offset`` along its normal."""

    def __init__(self, scene: ReplayScene, contact_cfg: Any = None, offset: float = 0.0) -> None:
        from robot_grinding_sim.core.sim.coupled_step import ContactSide

        cell = scene.cell
        self.side = ContactSide(scene.model, contact_cfg or cell.contact, cell.tool.tcp_link, cell.tool.spindle_speed,
                                scene.query)
        self.offset = float(offset)

    def at(self, t: float, q: FloatArray, qd: FloatArray) -> tuple[float, FloatArray, float, FloatArray | None]:
        """(normal force N, wrench (6,) tcp axes, depth m, outward normal (3,) or None) at (t, q, qd)."""
        side = self.side
        kin = side.kinematics(q, need_minv=False)
        geom = side.query.query(kin.X[:3, 3])
        if self.offset:
            geom = dataclasses.replace(geom, gap=geom.gap - self.offset)
        if geom.gap >= 0.0:
            side.release()
            return 0.0, np.zeros(6), -geom.gap, geom.normal
        rom = side.from_geometry(t, q, qd, geom)
        f = side.normal_force(rom)
        return f, side.wrench(rom, f), -geom.gap, geom.normal


def replay_path(scene: ReplayScene, t: FloatArray, q: FloatArray, qd: FloatArray | None = None,
                surface_offset: float = 0.0, contact: Any = None) -> ReplayResult:
    """Position mode (module docstring): the force at every joint state (t (N,) s, q (N, n) rad,
    qd (N, n) rad/s or None: finite differences). ``contact``: a ContactConfig instead of the cell's."""
    t = np.asarray(t, dtype=float)
    q = np.ascontiguousarray(q, dtype=float)
    qd = joint_velocities(t, q) if qd is None else np.ascontiguousarray(qd, dtype=float)
    c = _Contact(scene, contact, surface_offset)
    N = len(t)
    fn, depth, W = np.zeros(N), np.zeros(N), np.zeros((N, 6))
    for k in range(N):
        fn[k], W[k], depth[k], _ = c.at(float(t[k]), q[k].copy(), qd[k].copy())
    return ReplayResult(t, fn, W, depth, q)


def plan_clock_offset(model: Any, traj: Any, t: FloatArray, q: FloatArray, step: float = 0.01) -> float:
    """The measured clock's time of the plan's t = 0: the shift t0 minimising the mean squared joint
    difference between the measured q(t) (N, n) and the plan's q(t - t0), over every shift with the
    plan inside the run (grid of ``step`` s, then refined)."""
    from scipy.optimize import minimize_scalar

    interp = traj.interpolator(model)
    t = np.asarray(t, dtype=float)
    stride = max(1, len(t) // 2000)
    ts, qs = t[::stride], np.asarray(q, dtype=float)[::stride]
    dur = float(traj.duration)
    grid_t = np.linspace(0.0, dur, 400)
    q_plan = np.array([interp.sample(x)[0] for x in grid_t])

    def cost(t0: float) -> float:
        tau = np.clip(ts - t0, 0.0, dur)
        qp = np.stack([np.interp(tau, grid_t, q_plan[:, j]) for j in range(q_plan.shape[1])], axis=1)
        return float(np.mean((qp - qs) ** 2))

    lo, hi = float(t[0]) - 0.5 * dur, float(t[-1]) - 0.5 * dur
    cands = np.arange(lo, max(hi, lo) + step, step)
    costs = np.array([cost(c) for c in cands])
    k = int(np.argmin(costs))
    res = minimize_scalar(cost, bounds=(cands[max(k - 1, 0)], cands[min(k + 1, len(cands) - 1)]), method="bounded",
                          options={"xatol": 1e-5})
    return float(res.x)


def replay_force_control(scene: ReplayScene, t: FloatArray, q: FloatArray, params: AdmittanceConfig | None = None,
                         control_rate: float = 500.0, t0: float | None = None, surface_offset: float = 0.0,
                         contact: Any = None, servo: Any = None) -> ReplayResult:
    """Force-control mode (module docstring) over the measured run's span t (N,) s; q (N, n) rad
    gives the plan's clock (``t0``, default :func:`plan_clock_offset`).

    The driver's controller (``params``: its ``admittance.*``, default the cell's) runs every
    ``1 / control_rate`` s on the simulated contact force; each point it streams (``horizon`` ahead)
    becomes the arm's reference, as a one-point trajectory from the reference in force (what the
    arm's trajectory controller does with it); the arm is the job's coupled step (servo ``servo``,
    default the cell's ``servo.*``; contact side, ``sim.dt``). ``surface_offset`` moves the part along
    the plan's mean outward normal.

    Raises:
        InputError: no plan, or a plan without trajectory or target force.
    """
    from robot_grinding_sim.core.execution.force_control import NormalForceControl, plan_normals
    from robot_grinding_sim.core.geometry.tool_contact import WORKPIECE
    from robot_grinding_sim.core.job.simulation import coupled_step
    from robot_grinding_sim.core.planning.plan_io import trajectory_from_dict
    from robot_grinding_sim.core.robot.joint_trajectory import JointLimits, TrajectoryInterpolator
    from robot_grinding_sim.core.sim.coupled_step import contact_wrench_base

    data = scene.plan_data
    if data is None or not data.get("trajectory"):
        raise InputError("force-control replay needs --plan with the job trajectory that ran (the driver's "
                         "controller takes its reference, normals and target force from it)")
    if not (math.isfinite(control_rate) and control_rate > 0):
        raise InputError(f"control rate {control_rate!r}: > 0 Hz")
    model, cell = scene.model, scene.cell
    params = params or cell.admittance
    traj = trajectory_from_dict(data["trajectory"], model)
    t = np.asarray(t, dtype=float)
    if t0 is None:
        t0 = plan_clock_offset(model, traj, t, q)
    fc = NormalForceControl(model, params)
    passes, target = plan_normals(data, params, "plan")
    fc.use_plan(passes, target)
    windows = traj.pass_windows()
    sim_cell = cell.replace(**{"contact." + k: v for k, v in dataclasses.asdict(contact or cell.contact).items()})
    if servo is not None:
        sim_cell = sim_cell.replace(**{"servo." + k: v for k, v in dataclasses.asdict(servo).items()})
    X = scene.X_BP.copy()
    if surface_offset:
        n = np.vstack([nr for _, nr in passes.values()]).mean(axis=0)
        X[:3, 3] += surface_offset * n / np.linalg.norm(n)
    scene.query.scene.set_pose(WORKPIECE, X)
    try:
        q0 = np.asarray(traj.positions[0], dtype=float)
        step = coupled_step(dataclasses.replace(scene, cell=sim_cell), q0)
        arm = step.arm.arm
        arm.set_trajectory(TrajectoryInterpolator.hold(q0), 0.0)
        limits = JointLimits.from_model(model)
        names = list(model.joint_names)
        start = float(t[0])
        fc.command(start, max(float(t0), start + 1e-9), list(traj.joint_names), traj.times, traj.positions,
                   traj.velocities)
        dt, h = step.dt, 1.0 / control_rate
        every = max(1, int(round(h / dt)))
        n_steps = int(math.floor((t[-1] - start) / dt))
        out_t, fn, W, Q, Xc = (np.zeros(n_steps), np.zeros(n_steps), np.zeros((n_steps, 6)),
                               np.zeros((n_steps, model.nq)), np.zeros(n_steps))
        force = np.zeros(3)
        tcp = cell.tool.tcp_link
        for k in range(n_steps):
            now = start + k * dt
            if k % every == 0:
                idx = next((i for i, a, b in windows if a <= now - t0 <= b), -1)
                fc.progress(now, idx)
                point = fc.update(now, force)
                if point is not None:
                    ref, t_ref = arm.active_trajectory()
                    qr, vr, ar = ref.sample(arm.state.t - t_ref)
                    cmd = TrajectoryInterpolator.build(limits, names, [max(point.time - now, dt)],
                                                       point.positions[None], point.velocities[None],
                                                       start=(qr, vr, ar), check_speed=False)
                    arm.set_trajectory(cmd, arm.state.t)
            res = step.step()
            if res.rom is not None:
                w = contact_wrench_base(res.rom, res.force)
                force = w[:3]
                R = model.fk(arm.state.q, tcp)[:3, :3]
                W[k, :3], W[k, 3:] = R.T @ w[:3], R.T @ w[3:]
            else:
                force = np.zeros(3)
            out_t[k], fn[k], Q[k], Xc[k] = now + dt, res.force, arm.state.q, fc.admittance.x
    finally:
        scene.query.scene.set_pose(WORKPIECE, scene.X_BP)
    return ReplayResult(out_t, fn, W, np.zeros(n_steps), Q, Xc, [f"plan clock: t0 = {t0:.6f} s on the measured clock"])


# --------------------------------------------------------------------------------------------------
# the bag


def write_replay_bag(path: str | os.PathLike[str], result: ReplayResult, joint_names: list[str],
                     measured: tuple[FloatArray, FloatArray] | None = None, info: dict[str, Any] | None = None
                     ) -> dict[str, int]:
    """Write the replay (a new bag directory ``path``, MCAP): ``/joint_states`` (the arm's positions),
    ``/contact/wrench`` (WrenchStamped, frame ``tcp``: the model's contact wrench on the tool),
    ``/measured/wrench`` (frame ``tcp``: the measured wrench as the contact wrench, when ``measured``
    (t (M,), wrench (M, 6)) is given), stamped on the measured clock. ``info``: JSON-able, stored in
    metadata.yaml's custom_data (``robot_grinding_sim.replay``)."""
    import json

    from robot_grinding_sim.core.jsonsafe import json_safe
    from robot_grinding_sim.core.record import cdr_batch
    from robot_grinding_sim.core.record.bagwriter import BagWriter

    with BagWriter(path, storage="mcap") as bag:
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        bag.add_topic("/contact/wrench", "geometry_msgs/msg/WrenchStamped")
        ns = np.round(result.t * 1e9).astype(np.int64)
        js = cdr_batch.CdrLayout().header("").u32(len(joint_names))
        for name in joint_names:
            js.string(name)
        js.f64_sequence(len(joint_names)).f64_sequence(0).f64_sequence(0)
        wr = cdr_batch.wrench_stamped("tcp")
        bag.write_many(["/joint_states", "/contact/wrench"], ns, [js.pack(ns, result.q), wr.pack(ns, result.wrench)])
        if measured is not None:
            bag.add_topic("/measured/wrench", "geometry_msgs/msg/WrenchStamped")
            mns = np.round(np.asarray(measured[0]) * 1e9).astype(np.int64)
            bag.write_many(["/measured/wrench"], mns, [wr.pack(mns, measured[1])])
        if info:
            bag.set_custom_data("robot_grinding_sim.replay", json.dumps(json_safe(info)))
        return dict(bag.counts)
