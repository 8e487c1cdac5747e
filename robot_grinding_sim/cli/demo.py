"""``grinding demo``: the main job, a quick configuration of the simulated grinding job.

The default UR10e with its ball-headed tool (``urdf/ur10e_grinding.urdf``) grinds the built-in
``curved_panel`` (freeform B-spline top, 0.7 m in front of the robot) to an even 5 um: the depth
planner (:mod:`robot_grinding_sim.core.planning.depth`) chooses the stepover, feed and force for
it, 24 passes of 30 mm are planned on the exact CAD surface (engaging and releasing while moving),
followed under computed-torque position control at 1 ms steps with the Kelvin-Voigt contact
advanced in closed form per step (:mod:`robot_grinding_sim.core.job`); the commanded penetration
of each pass is optimised until its mean normal force is within 5 % of the 5 N target, and the
removal map is checked against the 5 um (``removal.png``, summary.json ``removal.uniformity``).
Writes under ``--out``: ``bag/`` (rosbag2 MCAP: /joint_states, /contact/wrench,
/ft_sensor/wrench, /grinding/progress, /dynamics_node/tool_pose), ``force.png``, ``summary.json``
(``--json`` prints it alone) and ``plan.json`` (the plan with its job trajectory: ``grinding
simulate --plan`` runs it again). ``grinding simulate`` runs the same job with every option.

``--graph`` then runs the same plan.json through the node graph as real processes (grinding
bringup sim with grinding_executive and the recorder, DDS on loopback) into ``graph_bag/`` and adds
``graph_vs_inprocess`` (per-pass mean force of both runs) to summary.json
(:mod:`robot_grinding_sim.cli.graph_run`).
"""

from __future__ import annotations

from typing import Any

import click

from robot_grinding_sim.cli.cell_options import build_cell, common_cell_options
from robot_grinding_sim.cli.common import json_option
from robot_grinding_sim.cli.graph_run import graph_dynamics, graph_options, then_through_graph
from robot_grinding_sim.cli.simulate import run_and_write

#: the quick configuration: passes, their length and the depth (the rest: the cell's defaults; the
#: depth plan sets stepover, feed and force)
DEMO_PASSES = 24
DEMO_PASS_LENGTH = 0.03
DEMO_DEPTH = 5e-6


#: the demo before the depth plan (issue 26): 3 passes 10 mm apart at the cell's force and feed, what
#: the benches' figures (docs/performance.md) were measured on: ``demo_config(3, **FORCE_ONLY)``
FORCE_ONLY = {"removal.target_depth": 0.0, "passes.stepover": 0.01}


def demo_config(passes: int = DEMO_PASSES, **cell_values: Any) -> Any:
    """The demo's JobConfig (curved_panel, 5 um deep over 24 passes of 30 mm; ``passes``: the first
    that many), with cell values by name."""
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.setup import JobConfig

    cell = CellConfig().replace(**{"workpiece.part": "curved_panel", "removal.target_depth": DEMO_DEPTH,
                                   **cell_values})
    return JobConfig(cell=cell, max_passes=passes, pass_length=DEMO_PASS_LENGTH)


@click.command("demo")
@click.option("--optimise/--no-optimise", default=None, help="Force-target optimisation [default: on].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory (bag/, force.png, summary.json, plan.json). [default: demo_out]")
@graph_options
@common_cell_options
@json_option
def demo(optimise: bool | None, out: str | None, graph: bool, exchange_interval: float | None, as_json: bool,
         **options: Any) -> None:
    """Run the main job: a quick simulated grinding job on the built-in curved panel."""
    import dataclasses
    from pathlib import Path

    base = demo_config()
    cell = build_cell(options, base.cell)
    out_dir = out or "demo_out"
    dynamics = graph_dynamics(cell, graph, exchange_interval)
    summary = run_and_write(dataclasses.replace(base, cell=cell, optimise=optimise), out_dir, as_json,
                            show=not (as_json and graph))
    then_through_graph(summary, Path(out_dir), cell, dynamics, as_json)
