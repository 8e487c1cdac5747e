"""``grinding record``: record topics into a rosbag2 with the ``recorder`` node (no ``ros2 bag`` needed).

Runs the same node as ``ros2 run robot_grinding_sim recorder`` in this process, so options map to
its parameters (config/recorder.yaml). ``--repair BAG`` fixes a bag left by a killed recorder
instead of recording.
"""

from __future__ import annotations

import click

from robot_grinding_sim.cli.common import FINITE, emit_json, json_option


def _ros_value(v: object) -> str:
    """A value as rcl's ``-p name:=value`` yaml."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_ros_value(x) for x in v) + "]"
    text = str(v).replace("'", "''")
    return f"'{text}'"


@click.command("record")
@click.option("-o", "--output", default="",
              help="Bag directory to create (default rosbag2_YYYY_MM_DD-HH_MM_SS).")
@click.option("-t", "--topic", "topics", multiple=True,
              help="Topic to record (repeatable; default: the list in config/recorder.yaml).")
@click.option("-a", "--all", "all_topics", is_flag=True,
              help="Record every topic (except /rosout, /parameter_events).")
@click.option("-s", "--storage", type=click.Choice(("mcap", "sqlite3")), default="mcap", show_default=True)
@click.option("-d", "--duration", type=FINITE, default=0.0, show_default=True,
              help="Stop after this many seconds (0: until Ctrl-C / SIGTERM).")
@click.option("--flush-period", type=FINITE, default=1.0, show_default=True,
              help="Checkpoint period, s: a killed recorder loses at most this much.")
@click.option("--params-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A ROS parameter file for the node (options given here override it).")
@click.option("--domain-id", type=click.IntRange(0, 101), default=None, help="ROS_DOMAIN_ID to record from.")
@click.option("--discovery-range", type=click.Choice(("LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT")),
              default="LOCALHOST", show_default=True,
              help="ROS_AUTOMATIC_DISCOVERY_RANGE: SUBNET records a cell's nodes on other hosts.")
@click.option("--repair", "repair", type=click.Path(), default=None,
              help="Do not record: make the bag REPAIR (left by a killed recorder) readable again.")
@json_option
def record(output: str, topics: tuple[str, ...], all_topics: bool, storage: str, duration: float,
           flush_period: float, params_file: str | None, domain_id: int | None, discovery_range: str,
           repair: str | None,
           as_json: bool) -> None:
    """Record topics into a rosbag2 (MCAP by default, or sqlite3) until Ctrl-C.

    Types are discovered on the graph; publishers that appear later are picked up. DDS stays on
    this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) unless --discovery-range says otherwise.
    """
    if repair is not None:
        from robot_grinding_sim.core.record.bagwriter import repair_bag

        res = repair_bag(repair)
        doc = {"bag": str(res.path), "storage": res.storage, "messages": res.messages,
               "rewritten": res.rewritten}
        if as_json:
            emit_json(doc)
        else:
            what = "metadata.yaml rebuilt"
            if res.rewritten:
                what = "storage file rewritten, original kept as .orig; " + what
            click.echo(f"repaired {res.path} ({res.storage}): {res.messages} messages; {what}")
        return

    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.environment import apply_localhost_env
    from robot_grinding_sim.nodes.recorder import RecorderNode, default_output
    from robot_grinding_sim.ros.node_base import run_node

    apply_localhost_env(domain_id, discovery_range=discovery_range)
    params: dict[str, object] = {"storage": storage, "max_duration": float(duration),
                                 "flush_period": float(flush_period)}
    params["output"] = output or default_output()
    if topics:
        params["topics"] = list(topics)
    if all_topics:
        params["all_topics"] = True
    argv = ["grinding-record", "--ros-args"]
    if params_file:
        argv += ["--params-file", params_file]
    for name, value in params.items():
        argv += ["-p", f"{name}:={_ros_value(value)}"]
    code = run_node(RecorderNode, argv)
    if code != 0:
        raise InputError("the recorder did not start (see the FATAL line above)")
    from robot_grinding_sim.core.record.bag import bag_topics

    counts = {t.name: t.count for t in bag_topics(str(params["output"]))}
    if as_json:
        emit_json({"bag": str(params["output"]), "storage": storage, "topics": counts})
    else:
        n = sum(counts.values())
        click.echo(f"recorded {n} messages on {len(counts)} topics into {params['output']}")
