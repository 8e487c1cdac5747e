"""What an executive sends a position-controlled arm while it runs a job trajectory.

The job trajectory (:mod:`~robot_grinding_sim.core.planning.trajectory`) is the plan; running it on
an arm also needs a few moves that are not in the plan, built here from the same pieces (cubic
Hermite knots, quintic rest-to-rest lines, the same IK):

- :func:`joint_move`: rest-to-rest quintic in joint space from where the arm is to the plan's
  first knot, timed by the velocity and acceleration limits;
- :func:`remainder`: the job from job time ``tau`` on, re-based to start at 0;
- :func:`ramp`: the job slowed to rest (pause) or brought up to speed (resume) by a smooth time
  scaling: the arm stays on the planned path, its speed goes 1 -> 0 or 0 -> 1 over ``duration``
  with a smoothstep profile (never faster than planned);
- :func:`retreat`: a quintic rest-to-rest line of the TCP along the surface normal.

Every move is a :class:`Command`: knot times from its own start (s), joint positions and
velocities (rad, rad/s, robot's joint order) and, for each knot, the job time it stands for
(``job_times``; NaN for knots that are not on the job, e.g. a retreat), so the executive knows
where along the plan the arm is at any moment. Frames: the robot's root (``base_link``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.planning.path_ik import solve_ik, targets
from robot_grinding_sim.core.planning.trajectory import JointTrajectory, quintic_line
from robot_grinding_sim.core.robot.arm_kernels import hermite_sample

FloatArray = NDArray[np.float64]

#: knots of a ramp or a joint move
RAMP_KNOTS = 21
#: peak |velocity| and |acceleration| of the quintic 10 t^3 - 15 t^4 + 6 t^5 over a unit move in unit time
QUINTIC_PEAK_VELOCITY = 1.875
QUINTIC_PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)


@dataclass
class Command:
    """A timed joint command.

    Attributes:
        times: (K,) s from the command's start, increasing, times[0] == 0.
        positions, velocities: (K, n) rad, rad/s (cubic Hermite between knots).
        job_times: (K,) the job time each knot stands for, s; NaN off the job.
        kind: what it is (``start``, ``job``, ``pause``, ``resume``, ``retreat``, ``hold``).
    """

    times: FloatArray
    positions: FloatArray
    velocities: FloatArray
    job_times: FloatArray
    kind: str

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def then(self, other: Command, kind: str | None = None) -> Command:
        """This command followed by ``other``, whose first knot must be this one's last (same
        position; the velocity of the shared knot is this one's)."""
        if np.max(np.abs(other.positions[0] - self.positions[-1])) > 1e-9:
            raise PlanningError(f"{self.kind} -> {other.kind}: the moves do not join")
        return Command(np.r_[self.times, self.duration + other.times[1:]],
                       np.vstack([self.positions, other.positions[1:]]),
                       np.vstack([self.velocities, other.velocities[1:]]),
                       np.r_[self.job_times, other.job_times[1:]], kind or self.kind)


def hermite(times: FloatArray, positions: FloatArray, velocities: FloatArray, t: float
            ) -> tuple[FloatArray, FloatArray]:
    """(q, qd), each (n,), of the cubic Hermite through the knots at ``t`` (clamped to the ends)."""
    q, qd, _ = sample_knots(times, positions, velocities, times, float(t), False)
    return q, qd


def sample(cmd: Command, t: float) -> tuple[FloatArray, FloatArray, float]:
    """(q, qd, job time) of a command ``t`` s after its start (at rest at its last knot after its
    end); the job time is NaN where the command is off the job."""
    return sample_knots(cmd.times, cmd.positions, cmd.velocities, cmd.job_times, float(t), True)


@njit(cache=True)
def sample_knots(times: FloatArray, positions: FloatArray, velocities: FloatArray, job_times: FloatArray,
                 t: float, at_rest_after: bool) -> tuple[FloatArray, FloatArray, float]:
    """The compiled sampler behind :func:`hermite` and :func:`sample` (an executive samples its
    command at every joint state, 1 kHz; NumPy on a 16,000-knot job took 47 us a call): the arm's
    cubic Hermite (:func:`~robot_grinding_sim.core.robot.arm_kernels.hermite_sample`) and the job time.

    Args:
        times: (K,) s, increasing; positions, velocities: (K, n) rad, rad/s; job_times: (K,) s (NaN
            off the job).
        t: s from the first knot (clamped to the ends).
        at_rest_after: zero velocity at and after the last knot (a command's end).

    Returns:
        (q (n,), qd (n,), job time at ``t``: linear between knots, NaN between knots off the job).
    """
    K, n = positions.shape
    q = np.empty(n)
    qd = np.empty(n)
    hermite_sample(times, positions, velocities, t, q, qd)
    duration = times[K - 1]
    if at_rest_after and t >= duration:
        qd[:] = 0.0
    if K == 1:
        return q, qd, job_times[0]
    tc = min(max(t, 0.0), duration)
    k = min(np.searchsorted(times, tc, side="right") - 1, K - 2)
    a, b = job_times[k], job_times[k + 1]
    if not (np.isfinite(a) and np.isfinite(b)):
        return q, qd, a if tc == times[k] else (b if tc == times[k + 1] else np.nan)
    return q, qd, a + (b - a) * (tc - times[k]) / (times[k + 1] - times[k])


def job_sample(traj: JointTrajectory, tau: float) -> tuple[FloatArray, FloatArray]:
    """(q, qd) of the job trajectory at job time ``tau`` s."""
    return hermite(traj.times, traj.positions, traj.velocities, tau)


def remainder(traj: JointTrajectory, tau: float) -> Command:
    """The job from job time ``tau`` (s) to its end, as a command starting at 0."""
    tau = min(max(tau, 0.0), traj.duration)
    q, qd = job_sample(traj, tau)
    later = traj.times > tau + 1e-9
    times = np.r_[tau, traj.times[later]]
    return Command(times - tau, np.vstack([q, traj.positions[later]]), np.vstack([qd, traj.velocities[later]]),
                   times.copy(), "job")


def ramp(traj: JointTrajectory, tau0: float, duration: float, up: bool, knots: int = RAMP_KNOTS) -> Command:
    """The job from ``tau0`` with its speed scaled smoothly 0 -> 1 (``up``) or 1 -> 0 over ``duration`` s.

    The scaling s(t) = d(job time)/dt is a smoothstep (zero slope at both ends), so the arm moves
    on the planned path, never faster than planned, and joins rest or the planned motion with
    continuous velocity and acceleration. Job time advances by duration / 2 either way (clipped at
    the job's end: the ramp is then shortened).
    """
    left = traj.duration - tau0
    duration = float(min(duration, 2.0 * max(left, 0.0)))
    if duration <= 1e-9:
        q, _ = job_sample(traj, tau0)
        z = np.zeros((1, len(q)))
        return Command(np.zeros(1), q[None], z, np.array([tau0]), "pause" if not up else "resume")
    t = np.linspace(0.0, duration, knots)
    x = t / duration
    if up:  # s = 3x^2 - 2x^3; job time = integral of s
        s = 3 * x**2 - 2 * x**3
        dtau = duration * (x**3 - 0.5 * x**4)
    else:
        s = 1 - (3 * x**2 - 2 * x**3)
        dtau = duration * (x - x**3 + 0.5 * x**4)
    tau = tau0 + dtau
    q = np.empty((knots, traj.positions.shape[1]))
    qd = np.empty_like(q)
    for k, tk in enumerate(tau):
        q[k], v = job_sample(traj, float(tk))
        qd[k] = v * s[k]
    if not up:
        qd[-1] = 0.0
    else:
        qd[0] = 0.0
    return Command(t, q, qd, tau, "resume" if up else "pause")


def joint_move(q_from: FloatArray, q_to: FloatArray, vmax: FloatArray, amax: FloatArray, scale: float = 0.5,
               knots: int = RAMP_KNOTS, kind: str = "start") -> Command:
    """Rest-to-rest quintic from ``q_from`` to ``q_to`` (n,), rad, every joint within ``scale`` of its
    velocity (rad/s) and acceleration (rad/s^2) limits; the knots stand for job time 0."""
    dq = np.asarray(q_to, dtype=float) - np.asarray(q_from, dtype=float)
    a = np.abs(dq)
    T = max(float(np.max(QUINTIC_PEAK_VELOCITY * a / (scale * vmax))),
            float(np.max(np.sqrt(QUINTIC_PEAK_ACCELERATION * a / (scale * amax)))), 1e-3)
    x = np.linspace(0.0, 1.0, knots)
    s = 10 * x**3 - 15 * x**4 + 6 * x**5
    sd = (30 * x**2 - 60 * x**3 + 30 * x**4) / T
    return Command(x * T, q_from + np.outer(s, dq), np.outer(sd, dq), np.zeros(knots), kind)


def retreat(model: object, q_from: FloatArray, normal: FloatArray, distance: float, duration: float,
            what: str = "retreat") -> Command:
    """The TCP from rest at ``q_from`` straight out along ``normal`` (root frame, unit) by ``distance`` m
    in ``duration`` s, quintic rest-to-rest, orientation kept; PlanningError naming ``what`` if the
    arm cannot reach it."""
    X = model.fk(q_from)  # type: ignore[attr-defined]
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    t, P, s, sd = quintic_line(X[:3, 3], X[:3, 3] + distance * n, duration)
    q = solve_ik(model, targets(P, np.repeat(X[None, :3, :3], len(P), axis=0)), q_from, what=what)
    q[0] = q_from
    dqds = np.gradient(q, s, axis=0) if distance > 0 else np.zeros_like(q)
    return Command(t, q, dqds * sd[:, None], np.full(len(t), math.nan), "retreat")


def brake(q: FloatArray, qd: FloatArray, duration: float) -> Command:
    """From (q, qd) (n,) to rest in ``duration`` s with constant deceleration (one cubic Hermite
    segment: it stops at q + qd * duration / 2); off the job."""
    q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
    if not np.any(qd) or duration <= 0:
        return hold(q)
    return Command(np.array([0.0, duration]), np.vstack([q, q + 0.5 * duration * qd]), np.vstack([qd, 0 * qd]),
                   np.full(2, math.nan), "brake")


def hold(q: Sequence[float]) -> Command:
    """Stay at ``q`` (n,) at rest."""
    q = np.asarray(q, dtype=float)
    return Command(np.zeros(1), q[None], np.zeros((1, len(q))), np.array([math.nan]), "hold")
