"""Kelvin-Voigt contact ``F = K d + D d'`` along the normal: restitution <-> damping (clamped and
unclamped conventions) and the closed-form solution from any initial state under a constant force
(under-, critically and over-damped).

Clamped (``F >= 0``, contact ends when F = 0; the default and the physical one) and unclamped (the
force may pull; contact ends at d = 0) conventions. Conventions of ``d``, ``f``, ``m``, ``F``:
:mod:`~robot_grinding_sim.core.contact.laws`; derivations in docs/contact.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.optimize import brentq

from robot_grinding_sim.core.contact.law import (
    ENGAGE,
    FAMILY,
    FORCE,
    FORCE_RATE,
    IMPACT,
    LAW_SIG,
    LINEAR,
    LP,
    RELEASE,
    ContactLaw,
    ContactModel,
)
from robot_grinding_sim.core.contact.laws import check_finite, check_nonnegative, check_positive, check_restitution
from robot_grinding_sim.core.contact.registry import law_id
from robot_grinding_sim.core.contact.roots import B_LEN, BF_CUR, brent_next, brent_start, quadratic_crossing
from robot_grinding_sim.core.errors import InputError

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
    zeta = check_nonnegative("damping ratio zeta", zeta)
    return math.exp(-2.0 * zeta * _phi(zeta))


def kv_separation_time_clamped(zeta: float, omega_n: float) -> float:
    """Duration (s) of a clamped KV impact from d = 0 to F = 0: ``2 phi(zeta) / omega_n``.

    Equal to (pi - 2 asin zeta)/omega_d when underdamped.
    """
    return 2.0 * _phi(check_nonnegative("damping ratio zeta", zeta)) / check_positive("omega_n", omega_n)


def kv_zeta_clamped(cr: float) -> float:
    """Damping ratio that makes the *clamped* KV contact rebound at ``cr`` (inverse, Brent)."""
    cr = check_restitution(cr)
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
    return 2.0 * kv_zeta_clamped(cr) * math.sqrt(check_positive("stiffness", stiffness) * check_positive("mass", mass))


def kv_restitution_unclamped(zeta: float) -> float:
    """Rebound ratio of the unclamped KV contact (ends at d = 0): ``exp(-pi zeta/sqrt(1-zeta^2))``."""
    zeta = check_nonnegative("damping ratio zeta", zeta)
    if zeta >= 1.0:
        return 0.0  # overdamped, unclamped: d never returns to 0
    return math.exp(-math.pi * zeta / math.sqrt(1.0 - zeta * zeta))


def kv_damping_unclamped(cr: float, stiffness: float, mass: float) -> float:
    """``D = 2 |ln cr| sqrt(K m / (pi^2 + ln^2 cr))`` (N s/m): exact when the contact ends at d = 0.

    This is the magnitude of eq. (10) of the main paper, with the sign corrected (+).
    """
    cr = check_restitution(cr)
    k = check_positive("stiffness", stiffness)
    m = check_positive("mass", mass)
    ln = math.log(cr)
    return 2.0 * abs(ln) * math.sqrt(k * m / (math.pi**2 + ln * ln))


# --------------------------------------------------------------------------------------------
# Kelvin-Voigt: closed-form solution
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def exp_basis(r: float, disc: float, w: float, s1: float, t: float) -> tuple[float, float]:
    """(e^{rt} C(t), e^{rt} S(t)) of :class:`_ExpForm` for one t >= 0 (compiled: the coupled step's
    closed form calls it; w = sqrt|disc|, s1 the slow overdamped root)."""
    if disc < 0.0:
        e = math.exp(r * t)
        wt = w * t
        return e * math.cos(wt), e * math.sin(wt) / w
    if disc > 0.0:
        e1 = math.exp(s1 * t)
        return 0.5 * e1 * (1.0 + math.exp(-2.0 * w * t)), 0.5 * e1 * (-math.expm1(-2.0 * w * t)) / w
    e = math.exp(r * t)
    return e, e * t


@njit(cache=True)
def stationary_times(r: float, disc: float, w: float, p: float, q: float, t_max: float,
                     limit: int = 200_000) -> np.ndarray:
    """Sorted times in (0, t_max) where d/dt [e^{rt}(P C + Q S)] = 0 (:meth:`_ExpForm.stationary`)."""
    dp, dq = r * p + q, r * q + disc * p
    if dp == 0.0 and dq == 0.0:
        return np.empty(0)
    if disc < 0.0:
        # dp cos(wt) + (dq/w) sin(wt) = 0
        theta0 = math.atan2(-dp, dq / w) % math.pi
        n = min(int((t_max * w - theta0) / math.pi) + 1, limit)
        ts = (theta0 + math.pi * np.arange(max(n, 0))) / w
    elif disc > 0.0:
        # dp cosh(bt) + dq sinh(bt)/b = 0 -> tanh(bt) = -dp b / dq
        if dq == 0.0:
            return np.empty(0)
        x = -dp * w / dq
        if not 0.0 < x < 1.0:
            return np.empty(0)
        ts = np.array([math.atanh(x) / w])
    else:
        if dq == 0.0:
            return np.empty(0)
        ts = np.array([-dp / dq])
    return ts[(ts > 0.0) & (ts < t_max)]


@njit(cache=True)
def form_maximum(r: float, disc: float, w: float, s1: float, c0: float, p: float, q: float,
                 t_end: float) -> tuple[float, float]:
    """(max of c0 + e^{rt}(P C + Q S) on [0, t_end], its time): the stationary points and the ends."""
    ec, es = exp_basis(r, disc, w, s1, 0.0)
    best, tb = c0 + p * ec + q * es, 0.0
    for t in stationary_times(r, disc, w, p, q, t_end):
        ec, es = exp_basis(r, disc, w, s1, t)
        g = c0 + p * ec + q * es
        if g > best:
            best, tb = g, t
    ec, es = exp_basis(r, disc, w, s1, t_end)
    g = c0 + p * ec + q * es
    if g > best:
        best, tb = g, t_end
    return best, tb


@njit(cache=True)
def kv_closed_form(stiffness: float, damping: float, mass: float, force: float, d0: float, v0: float
                   ) -> tuple[float, float, float, float, float, float, float, float]:
    """(r, disc, w, s1, pd, qd, pv, qv) of :class:`KVSolution`: d - f/K = e^{rt}(pd C + qd S),
    d' = e^{rt}(pv C + qv S)."""
    r = -damping / (2.0 * mass)
    a = stiffness / mass
    disc = r * r - a
    w = math.sqrt(abs(disc))
    s1 = a / (r - w) if disc > 0.0 else r
    y0 = d0 - force / stiffness
    return r, disc, w, s1, y0, v0 - r * y0, v0, r * v0 - a * y0


@njit(cache=True)
def kv_state(stiffness: float, damping: float, mass: float, force: float, d0: float, v0: float,
             t: float) -> tuple[float, float]:
    """(d, d') at t of the Kelvin-Voigt closed form (:meth:`KVSolution.state` for one t)."""
    r, disc, w, s1, pd, qd, pv, qv = kv_closed_form(stiffness, damping, mass, force, d0, v0)
    ec, es = exp_basis(r, disc, w, s1, t)
    return force / stiffness + pd * ec + qd * es, pv * ec + qv * es


@njit(cache=True)
def kv_stays_in_contact(stiffness: float, damping: float, mass: float, force: float, d0: float, v0: float,
                        t_end: float) -> bool:
    """True when the clamped contact force K d + D d' stays >= 0 over [0, t_end] (no separation:
    :meth:`KVSolution.separation_time` is None and the force at 0 is not negative)."""
    r, disc, w, s1, pd, qd, pv, qv = kv_closed_form(stiffness, damping, mass, force, d0, v0)
    c0, p, q = force, stiffness * pd + damping * pv, stiffness * qd + damping * qv
    if c0 + p < 0.0 or (c0 + p == 0.0 and r * p + q < 0.0):
        return False
    gmin, _ = form_maximum(r, disc, w, s1, -c0, -p, -q, t_end)
    return -gmin >= 0.0


@njit(cache=True)
def form_value(r: float, disc: float, w: float, s1: float, c0: float, p: float, q: float, t: float) -> float:
    """g(t) = c0 + e^{rt}(P C(t) + Q S(t)) for one t >= 0."""
    ec, es = exp_basis(r, disc, w, s1, t)
    return c0 + p * ec + q * es


@njit(cache=True)
def form_root(r: float, disc: float, w: float, s1: float, c0: float, p: float, q: float, xa: float, xb: float,
              xtol: float, rtol: float, maxiter: int) -> float:
    """Root of :func:`form_value` in [xa, xb] (a sign change): Brent's method (:mod:`.roots`)."""
    s = np.empty(B_LEN)
    x, done = brent_start(s, xa, xb, form_value(r, disc, w, s1, c0, p, q, xa), form_value(r, disc, w, s1, c0, p, q, xb),
                          xtol, rtol, maxiter)
    while not done:
        s[BF_CUR] = form_value(r, disc, w, s1, c0, p, q, x)
        x, done = brent_next(s)
    return x


@njit(cache=True)
def form_first_down_crossing(r: float, disc: float, w: float, s1: float, c0: float, p: float, q: float,
                             t_max: float) -> float:
    """First t in [0, t_max] where g(t) = c0 + e^{rt}(P C + Q S) goes from >= 0 to < 0 (inf if none).

    g is monotone between consecutive stationary points (closed form), so each piece is a
    bracketed root-finding problem (Brent, xtol 1e-16 s, rtol 1e-15). A piece that starts at
    t = 0 with g(0) <= 0 and g decreasing is an immediate crossing (t = 0). Underdamped: the
    decaying oscillation's envelope ends the search once it can no longer reach zero.
    """
    dp, dq = r * p + q, r * q + disc * p
    ga = form_value(r, disc, w, s1, c0, p, q, 0.0)
    if ga <= 0.0 and (dp < 0.0 or (dp == 0.0 and ga < 0.0)):
        return 0.0
    theta0 = 0.0
    st = np.empty(0)
    if disc < 0.0:  # stationary points theta0/w + k pi/w, k = 0, 1, ...
        theta0 = math.atan2(-dp, dq / w) % math.pi
    else:
        st = stationary_times(r, disc, w, p, q, t_max)
    env = math.hypot(p, q / w) if disc < 0.0 else 0.0
    ta = 0.0
    k = 0
    while True:
        if disc < 0.0:
            tb = (theta0 + k * math.pi) / w
        elif k < st.shape[0]:
            tb = st[k]
        else:
            tb = t_max
        k += 1
        if tb <= ta:
            continue
        if disc < 0.0 and c0 > 0.0 and math.exp(r * ta) * env < c0:
            return math.inf  # the decaying oscillation can no longer reach zero
        if disc < 0.0 and c0 < 0.0 and ga < 0.0 and math.exp(r * ta) * env < -c0:
            return ta  # negative from here on (only reachable through rounding at a start)
        tb = min(tb, t_max)
        gb = form_value(r, disc, w, s1, c0, p, q, tb)
        if ga >= 0.0 and gb < 0.0:
            return form_root(r, disc, w, s1, c0, p, q, ta, tb, 1e-16, 1e-15, 200)
        if tb >= t_max:
            return math.inf
        ta, ga = tb, gb


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
        """:meth:`basis` for one float t (the compiled :func:`exp_basis`)."""
        return exp_basis(self.r, self.disc, self.w, self.s1, t)

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
        """Sorted times in (0, t_max) where d/dt [e^{rt}(P C + Q S)] = 0 (:func:`stationary_times`)."""
        return stationary_times(self.r, self.disc, self.w, float(p), float(q), float(t_max), limit)

    def envelope(self, p: float, q: float, t: float) -> float:
        """Upper bound of |e^{rt}(P C + Q S)| at times >= t (underdamped only)."""
        return math.exp(self.r * t) * math.hypot(p, q / self.w)

    def first_down_crossing(self, c0: float, p: float, q: float, t_max: float) -> float | None:
        """First t in [0, t_max] where g goes from >= 0 to < 0 (None if none): the compiled
        :func:`form_first_down_crossing`."""
        t = form_first_down_crossing(self.r, self.disc, self.w, self.s1, float(c0), float(p), float(q),
                                     float(t_max))
        return None if t == math.inf else t

    def maximum(self, c0: float, p: float, q: float, t_end: float) -> tuple[float, float]:
        """(max of g on [0, t_end], time of it), from the stationary points and the ends (:func:`form_maximum`)."""
        return form_maximum(self.r, self.disc, self.w, self.s1, float(c0), float(p), float(q), float(t_end))


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
        r, disc, _, _, pd, qd, pv, qv = kv_closed_form(self.stiffness, self.damping, self.mass, self.force,
                                                      self.d0, self.v0)
        object.__setattr__(self, "_form", _ExpForm(r, disc, self.stiffness / self.mass))
        # d - f/K = e^{rt}(pd C + qd S); d' = e^{rt}(pv C + qv S)
        object.__setattr__(self, "_d", (pd, qd))
        object.__setattr__(self, "_v", (pv, qv))

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


class KelvinVoigt(ContactModel):
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
        self.stiffness = check_positive("stiffness", stiffness)
        self.clamped = bool(clamped)
        if damping is not None:
            self.fixed_damping: float | None = check_nonnegative("damping", damping)
            self.cr = None
        else:
            if cr is None:
                raise InputError("KelvinVoigt needs either cr or damping")
            self.cr = check_restitution(cr)
            self.fixed_damping = None
            self._zeta = kv_zeta_clamped(self.cr) if self.clamped else None

    def damping(self, mass: float) -> float:
        """D (N s/m) for effective mass ``mass`` (kg)."""
        if self.fixed_damping is not None:
            return self.fixed_damping
        m = check_positive("effective mass", mass)
        if self.clamped:
            return 2.0 * self._zeta * math.sqrt(self.stiffness * m)
        return kv_damping_unclamped(self.cr, self.stiffness, m)

    def force(self, d: np.ndarray | float, dd: np.ndarray | float, mass: float) -> np.ndarray:
        """Contact force (N) at penetration d (m) and rate dd (m/s); 0 where d <= 0 (the law's kernel)."""
        return self.kernel_force(d, dd, 0.0, mass)

    def kernel_parameters(self, mass: float) -> np.ndarray:
        """:data:`~robot_grinding_sim.core.contact.law.LP` with D for effective mass ``mass`` (kg)."""
        lp = LP.zeros()
        lp[P.law], lp[P.family], lp[P.clamped] = law_id(LAW.name), LINEAR, float(self.clamped)
        lp[P.stiffness], lp[P.damping] = self.stiffness, self.damping(mass)
        return lp

    def contact_damping(self) -> tuple[float, float]:
        """(fixed D or -1, the clamped damping ratio): D for mass m is 2 zeta sqrt(K m)."""
        if self.fixed_damping is not None:
            return self.fixed_damping, 0.0
        return -1.0, self._zeta if self.clamped else 0.0

    def static_penetration(self, force: float) -> float:
        """f / K (m)."""
        return force / self.stiffness

    def contact_time(self, mass: float, v0: float) -> float:
        """pi sqrt(m / K) (s): the undamped half period."""
        return math.pi * math.sqrt(mass / self.stiffness)

    def potential(self, d: np.ndarray | float) -> np.ndarray:
        """Elastic energy K d^2 / 2 (J) for d > 0."""
        d = np.maximum(np.asarray(d, dtype=float), 0.0)
        return 0.5 * self.stiffness * d * d

    def solve(self, mass: float, d0: float, v0: float, force: float) -> KVSolution:
        """Closed-form solution from (d0, v0) under the constant external force ``force`` (N)."""
        return KVSolution(self.stiffness, self.damping(mass), check_positive("effective mass", mass),
                          check_finite("external force", force), check_finite("d0", d0), check_finite("v0", v0))


# --------------------------------------------------------------------------------------------
# the law
# --------------------------------------------------------------------------------------------

P = LP.index


@njit(LAW_SIG, cache=True)
def kv_kernel(op, lp, a, b, c, d, e):
    """The Kelvin-Voigt law's compiled kernel (:mod:`~robot_grinding_sim.core.contact.law`):
    F = K d + D d' (a: unused, b: d, c: d'); re-engagement where K d + D d' turns positive along
    the ballistic arc (d: its acceleration, e: the horizon)."""
    if op == FORCE:
        return lp[P.stiffness] * b + lp[P.damping] * c
    if op == IMPACT:
        return 0.0
    if op == ENGAGE:
        k, cd = lp[P.stiffness], lp[P.damping]
        return quadratic_crossing(k * b + cd * c, k * c + cd * d, 0.5 * k * d, e, +1)
    if op == RELEASE:
        return lp[P.stiffness] * b + lp[P.damping] * c
    if op == FORCE_RATE:
        return lp[P.stiffness] * c + lp[P.damping] * d
    if op == FAMILY:
        return float(LINEAR)
    return math.nan


def _make(stiffness: float, cr: float | None = 1.0, damping: float | None = None, clamped: bool = True,
          **_: object) -> KelvinVoigt:
    return KelvinVoigt(stiffness, cr=cr, damping=damping, clamped=clamped)


LAW = ContactLaw("kelvin_voigt", LINEAR, ("stiffness", "cr", "damping"), kv_kernel, _make,
                 "F = max(0, K d + D d'), D from the restitution for the effective mass (or fixed)",
                 static_exponent=lambda cfg: 1.0)
KelvinVoigt.law = LAW
