"""Compile the package's numba kernels into the on-disk cache: ``python -m robot_grinding_sim.core.warmup``.

The kernels are compiled with ``cache=True`` the first time a process uses them (a minute or more
on a 2-core machine; docs/performance.md, "The first run"), each only when a job uses it (a
Kelvin-Voigt job never compiles the integrated laws' DOP853). Running this once after installing
compiles every kernel ahead (the nodes' coupled step with both law families, the in-process job's)
and keeps that cost out of node start-up, where it would otherwise delay the first
``joint_states`` or contact message, and out of a user's first job. The cache folder:
:mod:`~robot_grinding_sim.core.numba_cache`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def warm_up() -> dict[str, float]:
    """Exercise every cached kernel once on small inputs; returns seconds per stage."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    from robot_grinding_sim.core.resources import package_file
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    model = RobotModel.from_urdf(package_file("urdf/ur10e_grinding.urdf"))
    q = np.zeros(model.nq)
    model.fk(q, model.tip_link)
    model.jacobian(q, model.tip_link)
    model.rnea(q, q, q)
    model.rnea(np.zeros((2, model.nq)), np.zeros((2, model.nq)), np.zeros((2, model.nq)))
    model.mass_matrix(q)
    model.forward_dynamics(q, q, q)
    model.effective_mass(q, model.tip_link, model.fk(q, model.tip_link)[:3, 3], (0.0, 0.0, 1.0))
    timings["dynamics_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    import trimesh

    from robot_grinding_sim.core.geometry.collision import CollisionScene

    scene = CollisionScene()
    part = trimesh.creation.icosphere(subdivisions=3, radius=0.1)  # watertight, large enough for the BVH
    scene.add_mesh("part", part.vertices, part.faces)
    scene.add_sphere("tool", 0.02)
    scene.add_box("box", (0.05, 0.05, 0.05))
    scene.add_cylinder("wheel", 0.025, 0.01)
    for name in ("tool", "box", "wheel"):
        pose = np.eye(4)
        pose[2, 3] = 0.115
        scene.set_pose(name, pose)
        scene.contacts(name, "part")
        scene.distance(name, "part")
    timings["collision_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from robot_grinding_sim.core.geometry import parts

    face = parts.freeform_face(0.05).face(0)  # B-spline evaluation kernels of the planner
    face.intersect_lines(np.array([[0.0, 0.0, 0.1], [0.01, 0.0, 0.1]]), np.array([0.0, 0.0, 1.0]))
    timings["cad_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from robot_grinding_sim.core.contact.preston import RemovalGrid

    grid = RemovalGrid(np.array([[x, y, 0.0] for x in (-1e-3, 0.0, 1e-3) for y in (-1e-3, 0.0, 1e-3)]),
                       np.full(9, 1e-6))
    grid.accumulate(np.zeros(3), np.array([0.0, 0.0, 1.0]), 1.0, 2e-3, np.array([0.0, 0.0, 0.02]), np.zeros(3),
                    np.array([0.01, 0.0, 0.0]), 1e-3)
    timings["removal_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from robot_grinding_sim.core.planning import commands

    commands.sample(commands.hold(q), 0.0)  # the executive's command sampling
    timings["commands_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    coupled_step()
    timings["coupled_step_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    job()
    timings["job_s"] = time.perf_counter() - t0
    return timings


def job() -> None:
    """The in-process job's kernels (``grinding demo``, ``simulate``, ``plan``): the default cell's job
    cut to one short pass, planned (geodesic passes) and simulated in batches (the compiled step's
    ``run_batch``) with the removal map."""
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig

    run_job(JobConfig(cell=CellConfig(), optimise=False, max_passes=1, pass_length=0.01))


def step() -> None:
    """Compile the coupled step alone (``run_batch`` and what it links), with a job's argument types:
    the default robot and cell, the ball over a one-box mesh whose geometry arrays have a CAD face's
    types (:func:`~robot_grinding_sim.core.geometry.tool_contact.no_surface_arrays`: one signature for
    every CAD face), and stand-ins for the engine and the laws, which the step takes as first-class
    functions compiled apart (the job compiles those meanwhile: core/job/step_ahead.py). No step runs."""
    import types

    import trimesh
    from numba import njit

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.contact.engine_kernels import STEP_SIG, new_step_list
    from robot_grinding_sim.core.contact.law import LAW_SIG, new_law_list
    from robot_grinding_sim.core.geometry.collision import CollisionScene
    from robot_grinding_sim.core.geometry.tool_contact import TOOL, WORKPIECE, ToolContactQuery
    from robot_grinding_sim.core.job import simulation
    from robot_grinding_sim.core.job.setup import load_robot_model
    from robot_grinding_sim.core.planning.trajectory import JointTrajectory

    @njit(STEP_SIG)
    def no_step(laws, phases, lp, m, f, d0, v0, t, dt, dense):  # never called (no step runs)
        return dense, 0, 0.0, 0.0, False, 0

    @njit(LAW_SIG)
    def no_law(op, lp, a, b, c, d, e):  # never called
        return 0.0

    cell = CellConfig()
    tcp = cell.tool.tcp_link
    model = load_robot_model(cell.robot.description_file, tcp)
    box = trimesh.creation.box((0.2, 0.2, 0.02))
    scene = CollisionScene()
    scene.add_sphere(TOOL, 0.01)
    scene.add_mesh(WORKPIECE, box.vertices, box.faces)
    query = ToolContactQuery(scene, mesh_surface=True)
    q = np.asarray(cell.robot.home, dtype=float)
    traj = JointTrajectory(list(model.joint_names), tcp, np.array([0.0, 0.01]), np.vstack([q, q]),
                           np.zeros((2, model.nq)))
    setup: Any = types.SimpleNamespace(model=model, cell=cell, query=query)
    coupled = simulation.coupled_step(setup, q)
    coupled.arm.arm.set_trajectory(traj.interpolator(model), 0.0)
    rec = simulation.Record(cell.sim.output_dt, len(q), 2, 0.0)
    # (simulate_compiled marks the cache folder: core/job/step_ahead.py)
    simulation.simulate_compiled(coupled, rec, 0.0, None, engine=new_step_list(no_step), laws=new_law_list(no_law))


def _one_law_per_family() -> list[str]:
    """A registered law of each family (their kernels compile the same entry points)."""
    from robot_grinding_sim.core.contact import registry

    first: dict[int, str] = {}
    for name in registry.names():
        first.setdefault(registry.get(name).family, name)
    return list(first.values())


def coupled_step() -> None:
    """The coupled step's kernels (the in-process job, dynamics_node): the ball's query on the
    default part's CAD face, the contact model, the arm side free and in contact (Kelvin-Voigt's
    closed form, Hunt-Crossley's)."""
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, tool_sphere_radius, workpiece_scene
    from robot_grinding_sim.core.job.setup import load_robot_model
    from robot_grinding_sim.core.planning.planner import default_face, pose_matrix

    cell = CellConfig()
    tcp = cell.tool.tcp_link
    model = load_robot_model(cell.robot.description_file, tcp)
    part = parts.load_part(cell.workpiece.part, cell.workpiece.unit or None)
    scene, _ = workpiece_scene(part, [default_face(part)], pose_matrix(cell.workpiece.pose),
                               tool_sphere_radius(model, tcp, cell.tool.link))
    coupled_step_on(model, cell, ToolContactQuery(scene), np.asarray(cell.robot.home, dtype=float))


def coupled_step_on(model: Any, cell: Any, query: Any, q: FloatArray) -> None:
    """:func:`coupled_step` on a given robot model, cell, contact query and configuration q (n,)
    (dynamics_node's own, before its clock starts), with throwaway sides."""
    from robot_grinding_sim.core.geometry.tool_contact import ContactGeometry
    from robot_grinding_sim.core.sim.coupled_step import ArmContactStepper, ContactSide

    tcp = cell.tool.tcp_link
    qd = np.zeros_like(q)
    X = model.fk(q, tcp)
    for law in _one_law_per_family():
        contact = cell.replace(**{"contact.model": law}).contact
        side = ContactSide(model, contact, tcp, cell.tool.spindle_speed, query=query)
        side.evaluate(0.0, q, qd, cell.sim.dt)
        geom = ContactGeometry(-1e-5, np.array([0.0, 0.0, 1.0]), X[:3, 3] - [0.0, 0.0, 0.02], X[:3, 3])
        rom = side.from_geometry(0.0, q, qd, geom)
        side.wrench(rom)
        arm = ArmContactStepper(model, q, cell.servo, cell.sim.gravity, tcp)
        arm.step(cell.sim.dt, None)
        arm.step(cell.sim.dt, rom)


def main() -> int:
    if sys.argv[1:] == ["--step"]:  # the job's helper (core/job/step_ahead.py): the coupled step only
        step()
        return 0
    timings = warm_up()
    from numba.core import config

    where = config.CACHE_DIR or "beside the package's sources (__pycache__)"
    print("numba kernels cached: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()) + f"; in {where}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
