"""grinding_executive: runs a plan on whatever arm answers the ros2_control topics.

A thin adapter over :class:`robot_grinding_sim.core.execution.executive.JobExecution`. It knows nothing
of simulation or hardware: the same node drives dynamics_node (``grinding bringup sim``) and a real
arm's ``joint_trajectory_controller`` (through hardware_driver, or remapped straight to it).

The plan: ``plan_file`` (plan.json, read at start-up; a bad file stops the node naming it) or, when
that is empty, the planner's latched ``grinding/plan`` (std_msgs/String, plan.json's text; a newer
plan replaces the loaded one unless a job is running). The plan must carry its job trajectory
(``grinding plan`` with a robot writes it; planner_node always does).

Subscribes (relative names): ``joint_states`` (sensor_msgs/JointState; the arm's measured state,
supervised against the command), ``grinding/plan``.

Publishes:
- ``joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory; remap it to
  the arm's controller, e.g. ``scaled_joint_trajectory_controller/joint_trajectory`` on a UR):
  the job, stamped ``execution.command_lead`` ahead (a late start does not jump), positions and
  velocities at the plan's knots (the controller interpolates cubic Hermite); pauses, resumes and
  stops as further trajectories that replace it;
- ``grinding/progress`` (std_msgs/Float64MultiArray ``[pass_index, arc_length_m, stamp_s]``,
  docs/compare.md) at ``progress_rate`` Hz of ROS time while a job runs, each pass's end (its last
  arc length, stamped when the command reached it, also when the timer ticked late) and one ``-1``
  sample when it leaves a pass;
- ``grinding/progress_markers`` (visualization_msgs/MarkerArray, latched; for RViz and Foxglove,
  which cannot draw the array): the part of each pass ground so far (ns ``ground``, green
  LINE_STRIPs) and the job's state and position (ns ``status``, a TEXT_VIEW_FACING above the
  passes), at ``marker_rate`` Hz and on every change (core/record/progress_view.py);
- ``diagnostics`` (diagnostic_msgs/DiagnosticArray; ``/diagnostics`` in the root namespace): the
  job's state, pass, tracking error and whether joint states have arrived (``joint_states``:
  ``received`` or ``none yet``, a warning: ``~/start`` needs them), at ``diagnostics_rate`` and on
  every change;
- ``~/state`` (std_msgs/String, latched): ``idle``, ``ready``, ``running``, ``pausing``,
  ``paused``, ``stopping``, ``done``, ``stopped`` or ``failed: <reason>``.

Services (std_srvs/Trigger): ``~/start`` (from the plan's start; the arm is first moved to its
first knot if it is elsewhere), ``~/pause`` (the speed along the plan ramps to rest on the path),
``~/resume``, ``~/stop`` (ramps to rest and retreats along the surface normal if the tool is at
the part). A request that does not fit the state fails with the reason.

``autostart``: start as soon as a plan and a joint state are there and the controller subscribes
to the command topic (``~/start`` refuses to send into a topic nobody listens to), and the last
joint state was usable (see below). A tracking error above ``execution.tracking_error_limit``, the
tool off its path on the part by more than ``execution.path_tolerance`` x the plan's stepover, or
no usable joint state for ``execution.joint_states_timeout`` stop the job (``failed``) with a
retreat; a joint state is usable when stamped within ``execution.max_clock_skew`` of this node's
clock at receipt and after the last usable one (the diagnostics give ``joint_states_clock_offset_s``
and name a problem). ``done`` needs a joint state at or after the job's last knot with the tool
within the path tolerance of the plan's end, within ``execution.settle_time``; else the job fails
saying where the tool is (core/execution/executive.py). So does the arm's side refusing the commands or stopping
the arm: a node that subscribes to the command topic (hardware_driver in front of a real arm) and
says on ``/diagnostics`` (a status named ``<its node name>: ...``) that its ``commands_refused``
count grew since the last command was sent, or reports level ERROR (a safety stop), while a job
runs. The executive knows nothing of what that node is. Times are ROS time (sim time when
``use_sim_time``).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.core.errors import GrindingSimError, InputError
from robot_grinding_sim.core.execution.executive import JobExecution, JobState
from robot_grinding_sim.core.planning import commands as cmds
from robot_grinding_sim.core.planning import plan_io
from robot_grinding_sim.core.planning.start_move import start_check_for
from robot_grinding_sim.core.record import progress_view as pv
from robot_grinding_sim.core.record.progress_view import ProgressView, pass_traces, status_anchor
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import trajectory_wire, wire
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.node_setup import set_up_node
from robot_grinding_sim.ros.trajectory_wire import joint_trajectory_bytes, stamped

NODE_NAME = "grinding_executive"
LEVEL = {JobState.FAILED: DiagnosticStatus.ERROR, JobState.STOPPING: DiagnosticStatus.WARN,
         JobState.STOPPED: DiagnosticStatus.WARN, JobState.IDLE: DiagnosticStatus.WARN}


def _level(level: Any) -> int:
    """A DiagnosticStatus level as an int (rclpy gives bytes)."""
    return level if isinstance(level, int) else int.from_bytes(level, "little")


class GrindingExecutive(Node):
    """The executive (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        node = set_up_node(self, NODE_NAME)
        self.p = p = node.params
        self.cell, self.model, self.base_frame = node.cell, node.model, node.base_frame
        self.job: JobExecution | None = None
        self.plan_source = ""
        self._q: np.ndarray | None = None
        self._last_pass = -1
        self._ticked_at: float | None = None  # ROS time of the last progress tick, s
        self._published_state = ""
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_cmd = self.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
        self.pub_progress = self.create_publisher(Float64MultiArray, "grinding/progress", wire.STREAM_DEPTH)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", 10)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.plan_error = ""
        self._pending: tuple[JobExecution, str, Any] | None = None
        self.view: ProgressView | None = None
        self._progress = (-1, 0.0)
        self._markers_at = -1e300
        self.pub_markers = self.create_publisher(MarkerArray, "grinding/progress_markers", latched)
        if p["plan_file"]:
            try:
                self._use(self._prepare(plan_io.read_plan(p["plan_file"]), p["plan_file"]))
            except InputError as exc:
                # the node stays up: a fixed file is loaded by setting plan_file again
                self.plan_error = f"plan_file: {exc}"
                self.get_logger().error(f"{self.plan_error} (no plan loaded; set plan_file to load one)")
        else:
            self.create_subscription(String, "grinding/plan", guarded(self, "grinding/plan")(self._on_plan), latched)
        self.add_on_set_parameters_callback(self._check_plan_file)
        self.add_post_set_parameters_callback(self._plan_file_set)
        # joint states as bytes (ros/wire.py): rclpy's message objects cost more than the checks
        self.js_reader = wire.JointStateReader(self.model.joint_names, "joint_states")
        self.create_subscription(JointState, "joint_states", guarded(self, "joint_states")(self._on_joints), 50,
                                 raw=True)
        # the arm side's refusals: commands_refused per status name, now and when the last command went out
        self._refused: dict[str, int] = {}
        self._refused_at_send: dict[str, int] = {}
        self._deferred: tuple[Any, bytes] | None = None  # a start waiting for its stamp (its message)
        self._release_timer: Any = None
        self.create_subscription(DiagnosticArray, "diagnostics",
                                 guarded(self, "diagnostics")(self._on_diagnostics), 50)
        for name, fn in (("start", self._start), ("stop", self._stop), ("pause", self._pause),
                         ("resume", self._resume)):
            self.create_service(Trigger, f"~/{name}", self._service(name, fn))
        self.create_timer(1.0 / p["progress_rate"], guarded(self, "progress")(self._tick))
        self.create_timer(1.0 / p["diagnostics_rate"], guarded(self, "diagnostics")(self._diagnostics))
        # the compiled paths of a start and of the tracking check load before the first request
        trajectory_wire.warm_up(self.model.joint_names)
        cmds.sample(cmds.hold(np.zeros(self.model.nq)), 0.0)
        self._state_changed()
        self.get_logger().info(f"ready: {self.plan_source or 'waiting for grinding/plan'}; commands on "
                               f"{self.pub_cmd.topic_name}, autostart {p['autostart']}")

    # -- plan ----------------------------------------------------------------------------------

    def _prepare(self, data: dict[str, Any], source: str) -> tuple[JobExecution, str]:
        """The job of a read plan.json, and its one-line description (InputError: a bad plan)."""
        plan = plan_io.plan_from_dict(data, source)
        if plan.trajectory is None:
            raise InputError(f"{source}: the plan has no job trajectory (plan it with a robot: grinding plan "
                             "--robot, or planner_node)")
        plan_io.check_trajectory(plan.trajectory, self.model)
        # the move to the plan's start is checked against the part, loaded when a start first needs it
        job = JobExecution(self.model, plan, self.cell.execution, self.cell.process,
                           lambda: start_check_for(self.model, plan, self.cell))
        return job, f"plan {source}: {len(plan.passes)} passes, {job.duration:.1f} s", plan

    def _use(self, prepared: tuple[JobExecution, str, Any]) -> None:
        self.job, self.plan_source, plan = prepared
        self.plan_error = ""
        self._traces, self._anchor = pass_traces(plan), status_anchor(plan)
        self.view = ProgressView(self._traces)
        self.get_logger().info(f"loaded {self.plan_source}")
        self._publish_markers()

    def _busy(self) -> bool:
        return self.job is not None and self.job.state in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED,
                                                           JobState.STOPPING)

    def _on_plan(self, msg: String) -> None:
        if self._busy():
            self.get_logger().warning("grinding/plan: a new plan arrived while a job runs; it is ignored")
            return
        try:
            self._use(self._prepare(plan_io.parse_plan(msg.data, "grinding/plan"), "grinding/plan"))
        except InputError as exc:
            self.plan_error = f"grinding/plan: {exc}"
            self.get_logger().error(f"{self.plan_error} (the plan is refused"
                                    f"{'; the loaded plan stays' if self.job is not None else ''})")
        self._state_changed()

    def _check_plan_file(self, params: list[Any]) -> Any:
        """``ros2 param set ... plan_file``: refused while a job runs or when the file is not a plan
        (the reason names it); else the job is prepared here and used once the value is set."""
        from rcl_interfaces.msg import SetParametersResult

        for prm in params:
            if prm.name != "plan_file":
                continue
            if self._busy():
                return SetParametersResult(successful=False,
                                           reason=f"plan_file: a job is {self.job.state.value}; stop it first")
            if not prm.value:
                return SetParametersResult(successful=False, reason="plan_file: empty (name a plan.json)")
            try:
                self._pending = self._prepare(plan_io.read_plan(prm.value), prm.value)
            except InputError as exc:
                return SetParametersResult(successful=False, reason=f"plan_file: {exc}")
        return SetParametersResult(successful=True)

    def _plan_file_set(self, params: list[Any]) -> None:
        if self._pending is not None and any(prm.name == "plan_file" for prm in params):
            self._use(self._pending)
            self._last_pass = -1
            self._state_changed()
        self._pending = None

    # -- requests ------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _send(self, sent: Any) -> None:
        if sent is None:
            return
        c = sent.command
        # as bytes (ros/trajectory_wire.py): a job's 16,000 points took 0.24 s as rclpy objects
        msg = joint_trajectory_bytes(self.model.joint_names, c.times, c.positions, c.velocities,
                                     frame_id=self.base_frame)
        if self.job is not None and self.job.pending and self.job.sent is sent:
            # a deferred start: stamped once the clock messages that came while it was built have
            # been taken (this callback holds the executor; a steady timer runs after them)
            self._deferred = (sent, msg)
            if self._release_timer is None:
                self._release_timer = self.create_timer(
                    0.001, guarded(self, "start")(self._release), clock=Clock(clock_type=ClockType.STEADY_TIME))
            return
        self._publish_command(sent, msg)

    def _release(self) -> None:
        self.destroy_timer(self._release_timer)
        self._release_timer = None
        deferred, self._deferred = self._deferred, None
        job = self.job
        if deferred is None or job is None or job.sent is not deferred[0] or not job.pending:
            return  # replaced (stopped, another plan) before it went out
        self._publish_command(job.release(self._now()), deferred[1])

    def _publish_command(self, sent: Any, msg: Any) -> None:
        c = sent.command
        t = cv.sec_to_time(sent.stamp)
        self._refused_at_send = dict(self._refused)
        self.pub_cmd.publish(stamped(msg, (t.sec, t.nanosec)))
        self.get_logger().info(f"sent {c.kind}: {len(c.times)} points, {c.duration:.2f} s from t = {sent.stamp:.3f} s")
        report = self.job.start_report if self.job is not None and c.kind == "start" else None
        if report and report["move"] != "straight":  # the straight joint move to the start hit the part
            self.get_logger().info(f"the move to the plan's start goes over the part, the tool centre up to "
                                   f"{report['height_m']:.3f} m (straight: {report['straight']})")

    def _service(self, name: str, fn: Any) -> Any:
        def handle(request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                response.message = fn()
                response.success = True
            except (GrindingSimError, ValueError) as exc:
                response.success, response.message = False, str(exc)
                self.get_logger().warning(f"~/{name}: {exc}")
            except Exception as exc:  # keep the node alive; say what it was
                response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
                self.get_logger().error(f"~/{name}: {response.message}")
            self._state_changed()
            return response
        return handle

    def _require_job(self) -> JobExecution:
        if self.job is None:
            why = f": {self.plan_error}" if self.plan_error else " (set plan_file or run planner_node)"
            raise GrindingSimError(f"no plan loaded{why}")
        return self.job

    def _controller_listening(self) -> bool:
        # a command published before the controller's subscription has matched is lost (volatile)
        return self.pub_cmd.get_subscription_count() > 0

    def _start(self) -> str:
        job = self._require_job()
        if self._q is None:
            raise GrindingSimError("no joint states yet: is the arm (dynamics_node or the driver) running?")
        if not self._controller_listening():
            raise GrindingSimError(f"nobody subscribes to {self.pub_cmd.topic_name}: is the arm's controller "
                                   "running (remap the topic to it)?")
        self._send(job.start(self._now(), self._q, defer=True))
        self._last_pass = -1
        self.view = ProgressView(self._traces)
        return f"started: {self.plan_source}"

    def _stop(self) -> str:
        sent = self._require_job().stop(self._now(), "stop requested")
        self._send(sent)
        return "stopping" if sent is not None else f"nothing to stop (the job is {self.job.state.value})"

    def _pause(self) -> str:
        self._send(self._require_job().pause(self._now()))
        return "pausing"

    def _resume(self) -> str:
        self._send(self._require_job().resume(self._now()))
        return "resumed"

    # -- supervision ---------------------------------------------------------------------------

    def _on_joints(self, data: bytes) -> None:
        ns, q, _ = self.js_reader.read(data)
        now = self._now()
        if now == 0.0:
            # sim time not started (no /clock taken yet: on a busy machine its subscription may match
            # seconds after the joint states'): nothing to date the state against, so it is not
            # taken (it read as stamped seconds ahead, a clock skew that refused the start)
            return
        self._q = q
        if self.job is None:
            return
        before = self.job.state
        stop = self.job.on_joint_state(ns * 1e-9 or now, q, received=now)
        if stop is not None:
            self.get_logger().error(f"stopping the job: {self.job.reason}")
            self._send(stop)
        if stop is not None or self.job.state is not before:  # a stop, or done (the arm at the plan's end)
            self._state_changed()

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        """A refusal or an error of a node that takes the commands fails the running job (module docstring)."""
        controllers: set[str] | None = None
        for st in msg.status:
            values = {kv.key: kv.value for kv in st.values}
            error = _level(st.level) >= _level(DiagnosticStatus.ERROR)
            if "commands_refused" not in values and not error:
                continue
            if controllers is None:  # who takes the commands (the graph, asked once per message)
                controllers = {i.node_name for i in self.get_subscriptions_info_by_topic(self.pub_cmd.topic_name)}
            node = st.name.split(":", 1)[0].strip().rsplit("/", 1)[-1]
            if node not in controllers:
                continue
            try:
                refused = int(values.get("commands_refused", "0"))
            except ValueError:
                raise InputError(f"diagnostics: {st.name}: commands_refused {values['commands_refused']!r} is not "
                                 "a count") from None
            before = self._refused_at_send.get(st.name)
            self._refused[st.name] = refused
            job = self.job
            if job is None or job.state not in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED,
                                                JobState.STOPPING):
                continue
            if before is not None and refused > before:
                what = f"{node} refused the command: {values.get('last_refusal', '') or st.message}"
            elif error:
                what = f"{node} reports an error: {st.message}"
            else:
                continue
            self._refused_at_send[st.name] = refused  # said once
            stop = job.on_controller_fault(self._now(), what)
            self.get_logger().error(f"{'stopping the job' if stop is not None else 'the job fails'}: {what}")
            self._send(stop)
            self._state_changed()

    def _tick(self) -> None:
        job = self.job
        if job is None:
            return
        if self.p["autostart"] and job.state is JobState.READY and self._q is not None \
                and not job.joint_state_problem and self._controller_listening():
            try:
                self._send(job.start(self._now(), self._q, defer=True))
                self.view = ProgressView(self._traces)
            except GrindingSimError as exc:  # the move to the start refused: the job failed, said once
                self.get_logger().error(f"autostart: {exc}")
            self._state_changed()
        now = self._now()
        before = job.state
        stop = job.update(now)
        if stop is not None:
            self.get_logger().error(f"stopping the job: {job.reason}")
            self._send(stop)
        if job.state is not before or stop is not None:
            self._state_changed()
        if job.state in (JobState.RUNNING, JobState.PAUSING, JobState.PAUSED, JobState.STOPPING) \
                or self._last_pass >= 0:
            # a pass that ended since the last tick (ticks come late on a busy machine) is given its
            # end first, stamped when the command reached it
            if self._ticked_at is not None:
                for end_idx, end_arc, t_end in job.pass_ends(self._ticked_at, now):
                    self.pub_progress.publish(Float64MultiArray(data=[float(end_idx), end_arc, t_end]))
                    if self.view is not None:
                        self.view.update(end_idx, end_arc)
            idx, arc = job.progress(now)
            if idx >= 0 or self._last_pass >= 0:
                self.pub_progress.publish(Float64MultiArray(data=[float(idx), float(arc), now]))
            self._last_pass = idx
            self._progress = (idx, arc)
            if self.view is not None:
                self.view.update(idx, arc)
            if now - self._markers_at >= 1.0 / self.p["marker_rate"]:
                self._publish_markers(now)
        self._ticked_at = now

    def _publish_markers(self, now: float | None = None) -> None:
        """grinding/progress_markers (core/record/progress_view.py): the ground part of each pass and
        the status text."""
        if self.view is None:
            return
        if self.job is not None and self.job.state is JobState.DONE:
            self.view.finish()
        self._markers_at = self._now() if now is None else now
        stamp = self.get_clock().now().to_msg()
        out = MarkerArray()
        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id = self.base_frame
        out.markers.append(clear)

        def marker(ns: str, mid: int, kind: int, colour: tuple[float, ...]) -> Marker:
            m = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD)
            m.header.frame_id, m.header.stamp = self.base_frame, stamp
            m.pose.orientation.w = 1.0
            m.color.r, m.color.g, m.color.b, m.color.a = colour
            return m

        for index, pts in self.view.lines():
            m = marker("ground", index, Marker.LINE_STRIP, pv.GROUND_COLOUR)
            m.scale.x = pv.GROUND_WIDTH
            m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in pts]
            out.markers.append(m)
        busy = self._busy()
        idx, arc = self._progress if busy else (-1, 0.0)
        m = marker("status", 0, Marker.TEXT_VIEW_FACING, pv.TEXT_COLOUR)
        m.scale.z = pv.TEXT_HEIGHT
        m.pose.position = Point(x=float(self._anchor[0]), y=float(self._anchor[1]), z=float(self._anchor[2]))
        m.text = self.view.text(self._state_text(), idx, arc)
        out.markers.append(m)
        self.pub_markers.publish(out)

    def _state_text(self) -> str:
        if self.job is None:
            return JobState.IDLE.value
        s = self.job.state.value
        return f"{s}: {self.job.reason}" if self.job.reason and self.job.state in (JobState.FAILED,
                                                                                   JobState.STOPPED) else s

    def _state_changed(self) -> None:
        text = self._state_text()
        if text != self._published_state:
            self._published_state = text
            self.pub_state.publish(String(data=text))
            self.get_logger().info(f"job {text}")
            self._diagnostics()
            self._publish_markers()

    def _diagnostics(self) -> None:
        job = self.job
        state = job.state if job is not None else JobState.IDLE
        st = DiagnosticStatus(name=f"{self.get_name()}: job", hardware_id=self.base_frame,
                              level=LEVEL.get(state, DiagnosticStatus.OK), message=self._state_text())
        now = self._now()
        idx, arc = job.progress(now) if job is not None else (-1, 0.0)
        values = {"state": state.value, "plan": self.plan_source, "pass": str(idx), "arc_length_m": f"{arc:.6f}",
                  "joint_states": "received" if self._q is not None else "none yet",
                  "controller_subscribers": str(self.pub_cmd.get_subscription_count())}
        if self.plan_error:
            values["plan_error"] = self.plan_error
            if self.job is None:
                st.level, st.message = DiagnosticStatus.ERROR, f"no plan: {self.plan_error}"
        if self._q is None and st.level == DiagnosticStatus.OK:
            st.level, st.message = DiagnosticStatus.WARN, f"{st.message}; no joint states yet"
        if job is not None:
            values.update(last_tracking_error_rad=f"{job.last_error:.3g}",
                          max_tracking_error_rad=f"{job.max_error:.3g}",
                          last_path_error_m=f"{job.last_path_error:.3g}", max_path_error_m=f"{job.max_path_error:.3g}",
                          joint_states_clock_offset_s=f"{job.clock_offset:.3g}", duration_s=f"{job.duration:.3f}")
            problem = job.joint_state_problem
            if problem:
                values["joint_states_problem"] = problem
                if st.level == DiagnosticStatus.OK:
                    st.level, st.message = DiagnosticStatus.WARN, f"{st.message}; {problem}"
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(msg)


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim grinding_executive [--ros-args ...]``."""
    return run_node(GrindingExecutive, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
