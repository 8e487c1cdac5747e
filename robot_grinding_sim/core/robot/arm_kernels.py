"""numba kernels of the simulated arm: the reference trajectory, computed-torque servo and one step of
forward dynamics (semi-implicit Euler, end stops) on flat arrays.

:class:`~robot_grinding_sim.core.robot.joint_trajectory.TrajectoryInterpolator`,
:class:`~robot_grinding_sim.core.robot.arm_sim.ComputedTorqueController` and
:class:`~robot_grinding_sim.core.robot.arm_sim.ArmSimulator` are their Python wrappers, and the
compiled coupled step (:mod:`robot_grinding_sim.core.sim.compiled_step`) calls them directly: one
implementation of the arm for the nodes and the in-process job. The cubic Hermite segment
(:func:`cubic_hermite`) and its sampler (:func:`hermite_sample`) are the ones the executive's
commands (:mod:`robot_grinding_sim.core.planning.commands`) and the command guard use too.

The arm's state travels as one array ``st`` (ST_ROWS, n): rows :data:`Q`, :data:`QD`, :data:`QDD`,
:data:`TAU` (motor torque over the step), :data:`TAU_EXT` (J^T w), :data:`Q_REF`, :data:`QD_REF`,
:data:`QDD_REF`. Servo and limits travel as ``arm`` (ARM_ROWS, n): rows kp (1/s^2), kd (1/s),
effort limit (N m; inf: not clipped), lower, upper (rad). Units SI, frames the model's root.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import register_jitable

from robot_grinding_sim.core.layout import STATUS
from robot_grinding_sim.core.robot.kernels import (
    cholesky_factor,
    crba_sample,
    fd_factored,
    finite,
    jacobian_kernel,
    rnea_sample,
)

Q, QD, QDD, TAU, TAU_EXT, Q_REF, QD_REF, QDD_REF = range(8)
ST_ROWS = 8
KP, KD, EFFORT, LOWER, UPPER = range(5)
ARM_ROWS = 5
#: kernel codes (:data:`~robot_grinding_sim.core.layout.STATUS`)
E = STATUS.code


@register_jitable
def cubic_hermite(p0, v0, p1, v1, T):
    """The cubic Hermite segment from (p0, v0) to (p1, v1) over T s: (c2, c3) of
    ``q(tau) = p0 + v0 tau + c2 tau^2 + c3 tau^3`` in the segment's local time tau in [0, T].

    The one cubic Hermite of the package (the simulated arm's reference, the executive's commands,
    the command guard's interpolation). Elementwise: scalars, (n,) arrays, or (S, n) arrays with T
    (S, 1). Plain NumPy when called from Python (every segment of a trajectory at once, nothing to
    compile on a node's message path), compiled into the numba kernels that call it.
    """
    h = p1 - p0
    return (3.0 * h - (2.0 * v0 + v1) * T) / T**2, (-2.0 * h + (v0 + v1) * T) / T**3


@register_jitable
def segment_sample(c, tau, q, qd, qdd):
    """A polynomial segment c (6, n) (coefficients of tau^0 ... tau^5) at ``tau`` s of its local
    time: writes q, qd, qdd (n,). Plain Python when called from Python, compiled in the kernels."""
    for j in range(c.shape[1]):
        c0, c1, c2, c3, c4, c5 = c[0, j], c[1, j], c[2, j], c[3, j], c[4, j], c[5, j]
        q[j] = c0 + tau * (c1 + tau * (c2 + tau * (c3 + tau * (c4 + tau * c5))))
        qd[j] = c1 + tau * (2 * c2 + tau * (3 * c3 + tau * (4 * c4 + tau * 5 * c5)))
        qdd[j] = 2 * c2 + tau * (6 * c3 + tau * (12 * c4 + tau * 20 * c5))


@register_jitable
def hermite_sample(times, positions, velocities, t, q, qd):
    """The cubic Hermite (:func:`cubic_hermite`) through the knots ``times`` (K,) s, ``positions``,
    ``velocities`` (K, n) (rad, rad/s) at ``t`` s, clamped to the ends (the first or last knot's
    position and velocity): writes q, qd (n,). Compiled in the executive's command sampler
    (:func:`robot_grinding_sim.core.planning.commands.sample_knots`); plain Python elsewhere."""
    K, n = positions.shape
    if K == 1 or t <= times[0]:
        q[:] = positions[0]
        qd[:] = velocities[0]
    elif t >= times[K - 1]:
        q[:] = positions[K - 1]
        qd[:] = velocities[K - 1]
    else:
        k = np.searchsorted(times, t, side="right") - 1
        c = np.zeros((6, n))
        c[0], c[1] = positions[k], velocities[k]
        c2, c3 = cubic_hermite(positions[k], velocities[k], positions[k + 1], velocities[k + 1],
                               times[k + 1] - times[k])
        c[2], c[3] = c2, c3
        segment_sample(c, t - times[k], q, qd, np.empty(n))


@njit(cache=True)
def trajectory_sample(knots, coeffs, last, t, q, qd, qdd):
    """Reference at ``t`` s of a piecewise polynomial: knots (K,), coeffs (K-1, 6, n) in each
    segment's local time, last (n,) the final position (held at rest after the last knot, and
    for K = 1); writes q, qd, qdd (n,)."""
    n = last.shape[0]
    nseg = coeffs.shape[0]
    if nseg == 0 or t >= knots[knots.shape[0] - 1]:
        for j in range(n):
            q[j] = last[j]
            qd[j] = 0.0
            qdd[j] = 0.0
        return
    if t < 0.0:
        t = 0.0
    s = np.searchsorted(knots, t, side="right") - 1
    s = min(max(s, 0), nseg - 1)
    segment_sample(coeffs[s], t - knots[s], q, qd, qdd)


@njit(cache=True)
def computed_torque(q, qd, q_ref, qd_ref, qdd_ref, arm, g, jt, jd, bd, ws, tau):
    """tau = rnea(q, qd, qdd_ref + Kp (q_ref - q) + Kd (qd_ref - qd)) clipped to +- the effort limits.
    Returns False for a non-finite input."""
    n = q.shape[0]
    if not (finite(q) and finite(qd) and finite(q_ref) and finite(qd_ref) and finite(qdd_ref)):
        return False
    cmd = np.empty(n)
    for j in range(n):
        cmd[j] = qdd_ref[j] + arm[KP, j] * (q_ref[j] - q[j]) + arm[KD, j] * (qd_ref[j] - qd[j])
    rnea_sample(q, qd, cmd, g, jt, jd, bd, np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 6)), ws, tau)
    for j in range(n):
        lim = arm[EFFORT, j]
        tau[j] = min(max(tau[j], -lim), lim)
    return True


@njit(cache=True)
def arm_advance(t, dt, st, knots, coeffs, last, t_traj, control, arm, g_ctrl, g, jt, jd, bd, ws, wbody, wX, w, M, L,
                have_m, out):
    """One step of ``dt`` of the servo-controlled arm from state ``st`` at sim time t into ``out``
    (both (ST_ROWS, n)): the reference at t - t_traj, computed torque (held over the step; zero
    without ``control``; g_ctrl (3,) the gravity it compensates), the held wrench w (6,) (root
    axes, about the origin of the link at pose wX in body wbody), forward dynamics under g (3,),
    semi-implicit Euler, end stops (clamp, and the velocity into the stop removed). M, L (n, n): the
    mass matrix at st's q and its Cholesky factor, given (``have_m``: computed once per step by the
    caller) or written here. Returns a STATUS code: ok, state_not_finite (state or wrench) or
    mass_not_pd."""
    n = st.shape[1]
    q, qd = st[Q], st[QD]
    if not (finite(q) and finite(qd) and finite(w)):
        return E.state_not_finite
    trajectory_sample(knots, coeffs, last, t - t_traj, out[Q_REF], out[QD_REF], out[QDD_REF])
    tau = out[TAU]
    if control:
        if not computed_torque(q, qd, out[Q_REF], out[QD_REF], out[QDD_REF], arm, g_ctrl, jt, jd, bd, ws, tau):
            return E.state_not_finite
    else:
        tau[:] = 0.0
    text = out[TAU_EXT]
    text[:] = 0.0
    nz = False
    for k in range(6):
        nz = nz or w[k] != 0.0
    if nz and wbody >= 0:
        J = np.empty((6, n))
        jacobian_kernel(q, wbody, wX, np.zeros(3), bool(False), jt, jd, ws, J)
        for j in range(n):
            s = 0.0
            for r in range(6):
                s += J[r, j] * w[r]
            text[j] = s
    tot = np.empty(n)
    for j in range(n):
        tot[j] = tau[j] + text[j]
    if not have_m:
        crba_sample(q, jt, jd, bd, ws, M)
        if not cholesky_factor(M, L):
            return E.mass_not_pd
    h, zero = np.empty(n), np.zeros(n)
    qdd = out[QDD]
    fd_factored(q, qd, tot, g, jt, jd, bd, np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 6)), ws, L, h, zero,
                qdd)
    for j in range(n):
        v = qd[j] + dt * qdd[j]
        x = q[j] + dt * v
        if x < arm[LOWER, j]:
            x = arm[LOWER, j]
            if v < 0.0:
                v = 0.0
        elif x > arm[UPPER, j]:
            x = arm[UPPER, j]
            if v > 0.0:
                v = 0.0
        out[Q, j] = x
        out[QD, j] = v
    return E.ok
