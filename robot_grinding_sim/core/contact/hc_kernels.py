"""The contact phase of an integrated law (the Hunt-Crossley family) compiled (numba): DOP853 with
dense output and event
location, the steps of scipy's ``solve_ivp(method="DOP853", events=..., dense_output=True)``.

One integrator serves :func:`~robot_grinding_sim.core.contact.hunt_crossley.hc_integrate` (the
variable-step engine's contact phase) and the compiled coupled step
(:mod:`~robot_grinding_sim.core.sim.compiled_step`), which calls :func:`hc_phase` directly.

The ODE ``m d'' = f - F(d, d')`` (F the law's force, clamped at >= 0: its kernel's FORCE,
:mod:`~robot_grinding_sim.core.contact.law`; Hunt-Crossley ``K d^n (1 + alpha d')``), state
y = (d, d'), from 0 to t_max; the same Butcher tableau (scipy's DOP853 class attributes), initial step selection, error
norm and step-size control (safety 0.9, factors 0.2 .. 10) as scipy, the 7th-order dense output,
and events located by Brent's method (scipy's brentq, xtol = rtol = 4 eps) on the step's dense
output: d = 0 (exit) and the law's RELEASE function (Hunt-Crossley: 1 + alpha d') = 0 (release),
both terminal and downwards; d' = 0 and
dF/dt = 0 (downwards: the maxima of penetration and force). Units SI.

Result arrays: ``res`` (RES_LEN,) scalars (:data:`RES_T` ...); the dense output as ``seg``
(S, 3) rows (t_old, h, t_end of the segment) and ``F`` (S, 7, 2) with ``yo`` (S, 2) the state at
each segment's start (:func:`dense_eval`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import float64, njit, types
from numba.typed import List
from scipy.integrate import DOP853

from robot_grinding_sim.core.contact.law import FORCE, FORCE_RATE, LAW_TYPE, LP
from robot_grinding_sim.core.contact.law import RELEASE as OP_RELEASE
from robot_grinding_sim.core.contact.roots import B_LEN, BF_CUR, brent_next, brent_start

P = LP.index

_EPS = float(np.finfo(float).eps)
A = np.ascontiguousarray(DOP853.A, dtype=np.float64)
B = np.ascontiguousarray(DOP853.B, dtype=np.float64)
C = np.ascontiguousarray(DOP853.C, dtype=np.float64)
E3 = np.ascontiguousarray(DOP853.E3, dtype=np.float64)
E5 = np.ascontiguousarray(DOP853.E5, dtype=np.float64)
D = np.ascontiguousarray(DOP853.D, dtype=np.float64)
A_EXTRA = np.ascontiguousarray(DOP853.A_EXTRA, dtype=np.float64)
C_EXTRA = np.ascontiguousarray(DOP853.C_EXTRA, dtype=np.float64)
N_STAGES = int(DOP853.n_stages)
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
ERROR_EXPONENT = -1.0 / 8.0  # -1 / (error estimator order 7 + 1)
XTOL = 4.0 * _EPS

#: reasons (res[RES_REASON])
TIME, EXIT, RELEASE, FAILED = 0, 1, 2, 3
REASONS = ("time", "exit", "release", "failed")
#: result scalars: end time, d, d' there, reason, peak force and its time, max penetration and its time,
#: number of dense-output segments
RES_T, RES_D, RES_V, RES_REASON, RES_FPEAK, RES_TFPEAK, RES_DMAX, RES_TDMAX, RES_NSEG = range(9)
RES_LEN = 9


@njit(cache=True)
def hc_scales(k, n, m, f, d0, v0):
    """(d scale, d' scale) of the absolute tolerances: the Hertz penetration of the current speed,
    so that they stay meaningful from m/s impacts to resting contact."""
    vs = max(abs(v0), math.sqrt(abs(f) / m * max(d0, 1e-12)), 1e-9)
    dh = ((n + 1.0) * m * vs * vs / (2.0 * k)) ** (1.0 / (n + 1.0))
    ds = max(d0, dh, (abs(f) / k) ** (1.0 / n) if f else 0.0, 1e-15)
    return ds, vs


@njit(cache=True)
def hc_rhs(law, lp, alpha, m, f, y0, y1, out):
    """(d', d'') of the clamped contact at (d, d') = (y0, y1) into out (2,) (law: the law's kernel,
    lp its parameters)."""
    d = y0 if y0 > 0.0 else 0.0
    fc = law(FORCE, lp, alpha, d, y1, 0.0, 0.0)
    if fc < 0.0:
        fc = 0.0
    out[0] = y1
    out[1] = (f - fc) / m


@njit(cache=True)
def hc_event(i, law, lp, alpha, m, f, y0, y1):
    """Event function i at (d, d'): 0 exit (d), 1 release (the law's RELEASE), 2 d', 3 dF/dt."""
    if i == 0:
        return y0
    if i == 1:
        return law(OP_RELEASE, lp, alpha, y0, y1, 0.0, 0.0)
    if i == 2:
        return y1
    d = y0 if y0 > 0.0 else 0.0
    fc = max(law(FORCE, lp, alpha, d, y1, 0.0, 0.0), 0.0)
    acc = (f - fc) / m
    if d <= 0.0:
        return y1
    return law(FORCE_RATE, lp, alpha, d, y1, acc, 0.0)


@njit(cache=True)
def dense_point(t_old, h, yo, F, t, out):
    """The DOP853 interpolant of one step (start t_old, length h, start state yo (2,), F (7, 2)) at t."""
    x = (t - t_old) / h
    y0 = y1 = 0.0
    for i in range(F.shape[0]):
        r = F.shape[0] - 1 - i
        y0 += F[r, 0]
        y1 += F[r, 1]
        if i % 2 == 0:
            y0 *= x
            y1 *= x
        else:
            y0 *= 1.0 - x
            y1 *= 1.0 - x
    out[0] = y0 + yo[0]
    out[1] = y1 + yo[1]


@njit(cache=True)
def dense_eval(seg, F, yo, nseg, t, out):
    """The solution at times t (k,) into out (2, k): the segment whose [start, end] holds t (the
    lower one at a boundary, as scipy's OdeSolution), clamped to the first and last."""
    y = np.empty(2)
    for j in range(t.shape[0]):
        lo, hi = 0, nseg - 1  # the first segment ending at or after t (the last one beyond)
        while lo < hi:
            mid = (lo + hi) // 2
            if seg[mid, 2] >= t[j]:
                hi = mid
            else:
                lo = mid + 1
        s = lo
        dense_point(seg[s, 0], seg[s, 1], yo[s], F[s], t[j], y)
        out[0, j], out[1, j] = y[0], y[1]


@njit(cache=True)
def event_on_dense(i, law, lp, alpha, m, f, t_old, h, yo, F, x, y):
    """Event i on the step's dense output at x (y (2,): room for the state)."""
    dense_point(t_old, h, yo, F, x, y)
    return hc_event(i, law, lp, alpha, m, f, y[0], y[1])


@njit(cache=True)
def brent_event(i, law, lp, alpha, m, f, t_old, h, yo, F, xa, xb):
    """Root of event i on the step's dense output in [xa, xb]: Brent's method (:mod:`.roots`,
    scipy's brentq) with xtol = rtol = 4 eps."""
    y, s = np.empty(2), np.empty(B_LEN)
    fa = event_on_dense(i, law, lp, alpha, m, f, t_old, h, yo, F, xa, y)
    fb = event_on_dense(i, law, lp, alpha, m, f, t_old, h, yo, F, xb, y)
    x, done = brent_start(s, xa, xb, fa, fb, XTOL, XTOL, 100)
    while not done:
        s[BF_CUR] = event_on_dense(i, law, lp, alpha, m, f, t_old, h, yo, F, x, y)
        x, done = brent_next(s)
    return x


@njit(cache=True)
def rms2(a0, a1):
    """scipy's RMS norm of (a0, a1)."""
    return math.sqrt(a0 * a0 + a1 * a1) / math.sqrt(2.0)


@njit(cache=True)
def grow(seg, F, yo):
    """The segment arrays with twice the room."""
    k = seg.shape[0]
    s2, F2, yo2 = np.empty((2 * k, 3)), np.empty((2 * k, 7, 2)), np.empty((2 * k, 2))
    s2[:k], F2[:k], yo2[:k] = seg, F, yo
    return s2, F2, yo2


@njit(cache=True)
def push(a, na, x):
    """a (with na values) with x appended (room doubled when full)."""
    if na == a.shape[0]:
        b = np.empty(2 * na)
        b[:na] = a
        a = b
    a[na] = x
    return a


#: the signature of an integrated contact phase, :func:`hc_phase`'s: (law, lp, alpha, m, f, d0, v0,
#: t_max, rtol, res) -> (seg, F, yo). The kernels reach it as a first-class function
#: (``phases[0]`` of :func:`~robot_grinding_sim.core.contact.registry.integrator`'s typed list), so
#: a job whose law needs no integration never compiles DOP853 (the largest kernel: about half the
#: compile time of a first run)
PHASE_SIG = types.Tuple((float64[:, ::1], float64[:, :, ::1], float64[:, ::1]))(
    LAW_TYPE, float64[::1], float64, float64, float64, float64, float64, float64, float64, float64[::1])
PHASE_TYPE = types.FunctionType(PHASE_SIG)
PHASE_LIST = types.ListType(PHASE_TYPE)


@njit(PHASE_SIG, cache=True)
def no_phase(law, lp, alpha, m, f, d0, v0, t_max, rtol, res):
    """The integrator of the LINEAR family (closed form: never called); if called, the phase fails."""
    res[:] = 0.0
    res[RES_REASON] = FAILED
    return np.empty((0, 3)), np.empty((0, 7, 2)), np.empty((0, 2))


@njit(PHASE_LIST(PHASE_TYPE), cache=True)
def new_phase_list(phase):
    """A typed list holding the integrator ``phase`` (built compiled: see law.new_law_list)."""
    lst = List.empty_list(PHASE_TYPE)
    lst.append(phase)
    return lst


@njit(cache=True)
def hc_phase_entry(laws, lp, alpha, m, f, d0, v0, t_max, rtol, res):
    """:func:`hc_phase` with the law's kernel taken from the registry's list (the Python entry)."""
    return hc_phase(laws[int(lp[P.law])], lp, alpha, m, f, d0, v0, t_max, rtol, res)


@njit(cache=True)
def hc_phase(law, lp, alpha, m, f, d0, v0, t_max, rtol, res):
    """Integrate ``m d'' = f - F(d, d')`` (law: the law's kernel, lp its parameters; alpha the
    impact state) from (d0, d0') = (d0, v0) for up to t_max s (module docstring). Writes res
    (RES_LEN,); returns the dense output (seg, F, yo) with res[RES_NSEG] segments."""
    k = lp[P.stiffness]
    ds, vs = hc_scales(k, lp[P.exponent], m, f, d0, v0)
    at0, at1 = rtol * ds, rtol * vs
    seg, F, yo = np.empty((16, 3)), np.empty((16, 7, 2)), np.empty((16, 2))
    K = np.empty((N_STAGES + 4, 2))
    fy, fn, ynew = np.empty(2), np.empty(2), np.empty(2)
    y = np.array([d0, v0])
    t = 0.0
    hc_rhs(law, lp, alpha, m, f, y[0], y[1], fy)
    # initial step (scipy's select_initial_step, order 7)
    sc0, sc1 = at0 + abs(y[0]) * rtol, at1 + abs(y[1]) * rtol
    dd0, dd1 = rms2(y[0] / sc0, y[1] / sc1), rms2(fy[0] / sc0, fy[1] / sc1)
    h0 = 1e-6 if dd0 < 1e-5 or dd1 < 1e-5 else 0.01 * dd0 / dd1
    h0 = min(h0, t_max)
    f1 = np.empty(2)
    hc_rhs(law, lp, alpha, m, f, y[0] + h0 * fy[0], y[1] + h0 * fy[1], f1)
    dd2 = rms2((f1[0] - fy[0]) / sc0, (f1[1] - fy[1]) / sc1) / h0
    if dd1 <= 1e-15 and dd2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(dd1, dd2)) ** (1.0 / 8.0)
    h_abs = min(100.0 * h0, h1, t_max)
    g = np.empty(4)
    for i in range(4):
        g[i] = hc_event(i, law, lp, alpha, m, f, y[0], y[1])
    gn = np.empty(4)
    nseg = 0
    reason = TIME
    t_end, y_end = 0.0, y.copy()
    # maxima candidates besides the start and the end: the roots of events 2 and 3
    c2, c3 = np.empty(16), np.empty(16)
    n2 = n3 = 0
    ts_last = 0.0
    done = False
    while not done:
        # one accepted step (scipy's RungeKutta._step_impl)
        min_step = 10.0 * abs(np.nextafter(t, np.inf) - t)
        if h_abs < min_step:
            h_abs = min_step
        accepted, rejected = False, False
        h = 0.0
        while not accepted:
            if h_abs < min_step:
                res[RES_REASON] = FAILED
                res[RES_NSEG] = nseg
                return seg, F, yo
            h = h_abs
            t_new = t + h
            if t_new - t_max > 0.0:
                t_new = t_max
            h = t_new - t
            h_abs = abs(h)
            K[0, 0], K[0, 1] = fy[0], fy[1]
            for s in range(1, N_STAGES):
                a0 = a1 = 0.0
                for j in range(s):
                    a0 += K[j, 0] * A[s, j]
                    a1 += K[j, 1] * A[s, j]
                hc_rhs(law, lp, alpha, m, f, y[0] + a0 * h, y[1] + a1 * h, K[s])
            b0 = b1 = 0.0
            for j in range(N_STAGES):
                b0 += K[j, 0] * B[j]
                b1 += K[j, 1] * B[j]
            ynew[0], ynew[1] = y[0] + h * b0, y[1] + h * b1
            hc_rhs(law, lp, alpha, m, f, ynew[0], ynew[1], fn)
            K[N_STAGES, 0], K[N_STAGES, 1] = fn[0], fn[1]
            sc0 = at0 + max(abs(y[0]), abs(ynew[0])) * rtol
            sc1 = at1 + max(abs(y[1]), abs(ynew[1])) * rtol
            e50 = e51 = e30 = e31 = 0.0
            for j in range(N_STAGES + 1):
                e50 += K[j, 0] * E5[j]
                e51 += K[j, 1] * E5[j]
                e30 += K[j, 0] * E3[j]
                e31 += K[j, 1] * E3[j]
            e50, e51, e30, e31 = e50 / sc0, e51 / sc1, e30 / sc0, e31 / sc1
            q5, q3 = math.sqrt(e50 * e50 + e51 * e51) ** 2, math.sqrt(e30 * e30 + e31 * e31) ** 2
            if q5 == 0.0 and q3 == 0.0:
                err = 0.0
            else:
                err = abs(h) * q5 / math.sqrt((q5 + 0.01 * q3) * 2.0)
            if err < 1.0:
                factor = MAX_FACTOR if err == 0.0 else min(MAX_FACTOR, SAFETY * err**ERROR_EXPONENT)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                accepted = True
            else:
                h_abs *= max(MIN_FACTOR, SAFETY * err**ERROR_EXPONENT)
                rejected = True
        t_old = t
        yold0, yold1 = y[0], y[1]
        t = t_new
        y[0], y[1] = ynew[0], ynew[1]
        fy[0], fy[1] = fn[0], fn[1]
        finished = t - t_max >= 0.0
        # the step's dense output
        for s in range(N_STAGES + 1, N_STAGES + 4):
            a0 = a1 = 0.0
            row = s - N_STAGES - 1
            for j in range(s):
                a0 += K[j, 0] * A_EXTRA[row, j]
                a1 += K[j, 1] * A_EXTRA[row, j]
            hc_rhs(law, lp, alpha, m, f, yold0 + a0 * h, yold1 + a1 * h, K[s])
        if nseg == seg.shape[0]:
            seg, F, yo = grow(seg, F, yo)
        dy0, dy1 = y[0] - yold0, y[1] - yold1
        Fs = F[nseg]
        Fs[0, 0], Fs[0, 1] = dy0, dy1
        Fs[1, 0], Fs[1, 1] = h * K[0, 0] - dy0, h * K[0, 1] - dy1
        Fs[2, 0], Fs[2, 1] = 2.0 * dy0 - h * (fy[0] + K[0, 0]), 2.0 * dy1 - h * (fy[1] + K[0, 1])
        for r in range(4):
            a0 = a1 = 0.0
            for j in range(N_STAGES + 4):
                a0 += D[r, j] * K[j, 0]
                a1 += D[r, j] * K[j, 1]
            Fs[3 + r, 0], Fs[3 + r, 1] = h * a0, h * a1
        seg[nseg, 0], seg[nseg, 1], seg[nseg, 2] = t_old, h, t
        yo[nseg, 0], yo[nseg, 1] = yold0, yold1
        nseg += 1
        # events (all downwards; 0 and 1 terminal)
        for i in range(4):
            gn[i] = hc_event(i, law, lp, alpha, m, f, y[0], y[1])
        roots = np.full(4, np.inf)
        any_active, terminal = False, False
        for i in range(4):
            if g[i] >= 0.0 and gn[i] <= 0.0:
                roots[i] = brent_event(i, law, lp, alpha, m, f, t_old, h, yo[nseg - 1], F[nseg - 1], t_old, t)
                any_active = True
                terminal = terminal or i < 2
        t_stop = t
        if terminal:  # the first terminal root ends the integration; later roots are dropped
            first = 0 if roots[0] <= roots[1] else 1
            t_stop = roots[first]
            roots[1 - first] = np.inf
            for i in (2, 3):  # sorted after the terminal root on a tie
                if roots[i] >= t_stop:
                    roots[i] = np.inf
            reason = EXIT if first == 0 else RELEASE
            dense_point(t_old, h, yo[nseg - 1], F[nseg - 1], t_stop, y_end)
            if reason == EXIT:
                y_end[0] = 0.0
        if any_active:
            if roots[2] < np.inf:
                c2 = push(c2, n2, roots[2])
                n2 += 1
            if roots[3] < np.inf:
                c3 = push(c3, n3, roots[3])
                n3 += 1
        for i in range(4):
            g[i] = gn[i]
        if terminal:
            if t_stop == ts_last and nseg > 1:  # scipy drops a step whose end repeats the previous one
                nseg -= 1
            else:
                seg[nseg - 1, 2] = t_stop
            t_end = t_stop
            done = True
        else:
            ts_last = t
            if finished:
                t_end = t
                y_end[0], y_end[1] = y[0], y[1]
                done = True
    # maxima over the candidates within [0, t_end], in hc_integrate's order: 0, t_end, the roots
    # of event 2, those of event 3
    tc = np.empty(2 + n2 + n3)
    tc[0], tc[1] = 0.0, t_end
    m_ = 2
    for j in range(n2 + n3):
        r = c2[j] if j < n2 else c3[j - n2]
        if 0.0 <= r <= t_end:
            tc[m_] = r
            m_ += 1
    ys = np.empty((2, m_))
    dense_eval(seg, F, yo, nseg, tc[:m_], ys)
    fbest, dbest, tf, td = -np.inf, -np.inf, 0.0, 0.0
    for j in range(m_):
        d = max(ys[0, j], 0.0)
        fv = max(law(FORCE, lp, alpha, d, ys[1, j], 0.0, 0.0), 0.0)
        if fv > fbest:
            fbest, tf = fv, tc[j]
        if ys[0, j] > dbest:
            dbest, td = ys[0, j], tc[j]
    res[RES_T], res[RES_D], res[RES_V], res[RES_REASON] = t_end, y_end[0], y_end[1], reason
    res[RES_FPEAK], res[RES_TFPEAK], res[RES_DMAX], res[RES_TDMAX] = fbest, tf, max(dbest, 0.0), td
    res[RES_NSEG] = nseg
    return seg, F, yo
