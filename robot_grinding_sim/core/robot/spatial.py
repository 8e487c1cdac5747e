"""Small SE(3) / rigid-body helpers used at model-building time (NumPy, not on the hot path).

Conventions: a pose ``X_AB`` is a 4x4 homogeneous matrix mapping coordinates in frame B to frame A;
``R`` is its 3x3 rotation, ``p`` its translation (m). Inertia tensors are 3x3 (kg m^2) about the
centre of mass, expressed in the frame named in the argument. Spatial vectors are ordered
[angular; linear] inside the dynamics kernels (Featherstone), but every public API of the package
exposes wrenches and Jacobian rows as [linear; angular] / [force; torque].
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b of two (3,) vectors; np.cross costs ~10-50 us a call on 3-vectors, this ~1 us."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))


def skew(v: np.ndarray) -> np.ndarray:
    """The 3x3 matrix ``S`` with ``S @ w == np.cross(v, w)``."""
    x, y, z = np.asarray(v, dtype=float)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def homogeneous(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """4x4 pose from a rotation (3, 3) and a translation (3,)."""
    X = np.eye(4)
    X[:3, :3] = R
    X[:3, 3] = p
    return X


def inverse(X: np.ndarray) -> np.ndarray:
    """Inverse of a 4x4 rigid transform (uses R^T, not a general inverse)."""
    R = X[:3, :3]
    return homogeneous(R.T, -R.T @ X[:3, 3])


def axis_angle_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) of ``angle`` (rad) about the unit ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=float)
    K = skew(a)
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * (K @ K)


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = np.asarray(rpy, dtype=float)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def lump_inertias(
    masses: list[float], coms: list[np.ndarray], inertias: list[np.ndarray]
) -> tuple[float, np.ndarray, np.ndarray]:
    """Combine rigid bodies expressed in one common frame into one body.

    Args:
        masses: masses (kg).
        coms: centres of mass (3,) in the common frame (m).
        inertias: inertia tensors (3, 3) about each body's own centre of mass, axes of the common
            frame (kg m^2).

    Returns:
        (mass, com (3,), inertia (3, 3) about the combined centre of mass). A total mass of zero
        returns a zero body at the origin.
    """
    m = float(sum(masses))
    if m <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = sum(mk * np.asarray(ck) for mk, ck in zip(masses, coms, strict=True)) / m
    inertia = np.zeros((3, 3))
    for mk, ck, Ik in zip(masses, coms, inertias, strict=True):
        d = np.asarray(ck) - c
        inertia += Ik + mk * (d @ d * np.eye(3) - np.outer(d, d))  # parallel-axis theorem
    return m, c, 0.5 * (inertia + inertia.T)


def spatial_inertia(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """6x6 spatial inertia about a frame's origin, [angular; linear] ordering (Featherstone).

    Args:
        mass: kg. com: centre of mass (3,) in the frame (m). inertia_com: (3, 3) about the centre
        of mass, axes of the frame (kg m^2).
    """
    C = skew(com)
    out = np.zeros((6, 6))
    out[:3, :3] = inertia_com + mass * C @ C.T
    out[:3, 3:] = mass * C
    out[3:, :3] = mass * C.T
    out[3:, 3:] = mass * np.eye(3)
    return out


FloatArray = NDArray[np.float64]


def cross_rows(a: FloatArray, b: FloatArray) -> FloatArray:
    """Row-wise cross product of (N, 3) arrays (np.cross costs ~30 us of overhead per call)."""
    out = np.empty_like(a)
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out
