"""``grinding plan`` (grinding passes on a CAD face, plan.json / CSV / plot) and ``grinding parts``."""

from __future__ import annotations

import io
import json
import math
import sys
from typing import Any

import click

from robot_grinding_sim.cli.cell_options import build_cell, common_cell_options
from robot_grinding_sim.cli.common import FINITE, emit_json, json_option, workers_options
from robot_grinding_sim.core.config import GENERATORS
from robot_grinding_sim.core.outfiles import check_output, write_files


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
    cov = getattr(plan, "coverage", None)
    if cov is not None and len(cov.uncovered):
        ax.scatter(*np.asarray(cov.uncovered).T, s=4, color="tab:red", label="uncovered")
        ax.legend(loc="upper right")
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
    title = f"{plan.source} face {plan.faces}: {s['passes']} passes, {s['waypoints']} waypoints"
    if cov is not None:
        title += f"\ncoverage {cov.coverage * 100:.2f} %, worst gap {cov.worst_gap * 1e3:.2f} mm"
    ax.set_title(title)
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)


def _robot_plan(cell: Any, part: Any, faces: list[int] | None, optimise: bool | None,
                max_passes: int | None, pass_length: float | None, place: str | None, on_stage: Any,
                progress: Any, pool: Any = None) -> Any:
    """The plan with its job trajectory (``plan_job``). When the workpiece pose is searched
    (``--place auto``) the passes are planned first, the pose chosen, and the job then made on that
    plan (``plan_job`` on it)."""
    import dataclasses

    import numpy as np

    from robot_grinding_sim.core.job import step_ahead
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.setup import cell_robot_model, job_tool
    from robot_grinding_sim.core.planning import placement, planner

    if optimise if optimise is not None else cell.optimise.enabled:
        step_ahead.start()  # the optimisation simulates: the step compiles on the other core meanwhile
    if place is None:
        return _suggest_on_failure(lambda: plan_job(cell, optimise, max_passes, pass_length, on_stage=on_stage,
                                                    progress=progress, pool=pool), cell, part, faces)
    if on_stage:
        on_stage("planning passes")
    model = cell_robot_model(cell)
    tool = job_tool(model, cell)
    if cell.removal.target_depth > 0:  # the passes at the depth plan's stepover (the job then plans it again)
        from robot_grinding_sim.core.job.setup import depth_cell

        cell = depth_cell(cell, tool)[0]
    passes = planner.plan(part, faces, cell.passes.validate(), planner.tool_parameters(cell, tool), robot=None,
                          workpiece_pose=np.asarray(cell.workpiece.pose, dtype=float), on_stage=on_stage)
    if max_passes is not None or pass_length is not None:
        passes = planner.crop_plan(passes, part, max_passes, pass_length)
    found = None
    if place == "auto":
        if on_stage:
            on_stage("searching the workpiece pose")
        found = placement.search_pose(passes, model, cell)
        passes.workpiece_pose = planner.pose_matrix(found.pose)
        cell = dataclasses.replace(cell, workpiece=dataclasses.replace(cell.workpiece, pose=tuple(found.pose)))
    # the job on the placed passes (a copy: the passes stay as planned for the hint on a failure), on the
    # part they were planned on; the collision check reuses the mesh they were planned on
    job = dataclasses.replace(passes)
    result = _suggest_on_failure(lambda: plan_job(cell, optimise, on_stage=on_stage, progress=progress,
                                                  passes=job, part=part, mesh=passes.mesh, pool=pool),
                                 cell, part, faces, passes)
    if found is not None:
        result.placement = found.as_dict()
    return result


def _suggest_on_failure(job: Any, cell: Any, part: Any, faces: list[int] | None, passes: Any = None) -> Any:
    """Run ``job``; an unreachable or untimeable plan is re-raised with a workpiece pose that works."""
    from robot_grinding_sim.core.errors import PlanningError
    from robot_grinding_sim.core.planning import placement

    try:
        return job()
    except PlanningError as exc:
        hint = placement.suggestion(exc, passes, part, faces, cell)
        if hint:
            raise PlanningError(f"{exc}; {hint}") from None
        raise


def _coverage_line(report: Any) -> str:
    """The coverage of what the tool can reach, then (second line) of the whole selected faces with
    the area left out, by reason."""
    dropped = (report.tool_reach or {}).get("dropped_waypoints")
    line = (f"coverage {report.coverage * 100:.2f} % of the {report.area * 1e6:.0f} mm^2 the tool can reach (facing "
            f"the approach, inside the margin; within {report.as_dict()['radius_stepovers']:g} stepover of a pass), "
            f"uncovered {report.uncovered_area * 1e6:.1f} mm^2, worst gap {report.worst_gap * 1e3:.2f} mm")
    if report.face_area is None:
        return line
    arm = report.arm_unreachable_area
    arm_text = "not checked (no robot)" if arm is None else f"{arm * 1e6:.0f} mm^2"
    return (line + f"\n  {report.coverage_of_face * 100:.2f} % of the selected faces "
            f"({report.face_area * 1e6:.0f} mm^2); left out: {report.away_area * 1e6:.0f} mm^2 faces away from "
            f"the approach, {report.margin_area * 1e6:.0f} mm^2 within the margin, "
            f"{report.unreachable_area * 1e6:.0f} mm^2 the ball cannot touch without cutting into the part"
            + (f" ({dropped} waypoints left out)" if dropped else "")
            + f", the arm cannot reach: {arm_text}")


@click.command("plan")
@click.argument("source", required=False, default=None)
@click.option("--spacing", type=FINITE, default=None, callback=_positive("--spacing"),
              help="Waypoint spacing along a pass (arc length), m. [passes.spacing; cell default: 0.002]")
@click.option("--angle", type=FINITE, default=None, help="Raster angle about the face normal, deg. [passes.angle]")
@click.option("--margin", type=FINITE, default=None,
              help="Keep waypoints this far from the face boundary and holes, m. [passes.margin; cell default: 0.005]")
@click.option("--tool-radius", type=FINITE, default=None, callback=_positive("--tool-radius"),
              help="Radius of the spherical tool, m, without a robot (with one: its URDF's ball). [default: 0.02]")
@click.option("--generator", type=click.Choice(list(GENERATORS)), default=None,
              help="geodesic: level curves of the geodesic distance from a guide section, even stepover on any "
                   "face (whole cylinders, spheres, wrapped freeform faces); raster: plane slicing of a height "
                   "field; iso: iso-parametric curves. [passes.generator; cell default: geodesic]")
@click.option("--iso-direction", type=click.Choice(["u", "v"]), default=None, help="Iso passes run along u or v.")
@click.option("--order", type=click.Choice(["zigzag", "oneway"]), default=None, help="Pass order. [zigzag]")
@click.option("--reverse", is_flag=True, default=None, help="Travel the first pass in the opposite direction.")
@click.option("--approach-direction", default=None,
              help="The way the tool comes to the faces (part frame): auto, up, 'x y z', or per face "
                   "'FACE:DIRECTION;...'; passes are made where the outward normal faces it. "
                   "[passes.approach_direction; cell default: auto]")
@click.option("--lead", type=FINITE, default=None, help="Tool lead angle, deg. [process.lead]")
@click.option("--tilt", type=FINITE, default=None, help="Tool tilt angle, deg. [process.tilt]")
@click.option("--robot", default="default", show_default=True,
              help="URDF of the robot for the job trajectory, 'default' (UR10e + ball tool), or 'none' (passes only).")
@click.option("--optimise/--no-optimise", default=None,
              help="With a robot: the force-target optimisation by simulation, and the predicted force per pass "
                   "[default: optimise.enabled, on].")
@click.option("--max-passes", type=int, default=None, help="Keep only the first N passes.")
@click.option("--pass-length", type=FINITE, default=None, help="Keep only the middle L m of each pass.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Write plan.json here.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the waypoints as CSV.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Write a PNG plot.")
@click.option("--place", type=click.Choice(["auto"]), default=None,
              help="auto: search the workpiece pose (position and yaw on the table in front of the robot, nearest "
                   "to the configured one first) where every waypoint is reachable and the job collision-free "
                   "with margin; the pose chosen is printed and written to plan.json (placement).")
@click.option("--list-faces", is_flag=True, help="List the faces (index, type, area) and exit.")
@workers_options
@common_cell_options
@json_option
def plan(source: str | None, spacing: float | None, angle: float | None, margin: float | None,
         tool_radius: float | None, generator: str | None, iso_direction: str | None, order: str | None,
         reverse: bool | None, approach_direction: str | None, lead: float | None, tilt: float | None, robot: str,
         optimise: bool | None,
         max_passes: int | None, pass_length: float | None, out_path: str | None, csv_path: str | None,
         plot_path: str | None, place: str | None, list_faces: bool, workers: int | None, address: str | None,
         as_json: bool, **options: Any) -> None:
    """Plan grinding passes on SOURCE: a STEP/IGES/BREP/STL/PLY/OBJ file or a built-in part
    (see `grinding parts`; default: the cell's part, curved_panel). Positions are metres in the part
    frame. With a robot (the default UR10e), plan.json also holds the job trajectory (approach,
    engagement, dwell, passes, retreats, links) and, with the optimisation, the per-pass commanded
    offsets and the predicted mean force: `grinding simulate --plan` and a cell run it unchanged."""
    import math as _math

    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.job.setup import JobConfig
    from robot_grinding_sim.core.planning import plan_io, planner

    extra: dict[str, Any] = {}
    for name, value in (("passes.spacing", spacing), ("passes.iso_direction", iso_direction),
                        ("passes.generator", generator),
                        ("passes.order", order), ("passes.reverse", reverse),
                        ("passes.approach_direction", approach_direction)):
        if value is not None:
            extra[name] = value
    if angle is not None:
        extra["passes.angle"] = _math.radians(angle)
    if margin is not None:
        if not _math.isfinite(margin) or margin < 0:
            raise click.BadParameter(f"must be >= 0, got {margin}", param_hint="--margin")
        extra["passes.margin"] = margin
    for name, value in (("process.lead", lead), ("process.tilt", tilt)):
        if value is not None:
            extra[name] = _math.radians(value)
    if source is not None:
        extra["workpiece.part"] = source
    if robot.lower() not in ("none", "default"):
        extra["robot.description_file"] = robot
    cell = build_cell(options, None, extra)
    JobConfig(cell=cell, max_passes=max_passes, pass_length=pass_length).validate()  # before any work
    if robot.lower() != "none":
        from robot_grinding_sim.core.job.setup import cell_robot_model

        cell_robot_model(cell)  # what the job needs of the robot (tool, frames, meshes, home), before any work
    if not list_faces:
        if out_path is None:
            raise click.UsageError("--out plan.json is required (or --list-faces)")
        for flag, path in (("--out", out_path), ("--csv", csv_path), ("--plot", plot_path)):
            if path is not None:
                check_output(path, flag)  # a read-only folder is refused before minutes of planning
    wp = cell.workpiece
    part = parts.load_part(wp.part, wp.unit or None)
    if list_faces:
        # index, type and area only: the faces' exact bounds (part.list_faces) cost most of the time on
        # large assemblies and are not shown
        rows = [{"index": f.index, "type": f.type, "area": f.area} for f in part.faces]
        if as_json:
            emit_json(rows)
        else:
            for r in rows:
                click.echo(f"{r['index']:4d}  {r['type']:<11s} {r['area'] * 1e6:12.1f} mm^2")
        return
    assert out_path is not None
    faces = None if list(wp.faces) == [-1] else [int(f) for f in wp.faces]
    from robot_grinding_sim.cli.common import stage_progress

    # progress on stderr: on a terminal unless --json; always into a log (stderr not a terminal), so
    # that minutes of work on a large part are not silent; stdout keeps only the report (or JSON)
    show = not as_json or not sys.stderr.isatty()
    if robot.lower() == "none":
        radius = tool_radius or planner.ToolParameters.radius
        depth_plan = None
        if cell.removal.target_depth > 0:  # stepover, feed and force for the depth (no robot: no prediction)
            from robot_grinding_sim.core.job.setup import depth_cell

            cell, depth_plan = depth_cell(cell, radius)
        tool = planner.tool_parameters(cell, radius)
        with stage_progress("planning", enabled=show) as (on_stage, _):
            result = planner.plan(part, faces, cell.passes.validate(), tool, robot=None, workpiece_pose=wp.pose,
                                  on_stage=on_stage)
        if max_passes is not None or pass_length is not None:
            result = planner.crop_plan(result, part, max_passes, pass_length)
        if depth_plan is not None:
            from robot_grinding_sim.core.job.setup import removal_plan_entry

            result.removal_plan = removal_plan_entry(depth_plan, result, cell)
            result.cell = cell.values()
    else:
        # a total where the stage knows one (the optimisation: passes; the final run: simulated
        # seconds): the bar shows a percentage and an ETA, and a new stage starts afresh
        from robot_grinding_sim.core.study.pool_choice import job_pool

        with stage_progress("planning", enabled=show) as (on_stage, on_progress), \
                job_pool(workers, address) as pool:
            result = _robot_plan(cell, part, faces, optimise, max_passes, pass_length, place, on_stage, on_progress,
                                 pool)
    # render everything first: a failure leaves no file behind
    text = json.dumps(plan_io.plan_to_dict(result), separators=(",", ":"), allow_nan=False)
    csv_text = plan_io.plan_csv(result) if csv_path else None
    png = io.BytesIO()
    if plot_path:
        _render_plot(result, png)
    files: dict[str, str | bytes] = {out_path: text}
    if csv_path and csv_text is not None:
        files[csv_path] = csv_text
    if plot_path:
        files[plot_path] = png.getvalue()
    summary = {**result.summary(), "files": [str(p) for p in files], "timings_s": result.timings}
    for key in ("reachability", "collision", "force_target", "placement"):
        if getattr(result, key) is not None:
            summary[key] = getattr(result, key)
    if result.coverage is not None:
        summary["coverage"] = result.coverage.as_dict()
    if result.removal_plan is not None:  # the predicted map stays in plan.json
        rp = dict(result.removal_plan)
        rp["predicted"] = {k: v for k, v in (rp.get("predicted") or {}).items() if k != "map"}
        summary["removal_plan"] = rp
    # the report too is made before anything is written: a failure in it leaves no file behind
    lines = None if as_json else _report_lines(result, summary)
    write_files(files)  # all of them or none
    if lines is None:
        emit_json(summary)
        return
    for line in lines:
        click.echo(line)


def _report_lines(result: Any, summary: dict[str, Any]) -> list[str]:
    """The lines ``grinding plan`` prints (without --json)."""
    out = [f"{summary['passes']} passes ({summary['rows']} rows), {summary['waypoints']} waypoints, "
           f"{summary['pass_length_m']:.3f} m of passes, grinding {summary['grinding_time_s']:.1f} s"]
    if result.coverage is not None:
        out.append(_coverage_line(result.coverage))
    if result.placement is not None:
        from robot_grinding_sim.core.planning.placement import pose_text

        pl = result.placement
        out.append(f"workpiece pose chosen: '{pose_text(pl['pose'])}' (x y z m, roll pitch yaw rad; configured "
                   f"'{pose_text(pl['configured_pose'])}'), {pl['ik_checked']} poses checked by IK, "
                   f"{pl['job_checked']} jobs built")
        near, tool = pl.get("margin_nearest"), pl.get("tool_nearest")
        if near is not None:
            out.append(f"  nearest where the margin {pl['margin_m'] * 1e3:.1f} mm applies: {near['link']} "
                       f"{near['clearance_m'] * 1e3:.2f} mm at {near['where']}"
                       + (f" (the tool's clearance at the link's end: {near['required_m'] * 1e3:.2f} mm allowed)"
                          if near["required_m"] < pl["margin_m"] else ""))
        if tool is not None:
            out.append(f"  the tool on approach, pass and retreat (no margin): {tool['link']} "
                       f"{tool['clearance_m'] * 1e3:.2f} mm at {tool['where']}")
    if result.removal_plan is not None:
        from robot_grinding_sim.core.planning.depth import depth_plan_text

        out += depth_plan_text(result.removal_plan)
    if result.trajectory is not None:
        out.append(f"job trajectory: {len(result.trajectory.times)} knots, {result.trajectory.duration:.1f} s")
    if result.force_target is not None:
        ft = result.force_target
        out.append(f"force target {ft['target_force_n']:g} N: predicted mean per pass "
                   + ", ".join(f"{m:.3f}" for m in ft["predicted_mean_force_n"]) + " N; offsets "
                   + ", ".join(f"{o * 1e6:+.2f}" for o in ft["offsets_m"]) + " um")
    if result.collision is not None:
        out.append(f"no collision: {result.collision['checked_samples']} samples, clearance >= "
                   f"{result.collision['min_clearance_m'] * 1e3:.1f} mm (tool contact excluded on passes)")
    out.append("wrote " + ", ".join(summary["files"]))
    return out


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
