"""Compiled root finders shared by the contact kernels: Brent's method (scipy's ``brentq``, step
for step; the caller evaluates the function) and the first crossing of a quadratic.

One implementation serves the Kelvin-Voigt closed form's separation time
(:func:`~robot_grinding_sim.core.contact.kelvin_voigt.form_first_down_crossing`) and the event
location of the integrated laws (:func:`~robot_grinding_sim.core.contact.hc_kernels.brent_event`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: Brent's state (:func:`brent_start`, :func:`brent_next`): the previous, current and contrapoint
#: abscissae and values, the last two steps, the tolerances, the iterations left
BX_PRE, BX_CUR, BX_BLK, BF_PRE, BF_CUR, BF_BLK, BS_PRE, BS_CUR, B_XTOL, B_RTOL, B_LEFT = range(11)
B_LEN = 11


@njit(cache=True)
def brent_start(s, xa, xb, fa, fb, xtol, rtol, maxiter):
    """Start Brent's method (scipy's ``brentq``, step for step) on [xa, xb] with f(xa) = fa,
    f(xb) = fb of opposite signs, its state in s (B_LEN,). Returns (x, done): the root if done,
    else the next abscissa to evaluate: put f(x) in s[BF_CUR] and call :func:`brent_next`.

    The function is evaluated by the caller (numba cannot cache a kernel that passes a function
    as a value), so one implementation serves every root finding of the contact kernels::

        x, done = brent_start(s, xa, xb, f(xa), f(xb), xtol, rtol, maxiter)
        while not done:
            s[BF_CUR] = f(x)
            x, done = brent_next(s)
    """
    s[BX_PRE], s[BX_CUR], s[BF_PRE], s[BF_CUR] = xa, xb, fa, fb
    s[BX_BLK] = s[BF_BLK] = s[BS_PRE] = s[BS_CUR] = 0.0
    s[B_XTOL], s[B_RTOL], s[B_LEFT] = xtol, rtol, maxiter
    if fa == 0.0:
        return xa, True
    if fb == 0.0:
        return xb, True
    return brent_next(s)


@njit(cache=True)
def brent_next(s):
    """One iteration of Brent's method after the evaluation at s[BX_CUR] (in s[BF_CUR]): (x, done)
    as :func:`brent_start`. Interpolation, extrapolation and bisection as scipy's brentq, tolerance
    (xtol + rtol |x|) / 2; after maxiter evaluations the current abscissa."""
    if s[B_LEFT] <= 0.0:
        return s[BX_CUR], True
    s[B_LEFT] -= 1.0
    xpre, xcur, xblk, fpre, fcur, fblk = s[BX_PRE], s[BX_CUR], s[BX_BLK], s[BF_PRE], s[BF_CUR], s[BF_BLK]
    spre, scur = s[BS_PRE], s[BS_CUR]
    if fpre != 0.0 and fcur != 0.0 and (fpre < 0.0) != (fcur < 0.0):
        xblk, fblk = xpre, fpre
        spre = scur = xcur - xpre
    if abs(fblk) < abs(fcur):
        xpre, xcur, xblk = xcur, xblk, xcur
        fpre, fcur, fblk = fcur, fblk, fcur
    delta = (s[B_XTOL] + s[B_RTOL] * abs(xcur)) / 2.0
    sbis = (xblk - xcur) / 2.0
    if fcur == 0.0 or abs(sbis) < delta:
        return xcur, True
    if abs(spre) > delta and abs(fcur) < abs(fpre):
        if xpre == xblk:  # interpolate
            stry = -fcur * (xcur - xpre) / (fcur - fpre)
        else:  # extrapolate
            dpre = (fpre - fcur) / (xpre - xcur)
            dblk = (fblk - fcur) / (xblk - xcur)
            stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
        if 2.0 * abs(stry) < min(abs(spre), 3.0 * abs(sbis) - delta):
            spre, scur = scur, stry
        else:
            spre = scur = sbis
    else:
        spre = scur = sbis
    xpre, fpre = xcur, fcur
    if abs(scur) > delta:
        xcur += scur
    else:
        xcur += delta if sbis > 0.0 else -delta
    s[BX_PRE], s[BX_CUR], s[BX_BLK], s[BF_PRE], s[BF_CUR], s[BF_BLK] = xpre, xcur, xblk, fpre, fcur, fblk
    s[BS_PRE], s[BS_CUR] = spre, scur
    return xcur, False


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
