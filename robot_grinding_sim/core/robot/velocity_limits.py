"""A joint trajectory held to the joint velocity limits, as a drive limits its speed.

The simulated arm (:class:`~robot_grinding_sim.core.robot.arm_sim.ArmSimulator`, dynamics_node)
follows a command through its interpolant (piecewise polynomials in each segment's local time,
``q(tau) = c0 + c1 tau + ... + c5 tau^5``). A command whose interpolated velocity exceeds a joint's
limit (a 3 rad step in 10 ms peaks at 450 rad/s) is not what a real arm does: its drives saturate,
or its controller refuses or slows it. :func:`within_velocity_limits` slows it down: the times are
stretched by the smallest factor that keeps every joint within its limit (velocities given at the
knots are divided by the factor, accelerations by its square), and :class:`VelocityClamp` says by
how much and why. Units: rad, rad/s (m, m/s for prismatic joints), s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError

__all__ = ["MAX_SLOWDOWN", "VelocityClamp", "peak_velocity", "within_velocity_limits"]

#: the most a command is slowed down (a larger factor: refused)
MAX_SLOWDOWN = 1e4


def peak_velocity(knots: np.ndarray, coeffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest ``|qd|`` of each joint over a piecewise polynomial and when.

    Args:
        knots: (K,) segment start times, s (knots[0] == 0).
        coeffs: (K-1, 6, n) each segment's polynomial coefficients in its local time.

    Returns:
        ((n,) peak |velocity|, (n,) its time from the start, s): exact for cubic segments (the
        ends and the extremum inside, ``c1 - c2^2 / (3 c3)`` at ``tau = -c2 / (3 c3)``), sampled at
        64 points for quintic ones.
    """
    c = coeffs
    n = c.shape[2]
    if c.shape[0] == 0:
        return np.zeros(n), np.zeros(n)
    t0 = knots[:-1, None]  # (S, 1)
    T = np.diff(knots)[:, None]
    c1, c2, c3, c4, c5 = c[:, 1], c[:, 2], c[:, 3], c[:, 4], c[:, 5]
    cand = [np.abs(c1), np.abs(c1 + T * (2 * c2 + T * (3 * c3 + T * (4 * c4 + T * 5 * c5))))]
    when = [np.broadcast_to(t0, c1.shape), np.broadcast_to(t0 + T, c1.shape)]
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = -c2 / (3.0 * c3)
        vertex = c1 - c2**2 / (3.0 * c3)
    cubic = (c4 == 0.0) & (c5 == 0.0)
    inside = cubic & (c3 != 0.0) & (tau > 0.0) & (tau < T)
    cand.append(np.where(inside, np.abs(vertex), 0.0))
    when.append(np.where(inside, t0 + tau, 0.0))
    quintic = ~cubic.all(axis=1)
    if quintic.any():  # velocity is a quartic: sampled
        u = np.linspace(0.0, 1.0, 64)[None, :, None] * T[quintic][:, :, None]  # (Q, 64, 1)
        k = [x[quintic][:, None, :] for x in (c1, c2, c3, c4, c5)]
        v = np.abs(k[0] + u * (2 * k[1] + u * (3 * k[2] + u * (4 * k[3] + u * 5 * k[4]))))  # (Q, 64, n)
        i = v.argmax(axis=1)[:, None, :]
        sampled, at = np.zeros_like(c1), np.zeros_like(c1)
        sampled[quintic] = np.take_along_axis(v, i, axis=1)[:, 0]
        at[quintic] = t0[quintic] + np.take_along_axis(np.broadcast_to(u, v.shape), i, axis=1)[:, 0]
        cand.append(sampled)
        when.append(at)
    values = np.stack(cand).reshape(-1, n)  # (C * S, n)
    times = np.stack([np.broadcast_to(w, c1.shape) for w in when]).reshape(-1, n)
    best = values.argmax(axis=0)
    return values[best, np.arange(n)], times[best, np.arange(n)]


@dataclass(frozen=True)
class VelocityClamp:
    """A trajectory slowed down to the joint velocity limits.

    Attributes:
        joint: the joint furthest over its limit.
        peak: its peak ``|qd|`` as commanded, rad/s (m/s).
        limit: its velocity limit (URDF), rad/s (m/s).
        factor: the commanded times were multiplied by this (> 1).
        duration: the trajectory's duration as commanded (from its start), s.
    """

    joint: str
    peak: float
    limit: float
    factor: float
    duration: float

    def __str__(self) -> str:
        return (f"{self.joint} would reach {self.peak:.4g} rad/s, above its velocity limit {self.limit:.4g} rad/s: "
                f"slowed down {self.factor:.4g}x ({self.duration:.4g} s -> {self.duration * self.factor:.4g} s)")


def within_velocity_limits(traj: Any, stretched: Callable[[float], Any], names: Sequence[str],
                           velocity_limits: np.ndarray) -> tuple[Any, VelocityClamp | None]:
    """``traj``, or the same command stretched in time until its peak velocities are within the limits.

    Args:
        traj: the interpolant as commanded (``arrays()`` -> (knots, coeffs, last), ``duration``).
        stretched: ``factor -> `` the interpolant of the command with its times multiplied by
            ``factor`` (its knot velocities divided by it, accelerations by its square), from the
            same start state.
        names: (n,) the joints, for the message.
        velocity_limits: (n,) rad/s; inf, NaN or <= 0: no limit.

    Returns:
        (the interpolant to follow, the clamp or None when ``traj`` was within).

    Raises:
        InputError: no slow-down up to :data:`MAX_SLOWDOWN` brings it within (the start state
            itself faster than a limit).
    """
    lim = np.asarray(velocity_limits, dtype=float)
    lim = np.where(np.isfinite(lim) & (lim > 0), lim, np.inf)
    peak, _ = peak_velocity(*traj.arrays()[:2])
    ratio = peak / lim
    if ratio.max() <= 1.0 + 1e-9:
        return traj, None
    j = int(ratio.argmax())
    factor, r = 1.0, float(ratio.max())
    for _ in range(60):
        factor *= r * (1.0 + 1e-6)
        if factor > MAX_SLOWDOWN:
            break
        slowed = stretched(factor)
        r = float((peak_velocity(*slowed.arrays()[:2])[0] / lim).max())
        if r <= 1.0 + 1e-9:
            return slowed, VelocityClamp(names[j], float(peak[j]), float(lim[j]), factor, float(traj.duration))
        r = max(r, 1.0 + 1e-3)
    raise InputError(f"trajectory refused: {names[j]} would reach {peak[j]:.4g} rad/s, above its velocity limit "
                     f"{lim[j]:.4g} rad/s, and no slow-down up to {MAX_SLOWDOWN:g}x brings it within (the reference "
                     "already moves faster)")
