"""A plan a cell can execute: passes, the job trajectory and, by simulation, the force target.

:func:`plan_job` is what ``grinding plan`` (with a robot) and ``planner_node`` run: plan the
passes on the exact surface (:mod:`~robot_grinding_sim.core.job.setup`), optimise the per-pass
commanded offsets and predict each pass's mean force with the in-process job
(:func:`~robot_grinding_sim.core.job.run.run_job`) when the optimisation is on, build the job
trajectory with those offsets (:mod:`~robot_grinding_sim.core.planning.trajectory`), check it for
collisions with the part, and return the :class:`~robot_grinding_sim.core.planning.planner.Plan`
that plan.json stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from robot_grinding_sim.core.config import CellConfig


def plan_job(cell: CellConfig, optimise: bool | None = None, max_passes: int | None = None,
             pass_length: float | None = None, check_collisions: bool = True,
             on_stage: Callable[[str], None] | None = None,
             progress: Callable[[str, float, float], None] | None = None,
             passes: Any = None, part: Any = None, mesh: Any = None) -> Any:
    """The plan of ``cell`` with its job trajectory (see the module docstring).

    Args:
        optimise: run the force-target optimisation (None: ``cell.optimise.enabled``); off: the
            trajectory with zero offsets and no predicted force.
        max_passes, pass_length: keep the first passes / the middle of each pass.
        passes, part: make the job on the passes of this Plan, planned on ``part`` (``grinding plan
            --place auto``: the passes planned and placed first) instead of planning them
            (:func:`~robot_grinding_sim.core.job.setup.setup_job`); the result is that Plan, completed.
        mesh: the part's tessellation (part frame) to check the trajectory against, when the caller
            has one (default: the plan's, else the part tessellated at 0.2 mm).

    Raises:
        InputError: bad parameters or files. PlanningError: unreachable, colliding or untimeable.
    """
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig, setup_job
    from robot_grinding_sim.core.planning import planner
    from robot_grinding_sim.core.planning.collision_check import tool_link_names
    from robot_grinding_sim.core.planning.trajectory import build_job_trajectory, reachability

    opt = cell.optimise.enabled if optimise is None else optimise  # a JobConfig with a plan file defaults off
    cfg = JobConfig(cell=cell, optimise=opt, max_passes=max_passes, pass_length=pass_length)
    setup = setup_job(cfg, on_stage, passes=passes, part=part)
    if cfg.optimising:
        result = run_job(cfg, setup, on_stage, progress).plan()
    else:
        result = setup.plan
        offsets = [0.0] * len(setup.paths.passes)
        result.trajectory = build_job_trajectory(setup.model, setup.paths, setup.cell.process, offsets,
                                                 setup.penetration, setup.q_home)
        result.offsets, result.cell = offsets, setup.cell.values()  # the depth plan's, if any
        result.reachability = reachability(setup.model, result.trajectory)
    planner.arm_reaches_every_waypoint(result)
    if check_collisions:
        # the trajectory written (with the optimised offsets, if any) is the one checked
        from robot_grinding_sim.core.planning.links import search_links
        from robot_grinding_sim.core.planning.trajectory import job_paths

        if mesh is None:
            mesh = result.mesh if result.mesh is not None else setup.part.tessellate(deflection=2e-4)
        contact, links = tool_link_names(cell.tool)
        offsets = list(result.offsets)

        def rebuild() -> Any:  # the same passes and offsets, the links made again (the pass forces stand)
            return build_job_trajectory(setup.model, job_paths(result), cell.process, offsets, setup.penetration,
                                        setup.q_home)

        if on_stage:
            on_stage("collision check")
        result.collision = search_links(result, setup.model, mesh,
                                        planner.remake_links(result, planner.clearance_of(setup.part)), rebuild,
                                        on_stage=on_stage, contact_links=contact, tool_links=links)
        if "links_over_the_part" in result.collision:
            result.reachability = reachability(setup.model, result.trajectory)
    return result
