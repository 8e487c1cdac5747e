"""The workpiece of a node's ``workpiece.*`` parameters: the part, its ground faces and its pose.

Shared by collision_node (the contact scene), dynamics_node (``coupling: local``: the same scene in
the arm's process) and contact_solver_node (the removal map). No rclpy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from robot_grinding_sim.core.config import group_from_values
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros.parameters import ParameterError


def load_workpiece(values: dict[str, Any], model: Any, node_name: str) -> tuple[Any, list[int], np.ndarray, str]:
    """(part, faces, X_BP (4, 4), description) from the ``workpiece.*`` parameters; ParameterError
    naming the parameter for a bad part or face."""
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.planning.planner import check_part_size, default_face, pose_matrix, robot_reach

    wp = group_from_values("workpiece", values)
    try:
        part = parts.load_part(wp.part, wp.unit or None)
        # the size check of every planner (a unit mistake refused before the part is tessellated); the
        # tool's size is the planner's concern, the robot's reach everybody's
        check_part_size(part, 0.0, robot_reach(model) if model is not None else None)
    except InputError as exc:
        raise ParameterError("workpiece.part", str(exc), node_name) from None
    try:
        faces = [default_face(part)] if list(wp.faces) == [-1] else [int(f) for f in wp.faces]
        for f in faces:
            part.face(f)
    except InputError as exc:
        raise ParameterError("workpiece.faces", str(exc), node_name) from None
    return part, faces, pose_matrix(wp.pose), f"{wp.part} face {faces}"


class ToolScene(NamedTuple):
    """The tool's contact scene (:func:`tool_scene`): ``scene`` (the collision scene with the
    workpiece), ``query`` (its ToolContactQuery), ``part``, ``X_BP`` (4, 4) part pose in the base
    frame, ``source`` (a description), ``radius`` (the tool's radius, m: the ball's, the wheel's or
    disc's, the pad's half width), ``exact`` (the CAD surface, not triangles), ``tool`` (the
    :class:`~robot_grinding_sim.core.geometry.tools.Tool`)."""

    scene: Any
    query: Any
    part: Any
    X_BP: np.ndarray
    source: str
    radius: float
    exact: bool
    tool: Any


def tool_scene(values: dict[str, Any], model: Any, node_name: str, cell: Any) -> ToolScene:
    """The contact scene of the cell's tool and the workpiece and its query, from the ``tool.*``,
    ``contact.*``, ``process.target_force`` and ``workpiece.*`` parameters (``cell``: their
    CellConfig): the in-process job's (:func:`~robot_grinding_sim.core.job.setup.job_tool`,
    :func:`~robot_grinding_sim.core.geometry.tool_contact.workpiece_scene`,
    :func:`~robot_grinding_sim.core.job.setup.contact_query`); ParameterError naming the parameter."""
    from robot_grinding_sim.core.geometry.tool_contact import workpiece_scene
    from robot_grinding_sim.core.job.setup import contact_query, job_tool, static_penetration

    try:
        tool = job_tool(model, cell)
    except InputError as exc:
        raise ParameterError("contact.model" if "contact.model" in str(exc) else "tool.link", str(exc),
                             node_name) from None
    try:
        penetration = static_penetration(tool, cell)
    except InputError as exc:
        raise ParameterError("process.target_force", str(exc), node_name) from None
    part, faces, X_BP, source = load_workpiece(values, model, node_name)
    wp = group_from_values("workpiece", values)
    closed = {"auto": None, "true": True, "false": False}[wp.closed]
    try:
        scene, exact = workpiece_scene(part, faces, X_BP, tool.radius, wp.deflection, closed)
        query = contact_query(scene, tool, cell, penetration)
    except InputError as exc:
        raise ParameterError("workpiece.part", str(exc), node_name) from None
    return ToolScene(scene, query, part, X_BP, source, float(tool.radius), bool(exact), tool)
