"""``grinding calibrate-removal GROOVE.csv``: the Preston coefficient from one measured groove.

The user grinds one straight pass at a known force and feed (the cell's, or ``--force`` /
``--feed``), measures the groove's depth across it (a profilometer trace: offset across the pass,
depth into the part) and gives it here as CSV. The groove the cell's tool predicts per unit k_p
(the depth planner's footprint, :func:`~robot_grinding_sim.core.job.setup.depth_footprint`: the
ball's :class:`~robot_grinding_sim.core.planning.depth.BallFootprint`, Hertz pressure, the spindle
about the normal; the wheel's, pad's or disc's
:class:`~robot_grinding_sim.core.planning.footprints.ToolFootprint`, the Winkler pressure over its
own patch at the cell's lead, tilt and spindle) is fitted to it
(:func:`~robot_grinding_sim.core.planning.depth.fit_preston`):
k_p, its standard error, the groove's centre and the rms residual are printed, and ``--out``
writes ``removal.preston_coefficient`` as a parameter file for ``--params``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.cell_options import build_cell
from robot_grinding_sim.cli.common import FINITE, emit_json, json_option
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.outfiles import atomic_write, check_output

UNITS = {"m": 1.0, "mm": 1e-3, "um": 1e-6}


def read_groove(path: str, offset_unit: str, depth_unit: str) -> tuple[Any, Any]:
    """(offsets m, depths m) of a two-column CSV (a header line allowed); InputError naming the file."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such file")
    rows = []
    for k, line in enumerate(p.read_text().splitlines()):
        cells = [c.strip() for c in line.replace(";", ",").split(",") if c.strip()]
        if not cells:
            continue
        try:
            values = [float(c) for c in cells]
        except ValueError:
            if rows or k > 0:
                raise InputError(f"{path}, line {k + 1}: not two numbers: {line.strip()!r}") from None
            continue  # the header
        if len(values) != 2:
            raise InputError(f"{path}, line {k + 1}: expected offset,depth, got {len(values)} values")
        rows.append(values)
    a = np.array(rows, dtype=float).reshape(-1, 2)
    return a[:, 0] * UNITS[offset_unit], a[:, 1] * UNITS[depth_unit]


@click.command("calibrate-removal")
@click.argument("groove", type=click.Path(dir_okay=False))
@click.option("--force", type=FINITE, default=None, help="Normal force of the measured pass, N. [process.target_force]")
@click.option("--feed", type=FINITE, default=None, help="Feed of the measured pass, m/s. [process.feed]")
@click.option("--offset-unit", type=click.Choice(list(UNITS)), default="m", show_default=True,
              help="Unit of the first column (offset across the pass).")
@click.option("--depth-unit", type=click.Choice(list(UNITS)), default="m", show_default=True,
              help="Unit of the second column (depth into the part).")
@click.option("--tool-radius", type=FINITE, default=None,
              help="A ball of this radius, m, in place of the robot's tool (default: the robot's tool from its URDF "
                   "and tool.*: a ball, wheel, pad or disc).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write removal.preston_coefficient as a parameter file (for --params).")
@click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False),
              help="Cell parameter file (the contact law, spindle speed, pressure); repeatable.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Set a cell parameter.")
@json_option
def calibrate_removal(groove: str, force: float | None, feed: float | None, offset_unit: str, depth_unit: str,
                      tool_radius: float | None, out: str | None, params_files: tuple[str, ...],
                      sets: tuple[str, ...], as_json: bool) -> None:
    """Fit the Preston coefficient k_p to GROOVE (CSV: offset across the pass, depth; one straight
    pass at the cell's force and feed, the spindle turning; the cell's tool: ball, wheel, pad or
    disc) and report it with its error."""
    from robot_grinding_sim.core.job.setup import cell_robot_model, depth_footprint, job_tool
    from robot_grinding_sim.core.planning.depth import fit_preston

    if out is not None:
        check_output(out, "--out")
    cell = build_cell({"params_files": params_files, "sets": sets})
    y, h = read_groove(groove, offset_unit, depth_unit)
    F = cell.process.target_force if force is None else force
    v = cell.process.feed if feed is None else feed
    if tool_radius is not None and not tool_radius > 0:
        raise InputError(f"--tool-radius must be > 0 m, got {tool_radius}")
    tool: Any = float(tool_radius) if tool_radius is not None else job_tool(cell_robot_model(cell), cell)
    shape = "ball" if tool_radius is not None else tool.shape
    # the groove per unit k_p: the footprint the depth planner plans with, at k_p = 1
    unit = depth_footprint(cell, tool, preston_coefficient=1.0)
    fit = fit_preston(y, h, unit, F, v)
    result = {**fit.as_dict(), "groove": groove, "force_n": F, "feed_m_s": v, "tool": shape,
              "tool_radius_m": float(tool_radius if tool_radius is not None else tool.radius),
              "spindle_speed_rad_s": cell.tool.spindle_speed, "previous_m2_per_n": cell.removal.kp}
    if out is not None:
        atomic_write(Path(out), "# grinding calibrate-removal " + groove + f": k_p {fit.preston_coefficient:.4g} m^2/N "
                     f"+- {fit.standard_error:.2g}\n/**:\n  ros__parameters:\n    removal:\n"
                     f"      preston_coefficient: {fit.preston_coefficient:.6g}\n")
        result["out"] = out
    if as_json:
        emit_json(result)
        return
    d = result
    click.echo(f"k_p = {fit.preston_coefficient:.4g} m^2/N +- {fit.standard_error:.2g} ({d['relative_error']:.1%}) "
               f"from {fit.samples} points of the {shape}'s groove; the cell had {cell.removal.kp:.4g}")
    click.echo(f"groove centre at {fit.offset * 1e3:+.3f} mm, deepest {fit.peak_depth * 1e6:.3f} um, rms residual "
               f"{fit.rms_residual * 1e6:.3f} um ({d['rms_residual_of_peak']:.1%} of the deepest)")
    click.echo(f"use it: --set removal.preston_coefficient={fit.preston_coefficient:.4g}"
               + (f" (written to {out}: --params {out})" if out else ""))
