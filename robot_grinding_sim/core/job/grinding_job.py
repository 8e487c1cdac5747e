"""The simulated grinding job, in one process: plan -> joint trajectory -> arm + contact -> force.

Pipeline (:func:`run_job`):

1. the part (built-in name, CAD or mesh file) at ``workpiece_pose`` (X_BP, the part in the robot's
   ``base_link``), the passes from :func:`robot_grinding_sim.core.planning.planner.plan` (or a plan.json);
2. a joint trajectory per pass (approach along the normal, dwell, the pass at the feed, retreat)
   and linking moves, from the plan's TCP poses by damped-least-squares IK on
   ``RobotModel.jacobian`` (this module's own IK: the planner's robot stage was not committed
   when this was written), with a per-pass commanded penetration offset;
3. the arm (:class:`~robot_grinding_sim.core.robot.arm_sim.ArmSimulator`: computed-torque position
   control following the trajectory, forward dynamics) with the tool in contact with the part,
   stepped at ``dt`` (default 1 ms) by :class:`ContactArmSimulation`;
4. the force-target optimisation (:func:`optimise_offsets`): each pass is re-simulated with a
   corrected penetration offset until its mean normal force is within the tolerance of the target;
5. the final run of the whole job (passes and links, continuous), whose samples
   :mod:`~robot_grinding_sim.core.job.outputs` writes as a bag, a plot and summary.json.

Per step (the main paper's Algorithm 1, with the corrections of DESIGN.md section 3):

- collision: tool sphere (radius R, centred on ``tcp``) against the workpiece
  (:class:`~robot_grinding_sim.core.geometry.collision.CollisionScene`; for a CAD part the ground face is the
  scene object and its exact surface answers the closest-point query, so depth and normal are
  exact); gap x = distance (m, < 0: penetration d = -x), unit normal n out of the part;
- effective mass along n at the contact point, m = 1 / (n^T J M^-1 J^T n) (the translational
  Jacobian of the ball centre has the same normal row as the contact point's);
- the normal coordinate (gap x, rate v = n . tcp velocity) under the constant force f the arm
  exerts along n over the step (f = m a_free, a_free the normal acceleration the arm's servo and
  dynamics give the point without the contact force) is advanced in closed form
  (:class:`~robot_grinding_sim.core.contact.laws.KVSolution`; events and the Hunt-Crossley family
  through :class:`~robot_grinding_sim.core.contact.engine.NormalContactEngine`); the step's mean contact
  force is impulse / dt = m (v1 - v0) / dt - f, and the output samples inside the step (every
  ``output_dt``) come from the same closed form;
- the tangential grinding force, Ft = force_ratio x Fn opposing the abrasive's sliding velocity
  (spindle rate x contact offset + feed; regularised Coulomb, ``contact.grinding_tangential_force``);
- the contact wrench (force and its torque about the tcp) is applied to the arm
  (``ArmSimulator.set_wrench``) and the arm is stepped; then the arm's normal coordinate is set to
  the closed form's end state (position and velocity) by a correction along b = m M^-1 J^T n (the
  direction a normal impulse moves the joints; n^T J b = 1), so the contact stiffness is never
  integrated explicitly.

How f is found: the arm is stepped with a trial force (the previous step's mean force); the
normal velocity change it produces, minus the trial force's own share dt F/m, is a_free dt. The
velocity correction afterwards is then exactly the extra impulse (F - F_trial) dt along b.

Stability. An explicitly coupled penalty contact (force from the current penetration, integrated
by the arm's semi-implicit Euler) is stable only for K dt^2 / m < 4 (the spring's explicit
limit; with the position update by the end-of-step velocity the closed-form force alone does not
remove it). Here the normal coordinate follows the exact solution of m x'' = f - F(x, x') over the
step, whatever K dt^2/m: the contact is unconditionally stable. What stays explicit is the servo
(torque held over the step): computed torque with Kp = w^2, Kd = 2 w under semi-implicit Euler is
stable for w dt < 2 (sqrt 2 - 1) = 0.83, so w = 200 rad/s allows steps up to about 4 ms.

Series compliance. With the exact model the computed-torque loop is e'' + Kd e' + Kp e =
-M^-1 J^T F: along the normal the servo is a spring k_arm = Kp m (N/m) in series with the contact.
A commanded penetration d_cmd (tool centre placed d_cmd inside the surface) settles at
F = d_cmd / (1/K + 1/k_arm), below K d_cmd; the force-target optimisation corrects for this and
for everything else (curvature, friction coupling) by simulation.

Units SI; frames: ``base_link`` (root) unless stated; wrenches [F; T].
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

from robot_grinding_sim.core.errors import GrindingSimError, InputError, PlanningError
from robot_grinding_sim.core.geometry.projector import FaceProjector

FloatArray = NDArray[np.float64]

_UP = np.array([0.0, 0.0, 1.0])
_ZERO3 = np.zeros(3)
_ZERO6 = np.zeros(6)

MODELS = ("kelvin_voigt", "hunt_crossley", "lankarani_nikravesh", "flores")


# --------------------------------------------------------------------------------------------------
# configuration


@dataclass
class JobConfig:
    """Parameters of a grinding job (SI units; see ``grinding simulate --help``).

    Attributes:
        part: built-in part name or CAD/mesh file.
        plan_file: a plan.json to use instead of planning (its part and workpiece pose win).
        faces: face indices to grind (None: the largest face looking up).
        unit: length unit of files that carry none.
        workpiece_pose: X_BP, (x, y, z, roll, pitch, yaw) m/rad or (4, 4).
        robot: URDF path or "default" (urdf/ur10e_grinding.urdf, tcp at the ball's centre).
        target_force: N. stiffness: contact K, N/m (Hunt-Crossley: N/m^exponent). cr: restitution.
        model: one of :data:`MODELS`. exponent: Hunt-Crossley exponent.
        dt: simulation step, s. output_dt: force sample period (closed form inside steps), s.
        feed: m/s along passes. stepover, spacing: pass parameters, m.
        max_passes: simulate the first N passes only (None: all). pass_length: keep the middle
            ``pass_length`` m of each pass (None: whole passes).
        approach: approach/retreat distance along the normal, m. approach_time: s each (the
            approach: fast to ``engage_gap`` m above the surface, then ``engage_time`` s onto it).
        dwell: s at the pass start before the feed starts (the force settles).
        link_height: rise of linking moves above the retreat points, m.
        force_ratio: grinding force ratio Ft/Fn. spindle_rpm: tool speed (about the tool z axis).
        servo_omega: servo bandwidth w (rad/s): Kp = w^2, Kd = 2 w (computed torque).
        optimise: run the force-target optimisation. tolerance: acceptance (fraction of the
            target, DESIGN: 0.05). opt_goal: the optimiser stops below this error (fraction).
        max_iterations: optimisation iterations per pass.
        ft_noise_std: F/T sensor noise per force channel, N (torque: /50). ft_cutoff_hz: filter.
        seed: noise seed.
    """

    part: str = "curved_panel"
    plan_file: str | None = None
    faces: list[int] | None = None
    unit: str | None = None
    workpiece_pose: Any = (0.7, 0.0, 0.0, 0.0, 0.0, 0.0)
    robot: str = "default"
    target_force: float = 5.0
    stiffness: float = 1.0e5
    cr: float = 0.5
    model: str = "kelvin_voigt"
    exponent: float = 1.5
    dt: float = 1e-3
    output_dt: float = 1e-3
    feed: float = 0.01
    stepover: float = 0.005
    spacing: float = 0.002
    max_passes: int | None = None
    pass_length: float | None = None
    approach: float = 0.01
    approach_time: float = 0.6
    engage_gap: float = 5e-4
    engage_time: float = 0.4
    dwell: float = 0.2
    link_height: float = 0.02
    force_ratio: float = 0.3
    spindle_rpm: float = 10000.0
    servo_omega: float = 200.0
    optimise: bool = True
    tolerance: float = 0.05
    opt_goal: float = 0.02
    max_iterations: int = 6
    ft_noise_std: float = 0.0
    ft_cutoff_hz: float | None = None
    seed: int = 0

    def validate(self) -> JobConfig:
        def pos(name: str) -> None:
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"{name.replace('_', '-')} must be a positive number, got {v!r}")

        for name in ("target_force", "stiffness", "dt", "output_dt", "feed", "stepover", "spacing", "approach",
                     "approach_time", "engage_gap", "engage_time", "servo_omega", "tolerance", "opt_goal"):
            pos(name)
        for name in ("dwell", "link_height", "force_ratio", "spindle_rpm", "ft_noise_std"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"{name.replace('_', '-')} must be >= 0, got {v!r}")
        if not 0.0 < self.cr <= 1.0:
            raise InputError(f"cr must be in (0, 1], got {self.cr!r}")
        if self.model not in MODELS:
            raise InputError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.dt > 0.05:
            raise InputError(f"dt {self.dt} s: over 50 ms (seconds are expected)")
        if self.servo_omega * self.dt >= 2.0 * (math.sqrt(2.0) - 1.0):
            lim = 2.0 * (math.sqrt(2.0) - 1.0) / self.servo_omega
            raise InputError(f"dt {self.dt} s is too long for the servo (bandwidth {self.servo_omega} rad/s): "
                             f"computed torque under semi-implicit Euler needs dt < {lim:.4g} s")
        if self.max_passes is not None and self.max_passes < 1:
            raise InputError(f"max-passes must be >= 1, got {self.max_passes}")
        if self.pass_length is not None and not self.pass_length > 0:
            raise InputError(f"pass-length must be > 0 m, got {self.pass_length}")
        if self.max_iterations < 1:
            raise InputError(f"max-iterations must be >= 1, got {self.max_iterations}")
        if self.ft_cutoff_hz is not None and not self.ft_cutoff_hz > 0:
            raise InputError(f"ft-cutoff must be > 0 Hz, got {self.ft_cutoff_hz}")
        return self


def make_contact_model(cfg: JobConfig) -> Any:
    """The configured normal contact model (``core.contact``)."""
    from robot_grinding_sim.core.contact.laws import HuntCrossley, KelvinVoigt

    if cfg.model == "kelvin_voigt":
        return KelvinVoigt(cfg.stiffness, cfg.cr)
    law = "exact" if cfg.model == "hunt_crossley" else cfg.model
    return HuntCrossley(cfg.stiffness, cfg.cr, cfg.exponent, law=law)


def static_force(model: Any, d: float) -> float:
    """The model's force at rest at penetration d (m): K d or K d^n."""
    from robot_grinding_sim.core.contact.laws import KelvinVoigt

    if isinstance(model, KelvinVoigt):
        return model.stiffness * d
    return model.stiffness * d**model.exponent


def static_penetration(model: Any, force: float) -> float:
    """Inverse of :func:`static_force`, m."""
    from robot_grinding_sim.core.contact.laws import KelvinVoigt

    if isinstance(model, KelvinVoigt):
        return force / model.stiffness
    return (force / model.stiffness) ** (1.0 / model.exponent)


# --------------------------------------------------------------------------------------------------
# workpiece in the collision scene


def build_scene(part: Any, faces: Sequence[int], X_BP: FloatArray, tool_radius: float,
                deflection: float = 2e-4) -> tuple[Any, bool]:
    """Collision scene with ``tool`` (sphere) and ``workpiece`` (the ground face, exact surface).

    For a CAD part with one ground face the scene object is that face's tessellation (a one-sided
    surface) with the face's exact surface as closest-point callback: depth and normal are exact.
    Several faces or a mesh part: the tessellated part, closest point on the triangles.

    Returns:
        (scene, exact): exact is True when the contact geometry comes from the CAD surface.
    """
    from robot_grinding_sim.core.geometry.collision import CollisionScene

    scene = CollisionScene()
    scene.add_sphere("tool", tool_radius)
    exact = False
    if not getattr(part, "is_mesh", True) and len(faces) == 1:
        face = part.face(int(faces[0]))
        mesh = face.tessellate(deflection=deflection)
        scene.add_mesh("workpiece", np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=False)
        scene.set_exact_surface("workpiece", FaceProjector(face))
        exact = True
    else:
        mesh = part.tessellate(deflection=deflection)
        scene.add_mesh("workpiece", np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP)
    return scene, exact


# --------------------------------------------------------------------------------------------------
# inverse kinematics and trajectories


def solve_ik(model: Any, targets: FloatArray, q_seed: FloatArray, rot_weight: float = 0.2,
             tol: float = 1e-9, max_iterations: int = 100, what: str = "target") -> FloatArray:
    """Damped-least-squares IK of the tip link along targets (N, 4, 4), each seeded by the previous.

    The planner's :class:`~robot_grinding_sim.core.robot.ik.IKSolver`, held to ``tol`` in position (m)
    and ``tol / rot_weight`` in rotation (rad): the job commands penetrations of tens of
    micrometres, so the planner's default micrometre tolerance is too loose here. A target far
    from its seed (e.g. the tool turned by 180 deg about its axis between zigzag passes) is reached
    by continuation: the pose is interpolated from the seed's in 16 steps.
    Raises PlanningError naming the target that does not converge.
    """
    from robot_grinding_sim.core.robot.ik import IKSolver

    exact = IKSolver(model, tol_position=tol, tol_rotation=tol / rot_weight, max_iterations=max_iterations,
                     rot_weight=rot_weight)
    coarse = IKSolver(model, tol_position=1e-6, tol_rotation=1e-6 / rot_weight, max_iterations=max_iterations,
                      rot_weight=rot_weight)
    out = np.empty((len(targets), model.nq))
    q = np.asarray(q_seed, dtype=float).copy()
    for k, T in enumerate(targets):
        q_new, ok, ep, er = exact.solve(T, q)
        if not ok:  # continuation from the seed's pose
            X0 = model.fk(q)
            slerp = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([X0[:3, :3], T[:3, :3]])))
            q_new = q.copy()
            for s in np.linspace(0.0, 1.0, 17)[1:]:
                Ts = np.eye(4)
                Ts[:3, :3] = slerp(s).as_matrix()
                Ts[:3, 3] = (1 - s) * X0[:3, 3] + s * T[:3, 3]
                q_new, ok, ep, er = (exact if s == 1.0 else coarse).solve(Ts, q_new)
            if not ok:
                raise PlanningError(f"{what} {k}: IK did not converge (error {ep:.3g} m, {er:.3g} rad) at TCP "
                                    f"{np.round(T[:3, 3], 4).tolist()} m in base_link; move the workpiece")
        q = q_new
        out[k] = q
    return out


def _smooth_profile(length: float, speed: float, ramp: float) -> tuple[Callable[[FloatArray], FloatArray], float]:
    """Arc length s(t) of a rest-to-rest motion over ``length`` m at ``speed`` with smoothstep
    velocity ramps of ``ramp`` s (shortened for short motions). Returns (s(t), duration)."""
    ramp = min(ramp, length / speed) if speed > 0 else ramp
    ramp = max(ramp, 1e-6)
    d_ramp = 0.5 * speed * ramp  # distance covered by one ramp
    cruise = max(0.0, length - 2.0 * d_ramp) / speed
    vmax = speed if cruise > 0 else length / ramp
    T = 2.0 * ramp + cruise

    def s_of_t(t: FloatArray) -> FloatArray:
        t = np.clip(np.asarray(t, dtype=float), 0.0, T)
        x1 = np.clip(t / ramp, 0.0, 1.0)
        s = vmax * ramp * (x1**3 - 0.5 * x1**4)  # integral of smoothstep
        s = s + vmax * np.clip(t - ramp, 0.0, cruise)
        x2 = np.clip((t - ramp - cruise) / ramp, 0.0, 1.0)
        s = s + vmax * ramp * (x2 - x2**3 + 0.5 * x2**4)
        return np.minimum(s, length)

    return s_of_t, T


@dataclass
class PassGeometry:
    """One pass in the robot's root frame: dense TCP path, surface normals, pass length.

    Arrays (N, ...): positions (N, 3) m of the planned TCP (penetration d_plan included), rotations
    (N, 3, 3), normals (N, 3) outward unit, arc (N,) m.
    """

    index: int
    positions: FloatArray
    rotations: FloatArray
    normals: FloatArray
    arc: FloatArray


def densify_pass(index: int, tcp_pos: FloatArray, tcp_quat: FloatArray, normals: FloatArray, X_BP: FloatArray,
                 step: float = 5e-4, keep_length: float | None = None) -> PassGeometry:
    """TCP path of a pass (part frame) -> root frame, resampled every ``step`` m by a cubic spline
    through the waypoints (so the chords between IK points do not cut into a curved surface),
    optionally cropped to its middle ``keep_length`` m."""
    from scipy.interpolate import CubicSpline

    pos = np.asarray(tcp_pos, dtype=float)
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pos, axis=0), axis=1))]
    keep = np.r_[True, np.diff(arc) > 1e-12]
    pos, arc = pos[keep], arc[keep]
    quat = np.asarray(tcp_quat, dtype=float)[keep]
    nrm = np.asarray(normals, dtype=float)[keep]
    if len(pos) < 2:
        raise PlanningError(f"pass {index}: fewer than 2 distinct waypoints")
    a0, a1 = 0.0, float(arc[-1])
    if keep_length is not None and keep_length < a1:
        mid = 0.5 * a1
        a0, a1 = mid - 0.5 * keep_length, mid + 0.5 * keep_length
    n = max(2, int(math.ceil((a1 - a0) / step)) + 1)
    s = np.linspace(a0, a1, n)
    if len(pos) >= 3:
        P = CubicSpline(arc, pos, axis=0)(s)
        N = CubicSpline(arc, nrm, axis=0)(s)
    else:
        P = np.column_stack([np.interp(s, arc, pos[:, j]) for j in range(3)])
        N = np.column_stack([np.interp(s, arc, nrm[:, j]) for j in range(3)])
    N /= np.linalg.norm(N, axis=1, keepdims=True)
    R = Slerp(arc, Rotation.from_quat(quat))(s).as_matrix()
    Rb, pb = X_BP[:3, :3], X_BP[:3, 3]
    return PassGeometry(index, P @ Rb.T + pb, Rb @ R, N @ Rb.T, s - a0)


@dataclass
class Segment:
    """A piece of the job trajectory: kind ``approach``/``pass``/``retreat``/``link``, its pass,
    knot times t (K,) s (absolute), joint knots q (K, n), qd (K, n), and for passes the arc length
    of each knot (K,) m."""

    kind: str
    pass_index: int
    t: FloatArray
    q: FloatArray
    qd: FloatArray
    arc: FloatArray | None = None

    @property
    def t0(self) -> float:
        return float(self.t[0])

    @property
    def t1(self) -> float:
        return float(self.t[-1])


def _targets(P: FloatArray, R: FloatArray) -> FloatArray:
    T = np.tile(np.eye(4), (len(P), 1, 1))
    T[:, :3, :3] = R
    T[:, :3, 3] = P
    return T


def _segment(kind: str, idx: int, t: FloatArray, q: FloatArray, s: FloatArray, sdot: FloatArray,
             arc: FloatArray | None = None) -> Segment:
    """Knots with joint velocities dq/ds * ds/dt (rest where sdot = 0)."""
    dqds = np.gradient(q, s, axis=0) if len(s) > 2 else np.tile((q[-1] - q[0]) / (s[-1] - s[0]), (len(s), 1))
    return Segment(kind, idx, t, q, dqds * sdot[:, None], arc)


def _timed_line(p0: FloatArray, p1: FloatArray, duration: float, n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Quintic rest-to-rest along p0 -> p1: times (n,), positions (n, 3), arc s (n,), sdot (n,)."""
    tau = np.linspace(0.0, 1.0, n)
    L = float(np.linalg.norm(p1 - p0))
    s = L * (10 * tau**3 - 15 * tau**4 + 6 * tau**5)
    sd = L * (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / duration
    return tau * duration, p0 + np.outer(s / max(L, 1e-300), p1 - p0), s, sd


def pass_episode(model: Any, g: PassGeometry, offset: float, t_start: float, q_seed: FloatArray, cfg: JobConfig
                 ) -> list[Segment]:
    """Approach (with the dwell), pass and retreat of one pass as joint knots from ``t_start``.

    The commanded TCP is the planned one moved by ``offset`` m along -n (deeper into the part);
    the approach starts ``cfg.approach`` m out along the first normal and ends at rest, the tool
    dwells ``cfg.dwell`` s, the pass runs at ``cfg.feed`` with smooth ramps, the retreat mirrors
    the approach.
    """
    P = g.positions - offset * g.normals
    n_app = 31
    # approach: fast to engage_gap above the surface, then slowly onto the commanded penetration,
    # both rest-to-rest (quintic); the slow phase keeps the damper's share D d' of the onset force
    # small, so the force rises to its steady value without overshoot
    a_top = P[0] + cfg.approach * g.normals[0]
    pen0 = offset + static_penetration(make_contact_model(cfg), cfg.target_force)  # commanded penetration
    a_mid = P[0] + (min(cfg.engage_gap, 0.5 * cfg.approach) + max(pen0, 0.0)) * g.normals[0]
    t1f = max(cfg.approach_time - cfg.engage_time, 0.5 * cfg.approach_time)
    ta, pa, sa, sda = _timed_line(a_top, a_mid, t1f, n_app)
    tb, pb, sb, sdb = _timed_line(a_mid, P[0], cfg.engage_time, n_app)
    ta = np.r_[ta, t1f + tb[1:]]
    pa = np.vstack([pa, pb[1:]])
    sa = np.r_[sa, sa[-1] + sb[1:]]
    sda = np.r_[sda, sdb[1:]]
    qa = solve_ik(model, _targets(pa, np.repeat(g.rotations[:1], len(pa), axis=0)), q_seed,
                  what=f"pass {g.index} approach point")
    segs = [_segment("approach", g.index, t_start + ta, qa, sa, sda)]
    approach_time = t1f + cfg.engage_time
    t = t_start + approach_time
    if cfg.dwell > 0:
        segs.append(Segment("dwell", g.index, np.array([t, t + cfg.dwell]), np.vstack([qa[-1], qa[-1]]),
                            np.zeros((2, model.nq))))
        t += cfg.dwell
    # pass
    s_of_t, T = _smooth_profile(float(g.arc[-1]), cfg.feed, 0.1)
    tt = np.linspace(0.0, T, 4001)
    ss = s_of_t(tt)
    ss[-1] = g.arc[-1]
    t_knots = np.interp(g.arc, ss, tt)
    keep = np.r_[True, np.diff(t_knots) > 1e-9]
    keep[-1] = True
    t_knots, arc = t_knots[keep], g.arc[keep]
    t_knots[-1] = T
    sdot = np.gradient(s_of_t(tt), tt)
    sd_knots = np.interp(t_knots, tt, sdot)
    sd_knots[0] = sd_knots[-1] = 0.0
    qp = solve_ik(model, _targets(P[keep], g.rotations[keep]), qa[-1], what=f"pass {g.index} waypoint")
    segs.append(_segment("pass", g.index, t + t_knots, qp, arc, sd_knots, arc))
    t += T
    # retreat
    r_top = P[-1] + cfg.approach * g.normals[-1]
    tr, pr, sr, sdr = _timed_line(P[-1], r_top, cfg.approach_time, n_app)
    qr = solve_ik(model, _targets(pr, np.repeat(g.rotations[-1:], n_app, axis=0)), qp[-1],
                  what=f"pass {g.index} retreat point")
    segs.append(_segment("retreat", g.index, t + tr, qr, sr, sdr))
    return segs


def link_segment(model: Any, q_from: FloatArray, q_to: FloatArray, up: FloatArray, height: float, t_start: float,
                 next_pass: int, velocity_scale: float = 0.3) -> Segment:
    """Rest-to-rest link from q_from up by ``height`` along ``up``, across, and down to q_to."""
    X0, X1 = model.fk(q_from), model.fk(q_to)
    T0u, T1u = X0.copy(), X1.copy()
    T0u[:3, 3] += height * up
    T1u[:3, 3] += height * up
    qu = solve_ik(model, np.stack([T0u, T1u]), q_from, what="link point")
    Q = np.vstack([q_from, qu, q_to])
    vmax = np.where(np.isfinite(model.velocity_limits) & (model.velocity_limits > 0), model.velocity_limits, 1.0)
    t = [t_start]
    for k in range(3):
        need = 1.5 * float(np.max(np.abs(Q[k + 1] - Q[k]) / (velocity_scale * vmax)))
        t.append(t[-1] + max(0.3, need))
    return Segment("link", next_pass, np.array(t), Q, np.zeros_like(Q))


def trajectory_from_segments(model: Any, segments: Sequence[Segment]) -> Any:
    """One :class:`~robot_grinding_sim.core.robot.arm_sim.TrajectoryInterpolator` (cubic Hermite) through
    every segment's knots (times absolute, from 0)."""
    from robot_grinding_sim.core.robot.arm_sim import JointLimits, TrajectoryInterpolator

    t, q, qd = [], [], []
    for s in segments:
        first = 0 if not t else 1  # consecutive segments share their end knot
        if t and abs(s.t[0] - t[-1][-1]) > 1e-9:
            raise GrindingSimError(f"segments do not join: {t[-1][-1]} s vs {s.t[0]} s")
        t.append(s.t[first:])
        q.append(s.q[first:])
        qd.append(s.qd[first:])
    T = np.concatenate(t)
    Q = np.vstack(q)
    QD = np.vstack(qd)
    t0 = T[0]
    return TrajectoryInterpolator.build(JointLimits.from_model(model), model.joint_names, T - t0, Q, QD,
                                        what="job trajectory"), t0


# --------------------------------------------------------------------------------------------------
# the arm + contact simulation


@dataclass
class SimRecord:
    """Samples of a run (lists while running; :meth:`arrays` turns them into arrays).

    Output grid (every ``output_dt``; the closed form inside steps), (K,): t s, fn normal force N,
    depth m (penetration; < 0 a gap), step_index (the step each sample belongs to).
    Step grid (S, ...): ts s (end of step), q, qd, tau (S, n), fn_mean (S,) the step's mean normal
    force, normal (S, 3) the contact normal, t_dir (S, 3) tangential force per newton of normal
    force (force ratio x unit direction), R_tcp (S, 3, 3) tcp orientation at the step start.
    :meth:`arrays` adds force (K, 3) (on the tool, base_link) and torque (K, 3) (about the tcp,
    base_link) per output sample.
    """

    t: list[float] = field(default_factory=list)
    fn: list[float] = field(default_factory=list)
    depth: list[float] = field(default_factory=list)
    step_index: list[int] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    q: list[FloatArray] = field(default_factory=list)
    qd: list[FloatArray] = field(default_factory=list)
    tau: list[FloatArray] = field(default_factory=list)
    fn_mean: list[float] = field(default_factory=list)
    normal: list[FloatArray] = field(default_factory=list)
    t_dir: list[FloatArray] = field(default_factory=list)
    R_tcp: list[FloatArray] = field(default_factory=list)

    def arrays(self, radius: float = 0.0) -> dict[str, FloatArray]:
        out = {k: np.asarray(v, dtype=float) for k, v in self.__dict__.items()}
        idx = np.asarray(self.step_index, dtype=int)
        out["step_index"] = idx
        if len(idx):
            n = out["normal"][idx]
            f = out["fn"][:, None] * (n + out["t_dir"][idx])
            out["force"] = f
            out["torque"] = np.cross(-radius * n, f)
            out["R_tcp_out"] = out["R_tcp"][idx]
        else:
            out["force"] = out["torque"] = np.zeros((0, 3))
            out["R_tcp_out"] = np.zeros((0, 3, 3))
        return out


class ContactArmSimulation:
    """The arm following a trajectory with the tool sphere in contact with the workpiece.

    Args:
        model: RobotModel with tip link ``tcp`` (the ball centre).
        scene: CollisionScene with ``tool`` (sphere) and ``workpiece``.
        contact: KelvinVoigt or HuntCrossley model.
        q0: (n,) initial joint positions (at rest).
        dt: step, s. output_dt: sample period of the force output, s.
        servo_omega: computed-torque bandwidth, rad/s (Kp = w^2, Kd = 2 w).
        force_ratio: Ft/Fn. spindle_rate: rad/s about the tool's z axis.
        project: impose the closed form's end state on the arm's normal coordinate (default True;
            False: the mean force alone, an explicit coupling, for comparison).
    """

    def __init__(self, model: Any, scene: Any, contact: Any, q0: FloatArray, dt: float = 1e-3,
                 output_dt: float = 1e-3, servo_omega: float = 200.0, force_ratio: float = 0.3,
                 spindle_rate: float = 0.0, project: bool = True) -> None:
        from robot_grinding_sim.core.contact.laws import KelvinVoigt
        from robot_grinding_sim.core.robot.arm_sim import ArmSimulator, ComputedTorqueController

        self.model = model
        self.scene = scene
        self.contact = contact
        self.is_kv = isinstance(contact, KelvinVoigt)
        self.dt = float(dt)
        self.output_dt = float(output_dt)
        self.radius = float(scene.shape("tool")[1][0])
        self.kp, self.kd = servo_omega**2, 2.0 * servo_omega
        self.sim = ArmSimulator(model, q0, ComputedTorqueController(model, self.kp, self.kd))
        self.force_ratio = float(force_ratio)
        self.spindle_rate = float(spindle_rate)
        self.project = project
        self._f_prev = 0.0
        self._next_check = -math.inf
        self._tool_pose = np.eye(4)
        self.steps = 0
        self.contact_steps = 0
        self.event_steps = 0
        self.rec = SimRecord()
        self._J: FloatArray | None = None
        self._minv: FloatArray | None = None
        self._minv_age = 0
        self.minv_refresh = 10
        self._out_k = 0  # index of the next output sample on the grid

    # ---------------------------------------------------------------------------------------
    def set_trajectory(self, traj: Any, start_time: float) -> None:
        self.sim.set_trajectory(traj, start_time)

    def _query(self, c: FloatArray) -> tuple[float, FloatArray]:
        self._tool_pose[:3, 3] = c
        self.scene.set_pose("tool", self._tool_pose)
        dist, ps, _pw = self.scene.distance("tool", "workpiece")
        n = (c - ps) / self.radius
        return float(dist), n

    def _record_outputs(self, t0: float, t1: float, samples: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
                        end: tuple[float, float] | None = None) -> None:
        """Output samples on the grid k output_dt in (t0, t1] from the closed form: ``samples(s)``
        gives (normal force, gap) at times s after t0; ``end`` (F, x) at t1 saves evaluating it
        again (the common case output_dt == dt)."""
        k1 = int(math.floor(t1 / self.output_dt + 1e-9))
        k0 = max(self._out_k, int(math.floor(t0 / self.output_dt + 1e-9)) + 1)
        self._out_k = max(self._out_k, k1 + 1)
        if k1 < k0:
            return
        r, step = self.rec, self.steps
        if k1 == k0 and end is not None and abs(k1 * self.output_dt - t1) < 1e-9:
            r.t.append(k1 * self.output_dt)
            r.fn.append(max(end[0], 0.0))
            r.depth.append(-end[1])
            r.step_index.append(step)
            return
        ts = np.arange(k0, k1 + 1) * self.output_dt
        fns, xs = samples(ts - t0)
        if end is not None and abs(ts[-1] - t1) < 1e-9:  # the step end exactly as the state update
            fns[-1], xs[-1] = end
        r.t.extend(ts.tolist())
        r.fn.extend(np.maximum(fns, 0.0).tolist())
        r.depth.extend((-np.asarray(xs)).tolist())
        r.step_index.extend([step] * len(ts))

    def step(self) -> None:
        """One step of ``dt``: collision, closed-form normal contact, tangential force, arm."""
        model, sim, dt = self.model, self.sim, self.dt
        st = sim.state
        t0, q0, qd0 = st.t, st.q, st.qd
        X = model.fk(q0)
        c = X[:3, 3]
        R_tcp = X[:3, :3]
        gap, n = (math.inf, _UP)
        if t0 >= self._next_check:
            gap, n = self._query(c)
        if gap == math.inf:  # between checks: nothing to compute
            sim.set_wrench(_ZERO6, "")
            self._f_prev = 0.0
            sim.step(dt)
            self._record_outputs(t0, t0 + dt, lambda s: (np.zeros_like(s), np.ones_like(s)), (0.0, 1.0))
            self._after_step(0.0, n, _ZERO3, 0.0, R_tcp)
            self._J = None
            self._minv = None
            return
        # the Jacobian at the end of the previous step (before its nm-sized correction) is reused
        J0 = self._J if self._J is not None else model.jacobian(q0)
        v_tcp = J0[:3] @ qd0
        vn0 = float(n @ v_tcp)
        # far from the part: no contact this step; next query when the gap could have closed
        reach = 2.0 * dt * (abs(vn0) + 0.05) + 1e-4
        if gap > reach:
            if gap != math.inf:
                speed = float(np.linalg.norm(v_tcp)) + 0.05  # + margin for acceleration within a step
                self._next_check = t0 + max(0.0, (gap - reach) / (2.0 * speed))
            sim.set_wrench(_ZERO6, "")
            self._f_prev = 0.0
            sim.step(dt)
            g = gap if math.isfinite(gap) else 1.0

            def free(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.zeros_like(s), np.full_like(s, g)

            self._record_outputs(t0, t0 + dt, free, (0.0, g))
            self._after_step(0.0, n, _ZERO3, 0.0, R_tcp)
            self._J = None
            self._minv = None
            return
        self._next_check = -math.inf
        # effective mass along n and the impulse direction b = m M^-1 J^T n
        Jn = n @ J0[:3]
        # M^-1 is refreshed every few steps: the arm moves ~1e-5 rad per step, so M changes by
        # ~1e-5 relative in that time (the effective mass with it); the Jacobian is fresh every step
        if self._minv is None or self._minv_age >= self.minv_refresh:
            self._minv = np.linalg.inv(model.mass_matrix(q0))
            self._minv_age = 0
        self._minv_age += 1
        x = self._minv @ Jn
        m = 1.0 / float(Jn @ x)
        b = m * x
        # tangential direction: against the abrasive's sliding velocity (spindle + feed)
        spin = self.spindle_rate * R_tcp[:, 2]
        v_slide = v_tcp + np.cross(spin, -self.radius * n)
        v_slide -= (v_slide @ n) * n
        sp = math.hypot(*v_slide)
        t_dir = -v_slide / sp if sp > 0 else np.zeros(3)
        ratio = self.force_ratio * sp / math.sqrt(sp * sp + 1e-6) if self.force_ratio > 0 else 0.0
        # trial step with the previous mean force
        f_trial = self._f_prev
        w = np.zeros(6)
        if f_trial > 0.0:
            w[:3] = f_trial * (n + ratio * t_dir)
            w[3:] = np.cross(-self.radius * n, w[:3])
        sim.set_wrench(w, "")
        sim.step(dt)
        st1 = sim.state
        J1 = model.jacobian(st1.q)
        self._J = J1
        Jn1 = n @ J1[:3]
        vn1_arm = float(Jn1 @ st1.qd)
        dx_arm = float(0.5 * (Jn + Jn1) @ (st1.q - q0))
        a_free = (vn1_arm - vn0) / dt - f_trial / m
        f_ext = m * a_free  # N along +n
        # closed form of the normal coordinate (gap x = -d, rate v) over the step
        x0 = gap
        a_n = f_ext / m
        # free flight over the whole step (the tool still above the part): exact, no force
        x_end = x0 + vn0 * dt + 0.5 * a_n * dt * dt
        x_min = min(x0, x_end)
        if a_n > 0.0 and 0.0 < -vn0 / a_n < dt:
            x_min = min(x_min, x0 - vn0 * vn0 / (2.0 * a_n))
        kind = "free" if x_min > 0.0 else "event"
        if kind == "event" and self.is_kv and x0 < 0.0:
            sol = self.contact.solve(m, -x0, -vn0, -f_ext)
            if sol.separation_time(dt, clamp=True) is None and float(sol.contact_force(0.0, clamp=False)) >= 0.0:
                kind = "contact"
        if kind == "free":
            x1, v1 = x_end, vn0 + a_n * dt
            end = (0.0, x1)

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.zeros_like(s), x0 + vn0 * s + 0.5 * a_n * s * s
        elif kind == "contact":
            d1, dd1 = (float(z) for z in sol.state(dt))
            x1, v1 = -d1, -dd1
            end = (self.contact.stiffness * d1 + sol.damping * dd1, x1)
            k_c, c_c = self.contact.stiffness, sol.damping

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                # a few samples per step: the scalar path of the closed form is cheaper than arrays
                out = np.array([sol.state(si) for si in s.tolist()])
                return k_c * out[:, 0] + c_c * out[:, 1], -out[:, 0]
        else:
            from robot_grinding_sim.core.contact.engine import NormalContactEngine

            self.event_steps += 1
            eng = NormalContactEngine(self.contact, m, f_ext, x0=x0, v0=vn0, t0=0.0)
            eng.output_dt = self.output_dt
            eng.step(dt)
            x1, v1 = eng.x, eng.v
            end = None
            res = eng.result()
            et, ef, ex = res.t, res.force, res.x

            def samples(s: FloatArray) -> tuple[FloatArray, FloatArray]:
                return np.interp(s, et, ef), np.interp(s, et, ex)

        f_mean = m * (v1 - vn0) / dt - f_ext
        f_mean = max(f_mean, 0.0)
        if self.project:
            dq = b * ((x1 - x0) - dx_arm)
            dqd = b * (v1 - vn1_arm)
        else:
            dq = np.zeros_like(q0)
            dqd = b * (f_mean - f_trial) * dt / m
        st1.q = st1.q + dq
        st1.qd = st1.qd + dqd
        self.contact_steps += 1
        # record: the output samples from the closed form (tangential force in proportion)
        self._record_outputs(t0, t0 + dt, samples, end)
        self._f_prev = f_mean
        self._after_step(f_mean, n, t_dir, ratio, R_tcp)

    def _after_step(self, f_mean: float, n: FloatArray, t_dir: FloatArray, ratio: float, R_tcp: FloatArray) -> None:
        st = self.sim.state
        r = self.rec
        r.ts.append(st.t)
        r.q.append(st.q)
        r.qd.append(st.qd)
        r.tau.append(st.tau)
        r.fn_mean.append(f_mean)
        r.normal.append(n)
        r.t_dir.append(t_dir * ratio)
        r.R_tcp.append(R_tcp)
        self.steps += 1

    def run_until(self, t_end: float, on_step: Callable[[float], None] | None = None) -> None:
        """Step until sim time ``t_end`` (s)."""
        while self.sim.state.t < t_end - 1e-12:
            self.step()
            if on_step is not None:
                on_step(self.sim.state.t)


# --------------------------------------------------------------------------------------------------
# the job


@dataclass
class JobSetup:
    """Everything loaded for a job: model, part, scene, plan, pass geometry, contact model."""

    cfg: JobConfig
    model: Any
    part: Any
    faces: list[int]
    X_BP: FloatArray
    scene: Any
    exact_surface: bool
    contact: Any
    passes: list[PassGeometry]
    d_plan: float
    tool_radius: float
    up: FloatArray
    q_home: FloatArray
    source: str
    timings: dict[str, float] = field(default_factory=dict)


def tool_radius_of(model: Any) -> float:
    """Radius of the sphere collision geometry centred on the tcp (the abrasive ball), m."""
    X = {name: model.fk(np.zeros(model.nq), name) for name in model.link_names}
    tcp = X[model.tip_link][:3, 3]
    for g in model.collision_geometry:
        if g.kind == "sphere" and g.link in X:
            centre = (X[g.link] @ g.origin)[:3, 3]
            if np.linalg.norm(centre - tcp) < 1e-6:
                return float(g.params["radius"])
    raise InputError(f"{model.source}: no sphere collision geometry centred on the tip link {model.tip_link}")


HOME = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])


def setup_job(cfg: JobConfig, on_stage: Callable[[str], None] | None = None) -> JobSetup:
    """Load robot and part, plan (or read the plan), build the scene and the pass geometry."""
    from robot_grinding_sim.core.geometry import cad
    from robot_grinding_sim.core.planning.planner import ToolParameters, default_face, plan, pose_matrix
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    cfg.validate()
    tm: dict[str, float] = {}
    t0 = time.perf_counter()
    if on_stage:
        on_stage("loading robot and part")
    from robot_grinding_sim.core.resources import package_file

    urdf = package_file("urdf/ur10e_grinding.urdf") if cfg.robot in ("default", "") else cfg.robot
    try:
        model = RobotModel.from_urdf(urdf, tip_link="tcp")
    except (InputError, GrindingSimError):
        raise
    except Exception as exc:
        raise InputError(f"{urdf}: cannot load the robot ({exc})") from exc
    R_tool = tool_radius_of(model)
    contact = make_contact_model(cfg)
    d_plan = static_penetration(contact, cfg.target_force)
    if d_plan >= R_tool:
        raise InputError(f"target-force {cfg.target_force} N with stiffness {cfg.stiffness} needs a penetration "
                         f"{d_plan} m, not below the tool radius {R_tool} m")
    if cfg.plan_file:
        from robot_grinding_sim.core.planning.plan_io import read_plan

        data = read_plan(cfg.plan_file)
        src = data["part"]["source"]
        part = cad.load_part(src, cfg.unit) if src not in ("<memory>",) else None
        if part is None:
            raise InputError(f"{cfg.plan_file}: its part ({src}) cannot be loaded")
        faces = [int(f) for f in data["part"]["faces"]]
        wp = data["part"]["workpiece_pose"]
        X_BP = np.eye(4)
        X_BP[:3, :3] = Rotation.from_quat(wp["orientation"]).as_matrix()
        X_BP[:3, 3] = wp["position"]
        file_pen = float(data["tool"]["penetration"])
        raw = []
        for p in data["passes"]:
            w = p["waypoints"]
            pos = np.array([x["tcp"]["position"] for x in w], dtype=float)
            nrm = np.array([x["normal"] for x in w], dtype=float)
            # re-place the TCP for this job's target force and stiffness: p + (R - d) n
            pos = pos + (file_pen - d_plan) * nrm
            raw.append((int(p["index"]), pos, np.array([x["tcp"]["orientation"] for x in w], dtype=float), nrm))
        source = f"{cfg.plan_file} ({src})"
    else:
        part = cad.load_part(cfg.part, cfg.unit)
        faces = cfg.faces if cfg.faces is not None else [default_face(part)]
        X_BP = pose_matrix(cfg.workpiece_pose)
        from robot_grinding_sim.core.planning.passes import PassParameters

        tool = ToolParameters(radius=R_tool, target_force=static_force(contact, d_plan),
                              stiffness=static_force(contact, d_plan) / d_plan, feed=cfg.feed,
                              approach=cfg.approach)
        if on_stage:
            on_stage("planning passes")
        pl = plan(part, faces, PassParameters(stepover=cfg.stepover, spacing=cfg.spacing), tool, robot=None,
                  workpiece_pose=X_BP, link_clearance_check=False)
        raw = [(p.index, pos, quat, p.normals) for p, pos, quat in zip(pl.passes, pl.tcp_positions,
                                                                       pl.tcp_quaternions, strict=True)]
        source = str(getattr(part, "source", cfg.part))
    tm["load_and_plan_s"] = time.perf_counter() - t0
    if not raw:
        raise PlanningError("the plan has no passes")
    if cfg.max_passes is not None:
        raw = raw[: cfg.max_passes]
    passes = [densify_pass(i, pos, quat, nrm, X_BP, keep_length=cfg.pass_length) for i, pos, quat, nrm in raw]
    # The ball head is symmetric about its axis: each pass keeps the tool roll of the one before
    # (tool x and y turned by 180 deg when a zigzag reverses the travel), so the wrist does not
    # unwind half a turn on every link.
    flip = np.diag([-1.0, -1.0, 1.0])
    for prev, g in zip(passes, passes[1:], strict=False):
        if float(prev.rotations[-1][:, 0] @ g.rotations[0][:, 0]) < 0.0:
            g.rotations = g.rotations @ flip
    scene, exact = build_scene(part, faces, X_BP, R_tool)
    up = X_BP[:3, :3] @ np.array([0.0, 0.0, 1.0])
    tm["scene_s"] = time.perf_counter() - t0 - tm["load_and_plan_s"]
    return JobSetup(cfg, model, part, list(faces), X_BP, scene, exact, contact, passes, d_plan, R_tool, up,
                    HOME.copy(), source, tm)


def series_stiffness(setup: JobSetup, q: FloatArray, n: FloatArray) -> tuple[float, float]:
    """(k_arm = Kp m, series stiffness K k_arm / (K + k_arm)) along n at q (N/m), linear contact."""
    m = setup.model.effective_mass(q, setup.model.tip_link, setup.model.fk(q)[:3, 3], n)
    k_arm = setup.cfg.servo_omega**2 * m
    K = setup.cfg.stiffness
    return k_arm, K * k_arm / (K + k_arm)


@dataclass
class PassResult:
    index: int
    t0: float
    t1: float
    mean: float
    max: float
    min: float
    std: float
    samples: int


def pass_statistics(rec: dict[str, FloatArray], windows: Sequence[tuple[int, float, float]]) -> list[PassResult]:
    """Normal-force statistics over each pass window (index, t0, t1) of the output samples."""
    out = []
    for idx, a, b in windows:
        sel = (rec["t"] >= a) & (rec["t"] <= b)
        f = rec["fn"][sel]
        if f.size == 0:
            out.append(PassResult(idx, a, b, 0.0, 0.0, 0.0, 0.0, 0))
            continue
        out.append(PassResult(idx, a, b, float(f.mean()), float(f.max()), float(f.min()), float(f.std()),
                              int(f.size)))
    return out


def _new_sim(setup: JobSetup, q0: FloatArray) -> ContactArmSimulation:
    cfg = setup.cfg
    return ContactArmSimulation(setup.model, setup.scene, setup.contact, q0, dt=cfg.dt, output_dt=cfg.output_dt,
                                servo_omega=cfg.servo_omega, force_ratio=cfg.force_ratio,
                                spindle_rate=cfg.spindle_rpm * 2.0 * math.pi / 60.0)


def simulate_pass(setup: JobSetup, k: int, offset: float, q_seed: FloatArray,
                  on_step: Callable[[float], None] | None = None) -> tuple[PassResult, list[Segment], dict]:
    """Simulate pass ``k`` alone (approach from rest, dwell, pass, retreat) with ``offset``."""
    segs = pass_episode(setup.model, setup.passes[k], offset, 0.0, q_seed, setup.cfg)
    traj, t0 = trajectory_from_segments(setup.model, segs)
    sim = _new_sim(setup, segs[0].q[0])
    sim.set_trajectory(traj, t0)
    sim.run_until(segs[-1].t1, on_step)
    rec = sim.rec.arrays(sim.radius)
    ps = next(s for s in segs if s.kind == "pass")
    (res,) = pass_statistics(rec, [(setup.passes[k].index, ps.t0, ps.t1)])
    return res, segs, {"steps": sim.steps, "sim": sim}


@dataclass
class Optimisation:
    """Per pass: offsets tried (m), mean forces (N), iterations, converged."""

    offsets: list[list[float]]
    means: list[list[float]]
    iterations: list[int]
    converged: list[bool]
    wall_time_s: float = 0.0
    simulated_s: float = 0.0


def optimise_offsets(setup: JobSetup, q_seed: FloatArray, on_step: Callable[[float], None] | None = None,
                     on_iteration: Callable[[int, int, float, float], None] | None = None) -> Optimisation:
    """Force-target optimisation: per pass, iterate the commanded penetration offset.

    Start at offset 0 (the planner's d = F/K); after each simulation update the offset by a secant
    step on mean force vs offset (the first step uses the series stiffness K k_arm/(K + k_arm)
    predicted at the pass start). Stop when |mean - target| <= opt_goal x target or after
    ``max_iterations`` simulations. A pass converges if its error is within ``tolerance``.
    """
    cfg = setup.cfg
    F = cfg.target_force
    wall = time.perf_counter()
    offsets, means, iters, conv = [], [], [], []
    sim_time = 0.0
    for k, g in enumerate(setup.passes):
        tried, got = [0.0], []
        qs = solve_ik(setup.model, _targets(g.positions[:1], g.rotations[:1]), q_seed)[0]
        while True:
            res, segs, _ = simulate_pass(setup, k, tried[-1], qs, on_step)
            sim_time += segs[-1].t1
            got.append(res.mean)
            if on_iteration:
                on_iteration(g.index, len(got), tried[-1], res.mean)
            err = abs(res.mean - F) / F
            if err <= cfg.opt_goal or len(got) >= cfg.max_iterations:
                break
            if len(got) >= 2 and abs(tried[-1] - tried[-2]) > 0 and abs(got[-1] - got[-2]) > 1e-9:
                slope = (got[-1] - got[-2]) / (tried[-1] - tried[-2])
            elif cfg.model == "kelvin_voigt":
                _, slope = series_stiffness(setup, segs[-1].q[0], g.normals[0])
            else:  # Hunt-Crossley: the contact's local stiffness dF/dd = n F / d at the target
                slope = cfg.target_force * setup.contact.exponent / setup.d_plan
            if not slope > 0:
                break
            tried.append(tried[-1] + (F - res.mean) / slope)
        best = int(np.argmin(np.abs(np.array(got) - F)))
        offsets.append(tried[: len(got)])
        means.append(got)
        iters.append(len(got))
        conv.append(abs(got[best] - F) <= cfg.tolerance * F)
        # keep the best offset last, so the final run uses it
        if best != len(got) - 1:
            offsets[-1].append(tried[best])
    return Optimisation(offsets, means, iters, conv, time.perf_counter() - wall, sim_time)


@dataclass
class JobResult:
    """The final run: samples, segments, per-pass statistics, optimisation, timing."""

    setup: JobSetup
    record: dict[str, FloatArray]
    segments: list[Segment]
    passes: list[PassResult]
    offsets: list[float]
    optimisation: Optimisation | None
    steps: int
    contact_steps: int
    event_steps: int
    simulated_s: float
    wall_time_s: float
    total_wall_time_s: float

    def summary(self) -> dict[str, Any]:
        cfg = self.setup.cfg
        F = cfg.target_force
        rows = []
        for k, p in enumerate(self.passes):
            row = {"pass": p.index, "mean_n": p.mean, "max_n": p.max, "min_n": p.min, "std_n": p.std,
                   "error": (p.mean - F) / F, "within_tolerance": abs(p.mean - F) <= cfg.tolerance * F,
                   "samples": p.samples, "t0_s": p.t0, "t1_s": p.t1,
                   "offset_m": self.offsets[k]}
            if self.optimisation is not None:
                row["iterations"] = self.optimisation.iterations[k]
                row["means_per_iteration_n"] = self.optimisation.means[k]
            rows.append(row)
        rtf = self.simulated_s / self.wall_time_s if self.wall_time_s > 0 else None
        return {
            "part": self.setup.source,
            "faces": self.setup.faces,
            "exact_surface": self.setup.exact_surface,
            "robot": str(self.setup.model.source),
            "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()
                       if k != "workpiece_pose"},
            "workpiece_pose": self.setup.X_BP.tolist(),
            "target_force_n": F,
            "tolerance": cfg.tolerance,
            "planned_penetration_m": self.setup.d_plan,
            "tool_radius_m": self.setup.tool_radius,
            "passes": rows,
            "all_within_tolerance": all(r["within_tolerance"] for r in rows),
            "steps": self.steps,
            "contact_steps": self.contact_steps,
            "event_steps": self.event_steps,
            "step_s": cfg.dt,
            "output_period_s": cfg.output_dt,
            "simulated_s": self.simulated_s,
            "wall_time_s": self.wall_time_s,
            "real_time_factor": rtf,
            "optimisation": None if self.optimisation is None else {
                "iterations": self.optimisation.iterations,
                "converged": self.optimisation.converged,
                "wall_time_s": self.optimisation.wall_time_s,
                "simulated_s": self.optimisation.simulated_s,
            },
            "total_wall_time_s": self.total_wall_time_s,
            "timings": self.setup.timings,
        }


def build_job_segments(setup: JobSetup, offsets: Sequence[float], q_start: FloatArray) -> list[Segment]:
    """The whole job: every pass episode, joined by linking moves (continuous time from 0)."""
    segs: list[Segment] = []
    t = 0.0
    q = q_start
    for k, g in enumerate(setup.passes):
        qs = solve_ik(setup.model, _targets((g.positions[:1] - offsets[k] * g.normals[:1])
                                            + setup.cfg.approach * g.normals[:1], g.rotations[:1]), q)[0]
        if segs:
            link = link_segment(setup.model, segs[-1].q[-1], qs, setup.up, setup.cfg.link_height, t, g.index)
            segs.append(link)
            t = link.t1
        ep = pass_episode(setup.model, g, offsets[k], t, qs, setup.cfg)
        segs.extend(ep)
        t = ep[-1].t1
        q = ep[-1].q[-1]
    return segs


def run_job(cfg: JobConfig, setup: JobSetup | None = None, on_stage: Callable[[str], None] | None = None,
            progress: Callable[[str, float, float], None] | None = None) -> JobResult:
    """Set up, optimise (if configured) and run the whole job; returns the final run.

    ``progress(stage, done, total)`` is called with simulated seconds.
    """
    wall0 = time.perf_counter()
    setup = setup or setup_job(cfg, on_stage)
    cfg = setup.cfg
    model = setup.model
    g0 = setup.passes[0]
    top0 = _targets(g0.positions[:1] + cfg.approach * g0.normals[:1], g0.rotations[:1])
    q_start = solve_ik(model, top0, setup.q_home, what="start of pass 0")[0]
    opt = None
    offsets = [0.0] * len(setup.passes)
    if cfg.optimise:
        if on_stage:
            on_stage("force-target optimisation")
        est = [0.0]

        def opt_step(t: float) -> None:
            if progress and int(t * 1000) % 100 == 0:
                progress("optimising", est[0] + t, 0.0)

        def opt_iter(idx: int, it: int, off: float, mean: float) -> None:
            if on_stage:
                on_stage(f"pass {idx} iteration {it}: offset {off * 1e6:+.2f} um -> mean {mean:.3f} N")

        opt = optimise_offsets(setup, q_start, opt_step, opt_iter)
        offsets = [o[-1] for o in opt.offsets]
    segs = build_job_segments(setup, offsets, q_start)
    traj, t0 = trajectory_from_segments(model, segs)
    sim = _new_sim(setup, segs[0].q[0])
    sim.set_trajectory(traj, t0)
    t_end = segs[-1].t1
    if on_stage:
        on_stage("final run")

    def on_step(t: float) -> None:
        if progress and sim.steps % 100 == 0:
            progress("simulating", t, t_end)

    wall = time.perf_counter()
    sim.run_until(t_end, on_step)
    wall = time.perf_counter() - wall
    rec = sim.rec.arrays(sim.radius)
    rec["tcp"] = np.array([model.fk(q) for q in rec["q"]]) if len(rec["q"]) else np.zeros((0, 4, 4))
    windows = [(s.pass_index, s.t0, s.t1) for s in segs if s.kind == "pass"]
    stats = pass_statistics(rec, windows)
    return JobResult(setup, rec, segs, stats, list(offsets), opt, sim.steps, sim.contact_steps, sim.event_steps,
                     float(t_end), wall, time.perf_counter() - wall0)


def progress_samples(segments: Sequence[Segment], rate: float = 100.0) -> FloatArray:
    """The /grinding/progress samples (docs/compare.md): rows [t, pass_index, arc_length_m] at
    ``rate`` Hz during passes, and one -1 sample at each pass end and during the other moves."""
    rows = []
    for s in segments:
        if s.kind == "pass" and s.arc is not None:
            ts = np.arange(s.t0, s.t1, 1.0 / rate)
            arc = np.interp(ts, s.t, s.arc)
            rows.extend([(t, float(s.pass_index), a) for t, a in zip(ts, arc, strict=True)])
            rows.append((s.t1, float(s.pass_index), float(s.arc[-1])))
            rows.append((s.t1 + 1e-3, -1.0, 0.0))
        else:
            ts = np.arange(s.t0, s.t1, 0.1)
            rows.extend([(t, -1.0, 0.0) for t in ts])
    rows.sort(key=lambda r: r[0])
    return np.array(rows, dtype=float).reshape(-1, 3)
