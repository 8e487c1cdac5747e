"""The simulated position-controlled arm: reference trajectories, computed-torque control, integration.

ROS-free; ``nodes/dynamics_node.py`` is the thin adapter. Three parts:

- the reference: a :class:`~robot_grinding_sim.core.robot.joint_trajectory.TrajectoryInterpolator`
  (:mod:`~robot_grinding_sim.core.robot.joint_trajectory`: joint_trajectory_controller's rules);
- :class:`ComputedTorqueController`: ``tau = M(q) (qdd_ref + Kp e + Kd e_dot) + C(q, qd) qd + g(q)``
  with ``e = q_ref - q``, evaluated as one RNEA call ``rnea(q, qd, qdd_ref + Kp e + Kd e_dot)``;
  clipped to the joint effort limits (a real drive saturates).
- :class:`ArmSimulator`: holds the state (t, q, qd) and integrates the forward dynamics
  ``M qdd + C qd + g = tau + J(q, link)^T w`` with the external tool wrench ``w`` (root frame,
  acting on ``link`` at its origin). Semi-implicit (symplectic) Euler by default, RK4 on request;
  the control torque is held over a step (zero-order hold, as a digital controller does).
  At a position limit the joint stops: the position is clamped and the velocity into the limit
  is removed (an inelastic end stop).

Units: SI (rad, rad/s, N m, s); frames: the model's root frame (``base_link`` for the default arm).
Errors: :class:`~robot_grinding_sim.core.errors.InputError` naming the joint, point and problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError, ModelError
from robot_grinding_sim.core.robot import arm_kernels as ak
from robot_grinding_sim.core.robot.joint_trajectory import JointLimits, TrajectoryInterpolator
from robot_grinding_sim.core.robot.velocity_limits import VelocityClamp, within_velocity_limits


class ComputedTorqueController:
    """Computed-torque (inverse-dynamics) joint controller.

    ``tau = rnea(q, qd, qdd_ref + Kp (q_ref - q) + Kd (qd_ref - qd))``, clipped to +-effort limit.
    With an exact model the closed loop is n decoupled ``e'' + Kd e' + Kp e = 0``: choose
    ``Kp = w^2``, ``Kd = 2 w`` for critical damping at natural frequency w (rad/s).

    Args:
        model: the RobotModel.
        kp: (n,) or scalar position gains, 1/s^2.
        kd: (n,) or scalar velocity gains, 1/s.
        gravity: (3,) root-frame gravity the controller compensates, m/s^2.
        limit_effort: clip to the model's effort limits.
    """

    def __init__(
        self,
        model: Any,
        kp: Sequence[float] | float,
        kd: Sequence[float] | float,
        gravity: Sequence[float] = (0.0, 0.0, -9.81),
        limit_effort: bool = True,
    ) -> None:
        n = model.nq
        self.model = model
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), (n,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), (n,)).copy()
        if np.any(self.kp < 0) or np.any(self.kd < 0) or not np.all(np.isfinite(self.kp + self.kd)):
            raise InputError(
                f"gains must be finite and >= 0; got kp={self.kp.tolist()} kd={self.kd.tolist()}"
            )
        self.gravity = np.ascontiguousarray(gravity, dtype=float)
        limits = np.asarray(model.effort_limits, dtype=float)
        usable = np.isfinite(limits) & (limits > 0)
        self.effort_limits = np.where(usable, limits, np.inf) if limit_effort else None
        # gains, effort limits and joint limits as the compiled kernels take them (arm_kernels)
        self.arm = np.empty((ak.ARM_ROWS, n))
        self.arm[ak.KP], self.arm[ak.KD] = self.kp, self.kd
        self.arm[ak.EFFORT] = np.inf if self.effort_limits is None else self.effort_limits
        self.arm[ak.LOWER], self.arm[ak.UPPER] = model.lower, model.upper

    def torque(
        self, q: np.ndarray, qd: np.ndarray, q_ref: np.ndarray, qd_ref: np.ndarray, qdd_ref: np.ndarray
    ) -> np.ndarray:
        """Joint torques (n,), N m."""
        jt, jd, bd, ws, _, _ = self.model.kernel_arrays(self.model.tip_link)
        a = [np.ascontiguousarray(x, dtype=float) for x in (q, qd, q_ref, qd_ref, qdd_ref)]
        tau = np.empty(self.model.nq)
        if not ak.computed_torque(*a, self.arm, self.gravity, jt, jd, bd, ws, tau):
            raise InputError(f"computed torque: NaN or inf in q {a[0].tolist()}, qd {a[1].tolist()} or the reference")
        return tau


# --------------------------------------------------------------------------------------------------
# simulation


def wrench_to_root(model: Any, q: np.ndarray, wrench: Sequence[float], frame: str) -> tuple[np.ndarray, str]:
    """Express a wrench given in ``frame`` (about its origin) in the root frame.

    Args:
        model: the RobotModel.
        q: (n,) joint positions (the frame's current pose).
        wrench: (6,) [force N; torque N m] in ``frame``, torque about the frame's origin.
        frame: a link of the model. The root link (or ``""``/``"world"``, taken to coincide with
            the root) means: root-frame axes, acting on the tip link about the tip's origin.

    Returns:
        ((6,) wrench in root-frame axes about the acting link's origin, the acting link).
    """
    w = np.asarray(wrench, dtype=float).reshape(-1)
    if w.shape != (6,) or not np.all(np.isfinite(w)):
        raise InputError(f"wrench: expected 6 finite values [fx fy fz tx ty tz]; got {w.tolist()}")
    if frame in ("", "world", model.root_link):
        return w.copy(), model.tip_link
    if frame not in model.link_names:
        raise InputError(f"wrench: unknown frame {frame!r}; known frames: {model.link_names}")
    R = model.fk(q, frame)[:3, :3]
    return np.concatenate([R @ w[:3], R @ w[3:]]), frame


@dataclass
class ArmState:
    """Simulation state and the last step's signals (all (n,) arrays, SI units)."""

    t: float
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray  #: motor torque commanded by the controller over the last step
    tau_ext: np.ndarray  #: joint torque of the external wrench, J^T w
    q_ref: np.ndarray
    qd_ref: np.ndarray
    qdd_ref: np.ndarray


class ArmSimulator:
    """A position-controlled arm: computed-torque control on a reference, forward dynamics.

    Args:
        model: the RobotModel.
        q0: (n,) initial positions (must be within limits); the arm starts at rest holding them.
        controller: the joint controller (default: computed torque, w = 50 rad/s critically damped).
        gravity: (3,) root-frame gravity of the simulated world, m/s^2.
        integrator: "semi_implicit_euler" (default) or "rk4".
    """

    INTEGRATORS = ("semi_implicit_euler", "rk4")

    def __init__(
        self,
        model: Any,
        q0: Sequence[float] | None = None,
        controller: ComputedTorqueController | None = None,
        gravity: Sequence[float] = (0.0, 0.0, -9.81),
        integrator: str = "semi_implicit_euler",
    ) -> None:
        if integrator not in self.INTEGRATORS:
            raise InputError(f"integrator must be one of {self.INTEGRATORS}; got {integrator!r}")
        self.model = model
        self.limits = JointLimits.from_model(model)
        n = model.nq
        q = np.zeros(n) if q0 is None else np.asarray(q0, dtype=float).reshape(-1)
        if q.shape != (n,):
            raise InputError(
                f"initial positions: expected {n} values ({', '.join(model.joint_names)}), got {q.shape[0]}"
            )
        self.limits.check_positions(q, "initial positions")
        self.gravity = np.ascontiguousarray(gravity, dtype=float)
        if self.gravity.shape != (3,) or not np.all(np.isfinite(self.gravity)):
            raise InputError(f"gravity must be a finite 3-vector; got {gravity!r}")
        self.controller = controller or ComputedTorqueController(model, 2500.0, 100.0, gravity=self.gravity)
        self.integrator = integrator
        z = np.zeros(n)
        self.state = ArmState(0.0, q.copy(), z, z.copy(), z.copy(), z.copy(), q.copy(), z.copy(), z.copy())
        self.trajectory = TrajectoryInterpolator.hold(q)
        self.trajectory_start = 0.0
        # a trajectory that starts later: the current one is followed until then
        self._next: tuple[TrajectoryInterpolator, float] | None = None
        self._wrench = np.zeros(6)  # root-frame axes, about the acting link's origin
        self._wrench_link: str | None = None
        #: what the last command_trajectory(limit_velocity=True) slowed down, or None
        self.last_clamp: VelocityClamp | None = None

    # -- commands ---------------------------------------------------------------------------------
    def reference(self, t: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reference (q, qd, qdd) at sim time ``t`` (default now)."""
        t = self.state.t if t is None else t
        if self._next is not None and t >= self._next[1]:
            traj, start = self._next
            return traj.sample(t - start)
        return self.trajectory.sample(t - self.trajectory_start)

    def active_trajectory(self) -> tuple[TrajectoryInterpolator, float]:
        """(the trajectory followed from now on, its start time, s): a pending one once its start
        time has come."""
        if self._next is not None and self.state.t >= self._next[1]:
            (self.trajectory, self.trajectory_start), self._next = self._next, None
        return self.trajectory, self.trajectory_start

    def set_trajectory(self, traj: TrajectoryInterpolator, start_time: float | None = None) -> None:
        """Follow ``traj`` from sim time ``start_time`` (default now); replaces the current goal.

        A later ``start_time`` leaves the current goal in force until then (a controller that gets
        a trajectory stamped ahead keeps moving, it does not jump to the new first point); a
        second pending trajectory replaces the first."""
        start = self.state.t if start_time is None else float(start_time)
        if start > self.state.t:
            self._next = (traj, start)
            return
        self._next = None
        self.trajectory, self.trajectory_start = traj, start

    def shift_commands(self, delta: float) -> None:
        """Start the trajectory followed, and one pending, ``delta`` s earlier in sim time: sim time
        that is skipped (a wall-clock-stamped arm catching up) while the commands keep their times."""
        self.trajectory_start -= delta
        if self._next is not None:
            self._next = (self._next[0], self._next[1] - delta)

    def command_trajectory(
        self,
        names: Sequence[str],
        times: Sequence[float],
        positions: np.ndarray,
        velocities: np.ndarray | None = None,
        accelerations: np.ndarray | None = None,
        start_time: float | None = None,
        limit_velocity: bool = False,
    ) -> TrajectoryInterpolator:
        """Validate and follow a joint trajectory (see :meth:`TrajectoryInterpolator.build`).

        It starts at ``start_time`` (sim s, default now) from the reference at that time. A
        trajectory that fails validation raises InputError and leaves the current goal unchanged.

        With ``limit_velocity``, the motion as it will be followed (from the reference, through the
        interpolation) is held to the joint velocity limits, as a drive limits its speed
        (:func:`~robot_grinding_sim.core.robot.velocity_limits.within_velocity_limits`; what was
        slowed down in ``last_clamp``, None when nothing was; InputError if it cannot be).
        """
        t0 = self.state.t if start_time is None else max(float(start_time), self.state.t)
        start = self.reference(t0)
        traj = TrajectoryInterpolator.build(self.limits, names, times, positions, velocities, accelerations,
                                            start=start, check_speed=not limit_velocity)
        clamp = None
        if limit_velocity:
            t = np.asarray(times, dtype=float)

            def stretched(factor: float) -> TrajectoryInterpolator:
                v = None if velocities is None else np.asarray(velocities, dtype=float) / factor
                a = None if accelerations is None else np.asarray(accelerations, dtype=float) / factor**2
                return TrajectoryInterpolator.build(self.limits, names, t * factor, positions, v, a, start=start)

            traj, clamp = within_velocity_limits(traj, stretched, self.limits.names, self.limits.velocity)
        self.set_trajectory(traj, t0)
        self.last_clamp = clamp
        return traj

    def command_positions(
        self, target: Sequence[float], min_duration: float = 0.0, velocity_scale: float = 0.5
    ) -> TrajectoryInterpolator:
        """Move to ``target`` (n,) (:meth:`TrajectoryInterpolator.to_target`); InputError keeps the goal."""
        traj = TrajectoryInterpolator.to_target(
            self.limits, target, self.reference(), min_duration, velocity_scale, what="position command"
        )
        self.set_trajectory(traj)
        return traj

    def set_wrench(self, wrench: Sequence[float], frame: str) -> None:
        """The external wrench on the arm, held until replaced: (6,) in ``frame`` about its origin.

        It is converted to root-frame axes at the current configuration and then held constant in
        the root frame (a contact force is fixed in the world, not in the tool), acting on
        ``frame``'s link at its origin. See :func:`wrench_to_root`.
        """
        w, link = wrench_to_root(self.model, self.state.q, wrench, frame)
        self._wrench, self._wrench_link = w, link

    def clear_wrench(self) -> None:
        self._wrench[:] = 0.0
        self._wrench_link = None

    @property
    def wrench(self) -> tuple[np.ndarray, str | None]:
        """(root-frame wrench (6,), acting link or None)."""
        return self._wrench.copy(), self._wrench_link

    # -- dynamics ---------------------------------------------------------------------------------
    def external_torque(self, q: np.ndarray) -> np.ndarray:
        """tau_ext = J(q, link)^T w for the held wrench (zeros without one), (n,)."""
        if self._wrench_link is None or not self._wrench.any():
            return np.zeros(self.model.nq)
        J = self.model.jacobian(q, self._wrench_link)
        return J.T @ self._wrench

    def _accel(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tau_ext = self.external_torque(q)
        return self.model.forward_dynamics(q, qd, tau + tau_ext, gravity=self.gravity), tau_ext

    def step(self, dt: float, control: bool = True) -> ArmState:
        """Advance the simulation by ``dt`` seconds; returns the new state.

        Args:
            dt: step, s (> 0).
            control: apply the controller (False: zero motor torque, the arm falls freely).
        """
        if not dt > 0 or not math.isfinite(dt):
            raise InputError(f"dt must be a finite positive step in seconds; got {dt}")
        st = self.state
        self.active_trajectory()
        if self.integrator == "semi_implicit_euler":
            return self._step_compiled(dt, control)
        q_ref, qd_ref, qdd_ref = self.reference(st.t)
        if control:
            tau = self.controller.torque(st.q, st.qd, q_ref, qd_ref, qdd_ref)
        else:
            tau = np.zeros(self.model.nq)
        if self.integrator == "rk4":
            q, qd = st.q, st.qd
            a1, tau_ext = self._accel(q, qd, tau)
            k1q, k1v = qd, a1
            k2q, k2v = qd + 0.5 * dt * k1v, self._accel(q + 0.5 * dt * k1q, qd + 0.5 * dt * k1v, tau)[0]
            k3q, k3v = qd + 0.5 * dt * k2v, self._accel(q + 0.5 * dt * k2q, qd + 0.5 * dt * k2v, tau)[0]
            k4q, k4v = qd + dt * k3v, self._accel(q + dt * k3q, qd + dt * k3v, tau)[0]
            q_new = q + dt / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q)
            qd_new = qd + dt / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
            qdd = a1
        # end stops: clamp and remove the velocity into the stop
        lo, hi = self.limits.lower, self.limits.upper
        below, above = q_new < lo, q_new > hi
        if below.any() or above.any():  # (ndarray methods: np.any's dispatch costs ~20 us per step)
            q_new = np.clip(q_new, lo, hi)
            qd_new = np.where(below & (qd_new < 0) | above & (qd_new > 0), 0.0, qd_new)
        self.state = ArmState(st.t + dt, q_new, qd_new, qdd, tau, tau_ext, q_ref, qd_ref, qdd_ref)
        return self.state

    def _step_compiled(self, dt: float, control: bool) -> ArmState:
        """Semi-implicit Euler: one call of the compiled step (arm_kernels.arm_advance)."""
        st = self.state
        n = self.model.nq
        cur = np.empty((ak.ST_ROWS, n))
        cur[ak.Q], cur[ak.QD] = st.q, st.qd
        out = np.empty((ak.ST_ROWS, n))
        knots, coeffs, last = self.trajectory.arrays()
        link = self._wrench_link if self._wrench_link is not None else self.model.tip_link
        jt, jd, bd, ws, wbody, wX = self.model.kernel_arrays(link)
        ctrl = self.controller
        code = ak.arm_advance(st.t, dt, cur, knots, coeffs, last, self.trajectory_start, control, ctrl.arm,
                              ctrl.gravity, self.gravity, jt, jd, bd, ws, wbody, wX, self._wrench, np.empty((n, n)),
                              np.zeros((n, n)), False, out)
        if code == ak.E.state_not_finite:
            raise InputError(f"arm step: NaN or inf in q {st.q.tolist()}, qd {st.qd.tolist()} or the wrench "
                             f"{self._wrench.tolist()}")
        if code == ak.E.mass_not_pd:
            raise ModelError(f"{self.model.source}: mass matrix not positive definite at q={st.q.tolist()}")
        self.state = ArmState(st.t + dt, out[ak.Q], out[ak.QD], out[ak.QDD], out[ak.TAU], out[ak.TAU_EXT],
                              out[ak.Q_REF], out[ak.QD_REF], out[ak.QDD_REF])
        return self.state

    def energy(self) -> float:
        """Kinetic + gravitational potential energy of the arm, J."""
        st = self.state
        return float(self.model.kinetic_energy(st.q, st.qd) + self.model.potential_energy(st.q, self.gravity))


def parse_initial_positions(
    joint_names: Sequence[str], values: Sequence[float] | Mapping[str, float]
) -> np.ndarray:
    """Initial positions from a list in joint order (or a {name: value} map), (n,)."""
    n = len(joint_names)
    if isinstance(values, Mapping):
        unknown = sorted(set(values) - set(joint_names))
        if unknown:
            raise InputError(f"initial_positions: unknown joints {unknown}")
        return np.array([float(values.get(nm, 0.0)) for nm in joint_names])
    v = np.asarray(values, dtype=float).reshape(-1)
    if v.shape[0] != n:
        raise InputError(
            f"initial_positions: expected {n} values ({', '.join(joint_names)}), got {v.shape[0]}"
        )
    return v
