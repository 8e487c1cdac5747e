"""``grinding import-log LOG --out BAG``: a measured log from another cell as a rosbag2 (MCAP).

The formats, the column names and what the bag records: :mod:`robot_grinding_sim.core.record.importlog`
and docs/calibration.md ("Measured data from another cell").
"""

from __future__ import annotations

import click

from robot_grinding_sim.cli.common import FINITE, emit_json, json_option
from robot_grinding_sim.core.record.importlog import ANGLE_UNITS, FORCE_UNITS, TIME_UNITS, TORQUE_UNITS


@click.command("import-log")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="The bag to write (a new directory; rosbag2, MCAP).")
@click.option("--format", "format_file", type=click.Path(dir_okay=False), default=None,
              help="A YAML declaring the log (keys: columns, rate, time_unit, angle_unit, force_unit, torque_unit, "
                   "frame, compensated, joint_names, delimiter, topic); options override it.")
@click.option("--columns", default=None,
              help="The columns in order, e.g. 'sample fx fy fz tx ty tz q0 q1 q2 q3 q4 q5' (names: time, sample, "
                   "q0.., qd0.., fx fy fz tx ty tz, skip); default: the header's names.")
@click.option("--rate", type=FINITE, default=None, help="Sample rate, Hz, when the log has no time column.")
@click.option("--time-unit", type=click.Choice(list(TIME_UNITS)), default=None, help="Unit of the time column [s].")
@click.option("--angle-unit", type=click.Choice(list(ANGLE_UNITS)), default=None, help="Joint angles [rad].")
@click.option("--force-unit", type=click.Choice(list(FORCE_UNITS)), default=None, help="Forces [N].")
@click.option("--torque-unit", type=click.Choice(list(TORQUE_UNITS)), default=None, help="Torques [Nm].")
@click.option("--frame", default=None,
              help="The wrench's frame: a link of the robot (ft_sensor, tool0, tcp, base ...). RTDE: base.")
@click.option("--raw/--compensated", "raw", default=None,
              help="The wrench is the sensor's raw reading (tool weight and bias in) or the compensated contact "
                   "wrench. RTDE: compensated.")
@click.option("--joint-names", default=None,
              help="The joints of q0.. in order (default: the package's robot's, e.g. the UR10e's).")
@click.option("--topic", default=None, help="The wrench topic written [/ft_sensor/wrench].")
@json_option
def import_log(log: str, out: str, format_file: str | None, columns: str | None, rate: float | None,
               time_unit: str | None, angle_unit: str | None, force_unit: str | None, torque_unit: str | None,
               frame: str | None, raw: bool | None, joint_names: str | None, topic: str | None,
               as_json: bool) -> None:
    """Import a measured log (CSV with a header, whitespace text, UR RTDE CSV) into a bag.

    The bag has /joint_states and a WrenchStamped topic, stamped with the log's time (its time
    column, or its sample counter or row over --rate), and what was declared about them (units,
    frame, raw or compensated) in metadata.yaml, which `grinding replay` and `grinding calibrate`
    read. UR's RTDE CSV (timestamp, actual_q_0..5, actual_TCP_force_0..5) is read by name.
    """
    from robot_grinding_sim.core.outfiles import check_output
    from robot_grinding_sim.core.record.importlog import LogFormat, format_from_options, load_format, read_log
    from robot_grinding_sim.core.record.importlog import write_log_bag as write

    check_output(out, "--out", kind="dir")
    base = load_format(format_file) if format_file else LogFormat()
    fmt = format_from_options(base, {
        "columns": columns, "rate": rate, "time_unit": time_unit, "angle_unit": angle_unit,
        "force_unit": force_unit, "torque_unit": torque_unit, "frame": frame,
        "compensated": None if raw is None else not raw, "joint_names": joint_names, "topic": topic})
    n = len(fmt.joint_names) if fmt.joint_names else 6
    if fmt.joint_names is None:
        from robot_grinding_sim.core.config import CellConfig
        from robot_grinding_sim.core.job.setup import load_robot_model

        cell = CellConfig()
        model = load_robot_model(cell.robot.description_file, cell.tool.tcp_link)
        fmt = format_from_options(fmt, {"joint_names": tuple(model.joint_names)})
        n = model.nq
    measured = read_log(log, fmt, n_joints=n)
    counts = write(measured, out)
    d = measured.declaration
    if as_json:
        emit_json({"bag": out, "counts": counts, **d})
        return
    t = measured.t
    click.echo("\n".join([
        f"log      : {log} ({d['format']}, {d['samples']} samples, {t[-1] - t[0]:.6g} s, "
        f"{d['rate_hz'] or float('nan'):.6g} Hz; time from the {d['time']})",
        f"wrench   : {d['topic']}, frame {d['frame']}, {'compensated' if d['compensated'] else 'raw'}; units "
        f"{d['force_unit']}, {d['torque_unit']}",
        f"joints   : /joint_states, {', '.join(d['joint_names'])} ({d['angle_unit']} in the log)"
        + ("; velocities" if d["joint_velocities"] else ""),
        f"bag      : {out}",
    ]))
