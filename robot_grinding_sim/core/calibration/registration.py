"""Registration: the part's pose in ``base_link`` from points on its surface (``grinding register``).

Points (K, 3) m in ``base_link``, each at a known distance ``d0`` from the part's surface: touch
points (0: a probe's tip on the surface) or the ball tool's centre while in contact (the tool's
radius). The pose X (4, 4) minimises the sum of squared residuals

    r_i = dist(p_i, surface at X) - d0

by Gauss-Newton from a starting pose X0. A small rigid move of the part, a translation dt and a
rotation dw about the points' centroid c, moves a surface point s to s + dt + dw x (s - c), so the
residual changes by -n . (dt + dw x (s - c)) with n the outward normal at the closest point s: the
row of the Jacobian is -[n, (s - c) x n] (K, 6). Distances come from the contact query the job
uses (:class:`~robot_grinding_sim.core.geometry.tool_contact.ToolContactQuery`, exact surface).

Identifiability: the Jacobian's columns are scaled to one unit (rotations times the points' RMS
distance from c); a singular value below :data:`RANK_TOL` of the largest is a direction the points
cannot fix (points on one plane fix no in-plane translation nor the turn about its normal; points
on one line no rotation about that line). Such a pose is refused, the directions named
(:func:`describe_direction`); the caller may keep axes of X0 (``keep``: x, y, z, rx, ry, rz, the
base frame's axes, the rotations about the centroid) to fix them from elsewhere.

Uncertainty: covariance s^2 (J^T J)^-1 with s^2 = RSS / (K - dof), propagated to the pose's
translation (of the part frame's origin) and rotation (about the base axes), one standard
deviation per axis. It assumes independent point errors of equal variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

AXES = ("x", "y", "z", "rx", "ry", "rz")
#: a scaled singular value below this fraction of the largest: a direction the points do not fix
RANK_TOL = 1e-3


def _rotvec(w: FloatArray) -> FloatArray:
    """Rotation matrix (3, 3) of the rotation vector w (3,) rad."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(w).as_matrix()


def pose_to_xyzrpy(X: FloatArray) -> list[float]:
    """(4, 4) -> [x, y, z, roll, pitch, yaw] (m, rad; the planner's convention, ``pose_vector``)."""
    from robot_grinding_sim.core.planning.planner import pose_vector

    return pose_vector(X)


def describe_direction(v: FloatArray, centre: FloatArray) -> str:
    """A direction of the pose (6,) (translation m, rotation rad about ``centre``) in words."""
    t, w = np.asarray(v[:3], dtype=float), np.asarray(v[3:], dtype=float)

    def vec(a: FloatArray) -> str:
        return "(" + ", ".join(f"{x:.2f}" for x in a) + ")"

    if np.linalg.norm(w) < 1e-9 or np.linalg.norm(t) > 10.0 * np.linalg.norm(w):
        u = t / np.linalg.norm(t)
        k = int(np.argmax(np.abs(u)))
        return f"translation along {AXES[k]}" if abs(u[k]) > 0.99 else f"translation along {vec(u)}"
    u = w / np.linalg.norm(w)
    # the rotation's axis passes through a = centre + (w x t) / |w|^2 (t = -w x (a - centre))
    a = np.asarray(centre, dtype=float) + np.cross(w, t) / float(w @ w)
    k = int(np.argmax(np.abs(u)))
    axis = f"{'xyz'[k]}" if abs(u[k]) > 0.99 else vec(u)
    return f"rotation about {axis} through {vec(a)} m"


def free_directions(null: FloatArray, free: list[int], scale: float, centre: FloatArray) -> list[str]:
    """The directions of the null space ``null`` (m, len(free)) (orthonormal rows, scaled coordinates)
    in words: first every axis of :data:`AXES` lying in it (translation along x; rotation about z
    through the centroid), then what is left (:func:`describe_direction`)."""
    N = np.asarray(null, dtype=float)
    names, taken = [], []
    for j, k in enumerate(free):
        e = np.zeros(len(free))
        e[j] = 1.0
        if float(np.linalg.norm(N @ e)) > 0.99:
            taken.append(e)
            names.append(f"translation along {AXES[k]}" if k < 3 else
                         f"rotation about {'xyz'[k - 3]} through ({', '.join(f'{x:.2f}' for x in centre)}) m")
    if len(taken) < len(N):
        # the rest of the null space, orthogonal to the axes found
        B = N.T if not taken else N.T - np.array(taken).T @ (np.array(taken) @ N.T)
        U, sv, _ = np.linalg.svd(B, full_matrices=False)
        for v in U.T[: len(N) - len(taken)]:
            full = np.zeros(6)
            full[free] = v * np.array([1.0 if k < 3 else 1.0 / scale for k in free])
            names.append(describe_direction(full, centre))
    return names


@dataclass
class Registration:
    """The result of :func:`register_points`.

    Attributes:
        pose: (4, 4) the part's pose in base_link. xyzrpy: the same as [x, y, z, roll, pitch, yaw].
        std: per axis (x, y, z m of the part frame's origin; rx, ry, rz rad about the base axes) one
            standard deviation (nan for kept axes).
        rms: residual RMS, m. max_abs: largest |residual|, m. points: K. iterations: Gauss-Newton steps.
        kept: the axes kept from the starting pose.
    """

    pose: FloatArray
    xyzrpy: list[float]
    std: dict[str, float]
    rms: float
    max_abs: float
    points: int
    iterations: int
    kept: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"pose": self.xyzrpy, "pose_matrix": self.pose.tolist(), "std": self.std, "rms_m": self.rms,
                "max_abs_residual_m": self.max_abs, "points": self.points, "iterations": self.iterations,
                "kept": self.kept}


def _residuals(query: Any, X: FloatArray, points: FloatArray, d0: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(residuals (K,), normals (K, 3), closest points (K, 3)) with the part at X."""
    from robot_grinding_sim.core.geometry.tool_contact import WORKPIECE

    query.scene.set_pose(WORKPIECE, X)
    r, n, s = np.empty(len(points)), np.empty((len(points), 3)), np.empty((len(points), 3))
    for i, p in enumerate(points):
        g = query.query(p)
        r[i] = g.gap + query.radius - d0  # the centre's signed distance to the surface, less d0
        n[i], s[i] = g.normal, g.point
    return r, n, s


def register_points(query: Any, X0: FloatArray, points: FloatArray, d0: float = 0.0, keep: tuple[str, ...] = (),
                    max_iter: int = 50, tol: float = 1e-10) -> Registration:
    """The part's pose from points on (or ``d0`` m off) its surface (module docstring).

    Args:
        query: the part's contact query (a ToolContactQuery; its workpiece is moved to each trial pose).
        X0: (4, 4) the starting pose (nominal: the plan's, the CAD placement).
        points: (K, 3) m, base_link. d0: their distance from the surface, m.
        keep: axes of :data:`AXES` kept from X0.

    Raises:
        InputError: too few points, or directions the points cannot fix (named).
    """
    P = np.asarray(points, dtype=float).reshape(-1, 3)
    if not np.isfinite(P).all():
        raise InputError("register: NaN or inf among the points")
    bad = [a for a in keep if a not in AXES]
    if bad:
        raise InputError(f"register: unknown axis {bad[0]!r} to keep (axes: {', '.join(AXES)})")
    free = [k for k, a in enumerate(AXES) if a not in keep]
    if len(P) < len(free) + 1:
        raise InputError(f"register: {len(P)} points for {len(free)} unknowns of the pose; at least "
                         f"{len(free) + 1} are needed")
    c = P.mean(axis=0)
    scale = max(float(np.sqrt(np.mean(np.sum((P - c) ** 2, axis=1)))), 1e-6)
    X = np.asarray(X0, dtype=float).copy()
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported)
        r, n, s = _residuals(query, X, P, d0)
        J = -np.hstack([n, np.cross(s - c, n)])
        Js = J[:, free] * np.array([1.0 if k < 3 else 1.0 / scale for k in free])
        U, sv, Vt = np.linalg.svd(Js, full_matrices=False)
        weak = sv < RANK_TOL * sv[0]
        if weak.any():
            raise InputError(f"register: the {len(P)} points cannot fix the "
                             f"{'; '.join(free_directions(Vt[weak], free, scale, c))} (add points off that line "
                             "or plane, or --keep those axes from the starting pose)")
        dx_s = -(Vt.T @ ((U.T @ r) / sv))
        dx = np.zeros(6)
        dx[free] = dx_s * np.array([1.0 if k < 3 else 1.0 / scale for k in free])
        # apply: s -> R (s - c) + c + dt, i.e. X <- [R, c + dt - R c] X
        R = _rotvec(dx[3:])
        M = np.eye(4)
        M[:3, :3], M[:3, 3] = R, c + dx[:3] - R @ c
        X = M @ X
        if float(np.linalg.norm(dx[:3])) + scale * float(np.linalg.norm(dx[3:])) < tol:
            break
    r, n, s = _residuals(query, X, P, d0)
    J = -np.hstack([n, np.cross(s - c, n)])[:, free]
    dof = len(P) - len(free)
    s2 = float(r @ r) / dof if dof > 0 else math.nan
    cov_free = s2 * np.linalg.inv(J.T @ J)
    cov = np.zeros((6, 6))
    cov[np.ix_(free, free)] = cov_free
    # the origin o of the part frame moves by dt + dw x (o - c): its covariance via that linear map
    o = X[:3, 3]
    L = np.zeros((6, 6))
    L[:3, :3] = np.eye(3)
    d = o - c
    L[:3, 3:] = -np.array([[0.0, -d[2], d[1]], [d[2], 0.0, -d[0]], [-d[1], d[0], 0.0]])  # dw x d = -[d]x dw
    L[3:, 3:] = np.eye(3)
    std_all = np.sqrt(np.maximum(np.diag(L @ cov @ L.T), 0.0))
    std = {a: (float(std_all[k]) if a not in keep else math.nan) for k, a in enumerate(AXES)}
    return Registration(X, pose_to_xyzrpy(X), std, float(np.sqrt(np.mean(r * r))), float(np.abs(r).max()), len(P),
                        it, list(keep))
