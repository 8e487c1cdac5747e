"""``grinding dynamics``: inverse dynamics, gravity, mass matrix, tool pose and effective mass at a state."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from robot_grinding_sim.cli.common import emit_json, json_option
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.resources import default_urdf


def parse_vector(text: str | None, n: int, option: str) -> np.ndarray:
    """Parse "v1,v2,..." into (n,) floats; None gives zeros. Raises InputError naming the option."""
    if text is None:
        return np.zeros(n)
    try:
        values = np.array([float(v) for v in text.replace(" ", "").split(",") if v != ""])
    except ValueError:
        raise InputError(f"{option} must be {n} comma-separated numbers; got {text!r}") from None
    if values.shape != (n,):
        raise InputError(f"{option} must have {n} values (one per joint); got {values.size}: {text!r}")
    if not np.isfinite(values).all():
        raise InputError(f"{option} holds NaN or inf: {text!r}")
    return values


@click.command("dynamics")
@click.option("--urdf", "urdf_path", type=click.Path(dir_okay=False), default=None,
              help="Robot URDF (default: the package's urdf/ur10e_grinding.urdf).")
@click.option("--tip", default=None,
              help="Tip link of the chain (default: tcp if present, else the deepest).")
@click.option("--package-dir", "package_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Search directory for package:// URIs (repeatable).")
@click.option("--q", "q_text", default=None, help="Joint positions, comma-separated (rad or m; default 0).")
@click.option("--qd", "qd_text", default=None, help="Joint velocities (rad/s or m/s; default 0).")
@click.option("--qdd", "qdd_text", default=None, help="Joint accelerations (rad/s^2 or m/s^2; default 0).")
@json_option
def dynamics(urdf_path: str | None, tip: str | None, package_dirs: tuple[str, ...], q_text: str | None,
             qd_text: str | None, qdd_text: str | None, as_json: bool) -> None:
    """Print the joint torques (RNEA), gravity torques, mass matrix, tip pose and the effective mass
    along the tool axis (the tip frame's z axis, at its origin) at one joint state."""
    from scipy.spatial.transform import Rotation

    from robot_grinding_sim.core.robot.dynamics import RobotModel

    path = Path(urdf_path) if urdf_path else default_urdf()
    model = RobotModel.from_urdf(path, tip_link=tip, package_dirs=package_dirs)
    q = parse_vector(q_text, model.nq, "--q")
    qd = parse_vector(qd_text, model.nq, "--qd")
    qdd = parse_vector(qdd_text, model.nq, "--qdd")
    outside = [n for n, v, lo, hi in zip(model.joint_names, q, model.lower, model.upper, strict=True)
               if not lo <= v <= hi]
    tau = model.rnea(q, qd, qdd)
    grav = model.gravity_torques(q)
    M = model.mass_matrix(q)
    T = model.fk(q, model.tip_link)
    axis = T[:3, 2]
    meff = model.effective_mass(q, model.tip_link, T[:3, 3], axis)
    result = {
        "urdf": str(path),
        "root_link": model.root_link,
        "tip_link": model.tip_link,
        "joint_names": model.joint_names,
        "q": q,
        "qd": qd,
        "qdd": qdd,
        "joints_outside_limits": outside,
        "torques": tau,
        "gravity_torques": grav,
        "mass_matrix": M,
        "tip_pose": {
            "position": T[:3, 3],
            "quaternion_xyzw": Rotation.from_matrix(T[:3, :3]).as_quat(),
            "matrix": T,
        },
        "tool_axis": axis,
        "effective_mass_along_tool_axis": meff,
    }
    if as_json:
        emit_json(result)
        return
    with np.printoptions(precision=4, suppress=True, linewidth=110):
        click.echo(f"robot   {path}  ({model.root_link} -> {model.tip_link}, {model.nq} joints)")
        if outside:
            click.echo(f"warning: joints outside their limits: {', '.join(outside)}")
        width = max(len(n) for n in model.joint_names)
        click.echo(f"{'joint':<{width}}  {'q':>9}  {'qd':>9}  {'qdd':>9}  {'tau [N m]':>11}  {'gravity':>11}")
        for i, name in enumerate(model.joint_names):
            click.echo(f"{name:<{width}}  {q[i]:9.4f}  {qd[i]:9.4f}  {qdd[i]:9.4f}  "
                       f"{tau[i]:11.4f}  {grav[i]:11.4f}")
        click.echo("mass matrix [kg m^2]:")
        click.echo(str(M))
        quat = result["tip_pose"]["quaternion_xyzw"]
        click.echo(f"{model.tip_link} position [m]     {T[:3, 3]}")
        click.echo(f"{model.tip_link} quaternion xyzw  {quat}")
        click.echo(f"effective mass along the tool axis {axis}: {meff:.4f} kg")
