"""Parts given as triangle meshes (STL/PLY/OBJ through trimesh): faces, closest points, normals
from the triangles (approximate: a warning says so), tessellation. Metres, part frame."""

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


class MeshFace:
    """A whole triangle mesh treated as one face. Normals are interpolated vertex normals:
    approximate (the exact surface is unknown)."""

    is_mesh = True
    type = "mesh"
    reversed = False

    def __init__(self, mesh: Any, index: int = 0) -> None:
        self.mesh = mesh
        self.index = index

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

    #: dihedral angle above which a mesh edge counts as a boundary (a sharp edge of a solid), rad
    SHARP = math.radians(45.0)

    def boundary(self, step: float, skip: list[Any] | None = None) -> list[BoundaryEdge]:
        """Open edges (used by one triangle) and sharp edges (dihedral > 45 deg) as 2-point polylines."""
        import trimesh

        groups = trimesh.grouping.group_rows(self.mesh.edges_sorted, require_count=1)
        edges = [self.mesh.edges_sorted[groups]]
        sharp = self.mesh.face_adjacency_angles > self.SHARP
        edges.append(self.mesh.face_adjacency_edges[sharp])
        all_edges = np.vstack(edges)
        return [BoundaryEdge(k, self.mesh.vertices[e]) for k, e in enumerate(all_edges)]

    def up(self) -> FloatArray:
        """Viewing direction of a mesh: its area-weighted mean normal if open, +z for a closed solid."""
        if self.mesh.is_watertight:
            return np.array([0.0, 0.0, 1.0])
        n = np.sum(self.mesh.face_normals * self.mesh.area_faces[:, None], axis=0)
        norm = np.linalg.norm(n)
        return n / norm if norm > 0 else np.array([0.0, 0.0, 1.0])

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
    """A triangle mesh part (metres) with one face: the whole mesh."""

    mesh: Any
    source: str = "<memory>"
    unit: str = "m"

    is_mesh = True

    def __post_init__(self) -> None:
        self.faces = [MeshFace(self.mesh, 0)]

    def face(self, index: int) -> MeshFace:
        if index != 0:
            raise InputError(f"{self.source}: face index {index} out of range 0..0 (a mesh is one face)")
        return self.faces[0]

    def list_faces(self) -> list[FaceInfo]:
        return [self.faces[0].info()]

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        return self.faces[0].bounds

    def shared_edges(self, indices: list[int]) -> dict[int, list[Any]]:
        return {i: [] for i in indices}

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


