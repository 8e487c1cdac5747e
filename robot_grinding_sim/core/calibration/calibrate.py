"""Calibration: identify the cell's contact and F/T sensor parameters from a measured pass.

Input: a bag of a short calibration pass (the F/T sensor's raw reading in its frame, tool weight and
bias included: ``/hardware_driver/wrench_raw`` of real mode when the bag has it, else
``/ft_sensor/wrench``, which is the raw sensor model's reading in simulation but the driver's
compensated wrench in real mode; ``/joint_states``; optionally ``/grinding/progress`` to align the
bag's clock with the plan's) and
the plan.json that ran (its job trajectory; :func:`with_orientation_sweep` adds the out-of-contact
orientations the gravity fit needs). Output: the cell with the identified values
(``contact.stiffness``, optionally ``contact.cr``, ``ft_sensor.bias``, ``ft_sensor.tool_mass``,
``ft_sensor.tool_com``) and the fit's figures.

Method (:func:`calibrate`):

1. Sensor orientation ``R_WS`` at every reading from the joint states (FK of ``ft_sensor.frame``).
   Out of contact (the re-simulated pass keeps the tool at least ``gap`` m off the part), the
   reading is the tool's weight plus the bias, linear in the unknowns::

       F = m R_WS^T g + b_F,    T = (m c) x (R_WS^T g) + b_T

   solved by linear least squares for m, p = m c, b_F, b_T (c = p / m). The orientations must span
   at least two directions of gravity in the sensor frame; otherwise the mass and centre of mass
   are kept and only the bias is fitted (``gravity_identified`` False).
2. With weight and bias removed, the reading is moved to the tool centre point and the normal
   force is the force along the tool axis (``-F_z`` in ``tcp``, as :mod:`..record.pass_forces`).
3. The recorded pass is re-simulated in process (the plan's trajectory from the rest knot before
   the first pass, the arm, the contact on the exact surface) with candidate parameters, and
   ``log K`` (and ``c_r`` with ``fit_damping``) are fitted by ``scipy.optimize.least_squares`` to
   the relative error of simulated vs measured normal force over the pass samples. A position-
   controlled pass is quasi-static: the depth barely changes, so the damping force ``D d'`` is
   nearly zero there and c_r is not identifiable from the pass: it is kept unless ``fit_damping``,
   which adds the samples of the engagement and the dwell (the simulated tool in contact before
   its pass: the depth grows at the engagement's speed, then settles) to the fit. That needs an
   engagement fast enough for ``D d'`` to matter against the force's noise (e.g. a calibration plan
   with a short ``process.engage_time``).

Figures: the mean relative error MRE = mean_i |F_sim,i - F_meas,i| / |F_meas,i| over the pass
samples, with the starting cell (``mre_before``) and the identified one (``mre_after``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

FT_TOPIC = "/ft_sensor/wrench"
#: real mode's raw F/T reading (hardware_driver's ~/wrench_raw): its /ft_sensor/wrench has the tool's
#: weight and the bias it assumes removed already, and the fit needs them in
RAW_TOPIC = "/hardware_driver/wrench_raw"


def reading_topic(bag: str | os.PathLike[str]) -> str:
    """The bag's raw F/T reading: :data:`RAW_TOPIC` when recorded (real mode), else :data:`FT_TOPIC`."""
    from robot_grinding_sim.core.record.bag import has_topic

    return RAW_TOPIC if has_topic(bag, RAW_TOPIC) else FT_TOPIC


# --------------------------------------------------------------------------------------------------
# reading the bag


def positions_at(t_js: FloatArray, q_js: FloatArray, t: FloatArray) -> FloatArray:
    """Joint positions (K, n) at times ``t`` (linear between joint states, held at the ends)."""
    return np.stack([np.interp(t, t_js, q_js[:, j]) for j in range(q_js.shape[1])], axis=1)


def at_rest(t_js: FloatArray, q_js: FloatArray, t: FloatArray, speed: float, margin: float) -> NDArray[np.bool_]:
    """(K,) True where every joint was slower than ``speed`` rad/s over [t - margin, t + margin]: the
    joint states' finite differences (repeated stamps dropped); ``margin`` covers the skew between
    the clock of ``t`` and the joint states' stamps."""
    t_u, idx = np.unique(np.asarray(t_js, dtype=float), return_index=True)
    t = np.asarray(t, dtype=float)
    if len(t_u) < 2:
        return np.zeros(len(t), dtype=bool)
    qd = np.gradient(np.asarray(q_js, dtype=float)[idx], t_u, axis=0)
    moving = t_u[np.abs(qd).max(axis=1) > speed]
    inside = (t >= t_u[0] + margin) & (t <= t_u[-1] - margin)
    if len(moving) == 0:
        return inside
    # the nearest moving state on each side of t
    k = np.searchsorted(moving, t)
    before = np.where(k > 0, t - moving[np.maximum(k - 1, 0)], np.inf)
    after = np.where(k < len(moving), moving[np.minimum(k, len(moving) - 1)] - t, np.inf)
    return inside & (before > margin) & (after > margin)


# --------------------------------------------------------------------------------------------------
# the gravity and bias fit


@dataclass(frozen=True)
class GravityFit:
    """Result of :func:`fit_gravity_bias`: mass kg, com (3,) m in the sensor frame, bias (6,) N / N m,
    rms residual (6,) per channel, samples used, whether mass and com were identified, and the
    angle (rad) spanned by the gravity directions seen in the sensor frame."""

    mass: float
    com: FloatArray
    bias: FloatArray
    rms: FloatArray
    samples: int
    gravity_identified: bool
    spread_rad: float


def gravity_spread(u: FloatArray) -> float:
    """Largest angle (rad) between a gravity direction and their mean, over unit vectors u (K, 3)."""
    mean = u.mean(axis=0)
    mean /= max(np.linalg.norm(mean), 1e-12)
    return float(np.arccos(np.clip(u @ mean, -1.0, 1.0)).max())


def fit_gravity_bias(W: FloatArray, R_WS: FloatArray, gravity: FloatArray, mass: float, com: FloatArray,
                     min_spread: float = math.radians(10.0), min_samples: int = 10) -> GravityFit:
    """Linear least squares of the out-of-contact readings ``W`` (K, 6) in the sensor frame at the
    sensor orientations ``R_WS`` (K, 3, 3) for mass, centre of mass and bias (module docstring).

    When the gravity directions in the sensor frame spread less than ``min_spread`` rad, mass and
    com cannot be told from the bias: ``mass`` and ``com`` (the prior) are kept and only the bias
    is fitted.
    """
    W = np.asarray(W, dtype=float)
    if len(W) < min_samples:
        raise InputError(f"calibration: only {len(W)} F/T readings out of contact; the pass needs a free "
                         "segment (see with_orientation_sweep)")
    g = np.asarray(gravity, dtype=float)
    u = np.einsum("kji,j->ki", R_WS, g)  # R^T g
    spread = gravity_spread(u / np.linalg.norm(g))
    if spread >= min_spread:
        # forces: [u | I] [m, bF];  torques: [-skew(u) | I] [p, bT]
        A_F = np.concatenate([u[:, :, None], np.broadcast_to(np.eye(3), (len(u), 3, 3))], axis=2).reshape(-1, 4)
        x_F, *_ = np.linalg.lstsq(A_F, W[:, :3].reshape(-1), rcond=None)
        skew = np.zeros((len(u), 3, 3))
        skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -u[:, 2], u[:, 1], -u[:, 0]
        skew[:, 1, 0], skew[:, 2, 0], skew[:, 2, 1] = u[:, 2], -u[:, 1], u[:, 0]
        A_T = np.concatenate([-skew, np.broadcast_to(np.eye(3), (len(u), 3, 3))], axis=2).reshape(-1, 6)
        x_T, *_ = np.linalg.lstsq(A_T, W[:, 3:].reshape(-1), rcond=None)
        m = float(x_F[0])
        if m <= 0:
            raise InputError(f"calibration: the fitted tool mass is {m:.4g} kg (<= 0): check the gravity "
                             "parameter and the joint states")
        c, bias = x_T[:3] / m, np.r_[x_F[1:], x_T[3:]]
        identified = True
    else:
        m, c = float(mass), np.asarray(com, dtype=float)
        Fg = m * u
        bias = (W - np.hstack([Fg, np.cross(c, Fg)])).mean(axis=0)
        identified = False
    Fg = m * u
    res = W - np.hstack([Fg, np.cross(c, Fg)]) - bias
    return GravityFit(m, c, bias, np.sqrt((res**2).mean(axis=0)), len(W), identified, spread)


def refuse_part_side(cell: CellConfig, model: Any, what: str) -> None:
    """Refuse a fit of the weight below an F/T sensor that carries the part the robot holds
    (``workpiece.link``): it would identify the part's weight as the tool's (``ft_sensor.tool_mass``)
    and, for a bag's calibration pass, take the tool centre as fixed in the sensor frame, where it
    moves with the arm. ``what``: the input to name.

    Raises:
        InputError: the sensor carries the held part.
    """
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    if ft_sensor_model(cell, model).params.part_side:
        raise InputError(f"{what}: the F/T sensor (ft_sensor.frame {cell.ft_sensor.frame!r}) carries the part the "
                         f"robot holds (workpiece.link {cell.workpiece.link!r}); calibrate does not fit the weight "
                         "below such a sensor yet: give the part's workpiece.mass and the sensor's ft_sensor.bias, "
                         "then `grinding calibrate --replay` with --tool-from-cell or a compensated wrench, or "
                         "`grinding replay` to compare the run with the model")


def normal_force(W: FloatArray, R_WS: FloatArray, gravity: FloatArray, mass: float, com: FloatArray,
                 bias: FloatArray, X_S_tcp: FloatArray) -> FloatArray:
    """Normal force (K,) N from readings W (K, 6): weight and bias removed, the force along the tool
    axis (``-F_z`` in the tcp frame: the tool's z points into the surface)."""
    u = np.einsum("kji,j->ki", R_WS, np.asarray(gravity, dtype=float))
    F = np.asarray(W, dtype=float)[:, :3] - mass * u - np.asarray(bias, dtype=float)[:3]
    z_tcp_in_S = np.asarray(X_S_tcp, dtype=float)[:3, 2]
    return -(F @ z_tcp_in_S)


def pose_means(t: FloatArray, W: FloatArray, R_WS: FloatArray, gap: float = 0.05) -> tuple[FloatArray, FloatArray]:
    """The readings at rest ``W`` (K, 6) at times ``t`` (K,) and orientations ``R_WS`` (K, 3, 3) averaged
    per pose (runs without a gap over ``gap`` s): (P, 6) and the orientation in each run's middle
    (P, 3, 3). Every pose weighs the same in the fit, however long the arm rested there (a cell
    waiting 20 s at home before its job must not outweigh the sweep's holds)."""
    order = np.argsort(t)
    t, W, R_WS = np.asarray(t)[order], np.asarray(W)[order], np.asarray(R_WS)[order]
    runs = np.split(np.arange(len(t)), np.flatnonzero(np.diff(t) > gap) + 1)
    runs = [r for r in runs if len(r)]
    return np.array([W[r].mean(axis=0) for r in runs]), np.array([R_WS[r[len(r) // 2]] for r in runs])


# --------------------------------------------------------------------------------------------------
# a calibration plan


def with_orientation_sweep(traj: Any, model: Any, lift: float = 0.25, tilt: float = 0.5, hold_time: float = 0.4,
                           velocity_scale: float = 0.3, max_tcp_speed: float | None = None) -> Any:
    """The job trajectory with an out-of-contact orientation sweep before it (a calibration plan).

    From the first knot (at rest, above the part) shoulder lift by ``-lift`` rad raises the arm,
    then the two wrist tilts (joints 4 and 5) by +-``tilt`` rad and the tool turned about its axis
    at two tilts give the gravity directions :func:`fit_gravity_bias` needs; the arm returns to the
    first knot and the job follows unchanged (times shifted). Each pose is held ``hold_time`` s;
    each move is the executive's rest-to-rest joint move (:func:`..execution.speed_limited_move`)
    within ``velocity_scale`` of the joint limits and the TCP speed limit (default the cell's
    ``process.max_tcp_speed``), so that the arm's driver accepts it. Needs a 6-joint arm.
    """
    from robot_grinding_sim.core.config import ProcessConfig
    from robot_grinding_sim.core.execution.executive import speed_limited_move
    from robot_grinding_sim.core.planning.trajectory import DEFAULT_ACCELERATION_LIMIT, JointTrajectory

    q0 = np.asarray(traj.positions[0], dtype=float)
    if q0.size != 6:
        raise InputError(f"with_orientation_sweep: a 6-joint arm is needed, the plan has {q0.size} joints")
    v_tcp = ProcessConfig().max_tcp_speed if max_tcp_speed is None else float(max_tcp_speed)
    lifted = q0 + np.array([0.0, -lift, 0.0, 0.0, 0.0, 0.0])
    offsets = [(0, 0, 0), (tilt, 0, 0), (-tilt, 0, 0), (0, tilt, 0), (0, -tilt, 0), (tilt, 0, 1.5), (0, tilt, -1.5),
               (0, 0, 0)]
    poses = [q0] + [lifted + np.array([0.0, 0.0, 0.0, a, b, c]) for a, b, c in offsets] + [q0]
    z0 = model.fk(q0, traj.tip_link)[2, 3]
    for q in poses:
        if model.fk(q, traj.tip_link)[2, 3] < z0 - 1e-9:
            raise InputError("with_orientation_sweep: a sweep pose brings the tool below the pass start; "
                             "use a larger lift or a smaller tilt")
    vmax = np.where(np.isfinite(model.velocity_limits) & (model.velocity_limits > 0), model.velocity_limits, 1.0)
    amax = np.full(model.nq, DEFAULT_ACCELERATION_LIMIT)
    times, knots, vels = [0.0], [poses[0]], [np.zeros(6)]
    for a, b in zip(poses[:-1], poses[1:], strict=True):
        move = speed_limited_move(model, a, b, vmax, amax, velocity_scale, v_tcp)
        t0 = times[-1]
        times += (t0 + move.times[1:]).tolist()
        knots += list(move.positions[1:])
        vels += list(move.velocities[1:])
        if hold_time > 0 and b is not poses[-1]:
            times.append(times[-1] + hold_time)
            knots.append(b)
            vels.append(np.zeros(6))
    shift = times[-1]
    n_new = len(times) - 1  # the job's first knot is the sweep's last
    pos = np.vstack([np.array(knots[:-1]), traj.positions])
    vel = np.vstack([np.array(vels[:-1]), traj.velocities])
    t_all = np.r_[np.array(times[:-1]), np.asarray(traj.times) + shift]
    arc = None if traj.arc is None else np.r_[np.full(n_new, np.nan), traj.arc]
    first = traj.segments[0]["pass_index"] if traj.segments else 0
    segments = [{"kind": "link", "pass_index": int(first), "start": 0, "stop": n_new + 1}]
    segments += [{**s, "start": s["start"] + n_new, "stop": s["stop"] + n_new} for s in traj.segments]
    return JointTrajectory(list(traj.joint_names), traj.tip_link, t_all, pos, vel, segments, arc, traj.frame)


def calibration_plan(plan_data: dict[str, Any], model: Any, trajectory: Any = None,
                     **sweep: Any) -> dict[str, Any]:
    """A plan.json dict whose job trajectory starts with :func:`with_orientation_sweep` (its TCP speed
    limit the plan's cell's ``process.max_tcp_speed`` unless given). ``trajectory``: the plan's job
    trajectory when the caller has already read it (``plan_io.check_plan``), else read here."""
    from robot_grinding_sim.core.planning.plan_io import trajectory_from_dict, trajectory_to_dict

    if not plan_data.get("trajectory"):
        raise InputError("calibration plan: the plan has no job trajectory")
    cell = plan_data.get("cell") or {}
    if "process.max_tcp_speed" in cell:
        sweep.setdefault("max_tcp_speed", float(cell["process.max_tcp_speed"]))
    if trajectory is None:
        trajectory = trajectory_from_dict(plan_data["trajectory"], model)
    traj = with_orientation_sweep(trajectory, model, **sweep)
    return {**plan_data, "trajectory": trajectory_to_dict(traj)}


# --------------------------------------------------------------------------------------------------
# the whole calibration


@dataclass
class Calibration:
    """Result of :func:`calibrate` (all SI): the identified cell, the fitted values, the figures."""

    cell: CellConfig
    start_cell: CellConfig
    gravity: GravityFit
    stiffness: float
    cr: float
    damping_fitted: bool
    mre_before: float
    mre_after: float
    samples: int
    mean_measured_n: float
    mean_before_n: float
    mean_after_n: float
    simulations: int
    clock_offset_s: float
    notes: list[str] = field(default_factory=list)
    topic: str = FT_TOPIC

    def summary(self) -> dict[str, Any]:
        s, g = self.start_cell, self.gravity
        return {
            "identified": {
                "contact.stiffness": self.stiffness, "contact.cr": self.cr,
                "ft_sensor.tool_mass": g.mass, "ft_sensor.tool_com": g.com.tolist(),
                "ft_sensor.bias": g.bias.tolist()},
            "start": {"contact.stiffness": s.contact.stiffness, "contact.cr": s.contact.cr,
                      "contact.model": s.contact.model},
            "damping_fitted": self.damping_fitted,
            "gravity_identified": g.gravity_identified,
            "gravity_spread_deg": math.degrees(g.spread_rad),
            "out_of_contact_samples": g.samples,
            "gravity_fit_rms": g.rms.tolist(),
            "pass_samples": self.samples,
            "mean_measured_normal_force_n": self.mean_measured_n,
            "mean_predicted_before_n": self.mean_before_n,
            "mean_predicted_after_n": self.mean_after_n,
            "mre_before": self.mre_before,
            "mre_after": self.mre_after,
            "simulations": self.simulations,
            "clock_offset_s": self.clock_offset_s,
            "ft_topic": self.topic,
            "notes": list(self.notes),
        }


def mean_relative_error(predicted: FloatArray, measured: FloatArray) -> float:
    """mean |predicted - measured| / |measured| (samples with |measured| > 0)."""
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    ok = np.abs(m) > 0
    return float(np.mean(np.abs(p[ok] - m[ok]) / np.abs(m[ok])))


def _sub_trajectory(traj: Any, start: int) -> Any:
    """The trajectory from knot ``start`` on (a rest knot), its clock restarting at 0."""
    from robot_grinding_sim.core.planning.trajectory import JointTrajectory

    segs = [{**s, "start": s["start"] - start, "stop": s["stop"] - start} for s in traj.segments
            if s["start"] >= start]
    arc = None if traj.arc is None else traj.arc[start:]
    return JointTrajectory(list(traj.joint_names), traj.tip_link, traj.times[start:] - traj.times[start],
                           traj.positions[start:], traj.velocities[start:], segs, arc, traj.frame)


def _clock_offset(bag: str | os.PathLike[str], traj: Any) -> float:
    """bag time - plan time, from the first pass's first progress sample (0 without progress)."""
    from robot_grinding_sim.core.record.bag import has_topic, read_progress

    windows = traj.pass_windows()
    if not windows or not has_topic(bag, "/grinding/progress"):
        return 0.0
    p = read_progress(bag)
    idx, t0, _ = windows[0]
    sel = p.pass_index == idx
    return float(p.t[sel].min() - t0) if sel.any() else 0.0


#: the fewest readings at rest (the sweep's holds), and poses, the gravity fit uses alone
MIN_AT_REST = 50
MIN_POSES = 4
#: the stiffness fit's function evaluations at the most (each a simulation of the pass; its finite-
#: difference Jacobian costs one more simulation a fitted parameter per evaluation)
MAX_FIT_EVALUATIONS = 30


def calibrate(bag: str | os.PathLike[str], plan_file: str | os.PathLike[str], cell: CellConfig | None = None,
              fit_damping: bool = False, gap: float = 1e-3, topic: str | None = None,
              on_stage: Callable[[str], None] | None = None, rest_speed: float | None = 0.002,
              rest_margin: float = 0.1, progress: Callable[[str, float, float], None] | None = None
              ) -> Calibration:
    """Identify stiffness (and c_r), F/T bias, tool mass and centre of mass (module docstring).

    Args:
        bag: the calibration pass's bag (the raw F/T reading, ``/joint_states``).
        plan_file: the plan.json that ran (with its job trajectory).
        cell: the starting cell (default: the plan's own); the identified values replace its own.
        fit_damping: fit c_r too (needs transients in the pass; a quasi-static pass barely shows it).
        gap: out of contact means the re-simulated tool at least this far (m) from the part.
        topic: the raw F/T reading's topic (default :func:`reading_topic`).
        rest_speed, rest_margin: the gravity fit takes the out-of-contact readings where every joint
            was slower than ``rest_speed`` (rad/s) for ``rest_margin`` s before and after (the sweep's
            holds) averaged per pose, when there are :data:`MIN_AT_REST` of them in :data:`MIN_POSES`
            poses spanning enough directions: the F/T
            reading and the joint states come from two clocks (the sensor's stamped on receipt, the
            arm's by its driver, each with its own latency), and while the wrist turns a skew of
            0.1 s turns the tool's weight by enough to shift the bias by 0.09 N. ``rest_speed`` None:
            every out-of-contact reading, one by one (a pass without holds).
        progress: called ``progress(stage, done, total)`` as :func:`..run.run_job`'s: ``reading the
            bag`` in topics read (of 3); ``simulating the starting cell`` and ``simulating the
            identified cell`` in simulated seconds of the pass; ``fitting the contact stiffness (at
            most N simulations)`` in simulated seconds of the fit's simulations, of its budget
            (:data:`MAX_FIT_EVALUATIONS` times one plus the parameters fitted: the ETA is to that
            bound, the fit usually stops sooner). ``total`` 0: not known (loading).

    Raises:
        InputError: missing topics, a plan without trajectory, too few samples.
    """
    from scipy.optimize import least_squares

    from robot_grinding_sim.core.job.setup import JobConfig, setup_job
    from robot_grinding_sim.core.job.simulation import simulate_trajectory
    from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan
    from robot_grinding_sim.core.record.bag import read_joint_states, read_wrench
    from robot_grinding_sim.core.sim.coupled_step import make_contact_law
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    def stage(msg: str) -> None:
        if on_stage:
            on_stage(msg)

    def report(name: str, done: float, total: float) -> None:
        if progress:
            progress(name, done, total)

    plan_file = str(plan_file)
    if cell is None:
        cell = cell_of(read_plan(plan_file), plan_file) or CellConfig()
    stage("loading robot, part and plan")
    report("loading robot, part and plan", 0.0, 0.0)
    setup = setup_job(JobConfig(cell=cell, plan_file=plan_file, optimise=False))
    planned = setup.planned_trajectory()
    if planned is None:
        raise InputError(f"{plan_file}: the plan has no job trajectory to re-simulate")
    traj = planned[0]
    model = setup.model
    refuse_part_side(cell, model, f"bag {bag}")
    windows = traj.pass_windows()
    if not windows:
        raise InputError(f"{plan_file}: the plan has no pass")

    stage("reading the bag")
    report("reading the bag", 0.0, 3.0)
    topic = topic or reading_topic(bag)
    w = read_wrench(bag, topic)
    report("reading the bag", 1.0, 3.0)
    if w.frame and w.frame != cell.ft_sensor.frame:
        raise InputError(f"bag {bag}: {topic} is in frame {w.frame!r}, the cell's sensor is "
                         f"ft_sensor.frame {cell.ft_sensor.frame!r}")
    t_js, names, q_js = read_joint_states(bag)
    if names != list(model.joint_names):
        raise InputError(f"bag {bag}: joint states name {names}, the robot has {list(model.joint_names)}")
    report("reading the bag", 2.0, 3.0)
    offset = _clock_offset(bag, traj)
    report("reading the bag", 3.0, 3.0)
    t = w.t - offset  # plan time
    W = np.hstack([w.force, w.torque])
    q = positions_at(t_js - offset, q_js, t)
    R_WS = model.fk(q, cell.ft_sensor.frame)[:, :3, :3]
    g = np.asarray(cell.sim.gravity, dtype=float)
    ft0 = ft_sensor_model(cell, model).params

    # simulate from the rest knot before the first pass (the approach start)
    first_seg = next(s for s in traj.segments if s["pass_index"] == windows[0][0] and s["kind"] != "link")
    k0 = first_seg["start"]
    t_start = float(traj.times[k0])
    sub = _sub_trajectory(traj, k0)
    in_pass = np.zeros(len(t), dtype=bool)
    for _, a, b in windows:
        in_pass |= (t >= a) & (t <= b)
    if in_pass.sum() < 10:
        raise InputError(f"bag {bag}: only {int(in_pass.sum())} F/T readings inside the plan's passes")
    n_sims = [0]
    dur, dt = float(sub.duration), cell.sim.dt

    def run(contact_cell: CellConfig, name: str, before: float = 0.0, total: float = dur) -> dict[str, FloatArray]:
        """Simulate the pass with ``contact_cell``; progress: stage ``name``, ``before`` + the simulated
        seconds of ``total``."""
        n_sims[0] += 1
        s = dataclasses.replace(setup, cfg=JobConfig(cell=contact_cell, plan_file=plan_file, optimise=False),
                                law=make_contact_law(contact_cell.contact))

        def on_step(t_sim: float) -> None:  # every 100 steps, as run_job's
            if int(round(t_sim / dt)) % 100 == 0:
                report(name, before + t_sim, total)

        report(name, before, total)
        rec = simulate_trajectory(s, sub, on_step if progress else None).record
        report(name, before + dur, total)
        return {"t": rec["t"] + t_start, "fn": rec["fn"], "depth": rec["depth"]}

    stage("simulating the pass with the starting cell")
    rec0 = run(cell, "simulating the starting cell")
    # out of contact: before the simulated approach, or the simulated tool at least `gap` off the part
    depth_at = np.interp(t, rec0["t"], rec0["depth"], left=-np.inf, right=-np.inf)
    free = depth_at <= -gap
    stage("fitting tool weight and bias")
    gfit = None
    still = free & (at_rest(t_js - offset, q_js, t, rest_speed, rest_margin) if rest_speed is not None else False)
    if still.sum() >= MIN_AT_REST:
        W_p, R_p = pose_means(t[still], W[still], R_WS[still])
        if len(W_p) >= MIN_POSES:
            gfit = fit_gravity_bias(W_p, R_p, g, ft0.tool_mass, ft0.tool_com, min_samples=MIN_POSES)
    notes = []
    if gfit is None or not gfit.gravity_identified:
        gfit = fit_gravity_bias(W[free], R_WS[free], g, ft0.tool_mass, ft0.tool_com)
        if gfit.gravity_identified and rest_speed is not None:
            notes.append(f"{int(still.sum())} out-of-contact readings at rest (joints under {rest_speed:g} rad/s) "
                         "do not span the gravity directions: the fit uses readings taken while the arm moved, "
                         "sensitive to the skew between the F/T and joint state clocks (hold each sweep pose)")
    if not gfit.gravity_identified:
        notes.append(f"the out-of-contact orientations span {math.degrees(gfit.spread_rad):.1f} deg: tool mass and "
                     "centre of mass kept, bias only (add an orientation sweep: with_orientation_sweep)")
    # the samples fitted: the passes; with fit_damping also the engagement and the dwell (the simulated
    # tool in contact before its pass), where the depth changes and the damping shows
    in_fit = in_pass | (fit_damping & (depth_at > 0))
    fn_fit = normal_force(W[in_fit], R_WS[in_fit], g, gfit.mass, gfit.com, gfit.bias, ft0.X_S_tcp)
    t_fit, on_pass = t[in_fit], in_pass[in_fit]
    fn_meas = fn_fit[on_pass]

    def predicted(rec: dict[str, FloatArray]) -> FloatArray:
        return np.interp(t_fit, rec["t"], rec["fn"])

    f_before = predicted(rec0)[on_pass]
    mre_before = mean_relative_error(f_before, fn_meas)
    mean_meas = float(fn_meas.mean())
    if mean_meas <= 0:
        raise InputError(f"bag {bag}: the measured normal force on the passes is not positive "
                         f"(mean {mean_meas:.4g} N): no contact?")

    def cell_with(x: FloatArray) -> CellConfig:
        changes: dict[str, Any] = {"contact.stiffness": float(math.exp(x[0]))}
        if fit_damping:
            changes["contact.cr"] = float(np.clip(x[1], 0.01, 1.0))
        return cell.replace(**changes)

    cache: dict[tuple[float, ...], FloatArray] = {}
    fitted = "the contact stiffness" + (" and damping" if fit_damping else "")
    max_runs = MAX_FIT_EVALUATIONS * (2 + int(fit_damping))  # evaluations and their Jacobians
    fit_stage, fit_budget, fit_runs = f"fitting {fitted} (at most {max_runs} simulations)", max_runs * dur, [0]
    # relative errors; near the contact's onset (fit_damping) relative to a fifth of the pass's force
    scale = np.maximum(np.abs(fn_fit), 0.2 * mean_meas)

    def residuals(x: FloatArray) -> FloatArray:
        key = tuple(np.round(x, 12))
        if key not in cache:
            rec = run(cell_with(x), fit_stage, fit_runs[0] * dur, fit_budget)
            fit_runs[0] += 1
            cache[key] = (predicted(rec) - fn_fit) / scale
        return cache[key]

    # start: a series spring (contact and arm) scaled to the measured mean force
    K0 = cell.contact.stiffness
    ratio = mean_meas / max(float(f_before.mean()), 1e-9)
    x0 = [math.log(K0 * ratio)]
    lo, hi = [math.log(1e-3)], [math.log(1e12)]
    if fit_damping:
        x0.append(cell.contact.cr)
        lo.append(0.01)
        hi.append(1.0)
    stage(f"fitting {fitted}")
    sol = least_squares(residuals, np.array(x0), bounds=(lo, hi), diff_step=1e-3, x_scale=1.0,
                        xtol=1e-6, ftol=1e-8, max_nfev=MAX_FIT_EVALUATIONS)
    best = cell_with(sol.x)
    stage("simulating the pass with the identified cell")
    rec1 = run(best, "simulating the identified cell")
    f_after = predicted(rec1)[on_pass]
    ident = best.replace(**{"ft_sensor.tool_mass": gfit.mass, "ft_sensor.tool_com": gfit.com.tolist(),
                            "ft_sensor.bias": gfit.bias.tolist()})
    return Calibration(ident, cell, gfit, best.contact.stiffness, best.contact.cr, fit_damping, mre_before,
                       mean_relative_error(f_after, fn_meas), int(in_pass.sum()), mean_meas,
                       float(f_before.mean()), float(f_after.mean()), n_sims[0], offset, notes, topic)
