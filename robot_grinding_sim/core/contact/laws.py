"""Compliant contact models along a contact normal, and the tangential grinding force.

Conventions (the same for every model in this module):

- ``d`` is the penetration along the contact normal (m, > 0 inside the surface), ``dd`` its rate
  (m/s, > 0 while penetrating further).
- ``f`` is the external force pushing the body *into* the surface (N), held constant over an
  interval. For a ball under gravity on a floor, ``f = m g``.
- ``m`` is the effective mass along the normal (kg): for a free body its mass, for two free bodies
  ``1/(1/m_a + 1/m_b)``, for an arm ``1/(n^T J M(q)^-1 J^T n)`` (``RobotModel.effective_mass``).
- The contact force ``F`` acts along the normal, out of the surface; equation of motion
  ``m d'' = f - F``.

Models:

- Kelvin-Voigt (linear spring-damper) ``F = K d + D d'`` with a closed-form solution from any
  initial state under a constant external force (under-, critically and over-damped), two
  conventions for the coefficient of restitution: *clamped* (``F >= 0``, contact ends when F = 0;
  the default and the physical one) and *unclamped* (the force may pull; contact ends at d = 0).
- Hunt-Crossley family ``F = K d^n (1 + alpha d')`` (``lambda = alpha K``), alpha from the exact
  relation ``(1 + u) / (1 - e u) = exp((1 + e) u)``, ``u = alpha v0`` (papers digest, section 3),
  or from the Lankarani-Nikravesh, Flores or original Hunt-Crossley laws (which realise other
  restitutions: :func:`hc_realised_restitution`). The contact phase has no closed form and is
  integrated with scipy's DOP853 with event location (:func:`hc_integrate`).

See docs/contact.md for the derivations and the realised-restitution table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from robot_grinding_sim.core.errors import InputError

__all__ = [
    "HC_LAWS",
    "HCPhase",
    "HuntCrossley",
    "KelvinVoigt",
    "KVSolution",
    "abrasive_sliding_velocity",
    "first_quadratic_crossing",
    "grinding_tangential_force",
    "hc_alpha",
    "hc_integrate",
    "hc_realised_restitution",
    "hc_u_exact",
    "hertz_contact_time",
    "hertz_max_penetration",
    "hertz_stiffness",
    "kv_damping_clamped",
    "kv_damping_unclamped",
    "kv_restitution_clamped",
    "kv_restitution_unclamped",
    "kv_separation_time_clamped",
    "kv_zeta_clamped",
    "regularised_coulomb",
    "spherical_patch",
    "two_body_effective_mass",
]


# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def _nonnegative(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise InputError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def _finite(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{name} must be finite, got {value!r}")
    return value


def _restitution(value: float, name: str = "coefficient of restitution") -> float:
    value = float(value)
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise InputError(f"{name} must lie in (0, 1], got {value!r}")
    return value


def two_body_effective_mass(m_a: float, m_b: float | None) -> float:
    """Reduced mass ``1/(1/m_a + 1/m_b)`` (kg) of two free bodies; ``m_b=None`` is a fixed obstacle."""
    m_a = _positive("mass m_a", m_a)
    if m_b is None or math.isinf(m_b):
        return m_a
    m_b = _positive("mass m_b", m_b)
    return m_a * m_b / (m_a + m_b)


# --------------------------------------------------------------------------------------------
# Kelvin-Voigt: restitution <-> damping
# --------------------------------------------------------------------------------------------


def _phi(zeta: float) -> float:
    """acos(zeta)/sqrt(1 - zeta^2), continued analytically through zeta = 1 (acosh for zeta > 1).

    The clamped contact ends at omega_n t = 2 phi(zeta) and the rebound ratio is exp(-2 zeta phi).
    """
    x = zeta - 1.0
    if abs(x) < 1e-5:
        # series about zeta = 1 (both branches): 1 - x/3 + 2x^2/15
        return 1.0 - x / 3.0 + 2.0 * x * x / 15.0
    if zeta < 1.0:
        return math.acos(zeta) / math.sqrt(1.0 - zeta * zeta)
    return math.acosh(zeta) / math.sqrt(zeta * zeta - 1.0)


def kv_restitution_clamped(zeta: float) -> float:
    """Realised restitution of the clamped KV contact (F = max(0, K d + D d'), no external force).

    ``exp(-2 zeta acos(zeta)/sqrt(1 - zeta^2))`` = ``exp(-zeta (pi - 2 asin zeta)/sqrt(1 - zeta^2))``
    for zeta < 1 and ``exp(-2 zeta acosh(zeta)/sqrt(zeta^2 - 1))`` for zeta > 1 (overdamped: the
    contact ends where K d + D d' = 0; the exit velocity is exactly -v0 exp(-zeta omega_n t_s) in
    both regimes). Monotone decreasing, e^-2 at zeta = 1.
    """
    zeta = _nonnegative("damping ratio zeta", zeta)
    return math.exp(-2.0 * zeta * _phi(zeta))


def kv_separation_time_clamped(zeta: float, omega_n: float) -> float:
    """Duration (s) of a clamped KV impact from d = 0 to F = 0: ``2 phi(zeta) / omega_n``.

    Equal to (pi - 2 asin zeta)/omega_d when underdamped.
    """
    return 2.0 * _phi(_nonnegative("damping ratio zeta", zeta)) / _positive("omega_n", omega_n)


def kv_zeta_clamped(cr: float) -> float:
    """Damping ratio that makes the *clamped* KV contact rebound at ``cr`` (inverse, Brent)."""
    cr = _restitution(cr)
    if cr == 1.0:
        return 0.0
    target = -math.log(cr)
    hi = 1.0
    while 2.0 * hi * _phi(hi) < target:
        hi *= 2.0
        if hi > 1e300:  # pragma: no cover - cr would have to underflow
            raise InputError(f"coefficient of restitution {cr!r} is too small to realise")
    return brentq(lambda z: 2.0 * z * _phi(z) - target, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=200)


def kv_damping_clamped(cr: float, stiffness: float, mass: float) -> float:
    """Damping D (N s/m) of the clamped KV model realising ``cr``: ``2 zeta sqrt(K m)``."""
    return 2.0 * kv_zeta_clamped(cr) * math.sqrt(_positive("stiffness", stiffness) * _positive("mass", mass))


def kv_restitution_unclamped(zeta: float) -> float:
    """Rebound ratio of the unclamped KV contact (ends at d = 0): ``exp(-pi zeta/sqrt(1-zeta^2))``."""
    zeta = _nonnegative("damping ratio zeta", zeta)
    if zeta >= 1.0:
        return 0.0  # overdamped, unclamped: d never returns to 0
    return math.exp(-math.pi * zeta / math.sqrt(1.0 - zeta * zeta))


def kv_damping_unclamped(cr: float, stiffness: float, mass: float) -> float:
    """``D = 2 |ln cr| sqrt(K m / (pi^2 + ln^2 cr))`` (N s/m): exact when the contact ends at d = 0.

    This is the magnitude of eq. (10) of the main paper, with the sign corrected (+).
    """
    cr = _restitution(cr)
    k = _positive("stiffness", stiffness)
    m = _positive("mass", mass)
    ln = math.log(cr)
    return 2.0 * abs(ln) * math.sqrt(k * m / (math.pi**2 + ln * ln))


# --------------------------------------------------------------------------------------------
# Kelvin-Voigt: closed-form solution
# --------------------------------------------------------------------------------------------


class _ExpForm:
    """Functions g(t) = c0 + e^{rt} (P C(t) + Q S(t)) of the damped linear oscillator.

    ``C`` and ``S`` solve y'' - 2 r y' + (r^2 - disc) y = 0 with C(0) = 1, C'(0) = 0, S(0) = 0,
    S'(0) = 1 after the e^{rt} factor is taken out: cos(wt), sin(wt)/w (disc = -w^2 < 0),
    cosh(bt), sinh(bt)/b (disc = b^2 > 0), 1, t (disc = 0). Overdamped products are evaluated as
    e^{s1 t}(1 +- e^{-2bt}) so that large b t neither overflows nor loses digits.
    """

    __slots__ = ("r", "disc", "w", "s1")

    def __init__(self, r: float, disc: float, a: float) -> None:
        self.r = r
        self.disc = disc
        self.w = math.sqrt(abs(disc))
        # slow overdamped root, computed without cancellation: s1 s2 = a = K/m
        self.s1 = a / (r - self.w) if disc > 0.0 else r

    def basis(self, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(e^{rt} C(t), e^{rt} S(t)) for t >= 0."""
        t = np.asarray(t, dtype=float)
        if self.disc < 0.0:
            e = np.exp(self.r * t)
            return e * np.cos(self.w * t), e * np.sin(self.w * t) / self.w
        if self.disc > 0.0:
            e1 = np.exp(self.s1 * t)
            q = np.exp(-2.0 * self.w * t)
            return 0.5 * e1 * (1.0 + q), 0.5 * e1 * (-np.expm1(-2.0 * self.w * t)) / self.w
        e = np.exp(self.r * t)
        return e, e * t

    def basis_scalar(self, t: float) -> tuple[float, float]:
        """:meth:`basis` for one float t (math instead of numpy: the engine's hot path)."""
        if self.disc < 0.0:
            e = math.exp(self.r * t)
            wt = self.w * t
            return e * math.cos(wt), e * math.sin(wt) / self.w
        if self.disc > 0.0:
            e1 = math.exp(self.s1 * t)
            return 0.5 * e1 * (1.0 + math.exp(-2.0 * self.w * t)), \
                0.5 * e1 * (-math.expm1(-2.0 * self.w * t)) / self.w
        e = math.exp(self.r * t)
        return e, e * t

    def value(self, c0: float, p: float, q: float, t: np.ndarray | float) -> np.ndarray | float:
        if isinstance(t, float):
            ec, es = self.basis_scalar(t)
        else:
            ec, es = self.basis(t)
        return c0 + p * ec + q * es

    def deriv(self, p: float, q: float) -> tuple[float, float]:
        """Coefficients (P', Q') of d/dt [e^{rt}(P C + Q S)]."""
        return self.r * p + q, self.r * q + self.disc * p

    def stationary(self, p: float, q: float, t_max: float, limit: int = 200_000) -> np.ndarray:
        """Sorted times in (0, t_max) where d/dt [e^{rt}(P C + Q S)] = 0."""
        dp, dq = self.deriv(p, q)
        if dp == 0.0 and dq == 0.0:
            return np.empty(0)
        if self.disc < 0.0:
            # dp cos(wt) + (dq/w) sin(wt) = 0
            theta0 = math.atan2(-dp, dq / self.w) % math.pi
            n = min(int((t_max * self.w - theta0) / math.pi) + 1, limit)
            ts = (theta0 + math.pi * np.arange(max(n, 0))) / self.w
        elif self.disc > 0.0:
            # dp cosh(bt) + dq sinh(bt)/b = 0 -> tanh(bt) = -dp b / dq
            if dq == 0.0:
                return np.empty(0)
            x = -dp * self.w / dq
            if not 0.0 < x < 1.0:
                return np.empty(0)
            ts = np.array([math.atanh(x) / self.w])
        else:
            if dq == 0.0:
                return np.empty(0)
            ts = np.array([-dp / dq])
        return ts[(ts > 0.0) & (ts < t_max)]

    def envelope(self, p: float, q: float, t: float) -> float:
        """Upper bound of |e^{rt}(P C + Q S)| at times >= t (underdamped only)."""
        return math.exp(self.r * t) * math.hypot(p, q / self.w)

    def first_down_crossing(self, c0: float, p: float, q: float, t_max: float) -> float | None:
        """First t in [0, t_max] where g goes from >= 0 to < 0 (None if none).

        g is monotone between consecutive stationary points (closed form), so each piece is a
        bracketed root-finding problem (Brent, ~1e-15 s). A piece that starts at t = 0 with
        g(0) <= 0 and g decreasing is an immediate crossing (t = 0).
        """
        dp, dq = self.deriv(p, q)

        def g(t: float) -> float:
            return float(self.value(c0, p, q, t))

        ga = g(0.0)
        if ga <= 0.0 and (dp < 0.0 or (dp == 0.0 and ga < 0.0)):
            return 0.0
        if self.disc < 0.0:
            theta0 = math.atan2(-dp, dq / self.w) % math.pi

            def pieces():  # stationary points theta0/w + k pi/w, k = 0, 1, ...
                k = 0
                while True:
                    yield (theta0 + k * math.pi) / self.w
                    k += 1
        else:
            st = self.stationary(p, q, t_max)

            def pieces():
                yield from (float(x) for x in st)
                yield t_max

        ta = 0.0
        for tb in pieces():
            if tb <= ta:
                continue
            if self.disc < 0.0 and c0 > 0.0 and self.envelope(p, q, ta) < c0:
                return None  # the decaying oscillation can no longer reach zero
            if self.disc < 0.0 and c0 < 0.0 and ga < 0.0 and self.envelope(p, q, ta) < -c0:
                return ta  # negative from here on (only reachable through rounding at a start)
            tb = min(tb, t_max)
            gb = g(tb)
            if ga >= 0.0 and gb < 0.0:
                return brentq(g, ta, tb, xtol=1e-16, rtol=1e-15, maxiter=200)
            if tb >= t_max:
                return None
            ta, ga = tb, gb
        return None  # pragma: no cover

    def maximum(self, c0: float, p: float, q: float, t_end: float) -> tuple[float, float]:
        """(max of g on [0, t_end], time of it), from the stationary points and the ends."""
        st = self.stationary(p, q, t_end)
        if st.size == 0:  # monotone: one of the ends (scalar path, no arrays)
            g0, g1 = self.value(c0, p, q, 0.0), self.value(c0, p, q, float(t_end))
            return (float(g0), 0.0) if g0 >= g1 else (float(g1), float(t_end))
        ts = np.concatenate(([0.0], st, [t_end]))
        vals = self.value(c0, p, q, ts)
        i = int(np.argmax(vals))
        return float(vals[i]), float(ts[i])


@dataclass(frozen=True)
class KVSolution:
    """Closed-form motion of ``m d'' + D d' + K d = f`` from ``(d0, v0)`` at t = 0 (unclamped ODE).

    ``d(t) = f/K + e^{rt}(y0 C + (v0 - r y0) S)``, ``d'(t) = e^{rt}(v0 C + (r v0 - a y0) S)`` with
    y0 = d0 - f/K, r = -D/(2m), a = K/m and C, S the basis of :class:`_ExpForm`: valid in all three
    damping regimes. Clamping is the caller's business (the contact ends at the first F = 0
    crossing: :meth:`separation_time`).
    """

    stiffness: float
    damping: float
    mass: float
    force: float
    d0: float
    v0: float

    def __post_init__(self) -> None:
        k, c, m = self.stiffness, self.damping, self.mass
        r = -c / (2.0 * m)
        a = k / m
        form = _ExpForm(r, r * r - a, a)
        y0 = self.d0 - self.force / k
        object.__setattr__(self, "_form", form)
        # d - f/K = e^{rt}(pd C + qd S); d' = e^{rt}(pv C + qv S)
        object.__setattr__(self, "_d", (y0, self.v0 - r * y0))
        object.__setattr__(self, "_v", (self.v0, r * self.v0 - a * y0))

    # state ---------------------------------------------------------------------------------
    def state(self, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(d, d') at time(s) t (s) after the start: arrays shaped like t."""
        form: _ExpForm = self._form  # type: ignore[attr-defined]
        d = form.value(self.force / self.stiffness, *self._d, t)  # type: ignore[attr-defined]
        v = form.value(0.0, *self._v, t)  # type: ignore[attr-defined]
        return d, v

    def _force_coeffs(self) -> tuple[float, float, float]:
        (pd, qd), (pv, qv) = self._d, self._v  # type: ignore[attr-defined]
        k, c = self.stiffness, self.damping
        return self.force, k * pd + c * pv, k * qd + c * qv

    def contact_force(self, t: np.ndarray | float, clamp: bool = True) -> np.ndarray:
        """K d + D d' (N) at time(s) t; clipped at 0 if ``clamp``."""
        f = self._form.value(*self._force_coeffs(), t)  # type: ignore[attr-defined]
        return np.maximum(f, 0.0) if clamp else f

    def impulse(self, t: np.ndarray | float) -> np.ndarray:
        """Integral of the (unclamped) contact force over [0, t] (N s): ``f t - m (d'(t) - d'(0))``."""
        _, v = self.state(t)
        return self.force * np.asarray(t, dtype=float) - self.mass * (v - self.v0)

    # events --------------------------------------------------------------------------------
    def separation_time(self, t_max: float, clamp: bool = True) -> float | None:
        """First time in [0, t_max] at which the contact ends, or None.

        Clamped: the force K d + D d' crosses zero downwards; unclamped: d crosses zero downwards.
        """
        form: _ExpForm = self._form  # type: ignore[attr-defined]
        if clamp:
            return form.first_down_crossing(*self._force_coeffs(), t_max)
        return form.first_down_crossing(self.force / self.stiffness, *self._d, t_max)  # type: ignore[attr-defined]

    def max_penetration(self, t_end: float) -> tuple[float, float]:
        """(max d on [0, t_end] (m), its time (s))."""
        return self._form.maximum(self.force / self.stiffness, *self._d, t_end)  # type: ignore[attr-defined]

    def peak_force(self, t_end: float) -> tuple[float, float]:
        """(max of K d + D d' on [0, t_end] (N), its time (s))."""
        return self._form.maximum(*self._force_coeffs(), t_end)  # type: ignore[attr-defined]


class KelvinVoigt:
    """Linear KV contact ``F = K d + D d'`` with D chosen to realise a coefficient of restitution.

    Parameters: ``stiffness`` K (N/m); ``cr`` in (0, 1] *or* an explicit ``damping`` D (N s/m);
    ``clamped`` (default True): F = max(0, K d + D d') and the restitution is realised exactly by
    the clamped inverse (:func:`kv_zeta_clamped`); False: the force may pull, the contact ends at
    d = 0 and D comes from :func:`kv_damping_unclamped`. Since D depends on the effective mass,
    :meth:`damping` takes m (recomputed at every impact when m changes with the configuration).
    """

    name = "kelvin_voigt"

    def __init__(
        self, stiffness: float, cr: float | None = 1.0, damping: float | None = None, clamped: bool = True
    ) -> None:
        self.stiffness = _positive("stiffness", stiffness)
        self.clamped = bool(clamped)
        if damping is not None:
            self.fixed_damping: float | None = _nonnegative("damping", damping)
            self.cr = None
        else:
            if cr is None:
                raise InputError("KelvinVoigt needs either cr or damping")
            self.cr = _restitution(cr)
            self.fixed_damping = None
            self._zeta = kv_zeta_clamped(self.cr) if self.clamped else None

    def damping(self, mass: float) -> float:
        """D (N s/m) for effective mass ``mass`` (kg)."""
        if self.fixed_damping is not None:
            return self.fixed_damping
        m = _positive("effective mass", mass)
        if self.clamped:
            return 2.0 * self._zeta * math.sqrt(self.stiffness * m)
        return kv_damping_unclamped(self.cr, self.stiffness, m)

    def force(self, d: np.ndarray | float, dd: np.ndarray | float, mass: float) -> np.ndarray:
        """Contact force (N) at penetration d (m) and rate dd (m/s); 0 where d <= 0."""
        d = np.asarray(d, dtype=float)
        f = self.stiffness * d + self.damping(mass) * np.asarray(dd, dtype=float)
        if self.clamped:
            f = np.maximum(f, 0.0)
        return np.where(d > 0.0, f, 0.0)

    def potential(self, d: np.ndarray | float) -> np.ndarray:
        """Elastic energy K d^2 / 2 (J) for d > 0."""
        d = np.maximum(np.asarray(d, dtype=float), 0.0)
        return 0.5 * self.stiffness * d * d

    def solve(self, mass: float, d0: float, v0: float, force: float) -> KVSolution:
        """Closed-form solution from (d0, v0) under the constant external force ``force`` (N)."""
        return KVSolution(self.stiffness, self.damping(mass), _positive("effective mass", mass),
                          _finite("external force", force), _finite("d0", d0), _finite("v0", v0))


# --------------------------------------------------------------------------------------------
# Hunt-Crossley family
# --------------------------------------------------------------------------------------------

#: laws mapping a requested restitution e to u = alpha v0 (dimensionless).
HC_LAWS = ("exact", "lankarani_nikravesh", "flores", "hunt_crossley_1971")


def _hc_h(u: float, e: float) -> float:
    """[ln(1+u) - ln(1-e u) - (1+e) u] / u^2; its root in u (or e) is the exact HC relation."""
    if u < 0.05:
        # series sum_{k>=2} ((-1)^{k+1} + e^k) u^{k-2} / k: no cancellation for small u
        s, uk, ek = 0.0, 1.0, e * e
        for k in range(2, 30):
            s += ((-1.0) ** (k + 1) + ek) * uk / k
            uk *= u
            ek *= e
        return s
    x = e * u
    if x >= 1.0:
        return math.inf
    return (math.log1p(u) - math.log1p(-x) - (1.0 + e) * u) / (u * u)


def hc_u_exact(e: float) -> float:
    """u = alpha v0 that makes F = K d^n (1 + alpha d') rebound at exactly ``e`` (any n, K, m).

    Root of (1 + u)/(1 - e u) = exp((1 + e) u) in (0, 1/e) (papers digest section 3). e = 1 -> 0.
    """
    e = _restitution(e, "restitution e")
    if e == 1.0:
        return 0.0
    hi = 1.0 / e
    lo = 0.0
    # shrink hi until h(hi) is finite and positive; the root is extremely close to 1/e for small e
    top = hi * (1.0 - 1e-15)
    if _hc_h(top, e) <= 0.0:
        return top
    return brentq(lambda u: _hc_h(u, e), lo, top, xtol=1e-15, rtol=1e-15, maxiter=300)


def hc_realised_restitution(u: float) -> float:
    """Exit/entry speed ratio e of F = K d^n (1 + alpha d') for u = alpha v0 >= 0 (free impact)."""
    u = _nonnegative("u = alpha v0", u)
    if u == 0.0:
        return 1.0
    top = min(1.0, (1.0 / u) * (1.0 - 1e-15))
    if _hc_h(u, top) <= 0.0:
        return top
    return brentq(lambda e: _hc_h(u, e), 0.0, top, xtol=1e-16, rtol=1e-15, maxiter=300)


def hc_alpha(law: str, e: float, v0: float) -> float:
    """alpha (s/m) of F = K d^n (1 + alpha d') for requested restitution e and impact speed v0.

    ``exact``: u from :func:`hc_u_exact` (realises e); ``lankarani_nikravesh``: u = 3(1 - e^2)/4;
    ``flores``: u = 8(1 - e)/(5 e); ``hunt_crossley_1971``: u = 3(1 - e)/2. alpha = u / v0.
    """
    e = _restitution(e, "restitution e")
    v0 = _positive("impact speed v0", v0)
    if law == "exact":
        u = hc_u_exact(e)
    elif law == "lankarani_nikravesh":
        u = 0.75 * (1.0 - e * e)
    elif law == "flores":
        u = 1.6 * (1.0 - e) / e
    elif law == "hunt_crossley_1971":
        u = 1.5 * (1.0 - e)
    else:
        raise InputError(f"Hunt-Crossley law must be one of {', '.join(HC_LAWS)}, got {law!r}")
    return u / v0


def hertz_stiffness(radius: float, e_star: float) -> float:
    """Hertz coefficient K_h = 4/3 E* sqrt(R*) (N/m^1.5) for F = K_h d^1.5 (sphere on plane: R* = R)."""
    return 4.0 / 3.0 * _positive("E*", e_star) * math.sqrt(_positive("radius", radius))


def hertz_max_penetration(mass: float, stiffness: float, v0: float, exponent: float = 1.5) -> float:
    """Elastic d_max = ((n+1) m v0^2 / (2 K))^(1/(n+1)) (m): energy balance, no external force."""
    n = exponent
    return ((n + 1.0) * mass * v0 * v0 / (2.0 * stiffness)) ** (1.0 / (n + 1.0))


def hertz_contact_time(mass: float, stiffness: float, v0: float) -> float:
    """Elastic Hertz (n = 1.5) contact duration 2.9432 d_max / v0 (s)."""
    # 2 int_0^1 dx / sqrt(1 - x^p) = (2/p) B(1/p, 1/2) with p = 5/2
    p = 2.5
    factor = 2.0 / p * math.gamma(1.0 / p) * math.gamma(0.5) / math.gamma(1.0 / p + 0.5)
    return factor * hertz_max_penetration(mass, stiffness, v0) / v0


class HuntCrossley:
    """Hunt-Crossley contact ``F = K d^n (1 + alpha d')`` (lambda = alpha K), clamped at F >= 0.

    ``stiffness`` K (N/m^n), ``exponent`` n (1.5: Hertz sphere), ``cr`` requested restitution,
    ``law`` one of :data:`HC_LAWS`. alpha = u(e)/v_impact depends on the impact speed: the engine
    calls :meth:`alpha` at every impact; ``v_floor`` (m/s) bounds it for impacts that start at rest.
    """

    def __init__(self, stiffness: float, cr: float = 1.0, exponent: float = 1.5, law: str = "exact",
                 v_floor: float = 1e-3) -> None:
        self.stiffness = _positive("stiffness", stiffness)
        self.exponent = _positive("exponent", exponent)
        self.cr = _restitution(cr)
        if law not in HC_LAWS:
            raise InputError(f"Hunt-Crossley law must be one of {', '.join(HC_LAWS)}, got {law!r}")
        self.law = law
        self.v_floor = _positive("v_floor", v_floor)
        self.name = {"exact": "hunt_crossley"}.get(law, law)

    def alpha(self, v_impact: float) -> float:
        """alpha (s/m) for an impact at speed ``v_impact`` (m/s, positive magnitude)."""
        if self.cr == 1.0:
            return 0.0
        return hc_alpha(self.law, self.cr, max(abs(float(v_impact)), self.v_floor))

    def force(self, d: np.ndarray | float, dd: np.ndarray | float, alpha: float) -> np.ndarray:
        """max(0, K d^n (1 + alpha dd)) (N), 0 where d <= 0."""
        d = np.maximum(np.asarray(d, dtype=float), 0.0)
        dd = np.asarray(dd, dtype=float)
        return np.maximum(self.stiffness * d**self.exponent * (1.0 + alpha * dd), 0.0)

    def potential(self, d: np.ndarray | float) -> np.ndarray:
        """K d^(n+1)/(n+1) (J) for d > 0."""
        d = np.maximum(np.asarray(d, dtype=float), 0.0)
        return self.stiffness * d ** (self.exponent + 1.0) / (self.exponent + 1.0)


@dataclass
class HCPhase:
    """Result of :func:`hc_integrate`: one contact phase of the Hunt-Crossley model.

    ``t_end`` (s, from the phase start), ``d``, ``v`` at t_end, ``reason``: "time" (t_max reached),
    "exit" (d = 0), "release" (1 + alpha d' = 0: the force reaches 0 inside the surface).
    ``peak_force``/``max_penetration`` over the phase (with their times); ``sol``: dense output
    (callable t -> [d, d'] for t in [0, t_end]).
    """

    t_end: float
    d: float
    v: float
    reason: str
    peak_force: float
    t_peak_force: float
    max_penetration: float
    t_max_penetration: float
    sol: Callable[[np.ndarray | float], np.ndarray]


def hc_integrate(model: HuntCrossley, alpha: float, mass: float, d0: float, v0: float, force: float,
                 t_max: float, rtol: float = 1e-12) -> HCPhase:
    """Integrate ``m d'' = f - K d^n (1 + alpha d')`` from (d0, v0) with DOP853 and event location.

    Stops at t_max, at d = 0 (downwards: the body leaves) or at 1 + alpha d' = 0 (downwards: the
    clamped force reaches zero inside the surface). Tolerances scale with the Hertz penetration of
    the current speed so that they stay meaningful from m/s impacts to resting contact.
    """
    k, n, m, f = model.stiffness, model.exponent, float(mass), float(force)
    vs = max(abs(v0), math.sqrt(abs(f) / m * max(d0, 1e-12)), 1e-9)
    ds = max(d0, hertz_max_penetration(m, k, vs, n), (abs(f) / k) ** (1.0 / n) if f else 0.0, 1e-15)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        d = y[0] if y[0] > 0.0 else 0.0
        fc = k * d**n * (1.0 + alpha * y[1])
        if fc < 0.0:
            fc = 0.0
        return np.array([y[1], (f - fc) / m])

    def ev_exit(_t: float, y: np.ndarray) -> float:
        return y[0]

    ev_exit.terminal, ev_exit.direction = True, -1  # type: ignore[attr-defined]

    def ev_release(_t: float, y: np.ndarray) -> float:
        return 1.0 + alpha * y[1]

    ev_release.terminal, ev_release.direction = True, -1  # type: ignore[attr-defined]

    def ev_vzero(_t: float, y: np.ndarray) -> float:
        return y[1]

    ev_vzero.direction = -1  # type: ignore[attr-defined]

    def ev_fpeak(_t: float, y: np.ndarray) -> float:
        # dF/dt = K [n d^{n-1} d' (1 + alpha d') + alpha d^n d'']
        d = y[0] if y[0] > 0.0 else 0.0
        fc = max(k * d**n * (1.0 + alpha * y[1]), 0.0)
        acc = (f - fc) / m
        if d <= 0.0:
            return y[1]
        return k * (n * d ** (n - 1.0) * y[1] * (1.0 + alpha * y[1]) + alpha * d**n * acc)

    ev_fpeak.direction = -1  # type: ignore[attr-defined]

    t_span = (0.0, float(t_max))
    # a phase that starts on the release surface and moves out: finish at once
    if 1.0 + alpha * v0 < 0.0 and d0 > 0.0:
        return _hc_trivial(model, alpha, d0, v0, "release")
    if d0 <= 0.0 and v0 < 0.0:
        return _hc_trivial(model, alpha, d0, v0, "exit")
    sol = solve_ivp(rhs, t_span, [d0, v0], method="DOP853", rtol=rtol, atol=[rtol * ds, rtol * vs],
                    events=[ev_exit, ev_release, ev_vzero, ev_fpeak], dense_output=True)
    if sol.status == -1:  # pragma: no cover - integration failure
        raise InputError(f"Hunt-Crossley integration failed: {sol.message}")
    reason = "time"
    t_end = float(sol.t[-1])
    d_end, v_end = float(sol.y[0, -1]), float(sol.y[1, -1])
    if sol.status == 1:
        if sol.t_events[0].size:
            reason = "exit"
            t_end = float(sol.t_events[0][0])
            d_end, v_end = 0.0, float(sol.y_events[0][0][1])
        else:
            reason = "release"
            t_end = float(sol.t_events[1][0])
            d_end, v_end = float(sol.y_events[1][0][0]), float(sol.y_events[1][0][1])
    # maxima: candidates at the ends and at the located stationary points
    cand_t = [0.0, t_end, *sol.t_events[2], *sol.t_events[3]]
    cand_t = [t for t in cand_t if 0.0 <= t <= t_end]
    ys = np.array([sol.sol(t) for t in cand_t])
    fs = model.force(ys[:, 0], ys[:, 1], alpha)
    i_f = int(np.argmax(fs))
    i_d = int(np.argmax(ys[:, 0]))
    return HCPhase(t_end, d_end, v_end, reason, float(fs[i_f]), cand_t[i_f], float(max(ys[i_d, 0], 0.0)),
                   cand_t[i_d], sol.sol)


def _hc_trivial(model: HuntCrossley, alpha: float, d0: float, v0: float, reason: str) -> HCPhase:
    def sol(t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.array([np.full(t.shape, d0), np.full(t.shape, v0)])

    fz = float(model.force(d0, v0, alpha))
    return HCPhase(0.0, d0, v0, reason, fz, 0.0, max(d0, 0.0), 0.0, sol)


# --------------------------------------------------------------------------------------------
# ballistic helper shared with the engine
# --------------------------------------------------------------------------------------------


def first_quadratic_crossing(c0: float, c1: float, c2: float, t_max: float, direction: int) -> float | None:
    """First t in [0, t_max] where g(t) = c0 + c1 t + c2 t^2 crosses zero in ``direction``.

    direction -1: from >= 0 to < 0 (g decreasing at the root); +1: upwards. A root at t ~ 0 with
    the wrong slope is ignored (the state just came from that event). Roots by the numerically
    stable quadratic formula, polished by one Newton step.
    """
    roots: list[float] = []
    if c2 == 0.0:
        if c1 != 0.0:
            roots.append(-c0 / c1)
    else:
        disc = c1 * c1 - 4.0 * c2 * c0
        if disc >= 0.0:
            sq = math.sqrt(disc)
            qq = -0.5 * (c1 + math.copysign(sq, c1))
            if qq != 0.0:
                roots.extend((qq / c2, c0 / qq))
            else:
                roots.append(0.0)
    best: float | None = None
    for t in roots:
        slope = c1 + 2.0 * c2 * t
        if slope != 0.0:
            t = t - (c0 + c1 * t + c2 * t * t) / slope  # Newton polish
        if t < 0.0:
            if t > -1e-15 * max(1.0, t_max):
                t = 0.0
            else:
                continue
        if t > t_max:
            continue
        slope = c1 + 2.0 * c2 * t
        if (direction < 0 and slope < 0.0) or (direction > 0 and slope > 0.0):
            if best is None or t < best:
                best = t
    return best


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
    mu = _nonnegative("friction coefficient mu", mu)
    fn = max(_finite("normal force", normal_force), 0.0)
    v_reg = _positive("regularisation speed v_reg", v_reg)
    v = np.asarray(sliding_velocity, dtype=float)
    speed = np.abs(v) if v.ndim == 0 else np.linalg.norm(v, axis=-1, keepdims=True)
    return -mu * fn * v / np.sqrt(speed * speed + v_reg * v_reg)


def grinding_tangential_force(sliding_velocity: np.ndarray | float, normal_force: float,
                              force_ratio: float, v_reg: float = 1e-3) -> np.ndarray:
    """Tangential grinding force with the grinding force ratio Ft/Fn (N), opposing sliding.

    The same regularised law as :func:`regularised_coulomb` with mu = Ft/Fn: the abrasive cutting
    force on the tool acts against the abrasive surface's sliding velocity.
    """
    return regularised_coulomb(sliding_velocity, normal_force, _nonnegative("force ratio Ft/Fn", force_ratio),
                               v_reg)


def spherical_patch(radius: float, depth: float, normal_force: float = 0.0, exact: bool = False
                    ) -> tuple[float, float]:
    """Contact patch of a spherical tool of ``radius`` R (m) at penetration ``depth`` d (m).

    Returns (patch radius a (m), mean pressure F/(pi a^2) (Pa)). ``exact=False``: the geometric
    intersection approximated for d << R, a = sqrt(2 R d) (also the Hertz-like small-depth form);
    ``exact=True``: the spherical cap, a = sqrt(2 R d - d^2). Zero depth gives a = 0 and pressure 0
    (no contact) or inf when a force is given at zero area.
    """
    r = _positive("tool radius", radius)
    d = _nonnegative("depth", depth)
    if exact and d > 2.0 * r:
        raise InputError(f"depth {d!r} exceeds the tool diameter {2 * r!r}")
    a = math.sqrt(2.0 * r * d - d * d) if exact else math.sqrt(2.0 * r * d)
    fn = _nonnegative("normal force", normal_force)
    if a == 0.0:
        return 0.0, (math.inf if fn > 0.0 else 0.0)
    return a, fn / (math.pi * a * a)
