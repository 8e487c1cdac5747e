"""The coupled arm + contact step compiled (numba): the kernels behind
:class:`~robot_grinding_sim.core.sim.coupled_step.ContactSide`,
:class:`~robot_grinding_sim.core.sim.coupled_step.ArmContactStepper` and the in-process job's
batch of steps (:func:`run_batch`). The physics is the one the coupled_step module's docstring
describes; the Python classes there are thin wrappers around these kernels, so the nodes and the
in-process job run the same code.

Arrays:

- ``rom`` (ROM.size,): the contact model, :data:`ROM` (what contact_solver_node publishes;
  :class:`~robot_grinding_sim.core.sim.coupled_step.NormalContactModel` is its view);
- ``cp`` (CP.size,): the contact side's parameters, :data:`CP` (law id, K, fixed damping or -1,
  damping ratio, c_r, exponent, v_floor, tangential force ratio, slip speed, spindle speed, the
  law's impact coefficient u = alpha v_impact);
- ``sv`` (SV.size,): one step's scalars, :data:`SV` (kind, mean force, gap/rate at start and end, ...);
- ``laws``: the registry's compiled law kernels (:func:`~robot_grinding_sim.core.contact.registry.kernels`),
  indexed by the law id;
- arm state ``st`` (ST_ROWS, n) and servo ``arm`` (ARM_ROWS, n): :mod:`~robot_grinding_sim.core.robot.arm_kernels`;
- the step's kinematics at the arm's q: tool centre pose ``T`` (4, 4) and Jacobian ``J`` (6, n),
  mass matrix ``M`` (n, n) and its Cholesky factor ``L``: computed once per step by the contact
  side (:func:`contact_side`) and reused by the arm side and the forward dynamics
  (``have_kin``); the wrappers, whose two sides may see different states, let each compute its own.

A step in which a contact starts or ends (kind :data:`EVENT`: onset, release) and a
Hunt-Crossley step in contact throughout (kind :data:`HC`) run the variable-step engine's step
compiled (:func:`~robot_grinding_sim.core.contact.engine_kernels.normal_step`, the kernels behind
:class:`~robot_grinding_sim.core.contact.engine.NormalContactEngine`: impact time, Kelvin-Voigt
closed form and its separation time, Hunt-Crossley's DOP853 with event location, loose phases)
inside :func:`arm_side`, and keep the samples the engine records (``es`` (4, k): times, forces,
gaps, velocities, engine_kernels.S_* rows).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from robot_grinding_sim.core.contact.engine_kernels import (
    S_F,
    S_T,
    S_X,
)
from robot_grinding_sim.core.contact.kelvin_voigt import kv_state, kv_stays_in_contact
from robot_grinding_sim.core.contact.law import FAMILY, INTEGRATED, LINEAR, LP
from robot_grinding_sim.core.geometry.tools import tool_contact
from robot_grinding_sim.core.layout import STATUS, Layout
from robot_grinding_sim.core.robot.arm_kernels import QD, TAU, arm_advance
from robot_grinding_sim.core.robot.kernels import (
    cholesky_factor,
    cholesky_subst,
    crba_sample,
    link_pose,
    tcp_kinematics,
)

#: the contact model along the normal (what contact_solver_node publishes on contact/model, in
#: this order: docs/contact.md; coupled_step.NormalContactModel is its Python view)
ROM = Layout("normal_contact_model", (
    ("t", 1, "s", "sim time of the arm state the model was computed from"),
    ("model", 1, "", "law id (registry order)"),
    ("stiffness", 1, "N/m^exponent", "K"),
    ("damping", 1, "N s/m", "the LINEAR family's damping D for this mass (0 otherwise)"),
    ("cr", 1, "", "restitution"),
    ("exponent", 1, "", "exponent n"),
    ("v_floor", 1, "m/s", "speed floor of alpha"),
    ("mass", 1, "kg", "effective mass of the arm along the normal at the tool centre"),
    ("gap", 1, "m", "signed gap (< 0: penetration)"),
    ("rate", 1, "m/s", "d gap / dt"),
    ("normal", 3, "", "outward unit normal of the part"),
    ("point", 3, "m", "closest point on the part"),
    ("centre", 3, "m", "tool centre"),
    ("tangential", 3, "", "tangential force per newton of normal force"),
    ("sliding", 3, "m/s", "the abrasive's sliding velocity at the contact point (tangential)"),
    ("force_ratio", 1, "", "the grinding force ratio Ft/Fn of the tangential force"),
    ("slip_speed", 1, "m/s", "its regularisation speed: t(v) = -force_ratio v / sqrt(v^2 + slip_speed^2) (the arm "
     "step takes the tangential force implicitly with these)"),
))
R = ROM.index
#: the contact side's parameters
CP = Layout("contact_parameters", (
    ("model", 1, "", "law id"), ("stiffness", 1, "N/m^exponent", "K"),
    ("damping", 1, "N s/m", "fixed damping D, or -1: 2 zeta sqrt(K m) for the effective mass m"),
    ("zeta", 1, "", "damping ratio (when D is not fixed)"), ("cr", 1, "", "restitution"),
    ("exponent", 1, "", "exponent n"), ("v_floor", 1, "m/s", "speed floor of alpha"),
    ("force_ratio", 1, "", "grinding force ratio Ft/Fn"), ("slip_speed", 1, "m/s", "regularisation speed"),
    ("spindle", 1, "rad/s", "spindle speed"), ("u", 1, "", "the law's impact coefficient u = alpha v_impact"),
))
C = CP.index
P = LP.index
LP_LEN = LP.size
# step kinds
NONE, FREE, CONTACT, EVENT, HC = 0, 1, 2, 3, 4
KINDS = ("none", "free", "contact", "event", "hc_contact")
#: one step's scalars
SV = Layout("step_values", (
    ("kind", 1, "", "NONE, FREE, CONTACT, EVENT or HC"), ("force", 1, "N", "mean normal force"),
    ("x0", 1, "m", "gap at the start"), ("v0", 1, "m/s", "rate at the start"),
    ("x1", 1, "m", "gap at the end"), ("v1", 1, "m/s", "rate at the end"),
    ("end_f", 1, "N", "normal force at the end (closed form)"), ("end_x", 1, "m", "gap at the end (closed form)"),
    ("m", 1, "kg", "effective mass"), ("f_ext", 1, "N", "the arm's own force along +n"),
    ("dx_arm", 1, "m", "the arm's own normal motion"), ("vn1_arm", 1, "m/s", "the arm's own normal rate at the end"),
    ("f_trial", 1, "N", "trial force"), ("gap0", 1, "m", "gap of the last geometry query"),
    ("ns", 1, "", "engine samples of the step"),
))
V = SV.index
SV_LEN = SV.size  # (a Layout is no numba constant: its size is)
#: the batch's counters (int64)
IX = Layout("batch_counters", (
    ("steps", 1, "", "steps recorded"), ("out", 1, "", "output samples"), ("next", 1, "", "next output index"),
    ("contact", 1, "", "steps with a contact model"), ("event", 1, "", "onset and release steps"),
    ("unused", 1, "", "spare"),
))
I = IX.index
#: kernel codes (:data:`~robot_grinding_sim.core.layout.STATUS`)
E = STATUS.code


@njit(cache=True)
def held_wrench(q, jt, jd, ws, X, hbody, H, w, wX, wh):
    """The held part's side of a wrench w (6,) on the tool (:func:`tcp_kinematics`' axes, torque
    about the tool centre): the wrench on the part wh (6,) in root axes about the tool centre, and
    wX (4, 4) the pose of that point in the part's body hbody, so that the torques of wh on body
    hbody at wX are J^T w (the tool fixed in the cell at X (4, 4), ``body`` -1)."""
    P = np.empty((4, 4))
    link_pose(q, hbody, H[0], jt, jd, ws, P)
    At = np.ascontiguousarray(P[:3, :3]) @ np.ascontiguousarray(H[1][:3, :3].T)  # A^T
    wh[:3] = -(At @ np.ascontiguousarray(w[:3]))
    wh[3:] = -(At @ np.ascontiguousarray(w[3:]))
    B = np.empty((4, 4))
    link_pose(q, hbody, np.eye(4), jt, jd, ws, B)  # the body's frame
    wX[:] = np.eye(4)
    for i in range(3):
        wX[i, 3] = B[0, i] * (X[0, 3] - B[0, 3]) + B[1, i] * (X[1, 3] - B[1, 3]) + B[2, i] * (X[2, 3] - B[2, 3])


@njit(cache=True)
def mass_factor(q, jt, jd, bd, ws, M, L):
    """The mass matrix M (n, n) at q and its Cholesky factor L; False if M is not positive definite."""
    crba_sample(q, jt, jd, bd, ws, M)
    return cholesky_factor(M, L)


@njit(cache=True)
def normal_row(J, nx, ny, nz, lx=0.0, ly=0.0, lz=0.0):
    """The normal row (n,) of the contact point's Jacobian, the point at lever l = (lx, ly, lz) from
    the tool centre: n^T (J[:3] - [l]x J[3:]) = n^T J[:3] + (l x n)^T J[3:] (a ball's contact point
    lies along n from its centre: l x n = 0; a wheel's, pad's or disc's patch centre need not)."""
    cx, cy, cz = ly * nz - lz * ny, lz * nx - lx * nz, lx * ny - ly * nx
    return nx * J[0] + ny * J[1] + nz * J[2] + cx * J[3] + cy * J[4] + cz * J[5]


@njit(cache=True)
def rom_from_geometry(t, q, qd, gap, nrm, pt, kp, T, J, cp, jt, jd, bd, ws, M, L, rom):
    """The contact model at (t, q, qd) from contact geometry (gap m, normal (3,), point (3,), the
    patch stiffness kp (N/m; <= 0: the law's own, cp's)) and the tcp's T, J at q: effective mass
    along n, tangential force against the abrasive's sliding velocity, Kelvin-Voigt damping for that
    mass and stiffness. Writes rom, and M (n, n) and its Cholesky factor
    L at q; returns the effective mass (<= 0 or not finite: singular along n; -1 with M not
    positive definite)."""
    n = q.shape[0]
    Jn = normal_row(J, nrm[0], nrm[1], nrm[2], pt[0] - T[0, 3], pt[1] - T[1, 3], pt[2] - T[2, 3])
    y = np.empty(n)
    if not mass_factor(q, jt, jd, bd, ws, M, L):
        return -1.0
    cholesky_subst(L, Jn, y)
    m = 1.0 / np.dot(Jn, y)
    if not (m > 0.0 and math.isfinite(m)):
        return m
    v = J[:3] @ qd
    om = J[3:] @ qd
    vn_c = np.dot(Jn, qd)  # the contact point's normal rate (the tool centre's, plus the arm's rotation)
    for i in range(3):
        om[i] += cp[C.spindle] * T[i, 2]
    # the abrasive's velocity at the contact point: the tool centre's, plus the arm's and the
    # spindle's rotation about it; its tangential part slides on the part
    lx, ly, lz = pt[0] - T[0, 3], pt[1] - T[1, 3], pt[2] - T[2, 3]
    sl = np.array([v[0] + om[1] * lz - om[2] * ly, v[1] + om[2] * lx - om[0] * lz, v[2] + om[0] * ly - om[1] * lx])
    sn = sl[0] * nrm[0] + sl[1] * nrm[1] + sl[2] * nrm[2]
    for i in range(3):
        sl[i] -= sn * nrm[i]
    sp = math.sqrt(sl[0] * sl[0] + sl[1] * sl[1] + sl[2] * sl[2])
    ratio = cp[C.force_ratio]
    k = -(ratio / math.sqrt(sp * sp + cp[C.slip_speed] ** 2)) if ratio > 0.0 and sp > 0.0 else 0.0
    # the law's damping for this mass (its contact_damping(): fixed, or from a damping ratio; 0 for
    # laws without linear damping)
    stiffness = kp if kp > 0.0 else cp[C.stiffness]  # a tool with a patch: k_w A_c of this step
    if cp[C.damping] >= 0.0:
        damping = cp[C.damping]
    else:
        damping = 2.0 * cp[C.zeta] * math.sqrt(stiffness * m)
    rom[R.t], rom[R.model], rom[R.stiffness], rom[R.damping] = t, cp[C.model], stiffness, damping
    rom[R.cr], rom[R.exponent], rom[R.v_floor], rom[R.mass] = cp[C.cr], cp[C.exponent], cp[C.v_floor], m
    rom[R.gap] = gap
    rom[R.rate] = vn_c
    for i in range(3):
        rom[R.normal + i], rom[R.point + i], rom[R.centre + i] = nrm[i], pt[i], T[i, 3]
        rom[R.tangential + i] = k * sl[i]
    # the law and its sliding velocity (for the arm step's implicit tangential force)
    for i in range(3):
        rom[R.sliding + i] = sl[i]
    rom[R.force_ratio], rom[R.slip_speed] = max(ratio, 0.0), cp[C.slip_speed]
    return m


@njit(cache=True)
def rom_law_parameters(rom, family, u, lp):
    """The law's parameters (:data:`~robot_grinding_sim.core.contact.law.LP`) of the contact model
    rom into lp: its law, stiffness, linear damping for the model's mass, exponent, v_floor; the
    law's family and impact coefficient u given; clamped (the coupled step's laws always are)."""
    lp[P.law], lp[P.family], lp[P.clamped] = rom[R.model], family, 1.0
    lp[P.stiffness], lp[P.damping], lp[P.exponent], lp[P.u], lp[P.v_floor] = (
        rom[R.stiffness], rom[R.damping], rom[R.exponent], u, rom[R.v_floor])


@njit(cache=True)
def reach_check(t, dt, gap, vn, speed, cs):
    """Whether the tool can reach the part within the next step (gap m, normal speed vn and speed
    m/s); if not, cs[0] (the next time worth a geometry query) is put off until it could."""
    reach = 2.0 * dt * (abs(vn) + 0.05) + 1e-4
    if gap > reach:
        sp = speed + 0.05  # + margin for the acceleration within a step
        cs[0] = t + max(0.0, (gap - reach) / (2.0 * sp))
        return False
    cs[0] = -np.inf
    return True


@njit(cache=True)
def arm_side(laws, phases, engine, t, dt, st, have_rom, rom, f_prev, knots, coeffs, last, t_traj, arm, g_ctrl, g,
             jt, jd, bd, ws, body, X, hbody, H, wbody, wX, project, T, J, M, L, have_kin, hc_u, h_out, es, out, b,
             sv):
    """The arm side of one step (coupled_step module docstring) from state st (ST_ROWS, n) at t
    into out: trial step under f_prev, free acceleration along n, free flight, the LINEAR family's
    closed form or the variable-step engine's step (onset, release, the integrated laws in contact:
    :func:`~robot_grinding_sim.core.contact.engine_kernels.normal_step`; laws: the registry's
    kernels, rom[R.model] the law, phases the registry's integrator for it; hc_u: the law's
    impact coefficient u, h_out the engine's output spacing (0: none), es (4, k) its samples
    (engine_kernels.S_* rows), sv[V.ns] of them),
    projection along b = m M^-1 J^T n (b (n,) written). T, J, M, L: the step's kinematics at st's
    q (module docstring), given (``have_kin``) or computed here. Returns (code, es): a STATUS code
    (the arm's, or the engine's) and the samples' array (es, or a larger one)."""
    n = st.shape[1]
    w = np.zeros(6)
    for k in range(SV_LEN):
        sv[k] = 0.0
    sv[V.f_trial] = f_prev if have_rom else 0.0
    if not have_rom:
        code = arm_advance(t, dt, st, knots, coeffs, last, t_traj, bool(True), arm, g_ctrl, g, jt, jd, bd, ws,
                           wbody, wX, w, M, L, bool(have_kin), out)
        sv[V.kind], sv[V.x0], sv[V.x1], sv[V.end_x] = NONE, np.inf, np.inf, np.inf
        return code, es
    q0, qd0 = st[0], st[QD]
    if not have_kin:
        tcp_kinematics(q0, jt, jd, ws, body, X, hbody, H, T, J)
        if not mass_factor(q0, jt, jd, bd, ws, M, L):
            return E.mass_not_pd, es
    nx, ny, nz = rom[R.normal], rom[R.normal + 1], rom[R.normal + 2]
    ip, ic = R.point, R.centre  # the contact point's lever from the tool centre
    lx, ly, lz = rom[ip] - rom[ic], rom[ip + 1] - rom[ic + 1], rom[ip + 2] - rom[ic + 2]
    Jn = normal_row(J, nx, ny, nz, lx, ly, lz)
    vn0 = np.dot(Jn, qd0)
    ic = R.centre
    x0 = rom[R.gap] + nx * (T[0, 3] - rom[ic]) + ny * (T[1, 3] - rom[ic + 1]) + nz * (T[2, 3] - rom[ic + 2])
    m = rom[R.mass]
    cholesky_subst(L, Jn, b)
    for j in range(n):
        b[j] *= m
    # trial step with the previous mean force (its contact point relative to the tool centre)
    f_trial = f_prev
    if f_trial > 0.0:
        for i in range(3):
            w[i] = f_trial * (rom[R.normal + i] + rom[R.tangential + i])
        ip = R.point
        lx, ly, lz = rom[ip] - rom[ic], rom[ip + 1] - rom[ic + 1], rom[ip + 2] - rom[ic + 2]
        w[3], w[4], w[5] = ly * w[2] - lz * w[1], lz * w[0] - lx * w[2], lx * w[1] - ly * w[0]
    if hbody >= -1 and f_trial > 0.0:  # the robot holds the part: the wrench acts on it
        wh, wXh = np.empty(6), np.empty((4, 4))
        held_wrench(q0, jt, jd, ws, X, hbody, H, w, wXh, wh)
        code = arm_advance(t, dt, st, knots, coeffs, last, t_traj, bool(True), arm, g_ctrl, g, jt, jd, bd, ws, hbody,
                           wXh, wh, M, L, bool(True), out)
    else:
        code = arm_advance(t, dt, st, knots, coeffs, last, t_traj, bool(True), arm, g_ctrl, g, jt, jd, bd, ws, wbody,
                           wX, w, M, L, bool(True), out)
    if code != 0:
        return code, es
    if f_trial > 0.0 and rom[R.force_ratio] > 0.0 and rom[R.slip_speed] > 0.0:
        tangential_implicit(dt, f_trial, rom, J, L, lx, ly, lz, qd0, out)
    J1 = np.empty((6, n))
    tcp_kinematics(out[0], jt, jd, ws, body, X, hbody, H, np.empty((4, 4)), J1)
    Jn1 = normal_row(J1, nx, ny, nz, lx, ly, lz)
    vn1_arm = np.dot(Jn1, out[QD])
    dx_arm = 0.5 * np.dot(Jn + Jn1, out[0] - q0)
    f_ext = m * ((vn1_arm - vn0) / dt - f_trial / m)  # the arm's own force along +n, N
    a_n = f_ext / m
    # free flight over the whole step (the tool stays above the part): exact, no force
    x_end = x0 + vn0 * dt + 0.5 * a_n * dt * dt
    x_min = min(x0, x_end)
    if a_n > 0.0 and 0.0 < -vn0 / a_n < dt:
        x_min = min(x_min, x0 - vn0 * vn0 / (2.0 * a_n))
    kind = FREE if x_min > 0.0 else EVENT
    K, D = rom[R.stiffness], rom[R.damping]
    family = laws[int(rom[R.model])](FAMILY, rom, 0.0, 0.0, 0.0, 0.0, 0.0)
    if kind == EVENT and family == LINEAR and x0 < 0.0 and kv_stays_in_contact(K, D, m, -f_ext, -x0, -vn0, dt):
        kind = CONTACT
    sv[V.kind], sv[V.x0], sv[V.v0], sv[V.m], sv[V.f_ext] = kind, x0, vn0, m, f_ext
    sv[V.dx_arm], sv[V.vn1_arm] = dx_arm, vn1_arm
    if kind == FREE:
        sv[V.end_f], sv[V.end_x] = 0.0, x_end
        arm_side_finish(dt, x_end, vn0 + a_n * dt, project, out, b, sv)
    elif kind == CONTACT:
        d1, dd1 = kv_state(K, D, m, -f_ext, -x0, -vn0, dt)
        sv[V.end_f], sv[V.end_x] = K * d1 + D * dd1, -d1
        arm_side_finish(dt, -d1, -dd1, project, out, b, sv)
    else:
        # the variable-step engine's step from (x0, vn0): onset, release (and Hunt-Crossley's
        # contact throughout: kind HC), its samples into es
        lp = np.empty(LP_LEN)
        rom_law_parameters(rom, family, hc_u, lp)
        es, ns, x1, v1, whole, code = engine[0](laws, phases, lp, m, f_ext, x0, vn0, dt, h_out, es)
        if code != E.ok:
            return code, es
        if whole and family == INTEGRATED and x0 < 0.0:
            sv[V.kind] = HC
            sv[V.end_f], sv[V.end_x] = es[S_F, ns - 1], x1
        else:
            sv[V.end_f], sv[V.end_x] = np.nan, np.nan
        sv[V.ns] = ns
        arm_side_finish(dt, x1, v1, project, out, b, sv)
    return E.ok, es


@njit(cache=True)
def tangential_implicit(dt, f, rom, J, L, lx, ly, lz, qd0, out):
    """The trial step's tangential grinding force made implicit. The force is f t(v) (f the trial
    normal force, N; t(v) = -force_ratio v / sqrt(v^2 + slip_speed^2) per newton against the
    abrasive's sliding velocity v at the contact point, lever l from the tool centre); the trial step
    applied t(v0), v0 rom's sliding velocity. Backward Euler takes it at the step's end: v solves
    v = v1' + dt f W (t(v) - t(v0)) (Newton, with halving), v1' = v0 + P Jc (qd1' - qd0) the
    trial step's end, W = P Jc M^-1 Jc^T P the arm's mobility at the contact (P = I - n n^T, Jc
    (3, n) the contact point's Jacobian from the tool centre's J (6, n) at the start, L the Cholesky
    factor of M there); the joint velocities and positions of out get the extra force
    df = f (t(v) - t(v0)) (3,) (root axes, tangent plane) as an impulse, dqd = dt M^-1 (P Jc)^T df,
    dq = dt dqd (the arm's semi-implicit Euler). |t| <= force_ratio holds at the end as at the
    start. Explicit, a damper f force_ratio / slip_speed against the arm's sideways mass m_t at the
    contact with dt f force_ratio / (slip_speed m_t) > 2 (a part held off the wrist's axis) made the
    sliding velocity and the force alternate step by step."""
    n = qd0.shape[0]
    nx, ny, nz = rom[R.normal], rom[R.normal + 1], rom[R.normal + 2]
    ratio, s = rom[R.force_ratio], rom[R.slip_speed]
    Jt = np.empty((3, n))
    for j in range(n):
        # the contact point's velocity v + w x l, its tangential part
        a0 = J[0, j] - (ly * J[5, j] - lz * J[4, j])
        a1 = J[1, j] - (lz * J[3, j] - lx * J[5, j])
        a2 = J[2, j] - (lx * J[4, j] - ly * J[3, j])
        an = a0 * nx + a1 * ny + a2 * nz
        Jt[0, j], Jt[1, j], Jt[2, j] = a0 - an * nx, a1 - an * ny, a2 - an * nz
    Y = np.empty((n, 3))  # M^-1 Jt^T
    y = np.empty(n)
    for r in range(3):
        cholesky_subst(L, np.ascontiguousarray(Jt[r]), y)
        Y[:, r] = y
    W = Jt @ Y
    v0 = np.array([rom[R.sliding], rom[R.sliding + 1], rom[R.sliding + 2]])
    t0 = -ratio * v0 / math.sqrt(np.dot(v0, v0) + s * s)
    vp = v0 + Jt @ (out[QD] - qd0)
    fW = dt * f * W
    v = vp.copy()
    tv = -ratio * v / math.sqrt(np.dot(v, v) + s * s)
    res = v - vp - fW @ (tv - t0)
    err = math.sqrt(np.dot(res, res))
    for _ in range(50):
        if err <= 1e-13:
            break
        r = math.sqrt(np.dot(v, v) + s * s)
        dT = -(ratio / r) * (np.eye(3) - np.outer(v, v) / (r * r))
        step = np.linalg.solve(np.eye(3) - fW @ dT, res)
        lam = 1.0
        while True:
            vn = v - lam * step
            tn = -ratio * vn / math.sqrt(np.dot(vn, vn) + s * s)
            rn = vn - vp - fW @ (tn - t0)
            en = math.sqrt(np.dot(rn, rn))
            if en < err or lam < 1e-6:
                break
            lam *= 0.5
        v, tv, res, err = vn, tn, rn, en
    df = f * (tv - t0)
    for j in range(n):
        dv = dt * (Y[j, 0] * df[0] + Y[j, 1] * df[1] + Y[j, 2] * df[2])
        out[QD, j] += dv
        out[0, j] += dt * dv


@njit(cache=True)
def arm_side_finish(dt, x1, v1, project, out, b, sv):
    """The step's end: mean force m (v1 - v0) / dt - f_ext and the arm's normal coordinate set to
    the contact's end state (x1, v1) along b (or, with ``project`` off, the mean force applied)."""
    m, vn0, f_ext, f_trial = sv[V.m], sv[V.v0], sv[V.f_ext], sv[V.f_trial]
    x0, dx_arm, vn1_arm = sv[V.x0], sv[V.dx_arm], sv[V.vn1_arm]
    f_mean = max(m * (v1 - vn0) / dt - f_ext, 0.0)
    if sv[V.kind] == FREE and f_trial == 0.0:
        # no contact force, none tried: the arm's own step is the motion (exactly what it does
        # with no contact model at all, so the graph and the in-process job agree off the part)
        f_mean, x1, v1 = 0.0, x0 + dx_arm, vn1_arm
    elif project:
        dq, dv = (x1 - x0) - dx_arm, v1 - vn1_arm
        for j in range(b.shape[0]):
            out[0, j] += b[j] * dq
            out[QD, j] += b[j] * dv
    else:
        for j in range(b.shape[0]):
            out[QD, j] += b[j] * (f_mean - f_trial) * dt / m
    sv[V.force], sv[V.x1], sv[V.v1] = f_mean, x1, v1


@njit(cache=True)
def step_samples(sv, rom, s, fn, xs, et, ef, ex):
    """Normal force (N) and gap (m) at times s (k,) after the step's start, from the step's own
    solution (free flight, the closed form, or the engine's samples et, ef, ex for an event)."""
    kind = sv[V.kind]
    x0, vn0 = sv[V.x0], sv[V.v0]
    for i in range(s.shape[0]):
        if kind == NONE:
            fn[i], xs[i] = 0.0, np.inf
        elif kind == FREE:
            fn[i], xs[i] = 0.0, x0 + vn0 * s[i] + 0.5 * (sv[V.f_ext] / sv[V.m]) * s[i] * s[i]
        elif kind == CONTACT:
            K, D = rom[R.stiffness], rom[R.damping]
            d, dd = kv_state(K, D, sv[V.m], -sv[V.f_ext], -x0, -vn0, s[i])
            fn[i], xs[i] = K * d + D * dd, -d
        else:
            fn[i], xs[i] = np.interp(s[i], et, ef), np.interp(s[i], et, ex)


@njit(cache=True)
def record_step(t0, dt, st1, sv, rom, have_rom, h, ix, rts, rq, rqd, rtau, rfn, rnrm, rtan, rlev,
                ot, ofn, odepth, oidx, et, ef, ex):
    """Record one step: its end state and contact (row ix[I.steps]) and the output samples on the
    grid k h (s) that fall in (t0, t0 + dt], from the step's solution (:func:`step_samples`)."""
    t1 = t0 + dt
    k1 = int(math.floor(t1 / h + 1e-9))
    k0 = max(ix[I.next], int(math.floor(t0 / h + 1e-9)) + 1)
    ix[I.next] = max(ix[I.next], k1 + 1)
    step = ix[I.steps]
    if k1 >= k0:
        gap0 = sv[V.gap0] if sv[V.kind] == NONE else sv[V.x0]
        gap_far = gap0 if math.isfinite(gap0) else 1.0
        cnt = k1 - k0 + 1
        fn, xs = np.empty(cnt), np.empty(cnt)
        has_end = sv[V.kind] != EVENT and sv[V.kind] != HC  # else: the engine's samples
        if cnt == 1 and has_end and abs(k1 * h - t1) < 1e-9:
            fn[0], xs[0] = sv[V.end_f], sv[V.end_x]
        else:
            s = np.arange(k0, k1 + 1) * h - t0
            step_samples(sv, rom, s, fn, xs, et, ef, ex)
            if has_end and abs(k1 * h - t1) < 1e-9:  # the step end exactly as the state update
                fn[cnt - 1], xs[cnt - 1] = sv[V.end_f], sv[V.end_x]
        o = ix[I.out]
        for i in range(cnt):
            ot[o + i] = (k0 + i) * h
            ofn[o + i] = max(fn[i], 0.0)
            odepth[o + i] = -(xs[i] if math.isfinite(xs[i]) else gap_far)
            oidx[o + i] = step
        ix[I.out] = o + cnt
    rts[step] = t1
    rq[step] = st1[0]
    rqd[step] = st1[QD]
    rtau[step] = st1[TAU]
    rfn[step] = sv[V.force]
    for i in range(3):
        rnrm[step, i] = rom[R.normal + i] if have_rom else (1.0 if i == 2 else 0.0)
        rtan[step, i] = rom[R.tangential + i] if have_rom else 0.0
        rlev[step, i] = rom[R.point + i] - rom[R.centre + i] if have_rom else 0.0
    ix[I.steps] = step + 1
    if sv[V.kind] != NONE:
        ix[I.contact] += 1
    if sv[V.kind] == EVENT:
        ix[I.event] += 1


@njit(cache=True, inline="always")
def contact_side(t, dt, st, cs, cp, geo, tool, jt, jd, bd, ws, body, X, hbody, H, T, J, M, L, rom):
    """The contact side at the arm's state: the compiled tool query on the CAD face (geo: the
    arguments of :func:`~robot_grinding_sim.core.geometry.tool_contact.ball_contact` after the
    centre; tool: the tool's kernel arrays, :meth:`~robot_grinding_sim.core.geometry.tools.Tool.kernel_arrays`,
    :func:`~robot_grinding_sim.core.geometry.tools.tool_contact`), the reach check, the model into rom.
    Returns 1 with a model (and the step's kinematics T, J, M, L at st's q written), 0 without (the
    tool cannot reach the part within the step), -1 if the effective mass is singular. cs (2,):
    next time worth a query, the last gap (m)."""
    if t < cs[0]:
        cs[1] = np.inf
        return 0
    q, qd = st[0], st[QD]
    tcp_kinematics(q, jt, jd, ws, body, X, hbody, H, T, J)
    g = np.empty(6)
    gap, kp = tool_contact(T, geo, tool[0], tool[1], tool[2], tool[3], tool[4], g)
    cs[1] = gap
    v = J[:3] @ qd
    vn = g[0] * v[0] + g[1] * v[1] + g[2] * v[2]
    if not reach_check(t, dt, gap, vn, math.sqrt(np.dot(v, v)), cs):
        return 0
    m = rom_from_geometry(t, q, qd, gap, g[:3], g[3:], kp, T, J, cp, jt, jd, bd, ws, M, L, rom)
    return 1 if (m > 0.0 and math.isfinite(m)) else -1


@njit(cache=True)
def run_batch(laws, phases, engine, t, dt, t_end, max_steps, st, cs, fp, cp, geo, tool, knots, coeffs, last, arm,
              g_ctrl, g, jt, jd, bd, ws, body, X, hbody, H, wbody, wX, project, h, ix, rts, rq, rqd, rtau, rfn, rnrm,
              rtan, rlev, ot, ofn, odepth, oidx, out, rom, b, sv):
    """Steps of ``dt`` from state st at t until t_end or ``max_steps`` steps.

    laws: the registry's kernels (cp[C.model] the law), phases its integrator for that law
    (:func:`~robot_grinding_sim.core.contact.registry.integrator`). fp (1,): the previous step's mean force
    (the trial force), updated. Each completed step is recorded (:func:`record_step`) and becomes
    st; tool: the tool's kernel arrays (:func:`contact_side`).
    Returns (code, t): a STATUS code (ok at t_end or after max_steps; otherwise what failed,
    st the failed step's start)."""
    empty = np.empty(0)
    n = st.shape[1]
    T, J, M, L = np.empty((4, 4)), np.empty((6, n)), np.empty((n, n)), np.zeros((n, n))
    # the engine's samples of an event or Hunt-Crossley step (on the output grid; grown when needed)
    es = np.empty((4, int(dt / h) + 8))
    for _ in range(max_steps):
        if not t < t_end - 1e-12:
            return E.ok, t
        have = contact_side(t, dt, st, cs, cp, geo, tool, jt, jd, bd, ws, body, X, hbody, H, T, J, M, L, rom)
        if have < 0:
            return E.normal_mass_singular, t
        # with a model the contact side left the step's kinematics at st's q in T, J, M, L
        code, es = arm_side(laws, phases, engine, t, dt, st, have == 1, rom, fp[0], knots, coeffs, last, 0.0, arm,
                            g_ctrl, g, jt, jd, bd, ws, body, X, hbody, H, wbody, wX, project, T, J, M, L, have == 1,
                            cp[C.u], h, es, out, b, sv)
        if code != E.ok:
            return code, t
        sv[V.gap0] = cs[1]
        fp[0] = sv[V.force]
        if sv[V.kind] == HC or sv[V.kind] == EVENT:
            ns = int(sv[V.ns])
            record_step(t, dt, out, sv, rom, bool(True), h, ix, rts, rq, rqd, rtau, rfn, rnrm, rtan, rlev, ot, ofn,
                        odepth, oidx, es[S_T, :ns], es[S_F, :ns], es[S_X, :ns])
        else:
            record_step(t, dt, out, sv, rom, have == 1, h, ix, rts, rq, rqd, rtau, rfn, rnrm, rtan, rlev, ot, ofn,
                        odepth, oidx, empty, empty, empty)
        st[:] = out
        t = t + dt
    return E.ok, t
