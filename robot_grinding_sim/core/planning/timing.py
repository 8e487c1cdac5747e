"""Joint trajectory for a plan: IK along every move, then time parameterisation.

Every move (approach, pass, retreat, link) is a path q(s) through the IK solutions of its TCP
samples; the robot is at rest at the ends of each move. Along a move the path speed ds/dt is the
largest that keeps every joint within its velocity and acceleration limits, found by the
classic forward/backward integration over the discretised path (the numerical-integration
form of time-optimal path parameterisation):

    |q'_j(s)| ds/dt <= v_max_j,   |q'_j(s) s'' + q''_j(s) (ds/dt)^2| <= a_max_j

with s the TCP arc length on passes (capped at the feed, so the TCP moves at the feed except
for the short ramps at the pass ends) and a normalised joint-space length elsewhere. A pass on
which the joint velocity limits do not allow the feed is an error naming the pass and waypoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.robot.ik import IKSolver, pose_matrices

FloatArray = NDArray[np.float64]

#: joint acceleration limit when the robot description has none (UR publishes none), rad/s^2
DEFAULT_ACCELERATION_LIMIT = 4.0


@dataclass
class JointTrajectory:
    """A time-parameterised joint trajectory in the robot root frame.

    Attributes:
        joint_names: (nq,) names.
        times: (M,) s from the start.
        positions, velocities, accelerations: (M, nq) rad, rad/s, rad/s^2.
        segments: one dict per move: kind, pass_index, start, stop (sample indices, stop exclusive;
            consecutive moves share their boundary sample, where the robot is at rest).
        tcp: (M, 3) TCP positions in the root frame, m.
    """

    joint_names: list[str]
    tip_link: str
    times: FloatArray
    positions: FloatArray
    velocities: FloatArray
    accelerations: FloatArray
    segments: list[dict[str, Any]] = field(default_factory=list)
    tcp: FloatArray | None = None


def densify(positions: FloatArray, quaternions: FloatArray, max_step: float, max_angle: float
            ) -> tuple[FloatArray, FloatArray]:
    """Insert samples so consecutive TCP poses differ by <= max_step m and <= max_angle rad."""
    pos_out, quat_out = [positions[:1]], [quaternions[:1]]
    for k in range(1, len(positions)):
        d = float(np.linalg.norm(positions[k] - positions[k - 1]))
        r0, r1 = Rotation.from_quat(quaternions[k - 1]), Rotation.from_quat(quaternions[k])
        ang = float((r0.inv() * r1).magnitude())
        n = max(1, int(math.ceil(d / max_step)), int(math.ceil(ang / max_angle)))
        if n == 1:
            pos_out.append(positions[k : k + 1])
            quat_out.append(quaternions[k : k + 1])
            continue
        s = np.linspace(0.0, 1.0, n + 1)[1:]
        pos_out.append(positions[k - 1] + s[:, None] * (positions[k] - positions[k - 1]))
        quat_out.append(Slerp([0.0, 1.0], Rotation.from_quat(quaternions[k - 1 : k + 1]))(s).as_quat())
    return np.vstack(pos_out), np.vstack(quat_out)


def _profile(q: FloatArray, s: FloatArray, vmax: FloatArray, amax: FloatArray, cap: float
             ) -> FloatArray:
    """Path speeds ds/dt (N,) at the samples: at rest at both ends, within the limits."""
    N = len(s)
    if N < 2:
        return np.zeros(N)
    ds = np.diff(s)
    qs = np.gradient(q, s, axis=0)  # q'(s) (N, nq)
    qss = np.gradient(qs, s, axis=0)  # q''(s)
    with np.errstate(divide="ignore", invalid="ignore"):
        vcap = np.min(np.where(np.abs(qs) > 1e-12, vmax / np.abs(qs), np.inf), axis=1)
        # curvature term alone must fit: |q''| sdot^2 <= a_max
        vcap = np.minimum(vcap, np.sqrt(np.min(np.where(np.abs(qss) > 1e-12, amax / np.abs(qss), np.inf), axis=1)))
    vcap = np.minimum(vcap, cap)
    vcap[0] = vcap[-1] = 0.0

    def acc_range(i: int, sd: float) -> tuple[float, float]:
        lo, hi = -np.inf, np.inf
        for j in range(q.shape[1]):
            a, b = qs[i, j], qss[i, j] * sd * sd
            if abs(a) < 1e-12:
                continue
            l1, l2 = (-amax[j] - b) / a, (amax[j] - b) / a
            lo, hi = max(lo, min(l1, l2)), min(hi, max(l1, l2))
        return lo, hi

    fwd = np.zeros(N)
    for i in range(N - 1):
        lo, hi = acc_range(i, fwd[i])
        hi = max(hi, 0.0) if np.isfinite(hi) else 1e6
        fwd[i + 1] = min(vcap[i + 1], math.sqrt(max(fwd[i] ** 2 + 2.0 * hi * ds[i], 0.0)))
    bwd = fwd.copy()
    bwd[-1] = 0.0
    for i in range(N - 1, 0, -1):
        lo, hi = acc_range(i, bwd[i])
        dec = -min(lo, 0.0) if np.isfinite(lo) else 1e6
        bwd[i - 1] = min(bwd[i - 1], math.sqrt(max(bwd[i] ** 2 + 2.0 * dec * ds[i - 1], 0.0)))
    return bwd


def _times(s: FloatArray, sd: FloatArray) -> FloatArray:
    ds = np.diff(s)
    avg = 0.5 * (sd[1:] + sd[:-1])
    with np.errstate(divide="ignore"):
        dt = np.where(avg > 0, ds / np.maximum(avg, 1e-300), np.inf)
    if not np.all(np.isfinite(dt)):
        raise PlanningError("time parameterisation failed: zero path speed inside a move")
    return np.r_[0.0, np.cumsum(dt)]


def joint_trajectory(model: Any, plan: Any, acceleration_limits: Any = None, max_step: float = 0.002,
                     max_angle: float = 0.05) -> tuple[JointTrajectory, dict[str, Any]]:
    """IK and timing for every move of ``plan``; returns the trajectory and the reachability report.

    Raises:
        PlanningError: an unreachable target (naming the move, pass and waypoint), a joint jump,
            or a pass on which the feed breaks a joint velocity limit.
    """
    vmax = np.where(np.isfinite(model.velocity_limits) & (model.velocity_limits > 0), model.velocity_limits, 1.0)
    amax = (np.full(model.nq, DEFAULT_ACCELERATION_LIMIT) if acceleration_limits is None
            else np.broadcast_to(np.asarray(acceleration_limits, dtype=float), (model.nq,)).copy())
    X_BP = plan.workpiece_pose
    # TCP samples of every move (passes keep their waypoints; other moves are densified)
    samples = []
    for m in plan.moves:
        if m.kind == "pass":
            pos, quat = m.positions, m.quaternions
        else:
            pos, quat = densify(m.positions, m.quaternions, max_step, max_angle)
        samples.append((m, pos, quat))
    targets = np.concatenate([pose_matrices(p, q, X_BP) for _, p, q in samples])
    owner = np.concatenate([np.full(len(p), k) for k, (_, p, _) in enumerate(samples)])
    local = np.concatenate([np.arange(len(p)) for _, p, _ in samples])
    solver = IKSolver(model)
    ik = solver.solve_path(targets)
    bad = np.flatnonzero(~ik.ok)
    if len(bad):
        k = int(bad[0])
        m = samples[owner[k]][0]
        where = (f"pass {m.pass_index} waypoint {local[k]}" if m.kind == "pass"
                 else f"{m.kind} move of pass {m.pass_index}, point {local[k]}")
        raise PlanningError(
            f"{where} is unreachable: IK error {ik.position_error[k] * 1e3:.3f} mm / "
            f"{math.degrees(ik.rotation_error[k]):.3f} deg at TCP {np.round(targets[k][:3, 3], 4).tolist()} m "
            f"in base_link ({len(bad)} of {len(targets)} targets fail; move the workpiece closer)"
        )
    jumps = np.max(np.abs(np.diff(ik.q, axis=0)), axis=1) if len(ik.q) > 1 else np.zeros(0)
    if len(jumps) and jumps.max() > 0.5:
        k = int(np.argmax(jumps)) + 1
        m = samples[owner[k]][0]
        raise PlanningError(f"joint jump of {jumps.max():.2f} rad at the {m.kind} of pass {m.pass_index}, "
                            f"point {local[k]} (a configuration change); move the workpiece or change the angle")
    # time parameterisation move by move
    t_all, q_all, v_all, segments = [], [], [], []
    t0 = 0.0
    start = 0
    for k, (m, pos, _) in enumerate(samples):
        idx = np.flatnonzero(owner == k)
        q = ik.q[idx]
        if m.kind == "pass":
            s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pos, axis=0), axis=1))]
            cap = plan.tool.feed
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.max(np.abs(np.gradient(q, s, axis=0)) * cap / vmax, axis=1)
            if np.any(need > 1.0):
                w = int(np.argmax(need))
                raise PlanningError(
                    f"pass {m.pass_index} waypoint {w}: the feed {cap} m/s needs {need[w]:.2f}x a joint's "
                    f"velocity limit; reduce the feed to {cap / need[w]:.4f} m/s or move the workpiece"
                )
        else:
            dq = np.abs(np.diff(q, axis=0)) / vmax  # time at full speed per joint
            dp = np.linalg.norm(np.diff(pos, axis=0), axis=1)
            s = np.r_[0.0, np.cumsum(np.maximum(np.max(dq, axis=1), dp))]
            cap = np.inf
        if len(s) < 2 or s[-1] <= 0:
            continue
        keep = np.r_[True, np.diff(s) > 1e-12]
        s, q = s[keep], q[keep]
        sd = _profile(q, s, vmax, amax, cap)
        t = _times(s, sd)
        qd = np.gradient(q, s, axis=0) * sd[:, None]
        t_all.append(t0 + t if not t_all else t0 + t[1:])
        q_all.append(q if not q_all else q[1:])
        v_all.append(qd if not v_all else qd[1:])
        # consecutive moves share their boundary sample (at rest); a segment includes both ends
        first = start if not segments else start - 1
        n_new = len(t) if not segments else len(t) - 1
        segments.append({"kind": m.kind, "pass_index": int(m.pass_index), "start": first,
                         "stop": start + n_new})
        start += n_new
        t0 = float(t0 + t[-1])
    times = np.concatenate(t_all)
    positions = np.vstack(q_all)
    velocities = np.vstack(v_all)
    accelerations = np.gradient(velocities, times, axis=0) if len(times) > 2 else np.zeros_like(velocities)
    traj = JointTrajectory(list(model.joint_names), model.tip_link, times, positions, velocities, accelerations,
                           segments, None)
    report = {
        "targets": int(len(targets)),
        "reachable": int(ik.ok.sum()),
        "max_position_error_m": float(ik.position_error.max()),
        "max_rotation_error_rad": float(ik.rotation_error.max()),
        "min_manipulability": float(ik.manipulability.min()),
        "min_joint_limit_margin_rad": float(ik.limit_margin.min()),
        "max_joint_step_rad": float(jumps.max()) if len(jumps) else 0.0,
        "duration_s": float(times[-1]),
        "velocity_limits": vmax.tolist(),
        "acceleration_limits": amax.tolist(),
    }
    return traj, report
