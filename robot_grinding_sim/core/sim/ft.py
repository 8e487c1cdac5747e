"""The simulated F/T sensor of a cell: its model from the configuration and the URDF.

One builder for the in-process job's bag and ``contact_solver_node``: the sensor frame
(``ft_sensor.frame``), the pose of the tool centre point in it, the tool's mass and centre of
mass below the measuring face (from ``ft_sensor.tool_mass`` / ``tool_com``, or, when the mass is
negative, summed from the URDF inertials of every link below the frame), bias, noise, low-pass
filter and seed (:class:`~robot_grinding_sim.core.contact.ft_sensor.FTSensorModel`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams
from robot_grinding_sim.core.errors import InputError


def mass_below(model: Any, frame: str) -> tuple[float, np.ndarray]:
    """Mass (kg) and centre of mass (3,) in ``frame`` of the URDF links below ``frame`` (its
    descendants through joints; the frame's own link excluded: it is the sensor itself)."""
    import yourdfpy

    robot = yourdfpy.URDF.load(str(model.source), build_scene_graph=False, load_meshes=False,
                               build_collision_scene_graph=False, load_collision_meshes=False)
    children: dict[str, list[str]] = {}
    for j in robot.joint_map.values():
        children.setdefault(j.parent, []).append(j.child)
    below, stack = [], list(children.get(frame, []))
    while stack:
        link = stack.pop()
        below.append(link)
        stack += children.get(link, [])
    q0 = np.zeros(model.nq)
    T_S = np.linalg.inv(model.fk(q0, frame))
    mass, moment = 0.0, np.zeros(3)
    for link in below:
        inertial = robot.link_map[link].inertial
        if inertial is None or inertial.mass is None or link not in model.link_names:
            continue
        origin = np.eye(4) if inertial.origin is None else np.asarray(inertial.origin)
        c = (T_S @ model.fk(q0, link) @ origin)[:3, 3]
        mass += float(inertial.mass)
        moment += float(inertial.mass) * c
    return mass, (moment / mass if mass > 0 else np.zeros(3))


def ft_sensor_model(cell: CellConfig, model: Any) -> FTSensorModel:
    """The cell's F/T sensor model (see the module docstring).

    Raises:
        InputError: the sensor frame or the tcp is not a link of the robot, or a bad value.
    """
    ft, tcp = cell.ft_sensor, cell.tool.tcp_link
    for link, what in ((ft.frame, "ft_sensor.frame"), (tcp, "tool.tcp_link")):
        if link not in model.link_names:
            raise InputError(f"parameter '{what}': '{link}' is not a link of {model.source}")
    q0 = np.zeros(model.nq)
    X_S_tcp = np.linalg.inv(model.fk(q0, ft.frame)) @ model.fk(q0, tcp)
    X_S_tcp[3] = (0.0, 0.0, 0.0, 1.0)
    if ft.tool_mass >= 0:
        mass, com = ft.tool_mass, np.asarray(ft.tool_com, dtype=float)
    else:
        mass, com = mass_below(model, ft.frame)
    return FTSensorModel(FTSensorParams(X_S_tcp=X_S_tcp, tool_mass=mass, tool_com=com, gravity=cell.sim.gravity,
                                        bias=ft.bias, noise_std=ft.noise_std, cutoff_hz=ft.cutoff_hz or None,
                                        seed=ft.seed))
