"""Variable time-step engine for one body moving along a contact normal against a rigid surface.

The body is a 1-DOF model along the contact normal: gap ``x`` (m, > 0 separated, penetration
d = -x when x < 0), velocity ``v = dx/dt`` (m/s), effective mass m (kg) and an external force
``f_ext`` (N, along +normal; gravity on a ball over a floor: -m g). For a free ball m is its mass;
for an arm with a tool m is ``RobotModel.effective_mass(q, link, point, normal)`` (see
:func:`effective_mass_callback`) and f_ext the arm's force along the normal. Mass and external
force may be callables of (t, x, v); they are evaluated at the start of every outer step and held
constant over it, which makes every piece of the motion solvable exactly:

- free flight: exact constant-acceleration motion x + v t + a t^2/2 (no integration error, any step);
- contact onset: time of impact from that quadratic (closed-form root, no overshoot);
- contact: Kelvin-Voigt in closed form (:class:`~robot_grinding_sim.core.contact.kelvin_voigt.KVSolution`, any
  step length), its end (F = 0 clamped, d = 0 unclamped) from a bracketed root of the closed form;
  Hunt-Crossley integrated by DOP853 with event location;
- "loose" phases of clamped models (inside the surface but the force would pull): exact ballistic
  motion until the body leaves (d = 0) or the force re-engages.

The outer step is never shortened except to stop at these events; the number of outer steps and
of phases is reported. Samples are recorded at every phase end and, on request, on a regular grid
(``output_dt``) and a finer grid inside contacts (``contact_output_dt``), all from the exact
solutions.

The step runs compiled: :mod:`~robot_grinding_sim.core.contact.engine_kernels`, the same kernels
the coupled arm + contact step (:mod:`~robot_grinding_sim.core.sim.compiled_step`) runs for the
steps in which a contact starts or ends.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_grinding_sim.core.contact import engine_kernels as ek
from robot_grinding_sim.core.contact.law import ContactModel
from robot_grinding_sim.core.contact.registry import integrator, kernels
from robot_grinding_sim.core.errors import GrindingSimError, InputError
from robot_grinding_sim.core.layout import STATUS

__all__ = [
    "ContactRecord",
    "EngineResult",
    "NormalContactEngine",
    "effective_mass_callback",
    "semi_implicit_euler_penalty",
]

#: the engine's modes, by the kernels' codes (engine_kernels.FREE, CONTACT, LOOSE)
MODES = ("free", "contact", "loose")

Scalar = float | Callable[[float, float, float], float]


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


def _as_callable(name: str, value: Scalar) -> Callable[[float, float, float], float]:
    if callable(value):
        return value
    val = float(value)
    if not math.isfinite(val):
        raise InputError(f"{name} must be finite, got {value!r}")
    return lambda _t, _x, _v: val


class NormalContactEngine:
    """Event-driven, variable-step simulation of a body along a contact normal.

    Parameters: ``model`` a contact law's model (:class:`~robot_grinding_sim.core.contact.law.ContactModel`:
    ``KelvinVoigt``, ``HuntCrossley``, any registered law's); ``mass``
    effective mass (kg) or a callable (t, x, v) -> kg; ``external_force`` (N along +normal) or a
    callable (t, x, v) -> N; ``x0`` initial gap (m), ``v0`` initial velocity (m/s), ``t0`` (s).
    Drive it with :meth:`step` (one outer step, e.g. from a co-simulation) or :meth:`run`.

    The steps run compiled (:mod:`~robot_grinding_sim.core.contact.engine_kernels`, the kernels
    the coupled arm + contact step calls for its onset and release steps); this class evaluates
    the mass and force callables, keeps the samples and the impacts.
    """

    def __init__(self, model: ContactModel, mass: Scalar, external_force: Scalar,
                 x0: float, v0: float = 0.0, t0: float = 0.0) -> None:
        if not isinstance(model, ContactModel):
            raise InputError(f"model must be a contact law's model (KelvinVoigt, HuntCrossley, ...), not "
                             f"{type(model)!r}")
        self.model = model
        self._mass = _as_callable("mass", mass)
        self._fext = _as_callable("external force", external_force)
        for name, val in (("x0", x0), ("v0", v0), ("t0", t0)):
            if not math.isfinite(float(val)):
                raise InputError(f"{name} must be finite, got {float(val)!r}")
        self.steps = 0
        self.phases = 0
        self.contacts: list[ContactRecord] = []
        self._current: ContactRecord | None = None
        self.output_dt: float | None = None
        self.contact_output_dt: float | None = None
        self.contact_output_max = 5000  # fine-grid samples per impact at most
        self._st = np.empty(ek.ST.size)
        self._laws = kernels()
        self._m = math.nan  # no parameters yet
        self._smp = np.empty((4, 64))
        self._ev = np.empty((4, 16))
        self._cnt = np.zeros(3, dtype=np.int64)
        self._chunks: list[np.ndarray] = []
        x0, v0, t0 = float(x0), float(v0), float(t0)
        self._set_parameters(t0, x0, v0)
        self._smp, self._ev = ek.engine_init(self._laws, self._lp, self._m, self._f, x0, v0, t0, self._st, self._smp,
                                             self._ev, self._cnt)
        self._collect()

    # ----------------------------------------------------------------------------- state
    @property
    def t(self) -> float:
        return float(self._st[ek.T.t])

    @property
    def x(self) -> float:
        return float(self._st[ek.T.x])

    @property
    def v(self) -> float:
        return float(self._st[ek.T.v])

    @property
    def mode(self) -> str:
        return MODES[int(self._st[ek.T.mode])]

    def _set_parameters(self, t: float, x: float, v: float) -> None:
        """Mass and external force at (t, x, v), held over the next step, and the law's parameters
        for that mass (Kelvin-Voigt's damping)."""
        m = float(self._mass(t, x, v))
        if not 0.0 < m < math.inf:
            raise InputError(f"effective mass must be finite and > 0, got {m!r} at t = {t:.6g} s")
        f = float(self._fext(t, x, v))
        if not -math.inf < f < math.inf:
            raise InputError(f"external force must be finite, got {f!r} at t = {t:.6g} s")
        if m != self._m:  # the law's parameters depend on the mass at most (Kelvin-Voigt's damping)
            self._lp = self.model.kernel_parameters(m)
        self._m, self._f = m, f

    def _collect(self) -> None:
        """Take the kernel's samples (with their energies) and replay its contact log."""
        ns, nev = int(self._cnt[ek.C_NS]), int(self._cnt[ek.C_NEV])
        chunk = np.empty((5, ns))
        chunk[:4] = self._smp[:, :ns]
        chunk[4] = self.energy(chunk[ek.S_X], chunk[ek.S_V])
        self._chunks.append(chunk)
        for i in range(nev):
            kind, a, b, c = self._ev[:, i]
            cur = self._current
            if kind == ek.EV_OPEN:
                self._current = ContactRecord(t_impact=float(a), v_in=float(b))
                self.contacts.append(self._current)
            elif cur is None:
                continue
            elif kind == ek.EV_TRACK:
                cur.max_penetration = max(cur.max_penetration, float(a))
                cur.peak_force = max(cur.peak_force, float(b))
            elif kind == ek.EV_RELEASE:
                cur.v_out, cur.contact_duration = float(a), float(b)
                cur.releases += int(c)
            elif kind == ek.EV_EXIT:
                cur.t_exit = float(a)
                if cur.v_out is None:  # unclamped: leaves at d = 0
                    cur.v_out, cur.contact_duration = float(b), float(c)
                self._current = None
            elif kind == ek.EV_ENGAGE:  # the same impact continues
                cur.v_out = None
                cur.contact_duration = None
        self._cnt[ek.C_NS] = 0
        self._cnt[ek.C_NEV] = 0

    def contact_force(self, x: float, v: float) -> float:
        """Contact force (N, along +normal) at gap x and velocity v with the current parameters."""
        return float(self.model.kernel_force(-float(x), -float(v), float(self._st[ek.T.alpha]), self._m))

    def energy(self, x: np.ndarray | float, v: np.ndarray | float) -> np.ndarray:
        """Kinetic + external-force potential (-f_ext x) + elastic energy (J)."""
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        return 0.5 * self._m * v * v - self._f * x + self.model.potential(-x)

    # ----------------------------------------------------------------------------- driving
    def step(self, dt: float) -> None:
        """Advance by one outer step of ``dt`` seconds, stopping inside it only at events."""
        if not (dt > 0.0 and dt < math.inf):
            raise InputError(f"time step dt must be finite and > 0, got {dt!r}")
        self._set_parameters(self.t, self.x, self.v)
        self._cnt[ek.C_PHASES] = 0
        phases = integrator(int(self._lp[ek.P.law]))
        code, self._smp, self._ev = ek.engine_step(self._laws, phases, self._lp, self._m, self._f, self._st, float(dt),
                                                   float(self.output_dt or 0.0), float(self.contact_output_dt or 0.0),
                                                   int(self.contact_output_max), self._smp, self._ev, self._cnt)
        self.phases += int(self._cnt[ek.C_PHASES])
        self._collect()
        if code == ek.E.engine_stalled:
            raise GrindingSimError(f"{STATUS.message(code)} at t = {self.t!r} s in mode {self.mode} "
                                   f"(x = {self.x!r}, v = {self.v!r})")
        if code != ek.E.ok:  # pragma: no cover - integration failure
            raise InputError(f"{self.model.name}: {STATUS.message(code)} at t = {self.t} s")
        self.steps += 1

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
        rec = np.concatenate(self._chunks, axis=1) if len(self._chunks) > 1 else self._chunks[0]
        if len(self._chunks) > 1:
            self._chunks = [rec]
        t = rec[ek.S_T]
        order = np.argsort(t, kind="stable")
        x = rec[ek.S_X][order]
        return EngineResult(t=t[order], x=x, v=rec[ek.S_V][order], force=rec[ek.S_F][order],
                            penetration=np.maximum(-x, 0.0), energy=rec[4][order],
                            contacts=list(self.contacts), steps=self.steps, phases=self.phases,
                            wall_time_s=wall_time_s, in_contact_at_end=self.mode != "free")


def effective_mass_callback(
    robot: Any, q_of_t: Callable[[float], np.ndarray], link: str | None,
    point: np.ndarray | Callable[[float], np.ndarray], direction: np.ndarray | Callable[[float], np.ndarray],
) -> Callable[[float, float, float], float]:
    """Mass callback for :class:`NormalContactEngine` from an arm model.

    ``robot`` provides ``effective_mass(q, link, point, direction)`` (kg), e.g.
    ``robot_grinding_sim.core.robot.dynamics.RobotModel``: 1/(n^T J M(q)^-1 J^T n). ``q_of_t(t)`` gives the
    joint positions (rad or m, (nq,)) at time t; ``point`` is the contact point (m, root frame, (3,),
    moving with ``link``) and ``direction`` the contact normal (unit, root frame, (3,)), each a
    constant or a callable of t. An arm that cannot move the point along the normal has an infinite
    effective mass: the engine then stops with an InputError naming the time.
    """

    def _const(value: np.ndarray | Callable[[float], np.ndarray]) -> Callable[[float], np.ndarray]:
        if callable(value):
            return value
        arr = np.asarray(value, dtype=float)
        return lambda _t: arr

    pt, nv = _const(point), _const(direction)

    def mass(t: float, _x: float, _v: float) -> float:
        return float(robot.effective_mass(q_of_t(t), link, pt(t), nv(t)))

    return mass


def semi_implicit_euler_penalty(stiffness: float, damping: float, mass: float, external_force: float,
                                x0: float, v0: float, dt: float, duration: float,
                                clamp: bool = True) -> dict[str, np.ndarray]:
    """Negative control: the penalty contact integrated by plain semi-implicit Euler (main paper eq. 14).

    v += dt (f_ext + F(x, v))/m; x += dt v, with F = K d + D d' on d = -x > 0 (clamped at 0 if
    ``clamp``). Unstable for dt >= 2 sqrt(m/K) (the spring's explicit stability limit). Returns
    arrays ``t``, ``x``, ``v``, ``energy`` (J) sampled every step, shape (n,).
    """
    n = int(math.ceil(duration / dt))
    t = np.arange(n + 1) * dt
    xs = np.empty(n + 1)
    vs = np.empty(n + 1)
    es = np.empty(n + 1)
    x, v = float(x0), float(v0)
    k, c, m, f = float(stiffness), float(damping), float(mass), float(external_force)
    for i in range(n + 1):
        d = -x
        xs[i], vs[i] = x, v
        es[i] = 0.5 * m * v * v - f * x + (0.5 * k * d * d if d > 0.0 else 0.0)
        fc = 0.0
        if d > 0.0:
            fc = k * d - c * v
            if clamp and fc < 0.0:
                fc = 0.0
        if not math.isfinite(x) or abs(x) > 1e12:
            xs[i:], vs[i:], es[i:] = np.nan, np.nan, np.nan
            break
        v += dt * (f + fc) / m
        x += dt * v
    return {"t": t, "x": xs, "v": vs, "energy": es}
