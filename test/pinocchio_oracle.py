"""Test oracle: the arm's effective mass along a contact normal from Pinocchio (its CRBA and frame
Jacobian), not from our dynamics. Shared by the tests that check a force or a restitution against
it (unit and ROS tiers: test/ is on the path of both through test/conftest.py). Not used by the package.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pinocchio as pin


@lru_cache(maxsize=8)
def _model(urdf: str) -> Any:
    return pin.buildModelFromUrdf(urdf)


def effective_mass(urdf: str, q: np.ndarray, n: np.ndarray, point: np.ndarray | None = None,
                   frame: str = "tcp") -> float:
    """m = 1 / (n^T J M^-1 J^T n), kg, of the arm of ``urdf`` at ``q`` (nq,) rad along the unit
    normal ``n`` (3,) (root frame).

    J (3, nq) is the translational Jacobian of ``point`` (3,), m, root frame, a point rigidly
    attached to ``frame`` (default: the frame's origin); M (nq, nq) the joint-space mass matrix
    (Pinocchio's CRBA fills its upper triangle, mirrored here).
    """
    pm = _model(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId(frame)
    pin.computeJointJacobians(pm, data, q)
    pin.updateFramePlacements(pm, data)
    J6 = pin.getFrameJacobian(pm, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    J = J6[:3]
    if point is not None:  # v_p = v_o + w x r = v_o - [r]x w
        r = np.asarray(point, dtype=float) - data.oMf[fid].translation
        J = J - np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]]) @ J6[3:]
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    x = J.T @ n
    return 1.0 / float(x @ np.linalg.solve(M, x))


def frame_position(urdf: str, q: np.ndarray, names: list[str], frame: str = "tcp") -> np.ndarray:
    """(3,) m: the origin of ``frame`` in the root frame at joint values ``q`` (len(names),) rad given in
    the order of ``names`` (Pinocchio's forward kinematics)."""
    pm = _model(str(urdf))
    data = pm.createData()
    qp = pin.neutral(pm)
    for name, value in zip(names, q, strict=True):
        qp[pm.joints[pm.getJointId(name)].idx_q] = value
    pin.framesForwardKinematics(pm, data, qp)
    return np.array(data.oMf[pm.getFrameId(frame)].translation)
