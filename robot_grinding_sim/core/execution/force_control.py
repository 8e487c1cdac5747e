"""Force control along the normal on a position-controlled arm, without ROS (hardware_driver's
``force_control``).

The executive sends whole joint trajectories, stamped ahead (core/execution/executive.py); with force
control the driver does not forward them. It follows them itself, as ros2_control's
joint_trajectory_controller would (:class:`CommandSchedule`: each trajectory from its stamp,
replacing the one in force; a pending one waits for its stamp), and every control period
(:meth:`NormalForceControl.update`):

1. samples the executive's reference ``(q_ref, qd_ref)`` at ``now + horizon``
   (:class:`~robot_grinding_sim.core.robot.joint_trajectory.TrajectoryInterpolator`, cubic Hermite as the
   controller interpolates);
2. finds the surface normal there: the outward normal of the plan's pass path point nearest to
   the reference's TCP (forward kinematics), among the current pass's points while
   ``grinding/progress`` says the job is on a pass, among every pass's otherwise (the approach and
   the dwell, which progress does not report), within :data:`NORMAL_RADIUS`; none farther away
   (the correction is then released). The nearest point rather than progress's arc length:
   progress comes late by a DDS hop and is silent off the passes, the reference is where the arm
   is told to be at that instant;
3. steps the admittance (:class:`~robot_grinding_sim.core.robot.admittance.NormalAdmittance`) with
   the measured normal force ``n . f`` and the plan's target force;
4. returns the point ``q_ref + J^+ n x`` with velocity ``qd_ref + J^+ n x'``
   (:func:`~robot_grinding_sim.core.robot.admittance.joint_correction`), to be streamed as a
   one-point trajectory ``horizon`` ahead.

The plan: plan.json's data (the latched ``grinding/plan`` the planner publishes, the same plan the
executive runs). The target force is its ``force_target.target_force_n``, else its cell's
``process.target_force``. Times are one clock's seconds (the driver's ROS time, which stamps the
executive's commands too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import AdmittanceConfig
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.admittance import AdmittanceState, NormalAdmittance, joint_correction
from robot_grinding_sim.core.robot.joint_trajectory import JointLimits, TrajectoryInterpolator

FloatArray = NDArray[np.float64]

#: a TCP farther than this from every pass path point has no normal (m): more than the approach
#: (10 mm by default) from where the tool touches
NORMAL_RADIUS = 0.02
#: grinding/progress older than this (s) no longer says the job is on a pass (the executive stopped
#: publishing: it died, or the pass ended and its -1 was lost)
PROGRESS_TIMEOUT = 0.5


class CommandSchedule:
    """The executive's trajectories as a joint_trajectory_controller follows them.

    A trajectory starts at its stamp (0 or past: when it arrives) from the reference in force then,
    and replaces the one in force; one stamped later waits (a second pending one replaces the first).
    After its last point the reference holds there.

    Args:
        limits: the arm's joints and limits (the joint order of every output).
    """

    def __init__(self, limits: JointLimits) -> None:
        self.limits = limits
        self.current: tuple[TrajectoryInterpolator, float] | None = None
        self.pending: tuple[TrajectoryInterpolator, float] | None = None

    def clear(self) -> None:
        """Forget every trajectory (a stop): nothing is in force."""
        self.current = self.pending = None

    def command(self, now: float, stamp: float, names: list[str], times: FloatArray, positions: FloatArray,
                velocities: FloatArray | None) -> TrajectoryInterpolator:
        """Take a trajectory (names (m,), times (K,) s from ``stamp``, positions and velocities (K, m)).

        Raises:
            InputError: the trajectory is not valid for the arm (TrajectoryInterpolator.build's checks),
                or it leaves joints unnamed while nothing is in force.
        """
        start = max(stamp, now) if stamp > 0.0 else now
        ref = self.sample(start)
        state = None if ref is None else (ref[0], ref[1], np.zeros_like(ref[0]))
        traj = TrajectoryInterpolator.build(self.limits, names, times, positions, velocities, start=state,
                                            what="joint_trajectory")
        self._promote(now)
        if start > now and self.current is not None:
            self.pending = (traj, start)
        else:
            self.current, self.pending = (traj, start), None
        return traj

    def _promote(self, t: float) -> None:
        if self.pending is not None and t >= self.pending[1]:
            self.current, self.pending = self.pending, None

    def sample(self, t: float) -> tuple[FloatArray, FloatArray] | None:
        """The reference (q, qd), each (n,), at ``t``; None before any trajectory is in force."""
        traj = self.current
        if self.pending is not None and t >= self.pending[1]:
            traj = self.pending
        if traj is None or t < traj[1]:
            return None
        q, qd, _ = traj[0].sample(t - traj[1])
        return q, qd

    def end(self) -> float:
        """When the newest trajectory (pending or in force) reaches its last point; -inf without one."""
        last = self.pending if self.pending is not None else self.current
        return -math.inf if last is None else last[1] + last[0].duration


@dataclass(frozen=True)
class StreamPoint:
    """One control period's command and what made it.

    Attributes:
        positions, velocities: (n,) the corrected point, rad, rad/s (the arm's joint order).
        time: the time it is for (now + horizon), s.
        state: the admittance's step (x m along +n, x' m/s, active, force error N, limited).
        force: the measured normal force n . f, N (NaN without a normal or a reading).
        target: the target force, N (NaN without a plan).
        pass_index: the pass progress reported (-1: off a pass).
        normal: (3,) the outward normal used (root frame), zeros without one.
    """

    positions: FloatArray
    velocities: FloatArray
    time: float
    state: AdmittanceState
    force: float
    target: float
    pass_index: int
    normal: FloatArray


def plan_normals(data: dict[str, Any], params: AdmittanceConfig, source: str = "plan"
                 ) -> tuple[dict[int, tuple[FloatArray, FloatArray]], float]:
    """A read plan.json's pass paths in the root frame (pass index -> (positions (N, 3) m, outward
    normals (N, 3))) and its target force (N).

    Raises:
        InputError: a malformed plan, one without a target force (neither
            ``force_target.target_force_n`` nor its cell's ``process.target_force``), or a target at
            or below ``admittance.contact_force`` (off a pass the law would switch on and off around it).
    """
    from robot_grinding_sim.core.planning import plan_io
    from robot_grinding_sim.core.planning.trajectory import job_paths

    plan = plan_io.plan_from_dict(data, source)
    ft = data.get("force_target") or {}
    cell = data.get("cell") or {}
    target = ft.get("target_force_n", cell.get("process.target_force"))
    if not isinstance(target, (int, float)) or isinstance(target, bool) or not math.isfinite(target):
        raise InputError(f"{source}: no target force (neither force_target.target_force_n nor the cell's "
                         "process.target_force)")
    if target <= params.contact_force:
        raise InputError(f"{source}: target force {target:g} N is not above admittance.contact_force "
                         f"{params.contact_force:g} N")
    return {g.index: (g.positions, g.normals) for g in job_paths(plan).passes}, float(target)


class NormalForceControl:
    """The driver's force control (see the module docstring).

    Args:
        model: RobotModel whose tip link is the tcp (joint order of every output).
        params: ``admittance.*``.
    """

    def __init__(self, model: Any, params: AdmittanceConfig) -> None:
        self.model, self.params = model, params
        self.schedule = CommandSchedule(JointLimits.from_model(model))
        self.admittance = NormalAdmittance(params)
        self.passes: dict[int, tuple[FloatArray, FloatArray]] = {}
        self.target = math.nan
        self._progress = (-1, -math.inf)
        self._last: float | None = None
        self._normal = np.zeros(3)  # the last normal found: a correction is released along it
        self.max_correction_seen = 0.0

    # -- inputs --------------------------------------------------------------------------------
    def set_plan(self, data: dict[str, Any], source: str = "plan") -> str:
        """Take a read plan.json (:func:`plan_normals`); returns a summary. InputError: see there."""
        return self.use_plan(*plan_normals(data, self.params, source))

    def use_plan(self, passes: dict[int, tuple[FloatArray, FloatArray]], target: float) -> str:
        """Take :func:`plan_normals`' result (parsed elsewhere, e.g. off the control thread)."""
        self.passes, self.target = passes, float(target)
        return f"{len(passes)} passes, target {self.target:g} N"

    def command(self, now: float, stamp: float, names: list[str], times: FloatArray, positions: FloatArray,
                velocities: FloatArray | None) -> TrajectoryInterpolator:
        """The executive's trajectory (see :meth:`CommandSchedule.command`)."""
        return self.schedule.command(now, stamp, names, times, positions, velocities)

    def progress(self, now: float, pass_index: int) -> None:
        """grinding/progress's pass index (-1: off the passes), received at ``now``."""
        self._progress = (int(pass_index), now)

    def stop(self) -> None:
        """A stop: no trajectory in force, no correction (the arm holds where it was told)."""
        self.schedule.clear()
        self.admittance.reset()
        self._last = None

    def pass_index(self, now: float) -> int:
        """The pass the job is on at ``now`` (-1: off the passes, or progress silent)."""
        idx, at = self._progress
        return idx if now - at <= PROGRESS_TIMEOUT else -1

    def normal_at(self, p: FloatArray, pass_index: int) -> FloatArray | None:
        """The outward normal (3,) of the pass path point nearest to the TCP position ``p`` (3,), m,
        root frame; within pass ``pass_index`` when it is one of the plan's; None beyond NORMAL_RADIUS."""
        groups = [self.passes[pass_index]] if pass_index in self.passes else list(self.passes.values())
        best, normal = NORMAL_RADIUS, None
        for pos, nrm in groups:
            d = np.linalg.norm(pos - p, axis=1)
            k = int(np.argmin(d))
            if d[k] <= best:
                best, normal = float(d[k]), nrm[k]
        return normal

    # -- each control period -------------------------------------------------------------------
    def update(self, now: float, force: FloatArray | None) -> StreamPoint | None:
        """The corrected point for ``now + horizon``, with the measured contact force ``force`` (3,)
        (N, on the tool, root frame; None: no reading yet). None: nothing to stream (no trajectory in
        force, or the last one done and the correction back at 0)."""
        h = self.params.horizon
        t = now + h
        ref = self.schedule.sample(t)
        dt = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        if ref is None or (t > self.schedule.end() + 2.0 * h and self.admittance.x == 0.0):
            self.admittance.reset()
            return None
        q_ref, qd_ref = ref
        idx = self.pass_index(now)
        p = self.model.fk(q_ref)[:3, 3]
        n = self.normal_at(p, idx) if self.passes else None
        if n is None or force is None or not math.isfinite(self.target):
            fn = math.nan
            state = self.admittance.step(dt, 0.0, 0.0, on_pass=False)  # released towards 0
        else:
            fn = float(np.dot(n, force))
            state = self.admittance.step(dt, fn, self.target, on_pass=idx >= 0)
        self.max_correction_seen = max(self.max_correction_seen, abs(state.x))
        if n is not None:
            self._normal = np.asarray(n, dtype=float)
        if state.x == 0.0 and state.v == 0.0:
            return StreamPoint(q_ref, qd_ref, t, state, fn, self.target, idx, self._normal.copy())
        # a correction is only ever made along a normal found, so _normal is set; without one here
        # (the TCP left the passes) it is released along the last
        dq, dqd = joint_correction(self.model, q_ref, self._normal, state.x, state.v)
        return StreamPoint(q_ref + dq, qd_ref + dqd, t, state, fn, self.target, idx, self._normal.copy())
