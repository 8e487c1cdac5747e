"""One configuration: every cell parameter defined once (core.config), the nodes' schemas derived
from it, config/*.yaml equal to the in-process defaults, ``grinding check-config`` without ROS."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
import yaml

from robot_grinding_sim.core import config
from robot_grinding_sim.core.config import CellConfig, cell_specs, config_from_mapping
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.parameters import flatten_ros_parameters, load_params_file
from robot_grinding_sim.ros.schemas import NODE_GROUPS, node_specs, own_specs

REPO = Path(__file__).resolve().parents[2]
GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))


def _yaml_values(path: Path) -> dict:
    """A parameter file's /** values, read with plain yaml (not our loader)."""
    doc = yaml.safe_load(path.read_text())
    return flatten_ros_parameters(doc["/**"]["ros__parameters"])


def test_cell_yaml_equals_the_in_process_defaults() -> None:
    values = _yaml_values(REPO / "config" / "cell.yaml")
    assert values == CellConfig().values()
    assert config_from_mapping(values) == CellConfig()


@pytest.mark.parametrize("node", list(NODE_GROUPS))
def test_node_yaml_holds_the_node_defaults_and_no_cell_parameter(node: str) -> None:
    values = _yaml_values(REPO / "config" / f"{node}.yaml")
    assert values == {s.name: s.default for s in own_specs(node)}
    assert not set(values) & {s.name for s in cell_specs()}, "cell parameters belong in config/cell.yaml"


def test_config_files_are_what_the_definitions_write(tmp_path: Path) -> None:
    """The committed files are generated from the definitions (descriptions and units included)."""
    out = subprocess.run([GRINDING, "check-config", "--write-defaults", str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for f in sorted(tmp_path.iterdir()):
        assert f.read_text() == (REPO / "config" / f.name).read_text(), f"config/{f.name} differs: regenerate it"


def test_node_schemas_take_the_cell_parameters_from_their_one_definition() -> None:
    cell = {s.name: s for s in cell_specs()}
    for node, groups in NODE_GROUPS.items():
        specs = node_specs(node)
        names = [s.name for s in specs]
        assert len(names) == len(set(names)), f"{node}: a parameter declared twice"
        for s in specs:
            if "." in s.name:
                assert s == cell[s.name], f"{node}: {s.name} differs from core.config"
                assert s.name.split(".")[0] in groups
        own = {s.name.split(".")[-1] for s in own_specs(node)}
        for g in groups:  # no node redefines a cell parameter under its own name
            assert not own & {f.name for f in dataclasses.fields(config.GROUPS[g])} - {"frame"}, node


def test_every_parameter_has_a_description_and_physical_ones_a_unit() -> None:
    for s in cell_specs():
        assert len(s.description) > 15, s.name
        if s.param_type == "double" and s.name not in {"contact.cr", "contact.exponent", "contact.force_ratio",
                                                        "servo.damping_ratio", "optimise.tolerance",
                                                        "optimise.goal", "execution.move_velocity_scale",
                                                        "removal.depth_band", "removal.stepover_ripple"}:
            assert "," in s.description, f"{s.name}: no unit in {s.description!r}"


def test_bad_values_name_the_parameter() -> None:
    with pytest.raises(InputError, match=r"parameter 'contact.cr': 1.5 is above the maximum 1.0"):
        CellConfig().replace(**{"contact.cr": 1.5})
    with pytest.raises(InputError, match="unknown parameter 'contact.stifness'"):
        CellConfig().replace(**{"contact.stifness": 1.0})
    with pytest.raises(InputError, match=r"parameter 'sim.dt': 0.005 s is too long for the servo"):
        CellConfig().replace(**{"sim.dt": 0.005})  # w dt = 1 > 0.83
    cfg = CellConfig().replace(**{"sim.dt": 0.005, "servo.bandwidth": 100.0})  # w dt = 0.5: stable
    assert cfg.sim.dt == 0.005 and cfg.servo.kp == 1e4 and cfg.servo.kd == 200.0


def test_params_file_round_trip(tmp_path: Path) -> None:
    cfg = CellConfig().replace(**{"contact.stiffness": 2.5e5, "workpiece.pose": [0.6, 0.1, 0.0, 0.0, 0.0, 0.3]})
    f = tmp_path / "cell.yaml"
    f.write_text(config.cell_yaml(cfg))
    assert config.load_cell_config([str(f)]) == cfg
    assert load_params_file(f)["contact.stiffness"] == 2.5e5


def _check(*files: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run("check-config", *files)


def test_check_config_passes_the_package_files_without_ros() -> None:
    """Every shipped parameter file (config/*.yaml and the overlays config/tools/, config/cells/)."""
    files = sorted(str(p) for p in (REPO / "config").rglob("*.yaml"))
    assert any("/cells/" in f for f in files) and any("/tools/" in f for f in files)
    code = ("import importlib.abc, sys\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.split('.')[0] == 'rclpy' or name.split('.')[0].endswith('_msgs'):\n"
            "            raise ImportError('blocked ROS import: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from robot_grinding_sim.cli import main\n"
            f"sys.exit(main(['check-config', *{files!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": ok (") == len(files)


def test_check_config_names_the_bad_key_and_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**:\n  ros__parameters:\n    contact:\n      stifness: 2.0e5\n      cr: 1.5\n"
                   "dynamics_node:\n  ros__parameters:\n    update_rate: -3.0\n    passes:\n      stepover: 0.003\n"
                   "no_such_node:\n  ros__parameters:\n    a: 1\n")
    out = _check(str(bad), str(REPO / "config" / "cell.yaml"))
    assert out.returncode == 2
    errors = out.stderr.strip().splitlines()
    assert any("/**: contact.stifness: unknown parameter (did you mean contact.stiffness?)" in e for e in errors)
    assert any("/**: contact.cr: 1.5 is above the maximum 1.0" in e for e in errors)
    assert any("dynamics_node: update_rate: -3.0 is below the minimum 1.0" in e for e in errors)
    assert any("dynamics_node: passes.stepover: unknown parameter" in e for e in errors)  # not a dynamics_node one
    assert any("no_such_node: not a node of this package" in e for e in errors)
    assert len(errors) == 5 and all(e.startswith(f"grinding check-config: error: {bad}") for e in errors)
    assert "cell.yaml: ok" in out.stdout
    servo = tmp_path / "servo.yaml"
    servo.write_text("/**:\n  ros__parameters:\n    sim:\n      dt: 0.01\n")
    out = _check(str(servo))
    assert out.returncode == 2 and "too long for the servo" in out.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("/**: [\n")
    out = _check(str(broken))
    assert out.returncode == 2 and "not valid yaml" in out.stderr
