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
                      the object's *exact surface* callback (CAD) when it has one and
                      its closest point is a foot of the perpendicular (beside the
                      face: the mesh's closest point, on the face's boundary)
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

The scene's objects, its results and the analytic formulas are in
:mod:`~robot_grinding_sim.core.geometry.collision_objects`, the support-point iteration in
:mod:`~robot_grinding_sim.core.geometry.convex_contact`, python-fcl's part in
:mod:`~robot_grinding_sim.core.geometry.fcl_scene`; this module keeps the scene and its queries.

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
from collections.abc import Iterable
from typing import Any

import fcl
import numpy as np
import numpy.typing as npt
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import GeometryError, InputError
from robot_grinding_sim.core.geometry.collision_objects import (
    BOX,
    CYLINDER,
    MESH,
    SPHERE,
    Contact,
    FloatArray,
    MinDistance,
    SceneObject,
    SurfaceFn,
    check_pose,
    interp_pose,
    primitive_closest,
)
from robot_grinding_sim.core.geometry.convex_contact import ConvexContact, deepest_in_mesh
from robot_grinding_sim.core.geometry.fcl_scene import FclBroadPhase, fcl_contacts, fcl_distance, fcl_overlaps
from robot_grinding_sim.core.geometry.meshquery import (
    PreparedMesh,
    load_mesh_file,
    prepare_mesh,
    signed_closest_world,
)
from robot_grinding_sim.core.geometry.robot_objects import adjacent_pairs, robot_shapes

#: largest tangential offset, m, of the exact surface's closest point from the perpendicular
#: through the query point for it to be the surface's answer (Gauss-Newton converges to 1e-12 m;
#: a clamped parameter, beside the face, leaves centimetres)
FOOT_TOLERANCE = 1e-7


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
        self._objects: dict[str, SceneObject] = {}
        self._excluded: set[frozenset[str]] = set()
        self._fcl = FclBroadPhase()
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
        obj = SceneObject(name, kind, geom, fobj, T, params, rot_radius, mesh=mesh)
        self._objects[name] = obj
        self._fcl.register(obj)

    def add_sphere(self, name: str, radius: float, pose: Any = None) -> None:
        """A sphere of ``radius`` (m) centred at the object's frame origin."""
        r = _positive(radius, f"radius of sphere '{name}'")
        self._add(name, SPHERE, fcl.Sphere(r), np.array([r]), 0.0, pose)

    def add_box(self, name: str, size: npt.ArrayLike, pose: Any = None) -> None:
        """A box of full extents ``size`` (3,) (m) centred at the frame origin, axis-aligned in it."""
        try:
            s = np.array(size, dtype=np.float64).reshape(3)
        except (TypeError, ValueError):
            raise InputError(f"size of box '{name}' must be 3 numbers, got {size!r}") from None
        for k, v in enumerate(s):
            _positive(v, f"size[{k}] of box '{name}'")
        self._add(name, BOX, fcl.Box(*s), s / 2.0, float(np.linalg.norm(s / 2.0)), pose)

    def add_cylinder(self, name: str, radius: float, length: float, pose: Any = None) -> None:
        """A solid cylinder of ``radius`` and ``length`` (m) along the frame's z axis, centred."""
        r = _positive(radius, f"radius of cylinder '{name}'")
        h = _positive(length, f"length of cylinder '{name}'")
        self._add(name, CYLINDER, fcl.Cylinder(r, h), np.array([r, h / 2.0]), math.hypot(r, h / 2.0), pose)

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
        self._add(name, MESH, bvh, np.zeros(0), mesh.radius, pose, mesh=mesh)
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
        self._fcl.unregister(obj)
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
                object's frame, normals unit and pointing out of the part; it may return a
                third array ``on_face`` (k,) bool, False where the closest point lies outside
                the face (its parameters clamped or beyond the face's range): the mesh answers
                those. None removes it.
            tolerance: Largest distance (m) between mesh and true surface. Default: estimated as
                twice the largest deviation of the face centroids and vertices from ``surface``.

        Raises:
            GeometryError: the object is not a mesh, or ``surface`` fails or returns bad values.
        """
        obj = self._get(name)
        if obj.kind != MESH or obj.mesh is None:
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
            closest, _, _ = self._eval_surface(obj, pts)
            tol = 2.0 * float(np.linalg.norm(closest - pts, axis=1).max()) + 1e-9
        else:
            tol = float(tolerance)
            if not math.isfinite(tol) or tol < 0.0:
                obj.surface = None
                raise InputError(f"tolerance of the exact surface of '{name}' must be >= 0, "
                                 f"got {tolerance!r}")
        obj.surface_tol = tol

    def exact_surface_tolerance(self, name: str) -> float:
        """Largest distance (m) between a mesh object and its exact surface (0 without one)."""
        return self._get(name).surface_tol

    def _eval_surface(self, obj: SceneObject, pts: FloatArray, hints: FloatArray | None = None,
                      sd_mesh: float = 0.0) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        """(closest points (k, 3), unit normals (k, 3), on_face (k,)) of the object's exact surface;
        hints: the mesh's closest points (k, 3) at signed distance sd_mesh, for a surface that
        takes them (``takes_hints``)."""
        assert obj.surface is not None
        try:
            out = (obj.surface(pts) if hints is None
                   else obj.surface(pts, hints, np.full(len(pts), sd_mesh), obj.surface_tol))
            p = np.asarray(out[0], dtype=np.float64).reshape(pts.shape)
            n = np.asarray(out[1], dtype=np.float64).reshape(pts.shape)
            on = (np.asarray(out[2], dtype=bool).reshape(len(pts)) if len(out) > 2
                  else np.ones(len(pts), dtype=bool))
        except Exception as exc:  # a user callback: any failure becomes a clear error
            raise GeometryError(f"exact surface of '{obj.name}' failed: {exc}") from None
        norm = np.linalg.norm(n, axis=1)
        if not (np.isfinite(p).all() and np.isfinite(norm).all() and (norm > 0.0).all()):
            raise GeometryError(f"exact surface of '{obj.name}' returned NaN/inf points or zero normals")
        return p, n / norm[:, None], on

    # ------------------------------------------------------------------------------------------
    # poses and exclusions

    def _get(self, name: str) -> SceneObject:
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
        if obj.kind == BOX:
            return obj.kind, 2.0 * obj.params
        if obj.kind == CYLINDER:
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

    # ------------------------------------------------------------------------------------------
    # exact queries of a sphere centre against an object

    def _centre_query(self, b: SceneObject, c_w: FloatArray, radius: float, key: tuple[str, str],
                      need_exact_surface: bool) -> tuple[float, FloatArray, FloatArray, bool] | None:
        """Signed distance of point c_w (world) to b's surface.

        Returns:
            (sd, p_w, n_w, exact): sd > 0 outside, < 0 inside, m; p_w the closest point on b's
            surface; n_w the unit outward normal at p_w towards c (from b towards the point);
            None for an open mesh when the point is more than ``radius`` behind it.
        """
        if b.kind == MESH:
            return self._centre_mesh(b, c_w, radius, key, need_exact_surface)
        sd, p, n = primitive_closest(b, c_w, self.tiny)
        return sd, p, n, True

    def _centre_mesh(self, b: SceneObject, c_w: FloatArray, radius: float, key: tuple[str, str],
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
            # the mesh's closest point (part frame) checks the surface's answer (FaceProjector)
            hint = (R.T @ (p - b.T[:3, 3]))[None, :] if getattr(b.surface, "takes_hints", False) else None
            ps, ns, on_face = self._eval_surface(b, c[None, :], hint, float(sd))
            r = c - ps[0]
            sd_exact = float(ns[0] @ r)
            # the surface answers where its closest point is on the face and the foot of the
            # perpendicular from c; beside the face (parameters clamped, or the surface carried on
            # past the face's edge) the normal distance means nothing (it can read centimetres of
            # penetration 10 cm from the part), and the mesh's closest point (on the face's
            # boundary) is the distance
            if on_face[0] and math.sqrt(max(float(r @ r) - sd_exact * sd_exact, 0.0)) <= FOOT_TOLERANCE:
                return sd_exact, R @ ps[0] + b.T[:3, 3], R @ ns[0], True
        if not m.closed and sd <= -radius:
            return None
        return float(sd), p, n, exact

    def _convex_mesh(self, P: SceneObject, M: SceneObject) -> ConvexContact | list | None:
        """Deepest point of a box/cylinder P in mesh M
        (:func:`~robot_grinding_sim.core.geometry.convex_contact.deepest_in_mesh`); None to fall
        back to python-fcl (also for a non-orientable mesh), [] for no contact."""
        assert M.mesh is not None
        if not M.mesh.orientable:
            return None
        key = (P.name, M.name)
        big = P.rot_radius + 1.0  # open meshes: never cut off the query

        def query(x: FloatArray, exact_surface: bool) -> tuple[float, FloatArray, FloatArray, bool] | None:
            return self._centre_mesh(M, x, big, key, exact_surface)

        def overlaps() -> bool:
            self._fcl.sync((P, M))
            return fcl_overlaps(P, M)

        return deepest_in_mesh(P, query, overlaps)

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
        for n1, n2 in self._fcl.pairs(self._objects, self._excluded, a):
            out.extend(self._pair_contacts(self._objects[n1], self._objects[n2]))
        return out

    def _pair_contacts(self, A: SceneObject, B: SceneObject) -> list[Contact]:
        if A is B:
            raise InputError(f"contacts of '{A.name}' with itself are undefined")
        if A.kind == SPHERE or B.kind == SPHERE:
            flip = A.kind != SPHERE
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
        convex = (BOX, CYLINDER)
        if (A.kind in convex and B.kind == MESH) or (A.kind == MESH and B.kind in convex):
            flip = A.kind == MESH
            P, M = (B, A) if flip else (A, B)
            res = self._convex_mesh(P, M)
            if res is not None:
                if not res:
                    return []
                point, n, depth, s_deep, exact = res
                if flip:  # the point on the primitive's surface; normal from it towards the mesh
                    return [Contact(s_deep, -n, depth, A.name, B.name, exact)]
                return [Contact(point, n, depth, A.name, B.name, exact)]
        self._fcl.sync((A, B))
        return fcl_contacts(A, B, self.max_fcl_contacts)

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
        if A.kind == SPHERE or B.kind == SPHERE:
            flip = A.kind != SPHERE
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
        self._fcl.sync((A, B))
        d, pa, pb = fcl_distance(A, B)
        if d > 0.0:
            return d, pa, pb
        cs = self._pair_contacts(A, B)
        if not cs:
            return 0.0, pa, pb
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
                A.T = interp_pose(T0, T1, rotvec, s)
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
        shapes = robot_shapes(model, q, prefix, base)
        added: list[str] = []
        try:
            for sh in shapes:
                if sh.kind == SPHERE:
                    self.add_sphere(sh.name, sh.size[0], sh.T)
                elif sh.kind == BOX:
                    self.add_box(sh.name, sh.size, sh.T)
                elif sh.kind == CYLINDER:
                    self.add_cylinder(sh.name, *sh.size, sh.T)
                else:
                    self.add_mesh(sh.name, sh.vertices, sh.faces, sh.T)
                added.append(sh.name)
                obj = self._objects[sh.name]
                obj.robot_link, obj.robot_origin = sh.link, sh.origin
        except Exception:
            for name in added:  # nothing partial
                self.remove(name)
            raise
        if exclude_adjacent:
            for n1, n2 in adjacent_pairs(model, shapes):
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
