"""Rigid-body dynamics of a fixed-base serial chain: FK, Jacobians, RNEA, CRBA, forward dynamics.

One implementation: every public method validates its input cheaply in Python (shapes; NaN/inf are
caught inside the kernels) and calls a numba kernel working on flat arrays. The single-state and
batched entry points run the same per-state functions (``_rnea_sample``, ``_crba_sample``,
``_fd_sample``, ``_link_pose``), so the two paths cannot drift apart. Kernels are compiled on first
use and cached on disk next to this file (``cache=True``; a fresh checkout pays ~15-30 s once).
A model owns one scratch workspace: calls on one model are serialised by the GIL (the kernels
do not release it), so sharing a model between threads is safe.

Frames and conventions
- All poses, points, directions and wrenches are in the root link's frame (the URDF's root link),
  SI units. ``q`` in rad (revolute/continuous) or m (prismatic).
- Jacobian rows are [linear (3); angular (3)]: ``[v_point; omega] = J(q) @ qd``.
- External wrenches ``f_ext`` are what the environment applies ON a link: ``[force (3); torque (3)]``
  in the root frame, the torque taken about the link's origin. Joint torques then satisfy
  ``M qdd + C qd + g = tau + J(q, link)^T w`` with ``J`` the Jacobian at the link origin, i.e.
  ``rnea(q, qd, qdd, f_ext={link: w}) == rnea(q, qd, qdd) - J^T w``. Accepted forms:
    * a dict ``{link_name: wrench}`` with each wrench (6,) or, for a batch, (B, 6);
    * an array (L, 6) or (B, L, 6) indexed like ``model.link_names`` (L = len(link_names)).
  A wrench on a link rigidly attached to the root moves no joint and is ignored.
- Gravity is a root-frame acceleration vector (m/s^2), default (0, 0, -9.81).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from robot_grinding_sim.core.errors import InputError, ModelError
from robot_grinding_sim.core.robot.model import CollisionGeometry, KinematicChain, load_chain, parse_chain
from robot_grinding_sim.core.robot.spatial import spatial_inertia

__all__ = ["RobotModel", "CollisionGeometry"]

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
_F64 = np.dtype(np.float64)
_STRIDE1 = (8,)

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
def _finite(a):
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
def _rnea_sample(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, tau):
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
def _rnea_kernel(Q, QD, QDD, g, jt, jd, bd, ext_body, ext_off, EXT, ws, out):
    """Batched RNEA: Q, QD, QDD (B, n); EXT (B, k, 6); writes out (B, n). Returns the index of
    the first non-finite input (0 q, 1 qd, 2 qdd, 3 gravity, 4 f_ext) or -1."""
    for k, arr in enumerate((Q, QD, QDD)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(EXT):
        return 4
    for b in range(Q.shape[0]):
        _rnea_sample(Q[b], QD[b], QDD[b], g, jt, jd, bd, ext_body, ext_off, EXT[b], ws, out[b])
    return -1


@njit(cache=True)
def _rnea_single(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, out):
    """One state: q, qd, qdd (n,), ext (k, 6), out (n,). Same return codes as _rnea_kernel."""
    for k, arr in enumerate((q, qd, qdd)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(ext):
        return 4
    _rnea_sample(q, qd, qdd, g, jt, jd, bd, ext_body, ext_off, ext, ws, out)
    return -1


@njit(cache=True)
def _crba_sample(q, jt, jd, bd, ws, M):
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
def _crba_kernel(Q, jt, jd, bd, ws, out):
    """Batched mass matrix: Q (B, n) -> out (B, n, n). Returns 0 if q holds NaN/inf, else -1."""
    if not _finite(Q):
        return 0
    for b in range(Q.shape[0]):
        _crba_sample(Q[b], jt, jd, bd, ws, out[b])
    return -1


@njit(cache=True)
def _crba_single(q, jt, jd, bd, ws, out):
    """One configuration q (n,) -> out (n, n). Returns 0 if q holds NaN/inf, else -1."""
    if not _finite(q):
        return 0
    _crba_sample(q, jt, jd, bd, ws, out)
    return -1


@njit(cache=True)
def _cholesky_solve(M, rhs, L, x):
    """Solve M x = rhs for SPD M (n, n) by Cholesky; False if M is not positive definite."""
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
    return True


@njit(cache=True)
def _fd_sample(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, M, L, h, zero, out):
    """qdd = M^-1 (tau - rnea(q, qd, 0)) for one state: CRBA, RNEA, Cholesky. False if M is not PD."""
    _crba_sample(q, jt, jd, bd, ws, M)
    _rnea_sample(q, qd, zero, g, jt, jd, bd, ext_body, ext_off, ext, ws, h)
    for i in range(q.shape[0]):
        h[i] = tau[i] - h[i]
    return _cholesky_solve(M, h, L, out)


@njit(cache=True)
def _fd_kernel(Q, QD, TAU, g, jt, jd, bd, ext_body, ext_off, EXT, ws, out):
    """Batched forward dynamics. Returns -1 on success, 0..4 for a non-finite input (q, qd, tau,
    gravity, f_ext), 10 + b when the mass matrix of sample b is not positive definite."""
    for k, arr in enumerate((Q, QD, TAU)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(EXT):
        return 4
    n = Q.shape[1]
    M, L, h, zero = np.empty((n, n)), np.zeros((n, n)), np.empty(n), np.zeros(n)
    for b in range(Q.shape[0]):
        if not _fd_sample(Q[b], QD[b], TAU[b], g, jt, jd, bd, ext_body, ext_off, EXT[b], ws, M, L, h, zero,
                          out[b]):  # fmt: skip
            return 10 + b
    return -1


@njit(cache=True)
def _fd_single(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, out):
    """One state (n,), ext (k, 6), out (n,). Same return codes as _fd_kernel."""
    for k, arr in enumerate((q, qd, tau)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(ext):
        return 4
    n = q.shape[0]
    M, L, h, zero = np.empty((n, n)), np.zeros((n, n)), np.empty(n), np.zeros(n)
    if not _fd_sample(q, qd, tau, g, jt, jd, bd, ext_body, ext_off, ext, ws, M, L, h, zero, out):
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
def _fk_kernel(Q, jt, jd, ws, Rw, pw):
    """Batched body poses: Q (B, n) -> Rw (B, n, 3, 3), pw (B, n, 3). 0 if q holds NaN/inf, else -1."""
    if not _finite(Q):
        return 0
    for b in range(Q.shape[0]):
        _fk_sample(Q[b], jt, jd, ws, Rw[b], pw[b])
    return -1


@njit(cache=True)
def _link_pose(q, body, X, jt, jd, ws, T):
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
def _link_pose_kernel(Q, body, X, jt, jd, ws, out):
    """Batched link pose: Q (B, n) -> out (B, 4, 4). 0 if q holds NaN/inf, else -1."""
    if not _finite(Q):
        return 0
    for b in range(Q.shape[0]):
        _link_pose(Q[b], body, X, jt, jd, ws, out[b])
    return -1


@njit(cache=True)
def _link_pose_single(q, body, X, jt, jd, ws, out):
    """One configuration q (n,) -> out (4, 4). 0 if q holds NaN/inf, else -1."""
    if not _finite(q):
        return 0
    _link_pose(q, body, X, jt, jd, ws, out)
    return -1


@njit(cache=True)
def _jacobian_kernel(q, body, X, point, use_point, jt, jd, ws, J):
    """Jacobian (6, n) [linear; angular] of a point rigidly moving with ``body``: the root-frame
    ``point`` if ``use_point``, else the origin of the link at pose X (4, 4) in the body."""
    if not _finite(q) or not _finite(point):
        return 0
    n = q.shape[0]
    for j in range(n):
        for r in range(6):
            J[r, j] = 0.0
    if body < 0:
        return -1
    T = np.empty((4, 4))
    _link_pose(q, body, X, jt, jd, ws, T)  # leaves placements and root rotations of 0..body in ws
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
def _effective_mass_kernel(q, body, X, point, nvec, jt, jd, bd, ws):
    """1 / (n^T J M^-1 J^T n) for the translational Jacobian J of ``point`` on ``body``. Returns
    -1.0 for a non-finite q or point, -2.0 if M is not positive definite, inf if J^T n = 0."""
    n = q.shape[0]
    J = np.empty((6, n))
    if _jacobian_kernel(q, body, X, point, True, jt, jd, ws, J) >= 0:
        return -1.0
    x = np.empty(n)
    big = 0.0
    for j in range(n):
        x[j] = J[0, j] * nvec[0] + J[1, j] * nvec[1] + J[2, j] * nvec[2]
        big = max(big, abs(x[j]))
    if big <= 1e-14:
        return np.inf
    M, L, y = np.empty((n, n)), np.empty((n, n)), np.empty(n)
    _crba_sample(q, jt, jd, bd, ws, M)
    if not _cholesky_solve(M, x, L, y):
        return -2.0
    s = 0.0
    for j in range(n):
        s += x[j] * y[j]
    return 1.0 / s


# ============================================================================================


def _plain(x: Any, shape: tuple[int]) -> bool:
    """The common case that needs no coercion: a contiguous float64 ndarray of exactly ``shape`` (1-D).

    (Strided views go through coercion so the kernels are only ever compiled for contiguous arrays.)"""
    return type(x) is np.ndarray and x.dtype is _F64 and x.shape == shape and x.strides == _STRIDE1


def _as_float(x: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric; got {x!r:.80}") from exc


_NAMES_RNEA = ("q", "qd", "qdd", "gravity", "f_ext")
_NAMES_FD = ("q", "qd", "tau", "gravity", "f_ext")


class RobotModel:
    """A fixed-base serial chain with lumped inertias, loaded from a URDF (see module docstring).

    Attributes:
        joint_names (list[str]), nq (int), lower, upper, velocity_limits, effort_limits ((nq,)
        arrays; +-inf where the URDF gives no limit), root_link, tip_link, link_names (every link
        whose pose :meth:`fk` gives), locked_joints (moving joints off the chain, held at 0),
        collision_geometry (list of :class:`CollisionGeometry`: link, kind, params, origin 4x4 in
        the link frame, resolved mesh path or None), chain (the underlying
        :class:`~robot_grinding_sim.core.robot.model.KinematicChain`).
    """

    def __init__(self, chain: KinematicChain) -> None:
        self.chain = chain
        self.source = chain.source
        self.root_link = chain.root_link
        self.tip_link = chain.tip_link
        self.joint_names = list(chain.joint_names)
        self.nq = chain.nq
        self.lower = chain.lower.copy()
        self.upper = chain.upper.copy()
        self.velocity_limits = chain.velocity_limits.copy()
        self.effort_limits = chain.effort_limits.copy()
        self.link_names = list(chain.link_names)
        self.locked_joints = list(chain.locked_joints)
        self.collision_geometry = list(chain.collision_geometry)
        c = chain
        n = self.nq
        self._mass = np.array(c.mass, dtype=float)
        self._com = np.array(c.com, dtype=float)
        I6 = [spatial_inertia(m, cc, ii) for m, cc, ii in zip(c.mass, c.com, c.inertia, strict=True)]
        # packed model arrays and workspace of the kernels (layout: see the kernels' header)
        self._jt = np.ascontiguousarray(c.jtype, dtype=np.int64)
        self._jd = np.ascontiguousarray(np.hstack([c.axis, c.R0.reshape(n, 9), c.p0]))
        self._bd = np.ascontiguousarray(np.hstack([c.mass[:, None], c.com, c.inertia.reshape(n, 9),
                                                   np.reshape(I6, (n, 36))]))  # fmt: skip
        self._ws = np.zeros((n, WS_COLS))
        self._link_index = {name: k for k, name in enumerate(self.link_names)}
        self._link_body = np.array([c.link_body[name] for name in self.link_names], dtype=np.int64)
        self._link_X = np.array([c.link_offset[name] for name in self.link_names])
        self._link_off = np.ascontiguousarray(self._link_X[:, :3, 3])
        self._no_body = np.zeros(0, dtype=np.int64)
        self._no_off = np.zeros((0, 3))
        self._default_g = np.array(DEFAULT_GRAVITY)
        self._shape1 = (self.nq,)
        self._zero3 = np.zeros(3)
        self._ext_cache: dict[tuple[int, ...], np.ndarray] = {}
        self._ext_sel: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}

    # ---------------------------------------------------------------------------------------
    @classmethod
    def from_urdf(
        cls,
        path: str | os.PathLike,
        tip_link: str | None = None,
        package_dirs: Sequence[str | os.PathLike] = (),
    ) -> RobotModel:
        """Load the chain from the URDF's root link to ``tip_link`` (default ``tcp`` if present,
        else the deepest link). Raises ModelError naming the file and the problem."""
        return cls(load_chain(path, tip_link, package_dirs))

    @classmethod
    def from_urdf_string(
        cls,
        xml: str | bytes,
        tip_link: str | None = None,
        package_dirs: Sequence[str | os.PathLike] = (),
        base_dir: str | None = None,
    ) -> RobotModel:
        """Like :meth:`from_urdf` for URDF text; relative mesh paths resolve against ``base_dir``."""
        return cls(parse_chain(xml, tip_link, package_dirs, source="<string>", base_dir=base_dir))

    def __repr__(self) -> str:
        return f"RobotModel({self.root_link!r} -> {self.tip_link!r}, nq={self.nq}, joints={self.joint_names})"

    # ---------------------------------------------------------------------------------------
    # input checks (cheap: shapes here, finiteness inside the kernels)

    def _js(self, x: Any, name: str) -> np.ndarray:
        """A joint-space array as float64, C-contiguous, shape (nq,) or (B, nq) (finiteness is
        checked inside the kernels)."""
        if type(x) is not np.ndarray or x.dtype is not _F64:
            x = _as_float(x, name)
        shape = x.shape
        if shape != self._shape1 and (len(shape) != 2 or shape[1] != self.nq):
            raise InputError(f"{name} must have shape ({self.nq},) or (B, {self.nq}); got {shape}")
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        return x

    def _states(self, **arrays: Any) -> tuple[list[np.ndarray], bool]:
        """Coerce joint-space arrays to float64 (B, nq); all must share one shape."""
        out = []
        first = None
        for name, x in arrays.items():
            a = self._js(x, name)
            if first is None:
                first = (name, a.shape)
            elif a.shape != first[1]:
                raise InputError(f"{name} has shape {a.shape} but {first[0]} has shape {first[1]}")
            out.append(a)
        batch = out[0].ndim == 2
        return ([a for a in out] if batch else [a.reshape(1, self.nq) for a in out]), batch

    def _same(self, arrays: tuple[np.ndarray, ...], names: tuple[str, ...]) -> bool:
        """True for one state (all (nq,)), False for a batch (all (B, nq)); else InputError."""
        shape = arrays[0].shape
        for k in range(1, len(arrays)):
            if arrays[k].shape != shape:
                raise InputError(f"{names[k]} has shape {arrays[k].shape} but {names[0]} has shape {shape}")
        return len(shape) == 1

    def _gravity(self, gravity: Any) -> np.ndarray:
        if gravity is DEFAULT_GRAVITY:
            return self._default_g
        g = np.ascontiguousarray(_as_float(gravity, "gravity"))
        if g.shape != (3,):
            raise InputError(f"gravity must be a 3-vector (m/s^2, root frame); got shape {g.shape}")
        return g

    def _link(self, link: str) -> int:
        try:
            return self._link_index[link]
        except (KeyError, TypeError):
            raise InputError(f"unknown link {link!r}; known links: {self.link_names}") from None

    def _ext(self, f_ext: Any, lead: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """f_ext -> (body (k,), link origin in the body frame (k, 3), wrenches (*lead, k, 6)).

        ``lead`` is () for a single state, (B,) for a batch."""
        if f_ext is None:
            arr = self._ext_cache.get(lead)
            if arr is None:
                arr = self._ext_cache[lead] = np.zeros((*lead, 0, 6))
            return self._no_body, self._no_off, arr
        if isinstance(f_ext, Mapping):
            key = tuple(f_ext)
            hit = self._ext_sel.get(key)
            if hit is None:  # the links' bodies and offsets, cached per set of link names
                idx = np.array([self._link(name) for name in key], dtype=np.int64)
                hit = (self._link_body[idx], np.ascontiguousarray(self._link_off[idx]))
                if len(self._ext_sel) < 256:
                    self._ext_sel[key] = hit
            W = np.empty((*lead, len(key), 6))
            for k, (name, wrench) in enumerate(f_ext.items()):
                w = wrench if type(wrench) is np.ndarray else _as_float(wrench, f"f_ext[{name!r}]")
                if w.shape != (6,) and w.shape != (*lead, 6):
                    raise InputError(f"f_ext[{name!r}] must have shape {(*lead, 6)} or (6,); got {w.shape}")
                try:
                    W[..., k, :] = w
                except (TypeError, ValueError) as exc:
                    raise InputError(f"f_ext[{name!r}] must be numeric: {exc}") from exc
            return hit[0], hit[1], W
        else:
            w = _as_float(f_ext, "f_ext")
            L = len(self.link_names)
            if w.shape == (L, 6) or w.shape == (*lead, L, 6):
                W = np.broadcast_to(w, (*lead, L, 6))
            else:
                raise InputError(
                    f"f_ext must be a dict {{link: (6,) wrench}} or an array ({L}, 6) / (B, {L}, 6) "
                    f"indexed like link_names; got shape {w.shape}"
                )
            sel = np.arange(L)
        return self._link_body[sel], self._link_off[sel], np.ascontiguousarray(W)

    def _check(self, code: int, names: tuple[str, ...]) -> None:
        if code >= 0:
            raise InputError(f"{names[code]} holds NaN or inf")

    # ---------------------------------------------------------------------------------------
    # kinematics

    def _frames(self, q: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        (Q,), batch = self._states(q=q)
        B = Q.shape[0]
        Rw = np.empty((B, self.nq, 3, 3))
        pw = np.empty((B, self.nq, 3))
        self._check(_fk_kernel(Q, self._jt, self._jd, self._ws, Rw, pw), ("q",))
        return Rw, pw, batch

    def fk(self, q: Any, link: str | None = None) -> np.ndarray:
        """Pose of ``link`` (default the tip link) in the root frame.

        Args:
            q: (nq,) or (B, nq) joint positions.
            link: any name of ``link_names``.

        Returns:
            (4, 4) homogeneous transform, or (B, 4, 4) for a batch.
        """
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
        if q.ndim == 1:
            T = np.empty((4, 4))
            code = _link_pose_single(q, self._link_body[k], self._link_X[k], self._jt, self._jd, self._ws, T)
        else:
            T = np.empty((q.shape[0], 4, 4))
            code = _link_pose_kernel(q, self._link_body[k], self._link_X[k], self._jt, self._jd, self._ws, T)
        if code >= 0:
            self._check(code, ("q",))
        return T

    def link_poses(self, q: Any) -> dict[str, np.ndarray]:
        """Root-frame poses (4, 4) of every link in ``link_names`` at one configuration (nq,)."""
        Rw, pw, batch = self._frames(q)
        if batch:
            raise InputError("link_poses takes one configuration q of shape (nq,)")
        out = {}
        for k, name in enumerate(self.link_names):
            b, X = self._link_body[k], self._link_X[k]
            if b < 0:
                out[name] = X.copy()
            else:
                T = np.eye(4)
                T[:3, :3] = Rw[0, b] @ X[:3, :3]
                T[:3, 3] = Rw[0, b] @ X[:3, 3] + pw[0, b]
                out[name] = T
        return out

    def jacobian(self, q: Any, link: str | None = None, point: Any = None) -> np.ndarray:
        """Geometric Jacobian (6, nq), rows [linear; angular], root frame.

        Args:
            q: (nq,) joint positions.
            link: the link the point moves with (default the tip link).
            point: (3,) root-frame point the linear rows refer to; default the link's origin.
        """
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
            if q.ndim != 1:
                raise InputError(f"jacobian takes one configuration q of shape ({self.nq},); got {q.shape}")
        if point is None:
            pt, use = self._zero3, False
        else:
            pt, use = np.ascontiguousarray(_as_float(point, "point")), True
            if pt.shape != (3,):
                raise InputError(f"point must be a 3-vector in the root frame (m); got shape {pt.shape}")
        J = np.empty((6, self.nq))
        code = _jacobian_kernel(q, self._link_body[k], self._link_X[k], pt, use, self._jt, self._jd, self._ws, J)
        if code >= 0:
            if not np.isfinite(pt).all():
                raise InputError(f"point holds NaN or inf: {point!r}")
            self._check(code, ("q",))
        return J

    # ---------------------------------------------------------------------------------------
    # dynamics

    def rnea(
        self, q: Any, qd: Any, qdd: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY
    ) -> np.ndarray:
        """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q) - sum J_link^T w_link.

        Args:
            q, qd, qdd: (nq,) or (B, nq) joint positions, velocities, accelerations.
            f_ext: external wrenches ON links (module docstring: dict or array form), or None.
            gravity: (3,) root-frame gravity acceleration, m/s^2.

        Returns:
            (nq,) or (B, nq) joint torques (N m) / forces (N).
        """
        if not (_plain(q, self._shape1) and _plain(qd, self._shape1) and _plain(qdd, self._shape1)):
            q, qd, qdd = self._js(q, "q"), self._js(qd, "qd"), self._js(qdd, "qdd")
            self._same((q, qd, qdd), _NAMES_RNEA)
        g = self._default_g if gravity is DEFAULT_GRAVITY else self._gravity(gravity)
        if q.ndim == 1:
            out = np.empty(self.nq)
            eb, eo, W = self._ext(f_ext, ())
            code = _rnea_single(q, qd, qdd, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        else:
            out = np.empty(q.shape)
            eb, eo, W = self._ext(f_ext, q.shape[:1])
            code = _rnea_kernel(q, qd, qdd, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        if code >= 0:
            self._check(code, _NAMES_RNEA)
        return out

    def gravity_torques(self, q: Any, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """Joint torques holding the arm still against gravity: rnea(q, 0, 0). (nq,) or (B, nq)."""
        z = np.zeros(np.shape(q))
        return self.rnea(q, z, z, gravity=gravity)

    def bias_forces(self, q: Any, qd: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """C(q, qd) qd + g(q) (minus J^T f_ext if given) = rnea(q, qd, 0). (nq,) or (B, nq)."""
        return self.rnea(q, qd, np.zeros(np.shape(qd)), f_ext=f_ext, gravity=gravity)

    def mass_matrix(self, q: Any) -> np.ndarray:
        """Joint-space inertia matrix M(q) by CRBA: (nq, nq), or (B, nq, nq) for a batch. SPD."""
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
        if q.ndim == 1:
            out = np.empty((self.nq, self.nq))
            code = _crba_single(q, self._jt, self._jd, self._bd, self._ws, out)
        else:
            out = np.empty((q.shape[0], self.nq, self.nq))
            code = _crba_kernel(q, self._jt, self._jd, self._bd, self._ws, out)
        if code >= 0:
            self._check(code, ("q",))
        return out

    def forward_dynamics(
        self, q: Any, qd: Any, tau: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY
    ) -> np.ndarray:
        """Joint accelerations qdd = M^-1 (tau - C qd - g + sum J^T w): (nq,) or (B, nq).

        Same arguments as :meth:`rnea` with ``tau`` (joint torques/forces) in place of ``qdd``.
        Raises ModelError if M(q) is not positive definite (a URDF with massless bodies).
        """
        if not (_plain(q, self._shape1) and _plain(qd, self._shape1) and _plain(tau, self._shape1)):
            q, qd, tau = self._js(q, "q"), self._js(qd, "qd"), self._js(tau, "tau")
            self._same((q, qd, tau), _NAMES_FD)
        g = self._default_g if gravity is DEFAULT_GRAVITY else self._gravity(gravity)
        if q.ndim == 1:
            out = np.empty(self.nq)
            eb, eo, W = self._ext(f_ext, ())
            code = _fd_single(q, qd, tau, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        else:
            out = np.empty(q.shape)
            eb, eo, W = self._ext(f_ext, q.shape[:1])
            code = _fd_kernel(q, qd, tau, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        if code >= 10:
            bad = q if q.ndim == 1 else q[code - 10]
            raise ModelError(f"{self.source}: mass matrix not positive definite at q={bad.tolist()}")
        if code >= 0:
            self._check(code, _NAMES_FD)
        return out

    def effective_mass(self, q: Any, link: str | None, point: Any, direction: Any) -> float:
        """Mass the environment feels when pushing ``point`` (moving with ``link``) along ``direction``.

        m = 1 / (n^T J M^-1 J^T n) with J the translational Jacobian (3, nq) of the root-frame
        ``point`` and n the unit root-frame ``direction``. Returns inf when no joint can move the
        point along n (the arm's structure takes the whole impulse).
        """
        n = _as_float(direction, "direction")
        norm = float(np.sqrt(n @ n)) if n.shape == (3,) else 0.0
        if not (1e-12 < norm < np.inf):
            raise InputError(f"direction must be a finite non-zero 3-vector; got {direction!r}")
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
            if q.ndim != 1:
                raise InputError(f"effective_mass takes one configuration q of shape ({self.nq},); got {q.shape}")
        pt = np.ascontiguousarray(_as_float(point, "point"))
        if pt.shape != (3,):
            raise InputError(f"point must be a 3-vector in the root frame (m); got shape {pt.shape}")
        m = _effective_mass_kernel(q, self._link_body[k], self._link_X[k], pt, n / norm, self._jt, self._jd,
                                   self._bd, self._ws)  # fmt: skip
        if m == -1.0:
            if not np.isfinite(pt).all():
                raise InputError(f"point holds NaN or inf: {point!r}")
            raise InputError("q holds NaN or inf")
        if m == -2.0:
            raise ModelError(f"{self.source}: mass matrix not positive definite at q={q.tolist()}")
        return float(m)

    # ---------------------------------------------------------------------------------------
    # energies (for checks and monitors)

    def kinetic_energy(self, q: Any, qd: Any) -> float | np.ndarray:
        """1/2 qd^T M(q) qd (J); scalar or (B,)."""
        (_, QD), batch = self._states(q=q, qd=qd)
        M = self.mass_matrix(np.asarray(q, dtype=float).reshape(-1, self.nq))
        e = 0.5 * np.einsum("bi,bij,bj->b", QD, M, QD)
        return e if batch else float(e[0])

    def potential_energy(self, q: Any, gravity: Any = DEFAULT_GRAVITY) -> float | np.ndarray:
        """Gravitational potential -sum_i m_i g . c_i (J), zero at the root origin; scalar or (B,)."""
        g = self._gravity(gravity)
        Rw, pw, batch = self._frames(q)
        c = np.einsum("bnij,nj->bni", Rw, self._com) + pw
        e = -np.einsum("n,bni,i->b", self._mass, c, g)
        return e if batch else float(e[0])

    def com(self, q: Any) -> np.ndarray:
        """Centre of mass (3,) of the moving bodies in the root frame (m)."""
        Rw, pw, batch = self._frames(q)
        if batch:
            raise InputError(f"com takes one configuration q of shape ({self.nq},)")
        c = np.einsum("nij,nj->ni", Rw[0], self._com) + pw[0]
        return (self._mass @ c) / self._mass.sum()
