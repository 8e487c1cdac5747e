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

Arrays: ``lp`` (LP_LEN,) the law (LP_*: law id, K, Kelvin-Voigt damping D for this mass,
exponent, the Hunt-Crossley u = alpha v_impact, v_floor, clamped); ``st`` (ST_LEN,) the engine
state (ST_*: t, x, v, mode, alpha, the current impact's time (NaN while free)); ``smp`` (4, k)
the recorded samples (rows S_T time s, S_F contact force N, S_X gap m, S_V velocity m/s: every
phase end, the step's end and, on request, a grid of ``out_dt`` and a finer grid ``fine_dt``
over the first ``fine_max`` points of each impact); ``ev`` (4, k) the contact log (EV_* rows:
impact, tracking of peak force and depth, release, exit, re-engagement), from which the engine
keeps its ContactRecords; ``cnt`` (3,) int64: samples, log rows, phases. Buffers that fill up
are replaced by larger ones, which the kernels return. Units SI.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from robot_grinding_sim.core.contact.hc_kernels import (
    FAILED,
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
    hc_phase,
)
from robot_grinding_sim.core.contact.kelvin_voigt import (
    exp_basis,
    form_first_down_crossing,
    form_maximum,
    kv_closed_form,
)

#: law parameters
LP_LAW, LP_K, LP_D, LP_EXP, LP_U, LP_VF, LP_CLAMPED = range(7)
LP_LEN = 7
KV_LAW, HC_LAW = 0, 1
#: engine state
ST_T, ST_X, ST_V, ST_MODE, ST_ALPHA, ST_TIMPACT = range(6)
ST_LEN = 6
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
#: kernel codes
OK, STALLED, HC_FAILED = 0, 1, 2
#: the Hunt-Crossley contact phase's relative tolerance
HC_RTOL = 1e-12


@njit(cache=True)
def quadratic_crossing(c0, c1, c2, t_max, direction):
    """First t in [0, t_max] where g(t) = c0 + c1 t + c2 t^2 crosses zero in ``direction`` (inf if
    none). direction -1: from >= 0 to < 0 (g decreasing at the root); +1: upwards. A root at t ~ 0
    with the wrong slope is ignored (the state just came from that event). Roots by the
    numerically stable quadratic formula, polished by one Newton step."""
    roots = np.empty(2)
    nr = 0
    if c2 == 0.0:
        if c1 != 0.0:
            roots[0] = -c0 / c1
            nr = 1
    else:
        disc = c1 * c1 - 4.0 * c2 * c0
        if disc >= 0.0:
            sq = math.sqrt(disc)
            qq = -0.5 * (c1 + math.copysign(sq, c1))
            if qq != 0.0:
                roots[0], roots[1] = qq / c2, c0 / qq
                nr = 2
            else:
                roots[0] = 0.0
                nr = 1
    best = math.inf
    for i in range(nr):
        t = roots[i]
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
            if t < best:
                best = t
    return best


@njit(cache=True, inline="always")
def hc_alpha(lp, v_impact):
    """The Hunt-Crossley alpha (s/m) of an impact at speed v_impact (m/s): u / max(|v|, v_floor)."""
    return lp[LP_U] / max(abs(v_impact), lp[LP_VF])


@njit(cache=True, inline="always")
def raw_force(lp, alpha, d, dd):
    """The contact force before clamping at penetration d > 0 and rate dd (N)."""
    if lp[LP_LAW] == KV_LAW:
        return lp[LP_K] * d + lp[LP_D] * dd
    return lp[LP_K] * d ** lp[LP_EXP] * (1.0 + alpha * dd)


@njit(cache=True, inline="always")
def law_force(lp, alpha, x, v):
    """The contact force (N, along +normal) at gap x and velocity v: 0 while apart, clamped at 0
    for clamped models (the Hunt-Crossley family always)."""
    d, dd = -x, -v
    if d <= 0.0:
        return 0.0
    f = raw_force(lp, alpha, d, dd)
    if lp[LP_LAW] != KV_LAW or lp[LP_CLAMPED] != 0.0:
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
def record_point(lp, st, smp, cnt):
    """The sample of the current state (its contact force while in contact)."""
    x, v = st[ST_X], st[ST_V]
    f = law_force(lp, st[ST_ALPHA], x, v) if st[ST_MODE] == CONTACT else 0.0
    return add_sample(smp, cnt, st[ST_T], f, x, v)


@njit(cache=True)
def open_contact(lp, st, v_in, ev, cnt):
    """An impact at the current time with speed v_in (m/s): alpha fixed (Hunt-Crossley)."""
    st[ST_TIMPACT] = st[ST_T]
    if lp[LP_LAW] == HC_LAW:
        st[ST_ALPHA] = hc_alpha(lp, v_in)
    return add_event(ev, cnt, EV_OPEN, st[ST_T], v_in, 0.0)


@njit(cache=True)
def close_release(st, v_pen, ev, cnt, inside):
    """The contact force has returned to zero: the body leaves with this normal velocity."""
    return add_event(ev, cnt, EV_RELEASE, max(-v_pen, 0.0), st[ST_T] - st[ST_TIMPACT], 1.0 if inside else 0.0)


@njit(cache=True)
def exit_surface(st, ev, cnt):
    """The body leaves the surface (d = 0): free again."""
    t = st[ST_T]
    ev = add_event(ev, cnt, EV_EXIT, t, max(st[ST_V], 0.0), t - st[ST_TIMPACT])
    st[ST_TIMPACT] = np.nan
    st[ST_X] = 0.0
    st[ST_MODE] = FREE
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
def record_dense(lp, st, m, t0, t1, contact, out_dt, fine_dt, fine_max, tr, c, seg, F, yo, nseg, smp, cnt):
    """Samples on the output grid (and, inside an impact, its fine grid) strictly inside (t0, t1)
    of the phase's trajectory tr (c: its coefficients; seg, F, yo, nseg: the Hunt-Crossley dense
    output), forces while in contact (:func:`law_force`)."""
    ts = grid(t0, t1, out_dt)
    if contact and fine_dt > 0.0 and not math.isnan(st[ST_TIMPACT]):
        # the fine grid covers the impact itself, not hours of resting contact
        t_stop = st[ST_TIMPACT] + fine_max * fine_dt
        if t0 < t_stop:
            ts = np.unique(np.concatenate((ts, grid(t0, min(t1, t_stop), fine_dt))))
    n = ts.shape[0]
    if n == 0:
        return smp
    ys = np.empty((2, n if tr == TR_HC else 0))
    if tr == TR_HC:
        dense_eval(seg, F, yo, nseg, ts - t0, ys)
    in_contact = st[ST_MODE] == CONTACT
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
        f = law_force(lp, st[ST_ALPHA], x, v) if in_contact else 0.0
        smp = add_sample(smp, cnt, ts[i], f, x, v)
    return smp


@njit(cache=True)
def engine_init(lp, m, f, x0, v0, t0, st, smp, ev, cnt):
    """The engine's state at (x0, v0, t0) under mass m and force f: free, in contact or loose
    (an impact opened at t0 unless free), and its first sample. Returns (smp, ev)."""
    st[ST_T], st[ST_X], st[ST_V], st[ST_ALPHA], st[ST_TIMPACT] = t0, x0, v0, 0.0, np.nan
    a = f / m
    if x0 > 0.0 or (x0 == 0.0 and (v0 > 0.0 or (v0 == 0.0 and a >= 0.0))):
        st[ST_MODE] = FREE
    else:
        if lp[LP_LAW] == HC_LAW:
            st[ST_ALPHA] = hc_alpha(lp, max(-v0, 0.0))
        clamped = lp[LP_LAW] == HC_LAW or lp[LP_CLAMPED] != 0.0
        if not clamped or x0 == 0.0 or raw_force(lp, st[ST_ALPHA], -x0, -v0) >= 0.0:
            st[ST_MODE] = CONTACT
        else:
            st[ST_MODE] = LOOSE
        ev = open_contact(lp, st, max(-v0, 0.0), ev, cnt)
    smp = record_point(lp, st, smp, cnt)
    return smp, ev


@njit(cache=True)
def free_phase(lp, st, m, f, tau, out_dt, smp, ev, cnt):
    """Free flight to the impact or for tau s; returns (time advanced, smp, ev)."""
    x0, v0, a = st[ST_X], st[ST_V], f / m
    if x0 <= 0.0 and (v0 < 0.0 or (v0 == 0.0 and a < 0.0)):
        te = 0.0
    else:
        te = quadratic_crossing(x0, v0, 0.5 * a, tau, -1)
    dt = tau if te == math.inf else te
    if out_dt > 0.0:
        e2 = np.empty((0, 3))
        smp = record_dense(lp, st, m, st[ST_T], st[ST_T] + dt, False, out_dt, 0.0, 0, TR_FREE,
                           np.array([x0, v0, a]), e2, np.empty((0, 7, 2)), np.empty((0, 2)), 0, smp, cnt)
    st[ST_T] += dt
    st[ST_V] = v0 + a * dt
    if te == math.inf:
        st[ST_X] = x0 + v0 * dt + 0.5 * a * dt * dt
    else:
        st[ST_X] = 0.0  # exactly on the surface: time of impact, no overshoot
        st[ST_MODE] = CONTACT
        ev = open_contact(lp, st, max(-st[ST_V], 0.0), ev, cnt)
        smp = record_point(lp, st, smp, cnt)
    return dt, smp, ev


@njit(cache=True)
def contact_phase(lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """Contact until the force (unclamped Kelvin-Voigt: d) returns to zero or for tau s; returns
    (time advanced, code, smp, ev)."""
    d0, dd0, f_in = -st[ST_X], -st[ST_V], -f
    K = lp[LP_K]
    clamped = lp[LP_LAW] == HC_LAW or lp[LP_CLAMPED] != 0.0
    alpha = st[ST_ALPHA]
    t0 = st[ST_T]
    if lp[LP_LAW] == KV_LAW:
        D = lp[LP_D]
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
        smp = record_dense(lp, st, m, t0, t0 + dt, True, out_dt, fine_dt, fine_max, TR_KV,
                           np.array([r, disc, w, s1, f_in / K, pd, qd, pv, qv]), np.empty((0, 3)),
                           np.empty((0, 7, 2)), np.empty((0, 2)), 0, smp, cnt)
        ec, es = exp_basis(r, disc, w, s1, dt)
        d1, dd1 = f_in / K + pd * ec + qd * es, 0.0 + pv * ec + qv * es
    else:
        n = lp[LP_EXP]
        if (1.0 + alpha * dd0 < 0.0 and d0 > 0.0) or (d0 <= 0.0 and dd0 < 0.0):
            # on the release surface moving out (release), or on the surface leaving (exit): at once
            ended, dt, d1, dd1 = True, 0.0, d0, dd0
            dp = max(d0, 0.0)
            ev = add_event(ev, cnt, EV_TRACK, dp, max(K * dp**n * (1.0 + alpha * dd0), 0.0), 0.0)
        else:
            res = np.empty(RES_LEN)
            seg, F, yo = hc_phase(K, n, alpha, m, f_in, d0, dd0, tau, HC_RTOL, res)
            if res[RES_REASON] == FAILED:
                return 0.0, HC_FAILED, smp, ev
            dt, d1, dd1 = res[RES_T], res[RES_D], res[RES_V]
            ended = res[RES_REASON] != TIME
            ev = add_event(ev, cnt, EV_TRACK, res[RES_DMAX], res[RES_FPEAK], 0.0)
            smp = record_dense(lp, st, m, t0, t0 + dt, True, out_dt, fine_dt, fine_max, TR_HC, res, seg, F, yo,
                               int(res[RES_NSEG]), smp, cnt)
    st[ST_T] += dt
    st[ST_X], st[ST_V] = -d1, -dd1
    if not ended:
        return dt, OK, smp, ev
    smp = record_point(lp, st, smp, cnt)  # the last contact sample (unclamped: the pulling force at d = 0)
    if not clamped or d1 <= 0.0:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(lp, st, smp, cnt)
    else:
        ev = close_release(st, dd1, ev, cnt, True)
        st[ST_MODE] = LOOSE
    return dt, OK, smp, ev


@njit(cache=True)
def loose_phase(lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """Ballistic inside the surface (the clamped force would pull) until the body leaves, the
    force re-engages or tau s; returns (time advanced, smp, ev)."""
    d0, dd0, a = -st[ST_X], -st[ST_V], -f / m
    if d0 <= 0.0 and dd0 <= 0.0:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(lp, st, smp, cnt)
        return 0.0, smp, ev
    t_exit = quadratic_crossing(d0, dd0, 0.5 * a, tau, -1)
    if lp[LP_LAW] == KV_LAW:
        k, c = lp[LP_K], lp[LP_D]
        t_eng = quadratic_crossing(k * d0 + c * dd0, k * dd0 + c * a, 0.5 * k * a, tau, +1)
    else:
        al = st[ST_ALPHA]
        t_eng = quadratic_crossing(1.0 + al * dd0, al * a, 0.0, tau, +1) if al > 0.0 else math.inf
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
    smp = record_dense(lp, st, m, st[ST_T], st[ST_T] + t_ev, True, out_dt, fine_dt, fine_max, TR_LOOSE,
                       np.array([d0, dd0, a]), np.empty((0, 3)), np.empty((0, 7, 2)), np.empty((0, 2)), 0, smp, cnt)
    st[ST_T] += t_ev
    st[ST_V] = -(dd0 + a * t_ev)
    st[ST_X] = -(d0 + dd0 * t_ev + 0.5 * a * t_ev * t_ev)
    if kind == 1:
        ev = exit_surface(st, ev, cnt)
        smp = record_point(lp, st, smp, cnt)
    elif kind == 2:
        st[ST_MODE] = CONTACT
        ev = add_event(ev, cnt, EV_ENGAGE, 0.0, 0.0, 0.0)  # the same impact continues
        smp = record_point(lp, st, smp, cnt)
    return t_ev, smp, ev


@njit(cache=True)
def engine_step(lp, m, f, st, dt, out_dt, fine_dt, fine_max, smp, ev, cnt):
    """One outer step of dt s from st under mass m and force f, stopping inside it only at events
    (module docstring); the step's end sampled. Returns (code: OK, STALLED or HC_FAILED, smp, ev)."""
    t_end = st[ST_T] + dt
    stalled = 0
    while st[ST_T] < t_end:
        tau = t_end - st[ST_T]
        mode = st[ST_MODE]
        if mode == FREE:
            adv, smp, ev = free_phase(lp, st, m, f, tau, out_dt, smp, ev, cnt)
        elif mode == CONTACT:
            adv, code, smp, ev = contact_phase(lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt)
            if code != OK:
                return code, smp, ev
        else:
            adv, smp, ev = loose_phase(lp, st, m, f, tau, out_dt, fine_dt, fine_max, smp, ev, cnt)
        cnt[C_PHASES] += 1
        stalled = stalled + 1 if adv <= 0.0 else 0
        if stalled > 50:
            return STALLED, smp, ev
        if tau - adv <= 1e-15 * max(1.0, abs(t_end)):
            st[ST_T] = t_end  # absorb rounding: the step ends here
            break
    smp = record_point(lp, st, smp, cnt)
    return OK, smp, ev


@njit(cache=True)
def normal_step(lp, m, f, x0, v0, dt, out_dt, smp):
    """A fresh engine at (x0, v0) at t = 0 stepped once by dt (the coupled step's onset and release
    steps): the samples (smp, possibly a larger copy; rows S_*), their count, the end state
    (x1, v1), whether the step was one contact phase throughout, and the code."""
    st = np.empty(ST_LEN)
    ev = np.empty((4, 8))
    cnt = np.zeros(3, dtype=np.int64)
    smp, ev = engine_init(lp, m, f, x0, v0, 0.0, st, smp, ev, cnt)
    start_contact = st[ST_MODE] == CONTACT
    code, smp, ev = engine_step(lp, m, f, st, dt, out_dt, 0.0, 0, smp, ev, cnt)
    whole = start_contact and cnt[C_PHASES] == 1 and st[ST_MODE] == CONTACT
    ns = cnt[C_NS]
    for i in range(1, ns):
        if smp[S_T, i] < smp[S_T, i - 1]:  # a grid time rounded past its phase's end: time order
            order = np.argsort(smp[S_T, :ns], kind="mergesort")
            smp[:, :ns] = smp[:, order]
            break
    return smp, ns, st[ST_X], st[ST_V], whole, code
