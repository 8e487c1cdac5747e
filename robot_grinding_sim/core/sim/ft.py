"""The simulated F/T sensor of a cell: its model from the configuration and the URDF.

One builder for the in-process job's bag and ``contact_solver_node``: the sensor frame
(``ft_sensor.frame``), the pose of the tool centre point in it, the tool's mass and centre of
mass below the measuring face (from ``ft_sensor.tool_mass`` / ``tool_com``, or, when the mass is
negative, summed from the URDF inertials of every link below the frame), bias, noise, low-pass
filter and seed (:class:`~robot_grinding_sim.core.contact.ft_sensor.FTSensorModel`).

A robot that holds the part (:class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel`) has its
sensor either between the flange and the part (``workpiece.link`` at or below ``ft_sensor.frame``)
or under the tool standing in the cell (the frame fixed to the root link). Between flange and part
it carries the part: its load is the part's weight (the part's body of
:func:`~robot_grinding_sim.core.job.setup.held_part_inertia`, at its centre of mass, plus the URDF's
inertials below the frame) and the opposite of the contact wrench on the tool, taken at the tool
centre whose pose in the sensor frame changes with q; under the tool it is rigid with the tool
centre (the tool below it) and never turns. :func:`sensor_inputs` gives the sensor's orientation
(and the tool centre's pose in it) at the arm's q, for both, and for a robot that carries the tool.
Only the weight is modelled (no inertial load: the accelerations of a grinding pass are small).
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
    from robot_grinding_sim.core.sim.held_part import HeldPartModel

    ft, tcp = cell.ft_sensor, cell.tool.tcp_link
    for link, what in ((ft.frame, "ft_sensor.frame"), (tcp, "tool.tcp_link")):
        if link not in model.link_names:
            raise InputError(f"parameter '{what}': '{link}' is not a link of {model.source}")
    held = isinstance(model, HeldPartModel)
    robot = model.robot if held else model  # root-frame poses of the links
    q0 = np.zeros(model.nq)
    X_S_tcp = np.linalg.inv(robot.fk(q0, ft.frame)) @ robot.fk(q0, tcp)
    X_S_tcp[3] = (0.0, 0.0, 0.0, 1.0)
    if ft.tool_mass >= 0:
        mass, com = ft.tool_mass, np.asarray(ft.tool_com, dtype=float)
    else:
        mass, com = mass_below(robot, ft.frame)
    part_side = held and carries_part(model, ft.frame)
    if part_side and model.part_mass > 0:  # the part's weight hangs from the sensor too
        X_S_P = np.linalg.inv(robot.fk(q0, ft.frame)) @ robot.fk(q0, model.holder_link) @ model.X_hP
        c_part = (X_S_P @ np.r_[model.part_com, 1.0])[:3]
        total = mass + model.part_mass
        com, mass = (mass * com + model.part_mass * c_part) / total, total
    return FTSensorModel(FTSensorParams(X_S_tcp=X_S_tcp, tool_mass=mass, tool_com=com, gravity=cell.sim.gravity,
                                        bias=ft.bias, noise_std=ft.noise_std, cutoff_hz=ft.cutoff_hz or None,
                                        seed=ft.seed, part_side=part_side))


def carries_part(model: Any, frame: str) -> bool:
    """Whether the F/T sensor at link ``frame`` carries the part a
    :class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel` holds (the holder is ``frame`` or
    below it in the URDF's tree), rather than standing under the tool (``frame`` fixed to the root).

    Raises:
        InputError: naming ``ft_sensor.frame``: a frame on the arm that does not carry the part (it
            would measure neither the contact nor the part).
    """
    from robot_grinding_sim.core.robot.model import path_from_root

    robot = model.robot
    if robot.chain.link_body[frame] < 0:
        return False
    if frame in (path_from_root(robot.source, model.holder_link) or [model.holder_link]):
        return True
    raise InputError(f"parameter 'ft_sensor.frame': '{frame}' moves with the arm in {robot.source} but does not "
                     f"carry the part held on '{model.holder_link}': name the link at the sensor's measuring face "
                     "between the flange and the part (or under the tool standing in the cell)")


def sensor_inputs(ft: FTSensorModel, model: Any, frame: str, q: Any,
                  R_W_tcp: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """What :meth:`FTSensorModel.measure_many
    <robot_grinding_sim.core.contact.ft_sensor.FTSensorModel.measure_many>` needs besides the
    wrenches, at the arm's joint positions q (K, n) (or (n,)): the sensor's orientation in the root
    frame R_WS (K, 3, 3) and, for a sensor that carries a held part, the tool centre's pose in the
    sensor frame X_S_tcp (K, 4, 4) (None otherwise). ``R_W_tcp`` (K, 3, 3): the tool centre's
    orientation when the caller has it (a robot that carries the tool: no kinematics needed)."""
    from robot_grinding_sim.core.sim.held_part import HeldPartModel

    q = np.asarray(q, dtype=float)
    one = q.ndim == 1
    Q = q.reshape(-1, model.nq)
    if not isinstance(model, HeldPartModel):
        R = model.fk(Q, model.tip_link)[:, :3, :3] if R_W_tcp is None else np.asarray(R_W_tcp).reshape(-1, 3, 3)
        R_WS = ft.sensor_orientation(R)
        return (R_WS[0], None) if one else (R_WS, None)
    X_WS = model.robot.fk(Q, frame)
    X = None
    if ft.params.part_side:
        X = np.linalg.solve(X_WS, np.broadcast_to(model.X_BT, X_WS.shape))  # inv(X_WS) X_WT
        X[:, 3] = (0.0, 0.0, 0.0, 1.0)
    R_WS = np.ascontiguousarray(X_WS[:, :3, :3])
    if one:
        return R_WS[0], None if X is None else X[0]
    return R_WS, X
