"""Rigid-body dynamics of a fixed-base serial chain: FK, Jacobians, RNEA, CRBA, forward dynamics.

One implementation: every public method validates its input cheaply in Python and calls one of a
few numba kernels (compiled once, cached on disk) that work on flat arrays. A single call is a
batch of one, so the single and batched paths cannot drift apart.

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
from robot_grinding_sim.core.model import CollisionGeometry, KinematicChain, load_chain, parse_chain
from robot_grinding_sim.core.spatial import spatial_inertia

__all__ = ["RobotModel", "CollisionGeometry"]

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)

# ============================================================================================
# numba kernels. 3-vectors travel as tuples (no allocation); per-body state lives in arrays
# allocated once per kernel call. Spatial vectors in CRBA are [angular; linear] (Featherstone).


@njit(cache=True, inline="always")
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True, inline="always")
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True, inline="always")
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True, inline="always")
def _scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@njit(cache=True, inline="always")
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True, inline="always")
def _mv(R, v):
    """R @ v for a (3, 3) array R."""
    return (
        R[0, 0] * v[0] + R[0, 1] * v[1] + R[0, 2] * v[2],
        R[1, 0] * v[0] + R[1, 1] * v[1] + R[1, 2] * v[2],
        R[2, 0] * v[0] + R[2, 1] * v[1] + R[2, 2] * v[2],
    )


@njit(cache=True, inline="always")
def _mtv(R, v):
    """R.T @ v for a (3, 3) array R."""
    return (
        R[0, 0] * v[0] + R[1, 0] * v[1] + R[2, 0] * v[2],
        R[0, 1] * v[0] + R[1, 1] * v[1] + R[2, 1] * v[2],
        R[0, 2] * v[0] + R[1, 2] * v[1] + R[2, 2] * v[2],
    )


@njit(cache=True)
def _finite(a):
    """True if the (C-contiguous) array holds no NaN or inf."""
    for x in a.ravel():
        if not np.isfinite(x):
            return False
    return True


@njit(cache=True, inline="always")
def _mm3(A, B, out):
    """out = A @ B for (3, 3) arrays (out must not alias A or B)."""
    for r in range(3):
        for c in range(3):
            out[r, c] = A[r, 0] * B[0, c] + A[r, 1] * B[1, c] + A[r, 2] * B[2, c]


@njit(cache=True)
def _congruence_add(X, S, T, dst):
    """dst += X^T S X for (6, 6) arrays; T is a (6, 6) scratch buffer."""
    for r in range(6):
        for c in range(6):
            s = 0.0
            for k in range(6):
                s += S[r, k] * X[k, c]
            T[r, c] = s
    for r in range(6):
        for c in range(6):
            s = 0.0
            for k in range(6):
                s += X[k, r] * T[k, c]
            dst[r, c] += s


@njit(cache=True)
def _joint_placement(jtype, axis, R0, p0, i, qi, R, p):
    """Pose (R[i], p[i]) of body i in body i-1 (root for i=0) at joint value qi."""
    ax, ay, az = axis[i, 0], axis[i, 1], axis[i, 2]
    if jtype[i] == 0:
        c, s = np.cos(qi), np.sin(qi)
        t = 1.0 - c
        J00, J01, J02 = t * ax * ax + c, t * ax * ay - s * az, t * ax * az + s * ay
        J10, J11, J12 = t * ax * ay + s * az, t * ay * ay + c, t * ay * az - s * ax
        J20, J21, J22 = t * ax * az - s * ay, t * ay * az + s * ax, t * az * az + c
        for r in range(3):
            a0, a1, a2 = R0[i, r, 0], R0[i, r, 1], R0[i, r, 2]
            R[i, r, 0] = a0 * J00 + a1 * J10 + a2 * J20
            R[i, r, 1] = a0 * J01 + a1 * J11 + a2 * J21
            R[i, r, 2] = a0 * J02 + a1 * J12 + a2 * J22
            p[i, r] = p0[i, r]
    else:
        for r in range(3):
            for k in range(3):
                R[i, r, k] = R0[i, r, k]
            p[i, r] = p0[i, r] + (R0[i, r, 0] * ax + R0[i, r, 1] * ay + R0[i, r, 2] * az) * qi


@njit(cache=True)
def _rnea_sample(q, qd, qdd, g, jtype, axis, R0, p0, mass, com, inertia,
                 ext_body, ext_off, ext, R, p, Rw, w, f, nn, tau):  # fmt: skip
    """Recursive Newton-Euler for one state; writes the joint torques into ``tau`` (n,)."""
    n = q.shape[0]
    zero = (0.0, 0.0, 0.0)
    for i in range(n):
        _joint_placement(jtype, axis, R0, p0, i, q[i], R, p)
        Ri = R[i]
        pi = (p[i, 0], p[i, 1], p[i, 2])
        if i == 0:
            wp, dwp, accp = zero, zero, (-g[0], -g[1], -g[2])
        else:
            wp = (w[i - 1, 0], w[i - 1, 1], w[i - 1, 2])
            dwp = (w[i - 1, 3], w[i - 1, 4], w[i - 1, 5])
            accp = (w[i - 1, 6], w[i - 1, 7], w[i - 1, 8])
        a = (axis[i, 0], axis[i, 1], axis[i, 2])
        aqd = _scale(a, qd[i])
        aqdd = _scale(a, qdd[i])
        wr = _mtv(Ri, wp)
        dw = _mtv(Ri, dwp)
        acc = _mtv(Ri, _add(_add(accp, _cross(dwp, pi)), _cross(wp, _cross(wp, pi))))
        if jtype[i] == 0:
            wi = _add(wr, aqd)
            dw = _add(_add(dw, _cross(wr, aqd)), aqdd)
        else:
            wi = wr
            acc = _add(_add(acc, _scale(_cross(wi, aqd), 2.0)), aqdd)
        w[i, 0], w[i, 1], w[i, 2] = wi
        w[i, 3], w[i, 4], w[i, 5] = dw
        w[i, 6], w[i, 7], w[i, 8] = acc
        c = (com[i, 0], com[i, 1], com[i, 2])
        ac = _add(_add(acc, _cross(dw, c)), _cross(wi, _cross(wi, c)))
        F = _scale(ac, mass[i])
        I = inertia[i]
        N = _add(_mv(I, dw), _cross(wi, _mv(I, wi)))
        M = _add(N, _cross(c, F))
        f[i, 0], f[i, 1], f[i, 2] = F
        nn[i, 0], nn[i, 1], nn[i, 2] = M
    if ext_body.shape[0] > 0:
        for i in range(n):
            if i == 0:
                Rw[0] = R[0]
            else:
                _mm3(Rw[i - 1], R[i], Rw[i])
        for k in range(ext_body.shape[0]):
            b = ext_body[k]
            if b < 0:
                continue
            Fw = (ext[k, 0], ext[k, 1], ext[k, 2])
            Tw = (ext[k, 3], ext[k, 4], ext[k, 5])
            Fb = _mtv(Rw[b], Fw)
            Tb = _add(_mtv(Rw[b], Tw), _cross((ext_off[k, 0], ext_off[k, 1], ext_off[k, 2]), Fb))
            for r in range(3):
                f[b, r] -= Fb[r]
                nn[b, r] -= Tb[r]
    for i in range(n - 1, -1, -1):
        if i < n - 1:
            Rc = R[i + 1]
            fc = _mv(Rc, (f[i + 1, 0], f[i + 1, 1], f[i + 1, 2]))
            nc = _add(_mv(Rc, (nn[i + 1, 0], nn[i + 1, 1], nn[i + 1, 2])),
                      _cross((p[i + 1, 0], p[i + 1, 1], p[i + 1, 2]), fc))  # fmt: skip
            for r in range(3):
                f[i, r] += fc[r]
                nn[i, r] += nc[r]
        a = (axis[i, 0], axis[i, 1], axis[i, 2])
        if jtype[i] == 0:
            tau[i] = _dot(a, (nn[i, 0], nn[i, 1], nn[i, 2]))
        else:
            tau[i] = _dot(a, (f[i, 0], f[i, 1], f[i, 2]))


@njit(cache=True)
def _rnea_kernel(Q, QD, QDD, g, jtype, axis, R0, p0, mass, com, inertia, ext_body, ext_off, EXT, out):
    """Batched RNEA: Q, QD, QDD (B, n); EXT (B, k, 6); writes out (B, n). Returns the index of
    the first non-finite input (0 q, 1 qd, 2 qdd, 3 gravity, 4 f_ext) or -1."""
    for k, arr in enumerate((Q, QD, QDD)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(EXT):
        return 4
    B, n = Q.shape
    R = np.empty((n, 3, 3))
    p = np.empty((n, 3))
    Rw = np.empty((n, 3, 3))
    w = np.empty((n, 9))
    f = np.empty((n, 3))
    nn = np.empty((n, 3))
    for b in range(B):
        _rnea_sample(Q[b], QD[b], QDD[b], g, jtype, axis, R0, p0, mass, com, inertia,
                     ext_body, ext_off, EXT[b], R, p, Rw, w, f, nn, out[b])  # fmt: skip
    return -1


@njit(cache=True)
def _crba_sample(q, jtype, axis, R0, p0, I6, R, p, X, Ic, M):
    """Composite-rigid-body algorithm for one configuration; writes the mass matrix M (n, n)."""
    n = q.shape[0]
    for i in range(n):
        _joint_placement(jtype, axis, R0, p0, i, q[i], R, p)
        # X[i]: motion transform parent -> body i, [[E, 0], [-E S(r), E]] with E = R^T, r = p
        for r in range(3):
            for c in range(3):
                e = R[i, c, r]
                X[i, r, c] = e
                X[i, r + 3, c + 3] = e
                X[i, r, c + 3] = 0.0
        for r in range(3):
            e0, e1, e2 = R[i, 0, r], R[i, 1, r], R[i, 2, r]  # row r of E
            # row r of -E S(p): -(e x p) components ... computed as (p x e)
            X[i, r + 3, 0] = p[i, 1] * e2 - p[i, 2] * e1
            X[i, r + 3, 1] = p[i, 2] * e0 - p[i, 0] * e2
            X[i, r + 3, 2] = p[i, 0] * e1 - p[i, 1] * e0
        for r in range(6):
            for c in range(6):
                Ic[i, r, c] = I6[i, r, c]
    T = np.empty((6, 6))
    for i in range(n - 1, 0, -1):
        _congruence_add(X[i], Ic[i], T, Ic[i - 1])
    F = np.empty(6)
    G = np.empty(6)
    for i in range(n):
        off = 0 if jtype[i] == 0 else 3
        for r in range(6):
            F[r] = (Ic[i, r, off] * axis[i, 0] + Ic[i, r, off + 1] * axis[i, 1]
                    + Ic[i, r, off + 2] * axis[i, 2])
        M[i, i] = F[off] * axis[i, 0] + F[off + 1] * axis[i, 1] + F[off + 2] * axis[i, 2]
        j = i
        while j > 0:
            for r in range(6):  # F <- X_j^T F (force to the parent's coordinates)
                s = 0.0
                for k in range(6):
                    s += X[j, k, r] * F[k]
                G[r] = s
            F[:] = G
            j -= 1
            oj = 0 if jtype[j] == 0 else 3
            v = F[oj] * axis[j, 0] + F[oj + 1] * axis[j, 1] + F[oj + 2] * axis[j, 2]
            M[i, j] = v
            M[j, i] = v


@njit(cache=True)
def _crba_kernel(Q, jtype, axis, R0, p0, I6, out):
    """Batched mass matrix: Q (B, n) -> out (B, n, n). Returns 0 if q holds NaN/inf, else -1."""
    if not _finite(Q):
        return 0
    B, n = Q.shape
    R = np.empty((n, 3, 3))
    p = np.empty((n, 3))
    X = np.zeros((n, 6, 6))
    Ic = np.empty((n, 6, 6))
    for b in range(B):
        _crba_sample(Q[b], jtype, axis, R0, p0, I6, R, p, X, Ic, out[b])
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
def _fd_kernel(Q, QD, TAU, g, jtype, axis, R0, p0, mass, com, inertia, I6, ext_body, ext_off, EXT, out):
    """Batched forward dynamics qdd = M^-1 (tau - rnea(q, qd, 0)): CRBA + RNEA + Cholesky.

    Returns -1 on success, 0..4 for a non-finite input (q, qd, tau, gravity, f_ext), 10 + b when
    the mass matrix of sample b is not positive definite."""
    for k, arr in enumerate((Q, QD, TAU)):
        if not _finite(arr):
            return k
    if not _finite(g):
        return 3
    if not _finite(EXT):
        return 4
    B, n = Q.shape
    R = np.empty((n, 3, 3))
    p = np.empty((n, 3))
    Rw = np.empty((n, 3, 3))
    w = np.empty((n, 9))
    f = np.empty((n, 3))
    nn = np.empty((n, 3))
    X = np.zeros((n, 6, 6))
    Ic = np.empty((n, 6, 6))
    M = np.empty((n, n))
    L = np.zeros((n, n))
    zero = np.zeros(n)
    h = np.empty(n)
    for b in range(B):
        _crba_sample(Q[b], jtype, axis, R0, p0, I6, R, p, X, Ic, M)
        _rnea_sample(Q[b], QD[b], zero, g, jtype, axis, R0, p0, mass, com, inertia,
                     ext_body, ext_off, EXT[b], R, p, Rw, w, f, nn, h)  # fmt: skip
        for i in range(n):
            h[i] = TAU[b, i] - h[i]
        if not _cholesky_solve(M, h, L, out[b]):
            return 10 + b
    return -1


@njit(cache=True)
def _fk_kernel(Q, jtype, axis, R0, p0, Rw, pw):
    """Root-frame poses of every body: Q (B, n) -> Rw (B, n, 3, 3), pw (B, n, 3). 0 if NaN, else -1."""
    if not _finite(Q):
        return 0
    B, n = Q.shape
    R = np.empty((n, 3, 3))
    p = np.empty((n, 3))
    for b in range(B):
        for i in range(n):
            _joint_placement(jtype, axis, R0, p0, i, Q[b, i], R, p)
            if i == 0:
                Rw[b, 0] = R[0]
                pw[b, 0] = p[0]
            else:
                _mm3(Rw[b, i - 1], R[i], Rw[b, i])
                d = _mv(Rw[b, i - 1], (p[i, 0], p[i, 1], p[i, 2]))
                for r in range(3):
                    pw[b, i, r] = pw[b, i - 1, r] + d[r]
    return -1


@njit(cache=True)
def _jacobian_kernel(q, body, point, jtype, axis, R0, p0, J):
    """Jacobian (6, n) [linear; angular] of the root-frame ``point`` rigidly moving with ``body``."""
    n = q.shape[0]
    Rw = np.empty((1, n, 3, 3))
    pw = np.empty((1, n, 3))
    if _fk_kernel(q.reshape(1, n), jtype, axis, R0, p0, Rw, pw) >= 0:
        return 0
    pt = (point[0], point[1], point[2])
    for j in range(n):
        if j > body:
            for r in range(6):
                J[r, j] = 0.0
            continue
        z = _mv(Rw[0, j], (axis[j, 0], axis[j, 1], axis[j, 2]))
        if jtype[j] == 0:
            lin = _cross(z, _sub(pt, (pw[0, j, 0], pw[0, j, 1], pw[0, j, 2])))
            for r in range(3):
                J[r, j] = lin[r]
                J[r + 3, j] = z[r]
        else:
            for r in range(3):
                J[r, j] = z[r]
                J[r + 3, j] = 0.0
    return -1


# ============================================================================================


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
        :class:`~robot_grinding_sim.core.model.KinematicChain`).
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
        self._jtype = np.ascontiguousarray(c.jtype, dtype=np.int64)
        self._axis = np.ascontiguousarray(c.axis, dtype=float)
        self._R0 = np.ascontiguousarray(c.R0, dtype=float)
        self._p0 = np.ascontiguousarray(c.p0, dtype=float)
        self._mass = np.ascontiguousarray(c.mass, dtype=float)
        self._com = np.ascontiguousarray(c.com, dtype=float)
        self._inertia = np.ascontiguousarray(c.inertia, dtype=float)
        self._I6 = np.ascontiguousarray(
            [spatial_inertia(m, cc, ii) for m, cc, ii in zip(c.mass, c.com, c.inertia, strict=True)]
        )
        self._link_index = {name: k for k, name in enumerate(self.link_names)}
        self._link_body = np.array([c.link_body[name] for name in self.link_names], dtype=np.int64)
        self._link_X = np.array([c.link_offset[name] for name in self.link_names])
        self._link_off = np.ascontiguousarray(self._link_X[:, :3, 3])
        self._no_body = np.zeros(0, dtype=np.int64)
        self._no_off = np.zeros((0, 3))
        self._default_g = np.array(DEFAULT_GRAVITY)
        self._ext_cache: dict[int, np.ndarray] = {}

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

    def _states(self, **arrays: Any) -> tuple[list[np.ndarray], bool]:
        """Coerce joint-space arrays to float64 (B, nq); all must share one shape."""
        out = []
        shape = None
        for name, x in arrays.items():
            a = x if type(x) is np.ndarray and x.dtype == np.float64 else _as_float(x, name)
            if a.ndim not in (1, 2) or a.shape[-1] != self.nq:
                raise InputError(f"{name} must have shape ({self.nq},) or (B, {self.nq}); got {a.shape}")
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                raise InputError(f"{name} has shape {a.shape} but {next(iter(arrays))} has shape {shape}")
            if not a.flags.c_contiguous:  # kernels are compiled for C-contiguous arrays only
                a = np.ascontiguousarray(a)
            out.append(a.reshape(1, self.nq) if a.ndim == 1 else a)
        return out, shape is not None and len(shape) == 2

    def _gravity(self, gravity: Any) -> np.ndarray:
        if gravity is DEFAULT_GRAVITY:
            return self._default_g
        g = _as_float(gravity, "gravity")
        if g.shape != (3,):
            raise InputError(f"gravity must be a 3-vector (m/s^2, root frame); got shape {g.shape}")
        return g

    def _link(self, link: str) -> int:
        try:
            return self._link_index[link]
        except (KeyError, TypeError):
            raise InputError(f"unknown link {link!r}; known links: {self.link_names}") from None

    def _ext(self, f_ext: Any, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """f_ext -> (body (k,), offset of the link origin in the body frame (k, 3), wrenches (B, k, 6))."""
        if f_ext is None:
            arr = self._ext_cache.get(B)
            if arr is None:
                arr = self._ext_cache[B] = np.zeros((B, 0, 6))
            return self._no_body, self._no_off, arr
        if isinstance(f_ext, Mapping):
            idx = [self._link(name) for name in f_ext]
            W = np.empty((B, len(idx), 6))
            for k, (name, wrench) in enumerate(f_ext.items()):
                w = _as_float(wrench, f"f_ext[{name!r}]")
                if w.shape not in ((6,), (B, 6)):
                    raise InputError(f"f_ext[{name!r}] must have shape (6,) or ({B}, 6); got {w.shape}")
                W[:, k] = w
            sel = np.array(idx, dtype=np.int64)
        else:
            w = _as_float(f_ext, "f_ext")
            L = len(self.link_names)
            if w.shape == (L, 6):
                W = np.broadcast_to(w, (B, L, 6))
            elif w.shape == (B, L, 6):
                W = w
            else:
                raise InputError(
                    f"f_ext must be a dict {{link: (6,) wrench}} or an array ({L}, 6) / ({B}, {L}, 6) "
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
        self._check(_fk_kernel(Q, self._jtype, self._axis, self._R0, self._p0, Rw, pw), ("q",))
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
        Rw, pw, batch = self._frames(q)
        b = self._link_body[k]
        X = self._link_X[k]
        if b < 0:
            T = np.broadcast_to(X, (Rw.shape[0], 4, 4)).copy()
        else:
            T = np.zeros((Rw.shape[0], 4, 4))
            T[:, :3, :3] = Rw[:, b] @ X[:3, :3]
            T[:, :3, 3] = Rw[:, b] @ X[:3, 3] + pw[:, b]
            T[:, 3, 3] = 1.0
        return T if batch else T[0]

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
        (Q,), batch = self._states(q=q)
        if batch:
            raise InputError(f"jacobian takes one configuration q of shape ({self.nq},)")
        if point is None:
            pt = self.fk(Q[0], self.link_names[k])[:3, 3]
        else:
            pt = np.asarray(point, dtype=float)
            if pt.shape != (3,) or not np.isfinite(pt).all():
                raise InputError(f"point must be a finite 3-vector in the root frame; got {point!r}")
        J = np.empty((6, self.nq))
        code = _jacobian_kernel(Q[0], self._link_body[k], pt, self._jtype, self._axis, self._R0, self._p0, J)
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
        (Q, QD, QDD), batch = self._states(q=q, qd=qd, qdd=qdd)
        B = Q.shape[0]
        out = np.empty((B, self.nq))
        eb, eo, W = self._ext(f_ext, B)
        code = _rnea_kernel(Q, QD, QDD, self._gravity(gravity), self._jtype, self._axis, self._R0, self._p0,
                            self._mass, self._com, self._inertia, eb, eo, W, out)  # fmt: skip
        self._check(code, _NAMES_RNEA)
        return out if batch else out[0]

    def gravity_torques(self, q: Any, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """Joint torques holding the arm still against gravity: rnea(q, 0, 0). (nq,) or (B, nq)."""
        z = np.zeros(np.shape(q))
        return self.rnea(q, z, z, gravity=gravity)

    def bias_forces(self, q: Any, qd: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """C(q, qd) qd + g(q) (minus J^T f_ext if given) = rnea(q, qd, 0). (nq,) or (B, nq)."""
        return self.rnea(q, qd, np.zeros(np.shape(qd)), f_ext=f_ext, gravity=gravity)

    def mass_matrix(self, q: Any) -> np.ndarray:
        """Joint-space inertia matrix M(q) by CRBA: (nq, nq), or (B, nq, nq) for a batch. SPD."""
        (Q,), batch = self._states(q=q)
        out = np.empty((Q.shape[0], self.nq, self.nq))
        self._check(_crba_kernel(Q, self._jtype, self._axis, self._R0, self._p0, self._I6, out), ("q",))
        return out if batch else out[0]

    def forward_dynamics(
        self, q: Any, qd: Any, tau: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY
    ) -> np.ndarray:
        """Joint accelerations qdd = M^-1 (tau - C qd - g + sum J^T w): (nq,) or (B, nq).

        Same arguments as :meth:`rnea` with ``tau`` (joint torques/forces) in place of ``qdd``.
        Raises ModelError if M(q) is not positive definite (a URDF with massless bodies).
        """
        (Q, QD, TAU), batch = self._states(q=q, qd=qd, tau=tau)
        B = Q.shape[0]
        out = np.empty((B, self.nq))
        eb, eo, W = self._ext(f_ext, B)
        code = _fd_kernel(Q, QD, TAU, self._gravity(gravity), self._jtype, self._axis, self._R0, self._p0,
                          self._mass, self._com, self._inertia, self._I6, eb, eo, W, out)  # fmt: skip
        if code >= 10:
            raise ModelError(f"{self.source}: mass matrix not positive definite at q={Q[code - 10].tolist()}")
        self._check(code, _NAMES_FD)
        return out if batch else out[0]

    def effective_mass(self, q: Any, link: str | None, point: Any, direction: Any) -> float:
        """Mass the environment feels when pushing ``point`` (moving with ``link``) along ``direction``.

        m = 1 / (n^T J M^-1 J^T n) with J the translational Jacobian (3, nq) of the root-frame
        ``point`` and n the unit root-frame ``direction``. Returns inf when no joint can move the
        point along n (the arm's structure takes the whole impulse).
        """
        n = np.asarray(direction, dtype=float)
        if n.shape != (3,) or not np.isfinite(n).all() or np.linalg.norm(n) < 1e-12:
            raise InputError(f"direction must be a finite non-zero 3-vector; got {direction!r}")
        n = n / np.linalg.norm(n)
        J = self.jacobian(q, link, point)[:3]
        M = self.mass_matrix(q)
        x = J.T @ n
        if not np.any(np.abs(x) > 1e-14):
            return float("inf")
        return float(1.0 / (x @ np.linalg.solve(M, x)))

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
