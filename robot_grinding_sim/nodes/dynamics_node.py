"""dynamics_node: the simulated arm, a stand-in for a position-controlled arm behind ros2_control.

Subscribes (relative names; in the root namespace they start with ``/``):
- ``joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory): followed
  by time_from_start from ``header.stamp`` (zero or past: now; more than 60 s ahead: rejected),
  interpolated (core.arm_sim); a trajectory
  without points stops the arm where its reference is (as joint_trajectory_controller does).
- ``forward_position_controller/commands`` (std_msgs/Float64MultiArray): one position per joint
  in ``joint_names`` order, reached by a rest-to-rest cubic whose duration keeps every joint
  within ``command_velocity_scale`` of its velocity limit.
- ``contact/wrench`` (geometry_msgs/WrenchStamped): the contact force on the tool, in
  ``header.frame_id`` (any link of the arm, e.g. ``tcp``; ``base_link``/``world``/empty: base
  axes acting at the tip) about that frame's origin. It is applied through the Jacobian,
  tau_ext = J^T w, and held until the next message or for ``wrench_timeout`` s of sim time.
  With ``wrench_sync_interval`` > 0 the node runs in lockstep with the contact solver: a wrench
  stamped t (the sim time of the joint state it was computed from) applies from t + interval on,
  and sim time does not pass (latest stamp + interval) until the next wrench arrives. The
  contact solver then has one interval of sim time to answer, and the result does not depend on
  wall-clock timing (the exchange is deterministic).

Publishes:
- ``joint_states`` (sensor_msgs/JointState): position, velocity, effort (the motor torque), every
  ``joint_state_decimation``-th control step, stamped with sim time.
- ``~/tool_pose`` (geometry_msgs/PoseStamped): ``tip_link`` in the base frame.
- ``~/inverse_dynamics`` (sensor_msgs/JointState): the reference state and the RNEA torques it
  needs (effort), without the contact wrench.
- ``/clock`` (rosgraph_msgs/Clock) when ``publish_clock``: this node owns sim time.

Bad commands (unknown joint names, NaN, positions outside the limits, velocities over the limits,
a command of the wrong length, unsorted times) are rejected with a warning naming the problem; the
arm keeps its current goal. A bad parameter stops the node at start-up naming the parameter.

Timing: the simulation advances in fixed steps dt = 1 / control_rate of sim time. A steady wall
timer at ``update_rate`` Hz advances, at each tick, as many whole steps as ``real_time_factor`` x
the wall time elapsed since the last tick allows (the remainder carries over), at most
``max_steps_per_update``; if the machine cannot keep up, sim time runs slower than requested (a
throttled warning says so) instead of the node falling ever further behind. Every step is
simulated and (with decimation 1) published, so the sim-time signal is the same however the wall
timer jitters; only the wall-clock pacing varies. /clock is published after each tick's steps.
This node never follows /clock itself (it uses a steady wall timer).
"""

from __future__ import annotations

import bisect
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
from robot_grinding_sim.core.robot.arm_sim import (
    ArmSimulator,
    ComputedTorqueController,
    TrajectoryInterpolator,
    parse_initial_positions,
)
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded, load_robot, run_node
from robot_grinding_sim.ros.parameters import ParameterError, ParamSpec, declare_parameters

NODE_NAME = "dynamics_node"

#: A trajectory whose header.stamp lies further ahead than this (s) is rejected.
MAX_START_DELAY = 60.0

PARAMS = [
    ParamSpec(
        "robot_description_file",
        "",
        "URDF of the arm; empty: the package's urdf/ur10e_grinding.urdf",
        path="file",
        read_only=True,
    ),
    ParamSpec(
        "tip_link", "tcp", "link whose pose ~/tool_pose publishes and where the chain ends", read_only=True
    ),
    ParamSpec("base_frame", "", "frame_id of ~/tool_pose; empty: the URDF's root link", read_only=True),
    ParamSpec(
        "joint_names",
        [],
        "joint order of joint_states and of position commands; empty: the URDF's",
        type="string_array",
        read_only=True,
    ),
    ParamSpec(
        "initial_positions",
        [0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0],
        "start configuration in joint_names order, rad",
        read_only=True,
    ),
    ParamSpec(
        "control_rate",
        1000.0,
        "control and integration rate in sim time, Hz (dt = 1/control_rate)",
        range=(1.0, 20000.0),
        read_only=True,
    ),
    ParamSpec(
        "update_rate",
        250.0,
        "wall-clock timer rate that advances the simulation, Hz",
        range=(1.0, 2000.0),
        read_only=True,
    ),
    ParamSpec("real_time_factor", 1.0, "sim seconds per wall second", range=(0.01, 100.0)),
    ParamSpec(
        "max_steps_per_update",
        100,
        "at most this many control steps per timer tick (then sim slows)",
        range=(1, 100000),
    ),
    ParamSpec("publish_clock", True, "publish /clock: this node owns sim time", read_only=True),
    ParamSpec("joint_state_decimation", 1, "publish joint_states every N-th control step", range=(1, 10000)),
    ParamSpec(
        "tool_pose_rate",
        100.0,
        "rate of ~/tool_pose and ~/inverse_dynamics in sim time, Hz; 0: off",
        range=(0.0, 10000.0),
    ),
    ParamSpec(
        "kp",
        [2500.0],
        "position gains of the computed-torque controller, 1/s^2 (1 value or one per joint)",
        range=(0.0, 1e8),
        read_only=True,
    ),
    ParamSpec(
        "kd",
        [100.0],
        "velocity gains, 1/s (1 value or one per joint); critical damping: kd = 2 sqrt(kp)",
        range=(0.0, 1e5),
        read_only=True,
    ),
    ParamSpec(
        "gravity",
        [0.0, 0.0, -9.81],
        "gravity in the base frame, m/s^2",
        length=3,
        range=(-100.0, 100.0),
        read_only=True,
    ),
    ParamSpec("limit_effort", True, "clip motor torques to the URDF effort limits", read_only=True),
    ParamSpec(
        "integrator",
        "semi_implicit_euler",
        "integration scheme",
        choices=("semi_implicit_euler", "rk4"),
        read_only=True,
    ),
    ParamSpec(
        "command_velocity_scale",
        0.5,
        "position commands move at most this fraction of the velocity limits",
        range=(0.01, 1.0),
    ),
    ParamSpec("command_min_duration", 0.01, "shortest motion for a position command, s", range=(0.0, 60.0)),
    ParamSpec(
        "wrench_timeout",
        0.1,
        "drop a contact wrench not renewed for this long (sim s); 0: hold forever",
        range=(0.0, 1e6),
    ),
    ParamSpec(
        "wrench_sync_interval",
        0.0,
        "lockstep with the contact solver, s of sim time: a wrench stamped t applies from t + interval, and "
        "sim time waits at (latest stamp + interval) for the next one; 0: off (a wrench applies on arrival)",
        range=(0.0, 10.0),
        read_only=True,
    ),
]


class DynamicsNode(Node):
    """The simulated arm (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_parameters(self, PARAMS)
        self.p = p
        self.model = m = load_robot(p, NODE_NAME, tip_link=p["tip_link"])
        n = m.nq
        # joint order of the ROS interface; the core works in the model's order
        names = p["joint_names"] or list(m.joint_names)
        if sorted(names) != sorted(m.joint_names) or len(set(names)) != len(names):
            raise ParameterError(
                "joint_names",
                f"must be a permutation of the URDF's joints {m.joint_names}; got {names}",
                NODE_NAME,
            )
        self.joint_names = list(names)
        self._to_model = np.array([self.joint_names.index(j) for j in m.joint_names])  # ros -> model
        self._to_ros = np.array([m.joint_names.index(j) for j in self.joint_names])  # model -> ros
        try:
            q0_ros = parse_initial_positions(self.joint_names, p["initial_positions"])
        except InputError as exc:
            raise ParameterError("initial_positions", str(exc).split(": ", 1)[-1], NODE_NAME) from None
        gains = {}
        for key in ("kp", "kd"):
            g = np.asarray(p[key], dtype=float)
            if g.shape[0] not in (1, n):
                raise ParameterError(key, f"expected 1 or {n} values, got {g.shape[0]}", NODE_NAME)
            gains[key] = np.broadcast_to(g, (n,))[self._to_model] if g.shape[0] == n else g[0]
        controller = ComputedTorqueController(m, gains["kp"], gains["kd"], p["gravity"], p["limit_effort"])
        try:
            self.sim = ArmSimulator(m, q0_ros[self._to_model], controller, p["gravity"], p["integrator"])
        except InputError as exc:
            raise ParameterError("initial_positions", str(exc), NODE_NAME) from None

        self.dt = 1.0 / p["control_rate"]
        self.base_frame = p["base_frame"] or m.root_link
        # Sim time: 0 at start when this node owns /clock; otherwise offset to wall time so the
        # stamps are comparable with other nodes' wall clocks.
        self.t_origin = 0.0 if p["publish_clock"] else time.time()
        self._step_count = 0
        self._carry = 0.0
        self._last_wall: float | None = None
        self._next_pose_t = 0.0
        self._wrench_t: float | None = None
        self._sync = float(p["wrench_sync_interval"])
        self._horizon = self._sync  # sim time may run to here before the first wrench arrives
        self._pending: list[tuple[float, int, np.ndarray, str]] = []
        self._lag_warned = 0.0

        self.pub_js = self.create_publisher(JointState, "joint_states", 50)
        self.pub_pose = self.create_publisher(PoseStamped, "~/tool_pose", 10)
        self.pub_id = self.create_publisher(JointState, "~/inverse_dynamics", 10)
        self.pub_clock = None
        if p["publish_clock"]:
            self.pub_clock = self.create_publisher(
                ClockMsg, "/clock", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            )
        self.create_subscription(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory",
            guarded(self, "joint_trajectory_controller/joint_trajectory")(self._on_trajectory), 10,
        )  # fmt: skip
        self.create_subscription(
            Float64MultiArray, "forward_position_controller/commands",
            guarded(self, "forward_position_controller/commands")(self._on_positions), 10,
        )  # fmt: skip
        self.create_subscription(
            WrenchStamped, "contact/wrench", guarded(self, "contact/wrench")(self._on_wrench), 10
        )
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._timer = self.create_timer(
            1.0 / p["update_rate"],
            guarded(self, "update")(self._update),
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )
        self._warm_up()
        self._publish_clock()
        self._publish_joint_state()
        self.get_logger().info(
            f"simulating {m.nq} joints {self.joint_names} from {m.source} (tip {m.tip_link}); control "
            f"{p['control_rate']:g} Hz, real-time factor {p['real_time_factor']:g}, "
            f"{'publishing /clock' if p['publish_clock'] else 'wall-clock stamps'}"
        )

    def _warm_up(self) -> None:
        """Run every numerical path once (numba kernels load/compile) before the clock starts."""
        st = self.sim.state
        self.sim.controller.torque(st.q, st.qd, st.q, st.qd, st.qdd)
        self.model.forward_dynamics(st.q, st.qd, st.tau, gravity=self.sim.gravity)
        self.model.jacobian(st.q, self.model.tip_link)
        self.model.fk(st.q, self.model.tip_link)

    # -- time ---------------------------------------------------------------------------------------
    def sim_now(self) -> float:
        """Current sim time on the stamp scale, s."""
        return self.t_origin + self.sim.state.t

    def _stamp(self) -> Any:
        return cv.sec_to_time(self.sim_now())

    # -- commands -----------------------------------------------------------------------------------
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:
            q_ref, _, _ = self.sim.reference()
            self.sim.set_trajectory(TrajectoryInterpolator.hold(q_ref))
            self.get_logger().info("empty trajectory: holding the current reference")
            return
        names, times, pos, vel, acc = cv.joint_trajectory_to_arrays(msg)
        stamp = cv.time_to_sec(msg.header.stamp)
        start = None if stamp == 0.0 else stamp - self.t_origin
        if start is not None and start - self.sim.state.t > MAX_START_DELAY:
            # e.g. a wall-clock stamp while this node runs sim time from 0: it would never start
            raise InputError(
                f"header.stamp {stamp:.3f} s is {start - self.sim.state.t:.1f} s ahead of the node's time "
                f"{self.sim_now():.3f} s (more than {MAX_START_DELAY:g} s); stamp 0 starts now"
            )
        traj = self.sim.command_trajectory(names, times, pos, vel, acc, start_time=start)
        self.get_logger().info(
            f"trajectory accepted: {len(msg.points)} points, {traj.duration:.3f} s, {len(names)} joints"
        )

    def _on_positions(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        n = len(self.joint_names)
        if data.shape[0] != n:
            raise InputError(f"expected {n} positions ({', '.join(self.joint_names)}), got {data.shape[0]}")
        bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(data))]
        if bad:
            raise InputError(f"NaN or inf for {bad}")
        self.sim.command_positions(
            data[self._to_model], self.p["command_min_duration"], self.p["command_velocity_scale"]
        )

    def _on_wrench(self, msg: WrenchStamped) -> None:
        w = cv.wrench_to_array(msg)
        frame = msg.header.frame_id
        if frame not in ("", "world", self.model.root_link) and frame not in self.model.link_names:
            raise InputError(f"unknown frame_id {frame!r}; known frames: {self.model.link_names}")
        if self._sync <= 0.0:
            self.sim.set_wrench(w, frame)
            self._wrench_t = self.sim.state.t
            return
        # lockstep: computed from the state at `stamp`, it applies one interval later (or now if late)
        stamp = cv.time_to_sec(msg.header.stamp)
        t_state = self.sim.state.t if stamp == 0.0 else stamp - self.t_origin
        apply_t = max(t_state + self._sync, self.sim.state.t)
        bisect.insort(self._pending, (apply_t, len(self._pending), w, frame), key=lambda e: e[0])
        self._horizon = max(self._horizon, t_state + self._sync)

    def _apply_due_wrenches(self) -> None:
        t = self.sim.state.t
        while self._pending and self._pending[0][0] <= t + 1e-12:
            _, _, w, frame = self._pending.pop(0)
            self.sim.set_wrench(w, frame)
            self._wrench_t = t

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        q0 = parse_initial_positions(self.joint_names, self.p["initial_positions"])[self._to_model]
        st = self.sim.state
        st.q[:] = q0
        st.qd[:] = 0.0
        self.sim.clear_wrench()
        self.sim.set_trajectory(TrajectoryInterpolator.hold(q0))
        response.success = True
        response.message = f"reset to the initial positions at sim time {self.sim_now():.3f} s"
        return response

    # -- simulation loop ----------------------------------------------------------------------------
    def _update(self) -> None:
        now = time.monotonic()
        if self._last_wall is None:
            self._last_wall = now
            return
        rtf = float(self.get_parameter("real_time_factor").value)
        budget = self._carry + (now - self._last_wall) * rtf
        self._last_wall = now
        steps = int(budget / self.dt + 1e-9)
        max_steps = int(self.get_parameter("max_steps_per_update").value)
        if steps > max_steps:
            # (the first updates after start-up may find a backlog: executor start, discovery)
            if now - self._lag_warned > 10.0 and self._step_count > 10 * max_steps:
                self._lag_warned = now
                self.get_logger().warning(
                    f"cannot keep up: {steps} steps due, {max_steps} done per update; sim time runs slower "
                    f"than real_time_factor {rtf:g}"
                )
            steps, self._carry = max_steps, 0.0
        else:
            self._carry = budget - steps * self.dt
        decim = int(self.get_parameter("joint_state_decimation").value)
        pose_rate = float(self.get_parameter("tool_pose_rate").value)
        timeout = float(self.get_parameter("wrench_timeout").value)
        for _ in range(steps):
            if self._sync > 0.0:
                if self.sim.state.t + self.dt > self._horizon + 1e-9:
                    self._carry = 0.0  # waiting for the contact solver: no backlog builds up
                    break
                self._apply_due_wrenches()
            if self._wrench_t is not None and timeout > 0 and self.sim.state.t - self._wrench_t > timeout:
                self.sim.clear_wrench()
                self._wrench_t = None
            self.sim.step(self.dt)
            self._step_count += 1
            if self._step_count % decim == 0:
                self._publish_joint_state()
            if pose_rate > 0 and self.sim.state.t >= self._next_pose_t - 1e-12:
                self._next_pose_t = self.sim.state.t + 1.0 / pose_rate
                self._publish_pose_and_id()
        if steps:
            self._publish_clock()

    # -- output -------------------------------------------------------------------------------------
    def _publish_clock(self) -> None:
        if self.pub_clock is not None:
            self.pub_clock.publish(ClockMsg(clock=self._stamp()))

    def _publish_joint_state(self) -> None:
        st = self.sim.state
        r = self._to_ros
        self.pub_js.publish(
            cv.arrays_to_joint_state(self.joint_names, st.q[r], st.qd[r], st.tau[r], self._stamp())
        )

    def _publish_pose_and_id(self) -> None:
        st = self.sim.state
        stamp = self._stamp()
        X = self.model.fk(st.q, self.model.tip_link)
        self.pub_pose.publish(cv.matrix_to_pose_stamped(X, self.base_frame, stamp))
        if self.pub_id.get_subscription_count() > 0:  # an RNEA call only when someone listens
            tau_ff = self.model.rnea(st.q_ref, st.qd_ref, st.qdd_ref, gravity=self.sim.gravity)
            r = self._to_ros
            self.pub_id.publish(
                cv.arrays_to_joint_state(self.joint_names, st.q_ref[r], st.qd_ref[r], tau_ff[r], stamp)
            )


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim dynamics_node [--ros-args ...]``."""
    return run_node(DynamicsNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())
