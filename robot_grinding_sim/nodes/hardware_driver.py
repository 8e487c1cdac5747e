"""hardware_driver: the real arm and F/T sensor behind the ros2_control topics, with safety checks.

A thin adapter over :class:`~robot_grinding_sim.core.robot.command_guard.CommandGuard` (limits of a
command), :class:`~robot_grinding_sim.core.robot.safety.SafetyMonitor` (the latching stop),
:class:`~robot_grinding_sim.core.contact.ft_processing.FTProcessor` (bias, tool weight, low-pass,
move to the tcp) and :class:`~robot_grinding_sim.hardware.netft.NetFTClient` (ATI Net F/T RDT).

Robot side (standard ros2_control topics; the robot's own driver runs the controller):
- subscribes ``joint_trajectory_controller/joint_trajectory`` (relative, remappable; what the
  executive publishes) and forwards each trajectory as it is to ``output_topic`` (default
  ``/scaled_joint_trajectory_controller/joint_trajectory``, a UR) once CommandGuard accepts it
  against the measured position and velocity, as the controller will execute it from its
  ``header.stamp`` (a stamp in the past starts it part-way: a step to the point due now, refused
  beyond ``start_tolerance``; one that ended before now is refused; core/robot/command_guard.py)
  (joint limits with ``position_margin``, ``velocity_factor`` of the velocity limits, also at the
  peak of the interpolated motion, the cell's ``process.max_tcp_speed`` (the planner's and the
  executive's limit too), the TCP box, ``start_tolerance``). A refused trajectory is
  logged with its reasons, counted and named on /diagnostics, and not forwarded. A trajectory
  without points (a controller's "stop here") is forwarded unless stopped.
- subscribes ``joint_states`` (sensor_msgs/JointState, the robot driver's ``/joint_states``).

F/T side (``ft_backend``):
- ``netft``: a reader thread streams RDT records from ``ft_sensor_ip`` (an IPv4 address, checked at
  start-up) : ``ft_port`` with ``counts_per_force`` / ``counts_per_torque``; lost, out-of-order and
  corrupt (wrong-size) records are counted by the client and skipped; records whose status word
  has bit 31 set (the sensor reports an error) are counted and not used. Each read takes every
  record queued (hardware/netft.py): the driver acts on the newest, dated by its rdt_sequence at
  ``ft_rate`` (the sensor's RDT output rate; hardware/ft_stream.py says what the age measures); every
  reading of the read goes through the filter and the force limits and is published, stamped with
  its sample time.
- ``topic``: ``ft_topic`` (geometry_msgs/WrenchStamped, raw readings in ``ft_sensor.frame``), dated
  by ``header.stamp`` (0: on arrival).
Every reading is dated by when the sensor took it, not when the driver got it: the F/T stop fires
when the newest reading is older than ``ft_timeout`` (a silent sensor, or a backlog of old data), a
trip's latency (``hold_after_s``) counts from the offending reading's sample time, and
/diagnostics says how old the data is (``ft_age_s``; ``ft_age_max_s``, the oldest newest reading
acted on).
Each reading is processed with the tool's weight at the sensor's orientation (forward kinematics of
the newest joint state; ``ft_sensor.tool_mass`` / ``tool_com``, or the URDF's inertials below the
sensor when the mass is negative; gravity ``sim.gravity``), ``ft_sensor.bias`` until ``~/tare``, and
``ft_sensor.cutoff_hz`` (first-order low-pass at ``ft_rate``). Publishes:
- ``ft_sensor/wrench`` (WrenchStamped, frame ``ft_sensor.frame``, torque about its origin, as the
  simulated sensor in contact_solver_node): the compensated, filtered wrench;
- ``~/wrench_raw`` (same frame): the reading as received;
- ``~/wrench_tcp`` (frame ``tool.tcp_link``): the compensated wrench moved to the tcp.
Readings that arrive before any joint state are published raw only (no orientation to compensate).

Safety (core/robot/safety.py): ``|F|`` over ``max_force`` or ``|T|`` over ``max_torque`` (the
compensated, filtered wrench, every reading of a read), the newest F/T reading older than
``ft_timeout`` (F/T stale), joint states silent for longer than ``joint_states_timeout`` (both
armed by their first message), or ``~/emergency_stop``
(std_srvs/SetBool, true) latch a stop: a hold (one point at the measured position, velocities 0,
time_from_start one period of ``control_rate``, stamp 0: now) goes to ``output_topic`` at once
(over-force: in the thread that read the sample; silence: the timeouts are checked at
``control_rate`` and, with netft, by the reader thread as it waits), and every command is refused
until ``~/reset`` (std_srvs/Trigger), which fails with the reason while a cause persists (a wrench
still over a limit, F/T data still stale, joint states still silent). SetBool false does not
release a latched stop. Until
the first joint state and F/T reading commands are refused ("waiting").

Force control (``force_control`` true; ``admittance.*``, core/execution/force_control.py,
docs/hardware.md): an accepted trajectory is not forwarded but followed by the driver as the
controller would (from its stamp, replacing the one in force); every control period the driver
samples it ``admittance.horizon`` ahead, corrects the TCP along the surface normal by the admittance
``M_a x'' + D_a x' = F_n - F_target`` (``F_n``: the compensated force's component along the normal,
the mean of the readings since the last period; the normal: the plan's pass path point nearest the
reference's TCP; the target: the plan's), checks the point with the guard (a refused point is not
sent, counted and logged) and streams it to ``output_topic`` as a one-point trajectory (stamp 0,
``time_from_start`` the horizon). The plan is the latched ``grinding/plan`` (planner_node publishes
the plan the executive runs, its plan_file's with ``--plan-file``); ``grinding/progress`` says when
the job is on a pass. Without a plan the trajectory is streamed uncorrected. A stop clears what is
followed. ``~/admittance`` (std_msgs/Float64MultiArray ``[stamp_s, pass_index, normal_force_n,
target_n, correction_m, correction_rate_m_s, active, limited]``) each streamed period.

``~/tare`` (std_srvs/Trigger): with nothing touching the tool, the mean of the readings of the last
0.1 s minus the tool's weight becomes the bias.

``diagnostics`` (diagnostic_msgs/DiagnosticArray, ``/diagnostics``): state (ok / waiting / stopped
with the causes), the F/T client's counters (received, lost, out_of_order, bad_packets, superseded:
taken behind a newer one in the same read; status_errors), the F/T data's age (``ft_age_s`` now,
``ft_age_max_s`` the largest age of a newest reading when it was taken), commands forwarded and
refused with the last refusal's reasons, the newest |F| and |T|, and ``hold_after_s`` (from the
cause of the last stop, e.g. the offending reading's sample time, to its hold's publication), at
``diagnostics_rate`` and on every stop, reset and refusal.

Exit: SIGINT/SIGTERM at any moment exit 0 (run_node); ``close()`` stops the reader thread, then
stops the Net F/T's stream and closes the socket.
"""

from __future__ import annotations

import collections
import ipaddress
import sys
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.core.config import config_from_mapping
from robot_grinding_sim.core.contact.ft_processing import FTProcessor
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.execution.force_control import NormalForceControl, plan_normals
from robot_grinding_sim.core.robot.command_guard import CommandGuard, GuardParams
from robot_grinding_sim.core.robot.safety import SafetyLimits, SafetyMonitor, Trip
from robot_grinding_sim.core.sim.ft import ft_sensor_model
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import node_base, wire
from robot_grinding_sim.ros.node_base import guarded, load_robot, run_node
from robot_grinding_sim.ros.parameters import ParameterError, declare_parameters
from robot_grinding_sim.ros.schemas import node_specs

NODE_NAME = "hardware_driver"
#: readings averaged by ~/tare, s
TARE_WINDOW = 0.1
#: Net F/T status word: bit 31 set means the sensor reports an error
STATUS_ERROR = 1 << 31
#: at most one log line per this many seconds about refused streamed points
STREAM_LOG_PERIOD = 1.0
#: the interpreter's thread switch interval in the driver's process, s (Python's default: 5 ms)
SWITCH_INTERVAL = 5e-4


def _ipv4(value: str, name: str) -> str:
    """``value`` as an IPv4 address; ParameterError naming ``name`` otherwise (no name lookup)."""
    if not value.strip():
        raise ParameterError(name, "empty: set the Net F/T's address (or ft_backend: topic)", NODE_NAME)
    try:
        ip = ipaddress.ip_address(value.strip())
    except ValueError:
        raise ParameterError(name, f"{value!r} is not an IP address", NODE_NAME) from None
    if ip.version != 4:
        raise ParameterError(name, f"{value!r}: the Net F/T speaks IPv4 only", NODE_NAME)
    if ip.is_multicast or ip.is_unspecified or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ParameterError(name, f"{value!r} is not the address of one device", NODE_NAME)
    return str(ip)


#: how far the measured position is carried along its velocity to judge a command (s): a few control
#: periods of waiting for this node's thread, not a silent arm
MAX_CARRY_S = 0.05

class HardwareDriver(Node):
    """The driver (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_parameters(self, node_specs(NODE_NAME))
        self.p = p
        # the F/T reader thread, woken by a datagram, waits for the interpreter lock while the
        # executor's thread runs Python: at most this long (default 5 ms: 2.5 control periods)
        sys.setswitchinterval(SWITCH_INTERVAL)
        cell = config_from_mapping(p, allow_unknown=True)
        self.model = load_robot(p, NODE_NAME, tip_link=cell.tool.tcp_link, links=("tool.tcp_link", "ft_sensor.frame"))
        m = self.model
        self.base_frame = p["base_frame"] or m.root_link
        self.ft_frame, self.tcp_frame = cell.ft_sensor.frame, cell.tool.tcp_link
        if not p["robot_ip"].strip():
            raise ParameterError("robot_ip", "empty (the robot controller's address)", NODE_NAME)
        self.period = 1.0 / p["control_rate"]
        try:
            self.guard = CommandGuard(m, GuardParams(
                position_margin=p["position_margin"], velocity_factor=p["velocity_factor"],
                max_tcp_speed=cell.process.max_tcp_speed, workspace_min=p["workspace_min"],
                workspace_max=p["workspace_max"],
                tcp_link=self.tcp_frame, start_tolerance=p["start_tolerance"],
                tracking_tolerance=p["tracking_tolerance"]))
        except InputError as exc:
            name = "workspace_max" if "workspace" in str(exc) else "position_margin"
            raise ParameterError(name, str(exc), NODE_NAME) from None
        try:
            sensor = ft_sensor_model(cell, m).params
            self.proc = FTProcessor(sensor, sample_rate_hz=p["ft_rate"])
        except InputError as exc:
            raise ParameterError("ft_sensor.cutoff_hz" if "cutoff" in str(exc) else "ft_sensor.tool_mass", str(exc),
                                 NODE_NAME) from None
        self.safety = SafetyMonitor(SafetyLimits(p["max_force"], p["max_torque"], p["ft_timeout"],
                                                 p["joint_states_timeout"]))
        self.backend = p["ft_backend"]
        ft_ip = _ipv4(p["ft_sensor_ip"], "ft_sensor_ip") if self.backend == "netft" else ""

        # shared with the reader thread: the lock orders stops, holds and forwarded commands
        self._lock = threading.RLock()
        self._q: np.ndarray | None = None
        self._qd = np.zeros(self.model.nq)  # measured joint velocities, rad/s (0 if not published)
        self._q_at = 0.0  # when the last joint state arrived, monotonic s
        self._R_WS: np.ndarray | None = None
        self._raw: collections.deque[tuple[float, np.ndarray]] = collections.deque(
            maxlen=max(1, int(TARE_WINDOW * p["ft_rate"]) + 1))
        self.forwarded = self.refused = self.status_errors = self.topic_received = 0
        self.ft_age_max = 0.0  # the largest age of a read's newest reading when it was taken, s
        self._rate_warned = False
        self.last_refusal = ""
        self.hold_after: float | None = None
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self.client: Any = None
        self.fc: NormalForceControl | None = None
        if p["force_control"]:
            try:
                self.fc = NormalForceControl(m, cell.admittance)
            except InputError as exc:
                raise ParameterError("admittance.damping" if "damping" in str(exc) else "admittance.max_speed",
                                     str(exc), NODE_NAME) from None
        self._f_sum, self._f_count, self._f_mean = np.zeros(3), 0, None  # contact force in the base frame, N
        self.streamed = self.stream_refused = 0
        self._stream_logged = -np.inf
        self.plan_note = "no plan yet (grinding/plan): streaming uncorrected"

        self.pub_out = self.create_publisher(JointTrajectory, p["output_topic"], 10)
        # the F/T outputs (up to ft_rate each) and the joint states (500 Hz on a UR) as CDR bytes
        # (ros/wire.py): the reader thread and the executor share one interpreter lock
        self.pub_wrench = self.create_publisher(WrenchStamped, "ft_sensor/wrench", 100)
        self.pub_raw = self.create_publisher(WrenchStamped, "~/wrench_raw", 100)
        self.pub_tcp = self.create_publisher(WrenchStamped, "~/wrench_tcp", 100)
        self._w_sensor = wire.wrench_stamped_bytes(self.ft_frame)
        self._w_tcp = wire.wrench_stamped_bytes(self.tcp_frame)
        self.js_reader = wire.JointStateReader(self.model.joint_names, "joint_states")
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", 10)
        self.create_subscription(JointState, "joint_states", guarded(self, "joint_states")(self._on_joints), 50,
                                 raw=True)
        self.create_subscription(JointTrajectory, "joint_trajectory_controller/joint_trajectory",
                                 guarded(self, "joint_trajectory_controller/joint_trajectory")(self._on_command), 10)
        self.create_service(Trigger, "~/tare", self._service("tare", self._on_tare))
        self.create_service(Trigger, "~/reset", self._service("reset", self._on_reset))
        self.create_service(SetBool, "~/emergency_stop", self._service("emergency_stop", self._on_estop))
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.period, guarded(self, "supervision")(self._supervise), clock=steady)
        self.create_timer(1.0 / p["diagnostics_rate"], guarded(self, "diagnostics")(self._diagnostics), clock=steady)
        if self.fc is not None:
            # the plan reader imports OpenCascade (seconds): at start-up, not while the arm runs
            import robot_grinding_sim.core.planning.planner  # noqa: F401

            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.create_subscription(String, "grinding/plan", guarded(self, "grinding/plan")(self._on_plan), latched)
            self.create_subscription(Float64MultiArray, "grinding/progress",
                                     guarded(self, "grinding/progress")(self._on_progress), 50)
            self.pub_adm = self.create_publisher(Float64MultiArray, "~/admittance", 100)
            self.create_timer(self.period, guarded(self, "force control")(self._stream), clock=steady)

        if self.backend == "netft":
            from robot_grinding_sim.hardware.netft import NetFTClient

            try:
                self.client = NetFTClient(ft_ip, p["ft_port"], p["counts_per_force"], p["counts_per_torque"],
                                          timeout=min(0.05, self.period), rate_hz=p["ft_rate"])
                self.client.start()
            except (InputError, OSError) as exc:
                if self.client is not None:
                    self.client.close()
                raise ParameterError("ft_sensor_ip", f"{ft_ip}:{p['ft_port']}: {exc}", NODE_NAME) from None
            self._reader = threading.Thread(target=self._read_netft, name="netft-reader", daemon=True)
            self._reader.start()
            source = f"Net F/T at {ft_ip}:{p['ft_port']}"
        else:
            self.create_subscription(WrenchStamped, p["ft_topic"], guarded(self, "ft_topic")(self._on_ft_topic), 100)
            source = f"topic {self.resolve_topic_name(p['ft_topic'])}"
        par = self.proc.params
        self.get_logger().info(
            f"ready: commands from {self.resolve_topic_name('joint_trajectory_controller/joint_trajectory')} -> "
            f"{self.pub_out.topic_name} after the guard; F/T from {source} in '{self.ft_frame}' (tool "
            f"{par.tool_mass:.3f} kg at {np.round(par.tool_com, 4).tolist()} m); stops on |F| > {p['max_force']:g} N, "
            f"|T| > {p['max_torque']:g} N m, F/T data older than {p['ft_timeout']:g} s, joint states silent > "
            f"{p['joint_states_timeout']:g} s, ~/emergency_stop; control rate {p['control_rate']:g} Hz; robot "
            f"{p['robot_ip']}" + ("" if self.fc is None else
                                 f"; FORCE CONTROL along the normal (admittance M {cell.admittance.mass:g} kg, "
                                 f"D {cell.admittance.damping:g} N s/m, |x| <= {cell.admittance.max_correction:g} m, "
                                 f"|x'| <= {cell.admittance.max_speed:g} m/s, horizon {cell.admittance.horizon:g} s): "
                                 "trajectories are followed and streamed corrected"))

    # -- time ----------------------------------------------------------------------------------
    @staticmethod
    def _mono() -> float:
        return time.monotonic()

    def _now(self) -> float:
        """ROS time, s (the clock that stamps the executive's commands)."""
        return self.get_clock().now().nanoseconds * 1e-9

    def _stopping(self) -> bool:
        return self._stop.is_set() or node_base.stop_requested()

    # -- robot side ----------------------------------------------------------------------------
    def _on_joints(self, data: bytes) -> None:
        _, q, qd = self.js_reader.read(data, need_velocity=True)
        qd = np.zeros_like(q) if qd is None else qd
        R = self.model.fk(q, self.ft_frame)[:3, :3]
        with self._lock:
            self._q, self._qd, self._R_WS = q, qd, R
            self._q_at = self._mono()
            self.safety.joint_state(self._q_at)

    def _q_now(self) -> np.ndarray | None:
        """The measured position carried to now along the measured velocity (call under the lock).

        The guard judges a command from where the arm is when the controller starts it; the last
        joint state is older than that by the time it waited for this thread (a busy machine: a few
        control periods), which at a link's full speed is enough to read a planned move as faster than
        the limit. Carried at most :data:`MAX_CARRY_S` (older data is the safety monitor's business).
        """
        if self._q is None:
            return None
        age = min(max(self._mono() - self._q_at, 0.0), MAX_CARRY_S)
        return self._q + self._qd * age

    def _hold(self) -> None:
        """One point at the measured position, reached in one control period (call under the lock)."""
        if self._q is None:
            self.get_logger().error("no joint state yet: no position to hold")
            return
        msg = JointTrajectory(joint_names=list(self.model.joint_names))
        msg.header.frame_id = self.base_frame
        msg.header.stamp = cv.sec_to_time(self._now())  # when the hold was given (the controller starts it now)
        msg.points.append(JointTrajectoryPoint(positions=self._q.tolist(), velocities=[0.0] * len(self._q),
                                               time_from_start=cv.sec_to_duration(self.period)))
        self.pub_out.publish(msg)

    def _tripped(self, trips: list[Trip]) -> None:
        """New stops: hold at once, then say so (call under the lock)."""
        if not trips:
            return
        self._hold()
        if self.fc is not None:
            self.fc.stop()
        self.hold_after = self._mono() - min(t.since for t in trips)
        for t in trips:
            self.get_logger().error(f"STOP ({t}): holding at the measured position; commands refused until ~/reset")
        self._diagnostics()

    def _refuse(self, reasons: list[str]) -> None:
        self.refused += 1
        self.last_refusal = "; ".join(reasons)
        self.get_logger().warning(f"command refused, not forwarded: {self.last_refusal}")
        self._diagnostics()

    def _on_command(self, msg: JointTrajectory) -> None:
        with self._lock:
            why, q, qd = self.safety.refusal(), self._q_now(), self._qd
        if why is not None:
            self._refuse([why])
            return
        if msg.points:
            try:
                names, times, pos, vel, _ = cv.joint_trajectory_to_arrays(msg)
                # as the controller executes it: a stamp in the past starts it part-way (a step)
                stamp = cv.time_to_sec(msg.header.stamp)
                late = max(0.0, self._now() - stamp) if stamp > 0.0 else 0.0
                result = self.guard.check(names, times, pos, vel, q, late=late, qd_current=qd)
            except InputError as exc:
                self._refuse([str(exc)])
                return
            if not result.ok:
                self._refuse(result.reasons)
                return
        followed = self.fc is not None and bool(msg.points)
        with self._lock:  # a stop since the check wins: its hold is out already
            why = self.safety.refusal()
            if why is None and followed:
                try:
                    self.fc.command(self._now(), cv.time_to_sec(msg.header.stamp), names, times, pos, vel)
                except InputError as exc:
                    why = str(exc)
            elif why is None:
                if self.fc is not None:
                    self.fc.stop()  # the controller stops where its reference is: nothing to follow
                self.pub_out.publish(msg)
            if why is None:
                self.forwarded += 1
        if why is not None:
            self._refuse([why])
            return
        self.get_logger().info(("following (force control): " if followed else "forwarded: ")
                               + f"{len(msg.points)} points"
                               + (f", {cv.time_to_sec(msg.points[-1].time_from_start):.2f} s" if msg.points else
                                  " (stop)"))

    # -- force control -------------------------------------------------------------------------
    def _on_plan(self, msg: String) -> None:
        # parsed off the executor: a big plan takes longer than the joint states' timeout
        threading.Thread(target=self._take_plan, args=(msg.data,), name="plan-parser", daemon=True).start()

    def _take_plan(self, text: str) -> None:
        from robot_grinding_sim.core.planning import plan_io

        try:
            passes, target = plan_normals(plan_io.parse_plan(text, "grinding/plan"), self.fc.params, "grinding/plan")
        except Exception as exc:  # the node stays up; the previous plan (if any) stays
            self.plan_note = f"grinding/plan refused: {exc}"
            self.get_logger().error(self.plan_note)
            return
        with self._lock:
            self.plan_note = f"plan: {self.fc.use_plan(passes, target)}"
        self.get_logger().info(f"force control: {self.plan_note}")

    def _on_progress(self, msg: Float64MultiArray) -> None:
        if len(msg.data) < 1:
            raise InputError("grinding/progress: empty (expected [pass_index, arc_length_m, stamp_s])")
        with self._lock:
            self.fc.progress(self._now(), int(msg.data[0]))

    def _stream(self) -> None:
        """One control period of force control: the corrected point, guarded, to the controller."""
        with self._lock:
            if self.safety.refusal() is not None:
                return
            if self._f_count:
                self._f_mean, self._f_sum, self._f_count = self._f_sum / self._f_count, np.zeros(3), 0
            now, q = self._now(), self._q_now()
            point = self.fc.update(now, self._f_mean)
            if point is None or q is None:
                return
            names = list(self.model.joint_names)
            ahead = point.time - now
            result = self.guard.check(names, [ahead], point.positions[None], point.velocities[None], q,
                                      qd_current=self._qd)
            if result.ok:
                msg = JointTrajectory(joint_names=names)
                msg.header.frame_id = self.base_frame
                msg.points.append(JointTrajectoryPoint(positions=point.positions.tolist(),
                                                       velocities=point.velocities.tolist(),
                                                       time_from_start=cv.sec_to_duration(ahead)))
                self.pub_out.publish(msg)
                self.streamed += 1
            else:
                self.stream_refused += 1
                self.last_refusal = "streamed point: " + "; ".join(result.reasons)
        st = point.state
        self.pub_adm.publish(Float64MultiArray(data=[now, float(point.pass_index), point.force, point.target, st.x,
                                                     st.v, float(st.active), float(st.limited)]))
        if not result.ok and time.monotonic() - self._stream_logged > STREAM_LOG_PERIOD:
            self._stream_logged = time.monotonic()
            self.get_logger().warning(f"corrected point refused, not sent ({self.stream_refused} so far): "
                                      f"{self.last_refusal}")

    # -- F/T side ------------------------------------------------------------------------------
    def _on_readings(self, readings: FTReadings) -> None:
        """One read's raw readings (k, 6) in the sensor frame, oldest first, dated by their sample
        times (monotonic): every one is filtered, judged and published, each stamped with its own
        sample time (a log keeps every reading the sensor sent; the decisions use the newest)."""
        now = self._mono()
        wall = self._now() - now  # monotonic -> wall clock
        stamps = [wire.stamp_ns(wall + min(t, now)) for t in readings.sample_times.tolist()]  # their sample times
        processed = None
        with self._lock:
            self._raw.extend(zip(readings.sample_times.tolist(), readings.wrenches, strict=True))
            self.ft_age_max = max(self.ft_age_max, now - readings.newest_time)
            if self._R_WS is None:
                self.safety.ft_alive(readings.newest_time)
            else:
                processed = self.proc.process_many(readings.wrenches, self._R_WS)
                self._f_sum += self._R_WS @ processed[:, :3].sum(axis=0)  # the force is the same at the tcp
                self._f_count += len(readings)
                self._tripped(self.safety.wrenches(readings.sample_times, processed, now))
        for i, stamp in enumerate(stamps):
            self.pub_raw.publish(self._w_sensor.encode(stamp, readings.wrenches[i]))
            if processed is not None:
                self.pub_wrench.publish(self._w_sensor.encode(stamp, processed[i]))
                self.pub_tcp.publish(self._w_tcp.encode(stamp, self.proc.to_tcp(processed[i])))

    def _read_netft(self) -> None:
        client = self.client
        last_error = ""
        while not self._stopping():
            try:
                batch = client.read_batch()
            except TimeoutError:
                self._check()
                continue
            except (OSError, RuntimeError) as exc:  # the socket closed under us, or a network error
                if self._stopping():
                    return
                if str(exc) != last_error:
                    last_error = str(exc)
                    self.get_logger().error(f"Net F/T: {type(exc).__name__}: {exc}")
                self._check()
                time.sleep(self.period)
                continue
            healthy = (batch.status & STATUS_ERROR) == 0
            self.status_errors += int((~healthy).sum())
            readings = batch.select(healthy)
            if readings is not None:
                try:
                    self._on_readings(readings)
                except Exception as exc:  # keep reading; say what it was
                    if str(exc) != last_error:
                        last_error = str(exc)
                        self.get_logger().error(f"F/T reading: {type(exc).__name__}: {exc}")
            self._check()
            why = client.clock.rate_error
            if why is not None and not self._rate_warned:
                self._rate_warned = True
                self.get_logger().warning(f"Net F/T: {why}")

    def _on_ft_topic(self, msg: WrenchStamped) -> None:
        if msg.header.frame_id not in ("", self.ft_frame):
            raise InputError(f"frame_id '{msg.header.frame_id}', expected '{self.ft_frame}' (the sensor frame)")
        self.topic_received += 1
        mono, stamp = self._mono(), cv.time_to_sec(msg.header.stamp)
        # dated by its stamp (the driver's ROS clock; a stamp ahead counts as now), else on arrival
        sampled = mono - max(0.0, self._now() - stamp) if stamp > 0.0 else mono
        self._on_readings(FTReadings(cv.wrench_to_array(msg)[None], np.array([sampled]), mono,
                                     np.zeros(1, dtype=np.int64)))

    # -- supervision ---------------------------------------------------------------------------
    def _check(self) -> None:
        with self._lock:
            self._tripped(self.safety.check(self._mono()))

    def _supervise(self) -> None:
        self._check()

    def _service(self, name: str, fn: Any) -> Any:
        """A service callback that answers (success false, the error) instead of raising."""
        def handle(request: Any, response: Any) -> Any:
            try:
                return fn(request, response)
            except Exception as exc:  # keep the node alive; say what it was
                response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
                self.get_logger().error(f"~/{name}: {response.message}")
                return response
        return handle

    def _on_estop(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self._lock:
            if request.data:
                trips = self.safety.emergency_stop(self._mono())
                self._tripped(trips)
                if not trips:
                    self._hold()  # asked again: hold again
                response.success, response.message = True, "stopped: holding; commands refused until ~/reset"
            elif self.safety.latched:
                response.success = False
                response.message = "still stopped: a stop is released only by ~/reset"
            else:
                response.success, response.message = True, "not stopped"
        self.get_logger().warning(f"~/emergency_stop {request.data}: {response.message}")
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            ok, message = self.safety.reset(self._mono())
            self._diagnostics()
        response.success, response.message = ok, message
        if ok:
            self.get_logger().info(f"~/reset: {message}")
        else:
            self.get_logger().warning(f"~/reset: {message}")
        return response

    def _on_tare(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        now = self._mono()
        with self._lock:
            recent = [w for t, w in self._raw if now - t <= TARE_WINDOW]
            if not recent or self._R_WS is None:
                response.success = False
                response.message = ("no F/T reading in the last " f"{TARE_WINDOW:g} s" if not recent
                                    else "no joint state yet: the tool's weight needs the orientation")
            else:
                bias = self.proc.tare(np.array(recent), self._R_WS)
                response.success = True
                response.message = f"tared on {len(recent)} readings: bias {np.round(bias, 4).tolist()}"
        if response.success:
            self.get_logger().info(f"~/tare: {response.message}")
        else:
            self.get_logger().warning(f"~/tare: {response.message}")
        return response

    def _diagnostics(self) -> None:
        with self._lock:
            s = self.safety
            if s.latched:
                level, state = DiagnosticStatus.ERROR, "stopped"
                message = "stopped: " + "; ".join(str(c) for c in s.causes.values()) + " (~/reset)"
            elif s.waiting():
                level, state = DiagnosticStatus.WARN, "waiting"
                message = f"waiting for {' and '.join(s.waiting())}; commands refused"
            else:
                level, state, message = DiagnosticStatus.OK, "ok", "forwarding commands"
            values = {
                "state": state, "causes": ", ".join(s.causes), "ft_backend": self.backend,
                "robot_ip": self.p["robot_ip"], "output_topic": self.pub_out.topic_name,
                "commands_forwarded": str(self.forwarded), "commands_refused": str(self.refused),
                "last_refusal": self.last_refusal, "force_n": f"{s.last_force:.4g}",
                "torque_nm": f"{s.last_torque:.4g}",
                "ft_age_s": "" if s.last_ft is None else f"{s.ft_age(self._mono()):.6f}",
                "ft_age_max_s": f"{self.ft_age_max:.6f}", "ft_timeout_s": f"{s.limits.ft_timeout:g}",
                "stops": str(s.trips),
                "hold_after_s": "" if self.hold_after is None else f"{self.hold_after:.6f}",
                "control_period_s": f"{self.period:.6g}",
                "controller_subscribers": str(self.pub_out.get_subscription_count()),
                "force_control": "on" if self.fc is not None else "off",
            }
            if self.fc is not None:
                a = self.fc.admittance
                values.update(force_control_plan=self.plan_note, correction_m=f"{a.x:.4g}",
                              max_correction_seen_m=f"{self.fc.max_correction_seen:.4g}",
                              points_streamed=str(self.streamed), points_refused=str(self.stream_refused))
            c = self.client
            if c is not None:
                values.update(ft_sensor_ip=c.host, ft_received=str(c.received), ft_lost=str(c.lost),
                              ft_out_of_order=str(c.out_of_order), ft_bad_packets=str(c.bad_packets),
                              ft_superseded=str(c.superseded), ft_status_errors=str(self.status_errors),
                              ft_rate_measured_hz=f"{c.clock.measured_rate():.6g}",
                              ft_rate_error=c.clock.rate_error or "")
            else:
                values.update(ft_topic=self.p["ft_topic"], ft_received=str(self.topic_received))
            st = DiagnosticStatus(name=f"{self.get_name()}: safety", hardware_id=self.p["robot_ip"], level=level,
                                  message=message)
            st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
            msg = DiagnosticArray(status=[st])
            msg.header.stamp = self.get_clock().now().to_msg()
            self.pub_diag.publish(msg)

    # -- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the reader thread, then the Net F/T's stream, and close its socket."""
        self._stop.set()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        if self.client is not None:
            self.client.close()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim hardware_driver [--ros-args ...]``."""
    return run_node(HardwareDriver, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
