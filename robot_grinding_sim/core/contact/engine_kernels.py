"""The variable-step engine's outer step compiled (numba): one implementation behind
:class:`~robot_grinding_sim.core.contact.engine.NormalContactEngine` (the bouncing ball, any
body along a contact normal) and the compiled coupled step
(:mod:`~robot_grinding_sim.core.sim.compiled_step`: onset and release steps of the arm).

The body is the engine's 1-DOF model along the contact normal (gap x, velocity v, effective mass
m, external force f along +normal, both held over the outer step). An outer step of tau s runs
phases until it ends, each solved exactly:

- free flight: x + v t + a t^2 / 2, a = f / m, to the impact (:func:`quadratic_crossing`; the gap
  is then exactly 0);
- contact: Kelvin-Voigt in closed form (:func:`~robot_grinding_sim.core.contact.kelvin_voigt.kv_closed_form`),
  ending where the clamped force (unclamped: d) first crosses zero downwards
  (:func:`~robot_grinding_sim.core.contact.kelvin_voigt.form_first_down_crossing`); Hunt-Crossley
  integrated by DOP853 with event location (:func:`~robot_grinding_sim.core.contact.hc_kernels.hc_phase`,
  alpha fixed at the impact from its speed);
- loose (clamped models, inside the surface but the force would pull): ballistic until the body
  leaves (d = 0) or the force re-engages.

Arrays: ``lp`` (LP.size,) the law's parameters (:data:`~robot_grinding_sim.core.contact.law.LP`:
law id, K, the LINEAR family's damping D for this mass, exponent, the Hunt-Crossley u = alpha
v_impact, v_floor, clamped, family), its kernel ``laws[int(lp[P.law])]`` of the registry's list
(:func:`~robot_grinding_sim.core.contact.registry.kernels`); ``st`` (ST.size,) the engine state
(:data:`ST`: t, x, v, mode, alpha, the current impact's time (NaN while free)); ``smp`` (4, k)
the recorded samples (rows S_T time s, S_F contact force N, S_X gap m, S_V velocity m/s: every
phase end, the step's end and, on request, a grid of ``out_dt`` and a finer grid ``fine_dt``
over the first ``fine_max`` points of each impact); ``ev`` (4, k) the contact log (EV_* rows:
impact, tracking of peak force and depth, release, exit, re-engagement), from which the engine
keeps its ContactRecords; ``cnt`` (3,) int64: samples, log rows, phases. Buffers that fill up
are replaced by larger ones, which the kernels return. Units SI.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import boolean, float64, int64, njit, types
from numba.typed import List

from robot_grinding_sim.core.contact.hc_kernels import (
    FAILED,
    PHASE_LIST,
    RES_D,
    RES_DMAX,
    RES_FPEAK,
    RES_LEN,
    RES_NSEG,
    RES_REASON,
    RES_T,
    RES_V,
    TIME,
    dense_eval,
)
from robot_grinding_sim.core.contact.kelvin_voigt import (
    exp_basis,
    form_first_down_crossing,
    form_maximum,
    kv_closed_form,
)
from robot_grinding_sim.core.contact.law import ENGAGE, FORCE, IMPACT, LAW_LIST, LINEAR, LP, RELEASE
from robot_grinding_sim.core.contact.roots import quadratic_crossing
from robot_grinding_sim.core.layout import STATUS, Layout

#: law parameters (every law's: :data:`~robot_grinding_sim.core.contact.law.LP`)
P = LP.index
#: engine state
ST = Layout("engine_state", (
    ("t", 1, "s", "time"), ("x", 1, "m", "gap"), ("v", 1, "m/s", "gap rate"),
    ("mode", 1, "", "FREE, CONTACT or LOOSE"), ("alpha", 1, "", "the law's impact state (Hunt-Crossley alpha, s/m)"),
    ("t_impact", 1, "s", "time of the current impact (NaN while free)"),
))
T = ST.index
ST_LEN = ST.size  # (a Layout is no numba constant: its size is)
#: modes (NormalContactEngine.mode: "free", "contact", "loose")
FREE, CONTACT, LOOSE = 0, 1, 2
#: sample rows
S_T, S_F, S_X, S_V = range(4)
#: contact log rows (kind, a, b, c): OPEN (t_impact, v_in); TRACK (depth, force: maxima so far);
#: RELEASE (v_out, duration, 1: a release inside the surface); EXIT (t_exit, and v_out, duration
#: unless the contact already has them); ENGAGE (the force re-engages: no v_out, no duration)
EV_OPEN, EV_TRACK, EV_RELEASE, EV_EXIT, EV_ENGAGE = range(5)
#: counters
C_NS, C_NEV, C_PHASES = range(3)
#: kernel codes (:data:`~robot_grinding_sim.core.layout.STATUS`)
E = STATUS.code
#: the Hunt-Crossley contact phase's relative tolerance
HC_RTOL = 1e-12


@njit(cache=True, inline="always")
def law_force(law, lp, alpha, x, v):
    """The contact force (N, along +normal) at gap x and velocity v: 0 while apart, clamped at 0
    for clamped laws (law: the law's kernel)."""
    d, dd = -x, -v
    if d <= 0.0:
        return 0.0
    f = law(FORCE, lp, alpha, d, dd, 0.0, 0.0)
    if lp[P.clamped] != 0.0:
        return max(f, 0.0)
    return f


@njit(cache=True, inline="always")
def add_sample(smp, cnt, t, f, x, v):
    """smp with (t, f, x, v) appended (a larger copy when full)."""
    k = cnt[C_NS]
    if k == smp.shape[1]:
        bigger = np.empty((4, 2 * k + 16))
        bigger[:, :k] = smp[:, :k]
        smp = bigger
    smp[S_T, k], smp[S_F, k], smp[S_X, k], smp[S_V, k] = t, f, x, v
    cnt[C_NS] = k + 1
    return smp


@njit(cache=True, inline="always")
def add_event(ev, cnt, kind, a, b, c):
    """ev with the contact-log row (kind, a, b, c) appended (a larger copy when full)."""
    k = cnt[C_NEV]
    if k == ev.shape[1]:
        bigger = np.empty((4, 2 * k + 8))
        bigger[:, :k] = ev[:, :k]
        ev = bigger
    ev[0, k], ev[1, k], ev[2, k], ev[3, k] = kind, a, b, c
    cnt[C_NEV] = k + 1
    return ev


@njit(cache=True, inline="always")
def record_point(law, lp, st, smp, cnt):
    """The sample of the current state (its contact force while in contact)."""
    x, v = st[T.x], st[T.v]
    f = law_force(law, lp, st[T.alpha], x, v) if st[T.mode] == CONTACT else 0.0
    return add_sample(smp, cnt, st[T.t], f, x, v)


@njit(cache=True)
def open_contact(law, lp, st, v_in, ev, cnt):
    """An impact at the current time with speed v_in (m/s): the law's impact state fixed
    (Hunt-Crossley's alpha)."""
    st[T.t_impact] = st[T.t]
    st[T.alpha] = law(IMPACT, lp, v_in, 0.0, 0.0, 0.0, 0.0)
    return add_event(ev, cnt, EV_OPEN, st[T.t], v_in, 0.0)


@njit(cache=True)
def close_release(st, v_pen, ev, cnt, inside):
    """The contact force has returned to zero: the body leaves with this normal velocity."""
    return add_event(ev, cnt, EV_RELEASE, max(-v_pen, 0.0), st[T.t] - st[T.t_impact], 1.0 if inside else 0.0)


@njit(cache=True)
def exit_surface(st, ev, cnt):
    """The body leaves the surface (d = 0): free again."""
    t = st[T.t]
    ev = add_event(ev, cnt, EV_EXIT, t, max(st[T.v], 0.0), t - st[T.t_impact])
    st[T.t_impact] = np.nan
    st[T.x] = 0.0
    st[T.mode] = FREE
    return ev


@njit(cache=True)
def grid(t0, t1, dt):
    """Multiples of dt strictly inside (t0, t1) (none for dt <= 0)."""
    if not dt > 0.0 or t1 <= t0:
        return np.empty(0)
    k0 = math.floor(t0 / dt) + 1
    k1 = math.ceil(t1 / dt) - 1
    if k1 < k0:
        return np.empty(0)
    out = np.empty(k1 - k0 + 1)
    for i in range(out.shape[0]):
        out[i] = (k0 + i) * dt
    return out


#: trajectories of :func:`record_dense`: ballistic in x (free), in d (loose), the Kelvin-Voigt
#: closed form, the Hunt-Crossley dense output
TR_FREE, TR_LOOSE, TR_KV, TR_HC = range(4)


@njit(cache=True)
def record_dense(law, lp, st, m, t0, t1, contact, out_dt, fine_dt, fine_max, tr, c, seg, F, yo, nseg, smp, cnt):
    """Samples on the output grid (and, inside an impact, its fine grid) strictly inside (t0, t1)
    of the phase's trajectory tr (c: its coefficients; seg, F, yo, nseg: the Hunt-Crossley dense
    output), forces while in contact (:func:`law_force`)."""
    ts = grid(t0, t1, out_dt)
    if contact and fine_dt > 0.0 and not math.isnan(st[T.t_impact]):
        # the fine grid covers the impact itself, not hours of resting contact
        t_stop = st[T.t_impact] + fine_max * fine_dt
        if t0 < t_stop:
            ts = np.unique(np.concatenate((ts, grid(t0, min(t1, t_stop), fine_dt))))
    n = ts.shape[0]
    if n == 0:
        return smp
    ys = np.empty((2, n if tr == TR_HC else 0))
    if tr == TR_HC:
        dense_eval(seg, F, yo, nseg, ts - t0, ys)
    in_contact = st[T.mode] == CONTACT
    for i in range(n):
        s = ts[i] - t0
        if tr == TR_FREE:
            x, v = c[0] + c[1] * s + 0.5 * c[2] * s * s, c[1] + c[2] * s
        elif tr == TR_LOOSE:
            x, v = -(c[0] + c[1] * s + 0.5 * c[2] * s * s), -(c[1] + c[2] * s)
        elif tr == TR_KV:  # c: r, disc, w, s1, f/K, pd, qd, pv, qv
            ec, es = exp_basis(c[0], c[1], c[2], c[3], s)
            x, v = -(c[4] + c[5] * ec + c[6] * es), -(0.0 + c[7] * ec + c[8] * es)
        else:
            x, v = -ys[0, i], -ys[1, i]
        f = law_force(law, lp, st[T.alpha], x, v) if in_contact else 0.0
        smp = add_sample(smp, cnt, ts[i], f, x, v)
    return smp


@njit(cache=True)
def engine_init(laws, lp, m, f, x0, v0, t0, st, smp, ev, cnt):
    """The engine's state at (x0, v0, t0) under mass m and force f: free, in contact or loose
    (an impact opened at t0 unless free), and its first sample (laws: the registry's kernels,
    lp[P.law] the law). Returns (smp, ev)."""
    law = laws[int(lp[P.law])]
    st[T.t], st[T.x], st[T.v], st[T.alpha], st[T.t_impact] = t0, x0, v0, 0.0, np.nan
    a = f / m
    if x0 > 0.0 or (x0 == 0.0 and (v0 > 0.0 or (v0 == 0.0 and a >= 0.0))):
        st[T.mode] = FREE
    else:
        st[T.alpha] = law(IMPACT, lp, max(-v0, 0.0), 0.0, 0.0, 0.0, 0.0)
        clamped = lp[P.clamped] != 0.0
        if not clamped or x0 == 0.0 or law(FORCE, lp, st[T.alpha], -x0, -v0, 0.0, 0.0) >= 0.0:
            st[T.mode] = CONTACT
        else:
            st[T.mode] = LOOSE
        ev = open_contact(law, lp, st, max(-v0, 0.0), ev, cnt)
    smp = record_point(law, lp, st, smp, cnt)
    return smp, ev


@njit(cache=True)
def free_phase(law, lp, st, m, f, tau, out_dt, smp, ev, cnt):
    """Free flight to the impact or for tau s; returns (time advanced, smp, ev)."""
    x0, v0, a = st[T.x], st[T.v], f / m
    if x0 <= 0.0 and (v0 < 0.0 or (v0 == 0.0 and a < 0.0)):
        te = 0.0
    else:
        te = quadratic_crossing(x0, v0, 0.5 * a, tau, -1)
    dt = tau if te == math.inf else te
    if out_dt > 0.0:
        e2 = np.empty((0, 3))
        smp = record_dense(law, lp, st, m, st[T.t], st[T.t] + dt, bool(False), out_dt, 0.0, int(0), int(TR_FREE),
                           np.array([x0, v0, a]), e2, np.empty((0, 7, 2)), np.empty((0, 2)), int(0), smp, cnt)
    st[T.t] += dt
    st[T.v] = v0 + a * dt
    if te == math.inf:
        st[T.x] = x0 + v0 * dt + 0.5 * a * dt * dt
    else:
        st[T.x] = 0.0  # exactly on the surface: time of impact, no overshoot
        st[T.mode] = CONTACT
        ev = open_contact(law, lp, st, max(-st[T.v], 0.0), ev, cnt)
        smp = record_point(law, lp, st, smp, cnt)
    return dt, smp, ev


@njit(cache=True)
def contact_phase(law, phases, lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """Contact until the force (unclamped: d) returns to zero or for tau s: the LINEAR family in
    closed form, the others integrated by ``phases[0]`` (the registry's
    :func:`~robot_grinding_sim.core.contact.registry.integrator`); returns (time advanced, code, smp, ev)."""
    d0, dd0, f_in = -st[T.x], -st[T.v], -f
    K = lp[P.stiffness]
    clamped = lp[P.clamped] != 0.0
    alpha = st[T.alpha]
    t0 = st[T.t]
    if lp[P.family] == LINEAR:
        D = lp[P.damping]
        r, disc, w, s1, pd, qd, pv, qv = kv_closed_form(K, D, m, f_in, d0, dd0)
        c0f, pf, qf = f_in, K * pd + D * pv, K * qd + D * qv
        if clamped:
            ts = form_first_down_crossing(r, disc, w, s1, c0f, pf, qf, tau)
        else:
            ts = form_first_down_crossing(r, disc, w, s1, f_in / K, pd, qd, tau)
        ended = ts != math.inf
        dt = ts if ended else tau
        dmax = form_maximum(r, disc, w, s1, f_in / K, pd, qd, dt)[0]
        fmax = form_maximum(r, disc, w, s1, c0f, pf, qf, dt)[0]
        ev = add_event(ev, cnt, EV_TRACK, dmax, fmax, 0.0)
        smp = record_dense(law, lp, st, m, t0, t0 + dt, bool(True), out_dt, fine_dt, fine_max, int(TR_KV),
                           np.array([r, disc, w, s1, f_in / K, pd, qd, pv, qv]), np.empty((0, 3)),
                           np.empty((0, 7, 2)), np.empty((0, 2)), int(0), smp, cnt)
        ec, es = exp_basis(r, disc, w, s1, dt)
        d1, dd1 = f_in / K + pd * ec + qd * es, 0.0 + pv * ec + qv * es
    else:
        if (law(RELEASE, lp, alpha, d0, dd0, 0.0, 0.0) < 0.0 and d0 > 0.0) or (d0 <= 0.0 and dd0 < 0.0):
            # on the release surface moving out (release), or on the surface leaving (exit): at once
            ended, dt, d1, dd1 = True, 0.0, d0, dd0
            dp = max(d0, 0.0)
            ev = add_event(ev, cnt, EV_TRACK, dp, max(law(FORCE, lp, alpha, dp, dd0, 0.0, 0.0), 0.0), 0.0)
        else:
            res = np.empty(RES_LEN)
            seg, F, yo = phases[0](law, lp, alpha, m, f_in, d0, dd0, tau, HC_RTOL, res)
            if res[RES_REASON] == FAILED:
                return 0.0, E.integration_failed, smp, ev
            dt, d1, dd1 = res[RES_T], res[RES_D], res[RES_V]
            ended = res[RES_REASON] != TIME
            ev = add_event(ev, cnt, EV_TRACK, res[RES_DMAX], res[RES_FPEAK], 0.0)
            smp = record_dense(law, lp, st, m, t0, t0 + dt, bool(True), out_dt, fine_dt, fine_max, int(TR_HC), res, seg,
                               F, yo, int(res[RES_NSEG]), smp, cnt)
    st[T.t] += dt
    st[T.x], st[T.v] = -d1, -dd1
    if not ended:
        return dt, E.ok, smp, ev
    smp = record_point(law, lp, st, smp, cnt)  # the last contact sample (unclamped: the pulling force at d = 0)
    if not clamped or d1 <= 0.0:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(law, lp, st, smp, cnt)
    else:
        ev = close_release(st, dd1, ev, cnt, True)
        st[T.mode] = LOOSE
    return dt, E.ok, smp, ev


@njit(cache=True)
def loose_phase(law, lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """Ballistic inside the surface (the clamped force would pull) until the body leaves, the
    force re-engages or tau s; returns (time advanced, smp, ev)."""
    d0, dd0, a = -st[T.x], -st[T.v], -f / m
    if d0 <= 0.0 and dd0 <= 0.0:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(law, lp, st, smp, cnt)
        return 0.0, smp, ev
    t_exit = quadratic_crossing(d0, dd0, 0.5 * a, tau, -1)
    t_eng = law(ENGAGE, lp, st[T.alpha], d0, dd0, a, tau)
    # the earliest event; at a tie the force re-engages
    if t_eng == math.inf and t_exit == math.inf:
        t_ev, kind = tau, 0
    elif t_eng <= t_exit:
        t_ev, kind = t_eng, 2
    else:
        t_ev, kind = t_exit, 1
    # deepest point of this ballistic arc inside the surface
    deepest = max(d0, d0 + dd0 * t_ev + 0.5 * a * t_ev * t_ev)
    if a != 0.0 and 0.0 < -dd0 / a < t_ev:
        s = -dd0 / a
        deepest = max(deepest, d0 + dd0 * s + 0.5 * a * s * s)
    ev = add_event(ev, cnt, EV_TRACK, deepest, 0.0, 0.0)
    smp = record_dense(law, lp, st, m, st[T.t], st[T.t] + t_ev, bool(True), out_dt, fine_dt, fine_max, int(TR_LOOSE),
                       np.array([d0, dd0, a]), np.empty((0, 3)), np.empty((0, 7, 2)), np.empty((0, 2)), int(0), smp,
                       cnt)
    st[T.t] += t_ev
    st[T.v] = -(dd0 + a * t_ev)
    st[T.x] = -(d0 + dd0 * t_ev + 0.5 * a * t_ev * t_ev)
    if kind == 1:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(law, lp, st, smp, cnt)
    elif kind == 2:
        st[T.mode] = CONTACT
        ev = add_event(ev, cnt, EV_ENGAGE, 0.0, 0.0, 0.0)  # the same impact continues
        smp = record_point(law, lp, st, smp, cnt)
    return t_ev, smp, ev


@njit(cache=True, inline="always")
def engine_step(laws, phases, lp, m, f, st, dt, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """One outer step of dt s from st under mass m and force f, stopping inside it only at events
    (module docstring); the step's end sampled (laws: the registry's kernels, lp[P.law] the law;
    phases: the registry's integrator for that law). Returns (code: STATUS ok, engine_stalled or
    integration_failed, smp, ev)."""
    return law_step(laws[int(lp[P.law])], phases, lp, m, f, st, dt, out_dt, fine_dt, fine_max, smp, ev, cnt)


@njit(cache=True, inline="always")
def law_step(law, phases, lp, m, f, st, dt, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """:func:`engine_step` with the law's kernel."""
    t_end = st[T.t] + dt
    stalled = 0
    while st[T.t] < t_end:
        tau = t_end - st[T.t]
        mode = st[T.mode]
        if mode == FREE:
            adv, smp, ev = free_phase(law, lp, st, m, f, tau, out_dt, smp, ev, cnt)
        elif mode == CONTACT:
            adv, code, smp, ev = contact_phase(law, phases, lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt)
            if code != E.ok:
                return code, smp, ev
        else:
            adv, smp, ev = loose_phase(law, lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt)
        cnt[C_PHASES] += 1
        stalled = stalled + 1 if adv <= 0.0 else 0
        if stalled > 50:
            return E.engine_stalled, smp, ev
        if tau - adv <= 1e-15 * max(1.0, abs(t_end)):
            st[T.t] = t_end  # absorb rounding: the step ends here
            break
    smp = record_point(law, lp, st, smp, cnt)
    return E.ok, smp, ev


@njit(cache=True)
def normal_step(laws, phases, lp, m, f, x0, v0, dt, out_dt, smp):
    """A fresh engine at (x0, v0) at t = 0 stepped once by dt (the coupled step's onset and release
    steps): the samples (smp, possibly a larger copy; rows S_*), their count, the end state
    (x1, v1), whether the step was one contact phase throughout, and the code."""
    st = np.empty(ST_LEN)
    ev = np.empty((4, 8))
    cnt = np.zeros(3, dtype=np.int64)
    smp, ev = engine_init(laws, lp, m, f, x0, v0, 0.0, st, smp, ev, cnt)
    start_contact = st[T.mode] == CONTACT
    code, smp, ev = engine_step(laws, phases, lp, m, f, st, dt, out_dt, 0.0, int(0), smp, ev, cnt)
    whole = start_contact and cnt[C_PHASES] == 1 and st[T.mode] == CONTACT
    ns = cnt[C_NS]
    for i in range(1, ns):
        if smp[S_T, i] < smp[S_T, i - 1]:  # a grid time rounded past its phase's end: time order
            order = np.argsort(smp[S_T, :ns], kind="mergesort")
            smp[:, :ns] = smp[:, order]
            break
    return smp, ns, st[T.x], st[T.v], whole, code


#: :func:`normal_step`'s signature: (laws, phases, lp, m, f, x0, v0, dt, out_dt, smp) -> (smp, ns, x1,
#: v1, whole, code). The coupled step (compiled_step.arm_side) reaches it as a first-class function
#: (``engine[0]`` of :func:`engine_list`), as it reaches the laws and the integrator: a direct call
#: links the engine's kernels into arm_side's and run_batch's compiled modules, and LLVM optimises
#: that linked code again at each level of the chain (a cold first run compiled it three times:
#: docs/performance.md, "The first run"); through the function's address it is compiled once
STEP_SIG = types.Tuple((float64[:, ::1], int64, float64, float64, boolean, int64))(
    LAW_LIST, PHASE_LIST, float64[::1], float64, float64, float64, float64, float64, float64, float64[:, ::1])
STEP_TYPE = types.FunctionType(STEP_SIG)
STEP_LIST = types.ListType(STEP_TYPE)


@njit(STEP_LIST(STEP_TYPE), cache=True)
def new_step_list(step):
    """A typed list holding the engine step ``step`` (built compiled: see law.new_law_list)."""
    lst = List.empty_list(STEP_TYPE)
    lst.append(step)
    return lst


_ENGINE: list[Any] = []


def engine_list() -> Any:
    """:func:`normal_step` as the coupled step's kernels take it: a typed list of one first-class
    function (``engine[0]``), compiled for :data:`STEP_SIG` on first use (from the cache after the
    first run)."""
    if not _ENGINE:
        normal_step.compile(STEP_SIG)
        _ENGINE.append(new_step_list(normal_step))
    return _ENGINE[0]
