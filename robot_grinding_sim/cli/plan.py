"""``grinding plan`` (grinding passes on a CAD face, plan.json / CSV / plot) and ``grinding parts``."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import emit_json, json_option
from robot_grinding_sim.core.errors import InputError


def _positive(name: str) -> Any:
    def check(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise click.BadParameter(f"must be a positive number, got {value}", param_hint=name)
        return value
    return check


def _render_plot(plan: Any, out: io.BytesIO) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig = plt.figure(figsize=(8, 6))
    ax = fig.add_subplot(projection="3d")
    for p in plan.passes:
        ax.plot(*p.points.T, lw=0.8, color="tab:blue")
    for m in plan.moves:
        if m.kind == "link":
            ax.plot(*m.positions.T, lw=0.4, color="tab:gray", alpha=0.5)
    pts = np.vstack([p.points for p in plan.passes])
    nrm = np.vstack([p.normals for p in plan.passes])
    every = max(1, len(pts) // 200)
    span = float(np.ptp(pts, axis=0).max())
    ax.quiver(*pts[::every].T, *nrm[::every].T, length=0.05 * span, color="tab:red", lw=0.5)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    mid, half = 0.5 * (lo + hi), 0.5 * float((hi - lo).max())
    ax.set_xlim(mid[0] - half, mid[0] + half)
    ax.set_ylim(mid[1] - half, mid[1] + half)
    ax.set_zlim(mid[2] - half, mid[2] + half)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    s = plan.summary()
    ax.set_title(f"{plan.source} face {plan.faces}: {s['passes']} passes, {s['waypoints']} waypoints")
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)


@click.command("plan")
@click.argument("source", required=False, default="curved_panel")
@click.option("--face", "faces", type=int, multiple=True,
              help="Face index (repeat for adjacent faces; default: the largest face looking up).")
@click.option("--stepover", type=float, default=0.005, show_default=True, callback=_positive("--stepover"),
              help="Distance between passes on the surface, m.")
@click.option("--spacing", type=float, default=0.002, show_default=True, callback=_positive("--spacing"),
              help="Waypoint spacing along a pass (arc length), m.")
@click.option("--angle", type=float, default=0.0, show_default=True, help="Raster angle about the face normal, deg.")
@click.option("--margin", type=float, default=0.005, show_default=True,
              help="Keep waypoints this far from the face boundary and holes, m.")
@click.option("--tool-radius", type=float, default=0.02, show_default=True, callback=_positive("--tool-radius"),
              help="Radius of the spherical tool, m.")
@click.option("--target-force", type=float, default=5.0, show_default=True, help="Normal force on the passes, N.")
@click.option("--stiffness", type=float, default=None, callback=_positive("--stiffness"),
              help="Contact stiffness K (Kelvin-Voigt), N/m; penetration = force / K. [default: 1e5]")
@click.option("--generator", type=click.Choice(["raster", "iso"]), default="raster", show_default=True,
              help="Plane-slicing raster or iso-parametric passes.")
@click.option("--iso-direction", type=click.Choice(["u", "v"]), default="u", show_default=True,
              help="Iso passes run along u or v.")
@click.option("--order", type=click.Choice(["zigzag", "oneway"]), default="zigzag", show_default=True)
@click.option("--reverse", is_flag=True, help="Travel the first pass in the opposite direction.")
@click.option("--lead", type=float, default=0.0, show_default=True, help="Tool lead angle, deg.")
@click.option("--tilt", type=float, default=0.0, show_default=True, help="Tool tilt angle, deg.")
@click.option("--feed", type=float, default=0.01, show_default=True, callback=_positive("--feed"),
              help="TCP speed on the passes, m/s.")
@click.option("--unit", default=None, help="Length unit of files without one (BREP, STL/PLY/OBJ, unit-less STEP).")
@click.option("--robot", default="default", show_default=True,
              help="URDF of the robot for IK and the joint trajectory, 'default' (UR10e + ball tool), or 'none'.")
@click.option("--workpiece-pose", default=None,
              help="Part pose in the robot base frame: 'x y z roll pitch yaw' (m, rad). [default: 0.8 0 0 0 0 0]")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Write plan.json here.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the waypoints as CSV.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Write a PNG plot.")
@click.option("--list-faces", is_flag=True, help="List the faces (index, type, area) and exit.")
@json_option
def plan(source: str, faces: tuple[int, ...], stepover: float, spacing: float, angle: float, margin: float,
         tool_radius: float, target_force: float, stiffness: float | None, generator: str, iso_direction: str,
         order: str, reverse: bool, lead: float, tilt: float, feed: float, unit: str | None, robot: str,
         workpiece_pose: str | None, out_path: str | None, csv_path: str | None, plot_path: str | None,
         list_faces: bool, as_json: bool) -> None:
    """Plan grinding passes on SOURCE: a STEP/IGES/BREP/STL/PLY/OBJ file or a built-in part
    (see `grinding parts`; default curved_panel). Positions are metres in the part frame."""
    from robot_grinding_sim.core.geometry import cad
    from robot_grinding_sim.core.planning import plan_io, planner
    from robot_grinding_sim.core.planning.passes import PassParameters

    part = cad.load_part(source, unit)
    if list_faces:
        rows = [{"index": f.index, "type": f.type, "area": f.area} for f in part.list_faces()]
        if as_json:
            emit_json(rows)
        else:
            for r in rows:
                click.echo(f"{r['index']:4d}  {r['type']:<11s} {r['area'] * 1e6:12.1f} mm^2")
        return
    if out_path is None:
        raise click.UsageError("--out plan.json is required (or --list-faces)")
    if not math.isfinite(margin) or margin < 0:
        raise click.BadParameter(f"must be >= 0, got {margin}", param_hint="--margin")
    pass_params = PassParameters(stepover=stepover, spacing=spacing, margin=margin, angle=angle,
                                 generator=generator, iso_direction=iso_direction, order=order, reverse=reverse)
    tool = planner.ToolParameters(radius=tool_radius, target_force=target_force,
                                  stiffness=stiffness or planner.DEFAULT_CONTACT_STIFFNESS, lead=lead, tilt=tilt,
                                  feed=feed)
    pose: Any = planner.DEFAULT_WORKPIECE_POSE
    if workpiece_pose is not None:
        try:
            pose = [float(x) for x in workpiece_pose.replace(",", " ").split()]
        except ValueError:
            raise InputError(f"--workpiece-pose: expected 6 numbers, got {workpiece_pose!r}") from None
    robot_arg: Any = None if robot.lower() == "none" else robot
    result = planner.plan(part, list(faces) if faces else None, pass_params, tool, unit=unit, robot=robot_arg,
                          workpiece_pose=pose)
    # render everything first: a failure leaves no file behind
    text = json.dumps(plan_io.plan_to_dict(result), separators=(",", ":"), allow_nan=False)
    csv_text = plan_io.plan_csv(result) if csv_path else None
    png = io.BytesIO()
    if plot_path:
        _render_plot(result, png)
    written = [str(Path(out_path))]
    plan_io.atomic_write(Path(out_path), text)
    if csv_path and csv_text is not None:
        plan_io.atomic_write(Path(csv_path), csv_text)
        written.append(str(csv_path))
    if plot_path:
        tmp = Path(plot_path).with_name(f".{Path(plot_path).name}.tmp")
        tmp.write_bytes(png.getvalue())
        tmp.replace(plot_path)
        written.append(str(plot_path))
    summary = {**result.summary(), "files": written, "timings_s": result.timings}
    if result.reachability is not None:
        summary["reachability"] = result.reachability
    if result.collision is not None:
        summary["collision"] = result.collision
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"{summary['passes']} passes ({summary['rows']} rows), {summary['waypoints']} waypoints, "
                   f"{summary['pass_length_m']:.3f} m of passes, grinding {summary['grinding_time_s']:.1f} s")
        if result.trajectory is not None:
            click.echo(f"joint trajectory: {summary['trajectory_points']} points, "
                       f"{summary['trajectory_duration_s']:.1f} s; all {result.reachability['targets']} "
                       f"TCP targets reached")
        if result.collision is not None:
            click.echo(f"no collision: {result.collision['checked_samples']} samples, clearance >= "
                       f"{result.collision['min_clearance_m'] * 1e3:.1f} mm (tool contact excluded on passes)")
        click.echo("wrote " + ", ".join(written))


@click.command("parts")
@json_option
def parts(as_json: bool) -> None:
    """List the built-in parts (usable by name wherever a CAD file is accepted)."""
    from robot_grinding_sim.core.geometry.parts import list_parts

    rows = list_parts()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        mark = " (default)" if r["default"] else ""
        click.echo(f"{r['name']:<18s} {r['description']}{mark}")
