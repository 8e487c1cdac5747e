"""Collision scene: contacts (point, normal, depth), distances and time of impact.

A :class:`CollisionScene` holds named objects (triangle meshes, spheres, cylinders, boxes), each
with a pose in the world frame. python-fcl gives the broad phase (a dynamic AABB tree,
``fcl.DynamicAABBTreeCollisionManager``) and the narrow phase of the pairs that have no exact
formula here; the pairs that matter for grinding are computed exactly:

====================  ==============================================================  =====
pair                  how                                                             exact
====================  ==============================================================  =====
sphere - sphere       analytic                                                        yes
sphere - box          analytic (closest point on the box, nearest face inside)       yes
sphere - cylinder     analytic (closest point on the finite cylinder)                 yes
sphere - mesh         closest point on the triangles (static BVH, warm-started from   yes
                      the previous answer) + angle-weighted pseudo-normal sign; or
                      the object's *exact surface* callback (CAD) when it has one
box/cylinder - mesh   support-point iteration on the same exact closest point: the    yes*
                      primitive's point deepest along the surface normal (a
                      grinding wheel); a wheel side-on to a curved part: the
                      deepest point of its side line by root finding. *Not exact
                      (flagged, the deepest extreme point: a lower bound) when a
                      flat face of the primitive lies on a curved region (an area
                      contact); python-fcl when it straddles an edge of the part
others                python-fcl ``collide``/``distance``                              no
====================  ==============================================================  =====

Why not fcl for everything: python-fcl's sphere-mesh ``collide`` reports a negative depth, its
mesh-mesh depth is the depth of one triangle pair (0.2 mm for a 0.5 mm overlap), its
cylinder-mesh normals are arbitrary, and its shape-mesh ``distance`` returns nearest points in
mixed frames. ``Contact.exact`` tells the two kinds apart; a caller that needs a force from a
contact should only use exact ones (a sphere, box or cylinder tool against a mesh).

Conventions (all SI, world frame unless stated):

- ``Contact.normal`` is a unit vector pointing from b's surface towards a: moving a along it
  separates the pair. ``Contact.depth >= 0`` is the penetration (m). ``Contact.point`` lies on
  b's surface; ``point - depth * normal`` is the deepest point of a inside b.
- ``distance(a, b)`` is signed: > 0 the gap, < 0 minus the penetration depth.
- A mesh's faces are wound counter-clockwise seen from outside (face normals point out). A
  *closed* (watertight) mesh is a solid: any depth is measured. An *open* mesh is a one-sided
  surface (outside = the face-normal side): a sphere touches it while its centre is within one
  radius of the triangles, on either side; a sphere wholly behind it is not in contact (it has
  passed through: use :meth:`CollisionScene.time_of_impact` so that it never does).
- Exclusions (:meth:`CollisionScene.exclude`) apply to the all-pairs queries
  (``contacts()``, ``contacts(a)``, :meth:`CollisionScene.min_distance`); an explicit pair
  ``contacts(a, b)`` / ``distance(a, b)`` is always answered.

Bad input raises :class:`~robot_grinding_sim.core.errors.InputError` (names, poses, sizes) or
:class:`~robot_grinding_sim.core.errors.GeometryError` (meshes; see
:func:`~robot_grinding_sim.core.geometry.meshquery.prepare_mesh` for the checks and documented repairs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import fcl
import numpy as np
import numpy.typing as npt
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import GeometryError, InputError
from robot_grinding_sim.core.geometry.meshquery import (
    PreparedMesh,
    load_mesh_file,
    pose_problem,
    prepare_mesh,
    signed_closest_world,
)

FloatArray = npt.NDArray[np.float64]

#: signature of an exact-surface callback: points (k, 3) in the object's frame ->
#: (closest points on the true surface (k, 3), unit outward normals there (k, 3)), same frame.
SurfaceFn = Callable[[FloatArray], tuple[npt.ArrayLike, npt.ArrayLike]]

_SPHERE, _BOX, _CYLINDER, _MESH = "sphere", "box", "cylinder", "mesh"


@dataclass(slots=True)
class Contact:
    """One contact between objects a and b (world frame, SI). (Not frozen: a frozen dataclass
    costs 3 us more per contact, a third of a contact query.)

    Attributes:
        point: (3,) point on b's surface, m.
        normal: (3,) unit, from b's surface towards a (the direction that separates a).
        depth: penetration, m, >= 0.
        a, b: object names.
        exact: True when depth and normal come from an exact formula (see module docstring);
            False for python-fcl's narrow phase (mesh-mesh, box-mesh, ...): not a force input.
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
class _Object:
    name: str
    kind: str
    geom: Any
    fobj: Any
    T: FloatArray
    params: FloatArray  # sphere (r,); box (hx, hy, hz); cylinder (r, half length); mesh ()
    rot_radius: float  # farthest point of the geometry from its frame origin, for motion bounds
    mesh: PreparedMesh | None = None
    surface: SurfaceFn | None = None
    surface_tol: float = 0.0
    dirty: bool = True
    sig: tuple = ()
    robot_link: str | None = None
    robot_origin: FloatArray | None = None
    extra: dict = field(default_factory=dict)


class _Unsettled(Exception):
    """Internal: a refinement that cannot finish (an open mesh query cut off)."""


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InputError(f"object name must be a non-empty string, got {name!r}")
    return name


def _positive(value: Any, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise InputError(f"{what} must be a positive finite number, got {value!r}")
    return v


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


def _interp_pose(T0: FloatArray, T1: FloatArray, rotvec: FloatArray, s: float) -> FloatArray:
    """Pose at fraction s of the screw-free linear motion T0 -> T1 (translation linear, rotation
    about a fixed axis at constant rate: R(s) = R0 exp(s log(R0^T R1)))."""
    T = np.eye(4)
    T[:3, :3] = T0[:3, :3] @ Rotation.from_rotvec(s * rotvec).as_matrix()
    T[:3, 3] = (1.0 - s) * T0[:3, 3] + s * T1[:3, 3]
    return T


class CollisionScene:
    """Named collision objects with world poses; contacts, distances, time of impact.

    See the module docstring for the conventions. Typical grinding use::

        scene = CollisionScene()
        scene.add_mesh_file("workpiece", "part.stl", scale=1e-3)
        scene.add_sphere("tool", 0.02)
        scene.set_pose("tool", T_world_tool)
        for c in scene.contacts("tool", "workpiece"):
            f = K * c.depth * c.normal  # force on the tool, N

    Args:
        tiny: Below this centre-to-surface distance (m) the normal is taken from the surface
            (pseudo-normal / face normal) instead of the centre direction.
        toi_tolerance: Time of impact: a pair closer than this (m) is touching.
        toi_max_iterations: Conservative-advancement iterations before giving up (the answer
            returned then is still conservative: at or before the first touch).
        max_fcl_contacts: Contacts requested from python-fcl per inexact pair.
    """

    def __init__(self, tiny: float = 1e-10, toi_tolerance: float = 1e-9, toi_max_iterations: int = 1000,
                 max_fcl_contacts: int = 16) -> None:
        self.tiny = _positive(tiny, "tiny")
        self.toi_tolerance = _positive(toi_tolerance, "toi_tolerance")
        self.toi_max_iterations = int(_positive(toi_max_iterations, "toi_max_iterations"))
        self.max_fcl_contacts = int(_positive(max_fcl_contacts, "max_fcl_contacts"))
        self._objects: dict[str, _Object] = {}
        self._excluded: set[frozenset[str]] = set()
        self._manager = fcl.DynamicAABBTreeCollisionManager()
        self._manager_ready = False
        self._warm: dict[tuple[str, str], int] = {}
        self._robot: dict[str, Any] | None = None
        self._buf = np.empty(9)  # output buffer of the numba kernels

    # ------------------------------------------------------------------------------------------
    # building the scene

    @property
    def names(self) -> list[str]:
        """Object names in the order they were added."""
        return list(self._objects)

    def __contains__(self, name: object) -> bool:
        return name in self._objects

    def _add(self, name: str, kind: str, geom: Any, params: FloatArray, rot_radius: float,
             pose: Any, mesh: PreparedMesh | None = None) -> None:
        name = _check_name(name)
        if name in self._objects:
            raise InputError(f"an object named '{name}' is already in the scene")
        T = np.eye(4) if pose is None else check_pose(pose, f"pose of '{name}'")
        fobj = fcl.CollisionObject(geom, fcl.Transform())
        obj = _Object(name, kind, geom, fobj, T, params, rot_radius, mesh=mesh)
        self._objects[name] = obj
        self._manager.registerObject(fobj)
        self._manager_ready = False

    def add_sphere(self, name: str, radius: float, pose: Any = None) -> None:
        """A sphere of ``radius`` (m) centred at the object's frame origin."""
        r = _positive(radius, f"radius of sphere '{name}'")
        self._add(name, _SPHERE, fcl.Sphere(r), np.array([r]), 0.0, pose)

    def add_box(self, name: str, size: npt.ArrayLike, pose: Any = None) -> None:
        """A box of full extents ``size`` (3,) (m) centred at the frame origin, axis-aligned in it."""
        try:
            s = np.array(size, dtype=np.float64).reshape(3)
        except (TypeError, ValueError):
            raise InputError(f"size of box '{name}' must be 3 numbers, got {size!r}") from None
        for k, v in enumerate(s):
            _positive(v, f"size[{k}] of box '{name}'")
        self._add(name, _BOX, fcl.Box(*s), s / 2.0, float(np.linalg.norm(s / 2.0)), pose)

    def add_cylinder(self, name: str, radius: float, length: float, pose: Any = None) -> None:
        """A solid cylinder of ``radius`` and ``length`` (m) along the frame's z axis, centred."""
        r = _positive(radius, f"radius of cylinder '{name}'")
        h = _positive(length, f"length of cylinder '{name}'")
        self._add(name, _CYLINDER, fcl.Cylinder(r, h), np.array([r, h / 2.0]), math.hypot(r, h / 2.0), pose)

    def add_mesh(self, name: str, vertices: npt.ArrayLike, faces: npt.ArrayLike, pose: Any = None,
                 closed: bool | None = None) -> PreparedMesh:
        """A triangle mesh: vertices (n, 3) in m in the object frame, faces (k, 3) wound
        counter-clockwise seen from outside.

        Args:
            closed: True: must be watertight (a solid), else GeometryError; False: a one-sided
                surface; None: closed if watertight. See the module docstring.

        Returns:
            The validated mesh (after the documented repairs).
        """
        _check_name(name)
        mesh = prepare_mesh(name, vertices, faces, closed=closed)
        bvh = fcl.BVHModel()
        bvh.beginModel(len(mesh.vertices), len(mesh.faces))
        bvh.addSubModel(mesh.vertices, mesh.faces)
        bvh.endModel()
        self._add(name, _MESH, bvh, np.zeros(0), mesh.radius, pose, mesh=mesh)
        return mesh

    def add_mesh_file(self, name: str, path: str, pose: Any = None, scale: float = 1.0,
                      closed: bool | None = None) -> PreparedMesh:
        """A mesh read from a file through trimesh (STL, OBJ, PLY, ...); ``scale`` multiplies
        the file's coordinates (1e-3 for millimetres). See :meth:`add_mesh`."""
        v, f = load_mesh_file(path, scale)
        return self.add_mesh(name, v, f, pose=pose, closed=closed)

    def remove(self, name: str) -> None:
        """Remove an object (and its exclusions)."""
        obj = self._get(name)
        self._manager.unregisterObject(obj.fobj)
        self._manager_ready = False
        del self._objects[name]
        self._excluded = {p for p in self._excluded if name not in p}
        self._warm = {k: v for k, v in self._warm.items() if name not in k}

    def set_exact_surface(self, name: str, surface: SurfaceFn | None, tolerance: float | None = None) -> None:
        """Give a mesh object the true surface it was tessellated from (e.g. a CAD face).

        When set, sphere contacts and distances against this object use ``surface`` for the
        closest point and normal; the mesh still does the broad phase and decides which queries
        come close enough to need the surface.

        Args:
            surface: ``f(points (k, 3)) -> (closest (k, 3), normals (k, 3))``, all in the
                object's frame, normals unit and pointing out of the part; None removes it.
            tolerance: Largest distance (m) between mesh and true surface. Default: estimated as
                twice the largest deviation of the face centroids and vertices from ``surface``.

        Raises:
            GeometryError: the object is not a mesh, or ``surface`` fails or returns bad values.
        """
        obj = self._get(name)
        if obj.kind != _MESH or obj.mesh is None:
            raise GeometryError(f"object '{name}' is a {obj.kind}: only meshes take an exact surface")
        if surface is None:
            obj.surface, obj.surface_tol = None, 0.0
            return
        if not callable(surface):
            raise InputError(f"exact surface of '{name}' must be callable, got {surface!r}")
        obj.surface = surface
        if tolerance is None:
            m = obj.mesh
            pts = np.vstack([m.vertices[m.faces].mean(axis=1), m.vertices])
            closest, _ = self._eval_surface(obj, pts)
            tol = 2.0 * float(np.linalg.norm(closest - pts, axis=1).max()) + 1e-9
        else:
            tol = float(tolerance)
            if not math.isfinite(tol) or tol < 0.0:
                obj.surface = None
                raise InputError(f"tolerance of the exact surface of '{name}' must be >= 0, "
                                 f"got {tolerance!r}")
        obj.surface_tol = tol

    def _eval_surface(self, obj: _Object, pts: FloatArray) -> tuple[FloatArray, FloatArray]:
        assert obj.surface is not None
        try:
            p, n = obj.surface(pts)
            p = np.asarray(p, dtype=np.float64).reshape(pts.shape)
            n = np.asarray(n, dtype=np.float64).reshape(pts.shape)
        except Exception as exc:  # a user callback: any failure becomes a clear error
            raise GeometryError(f"exact surface of '{obj.name}' failed: {exc}") from None
        norm = np.linalg.norm(n, axis=1)
        if not (np.isfinite(p).all() and np.isfinite(norm).all() and (norm > 0.0).all()):
            raise GeometryError(f"exact surface of '{obj.name}' returned NaN/inf points or zero normals")
        return p, n / norm[:, None]

    # ------------------------------------------------------------------------------------------
    # poses and exclusions

    def _get(self, name: str) -> _Object:
        try:
            return self._objects[name]
        except (KeyError, TypeError):
            have = ", ".join(self._objects)
            raise InputError(f"no object named {name!r} in the scene (have: {have})") from None

    def set_pose(self, name: str, T: Any) -> None:
        """Set the world pose (4, 4) of an object."""
        obj = self._get(name)
        obj.T = check_pose(T, f"pose of '{name}'")
        obj.dirty = True

    def pose(self, name: str) -> FloatArray:
        """A copy of the world pose (4, 4) of an object."""
        return self._get(name).T.copy()

    def shape(self, name: str) -> tuple[str, FloatArray]:
        """(kind, parameters) of an object: ("sphere", [radius]), ("box", [size x, y, z]),
        ("cylinder", [radius, length]) or ("mesh", []), m."""
        obj = self._get(name)
        if obj.kind == _BOX:
            return obj.kind, 2.0 * obj.params
        if obj.kind == _CYLINDER:
            return obj.kind, np.array([obj.params[0], 2.0 * obj.params[1]])
        return obj.kind, obj.params.copy()

    def mesh(self, name: str) -> PreparedMesh:
        """The validated mesh of a mesh object."""
        obj = self._get(name)
        if obj.mesh is None:
            raise InputError(f"object '{name}' is a {obj.kind}, not a mesh")
        return obj.mesh

    def exclude(self, a: str, b: str) -> None:
        """Leave the pair out of all-pairs queries (e.g. adjacent robot links)."""
        self._get(a), self._get(b)
        self._excluded.add(frozenset((a, b)))

    def include(self, a: str, b: str) -> None:
        """Undo :meth:`exclude`."""
        self._excluded.discard(frozenset((a, b)))

    def is_excluded(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._excluded

    def _sync(self, objs: Iterable[_Object]) -> None:
        """Push the poses of dirty objects to fcl (lazily: only fcl queries need them)."""
        changed = []
        for obj in objs:
            if obj.dirty:
                T = obj.T
                obj.fobj.setTransform(fcl.Transform(T[:3, :3], T[:3, 3]))
                obj.sig = self._signature(obj.fobj)
                obj.dirty = False
                changed.append(obj.fobj)
        if not self._manager_ready:
            # after (un)registering: refit every leaf to its object's current AABB, then rebuild
            self._manager.update()
            self._manager_ready = True
        elif changed:
            self._manager.update(changed)

    @staticmethod
    def _signature(fobj: Any) -> tuple:
        # python-fcl hands the broad-phase callback fresh wrapper objects, without a way back to
        # ours; the node type and the pose as fcl stores it identify them (ties are resolved
        # by trying every object with that signature: the narrow phase decides).
        return (fobj.getNodeType(), fobj.getTranslation().tobytes(), fobj.getRotation().tobytes())

    def _broad_pairs(self, a: str | None) -> list[tuple[str, str]]:
        objs = list(self._objects.values())
        self._sync(objs)
        by_sig: dict[tuple, list[str]] = {}
        for obj in objs:
            by_sig.setdefault(obj.sig, []).append(obj.name)
        raw: list[tuple[tuple, tuple]] = []

        def callback(o1: Any, o2: Any, data: list) -> bool:
            data.append((self._signature(o1), self._signature(o2)))
            return False

        if a is None:
            self._manager.collide(raw, callback)
        else:
            self._manager.collide(self._objects[a].fobj, raw, callback)
        order = {n: k for k, n in enumerate(self._objects)}
        pairs = set()
        for s1, s2 in raw:
            for n1 in by_sig.get(s1, ()):
                for n2 in by_sig.get(s2, ()):
                    if n1 == n2 or frozenset((n1, n2)) in self._excluded:
                        continue
                    if a is not None:
                        if a not in (n1, n2):
                            continue
                        pairs.add((a, n2 if n1 == a else n1))
                    else:
                        pairs.add((n1, n2) if order[n1] < order[n2] else (n2, n1))
        return sorted(pairs, key=lambda p: (order[p[0]], order[p[1]]))

    # ------------------------------------------------------------------------------------------
    # exact queries of a sphere centre against an object

    def _centre_query(self, b: _Object, c_w: FloatArray, radius: float, key: tuple[str, str],
                      need_exact_surface: bool) -> tuple[float, FloatArray, FloatArray, bool] | None:
        """Signed distance of point c_w (world) to b's surface.

        Returns:
            (sd, p_w, n_w, exact): sd > 0 outside, < 0 inside, m; p_w the closest point on b's
            surface; n_w the unit outward normal at p_w towards c (from b towards the point);
            None for an open mesh when the point is more than ``radius`` behind it.
        """
        kind = b.kind
        if kind == _MESH:
            return self._centre_mesh(b, c_w, radius, key, need_exact_surface)
        R = b.T[:3, :3]
        c = R.T @ (c_w - b.T[:3, 3])
        if kind == _SPHERE:
            rb = b.params[0]
            d = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
            n = c / d if d > self.tiny else np.array([0.0, 0.0, 1.0])
            sd, p = d - rb, rb * n
        elif kind == _BOX:
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
        else:  # cylinder
            r, hl = b.params
            rho = math.hypot(c[0], c[1])
            radial = np.array([c[0] / rho, c[1] / rho, 0.0]) if rho > self.tiny else np.array([1.0, 0.0, 0.0])
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
        return float(sd), R @ p + b.T[:3, 3], R @ n, True

    def _centre_mesh(self, b: _Object, c_w: FloatArray, radius: float, key: tuple[str, str],
                     need_exact_surface: bool) -> tuple[float, FloatArray, FloatArray, bool] | None:
        m = b.mesh
        assert m is not None
        warm = self._warm.get(key, -1)
        if m.orientable:
            out = self._buf
            sd, tri = signed_closest_world(c_w, b.T, *m.query_arrays, warm, self.tiny, out)
            p, n, c = out[0:3].copy(), out[3:6].copy(), out[6:9].copy()
            exact = True
        else:  # no inside: the unsigned distance, flagged inexact
            R = b.T[:3, :3]
            c = R.T @ (c_w - b.T[:3, 3])
            d2, tri, _, q = m.closest(c, warm)
            sd = math.sqrt(d2)
            nl = (c - q) / sd if sd > self.tiny else m.face_normals[tri]
            p, n = R @ q + b.T[:3, 3], R @ nl
            exact = False
        self._warm[key] = int(tri)
        if b.surface is not None and (need_exact_surface or sd - radius < b.surface_tol):
            R = b.T[:3, :3]
            ps, ns = self._eval_surface(b, c[None, :])
            sd = float(ns[0] @ (c - ps[0]))
            return sd, R @ ps[0] + b.T[:3, 3], R @ ns[0], True
        if not m.closed and sd <= -radius:
            return None
        return float(sd), p, n, exact

    #: directions closer than this (rad) to a face or edge normal of a box/cylinder count as a tie
    TIE_ANGLE = 1e-6

    @classmethod
    def _support(cls, P: _Object, d: FloatArray) -> tuple[FloatArray, list[FloatArray]]:
        """Point of the convex primitive P farthest along the world direction d (3,), and the
        other extreme points of the face or edge it lies on when d is (within TIE_ANGLE) normal
        to one (a tie: the chosen point is then the middle of that face or edge)."""
        R, c = P.T[:3, :3], P.T[:3, 3]
        dl = R.T @ (d / np.linalg.norm(d))
        eps = cls.TIE_ANGLE
        ties: list[FloatArray] = []
        if P.kind == _BOX:
            h = P.params
            local = np.where(np.abs(dl) > eps, np.sign(dl) * h, 0.0)
            free = [i for i in range(3) if abs(dl[i]) <= eps]
            for k in range(1, 2 ** len(free)):  # the corners of the tie face / ends of the edge
                corner = local.copy()
                for j, i in enumerate(free):
                    corner[i] = h[i] if (k >> j) & 1 else -h[i]
                ties.append(R @ corner + c)
        else:  # cylinder along local z
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
        return R @ local + c, ties

    def _convex_mesh(self, P: _Object, M: _Object) -> tuple | None:
        """Deepest point of a box/cylinder P in mesh M, by support-point iteration.

        With n the mesh's outward normal at the contact, the deepest point of P is its support
        point s(-n); its closest point on the mesh gives a new n, until n is stationary (a
        point of P deepest along the surface normal: exact against a flat region, and the
        unique answer against a convex one when the support point is unique). When s lies on a
        face or edge of P normal to n (a tie: a wheel face-on or side-on), the depth is exact
        only if the surface is flat over that face/edge, checked at its extreme points; if not,
        the deepest of those points is reported with ``exact=False`` (a lower bound).

        Returns:
            None to fall back to python-fcl (a non-orientable mesh, or a support point outside
            while fcl reports a collision, e.g. P straddling an edge of the part); [] for no
            contact; else (point on M, normal, depth, deepest point of P, exact).
        """
        assert M.mesh is not None
        if not M.mesh.orientable:
            return None
        key = (P.name, M.name)
        big = P.rot_radius + 1.0  # open meshes: never cut off the query below
        q = self._centre_mesh(M, P.T[:3, 3], big, key, False)
        if q is None or q[0] > P.rot_radius:
            return []  # P lies inside a ball around its centre that does not reach the mesh
        n = q[2]
        converged = False
        best = None
        seen: list[FloatArray] = []
        for _ in range(30):
            s_deep, ties = self._support(P, -n)
            if any(float(np.abs(s_deep - x).max()) < 1e-15 for x in seen[:-1]):
                break  # a cycle between support points (a flat face on a curved region)
            seen.append(s_deep)
            q = self._centre_mesh(M, s_deep, big, key, True)
            if q is None:
                return None
            sd, p, n_new, exact = q
            if best is None or sd < best[0]:
                best = (sd, p, n_new, s_deep, ties, n)
            converged = float(n_new @ n) > 1.0 - 1e-15
            n = n_new
            if converged:
                best = (sd, p, n_new, s_deep, ties, n_new)
                break
        assert best is not None
        sd, p, n, s_deep, ties, n_used = best
        exact = converged and exact
        flat = True
        for x in ties:  # a tie: flat over the face/edge, or report its deepest extreme point
            qx = self._centre_mesh(M, x, big, key, True)
            if qx is None:
                continue
            if abs(qx[0] - (sd + float(n_used @ (x - s_deep)))) > 1e-10:
                flat = False
            if qx[0] < sd:
                sd, p, n, s_deep = qx[0], qx[1], qx[2], x
        if not flat:
            exact = False
        if P.kind == _CYLINDER and (not flat or not converged) and len(ties) != 8:
            # side-on (or oscillating between the ends of the side line): a 1-D problem, solved
            refined = self._refine_side_line(P, M, n_used, big, key)
            if refined is not None and refined[0] <= sd + 1e-12:
                sd, p, n, s_deep = refined
                exact = True
        if sd >= 0.0:
            # the deepest point along the normal is outside: no contact, unless P straddles an
            # edge of the part elsewhere, which python-fcl's boolean test detects (then its
            # inexact contacts are used)
            self._sync((P, M))
            hit = fcl.collide(P.fobj, M.fobj, fcl.CollisionRequest(), fcl.CollisionResult()) > 0
            return None if hit else []
        return p, n, float(-sd), s_deep, exact

    def _refine_side_line(self, P: _Object, M: _Object, n: FloatArray, big: float, key: tuple[str, str]
                          ) -> tuple[float, FloatArray, FloatArray, FloatArray] | None:
        """Deepest point of a cylinder's side line on a curved surface (a wheel side-on).

        The side line facing the surface is the support of -n with n's axial part removed; along
        it, x(t) = e0 + t (e1 - e0) and d sd / dt = n(x) . (e1 - e0): the deepest point is a root
        of that (brentq) or an end. The line is then recomputed from the normal there until it
        no longer moves. Returns None if it does not settle (the contact stays flagged).
        """
        from scipy.optimize import brentq

        axis = P.T[:3, 2]
        line = None
        best: tuple | None = None
        for _ in range(10):
            nperp = n - float(n @ axis) * axis
            norm = float(np.linalg.norm(nperp))
            if norm < 1e-9:
                return None  # face-on: not a line contact
            nperp /= norm
            _, ends = self._support(P, -nperp)
            if len(ends) != 2:
                return None
            e0, e1 = ends
            seg = e1 - e0
            if best is not None and line is not None and float(np.linalg.norm(e0 - line)) < 1e-13:
                return best
            line = e0

            def query(t: float, e0: FloatArray = e0, seg: FloatArray = seg) -> tuple:
                x = e0 + t * seg
                q = self._centre_mesh(M, x, big, key, True)
                if q is None:
                    raise _Unsettled
                return q[0], q[1], q[2], x

            try:
                q0, q1 = query(0.0), query(1.0)
                g0, g1 = float(q0[2] @ seg), float(q1[2] @ seg)
                if g0 < 0.0 < g1:
                    t = brentq(lambda t, seg=seg: float(query(t)[2] @ seg), 0.0, 1.0, xtol=1e-15, rtol=1e-15)
                    best = query(t)
                else:
                    best = min(q0, q1, key=lambda q: q[0])
            except _Unsettled:
                return None
            n = best[2]
        return None

    # ------------------------------------------------------------------------------------------
    # contacts

    def contacts(self, a: str | None = None, b: str | None = None) -> list[Contact]:
        """Contacts, world frame (see :class:`Contact` for the conventions).

        - ``contacts(a, b)``: between a and b (always answered, even if excluded).
        - ``contacts(a)``: a against every other object not excluded with it (a is ``Contact.a``).
        - ``contacts()``: every pair not excluded, each once (the object added first is ``a``).

        A sphere against another object gives at most one contact (the deepest point); python-fcl
        pairs give up to ``max_fcl_contacts`` (``exact=False``).
        """
        if b is not None and a is None:
            a, b = b, a
        if a is not None and b is not None:
            return self._pair_contacts(self._get(a), self._get(b))
        if a is not None:
            self._get(a)
        out: list[Contact] = []
        for n1, n2 in self._broad_pairs(a):
            out.extend(self._pair_contacts(self._objects[n1], self._objects[n2]))
        return out

    def _pair_contacts(self, A: _Object, B: _Object) -> list[Contact]:
        if A is B:
            raise InputError(f"contacts of '{A.name}' with itself are undefined")
        if A.kind == _SPHERE or B.kind == _SPHERE:
            flip = A.kind != _SPHERE
            S, O = (B, A) if flip else (A, B)
            radius = S.params[0]
            res = self._centre_query(O, S.T[:3, 3], radius, (S.name, O.name), False)
            if res is None:
                return []
            sd, p, n, exact = res
            depth = radius - sd
            if depth < 0.0:
                return []
            if flip:  # the point on the sphere's surface; normal from the sphere towards the other
                return [Contact(S.T[:3, 3] - radius * n, -n, float(depth), A.name, B.name, exact)]
            return [Contact(p, n, float(depth), A.name, B.name, exact)]
        convex = (_BOX, _CYLINDER)
        if (A.kind in convex and B.kind == _MESH) or (A.kind == _MESH and B.kind in convex):
            flip = A.kind == _MESH
            P, M = (B, A) if flip else (A, B)
            res = self._convex_mesh(P, M)
            if res is not None:
                if not res:
                    return []
                point, n, depth, s_deep, exact = res
                if flip:  # the point on the primitive's surface; normal from it towards the mesh
                    return [Contact(s_deep, -n, depth, A.name, B.name, exact)]
                return [Contact(point, n, depth, A.name, B.name, exact)]
        self._sync((A, B))
        req = fcl.CollisionRequest(num_max_contacts=self.max_fcl_contacts, enable_contact=True)
        res = fcl.CollisionResult()
        fcl.collide(A.fobj, B.fobj, req, res)
        out = []
        for c in res.contacts:
            # fcl's normal points from its o1 to its o2; o1 is not always the first argument.
            n = np.asarray(c.normal, dtype=np.float64)
            n = n if c.o1 is B.geom else -n
            norm = float(np.linalg.norm(n))
            n = n / norm if norm > 0.0 else np.array([0.0, 0.0, 1.0])
            out.append(Contact(np.asarray(c.pos, dtype=np.float64), n, abs(float(c.penetration_depth)),
                               A.name, B.name, False))
        return out

    # ------------------------------------------------------------------------------------------
    # distance

    def distance(self, a: str, b: str) -> tuple[float, FloatArray, FloatArray]:
        """Signed distance between a and b and the closest points (world).

        Returns:
            (distance, point_a, point_b): distance > 0 the gap (m) with point_a on a and point_b
            on b; < 0 minus the penetration depth, point_a the deepest point of a inside b and
            point_b on b's surface. For python-fcl pairs in collision: minus the largest fcl
            depth (inexact, see module docstring) and both points at that fcl contact.
        """
        A, B = self._get(a), self._get(b)
        if A is B:
            raise InputError(f"distance of '{a}' to itself is undefined")
        if A.kind == _SPHERE or B.kind == _SPHERE:
            flip = A.kind != _SPHERE
            S, O = (B, A) if flip else (A, B)
            radius = S.params[0]
            res = self._centre_query(O, S.T[:3, 3], radius, (S.name, O.name), True)
            if res is None:  # behind an open surface: the gap to its back side
                d2, _, _, p_l = O.mesh.closest(O.T[:3, :3].T @ (S.T[:3, 3] - O.T[:3, 3]))
                p = O.T[:3, :3] @ p_l + O.T[:3, 3]
                n = (S.T[:3, 3] - p) / math.sqrt(d2)
                sd = math.sqrt(d2)
            else:
                sd, p, n, _ = res
            ps = S.T[:3, 3] - radius * n
            dist = float(sd - radius)
            return (dist, p, ps) if flip else (dist, ps, p)
        self._sync((A, B))
        req = fcl.DistanceRequest(enable_nearest_points=True)
        res = fcl.DistanceResult()
        d = float(fcl.distance(A.fobj, B.fobj, req, res))
        if d > 0.0:
            p1, p2 = (np.asarray(x, dtype=np.float64) for x in res.nearest_points)
            if (A.kind == _MESH) != (B.kind == _MESH):
                # python-fcl 0.7 shape-mesh distance: (point on the mesh, point on the shape) in
                # world whatever the argument order (pinned by test_collision.py).
                pm, pshape = p1, p2
                return (d, pm, pshape) if A.kind == _MESH else (d, pshape, pm)
            return d, p1, p2
        cs = self._pair_contacts(A, B)
        if not cs:
            return 0.0, res.nearest_points[0].copy(), res.nearest_points[1].copy()
        c = max(cs, key=lambda c: c.depth)
        if c.exact:  # the deepest point of a and the point on b's surface
            return -c.depth, c.point - c.depth * c.normal, c.point.copy()
        return -c.depth, c.point.copy(), c.point.copy()

    def min_distance(self, group_a: Iterable[str], group_b: Iterable[str] | None = None) -> MinDistance:
        """Smallest signed distance between any object of group_a and any of group_b (default:
        every object not in group_a), skipping excluded pairs. E.g. robot links vs workpiece.

        Raises:
            InputError: unknown names, or no pair left to measure.
        """
        ga = [self._get(n).name for n in group_a]
        gb = ([self._get(n).name for n in group_b] if group_b is not None
              else [n for n in self._objects if n not in ga])
        best: MinDistance | None = None
        for na in ga:
            for nb in gb:
                if na == nb or self.is_excluded(na, nb):
                    continue
                d, pa, pb = self.distance(na, nb)
                if best is None or d < best.distance:
                    best = MinDistance(d, na, nb, pa, pb)
        if best is None:
            raise InputError("min_distance: no pair of objects to measure (groups empty or all excluded)")
        return best

    # ------------------------------------------------------------------------------------------
    # time of impact

    def time_of_impact(self, a: str, T_start: Any, T_end: Any, b: str) -> float | None:
        """First contact of a moving a with a fixed b during a's linear motion T_start -> T_end.

        The pose of a is interpolated linearly in translation and at a constant rate about a
        fixed axis in rotation (R(s) = R0 exp(s log(R0^T R1))). Found by conservative
        advancement on the exact signed distance: each step advances s by
        distance / (|dp| + |dtheta| r_a), a bound on how far any point of a moves per unit s,
        so the first touch is never stepped over. The pose of a is left unchanged.

        Returns:
            The fraction s in [0, 1] at which a first comes within ``toi_tolerance`` of b (0 if
            it already touches at T_start), or None if it does not during the motion.
        """
        A, B = self._get(a), self._get(b)
        if A is B:
            raise InputError(f"time of impact of '{a}' with itself is undefined")
        T0 = check_pose(T_start, f"time_of_impact: T_start of '{a}'")
        T1 = check_pose(T_end, f"time_of_impact: T_end of '{a}'")
        rotvec = Rotation.from_matrix(T0[:3, :3].T @ T1[:3, :3]).as_rotvec()
        rate = float(np.linalg.norm(T1[:3, 3] - T0[:3, 3]) + np.linalg.norm(rotvec) * A.rot_radius)
        saved = A.T
        try:
            s = 0.0
            for _ in range(self.toi_max_iterations):
                A.T = _interp_pose(T0, T1, rotvec, s)
                A.dirty = True
                d = self.distance(a, b)[0]
                if d <= self.toi_tolerance:
                    return s
                if rate == 0.0:
                    return None
                s += d / rate
                if s > 1.0:
                    return None
            return s  # not converged (grazing motion): still at or before the first touch
        finally:
            A.T, A.dirty = saved, True

    # ------------------------------------------------------------------------------------------
    # robot (built from a RobotModel's collision geometry)

    def add_robot(self, model: Any, q: npt.ArrayLike, prefix: str = "", base_pose: Any = None,
                  exclude_adjacent: bool = True) -> list[str]:
        """Add a robot's collision geometry (URDF ``<collision>`` elements) at configuration q.

        Objects are named ``f"{prefix}{link}"`` (``f"{prefix}{link}#{k}"`` for the k-th extra
        element of a link). Pairs on the same rigid body or on adjacent bodies of the chain are
        excluded when ``exclude_adjacent``.

        Args:
            model: a :class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` (uses its
                ``collision_geometry``, ``link_poses(q)`` and ``chain.link_body``).
            q: (nq,) joint positions.
            prefix: prepended to the link names.
            base_pose: (4, 4) world pose of the robot's root link; identity by default.

        Returns:
            The names of the objects added.

        Raises:
            GeometryError: a mesh file that could not be found or read (naming the link).
        """
        if self._robot is not None:
            raise InputError("the scene already has a robot")
        base = np.eye(4) if base_pose is None else check_pose(base_pose, "robot base_pose")
        poses = model.link_poses(q)
        link_body = getattr(getattr(model, "chain", None), "link_body", {})
        added: list[str] = []
        count: dict[str, int] = {}
        try:
            for g in model.collision_geometry:
                k = count.get(g.link, 0)
                count[g.link] = k + 1
                name = f"{prefix}{g.link}" if k == 0 else f"{prefix}{g.link}#{k}"
                T = base @ poses[g.link] @ g.origin
                if g.kind == "sphere":
                    self.add_sphere(name, g.params["radius"], T)
                elif g.kind == "box":
                    self.add_box(name, g.params["size"], T)
                elif g.kind == "cylinder":
                    self.add_cylinder(name, g.params["radius"], g.params["length"], T)
                elif g.kind == "mesh":
                    if g.mesh_path is None:
                        raise GeometryError(f"collision mesh '{g.params.get('filename')}' of link "
                                            f"'{g.link}' was not found")
                    v, f = load_mesh_file(g.mesh_path)
                    v = v * np.asarray(g.params.get("scale", np.ones(3)), dtype=np.float64)
                    self.add_mesh(name, v, f, T)
                else:
                    raise GeometryError(f"link '{g.link}': unsupported collision geometry '{g.kind}'")
                obj = self._objects[name]
                obj.robot_link = g.link
                obj.robot_origin = np.asarray(g.origin, dtype=np.float64)
                added.append(name)
        except Exception:
            for name in added:  # nothing partial
                self.remove(name)
            raise
        if exclude_adjacent:
            body = {n: link_body.get(self._objects[n].robot_link, 0) for n in added}
            for i, n1 in enumerate(added):
                for n2 in added[i + 1:]:
                    if abs(body[n1] - body[n2]) <= 1:
                        self.exclude(n1, n2)
        self._robot = {"model": model, "names": added, "base": base}
        return added

    @property
    def robot_objects(self) -> list[str]:
        """Names of the objects :meth:`add_robot` added (empty without a robot)."""
        return [] if self._robot is None else list(self._robot["names"])

    def robot_objects_of(self, link: str) -> list[str]:
        """Names of the objects :meth:`add_robot` made from ``link``'s collision elements."""
        return [n for n in self.robot_objects if self._objects[n].robot_link == link]

    def set_robot_configuration(self, q: npt.ArrayLike) -> None:
        """Move the robot's objects to configuration q (nq,)."""
        if self._robot is None:
            raise InputError("the scene has no robot: call add_robot first")
        poses = self._robot["model"].link_poses(q)
        base = self._robot["base"]
        for name in self._robot["names"]:
            obj = self._objects[name]
            obj.T = base @ poses[obj.robot_link] @ obj.robot_origin
            obj.dirty = True
