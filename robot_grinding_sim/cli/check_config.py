"""``grinding check-config``: validate ROS 2 parameter files without ROS, list or write the defaults.

A file's sections (``/**``, ``<node>``, ``/<node>``) are checked against the schemas the nodes
declare (robot_grinding_sim/ros/schemas.py: each node's own parameters and the cell groups it uses,
defined once in robot_grinding_sim/core/config.py): every key must be a known parameter (a ``/**``
section may hold any node's), every value of the right type, in range, one of the choices. All
problems of all files are reported, one line each naming the file, section and parameter; exit
code 2 if there is any.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import emit_json, json_option
from robot_grinding_sim.core.errors import InputError


def check_file(path: str) -> tuple[int, list[str]]:
    """(parameters checked, problems) of one parameter file."""
    import yaml

    from robot_grinding_sim.core.config import config_from_mapping
    from robot_grinding_sim.core.parameters import ParameterError, flatten_ros_parameters, validate_value, yaml_load
    from robot_grinding_sim.ros.schemas import NODE_GROUPS, node_specs

    try:
        doc = yaml_load(Path(path).read_text())
    except FileNotFoundError:
        return 0, [f"{path}: no such file"]
    except (OSError, UnicodeDecodeError) as exc:
        return 0, [f"{path}: cannot read ({exc})"]
    except yaml.YAMLError as exc:
        return 0, [f"{path}: not valid yaml: {str(exc).splitlines()[0]}"]
    if not isinstance(doc, dict) or not doc:
        return 0, [f"{path}: expected sections like '/**: ros__parameters: ...' at the top level"]
    schemas = {n: {s.name: s for s in node_specs(n)} for n in NODE_GROUPS}
    every = {name: spec for specs in schemas.values() for name, spec in specs.items()}
    problems, count = [], 0
    for section, body in doc.items():
        where = f"{path}: {section}"
        node = str(section).lstrip("/")
        if section in ("/**", "**"):
            known = every
        elif node in schemas:
            known = schemas[node]
        else:
            problems.append(f"{where}: not a node of this package ({', '.join(NODE_GROUPS)}) nor '/**'")
            continue
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            problems.append(f"{where}: expected 'ros__parameters:' under the section")
            continue
        values = flatten_ros_parameters(body["ros__parameters"])
        for name, value in values.items():
            count += 1
            spec = known.get(name)
            if spec is None:
                close = difflib.get_close_matches(name, list(known), n=1)
                problems.append(f"{where}: {name}: unknown parameter" + (f" (did you mean {close[0]}?)" if close
                                                                          else ""))
                continue
            try:
                validate_value(spec, value)
            except ParameterError as exc:
                problems.append(f"{where}: {name}: {exc.problem}")
        cell = {k: v for k, v in values.items() if "." in k and k in every}
        if cell and not any(p.startswith(where) for p in problems):
            try:  # the rules between parameters (e.g. the servo's stability at the step)
                cfg = config_from_mapping(cell)
                if "robot.home" in cell:  # against the robot it is for, as dynamics_node checks it
                    from robot_grinding_sim.core.job.setup import cell_robot_model

                    cell_robot_model(cfg)
            except InputError as exc:
                problems.append(f"{where}: {exc}")
    return count, problems


def default_files() -> dict[str, str]:
    """File name -> text of the package's parameter files with every default (config/)."""
    from robot_grinding_sim.core.config import cell_yaml
    from robot_grinding_sim.ros.schemas import NODE_GROUPS, node_yaml

    header = ("The grinding cell: every physical and process parameter, defined once in\n"
              "robot_grinding_sim/core/config.py (units there and in each comment). Every\n"
              "node loads this file before its own config/<node>.yaml; `grinding simulate\n"
              "--params FILE` reads the same format. Check a file: `grinding check-config`.")
    out = {"cell.yaml": cell_yaml(header=header)}
    for node in NODE_GROUPS:
        out[f"{node}.yaml"] = node_yaml(node)
    return out


@click.command("check-config")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--list", "list_all", is_flag=True, help="List every cell and node parameter with its default.")
@click.option("--write-defaults", type=click.Path(file_okay=False), default=None,
              help="Write cell.yaml and <node>.yaml with every default into this directory.")
@json_option
def check_config(files: tuple[str, ...], list_all: bool, write_defaults: str | None, as_json: bool) -> None:
    """Validate ROS 2 parameter FILES (e.g. config/*.yaml, a calibration) against the nodes' schemas."""
    from robot_grinding_sim.ros.schemas import NODE_GROUPS, node_specs

    if list_all:
        rows: dict[str, Any] = {}
        for node in NODE_GROUPS:
            for s in node_specs(node):
                rows.setdefault(s.name, {"name": s.name, "default": s.default, "description": s.description,
                                         "type": s.param_type, "nodes": []})["nodes"].append(node)
        if as_json:
            emit_json(list(rows.values()))
        else:
            for r in rows.values():
                click.echo(f"{r['name']:<32} {r['default']!s:<24} {r['description']} ({', '.join(r['nodes'])})")
        return
    if write_defaults:
        from robot_grinding_sim.core.outfiles import write_files

        folder = Path(write_defaults)
        if not folder.is_dir():
            raise InputError(f"--write-defaults {folder}: not a directory")
        write_files({folder / name: text for name, text in default_files().items()})  # all or none
        click.echo(f"wrote {', '.join(default_files())} into {folder}")
        return
    if not files:
        raise click.UsageError("name the parameter files to check (or --list, --write-defaults DIR)")
    report, problems = [], []
    for f in files:
        n, errs = check_file(f)
        report.append({"file": f, "parameters": n, "problems": errs})
        problems += errs
    if as_json:
        emit_json(report)
    else:
        for r in report:
            if not r["problems"]:
                click.echo(f"{r['file']}: ok ({r['parameters']} parameters)")
    for p in problems:
        click.echo(f"grinding check-config: error: {p}", err=True)
    if problems:
        click.get_current_context().exit(2)
