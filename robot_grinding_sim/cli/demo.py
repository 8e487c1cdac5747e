"""``grinding demo``: the main job, a quick configuration of the simulated grinding job.

The default UR10e with its ball-headed tool (``urdf/ur10e_grinding.urdf``) grinds the built-in
``curved_panel`` (freeform B-spline top, 0.7 m in front of the robot): three 30 mm passes planned
on the exact CAD surface, followed under computed-torque position control at 1 ms steps with the
Kelvin-Voigt contact advanced in closed form per step (``core.grinding_job``); the commanded
penetration of each pass is optimised until its mean normal force is within 5 % of the 5 N
target. Writes under ``--out``: ``bag/`` (rosbag2 MCAP: /joint_states, /contact/wrench,
/ft_sensor/wrench, /grinding/progress, /dynamics_node/tool_pose), ``force.png`` and
``summary.json`` (``--json`` prints it alone). ``grinding simulate`` runs the same job with every
option.
"""

from __future__ import annotations

import click

from robot_grinding_sim.cli.common import json_option
from robot_grinding_sim.cli.simulate import common_options, run_and_write

#: the quick configuration: passes and length (the rest: JobConfig defaults)
DEMO_PASSES = 3
DEMO_PASS_LENGTH = 0.03


def demo_config(**overrides: object) -> object:
    """The demo's JobConfig (curved_panel, 3 passes of 30 mm, stepover 10 mm), with overrides."""
    from robot_grinding_sim.core.job.grinding_job import JobConfig

    kw = {"part": "curved_panel", "max_passes": DEMO_PASSES, "pass_length": DEMO_PASS_LENGTH, "stepover": 0.01}
    kw.update(overrides)
    return JobConfig(**kw)


@click.command("demo")
@click.option("--rate", type=float, default=None,
              help="Simulation rate, Hz (sets --dt to 1/rate; kept for the old demo's command line).")
@common_options
@json_option
def demo(rate: float | None, target_force: float, stiffness: float, cr: float, model: str, dt: float,
         output_dt: float, optimise: bool, force_ratio: float, servo_omega: float, out: str | None,
         as_json: bool) -> None:
    """Run the main job: a quick simulated grinding job on the built-in curved panel."""
    from robot_grinding_sim.core.errors import InputError

    if rate is not None:
        if not rate > 0:
            raise InputError(f"--rate must be > 0 Hz, got {rate}")
        dt = 1.0 / rate
    cfg = demo_config(target_force=target_force, stiffness=stiffness, cr=cr, model=model, dt=dt,
                      output_dt=output_dt, optimise=optimise, force_ratio=force_ratio, servo_omega=servo_omega)
    run_and_write(cfg, out or "demo_out", as_json)
