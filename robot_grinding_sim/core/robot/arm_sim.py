"""The simulated position-controlled arm: reference trajectories, computed-torque control, integration.

ROS-free; ``nodes/dynamics_node.py`` is the thin adapter. Three parts:

- :class:`TrajectoryInterpolator`: a joint trajectory (points at ``time_from_start``) as piecewise
  polynomials. Segments are quintic where positions, velocities and accelerations are given,
  cubic Hermite where positions and velocities are given, and a C2 cubic spline (clamped to the
  start velocity and to rest at the end) where only positions are given. If the first point is
  later than t = 0 the trajectory starts from the current reference state (like ros2_control's
  joint_trajectory_controller). After the last point it holds the last position at rest.
  Joints the trajectory does not name hold their current reference position.
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
from robot_grinding_sim.core.robot.velocity_limits import VelocityClamp, peak_velocity, within_velocity_limits

#: Slack on joint limits when validating commands (rad or m): commands read back from
#: joint_states round to float32 in some tools.
LIMIT_TOLERANCE = 1e-6
#: relative slack of the mean velocity between two points over the velocity limit (times in files
#: are rounded to 1 ns: 1e-6 of a 1 ms segment)
CHORD_TOLERANCE = 1e-4


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits in the controller's joint order; +-inf where the URDF gives none."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray

    @classmethod
    def from_model(cls, model: Any) -> JointLimits:
        """From a :class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` (or anything with its attributes)."""
        return cls(
            tuple(model.joint_names),
            np.asarray(model.lower, dtype=float),
            np.asarray(model.upper, dtype=float),
            np.asarray(model.velocity_limits, dtype=float),
            np.asarray(model.effort_limits, dtype=float),
        )

    @property
    def n(self) -> int:
        return len(self.names)

    def check_positions(self, q: np.ndarray, what: str) -> None:
        """Raise InputError if any joint of (n,) ``q`` is NaN or outside [lower, upper]."""
        q = np.asarray(q, dtype=float)
        for i, name in enumerate(self.names):
            if not math.isfinite(q[i]):
                raise InputError(f"{what}: {name} is {q[i]}")
            if q[i] < self.lower[i] - LIMIT_TOLERANCE or q[i] > self.upper[i] + LIMIT_TOLERANCE:
                raise InputError(
                    f"{what}: {name} = {q[i]:.6g} is outside its limits "
                    f"[{self.lower[i]:.6g}, {self.upper[i]:.6g}]"
                )


# --------------------------------------------------------------------------------------------------
# trajectories


def _cubic_coeffs(p0, v0, p1, v1, T):
    """(6, ...) coefficients of the cubic Hermite segments from (p0, v0) to (p1, v1) over T
    (arrays of one segment (n,), or of many (S, n) with T (S, 1))."""
    h = p1 - p0
    c = np.zeros((6, *p0.shape))
    c[0], c[1] = p0, v0
    c[2] = (3.0 * h - (2.0 * v0 + v1) * T) / T**2
    c[3] = (-2.0 * h + (v0 + v1) * T) / T**3
    return c


def _quintic_coeffs(p0, v0, a0, p1, v1, a1, T):
    """As :func:`_cubic_coeffs`, with the accelerations a0, a1: the quintic segments."""
    h = p1 - p0
    c = np.zeros((6, *p0.shape))
    c[0], c[1], c[2] = p0, v0, 0.5 * a0
    c[3] = (20.0 * h - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T**2) / (2.0 * T**3)
    c[4] = (-30.0 * h + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T**2) / (2.0 * T**4)
    c[5] = (12.0 * h - 6.0 * (v1 + v0) * T + (a1 - a0) * T**2) / (2.0 * T**5)
    return c


class TrajectoryInterpolator:
    """A joint-space reference q_ref(t), qd_ref(t), qdd_ref(t) for all n joints of the arm.

    Build it with :meth:`build` (validates and completes a trajectory message's content) or
    :meth:`hold` (stay at a configuration).

    Attributes:
        knots: (K,) knot times, s, from the trajectory start (knots[0] == 0).
        positions: (K, n) knot positions (all joints, controller order).
        duration: time of the last knot, s.
    """

    def __init__(self, knots: np.ndarray, coeffs: np.ndarray, positions: np.ndarray) -> None:
        self.knots = knots
        self._coeffs = coeffs  # (K-1, 6, n): polynomial in the local time of each segment
        self.positions = positions
        self.duration = float(knots[-1])

    @classmethod
    def hold(cls, q: Sequence[float]) -> TrajectoryInterpolator:
        """Stay at ``q`` (n,) at rest."""
        q = np.asarray(q, dtype=float).reshape(1, -1)
        return cls(np.zeros(1), np.zeros((0, 6, q.shape[1])), q.copy())

    @classmethod
    def build(
        cls,
        limits: JointLimits,
        names: Sequence[str],
        times: Sequence[float],
        positions: np.ndarray,
        velocities: np.ndarray | None = None,
        accelerations: np.ndarray | None = None,
        start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        what: str = "joint_trajectory",
        check_speed: bool = True,
    ) -> TrajectoryInterpolator:
        """Validate a trajectory and build its interpolant.

        Args:
            limits: the arm's joints and limits (defines the joint order n).
            names: the trajectory's joint names (a subset of ``limits.names``, any order).
            times: (K,) time_from_start of each point, s, strictly increasing, >= 0.
            positions: (K, m) positions for the m named joints.
            velocities, accelerations: (K, m) or None.
            start: the current reference (q, qd, qdd), each (n,): the trajectory starts from it
                when the first point is later than 0, and unnamed joints hold q. Default: the
                first point, at rest.
            what: the name used in error messages.
            check_speed: refuse velocities above the limits (at the points, or on average between
                two points). False for a command a drive slows down to its limits instead
                (:meth:`ArmSimulator.command_trajectory` with ``limit_velocity``).

        Raises:
            InputError: unknown or duplicate joint names, wrong shapes, NaN/inf, times not strictly
                increasing or negative, positions outside the joint limits, velocities above the
                velocity limits (with ``check_speed``), or unnamed joints without a ``start``.
        """
        names = list(names)
        unknown = [nm for nm in names if nm not in limits.names]
        if unknown:
            raise InputError(f"{what}: unknown joint names {unknown} (the arm has {list(limits.names)})")
        if len(set(names)) != len(names):
            raise InputError(f"{what}: duplicate joint names in {names}")
        if not names:
            raise InputError(f"{what}: no joint names")
        t = np.asarray(times, dtype=float).reshape(-1)
        k, m, n = t.shape[0], len(names), limits.n
        if k == 0:
            raise InputError(f"{what}: no points")

        def _arr(a: Any, label: str) -> np.ndarray | None:
            if a is None:
                return None
            a = np.asarray(a, dtype=float)
            if a.shape != (k, m):
                raise InputError(f"{what}: {label} must have shape ({k}, {m}); got {a.shape}")
            if not np.all(np.isfinite(a)):
                i, j = (int(x) for x in np.argwhere(~np.isfinite(a))[0])
                raise InputError(f"{what}: point {i}: {label} of {names[j]} is {a[i, j]}")
            return a

        P = _arr(positions, "positions")
        V, A = _arr(velocities, "velocities"), _arr(accelerations, "accelerations")
        if A is not None and V is None:
            raise InputError(f"{what}: accelerations given without velocities")
        if not np.all(np.isfinite(t)):
            raise InputError(f"{what}: time_from_start holds NaN or inf")
        if t[0] < 0:
            raise InputError(f"{what}: point 0: negative time_from_start {t[0]} s")
        if k > 1 and np.any(np.diff(t) <= 0):
            i = int(np.argwhere(np.diff(t) <= 0)[0][0]) + 1
            raise InputError(f"{what}: point {i}: time_from_start {t[i]} s is not after {t[i - 1]} s")
        idx = np.array([limits.names.index(nm) for nm in names])

        if start is None:
            if m != n:
                missing = [nm for nm in limits.names if nm not in names]
                raise InputError(f"{what}: missing joints {missing}")
            q0, qd0, qdd0 = np.zeros(n), np.zeros(n), np.zeros(n)
        else:
            q0, qd0, qdd0 = (np.asarray(x, dtype=float).reshape(n) for x in start)
        # Full-arm arrays: unnamed joints hold their start position at rest.
        Pf = np.tile(q0, (k, 1))
        Pf[:, idx] = P
        outside = (Pf < limits.lower - LIMIT_TOLERANCE) | (Pf > limits.upper + LIMIT_TOLERANCE)
        if np.any(outside):  # the first such point, with check_positions' message
            i = int(np.argwhere(outside)[0][0])
            limits.check_positions(Pf[i], f"{what}: point {i}")
        Vf = Af = None
        if V is not None:
            Vf = np.zeros((k, n))
            Vf[:, idx] = V
            over = np.abs(Vf) > limits.velocity * (1 + 1e-9)
            if check_speed and np.any(over):
                i, j = (int(x) for x in np.argwhere(over)[0])
                raise InputError(
                    f"{what}: point {i}: velocity of {limits.names[j]} {Vf[i, j]:.6g} exceeds its limit "
                    f"{limits.velocity[j]:.6g}"
                )
        if k > 1 and check_speed:
            # between points: the mean velocity of a segment is at most its peak, so a segment whose
            # mean exceeds the limit (a 1 rad jump between points 20 ms apart) is refused whatever the
            # velocities at its ends say (with slack for the rounding of times written to files)
            mean = np.diff(Pf, axis=0) / np.diff(t)[:, None]
            over = np.abs(mean) > limits.velocity * (1 + CHORD_TOLERANCE)
            if np.any(over):
                i, j = (int(x) for x in np.argwhere(over)[0])
                raise InputError(
                    f"{what}: points {i} -> {i + 1}: {limits.names[j]} moves {Pf[i + 1, j] - Pf[i, j]:.6g} in "
                    f"{t[i + 1] - t[i]:.6g} s, a mean velocity of {mean[i, j]:.6g} beyond its limit "
                    f"{limits.velocity[j]:.6g}"
                )
        if A is not None:
            Af = np.zeros((k, n))
            Af[:, idx] = A

        if start is None and t[0] > 0:
            start = (Pf[0], np.zeros(n), np.zeros(n))
            q0 = Pf[0]
        if t[0] > 0:
            # start from the current reference at t = 0
            t = np.concatenate([[0.0], t])
            Pf = np.vstack([q0, Pf])
            if Vf is not None:
                Vf = np.vstack([qd0, Vf])
            if Af is not None:
                Af = np.vstack([qdd0, Af])
            v_start = qd0
        else:
            v_start = qd0 if start is not None else np.zeros(n)
        K = t.shape[0]
        if K == 1:
            return cls.hold(Pf[0])
        if Vf is None:
            from scipy.interpolate import CubicSpline

            # C2 spline through the points, leaving with the start velocity, arriving at rest.
            spline = CubicSpline(t, Pf, axis=0, bc_type=((1, v_start), (1, np.zeros(n))))
            Vf = spline(t, 1)
        # every segment at once (a job's command has ~16,000: a Python loop took 0.1 s of the
        # controller's callback); the formulas of _cubic_coeffs / _quintic_coeffs with (K-1, 1) T
        T = np.diff(t)[:, None]
        if Af is not None:
            coeffs = _quintic_coeffs(Pf[:-1], Vf[:-1], Af[:-1], Pf[1:], Vf[1:], Af[1:], T)
        else:
            coeffs = _cubic_coeffs(Pf[:-1], Vf[:-1], Pf[1:], Vf[1:], T)
        return cls(t, np.ascontiguousarray(coeffs.transpose(1, 0, 2)), Pf)

    @classmethod
    def to_target(
        cls,
        limits: JointLimits,
        target: Sequence[float],
        start: tuple[np.ndarray, np.ndarray, np.ndarray],
        min_duration: float = 0.0,
        velocity_scale: float = 0.5,
        what: str = "command",
    ) -> TrajectoryInterpolator:
        """A cubic from the current reference to ``target`` (n,), arriving at rest.

        The duration is the longer of ``min_duration`` and the time needed to keep every joint's
        peak velocity (1.5 x the mean for a rest-to-rest cubic) within ``velocity_scale`` x its
        velocity limit. This is how a position command (``forward_position_controller``) is
        followed: a real drive limits the rate too.
        """
        q = np.asarray(target, dtype=float).reshape(-1)
        if q.shape[0] != limits.n:
            raise InputError(
                f"{what}: expected {limits.n} positions ({', '.join(limits.names)}), got {q.shape[0]}"
            )
        limits.check_positions(q, what)
        q0, qd0, _ = (np.asarray(x, dtype=float) for x in start)
        vmax = np.where(np.isfinite(limits.velocity), limits.velocity, np.inf) * velocity_scale
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(vmax > 0, 1.5 * np.abs(q - q0) / vmax, 0.0)
        T = float(max(min_duration, np.max(need, initial=0.0)))
        if T <= 0.0:
            return cls.hold(q)
        t = np.array([0.0, T])
        coeffs = _cubic_coeffs(q0, qd0, q, np.zeros_like(q), T)[None]
        return cls(t, coeffs, np.vstack([q0, q]))

    def peak_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        """(n,) the largest ``|qd_ref|`` of each joint, rad/s, and (n,) when, s from the start
        (:func:`~robot_grinding_sim.core.robot.velocity_limits.peak_velocity`)."""
        return peak_velocity(self.knots, self._coeffs)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reference (q, qd, qdd), each (n,), at ``t`` s after the start (clamped to [0, duration])."""
        out = np.empty((3, self.positions.shape[1]))
        ak.trajectory_sample(self.knots, self._coeffs, self.positions[-1], float(t), out[0], out[1], out[2])
        return out[0], out[1], out[2]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(knots (K,), coefficients (K-1, 6, n), last position (n,)): the compiled kernels' form."""
        return self.knots, self._coeffs, self.positions[-1]


# --------------------------------------------------------------------------------------------------
# control


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
