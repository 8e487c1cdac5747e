"""numba kernels of the rigid-body dynamics (FK, Jacobians, RNEA, CRBA, Cholesky, forward dynamics)
on flat arrays; :class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` is their only caller.

The single-state and batched entry points (``*_single``, ``*_kernel``) run the same per-state
functions (``rnea_sample``, ``crba_sample``, ``fd_sample``, ``link_pose``), so the two paths
cannot drift apart. Kernels are compiled on first use and cached on disk next to this file
(``cache=True``). Frames and conventions: :mod:`robot_grinding_sim.core.robot.dynamics`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ============================================================================================
# numba kernels.
#
# The model travels as three arrays (few arguments keep numba's per-call dispatch cheap):
#   jt (n,) int64  joint type, 0 revolute, 1 prismatic
#   jd (n, 15)     axis [0:3] | placement rotation R0 row-major [3:12] | placement translation p0 [12:15]
#   bd (n, 49)     mass [0] | com [1:4] | inertia about the com, row-major [4:13] | spatial inertia at
#                  the body origin, [angular; linear], row-major [13:49]
# and per-body scratch state lives in one workspace ws (n, WS_COLS) owned by the model (kernels hold
# the GIL, so one model is never in two kernels at once). 3-vectors travel as tuples (no allocation).

# workspace columns: placement R (9) and p (3), root rotation (9), omega, omega dot, origin acceleration,
# force, moment (3 each), CRBA motion transform X (36), composite inertia (36), scratch (36, 6, 6)
_R, _P, _RW, _W, _DW, _ACC, _F, _N = 0, 9, 12, 21, 24, 27, 30, 33
_X, _IC, _T, _FV, _GV = 36, 72, 108, 144, 150
WS_COLS = 156


@njit(cache=True)
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True)
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True)
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True)
def _scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@njit(cache=True)
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True)
def _vec(A, i, o):
    """The 3-vector A[i, o:o+3] as a tuple."""
    return (A[i, o], A[i, o + 1], A[i, o + 2])


@njit(cache=True)
def _mv(A, i, o, v):
    """R @ v with R the row-major 3x3 stored in A[i, o:o+9]."""
    return (
        A[i, o] * v[0] + A[i, o + 1] * v[1] + A[i, o + 2] * v[2],
        A[i, o + 3] * v[0] + A[i, o + 4] * v[1] + A[i, o + 5] * v[2],
        A[i, o + 6] * v[0] + A[i, o + 7] * v[1] + A[i, o + 8] * v[2],
    )


@njit(cache=True)
def _mtv(A, i, o, v):
    """R.T @ v with R the row-major 3x3 stored in A[i, o:o+9]."""
    return (
        A[i, o] * v[0] + A[i, o + 3] * v[1] + A[i, o + 6] * v[2],
        A[i, o + 1] * v[0] + A[i, o + 4] * v[1] + A[i, o + 7] * v[2],
        A[i, o + 2] * v[0] + A[i, o + 5] * v[1] + A[i, o + 8] * v[2],
    )


@njit(cache=True)
def _set(A, i, o, v):
    A[i, o], A[i, o + 1], A[i, o + 2] = v[0], v[1], v[2]


@njit(cache=True)
def finite(a):
    """True if the array holds no NaN or inf."""
    for x in a.flat:
        if not np.isfinite(x):
            return False
    return True


@njit(cache=True)
def _joint_placement(jt, jd, i, qi, ws):
    """Pose of body i in body i-1 (the root for i=0) at joint value qi: ws[i, _R:_R+9], ws[i, _P:_P+3]."""
    ax, ay, az = jd[i, 0], jd[i, 1], jd[i, 2]
    if jt[i] == 0:  # R0 @ Rot(axis, qi) (Rodrigues), p0
        c, s = np.cos(qi), np.sin(qi)
        t = 1.0 - c
        J00, J01, J02 = t * ax * ax + c, t * ax * ay - s * az, t * ax * az + s * ay
        J10, J11, J12 = t * ax * ay + s * az, t * ay * ay + c, t * ay * az - s * ax
        J20, J21, J22 = t * ax * az - s * ay, t * ay * az + s * ax, t * az * az + c
        for r in range(3):
            a0, a1, a2 = jd[i, 3 + 3 * r], jd[i, 4 + 3 * r], jd[i, 5 + 3 * r]
            ws[i, _R + 3 * r] = a0 * J00 + a1 * J10 + a2 * J20
            ws[i, _R + 3 * r + 1] = a0 * J01 + a1 * J11 + a2 * J21
            ws[i, _R + 3 * r + 2] = a0 * J02 + a1 * J12 + a2 * J22
            ws[i, _P + r] = jd[i, 12 + r]
    else:  # R0, p0 + R0 @ axis * qi
        for r in range(3):
            for k in range(3):
                ws[i, _R + 3 * r + k] = jd[i, 3 + 3 * r + k]
            ws[i, _P + r] = jd[i, 12 + r] + (jd[i, 3 + 3 * r] * ax + jd[i, 4 + 3 * r] * ay
                                             + jd[i, 5 + 3 * r] * az) * qi  # fmt: skip


@njit(cache=True)
def _world_rotations(n, ws):
    """Root-frame rotation of every body into ws[:, _RW:_RW+9] (after the placements are set)."""
    for i in range(n):
        for r in range(3):
            for c in range(3):
                if i == 0:
                    ws[0, _RW + 3 * r + c] = ws[0, _R + 3 * r + c]
                else:
                    ws[i, _RW + 3 * r + c] = (ws[i - 1, _RW + 3 * r] * ws[i, _R + c]
                                              + ws[i - 1, _RW + 3 * r + 1] * ws[i, _R + 3 + c]
                                              + ws[i - 1, _RW + 3 * r + 2] * ws[i, _R + 6 + c])  # fmt: skip


@njit(cache=True)
def rnea_sample(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, tau):
    """Recursive Newton-Euler for one state (body-frame recursion); writes the torques into tau (n,)."""
    n = q.shape[0]
    zero = (0.0, 0.0, 0.0)
    for i in range(n):
        _joint_placement(jt, jd, i, q[i], ws)
        pi = _vec(ws, i, _P)
        if i == 0:
            wp, dwp, accp = zero, zero, (-g[0], -g[1], -g[2])  # gravity as a base acceleration
        else:
            wp, dwp, accp = _vec(ws, i - 1, _W), _vec(ws, i - 1, _DW), _vec(ws, i - 1, _ACC)
        a = _vec(jd, i, 0)
        aqd = _scale(a, qd[i])
        wr = _mtv(ws, i, _R, wp)
        dw = _mtv(ws, i, _R, dwp)
        acc = _mtv(ws, i, _R, _add(_add(accp, _cross(dwp, pi)), _cross(wp, _cross(wp, pi))))
        if jt[i] == 0:
            wi = _add(wr, aqd)
            dw = _add(_add(dw, _cross(wr, aqd)), _scale(a, qdd[i]))
        else:
            wi = wr
            acc = _add(_add(acc, _scale(_cross(wi, aqd), 2.0)), _scale(a, qdd[i]))
        _set(ws, i, _W, wi)
        _set(ws, i, _DW, dw)
        _set(ws, i, _ACC, acc)
        c = _vec(bd, i, 1)
        ac = _add(_add(acc, _cross(dw, c)), _cross(wi, _cross(wi, c)))
        F = _scale(ac, bd[i, 0])
        N = _add(_mv(bd, i, 4, dw), _cross(wi, _mv(bd, i, 4, wi)))
        _set(ws, i, _F, F)
        _set(ws, i, _N, _add(N, _cross(c, F)))
    if ext_body.shape[0] > 0:
        _world_rotations(n, ws)
        for k in range(ext_body.shape[0]):
            b = ext_body[k]
            if b < 0:
                continue  # a link fixed to the root: no joint feels it
            Fb = _mtv(ws, b, _RW, _vec(ext, k, 0))
            Tb = _add(_mtv(ws, b, _RW, _vec(ext, k, 3)), _cross(_vec(ext_off, k, 0), Fb))
            for r in range(3):
                ws[b, _F + r] -= Fb[r]
                ws[b, _N + r] -= Tb[r]
    for i in range(n - 1, -1, -1):
        if i < n - 1:
            fc = _mv(ws, i + 1, _R, _vec(ws, i + 1, _F))
            nc = _add(_mv(ws, i + 1, _R, _vec(ws, i + 1, _N)), _cross(_vec(ws, i + 1, _P), fc))
            for r in range(3):
                ws[i, _F + r] += fc[r]
                ws[i, _N + r] += nc[r]
        tau[i] = _dot(_vec(jd, i, 0), _vec(ws, i, _N if jt[i] == 0 else _F))


@njit(cache=True)
def _first_nonfinite(a, b, c, g, ext):
    """The index of the first input holding NaN or inf (0 a, 1 b, 2 c, 3 g, 4 ext), or -1: the
    return codes of the dynamics kernels' input checks."""
    for k, arr in enumerate((a, b, c)):
        if not finite(arr):
            return k
    if not finite(g):
        return 3
    if not finite(ext):
        return 4
    return -1


@njit(cache=True)
def rnea_kernel(Q, QD, QDD, g, jt, jd, bd, ext_body, ext_off, EXT, ws, out):
    """Batched RNEA: Q, QD, QDD (B, n); EXT (B, k, 6); writes out (B, n). Returns the index of
    the first non-finite input (0 q, 1 qd, 2 qdd, 3 gravity, 4 f_ext) or -1."""
    code = _first_nonfinite(Q, QD, QDD, g, EXT)
    if code >= 0:
        return code
    for b in range(Q.shape[0]):
        rnea_sample(Q[b], QD[b], QDD[b], g, jt, jd, bd, ext_body, ext_off, EXT[b], ws, out[b])
    return -1


@njit(cache=True)
def rnea_single(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, out):
    """One state: q, qd, qdd (n,), ext (k, 6), out (n,). Same return codes as rnea_kernel."""
    code = _first_nonfinite(q, qd, qdd, g, ext)
    if code >= 0:
        return code
    rnea_sample(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, out)
    return -1


@njit(cache=True)
def crba_sample(q, jt, jd, bd, ws, M):
    """Composite-rigid-body algorithm for one configuration; writes the mass matrix M (n, n).

    X_i = [[E, 0], [-E S(p), E]] (E = R^T) maps motion vectors from body i-1 to body i; composite
    inertias accumulate as Ic_{i-1} += X_i^T Ic_i X_i."""
    n = q.shape[0]
    for i in range(n):
        _joint_placement(jt, jd, i, q[i], ws)
        px, py, pz = ws[i, _P], ws[i, _P + 1], ws[i, _P + 2]
        for r in range(3):
            e0, e1, e2 = ws[i, _R + r], ws[i, _R + 3 + r], ws[i, _R + 6 + r]  # row r of E
            for c in range(3):
                e = ws[i, _R + 3 * c + r]
                ws[i, _X + 6 * r + c] = e
                ws[i, _X + 6 * (r + 3) + c + 3] = e
                ws[i, _X + 6 * r + c + 3] = 0.0
            # row r of -E S(p) is (p x e)^T
            ws[i, _X + 6 * (r + 3)] = py * e2 - pz * e1
            ws[i, _X + 6 * (r + 3) + 1] = pz * e0 - px * e2
            ws[i, _X + 6 * (r + 3) + 2] = px * e1 - py * e0
        for k in range(36):
            ws[i, _IC + k] = bd[i, 13 + k]
    for i in range(n - 1, 0, -1):
        for r in range(6):  # T = Ic_i X_i
            for c in range(6):
                s = 0.0
                for k in range(6):
                    s += ws[i, _IC + 6 * r + k] * ws[i, _X + 6 * k + c]
                ws[i, _T + 6 * r + c] = s
        for r in range(6):  # Ic_{i-1} += X_i^T T
            for c in range(6):
                s = 0.0
                for k in range(6):
                    s += ws[i, _X + 6 * k + r] * ws[i, _T + 6 * k + c]
                ws[i - 1, _IC + 6 * r + c] += s
    for i in range(n):
        off = 0 if jt[i] == 0 else 3  # motion subspace S_i = [axis; 0] or [0; axis]
        for r in range(6):
            ws[i, _FV + r] = (ws[i, _IC + 6 * r + off] * jd[i, 0] + ws[i, _IC + 6 * r + off + 1] * jd[i, 1]
                              + ws[i, _IC + 6 * r + off + 2] * jd[i, 2])  # fmt: skip
        M[i, i] = (ws[i, _FV + off] * jd[i, 0] + ws[i, _FV + off + 1] * jd[i, 1]
                   + ws[i, _FV + off + 2] * jd[i, 2])  # fmt: skip
        j = i
        while j > 0:
            for r in range(6):  # F <- X_j^T F: the force in body j-1's coordinates
                s = 0.0
                for k in range(6):
                    s += ws[j, _X + 6 * k + r] * ws[i, _FV + k]
                ws[i, _GV + r] = s
            for r in range(6):
                ws[i, _FV + r] = ws[i, _GV + r]
            j -= 1
            oj = 0 if jt[j] == 0 else 3
            v = ws[i, _FV + oj] * jd[j, 0] + ws[i, _FV + oj + 1] * jd[j, 1] + ws[i, _FV + oj + 2] * jd[j, 2]
            M[i, j] = v
            M[j, i] = v


@njit(cache=True)
def crba_kernel(Q, jt, jd, bd, ws, out):
    """Batched mass matrix: Q (B, n) -> out (B, n, n). Returns 0 if q holds NaN/inf, else -1."""
    if not finite(Q):
        return 0
    for b in range(Q.shape[0]):
        crba_sample(Q[b], jt, jd, bd, ws, out[b])
    return -1


@njit(cache=True)
def crba_single(q, jt, jd, bd, ws, out):
    """One configuration q (n,) -> out (n, n). Returns 0 if q holds NaN/inf, else -1."""
    if not finite(q):
        return 0
    crba_sample(q, jt, jd, bd, ws, out)
    return -1


@njit(cache=True)
def cholesky_factor(M, L):
    """The Cholesky factor L (n, n) (lower) of SPD M (n, n); False if M is not positive definite."""
    n = M.shape[0]
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return False
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            s = M[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    return True


@njit(cache=True)
def cholesky_subst(L, rhs, x):
    """Solve L L^T x = rhs by forward and back substitution (L from :func:`cholesky_factor`)."""
    n = L.shape[0]
    for i in range(n):  # L y = rhs
        s = rhs[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):  # L^T x = y
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]


@njit(cache=True)
def cholesky_solve(M, rhs, L, x):
    """Solve M x = rhs for SPD M (n, n) by Cholesky; False if M is not positive definite."""
    if not cholesky_factor(M, L):
        return False
    cholesky_subst(L, rhs, x)
    return True


@njit(cache=True)
def fd_factored(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, L, h, zero, out):
    """qdd = M^-1 (tau - rnea(q, qd, 0)) with M's Cholesky factor L at q already computed."""
    rnea_sample(q, qd, zero, g, jt, jd, bd, ext_body, ext_off, ext, ws, h)
    for i in range(q.shape[0]):
        h[i] = tau[i] - h[i]
    cholesky_subst(L, h, out)


@njit(cache=True)
def fd_sample(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, M, L, h, zero, out):
    """qdd = M^-1 (tau - rnea(q, qd, 0)) for one state: CRBA, RNEA, Cholesky. False if M is not PD."""
    crba_sample(q, jt, jd, bd, ws, M)
    if not cholesky_factor(M, L):
        return False
    fd_factored(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, L, h, zero, out)
    return True


@njit(cache=True)
def fd_kernel(Q, QD, TAU, g, jt, jd, bd, ext_body, ext_off, EXT, ws, out):
    """Batched forward dynamics. Returns -1 on success, 0..4 for a non-finite input (q, qd, tau,
    gravity, f_ext), 10 + b when the mass matrix of sample b is not positive definite."""
    code = _first_nonfinite(Q, QD, TAU, g, EXT)
    if code >= 0:
        return code
    n = Q.shape[1]
    M, L, h, zero = np.empty((n, n)), np.zeros((n, n)), np.empty(n), np.zeros(n)
    for b in range(Q.shape[0]):
        if not fd_sample(Q[b], QD[b], TAU[b], g, jt, jd, bd, ext_body, ext_off, EXT[b], ws, M, L, h, zero,
                          out[b]):  # fmt: skip
            return 10 + b
    return -1


@njit(cache=True)
def fd_single(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, out):
    """One state (n,), ext (k, 6), out (n,). Same return codes as fd_kernel."""
    code = _first_nonfinite(q, qd, tau, g, ext)
    if code >= 0:
        return code
    n = q.shape[0]
    M, L, h, zero = np.empty((n, n)), np.zeros((n, n)), np.empty(n), np.zeros(n)
    if not fd_sample(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, M, L, h, zero, out):
        return 10
    return -1


@njit(cache=True)
def _fk_sample(q, jt, jd, ws, Rw, pw):
    """Root-frame poses of every body for one q: Rw (n, 3, 3), pw (n, 3)."""
    n = q.shape[0]
    for i in range(n):
        _joint_placement(jt, jd, i, q[i], ws)
    _world_rotations(n, ws)
    for i in range(n):
        for r in range(3):
            for c in range(3):
                Rw[i, r, c] = ws[i, _RW + 3 * r + c]
        if i == 0:
            for r in range(3):
                pw[0, r] = ws[0, _P + r]
        else:
            d = _mv(ws, i - 1, _RW, _vec(ws, i, _P))
            for r in range(3):
                pw[i, r] = pw[i - 1, r] + d[r]


@njit(cache=True)
def fk_kernel(Q, jt, jd, ws, Rw, pw):
    """Batched body poses: Q (B, n) -> Rw (B, n, 3, 3), pw (B, n, 3). 0 if q holds NaN/inf, else -1."""
    if not finite(Q):
        return 0
    for b in range(Q.shape[0]):
        _fk_sample(Q[b], jt, jd, ws, Rw[b], pw[b])
    return -1


@njit(cache=True)
def link_pose(q, body, X, jt, jd, ws, T):
    """Root-frame pose T (4, 4) of a link fixed at pose X (4, 4) in body ``body`` (-1: the root)."""
    if body < 0:
        for r in range(4):
            for c in range(4):
                T[r, c] = X[r, c]
        return
    px, py, pz = 0.0, 0.0, 0.0
    for i in range(body + 1):
        _joint_placement(jt, jd, i, q[i], ws)
    _world_rotations(body + 1, ws)
    for i in range(body + 1):  # origin of body i = origin of body i-1 + R_w(i-1) p_i
        d = _vec(ws, i, _P) if i == 0 else _mv(ws, i - 1, _RW, _vec(ws, i, _P))
        px, py, pz = px + d[0], py + d[1], pz + d[2]
    for r in range(3):
        for c in range(4):
            T[r, c] = ws[body, _RW + 3 * r] * X[0, c] + ws[body, _RW + 3 * r + 1] * X[1, c] \
                + ws[body, _RW + 3 * r + 2] * X[2, c]
    T[0, 3] += px
    T[1, 3] += py
    T[2, 3] += pz
    T[3, 0], T[3, 1], T[3, 2], T[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit(cache=True)
def link_pose_kernel(Q, body, X, jt, jd, ws, out):
    """Batched link pose: Q (B, n) -> out (B, 4, 4). 0 if q holds NaN/inf, else -1."""
    if not finite(Q):
        return 0
    for b in range(Q.shape[0]):
        link_pose(Q[b], body, X, jt, jd, ws, out[b])
    return -1


@njit(cache=True)
def link_pose_single(q, body, X, jt, jd, ws, out):
    """One configuration q (n,) -> out (4, 4). 0 if q holds NaN/inf, else -1."""
    if not finite(q):
        return 0
    link_pose(q, body, X, jt, jd, ws, out)
    return -1


@njit(cache=True)
def jacobian_kernel(q, body, X, point, use_point, jt, jd, ws, J):
    """Jacobian (6, n) [linear; angular] of a point rigidly moving with ``body``: the root-frame
    ``point`` if ``use_point``, else the origin of the link at pose X (4, 4) in the body."""
    return jacobian_pose(q, body, X, point, use_point, jt, jd, ws, np.empty((4, 4)), J)


@njit(cache=True)
def jacobian_pose(q, body, X, point, use_point, jt, jd, ws, T, J):
    """:func:`jacobian_kernel` that also leaves the link's root-frame pose (:func:`link_pose`) in T
    (4, 4) (for ``body`` >= 0 and a finite q)."""
    if not finite(q) or not finite(point):
        return 0
    n = q.shape[0]
    for j in range(n):
        for r in range(6):
            J[r, j] = 0.0
    if body < 0:
        return -1
    link_pose(q, body, X, jt, jd, ws, T)  # leaves placements and root rotations of 0..body in ws
    pt = (point[0], point[1], point[2]) if use_point else (T[0, 3], T[1, 3], T[2, 3])
    ox, oy, oz = 0.0, 0.0, 0.0
    for j in range(body + 1):
        d = _vec(ws, j, _P) if j == 0 else _mv(ws, j - 1, _RW, _vec(ws, j, _P))
        ox, oy, oz = ox + d[0], oy + d[1], oz + d[2]  # origin of body j (on joint j's axis)
        z = _mv(ws, j, _RW, _vec(jd, j, 0))  # joint axis in the root frame
        if jt[j] == 0:
            lin = _cross(z, _sub(pt, (ox, oy, oz)))
            for r in range(3):
                J[r, j] = lin[r]
                J[r + 3, j] = z[r]
        else:
            for r in range(3):
                J[r, j] = z[r]
    return -1


@njit(cache=True)
def tcp_kinematics(q, jt, jd, ws, body, X, hbody, H, T, J):
    """Pose T (4, 4) and Jacobian J (6, n) [linear; angular] of the tool centre at q, relative to
    the part.

    The part stands in the cell (``hbody`` < -1): the tool centre's own pose and Jacobian in the
    root frame. The robot holds the part (``hbody`` >= -1: the body the part is fixed to; H (2, 4, 4):
    H[0] the part frame in that body, X_hP; H[1] the part's nominal pose X_BP0, where the plan and
    the contact query put it): the tool centre as seen from the part, carried to the nominal part,
    T = X_BP0 inv(X_BP(q)) X_BT(q), and its Jacobian J = diag(A, A) (J_tool - J_holder), both
    evaluated at the tool centre, A = R_BP0 R_BP(q)^T. The part's contact query, the gap's rate
    n^T J qd, the effective mass 1 / (n^T J M^-1 J^T n) and the torques J^T w of a wrench w (in
    those axes, about the tool centre, on the tool) are then those of the tool against the moving
    part: nothing downstream knows which of the two the arm carries."""
    if jacobian_pose(q, body, X, np.zeros(3), bool(False), jt, jd, ws, T, J) != -1 or body < 0:
        link_pose(q, body, X, jt, jd, ws, T)
    if hbody < -1:
        return
    n = q.shape[0]
    P = np.empty((4, 4))
    link_pose(q, hbody, H[0], jt, jd, ws, P)  # the part's pose X_BP(q)
    Jh = np.empty((6, n))
    c = np.array([T[0, 3], T[1, 3], T[2, 3]])
    jacobian_kernel(q, hbody, H[0], c, True, jt, jd, ws, Jh)  # the part's point at the tool centre
    R0 = np.ascontiguousarray(H[1][:3, :3])
    RPt = np.ascontiguousarray(P[:3, :3].T)
    A = R0 @ RPt
    # inv(X_BP) X_BT: R_P^T (R_T, p_T - p_P)
    Pinv = np.eye(4)
    Pinv[:3, :3] = RPt
    Pinv[:3, 3] = -(RPt @ np.ascontiguousarray(P[:3, 3]))
    Tv = np.ascontiguousarray(H[1]) @ (Pinv @ T)
    Jd = J - Jh
    J[:3] = A @ np.ascontiguousarray(Jd[:3])
    J[3:] = A @ np.ascontiguousarray(Jd[3:])
    T[:] = Tv


@njit(cache=True)
def effective_mass_kernel(q, body, X, point, nvec, jt, jd, bd, ws):
    """1 / (n^T J M^-1 J^T n) for the translational Jacobian J of ``point`` on ``body``. Returns
    -1.0 for a non-finite q or point, -2.0 if M is not positive definite, inf if J^T n = 0."""
    n = q.shape[0]
    J = np.empty((6, n))
    if jacobian_kernel(q, body, X, point, bool(True), jt, jd, ws, J) >= 0:
        return -1.0
    x = np.empty(n)
    big = 0.0
    for j in range(n):
        x[j] = J[0, j] * nvec[0] + J[1, j] * nvec[1] + J[2, j] * nvec[2]
        big = max(big, abs(x[j]))
    if big <= 1e-14:
        return np.inf
    M, L, y = np.empty((n, n)), np.empty((n, n)), np.empty(n)
    crba_sample(q, jt, jd, bd, ws, M)
    if not cholesky_solve(M, x, L, y):
        return -2.0
    s = 0.0
    for j in range(n):
        s += x[j] * y[j]
    return 1.0 / s


# ============================================================================================
