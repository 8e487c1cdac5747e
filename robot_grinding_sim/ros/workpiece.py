"""The workpiece of a node's ``workpiece.*`` parameters: the part, its ground faces and its pose.

Shared by collision_node (the contact scene) and contact_solver_node (the removal map). No rclpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robot_grinding_sim.core.config import group_from_values
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros.parameters import ParameterError


def load_workpiece(values: dict[str, Any], model: Any, node_name: str) -> tuple[Any, list[int], np.ndarray, str]:
    """(part, faces, X_BP (4, 4), description) from the ``workpiece.*`` parameters; ParameterError
    naming the parameter for a bad part or face."""
    from robot_grinding_sim.core.geometry import cad
    from robot_grinding_sim.core.planning.planner import default_face, pose_matrix

    wp = group_from_values("workpiece", values)
    try:
        part = cad.load_part(wp.part, wp.unit or None)
    except InputError as exc:
        raise ParameterError("workpiece.part", str(exc), node_name) from None
    try:
        faces = [default_face(part)] if list(wp.faces) == [-1] else [int(f) for f in wp.faces]
        for f in faces:
            part.face(f)
    except InputError as exc:
        raise ParameterError("workpiece.faces", str(exc), node_name) from None
    return part, faces, pose_matrix(wp.pose), f"{wp.part} face {faces}"
