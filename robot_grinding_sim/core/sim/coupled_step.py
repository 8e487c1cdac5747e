"""The coupled arm + contact step: the one physics of the in-process job and of the node graph.

A step of ``dt`` has two sides, which the in-process job (:class:`CoupledStep`) calls one after
the other and the node graph runs in separate processes:

1. The contact side (:class:`ContactSide`; ``collision_node`` + ``contact_solver_node``): at the
   arm's state (t, q, qd) the tool's contact geometry on the exact surface
   (:class:`~robot_grinding_sim.core.geometry.tool_contact.ToolContactQuery`: gap x, outward
   normal n, contact point p; a tool with a patch also its patch stiffness,
   :mod:`~robot_grinding_sim.core.geometry.tools`),
   the effective mass along n, m = 1 / (n^T J M^-1 J^T n) (J the translational Jacobian of the
   contact point, J_v - [p - c]x J_w: a ball's contact point lies along n from its centre c, so
   its normal row is the centre's; a disc's rim is not), the
   law's parameters for that mass (Kelvin-Voigt damping from the restitution) and the tangential
   grinding force per newton of normal force, against the abrasive's sliding velocity (the tool
   centre's velocity + (arm + spindle angular velocity) x contact offset, tangential part;
   regularised Coulomb with the grinding force ratio). Together:
   the reduced-order model along the normal, :class:`NormalContactModel` (papers/003: the
   contact is exchanged as a model, not as a force, so a stiff contact stays stable).
2. The arm side (:class:`ArmContactStepper`; ``dynamics_node``): the arm is stepped (servo, forward
   dynamics) with a trial wrench (the previous step's mean force); the normal velocity change it
   produces, minus the trial force's share, is the free acceleration a_free along n, so the force
   the arm exerts along n is f = m a_free. The normal coordinate (gap x, rate v) is then advanced
   in closed form over the step under f (Kelvin-Voigt: ``KVSolution``; the Hunt-Crossley family
   and the steps where a contact starts or ends: the variable-step engine's step,
   ``engine_kernels.normal_step``, compiled like the rest); the mean contact force
   is the impulse over dt, m (v1 - v0) / dt - f; and the arm's normal coordinate is set to the
   closed form's end state by a correction along b = m M^-1 J^T n (the direction a normal impulse
   moves the joints; n^T J b = 1). The contact stiffness is never integrated explicitly, so the
   step is stable whatever K dt^2 / m; the servo (computed torque, Kp = w^2, Kd = 2 zeta w, torque
   held over the step) is stable for w dt < 0.83.

When the model is older than the arm's state (the node graph exchanges every H >= dt), the arm
side moves the gap with the tool: x = x_model + n . (c - c_model) (the surface's tangent plane at
the model's point), its rate from its own joint velocities.

Both sides run compiled (:mod:`~robot_grinding_sim.core.sim.compiled_step`, numba); the classes
here are their wrappers for the nodes, and the in-process job calls the same kernels a batch of
steps at a time (:func:`~robot_grinding_sim.core.job.simulation.simulate`).

Units SI; frames: the robot's root (``base_link``); wrenches [F; T], the torque about the tcp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import ContactConfig, ServoConfig
from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.contact.engine_kernels import S_F, S_T, S_X, engine_list
from robot_grinding_sim.core.contact.law import FORCE, IMPACT, LP, ContactModel
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import ContactGeometry, ToolContactQuery
from robot_grinding_sim.core.layout import STATUS
from robot_grinding_sim.core.robot import arm_kernels as ak
from robot_grinding_sim.core.robot.arm_sim import ArmSimulator, ArmState, ComputedTorqueController
from robot_grinding_sim.core.robot.spatial import cross3
from robot_grinding_sim.core.sim import compiled_step as cs
from robot_grinding_sim.core.sim.compiled_step import ROM
from robot_grinding_sim.core.sim.held_part import held_kernel

FloatArray = NDArray[np.float64]



def contact_parameters(cfg: ContactConfig, spindle_speed: float) -> FloatArray:
    """The contact side's parameters as the compiled kernels take them (compiled_step.CP)."""
    law = make_contact_law(cfg)
    C = cs.C
    cp = cs.CP.zeros()
    cp[C.model] = registry.law_id(cfg.model)
    cp[C.stiffness], cp[C.cr], cp[C.exponent], cp[C.v_floor] = cfg.stiffness, cfg.cr, cfg.exponent, cfg.v_floor
    cp[C.damping], cp[C.zeta] = law.contact_damping()
    cp[C.force_ratio], cp[C.slip_speed], cp[C.spindle] = cfg.force_ratio, cfg.slip_speed, spindle_speed
    cp[C.u] = law.u
    return cp


def make_contact_law(cfg: ContactConfig) -> ContactModel:
    """The configured normal contact law's model (the registry's law named ``contact.model``)."""
    return registry.model_from_config(cfg)


# --------------------------------------------------------------------------------------------------
# the reduced-order model exchanged between the two sides

#: Field order of :meth:`NormalContactModel.to_array` (the ``data`` of the std_msgs/Float64MultiArray
#: that contact_solver_node publishes on ``contact/model``; docs/contact.md documents it): the
#: element names of compiled_step.ROM.
LAYOUT = ROM.names


class NormalContactModel(ROM.view("_NormalContactModelView")):  # type: ignore[misc]
    """The contact along its normal at one state of the arm: what the arm side needs to integrate it.

    A view of one (ROM.size,) float64 array in the layout :data:`~robot_grinding_sim.core.sim.compiled_step.ROM`
    (the kernels' ``rom``, the data of ``contact/model``): the attributes read the array itself.

    Attributes:
        t: sim time of the arm state it was computed from, s.
        model: law name (the registry's; ``law_id`` its id).
        stiffness: K, N/m (Hunt-Crossley family: N/m^exponent).
        damping: the LINEAR family's D for ``mass``, N s/m (0 for the Hunt-Crossley family).
        cr, exponent, v_floor: the law's restitution, exponent and speed floor (m/s).
        mass: effective mass of the arm along the normal at the tool centre, kg.
        gap: signed gap between tool and part, m (< 0: penetration).
        rate: d gap / dt = n . (tool centre velocity), m/s.
        normal: (3,) outward unit normal of the part, base_link.
        point: (3,) closest point on the part, m.
        centre: (3,) tool centre, m.
        tangential: (3,) tangential force per newton of normal force (force ratio x unit direction
            against the abrasive's sliding velocity), base_link.
    """

    __slots__ = ()

    @property
    def law_id(self) -> int:
        return int(self.array[cs.R.model])

    @property
    def model(self) -> str:  # type: ignore[override]
        return registry.names()[self.law_id]

    def to_array(self) -> FloatArray:
        """The model's (ROM.size,) float64 array in :data:`LAYOUT` order (the array itself)."""
        return self.array

    @classmethod
    def from_array(cls, data: Any) -> NormalContactModel:
        """The model of a (ROM.size,) array (a message's data); InputError naming the problem for a
        malformed array."""
        a = np.ascontiguousarray(data, dtype=np.float64)
        if a.ndim != 1:
            a = a.reshape(-1)
        if a.shape != (ROM.size,):
            raise InputError(f"contact model: expected {ROM.size} values ({', '.join(LAYOUT)}), got {a.size}")
        if not np.isfinite(a).all():
            bad = [LAYOUT[i] for i in np.flatnonzero(~np.isfinite(a))]
            raise InputError(f"contact model: NaN or inf in {bad}")
        R = cs.R
        k = int(a[R.model])
        laws = registry.names()
        if a[R.model] != k or not 0 <= k < len(laws):
            raise InputError(f"contact model: unknown law id {a[R.model]} (0..{len(laws) - 1}: {', '.join(laws)})")
        n = a[ROM.slice("normal")]
        if abs(float(np.linalg.norm(n)) - 1.0) > 1e-6:
            raise InputError(f"contact model: normal {n.tolist()} is not a unit vector")
        if not (a[R.stiffness] > 0 and a[R.mass] > 0 and a[R.damping] >= 0):
            raise InputError(f"contact model: stiffness {a[R.stiffness]}, mass {a[R.mass]} must be > 0 and damping "
                             f"{a[R.damping]} >= 0")
        return cls(a)

    @classmethod
    def from_kernel(cls, a: FloatArray) -> NormalContactModel:
        """The model the compiled contact side wrote (a (ROM.size,) array, kept; no checks: it is ours)."""
        return cls(a)

    def law(self) -> ContactModel:
        """The law's model for these parameters (the linear damping as it is, for this mass)."""
        return registry.get(self.law_id).model(stiffness=self.stiffness, cr=self.cr, damping=self.damping,
                                               exponent=self.exponent, v_floor=self.v_floor)

    def law_parameters(self, model: ContactModel) -> FloatArray:
        """The kernels' law parameters (:data:`~robot_grinding_sim.core.contact.law.LP`) of this model
        (``model``: its law's model, for the impact coefficient u), as the compiled arm side builds them."""
        lp = np.empty(LP.size)
        cs.rom_law_parameters(self.array, float(model.law.family), float(model.u), lp)
        return lp


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
        self.cs = np.array([-math.inf, math.inf])  # the next time worth a geometry query, the last gap
        self.cp = contact_parameters(contact, self.spindle_speed)
        self.kernel = model.kernel_arrays(tcp_link)
        self._alpha: float | None = None  # Hunt-Crossley: fixed at the start of each contact

    @property
    def last_gap(self) -> float:
        """The gap (m) of the last geometry query (inf while queries are put off)."""
        return float(self.cs[1])

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
        if t < self.cs[0]:
            self.cs[1] = math.inf
            return None
        kin = self.kinematics(q, need_minv=False)
        geom = self.query.query(kin.X)
        v_tcp = kin.J[:3] @ qd
        self.cs[1] = geom.gap
        if not cs.reach_check(float(t), float(dt), geom.gap, float(geom.normal @ v_tcp),
                              math.sqrt(float(v_tcp @ v_tcp)), self.cs):
            self._alpha = None
            return None
        return self.from_geometry(t, q, qd, geom)

    def from_geometry(self, t: float, q: FloatArray, qd: FloatArray, geom: ContactGeometry) -> NormalContactModel:
        """The model from contact geometry measured at (t, q, qd) (contact_solver_node's entry)."""
        kin = self.kinematics(q, need_minv=False)
        jt, jd, bd, ws, _, _ = self.kernel
        rom = np.empty(ROM.size)
        q_, qd_ = np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(qd, dtype=float)
        n = q_.shape[0]
        m = cs.rom_from_geometry(float(t), q_, qd_, float(geom.gap), np.ascontiguousarray(geom.normal, dtype=float),
                                 np.ascontiguousarray(geom.point, dtype=float), float(geom.stiffness), kin.X, kin.J,
                                 self.cp, jt, jd, bd, ws, np.empty((n, n)), np.zeros((n, n)), rom)
        if not (m > 0.0 and math.isfinite(m)):
            raise InputError(f"effective mass along the normal {geom.normal.tolist()} is {m} kg at q = "
                             f"{np.round(q, 4).tolist()} (the arm cannot move the tool along the normal: singular)")
        return NormalContactModel.from_kernel(rom)

    def release(self) -> None:
        """Nothing near the tool: the next contact starts afresh (Hunt-Crossley's alpha)."""
        self._alpha = None

    def from_rows(self, t: float, q: FloatArray, qd: FloatArray, rows: FloatArray) -> NormalContactModel | None:
        """The model from contact rows (k, 7) (the /contact/points cloud, base frame) measured at
        (t, q, qd); None (and the contact released) when there are no rows."""
        geom = ContactGeometry.from_rows(rows, self.kinematics(q, need_minv=False).X[:3, 3])
        if geom is None:
            self.release()
            return None
        return self.from_geometry(t, q, qd, geom)

    def normal_force(self, rom: NormalContactModel) -> float:
        """The contact force along the normal at the model's state, N (>= 0; 0 while apart): the
        law's kernel, its impact state (Hunt-Crossley's alpha) fixed at the first state in contact
        from its approach speed."""
        d, dd = -rom.gap, -rom.rate
        if d <= 0.0:
            self._alpha = None
            return 0.0
        lp = rom.law_parameters(self.law)
        kernel = self.law.law.kernel
        if self._alpha is None:
            self._alpha = kernel(IMPACT, lp, max(dd, 0.0), 0.0, 0.0, 0.0, 0.0)
        return max(kernel(FORCE, lp, self._alpha, d, dd, 0.0, 0.0), 0.0)

    def wrench(self, rom: NormalContactModel, force: float | None = None) -> FloatArray:
        """The contact wrench on the tool (6,): [F; T] in tcp axes, torque about the tcp, for the
        normal force ``force`` (default :meth:`normal_force`) and the model's tangential force.
        Uses the tool orientation of the last :meth:`from_geometry` (the model's state)."""
        if self.kin is None:
            raise InputError("ContactSide.wrench: no contact model computed yet")
        fn = self.normal_force(rom) if force is None else force
        w = contact_wrench_base(rom, fn)
        Rt = self.kin.X[:3, :3].T
        out = np.empty(6)  # (np.r_ costs more than the rest: this runs at 1 kHz in contact_solver_node)
        out[:3] = Rt @ w[:3]
        out[3:] = Rt @ w[3:]
        return out


def contact_wrench_base(rom: NormalContactModel, force: float) -> FloatArray:
    """The contact wrench on the tool (6,) in base_link axes, torque about the tool centre, for the
    normal force ``force`` (N) and the model's tangential force."""
    F = force * (rom.normal + rom.tangential)
    out = np.empty(6)
    out[:3] = F
    out[3:] = cross3(rom.point - rom.centre, F)
    return out


# --------------------------------------------------------------------------------------------------
# the arm side


@dataclass
class StepResult:
    """One step of the arm side.

    Attributes:
        t0: start time, s. dt: length, s.
        kind: ``"none"`` (no contact model: the arm moved alone), ``"free"`` (the tool stayed off the
            part), ``"contact"`` (in contact throughout, Kelvin-Voigt closed form), ``"hc_contact"``
            (in contact throughout, Hunt-Crossley family: the engine's contact phase) or
            ``"event"`` (onset, release: the variable-step engine's step), all compiled.
        force: mean normal contact force over the step (impulse / dt), N.
        gap0, rate0: normal coordinate at the start (m, m/s); gap1, rate1: at the end.
        end: (normal force (N), gap (m)) at the step's end from the closed form, or None.
        samples: ``samples(s)`` -> (normal force (k,), gap (k,)) at times s (k,) after t0.
        rom: the contact model used (None for ``"none"``).
        sv, rom_array: the compiled step's scalars and model (compiled_step.SV and ROM layouts);
        engine: the engine's samples (t, force, gap) of an event or Hunt-Crossley step (empty
            arrays otherwise).
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
    sv: FloatArray
    rom_array: FloatArray
    engine: tuple[FloatArray, FloatArray, FloatArray]


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
        self._laws: dict[tuple, ContactModel] = {}
        self._kernels = registry.kernels()
        self.kernel = model.kernel_arrays(tcp_link)
        self.held = held_kernel(model)  # the part on the robot (sim/held_part.py), or not
        # the trial wrench acts as ArmSimulator.set_wrench(w, "") puts it: on the tip link
        _, _, _, _, self.wrench_body, self.wrench_X = model.kernel_arrays(model.tip_link)

    @property
    def state(self) -> ArmState:
        return self.arm.state

    def law_of(self, rom: NormalContactModel) -> ContactModel:
        """The law object of a contact model (cached per parameter set)."""
        key = (rom.law_id, rom.stiffness, rom.damping, rom.cr, rom.exponent, rom.v_floor)
        law = self._laws.get(key)
        if law is None:
            if len(self._laws) > 64:
                self._laws.clear()
            law = self._laws[key] = rom.law()
        return law

    def step(self, dt: float, rom: NormalContactModel | None, kin: Kinematics | None = None) -> StepResult:
        """Advance the arm by ``dt`` with the contact ``rom`` (None: no contact near).

        ``kin``: unused (the compiled step computes the tcp kinematics itself; kept for callers).
        """
        arm = self.arm
        traj, t_traj = arm.active_trajectory()
        knots, coeffs, last = traj.arrays()
        st = arm.state
        n = st.q.shape[0]
        cur = np.empty((ak.ST_ROWS, n))
        cur[ak.Q], cur[ak.QD] = st.q, st.qd
        out, b, sv = np.empty((ak.ST_ROWS, n)), np.empty(n), np.empty(cs.SV.size)
        a = rom.to_array() if rom is not None else np.zeros(ROM.size)
        hc_u = self.law_of(rom).u if rom is not None else 0.0
        h_out = self.sample_dt or 0.0
        es = np.empty((4, int(dt / h_out) + 8 if h_out > 0.0 else 8))
        jt, jd, bd, ws, body, X = self.kernel
        ctrl = arm.controller
        # the model may be older than this state (the node graph): the arm side computes the
        # kinematics at its own q
        # the law's integrator (the stub unless the model's law is integrated: compiled on first use)
        phases = registry.integrator(rom.law_id if rom is not None else 0)
        code, es = cs.arm_side(self._kernels, phases, engine_list(), st.t, float(dt), cur, rom is not None, a,
                               self.f_prev, knots, coeffs, last, t_traj, ctrl.arm, ctrl.gravity, arm.gravity, jt, jd,
                               bd, ws, body, X, *self.held, self.wrench_body, self.wrench_X, self.project,
                               np.empty((4, 4)), np.empty((6, n)), np.empty((n, n)), np.zeros((n, n)), False, hc_u,
                               h_out, es, out, b, sv)
        et = ef = ex = np.empty(0)
        if code in (cs.E.state_not_finite, cs.E.mass_not_pd):
            raise InputError(f"{self.model.source}: arm step at t = {st.t} s: {STATUS.message(code)} (q "
                             f"{st.q.tolist()}, qd {st.qd.tolist()})")
        elif code != cs.E.ok:
            raise InputError(f"{STATUS.message(code)} in the step from t = {st.t} s (gap {sv[cs.V.x0]} m, "
                             f"rate {sv[cs.V.v0]} m/s)")
        elif sv[cs.V.kind] in (cs.EVENT, cs.HC):  # the engine's samples of the compiled step
            ns = int(sv[cs.V.ns])
            et, ef, ex = es[S_T, :ns].copy(), es[S_F, :ns].copy(), es[S_X, :ns].copy()
        kind = int(sv[cs.V.kind])
        if kind == cs.EVENT:
            self.event_steps += 1
        arm.state = ArmState(st.t + dt, out[ak.Q], out[ak.QD], out[ak.QDD], out[ak.TAU], out[ak.TAU_EXT],
                             out[ak.Q_REF], out[ak.QD_REF], out[ak.QDD_REF])
        self.f_prev = float(sv[cs.V.force])
        if kind != cs.NONE:
            self.contact_steps += 1

        def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
            s = np.ascontiguousarray(s, dtype=float)
            fn, xs = np.empty_like(s), np.empty_like(s)
            cs.step_samples(sv, a, s, fn, xs, et, ef, ex)
            return fn, xs

        end = None if kind == cs.EVENT else (float(sv[cs.V.end_f]), float(sv[cs.V.end_x]))
        return StepResult(st.t, dt, cs.KINDS[kind], float(sv[cs.V.force]), float(sv[cs.V.x0]), float(sv[cs.V.v0]),
                          float(sv[cs.V.x1]), float(sv[cs.V.v1]), end, samples, rom, sv, a, (et, ef, ex))


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
            res.sv[cs.V.gap0] = res.gap0
        self.steps += 1
        return res
