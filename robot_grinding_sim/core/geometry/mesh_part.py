"""Parts given as triangle meshes (STL/PLY/OBJ through trimesh): faces (regions of smooth normal,
split at sharp edges), closest points, normals from the triangles (approximate: a warning says so),
tessellation. Metres, part frame."""

from __future__ import annotations

import logging
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError, InputError
from robot_grinding_sim.core.geometry.cad_face import BoundaryEdge, FaceInfo
from robot_grinding_sim.core.geometry.units import (
    check_file,
    unit_factor,
)

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------------------------------------
# meshes
# --------------------------------------------------------------------------------------------


#: dihedral angle above which a mesh edge separates two faces (a sharp edge of a solid), rad: region
#: growing joins triangles across smoother edges (a tessellated cylinder of 12 or more sides stays one face)
SHARP_EDGE = math.radians(30.0)


def split_faces(mesh: Any, sharp: float = SHARP_EDGE) -> NDArray[np.int64]:
    """(F,) face label of every triangle: region growing over the triangle adjacency, across edges
    whose dihedral angle (between the two triangles' normals) is below ``sharp`` rad. Labels are
    ordered by the region's lowest triangle index."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(mesh.faces)
    adj = np.asarray(mesh.face_adjacency, dtype=np.int64).reshape(-1, 2)
    smooth = adj[np.asarray(mesh.face_adjacency_angles) < sharp] if len(adj) else adj
    g = coo_matrix((np.ones(len(smooth)), (smooth[:, 0], smooth[:, 1])), shape=(n, n))
    _, label = connected_components(g, directed=False)
    # renumber by first appearance (deterministic for a file)
    _, first = np.unique(label, return_index=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[label].astype(np.int64)


class MeshFace:
    """One face of a mesh part: a region of triangles of smooth normal (see :func:`split_faces`).

    ``mesh`` is the region's own trimesh (its vertex normals from its triangles only, so that they
    do not average across the sharp edges around it); ``triangles`` (K,) its triangles' indices in
    the part's mesh, ``parent`` the part's mesh. Normals are interpolated vertex normals:
    approximate (the exact surface is unknown). Surface parameters (u, v) do not exist: NaN."""

    is_mesh = True
    type = "mesh"
    reversed = False

    def __init__(self, mesh: Any, index: int = 0, triangles: Any = None, parent: Any = None) -> None:
        self.mesh = mesh
        self.index = index
        self.parent = mesh if parent is None else parent
        self.triangles = np.arange(len(mesh.faces)) if triangles is None else np.asarray(triangles, dtype=np.int64)

    @property
    def area(self) -> float:
        return float(self.mesh.area)

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        b = np.asarray(self.mesh.bounds, dtype=float)
        return b[0], b[1]

    def info(self) -> FaceInfo:
        lo, hi = self.bounds
        return FaceInfo(self.index, "mesh", self.area, tuple(lo), tuple(hi), (0.0, 0.0, 0.0, 0.0))

    #: dihedral angle above which a mesh edge inside a face counts as a boundary, rad
    SHARP = SHARP_EDGE

    def edge_keys(self) -> NDArray[np.int64]:
        """(E, 2) the face's open edges (used by one of its triangles) as sorted vertex indices of the
        part's mesh."""
        import trimesh

        tri = np.asarray(self.parent.faces)[self.triangles]
        e = np.sort(np.vstack([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
        groups = trimesh.grouping.group_rows(e, require_count=1)
        return e[groups]

    def boundary(self, step: float, skip: list[Any] | None = None) -> list[BoundaryEdge]:
        """The face's open edges (its border with the rest of the part, the mesh's own open edges) as
        2-point polylines, those in ``skip`` (sorted vertex index pairs of the part's mesh: edges
        shared with other selected faces) left out; sharp edges inside the face (none for a face of
        :func:`split_faces`) too."""
        keys = self.edge_keys()
        if skip:
            drop = {tuple(int(x) for x in k) for k in skip}
            keys = np.array([k for k in keys if (int(k[0]), int(k[1])) not in drop], dtype=np.int64).reshape(-1, 2)
        V = np.asarray(self.parent.vertices)
        out = [BoundaryEdge(k, V[e]) for k, e in enumerate(keys)]
        sharp = self.mesh.face_adjacency_angles > self.SHARP
        out += [BoundaryEdge(len(out) + k, self.mesh.vertices[e])
                for k, e in enumerate(self.mesh.face_adjacency_edges[sharp])]
        return out

    def up(self) -> FloatArray:
        """Viewing direction: the face's area-weighted mean normal (+z for a closed surface)."""
        if self.mesh.is_watertight:
            return np.array([0.0, 0.0, 1.0])
        n = np.sum(self.mesh.face_normals * self.mesh.area_faces[:, None], axis=0)
        norm = np.linalg.norm(n)
        return n / norm if norm > 1e-9 * max(self.area, 1e-300) else np.array([0.0, 0.0, 1.0])

    def normal_samples(self) -> tuple[FloatArray, FloatArray]:
        """The triangles' normals (K, 3) and areas (K,), m^2."""
        return np.asarray(self.mesh.face_normals, dtype=float), np.asarray(self.mesh.area_faces, dtype=float)

    def closest(self, points: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Closest points (K, 3) of the face to ``points`` (K, 3), the interpolated vertex normals
        there (K, 3, unit) and the distances (K,), m."""
        import trimesh

        from robot_grinding_sim.core.geometry.meshquery import TriangleTree

        points = np.atleast_2d(np.asarray(points, dtype=float))
        if not len(points):
            return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
        tree = self.__dict__.get("_tree")
        if tree is None:
            tree = self.__dict__["_tree"] = TriangleTree(self.mesh.vertices, self.mesh.faces)
        pts, tri, dist = tree.closest(points)
        bary = trimesh.triangles.points_to_barycentric(self.mesh.triangles[tri], pts)
        vn = self.mesh.vertex_normals[self.mesh.faces[tri]]
        n = np.einsum("kj,kjc->kc", bary, vn)
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        return np.asarray(pts), n, np.asarray(dist)

    def project(self, points: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(uv (K, 2) NaN, closest points (K, 3), distances (K,)), like a CAD face's ``project``."""
        pts, _, dist = self.closest(points)
        return np.full((len(pts), 2), np.nan), pts, dist

    def project_exact(self, points: Any, uv: Any = None) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(uv (K, 2) NaN, closest points (K, 3), normals (K, 3)): the mesh's stand-in for the
        projection on the exact surface of a CAD face."""
        pts, n, _ = self.closest(points)
        return np.full((len(pts), 2), np.nan), pts, n

    def intersect_lines(self, origins: Any, direction: Any) -> tuple[FloatArray, FloatArray, FloatArray,
                                                                       NDArray[np.bool_]]:
        """First hits of lines along -direction from far above; normals from barycentric vertex normals."""
        origins = np.atleast_2d(np.asarray(origins, dtype=float))
        d = np.asarray(direction, dtype=float)
        d = d / np.linalg.norm(d)
        lo, hi = self.bounds
        reach = float(np.linalg.norm(hi - lo)) + 1.0
        start = origins - ((origins - lo) @ d)[:, None] * d + reach * d
        locs, ray_idx, tri_idx = self.mesh.ray.intersects_location(
            start, np.broadcast_to(-d, start.shape), multiple_hits=False
        )
        pts = np.full((len(origins), 3), np.nan)
        nrm = np.full((len(origins), 3), np.nan)
        hit = np.zeros(len(origins), dtype=bool)
        if len(ray_idx):
            import trimesh

            pts[ray_idx] = locs
            bary = trimesh.triangles.points_to_barycentric(self.mesh.triangles[tri_idx], locs)
            vn = self.mesh.vertex_normals[self.mesh.faces[tri_idx]]
            n = np.einsum("kj,kjc->kc", bary, vn)
            nrm[ray_idx] = n / np.linalg.norm(n, axis=1, keepdims=True)
            hit[ray_idx] = True
        return np.full((len(origins), 2), np.nan), pts, nrm, hit

    def contains(self, uv: Any) -> NDArray[np.bool_]:
        return np.ones(len(np.atleast_2d(uv)), dtype=bool)

    def edges(self) -> list[Any]:
        return []


@dataclass
class MeshPart:
    """A triangle mesh part (metres), split into faces: regions of smooth normal with sharp edges
    (dihedral angle over :data:`SHARP_EDGE`) between them (:func:`split_faces`)."""

    mesh: Any
    source: str = "<memory>"
    unit: str = "m"

    is_mesh = True

    def __post_init__(self) -> None:
        label = split_faces(self.mesh)
        self.labels = label
        self.faces = []
        for k in range(int(label.max()) + 1 if len(label) else 0):
            tri = np.flatnonzero(label == k)
            sub = self.mesh.submesh([tri], append=True, repair=False)
            self.faces.append(MeshFace(sub, k, tri, self.mesh))

    def face(self, index: int) -> MeshFace:
        if not 0 <= index < len(self.faces):
            raise InputError(f"{self.source}: face index {index} out of range 0..{len(self.faces) - 1} (the mesh's "
                             "regions of smooth normal: --list-faces)")
        return self.faces[index]

    def list_faces(self) -> list[FaceInfo]:
        return [f.info() for f in self.faces]

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        b = np.asarray(self.mesh.bounds, dtype=float)
        return b[0], b[1]

    def mass_properties(self, density: float) -> tuple[float, FloatArray, FloatArray]:
        """The part as a solid of uniform ``density`` (kg/m^3): mass (kg), centre of mass (3,) and
        inertia (3, 3) about it (kg m^2), part frame (trimesh's volume integrals); a mesh that is
        not watertight encloses no volume: mass 0."""
        if not self.mesh.is_watertight or not self.mesh.volume > 0.0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        props = self.mesh.mass_properties  # unit density: its mass is the volume
        inertia = np.asarray(props["inertia"], dtype=float) * density  # about the centre of mass
        return (float(props["volume"]) * density, np.asarray(props["center_mass"], dtype=float),
                0.5 * (inertia + inertia.T))

    def shared_edges(self, indices: list[int]) -> dict[int, list[Any]]:
        """For each face of ``indices``, its edges shared with another of them (sorted vertex index
        pairs of the part's mesh)."""
        keys = {i: {(int(a), int(b)) for a, b in self.face(i).edge_keys()} for i in indices}
        return {i: sorted(keys[i] & set().union(*(keys[j] for j in indices if j != i))) for i in indices}

    def tessellate(self, deflection: float = 1e-4, angular: float = 0.3) -> Any:
        return self.mesh


def read_mesh(path: str | os.PathLike[str], unit: str | None) -> MeshPart:
    """Read an STL/PLY/OBJ mesh with trimesh, scaled to metres; warns that normals are approximate."""
    import trimesh

    path = Path(path)
    check_file(path)
    if unit is None:
        raise InputError(f"{path}: mesh files carry no length unit; state it (unit='mm', CLI --unit mm)")
    factor = unit_factor(unit, str(path))
    try:
        mesh = trimesh.load(str(path), force="mesh", process=True)
    except Exception as exc:
        raise GeometryError(f"{path}: not a readable mesh ({exc})") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise GeometryError(f"{path}: the mesh has no triangles")
    if not np.isfinite(mesh.vertices).all():
        raise GeometryError(f"{path}: the mesh has NaN or infinite vertices")
    mesh.apply_scale(factor)
    warnings.warn(
        f"{path}: planning on a mesh; normals come from the triangles and are approximate", stacklevel=2
    )
    return MeshPart(mesh, source=str(path), unit=unit)


