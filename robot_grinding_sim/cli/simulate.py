"""``grinding simulate``: the simulated grinding job in one process (plan, arm + contact, force).

See :mod:`robot_grinding_sim.core.job.grinding_job` for the physics and
:mod:`robot_grinding_sim.core.job.outputs` for the files written under ``--out``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import emit_json, json_option, progress
from robot_grinding_sim.core.errors import InputError


def run_and_write(cfg: Any, out: str, as_json: bool) -> dict:
    """Run the job for ``cfg``, write the outputs into ``out``, print the table (or JSON)."""
    from robot_grinding_sim.core.job.grinding_job import run_job
    from robot_grinding_sim.core.job.outputs import check_out_dir, write_outputs

    out_dir = Path(out)
    check_out_dir(out_dir)  # fail before minutes of simulation
    cfg.validate()
    with progress(None, "grinding job", enabled=not as_json) as bar:
        def on_stage(msg: str) -> None:
            # stage lines only on a terminal (like the progress bar): logs and errors stay clean
            if not as_json and sys.stderr.isatty():
                click.echo(msg, err=True)

        def on_progress(stage: str, done: float, total: float) -> None:
            bar.update(done)

        result = run_job(cfg, on_stage=on_stage, progress=on_progress)
    summary = result.summary()
    write_outputs(out_dir, result, summary)
    if as_json:
        emit_json(summary)
    else:
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
    o = s["outputs"]
    click.echo(f"bag:   {o['bag']}\nplot:  {o['plot']}\nsummary: {o['summary']}")


def _pose(value: str | None) -> Any:
    if value is None:
        return None
    try:
        v = [float(x) for x in value.replace(",", " ").split()]
    except ValueError:
        raise InputError(f"--workpiece-pose: expected 6 numbers 'x y z roll pitch yaw', got {value!r}") from None
    if len(v) != 6:
        raise InputError(f"--workpiece-pose: expected 6 numbers 'x y z roll pitch yaw', got {len(v)}")
    return tuple(v)


def common_options(f: Any) -> Any:
    opts = [
        click.option("--target-force", type=float, default=5.0, show_default=True, help="Target normal force, N."),
        click.option("--stiffness", type=float, default=1.0e5, show_default=True,
                     help="Contact stiffness K, N/m (Hunt-Crossley: N/m^1.5)."),
        click.option("--cr", type=float, default=0.5, show_default=True, help="Coefficient of restitution."),
        click.option("--model", type=click.Choice(["kelvin_voigt", "hunt_crossley", "lankarani_nikravesh", "flores"]),
                     default="kelvin_voigt", show_default=True, help="Normal contact model."),
        click.option("--dt", type=float, default=1e-3, show_default=True,
                     help="Simulation step, s (force output stays at --output-dt from the closed form)."),
        click.option("--output-dt", type=float, default=1e-3, show_default=True, help="Force sample period, s."),
        click.option("--optimise/--no-optimise", default=True, show_default=True,
                     help="Force-target optimisation of the commanded penetration per pass."),
        click.option("--force-ratio", type=float, default=0.3, show_default=True, help="Grinding ratio Ft/Fn."),
        click.option("--servo-omega", type=float, default=200.0, show_default=True,
                     help="Arm servo bandwidth, rad/s (Kp = w^2, Kd = 2 w)."),
        click.option("--out", type=click.Path(file_okay=False), default=None,
                     help="Output directory (bag/, force.png, summary.json); its bag/ must not exist."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.command("simulate")
@click.argument("part_or_cad", required=False, default="curved_panel")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="Use this plan.json (its part and workpiece pose) instead of planning.")
@click.option("--face", "faces", type=int, multiple=True, help="Face index to grind (default: largest face up).")
@click.option("--unit", default=None, help="Length unit of files that carry none (mm, m, ...).")
@click.option("--workpiece-pose", default=None, help="Part in base_link: 'x y z roll pitch yaw' (m, rad).")
@click.option("--feed", type=float, default=0.01, show_default=True, help="Feed along passes, m/s.")
@click.option("--stepover", type=float, default=0.005, show_default=True, help="Distance between passes, m.")
@click.option("--max-passes", type=int, default=None, help="Simulate only the first N passes.")
@click.option("--pass-length", type=float, default=None, help="Keep only the middle L m of each pass.")
@common_options
@json_option
def simulate(part_or_cad: str, plan_file: str | None, faces: tuple[int, ...], unit: str | None,
             workpiece_pose: str | None, feed: float, stepover: float, max_passes: int | None,
             pass_length: float | None, target_force: float, stiffness: float, cr: float, model: str, dt: float,
             output_dt: float, optimise: bool, force_ratio: float, servo_omega: float, out: str | None,
             as_json: bool) -> None:
    """Simulate grinding PART_OR_CAD (built-in part or CAD/mesh file): passes, arm, contact force.

    Plans the passes (or reads --plan), simulates the UR10e with its ball tool following them with
    the compliant contact (closed form per step), optimises the commanded penetration per pass
    until the mean normal force is within 5 % of the target, and writes a bag, force.png and
    summary.json under --out (default: simulate_out).
    """
    from robot_grinding_sim.core.job.grinding_job import JobConfig

    kw: dict[str, Any] = {}
    pose = _pose(workpiece_pose)
    if pose is not None:
        kw["workpiece_pose"] = pose
    cfg = JobConfig(part=part_or_cad, plan_file=plan_file, faces=list(faces) or None, unit=unit, feed=feed,
                    stepover=stepover, max_passes=max_passes, pass_length=pass_length, target_force=target_force,
                    stiffness=stiffness, cr=cr, model=model, dt=dt, output_dt=output_dt, optimise=optimise,
                    force_ratio=force_ratio, servo_omega=servo_omega, **kw)
    if plan_file is not None and not Path(plan_file).is_file():
        raise InputError(f"--plan {plan_file}: no such file")
    run_and_write(cfg, out or "simulate_out", as_json)
