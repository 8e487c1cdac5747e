"""The collision scene's objects and results, and the exact formulas for one primitive.

- :class:`Contact` and :class:`MinDistance`: what :class:`~.collision.CollisionScene` answers;
- :class:`SceneObject`: one named object of a scene (its kind, sizes, world pose, fcl object,
  mesh and exact surface);
- :func:`check_pose`, :func:`interp_pose`: rigid transforms in and between poses;
- :func:`primitive_closest`: signed distance, closest point and normal of a point against a
  sphere, box or cylinder (analytic);
- :func:`support_point`: the point of a box or cylinder farthest along a direction, with the
  extreme points of the face or edge it lies on when the direction is normal to one.

Conventions (all SI, world frame unless stated):

- ``Contact.normal`` is a unit vector pointing from b's surface towards a: moving a along it
  separates the pair. ``Contact.depth >= 0`` is the penetration (m). ``Contact.point`` lies on
  b's surface; ``point - depth * normal`` is the deepest point of a inside b.
- A signed distance is > 0 outside (the gap), < 0 inside (minus the penetration depth).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.meshquery import PreparedMesh, pose_problem

FloatArray = npt.NDArray[np.float64]

#: signature of an exact-surface callback: points (k, 3) in the object's frame ->
#: (closest points on the true surface (k, 3), unit outward normals there (k, 3)), same frame.
SurfaceFn = Callable[[FloatArray], tuple[npt.ArrayLike, npt.ArrayLike]]

#: the kinds of :class:`SceneObject`
SPHERE, BOX, CYLINDER, MESH = "sphere", "box", "cylinder", "mesh"

#: directions closer than this (rad) to a face or edge normal of a box/cylinder count as a tie
#: (see :func:`support_point`)
TIE_ANGLE = 1e-6


@dataclass(slots=True)
class Contact:
    """One contact between objects a and b (world frame, SI). (Not frozen: a frozen dataclass
    costs 3 us more per contact, a third of a contact query.)

    Attributes:
        point: (3,) point on b's surface, m.
        normal: (3,) unit, from b's surface towards a (the direction that separates a).
        depth: penetration, m, >= 0.
        a, b: object names.
        exact: True when depth and normal come from an exact formula (see
            :mod:`~robot_grinding_sim.core.geometry.collision`); False for python-fcl's narrow
            phase (mesh-mesh, box-mesh, ...): not a force input.
    """

    point: FloatArray
    normal: FloatArray
    depth: float
    a: str
    b: str
    exact: bool = True


@dataclass(frozen=True)
class MinDistance:
    """Result of :meth:`CollisionScene.min_distance` (signed distance, m; points in world)."""

    distance: float
    a: str
    b: str
    point_a: FloatArray
    point_b: FloatArray


@dataclass
class SceneObject:
    """One named object of a collision scene (owned by the scene: callers go through its methods).

    Attributes:
        name: the object's name in the scene.
        kind: :data:`SPHERE`, :data:`BOX`, :data:`CYLINDER` or :data:`MESH`.
        geom: the python-fcl geometry.
        fobj: the python-fcl collision object (its transform is synced lazily: see ``dirty``).
        T: (4, 4) world pose.
        params: sphere (r,); box (hx, hy, hz) half extents; cylinder (r, half length); mesh ().
        rot_radius: farthest point of the geometry from its frame origin (m), for motion bounds.
        mesh: the validated mesh of a mesh object.
        surface, surface_tol: the exact surface a mesh was tessellated from, and the largest
            distance (m) between the two.
        dirty: ``T`` changed since it was last pushed to ``fobj``.
        sig: how python-fcl's broad phase names this object (see
            :class:`~robot_grinding_sim.core.geometry.fcl_scene.FclBroadPhase`).
        robot_link, robot_origin: for a robot's object, its link and the pose of the collision
            element in the link frame.
    """

    name: str
    kind: str
    geom: Any
    fobj: Any
    T: FloatArray
    params: FloatArray
    rot_radius: float
    mesh: PreparedMesh | None = None
    surface: SurfaceFn | None = None
    surface_tol: float = 0.0
    dirty: bool = True
    sig: tuple = ()
    robot_link: str | None = None
    robot_origin: FloatArray | None = None
    extra: dict = field(default_factory=dict)


def check_pose(T: Any, what: str) -> FloatArray:
    """Validate a homogeneous transform.

    Args:
        T: (4, 4) pose; rotation part orthonormal with det +1 (to 1e-6), last row (0, 0, 0, 1).
        what: Name for the error message.

    Returns:
        A float64 copy of T.

    Raises:
        InputError: wrong shape, NaN/inf, not a rigid transform.
    """
    try:
        M = np.array(T, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what}: pose must be a 4x4 array of numbers") from None
    if M.shape != (4, 4):
        raise InputError(f"{what}: pose must have shape (4, 4), got {M.shape}")
    code = pose_problem(M)
    if code == 1:
        raise InputError(f"{what}: pose contains NaN or infinite values")
    if code:
        raise InputError(f"{what}: pose is not a rigid transform (rotation not orthonormal with "
                         "det +1, or last row not 0 0 0 1)")
    return M


def interp_pose(T0: FloatArray, T1: FloatArray, rotvec: FloatArray, s: float) -> FloatArray:
    """Pose at fraction s of the screw-free linear motion T0 -> T1 (translation linear, rotation
    about a fixed axis at constant rate: R(s) = R0 exp(s log(R0^T R1)), ``rotvec`` = log(R0^T R1))."""
    T = np.eye(4)
    T[:3, :3] = T0[:3, :3] @ Rotation.from_rotvec(s * rotvec).as_matrix()
    T[:3, 3] = (1.0 - s) * T0[:3, 3] + s * T1[:3, 3]
    return T


def primitive_closest(b: SceneObject, c_w: FloatArray, tiny: float) -> tuple[float, FloatArray, FloatArray]:
    """Signed distance of the point c_w (world) to the surface of a sphere, box or cylinder b.

    Args:
        tiny: below this distance (m) from the sphere's centre or the cylinder's axis the
            direction is taken as +z / +x (the point's own direction is undefined there).

    Returns:
        (sd, p_w, n_w): sd > 0 outside, < 0 inside (m); p_w the closest point on b's surface;
        n_w the unit outward normal at p_w (towards the point when outside).
    """
    R = b.T[:3, :3]
    c = R.T @ (c_w - b.T[:3, 3])
    if b.kind == SPHERE:
        rb = b.params[0]
        d = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
        n = c / d if d > tiny else np.array([0.0, 0.0, 1.0])
        sd, p = d - rb, rb * n
    elif b.kind == BOX:
        h = b.params
        q = np.clip(c, -h, h)
        diff = c - q
        d = float(np.linalg.norm(diff))
        if d > 0.0:
            sd, p, n = d, q, diff / d
        else:  # inside: the nearest face
            gaps = h - np.abs(c)
            k = int(np.argmin(gaps))
            n = np.zeros(3)
            n[k] = 1.0 if c[k] >= 0.0 else -1.0
            p = c.copy()
            p[k] = n[k] * h[k]
            sd = -float(gaps[k])
    elif b.kind == CYLINDER:
        r, hl = b.params
        rho = math.hypot(c[0], c[1])
        radial = np.array([c[0] / rho, c[1] / rho, 0.0]) if rho > tiny else np.array([1.0, 0.0, 0.0])
        if rho > r or abs(c[2]) > hl:
            q = np.array([0.0, 0.0, min(max(c[2], -hl), hl)]) + min(rho, r) * radial
            diff = c - q
            d = float(np.linalg.norm(diff))
            sd, p, n = d, q, diff / d
        else:
            side, cap = r - rho, hl - abs(c[2])
            if side <= cap:
                sd, n = -side, radial
                p = np.array([r * radial[0], r * radial[1], c[2]])
            else:
                sgn = 1.0 if c[2] >= 0.0 else -1.0
                sd, n = -cap, np.array([0.0, 0.0, sgn])
                p = np.array([c[0], c[1], sgn * hl])
    else:
        raise InputError(f"primitive_closest: '{b.name}' is a {b.kind}, not a sphere, box or cylinder")
    return float(sd), R @ p + b.T[:3, 3], R @ n


def support_point(P: SceneObject, d: FloatArray) -> tuple[FloatArray, list[FloatArray]]:
    """Point of the box or cylinder P farthest along the world direction d (3,), and the other
    extreme points of the face or edge it lies on when d is (within :data:`TIE_ANGLE`) normal to
    one (a tie: the chosen point is then the middle of that face or edge; a cylinder face-on
    gives 8 points of its cap's rim)."""
    R, c = P.T[:3, :3], P.T[:3, 3]
    dl = R.T @ (d / np.linalg.norm(d))
    eps = TIE_ANGLE
    ties: list[FloatArray] = []
    if P.kind == BOX:
        h = P.params
        local = np.where(np.abs(dl) > eps, np.sign(dl) * h, 0.0)
        free = [i for i in range(3) if abs(dl[i]) <= eps]
        for k in range(1, 2 ** len(free)):  # the corners of the tie face / ends of the edge
            corner = local.copy()
            for j, i in enumerate(free):
                corner[i] = h[i] if (k >> j) & 1 else -h[i]
            ties.append(R @ corner + c)
    elif P.kind == CYLINDER:  # along local z
        r, hl = P.params
        local = np.zeros(3)
        rho = math.hypot(dl[0], dl[1])
        if abs(dl[2]) > eps:
            local[2] = math.copysign(hl, dl[2])
        if rho > eps:
            local[0], local[1] = r * dl[0] / rho, r * dl[1] / rho
            if abs(dl[2]) <= eps:  # side-on: the segment of the side along the axis
                ties = [R @ (local + [0.0, 0.0, z]) + c for z in (-hl, hl)]
        else:  # face-on: the cap's rim
            ties = [R @ np.array([r * math.cos(a), r * math.sin(a), local[2]]) + c
                    for a in np.linspace(0.0, 2 * math.pi, 8, endpoint=False)]
    else:
        raise InputError(f"support_point: '{P.name}' is a {P.kind}, not a box or cylinder")
    return R @ local + c, ties
