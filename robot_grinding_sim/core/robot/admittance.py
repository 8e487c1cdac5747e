"""Admittance along the surface normal: the TCP correction that holds a target contact force.

The law (one axis, the surface's outward unit normal ``n`` in the root frame ``base_link``):

    M_a x'' + D_a x' = F_n - F_target,        F_n = n . f

``f`` (3,) is the measured contact force on the tool (N, root frame: the compensated F/T force;
a force is the same at the sensor and at the tcp, only its torque moves), so ``F_n > 0`` pushes the
tool out of the part. ``x`` (m) is the correction of the commanded TCP along ``+n``: too much
force moves the tool out, too little moves it in. With a contact of stiffness ``K`` in series
(``F_n = K (d0 - x)`` for a commanded penetration ``d0``) the closed loop is

    M_a x'' + D_a x' + K x = K d0 - F_target

a damped second-order system for every K > 0: it settles at ``x = d0 - F_target / K``, i.e. at
``F_n = F_target`` whatever K is (an integral force controller: ``x' = (F_n - F_target) / D_a``
when ``M_a = 0``), with natural frequency ``sqrt(K / M_a)`` and damping ratio
``D_a / (2 sqrt(K M_a))``. In continuous time with an ideal arm it is stable for any gains; what
limits them is the delay ``tau`` between a correction and the force it causes (the streamed
point's horizon, the arm's servo lag, the F/T filter): the loop's crossover is ``K / D_a`` (rad/s)
and needs ``K / D_a`` well below ``(pi/2) / tau`` (the phase the delay costs there). Choose
``D_a`` from the stiffest contact expected; ``M_a`` puts a pole at ``D_a / M_a`` that filters the
force noise and should sit well above ``K / D_a``.

Discretisation: over a step ``dt`` the force error is held (zero-order hold, as the samples are)
and the first-order velocity equation is integrated exactly, so the admittance alone is stable for
any step. Bounds: ``|x'| <= max_speed`` and ``|x| <= max_correction`` (at a bound the velocity
state is zeroed: no wind-up against it).

Activation (:meth:`NormalAdmittance.step`): on a pass the law runs both ways; off a pass it runs
only while ``F_n`` exceeds ``contact_force`` and then only lowers the force (``x >= 0``: the
approach onto a stiffer part than planned, the dwell, the start of a retreat); otherwise (in the
air, or off a pass below the threshold) the velocity state is reset and ``x`` returns to 0 at
``max_speed``, so nothing integrates while the tool is in the air and nothing jumps. A move of
``x`` towards a narrower range (a pass ends with the tool pushed in) is rate-limited too.

:func:`joint_correction`: the joint offset that moves the TCP by ``x n`` without turning the tool,
``dq = J^+ [x n; 0]`` with the tcp's geometric Jacobian (6, nq) and the damped least-squares
inverse ``J^T (J J^T + lambda^2 I)^-1``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import AdmittanceConfig
from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

#: damping of the least-squares inverse of the tcp Jacobian (m, rad): far below the UR's
#: singular values away from a singularity, so the TCP moves as asked there
DLS_DAMPING = 1e-3


class AdmittanceState(NamedTuple):
    """One step's outcome: correction ``x`` (m, along +n), its rate ``v`` (m/s), whether the law ran
    (``active``), the force error it saw (N) and whether a bound held it (``limited``)."""

    x: float
    v: float
    active: bool
    error: float
    limited: bool


class NormalAdmittance:
    """The bounded admittance along the normal (see the module docstring).

    Args:
        params: gains and bounds (``admittance.*``): mass (kg), damping (N s/m), max_correction (m),
            max_speed (m/s), contact_force (N).

    Raises:
        InputError: a negative mass or bound, a damping that is not positive.
    """

    def __init__(self, params: AdmittanceConfig) -> None:
        bad = [(name, getattr(params, name)) for name in ("mass", "max_correction", "max_speed", "contact_force")
               if not math.isfinite(getattr(params, name)) or getattr(params, name) < 0.0]
        if bad:
            raise InputError(f"admittance.{bad[0][0]}: {bad[0][1]!r} must be finite and >= 0")
        if not math.isfinite(params.damping) or params.damping <= 0.0:
            raise InputError(f"admittance.damping: {params.damping!r} must be > 0 N s/m")
        self.params = params
        self.x = 0.0
        self.v = 0.0

    def reset(self) -> None:
        """Forget the correction at once (a new job, a stop): x = 0, at rest."""
        self.x = self.v = 0.0

    def step(self, dt: float, force: float, target: float, on_pass: bool) -> AdmittanceState:
        """Advance over ``dt`` s with the normal force ``force`` (N, > 0 pushing out) held.

        Args:
            dt: the step, s (>= 0).
            force: measured normal force F_n, N.
            target: F_target, N.
            on_pass: the job is on a pass (the law runs both ways, in contact or not).

        Returns:
            The new state; ``self.x`` and ``self.v`` are updated.
        """
        p = self.params
        dt = max(0.0, float(dt))
        reach = p.max_speed * dt  # the farthest x may move this step
        active = on_pass or force > p.contact_force
        error = force - target
        if not active:
            self.v = 0.0
            self.x -= math.copysign(min(abs(self.x), reach), self.x)
            return AdmittanceState(self.x, 0.0, False, error, False)
        v_inf = error / p.damping  # the rate the damper alone would give
        if p.mass > 0.0:
            a = p.damping / p.mass
            decay = math.exp(-a * dt)
            dx = v_inf * dt + (self.v - v_inf) * (1.0 - decay) / a
            v = v_inf + (self.v - v_inf) * decay
        else:
            dx, v = v_inf * dt, v_inf
        limited = abs(v) > p.max_speed or abs(dx) > reach
        v = max(-p.max_speed, min(p.max_speed, v))
        dx = max(-reach, min(reach, dx))
        lower, upper = (-p.max_correction if on_pass else 0.0), p.max_correction
        # a range that narrowed (a pass ended with the tool pushed in) is reached at max_speed, not at once
        lo = lower if self.x >= lower else min(lower, self.x + reach)
        hi = upper if self.x <= upper else max(upper, self.x - reach)
        x = self.x + dx
        if x < lo or x > hi:
            x, v, limited = min(hi, max(lo, x)), 0.0, True  # held at a bound: no velocity (no wind-up) left
        self.x, self.v = x, v
        return AdmittanceState(x, v, True, error, limited)


def joint_correction(model: Any, q: FloatArray, normal: FloatArray, x: float, v: float = 0.0,
                     tcp_link: str | None = None, damping: float = DLS_DAMPING) -> tuple[FloatArray, FloatArray]:
    """Joint offset and rate (each (nq,), rad, rad/s) moving the TCP by ``x`` m at ``v`` m/s along
    ``normal`` (3,) (root frame) at ``q`` (nq,), the tool's orientation kept:
    ``J^T (J J^T + damping^2 I)^-1 [n; 0] (x, v)`` with the tcp's geometric Jacobian (6, nq)."""
    n = np.asarray(normal, dtype=float).reshape(3)
    norm = float(np.linalg.norm(n))
    if not math.isfinite(norm) or norm < 1e-9:
        raise InputError(f"normal {n.tolist()} is not a direction")
    J = model.jacobian(q, tcp_link)
    twist = np.zeros((6, 2))
    twist[:3, 0], twist[:3, 1] = n * (x / norm), n * (v / norm)
    sol = J.T @ np.linalg.solve(J @ J.T + damping * damping * np.eye(6), twist)
    return sol[:, 0], sol[:, 1]
