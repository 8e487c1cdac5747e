"""The built package installs launch/, urdf/, config/ and parts into share/robot_grinding_sim.

Builds a wheel from the working tree (what colcon and pip install from) and reads it back with
zipfile, so the check covers setup.py's data_files, package.xml and the console scripts.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = out.glob("robot_grinding_sim-*.whl")
    return zipfile.ZipFile(whl)


def _share(zf: zipfile.ZipFile) -> set[str]:
    marker = ".data/data/share/robot_grinding_sim/"
    return {n.split(marker, 1)[1] for n in zf.namelist() if marker in n}


def test_share_holds_launch_urdf_config(wheel: zipfile.ZipFile) -> None:
    share = _share(wheel)
    for folder in ("launch", "urdf", "config"):
        mine = sorted(p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*") if p.is_file())
        assert mine, f"{folder}/ is empty in the repository"
        missing = [p for p in mine if p not in share and not p.endswith((".pyc",))]
        assert not missing, f"not installed into share/robot_grinding_sim: {missing}"
    assert "package.xml" in share


def test_ament_index_marker(wheel: zipfile.ZipFile) -> None:
    assert any(
        n.endswith(".data/data/share/ament_index/resource_index/packages/robot_grinding_sim")
        for n in wheel.namelist()
    )


def test_console_scripts(wheel: zipfile.ZipFile) -> None:
    (ep,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    cfg = configparser.ConfigParser()
    cfg.read_string(wheel.read(ep).decode())
    scripts = dict(cfg["console_scripts"])
    assert scripts["grinding"] == "robot_grinding_sim.cli:main"
    # every node the graph description starts (bringup.graph, both modes) is a ros2 run executable
    from robot_grinding_sim import bringup

    nodes = {s.executable for mode in ("sim", "real") for s in bringup.graph(mode, record="bag")
             if s.package == bringup.PACKAGE}
    assert {"dynamics_node", "collision_node", "contact_solver_node", "planner_node", "recorder",
            "grinding_executive", "hardware_driver", "description_publisher"} <= nodes
    for node in nodes:
        assert scripts[node] == f"robot_grinding_sim.nodes.{node}:main"


def test_package_xml_format3_lists_python_and_ros_deps() -> None:
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "robot_grinding_sim"
    assert root.find("export/build_type").text == "ament_python"
    deps = {e.text for e in root if e.tag.endswith("depend")}
    for dep in ("rclpy", "sensor_msgs", "geometry_msgs", "trajectory_msgs", "std_srvs", "python3-numpy"):
        assert dep in deps, dep


#: rosdep keys of package.xml as resolved by ros/rosdistro 8468e88 (2026-08): the python.yaml keys
#: and the Kilted release packages, copied from those files (not from package.xml). A key added to
#: package.xml must be checked there and added here, or defined in resource/rosdep.yaml.
ROSDISTRO_KEYS = {
    # rosdep/python.yaml
    "python3-numpy", "python3-scipy", "python3-numba", "python3-yaml", "python3-click", "python3-rich",
    "python3-matplotlib", "python3-lxml", "python3-trimesh-pip", "python-fcl-pip", "python3-yourdfpy-pip",
    "python3-rosbags-pip", "python3-pytest", "python3-mujoco-pip", "python3-pybullet-pip", "python3-ruff-pip",
    # kilted/distribution.yaml
    "rclpy", "builtin_interfaces", "rosgraph_msgs", "std_msgs", "std_srvs", "geometry_msgs", "sensor_msgs",
    "trajectory_msgs", "visualization_msgs", "nav_msgs", "diagnostic_msgs", "rcl_interfaces", "launch",
    "launch_ros", "robot_state_publisher", "rviz2", "ros2bag", "rosbag2_storage_mcap", "ament_copyright",
    "ament_flake8", "ament_pep257", "pinocchio", "coal", "tf2_msgs",
}
#: pip distribution (setup.py) -> the rosdep key that installs it
PIP_TO_KEY = {
    "numpy": "python3-numpy", "scipy": "python3-scipy", "numba": "python3-numba", "pyyaml": "python3-yaml",
    "click": "python3-click", "rich": "python3-rich", "matplotlib": "python3-matplotlib", "lxml": "python3-lxml",
    "yourdfpy": "python3-yourdfpy-pip", "trimesh": "python3-trimesh-pip", "python-fcl": "python-fcl-pip",
    "rosbags": "python3-rosbags-pip", "mcap": "python3-mcap-pip", "cadquery-ocp-novtk": "python3-cadquery-ocp-pip",
}


def test_every_package_xml_key_resolves_with_rosdep() -> None:
    import yaml

    root = ET.parse(REPO / "package.xml").getroot()
    keys = [e.text for e in root if e.tag.endswith("depend")]
    custom = yaml.safe_load((REPO / "resource" / "rosdep.yaml").read_text())
    for key, rule in custom.items():
        for os_name in ("debian", "ubuntu"):
            assert rule[os_name]["pip"]["packages"], f"resource/rosdep.yaml: {key} has no pip package for {os_name}"
    unresolved = [k for k in keys if k not in ROSDISTRO_KEYS and k not in custom]
    assert not unresolved, f"package.xml keys rosdep cannot resolve: {unresolved}"
    assert not root.findall("buildtool_depend"), "ament_python is a build type, not a rosdep key"


def test_every_install_requirement_is_in_package_xml() -> None:
    import re

    setup_py = (REPO / "setup.py").read_text()
    block = setup_py.split("install_requires=[", 1)[1].split("]", 1)[0]
    names = [re.match(r"[A-Za-z0-9_.-]+", s.strip().strip('"')).group(0).lower()
             for s in block.split(",") if s.strip().strip('"')]
    keys = {e.text for e in ET.parse(REPO / "package.xml").getroot() if e.tag.endswith("depend")}
    missing = {n: PIP_TO_KEY.get(n) for n in names if PIP_TO_KEY.get(n) not in keys}
    assert not missing, f"setup.py install_requires without a package.xml key: {missing}"


def test_early_signal_handling_knows_every_node_executable() -> None:
    """robot_grinding_sim.ros.early_signals installs its handlers in exactly setup.py's node processes."""
    import ast

    from robot_grinding_sim.ros.early_signals import EXECUTABLES, is_node_process

    setup_src = (REPO / "setup.py").read_text()
    nodes = ast.literal_eval(setup_src.split("NODES = ", 1)[1].split("]", 1)[0] + "]")
    assert set(nodes) == EXECUTABLES
    assert is_node_process(["/opt/ros/lib/robot_grinding_sim/recorder", "--ros-args"])
    assert is_node_process(["-c", "--ros-args", "-r", "__node:=x"])
    assert not is_node_process(["/usr/bin/pytest", "-q"]) and not is_node_process(["-c"])
