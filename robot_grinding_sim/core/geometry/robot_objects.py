"""A robot in the collision scene: its URDF ``<collision>`` elements as named shapes with world
poses, and the pairs of them that touch by construction (same or adjacent bodies).

Used by :meth:`~robot_grinding_sim.core.geometry.collision.CollisionScene.add_robot`. The model
is a :class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` (duck-typed: its
``collision_geometry``, ``link_poses(q)`` and ``chain.link_body``); metres.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import GeometryError
from robot_grinding_sim.core.geometry.collision_objects import BOX, CYLINDER, MESH, SPHERE, FloatArray
from robot_grinding_sim.core.geometry.meshquery import load_mesh_file


@dataclass(frozen=True)
class RobotShape:
    """One collision element of a robot, ready for the scene.

    Attributes:
        name: ``f"{prefix}{link}"``, ``f"{prefix}{link}#{k}"`` for the k-th extra element of a link.
        link: the link it belongs to.
        kind: ``"sphere"``, ``"box"``, ``"cylinder"`` or ``"mesh"``.
        size: sphere (radius,); box (x, y, z) full extents; cylinder (radius, length); mesh ().
        T: (4, 4) world pose at the configuration asked for.
        origin: (4, 4) pose of the element in the link frame.
        vertices, faces: a mesh's triangles (scaled, element frame); None for primitives.
    """

    name: str
    link: str
    kind: str
    size: tuple[Any, ...]
    T: FloatArray
    origin: FloatArray
    vertices: FloatArray | None = None
    faces: npt.NDArray[np.int64] | None = None


def robot_shapes(model: Any, q: npt.ArrayLike, prefix: str, base: FloatArray) -> list[RobotShape]:
    """The robot's collision elements at configuration q, the root link at world pose ``base``.

    Raises:
        GeometryError: a mesh file that could not be found or read, or an unknown geometry
            (naming the link).
    """
    poses = model.link_poses(q)
    out: list[RobotShape] = []
    count: dict[str, int] = {}
    for g in model.collision_geometry:
        k = count.get(g.link, 0)
        count[g.link] = k + 1
        name = f"{prefix}{g.link}" if k == 0 else f"{prefix}{g.link}#{k}"
        T = base @ poses[g.link] @ g.origin
        origin = np.asarray(g.origin, dtype=np.float64)
        if g.kind == SPHERE:
            out.append(RobotShape(name, g.link, SPHERE, (g.params["radius"],), T, origin))
        elif g.kind == BOX:
            out.append(RobotShape(name, g.link, BOX, tuple(g.params["size"]), T, origin))
        elif g.kind == CYLINDER:
            out.append(RobotShape(name, g.link, CYLINDER, (g.params["radius"], g.params["length"]), T, origin))
        elif g.kind == MESH:
            if g.mesh_path is None:
                raise GeometryError(f"collision mesh '{g.params.get('filename')}' of link "
                                    f"'{g.link}' was not found")
            v, f = load_mesh_file(g.mesh_path)
            v = v * np.asarray(g.params.get("scale", np.ones(3)), dtype=np.float64)
            out.append(RobotShape(name, g.link, MESH, (), T, origin, v, f))
        else:
            raise GeometryError(f"link '{g.link}': unsupported collision geometry '{g.kind}'")
    return out


def adjacent_pairs(model: Any, shapes: list[RobotShape]) -> list[tuple[str, str]]:
    """Pairs of shapes on the same rigid body or on adjacent bodies of the model's chain."""
    link_body = getattr(getattr(model, "chain", None), "link_body", {})
    body = [link_body.get(s.link, 0) for s in shapes]
    return [(s1.name, s2.name) for i, s1 in enumerate(shapes) for j, s2 in enumerate(shapes[i + 1:], i + 1)
            if abs(body[i] - body[j]) <= 1]
