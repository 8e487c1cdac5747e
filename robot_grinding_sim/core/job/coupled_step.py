"""The coupled arm + contact step: the one physics of the in-process job and of the node graph.

A step of ``dt`` has two sides, which the in-process job (:class:`CoupledStep`) calls one after
the other and the node graph runs in separate processes:

1. The contact side (:class:`ContactSide`; ``collision_node`` + ``contact_solver_node``): at the
   arm's state (t, q, qd) the ball tool's contact geometry on the exact surface
   (:class:`~robot_grinding_sim.core.geometry.tool_contact.ToolContactQuery`: gap x, outward
   normal n, closest point p), the effective mass along n, m = 1 / (n^T J M^-1 J^T n) (J the
   translational Jacobian of the tool centre: its normal row equals the contact point's), the
   law's parameters for that mass (Kelvin-Voigt damping from the restitution) and the tangential
   grinding force per newton of normal force, against the abrasive's sliding velocity (the tool
   centre's velocity + (arm + spindle angular velocity) x contact offset, tangential part;
   regularised Coulomb with the grinding force ratio). Together:
   the reduced-order model along the normal, :class:`NormalContactModel` (papers/003: the
   contact is exchanged as a model, not as a force, so a stiff contact stays stable).
2. The arm side (:class:`ArmContactStepper`; ``dynamics_node``): the arm is stepped (servo,
   forward dynamics) with a trial wrench (the previous step's mean force); the normal velocity
   change it produces, minus the trial force's share, is the free acceleration a_free along n, so
   the force the arm exerts along n is f = m a_free. The normal coordinate (gap x, rate v) is
   then advanced in closed form over the step under f (Kelvin-Voigt: ``KVSolution``; onset,
   release and the Hunt-Crossley family: ``NormalContactEngine``); the mean contact force is the
   impulse over dt, m (v1 - v0) / dt - f; and the arm's normal coordinate is set to the closed
   form's end state by a correction along b = m M^-1 J^T n (the direction a normal impulse moves
   the joints; n^T J b = 1). The contact stiffness is never integrated explicitly, so the step is
   stable whatever K dt^2 / m; the servo (computed torque, Kp = w^2, Kd = 2 zeta w, torque held
   over the step) is stable for w dt < 0.83.

When the model is older than the arm's state (the node graph exchanges every H >= dt), the arm
side moves the gap with the tool: x = x_model + n . (c - c_model) (the surface's tangent plane at
the model's point), its rate from its own joint velocities.

Units SI; frames: the robot's root (``base_link``); wrenches [F; T], the torque about the tcp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import CONTACT_MODELS, ContactConfig, ServoConfig
from robot_grinding_sim.core.contact.engine import NormalContactEngine
from robot_grinding_sim.core.contact.hunt_crossley import HuntCrossley
from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import ContactGeometry, ToolContactQuery
from robot_grinding_sim.core.robot.arm_sim import ArmSimulator, ArmState, ComputedTorqueController
from robot_grinding_sim.core.robot.spatial import cross3

FloatArray = NDArray[np.float64]

_ZERO6 = np.zeros(6)


# --------------------------------------------------------------------------------------------------
# the contact law of a configuration


def make_contact_law(cfg: ContactConfig) -> KelvinVoigt | HuntCrossley:
    """The configured normal contact law (Kelvin-Voigt, or the Hunt-Crossley family)."""
    if cfg.model == "kelvin_voigt":
        return KelvinVoigt(cfg.stiffness, cr=cfg.cr, damping=cfg.damping if cfg.damping >= 0 else None)
    law = "exact" if cfg.model == "hunt_crossley" else cfg.model
    return HuntCrossley(cfg.stiffness, cfg.cr, cfg.exponent, law=law, v_floor=cfg.v_floor)


def static_force(law: KelvinVoigt | HuntCrossley, d: float) -> float:
    """The law's force at rest at penetration d (m): K d, or K d^n, N."""
    return law.stiffness * d if isinstance(law, KelvinVoigt) else law.stiffness * d**law.exponent


def static_penetration(law: KelvinVoigt | HuntCrossley, force: float) -> float:
    """Inverse of :func:`static_force`: the penetration (m) that holds ``force`` (N) at rest."""
    if isinstance(law, KelvinVoigt):
        return force / law.stiffness
    return (force / law.stiffness) ** (1.0 / law.exponent)


# --------------------------------------------------------------------------------------------------
# the reduced-order model exchanged between the two sides

#: Field order of :meth:`NormalContactModel.to_array` (the ``data`` of the std_msgs/Float64MultiArray
#: that contact_solver_node publishes on ``contact/model``; docs/contact.md documents it).
LAYOUT = ("t", "model", "stiffness", "damping", "cr", "exponent", "v_floor", "mass", "gap", "rate",
          "normal_x", "normal_y", "normal_z", "point_x", "point_y", "point_z",
          "centre_x", "centre_y", "centre_z", "tangential_x", "tangential_y", "tangential_z")


@dataclass(frozen=True)
class NormalContactModel:
    """The contact along its normal at one state of the arm: what the arm side needs to integrate it.

    Attributes:
        t: sim time of the arm state it was computed from, s.
        model: law name (:data:`~robot_grinding_sim.core.config.CONTACT_MODELS`).
        stiffness: K, N/m (Hunt-Crossley family: N/m^exponent).
        damping: Kelvin-Voigt D for ``mass``, N s/m (0 for the Hunt-Crossley family).
        cr, exponent, v_floor: the Hunt-Crossley law's restitution, exponent and speed floor (m/s).
        mass: effective mass of the arm along the normal at the tool centre, kg.
        gap: signed gap between tool and part, m (< 0: penetration).
        rate: d gap / dt = n . (tool centre velocity), m/s.
        normal: (3,) outward unit normal of the part, base_link.
        point: (3,) closest point on the part, m.
        centre: (3,) tool centre, m.
        tangential: (3,) tangential force per newton of normal force (force ratio x unit direction
            against the abrasive's sliding velocity), base_link.
    """

    t: float
    model: str
    stiffness: float
    damping: float
    cr: float
    exponent: float
    v_floor: float
    mass: float
    gap: float
    rate: float
    normal: FloatArray
    point: FloatArray
    centre: FloatArray
    tangential: FloatArray

    def to_array(self) -> FloatArray:
        """The model as (len(LAYOUT),) float64 values in :data:`LAYOUT` order."""
        return np.array([self.t, float(CONTACT_MODELS.index(self.model)), self.stiffness, self.damping, self.cr,
                         self.exponent, self.v_floor, self.mass, self.gap, self.rate, *self.normal, *self.point,
                         *self.centre, *self.tangential], dtype=np.float64)

    @classmethod
    def from_array(cls, data: Any) -> NormalContactModel:
        """Inverse of :meth:`to_array`; InputError naming the problem for a malformed array."""
        a = np.asarray(data, dtype=np.float64).reshape(-1)
        if a.shape != (len(LAYOUT),):
            raise InputError(f"contact model: expected {len(LAYOUT)} values ({', '.join(LAYOUT)}), got {a.size}")
        if not np.isfinite(a).all():
            bad = [LAYOUT[i] for i in np.flatnonzero(~np.isfinite(a))]
            raise InputError(f"contact model: NaN or inf in {bad}")
        k = int(a[1])
        if a[1] != k or not 0 <= k < len(CONTACT_MODELS):
            raise InputError(f"contact model: unknown law id {a[1]} (0..{len(CONTACT_MODELS) - 1}: "
                             f"{', '.join(CONTACT_MODELS)})")
        n = a[10:13]
        if abs(float(np.linalg.norm(n)) - 1.0) > 1e-6:
            raise InputError(f"contact model: normal {n.tolist()} is not a unit vector")
        if not (a[2] > 0 and a[7] > 0 and a[3] >= 0):
            raise InputError(f"contact model: stiffness {a[2]}, mass {a[7]} must be > 0 and damping {a[3]} >= 0")
        return cls(float(a[0]), CONTACT_MODELS[k], float(a[2]), float(a[3]), float(a[4]), float(a[5]), float(a[6]),
                   float(a[7]), float(a[8]), float(a[9]), n.copy(), a[13:16].copy(), a[16:19].copy(),
                   a[19:22].copy())

    def law(self) -> KelvinVoigt | HuntCrossley:
        """The law object for this model (Kelvin-Voigt with its damping for this mass)."""
        if self.model == "kelvin_voigt":
            return KelvinVoigt(self.stiffness, damping=self.damping)
        law = "exact" if self.model == "hunt_crossley" else self.model
        return HuntCrossley(self.stiffness, self.cr, self.exponent, law=law, v_floor=self.v_floor)


@dataclass
class Kinematics:
    """The tool centre's kinematics at one configuration (cached between the two sides).

    Attributes: q (n,) the configuration (the very array object it was computed for); X (4, 4)
    tcp pose; J (6, n) tcp Jacobian, base_link axes; Minv (n, n) inverse joint-space mass matrix
    or None until needed.
    """

    q: FloatArray
    X: FloatArray
    J: FloatArray
    Minv: FloatArray | None = None


# --------------------------------------------------------------------------------------------------
# the contact side


class ContactSide:
    """Contact geometry, effective mass, law and tangential force at the arm's state.

    Args:
        model: the RobotModel (URDF of arm and tool).
        contact: the contact configuration.
        tcp_link: the tool centre point (the ball's centre).
        spindle_speed: rad/s about the tool's z axis.
        query: the tool's contact query (None: geometry comes from outside, see
            :meth:`from_geometry`, as in contact_solver_node).
    """

    def __init__(self, model: Any, contact: ContactConfig, tcp_link: str, spindle_speed: float,
                 query: ToolContactQuery | None = None) -> None:
        if tcp_link not in model.link_names:
            raise InputError(f"{model.source}: no link {tcp_link!r}")
        self.model = model
        self.cfg = contact
        self.law = make_contact_law(contact)
        self.tcp_link = tcp_link
        self.spindle_speed = float(spindle_speed)
        self.query = query
        self.kin: Kinematics | None = None
        self.last_gap = math.inf
        self._next_check = -math.inf
        self._alpha: float | None = None  # Hunt-Crossley: fixed at the start of each contact

    def kinematics(self, q: FloatArray, need_minv: bool = True) -> Kinematics:
        """X, J (and M^-1) of the tcp at ``q``, computed once per configuration."""
        kin = self.kin
        if kin is None or kin.q is not q:
            kin = self.kin = Kinematics(q, self.model.fk(q, self.tcp_link), self.model.jacobian(q, self.tcp_link))
        if need_minv and kin.Minv is None:
            kin.Minv = np.linalg.inv(self.model.mass_matrix(q))
        return kin

    def evaluate(self, t: float, q: FloatArray, qd: FloatArray, dt: float) -> NormalContactModel | None:
        """The model at (t, q, qd), or None when the tool cannot reach the part within the next step
        (then the next geometry query is put off until it could)."""
        if self.query is None:
            raise InputError("ContactSide.evaluate needs a contact query (geometry)")
        if t < self._next_check:
            self.last_gap = math.inf
            return None
        kin = self.kinematics(q, need_minv=False)
        geom = self.query.query(kin.X[:3, 3])
        v_tcp = kin.J[:3] @ qd
        vn = float(geom.normal @ v_tcp)
        self.last_gap = geom.gap
        reach = 2.0 * dt * (abs(vn) + 0.05) + 1e-4
        if geom.gap > reach:
            speed = float(np.linalg.norm(v_tcp)) + 0.05  # + margin for the acceleration within a step
            self._next_check = t + max(0.0, (geom.gap - reach) / (2.0 * speed))
            self._alpha = None
            return None
        self._next_check = -math.inf
        return self.from_geometry(t, q, qd, geom)

    def from_geometry(self, t: float, q: FloatArray, qd: FloatArray, geom: ContactGeometry) -> NormalContactModel:
        """The model from contact geometry measured at (t, q, qd) (contact_solver_node's entry)."""
        kin = self.kinematics(q)
        n = geom.normal
        X, J = kin.X, kin.J
        Jn = n @ J[:3]
        m = 1.0 / float(Jn @ (kin.Minv @ Jn))
        if not (m > 0.0 and math.isfinite(m)):
            raise InputError(f"effective mass along the normal {n.tolist()} is {m} kg at q = {np.round(q, 4).tolist()} "
                             "(the arm cannot move the tool along the normal: singular)")
        v_tcp = J[:3] @ qd
        c = X[:3, 3]
        # the abrasive's velocity at the contact point: the tool centre's, plus the arm's and the
        # spindle's rotation about it; its tangential part slides on the part
        omega = J[3:] @ qd + self.spindle_speed * X[:3, 2]
        v_slide = v_tcp + cross3(omega, geom.point - c)
        v_slide -= (v_slide @ n) * n
        sp = math.sqrt(float(v_slide @ v_slide))
        c_ = self.cfg
        if c_.force_ratio > 0.0 and sp > 0.0:
            tangential = -(c_.force_ratio / math.sqrt(sp * sp + c_.slip_speed**2)) * v_slide
        else:
            tangential = np.zeros(3)
        damping = self.law.damping(m) if isinstance(self.law, KelvinVoigt) else 0.0
        return NormalContactModel(float(t), c_.model, c_.stiffness, damping, c_.cr, c_.exponent, c_.v_floor, m,
                                  float(geom.gap), float(n @ v_tcp), n.copy(), geom.point.copy(), c.copy(),
                                  tangential)

    def release(self) -> None:
        """Nothing near the tool: the next contact starts afresh (Hunt-Crossley's alpha)."""
        self._alpha = None

    def from_rows(self, t: float, q: FloatArray, qd: FloatArray, rows: FloatArray) -> NormalContactModel | None:
        """The model from contact rows (k, 7) (the /contact/points cloud, base frame) measured at
        (t, q, qd); None (and the contact released) when there are no rows."""
        geom = ContactGeometry.from_rows(rows, self.kinematics(q).X[:3, 3])
        if geom is None:
            self.release()
            return None
        return self.from_geometry(t, q, qd, geom)

    def normal_force(self, rom: NormalContactModel) -> float:
        """The contact force along the normal at the model's state, N (>= 0; 0 while apart).

        Kelvin-Voigt: max(0, K d + D d'); Hunt-Crossley family: K d^n (1 + alpha d') with alpha
        fixed at the first state in contact from its approach speed.
        """
        d, dd = -rom.gap, -rom.rate
        if d <= 0.0:
            self._alpha = None
            return 0.0
        if rom.model == "kelvin_voigt":
            return max(rom.stiffness * d + rom.damping * dd, 0.0)
        if self._alpha is None:
            self._alpha = self.law.alpha(max(dd, 0.0))
        return max(rom.stiffness * d**rom.exponent * (1.0 + self._alpha * dd), 0.0)

    def wrench(self, rom: NormalContactModel, force: float | None = None) -> FloatArray:
        """The contact wrench on the tool (6,): [F; T] in tcp axes, torque about the tcp, for the
        normal force ``force`` (default :meth:`normal_force`) and the model's tangential force.
        Uses the tool orientation of the last :meth:`from_geometry` (the model's state)."""
        if self.kin is None:
            raise InputError("ContactSide.wrench: no contact model computed yet")
        fn = self.normal_force(rom) if force is None else force
        w = contact_wrench_base(rom, fn)
        R = self.kin.X[:3, :3]
        return np.r_[R.T @ w[:3], R.T @ w[3:]]


def contact_wrench_base(rom: NormalContactModel, force: float) -> FloatArray:
    """The contact wrench on the tool (6,) in base_link axes, torque about the tool centre, for the
    normal force ``force`` (N) and the model's tangential force."""
    F = force * (rom.normal + rom.tangential)
    return np.r_[F, cross3(rom.point - rom.centre, F)]


# --------------------------------------------------------------------------------------------------
# the arm side


@dataclass
class StepResult:
    """One step of the arm side.

    Attributes:
        t0: start time, s. dt: length, s.
        kind: ``"none"`` (no contact model: the arm moved alone), ``"free"`` (the tool stayed off the
            part), ``"contact"`` (in contact throughout, Kelvin-Voigt closed form) or ``"event"``
            (onset, release or the Hunt-Crossley family: variable-step engine).
        force: mean normal contact force over the step (impulse / dt), N.
        gap0, rate0: normal coordinate at the start (m, m/s); gap1, rate1: at the end.
        end: (normal force (N), gap (m)) at the step's end from the closed form, or None.
        samples: ``samples(s)`` -> (normal force (k,), gap (k,)) at times s (k,) after t0.
        rom: the contact model used (None for ``"none"``).
    """

    t0: float
    dt: float
    kind: str
    force: float
    gap0: float
    rate0: float
    gap1: float
    rate1: float
    end: tuple[float, float] | None
    samples: Callable[[FloatArray], tuple[FloatArray, FloatArray]]
    rom: NormalContactModel | None


class ArmContactStepper:
    """The servo-controlled arm stepped with the contact along its normal in closed form.

    Args:
        model: the RobotModel. q0: (n,) start configuration (at rest).
        servo: the servo gains. gravity: (3,) m/s^2. tcp_link: the tool centre.
        project: impose the closed form's end state on the arm's normal coordinate (default True;
            False: apply the mean force alone, an explicit coupling, for comparison).
    """

    def __init__(self, model: Any, q0: FloatArray, servo: ServoConfig, gravity: Any, tcp_link: str,
                 project: bool = True) -> None:
        self.model = model
        self.tcp_link = tcp_link
        ctrl = ComputedTorqueController(model, servo.kp, servo.kd, gravity, servo.limit_effort)
        self.arm = ArmSimulator(model, q0, ctrl, gravity)
        self.project = project
        self.f_prev = 0.0  # the previous step's mean normal force: the next trial force
        self.contact_steps = 0
        self.event_steps = 0
        #: spacing of the engine's samples inside an event step (the in-process job's output
        #: period); None: the step's phase boundaries only
        self.sample_dt: float | None = None
        self._laws: dict[tuple, KelvinVoigt | HuntCrossley] = {}

    @property
    def state(self) -> ArmState:
        return self.arm.state

    def _law(self, rom: NormalContactModel) -> KelvinVoigt | HuntCrossley:
        key = (rom.model, rom.stiffness, rom.damping, rom.cr, rom.exponent, rom.v_floor)
        law = self._laws.get(key)
        if law is None:
            if len(self._laws) > 64:
                self._laws.clear()
            law = self._laws[key] = rom.law()
        return law

    def step(self, dt: float, rom: NormalContactModel | None, kin: Kinematics | None = None) -> StepResult:
        """Advance the arm by ``dt`` with the contact ``rom`` (None: no contact near).

        ``kin``: the tcp kinematics at the current configuration if already computed (the very
        ``state.q`` array), else they are computed here.
        """
        model, arm = self.model, self.arm
        st = arm.state
        t0, q0, qd0 = st.t, st.q, st.qd
        if rom is None:
            arm.set_wrench(_ZERO6, "")
            self.f_prev = 0.0
            arm.step(dt)

            def none(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.zeros_like(s), np.full_like(s, math.inf)

            return StepResult(t0, dt, "none", 0.0, math.inf, 0.0, math.inf, 0.0, (0.0, math.inf), none, None)
        if kin is None or kin.q is not q0:
            kin = Kinematics(q0, model.fk(q0, self.tcp_link), model.jacobian(q0, self.tcp_link))
        if kin.Minv is None:
            kin.Minv = np.linalg.inv(model.mass_matrix(q0))
        n = rom.normal
        c0 = kin.X[:3, 3]
        Jn = n @ kin.J[:3]
        vn0 = float(Jn @ qd0)
        x0 = rom.gap + float(n @ (c0 - rom.centre))  # the model's gap moved with the tool
        m = rom.mass
        b = m * (kin.Minv @ Jn)
        # trial step with the previous mean force (its contact point relative to the tool centre)
        f_trial = self.f_prev
        w = np.zeros(6)
        if f_trial > 0.0:
            w[:3] = f_trial * (n + rom.tangential)
            w[3:] = cross3(rom.point - rom.centre, w[:3])
        arm.set_wrench(w, "")
        arm.step(dt)
        st1 = arm.state
        Jn1 = n @ model.jacobian(st1.q, self.tcp_link)[:3]
        vn1_arm = float(Jn1 @ st1.qd)
        dx_arm = float(0.5 * (Jn + Jn1) @ (st1.q - q0))
        f_ext = m * ((vn1_arm - vn0) / dt - f_trial / m)  # the arm's own force along +n, N
        a_n = f_ext / m
        # free flight over the whole step (the tool stays above the part): exact, no force
        x_end = x0 + vn0 * dt + 0.5 * a_n * dt * dt
        x_min = min(x0, x_end)
        if a_n > 0.0 and 0.0 < -vn0 / a_n < dt:
            x_min = min(x_min, x0 - vn0 * vn0 / (2.0 * a_n))
        law = self._law(rom)
        kind = "free" if x_min > 0.0 else "event"
        if kind == "event" and isinstance(law, KelvinVoigt) and x0 < 0.0:
            sol = law.solve(m, -x0, -vn0, -f_ext)
            if sol.separation_time(dt, clamp=True) is None and float(sol.contact_force(0.0, clamp=False)) >= 0.0:
                kind = "contact"
        end: tuple[float, float] | None
        if kind == "free":
            x1, v1 = x_end, vn0 + a_n * dt
            end = (0.0, x1)

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.zeros_like(s), x0 + vn0 * s + 0.5 * a_n * s * s
        elif kind == "contact":
            d1, dd1 = (float(z) for z in sol.state(dt))
            x1, v1 = -d1, -dd1
            k_c, c_c = law.stiffness, sol.damping
            end = (k_c * d1 + c_c * dd1, x1)

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                # a few samples per step: the scalar path of the closed form is cheaper than arrays
                out = np.array([sol.state(si) for si in s.tolist()])
                return k_c * out[:, 0] + c_c * out[:, 1], -out[:, 0]
        else:
            self.event_steps += 1
            eng = NormalContactEngine(law, m, f_ext, x0=x0, v0=vn0, t0=0.0)
            eng.output_dt = self.sample_dt
            eng.step(dt)
            x1, v1 = eng.x, eng.v
            end = None
            res = eng.result()
            et, ef, ex = res.t, res.force, res.x

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.interp(s, et, ef), np.interp(s, et, ex)

        f_mean = max(m * (v1 - vn0) / dt - f_ext, 0.0)
        if kind == "free" and f_trial == 0.0:
            # no contact force, none tried: the arm's own step is the motion (exactly what it does
            # with no contact model at all, so the graph and the in-process job agree off the part)
            f_mean, x1, v1 = 0.0, x0 + dx_arm, vn1_arm
        elif self.project:
            st1.q = st1.q + b * ((x1 - x0) - dx_arm)
            st1.qd = st1.qd + b * (v1 - vn1_arm)
        else:
            st1.qd = st1.qd + b * (f_mean - f_trial) * dt / m
        self.contact_steps += 1
        self.f_prev = f_mean
        return StepResult(t0, dt, kind, f_mean, x0, vn0, x1, v1, end, samples, rom)


# --------------------------------------------------------------------------------------------------
# the two sides in one process


class CoupledStep:
    """Contact side and arm side called one after the other: the in-process job's step.

    Args:
        contact: the contact side (with its geometry query).
        arm: the arm side.
        dt: the step, s.
    """

    def __init__(self, contact: ContactSide, arm: ArmContactStepper, dt: float) -> None:
        if not (dt > 0 and math.isfinite(dt)):
            raise InputError(f"dt must be a finite positive step in seconds, got {dt}")
        self.contact = contact
        self.arm = arm
        self.dt = float(dt)
        self.steps = 0

    @property
    def state(self) -> ArmState:
        return self.arm.state

    def step(self) -> StepResult:
        """One step of ``dt``: contact model at the current state, then the arm with it."""
        st = self.arm.state
        rom = self.contact.evaluate(st.t, st.q, st.qd, self.dt)
        res = self.arm.step(self.dt, rom, self.contact.kin)
        if rom is None:
            res.gap0 = self.contact.last_gap  # as far as the last geometry query knew
        self.steps += 1
        return res
