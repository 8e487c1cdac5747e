"""B-spline surface kernels (numba): S(u, v) and its first derivatives from poles, knots, weights.

Rational surfaces are evaluated through the homogeneous control net ``[w P, w]`` (shape
(nu, nv, 4)); knots are the full (flat) knot vectors. Positions in metres, part frame.
"""

from __future__ import annotations

import logging

import numba
import numpy as np
from numpy.typing import NDArray

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]


@numba.njit(cache=True, nogil=True)
def basis_one(t, p, n, x, N, dN, tmp, left, right):  # pragma: no cover - numba
    """Non-zero basis values N[0..p] and derivatives dN[0..p] at x; returns the knot span.

    The NURBS Book, algorithms A2.1 (span) and A2.2 (basis); the derivative from the degree p-1
    values: N'_{i,p} = p N_{i,p-1} / (t_{i+p} - t_i) - p N_{i+1,p-1} / (t_{i+p+1} - t_{i+1}).
    """
    if x >= t[n]:
        span = n - 1
    elif x <= t[p]:
        span = p
    else:
        lo, hi = p, n
        span = (lo + hi) // 2
        while x < t[span] or x >= t[span + 1]:
            if x < t[span]:
                hi = span
            else:
                lo = span
            span = (lo + hi) // 2
    N[0] = 1.0
    for j in range(1, p + 1):
        if j == p:
            for r in range(p):
                tmp[r] = N[r]
        left[j] = x - t[span + 1 - j]
        right[j] = t[span + j] - x
        saved = 0.0
        for r in range(j):
            den = right[r + 1] + left[j - r]
            temp = N[r] / den if den != 0.0 else 0.0
            N[r] = saved + right[r + 1] * temp
            saved = left[j - r] * temp
        N[j] = saved
    for r in range(p + 1):
        dN[r] = 0.0
    if p > 0:
        for r in range(p + 1):
            i = span - p + r
            if r >= 1:
                den = t[i + p] - t[i]
                if den != 0.0:
                    dN[r] += p * tmp[r - 1] / den
            if r <= p - 1:
                den = t[i + p + 1] - t[i + 1]
                if den != 0.0:
                    dN[r] -= p * tmp[r] / den
    return span


@numba.njit(cache=True, nogil=True)
def bspline_point(tu, tv, pu, pv, hom, u, v, work, out):  # pragma: no cover - numba
    """S, S_u, S_v at one (u, v) into out[0], out[1], out[2]; ``work`` (12, max degree + 1) scratch."""
    nu, nv = hom.shape[0], hom.shape[1]
    Nu, dNu, tmpu = work[0, : pu + 1], work[1, : pu + 1], work[2, : pu + 1]
    lu, ru = work[3, : pu + 1], work[4, : pu + 1]
    Nv, dNv, tmpv = work[5, : pv + 1], work[6, : pv + 1], work[7, : pv + 1]
    lv, rv = work[8, : pv + 1], work[9, : pv + 1]
    A, D = work[10], work[11]
    su = basis_one(tu, pu, nu, u, Nu, dNu, tmpu, lu, ru)
    sv = basis_one(tv, pv, nv, v, Nv, dNv, tmpv, lv, rv)
    for c in range(4):
        A[c] = 0.0
        D[c] = 0.0
        D[4 + c] = 0.0
    for i in range(pu + 1):
        for j in range(pv + 1):
            a, au, av = Nu[i] * Nv[j], dNu[i] * Nv[j], Nu[i] * dNv[j]
            for c in range(4):
                h = hom[su - pu + i, sv - pv + j, c]
                A[c] += a * h
                D[c] += au * h
                D[4 + c] += av * h
    w = A[3]
    for c in range(3):
        s = A[c] / w
        out[0, c] = s
        out[1, c] = (D[c] - D[3] * s) / w
        out[2, c] = (D[4 + c] - D[7] * s) / w


@numba.njit(cache=True, nogil=True)
def bspline_kernel(tu, tv, pu, pv, hom, u, v, S, Su, Sv):  # pragma: no cover - numba
    work = np.zeros((12, max(pu, pv, 7) + 1))
    out = np.zeros((3, 3))
    for k in range(u.shape[0]):
        bspline_point(tu, tv, pu, pv, hom, u[k], v[k], work, out)
        for c in range(3):
            S[k, c] = out[0, c]
            Su[k, c] = out[1, c]
            Sv[k, c] = out[2, c]


@numba.njit(cache=True, nogil=True)
def bspline_lines_kernel(tu, tv, pu, pv, hom, origins, e1, e2, uv, lo, hi, iters, tol, chain):  # pragma: no cover
    """Newton iteration per line: find (u, v) with (S(u, v) - o) . e1 = (S(u, v) - o) . e2 = 0.

    Where ``chain[k]`` is set (line k is a neighbour of line k - 1) and line k - 1 converged, its
    solution is the start point (closer than the grid guess in ``uv``).
    """
    work = np.zeros((12, max(pu, pv, 7) + 1))
    out = np.zeros((3, 3))
    span_u, span_v = hi[0] - lo[0], hi[1] - lo[1]
    prev_ok = False
    for k in range(origins.shape[0]):
        if chain[k] and prev_ok and k > 0:
            uv[k, 0], uv[k, 1] = uv[k - 1, 0], uv[k - 1, 1]
        prev_ok = False
        for _ in range(iters):
            bspline_point(tu, tv, pu, pv, hom, uv[k, 0], uv[k, 1], work, out)
            r1 = r2 = a11 = a12 = a21 = a22 = 0.0
            for c in range(3):
                rel = out[0, c] - origins[k, c]
                r1 += rel * e1[c]
                r2 += rel * e2[c]
                a11 += out[1, c] * e1[c]
                a12 += out[2, c] * e1[c]
                a21 += out[1, c] * e2[c]
                a22 += out[2, c] * e2[c]
            if abs(r1) < tol and abs(r2) < tol:
                prev_ok = lo[0] <= uv[k, 0] <= hi[0] and lo[1] <= uv[k, 1] <= hi[1]
                break
            det = a11 * a22 - a12 * a21
            if det == 0.0 or not np.isfinite(det):
                break
            du = (-r1 * a22 + r2 * a12) / det
            dv = (-r2 * a11 + r1 * a21) / det
            du = min(max(du, -0.25 * span_u), 0.25 * span_u)
            dv = min(max(dv, -0.25 * span_v), 0.25 * span_v)
            uv[k, 0] = min(max(uv[k, 0] + du, lo[0] - 0.01 * span_u), hi[0] + 0.01 * span_u)
            uv[k, 1] = min(max(uv[k, 1] + dv, lo[1] - 0.01 * span_v), hi[1] + 0.01 * span_v)


class BSplineEval:
    """Evaluation of a (rational) B-spline surface S(u, v) and its first derivatives (numba kernel)."""

    def __init__(self, poles: FloatArray, weights: FloatArray | None, tu: FloatArray, tv: FloatArray,
                 pu: int, pv: int) -> None:
        nu, nv = poles.shape[:2]
        w = np.ones((nu, nv)) if weights is None else weights
        # homogeneous control net (nu, nv, 4): [w P, w]
        self.hom = np.ascontiguousarray(np.concatenate([poles * w[..., None], w[..., None]], axis=-1))
        self.tu, self.tv = np.ascontiguousarray(tu, dtype=float), np.ascontiguousarray(tv, dtype=float)
        self.pu, self.pv = int(pu), int(pv)

    def __call__(self, u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        K = len(u)
        S, Su, Sv = np.empty((K, 3)), np.empty((K, 3)), np.empty((K, 3))
        bspline_kernel(self.tu, self.tv, self.pu, self.pv, self.hom, np.ascontiguousarray(u, dtype=float),
                        np.ascontiguousarray(v, dtype=float), S, Su, Sv)
        return S, Su, Sv

