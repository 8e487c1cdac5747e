"""A triangle mesh of a face set for geodesic distances: a grid in each face's (u, v), spaced evenly
by arc length, welded where the surface closes on itself (seams, poles) and linked across the
edges shared by adjacent faces.

Holes of a face (regions outside it that do not reach its (u, v) box's border) stay meshed:
distances then run across a hole as on the untrimmed surface, and the passes are cut at the hole's
margin like the raster's, instead of bending round it with a cut behind it.

Why not OpenCascade's tessellation: it makes long thin triangles on flat regions (fine for display,
poor for distances); a grid spaced by arc length gives triangles about ``h`` on a side wherever
the parametrisation is regular. Vertices that coincide in 3D (the two sides of a seam, every
vertex of a pole row) are merged, so distances propagate across seams and through poles. A face's
grid keeps every triangle with a vertex in the trimmed face and upward enough, so the grids of
adjacent faces overlap by about one triangle across their shared edge; the two are joined by
``links``: pairs of vertices of different faces closer than ``1.3 h`` (3D).

Shapes and units: points (n, 3) m in the part frame; normals (n, 3) outward, unit; triangles
(m, 3) vertex indices; corner_uv (m, 3, 2) each triangle's own (u, v) at its corners (a merged
vertex on a seam has one (u, v) per side); face (m,) the face index (into the part) of each
triangle; links (k, 2) vertex pairs; area (n,) m^2, a third of the area of the triangles around
each vertex.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import PlanningError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: at most this many grid vertices per face set (the spacing grows to stay below)
MAX_VERTICES = 80_000


@dataclass
class SurfaceMesh:
    """See the module docstring for shapes, units and frames."""

    points: FloatArray
    normals: FloatArray
    triangles: IntArray
    corner_uv: FloatArray
    face: IntArray
    links: IntArray
    area: FloatArray
    active: NDArray[np.bool_]  # (n,) inside a trimmed face and upward enough
    inside: NDArray[np.bool_]  # (n,) inside a trimmed face
    h: float

    @property
    def n(self) -> int:
        return len(self.points)


def _arc_nodes(face: Any, h: float, along_u: bool, probe: int = 24) -> FloatArray:
    """Parameter values along u (or v) spaced about ``h`` apart by arc length (mean over the face)."""
    u0, u1, v0, v1 = face.uv_bounds
    a = np.linspace(u0, u1, 4 * probe + 1) if along_u else np.linspace(v0, v1, 4 * probe + 1)
    b = np.linspace(v0, v1, probe) if along_u else np.linspace(u0, u1, probe)
    A, B = np.meshgrid(a, b, indexing="ij")
    uu, vv = (A, B) if along_u else (B, A)
    pts = face.derivatives(uu.ravel(), vv.ravel()).points.reshape(len(a), len(b), 3)
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=2)  # (len(a)-1, len(b))
    seg = np.where(np.isfinite(seg), seg, 0.0)
    longest = float(seg.sum(axis=0).max())
    if not longest > 0:
        return np.array([a[0], a[-1]])
    # mean normalised arc length over the probe lines, so that the nodes follow the parametrisation
    lines = seg.sum(axis=0)
    ok = lines > 1e-12
    cum = np.cumsum(seg[:, ok], axis=0) / lines[ok]
    mean = np.r_[0.0, cum.mean(axis=1)]
    n = int(min(max(math.ceil(longest / h) + 1, 3), 4000))
    return np.interp(np.linspace(0.0, 1.0, n), mean, a)


def _holes(outside: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Grid vertices (nu, nv) outside the face in regions that do not touch the grid's border."""
    from scipy import ndimage

    label, n = ndimage.label(outside)
    if n == 0:
        return np.zeros_like(outside)
    border = np.unique(np.r_[label[0, :], label[-1, :], label[:, 0], label[:, -1]])
    return outside & ~np.isin(label, border)


def _directions(ups: dict[int, Any]) -> str:
    """The approach directions for messages: '(0, 0, 1)', or one per face when they differ."""
    text = {i: "(" + ", ".join(f"{x:g}" for x in np.round(np.asarray(v, dtype=float), 3)) + ")" for i, v in ups.items()}
    return next(iter(text.values())) if len(set(text.values())) == 1 else \
        ", ".join(f"face {i} {t}" for i, t in text.items())


def build_mesh(part: Any, indices: list[int], h: float, min_normal_z: float = -1.0,
               up: FloatArray | dict[int, FloatArray] | None = None) -> SurfaceMesh:
    """The mesh of faces ``indices`` of ``part`` (a CadPart) with edges about ``h`` m long.

    Args:
        min_normal_z: vertices whose outward normal has ``n . up`` below this are not active; a
            triangle is kept when any of its corners is active (inside the trimmed face and
            upward enough).
        up: (3,) unit vector for ``min_normal_z`` (default: the part's z), or one per face index
            (the approach direction of each face).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    ups = up if isinstance(up, dict) else {i: np.array([0.0, 0.0, 1.0]) if up is None else np.asarray(up, float)
                                            for i in indices}
    grids = []
    for _ in range(6):
        grids = [(_arc_nodes(part.face(i), h, True), _arc_nodes(part.face(i), h, False)) for i in indices]
        total = sum(len(a) * len(b) for a, b in grids)
        if total <= MAX_VERTICES:
            break
        h *= math.sqrt(total / MAX_VERTICES) * 1.05
    pts_l, nrm_l, tri_l, uv_l, face_l, act_l, in_l, bd_l = [], [], [], [], [], [], [], []
    offset = 0
    for fi, (us, vs) in zip(indices, grids, strict=True):
        face = part.face(fi)
        nu, nv = len(us), len(vs)
        uu, vv = np.meshgrid(us, vs, indexing="ij")
        uv = np.column_stack([uu.ravel(), vv.ravel()])
        s = face.derivatives(uv[:, 0], uv[:, 1])
        P, N = s.points, s.normals
        finite = np.isfinite(P).all(axis=1)
        N = np.where(np.isfinite(N), N, 0.0)
        inside = face.contains(uv) & finite
        upward = finite & (N @ np.asarray(ups[fi], dtype=float) >= min_normal_z)
        active = inside & upward
        # holes (outside the face, not reaching the grid's border) stay in the mesh: distances run
        # across them as on the untrimmed surface, so a hole casts no cut into the passes behind it
        holes = _holes(~inside.reshape(nu, nv)).ravel() & upward
        idx = np.arange(nu * nv).reshape(nu, nv)
        a, b = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
        c, d = idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
        # split each cell along its shorter diagonal (3D)
        short = np.linalg.norm(P[a] - P[c], axis=1) <= np.linalg.norm(P[b] - P[d], axis=1)
        t1 = np.where(short[:, None], np.column_stack([a, b, c]), np.column_stack([a, b, d]))
        t2 = np.where(short[:, None], np.column_stack([a, c, d]), np.column_stack([b, c, d]))
        tris = np.vstack([t1, t2])
        keep = (active | holes)[tris].any(axis=1) & finite[tris].all(axis=1)
        tris = tris[keep]
        pts_l.append(P)
        nrm_l.append(N)
        uv_l.append(uv[tris])
        tri_l.append(tris + offset)
        face_l.append(np.full(len(tris), fi, dtype=np.int64))
        act_l.append(active)
        in_l.append(inside)
        edge = np.zeros((nu, nv), dtype=bool)
        edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
        bd_l.append(edge.ravel())
        offset += len(P)
    P = np.vstack(pts_l)
    N = np.vstack(nrm_l)
    T = np.vstack(tri_l)
    if not len(T):
        raise PlanningError(f"faces {indices}: no part of the faces faces the approach direction "
                            f"{_directions(ups)} (outward normal . approach >= {min_normal_z}); give another "
                            "with passes.approach_direction (--approach-direction)")
    corner_uv = np.concatenate(uv_l)
    tri_face = np.concatenate(face_l)
    active = np.concatenate(act_l)
    inside = np.concatenate(in_l)
    border = np.concatenate(bd_l)
    # weld vertices that coincide in 3D (seams, poles: only a grid's border rows and columns can)
    # and drop unused ones
    used = np.zeros(len(P), dtype=bool)
    used[T.ravel()] = True
    ids = np.flatnonzero(used)
    m = len(ids)
    local = np.full(len(P), -1, dtype=np.int64)
    local[ids] = np.arange(m)
    cand = np.flatnonzero(border & used)
    pairs = cKDTree(P[cand]).query_pairs(1e-3 * h, output_type="ndarray") if len(cand) > 1 else np.zeros((0, 2), int)
    pairs = local[cand[pairs]] if len(pairs) else np.zeros((0, 2), dtype=np.int64)
    g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(m, m)) if len(pairs) else \
        coo_matrix((m, m))
    _, label = connected_components(g, directed=False)
    new = np.full(len(P), -1, dtype=np.int64)
    new[ids] = label
    n_new = int(label.max()) + 1
    T = new[T]
    good = (T[:, 0] != T[:, 1]) & (T[:, 1] != T[:, 2]) & (T[:, 0] != T[:, 2])
    T, corner_uv, tri_face = T[good], corner_uv[good], tri_face[good]
    points = np.zeros((n_new, 3))
    points[label] = P[ids]
    normals = np.zeros((n_new, 3))
    np.add.at(normals, label, N[ids])
    norm = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, norm, out=np.zeros_like(normals), where=norm > 0)
    act = np.zeros(n_new, dtype=bool)
    np.logical_or.at(act, label, active[ids])
    ins = np.zeros(n_new, dtype=bool)
    np.logical_or.at(ins, label, inside[ids])
    cross = np.cross(points[T[:, 1]] - points[T[:, 0]], points[T[:, 2]] - points[T[:, 0]])
    tri_area = 0.5 * np.linalg.norm(cross, axis=1)
    area = np.zeros(n_new)
    np.add.at(area, T.ravel(), np.repeat(tri_area / 3.0, 3))
    links = np.zeros((0, 2), dtype=np.int64)
    if len(indices) > 1:  # join the grids of adjacent faces across their shared edges
        vf = np.full(n_new, -1, dtype=np.int64)
        vf[T.ravel()] = np.repeat(tri_face, 3)
        tree = cKDTree(points)
        pairs = tree.query_pairs(1.3 * h, output_type="ndarray")
        if len(pairs):
            links = pairs[vf[pairs[:, 0]] != vf[pairs[:, 1]]]
    return SurfaceMesh(points, normals, T.astype(np.int64), corner_uv, tri_face, links.astype(np.int64), area,
                       act, ins, h)


def split_slivers(V: FloatArray, F: NDArray[np.int64], h: float) -> tuple[FloatArray, NDArray[np.int64],
                                                                          NDArray[np.int64]]:
    """Cut each sliver of a triangle mesh (V (n, 3), F (k, 3)) along its length: a triangle whose longest
    edge is longer than ``h`` and which is at most ``h`` wide across it (a CAD exporter's cylinder: strips
    0.3 mm wide and 200 mm long) becomes a strip of triangles at most about ``h`` long, zipped between
    its longest edge and the two others, each edge cut into ceil(length / h) equal pieces (so two
    slivers sharing an edge cut it at the same points). Other triangles are kept. Halving every edge
    (``trimesh.remesh.subdivide_to_size``) until the long edges are short would make 4^k thinner
    slivers out of each (a 2048-sided STL tube took 4 GB). Returns (vertices, faces, the source
    triangle of each face)."""
    V = np.asarray(V, dtype=float)
    F = np.asarray(F, dtype=np.int64)
    tri = V[F]
    edges = np.stack([tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 1], tri[:, 0] - tri[:, 2]], axis=1)  # (k, 3, 3)
    lengths = np.linalg.norm(edges, axis=2)
    longest = lengths.argmax(axis=1)
    L = lengths[np.arange(len(F)), longest]
    area2 = np.linalg.norm(np.cross(edges[:, 0], -edges[:, 2]), axis=1)
    width = area2 / np.maximum(L, 1e-300)
    sliver = np.flatnonzero((L > h) & (width <= h))
    if not len(sliver):
        return V, F, np.arange(len(F), dtype=np.int64)
    new_pts: list[FloatArray] = []
    new_tris: list[list[int]] = []
    new_src: list[int] = []
    base = len(V)

    def chain(a: int, b: int) -> list[int]:
        """Vertex ids from a to b along the edge, cut in ceil(length / h) pieces (new points appended)."""
        nonlocal base
        n = max(1, math.ceil(float(np.linalg.norm(V[b] - V[a])) / h))
        ids = [a]
        for j in range(1, n):
            new_pts.append(V[a] + (V[b] - V[a]) * (j / n))
            ids.append(base)
            base += 1
        return ids + [b]

    for t in sliver:
        k = int(longest[t])
        p, q, r = int(F[t, k]), int(F[t, (k + 1) % 3]), int(F[t, (k + 2) % 3])  # longest edge p -> q
        one = chain(p, q)
        two = chain(p, r)[:-1] + chain(r, q)  # p -> r -> q
        axis = (V[q] - V[p]) / L[t]

        def along(i: int, p: int = p, axis: FloatArray = axis) -> float:
            return float(((new_pts[i - len(V)] if i >= len(V) else V[i]) - V[p]) @ axis)

        # zip the two chains by their position along the longest edge; the winding stays the source's
        # (p -> q on one side, r across it): a triangle (a1, a2, b) with a's on `one` is wound as (p, q, r)
        # (both chains start at p and end at q: the steps there that would repeat a vertex add nothing)
        i, j = 0, 0
        while i < len(one) - 1 or j < len(two) - 1:
            if j == len(two) - 1 or (i < len(one) - 1 and along(one[i + 1]) <= along(two[j + 1])):
                piece = [one[i], one[i + 1], two[j]]
                i += 1
            else:
                piece = [one[i], two[j + 1], two[j]]
                j += 1
            if len(set(piece)) == 3:
                new_tris.append(piece)
                new_src.append(int(t))
    keep = np.setdiff1d(np.arange(len(F)), sliver)
    V2 = np.vstack([V, np.array(new_pts).reshape(-1, 3)])
    F2 = np.vstack([F[keep], np.array(new_tris, dtype=np.int64).reshape(-1, 3)])
    src = np.concatenate([keep, np.array(new_src, dtype=np.int64)])
    return V2, F2, src


def build_triangle_mesh(part: Any, indices: list[int], h: float, min_normal_z: float = -1.0,
                        up: dict[int, FloatArray] | None = None) -> SurfaceMesh:
    """The :class:`SurfaceMesh` of faces ``indices`` of a mesh part (a
    :class:`~robot_grinding_sim.core.geometry.mesh_part.MeshPart`): each face's triangles split
    until no edge is longer than ``h`` (slivers along their length first, :func:`split_slivers`; the
    points stay on the part's triangles), normals
    interpolated from the face's own vertex normals (not averaged across the sharp edges around
    it), vertices that coincide welded, adjacent faces linked across their shared edges like
    :func:`build_mesh`'s grids. ``corner_uv`` is zero (a mesh has no surface parameters).
    ``min_normal_z``/``up``: as in :func:`build_mesh` (a triangle with no corner facing ``up``
    enough is left out)."""
    import trimesh
    from scipy.spatial import cKDTree

    ups = up or {i: np.array([0.0, 0.0, 1.0]) for i in indices}
    for _ in range(6):  # the spacing grows until the vertex count is bounded
        total = sum(part.face(i).area for i in indices) / (0.43 * h * h)
        if total <= MAX_VERTICES:
            break
        h *= math.sqrt(total / MAX_VERTICES) * 1.05
    pts_l, nrm_l, tri_l, face_l = [], [], [], []
    offset = 0
    for fi in indices:
        face = part.face(fi)
        m = face.mesh
        V0, F0, src0 = split_slivers(np.asarray(m.vertices), np.asarray(m.faces), h)
        V, Fc, src = trimesh.remesh.subdivide_to_size(V0, F0, h, max_iter=40, return_index=True)
        V, Fc, src = np.asarray(V, dtype=float), np.asarray(Fc, dtype=np.int64), src0[np.asarray(src)]
        # each new vertex's normal: barycentric on the original triangle it came from
        N = np.zeros_like(V)
        orig = np.asarray(m.triangles)[src]  # (t, 3, 3)
        vn = np.asarray(m.vertex_normals)[np.asarray(m.faces)[src]]  # (t, 3, 3)
        for c in range(3):
            bary = trimesh.triangles.points_to_barycentric(orig, V[Fc[:, c]])
            N[Fc[:, c]] = np.einsum("kj,kjc->kc", bary, vn)
        N /= np.maximum(np.linalg.norm(N, axis=1, keepdims=True), 1e-300)
        facing = N @ np.asarray(ups[fi], dtype=float) >= min_normal_z
        keep = facing[Fc].any(axis=1)
        pts_l.append(V)
        nrm_l.append(N)
        tri_l.append(Fc[keep] + offset)
        face_l.append(np.full(int(keep.sum()), fi, dtype=np.int64))
        offset += len(V)
    P, N, T = np.vstack(pts_l), np.vstack(nrm_l), np.vstack(tri_l)
    tri_face = np.concatenate(face_l)
    if not len(T):
        raise PlanningError(f"faces {indices}: no part of the faces faces the approach direction "
                            f"{_directions(ups)} (outward normal . approach >= {min_normal_z}); give another "
                            "with passes.approach_direction (--approach-direction)")
    # weld coincident vertices (one face's subdivision), drop unused ones
    used = np.zeros(len(P), dtype=bool)
    used[T.ravel()] = True
    key = np.round(P / max(1e-9, 1e-6 * h)).astype(np.int64)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    # vertices of different faces at the same place stay apart (their normals differ across a sharp
    # edge): weld only within a face
    vf = np.full(len(P), -1, dtype=np.int64)
    vf[T.ravel()] = np.repeat(tri_face, 3)
    comb = inv * (max(indices) + 2) + (vf + 1)
    _, inv2 = np.unique(comb, return_inverse=True)
    inv2 = inv2.ravel()
    ids = np.flatnonzero(used)
    label = np.full(len(P), -1, dtype=np.int64)
    uniq, lab = np.unique(inv2[ids], return_inverse=True)
    label[ids] = lab.ravel()
    n_new = len(uniq)
    points = np.zeros((n_new, 3))
    points[label[ids]] = P[ids]
    normals = np.zeros((n_new, 3))
    np.add.at(normals, label[ids], N[ids])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-300)
    T = label[T]
    good = (T[:, 0] != T[:, 1]) & (T[:, 1] != T[:, 2]) & (T[:, 0] != T[:, 2])
    T, tri_face = T[good], tri_face[good]
    cross = np.cross(points[T[:, 1]] - points[T[:, 0]], points[T[:, 2]] - points[T[:, 0]])
    tri_area = 0.5 * np.linalg.norm(cross, axis=1)
    area = np.zeros(n_new)
    np.add.at(area, T.ravel(), np.repeat(tri_area / 3.0, 3))
    active = np.zeros(n_new, dtype=bool)
    for fi in indices:
        sel = np.unique(T[tri_face == fi].ravel())
        active[sel] |= normals[sel] @ np.asarray(ups[fi], dtype=float) >= min_normal_z
    links = np.zeros((0, 2), dtype=np.int64)
    if len(indices) > 1:
        vfn = np.full(n_new, -1, dtype=np.int64)
        vfn[T.ravel()] = np.repeat(tri_face, 3)
        pairs = cKDTree(points).query_pairs(1.3 * h, output_type="ndarray")
        if len(pairs):
            links = pairs[vfn[pairs[:, 0]] != vfn[pairs[:, 1]]]
    return SurfaceMesh(points, normals, T.astype(np.int64), np.zeros((len(T), 3, 2)), tri_face,
                       links.astype(np.int64), area, active, np.ones(n_new, dtype=bool), h)


def area_above(mesh: SurfaceMesh, value: FloatArray) -> float:
    """m^2 of the mesh where the linear interpolation of ``value`` (n,) over each triangle is > 0."""
    T = mesh.triangles
    P = mesh.points
    A = 0.5 * np.linalg.norm(np.cross(P[T[:, 1]] - P[T[:, 0]], P[T[:, 2]] - P[T[:, 0]]), axis=1)
    v = np.nan_to_num(np.asarray(value, dtype=float)[T], nan=-1.0, posinf=1.0, neginf=-1.0)
    v = np.clip(v, -1.0, 1.0)
    pos = v > 0
    k = pos.sum(axis=1)
    frac = (k == 3).astype(float)
    with np.errstate(all="ignore"):
        one = k == 1  # the positive corner a: the corner triangle a^2 / ((a - b)(a - c))
        if one.any():
            vs = v[one]
            i = np.argmax(vs, axis=1)
            a = vs[np.arange(len(vs)), i]
            o = np.sort(np.where(np.arange(3)[None, :] == i[:, None], np.inf, vs), axis=1)[:, :2]
            frac[one] = a * a / ((a - o[:, 0]) * (a - o[:, 1]))
        two = k == 2  # all but the negative corner's triangle
        if two.any():
            vs = v[two]
            i = np.argmin(vs, axis=1)
            c = vs[np.arange(len(vs)), i]
            o = np.sort(np.where(np.arange(3)[None, :] == i[:, None], -np.inf, vs), axis=1)[:, 1:]
            frac[two] = 1.0 - c * c / ((c - o[:, 0]) * (c - o[:, 1]))
    return float(np.sum(A * np.nan_to_num(np.clip(frac, 0.0, 1.0))))
