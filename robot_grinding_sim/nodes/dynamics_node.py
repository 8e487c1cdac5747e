"""dynamics_node: the simulated arm, a stand-in for a position-controlled arm behind ros2_control.

A thin adapter over :class:`robot_grinding_sim.core.sim.coupled_step.ArmContactStepper`, the arm
side of the in-process job's coupled step: computed-torque servo (``servo.*``), forward dynamics
(RNEA/CRBA of the URDF), and the contact along its normal integrated in closed form from the
contact side's reduced-order model (``coupling: model``), so the node graph runs the same physics
as ``grinding simulate``.

Subscribes (relative names; in the root namespace they start with ``/``):
- ``joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory): followed
  by time_from_start from ``header.stamp`` (zero or past: now; more than 60 s ahead: rejected),
  interpolated as ros2_control's joint_trajectory_controller does (cubic Hermite with positions
  and velocities, quintic with accelerations); a trajectory without points stops the arm where
  its reference is.
- ``forward_position_controller/commands`` (std_msgs/Float64MultiArray): one position per joint
  in ``joint_names`` order, reached by a rest-to-rest cubic whose duration keeps every joint
  within ``command_velocity_scale`` of its velocity limit.
- ``contact/model`` (std_msgs/Float64MultiArray, ``coupling: model``): the contact side's model
  at the state stamped in its first value (docs/contact.md); a step from t uses the newest model
  of a state at or before t, the gap moved with the tool since.
- nothing for ``coupling: local``: the contact is computed in this node at every step on the
  workpiece of ``workpiece.*`` with ``contact.*`` (the scene collision_node builds, the in-process
  job's step exactly, never waiting and never stale: ``grinding emulate``'s arm, whose physics must
  not depend on how busy the machine is); with ``publish_ft`` it also publishes
  ``ft_sensor/wrench`` (WrenchStamped, frame ``ft_sensor.frame``), the F/T sensor model's reading
  (core.sim.ft) of that contact, with each joint state and its stamp.
- ``contact/wrench`` (geometry_msgs/WrenchStamped, ``coupling: force``): a contact wrench applied
  as it is through the Jacobian, in ``header.frame_id`` (a link of the arm, e.g. ``tcp``;
  ``base_link``/``world``/empty: base axes acting at the tip) about that frame's origin. This
  force-only exchange goes unstable for stiff contacts (papers/003); it is kept for comparison.

Lockstep (``lockstep``): sim time starts once the contact side has answered (``wait_for_contact``:
the state at t = 0 is republished every 0.1 s until then, so nothing, e.g. a job started by the
executive, runs before the contact is computed), and a step from sim time t waits until it
holds a model (or wrench) computed at a state no older than t - ``exchange_interval``; sim time
does not run ahead of the contact side, and the result does not depend on wall-clock timing.
With ``exchange_interval`` 0 every step waits for the model of its own state: the in-process
job's step exactly.

Publishes:
- ``joint_states`` (sensor_msgs/JointState): position, velocity, effort (the motor torque), every
  ``joint_state_decimation``-th step, stamped with sim time.
- ``~/tool_pose`` (geometry_msgs/PoseStamped): the tcp in the base frame.
- ``~/inverse_dynamics`` (sensor_msgs/JointState): the reference state and the RNEA torques it
  needs (effort), without the contact.
- ``/clock`` (rosgraph_msgs/Clock) when ``publish_clock``: this node owns sim time.

Services: ``~/reset`` (std_srvs/Trigger): back to ``robot.home`` at rest.

Bad commands (unknown joint names, NaN, positions outside the limits, velocities over the limits,
a command of the wrong length, unsorted times) are rejected with a warning naming the problem; the
arm keeps its current goal. A bad parameter stops the node at start-up naming the parameter.

Velocity limits (as a drive limits its speed): a trajectory whose motion as the arm will follow it
(from the current reference, through the interpolation) would exceed a joint's URDF velocity limit
is slowed down (its times stretched by the smallest factor that keeps every joint within its
limit; core/robot/arm_sim.py ``limit_velocity``), with one warning naming the joint, the velocity
it would have reached, the limit and the slow-down (further ones within 5 s are counted in the
next). A 3 rad step commanded in 10 ms used to be followed as it came: the arm swung at 600-2,100
rad/s for 25 s without a word. One that cannot be brought within (the reference already faster
than a limit) is rejected with the reason.

Timing (the scheduling is :class:`robot_grinding_sim.core.sim.scheduler.StepScheduler`'s; this node
calls it from its timer and hands it what the contact side sends): the simulation advances in steps of
``sim.dt`` of sim time. A steady wall timer at
``update_rate`` Hz advances, at each tick, as many steps as ``real_time_factor`` x the wall time
elapsed since the last tick allows (the remainder carries over), at most
``max_steps_per_update``; if the machine cannot keep up, sim time runs slower than requested (a
throttled warning says so). /clock is published after a tick's steps, at most ``clock_rate`` Hz. This node never
follows /clock itself.

``hold_at`` (s on the stamp scale, settable at run time; 0: never): a breakpoint, sim time does not
run past it (/clock stands, the joint states stop) until it is cleared or moved; a test that must act
at a given point of a job (pause in a pass) holds the arm there, however late it observes the job
on a busy machine.

Wall-clock stamps (``publish_clock`` false; ``grinding emulate``'s arm): the stamps are sim time
plus the wall time at start. ``max_lag`` > 0 keeps them with the wall clock, as a real arm's driver
stamps its joint states: time the node could not simulate (waiting for the contact side, a
machine that cannot keep up) is skipped once the lag exceeds it: the stamps jump forward (contact
models stamped before the jump still map to the states they were computed at) and so does the
reference along the trajectory being followed, which keeps its wall-clock times, so the arm does
not fall behind its commands (it catches up with the servo's bandwidth: a jolt, not a lag).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, WrenchStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job.setup import check_home
from robot_grinding_sim.core.robot.joint_trajectory import TrajectoryInterpolator
from robot_grinding_sim.core.sim.coupled_step import ArmContactStepper
from robot_grinding_sim.core.sim.ft import sensor_inputs
from robot_grinding_sim.core.sim.scheduler import StepScheduler
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import trajectory_wire, wire
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.node_setup import set_up_node
from robot_grinding_sim.ros.parameters import ParameterError
from robot_grinding_sim.ros.trajectory_wire import joint_trajectory_from_bytes

NODE_NAME = "dynamics_node"

#: A trajectory whose header.stamp lies further ahead than this (s) is rejected.
MAX_START_DELAY = 60.0
#: at most one warning about slowed-down trajectories per this many seconds
CLAMP_LOG_PERIOD = 5.0
_EPS = 1e-9


class DynamicsNode(Node):
    """The simulated arm (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        node = set_up_node(self, NODE_NAME)
        self.p = p = node.params
        cell = node.cell
        self.tcp = cell.tool.tcp_link
        self.model = m = node.model
        # joint order of the ROS interface; the core works in the model's order
        names = p["joint_names"] or list(m.joint_names)
        if sorted(names) != sorted(m.joint_names) or len(set(names)) != len(names):
            raise ParameterError("joint_names", f"must be a permutation of the URDF's joints {m.joint_names}; "
                                 f"got {names}", NODE_NAME)
        self.joint_names = list(names)
        self._to_model = np.array([self.joint_names.index(j) for j in m.joint_names])  # ros -> model
        self._to_ros = np.array([m.joint_names.index(j) for j in self.joint_names])  # model -> ros
        q_start = self.q_home = self._checked_home(cell.robot.home, "robot.home")
        if p["plan_file"]:
            q_start = self._plan_start(p["plan_file"])
        try:
            self.stepper = ArmContactStepper(m, q_start, cell.servo, cell.sim.gravity, self.tcp)
        except InputError as exc:
            raise ParameterError("robot.home", str(exc), NODE_NAME) from None
        self.sim = self.stepper.arm
        self.dt = cell.sim.dt
        self.coupling = p["coupling"]
        self.local_side = None  # coupling local: the contact side with its query
        # coupling local: (model, normal force) of the last step's contact, None out of contact
        self.local_last: tuple[Any, float] | None = None
        self.ft = None
        if self.coupling == "local":
            self._local_contact(p, cell)
        self.lockstep = bool(p["lockstep"]) and self.coupling != "local"
        self.interval = float(p["exchange_interval"])
        decim = int(p["joint_state_decimation"])
        if self.lockstep and self.coupling != "none" and (decim - 1) * self.dt > self.interval + _EPS:
            raise ParameterError("joint_state_decimation", f"{decim}: with lockstep the contact side sees every "
                                 f"{decim}-th state, so exchange_interval must be >= {(decim - 1) * self.dt:g} s",
                                 NODE_NAME)
        self.base_frame = node.base_frame
        self._clamp_logged = -np.inf  # when a slowed-down trajectory was last logged (monotonic)
        self._clamped = 0  # slowed down since then
        # Sim time: 0 at start when this node owns /clock; otherwise offset to wall time so the
        # stamps are comparable with other nodes' wall clocks (max_lag keeps them with it)
        self.sched = StepScheduler(
            self.sim, self, self.dt, t_origin=0.0 if p["publish_clock"] else time.time(), lockstep=self.lockstep,
            exchanges=self.coupling in ("model", "force"), exchange_interval=self.interval,
            wait_for_contact=bool(p["wait_for_contact"]), max_lag=0.0 if p["publish_clock"] else float(p["max_lag"]),
            clock_period=1.0 / float(p["clock_rate"]), monotonic=time.monotonic, wall=time.time)
        self._settings()
        self.add_post_set_parameters_callback(lambda _params: self._settings())

        self.pub_js = self.create_publisher(JointState, "joint_states", wire.STREAM_DEPTH)
        self.js_writer = wire.joint_state_bytes(self.joint_names)  # published as bytes (ros/wire.py)
        self.pub_pose = self.create_publisher(PoseStamped, "~/tool_pose", 10)
        self.pub_id = self.create_publisher(JointState, "~/inverse_dynamics", 10)
        self.pub_clock = None
        if p["publish_clock"]:
            self.pub_clock = self.create_publisher(
                ClockMsg, "/clock", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.create_subscription(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory",
            guarded(self, "joint_trajectory_controller/joint_trajectory")(self._on_trajectory), 10, raw=True)
        self.create_subscription(
            Float64MultiArray, "forward_position_controller/commands",
            guarded(self, "forward_position_controller/commands")(self._on_positions), 10)
        if self.coupling == "model":
            self.create_subscription(Float64MultiArray, "contact/model",
                                     guarded(self, "contact/model")(self._on_model), 100, raw=True)
        elif self.coupling == "force":
            self.create_subscription(WrenchStamped, "contact/wrench",
                                     guarded(self, "contact/wrench")(self._on_wrench), 100)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._timer = self.create_timer(1.0 / p["update_rate"], guarded(self, "update")(self.sched.tick),
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._warm_up()
        self.sched.publish_clock()
        self.publish_state()
        self.get_logger().info(
            f"simulating {m.nq} joints {self.joint_names} from {m.source} (tcp {self.tcp}); step "
            f"{self.dt * 1e3:g} ms, servo {cell.servo.bandwidth:g} rad/s, contact coupling {self.coupling}"
            f"{f' on {self.contact_source}' if self.local_side is not None else ''}"
            f"{f', F/T sensor model at {self.ft_frame!r}' if self.ft is not None else ''}"
            f"{f' in lockstep (interval {self.interval * 1e3:g} ms)' if self.lockstep else ''}, real-time factor "
            f"{p['real_time_factor']:g}, {'publishing /clock' if p['publish_clock'] else 'wall-clock stamps'}")

    def _checked_home(self, q: Any, name: str) -> np.ndarray:
        """Positions (n,) of parameter ``name`` checked as robot.home is (grinding check-config and
        the commands' cells: the URDF's joint order, within the limits); ParameterError naming it."""
        try:
            return check_home(self.model, q)
        except ParameterError as exc:
            raise ParameterError(name, exc.problem.replace("robot.home", name), NODE_NAME) from None

    def _plan_start(self, path: str) -> np.ndarray:
        """The first knot (n,) of the job trajectory of plan.json ``path``, checked against this robot
        (its joints, in its order, within the limits); ParameterError naming ``plan_file``. The arm
        starts there as the in-process job does: the executive's joint move from robot.home to the
        start (straight in joint space, not checked against the part) would sweep a tool the plan
        turns on the way, a wheel or a disc, through the part."""
        from robot_grinding_sim.core.planning.plan_io import read_plan, trajectory_from_dict

        try:
            data = read_plan(path)
            if not data.get("trajectory"):
                raise InputError(f"{path}: the plan has no job trajectory (plan it with a robot)")
            q = trajectory_from_dict(data["trajectory"], self.model).positions[0]
        except InputError as exc:
            raise ParameterError("plan_file", str(exc), NODE_NAME) from None
        return self._checked_home(q, "plan_file")

    def _settings(self) -> None:
        """The scheduler's run-time parameters (at start and after each set)."""
        sched, value = self.sched, lambda name: self.get_parameter(name).value
        sched.rtf, sched.max_steps = float(value("real_time_factor")), int(value("max_steps_per_update"))
        sched.decimation, sched.pose_rate = int(value("joint_state_decimation")), float(value("tool_pose_rate"))
        sched.contact_timeout = float(value("contact_timeout"))
        sched.hold_at = float(value("hold_at")) or float("inf")

    def _local_contact(self, p: dict[str, Any], cell: Any) -> None:
        """coupling local: the tool's contact scene on the workpiece and the contact side in this process;
        with publish_ft the F/T sensor model."""
        from robot_grinding_sim.core.sim.coupled_step import ContactSide
        from robot_grinding_sim.core.sim.ft import ft_sensor_model
        from robot_grinding_sim.ros.workpiece import tool_scene

        for name in ("tool.link", "ft_sensor.frame"):
            if p[name] not in self.model.link_names:
                raise ParameterError(name, f"no link {p[name]!r} in {self.model.source}", NODE_NAME)
        scene = tool_scene(p, self.model, NODE_NAME, cell)
        try:
            side = ContactSide(self.model, cell.contact, self.tcp, cell.tool.spindle_speed, query=scene.query)
        except InputError as exc:
            raise ParameterError("contact.model", str(exc), NODE_NAME) from None
        self.local_side = side
        self.cell = cell
        self.contact_source = f"{scene.source} ({'exact CAD surface' if scene.exact else 'triangles'})"
        if p["publish_ft"]:
            try:
                self.ft = ft_sensor_model(cell, self.model)
            except InputError as exc:
                raise ParameterError("ft_sensor.tool_mass", str(exc), NODE_NAME) from None
            self.ft_frame = cell.ft_sensor.frame
            self.pub_ft = self.create_publisher(WrenchStamped, "ft_sensor/wrench", wire.STREAM_DEPTH)
            self.ft_writer = wire.wrench_stamped_bytes(self.ft_frame)

    def _warm_up(self) -> None:
        """Run every numerical path once (numba kernels load/compile) before the clock starts."""
        st = self.sim.state
        self.sim.controller.torque(st.q, st.qd, st.q, st.qd, st.qdd)
        self.model.forward_dynamics(st.q, st.qd, st.tau, gravity=self.sim.gravity)
        self.model.jacobian(st.q, self.tcp)
        self.model.mass_matrix(st.q)
        self.model.fk(st.q, self.tcp)
        trajectory_wire.warm_up(self.joint_names)
        if self.local_side is not None:
            from robot_grinding_sim.core.warmup import coupled_step_on

            coupled_step_on(self.model, self.cell, self.local_side.query, st.q)

    # -- time ---------------------------------------------------------------------------------------
    def sim_now(self) -> float:
        """Current sim time on the stamp scale, s."""
        return self.sched.sim_now()

    def _stamp(self) -> Any:
        return cv.sec_to_time(self.sim_now())

    # -- commands -----------------------------------------------------------------------------------
    def _on_trajectory(self, data: bytes) -> None:
        # as bytes (ros/trajectory_wire.py): a job's 16,000 points took 0.2 s as rclpy objects, in
        # the callback that holds the lockstep loop
        (sec, nsec), _, names, times, pos, vel, acc = joint_trajectory_from_bytes(data, allow_empty=True)
        if len(times) == 0:
            q_ref, _, _ = self.sim.reference()
            self.sim.set_trajectory(TrajectoryInterpolator.hold(q_ref))
            self.get_logger().info("empty trajectory: holding the current reference")
            return
        stamp = sec + 1e-9 * nsec
        start = None if stamp == 0.0 else stamp - self.sched.t_origin
        if start is not None and start - self.sim.state.t > MAX_START_DELAY:
            # e.g. a wall-clock stamp while this node runs sim time from 0: it would never start
            raise InputError(f"header.stamp {stamp:.3f} s is {start - self.sim.state.t:.1f} s ahead of the node's "
                             f"time {self.sim_now():.3f} s (more than {MAX_START_DELAY:g} s); stamp 0 starts now")
        traj = self.sim.command_trajectory(names, times, pos, vel, acc, start_time=start, limit_velocity=True)
        clamp = self.sim.last_clamp
        if clamp is not None:
            self._clamped += 1
            now = time.monotonic()
            if now - self._clamp_logged >= CLAMP_LOG_PERIOD:
                more = f" ({self._clamped - 1} more slowed down since the last warning)" if self._clamped > 1 else ""
                self.get_logger().warning(f"trajectory slowed down to the velocity limits: {clamp}{more}")
                self._clamp_logged, self._clamped = now, 0
        self.get_logger().info(
            f"trajectory accepted: {len(times)} points, {traj.duration:.3f} s, {len(names)} joints")

    def _on_positions(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        n = len(self.joint_names)
        if data.shape[0] != n:
            raise InputError(f"expected {n} positions ({', '.join(self.joint_names)}), got {data.shape[0]}")
        bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(data))]
        if bad:
            raise InputError(f"NaN or inf for {bad}")
        self.sim.command_positions(data[self._to_model], self.p["command_min_duration"],
                                   self.p["command_velocity_scale"])

    # -- the contact side ---------------------------------------------------------------------------
    def _on_model(self, data: bytes) -> None:
        self.sched.model_arrived(*wire.contact_model_from_bytes(data))

    def _on_wrench(self, msg: WrenchStamped) -> None:
        w = cv.wrench_to_array(msg)
        frame = msg.header.frame_id
        if frame not in ("", "world", self.model.root_link) and frame not in self.model.link_names:
            raise InputError(f"unknown frame_id {frame!r}; known frames: {self.model.link_names}")
        self.sched.wrench_arrived(cv.time_to_sec(msg.header.stamp), w, frame)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        st = self.sim.state
        st.q = self.q_home.copy()
        st.qd = np.zeros_like(st.qd)
        self.sim.clear_wrench()
        self.stepper.f_prev = 0.0
        self.sched.forget_contact()
        self.sim.set_trajectory(TrajectoryInterpolator.hold(self.q_home))
        response.success = True
        response.message = f"reset to robot.home at sim time {self.sim_now():.3f} s"
        return response

    # -- the scheduler's hooks -----------------------------------------------------------------------
    def step(self) -> None:
        """One step of sim.dt with the contact as the coupling says."""
        if self.coupling == "model":
            self.stepper.step(self.dt, self.sched.contact_model())
        elif self.local_side is not None:
            st = self.sim.state
            side = self.local_side
            rom = side.evaluate(st.t, st.q, st.qd, self.dt)
            res = self.stepper.step(self.dt, rom)
            # the normal force at the step's end (the state published next); an event step's last sample
            self.local_last = None if rom is None else (rom, res.end[0] if res.end is not None else res.force)
        else:
            if self.coupling == "force":
                self.sched.apply_due_wrenches()
            self.sim.step(self.dt)

    def warn(self, text: str) -> None:
        self.get_logger().warning(text)

    # -- output -------------------------------------------------------------------------------------
    def publish_clock(self) -> None:
        if self.pub_clock is not None:
            self.pub_clock.publish(ClockMsg(clock=self._stamp()))

    def publish_state(self) -> None:
        st = self.sim.state
        r = self._to_ros
        ns = wire.stamp_ns(self.sim_now())
        self.pub_js.publish(self.js_writer.encode(ns, np.concatenate((st.q[r], st.qd[r], st.tau[r]))))
        if self.ft is not None:
            last = self.local_last
            w = np.zeros(6) if last is None else self.local_side.wrench(*last)
            R_WS, X_S_tcp = sensor_inputs(self.ft, self.model, self.ft_frame, st.q)
            self.pub_ft.publish(self.ft_writer.encode(ns, self.ft.measure(w, R_WS, self.sim_now(), X_S_tcp)))

    def publish_pose(self) -> None:
        st = self.sim.state
        stamp = self._stamp()
        # outputs for viewers and the recorder, off the loop's path: nothing built for nobody
        if self.pub_pose.get_subscription_count() > 0:
            X = self.model.fk(st.q, self.tcp)
            self.pub_pose.publish(cv.matrix_to_pose_stamped(X, self.base_frame, stamp))
        if self.pub_id.get_subscription_count() > 0:  # an RNEA call only when someone listens
            tau_ff = self.model.rnea(st.q_ref, st.qd_ref, st.qdd_ref, gravity=self.sim.gravity)
            r = self._to_ros
            self.pub_id.publish(cv.arrays_to_joint_state(self.joint_names, st.q_ref[r], st.qd_ref[r], tau_ff[r],
                                                         stamp))


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim dynamics_node [--ros-args ...]``."""
    return run_node(DynamicsNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
