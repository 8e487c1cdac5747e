"""Running a plan on an arm: the executive's state machine, without ROS.

:class:`JobExecution` holds a plan's job trajectory and decides what to send a position-controlled
arm (a ros2_control ``joint_trajectory_controller``, the simulated or the real one) and when:

- ``start``: the job from its first knot, preceded by a joint move there when the arm is
  elsewhere; stamped ``command_lead`` ahead, so the controller has it before it starts;
- ``pause`` / ``resume``: the speed along the plan ramps smoothly to rest / back to the plan
  (:func:`~robot_grinding_sim.core.planning.commands.ramp`): the tool stays on its path;
- ``stop`` (asked for, or on an error): the motion ramps to rest and, if the tool is at the part
  (approach, dwell, pass or retreat of a pass), retreats along the surface normal by
  ``process.approach``;
- supervision: every measured joint state is compared with the commanded reference at its stamp;
  an error above ``tracking_error_limit``, or joint states silent for ``joint_states_timeout``
  while running, stop the job with the reason; so does the arm's side saying that it refused a
  command or stopped the arm (:meth:`JobExecution.on_controller_fault`): a short job's motion may
  stay within the tracking limit while the arm never moves.

Where the arm is along the plan (the ``/grinding/progress`` layout of docs/compare.md: pass index,
arc length) comes from the job time each command knot stands for. Times are the clock of the
joint states (ROS time: sim time in simulation), in seconds. Joint vectors are in the robot's
joint order (rad).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import ExecutionConfig, ProcessConfig
from robot_grinding_sim.core.errors import GrindingSimError, InputError
from robot_grinding_sim.core.planning import commands as cmds
from robot_grinding_sim.core.planning.trajectory import DEFAULT_ACCELERATION_LIMIT, JointTrajectory, job_paths
from robot_grinding_sim.core.robot.command_guard import peak_tcp_speed

FloatArray = NDArray[np.float64]

#: segment kinds during which the tool is at the part (a stop retreats along the normal)
AT_PART = ("approach", "dwell", "pass", "retreat")


class JobState(str, Enum):
    """Where the job is. ``ready``: a plan is loaded; ``done``: the job ran to its end; ``stopped``:
    stopped on request; ``failed``: stopped on an error (see :attr:`JobExecution.reason`)."""

    IDLE = "idle"
    READY = "ready"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    STOPPING = "stopping"
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass
class Sent:
    """A command and the clock time (s) its first knot is stamped for."""

    command: cmds.Command
    stamp: float


def speed_limited_move(model: Any, q_from: FloatArray, q_to: FloatArray, vmax: FloatArray, amax: FloatArray,
                       scale: float, max_tcp_speed: float) -> cmds.Command:
    """:func:`~robot_grinding_sim.core.planning.commands.joint_move` (rest to rest, rad) within ``scale`` of
    the joint limits ``vmax`` (rad/s) and ``amax`` (rad/s^2), slowed until the TCP (the model's tip)
    stays under 98 % of ``max_tcp_speed`` (m/s) at its knots and chords: what the arm's driver checks
    (``process.max_tcp_speed``) and refuses beyond."""
    limit = 0.98 * max_tcp_speed
    for _ in range(20):  # the duration grows at least as 1/sqrt(scale): a few rounds
        move = cmds.joint_move(q_from, q_to, vmax, amax, scale)
        peak = peak_tcp_speed(model, model.tip_link, move.times, move.positions, move.velocities)
        if peak <= limit:
            return move
        scale *= 0.99 * limit / peak
    raise GrindingSimError(f"a joint move cannot keep the TCP under {limit:g} m/s")


class JobExecution:
    """The executive's decisions for one plan (see the module docstring).

    Args:
        model: RobotModel whose tip link is the tcp (the plan's joints, in its order).
        plan: a :class:`~robot_grinding_sim.core.planning.planner.Plan` with its job trajectory.
        settings: the ``execution.*`` parameters.
        process: the ``process.*`` parameters (retreat distance and time).

    Raises:
        InputError: the plan has no job trajectory, or its joints are not the robot's.
    """

    def __init__(self, model: Any, plan: Any, settings: ExecutionConfig, process: ProcessConfig) -> None:
        traj: JointTrajectory | None = getattr(plan, "trajectory", None)
        if traj is None:
            raise InputError("the plan has no job trajectory: make it with `grinding plan` and a robot "
                             "(the planner node writes one too)")
        if list(traj.joint_names) != list(model.joint_names):
            raise InputError(f"the plan's joints {list(traj.joint_names)} are not the robot's "
                             f"{list(model.joint_names)}")
        self.model, self.traj, self.settings, self.process = model, traj, settings, process
        paths = job_paths(plan)
        self._normals = {g.index: (g.positions, g.normals) for g in paths.passes}
        self.vmax = np.where(np.isfinite(model.velocity_limits) & (model.velocity_limits > 0),
                             model.velocity_limits, 1.0)
        self.amax = np.full(model.nq, DEFAULT_ACCELERATION_LIMIT)
        self.state = JobState.READY
        self.reason = ""
        self.sent: Sent | None = None
        self.last_error = 0.0
        self.max_error = 0.0
        self._last_state_time: float | None = None
        self._paused_tau = 0.0
        self._failed = False
        #: a deferred start (``start(..., defer=True)``) not released yet: its stamp is provisional
        self.pending = False

    # -- where the arm is told to be -----------------------------------------------------------

    def reference(self, t: float) -> tuple[FloatArray, FloatArray, float]:
        """(q, qd, job time) commanded at clock time ``t`` (job time NaN off the job)."""
        if self.sent is None:
            return self.traj.positions[0].copy(), np.zeros(self.model.nq), math.nan
        return cmds.sample(self.sent.command, t - self.sent.stamp)

    def progress(self, t: float) -> tuple[int, float]:
        """(pass index, arc length along it, m) at clock time ``t``; (-1, 0.0) off the passes."""
        if self.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED, JobState.STOPPING):
            return -1, 0.0
        _, _, tau = self.reference(t)
        seg = self._segment(tau)
        if seg is None or seg["kind"] != "pass":
            return -1, 0.0
        i0, i1 = seg["start"], seg["stop"]
        return int(seg["pass_index"]), float(np.interp(tau, self.traj.times[i0:i1], self.traj.arc[i0:i1]))

    def _segment(self, tau: float) -> dict[str, Any] | None:
        if not math.isfinite(tau):
            return None
        for s in self.traj.segments:
            if self.traj.times[s["start"]] <= tau <= self.traj.times[s["stop"] - 1]:
                if s["kind"] == "pass" or tau < self.traj.times[s["stop"] - 1]:
                    return s
        return None

    # -- requests ------------------------------------------------------------------------------

    def _send(self, command: cmds.Command, now: float) -> Sent:
        self.sent = Sent(command, now + self.settings.command_lead)
        self.pending = False
        return self.sent

    def start(self, now: float, q_measured: FloatArray, defer: bool = False) -> Sent:
        """The job from its start (after a joint move there if the arm is elsewhere).

        ``defer``: the caller stamps the command with :meth:`release` once it is ready to go out
        (its message built). Building the move and the message of a long job takes 0.5 s on a quiet
        core and seconds on a busy one, and a node's clock does not advance while it works (sim time
        arrives as messages): a start stamped from the time of the request would reach the
        controller in the past and the arm would lag the reference by the difference. Until then
        the command's stamp is provisional and no tracking is checked."""
        if self.state not in (JobState.READY, JobState.DONE, JobState.STOPPED, JobState.FAILED):
            raise GrindingSimError(f"cannot start: the job is {self.state.value}")
        q = np.asarray(q_measured, dtype=float)
        job = cmds.remainder(self.traj, 0.0)
        if np.max(np.abs(q - self.traj.positions[0])) > self.settings.start_tolerance:
            move = self._joint_move(q, self.traj.positions[0])
            move.job_times[:] = math.nan  # not on the job yet
            move.job_times[-1] = 0.0
            job = move.then(job, kind="start")
        self.state, self.reason = JobState.RUNNING, ""
        self.max_error = 0.0
        self._last_state_time = None
        sent = self._send(job, now)
        self.pending = defer
        return sent

    def release(self, now: float) -> Sent:
        """Stamp a deferred start ``command_lead`` ahead of ``now`` (never earlier than it was
        stamped at the request): the command goes out now. The arm is at rest at the move's first
        knot until then, so a later stamp only starts the job later."""
        if self.sent is None or not self.pending:
            raise GrindingSimError("no deferred start to release")
        self.sent.stamp = max(self.sent.stamp, now + self.settings.command_lead)
        self.pending = False
        return self.sent

    def _joint_move(self, q_from: FloatArray, q_to: FloatArray) -> cmds.Command:
        return speed_limited_move(self.model, q_from, q_to, self.vmax, self.amax, self.settings.move_velocity_scale,
                                  self.process.max_tcp_speed)

    def pause(self, now: float) -> Sent:
        """Ramp the speed along the plan to rest, on the path."""
        if self.state != JobState.RUNNING:
            raise GrindingSimError(f"cannot pause: the job is {self.state.value}")
        t_s = now + self.settings.command_lead
        _, _, tau = self.reference(t_s)
        if not math.isfinite(tau):
            raise GrindingSimError("cannot pause during the move to the plan's start; stop instead")
        cmd = cmds.ramp(self.traj, tau, self.settings.ramp_time, up=False)
        self._paused_tau = float(cmd.job_times[-1])
        self.state = JobState.PAUSING
        return self._send(cmd, now)

    def resume(self, now: float) -> Sent:
        """From rest where the pause left the arm, the speed ramps back up and the job goes on."""
        if self.state not in (JobState.PAUSED, JobState.PAUSING):
            raise GrindingSimError(f"cannot resume: the job is {self.state.value}")
        tau = self._paused_tau
        up = cmds.ramp(self.traj, tau, self.settings.ramp_time, up=True)
        cmd = up.then(cmds.remainder(self.traj, float(up.job_times[-1])), kind="resume")
        self.state = JobState.RUNNING
        self._last_state_time = None
        return self._send(cmd, now)

    def stop(self, now: float, reason: str = "", failed: bool = False) -> Sent | None:
        """Ramp to rest and retreat along the normal if the tool is at the part.

        Returns the command, or None when nothing moves (no job running)."""
        if self.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED):
            if failed:
                self.state, self.reason = JobState.FAILED, reason
            return None
        t_s = now + self.settings.command_lead
        q, qd, tau = self.reference(t_s)
        if math.isfinite(tau) and self.state == JobState.RUNNING:
            cmd = cmds.ramp(self.traj, tau, self.settings.ramp_time, up=False)
            tau = float(cmd.job_times[-1])
        else:  # paused (at rest on the path) or moving to the start: brake where the reference is
            cmd = cmds.brake(q, qd, self.settings.ramp_time)
        seg = self._segment(tau)
        if seg is not None and seg["kind"] in AT_PART:
            n = self._normal(seg["pass_index"], cmd.positions[-1])
            back = cmds.retreat(self.model, cmd.positions[-1], n, self.process.approach, self.process.approach_time,
                                what=f"retreat from pass {seg['pass_index']}")
            cmd = cmd.then(back, kind="retreat")
        cmd.job_times[:] = math.nan  # off the job from here
        self.state = JobState.STOPPING
        self.reason = reason
        self._failed = failed
        return self._send(cmd, now)

    def _normal(self, pass_index: int, q: FloatArray) -> FloatArray:
        """The pass's outward normal (root frame) nearest to the TCP at ``q``."""
        pos, nrm = self._normals[pass_index]
        p = self.model.fk(q)[:3, 3]
        return nrm[int(np.argmin(np.linalg.norm(pos - p, axis=1)))]

    # -- supervision ---------------------------------------------------------------------------

    def on_controller_fault(self, now: float, what: str) -> Sent | None:
        """The arm's side says it refused a command or stopped the arm (``what``, e.g. a driver's
        safety stop): the arm will not follow the plan, so a running job fails with that reason
        (returns the stop command; it may be refused too) and a stop under way ends failed."""
        if self.state == JobState.STOPPING:
            self._failed = True
            if what not in self.reason:
                self.reason = f"{self.reason}; {what}" if self.reason else what
            return None
        if self.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED):
            return None
        return self.stop(now, what, failed=True)

    def on_joint_state(self, t: float, q: FloatArray, received: float | None = None) -> Sent | None:
        """A measured state stamped ``t`` (the arm's clock), received at ``received`` (this clock;
        default ``t``, for the silence timeout): checks tracking while the arm moves on the job;
        returns the stop command if the error is over the limit."""
        self._last_state_time = t if received is None else received
        if self.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED) or self.sent is None \
                or self.pending:
            return None
        if t < self.sent.stamp:
            return None  # the controller has not started this command yet
        q_ref, _, _ = self.reference(t)
        err = np.abs(np.asarray(q, dtype=float) - q_ref)
        self.last_error = float(err.max())
        self.max_error = max(self.max_error, self.last_error)
        if self.last_error > self.settings.tracking_error_limit:
            j = int(np.argmax(err))
            return self.stop(t, f"tracking error {self.last_error:.4g} rad on joint {self.model.joint_names[j]} "
                                f"over the limit {self.settings.tracking_error_limit:g} rad", failed=True)
        return None

    def update(self, now: float) -> Sent | None:
        """Advance the state with the clock; returns a stop command if joint states fell silent."""
        if self.pending:
            return None
        if self.state in (JobState.RUNNING, JobState.PAUSING) and self.settings.joint_states_timeout > 0:
            last = self._last_state_time if self._last_state_time is not None else self.sent.stamp
            if now - last > self.settings.joint_states_timeout:
                return self.stop(now, f"no joint states for {now - last:.3g} s (timeout "
                                      f"{self.settings.joint_states_timeout:g} s)", failed=True)
        if self.sent is not None and now >= self.sent.stamp + self.sent.command.duration:
            if self.state == JobState.RUNNING:
                self.state = JobState.DONE
            elif self.state == JobState.PAUSING:
                self.state = JobState.PAUSED
            elif self.state == JobState.STOPPING:
                self.state = JobState.FAILED if self._failed else JobState.STOPPED
        return None

    @property
    def duration(self) -> float:
        """The job trajectory's duration, s."""
        return self.traj.duration
