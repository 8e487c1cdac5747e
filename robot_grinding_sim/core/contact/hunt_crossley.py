"""Hunt-Crossley family ``F = K d^n (1 + alpha d')`` (``lambda = alpha K``) along the normal.

alpha from the exact relation ``(1 + u) / (1 - e u) = exp((1 + e) u)``, ``u = alpha v0`` (papers
digest, section 3), or from the Lankarani-Nikravesh, Flores or original Hunt-Crossley laws (which
realise other restitutions: :func:`hc_realised_restitution`); Hertz stiffness and contact time.
The contact phase has no closed form and is integrated with DOP853 with event location
(:func:`hc_integrate`, compiled: :mod:`~robot_grinding_sim.core.contact.hc_kernels`). Conventions:
:mod:`~robot_grinding_sim.core.contact.laws`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.optimize import brentq

from robot_grinding_sim.core.contact import hc_kernels as hk
from robot_grinding_sim.core.contact.law import (
    ENGAGE,
    FAMILY,
    FORCE,
    FORCE_RATE,
    IMPACT,
    INTEGRATED,
    LAW_SIG,
    LP,
    RELEASE,
    ContactLaw,
    ContactModel,
)
from robot_grinding_sim.core.contact.laws import check_nonnegative, check_positive, check_restitution
from robot_grinding_sim.core.contact.registry import kernels, law_id
from robot_grinding_sim.core.contact.roots import quadratic_crossing
from robot_grinding_sim.core.errors import InputError

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
    e = check_restitution(e, "restitution e")
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
    u = check_nonnegative("u = alpha v0", u)
    if u == 0.0:
        return 1.0
    top = min(1.0, (1.0 / u) * (1.0 - 1e-15))
    if _hc_h(u, top) <= 0.0:
        return top
    return brentq(lambda e: _hc_h(u, e), 0.0, top, xtol=1e-16, rtol=1e-15, maxiter=300)


def hc_u(law: str, e: float) -> float:
    """u = alpha v0 (dimensionless) of F = K d^n (1 + alpha d') for requested restitution e.

    ``exact``: :func:`hc_u_exact` (realises e); ``lankarani_nikravesh``: u = 3(1 - e^2)/4;
    ``flores``: u = 8(1 - e)/(5 e); ``hunt_crossley_1971``: u = 3(1 - e)/2.
    """
    e = check_restitution(e, "restitution e")
    if law == "exact":
        return hc_u_exact(e)
    if law == "lankarani_nikravesh":
        return 0.75 * (1.0 - e * e)
    if law == "flores":
        return 1.6 * (1.0 - e) / e
    if law == "hunt_crossley_1971":
        return 1.5 * (1.0 - e)
    raise InputError(f"Hunt-Crossley law must be one of {', '.join(HC_LAWS)}, got {law!r}")


def hc_alpha(law: str, e: float, v0: float) -> float:
    """alpha (s/m) of F = K d^n (1 + alpha d') for requested restitution e and impact speed v0:
    u / v0 (:func:`hc_u`)."""
    e = check_restitution(e, "restitution e")
    v0 = check_positive("impact speed v0", v0)
    return hc_u(law, e) / v0


def hertz_stiffness(radius: float, e_star: float) -> float:
    """Hertz coefficient K_h = 4/3 E* sqrt(R*) (N/m^1.5) for F = K_h d^1.5 (sphere on plane: R* = R)."""
    return 4.0 / 3.0 * check_positive("E*", e_star) * math.sqrt(check_positive("radius", radius))


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


class HuntCrossley(ContactModel):
    """Hunt-Crossley contact ``F = K d^n (1 + alpha d')`` (lambda = alpha K), clamped at F >= 0.

    ``stiffness`` K (N/m^n), ``exponent`` n (1.5: Hertz sphere), ``cr`` requested restitution,
    ``law`` one of :data:`HC_LAWS` (kept as ``u_law``; ``law`` is the registered contact law).
    alpha = u(e)/v_impact depends on the impact speed: the engine
    calls :meth:`alpha` at every impact; ``v_floor`` (m/s) bounds it for impacts that start at rest.
    """

    def __init__(self, stiffness: float, cr: float = 1.0, exponent: float = 1.5, law: str = "exact",
                 v_floor: float = 1e-3) -> None:
        self.stiffness = check_positive("stiffness", stiffness)
        self.exponent = check_positive("exponent", exponent)
        self.cr = check_restitution(cr)
        if law not in HC_LAWS:
            raise InputError(f"Hunt-Crossley law must be one of {', '.join(HC_LAWS)}, got {law!r}")
        self.u_law = law
        self.law = _LAWS_OF[law]
        self.v_floor = check_positive("v_floor", v_floor)
        self.name = {"exact": "hunt_crossley"}.get(law, law)
        self._u: float | None = None

    def alpha(self, v_impact: float) -> float:
        """alpha (s/m) for an impact at speed ``v_impact`` (m/s, positive magnitude): u / max(|v|, v_floor)."""
        if self.cr == 1.0:
            return 0.0
        return self.u / check_positive("impact speed v0", max(abs(float(v_impact)), self.v_floor))

    @property
    def u(self) -> float:
        """u = alpha v_impact of the law and restitution (:func:`hc_u`; 0 for c_r = 1)."""
        if self._u is None:
            self._u = 0.0 if self.cr == 1.0 else hc_u(self.u_law, self.cr)
        return self._u

    def force(self, d: np.ndarray | float, dd: np.ndarray | float, alpha: float) -> np.ndarray:
        """max(0, K d^n (1 + alpha dd)) (N), 0 where d <= 0 (the law's kernel)."""
        return self.kernel_force(d, dd, alpha)

    def kernel_parameters(self, mass: float = 1.0) -> np.ndarray:
        """:data:`~robot_grinding_sim.core.contact.law.LP` (the mass does not enter)."""
        lp = LP.zeros()
        lp[P.law], lp[P.family], lp[P.clamped] = law_id(self.law.name), INTEGRATED, 1.0
        lp[P.stiffness], lp[P.exponent], lp[P.u], lp[P.v_floor] = self.stiffness, self.exponent, self.u, self.v_floor
        return lp

    def static_penetration(self, force: float) -> float:
        """(f / K)^(1/n) (m)."""
        return (force / self.stiffness) ** (1.0 / self.exponent)

    def contact_time(self, mass: float, v0: float) -> float:
        """2.94 d_max / v0 (s), d_max the elastic penetration (the Hertz contact time for n = 1.5)."""
        n = self.exponent
        d_max = ((n + 1.0) * mass * v0 * v0 / (2.0 * self.stiffness)) ** (1.0 / (n + 1.0))
        return 2.94 * d_max / v0

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
    the current speed so that they stay meaningful from m/s impacts to resting contact. The
    integration is the compiled :func:`~robot_grinding_sim.core.contact.hc_kernels.hc_phase` (the
    one the compiled coupled step calls).
    """
    # a phase that starts on the release surface and moves out: finish at once
    if 1.0 + alpha * v0 < 0.0 and d0 > 0.0:
        return _hc_trivial(model, alpha, d0, v0, "release")
    if d0 <= 0.0 and v0 < 0.0:
        return _hc_trivial(model, alpha, d0, v0, "exit")
    res = np.empty(hk.RES_LEN)
    seg, F, yo = hk.hc_phase_entry(kernels(), model.kernel_parameters(mass), float(alpha), float(mass), float(force),
                                   float(d0), float(v0), float(t_max), float(rtol), res)
    reason = hk.REASONS[int(res[hk.RES_REASON])]
    if reason == "failed":  # pragma: no cover - integration failure
        raise InputError(f"Hunt-Crossley integration failed: the step size fell below the spacing of "
                         f"floating-point times at t = {res[hk.RES_T]} s")
    return HCPhase(float(res[hk.RES_T]), float(res[hk.RES_D]), float(res[hk.RES_V]), reason, float(res[hk.RES_FPEAK]),
                   float(res[hk.RES_TFPEAK]), float(res[hk.RES_DMAX]), float(res[hk.RES_TDMAX]),
                   DenseSolution(seg, F, yo, int(res[hk.RES_NSEG])))


class DenseSolution:
    """The dense output of :func:`hc_integrate`: t (scalar or (k,)) -> [d, d'] ((2,) or (2, k))."""

    def __init__(self, seg: np.ndarray, F: np.ndarray, yo: np.ndarray, nseg: int) -> None:
        self.seg, self.F, self.yo, self.nseg = seg, F, yo, nseg

    def __call__(self, t: np.ndarray | float) -> np.ndarray:
        ta = np.asarray(t, dtype=float)
        flat = np.ascontiguousarray(ta.reshape(-1))
        out = np.empty((2, flat.size))
        hk.dense_eval(self.seg, self.F, self.yo, self.nseg, flat, out)
        return out[:, 0] if ta.ndim == 0 else out


def _hc_trivial(model: HuntCrossley, alpha: float, d0: float, v0: float, reason: str) -> HCPhase:
    def sol(t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.array([np.full(t.shape, d0), np.full(t.shape, v0)])

    fz = float(model.force(d0, v0, alpha))
    return HCPhase(0.0, d0, v0, reason, fz, 0.0, max(d0, 0.0), 0.0, sol)


# --------------------------------------------------------------------------------------------
# the laws (one compiled kernel: they differ in u = alpha v_impact, set in Python)
# --------------------------------------------------------------------------------------------

P = LP.index


@njit(LAW_SIG, cache=True)
def hc_kernel(op, lp, a, b, c, d, e):
    """The Hunt-Crossley family's compiled kernel (:mod:`~robot_grinding_sim.core.contact.law`):
    F = K d^n (1 + alpha d') (a: alpha, b: d, c: d'); alpha = u / max(|v|, v_floor) at an impact;
    re-engagement where 1 + alpha d' turns positive (d: the arc's acceleration, e: the horizon);
    the release event 1 + alpha d'; dF/dt at acceleration d."""
    if op == FORCE:
        return lp[P.stiffness] * b ** lp[P.exponent] * (1.0 + a * c)
    if op == IMPACT:
        return lp[P.u] / max(abs(a), lp[P.v_floor])
    if op == ENGAGE:
        return quadratic_crossing(1.0 + a * c, a * d, 0.0, e, +1) if a > 0.0 else math.inf
    if op == RELEASE:
        return 1.0 + a * c
    if op == FORCE_RATE:
        k, n = lp[P.stiffness], lp[P.exponent]
        return k * (n * b ** (n - 1.0) * c * (1.0 + a * c) + a * b**n * d)
    if op == FAMILY:
        return float(INTEGRATED)
    return math.nan


def _maker(u_law: str) -> Callable[..., HuntCrossley]:
    def make(stiffness: float, cr: float = 1.0, exponent: float = 1.5, v_floor: float = 1e-3,
             **_: object) -> HuntCrossley:
        return HuntCrossley(stiffness, cr, exponent, law=u_law, v_floor=v_floor)

    return make


_PARAMS = ("stiffness", "cr", "exponent", "v_floor")
HUNT_CROSSLEY = ContactLaw("hunt_crossley", INTEGRATED, _PARAMS, hc_kernel, _maker("exact"),
                           "F = max(0, K d^n (1 + alpha d')), alpha realising c_r exactly",
                           static_exponent=lambda cfg: cfg.exponent)
LANKARANI_NIKRAVESH = ContactLaw("lankarani_nikravesh", INTEGRATED, _PARAMS, hc_kernel,
                                 _maker("lankarani_nikravesh"), "Hunt-Crossley with u = 3 (1 - e^2) / 4",
                                 static_exponent=lambda cfg: cfg.exponent)
FLORES = ContactLaw("flores", INTEGRATED, _PARAMS, hc_kernel, _maker("flores"),
                    "Hunt-Crossley with u = 8 (1 - e) / (5 e)", static_exponent=lambda cfg: cfg.exponent)
#: the contact law of each u law (hunt_crossley_1971, not a contact.model, runs on the family's kernel)
_LAWS_OF = {"exact": HUNT_CROSSLEY, "lankarani_nikravesh": LANKARANI_NIKRAVESH, "flores": FLORES,
            "hunt_crossley_1971": HUNT_CROSSLEY}
