"""``grinding bringup sim|real``: start the node graph without ``ros2 launch`` (the pip path).

Starts, as child processes, the nodes :func:`robot_grinding_sim.bringup.graph` lists for the mode
(the same description ``launch/*.launch.py`` read), with the same node names, parameter files,
overrides and remappings, in an environment that keeps DDS on loopback. Each node's output is
printed prefixed with ``[node_name]``. SIGINT/SIGTERM (Ctrl-C) are forwarded to every node (SIGINT,
then SIGTERM, then SIGKILL for a node that does not stop). A node that exits while the graph runs
is reported with the end of its output; the command then exits with code 1 once stopped.

``--plan-file plan.json --start`` runs that plan through the graph (grinding_executive starts it
once the arm publishes joint states); ``--until-done`` then stops the graph when the job ends and
exits 0 if it ran to its end (``done``), 2 if it was stopped or failed, and on a terminal shows the
job's progress with an ETA (:mod:`robot_grinding_sim.cli.job_watch`).

Nodes of other packages (robot_state_publisher, rviz2) exist only on a ROS install and are
skipped; a node of this package whose module does not exist yet is skipped with a warning.
"""

from __future__ import annotations

import ipaddress
import sys
import time
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import FiniteRange, emit_json, json_option, progress
from robot_grinding_sim.cli.job_watch import JobClock, ProgressListener
from robot_grinding_sim.cli.processes import (
    Child,
    StopFlag,
    node_command,
    quote,
    report_exits,
    report_unclean,
    stop_all,
    stop_on_signals,
)

#: how long the recorder may take to start recording before the other nodes start anyway, s
RECORDER_READY_TIMEOUT = 120.0


def _check_address(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        raise click.BadParameter("must not be empty", param_hint=option)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        # a host name: letters, digits, dots and dashes
        if not all(c.isalnum() or c in ".-" for c in value) or value.startswith(("-", ".")):
            raise click.BadParameter(
                f"{value!r} is neither an IP address nor a host name", param_hint=option
            ) from None
    return value


@click.command()
@click.argument("mode", type=click.Choice(["sim", "real"]))
@click.option("--robot-ip", default=None, help="Address of the robot controller (real mode).")
@click.option("--ft-sensor-ip", default=None, help="Address of the force-torque sensor (real mode).")
@click.option(
    "--record",
    "record",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also start the recorder, writing an MCAP bag into this directory.",
)
@click.option(
    "--domain-id",
    type=click.IntRange(0, 101),
    default=None,
    help="ROS_DOMAIN_ID of the graph (default: the environment's, else 0).",
)
@click.option(
    "--discovery-range",
    type=click.Choice(["LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT"]),
    default="LOCALHOST",
    show_default=True,
    help="ROS_AUTOMATIC_DISCOVERY_RANGE of the nodes; a real cell with RViz or drivers on other hosts uses SUBNET.",
)
@click.option(
    "--duration",
    type=FiniteRange(min=0.0, min_open=True),
    default=None,
    help="Stop every node after this many seconds (default: run until Ctrl-C).",
)
@click.option(
    "--params-file",
    "params_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Extra ROS parameter yaml applied to every node after its own config (repeatable).",
)
@click.option("--plan-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="plan.json for grinding_executive (default: the plan planner_node makes at start-up).")
@click.option("--start", is_flag=True, help="grinding_executive starts the job once it has a plan and joint states.")
@click.option("--until-done", is_flag=True,
              help="Stop the graph when the job ends; exit 0 if it ran to its end, 2 if stopped or failed.")
@click.option("--only", "only", multiple=True, help="Start only these nodes (by name; repeatable).")
@click.option("--stop-on-exit", is_flag=True, help="Stop the whole graph as soon as one node exits.")
@click.option("--print", "dry_run", is_flag=True, help="Print the commands instead of running them.")
@json_option
def bringup(
    mode: str,
    robot_ip: str | None,
    ft_sensor_ip: str | None,
    record: Path | None,
    domain_id: int | None,
    discovery_range: str,
    duration: float | None,
    params_files: tuple[Path, ...],
    plan_file: Path | None,
    start: bool,
    until_done: bool,
    only: tuple[str, ...],
    stop_on_exit: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Start the grinding cell's node graph in MODE (sim or real) without ros2 launch.

    Same nodes, names, parameters and remappings as `ros2 launch robot_grinding_sim
    MODE.launch.py` (robot_grinding_sim/bringup.py). DDS stays on loopback unless
    --discovery-range says otherwise.
    """
    from robot_grinding_sim.bringup import PACKAGE, graph
    from robot_grinding_sim.environment import localhost_env

    robot_ip = _check_address(robot_ip, "--robot-ip")
    ft_sensor_ip = _check_address(ft_sensor_ip, "--ft-sensor-ip")
    if mode == "sim" and (robot_ip or ft_sensor_ip):
        raise click.UsageError("--robot-ip / --ft-sensor-ip apply to 'real' only")
    if until_done and not start:
        raise click.UsageError("--until-done needs --start")
    specs = graph(mode, robot_ip=robot_ip, ft_sensor_ip=ft_sensor_ip, record=str(record) if record else None,
                  plan_file=str(plan_file) if plan_file else None, start=start)
    names = [s.name for s in specs]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise click.BadParameter(
            f"unknown node(s) {unknown}; the {mode} graph has {names}", param_hint="--only"
        )
    if only:
        specs = [s for s in specs if s.name in only]

    plan: list[dict[str, Any]] = []
    for s in specs:
        entry: dict[str, Any] = {"name": s.name, "package": s.package, "executable": s.executable}
        if s.package != PACKAGE:
            entry["skip"] = f"{s.package} is not available without a ROS install (use ros2 launch)"
        elif not s.module_available():
            entry["skip"] = f"module {s.module} does not exist in this installation"
        else:
            entry["command"] = node_command(s.executable) + s.ros_args(params_files)
        plan.append(entry)

    env = localhost_env(domain_id, discovery_range=discovery_range)
    env.setdefault("ROS_DOMAIN_ID", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "0")

    if dry_run:
        if as_json:
            emit_json({"mode": mode, "ros_domain_id": int(env["ROS_DOMAIN_ID"]),
                       "ros_automatic_discovery_range": env["ROS_AUTOMATIC_DISCOVERY_RANGE"], "nodes": plan})
        else:
            for e in plan:
                if "skip" in e:
                    click.echo(f"# {e['name']}: skipped: {e['skip']}")
                else:
                    click.echo(" ".join(quote(a) for a in e["command"]))
        return

    to_start = [e for e in plan if "command" in e]
    own_missing = [e["name"] for e in plan if e["package"] == PACKAGE and "skip" in e]
    if mode == "real" and own_missing:
        # a real cell without its driver would send the plan to nobody: start nothing
        raise click.ClickException(f"the real graph needs {', '.join(own_missing)}, not in this installation "
                                   "(not written yet): nothing started")
    for e in plan:
        if "skip" in e:
            click.echo(f"[bringup] WARNING: skipping {e['name']}: {e['skip']}", err=True)
    if not to_start:
        raise click.UsageError(f"none of the {mode} graph's nodes is available here")
    click.echo(
        f"[bringup] {mode}: starting {', '.join(e['name'] for e in to_start)} "
        f"(ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, ROS_AUTOMATIC_DISCOVERY_RANGE={discovery_range})"
    )

    children: list[Child] = []
    failed: list[str] = []
    with stop_on_signals() as (stop, received), \
            progress(None, "job: waiting for the start", enabled=until_done, plain=False) as bar:
        job_end = _run(to_start, env, children, failed, stop, duration, until_done, stop_on_exit, bar)
    why = (f"signal {received[0]}" if received else f"job {job_end}" if job_end
           else ("duration reached" if not failed else "a node exited"))
    click.echo(f"[bringup] stopped {len(children)} node(s) ({why})")
    # a node must stop with exit code 0 when asked; anything else is a defect worth a red exit
    unclean = report_unclean(children, failed, "bringup")
    if failed or unclean:
        sys.exit(1)  # (click.exceptions.Exit is swallowed by grinding's standalone_mode=False)
    if until_done and job_end != "done":
        click.echo(f"[bringup] the job did not run to its end ({job_end or why})", err=True)
        sys.exit(2)


def _run(to_start: list[dict[str, Any]], env: dict[str, str], children: list[Child], failed: list[str],
         stop: StopFlag, duration: float | None, until_done: bool, stop_on_exit: bool, bar: Any) -> str | None:
    """Start the nodes, watch them until ``stop``, the duration, the job's end or no node left; stop
    them all. Returns the job's end (``done``, ``stopped``, ``failed``) with ``until_done``, else None.
    ``bar``: a progress handle (common.progress); the job's progress goes there when it shows."""
    clock: JobClock | None = None
    listener: ProgressListener | None = None
    job_end: str | None = None
    shown_total: float | None = None
    if until_done and bar.active:
        clock = JobClock()
        try:
            listener = ProgressListener(env, clock.feed_progress, clock.feed_clock)
        except Exception as e:  # a bar is not worth a failed job
            click.echo(f"[bringup] no progress bar: {e}", err=True)
    try:
        # the recorder first, and recording before the others start: what is published once (the
        # executive's command trajectory) is in the bag however slow discovery is on a busy machine
        for e in sorted(to_start, key=lambda e: e["name"] != "recorder"):
            c = Child(e["name"], e["command"], env,
                      on_line=clock.feed_line if clock is not None and e["name"] == "grinding_executive" else None)
            children.append(c)
            if e["name"] == "recorder":
                deadline = time.monotonic() + RECORDER_READY_TIMEOUT
                while (c.alive() and not stop.is_set() and time.monotonic() < deadline
                       and not any("recording " in line for line in list(c.tail))):  # (appended by its reader thread)
                    stop.wait(0.1)
        t0 = time.monotonic()
        while not stop.is_set():
            if duration is not None and time.monotonic() - t0 >= duration:
                break
            report_exits(children, failed, "bringup")
            if failed and (stop_on_exit or until_done):  # with a node gone the job cannot end
                break
            if until_done:
                job_end = next((c.job_end for c in children if c.job_end), None)
                if job_end:
                    break
            if all(not c.alive() for c in children):
                break
            if clock is not None and (st := clock.state()) is not None:
                # a new total (a resume) restarts the ETA; a new pass only changes the label
                bar.update(st[0], st[1] if st[1] != shown_total else None, description=st[2])
                shown_total = st[1]
            stop.wait(0.2)
    finally:
        if listener is not None:
            listener.close()
        stop_all(children)
    return job_end


if __name__ == "__main__":  # pragma: no cover
    sys.exit(bringup())
