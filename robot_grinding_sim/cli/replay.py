"""``grinding replay BAG --out OUT``: the model's force along a measured run's joint states
(:mod:`robot_grinding_sim.core.job.replay`), written as a bag that ``grinding compare`` takes."""

from __future__ import annotations

from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE, FiniteRange, emit_json, json_option
from robot_grinding_sim.core.errors import InputError


def measured_declaration(bag: str, topic: str | None, raw: bool | None) -> tuple[str | None, bool | None, str | None]:
    """(wrench topic or None, raw, frame) of a measured bag: what ``grinding import-log`` declared,
    else real mode's raw topic, else ``/ft_sensor/wrench`` with ``raw`` as given (None: undeclared)."""
    from robot_grinding_sim.core.calibration.calibrate import RAW_TOPIC
    from robot_grinding_sim.core.record.bag import has_topic
    from robot_grinding_sim.core.record.importlog import declared

    decl = declared(bag)
    if topic is None:
        if decl is not None:
            topic = decl["topic"]
        elif has_topic(bag, RAW_TOPIC):
            topic = RAW_TOPIC
        elif has_topic(bag, "/ft_sensor/wrench"):
            topic = "/ft_sensor/wrench"
        else:
            return None, None, None
    if raw is None:
        if decl is not None and decl.get("topic") == topic:
            raw = not decl["compensated"]
        elif topic == RAW_TOPIC:
            raw = True
    frame = decl["frame"] if decl is not None and decl.get("topic") == topic else None
    return topic, raw, frame


def cell_for(plan: str | None, params_files: tuple[str, ...], sets: tuple[str, ...]) -> Any:
    """The cell: the plan's (or the package's), then --params files, then --set."""
    from robot_grinding_sim.cli.cell_options import build_cell
    from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan

    base = cell_of(read_plan(plan), plan) if plan else None
    return build_cell({"params_files": params_files, "sets": sets}, base=base)


@click.command("replay")
@click.argument("bag", type=click.Path())
@click.option("--out", required=True, type=click.Path(file_okay=False), help="The bag to write (a new directory).")
@click.option("--part", default=None, help="The part: a CAD file (STEP, IGES, STL) or a built-in part (default: the "
              "plan's).")
@click.option("--pose", default=None, help="The part's pose in base_link, 'x y z roll pitch yaw' (m, rad); default "
              "the plan's (`grinding register` finds it).")
@click.option("--face", "faces", multiple=True, type=int, help="The part's face(s) in contact (default: the plan's, "
              "or the one the planner would grind).")
@click.option("--plan", default=None, type=click.Path(dir_okay=False),
              help="The plan.json that ran: its part, pose and cell; needed with --force-control.")
@click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False),
              help="Cell parameter file (e.g. the cell.yaml `grinding calibrate` wrote); repeatable.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Set a cell parameter.")
@click.option("--topic", default=None, help="The measured wrench topic (default: the one the import declared).")
@click.option("--raw/--compensated", "raw", default=None,
              help="The measured wrench is raw (tool weight, bias in) or compensated (default: as declared).")
@click.option("--force-control", is_flag=True,
              help="The run was force controlled: simulate the driver's admittance (admittance.* of the cell) on the "
              "job's coupled step (servo.* of the cell).")
@click.option("--control-rate", type=FiniteRange(min=1.0), default=500.0, show_default=True,
              help="The force controller's rate, Hz (--force-control).")
@click.option("--surface-offset", type=FINITE, default=0.0, show_default=True,
              help="Move the part's surface along its outward normal, m (the part's height error).")
@json_option
def replay(bag: str, out: str, part: str | None, pose: str | None, faces: tuple[int, ...], plan: str | None,
           params_files: tuple[str, ...], sets: tuple[str, ...], topic: str | None, raw: bool | None,
           force_control: bool, control_rate: float, surface_offset: float, as_json: bool) -> None:
    """Predict the force along the joint states of BAG (a measured run, e.g. from `grinding import-log`).

    Writes OUT with /contact/wrench (the model's contact wrench, frame tcp), /joint_states and, when
    BAG has a wrench, /measured/wrench (the measured one as the contact wrench at the tcp: weight and
    bias removed from a raw reading). Then: `grinding compare OUT OUT --topic-real /measured/wrench`.
    """
    from pathlib import Path

    import numpy as np

    from robot_grinding_sim.cli.cell_options import parse_pose
    from robot_grinding_sim.core.calibration.calibrate import positions_at
    from robot_grinding_sim.core.job.replay import (
        measured_contact_wrench,
        replay_force_control,
        replay_path,
        replay_scene,
        write_replay_bag,
    )
    from robot_grinding_sim.core.outfiles import check_output, staged_dir
    from robot_grinding_sim.core.record.bag import read_joint_motion, read_wrench

    check_output(out, "--out", kind="dir")
    if Path(out).exists():
        raise InputError(f"--out {out} exists already; a bag needs a new directory")
    cell = cell_for(plan, params_files, sets)
    pose_v = parse_pose(pose, "--pose") if pose else None
    t_js, names, q_js, qd_js = read_joint_motion(bag)
    wtopic, wraw, wframe = measured_declaration(bag, topic, raw)
    series = read_wrench(bag, wtopic) if wtopic else None
    if series is not None and wraw is None:
        raise InputError(f"bag {bag}: not declared whether {wtopic} is raw or compensated (--raw or --compensated)")
    scene = replay_scene(cell, part, pose_v, list(faces) or None, plan)
    if names != list(scene.model.joint_names):
        raise InputError(f"bag {bag}: joint states name {names}, the robot has {list(scene.model.joint_names)}")
    if force_control:
        res = replay_force_control(scene, t_js, q_js, control_rate=control_rate, surface_offset=surface_offset)
    else:
        res = replay_path(scene, t_js, q_js, qd_js, surface_offset=surface_offset)
    measured = None
    if series is not None:
        frame = wframe or series.frame or ""
        if not frame:
            raise InputError(f"bag {bag}: {wtopic} has no frame (import it with --frame)")
        Wm = measured_contact_wrench(cell, scene.model, frame, bool(wraw), np.hstack([series.force, series.torque]),
                                     positions_at(t_js, q_js, series.t))
        measured = (series.t, Wm)
    info = {"bag": bag, "mode": "force control" if force_control else "position", "part": scene.source,
            "pose": scene.X_BP.tolist(), "faces": scene.faces, "surface_offset_m": surface_offset,
            "contact.stiffness": cell.contact.stiffness, "contact.model": cell.contact.model,
            "measured_topic": wtopic, "measured_raw": wraw, "notes": res.notes}
    with staged_dir(out, "--out") as tmp:
        counts = write_replay_bag(Path(tmp) / "bag", res, names, measured, info)
        inner = Path(tmp) / "bag"
        for f in inner.iterdir():
            f.rename(Path(tmp) / f.name)
        inner.rmdir()
    on = res.fn > 0
    summary = {**info, "out": out, "counts": counts, "samples": len(res.t), "in_contact": int(on.sum()),
               "mean_force_in_contact_n": float(res.fn[on].mean()) if on.any() else 0.0,
               "max_force_n": float(res.fn.max()) if len(res.fn) else 0.0}
    if as_json:
        emit_json(summary)
        return
    lines = [f"replay    : {bag} ({summary['mode']}), {len(res.t)} samples, {summary['in_contact']} in contact",
             f"part      : {scene.source} faces {scene.faces}, surface offset {surface_offset:g} m",
             f"force     : mean {summary['mean_force_in_contact_n']:.4g} N in contact, "
             f"max {summary['max_force_n']:.4g} N",
             f"bag       : {out} (/contact/wrench{', /measured/wrench' if measured is not None else ''})"]
    lines += [f"note      : {n}" for n in res.notes]
    if measured is not None:
        lines.append(f"compare   : grinding compare {out} {out} --topic-real /measured/wrench")
    click.echo("\n".join(lines))
