"""Running a plan on an arm: the executive's state machine, without ROS.

:class:`JobExecution` holds a plan's job trajectory and decides what to send a position-controlled
arm (a ros2_control ``joint_trajectory_controller``, the simulated or the real one) and when:

- ``start``: the job from its first knot, preceded by a joint move there when the arm is
  elsewhere; stamped ``command_lead`` ahead, so the controller has it before it starts; with the
  part (``start_check``) that move is checked against it first and made over the part when the
  straight one hits it, or the start is refused naming the move
  (:mod:`~robot_grinding_sim.core.planning.start_move`);
- ``pause`` / ``resume``: the speed along the plan ramps smoothly to rest / back to the plan
  (:func:`~robot_grinding_sim.core.planning.commands.ramp`): the tool stays on its path;
- ``stop`` (asked for, or on an error): the motion ramps to rest and, if the tool is at the part
  (approach, dwell, pass or retreat of a pass), retreats along the surface normal by
  ``process.approach``;
- supervision: every measured joint state is compared with the commanded reference at its stamp;
  a joint error above ``tracking_error_limit``, the tool off its path on the part (the TCP of the
  measured joints farther than ``path_tolerance`` x the plan's stepover from the reference's across
  the path: neither along the pass, a lag, nor along the normal, the force controller's correction;
  on approach, dwell, pass and retreat), or no usable joint state for ``joint_states_timeout``
  while running, stop the job with the reason; so does the arm's side saying that it refused a
  command or stopped the arm (:meth:`JobExecution.on_controller_fault`): a short job's motion may
  stay within the tracking limit while the arm never moves;
- usable joint states: stamped within ``max_clock_skew`` of the time they are received (this
  node's clock) and after the last usable one. A state outside the skew (the arm's clock off this
  node's, or a state delivered late) or out of order counts for nothing: not as alive, not for
  tracking, not for a start (which is refused naming the offset); the silence it leaves names it;
- ``done``: the job's last knot is not enough: a usable joint state stamped at or after it must show
  the tool within the path tolerance of the plan's end (and the joints within the tracking limit)
  within ``settle_time``; else the job fails, saying where the tool is, and, if the tool is at the
  part (within ``process.approach`` of a pass: an arm that stopped in a pass), retreats from where
  the arm is along that pass's normal.

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
        start_check: the part and the tool's links the move to the plan's start is checked against
            (:class:`~robot_grinding_sim.core.planning.start_move.StartMoveCheck`), or a callable
            making it when a start first needs it (loading the part takes a while: in simulation
            the arm starts on the plan's first knot and never needs it); None: not checked.

    Raises:
        InputError: the plan has no job trajectory, or its joints are not the robot's.
    """

    def __init__(self, model: Any, plan: Any, settings: ExecutionConfig, process: ProcessConfig,
                 start_check: Any = None) -> None:
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
        # each pass's direction of travel at its waypoints (N, 3): a lag along it is not off the path
        self._tangents = {g.index: np.gradient(g.positions, axis=0) if len(g.positions) > 1
                          else np.zeros_like(g.positions) for g in paths.passes}
        for t in self._tangents.values():
            t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-300)
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
        #: the tool's tolerance off its path and at the plan's end, m (ExecutionConfig.path_tolerance)
        self.path_tolerance = float(settings.path_tolerance * plan.pass_params.stepover)
        self._p_end = model.fk(traj.positions[-1])[:3, 3]
        self.last_path_error = 0.0
        self.max_path_error = 0.0
        self._end_distance = math.nan  # the tool's distance from the plan's end at the last state past it, m
        self._q_last: FloatArray | None = None  # the joints of the last usable state while running
        # the last usable joint state: its stamp and receive time (arm's clock, this clock)
        self._last_stamp: float | None = None
        self._last_received: float | None = None
        #: receive time - stamp of the last joint state (s; NaN before the first)
        self.clock_offset = math.nan
        #: joint states that did not count since the last usable one: outside the skew, out of order
        self._skewed = 0
        self._unordered = 0
        #: a deferred start (``start(..., defer=True)``) not released yet: its stamp is provisional
        self.pending = False
        self.start_check = start_check
        #: how the last move to the plan's start was made (start_move.start_move's report), or None
        self.start_report: dict[str, Any] | None = None

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

    def pass_ends(self, t0: float, t1: float) -> list[tuple[int, float, float]]:
        """(pass index, arc length at its end m, clock time of its end s) of every pass whose last
        knot the commanded job time passed between clock times ``t0`` (excluded) and ``t1``
        (included), in order.

        A progress publisher samples :meth:`progress` on a timer; when its ticks come late (a busy
        machine) a pass can end between two of them and its last samples, the pass's end, would be
        lost. Publishing these first gives every pass its end, as the in-process job's progress
        (``trajectory.progress_samples``) has it.
        """
        if self.sent is None or not t1 > t0:
            return []
        tau0, tau1 = self.reference(t0)[2], self.reference(t1)[2]
        if not math.isfinite(tau1):
            return []
        tau0 = tau0 if math.isfinite(tau0) else -math.inf
        cmd = self.sent.command
        on = np.isfinite(cmd.job_times)
        out = []
        for s in self.traj.segments:
            end = float(self.traj.times[s["stop"] - 1])
            if s["kind"] == "pass" and tau0 < end <= tau1:
                # the clock time the command reaches that job time (linear between knots, as sample)
                t_end = self.sent.stamp + float(np.interp(end, cmd.job_times[on], cmd.times[on]))
                out.append((int(s["pass_index"]), float(self.traj.arc[s["stop"] - 1]), min(max(t_end, t0), t1)))
        return out

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
        if self.joint_state_problem:  # the move to the start would begin where the arm is not
            raise GrindingSimError(f"cannot start: {self.joint_state_problem}")
        q = np.asarray(q_measured, dtype=float)
        job = cmds.remainder(self.traj, 0.0)
        self.start_report = None
        if np.max(np.abs(q - self.traj.positions[0])) > self.settings.start_tolerance:
            move = self._joint_move(q, self.traj.positions[0])
            if self.start_check is not None:  # clear of the part, or over it, or refused
                from robot_grinding_sim.core.planning.start_move import StartMoveCheck, start_move

                try:
                    if not isinstance(self.start_check, StartMoveCheck):
                        self.start_check = self.start_check()
                    scale = self.settings.move_velocity_scale
                    move, self.start_report = start_move(self.start_check, move, scale * self.vmax,
                                                         scale * self.amax, self.process.max_tcp_speed)
                except GrindingSimError as exc:  # nothing sent; an autostart does not try it again
                    self.state, self.reason = JobState.FAILED, str(exc)
                    raise
            move.job_times[:] = math.nan  # not on the job yet
            move.job_times[-1] = 0.0
            job = move.then(job, kind="start")
        self.state, self.reason = JobState.RUNNING, ""
        self.max_error = self.max_path_error = 0.0
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
        return self._normals[pass_index][1][self._nearest(pass_index, self.model.fk(q)[:3, 3])]

    def _nearest(self, pass_index: int, p: FloatArray) -> int:
        """The index of the pass's waypoint nearest to the TCP position ``p`` (root frame, m)."""
        return int(np.argmin(np.linalg.norm(self._normals[pass_index][0] - p, axis=1)))

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

    @property
    def joint_state_problem(self) -> str:
        """Why the last joint state did not count ("" when it did, or before any): its stamp too far
        from this clock, or not after the last usable one."""
        if self._skewed and abs(self.clock_offset) > self.settings.max_clock_skew:
            return self._skew_text()
        if self._unordered:
            return (f"{self._unordered} joint state(s) out of order (stamped at or before the last usable "
                    f"one, {self._last_stamp:.6f} s: a driver repeating its last state, or two sources)")
        return ""

    def _skew_text(self) -> str:
        off = self.clock_offset
        side = "behind" if off > 0 else "ahead of"
        return (f"{self._skewed} joint state(s) stamped {abs(off):.4g} s {side} this node's clock (clock skew "
                f"between the arm and this node, or states delivered late; execution.max_clock_skew "
                f"{self.settings.max_clock_skew:g} s)")

    def _usable(self, t: float, received: float) -> bool:
        """Whether a joint state stamped ``t`` and received at ``received`` counts (module docstring)."""
        self.clock_offset = received - t
        if abs(self.clock_offset) > self.settings.max_clock_skew:
            self._skewed += 1
            return False
        if self._last_stamp is not None and t <= self._last_stamp:
            if self._last_received is not None and received < self._last_received:
                pass  # this clock went back with the stamps: sim time restarted, start over
            elif t == self._last_stamp and received == self._last_received:
                pass  # both clocks stand (sim time held, e.g. a lockstep arm waiting): a repeat, not stale
            else:
                self._unordered += 1
                return False
        self._last_stamp, self._last_received = t, received
        self._skewed = self._unordered = 0
        return True

    def on_joint_state(self, t: float, q: FloatArray, received: float | None = None) -> Sent | None:
        """A measured state stamped ``t`` (the arm's clock), received at ``received`` (this clock;
        default ``t``): if usable (module docstring), it keeps the job alive, its tracking is checked
        while the arm moves on the job (joints, and the tool across its path on the part), and past
        the job's end it decides ``done``. Returns the stop command when the arm is off the plan."""
        received = t if received is None else received
        if not self._usable(t, received):
            return None
        self._last_state_time = received
        if self.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED) or self.sent is None \
                or self.pending:
            return None
        if t < self.sent.stamp:
            return None  # the controller has not started this command yet
        q = np.asarray(q, dtype=float)
        q_ref, _, tau = self.reference(t)
        err = np.abs(q - q_ref)
        self.last_error = float(err.max())
        self.max_error = max(self.max_error, self.last_error)
        if self.last_error > self.settings.tracking_error_limit:
            j = int(np.argmax(err))
            # the stop is stamped from this node's clock (as every request is), not the state's:
            # a state that arrived late (an arm lagging behind real time, a descheduled node) would
            # stamp it in the past, and the arm would start it part-way, a step
            return self.stop(received, f"tracking error {self.last_error:.4g} rad on joint {self.model.joint_names[j]} "
                                f"over the limit {self.settings.tracking_error_limit:g} rad", failed=True)
        self._q_last = q
        seg = self._segment(tau)
        if seg is not None and seg["kind"] in AT_PART:
            p, p_ref = self.model.fk(q)[:3, 3], self.model.fk(q_ref)[:3, 3]
            k = self._nearest(seg["pass_index"], p_ref)
            n, d = self._normals[seg["pass_index"]][1][k], self._tangents[seg["pass_index"]][k]
            e = p - p_ref
            e = e - (e @ n) * n
            e = e - (e @ d) * d  # across the path: neither a lag along it nor the force correction along n
            self.last_path_error = float(np.linalg.norm(e))
            self.max_path_error = max(self.max_path_error, self.last_path_error)
            if self.last_path_error > self.path_tolerance:
                return self.stop(received, f"the tool is {self.last_path_error * 1e3:.3g} mm off its path on pass "
                                    f"{seg['pass_index']} ({seg['kind']}; path tolerance "
                                    f"{self.path_tolerance * 1e3:.3g} mm)", failed=True)
        if self.state == JobState.RUNNING and t >= self.sent.stamp + self.sent.command.duration:
            self._end_distance = float(np.linalg.norm(self.model.fk(q)[:3, 3] - self._p_end))
            if self._end_distance <= self.path_tolerance:
                self.state = JobState.DONE
        return None

    def update(self, now: float) -> Sent | None:
        """Advance the state with the clock; returns a stop command if joint states fell silent (no
        usable one for ``joint_states_timeout``). A job past its end without a joint state at the
        plan's end within ``settle_time`` fails."""
        if self.pending:
            return None
        if self.state in (JobState.RUNNING, JobState.PAUSING) and self.settings.joint_states_timeout > 0:
            last = self._last_state_time if self._last_state_time is not None else self.sent.stamp
            if now - last > self.settings.joint_states_timeout:
                why = self.joint_state_problem
                return self.stop(now, f"no {'usable ' if why else ''}joint states for {now - last:.3g} s (timeout "
                                      f"{self.settings.joint_states_timeout:g} s)" + (f": {why}" if why else ""),
                                 failed=True)
        if self.sent is not None and now >= self.sent.stamp + self.sent.command.duration:
            if self.state == JobState.RUNNING:
                if now >= self.sent.stamp + self.sent.command.duration + self.settings.settle_time:
                    return self._fail_at_end(now)
            elif self.state == JobState.PAUSING:
                self.state = JobState.PAUSED
            elif self.state == JobState.STOPPING:
                self.state = JobState.FAILED if self._failed else JobState.STOPPED
        return None

    def _fail_at_end(self, now: float) -> Sent | None:
        """The job is past its end + settle_time without the arm at the plan's end: failed; if the
        tool is at the part (within process.approach of a pass's path), a retreat from where the arm
        is along that pass's normal (returned; the job ends failed after it)."""
        reason = self._not_at_end()
        q = self._q_last
        at = None
        if q is not None:
            p = self.model.fk(q)[:3, 3]
            dist = {i: float(np.linalg.norm(pos[self._nearest(i, p)] - p)) for i, (pos, _) in self._normals.items()}
            i = min(dist, key=dist.get) if dist else None
            if i is not None and dist[i] <= self.process.approach:
                at = i
        if at is None:
            self.state, self.reason = JobState.FAILED, reason
            return None
        n = self._normal(at, q)
        cmd = cmds.retreat(self.model, q, n, self.process.approach, self.process.approach_time,
                           what=f"retreat from pass {at}")
        cmd.job_times[:] = math.nan
        self.state, self.reason, self._failed = JobState.STOPPING, f"{reason}; retreating from pass {at}", True
        return self._send(cmd, now)

    def _not_at_end(self) -> str:
        """Why a job past its end plus settle_time is not done."""
        end = self.sent.stamp + self.sent.command.duration
        head = f"the arm did not reach the plan's end within {self.settings.settle_time:g} s"
        if self._last_stamp is None or self._last_stamp < end:
            return f"{head}: no usable joint state stamped after the job's end ({end:.3f} s)"
        return (f"{head}: the tool is {self._end_distance * 1e3:.3g} mm from it (path tolerance "
                f"{self.path_tolerance * 1e3:.3g} mm)")

    @property
    def duration(self) -> float:
        """The job trajectory's duration, s."""
        return self.traj.duration
