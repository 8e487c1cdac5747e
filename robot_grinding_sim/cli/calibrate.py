"""``grinding calibrate BAG --out cell.yaml``: identify the cell's contact and F/T sensor parameters
from a measured calibration pass (:mod:`robot_grinding_sim.core.calibration.calibrate`) and write them as
a parameter file that ``grinding simulate --params`` and the launch files take.

``grinding calibration-plan [PLAN] --out calib_plan.json``: the plan to measure that pass with (an
out-of-contact wrist sweep, then the plan's passes; without PLAN one short pass planned here).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE, FiniteRange, emit_json, json_option, stage_progress
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.outfiles import atomic_write, check_output


def _find_plan(bag: str) -> Path:
    """plan.json in the bag's directory or next to it (the in-process job writes out/bag + out/plan.json)."""
    p = Path(bag)
    for cand in (p / "plan.json", p.parent / "plan.json"):
        if cand.is_file():
            return cand
    raise InputError(f"no plan.json in or beside {bag}: give the plan that ran with --plan")


@click.command("calibration-plan")
@click.argument("plan", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="plan.json to write: the wrist sweep out of contact, then the passes.")
@click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False),
              help="Cell parameter file for the pass planned here (no PLAN); repeatable, later wins.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Set a cell parameter of the pass planned here (no PLAN), e.g. --set process.dwell=1.")
@click.option("--pass-length", type=FiniteRange(min=1e-3), default=0.01, show_default=True,
              help="Length of the one pass planned here (no PLAN), m.")
@click.option("--lift", type=FiniteRange(0.0, 1.5), default=0.25, show_default=True,
              help="Shoulder lift before the sweep (the tool away from the part), rad.")
@click.option("--tilt", type=FiniteRange(0.05, 1.5), default=0.5, show_default=True,
              help="Wrist tilts of the sweep, +- rad (gravity seen from several directions).")
@click.option("--velocity-scale", type=FiniteRange(0.01, 1.0), default=0.3, show_default=True,
              help="The sweep's moves keep every joint within this fraction of its velocity limit (and the TCP "
                   "within process.max_tcp_speed).")
@json_option
def calibration_plan_cmd(plan: str | None, out: str, params_files: tuple[str, ...], sets: tuple[str, ...],
                         pass_length: float, lift: float, tilt: float, velocity_scale: float, as_json: bool) -> None:
    """Write a calibration plan: a wrist sweep out of contact, then a short pass in contact.

    Run it on the cell with `grinding bringup real --plan-file OUT --record BAG`, then
    `grinding calibrate BAG --plan OUT --out cell.yaml`. The sweep (shoulder lifted, both wrist
    tilts, the tool turned about its axis; about 11 s) shows the tool's weight from several
    directions, so that tool mass and centre of mass separate from the F/T bias; the pass shows
    the contact stiffness. Without PLAN: one pass of --pass-length in the middle of the cell's
    first pass, planned without force optimisation (the pass is a measurement, not a job).
    """
    import json

    from robot_grinding_sim.cli.cell_options import build_cell
    from robot_grinding_sim.core.calibration.calibrate import calibration_plan
    from robot_grinding_sim.core.job.setup import cell_robot_model
    from robot_grinding_sim.core.planning.plan_io import cell_of, check_plan, plan_text, read_plan

    out_path = check_output(out, "--out")
    if plan:
        if params_files or sets:
            raise InputError("--params/--set apply to the pass planned here: give them to `grinding plan` instead")
        data = read_plan(plan)
        cell = cell_of(data, plan)
        if cell is None:
            raise InputError(f"{plan}: the plan has no cell to load its robot from")
    else:
        from robot_grinding_sim.core.job.plan_job import plan_job

        cell = build_cell({"params_files": params_files, "sets": sets})
        data = json.loads(plan_text(plan_job(cell, optimise=False, max_passes=1, pass_length=pass_length)))
    model = cell_robot_model(cell)
    read = check_plan(data, model, plan or "the planned pass")
    calib = calibration_plan(data, model, read.trajectory, lift=lift, tilt=tilt, velocity_scale=velocity_scale)
    check_plan(calib, model, "the calibration plan")  # what the cell will run, against the robot's limits
    atomic_write(out_path, json.dumps(calib, separators=(",", ":"), allow_nan=False))
    traj = calib["trajectory"]
    summary = {"out": str(out_path), "from": plan or "planned here", "duration_s": float(traj["times"][-1]),
               "sweep_s": float(traj["times"][traj["segments"][1]["start"]]) if len(traj["segments"]) > 1 else 0.0,
               "passes": sorted({int(s["pass_index"]) for s in traj["segments"] if s["kind"] == "pass"})}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"calibration plan: {summary['sweep_s']:.1f} s wrist sweep out of contact, then passes "
               f"{summary['passes']} ({summary['duration_s']:.1f} s in all)")
    click.echo(f"wrote {out_path}")


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
@click.option("--gap", type=FINITE, default=1e-3, show_default=True,
              help="Out of contact: the re-simulated tool at least this far from the part, m.")
@click.option("--topic", default=None,
              help="The raw F/T reading (weight and bias in) [default: /hardware_driver/wrench_raw if the bag has "
                   "it (real mode: its /ft_sensor/wrench is compensated already), else /ft_sensor/wrench; an "
                   "imported log: the topic it declared].")
@click.option("--replay", "along_path", is_flag=True,
              help="Fit along BAG's own joint states (a log of another cell: `grinding import-log`): the contact "
                   "stiffness and the surface's normal offset; with --force-control the arm's lag under the driver's "
                   "controller.")
@click.option("--part", default=None, help="--replay: the part (CAD or built-in; default the plan's).")
@click.option("--pose", default=None, help="--replay: the part's pose in base_link 'x y z roll pitch yaw' (m, rad).")
@click.option("--face", "faces", multiple=True, type=int, help="--replay: the part's face(s) in contact.")
@click.option("--validate", "validate_bag", default=None, type=click.Path(exists=True),
              help="--replay: a second run, not fitted on, predicted before and after.")
@click.option("--validate-plan", default=None, type=click.Path(dir_okay=False),
              help="--replay: the plan.json the --validate run ran (default --plan).")
@click.option("--force-control", is_flag=True, help="--replay: the runs were force controlled (fits the arm's "
              "servo.bandwidth; the controller is the cell's admittance.*).")
@click.option("--fit-controller", is_flag=True, help="--replay --force-control: the run's controller is not this "
              "package's driver with the cell's admittance.*: fit admittance.damping too (the replay's equivalent of "
              "that controller, not a gain to give the driver).")
@click.option("--raw/--compensated", "raw", default=None, help="--replay: the wrench is raw or compensated "
              "(default: as imported).")
@click.option("--tare", is_flag=True, help="--replay: a raw reading from one orientation: keep the tool's mass and "
              "centre of mass, fit the bias alone.")
@click.option("--tool-from-cell", is_flag=True, help="--replay: compensate a raw reading with the cell's "
              "ft_sensor.* (identified before, e.g. --params cell.yaml); fit nothing of the tool.")
@click.option("--surface-offset", type=FINITE, default=0.0, show_default=True,
              help="--replay: the surface's offset to start from (kept with --force-control), m.")
@json_option
def calibrate(bag: str, out: str, plan_file: str | None, params_files: tuple[str, ...], sets: tuple[str, ...],
              fit_damping: bool, gap: float, topic: str | None, along_path: bool, part: str | None, pose: str | None,
              faces: tuple[int, ...], validate_bag: str | None, validate_plan: str | None, force_control: bool,
              raw: bool | None, tare: bool, tool_from_cell: bool, surface_offset: float, fit_controller: bool,
              as_json: bool) -> None:
    """Identify contact stiffness (and c_r), F/T bias, tool mass and centre of mass from BAG.

    BAG holds a short calibration pass: the raw F/T reading (sensor frame, tool weight and bias in:
    real mode's /hardware_driver/wrench_raw, or a simulation's /ft_sensor/wrench) and
    /joint_states, with out-of-contact segments at several tool orientations
    (`grinding calibration-plan` writes such a plan). Bias, mass and centre of mass
    come from a linear least-squares fit on the out-of-contact readings; the stiffness from
    re-simulating the pass in process and fitting the simulated to the measured normal force.
    Writes the identified cell to --out and prints the mean relative error of predicted vs
    measured normal force before (starting cell) and after.
    """
    from robot_grinding_sim.cli.cell_options import build_cell
    from robot_grinding_sim.core.calibration.calibrate import calibrate as run_calibration
    from robot_grinding_sim.core.config import cell_yaml
    from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan

    out_path = check_output(out, "--out")  # before minutes of fitting
    if along_path:
        _calibrate_along_path(bag, out_path, plan_file, params_files, sets, topic, part, pose, faces, validate_bag,
                              validate_plan, force_control, raw, tare, tool_from_cell, surface_offset, as_json,
                              fit_controller)
        return
    if fit_controller:
        raise InputError("--fit-controller goes with --replay --force-control (a fit along a force-controlled run)")
    if force_control or validate_bag or validate_plan or part or pose or faces or tare or tool_from_cell:
        raise InputError("--force-control, --validate, --part, --pose, --face and --tare go with --replay (a fit along "
                         "the run's joint states)")
    plan = Path(plan_file) if plan_file else _find_plan(bag)
    if not plan.is_file():
        raise InputError(f"--plan {plan}: no such file")
    base = cell_of(read_plan(plan), plan)
    cell = build_cell({"params_files": params_files, "sets": sets}, base)

    # reading the bag in topics, the simulations in simulated seconds, the fit against its budget of
    # simulations: each stage has a total, so a percentage and an ETA (loading has none)
    with stage_progress("calibrating", enabled=not as_json) as (on_stage, on_progress):
        result = run_calibration(bag, plan, cell, fit_damping=fit_damping, gap=gap, topic=topic,
                                 on_stage=on_stage, progress=on_progress)
    header = (f"written by grinding calibrate from {bag} (plan {plan})\n"
              f"identified: contact.stiffness, {'contact.cr, ' if fit_damping else ''}ft_sensor.bias, "
              f"ft_sensor.tool_mass, ft_sensor.tool_com\n"
              f"normal force, mean relative error predicted vs measured over {result.samples} pass samples: "
              f"{result.mre_before:.2%} before, {result.mre_after:.2%} after")
    atomic_write(out_path, cell_yaml(result.cell, header))
    summary = {**result.summary(), "out": str(out_path), "bag": str(bag), "plan": str(plan)}
    if as_json:
        emit_json(summary)
        return
    g = result.gravity
    s = result.start_cell
    click.echo(f"F/T reading: {result.topic}")
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


def _fmt_fig(f: Any) -> str:
    return (f"MRE {f.mre:.2%}, r {f.correlation:.4f}, lag {f.lag_s * 1e3:+.1f} ms, mean {f.mean_predicted:.3f} / "
            f"{f.mean_measured:.3f} N ({f.samples} samples)")


def _calibrate_along_path(bag: str, out_path: Path, plan_file: str | None, params_files: tuple[str, ...],
                          sets: tuple[str, ...], topic: str | None, part: str | None, pose: str | None,
                          faces: tuple[int, ...], validate_bag: str | None, validate_plan: str | None,
                          force_control: bool, raw: bool | None, tare: bool, tool_from_cell: bool,
                          surface_offset: float, as_json: bool, fit_controller: bool = False) -> None:
    """``grinding calibrate BAG --replay`` (:mod:`robot_grinding_sim.core.calibration.measured`)."""
    if fit_controller and not force_control:
        raise InputError("--fit-controller goes with --force-control (it fits the controller of a force-controlled "
                         "run)")
    from robot_grinding_sim.cli.cell_options import parse_pose
    from robot_grinding_sim.cli.replay import cell_for
    from robot_grinding_sim.core.calibration.measured import measured, read_run
    from robot_grinding_sim.core.config import cell_yaml
    from robot_grinding_sim.core.job.replay import replay_scene

    cell = cell_for(plan_file, params_files, sets)
    scene = replay_scene(cell, part, parse_pose(pose, "--pose") if pose else None, list(faces) or None, plan_file)
    run = read_run(bag, scene.model, topic, raw)
    other = read_run(validate_bag, scene.model, topic, raw) if validate_bag else None
    other_scene = None
    if validate_plan is not None:
        other_scene = replay_scene(cell, part, parse_pose(pose, "--pose") if pose else None, list(faces) or None,
                                   validate_plan)
    with stage_progress("calibrating along the measured path", enabled=not as_json) as (on_stage, _):
        on_stage("fitting")
        res = measured(scene, run, other, force_control=force_control, tare=tare,
                                 surface_offset=surface_offset, validate_scene=other_scene,
                                 tool_from_cell=tool_from_cell, fit_controller=fit_controller)
    header = (f"written by grinding calibrate --replay from {bag}\n"
              f"identified: {', '.join(res.fitted)}"
              + ("" if res.tool is None else ", ft_sensor.bias, ft_sensor.tool_mass, ft_sensor.tool_com")
              + f"\nsurface offset {res.surface_offset:.6g} m (not a cell parameter: grinding replay --surface-offset)"
              + ("" if res.bandwidth is None else f"; servo.bandwidth {res.bandwidth:.4g} rad/s")
              + ("" if res.damping is None else f"; admittance.damping {res.damping:.4g} N s/m"))
    atomic_write(out_path, cell_yaml(res.cell, header))
    summary = {**res.summary(), "out": str(out_path), "bag": bag, "validate": validate_bag,
               "mode": "force control" if force_control else "position"}
    if as_json:
        emit_json(summary)
        return
    lines = [f"contact.stiffness {cell.contact.stiffness:.6g} -> {res.stiffness:.6g} N/m; surface offset "
             f"{res.surface_offset * 1e6:+.2f} um"
             + ("" if res.bandwidth is None
                else f"; servo.bandwidth {cell.servo.bandwidth:g} -> {res.bandwidth:.4g} rad/s")
             + ("" if res.damping is None
                else f"; admittance.damping {cell.admittance.damping:g} -> {res.damping:.4g} N s/m")]
    if res.tool is not None:
        bias = ", ".join(f"{b:.4f}" for b in res.tool.bias)
        lines.append(f"ft_sensor.tool_mass {res.tool.mass:.4f} kg, bias [{bias}]")
    lines.append(f"fit run   before: {_fmt_fig(res.before)}")
    lines.append(f"fit run   after : {_fmt_fig(res.after)}")
    if res.validation_before is not None:
        lines.append(f"validation before: {_fmt_fig(res.validation_before)}")
        lines.append(f"validation after : {_fmt_fig(res.validation_after)}")
    lines += [f"note: {n}" for n in res.notes]
    lines.append(f"wrote {out_path}")
    click.echo("\n".join(lines))
