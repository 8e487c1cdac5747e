"""Everything a grinding job loads before it simulates: robot, part, plan, contact scene.

:func:`setup_job` takes a :class:`JobConfig` (the cell's configuration plus the job's selection:
a plan.json to run, or how many passes of what length to plan) and returns a :class:`JobSetup`:

- the robot (:class:`~robot_grinding_sim.core.robot.dynamics.RobotModel`, tip link the tool
  centre point) and its tool (:func:`job_tool`: the shape from the URDF's collision primitive and
  ``tool.*``, :mod:`~robot_grinding_sim.core.geometry.tools`);
- the part at its pose and the plan: passes on the exact CAD surface from
  :func:`~robot_grinding_sim.core.planning.planner.plan`, or those of a plan.json (its part,
  pose, passes, offsets and job trajectory; its cell configuration is the job's unless changed);
- the workpiece scene whose contact query the coupled step uses
  (:mod:`~robot_grinding_sim.core.geometry.tool_contact`), the contact law, and the root-frame
  pass paths the trajectory builder needs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import GrindingSimError, InputError, PlanningError
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
from robot_grinding_sim.core.geometry.tools import Tool, cell_tool
from robot_grinding_sim.core.planning.trajectory import JobPaths, JointTrajectory, job_paths
from robot_grinding_sim.core.sim.coupled_step import make_contact_law

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class JobConfig:
    """A grinding job: the cell's configuration and what to grind.

    Attributes:
        cell: every physical and process parameter (:class:`~robot_grinding_sim.core.config.CellConfig`).
        plan_file: run this plan.json (its part, pose, passes and job trajectory) instead of planning.
        optimise: run the force-target optimisation; None: ``cell.optimise.enabled`` when planning,
            False for a plan.json (its offsets were optimised when it was made).
        max_passes: plan only the first N passes (None: all).
        pass_length: keep the middle ``pass_length`` m of each pass (None: whole passes).
        workpiece_pose: with a plan.json, the part is here ('x y z roll pitch yaw' m, rad, base_link)
            rather than where the plan put it (its passes move with it, its joint trajectory does
            not: the part's placement error under a fixed path). None: the plan's pose. Given
            explicitly (``--workpiece-pose``, ``--set workpiece.pose``), never from a parameter file:
            a cell.yaml's ``workpiece.pose`` does not move the part of a plan.
    """

    cell: CellConfig = field(default_factory=CellConfig)
    plan_file: str | None = None
    optimise: bool | None = None
    max_passes: int | None = None
    pass_length: float | None = None
    workpiece_pose: tuple[float, ...] | None = None

    def validate(self) -> JobConfig:
        self.cell.validate()
        if self.max_passes is not None and self.max_passes < 1:
            raise InputError(f"max-passes must be >= 1, got {self.max_passes}")
        if self.pass_length is not None and not (math.isfinite(self.pass_length) and self.pass_length > 0):
            raise InputError(f"pass-length must be > 0 m, got {self.pass_length}")
        return self

    @property
    def optimising(self) -> bool:
        if self.optimise is not None:
            return bool(self.optimise)
        return self.plan_file is None and self.cell.optimise.enabled


@dataclass
class JobSetup:
    """What a job runs on (see the module docstring)."""

    cfg: JobConfig
    model: Any
    part: Any
    plan: Any
    faces: list[int]
    X_BP: FloatArray
    scene: Any
    exact_surface: bool
    query: ToolContactQuery
    law: Any
    paths: JobPaths
    penetration: float
    tool_radius: float
    source: str
    plan_data: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: the plan.json's job trajectory as read (checked against ``model``), or None
    plan_trajectory: JointTrajectory | None = None
    #: the tool (:class:`~robot_grinding_sim.core.geometry.tools.Tool`)
    tool: Tool | None = None

    @property
    def cell(self) -> CellConfig:
        return self.cfg.cell

    @property
    def q_home(self) -> FloatArray:
        return np.asarray(self.cell.robot.home, dtype=float)

    def planned_trajectory(self) -> tuple[JointTrajectory, list[float]] | None:
        """The job trajectory and offsets stored in the plan.json, or None."""
        if self.plan_data is None or self.plan_trajectory is None:
            return None
        ft = self.plan_data.get("force_target") or {}
        offsets = [float(o) for o in ft.get("offsets_m", [0.0] * len(self.paths.passes))]
        return self.plan_trajectory, offsets


def load_robot_model(description_file: str, tcp_link: str, package_dirs: Any = ()) -> Any:
    """The RobotModel of a URDF (empty: the package's default robot) with tip link ``tcp_link``;
    ``package_dirs``: ``robot.package_dirs`` (NAME=PATH entries or directories) for ``package://`` URIs.

    Raises:
        ParameterError: naming ``tool.tcp_link`` (not a link of the URDF) or ``robot.description_file``
            (missing, malformed, a moving body without inertia), saying what to add.
    """
    from robot_grinding_sim.core.errors import ModelError
    from robot_grinding_sim.core.parameters import ParameterError
    from robot_grinding_sim.core.resources import default_urdf, resolve_package_uri
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    urdf = str(default_urdf()) if description_file in ("", "default") else resolve_package_uri(description_file)
    try:
        return RobotModel.from_urdf(urdf, tip_link=tcp_link, package_dirs=list(package_dirs))
    except ModelError as exc:
        text = str(exc)
        if f"tip link {tcp_link!r} is not a link" in text:
            raise ParameterError("tool.tcp_link", f"{tcp_link!r} is not a link of {urdf}: add the tool centre point "
                                 "(a link fixed to the tool at its centre, z out of the tool) to the URDF, or name "
                                 f"one of its links ({', '.join(_links_of(text))})") from None
        if "has no <inertial>" in text:
            raise ParameterError("robot.description_file", f"{text.removeprefix('URDF ')}: add an <inertial> "
                                 "(mass, centre of mass, inertia) to it") from None
        raise ParameterError("robot.description_file", text) from None
    except GrindingSimError:
        raise
    except Exception as exc:
        raise InputError(f"{urdf}: cannot load the robot ({exc})") from exc


def _links_of(text: str) -> list[str]:
    """The link names listed in a ModelError's '(links: [...])'."""
    import ast

    try:
        return list(ast.literal_eval(text[text.index("(links: ") + 8:text.rindex(")")]))
    except (ValueError, SyntaxError):
        return []


def check_robot_for_job(model: Any, cell: CellConfig, names: Any = None) -> None:
    """Everything a job needs of the robot's URDF, checked before any work starts (one line each,
    naming the parameter and saying what to add): ``robot.home`` (:func:`check_home`); every collision
    mesh found (``robot.package_dirs``); ``tool.link`` and ``tool.links`` links of the URDF with
    collision geometry, below ``tool.tcp_link``'s chain; ``ft_sensor.frame`` a link on the chain from
    the root to the tcp (the sensor carries the tool).

    ``names``: check only what these parameters name (a node checks the ones it declared); None: all.

    Raises:
        ParameterError: naming the parameter.
    """
    from robot_grinding_sim.core.parameters import ParameterError

    def wanted(name: str) -> bool:
        return names is None or name in names

    urdf = model.source
    if wanted("robot.home"):
        check_home(model, cell.robot.home)
    for g in model.collision_geometry:
        if g.kind == "mesh" and g.mesh_path is None:
            uri = str(g.params.get("filename"))
            pkg = uri[len("package://"):].split("/", 1)[0] if uri.startswith("package://") else ""
            how = (f"give the directory of package '{pkg}' (--package-dir {pkg}=PATH)" if pkg else
                   "give the directory it is relative to (--package-dir PATH)")
            raise ParameterError("robot.package_dirs", f"collision mesh '{uri}' of link '{g.link}' in {urdf} is "
                                 f"not found: {how}")
    has_geometry = {g.link for g in model.collision_geometry}
    chain_links = _chain_links(model)
    if getattr(model, "holder_link", None) is not None:  # the part on the robot: the sensor may carry it
        chain_links += [k for k in _chain_links(model, model.holder_link) if k not in chain_links]
    for key, links in (("tool.link", (cell.tool.link,)), ("tool.links", tuple(cell.tool.links))):
        if not wanted(key):
            continue
        for name in links:
            if name not in model.link_names:
                raise ParameterError(key, f"{name!r} is not a link of {urdf} (links: {', '.join(model.link_names)})")
            if name not in has_geometry:
                what = ("the tool's shape (a <sphere> centred on the tool centre point "
                        f"'{cell.tool.tcp_link}', a <cylinder> or a <box>: docs/contact.md, tool shapes)"
                        if key == "tool.link" else "its shape")
                raise ParameterError(key, f"link {name!r} of {urdf} has no <collision> geometry: add {what} to it, "
                                     "or name the link that has it")
            if model.chain.link_body[name] != model.chain.link_body[model.tip_link]:
                raise ParameterError(key, f"link {name!r} of {urdf} does not move with the tool centre point "
                                     f"'{model.tip_link}' (tool.tcp_link): name a link of the tool")
    frame = cell.ft_sensor.frame
    if not wanted("ft_sensor.frame"):
        return
    if frame not in model.link_names:
        raise ParameterError("ft_sensor.frame", f"{frame!r} is not a link of {urdf}: add a link at the F/T sensor's "
                             f"measuring face between the flange and '{model.tip_link}', or name one of its links "
                             f"({', '.join(chain_links)})")
    if frame not in chain_links:
        raise ParameterError("ft_sensor.frame", f"link {frame!r} of {urdf} is not on the chain from "
                             f"'{model.root_link}' to the tool centre point '{model.tip_link}' (the sensor carries "
                             f"the tool): name one of {', '.join(chain_links)}")


def _chain_links(model: Any, tip: str | None = None) -> list[str]:
    """The links on the path from the root to ``tip`` (default the tip link), root first (URDF parent links)."""
    from robot_grinding_sim.core.robot.model import path_from_root

    path = path_from_root(model.source, model.tip_link if tip is None else tip)
    return list(model.link_names) if path is None else path


def check_home(model: Any, home: Any) -> FloatArray:
    """``robot.home`` checked against the robot it is for: one finite value per joint in the URDF's
    order, each within the joint's limits. The one check of it: ``grinding check-config``, every
    command's cell (``--set robot.home=...``) and dynamics_node call it.

    Returns:
        (n,) rad, the home configuration.

    Raises:
        ParameterError: named ``robot.home``, saying what is wrong.
    """
    from robot_grinding_sim.core.parameters import ParameterError
    from robot_grinding_sim.core.robot.joint_trajectory import JointLimits

    q = np.asarray(home, dtype=float).reshape(-1)
    if q.shape != (model.nq,):
        raise ParameterError("robot.home", f"expected {model.nq} values in the URDF's joint order "
                             f"({', '.join(model.joint_names)}), got {q.size}")
    try:
        JointLimits.from_model(model).check_positions(q, "robot.home")
    except InputError as exc:
        raise ParameterError("robot.home", str(exc).removeprefix("robot.home: ")) from None
    return q


def job_tool(model: Any, cell: CellConfig) -> Tool:
    """The cell's tool: the collision primitive of ``tool.link`` as ``tool.shape``
    (:func:`~robot_grinding_sim.core.geometry.tools.cell_tool`), checked against the contact law: a
    tool with a patch (wheel, pad) takes the Winkler law, the ball a point law.

    Raises:
        InputError: naming the URDF, ``tool.*`` or ``contact.model``.
    """
    t = cell.tool
    tool = cell_tool(model, t.tcp_link, t.link, t.shape, t.patch_spacing, t.face_angle)
    if tool.distributed and cell.contact.model != "winkler":
        raise InputError(f"the {tool.shape} tool ({model.source}, link {cell.tool.link!r}) presses over a patch: it "
                         f"takes contact.model winkler (contact.stiffness then the pressure per metre of "
                         f"penetration, N/m^3), not {cell.contact.model}")
    if not tool.distributed and cell.contact.model == "winkler":
        raise InputError(f"contact.model winkler is a pressure over a patch: the ball ({model.source}, link "
                         f"{cell.tool.link!r}) takes a point law (kelvin_voigt, hunt_crossley, ...)")
    return tool


def static_penetration(tool: Tool, cell: CellConfig, law: Any = None) -> float:
    """The penetration (m) that holds ``process.target_force`` at rest on a plane with the cell's
    contact law (``law``: its model, default made from ``contact.*``): the planned penetration."""
    law = make_contact_law(cell.contact) if law is None else law
    return tool.static_penetration(law, cell.process.target_force, cell.contact.stiffness)


def contact_query(scene: Any, tool: Tool, cell: CellConfig, penetration: float | None = None) -> ToolContactQuery:
    """The tool's contact query on the workpiece scene; a tool with a patch takes its patch
    stiffness at no less than a quarter of its area at the planned ``penetration`` (m; default
    :func:`static_penetration`) on a plane (the onset: a patch that starts at zero area). The
    in-process job's query and the node graph's (collision_node, dynamics_node ``coupling: local``)."""
    if tool.distributed and penetration is None:
        penetration = static_penetration(tool, cell)
    floor = 0.25 * tool.plane_area(penetration) if tool.distributed else 0.0
    return ToolContactQuery(scene, shape=tool, pressure_stiffness=cell.contact.stiffness, floor_area=floor)


def cell_robot_model(cell: CellConfig) -> Any:
    """The cell's robot (:func:`load_robot_model`) with what a job needs of it checked
    (:func:`check_robot_for_job`: ``robot.home``, meshes, tool links, the F/T frame).

    With ``workpiece.link`` (the robot holds the part, the tool stands in the cell): the arm's chain
    ends at that link, and the job sees it through
    :class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel` (the tool centre relative to the
    part at ``workpiece.pose``)."""
    wp = cell.workpiece
    if not wp.link:
        model = load_robot_model(cell.robot.description_file, cell.tool.tcp_link, cell.robot.package_dirs)
    else:
        model = held_part_model(cell)
    check_robot_for_job(model, cell)
    return model


def held_part_model(cell: CellConfig, X_BP0: Any = None, part: Any = None) -> Any:
    """The robot of a cell whose robot holds the part (``workpiece.link``): loaded with that link
    as the tip of its chain, seen as :class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel`
    with the part at ``X_BP0`` (default ``workpiece.pose``), the part's rigid body
    (:func:`held_part_inertia`; ``part``: the loaded part, default ``workpiece.part``) lumped into the
    holder's inertia.

    Raises:
        ParameterError: naming ``workpiece.link``, ``tool.tcp_link``, ``workpiece.mass`` or
            ``workpiece.inertia``.
    """
    from robot_grinding_sim.core.parameters import ParameterError
    from robot_grinding_sim.core.planning.planner import pose_matrix
    from robot_grinding_sim.core.sim.held_part import HeldPartModel

    wp = cell.workpiece
    try:
        robot = load_robot_model(cell.robot.description_file, wp.link, cell.robot.package_dirs)
    except ParameterError as exc:
        raise ParameterError("workpiece.link", exc.problem.replace(
            "add the tool centre point (a link fixed to the tool at its centre, z out of the tool) to the URDF",
            "add the link the part is fixed to (the flange, or a gripper on it) to the URDF")) from None
    if cell.tool.tcp_link not in robot.link_names:
        raise ParameterError("tool.tcp_link", f"{cell.tool.tcp_link!r} is not a link of {robot.source}: add the tool "
                             "centre point (a link fixed to the tool standing in the cell, at its centre, z out of "
                             f"the tool) to the URDF, or name one of its links ({', '.join(robot.link_names)})")
    X0 = pose_matrix(wp.pose) if X_BP0 is None else np.asarray(X_BP0, dtype=float)
    try:
        model = HeldPartModel(robot, cell.tool.tcp_link, wp.link, pose_matrix(wp.grasp), X0)
    except InputError as exc:
        key = "tool.tcp_link" if str(exc).startswith("tool.tcp_link") else "workpiece.link"
        raise ParameterError(key, str(exc).split(" ", 1)[1]) from None
    model.hold(*held_part_inertia(cell, part))
    return model


def held_part_inertia(cell: CellConfig, part: Any = None) -> tuple[float, FloatArray, FloatArray]:
    """The held part's rigid body: mass (kg), centre of mass (3,) and inertia (3, 3) about it (kg m^2)
    in the part frame. ``workpiece.mass`` (with ``workpiece.com``, ``workpiece.inertia``) when it is
    >= 0; else the part's solid (``part``, default loaded from ``workpiece.part``: its CAD volume, or
    a watertight mesh's) of ``workpiece.density`` (< 0: that of ``removal.material``).

    Raises:
        ParameterError: naming ``workpiece.inertia`` (not a physical inertia) or ``workpiece.mass``
            (a part that encloses no volume and no mass given).
    """
    from robot_grinding_sim.core.config import MATERIAL_DENSITY
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.parameters import ParameterError

    wp = cell.workpiece
    if wp.mass >= 0:
        ixx, ixy, ixz, iyy, iyz, izz = wp.inertia
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        p = np.linalg.eigvalsh(inertia)  # principal moments: >= 0, each at most the sum of the others
        if p[0] < -1e-12 * max(p[-1], 1e-300) or p[2] > p[0] + p[1] + 1e-9 * max(p[-1], 1e-300):
            raise ParameterError("workpiece.inertia", f"{list(wp.inertia)} is not the inertia of a body (its "
                                 f"principal moments {p.tolist()} must be >= 0, each at most the sum of the others)")
        return float(wp.mass), np.asarray(wp.com, dtype=float), inertia
    density = wp.density if wp.density >= 0 else MATERIAL_DENSITY[cell.removal.material]
    part = parts.load_part(wp.part, wp.unit or None) if part is None else part
    mass, com, inertia = part.mass_properties(density)
    if not mass > 0.0:
        raise ParameterError("workpiece.mass", f"the held part {getattr(part, 'source', wp.part)} encloses no volume "
                             "(a face, or a mesh that is not watertight), so its mass is not known: give it "
                             "(workpiece.mass, kg; its centre of mass workpiece.com and inertia workpiece.inertia "
                             "in the part frame)")
    return mass, com, inertia


def setup_job(cfg: JobConfig, on_stage: Callable[[str], None] | None = None, passes: Any = None,
              part: Any = None) -> JobSetup:
    """Load robot and part, plan (or read the plan.json), build the scene and the pass paths.

    Args:
        passes: a :class:`~robot_grinding_sim.core.planning.planner.Plan` whose passes the job runs
            (``grinding plan --place auto``: the passes planned and placed first), in place of
            planning them (no ``cfg.plan_file`` then); ``part``: the part they were planned on
            (default: loaded from the plan's source).

    Raises:
        InputError: bad parameters or files (the message names them).
        PlanningError: no passes, or none the arm can reach (the waypoints it cannot reach are taken
            out: core/planning/arm_reach.py).
    """
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.planning import planner
    from robot_grinding_sim.core.planning.plan_io import check_plan, read_plan

    cfg.validate()
    if passes is not None and cfg.plan_file:
        raise InputError(f"a job runs either the plan {cfg.plan_file} or passes planned in memory, not both")
    tm: dict[str, float] = {}
    t0 = time.perf_counter()
    if on_stage:
        on_stage("loading robot and part")
    plan_data = None
    if cfg.plan_file:
        plan_data = read_plan(cfg.plan_file)
    cell = cfg.cell
    model = cell_robot_model(cell)
    given = passes
    if plan_data is not None:  # the whole plan against this robot, before anything runs (its one parse)
        given = check_plan(plan_data, model, cfg.plan_file)
    tool = job_tool(model, cell)
    radius = tool.radius
    depth_plan = None
    if plan_data is None and cell.removal.target_depth > 0:  # plan for the depth: the cell's force, feed, stepover
        cell, depth_plan = depth_cell(cell, tool, None if list(cell.workpiece.faces) == [-1]
                                      else [int(f) for f in cell.workpiece.faces])
        cfg = dataclasses.replace(cfg, cell=cell)
        if given is not None and not math.isclose(given.pass_params.stepover, cell.passes.stepover, rel_tol=1e-9):
            raise InputError(f"the passes given were planned {given.pass_params.stepover:g} m apart; the depth plan "
                             f"for removal.target_depth {cell.removal.target_depth:g} m needs "
                             f"{cell.passes.stepover:g} m (plan them with depth_cell's cell)")
    law = make_contact_law(cell.contact)
    penetration = static_penetration(tool, cell, law)
    if penetration >= radius:
        raise InputError(f"process.target_force {cell.process.target_force} N with contact.stiffness "
                         f"{cell.contact.stiffness} needs a penetration of {penetration} m, not below the tool "
                         f"radius {radius} m")
    wp = cell.workpiece
    if given is not None:
        plan = given
        what = cfg.plan_file or "the passes"
        if plan.tool.shape != tool.shape:
            raise InputError(f"{what}: planned for a {plan.tool.shape} tool, the robot's ({model.source}, "
                             f"tool.link {cell.tool.link!r}) is a {tool.shape}")
        if cfg.workpiece_pose is not None:
            plan.workpiece_pose = planner.pose_matrix(cfg.workpiece_pose)
        # one answer to where the part is: the cell says what the plan (moved or not) says
        cell = cell.replace(**{"workpiece.pose": planner.pose_vector(plan.workpiece_pose)})
        cfg = dataclasses.replace(cfg, cell=cell)
        if plan.tool.radius != radius:
            raise InputError(f"{what}: planned for a tool of radius {plan.tool.radius} m, the robot's "
                             f"({model.source}) has {radius} m")
        if part is None:
            part = parts.load_part(plan.source, plan.unit if plan.unit != "m" else (wp.unit or None))
        planner.check_part_size(part, radius, planner.robot_reach(model))
        source = f"{cfg.plan_file} ({plan.source})" if cfg.plan_file else str(plan.source)
    else:
        part = parts.load_part(wp.part, wp.unit or None)
        planner.check_part_size(part, radius, planner.robot_reach(model))  # before minutes of meshing
        faces = None if list(wp.faces) == [-1] else [int(f) for f in wp.faces]
        if on_stage:
            on_stage("planning passes")
        plan = planner.plan(part, faces, cell.passes.validate(), planner.tool_parameters(cell, tool),
                            robot=None, workpiece_pose=np.asarray(wp.pose, dtype=float),
                            link_clearance_check=True, on_stage=on_stage)
        if cfg.max_passes is not None or cfg.pass_length is not None:
            plan = planner.crop_plan(plan, part, cfg.max_passes, cfg.pass_length)
        source = str(getattr(part, "source", wp.part))
    tm["load_and_plan_s"] = time.perf_counter() - t0
    if not plan.passes:
        raise PlanningError("the plan has no passes")
    if depth_plan is not None:  # before the paths: per face depths set their feeds along the passes
        cell.removal.depths(list(plan.faces))  # a face named that the plan does not grind: refused
        plan.removal_plan = removal_plan_entry(depth_plan, plan, cell)
    if getattr(model, "holder_link", None) is not None and not np.allclose(model.X_BP0, plan.workpiece_pose):
        model = held_part_model(cell, plan.workpiece_pose, part)  # the frame the plan's poses are in
    if plan_data is None:  # the passes planned here: the waypoints the arm cannot reach are taken out
        from robot_grinding_sim.core.planning.arm_reach import trim_unreachable

        if on_stage:
            on_stage("where the arm reaches")
        clearance = functools.cache(lambda: planner.clearance_of(part))  # only when a waypoint goes
        trim_unreachable(plan, part, model, np.asarray(cell.robot.home, dtype=float),
                         lambda p: planner.poses_and_moves(p, clearance()) or clearance())
    paths = job_paths(plan)
    closed = {"auto": None, "true": True, "false": False}[wp.closed]
    scene, exact = workpiece_scene(part, plan.faces, plan.workpiece_pose, radius, wp.deflection, closed)
    tm["scene_s"] = time.perf_counter() - t0 - tm["load_and_plan_s"]
    setup = JobSetup(cfg, model, part, plan, list(plan.faces), plan.workpiece_pose, scene, exact,
                     contact_query(scene, tool, cell, penetration), law, paths, penetration, radius, source,
                     plan_data, tm, plan.trajectory if plan_data is not None else None, tool)
    if depth_plan is not None and cell.removal.enabled:
        from robot_grinding_sim.core.job.removal import predicted_map

        if on_stage:
            on_stage("predicting the removal")
        plan.removal_plan["predicted"] = predicted_map(setup)
    return setup


#: time a pass takes besides its length at the feed (approach, retreat, link), s: the cycle time estimate
PASS_OVERHEAD = 2.5


def removal_plan_entry(depth_plan: Any, plan: Any, cell: CellConfig) -> dict[str, Any]:
    """plan.json's ``removal_plan`` (without the prediction) of a depth plan and the passes planned
    for it: the plan's figures, the cycle time estimate (named as the limit when over
    ``removal.cycle_time_max``), the passes' length and number."""
    from robot_grinding_sim.core.planning.depth import check_cycle_time

    lengths = float(sum(p.arc[-1] - p.arc[0] for p in plan.passes))
    limit = cell.removal.cycle_time_max if cell.removal.cycle_time_max > 0 else math.inf
    t_cycle = check_cycle_time(depth_plan, lengths, len(plan.passes), PASS_OVERHEAD, limit)
    return {**depth_plan.as_dict(), "cycle_time_s": t_cycle, "pass_length_m": lengths, "passes": len(plan.passes)}


def depth_footprint(cell: CellConfig, tool: Any, preston_coefficient: float | None = None) -> Any:
    """The depth planner's footprint of the cell's tool: the ball's groove
    (:class:`~robot_grinding_sim.core.planning.depth.BallFootprint`, ``tool`` a Tool or the ball's
    radius in m) or a patch tool's (:class:`~robot_grinding_sim.core.planning.footprints.ToolFootprint`:
    the Winkler pressure over its own patch), at the cell's lead, tilt, spindle speed and k_p
    (``preston_coefficient`` in its place: 1 for the groove per unit k_p that a fit scales)."""
    from robot_grinding_sim.core.contact import registry
    from robot_grinding_sim.core.planning.depth import BallFootprint, tool_axis
    from robot_grinding_sim.core.planning.footprints import ToolFootprint

    rc, c, pr = cell.removal, cell.contact, cell.process
    kp = rc.kp if preston_coefficient is None else float(preston_coefficient)
    if getattr(tool, "distributed", False):
        return ToolFootprint(tool, c.stiffness, cell.tool.spindle_speed, kp, pr.lead, pr.tilt)
    radius = float(getattr(tool, "radius", tool))
    return BallFootprint(radius, c.stiffness, registry.get(c.model).static_exponent(c), cell.tool.spindle_speed,
                         kp, rc.pressure, tool_axis(pr.lead, pr.tilt))


def depth_cell(cell: CellConfig, tool: Any, faces: list[int] | None = None) -> tuple[CellConfig, Any]:
    """The cell for a removal depth (``removal.target_depth``): the depth plan
    (:func:`~robot_grinding_sim.core.planning.depth.plan_depth`, the footprint of ``tool``:
    :func:`depth_footprint`) sets the stepover (the layers' passes interleaved: n layers s apart
    shifted by s/n are the passes s/n apart), the feed (on the surface), the force and the lead-in;
    per face target depths (``removal.face_depths``, faces among ``faces`` when given) their feeds
    (:func:`~robot_grinding_sim.core.planning.depth.plan_face_depths`); (new cell, the DepthPlan)."""
    from robot_grinding_sim.core.planning.depth import DepthLimits, plan_depth, plan_face_depths

    rc = cell.removal
    limits = DepthLimits(rc.force_min, rc.force_max, rc.feed_min, rc.feed_max)
    footprint = depth_footprint(cell, tool)
    dp = plan_depth(footprint, rc.target_depth, cell.process.target_force, limits, rc.hold_force,
                    rc.stepover_ripple)
    per_face = {k: v for k, v in rc.depths(faces).items() if k is not None}
    if per_face:
        plan_face_depths(footprint, dp, per_face, limits)
    new = cell.replace(**{"passes.stepover": dp.stepover / dp.layers, "process.feed": dp.feed,
                          "process.target_force": dp.force, "process.lead_in": dp.lead_in,
                          "process.feed_on_surface": True})
    return new, dp
