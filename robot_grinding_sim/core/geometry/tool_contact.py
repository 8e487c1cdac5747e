"""Where the ball tool touches the part: the workpiece scene and the tool's contact query.

One query serves the in-process job and ``collision_node``: the tool is a sphere of radius R
centred on the tool centre point (the URDF's ``tcp``); the workpiece is

- a CAD part with one ground face: that face's tessellation in a
  :class:`~robot_grinding_sim.core.geometry.collision.CollisionScene` (broad phase) with the
  face's exact surface (:class:`~robot_grinding_sim.core.geometry.projector.FaceProjector`)
  answering the closest-point query, so gap and normal are exact (not limited by the mesh);
- a mesh part, or several faces: the tessellated part, closest point on the triangles.

:meth:`ToolContactQuery.query` returns a :class:`ContactGeometry`: the signed gap between the
tool's surface and the part (m, < 0: penetration d = -gap), the part's outward unit normal at
the closest point and that point, in the frame of the scene (the robot's ``base_link``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.collision import FOOT_TOLERANCE, CollisionScene
from robot_grinding_sim.core.geometry.meshquery import signed_closest_world
from robot_grinding_sim.core.geometry.projector import FaceProjector, face_closest

FloatArray = NDArray[np.float64]

#: the exact surface of each scene :func:`workpiece_scene` made (the compiled query reads it)
_PROJECTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

TOOL = "tool"
WORKPIECE = "workpiece"
#: Columns of a contact row (the /contact/points cloud): the point on the part (m), the part's
#: outward unit normal, the penetration depth (m; negative: the gap of a near contact).
ROW_FIELDS = ("x", "y", "z", "normal_x", "normal_y", "normal_z", "depth")


@dataclass(frozen=True)
class ContactGeometry:
    """The tool against the part at one tool position (frame of the scene, base_link).

    Attributes:
        gap: signed distance from the tool's surface to the part, m (< 0: penetration).
        normal: (3,) unit normal of the part at ``point``, pointing out of the part (to the tool).
        point: (3,) closest point on the part's surface, m.
        centre: (3,) the tool centre the query was made for, m.
    """

    gap: float
    normal: FloatArray
    point: FloatArray
    centre: FloatArray

    @property
    def depth(self) -> float:
        """Penetration d = -gap, m (negative while apart)."""
        return -self.gap

    def row(self) -> FloatArray:
        """The contact as a row of :data:`ROW_FIELDS` (7,)."""
        return np.array([*self.point, *self.normal, self.depth])

    @classmethod
    def from_rows(cls, rows: FloatArray, centre: FloatArray) -> ContactGeometry | None:
        """The contact of rows (k, 7) of :data:`ROW_FIELDS` for the tool at ``centre`` (3,): the
        deepest row (a ball touches at one point); None for no rows.

        Raises:
            InputError: NaN or inf, or a normal that is not a unit vector.
        """
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, len(ROW_FIELDS))
        if len(rows) == 0:
            return None
        if not np.isfinite(rows).all():
            raise InputError("contact rows: NaN or inf values")
        r = rows[int(np.argmax(rows[:, 6]))]
        n = r[3:6]
        norm = float(np.linalg.norm(n))
        if not 0.9 < norm < 1.1:
            raise InputError(f"contact rows: normal {n.tolist()} is not a unit vector")
        return cls(-float(r[6]), n / norm, r[:3].copy(), np.asarray(centre, dtype=np.float64).copy())


def tool_sphere_radius(model: Any, tcp_link: str, tool_link: str | None = None) -> float:
    """Radius (m) of the sphere collision geometry centred on ``tcp_link`` (of ``tool_link`` if given).

    Raises:
        InputError: naming the URDF and links when there is no such sphere.
    """
    model = getattr(model, "robot", model)  # a held part's robot (sim/held_part.py): the tool where it stands
    q0 = np.zeros(model.nq)
    if tcp_link not in model.link_names:
        raise InputError(f"{model.source}: no link {tcp_link!r} (links: {', '.join(model.link_names)})")
    tcp = model.fk(q0, tcp_link)[:3, 3]
    for g in model.collision_geometry:
        if g.kind != "sphere" or (tool_link is not None and g.link != tool_link) or g.link not in model.link_names:
            continue
        centre = (model.fk(q0, g.link) @ g.origin)[:3, 3]
        if np.linalg.norm(centre - tcp) < 1e-6:
            return float(g.params["radius"])
    which = f"of link {tool_link!r} " if tool_link else ""
    raise InputError(f"{model.source}: no sphere collision geometry {which}centred on the tool centre point "
                     f"{tcp_link!r} (the grinding tool must be a ball)")


def workpiece_scene(part: Any, faces: Sequence[int], X_BP: FloatArray, tool_radius: float,
                    deflection: float = 2e-4, closed: bool | None = None) -> tuple[CollisionScene, bool]:
    """Collision scene with ``tool`` (sphere of ``tool_radius``) and ``workpiece`` at X_BP (4, 4).

    Returns:
        (scene, exact): exact is True when the contact geometry comes from the CAD surface (one
        face of a CAD part), False for the tessellated part (meshes, several faces).
    """
    scene = CollisionScene()
    scene.add_sphere(TOOL, tool_radius)
    if not getattr(part, "is_mesh", True) and len(faces) == 1:
        face = part.face(int(faces[0]))
        mesh = face.tessellate(deflection=deflection)
        scene.add_mesh(WORKPIECE, np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=False)
        proj = FaceProjector(face)
        scene.set_exact_surface(WORKPIECE, proj, surface_tolerance(proj, mesh, deflection))
        _PROJECTORS[scene] = proj
        return scene, True
    mesh = part.tessellate(deflection=deflection)
    scene.add_mesh(WORKPIECE, np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=closed)
    return scene, False


def surface_tolerance(proj: FaceProjector, mesh: Any, deflection: float) -> float:
    """Largest distance, m, between the face's tessellation and its surface, doubled: the
    vertices' and triangle centroids' distances to their closest points on the surface, each
    checked against the point itself (a warm start on another sheet of a face that wraps round
    would read centimetres; :func:`~robot_grinding_sim.core.geometry.projector.face_closest`)."""
    pts = np.vstack([np.asarray(mesh.vertices)[np.asarray(mesh.faces)].mean(axis=1), np.asarray(mesh.vertices)])
    closest, _, _ = proj(pts, pts, np.zeros(len(pts)), 10.0 * deflection)
    return 2.0 * float(np.linalg.norm(closest - pts, axis=1).max()) + 1e-9


@njit(cache=True)
def ball_contact(c, T, mesh, warm, tiny, radius, closed, tol, proj, out):
    """The ball tool centred at c (3,) against a CAD face's mesh at pose T (4, 4) with its exact
    (B-spline or analytic) surface, compiled: :meth:`CollisionScene.distance` of a sphere and a mesh with an exact
    surface (the mesh's signed closest point; the surface's where it is on the face and the foot of
    the perpendicular; the mesh's back side behind an open surface).

    mesh: the mesh's ``query_arrays``; warm (1,) int64 the last closest triangle (updated); tol the
    largest distance, m, of the mesh from the surface; proj the projector's
    :meth:`FaceProjector.arrays`: the surface's answer is checked against the mesh's closest point
    (:func:`~robot_grinding_sim.core.geometry.projector.face_closest`). Writes out (6,): outward unit
    normal, closest point on the part (base frame); returns the gap, m (< 0: penetration)."""
    buf = np.empty(9)
    sd, tri = signed_closest_world(c, T, *mesh, warm[0], tiny, buf)
    warm[0] = tri
    cl = buf[6:9].copy()
    hint = np.empty(3)  # the mesh's closest point in the part frame
    for i in range(3):
        hint[i] = ((buf[0] - T[0, 3]) * T[0, i] + (buf[1] - T[1, 3]) * T[1, i] + (buf[2] - T[2, 3]) * T[2, i])
    pr = np.empty(7)
    face_closest(cl, hint, sd, tol, *proj, pr)
    r0, r1, r2 = cl[0] - pr[0], cl[1] - pr[1], cl[2] - pr[2]
    sde = pr[3] * r0 + pr[4] * r1 + pr[5] * r2
    if pr[6] > 0.5 and math.sqrt(max(r0 * r0 + r1 * r1 + r2 * r2 - sde * sde, 0.0)) <= FOOT_TOLERANCE:
        for i in range(3):
            out[3 + i] = T[i, 0] * pr[0] + T[i, 1] * pr[1] + T[i, 2] * pr[2] + T[i, 3]
            out[i] = T[i, 0] * pr[3] + T[i, 1] * pr[4] + T[i, 2] * pr[5]
        return sde - radius
    for i in range(6):
        out[i] = buf[3 + i] if i < 3 else buf[i - 3]
    if not closed and sd <= -radius:  # behind an open surface: the gap to its back side
        d = math.sqrt((c[0] - buf[0]) ** 2 + (c[1] - buf[1]) ** 2 + (c[2] - buf[2]) ** 2)
        for i in range(3):
            out[i] = (c[i] - buf[i]) / d
        sd = d
    return sd - radius


class ToolContactQuery:
    """The ball tool's gap, normal and closest point against the workpiece of a scene.

    Args:
        scene: a scene holding a sphere ``tool`` and the ``workpiece`` (:func:`workpiece_scene`).
    """

    def __init__(self, scene: CollisionScene, tool: str = TOOL, workpiece: str = WORKPIECE) -> None:
        kind, params = scene.shape(tool)
        if kind != "sphere":
            raise InputError(f"tool object {tool!r} is a {kind}: the contact query needs a sphere")
        scene.shape(workpiece)
        self.scene = scene
        self.tool, self.workpiece = tool, workpiece
        self.radius = float(params[0])
        self._pose = np.eye(4)
        self.compiled = self._compiled_arrays()
        self._out = np.empty(6)

    def _compiled_arrays(self) -> tuple | None:
        """The arguments of :func:`ball_contact` after c (pose, mesh, warm, tiny, radius, closed,
        projector), or None when the part is not one CAD face with a compiled surface (B-spline,
        plane, cylinder, cone, sphere, torus): then the scene answers."""
        proj = _PROJECTORS.get(self.scene)
        arrays = proj.arrays() if proj is not None else None
        mesh = self.scene.mesh(self.workpiece)
        if arrays is None or not mesh.orientable:
            return None
        return (self.scene.pose(self.workpiece), mesh.query_arrays, np.array([-1], dtype=np.int64),
                float(self.scene.tiny), self.radius, bool(mesh.closed),
                float(self.scene.exact_surface_tolerance(self.workpiece)), arrays)

    def query(self, centre: FloatArray) -> ContactGeometry:
        """Contact geometry of the tool centred at ``centre`` (3,) m."""
        c = np.asarray(centre, dtype=np.float64).reshape(3)
        if not math.isfinite(float(c @ c)):
            raise InputError(f"tool centre {c.tolist()} is not finite")
        if self.compiled is not None:
            out = self._out
            self.compiled[0][:] = self.scene.pose(self.workpiece)  # the workpiece may have moved
            gap = ball_contact(c, *self.compiled, out)
            return ContactGeometry(float(gap), out[:3].copy(), out[3:6].copy(), c.copy())
        self._pose[:3, 3] = c
        self.scene.set_pose(self.tool, self._pose)
        dist, p_tool, p_part = self.scene.distance(self.tool, self.workpiece)
        n = (c - p_tool) / self.radius
        return ContactGeometry(float(dist), n, np.asarray(p_part, dtype=np.float64), c.copy())

    def rows(self, centre: FloatArray, margin: float) -> FloatArray:
        """Contact rows (k, 7) of :data:`ROW_FIELDS`: one while the gap is below ``margin`` (m), else none."""
        geom = self.query(centre)
        return geom.row()[None] if geom.gap < margin else np.zeros((0, len(ROW_FIELDS)))
