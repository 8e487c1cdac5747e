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
    for node in ("dynamics_node", "collision_node", "contact_solver_node", "planner_node", "recorder"):
        assert scripts[node] == f"robot_grinding_sim.nodes.{node}:main"


def test_package_xml_format3_lists_python_and_ros_deps() -> None:
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "robot_grinding_sim"
    assert root.find("export/build_type").text == "ament_python"
    deps = {e.text for e in root if e.tag.endswith("depend")}
    for dep in ("rclpy", "sensor_msgs", "geometry_msgs", "trajectory_msgs", "std_srvs", "python3-numpy"):
        assert dep in deps, dep
