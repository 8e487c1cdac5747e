"""Test oracle: the variable-step engine as it was in pure Python (before it ran compiled).

A verbatim copy of ``robot_grinding_sim.core.contact.engine.NormalContactEngine`` at commit
a355ed9 (free flight, Kelvin-Voigt closed form with its separation time found by scipy's brentq,
Hunt-Crossley through ``hc_integrate``, loose phases, dense output), with its two helpers
(``first_quadratic_crossing``, formerly in core.contact.laws, and the closed form's
``first_down_crossing``, formerly ``_ExpForm.first_down_crossing``) in pure Python, so that the
compiled engine (core.contact.engine_kernels) is checked against an independent implementation.
Not used by the package.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq

from robot_grinding_sim.core.contact.hunt_crossley import HuntCrossley, hc_integrate
from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt, KVSolution, stationary_times
from robot_grinding_sim.core.errors import GrindingSimError, InputError

__all__ = ["OracleEngine", "first_quadratic_crossing", "first_down_crossing", "separation_time"]

FREE, CONTACT, LOOSE = "free", "contact", "loose"

Scalar = float | Callable[[float, float, float], float]


def first_quadratic_crossing(c0: float, c1: float, c2: float, t_max: float, direction: int) -> float | None:
    """First t in [0, t_max] where g(t) = c0 + c1 t + c2 t^2 crosses zero in ``direction``."""
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


def first_down_crossing(form, c0: float, p: float, q: float, t_max: float) -> float | None:
    """First t in [0, t_max] where c0 + e^{rt}(P C + Q S) goes from >= 0 to < 0 (None if none)."""
    r, disc, w = form.r, form.disc, form.w
    dp, dq = r * p + q, r * q + disc * p

    def g(t: float) -> float:
        return float(form.value(c0, p, q, t))

    def envelope(t: float) -> float:
        return math.exp(r * t) * math.hypot(p, q / w)

    ga = g(0.0)
    if ga <= 0.0 and (dp < 0.0 or (dp == 0.0 and ga < 0.0)):
        return 0.0
    if disc < 0.0:
        theta0 = math.atan2(-dp, dq / w) % math.pi

        def pieces():
            k = 0
            while True:
                yield (theta0 + k * math.pi) / w
                k += 1
    else:
        st = stationary_times(r, disc, w, float(p), float(q), float(t_max))

        def pieces():
            yield from (float(x) for x in st)
            yield t_max

    ta = 0.0
    for tb in pieces():
        if tb <= ta:
            continue
        if disc < 0.0 and c0 > 0.0 and envelope(ta) < c0:
            return None
        if disc < 0.0 and c0 < 0.0 and ga < 0.0 and envelope(ta) < -c0:
            return ta
        tb = min(tb, t_max)
        gb = g(tb)
        if ga >= 0.0 and gb < 0.0:
            return brentq(g, ta, tb, xtol=1e-16, rtol=1e-15, maxiter=200)
        if tb >= t_max:
            return None
        ta, ga = tb, gb
    return None


def separation_time(sol: KVSolution, t_max: float, clamp: bool = True) -> float | None:
    """KVSolution.separation_time with the Python root finder."""
    (pd, qd), (pv, qv) = sol._d, sol._v
    if clamp:
        k, c = sol.stiffness, sol.damping
        return first_down_crossing(sol._form, sol.force, k * pd + c * pv, k * qd + c * qv, t_max)
    return first_down_crossing(sol._form, sol.force / sol.stiffness, pd, qd, t_max)


@dataclass
class ContactRecord:
    """One impact (a bounce): speeds are positive magnitudes (m/s), force N, times s, depth m.

    ``v_out``/``contact_duration`` refer to the moment the contact force last returned to zero
    (clamped models) or the body crossed d = 0 (unclamped); they are None while in contact.
    """

    t_impact: float
    v_in: float
    v_out: float | None = None
    peak_force: float = 0.0
    max_penetration: float = 0.0
    contact_duration: float | None = None
    t_exit: float | None = None  # time the body left the surface (d = 0)
    releases: int = 0  # times the clamped force returned to zero inside the surface

    def as_dict(self) -> dict[str, Any]:
        return {"t_impact": self.t_impact, "v_in": self.v_in, "v_out": self.v_out,
                "peak_force": self.peak_force, "max_penetration": self.max_penetration,
                "contact_duration": self.contact_duration}


@dataclass
class EngineResult:
    """Recorded samples (arrays of shape (n,), time-ordered) and the impacts.

    ``x`` gap (m), ``v`` velocity along +normal (m/s), ``force`` contact force along +normal (N),
    ``penetration`` max(0, -x) (m), ``energy`` kinetic + external-force potential + elastic (J).
    """

    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    force: np.ndarray
    penetration: np.ndarray
    energy: np.ndarray
    contacts: list[ContactRecord]
    steps: int
    phases: int
    wall_time_s: float = 0.0
    in_contact_at_end: bool = False


@dataclass
class _Recorder:
    t: list[float] = field(default_factory=list)
    x: list[float] = field(default_factory=list)
    v: list[float] = field(default_factory=list)
    f: list[float] = field(default_factory=list)
    e: list[float] = field(default_factory=list)

    def add(self, t: float, x: float, v: float, f: float, e: float) -> None:
        self.t.append(t)
        self.x.append(x)
        self.v.append(v)
        self.f.append(f)
        self.e.append(e)

    def extend(self, t: np.ndarray, x: np.ndarray, v: np.ndarray, f: np.ndarray, e: np.ndarray) -> None:
        self.t.extend(t.tolist())
        self.x.extend(x.tolist())
        self.v.extend(v.tolist())
        self.f.extend(f.tolist())
        self.e.extend(e.tolist())


def _as_callable(name: str, value: Scalar) -> Callable[[float, float, float], float]:
    if callable(value):
        return value
    val = float(value)
    if not math.isfinite(val):
        raise InputError(f"{name} must be finite, got {value!r}")
    return lambda _t, _x, _v: val


def _grid(t0: float, t1: float, dt: float | None) -> np.ndarray:
    """Multiples of dt strictly inside (t0, t1)."""
    if not dt or t1 <= t0:
        return np.empty(0)
    k0 = math.floor(t0 / dt) + 1
    k1 = math.ceil(t1 / dt) - 1
    if k1 < k0:
        return np.empty(0)
    return np.arange(k0, k1 + 1) * dt


class OracleEngine:
    """Event-driven, variable-step simulation of a body along a contact normal.

    Parameters: ``model`` a :class:`KelvinVoigt` or :class:`HuntCrossley` contact model; ``mass``
    effective mass (kg) or a callable (t, x, v) -> kg; ``external_force`` (N along +normal) or a
    callable (t, x, v) -> N; ``x0`` initial gap (m), ``v0`` initial velocity (m/s), ``t0`` (s).
    Drive it with :meth:`step` (one outer step, e.g. from a co-simulation) or :meth:`run`.
    """

    def __init__(self, model: KelvinVoigt | HuntCrossley, mass: Scalar, external_force: Scalar,
                 x0: float, v0: float = 0.0, t0: float = 0.0) -> None:
        if not isinstance(model, (KelvinVoigt, HuntCrossley)):
            raise InputError(f"model must be a KelvinVoigt or HuntCrossley model, not {type(model)!r}")
        self.model = model
        self._mass = _as_callable("mass", mass)
        self._fext = _as_callable("external force", external_force)
        self.t, self.x, self.v = float(t0), float(x0), float(v0)
        for name, val in (("x0", self.x), ("v0", self.v), ("t0", self.t)):
            if not math.isfinite(val):
                raise InputError(f"{name} must be finite, got {val!r}")
        self.steps = 0
        self.phases = 0
        self.contacts: list[ContactRecord] = []
        self._current: ContactRecord | None = None
        self._alpha = 0.0
        self._rec = _Recorder()
        self.output_dt: float | None = None
        self.contact_output_dt: float | None = None
        self.contact_output_max = 5000  # fine-grid samples per impact at most
        self._m = self._get_mass(self.t, self.x, self.v)
        self._f = float(self._fext(self.t, self.x, self.v))
        self.mode = self._initial_mode()
        if self.mode != FREE:
            self._open_contact(max(-self.v, 0.0))
        self._record_point()

    # ----------------------------------------------------------------------------- helpers
    def _get_mass(self, t: float, x: float, v: float) -> float:
        m = float(self._mass(t, x, v))
        if not 0.0 < m < math.inf:
            raise InputError(f"effective mass must be finite and > 0, got {m!r} at t = {t:.6g} s")
        return m

    @property
    def _clamped(self) -> bool:
        return isinstance(self.model, HuntCrossley) or self.model.clamped

    def _raw_force(self, d: float, dd: float) -> float:
        """Contact force before clamping, for d > 0."""
        if isinstance(self.model, KelvinVoigt):
            return self.model.stiffness * d + self.model.damping(self._m) * dd
        return self.model.stiffness * d**self.model.exponent * (1.0 + self._alpha * dd)

    def contact_force(self, x: float, v: float) -> float:
        """Contact force (N, along +normal) at gap x and velocity v with the current parameters."""
        d, dd = -x, -v
        if d <= 0.0:
            return 0.0
        f = self._raw_force(d, dd)
        return max(f, 0.0) if self._clamped else f

    def _potential(self, d: np.ndarray | float) -> np.ndarray:
        return self.model.potential(d)

    def energy(self, x: np.ndarray | float, v: np.ndarray | float) -> np.ndarray:
        """Kinetic + external-force potential (-f_ext x) + elastic energy (J)."""
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return 0.5 * self._m * v * v - self._f * x + self._potential(-x)

    def _initial_mode(self) -> str:
        a = self._f / self._m
        if self.x > 0.0 or (self.x == 0.0 and (self.v > 0.0 or (self.v == 0.0 and a >= 0.0))):
            return FREE
        if isinstance(self.model, HuntCrossley):
            self._alpha = self.model.alpha(max(-self.v, 0.0))
        if not self._clamped or self.x == 0.0:
            return CONTACT
        return CONTACT if self._raw_force(-self.x, -self.v) >= 0.0 else LOOSE

    def _open_contact(self, v_in: float) -> None:
        self._current = ContactRecord(t_impact=self.t, v_in=v_in)
        self.contacts.append(self._current)
        if isinstance(self.model, HuntCrossley):
            self._alpha = self.model.alpha(v_in)

    def _energy_scalar(self, x: float, v: float) -> float:
        e = 0.5 * self._m * v * v - self._f * x
        return e + float(self._potential(-x)) if x < 0.0 else e

    def _record_point(self) -> None:
        f = self.contact_force(self.x, self.v) if self.mode == CONTACT else 0.0
        self._rec.add(self.t, self.x, self.v, f, self._energy_scalar(self.x, self.v))

    def _record_dense(self, t0: float, t1: float, fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                      contact: bool) -> None:
        ts = _grid(t0, t1, self.output_dt)
        if contact and self.contact_output_dt and self._current is not None:
            # the fine grid covers the impact itself, not hours of resting contact
            t_stop = self._current.t_impact + self.contact_output_max * self.contact_output_dt
            if t0 < t_stop:
                ts = np.union1d(ts, _grid(t0, min(t1, t_stop), self.contact_output_dt))
        if ts.size == 0:
            return
        xs, vs = fn(ts - t0)
        if self.mode == CONTACT:
            fs = np.array([self.contact_force(x, v) for x, v in zip(xs, vs, strict=True)])
        else:
            fs = np.zeros_like(xs)
        self._rec.extend(ts, xs, vs, fs, self.energy(xs, vs))

    # ----------------------------------------------------------------------------- phases
    def _free_phase(self, tau: float) -> float:
        x0, v0, a = self.x, self.v, self._f / self._m
        if x0 <= 0.0 and (v0 < 0.0 or (v0 == 0.0 and a < 0.0)):
            te: float | None = 0.0
        else:
            te = first_quadratic_crossing(x0, v0, 0.5 * a, tau, -1)
        dt = tau if te is None else te
        if self.output_dt:

            def traj(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                return x0 + v0 * s + 0.5 * a * s * s, v0 + a * s

            self._record_dense(self.t, self.t + dt, traj, contact=False)
        self.t += dt
        self.v = v0 + a * dt
        if te is None:
            self.x = x0 + v0 * dt + 0.5 * a * dt * dt
        else:
            self.x = 0.0  # exactly on the surface: time of impact, no overshoot
            self.mode = CONTACT
            self._open_contact(max(-self.v, 0.0))
            self._record_point()
        return dt

    def _close_release(self, v_pen: float) -> None:
        """The contact force has returned to zero: the body leaves with this normal velocity."""
        if self._current is not None:
            self._current.v_out = max(-v_pen, 0.0)
            self._current.contact_duration = self.t - self._current.t_impact

    def _exit_surface(self) -> None:
        if self._current is not None:
            self._current.t_exit = self.t
            if self._current.v_out is None:  # unclamped: leaves at d = 0
                self._close_release(-self.v)
        self._current = None
        self.x = 0.0
        self.mode = FREE

    def _track(self, d_max: float, f_max: float) -> None:
        if self._current is not None:
            self._current.max_penetration = max(self._current.max_penetration, d_max)
            self._current.peak_force = max(self._current.peak_force, f_max)

    def _contact_phase(self, tau: float) -> float:
        d0, dd0, f_in = -self.x, -self.v, -self._f
        if isinstance(self.model, KelvinVoigt):
            sol = self.model.solve(self._m, d0, dd0, f_in)
            ts = separation_time(sol, tau, clamp=self.model.clamped)
            dt = tau if ts is None else ts
            self._track(sol.max_penetration(dt)[0], sol.peak_force(dt)[0])

            def traj(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                d, dd = sol.state(s)
                return -d, -dd

            d1, dd1 = (float(z) for z in sol.state(dt))
        else:
            ph = hc_integrate(self.model, self._alpha, self._m, d0, dd0, f_in, tau)
            dt = ph.t_end
            ts = None if ph.reason == "time" else dt
            self._track(ph.max_penetration, ph.peak_force)

            def traj(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                y = ph.sol(s)
                return -y[0], -y[1]

            d1, dd1 = ph.d, ph.v
        self._record_dense(self.t, self.t + dt, traj, contact=True)
        self.t += dt
        self.x, self.v = -d1, -dd1
        if ts is None:
            return dt
        self._record_point()  # the last contact sample (unclamped: the pulling force at d = 0)
        if not self._clamped or d1 <= 0.0:
            self._exit_surface()
            self._record_point()
        else:
            self._close_release(dd1)
            if self._current is not None:
                self._current.releases += 1
            self.mode = LOOSE
        return dt

    def _loose_phase(self, tau: float) -> float:
        d0, dd0, a = -self.x, -self.v, -self._f / self._m
        if d0 <= 0.0 and dd0 <= 0.0:
            self._exit_surface()
            self._record_point()
            return 0.0
        t_exit = first_quadratic_crossing(d0, dd0, 0.5 * a, tau, -1)
        if isinstance(self.model, KelvinVoigt):
            k, c = self.model.stiffness, self.model.damping(self._m)
            t_eng = first_quadratic_crossing(k * d0 + c * dd0, k * dd0 + c * a, 0.5 * k * a, tau, +1)
        else:
            al = self._alpha
            t_eng = first_quadratic_crossing(1.0 + al * dd0, al * a, 0.0, tau, +1) if al > 0.0 else None
        events = [(t, n) for t, n in ((t_exit, "exit"), (t_eng, "engage")) if t is not None]
        t_ev, kind = min(events) if events else (tau, "time")

        def traj(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return -(d0 + dd0 * s + 0.5 * a * s * s), -(dd0 + a * s)

        # deepest point of this ballistic arc inside the surface
        cand = [d0, d0 + dd0 * t_ev + 0.5 * a * t_ev * t_ev]
        if a != 0.0 and 0.0 < -dd0 / a < t_ev:
            s = -dd0 / a
            cand.append(d0 + dd0 * s + 0.5 * a * s * s)
        self._track(max(cand), 0.0)
        self._record_dense(self.t, self.t + t_ev, traj, contact=True)
        self.t += t_ev
        self.v = -(dd0 + a * t_ev)
        self.x = -(d0 + dd0 * t_ev + 0.5 * a * t_ev * t_ev)
        if kind == "exit":
            self._exit_surface()
            self._record_point()
        elif kind == "engage":
            self.mode = CONTACT
            if self._current is not None:  # the same impact continues
                self._current.v_out = None
                self._current.contact_duration = None
            self._record_point()
        return t_ev

    # ----------------------------------------------------------------------------- driving
    def step(self, dt: float) -> None:
        """Advance by one outer step of ``dt`` seconds, stopping inside it only at events."""
        if not (dt > 0.0 and dt < math.inf):
            raise InputError(f"time step dt must be finite and > 0, got {dt!r}")
        t_end = self.t + dt
        self._m = self._get_mass(self.t, self.x, self.v)
        self._f = float(self._fext(self.t, self.x, self.v))
        if not -math.inf < self._f < math.inf:
            raise InputError(f"external force must be finite, got {self._f!r} at t = {self.t:.6g} s")
        stalled = 0
        while self.t < t_end:
            tau = t_end - self.t
            if self.mode == FREE:
                adv = self._free_phase(tau)
            elif self.mode == CONTACT:
                adv = self._contact_phase(tau)
            else:
                adv = self._loose_phase(tau)
            self.phases += 1
            stalled = stalled + 1 if adv <= 0.0 else 0
            if stalled > 50:
                raise GrindingSimError(f"engine stalled at t = {self.t!r} s in mode {self.mode} "
                                       f"(x = {self.x!r}, v = {self.v!r})")
            if tau - adv <= 1e-15 * max(1.0, abs(t_end)):
                self.t = t_end  # absorb rounding: the step ends here
                break
        self.steps += 1
        self._record_point()

    def run(self, duration: float, dt: float, output_dt: float | None = None,
            contact_output_dt: float | None = None,
            on_progress: Callable[[float], None] | None = None) -> EngineResult:
        """Advance ``duration`` seconds in outer steps of ``dt`` (the last one shortened to end exactly).

        ``output_dt``: extra samples every output_dt seconds from the exact solutions (dense output
        inside long steps); ``contact_output_dt``: a finer grid inside contacts, for the first
        ``contact_output_max`` grid points after each impact (so a resting contact does not flood
        the record). ``on_progress`` is called with the simulated time after each step.
        """
        if not (math.isfinite(duration) and duration >= 0.0):
            raise InputError(f"duration must be finite and >= 0, got {duration!r}")
        if not (math.isfinite(dt) and dt > 0.0):
            raise InputError(f"time step dt must be finite and > 0, got {dt!r}")
        for name, val in (("output_dt", output_dt), ("contact_output_dt", contact_output_dt)):
            if val is not None and not (math.isfinite(val) and val > 0.0):
                raise InputError(f"{name} must be finite and > 0, got {val!r}")
        self.output_dt, self.contact_output_dt = output_dt, contact_output_dt
        wall = _time.perf_counter()
        t_stop = self.t + duration
        while t_stop - self.t > 1e-15 * max(1.0, abs(t_stop)):
            self.step(min(dt, t_stop - self.t))
            if on_progress is not None:
                on_progress(self.t)
        return self.result(_time.perf_counter() - wall)

    def result(self, wall_time_s: float = 0.0) -> EngineResult:
        """Everything recorded so far, time-ordered."""
        r = self._rec
        t = np.asarray(r.t)
        order = np.argsort(t, kind="stable")
        x = np.asarray(r.x)[order]
        return EngineResult(t=t[order], x=x, v=np.asarray(r.v)[order], force=np.asarray(r.f)[order],
                            penetration=np.maximum(-x, 0.0), energy=np.asarray(r.e)[order],
                            contacts=list(self.contacts), steps=self.steps, phases=self.phases,
                            wall_time_s=wall_time_s, in_contact_at_end=self.mode != FREE)
