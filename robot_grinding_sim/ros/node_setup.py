"""The start-up every node of the package repeats, once: its parameters, its cell, its robot.

A node declares its parameters from its schema (ros/schemas.py) with :func:`declare_node_parameters`
and builds what they describe with :func:`load_cell` (or both at once: :func:`set_up_node`): the
cell's configuration (core.config, validated: a bad value is a
:class:`~robot_grinding_sim.ros.parameters.ParameterError` naming it and the node), the robot of
``robot.description_file`` (:func:`~robot_grinding_sim.ros.node_base.load_robot`, with the links
some parameters must name) and the frame of its outputs (``base_frame``, empty: the URDF's root).
A lifecycle node (hardware_driver) declares in its constructor and loads in ``on_configure``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.sim.held_part import output_frame
from robot_grinding_sim.ros.node_base import load_robot
from robot_grinding_sim.ros.parameters import ParameterError, declare_parameters
from robot_grinding_sim.ros.schemas import node_specs

__all__ = ["NodeCell", "declare_node_parameters", "load_cell", "set_up_node"]


@dataclass(frozen=True)
class NodeCell:
    """What a node's parameters describe.

    Attributes:
        params: the declared parameter values by name.
        cell: the cell's configuration (core.config.CellConfig), or None if not asked for.
        model: the robot (core.robot.dynamics.RobotModel), or None if not asked for.
        base_frame: the frame of the node's outputs ("" without a robot and a ``base_frame`` parameter).
    """

    params: dict[str, Any]
    cell: Any
    model: Any
    base_frame: str


def declare_node_parameters(node: Any, name: str, writable: bool = False) -> dict[str, Any]:
    """Declare the parameters of node ``name``'s schema on ``node``; their values by name
    (``writable``: without the read-only flags, for a node that re-reads them)."""
    return declare_parameters(node, node_specs(name, writable=writable))


def load_cell(params: dict[str, Any], name: str, *, cell: bool = True, robot: bool = True,
              tip_link: str | None = None, links: Sequence[str] = ()) -> NodeCell:
    """The cell and robot of a node's declared parameters.

    Args:
        params: the node's parameter values.
        name: the node's name (for the error messages).
        cell: build the cell's configuration (the cell groups must be among the parameters).
        robot: load the robot.
        tip_link: the chain's tip (default: ``tool.tcp_link`` of the cell or the parameters, if any).
        links: names of parameters whose values must be links of the robot.

    Raises:
        ParameterError: a bad value (named, with the node).
    """
    cfg = None
    if cell:
        try:
            from robot_grinding_sim.core.config import config_from_mapping

            cfg = config_from_mapping(params, allow_unknown=True)
        except ParameterError as exc:
            raise ParameterError(exc.name, exc.problem, name) from None
        except InputError as exc:  # a rule across parameters: its message names the one to change
            text = str(exc)
            if text.startswith("parameter '") and "': " in text:
                key, problem = text[len("parameter '"):].split("': ", 1)
                raise ParameterError(key, problem, name) from None
            raise ParameterError("sim.dt", text, name) from None
    model = None
    base_frame = ""
    if robot:
        if tip_link is None:
            tip_link = cfg.tool.tcp_link if cfg is not None else params.get("tool.tcp_link")
        model = load_robot(params, name, tip_link=tip_link, links=links)
        if cfg is not None and tip_link == cfg.tool.tcp_link:  # what a job needs of the robot, before any work
            from robot_grinding_sim.core.job.setup import check_robot_for_job

            try:
                check_robot_for_job(model, cfg, set(params))  # what this node declared
            except ParameterError as exc:
                raise ParameterError(exc.name, exc.problem, name) from None
        # a held part (core/sim/held_part.py): the geometry is in its nominal frame, which moves with it
        base_frame = params.get("base_frame") or output_frame(model)
    return NodeCell(params, cfg, model, base_frame)


def set_up_node(node: Any, name: str, *, writable: bool = False, cell: bool = True, robot: bool = True,
                tip_link: str | None = None, links: Sequence[str] = ()) -> NodeCell:
    """:func:`declare_node_parameters`, then :func:`load_cell` (the start-up of a plain node)."""
    return load_cell(declare_node_parameters(node, name, writable), name, cell=cell, robot=robot, tip_link=tip_link,
                     links=links)
