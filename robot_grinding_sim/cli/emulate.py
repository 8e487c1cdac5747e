"""``grinding emulate``: an emulated cell on loopback that ``grinding bringup real`` drives unchanged.

Starts, as child processes (as ``grinding bringup`` does, with its signal handling), the nodes of
:func:`robot_grinding_sim.emulated_cell.emulated_cell`:

- the arm: ``dynamics_node`` on wall time (no /clock), following trajectories on
  ``--controller-topic`` (default ``/scaled_joint_trajectory_controller/joint_trajectory``, where
  hardware_driver forwards the executive's commands) and publishing ``/joint_states``; its contact
  with the part is computed in the same process at every step (``coupling: local``, the in-process
  job's step) with the emulated cell's TRUE parameters (config/emulated_cell.yaml: contact
  stiffness 3x the prediction's, an F/T bias and noise; ``--params-file``, ``--set``,
  ``--servo-bandwidth`` change them), and so is its F/T sensor model's reading;
- the sensor: ``netft_emulator`` serving that reading as an ATI Net F/T (RDT over UDP) on
  127.0.0.1 at ``--port`` with the fault options.

Everything but /joint_states and the controller topic lives under ``--namespace`` (default
``/emulated``): the emulated cell's /ft_sensor/wrench and node names never meet the real-mode
graph's. DDS discovery stays on loopback; ``--domain-id`` must match the real graph's.

    grinding emulate --domain-id 42 &
    grinding bringup real --domain-id 42 --robot-ip 127.0.0.1 --ft-sensor-ip 127.0.0.1 \\
        --plan-file plan.json --start --until-done --record bag/
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import FiniteRange
from robot_grinding_sim.cli.processes import (
    Child,
    node_command,
    quote,
    report_exits,
    report_unclean,
    stop_all,
    stop_on_signals,
)

#: netft_emulator's log line at its first reading (the emulated arm runs and its sensor reads)
READY = "first reading"
#: what ``grinding emulate`` prints then: start the real-mode graph after it (a driver started earlier
#: sees the arm's start-up pause, while it waits for its contact side, as joint states falling silent)
READY_LINE = "cell ready"


def _parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` cell parameters (:func:`~robot_grinding_sim.cli.cell_options.parse_sets`, as every
    command reads them), validated against core.config (a bad one names itself)."""
    from robot_grinding_sim.cli.cell_options import parse_sets
    from robot_grinding_sim.core.config import cell_specs, config_from_mapping
    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.core.parameters import ParameterError, validate_value

    specs = {s.name: s for s in cell_specs()}
    out: dict[str, Any] = {}
    for name, value in parse_sets(items).items():
        try:
            out[name] = validate_value(specs[name], value)
        except ParameterError as exc:
            raise InputError(f"--set {name}: {exc.problem}") from None
    try:
        cell = config_from_mapping(out)  # the rules between parameters (e.g. the servo's stability at the step)
        if "robot.home" in out:  # against the robot, as dynamics_node checks it at start
            from robot_grinding_sim.core.job.setup import cell_robot_model

            cell_robot_model(cell)
    except InputError as exc:
        raise InputError(f"--set: {exc}") from None
    return out


@click.command()
@click.option("--domain-id", type=click.IntRange(0, 101), default=None,
              help="ROS_DOMAIN_ID (the real-mode graph's; default: the environment's, else 0).")
@click.option("--namespace", default="/emulated", show_default=True,
              help="Namespace of the emulated cell's internals (contact side, sensor model, node names).")
@click.option("--controller-topic", default="/scaled_joint_trajectory_controller/joint_trajectory", show_default=True,
              help="Trajectory topic the emulated arm follows (hardware_driver's output_topic).")
@click.option("--params-file", "params_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Parameter yaml of the emulated cell's true parameters, after config/emulated_cell.yaml "
                   "(repeatable).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A true cell parameter of the emulated arm and contact, e.g. contact.stiffness=3e5 (repeatable).")
@click.option("--servo-bandwidth", type=FiniteRange(min=0.0, min_open=True), default=None,
              help="The emulated arm's joint servo bandwidth, rad/s (servo.bandwidth; lower: more lag).")
@click.option("--port", type=click.IntRange(1, 65535), default=49152, show_default=True,
              help="UDP port of the emulated Net F/T on 127.0.0.1 (the driver's ft_port).")
@click.option("--ft-rate", type=FiniteRange(1.0, 20000.0), default=1000.0, show_default=True,
              help="RDT record rate, Hz.")
@click.option("--counts-per-force", type=FiniteRange(min=0.0, min_open=True), default=1e6, show_default=True,
              help="Counts per N (set the driver's counts_per_force to the same).")
@click.option("--counts-per-torque", type=FiniteRange(min=0.0, min_open=True), default=1e6, show_default=True,
              help="Counts per N m (the driver's counts_per_torque).")
@click.option("--ft-max-hold", type=FiniteRange(0.001, 10.0), default=0.05, show_default=True,
              help="The sensor samples on the emulated arm's clock, following an arm that lags the wall clock "
                   "(a busy machine) by at most this many seconds (keep it below the driver's ft_timeout).")
@click.option("--drop", type=FiniteRange(0.0, 1.0), default=0.0, help="Fault: fraction of records not sent.")
@click.option("--reorder", type=FiniteRange(0.0, 1.0), default=0.0, help="Fault: fraction of records swapped.")
@click.option("--corrupt", type=FiniteRange(0.0, 1.0), default=0.0,
              help="Fault: fraction of records replaced by a wrong-size datagram.")
@click.option("--silent-after", type=FiniteRange(min=0.0), default=None,
              help="Fault: the sensor falls silent this many seconds after it starts.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
              help="Seed of the fault generator.")
@click.option("--nice", "niceness", type=click.IntRange(-20, 19), default=-10, show_default=True,
              help="Niceness of the emulated arm and sensor: they stand for hardware with its own processors "
                   "and must keep real time while the real-mode graph and other work load this machine "
                   "(below 0 needs the privilege to raise a priority; without it they run at 0, with a warning).")
@click.option("--duration", type=FiniteRange(min=0.0, min_open=True), default=None,
              help="Stop after this many seconds (default: until Ctrl-C).")
@click.option("--print", "dry_run", is_flag=True, help="Print the commands instead of running them.")
def emulate(
    domain_id: int | None,
    namespace: str,
    controller_topic: str,
    params_files: tuple[Path, ...],
    sets: tuple[str, ...],
    servo_bandwidth: float | None,
    port: int,
    ft_rate: float,
    counts_per_force: float,
    counts_per_torque: float,
    ft_max_hold: float,
    drop: float,
    reorder: float,
    corrupt: float,
    silent_after: float | None,
    seed: int,
    niceness: int,
    duration: float | None,
    dry_run: bool,
) -> None:
    """Start an emulated arm and Net F/T on loopback for `grinding bringup real` to drive.

    Run `grinding bringup real --robot-ip 127.0.0.1 --ft-sensor-ip 127.0.0.1` (same --domain-id)
    against it. The emulated cell's true parameters are config/emulated_cell.yaml (contact
    stiffness 3x the prediction's, an F/T bias and noise), then --params-file, then --set.
    """
    from robot_grinding_sim.emulated_cell import emulated_cell
    from robot_grinding_sim.environment import localhost_env

    overrides = _parse_sets(sets)
    if servo_bandwidth is not None:
        overrides.update(_parse_sets((f"servo.bandwidth={servo_bandwidth!r}",)))
    netft = {"port": port, "rate": ft_rate, "counts_per_force": counts_per_force,
             "counts_per_torque": counts_per_torque, "drop_fraction": drop, "reorder_fraction": reorder,
             "corrupt_fraction": corrupt, "silent_after": -1.0 if silent_after is None else silent_after, "seed": seed,
             "max_hold": ft_max_hold}
    try:
        specs = emulated_cell(namespace=namespace, controller_topic=controller_topic, overrides=overrides, netft=netft)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    commands = []
    for s in specs:
        if not s.module_available():
            raise click.ClickException(f"module {s.module} does not exist in this installation")
        extra = params_files if s.executable != "netft_emulator" else ()
        commands.append((s.name, node_command(s.executable) + s.ros_args(extra)))
    env = localhost_env(domain_id)  # discovery on loopback only: the emulated cell is this machine
    env.setdefault("ROS_DOMAIN_ID", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "0")
    if dry_run:
        for _, cmd in commands:
            click.echo(" ".join(quote(a) for a in cmd))
        return
    click.echo(f"[emulate] starting {', '.join(n for n, _ in commands)} in {namespace} (ROS_DOMAIN_ID="
               f"{env['ROS_DOMAIN_ID']}); arm: {controller_topic} -> /joint_states; Net F/T: 127.0.0.1:{port}")

    children: list[Child] = []
    failed: list[str] = []
    with stop_on_signals() as (stop, received):
        try:
            for name, cmd in commands:
                children.append(Child(f"{namespace.strip('/')}/{name}", cmd, env, nice=niceness))
            if children and children[0].nice_error:
                click.echo(f"[emulate] WARNING: cannot run the emulated cell at niceness {niceness} "
                           f"({children[0].nice_error}): it runs at 0 and may fall behind real time on a busy "
                           "machine", err=True)
            t0 = time.monotonic()
            netft = children[-1]
            ready = False
            while not stop.is_set():
                if not ready and any(READY in line for line in list(netft.tail)):
                    ready = True
                    click.echo(f"[emulate] {READY_LINE}: the arm answers on /joint_states and the Net F/T streams "
                               "its sensor model's readings")
                if duration is not None and time.monotonic() - t0 >= duration:
                    break
                report_exits(children, failed, "emulate")
                if failed:
                    break  # a cell with a part missing is no cell: stop it all
                stop.wait(0.2)
        finally:
            stop_all(children)
    why = f"signal {received[0]}" if received else ("a node exited" if failed else "duration reached")
    click.echo(f"[emulate] stopped {len(children)} node(s) ({why})")
    unclean = report_unclean(children, failed, "emulate")
    if failed or unclean:
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(emulate())
