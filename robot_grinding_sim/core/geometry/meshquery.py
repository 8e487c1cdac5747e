"""Exact closest-point queries on triangle meshes (numba kernels) and mesh validation.

This is the narrow phase behind :mod:`robot_grinding_sim.core.geometry.collision` for a primitive tool
(sphere) against a triangle mesh, where python-fcl's penetration depth is wrong (negative for
sphere-mesh, one triangle pair for mesh-mesh).

Closest point on a triangle: Ericson, *Real-Time Collision Detection* (2005), 5.1.5; the
kernel also returns which feature (face, edge, vertex) holds the point.
Inside/outside: the sign of ``(x - p) . n_pseudo`` with the angle-weighted pseudo-normal of that
feature (Baerentzen and Aanaes, "Signed distance computation using the angle weighted
pseudonormal", IEEE TVCG 11(3), 2005). The sign is exact for a closed, consistently wound
(orientable) mesh at any point, including points whose closest feature is an edge or vertex.

Spatial search: a static bounding-volume hierarchy (axis-aligned boxes, median split, at most
``LEAF_SIZE`` triangles per leaf) traversed nearest-child-first with pruning. A caller that
queries a slowly moving point passes the previous closest triangle as a warm start, so the
traversal starts with a tight bound and visits O(depth) nodes.

Bad meshes (:func:`prepare_mesh`): empty, wrong shapes, NaN/inf vertices or out-of-range face
indices raise :class:`~robot_grinding_sim.core.errors.GeometryError`. Documented repairs, each
with a :class:`GeometryWarning`: exactly coincident vertices are merged; degenerate faces (a
repeated vertex or an area below ``1e-12 * diag**2``) and duplicated faces are removed; a closed
mesh wound inside-out (negative volume) is flipped. Inconsistent winding or non-manifold edges
do not raise at load time (robot link meshes often have them and fcl does not care), but such a
mesh is not *orientable*: exact signed queries against it raise GeometryError, see
:attr:`PreparedMesh.orientable`.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import GeometryError

LOG = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LEAF_SIZE = 4
#: a face is degenerate when twice its area is at most this times the mesh's bounding-box diagonal squared
DEGENERATE_AREA2 = 2e-12

# Feature codes returned by the closest-point kernel.
FEATURE_FACE = 0
FEATURE_VERTEX0, FEATURE_VERTEX1, FEATURE_VERTEX2 = 1, 2, 3
FEATURE_EDGE01, FEATURE_EDGE12, FEATURE_EDGE20 = 4, 5, 6


class GeometryWarning(UserWarning):
    """A mesh was repaired (degenerate faces removed, winding flipped); the message says how."""


# ----------------------------------------------------------------------------------------------
# numba kernels
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True, fastmath=False, nogil=True)
def _closest_on_triangle(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """Closest point of triangle (a, b, c) to p and the feature code holding it (Ericson 5.1.5)."""
    abx, aby, abz = bx - ax, by - ay, bz - az
    acx, acy, acz = cx - ax, cy - ay, cz - az
    apx, apy, apz = px - ax, py - ay, pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:
        return ax, ay, az, 1
    bpx, bpy, bpz = px - bx, py - by, pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:
        return bx, by, bz, 2
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return ax + v * abx, ay + v * aby, az + v * abz, 4
    cpx, cpy, cpz = px - cx, py - cy, pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:
        return cx, cy, cz, 3
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return ax + w * acx, ay + w * acy, az + w * acz, 6
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return bx + w * (cx - bx), by + w * (cy - by), bz + w * (cz - bz), 5
    denom = 1.0 / (va + vb + vc)
    v = vb * denom
    w = vc * denom
    return (ax + abx * v + acx * w, ay + aby * v + acy * w, az + abz * v + acz * w, 0)


@numba.njit(cache=True, nogil=True)
def _tri_dist2(p, verts, faces, t):
    a = faces[t, 0]
    b = faces[t, 1]
    c = faces[t, 2]
    qx, qy, qz, feat = _closest_on_triangle(
        p[0], p[1], p[2],
        verts[a, 0], verts[a, 1], verts[a, 2],
        verts[b, 0], verts[b, 1], verts[b, 2],
        verts[c, 0], verts[c, 1], verts[c, 2],
    )  # fmt: skip
    dx, dy, dz = p[0] - qx, p[1] - qy, p[2] - qz
    return dx * dx + dy * dy + dz * dz, qx, qy, qz, feat


@numba.njit(cache=True, nogil=True)
def closest_point_bruteforce(p, verts, faces):
    """Closest point over every triangle (reference for tests). Returns (d2, tri, feature, q)."""
    best = np.inf
    bt = -1
    bf = 0
    q = np.zeros(3)
    for t in range(faces.shape[0]):
        d2, qx, qy, qz, feat = _tri_dist2(p, verts, faces, t)
        if d2 < best:
            best = d2
            bt = t
            bf = feat
            q[0], q[1], q[2] = qx, qy, qz
    return best, bt, bf, q


@numba.njit(cache=True, nogil=True)
def _build_bvh(tri_lo, tri_hi, centroids, leaf_size):
    """Top-down median-split AABB tree. Node i covers order[start[i]:start[i] + count[i]]."""
    m = tri_lo.shape[0]
    max_nodes = 2 * m + 1
    node_lo = np.empty((max_nodes, 3))
    node_hi = np.empty((max_nodes, 3))
    left = -np.ones(max_nodes, dtype=np.int64)
    right = -np.ones(max_nodes, dtype=np.int64)
    start = np.zeros(max_nodes, dtype=np.int64)
    count = np.zeros(max_nodes, dtype=np.int64)
    order = np.arange(m).astype(np.int64)
    stack = np.empty(256, dtype=np.int64)
    n_nodes = 1
    start[0] = 0
    count[0] = m
    sp = 0
    stack[sp] = 0
    sp += 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        s = start[node]
        c = count[node]
        lo = np.full(3, np.inf)
        hi = np.full(3, -np.inf)
        clo = np.full(3, np.inf)
        chi = np.full(3, -np.inf)
        for k in range(s, s + c):
            t = order[k]
            for j in range(3):
                lo[j] = min(lo[j], tri_lo[t, j])
                hi[j] = max(hi[j], tri_hi[t, j])
                clo[j] = min(clo[j], centroids[t, j])
                chi[j] = max(chi[j], centroids[t, j])
        node_lo[node] = lo
        node_hi[node] = hi
        if c <= leaf_size:
            continue
        ext = chi - clo
        axis = 0
        if ext[1] > ext[axis]:
            axis = 1
        if ext[2] > ext[axis]:
            axis = 2
        sub = order[s:s + c].copy()
        keys = np.empty(c)
        for k in range(c):
            keys[k] = centroids[sub[k], axis]
        idx = np.argsort(keys, kind="mergesort")
        for k in range(c):
            order[s + k] = sub[idx[k]]
        half = c // 2
        lnode = n_nodes
        rnode = n_nodes + 1
        n_nodes += 2
        left[node] = lnode
        right[node] = rnode
        start[lnode] = s
        count[lnode] = half
        start[rnode] = s + half
        count[rnode] = c - half
        stack[sp] = lnode
        stack[sp + 1] = rnode
        sp += 2
    return (node_lo[:n_nodes].copy(), node_hi[:n_nodes].copy(), left[:n_nodes].copy(),
            right[:n_nodes].copy(), start[:n_nodes].copy(), count[:n_nodes].copy(), order)


@numba.njit(cache=True, nogil=True)
def _box_d2(p, lo, hi, i):
    d2 = 0.0
    for j in range(3):
        v = p[j]
        if v < lo[i, j]:
            e = lo[i, j] - v
            d2 += e * e
        elif v > hi[i, j]:
            e = v - hi[i, j]
            d2 += e * e
    return d2


@numba.njit(cache=True, nogil=True)
def closest_point_bvh(p, verts, faces, node_lo, node_hi, left, right, start, count, order, warm, max_d2):
    """Exact closest point of the mesh to p (all arrays in the mesh frame).

    Args:
        p: Query point, shape (3,), m.
        warm: A triangle index to seed the bound with (the previous answer) or -1.
        max_d2: Only points closer than sqrt(max_d2) are searched; np.inf for the global answer.

    Returns:
        (d2, tri, feature, q): squared distance (np.inf and tri = -1 if nothing within the bound),
        the triangle index, its feature code and the closest point, shape (3,).
    """
    best = max_d2
    bt = -1
    bf = 0
    q = np.zeros(3)
    if warm >= 0:
        d2, qx, qy, qz, feat = _tri_dist2(p, verts, faces, warm)
        if d2 < best:
            best = d2
            bt = warm
            bf = feat
            q[0], q[1], q[2] = qx, qy, qz
    stack = np.empty(256, dtype=np.int64)
    sp = 0
    if _box_d2(p, node_lo, node_hi, 0) < best or bt < 0:
        stack[0] = 0
        sp = 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        if _box_d2(p, node_lo, node_hi, node) > best:
            continue
        lnode = left[node]
        if lnode < 0:
            s = start[node]
            for k in range(s, s + count[node]):
                t = order[k]
                d2, qx, qy, qz, feat = _tri_dist2(p, verts, faces, t)
                if d2 < best or (bt < 0 and d2 <= best):
                    best = d2
                    bt = t
                    bf = feat
                    q[0], q[1], q[2] = qx, qy, qz
            continue
        rnode = right[node]
        dl = _box_d2(p, node_lo, node_hi, lnode)
        dr = _box_d2(p, node_lo, node_hi, rnode)
        # Push the farther child first so the nearer one is expanded first.
        if dl <= dr:
            if dr <= best:
                stack[sp] = rnode
                sp += 1
            if dl <= best:
                stack[sp] = lnode
                sp += 1
        else:
            if dl <= best:
                stack[sp] = lnode
                sp += 1
            if dr <= best:
                stack[sp] = rnode
                sp += 1
    if bt < 0:
        return np.inf, -1, 0, q
    return best, bt, bf, q


@numba.njit(cache=True, nogil=True)
def closest_points_bvh(P, verts, faces, node_lo, node_hi, left, right, start, count, order, q_out, tri_out, d2_out):
    """:func:`closest_point_bvh` of every point of P (K, 3), each warm-started by the answer before:
    closest points into q_out (K, 3), triangles into tri_out (K,), squared distances into d2_out (K,)."""
    warm = -1
    for k in range(P.shape[0]):
        d2, t, _, q = closest_point_bvh(P[k], verts, faces, node_lo, node_hi, left, right, start, count, order,
                                        warm, np.inf)
        q_out[k, 0], q_out[k, 1], q_out[k, 2] = q[0], q[1], q[2]
        tri_out[k], d2_out[k] = t, d2
        warm = t


class TriangleTree:
    """Closest points on a triangle soup (vertices (n, 3), faces (k, 3), any frame), through the
    static AABB tree: the answer's triangle is an index of ``faces``. Degenerate (zero-area) faces
    are left out of the tree. Unlike a query that gathers candidates by bounding box (trimesh's
    ``closest_point``), long thin triangles (a cylinder exported as slivers along its length) cost
    nothing extra."""

    def __init__(self, vertices: npt.ArrayLike, faces: npt.ArrayLike) -> None:
        self.vertices = np.ascontiguousarray(vertices, dtype=np.float64)
        faces = np.ascontiguousarray(faces, dtype=np.int64)
        v = self.vertices
        cross = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
        diag = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0))) if len(v) else 0.0
        self.kept = np.flatnonzero(np.linalg.norm(cross, axis=1) > DEGENERATE_AREA2 * diag * diag)
        if not len(self.kept):
            raise GeometryError("closest points: every triangle is degenerate (zero area)")
        self.faces = np.ascontiguousarray(faces[self.kept])
        tri = v[self.faces]
        self.bvh = BVH(*_build_bvh(tri.min(axis=1), tri.max(axis=1), tri.mean(axis=1), LEAF_SIZE))

    def closest(self, points: npt.ArrayLike) -> tuple[FloatArray, IntArray, FloatArray]:
        """(closest points (K, 3), their triangles (K,) as indices of the faces given, distances (K,))."""
        P = np.ascontiguousarray(np.atleast_2d(np.asarray(points, dtype=np.float64)))
        q, tri, d2 = np.empty((len(P), 3)), np.empty(len(P), dtype=np.int64), np.empty(len(P))
        if len(P):
            closest_points_bvh(P, self.vertices, self.faces, *self.bvh.arrays(), q, tri, d2)
        return q, self.kept[tri], np.sqrt(d2)


@numba.njit(cache=True, nogil=True)
def pseudo_normal(tri, feature, faces, face_normals, tri_edges, edge_normals, vertex_normals):
    """Angle-weighted pseudo-normal of a feature of a triangle, shape (3,), unit."""
    if feature == 0:
        return face_normals[tri]
    if feature <= 3:
        return vertex_normals[faces[tri, feature - 1]]
    return edge_normals[tri_edges[tri, feature - 4]]


@numba.njit(cache=True, nogil=True)
def signed_closest(p, verts, faces, face_normals, tri_edges, edge_normals, vertex_normals,
                   node_lo, node_hi, left, right, start, count, order, warm, max_d2, tiny):
    """Closest point, signed distance and outward normal of the mesh at p (mesh frame).

    Returns:
        (found, sd, tri, q, n): found False when nothing is within sqrt(max_d2); sd > 0 outside
        (on the face-normal side), < 0 inside; q the closest point (3,); n the unit outward
        normal of the surface towards p: (p - q)/|p - q| outside, (q - p)/|q - p| inside, the
        pseudo-normal when |p - q| <= tiny.
    """
    d2, tri, feat, q = closest_point_bvh(p, verts, faces, node_lo, node_hi, left, right, start,
                                         count, order, warm, max_d2)
    n = np.zeros(3)
    if tri < 0:
        return False, np.inf, -1, q, n
    pn = pseudo_normal(tri, feat, faces, face_normals, tri_edges, edge_normals, vertex_normals)
    dx, dy, dz = p[0] - q[0], p[1] - q[1], p[2] - q[2]
    d = np.sqrt(d2)
    side = dx * pn[0] + dy * pn[1] + dz * pn[2]
    sgn = 1.0 if side >= 0.0 else -1.0
    if d > tiny:
        n[0], n[1], n[2] = sgn * dx / d, sgn * dy / d, sgn * dz / d
    else:
        n[0], n[1], n[2] = pn[0], pn[1], pn[2]
    return True, sgn * d, tri, q, n


@numba.njit(cache=True, nogil=True)
def signed_closest_world(c_w, T, verts, faces, face_normals, tri_edges, edge_normals, vertex_normals,
                         node_lo, node_hi, left, right, start, count, order, warm, tiny, out):
    """:func:`signed_closest` for a world point c_w (3,) and a mesh at world pose T (4, 4).

    Writes into ``out`` (9,): the closest point (world), the outward normal (world) and c_w in
    the mesh frame (returning arrays from numba costs several microseconds; a buffer does not).

    Returns:
        (sd, tri): signed distance (m) and closest triangle.
    """
    c = np.empty(3)
    for i in range(3):
        c[i] = ((c_w[0] - T[0, 3]) * T[0, i] + (c_w[1] - T[1, 3]) * T[1, i]
                + (c_w[2] - T[2, 3]) * T[2, i])
    found, sd, tri, q, n = signed_closest(c, verts, faces, face_normals, tri_edges, edge_normals,
                                          vertex_normals, node_lo, node_hi, left, right, start,
                                          count, order, warm, np.inf, tiny)
    for i in range(3):
        out[i] = T[i, 0] * q[0] + T[i, 1] * q[1] + T[i, 2] * q[2] + T[i, 3]
        out[3 + i] = T[i, 0] * n[0] + T[i, 1] * n[1] + T[i, 2] * n[2]
        out[6 + i] = c[i]
    return sd, tri


@numba.njit(cache=True, nogil=True)
def pose_problem(M):
    """0 if M (4, 4) is a rigid transform (to 1e-6), 1 if it has NaN/inf, 2 otherwise."""
    for i in range(4):
        for j in range(4):
            if not np.isfinite(M[i, j]):
                return 1
    if M[3, 0] != 0.0 or M[3, 1] != 0.0 or M[3, 2] != 0.0 or M[3, 3] != 1.0:
        return 2
    for i in range(3):
        for j in range(3):
            g = M[0, i] * M[0, j] + M[1, i] * M[1, j] + M[2, i] * M[2, j]
            if abs(g - (1.0 if i == j else 0.0)) > 1e-6:
                return 2
    det = (M[0, 0] * (M[1, 1] * M[2, 2] - M[1, 2] * M[2, 1])
           - M[0, 1] * (M[1, 0] * M[2, 2] - M[1, 2] * M[2, 0])
           + M[0, 2] * (M[1, 0] * M[2, 1] - M[1, 1] * M[2, 0]))
    if det <= 0.0:
        return 2
    return 0


# ----------------------------------------------------------------------------------------------
# mesh preparation
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BVH:
    """Static AABB tree over a mesh's triangles (arrays from :func:`_build_bvh`)."""

    node_lo: FloatArray
    node_hi: FloatArray
    left: IntArray
    right: IntArray
    start: IntArray
    count: IntArray
    order: IntArray

    def arrays(self) -> tuple:
        return (self.node_lo, self.node_hi, self.left, self.right, self.start, self.count, self.order)


@dataclass(frozen=True)
class PreparedMesh:
    """A validated triangle mesh with everything the exact queries need (mesh frame, m).

    Attributes:
        name: The name used in error messages.
        vertices: (n, 3) float64, m.
        faces: (k, 3) int64 vertex indices, counter-clockwise seen from outside.
        face_normals: (k, 3) unit.
        tri_edges: (k, 3) edge ids of the edges (v0 v1), (v1 v2), (v2 v0) of each face.
        edge_normals: (e, 3) unit pseudo-normals (sum of the adjacent face normals).
        vertex_normals: (n, 3) unit angle-weighted pseudo-normals.
        watertight: every edge has exactly two faces and the winding is consistent.
        orientable: no edge has more than two faces and the winding is consistent: the sign of
            signed queries is defined. ``problem`` says why not.
        closed: treat the mesh as a solid (any depth); else as a one-sided surface.
        radius: largest vertex distance from the mesh origin, m.
        bvh: the static AABB tree.
    """

    name: str
    vertices: FloatArray
    faces: IntArray
    face_normals: FloatArray
    tri_edges: IntArray
    edge_normals: FloatArray
    vertex_normals: FloatArray
    watertight: bool
    orientable: bool
    closed: bool
    problem: str
    radius: float
    bvh: BVH

    @property
    def query_arrays(self) -> tuple:
        """The arrays :func:`signed_closest` / :func:`signed_closest_world` take, in order."""
        cached = self.__dict__.get("_query_arrays")
        if cached is None:
            cached = (self.vertices, self.faces, self.face_normals, self.tri_edges, self.edge_normals,
                      self.vertex_normals, *self.bvh.arrays())
            object.__setattr__(self, "_query_arrays", cached)
        return cached

    def signed_closest(self, p: FloatArray, warm: int = -1, max_d2: float = np.inf,
                       tiny: float = 1e-10) -> tuple[bool, float, int, FloatArray, FloatArray]:
        """Python entry to :func:`signed_closest` (p in the mesh frame, shape (3,), m)."""
        if not self.orientable:
            raise GeometryError(f"mesh '{self.name}' is not orientable ({self.problem}): the "
                                "inside of it is undefined, so no signed distance/depth")
        return signed_closest(p, self.vertices, self.faces, self.face_normals, self.tri_edges,
                              self.edge_normals, self.vertex_normals, *self.bvh.arrays(),
                              warm, max_d2, tiny)

    def closest(self, p: FloatArray, warm: int = -1, max_d2: float = np.inf
                ) -> tuple[float, int, int, FloatArray]:
        """Unsigned closest point: (d2, tri, feature, q) with p, q in the mesh frame."""
        return closest_point_bvh(p, self.vertices, self.faces, *self.bvh.arrays(), warm, max_d2)


def _warn(msg: str) -> None:
    LOG.warning(msg)
    warnings.warn(msg, GeometryWarning, stacklevel=3)


def prepare_mesh(name: str, vertices: npt.ArrayLike, faces: npt.ArrayLike,
                 closed: bool | None = None) -> PreparedMesh:
    """Validate and index a triangle mesh for exact queries.

    Args:
        name: Object name for messages.
        vertices: (n, 3) vertex positions, m, in the mesh's own frame.
        faces: (k, 3) vertex indices, wound counter-clockwise seen from outside (the face normal
            points out of the solid / to the free side of a surface).
        closed: True: must be watertight (a solid), else GeometryError. False: a one-sided
            surface. None: closed if watertight.

    Raises:
        GeometryError: empty mesh, wrong shapes, NaN/inf, face indices out of range, nothing
            left after removing degenerate faces, ``closed=True`` for a mesh with holes.
    """
    try:
        v = np.array(vertices, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise GeometryError(f"mesh '{name}': vertices are not numbers ({exc})") from None
    f_raw = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] < 3:
        raise GeometryError(f"mesh '{name}': vertices must have shape (n >= 3, 3), got {v.shape}")
    if f_raw.ndim != 2 or f_raw.shape[1] != 3 or f_raw.shape[0] < 1:
        raise GeometryError(f"mesh '{name}': faces must have shape (k >= 1, 3), got {f_raw.shape}")
    if not np.issubdtype(f_raw.dtype, np.integer):
        if not np.issubdtype(f_raw.dtype, np.floating) or np.any(f_raw != np.round(f_raw)):
            raise GeometryError(f"mesh '{name}': faces must be integer vertex indices")
    f = f_raw.astype(np.int64)
    bad = ~np.isfinite(v).all(axis=1)
    if bad.any():
        raise GeometryError(f"mesh '{name}': {int(bad.sum())} vertices are NaN or infinite "
                            f"(first: index {int(np.flatnonzero(bad)[0])})")
    if f.min() < 0 or f.max() >= len(v):
        raise GeometryError(f"mesh '{name}': face indices must be in [0, {len(v) - 1}], "
                            f"got [{f.min()}, {f.max()}]")
    # Merge exactly coincident vertices (STL triangle soups) so that shared edges are shared.
    uniq, inverse = np.unique(v, axis=0, return_inverse=True)
    f = inverse.reshape(-1)[f]
    v = np.ascontiguousarray(uniq)
    diag = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0)))
    if diag == 0.0:
        raise GeometryError(f"mesh '{name}': all vertices coincide")
    cross = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    area2 = np.linalg.norm(cross, axis=1)
    degenerate = (area2 <= DEGENERATE_AREA2 * diag * diag) | (f[:, 0] == f[:, 1]) | (f[:, 1] == f[:, 2]) | (
        f[:, 2] == f[:, 0])
    if degenerate.all():
        raise GeometryError(f"mesh '{name}': all {len(f)} faces are degenerate (zero area)")
    if degenerate.any():
        _warn(f"mesh '{name}': removed {int(degenerate.sum())} degenerate (zero-area) faces")
        f, cross, area2 = f[~degenerate], cross[~degenerate], area2[~degenerate]
    _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    if len(first) < len(f):
        _warn(f"mesh '{name}': removed {len(f) - len(first)} duplicated faces")
        keep = np.sort(first)
        f, cross, area2 = f[keep], cross[keep], area2[keep]
    face_normals = cross / area2[:, None]

    # Edges: directed (v0 v1), (v1 v2), (v2 v0) per face; an undirected id per vertex pair.
    directed = np.stack([f, np.roll(f, -1, axis=1)], axis=2).reshape(-1, 2)
    und = np.sort(directed, axis=1)
    edges, edge_of = np.unique(und, axis=0, return_inverse=True)
    edge_of = edge_of.reshape(-1)
    n_edges = len(edges)
    faces_per_edge = np.bincount(edge_of, minlength=n_edges)
    forward = np.where(directed[:, 0] < directed[:, 1], 1, -1)
    winding_sum = np.bincount(edge_of, weights=forward, minlength=n_edges)
    non_manifold = int((faces_per_edge > 2).sum())
    inconsistent = int(((faces_per_edge == 2) & (winding_sum != 0)).sum())
    boundary = int((faces_per_edge == 1).sum())
    problems = []
    if non_manifold:
        problems.append(f"{non_manifold} edges shared by more than two faces")
    if inconsistent:
        problems.append(f"{inconsistent} edges with inconsistent face winding "
                        "(trimesh.repair.fix_winding can repair it)")
    orientable = not problems
    watertight = orientable and boundary == 0
    if closed is None:
        closed = watertight
    elif closed and not watertight:
        why = "; ".join(problems + ([f"{boundary} boundary edges (holes)"] if boundary else []))
        raise GeometryError(f"mesh '{name}' must be closed (watertight) but is not: {why}")
    if closed:
        volume = float(np.einsum("ij,ij->", v[f[:, 0]], cross)) / 6.0
        if volume < 0.0:
            _warn(f"mesh '{name}': faces wound inside-out (volume {volume:.3g} m^3 < 0); flipped")
            f = f[:, ::-1].copy()
            face_normals = -face_normals
            directed = np.stack([f, np.roll(f, -1, axis=1)], axis=2).reshape(-1, 2)
            edges, edge_of = np.unique(np.sort(directed, axis=1), axis=0, return_inverse=True)
            edge_of = edge_of.reshape(-1)
    tri_edges = edge_of.reshape(-1, 3).astype(np.int64)
    edge_normals = np.zeros((len(edges), 3))
    np.add.at(edge_normals, edge_of, np.repeat(face_normals, 3, axis=0))
    edge_normals /= np.maximum(np.linalg.norm(edge_normals, axis=1), 1e-300)[:, None]
    # Angle-weighted vertex pseudo-normals.
    vertex_normals = np.zeros_like(v)
    for k in range(3):
        e1 = v[f[:, (k + 1) % 3]] - v[f[:, k]]
        e2 = v[f[:, (k + 2) % 3]] - v[f[:, k]]
        cosang = np.einsum("ij,ij->i", e1, e2) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
        ang = np.arccos(np.clip(cosang, -1.0, 1.0))
        np.add.at(vertex_normals, f[:, k], face_normals * ang[:, None])
    vertex_normals /= np.maximum(np.linalg.norm(vertex_normals, axis=1), 1e-300)[:, None]
    tri = v[f]
    bvh = BVH(*_build_bvh(tri.min(axis=1), tri.max(axis=1), tri.mean(axis=1), LEAF_SIZE))
    return PreparedMesh(
        name=name, vertices=v, faces=np.ascontiguousarray(f), face_normals=face_normals,
        tri_edges=tri_edges, edge_normals=edge_normals, vertex_normals=vertex_normals,
        watertight=watertight, orientable=orientable, closed=bool(closed),
        problem="; ".join(problems), radius=float(np.linalg.norm(v, axis=1).max()), bvh=bvh)


def load_mesh_file(path: str | Path, scale: float = 1.0) -> tuple[FloatArray, IntArray]:
    """Read a triangle mesh file (STL, OBJ, PLY, OFF, GLB, ... through trimesh), unprocessed.

    Args:
        path: The file.
        scale: Factor applied to the vertices (0.001 for a file in millimetres).

    Returns:
        (vertices (n, 3) in m, faces (k, 3)); a multi-body file is concatenated.

    Raises:
        GeometryError: the file is missing, unreadable, or holds no triangles.
    """
    import trimesh  # heavy import, only needed here

    p = Path(path)
    if not p.is_file():
        raise GeometryError(f"mesh file '{p}' does not exist")
    if not np.isfinite(scale) or scale <= 0.0:
        raise GeometryError(f"mesh file '{p}': scale must be a positive number, got {scale}")
    try:
        loaded = trimesh.load(str(p), process=False)
    except Exception as exc:  # trimesh raises many types for bad files
        raise GeometryError(f"mesh file '{p}' cannot be read: {exc}") from None
    if isinstance(loaded, trimesh.Scene):
        geoms = [g for g in loaded.dump() if isinstance(g, trimesh.Trimesh)]
        if not geoms:
            raise GeometryError(f"mesh file '{p}' holds no triangle mesh")
        loaded = trimesh.util.concatenate(geoms)
    if not isinstance(loaded, trimesh.Trimesh) or len(loaded.faces) == 0:
        raise GeometryError(f"mesh file '{p}' holds no triangles")
    return np.asarray(loaded.vertices, dtype=np.float64) * scale, np.asarray(loaded.faces, dtype=np.int64)
