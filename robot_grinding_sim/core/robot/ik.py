"""Inverse kinematics along a tool path: damped least squares on the dynamics module's Jacobian.

Each target is a TCP pose X_BT (4, 4) in the robot's root frame (``base_link``). The solver
iterates ``dq = J^T (J J^T + lambda^2 W)^-1 e`` with e = [p_target - p; log(R_target R^T)] (root
frame; rotation error as a rotation vector, weighted by ``rot_weight`` m/rad), clamps q to the
joint limits after every step, and adapts lambda (Levenberg-Marquardt style: larger when the
error grows). Along a path each waypoint is seeded from the previous solution, so the joint
motion is continuous; the first one is tried from several seeds and the solution farthest from
the joint limits wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.resources import default_urdf
from robot_grinding_sim.core.robot.kernels import cholesky_solve, link_pose, tcp_kinematics

FloatArray = NDArray[np.float64]

#: Seeds for the first waypoint (UR-style arm, tool pointing down in front of the robot).
UR_SEEDS = (
    (0.0, -1.57, 1.57, -1.57, -1.57, 0.0),
    (0.0, -1.2, 1.9, -2.27, -1.57, 0.0),
    (0.0, -2.0, -1.57, -1.14, 1.57, 0.0),
    (0.0, -1.57, 1.57, -1.57, 1.57, 0.0),
)


def load_robot(robot: Any, tip_link: str | None = "tcp", package_dirs: Any = ()) -> Any:
    """A RobotModel from a model, a URDF path, or ``"default"``; the tip link must be ``tip_link``;
    ``package_dirs``: where ``package://`` URIs resolve (``robot.package_dirs``)."""
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    if isinstance(robot, RobotModel):
        return robot
    from robot_grinding_sim.core.resources import resolve_package_uri

    path = default_urdf() if str(robot) in ("default", "") else Path(resolve_package_uri(str(robot)))
    if not path.is_file():
        raise InputError(f"{path}: robot URDF not found")
    try:
        return RobotModel.from_urdf(path, tip_link=tip_link, package_dirs=list(package_dirs))
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{path}: cannot load the robot ({exc})") from exc


@njit(cache=True)
def rotvec_kernel(R, out):
    """The rotation vector (3,) of a rotation matrix R (3, 3) (the SO(3) logarithm), rad, into out:
    the closed form away from a half turn, the unit quaternion's (Shepperd's branch) near it."""
    c = max(-1.0, min(1.0, 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)))
    wx, wy, wz = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
    angle = math.acos(c)
    if angle < 1e-6:
        f = 0.5  # sin(angle) ~ angle
    elif angle < math.pi - 1e-4:
        f = angle / (2.0 * math.sin(angle))
    else:  # near a half turn: the axis from the quaternion's largest component
        d0, d1, d2 = R[0, 0], R[1, 1], R[2, 2]
        if d0 >= d1 and d0 >= d2:
            x = 0.5 * math.sqrt(max(1.0 + d0 - d1 - d2, 0.0))
            y, z, w = (R[0, 1] + R[1, 0]) / (4.0 * x), (R[0, 2] + R[2, 0]) / (4.0 * x), wx / (4.0 * x)
        elif d1 >= d2:
            y = 0.5 * math.sqrt(max(1.0 - d0 + d1 - d2, 0.0))
            x, z, w = (R[0, 1] + R[1, 0]) / (4.0 * y), (R[1, 2] + R[2, 1]) / (4.0 * y), wy / (4.0 * y)
        else:
            z = 0.5 * math.sqrt(max(1.0 - d0 - d1 + d2, 0.0))
            x, y, w = (R[0, 2] + R[2, 0]) / (4.0 * z), (R[1, 2] + R[2, 1]) / (4.0 * z), wz / (4.0 * z)
        if w < 0.0:
            x, y, z, w = -x, -y, -z, -w
        v = math.sqrt(x * x + y * y + z * z)
        a = 2.0 * math.atan2(v, w)
        out[0], out[1], out[2] = a * x / v, a * y / v, a * z / v
        return
    out[0], out[1], out[2] = f * wx, f * wy, f * wz


def log_so3(R: FloatArray) -> FloatArray:
    """Rotation vector (3,) of a rotation matrix (3, 3) (the SO(3) logarithm), rad."""
    out = np.empty(3)
    rotvec_kernel(np.ascontiguousarray(R, dtype=float), out)
    return out


@njit(cache=True)
def pose_error(target, X, w, e):
    """e (6,) = [p_target - p; w log(R_target R^T)] of pose X (4, 4) against target (4, 4); returns
    (|position error| m, |rotation error| rad)."""
    Rd = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            Rd[i, j] = target[i, 0] * X[j, 0] + target[i, 1] * X[j, 1] + target[i, 2] * X[j, 2]
    r = np.empty(3)
    rotvec_kernel(Rd, r)
    ep2, er2 = 0.0, 0.0
    for i in range(3):
        d = target[i, 3] - X[i, 3]
        e[i], e[i + 3] = d, w * r[i]
        ep2 += d * d
        er2 += r[i] * r[i]
    return math.sqrt(ep2), math.sqrt(er2)


@njit(cache=True)
def dls_solve(target, seed, lower, upper, w, tol_p, tol_r, max_iter, lam0, body, Xb, jt, jd, ws, hbody, H, q_out):
    """The damped-least-squares iteration of :meth:`IKSolver.solve` compiled: q (n,) into q_out;
    returns (converged, position error m, rotation error rad). body, Xb, jt, jd, ws: the model's
    kernel arrays of the tip link (:meth:`~robot_grinding_sim.core.robot.dynamics.RobotModel.kernel_arrays`);
    hbody, H: a held part's (:func:`~robot_grinding_sim.core.robot.kernels.tcp_kinematics`: the
    tip's pose relative to the part; hbody < -1 for none)."""
    n = seed.shape[0]
    q, q_new = np.empty(n), np.empty(n)
    for j in range(n):
        q[j] = min(max(seed[j], lower[j]), upper[j])
    T, J, Jt = np.empty((4, 4)), np.empty((6, n)), np.empty((6, n))
    e, e_new, x = np.empty(6), np.empty(6), np.empty(6)
    A, L = np.empty((6, 6)), np.zeros((6, 6))
    tcp_kinematics(q, jt, jd, ws, body, Xb, hbody, H, T, J)
    ep, er = pose_error(target, T, w, e)
    lam = lam0
    for _ in range(max_iter):
        if ep < tol_p and er < tol_r:
            break
        tcp_kinematics(q, jt, jd, ws, body, Xb, hbody, H, T, J)
        for r in range(3, 6):
            for j in range(n):
                J[r, j] *= w
        for a in range(6):
            for b in range(6):
                s = 0.0
                for j in range(n):
                    s += J[a, j] * J[b, j]
                A[a, b] = s + (lam * lam if a == b else 0.0)
        if not cholesky_solve(A, e, L, x):
            break
        for j in range(n):
            s = 0.0
            for a in range(6):
                s += J[a, j] * x[a]
            q_new[j] = min(max(q[j] + s, lower[j]), upper[j])
        if hbody < -1:
            link_pose(q_new, body, Xb, jt, jd, ws, T)
        else:  # the pose relative to the held part (its Jacobian unused here)
            tcp_kinematics(q_new, jt, jd, ws, body, Xb, hbody, H, T, Jt)
        ep_new, er_new = pose_error(target, T, w, e_new)
        if np.sqrt(np.dot(e_new, e_new)) < np.sqrt(np.dot(e, e)):
            q[:] = q_new
            e[:] = e_new
            ep, er = ep_new, er_new
            lam = max(lam * 0.3, 1e-9)
        else:
            lam = min(lam * 10.0, 1e3)
            if lam >= 1e3:
                break
    q_out[:] = q
    return ep < tol_p and er < tol_r, ep, er


@dataclass
class IKResult:
    """Solutions along a path. Arrays: q (N, nq) rad; errors (N,) m and rad; ok (N,) bool."""

    q: FloatArray
    position_error: FloatArray
    rotation_error: FloatArray
    ok: NDArray[np.bool_]
    manipulability: FloatArray
    limit_margin: FloatArray  # (N,) smallest distance to a joint limit, rad


class IKSolver:
    """Damped-least-squares IK for the tip link of a RobotModel (the iteration compiled: :func:`dls_solve`).

    Args:
        model: the robot (``fk``, ``jacobian``, ``lower``, ``upper``, ``nq``).
        tol_position: m; tol_rotation: rad (convergence).
        max_iterations: per waypoint.
        damping: initial lambda.
        rot_weight: metres per radian when mixing position and rotation errors.
    """

    def __init__(self, model: Any, tol_position: float = 1e-6, tol_rotation: float = 1e-5,
                 max_iterations: int = 200, damping: float = 1e-3, rot_weight: float = 0.2) -> None:
        self.model = model
        self.tol_p, self.tol_r = tol_position, tol_rotation
        self.max_iter = max_iterations
        self.lam0 = damping
        self.w = rot_weight
        lo, hi = np.asarray(model.lower, float), np.asarray(model.upper, float)
        self.lower = np.where(np.isfinite(lo), lo, -4 * math.pi)
        self.upper = np.where(np.isfinite(hi), hi, 4 * math.pi)
        jt, jd, _, ws, body, X = model.kernel_arrays(model.tip_link)
        # a held part's model (core/sim/held_part.py): the tip relative to the part
        hbody, H = getattr(model, "held_kernel", (-2, np.zeros((2, 4, 4))))
        self._kernel = (body, X, jt, jd, ws, int(hbody), H)

    def solve(self, T: FloatArray, seed: FloatArray) -> tuple[FloatArray, bool, float, float]:
        """IK for one target pose T (4, 4) from ``seed`` (nq,): (q, converged, position err, rotation err)."""
        q = np.empty(self.model.nq)
        ok, ep, er = dls_solve(np.ascontiguousarray(T, dtype=float), np.asarray(seed, dtype=float), self.lower,
                               self.upper, float(self.w), float(self.tol_p), float(self.tol_r), int(self.max_iter),
                               float(self.lam0), *self._kernel, q)
        return q, bool(ok), float(ep), float(er)

    def solve_first(self, T: FloatArray, seeds: Any = None) -> tuple[FloatArray, bool, float, float]:
        """The first waypoint: try every seed, keep the converged solution farthest from the limits."""
        seeds = list(seeds) if seeds is not None else []
        if self.model.nq == 6:
            seeds += [np.array(s) for s in UR_SEEDS]
        rng = np.random.default_rng(0)
        seeds += [rng.uniform(np.maximum(self.lower, -math.pi), np.minimum(self.upper, math.pi))
                  for _ in range(12)]
        best = None
        for s in seeds:
            q, ok, ep, er = self.solve(T, s)
            if ok:
                # the same pose with every joint wrapped into (-pi, pi]: farthest from +-2 pi limits
                wrapped = q - 2.0 * math.pi * np.round(q / (2.0 * math.pi))
                inside = (wrapped >= self.lower) & (wrapped <= self.upper)
                q = np.where(inside, wrapped, q)
                margin = float(np.min(np.minimum(q - self.lower, self.upper - q)))
                key = (margin >= 0.3, self.manipulability(q), margin)
                if best is None or key > best[0]:
                    best = (key, (q, ok, ep, er))
        if best is not None:
            return best[1]
        return self.solve(T, seeds[0])

    def manipulability(self, q: FloatArray) -> float:
        J = self.model.jacobian(q)
        return float(math.sqrt(max(np.linalg.det(J @ J.T), 0.0)))

    def solve_path(self, targets: FloatArray, q0: FloatArray | None = None) -> IKResult:
        """IK along targets (N, 4, 4), each seeded from the previous solution (q0 seeds the first)."""
        N = len(targets)
        Q = np.empty((N, self.model.nq))
        ep = np.empty(N)
        er = np.empty(N)
        ok = np.zeros(N, dtype=bool)
        man = np.empty(N)
        for k in range(N):
            if k == 0:
                q, ok[k], ep[k], er[k] = (self.solve_first(targets[0]) if q0 is None
                                          else self.solve(targets[0], q0))
            else:
                q, ok[k], ep[k], er[k] = self.solve(targets[k], Q[k - 1])
            Q[k] = q
            man[k] = self.manipulability(q)
        margin = np.min(np.minimum(Q - self.lower, self.upper - Q), axis=1)
        return IKResult(Q, ep, er, ok, man, margin)


def pose_matrices(positions: FloatArray, quaternions: FloatArray, X_BP: FloatArray) -> FloatArray:
    """TCP targets (N, 4, 4) in the robot root frame from part-frame positions and xyzw quaternions."""
    N = len(positions)
    T = np.tile(np.eye(4), (N, 1, 1))
    T[:, :3, :3] = X_BP[:3, :3] @ Rotation.from_quat(quaternions).as_matrix()
    T[:, :3, 3] = positions @ X_BP[:3, :3].T + X_BP[:3, 3]
    return T
