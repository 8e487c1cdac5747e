"""hardware_driver: the real arm and F/T sensor behind the ros2_control topics, with safety checks.

A lifecycle node and a thin adapter: the decisions are
:class:`~robot_grinding_sim.hardware.supervisor.DriverSupervisor`'s (CommandGuard: limits of a
command; SafetyMonitor: the latching stop; FTProcessor: bias, tool weight, low-pass, move to the
tcp; force control), the F/T sensor is a backend of :mod:`robot_grinding_sim.hardware.ft_backend`
(selected by ``ft_backend``; its reader, if it has one, is its own); this node converts messages,
calls them and publishes.

Lifecycle (rclpy.lifecycle, the ``~/change_state`` services; ``ros2 lifecycle set``):
- ``configure``: the parameters are checked and the robot (URDF, links) loaded, the F/T backend
  built and connected (Net F/T: the address checked, the socket opened); a bad parameter fails the
  transition with one error line naming it (the node stays unconfigured);
- ``activate``: the F/T stream starts and commands are forwarded and supervised;
- ``deactivate``: commands are refused ("not active"), what force control followed is dropped, the arm
  holds at the measured position, and the F/T stream stops;
- ``cleanup``: the sensor is disconnected; ``shutdown``: deactivate and cleanup.
``autostart`` (default true, as ros2_control's controller_manager brings hardware to active unless
told otherwise) configures and activates at start-up; a failed configure then ends the process with
code 1 and one FATAL line naming the parameter. With ``autostart`` false the node waits unconfigured
for a lifecycle manager (or ``ros2 lifecycle set /hardware_driver configure`` then ``activate``).
Joint states are taken in every configured state (a hold needs the measured position); the
timeouts are checked only while active.

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

F/T side (``ft_backend``, hardware/ft_backend.py's registry):
- ``netft`` (hardware/netft_backend.py): its reader thread streams RDT records from
  ``ft_sensor_ip`` (an IPv4 address, checked at configure) : ``ft_port`` with ``counts_per_force`` /
  ``counts_per_torque``; lost, out-of-order and corrupt (wrong-size) records are counted by the
  client and skipped; records whose status word
  has bit 31 set (the sensor reports an error) are counted and not used. Each read takes every
  record queued (hardware/netft.py): the driver acts on the newest, dated by its rdt_sequence at
  ``ft_rate`` (the sensor's RDT output rate; hardware/ft_stream.py says what the age measures); every
  reading of the read goes through the filter and the force limits and is published, stamped with
  its sample time.
- ``topic`` (ros/ft_topic.py): ``ft_topic`` (geometry_msgs/WrenchStamped), dated by ``header.stamp``
  (0: on arrival); presets of it: ``ur_builtin`` (a UR e-series arm's own sensor as the UR ROS 2
  driver publishes it, ``/force_torque_sensor_broadcaster/wrench`` in ``tool0``/``tool0_controller``)
  and ``ft_broadcaster`` (ros2_controllers' force_torque_sensor_broadcaster named ``ft_broadcaster``:
  ``/<ft_broadcaster>/wrench``). A topic's reading is in the frame its header names: moved into
  ``ft_sensor.frame`` through the arm's kinematics at the measured joint positions (a frame that is
  no link of the URDF, ``ft_frame_aliases`` aside, is refused with a warning naming it).
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
With a part the robot holds (``workpiece.link``, docs/cell.md) and the sensor between the flange
and the part, the weight compensated (and taken out by ``~/tare``) includes the part's
(``workpiece.mass``, or its solid at ``workpiece.density``), and ``~/wrench_tcp`` is the contact
wrench on the standing tool at its tcp (the opposite of what the sensor reads on the part, moved by
the arm's kinematics at the newest joint state), as the graph's ``/contact/wrench`` gives it;
``force_control`` is refused there.

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
with the causes / inactive / unconfigured; ``lifecycle_state``), the F/T backend's counters
(received, lost, out_of_order, bad_packets, superseded: taken behind a newer one in the same read;
status_errors), the F/T data's age (``ft_age_s`` now, ``ft_age_max_s`` the largest age of a newest
reading when it was taken), commands forwarded and
refused with the last refusal's reasons, the newest |F| and |T|, and ``hold_after_s`` (from the
cause of the last stop, e.g. the offending reading's sample time, to its hold's publication), at
``diagnostics_rate`` and on every stop, reset and refusal.

Exit: SIGINT/SIGTERM at any moment exit 0 (run_node); ``close()`` stops the backend (the Net F/T's
reader thread, then its stream) and disconnects it (its socket closed).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.ft_backend import FTBackend, FTContext, make_ft_backend
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.hardware.supervisor import DriverSupervisor, supervisor_from_parameters
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import node_base, wire
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.node_setup import declare_node_parameters, load_cell
from robot_grinding_sim.ros.parameters import ParameterError

NODE_NAME = "hardware_driver"
#: the interpreter's thread switch interval in the driver's process, s (Python's default: 5 ms)
SWITCH_INTERVAL = 5e-4
_LEVELS = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN, "error": DiagnosticStatus.ERROR}

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class HardwareDriver(LifecycleNode):
    """The driver (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_node_parameters(self, NODE_NAME)
        self.p = p
        # the F/T reader thread, woken by a datagram, waits for the interpreter lock while the
        # executor's thread runs Python: at most this long (default 5 ms: 2.5 control periods)
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.period = 1.0 / p["control_rate"]
        self.state = "unconfigured"
        self.core: DriverSupervisor | None = None
        self.backend: FTBackend | None = None
        self.base_frame = p["base_frame"]
        self.ft_frame, self.tcp_frame = p["ft_sensor.frame"], p["tool.tcp_link"]
        self.pub_out = self.create_publisher(JointTrajectory, p["output_topic"], 10)
        # the F/T outputs (up to ft_rate each) and the joint states (500 Hz on a UR) as CDR bytes
        # (ros/wire.py): the reader thread and the executor share one interpreter lock
        self.pub_wrench = self.create_publisher(WrenchStamped, "ft_sensor/wrench", wire.STREAM_DEPTH)
        self.pub_raw = self.create_publisher(WrenchStamped, "~/wrench_raw", wire.STREAM_DEPTH)
        self.pub_tcp = self.create_publisher(WrenchStamped, "~/wrench_tcp", wire.STREAM_DEPTH)
        self._w_sensor = wire.wrench_stamped_bytes(self.ft_frame)
        self._w_tcp = wire.wrench_stamped_bytes(self.tcp_frame)
        self.js_reader: wire.JointStateReader | None = None
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
        self.create_timer(1.0 / p["diagnostics_rate"], guarded(self, "diagnostics")(self.diagnostics), clock=steady)
        if p["force_control"]:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.create_subscription(String, "grinding/plan", guarded(self, "grinding/plan")(self._on_plan), latched)
            self.create_subscription(Float64MultiArray, "grinding/progress",
                                     guarded(self, "grinding/progress")(self._on_progress), 50)
            self.pub_adm = self.create_publisher(Float64MultiArray, "~/admittance", wire.STREAM_DEPTH)
            self.create_timer(self.period, guarded(self, "force control")(self._stream), clock=steady)
        self._activate_error: InputError | None = None
        if p["autostart"]:
            # a bad parameter ends the process (run_node: one FATAL line naming it, exit code 1)
            self._configure()
            self.trigger_configure()
            if self.trigger_activate() != SUCCESS and self._activate_error is not None:
                raise self._activate_error

    # -- lifecycle -----------------------------------------------------------------------------
    def _configure(self) -> None:
        """Check the parameters, load the robot, build the supervisor and connect the F/T backend
        (ParameterError naming the parameter; nothing is left half-built)."""
        if self.core is not None:
            return
        p = self.p
        loaded = load_cell(p, NODE_NAME, links=("tool.tcp_link", "ft_sensor.frame"))
        if not p["robot_ip"].strip():
            raise ParameterError("robot_ip", "empty (the robot controller's address)", NODE_NAME)
        core = supervisor_from_parameters(p, loaded.cell, loaded.model, self, monotonic=time.monotonic,
                                          ros_now=self._now, node_name=NODE_NAME)
        if core.fc is not None:
            # the plan reader imports OpenCascade (seconds): at start-up, not while the arm runs
            import robot_grinding_sim.core.planning.planner  # noqa: F401
        # a topic's wrench comes in its header's frame: moved into the sensor's by the arm's kinematics
        context = FTContext(self.period, log=self.log, stopping=node_base.stop_requested, node=self,
                            to_sensor_frame=core.to_sensor_frame)
        try:
            backend = self.backend or make_ft_backend(p["ft_backend"], p, context)
            backend.connect()
        except ParameterError as exc:
            raise ParameterError(exc.name, exc.problem, NODE_NAME) from None
        self.backend, self.model, self.base_frame = backend, loaded.model, loaded.base_frame
        self.js_reader = wire.JointStateReader(loaded.model.joint_names, "joint_states")
        self.admittance_params = loaded.cell.admittance
        self.core = core

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except InputError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return FAILURE
        self.state = "inactive"
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        core, backend = self.core, self.backend
        assert core is not None and backend is not None
        core.activate()
        try:
            backend.start(self._on_readings, core.check)
        except (InputError, OSError, RuntimeError) as exc:
            core.deactivate()
            backend.stop()
            self._activate_error = exc if isinstance(exc, ParameterError) else InputError(
                f"{backend.describe()}: {type(exc).__name__}: {exc}")
            self.get_logger().error(f"activate failed: {self._activate_error}")
            return FAILURE
        self.state = "active"
        self._ready()
        self.diagnostics()
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        self.get_logger().info("inactive: commands refused, holding at the measured position; F/T stream stopped")
        return SUCCESS

    def _deactivate(self) -> None:
        if self.core is not None:
            self.core.deactivate()
        if self.backend is not None:
            self.backend.stop()
        if self.state == "active":
            self.state = "inactive"
        self.diagnostics()

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup()
        self.get_logger().info("unconfigured: F/T sensor disconnected")
        return SUCCESS

    def _cleanup(self) -> None:
        if self.backend is not None:
            self.backend.close()
        self.core = None
        self.state = "unconfigured"

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        self._cleanup()
        self.state = "finalized"
        return SUCCESS

    def _ready(self) -> None:
        p, core = self.p, self.core
        par = core.proc.params
        a = self.admittance_params
        self.get_logger().info(
            f"ready: commands from {self.resolve_topic_name('joint_trajectory_controller/joint_trajectory')} -> "
            f"{self.pub_out.topic_name} after the guard; F/T from {self.backend.describe()} in '{self.ft_frame}' (tool "
            f"{par.tool_mass:.3f} kg at {np.round(par.tool_com, 4).tolist()} m); stops on |F| > {p['max_force']:g} N, "
            f"|T| > {p['max_torque']:g} N m, F/T data older than {p['ft_timeout']:g} s, joint states silent > "
            f"{p['joint_states_timeout']:g} s, ~/emergency_stop; control rate {p['control_rate']:g} Hz; robot "
            f"{p['robot_ip']}" + ("" if core.fc is None else
                                 f"; FORCE CONTROL along the normal (admittance M {a.mass:g} kg, "
                                 f"D {a.damping:g} N s/m, |x| <= {a.max_correction:g} m, "
                                 f"|x'| <= {a.max_speed:g} m/s, horizon {a.horizon:g} s): "
                                 "trajectories are followed and streamed corrected"))

    # -- what the supervisor publishes (DriverOutputs) -------------------------------------------
    def _now(self) -> float:
        """ROS time, s (the clock that stamps the executive's commands)."""
        return self.get_clock().now().nanoseconds * 1e-9

    def hold(self, q: np.ndarray) -> None:
        """One point at ``q``, reached in one control period (the supervisor holds its lock)."""
        msg = JointTrajectory(joint_names=list(self.model.joint_names))
        msg.header.frame_id = self.base_frame
        msg.header.stamp = cv.sec_to_time(self._now())  # when the hold was given (the controller starts it now)
        msg.points.append(JointTrajectoryPoint(positions=q.tolist(), velocities=[0.0] * len(q),
                                               time_from_start=cv.sec_to_duration(self.period)))
        self.pub_out.publish(msg)

    def stream_point(self, names: list[str], positions: np.ndarray, velocities: np.ndarray, ahead: float) -> None:
        msg = JointTrajectory(joint_names=names)
        msg.header.frame_id = self.base_frame
        msg.points.append(JointTrajectoryPoint(positions=positions.tolist(), velocities=velocities.tolist(),
                                               time_from_start=cv.sec_to_duration(ahead)))
        self.pub_out.publish(msg)

    def admittance(self, values: list[float]) -> None:
        self.pub_adm.publish(Float64MultiArray(data=values))

    def log(self, level: str, text: str) -> None:
        # one call site per severity: rclpy refuses a severity change at one call site
        if level == "info":
            self.get_logger().info(text)
        elif level == "warning":
            self.get_logger().warning(text)
        else:
            self.get_logger().error(text)

    # -- robot side ----------------------------------------------------------------------------
    def _on_joints(self, data: bytes) -> None:
        core, reader = self.core, self.js_reader
        if core is None or reader is None:
            return  # unconfigured: no robot to read them with
        ns, q, qd = reader.read(data, need_velocity=True)
        core.joint_state(q, qd, ns * 1e-9)

    def _on_command(self, msg: JointTrajectory) -> None:
        core = self.core
        if core is None:
            self.get_logger().warning("command refused, not forwarded: the driver is not configured")
            return

        def parse() -> tuple[list[str], Any, Any, Any, float]:
            names, times, pos, vel, _ = cv.joint_trajectory_to_arrays(msg)
            return names, times, pos, vel, cv.time_to_sec(msg.header.stamp)

        followed = core.fc is not None and bool(msg.points)
        if core.command(parse if msg.points else None, lambda: self.pub_out.publish(msg)):
            self.get_logger().info(("following (force control): " if followed else "forwarded: ")
                                   + f"{len(msg.points)} points"
                                   + (f", {cv.time_to_sec(msg.points[-1].time_from_start):.2f} s" if msg.points else
                                      " (stop)"))

    # -- force control -------------------------------------------------------------------------
    def _on_plan(self, msg: String) -> None:
        core = self.core
        if core is not None:
            # parsed off the executor: a big plan takes longer than the joint states' timeout
            threading.Thread(target=core.take_plan, args=(msg.data,), name="plan-parser", daemon=True).start()

    def _on_progress(self, msg: Float64MultiArray) -> None:
        if len(msg.data) < 1:
            raise InputError("grinding/progress: empty (expected [pass_index, arc_length_m, stamp_s])")
        if self.core is not None:
            self.core.progress(int(msg.data[0]))

    def _stream(self) -> None:
        if self.core is not None and self.core.active:
            self.core.stream()

    # -- F/T side ------------------------------------------------------------------------------
    def _on_readings(self, readings: FTReadings) -> None:
        """One read's raw readings (k, 6) in the sensor frame, oldest first, dated by their sample
        times (monotonic): judged by the supervisor and published, each stamped with its own sample
        time (a log keeps every reading the sensor sent; the decisions use the newest)."""
        core = self.core
        if core is None:
            return
        now = time.monotonic()
        wall = self._now() - now  # monotonic -> wall clock
        stamps = [wire.stamp_ns(wall + min(t, now)) for t in readings.sample_times.tolist()]  # their sample times
        processed = core.readings(readings, now)
        for i, stamp in enumerate(stamps):
            self.pub_raw.publish(self._w_sensor.encode(stamp, readings.wrenches[i]))
            if processed is not None:
                self.pub_wrench.publish(self._w_sensor.encode(stamp, processed[i]))
                self.pub_tcp.publish(self._w_tcp.encode(stamp, core.to_tcp(processed[i])))

    # -- supervision ---------------------------------------------------------------------------
    def _supervise(self) -> None:
        if self.core is not None and self.core.active:
            self.core.check()

    def _service(self, name: str, fn: Any) -> Any:
        """A service callback that answers (success false, the error) instead of raising; false
        with the reason while unconfigured."""
        def handle(request: Any, response: Any) -> Any:
            if self.core is None:
                response.success, response.message = False, "the driver is not configured"
                return response
            try:
                return fn(request, response)
            except Exception as exc:  # keep the node alive; say what it was
                response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
                self.get_logger().error(f"~/{name}: {response.message}")
                return response
        return handle

    def _on_estop(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.success, response.message = self.core.emergency_stop(request.data)
        self.get_logger().warning(f"~/emergency_stop {request.data}: {response.message}")
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.core.reset()
        self.log("info" if response.success else "warning", f"~/reset: {response.message}")
        return response

    def _on_tare(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.core.tare()
        self.log("info" if response.success else "warning", f"~/tare: {response.message}")
        return response

    def diagnostics(self) -> None:
        """Publish the driver's status on /diagnostics (at diagnostics_rate and on every event)."""
        core, backend = self.core, self.backend
        if core is None:
            level, message = "warn", f"{self.state}: configure and activate the driver (lifecycle)"
            values = {"state": self.state}
        else:
            level, message, values = core.status()
        values.update({"ft_backend": self.p["ft_backend"], "robot_ip": self.p["robot_ip"],
                       "output_topic": self.pub_out.topic_name, "control_period_s": f"{self.period:.6g}",
                       "controller_subscribers": str(self.pub_out.get_subscription_count()),
                       "lifecycle_state": self.state})
        if backend is not None:
            values.update(backend.diagnostics())
        st = DiagnosticStatus(name=f"{self.get_name()}: safety", hardware_id=self.p["robot_ip"], level=_LEVELS[level],
                              message=message)
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(msg)

    # -- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the F/T backend (its reader thread, then the sensor's stream) and disconnect it."""
        if self.backend is not None:
            self.backend.close()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim hardware_driver [--ros-args ...]``."""
    return run_node(HardwareDriver, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
