"""Command-line options that set cell parameters (``grinding simulate``, ``demo``, ``plan``).

Every option here is a shortcut for one parameter of :mod:`robot_grinding_sim.core.config`; its
help text and shown default come from that definition. ``--params FILE`` (a ROS 2 parameter yaml,
e.g. config/cell.yaml or what ``grinding calibrate`` writes) and ``--set name=value`` reach every
parameter. Precedence: the base (the defaults, or a plan.json's own cell), then the files in
order, then the options, then ``--set``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE
from robot_grinding_sim.core.config import CellConfig, cell_specs
from robot_grinding_sim.core.errors import InputError

_SPECS = {s.name: s for s in cell_specs()}
#: option destination -> (cell parameter, conversion of the option's value or None)
_OPTIONS: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}


def parse_pose(text: str, what: str = "--workpiece-pose") -> list[float]:
    """'x y z roll pitch yaw' (m, rad; commas allowed) -> 6 floats."""
    try:
        v = [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise InputError(f"{what}: expected 6 numbers 'x y z roll pitch yaw', got {text!r}") from None
    if len(v) != 6:
        raise InputError(f"{what}: expected 6 numbers 'x y z roll pitch yaw', got {len(v)}")
    return v


def _job_depth(text: str) -> float:
    """--target-depth's job depth (removal.target_depth): the number given, or among per-face entries
    'FACE:DEPTH;...' the bare number, else the first face's (the per-face ones go to removal.face_depths)."""
    from robot_grinding_sim.core.config import parse_face_depths

    try:
        depths = parse_face_depths(str(text).replace("removal.face_depths", ""))
    except InputError as exc:
        raise InputError(str(exc).replace("parameter 'removal.face_depths'", "--target-depth")) from None
    if depths[None] > 0:
        return depths[None]
    return next(v for k, v in depths.items() if k is not None)


def _show(v: Any) -> str:
    return " ".join(f"{x:g}" for x in v) if isinstance(v, (list, tuple)) else f"{v:g}" if isinstance(v, float) \
        else str(v)


def cell_option(flag: str, name: str, convert: Callable[[Any], Any] | None = None, **kw: Any) -> Any:
    """A click option for the cell parameter ``name`` (default None: keep the cell's value)."""
    spec = _SPECS[name]
    dest = kw.pop("dest", name.replace(".", "__"))
    kw.setdefault("default", None)
    help_text = kw.pop("help", spec.description[0].upper() + spec.description[1:])
    help_text += f" [{name}; cell default: {_show(spec.default)}]"
    _OPTIONS[dest] = (name, convert)
    return click.option(flag, dest, help=help_text, **kw)


def common_cell_options(f: Any) -> Any:
    """--params/--set and the options every job command has."""
    opts = [
        click.option("--params", "params_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Cell parameter file (ROS 2 yaml, '/**: ros__parameters:'); repeatable, later wins."),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="Set any cell parameter, e.g. --set contact.cr=0.3 (`grinding check-config --list`)."),
        cell_option("--target-force", "process.target_force", type=FINITE),
        cell_option("--stiffness", "contact.stiffness", type=FINITE),
        cell_option("--cr", "contact.cr", type=FINITE),
        cell_option("--model", "contact.model", type=click.Choice(list(_SPECS["contact.model"].choices))),
        cell_option("--dt", "sim.dt", type=FINITE),
        cell_option("--output-dt", "sim.output_dt", type=FINITE),
        cell_option("--force-ratio", "contact.force_ratio", type=FINITE),
        cell_option("--servo-bandwidth", "servo.bandwidth", type=FINITE),
        cell_option("--feed", "process.feed", type=FINITE),
        cell_option("--stepover", "passes.stepover", type=FINITE),
        cell_option("--target-depth", "removal.target_depth", type=str, convert=_job_depth,
                    help="Plan for this removal depth, m: stepover, feed, force and layers chosen so the predicted "
                         "removal over the region is even at it (with --target-force the force is held and the "
                         "feed chosen); per face 'FACE:DEPTH;...' (e.g. '3:5e-6;4:1e-5'; a bare number among "
                         "them is the other faces' depth) [removal.target_depth, removal.face_depths]"),
        cell_option("--unit", "workpiece.unit"),
        cell_option("--workpiece-pose", "workpiece.pose", convert=parse_pose),
        cell_option("--face", "workpiece.faces", multiple=True, type=int, default=(),
                    convert=lambda v: list(v) or None),
        cell_option("--package-dir", "robot.package_dirs", multiple=True, default=(), metavar="NAME=PATH",
                    convert=lambda v: list(v) or None,
                    help="Where the URDF's package://NAME/ URIs resolve: NAME=PATH, or a directory holding "
                         "packages; repeatable"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def parse_sets(sets: Sequence[str]) -> dict[str, Any]:
    """``name=value`` strings -> {name: value}, the value read as YAML (as ``ros2 param set`` does;
    ``1e5`` is a number: :func:`~robot_grinding_sim.core.parameters.yaml_load`)."""
    import yaml

    from robot_grinding_sim.core.parameters import yaml_load

    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise InputError(f"--set {item!r}: expected NAME=VALUE")
        name, text = item.split("=", 1)
        name = name.strip()
        if name not in _SPECS:
            close = [n for n in _SPECS if n.split(".")[-1] == name.split(".")[-1]]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InputError(f"--set {name}: unknown cell parameter{hint}")
        try:
            out[name] = yaml_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"--set {name}: cannot read {text!r} ({exc})") from None
    return out


def explicit_pose(options: Mapping[str, Any]) -> list[float] | None:
    """The workpiece pose given on the command line (``--workpiece-pose``, or ``--set workpiece.pose``,
    the later winning as in :func:`build_cell`), None without one. With a plan this moves its part;
    a ``--params`` file's ``workpiece.pose`` does not (the plan says where its part is)."""
    pose = options.get("workpiece__pose")
    pose = parse_pose(pose) if pose else None
    sets = parse_sets(options.get("sets") or ())
    if "workpiece.pose" in sets:
        pose = [float(v) for v in sets["workpiece.pose"]]
    return pose


def build_cell(options: Mapping[str, Any], base: CellConfig | None = None,
               extra: Mapping[str, Any] | None = None) -> CellConfig:
    """The cell of a command line: ``base`` (default: the package's cell), the ``--params`` files in
    order, the cell options that were given, ``extra`` values, then ``--set``; validated."""
    from robot_grinding_sim.core.config import config_from_mapping
    from robot_grinding_sim.core.parameters import load_params_file

    values = dict((base or CellConfig()).values())
    for path in options.get("params_files") or ():
        loaded = load_params_file(path)
        unknown = sorted(set(loaded) - set(_SPECS))
        if unknown:
            raise InputError(f"--params {path}: unknown cell parameter {unknown[0]!r}")
        values.update(loaded)
    for dest, (name, convert) in _OPTIONS.items():
        v = options.get(dest)
        if v is None or (isinstance(v, tuple) and not v):
            continue
        v = convert(v) if convert else v
        if v is not None:
            values[name] = v
    if options.get("removal__target_depth") is not None and ":" in str(options["removal__target_depth"]):
        values["removal.face_depths"] = str(options["removal__target_depth"])  # per face: FACE:DEPTH;...
    if options.get("process__target_force") is not None and options.get("removal__target_depth") is not None:
        values["removal.hold_force"] = True  # force and depth given together: the feed is what is left
    values.update(extra or {})
    values.update(parse_sets(options.get("sets") or ()))
    return config_from_mapping(values)
