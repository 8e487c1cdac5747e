"""The hardware driver's supervision, ROS-free: what it forwards, when it holds, what it streams.

:class:`DriverSupervisor` holds the driver's decisions; the node (nodes/hardware_driver.py) converts
messages and calls it, and publishes what it asks through :class:`DriverOutputs`. It combines
:class:`~robot_grinding_sim.core.robot.command_guard.CommandGuard` (limits of a command, judged
from the measured state carried to now: :meth:`DriverSupervisor.q_now`),
:class:`~robot_grinding_sim.core.robot.safety.SafetyMonitor` (the latching stop),
:class:`~robot_grinding_sim.core.contact.ft_processing.FTProcessor` (bias, tool weight, low-pass)
and, with force control, :class:`~robot_grinding_sim.core.execution.force_control.NormalForceControl`.

Threads: the F/T backend's reader thread (:meth:`DriverSupervisor.readings`, :meth:`check`) and the
node's executor (everything else) share it; one re-entrant lock orders stops, holds and forwarded
commands, so a stop since a command was checked wins (its hold is out already) and a hold goes out
in the thread that saw its cause.

Clocks (callables handed in): ``monotonic`` (s; the F/T readings' sample times, the timeouts) and
``ros_now`` (s; the ROS time that stamps the executive's commands). A command's lateness is judged
on the arm's clock (:meth:`DriverSupervisor.arm_now`: the last joint state's stamp carried by the
time since it arrived), the clock its controller starts the command on and the one the measured
position is carried to: judged on this node's clock, an arm whose stamps lag it (an emulated arm
that a busy machine left behind real time) was compared with the point due at this node's now, a
step of the lag's worth of motion (0.0557 rad refused on a retreat under load 11).

Activity (the node's lifecycle): while not :attr:`DriverSupervisor.active` every command is refused
("not active"); :meth:`activate` waits for the F/T stream's first reading again (its age is not judged
across the pause); :meth:`deactivate` stops what is followed and holds at the measured position.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.contact.ft_processing import FTProcessor
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.execution.force_control import NormalForceControl, plan_normals
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.robot.command_guard import CommandGuard, GuardParams
from robot_grinding_sim.core.robot.safety import SafetyLimits, SafetyMonitor, Trip
from robot_grinding_sim.core.sim.ft import ft_sensor_model, sensor_inputs
from robot_grinding_sim.hardware.ft_stream import FTReadings

__all__ = ["MAX_CARRY_S", "NOT_ACTIVE", "STREAM_LOG_PERIOD", "TARE_WINDOW", "DriverOutputs", "DriverSupervisor",
           "supervisor_from_parameters"]

FloatArray = npt.NDArray[np.float64]
#: readings averaged by tare, s
TARE_WINDOW = 0.1
#: at most one log line per this many seconds about refused streamed points
STREAM_LOG_PERIOD = 1.0
#: how far the measured position is carried along its velocity to judge a command (s): a few control
#: periods of waiting for the node's thread, not a silent arm
MAX_CARRY_S = 0.05
#: the refusal while the driver is not active
NOT_ACTIVE = "the driver is not active (lifecycle state: configure and activate it)"


class DriverOutputs(Protocol):
    """What the supervisor asks the node to publish or say."""

    def hold(self, q: FloatArray) -> None:
        """A hold: one point at ``q`` (n,), rad, velocities 0, reached in one control period, now."""

    def stream_point(self, names: list[str], positions: FloatArray, velocities: FloatArray, ahead: float) -> None:
        """A one-point trajectory to the controller (force control), ``ahead`` s from now."""

    def admittance(self, values: list[float]) -> None:
        """``[stamp_s, pass_index, normal_force_n, target_n, correction_m, correction_rate_m_s, active, limited]``."""

    def diagnostics(self) -> None:
        """Publish the diagnostics now."""

    def log(self, level: str, text: str) -> None:
        """``level``: ``"info"``, ``"warning"`` or ``"error"``."""


class DriverSupervisor:
    """The driver's decisions (module docstring).

    Args:
        model: the RobotModel (joint order of the commands and holds).
        guard: limits of a command.
        proc: F/T processing (bias, tool weight, filter) at the sensor's rate.
        safety: the latching stop.
        fc: force control, or None (commands are forwarded as they are).
        ft_frame: the sensor's link (its orientation compensates the tool's weight).
        ft_rate: the readings' rate, Hz (how many readings tare averages).
        outputs: the node's publications and log.
        monotonic, ros_now: the clocks (module docstring), s.
    """

    def __init__(self, model: Any, guard: CommandGuard, proc: FTProcessor, safety: SafetyMonitor,
                 fc: NormalForceControl | None, *, ft_frame: str, ft_rate: float, outputs: DriverOutputs,
                 monotonic: Callable[[], float], ros_now: Callable[[], float]) -> None:
        self.model, self.guard, self.proc, self.safety, self.fc = model, guard, proc, safety, fc
        self.ft_frame, self.out = ft_frame, outputs
        self.monotonic, self.ros_now = monotonic, ros_now
        self.lock = threading.RLock()
        self.active = False
        self.q: FloatArray | None = None  # the measured position, rad
        self.qd = np.zeros(model.nq)  # measured joint velocities, rad/s (0 if not published)
        self.q_at = 0.0  # when the last joint state arrived, monotonic s
        self.q_stamp: float | None = None  # the last joint state's stamp (the arm's clock), s; None: unstamped
        self.R_WS: FloatArray | None = None  # the sensor's orientation in the base frame
        self.X_S_tcp: FloatArray | None = None  # a sensor carrying a held part: the tcp's pose in its frame
        self._raw: collections.deque[tuple[float, FloatArray]] = collections.deque(
            maxlen=max(1, int(TARE_WINDOW * ft_rate) + 1))
        self.forwarded = self.refused = 0
        self.ft_age_max = 0.0  # the largest age of a read's newest reading when it was taken, s
        self.last_refusal = ""
        self.hold_after: float | None = None  # from the last stop's cause to its hold, s
        self._f_sum, self._f_count = np.zeros(3), 0  # contact force in the base frame since the last period, N
        self._f_mean: FloatArray | None = None
        self.streamed = self.stream_refused = 0
        self._stream_logged = -np.inf
        self.plan_note = "no plan yet (grinding/plan): streaming uncorrected"

    # -- activity -------------------------------------------------------------------------------
    def activate(self) -> None:
        """Forward and supervise from now; the F/T stream's first reading is waited for again."""
        with self.lock:
            self.safety.last_ft = None
            self.active = True

    def deactivate(self) -> None:
        """Refuse commands from now; stop what is followed and hold at the measured position."""
        with self.lock:
            was = self.active
            self.active = False
            if self.fc is not None:
                self.fc.stop()
            if was:
                self._hold()

    def refusal(self) -> str | None:
        """Why a command must be refused now, or None (call under the lock)."""
        return NOT_ACTIVE if not self.active else self.safety.refusal()

    # -- robot side -----------------------------------------------------------------------------
    def joint_state(self, q: FloatArray, qd: FloatArray | None, stamp: float | None = None) -> None:
        """A measured joint state (n,) rad and (n,) rad/s (None: not published), model order,
        stamped ``stamp`` (s, the arm's clock; None or 0: unstamped, this node's clock stands in)."""
        qd = np.zeros_like(q) if qd is None else qd
        X = None
        if self.proc.params.part_side:  # the sensor carries a held part: the tool centre moves in its frame
            R, X = sensor_inputs(self.proc.model, self.model, self.ft_frame, q)
        else:
            R = self.model.fk(q, self.ft_frame)[:3, :3]
        with self.lock:
            self.q, self.qd, self.R_WS, self.X_S_tcp = q, qd, R, X
            self.q_at = self.monotonic()
            self.q_stamp = float(stamp) if stamp else None
            self.safety.joint_state(self.q_at)

    def arm_now(self) -> float:
        """The arm's clock now, s (call under the lock): the last joint state's stamp plus the time
        since it arrived; this node's ROS time before a stamped state (module docstring)."""
        if self.q_stamp is None:
            return self.ros_now()
        return self.q_stamp + max(self.monotonic() - self.q_at, 0.0)

    def q_now(self) -> FloatArray | None:
        """The measured position carried to now along the measured velocity (call under the lock).

        The guard judges a command from where the arm is when the controller starts it; the last
        joint state is older than that by the time it waited for the node's thread (a busy machine: a few
        control periods), which at a link's full speed is enough to read a planned move as faster than
        the limit. Carried at most :data:`MAX_CARRY_S` (older data is the safety monitor's business).
        """
        if self.q is None:
            return None
        age = min(max(self.monotonic() - self.q_at, 0.0), MAX_CARRY_S)
        return self.q + self.qd * age

    def to_sensor_frame(self, frame: str, wrench: FloatArray) -> FloatArray:
        """A reading (6,) given in link ``frame`` moved into the sensor frame, through the robot's
        kinematics at the measured joint positions (:func:`~robot_grinding_sim.core.contact.ft_sensor.
        wrench_between_links`; InputError: not a link, or no joint state yet for a frame that moves)."""
        from robot_grinding_sim.core.contact.ft_sensor import wrench_between_links

        with self.lock:
            q = self.q_now()
        return wrench_between_links(self.model, q, wrench, frame, self.ft_frame)

    def _hold(self) -> None:
        """One point at the measured position (call under the lock)."""
        if self.q is None:
            self.out.log("error", "no joint state yet: no position to hold")
            return
        self.out.hold(self.q)

    def _tripped(self, trips: list[Trip]) -> None:
        """New stops: hold at once, then say so (call under the lock)."""
        if not trips:
            return
        self._hold()
        if self.fc is not None:
            self.fc.stop()
        self.hold_after = self.monotonic() - min(t.since for t in trips)
        for t in trips:
            self.out.log("error", f"STOP ({t}): holding at the measured position; commands refused until ~/reset")
        self.out.diagnostics()

    def _refuse(self, reasons: Sequence[str]) -> None:
        self.refused += 1
        self.last_refusal = "; ".join(reasons)
        self.out.log("warning", f"command refused, not forwarded: {self.last_refusal}")
        self.out.diagnostics()

    def command(self, parse: Callable[[], tuple[list[str], Any, Any, Any, float]] | None,
                forward: Callable[[], None]) -> bool:
        """A trajectory from the executive: judged and forwarded (``forward()``, under the lock), or
        followed with force control, or refused (counted, logged, on the diagnostics).

        Args:
            parse: returns (joint names, times (k,) s, positions (k, n) rad, velocities (k, n) or None,
                header stamp s (0: now)), raising InputError for a bad message; None: a trajectory
                without points (the controller's "stop here"), forwarded unless stopped.
            forward: publishes the message as it came.

        Returns:
            True if it was forwarded or is followed.
        """
        with self.lock:
            why, q, qd, arm_now = self.refusal(), self.q_now(), self.qd, self.arm_now()
        if why is not None:
            self._refuse([why])
            return False
        if parse is not None:
            try:
                names, times, pos, vel, stamp = parse()
                # as the controller executes it: a stamp in the past (on the arm's clock, the one q
                # is carried to) starts it part-way (a step)
                late = max(0.0, arm_now - stamp) if stamp > 0.0 else 0.0
                result = self.guard.check(names, times, pos, vel, q, late=late, qd_current=qd)
            except InputError as exc:
                self._refuse([str(exc)])
                return False
            if not result.ok:
                self._refuse(result.reasons)
                return False
        followed = self.fc is not None and parse is not None
        with self.lock:  # a stop since the check wins: its hold is out already
            why = self.refusal()
            if why is None and followed:
                try:
                    self.fc.command(self.arm_now(), stamp, names, times, pos, vel)  # type: ignore[union-attr]
                except InputError as exc:
                    why = str(exc)
            elif why is None:
                if self.fc is not None:
                    self.fc.stop()  # the controller stops where its reference is: nothing to follow
                forward()
            if why is None:
                self.forwarded += 1
        if why is not None:
            self._refuse([why])
            return False
        return True

    # -- force control -------------------------------------------------------------------------
    def take_plan(self, text: str) -> None:
        """The latched plan (JSON text): its pass normals and target force (slow: off the executor)."""
        from robot_grinding_sim.core.planning import plan_io

        try:
            passes, target = plan_normals(plan_io.parse_plan(text, "grinding/plan"), self.fc.params,  # type: ignore[union-attr]
                                          "grinding/plan")
        except Exception as exc:  # the node stays up; the previous plan (if any) stays
            self.plan_note = f"grinding/plan refused: {exc}"
            self.out.log("error", self.plan_note)
            return
        with self.lock:
            self.plan_note = f"plan: {self.fc.use_plan(passes, target)}"  # type: ignore[union-attr]
        self.out.log("info", f"force control: {self.plan_note}")

    def progress(self, pass_index: int) -> None:
        """The executive is on pass ``pass_index`` (-1: between passes)."""
        with self.lock:
            self.fc.progress(self.arm_now(), pass_index)  # type: ignore[union-attr]

    def stream(self) -> None:
        """One control period of force control: the corrected point, guarded, to the controller."""
        with self.lock:
            if self.refusal() is not None:
                return
            if self._f_count:
                self._f_mean, self._f_sum, self._f_count = self._f_sum / self._f_count, np.zeros(3), 0
            # on the arm's clock, as the commands are judged: the point is the reference due a horizon
            # after the arm's now, which it reaches from where it is (on this node's clock an arm lagging
            # real time was asked to jump the lag's worth of motion: 3.5 rad/s refused under load 11)
            now, q = self.arm_now(), self.q_now()
            point = self.fc.update(now, self._f_mean)  # type: ignore[union-attr]
            if point is None or q is None:
                return
            names = list(self.model.joint_names)
            ahead = point.time - now
            result = self.guard.check(names, [ahead], point.positions[None], point.velocities[None], q,
                                      qd_current=self.qd)
            if result.ok:
                self.out.stream_point(names, point.positions, point.velocities, ahead)
                self.streamed += 1
            else:
                self.stream_refused += 1
                self.last_refusal = "streamed point: " + "; ".join(result.reasons)
        st = point.state
        self.out.admittance([now, float(point.pass_index), point.force, point.target, st.x, st.v, float(st.active),
                             float(st.limited)])
        if not result.ok and self.monotonic() - self._stream_logged > STREAM_LOG_PERIOD:
            self._stream_logged = self.monotonic()
            self.out.log("warning", f"corrected point refused, not sent ({self.stream_refused} so far): "
                                    f"{self.last_refusal}")

    # -- F/T side ------------------------------------------------------------------------------
    def readings(self, readings: FTReadings, now: float) -> FloatArray | None:
        """One read's raw readings (k, 6) in the sensor frame, oldest first, seen at ``now``
        (monotonic s): every one is filtered and judged (the decisions use the newest). Returns the
        compensated, filtered wrenches (k, 6) in the sensor frame, or None before any joint state
        (no orientation to compensate: the sensor speaks, its value is not judged)."""
        processed = None
        with self.lock:
            self._raw.extend(zip(readings.sample_times.tolist(), readings.wrenches, strict=True))
            self.ft_age_max = max(self.ft_age_max, now - readings.newest_time)
            if self.R_WS is None:
                self.safety.ft_alive(readings.newest_time)
            else:
                processed = self.proc.process_many(readings.wrenches, self.R_WS)
                self._f_sum += self.R_WS @ processed[:, :3].sum(axis=0)  # the force is the same at the tcp
                self._f_count += len(readings)
                self._tripped(self.safety.wrenches(readings.sample_times, processed, now))
        return processed

    def to_tcp(self, wrench_S: FloatArray) -> FloatArray:
        """(6,) a compensated reading in the sensor frame as the contact wrench on the tool at the tcp,
        in the tcp frame (the graph's ``/contact/wrench``), at the last joint state (a sensor that
        carries a held part reads the opposite, on the part, at the tool centre's pose of then)."""
        with self.lock:
            return self.proc.to_tcp(wrench_S, self.X_S_tcp)

    def check(self) -> None:
        """The timeouts now (F/T data's age, joint states' silence); a trip holds at once."""
        with self.lock:
            self._tripped(self.safety.check(self.monotonic()))

    # -- requests ------------------------------------------------------------------------------
    def emergency_stop(self, on: bool) -> tuple[bool, str]:
        """``~/emergency_stop``: true latches a stop (holding again if asked again); false releases nothing."""
        with self.lock:
            if on:
                trips = self.safety.emergency_stop(self.monotonic())
                self._tripped(trips)
                if not trips:
                    self._hold()  # asked again: hold again
                return True, "stopped: holding; commands refused until ~/reset"
            if self.safety.latched:
                return False, "still stopped: a stop is released only by ~/reset"
            return True, "not stopped"

    def reset(self) -> tuple[bool, str]:
        """``~/reset``: clear the latch unless a cause persists."""
        with self.lock:
            ok, message = self.safety.reset(self.monotonic())
            self.out.diagnostics()
        return ok, message

    def tare(self) -> tuple[bool, str]:
        """``~/tare``: the mean of the readings of the last :data:`TARE_WINDOW` s minus the tool's
        weight becomes the bias (with nothing touching the tool)."""
        now = self.monotonic()
        with self.lock:
            recent = [w for t, w in self._raw if now - t <= TARE_WINDOW]
            if not recent or self.R_WS is None:
                return False, ("no F/T reading in the last " f"{TARE_WINDOW:g} s" if not recent
                               else "no joint state yet: the tool's weight needs the orientation")
            bias = self.proc.tare(np.array(recent), self.R_WS)
            return True, f"tared on {len(recent)} readings: bias {np.round(bias, 4).tolist()}"

    def status(self) -> tuple[str, str, dict[str, str]]:
        """(level ``"ok"``/``"warn"``/``"error"``, message, key/values) for the diagnostics."""
        with self.lock:
            s = self.safety
            if s.latched:
                level, state = "error", "stopped"
                message = "stopped: " + "; ".join(str(c) for c in s.causes.values()) + " (~/reset)"
            elif not self.active:
                level, state, message = "warn", "inactive", NOT_ACTIVE
            elif s.waiting():
                level, state = "warn", "waiting"
                message = f"waiting for {' and '.join(s.waiting())}; commands refused"
            else:
                level, state, message = "ok", "ok", "forwarding commands"
            age = s.ft_age(self.monotonic())
            values = {
                "state": state, "causes": ", ".join(s.causes),
                "commands_forwarded": str(self.forwarded), "commands_refused": str(self.refused),
                "last_refusal": self.last_refusal, "force_n": f"{s.last_force:.4g}",
                "torque_nm": f"{s.last_torque:.4g}",
                "ft_age_s": "" if age is None else f"{age:.6f}",
                "ft_age_max_s": f"{self.ft_age_max:.6f}", "ft_timeout_s": f"{s.limits.ft_timeout:g}",
                "stops": str(s.trips),
                "hold_after_s": "" if self.hold_after is None else f"{self.hold_after:.6f}",
                "force_control": "on" if self.fc is not None else "off",
            }
            if self.fc is not None:
                a = self.fc.admittance
                values.update(force_control_plan=self.plan_note, correction_m=f"{a.x:.4g}",
                              max_correction_seen_m=f"{self.fc.max_correction_seen:.4g}",
                              points_streamed=str(self.streamed), points_refused=str(self.stream_refused))
        return level, message, values


def supervisor_from_parameters(p: Mapping[str, Any], cell: Any, model: Any, outputs: DriverOutputs, *,
                               monotonic: Callable[[], float], ros_now: Callable[[], float],
                               node_name: str | None = None) -> DriverSupervisor:
    """The supervisor of the driver's parameters ``p`` (schemas: hardware_driver) and ``cell``
    (core.config of the same values); a bad value raises ParameterError naming its parameter."""
    try:
        guard = CommandGuard(model, GuardParams(
            position_margin=p["position_margin"], velocity_factor=p["velocity_factor"],
            max_tcp_speed=cell.process.max_tcp_speed, workspace_min=p["workspace_min"],
            workspace_max=p["workspace_max"], tcp_link=cell.tool.tcp_link, start_tolerance=p["start_tolerance"],
            tracking_tolerance=p["tracking_tolerance"]))
    except InputError as exc:
        name = "workspace_max" if "workspace" in str(exc) else "position_margin"
        raise ParameterError(name, str(exc), node_name) from None
    try:
        proc = FTProcessor(ft_sensor_model(cell, model).params, sample_rate_hz=p["ft_rate"])
    except InputError as exc:
        raise ParameterError("ft_sensor.cutoff_hz" if "cutoff" in str(exc) else "ft_sensor.tool_mass", str(exc),
                             node_name) from None
    safety = SafetyMonitor(SafetyLimits(p["max_force"], p["max_torque"], p["ft_timeout"], p["joint_states_timeout"]))
    fc = None
    if p["force_control"] and getattr(model, "holder_link", None) is not None:
        raise ParameterError("force_control", "the normal force control does not run yet with a part the robot "
                             "holds (workpiece.link): set force_control false", node_name)
    if p["force_control"]:
        try:
            fc = NormalForceControl(model, cell.admittance)
        except InputError as exc:
            raise ParameterError("admittance.damping" if "damping" in str(exc) else "admittance.max_speed",
                                 str(exc), node_name) from None
    return DriverSupervisor(model, guard, proc, safety, fc, ft_frame=cell.ft_sensor.frame, ft_rate=p["ft_rate"],
                            outputs=outputs, monotonic=monotonic, ros_now=ros_now)
