"""``grinding calibrate BAG --out cell.yaml``: identify the cell's contact and F/T sensor parameters
from a measured calibration pass (:mod:`robot_grinding_sim.core.job.calibrate`) and write them as
a parameter file that ``grinding simulate --params`` and the launch files take.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from robot_grinding_sim.cli.common import emit_json, json_option
from robot_grinding_sim.core.errors import InputError


def _find_plan(bag: str) -> Path:
    """plan.json in the bag's directory or next to it (the in-process job writes out/bag + out/plan.json)."""
    p = Path(bag)
    for cand in (p / "plan.json", p.parent / "plan.json"):
        if cand.is_file():
            return cand
    raise InputError(f"no plan.json in or beside {bag}: give the plan that ran with --plan")


@click.command("calibrate")
@click.argument("bag", type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Parameter file to write (ROS 2 yaml, '/**: ros__parameters:', the whole cell).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="The plan.json that ran [default: plan.json in or beside BAG]; its cell is the start.")
@click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False),
              help="Cell parameter file applied over the plan's cell before fitting; repeatable, later wins.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Set any cell parameter of the starting cell, e.g. --set contact.model=hunt_crossley.")
@click.option("--fit-damping/--no-fit-damping", default=False,
              help="Fit contact.cr too (needs transients; a quasi-static pass barely shows the damping).")
@click.option("--gap", type=float, default=1e-3, show_default=True,
              help="Out of contact: the re-simulated tool at least this far from the part, m.")
@json_option
def calibrate(bag: str, out: str, plan_file: str | None, params_files: tuple[str, ...], sets: tuple[str, ...],
              fit_damping: bool, gap: float, as_json: bool) -> None:
    """Identify contact stiffness (and c_r), F/T bias, tool mass and centre of mass from BAG.

    BAG holds a short calibration pass: /ft_sensor/wrench (the measured reading, sensor frame) and
    /joint_states, with out-of-contact segments at several tool orientations
    (core.job.calibrate.calibration_plan adds such a sweep to a plan). Bias, mass and centre of mass
    come from a linear least-squares fit on the out-of-contact readings; the stiffness from
    re-simulating the pass in process and fitting the simulated to the measured normal force.
    Writes the identified cell to --out and prints the mean relative error of predicted vs
    measured normal force before (starting cell) and after.
    """
    from robot_grinding_sim.cli.cell_options import build_cell
    from robot_grinding_sim.core.config import cell_yaml
    from robot_grinding_sim.core.job.calibrate import calibrate as run_calibration
    from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan

    out_path = Path(out)
    parent = out_path.parent if str(out_path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"--out {out}: folder {parent} does not exist")
    plan = Path(plan_file) if plan_file else _find_plan(bag)
    if not plan.is_file():
        raise InputError(f"--plan {plan}: no such file")
    base = cell_of(read_plan(plan), plan)
    cell = build_cell({"params_files": params_files, "sets": sets}, base)

    def on_stage(msg: str) -> None:
        if not as_json and sys.stderr.isatty():
            click.echo(msg, err=True)

    result = run_calibration(bag, plan, cell, fit_damping=fit_damping, gap=gap, on_stage=on_stage)
    header = (f"written by grinding calibrate from {bag} (plan {plan})\n"
              f"identified: contact.stiffness, {'contact.cr, ' if fit_damping else ''}ft_sensor.bias, "
              f"ft_sensor.tool_mass, ft_sensor.tool_com\n"
              f"normal force, mean relative error predicted vs measured over {result.samples} pass samples: "
              f"{result.mre_before:.2%} before, {result.mre_after:.2%} after")
    out_path.write_text(cell_yaml(result.cell, header))
    summary = {**result.summary(), "out": str(out_path), "bag": str(bag), "plan": str(plan)}
    if as_json:
        emit_json(summary)
        return
    g = result.gravity
    s = result.start_cell
    click.echo(f"contact.stiffness   {s.contact.stiffness:.6g} -> {result.stiffness:.6g} N/m"
               + (f"   contact.cr {s.contact.cr:g} -> {result.cr:.4g}" if fit_damping else ""))
    click.echo(f"ft_sensor.tool_mass {g.mass:.4f} kg   tool_com [{', '.join(f'{c:.4f}' for c in g.com)}] m"
               + ("" if g.gravity_identified else "   (kept: orientations too alike)"))
    click.echo(f"ft_sensor.bias      [{', '.join(f'{b:.4f}' for b in g.bias)}] N, N m "
               f"({g.samples} out-of-contact samples, gravity directions over {math.degrees(g.spread_rad):.1f} deg)")
    click.echo(f"normal force over {result.samples} pass samples: measured mean {result.mean_measured_n:.3f} N; "
               f"predicted {result.mean_before_n:.3f} N before, {result.mean_after_n:.3f} N after")
    click.echo(f"mean relative error: {result.mre_before:.2%} before, {result.mre_after:.2%} after "
               f"({result.simulations} simulations)")
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(f"wrote {out_path}")
