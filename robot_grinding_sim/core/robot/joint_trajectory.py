"""A joint trajectory as ros2_control's ``joint_trajectory_controller`` follows it: limits, validation, interpolant.

ROS-free. :class:`JointLimits` (the arm's joints and limits) and :class:`TrajectoryInterpolator`: a
joint trajectory (points at ``time_from_start``) as piecewise polynomials. Segments are quintic
where positions, velocities and accelerations are given, cubic Hermite where positions and
velocities are given, and a C2 cubic spline (clamped to the start velocity and to rest at the end)
where only positions are given. If the first point is later than t = 0 the trajectory starts from
the current reference state (like ros2_control's joint_trajectory_controller). After the last point
it holds the last position at rest. Joints the trajectory does not name hold their current
reference position. The simulated arm (:mod:`~robot_grinding_sim.core.robot.arm_sim`), the plan's
job trajectory and the driver's force control follow these.

Units: SI (rad, rad/s, s). Errors: :class:`~robot_grinding_sim.core.errors.InputError` naming the
joint, point and problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot import arm_kernels as ak
from robot_grinding_sim.core.robot.velocity_limits import peak_velocity

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
    """(6, ...) coefficients of the cubic Hermite segments (:func:`arm_kernels.cubic_hermite
    <robot_grinding_sim.core.robot.arm_kernels.cubic_hermite>`) from (p0, v0) to (p1, v1) over T
    (arrays of one segment (n,), or of many (S, n) with T (S, 1))."""
    c = np.zeros((6, *p0.shape))
    c[0], c[1] = p0, v0
    c[2], c[3] = ak.cubic_hermite(p0, v0, p1, v1, T)
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
