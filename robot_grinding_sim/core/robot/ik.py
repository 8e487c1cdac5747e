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
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.resources import default_urdf

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


def log_so3(R: FloatArray) -> FloatArray:
    """Rotation vector (3,) of a rotation matrix (3, 3) (the SO(3) logarithm), rad."""
    c = max(-1.0, min(1.0, 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)))
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    angle = math.acos(c)
    if angle < 1e-6:
        return 0.5 * w  # sin(angle) ~ angle
    if angle < math.pi - 1e-4:
        return w * (angle / (2.0 * math.sin(angle)))
    return Rotation.from_matrix(R).as_rotvec()  # near a half turn: the robust (slow) way


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
    """Damped-least-squares IK for the tip link of a RobotModel.

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

    def error(self, q: FloatArray, T: FloatArray) -> tuple[FloatArray, float, float]:
        X = self.model.fk(q)
        ep = T[:3, 3] - X[:3, 3]
        er = log_so3(T[:3, :3] @ X[:3, :3].T)
        return np.r_[ep, self.w * er], float(np.linalg.norm(ep)), float(np.linalg.norm(er))

    def solve(self, T: FloatArray, seed: FloatArray) -> tuple[FloatArray, bool, float, float]:
        """IK for one target pose T (4, 4) from ``seed`` (nq,): (q, converged, position err, rotation err)."""
        q = np.clip(np.asarray(seed, dtype=float), self.lower, self.upper)
        e, ep, er = self.error(q, T)
        lam = self.lam0
        W = np.diag([1.0, 1.0, 1.0, self.w, self.w, self.w])
        for _ in range(self.max_iter):
            if ep < self.tol_p and er < self.tol_r:
                return q, True, ep, er
            J = W @ self.model.jacobian(q)
            JJt = J @ J.T
            dq = J.T @ np.linalg.solve(JJt + lam * lam * np.eye(6), e)
            q_new = np.clip(q + dq, self.lower, self.upper)
            e_new, ep_new, er_new = self.error(q_new, T)
            if np.linalg.norm(e_new) < np.linalg.norm(e):
                q, e, ep, er = q_new, e_new, ep_new, er_new
                lam = max(lam * 0.3, 1e-9)
            else:
                lam = min(lam * 10.0, 1e3)
                if lam >= 1e3:
                    break
        return q, bool(ep < self.tol_p and er < self.tol_r), ep, er

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
