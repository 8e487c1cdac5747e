"""Inverse kinematics along a path of tool poses: the joint knots of passes, links and moves.

:func:`solve_ik` follows poses (N, 4, 4) with damped least squares, each seeded by the previous
(:func:`follow`: continuation from the seed's pose when a target is far, so the arm keeps its
configuration); :func:`first_configuration` is the IK of a job's first pose; :func:`targets` makes
the poses from positions and rotations. Units: m, rad; frame: the robot's root frame (``base_link``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.robot.ik import IKSolver

FloatArray = NDArray[np.float64]


def targets(P: FloatArray, R: FloatArray) -> FloatArray:
    """Poses (N, 4, 4) from positions (N, 3) and rotations (N, 3, 3)."""
    T = np.tile(np.eye(4), (len(P), 1, 1))
    T[:, :3, :3] = R
    T[:, :3, 3] = P
    return T


def path_solvers(model: Any, rot_weight: float = 0.2, tol: float = 1e-9, max_iterations: int = 100
                 ) -> tuple[IKSolver, IKSolver]:
    """The exact solver of a path's points (``tol`` m, ``tol / rot_weight`` rad) and the coarse one
    of its continuation steps (1e-6 m)."""
    exact = IKSolver(model, tol_position=tol, tol_rotation=tol / rot_weight, max_iterations=max_iterations,
                     rot_weight=rot_weight)
    coarse = IKSolver(model, tol_position=1e-6, tol_rotation=1e-6 / rot_weight, max_iterations=max_iterations,
                      rot_weight=rot_weight)
    return exact, coarse


def follow(model: Any, solvers: tuple[IKSolver, IKSolver], T: FloatArray, q: FloatArray
           ) -> tuple[FloatArray, bool, float, float]:
    """One point of a path: the pose T (4, 4) from the configuration q (nq,) rad, by continuation from
    q's pose (16 interpolated poses) when the direct solve does not converge; so the arm stays in q's
    configuration (its branch: shoulder, elbow, wrist) as a trajectory through the points does.
    Returns (q, converged, position error m, rotation error rad)."""
    exact, coarse = solvers
    q_new, ok, ep, er = exact.solve(T, q)
    if ok:
        return q_new, ok, ep, er
    X0 = model.fk(q)
    slerp = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([X0[:3, :3], T[:3, :3]])))
    q_new = np.asarray(q, dtype=float).copy()
    for s in np.linspace(0.0, 1.0, 17)[1:]:
        Ts = np.eye(4)
        Ts[:3, :3] = slerp(s).as_matrix()
        Ts[:3, 3] = (1 - s) * X0[:3, 3] + s * T[:3, 3]
        q_new, ok, ep, er = (exact if s == 1.0 else coarse).solve(Ts, q_new)
    return q_new, ok, ep, er


def solve_ik(model: Any, poses: FloatArray, q_seed: FloatArray, what: str, rot_weight: float = 0.2,
             tol: float = 1e-9, max_iterations: int = 100, label: Callable[[int], str] | None = None
             ) -> FloatArray:
    """Damped-least-squares IK of the tip link along poses (N, 4, 4), each seeded by the previous
    (:func:`follow`).

    Held to ``tol`` in position (m) and ``tol / rot_weight`` in rotation (rad). A target far from
    its seed is reached by continuation (16 interpolated poses from the seed's). Raises
    PlanningError naming ``what`` and the point that does not converge (``label(k)`` names point
    k when given, e.g. the plan's waypoint).
    """
    solvers = path_solvers(model, rot_weight, tol, max_iterations)
    out = np.empty((len(poses), model.nq))
    q = np.asarray(q_seed, dtype=float).copy()
    for k, T in enumerate(poses):
        q, ok, ep, er = follow(model, solvers, T, q)
        if not ok:
            where = f"{what}, {label(k)}," if label is not None else f"{what}, point {k},"
            raise PlanningError(f"{where} is unreachable: IK error {ep * 1e3:.3g} mm / "
                                f"{math.degrees(er):.3g} deg at TCP {np.round(T[:3, 3], 4).tolist()} m in "
                                f"base_link; move the workpiece closer to the robot or turn it")
        out[k] = q
    return out


def start_configuration(model: Any, pose: FloatArray, q_home: FloatArray) -> tuple[FloatArray, bool, float, float]:
    """IK of a job's first pose (4, 4): from ``q_home`` if it converges there (:func:`follow`), else
    from the solver's seeds (the converged solution farthest from the joint limits), then held to the
    path's tolerance. Returns (q, converged, position error m, rotation error rad)."""
    solvers = path_solvers(model)
    q, ok, ep, er = follow(model, solvers, pose, np.asarray(q_home, dtype=float))
    if ok:
        return q, ok, ep, er
    q, ok, ep, er = IKSolver(model).solve_first(pose, [q_home])
    if not ok:
        return q, ok, ep, er
    return follow(model, solvers, pose, q)


def first_configuration(model: Any, pose: FloatArray, q_home: FloatArray, what: str) -> FloatArray:
    """:func:`start_configuration`, or PlanningError naming ``what``."""
    q, ok, ep, er = start_configuration(model, pose, q_home)
    if not ok:
        raise PlanningError(f"{what} is unreachable: IK error {ep * 1e3:.3g} mm / {math.degrees(er):.3g} deg "
                            f"at TCP {np.round(pose[:3, 3], 4).tolist()} m in base_link; move the workpiece "
                            "closer to the robot")
    return q


__all__ = ["first_configuration", "follow", "path_solvers", "solve_ik", "start_configuration", "targets"]
