"""``grinding register``: the part's pose in base_link from touch points or from the tool's path in
contact (:mod:`robot_grinding_sim.core.calibration.registration`)."""

from __future__ import annotations

import math
from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE, FiniteRange, emit_json, json_option
from robot_grinding_sim.core.errors import InputError

#: the most tool-path samples used (evenly spaced over the in-contact samples)
MAX_PATH_POINTS = 1500


def read_points(path: str, unit: str) -> Any:
    """(K, 3) m from a text file: one point a line, x y z (whitespace, comma or semicolon), '#' comments."""
    import numpy as np

    rows = []
    with open(path) as f:
        for no, line in enumerate(f, 1):
            text = line.split("#", 1)[0].replace(",", " ").replace(";", " ").split()
            if not text:
                continue
            if len(text) != 3:
                raise InputError(f"{path}, line {no}: {len(text)} values, expected x y z")
            try:
                rows.append([float(x) for x in text])
            except ValueError:
                raise InputError(f"{path}, line {no}: not numbers: {line.strip()!r}") from None
    if not rows:
        raise InputError(f"{path}: no points")
    return np.asarray(rows) * {"m": 1.0, "mm": 1e-3}[unit]


@click.command("register")
@click.option("--points", "points_file", type=click.Path(dir_okay=False), default=None,
              help="Touch points on the surface, x y z per line, base_link.")
@click.option("--bag", default=None, type=click.Path(),
              help="A measured run: the tool centre (tcp) wherever the measured force exceeds --threshold.")
@click.option("--part", default=None, help="The part: CAD file or built-in part (default: the plan's).")
@click.option("--plan", default=None, type=click.Path(dir_okay=False), help="A plan.json: its part, faces, pose.")
@click.option("--pose", default=None,
              help="Starting pose 'x y z roll pitch yaw' (m, rad; default the plan's).")
@click.option("--face", "faces", multiple=True, type=int, help="The face(s) the points are on.")
@click.option("--unit", type=click.Choice(["m", "mm"]), default="m", show_default=True, help="Unit of --points.")
@click.option("--distance", type=FINITE, default=None,
              help="The points' distance from the surface, m (default 0 for --points, the tool's radius for --bag).")
@click.option("--keep", default="", help="Axes kept from the starting pose (x,y,z,rx,ry,rz), e.g. 'x,y,rz' on a plane.")
@click.option("--threshold", type=FiniteRange(min=0.0), default=2.0, show_default=True,
              help="In contact above this measured force, N (--bag).")
@click.option("--raw/--compensated", "raw", default=None, help="The bag's wrench is raw or compensated "
              "(default: as imported).")
@click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False), help="Cell parameter file.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Set a cell parameter.")
@json_option
def register(points_file: str | None, bag: str | None, part: str | None, plan: str | None, pose: str | None,
             faces: tuple[int, ...], unit: str, distance: float | None, keep: str, threshold: float,
             raw: bool | None, params_files: tuple[str, ...], sets: tuple[str, ...], as_json: bool) -> None:
    """Find the part's pose in base_link from points on its surface, with its uncertainty per axis.

    The points: --points (touch points) or --bag (the tool's path while in contact). Directions the
    points cannot fix (points on one line fix no rotation about it; on a plane no in-plane move) are
    named and refused, unless kept from the starting pose with --keep.
    """
    import numpy as np

    from robot_grinding_sim.cli.cell_options import parse_pose
    from robot_grinding_sim.cli.replay import cell_for, measured_declaration
    from robot_grinding_sim.core.calibration.calibrate import positions_at
    from robot_grinding_sim.core.calibration.registration import register_points
    from robot_grinding_sim.core.job.replay import measured_contact_wrench, replay_scene

    if (points_file is None) == (bag is None):
        raise InputError("give the points: --points FILE (touch points) or --bag BAG (the tool's path in contact)")
    keep_axes = tuple(a.strip() for a in keep.replace(" ", ",").split(",") if a.strip())
    cell = cell_for(plan, params_files, sets)
    scene = replay_scene(cell, part, parse_pose(pose, "--pose") if pose else None, list(faces) or None, plan)
    if points_file is not None:
        P = read_points(points_file, unit)
        d0 = 0.0 if distance is None else distance
        what = f"{len(P)} touch points from {points_file}"
    else:
        from robot_grinding_sim.core.record.bag import read_joint_states, read_wrench

        assert bag is not None
        topic, is_raw, frame = measured_declaration(bag, None, raw)
        if topic is None:
            raise InputError(f"bag {bag}: no wrench topic to tell contact from")
        if is_raw is None:
            raise InputError(f"bag {bag}: not declared whether {topic} is raw or compensated (--raw or --compensated)")
        w = read_wrench(bag, topic)
        t_js, names, q_js = read_joint_states(bag)
        q = positions_at(t_js, q_js, w.t)
        W = measured_contact_wrench(cell, scene.model, frame or w.frame, is_raw, np.hstack([w.force, w.torque]), q)
        on = np.linalg.norm(W[:, :3], axis=1) > threshold
        if on.sum() < 7:
            raise InputError(f"bag {bag}: {int(on.sum())} samples with a measured force above {threshold:g} N; "
                             "the path in contact needs more (lower --threshold?)")
        idx = np.flatnonzero(on)
        idx = idx[np.linspace(0, len(idx) - 1, min(len(idx), MAX_PATH_POINTS)).astype(int)]
        P = scene.model.fk(q[idx], cell.tool.tcp_link)[:, :3, 3]
        d0 = scene.radius if distance is None else distance
        what = f"{len(P)} tool centres in contact from {bag}"
    reg = register_points(scene.query, scene.X_BP, P, d0, keep_axes)
    doc = {**reg.summary(), "source": what, "distance_m": d0, "start_pose": scene.X_BP.tolist()}
    if as_json:
        emit_json(doc)
        return
    x = reg.xyzrpy
    lines = [f"points    : {what} (distance {d0:g} m from the surface)",
             f"pose      : {' '.join(f'{v:.6f}' for v in x)}  (x y z m, roll pitch yaw rad)",
             "std       : " + ", ".join(f"{a} {'kept' if math.isnan(v) else f'{v:.3g}'}" for a, v in reg.std.items())
             + "  (m, rad)",
             f"residual  : rms {reg.rms * 1e6:.3g} um, max {reg.max_abs * 1e6:.3g} um ({reg.iterations} iterations)",
             f"use       : grinding replay BAG --part {scene.source} --pose \"{' '.join(f'{v:.6f}' for v in x)}\""]
    click.echo("\n".join(lines))
