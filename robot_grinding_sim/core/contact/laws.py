"""Shared pieces of the contact models: input checks, effective mass of two bodies, the tangential
grinding force and the contact patch.

The normal force laws live in :mod:`~robot_grinding_sim.core.contact.kelvin_voigt` (closed form)
and :mod:`~robot_grinding_sim.core.contact.hunt_crossley` (the nonlinear family).

Conventions (the same for every contact model of this package):

- ``d`` is the penetration along the contact normal (m, > 0 inside the surface), ``dd`` its rate
  (m/s, > 0 while penetrating further).
- ``f`` is the external force pushing the body *into* the surface (N), held constant over an
  interval. For a ball under gravity on a floor, ``f = m g``.
- ``m`` is the effective mass along the normal (kg): for a free body its mass, for two free bodies
  ``1/(1/m_a + 1/m_b)``, for an arm ``1/(n^T J M(q)^-1 J^T n)`` (``RobotModel.effective_mass``).
- The contact force ``F`` acts along the normal, out of the surface; equation of motion
  ``m d'' = f - F``.

See docs/contact.md for the derivations.
"""

from __future__ import annotations

import math

import numpy as np

from robot_grinding_sim.core.errors import InputError

# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------


def check_positive(name: str, value: float) -> float:
    """``value`` as a float; :class:`InputError` naming ``name`` unless finite and > 0."""
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def check_nonnegative(name: str, value: float) -> float:
    """``value`` as a float; :class:`InputError` naming ``name`` unless finite and >= 0."""
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise InputError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_finite(name: str, value: float) -> float:
    """``value`` as a float; :class:`InputError` naming ``name`` unless finite."""
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{name} must be finite, got {value!r}")
    return value


def check_restitution(value: float, name: str = "coefficient of restitution") -> float:
    """A coefficient of restitution as a float; :class:`InputError` naming ``name`` unless in (0, 1]."""
    value = float(value)
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise InputError(f"{name} must lie in (0, 1], got {value!r}")
    return value


def two_body_effective_mass(m_a: float, m_b: float | None) -> float:
    """Reduced mass ``1/(1/m_a + 1/m_b)`` (kg) of two free bodies; ``m_b=None`` is a fixed obstacle."""
    m_a = check_positive("mass m_a", m_a)
    if m_b is None or math.isinf(m_b):
        return m_a
    m_b = check_positive("mass m_b", m_b)
    return m_a * m_b / (m_a + m_b)


# --------------------------------------------------------------------------------------------
# tangential grinding force and contact patch
# --------------------------------------------------------------------------------------------


def abrasive_sliding_velocity(spindle_rate: np.ndarray, contact_offset: np.ndarray,
                              feed_velocity: np.ndarray, normal: np.ndarray | None = None) -> np.ndarray:
    """Velocity (m/s, world, shape (3,)) of the abrasive surface relative to the workpiece.

    ``spindle_rate``: angular velocity vector of the tool about its spindle (rad/s, world, (3,));
    ``contact_offset``: contact point minus the tool centre (m, (3,)); ``feed_velocity``: the
    tool centre's velocity relative to the workpiece (m/s, (3,)). v = feed + w x r: magnitude
    spindle speed x tool radius plus the feed. With ``normal`` (unit, (3,)) the normal component
    is removed, leaving the sliding (tangential) velocity.
    """
    w = np.asarray(spindle_rate, dtype=float).reshape(3)
    r = np.asarray(contact_offset, dtype=float).reshape(3)
    vf = np.asarray(feed_velocity, dtype=float).reshape(3)
    v = vf + np.cross(w, r)
    if normal is not None:
        n = np.asarray(normal, dtype=float).reshape(3)
        nn = np.linalg.norm(n)
        if not nn > 0.0:
            raise InputError("normal must be a non-zero vector")
        n = n / nn
        v = v - np.dot(v, n) * n
    if not np.all(np.isfinite(v)):
        raise InputError("sliding velocity inputs must be finite")
    return v


def regularised_coulomb(sliding_velocity: np.ndarray | float, normal_force: float, mu: float,
                        v_reg: float = 1e-3) -> np.ndarray:
    """Friction force opposing the sliding velocity, ``-mu Fn v / sqrt(|v|^2 + v_reg^2)``.

    ``sliding_velocity`` scalar or (..., k) vector (m/s) of the surface that the force acts on,
    relative to the other body; ``normal_force`` Fn >= 0 (N); ``v_reg`` (m/s) the regularisation
    speed: the magnitude is mu Fn |v|/sqrt(|v|^2 + v_reg^2) < mu Fn, continuous (and smooth) at
    zero speed, within 0.5 (v_reg/|v|)^2 of mu Fn when sliding fast. Returns the same shape.
    """
    mu = check_nonnegative("friction coefficient mu", mu)
    fn = max(check_finite("normal force", normal_force), 0.0)
    v_reg = check_positive("regularisation speed v_reg", v_reg)
    v = np.asarray(sliding_velocity, dtype=float)
    speed = np.abs(v) if v.ndim == 0 else np.linalg.norm(v, axis=-1, keepdims=True)
    return -mu * fn * v / np.sqrt(speed * speed + v_reg * v_reg)


def grinding_tangential_force(sliding_velocity: np.ndarray | float, normal_force: float,
                              force_ratio: float, v_reg: float = 1e-3) -> np.ndarray:
    """Tangential grinding force with the grinding force ratio Ft/Fn (N), opposing sliding.

    The same regularised law as :func:`regularised_coulomb` with mu = Ft/Fn: the abrasive cutting
    force on the tool acts against the abrasive surface's sliding velocity.
    """
    return regularised_coulomb(sliding_velocity, normal_force, check_nonnegative("force ratio Ft/Fn", force_ratio),
                               v_reg)


def spherical_patch(radius: float, depth: float, normal_force: float = 0.0, exact: bool = False
                    ) -> tuple[float, float]:
    """Contact patch of a spherical tool of ``radius`` R (m) at penetration ``depth`` d (m).

    Returns (patch radius a (m), mean pressure F/(pi a^2) (Pa)). ``exact=False``: the geometric
    intersection approximated for d << R, a = sqrt(2 R d) (also the Hertz-like small-depth form);
    ``exact=True``: the spherical cap, a = sqrt(2 R d - d^2). Zero depth gives a = 0 and pressure 0
    (no contact) or inf when a force is given at zero area.
    """
    r = check_positive("tool radius", radius)
    d = check_nonnegative("depth", depth)
    if exact and d > 2.0 * r:
        raise InputError(f"depth {d!r} exceeds the tool diameter {2 * r!r}")
    a = math.sqrt(2.0 * r * d - d * d) if exact else math.sqrt(2.0 * r * d)
    fn = check_nonnegative("normal force", normal_force)
    if a == 0.0:
        return 0.0, (math.inf if fn > 0.0 else 0.0)
    return a, fn / (math.pi * a * a)
