"""``grinding simulate``: the simulated grinding job in one process (plan, arm + contact, force).

See :mod:`robot_grinding_sim.core.job.run` for the job and :mod:`robot_grinding_sim.core.job.outputs`
for the files written under ``--out`` (bag/, force.png, summary.json, plan.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.cell_options import build_cell, common_cell_options, explicit_pose
from robot_grinding_sim.cli.common import FINITE, emit_json, json_option, stage_progress, workers_options
from robot_grinding_sim.cli.graph_run import graph_dynamics, graph_options, then_through_graph
from robot_grinding_sim.core.errors import InputError


def run_and_write(cfg: Any, out: str, as_json: bool, show: bool = True, workers: int | None = None,
                  address: str | None = None) -> dict:
    """Run the job for ``cfg`` (a JobConfig), write the outputs into ``out``, print the table (or JSON;
    nothing when not ``show``); returns the summary. ``workers``, ``address``: the optimisation's
    passes at once (:func:`~robot_grinding_sim.core.study.pool_choice.job_pool`)."""
    from robot_grinding_sim.core.job.outputs import check_out_dir, write_outputs
    from robot_grinding_sim.core.job.run import run_job

    out_dir = Path(out)
    check_out_dir(out_dir)  # fail before minutes of simulation
    cfg.validate()
    # the final run knows its simulated duration (an ETA); the optimisation its passes
    from robot_grinding_sim.core.job import step_ahead
    from robot_grinding_sim.core.study.pool_choice import job_pool

    step_ahead.start()  # an empty cache: the step compiles on the other core while the job plans
    with stage_progress("grinding job", enabled=not as_json) as (on_stage, on_progress), \
            job_pool(workers, address) as pool:
        result = run_job(cfg, on_stage=on_stage, progress=on_progress, pool=pool)
    summary = result.summary()
    write_outputs(out_dir, result, summary)
    if show and as_json:
        emit_json(summary)
    elif show:
        print_table(summary)
    return summary


def print_table(s: dict) -> None:
    F = s["target_force_n"]
    click.echo(f"part: {s['part']} faces {s['faces']} (exact CAD surface: {s['exact_surface']})")
    click.echo(f"target {F:g} N +- {s['tolerance']:.0%}; planned penetration {s['planned_penetration_m'] * 1e6:.1f} um")
    click.echo(f"{'pass':>4} {'mean N':>8} {'min N':>7} {'max N':>7} {'error':>8} {'offset um':>10} "
               f"{'iter':>5} {'ok':>3}")
    for r in s["passes"]:
        click.echo(f"{r['pass']:>4} {r['mean_n']:>8.3f} {r['min_n']:>7.3f} {r['max_n']:>7.3f} {r['error']:>+8.2%} "
                   f"{r['offset_m'] * 1e6:>+10.2f} {r.get('iterations', 0):>5} "
                   f"{'yes' if r['within_tolerance'] else 'NO':>3}")
    rtf = s["real_time_factor"]
    click.echo(f"final run: {s['simulated_s']:.2f} s simulated in {s['steps']} steps of {s['step_s'] * 1e3:g} ms, "
               f"{s['wall_time_s']:.2f} s wall ({rtf:.2f}x real time); total {s['total_wall_time_s']:.1f} s")
    r = s.get("removal")
    if s.get("removal_plan"):
        from robot_grinding_sim.core.planning.depth import depth_plan_text

        for line in depth_plan_text(s["removal_plan"]):
            click.echo(line)
    if r:
        from robot_grinding_sim.core.planning.depth import uniformity_text

        click.echo(f"removal (Preston, k_p {r['preston_coefficient_m2_per_n']:g} m^2/N): largest depth "
                   f"{r['max_depth_m'] * 1e6:.3f} um, volume {r['volume_m3'] * 1e9:.4f} mm^3")
        for line in uniformity_text(r.get("uniformity")):
            click.echo(line)
    o = s["outputs"]
    click.echo(f"bag:   {o['bag']}\nplot:  {o['plot']}\nsummary: {o['summary']}\nplan:  {o['plan']}")


@click.command("simulate")
@click.argument("part_or_cad", required=False, default=None)
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="Run this plan.json: its part, pose, passes, offsets and job trajectory, with its cell "
                   "parameters unless changed here (no re-optimisation unless --optimise).")
@click.option("--max-passes", type=int, default=None, help="Plan only the first N passes.")
@click.option("--pass-length", type=FINITE, default=None, help="Keep only the middle L m of each pass.")
@click.option("--optimise/--no-optimise", default=None,
              help="Force-target optimisation of the commanded penetration per pass [default: on when planning, "
                   "off with --plan].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory (bag/, force.png, summary.json, plan.json); its bag/ must not exist. "
                   "[default: simulate_out]")
@graph_options
@workers_options
@common_cell_options
@json_option
def simulate(part_or_cad: str | None, plan_file: str | None, max_passes: int | None, pass_length: float | None,
             optimise: bool | None, out: str | None, graph: bool, exchange_interval: float | None,
             workers: int | None, address: str | None, as_json: bool, **options: Any) -> None:
    """Simulate grinding PART_OR_CAD (built-in part or CAD/mesh file; default: the cell's part):
    passes, arm, contact force.

    Plans the passes (or runs --plan), optimises the commanded penetration per pass until the mean
    normal force is within the tolerance of the target, simulates the arm with its tool (the
    cell's URDF: a ball, wheel, pad or disc; config/tools/*.yaml) following the job trajectory
    with the compliant contact (closed form per step), and writes a bag, force.png, summary.json
    and the plan that ran (plan.json) under --out. With --graph the same plan.json then runs
    through the ROS 2 node graph (graph_bag/, graph_vs_inprocess in summary.json).
    """
    from robot_grinding_sim.core.job.setup import JobConfig

    base = None
    if plan_file is not None:
        from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan

        if not Path(plan_file).is_file():
            raise InputError(f"--plan {plan_file}: no such file")
        base = cell_of(read_plan(plan_file), plan_file)
        if part_or_cad is not None:
            raise InputError(f"--plan {plan_file} gives the part: do not also name one ({part_or_cad})")
        if max_passes is not None or pass_length is not None:
            raise InputError("--max-passes / --pass-length select passes when planning; a plan.json runs as it is")
    extra = {"workpiece.part": part_or_cad} if part_or_cad else {}
    cell = build_cell(options, base, extra)
    moved = explicit_pose(options) if plan_file is not None else None
    cfg = JobConfig(cell=cell, plan_file=plan_file, optimise=optimise, max_passes=max_passes,
                    pass_length=pass_length, workpiece_pose=None if moved is None else tuple(moved))
    dynamics = graph_dynamics(cell, graph, exchange_interval)
    out_dir = out or "simulate_out"
    summary = run_and_write(cfg, out_dir, as_json, show=not (as_json and graph), workers=workers, address=address)
    then_through_graph(summary, Path(out_dir), cell, dynamics, as_json)
