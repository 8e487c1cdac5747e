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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.collision import CollisionScene
from robot_grinding_sim.core.geometry.projector import FaceProjector

FloatArray = NDArray[np.float64]

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
        scene.set_exact_surface(WORKPIECE, FaceProjector(face))
        return scene, True
    mesh = part.tessellate(deflection=deflection)
    scene.add_mesh(WORKPIECE, np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=closed)
    return scene, False


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

    def query(self, centre: FloatArray) -> ContactGeometry:
        """Contact geometry of the tool centred at ``centre`` (3,) m."""
        c = np.asarray(centre, dtype=np.float64).reshape(3)
        if not math.isfinite(float(c @ c)):
            raise InputError(f"tool centre {c.tolist()} is not finite")
        self._pose[:3, 3] = c
        self.scene.set_pose(self.tool, self._pose)
        dist, p_tool, p_part = self.scene.distance(self.tool, self.workpiece)
        n = (c - p_tool) / self.radius
        return ContactGeometry(float(dist), n, np.asarray(p_part, dtype=np.float64), c.copy())

    def rows(self, centre: FloatArray, margin: float) -> FloatArray:
        """Contact rows (k, 7) of :data:`ROW_FIELDS`: one while the gap is below ``margin`` (m), else none."""
        geom = self.query(centre)
        return geom.row()[None] if geom.gap < margin else np.zeros((0, len(ROW_FIELDS)))
