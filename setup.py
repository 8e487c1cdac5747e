"""ament_python / pip build script of robot_grinding_sim.

Installs the Python package, the ``grinding`` command, one ``ros2 run`` executable per node, and
launch/, urdf/, config/ and the built-in parts into ``share/robot_grinding_sim`` (the ament
layout; ``ros2 launch`` and ``package://robot_grinding_sim/...`` URIs resolve there).
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "robot_grinding_sim"
SHARE = os.path.join("share", PACKAGE)


def tree(top: str) -> list[tuple[str, list[str]]]:
    """Data-file entries that install every file under ``top`` into share/, keeping sub-folders."""
    entries = []
    for dirpath, _dirnames, filenames in os.walk(top):
        files = [os.path.join(dirpath, f) for f in sorted(filenames) if not f.startswith(".")]
        if files:
            entries.append((os.path.join(SHARE, dirpath), files))
    return entries


NODES = [
    "dynamics_node",
    "collision_node",
    "contact_solver_node",
    "planner_node",
    "grinding_executive",
    "recorder",
    "description_publisher",
    "hardware_driver",
    "netft_emulator",
]

#: The standard ROS 2 packages the nodes use, as PyPI names without the distribution
#: (``ros-<distro>-<name>``). A colcon workspace gets them from the ROS install instead.
ROS_PACKAGES = [
    "rclpy",
    "rmw-fastrtps-cpp",
    "builtin-interfaces",
    "rosgraph-msgs",
    "std-msgs",
    "std-srvs",
    "geometry-msgs",
    "sensor-msgs",
    "trajectory-msgs",
    "visualization-msgs",
    "nav-msgs",
    "diagnostic-msgs",
]


#: what ``grinding study`` needs beyond the core (the extra ``study``; the tests need it too)
STUDY = ["ray>=2.40", "pyarrow>=14", "pandas>=2.1", "threadpoolctl>=3.1"]


def ros_wheels(distro: str) -> list[str]:
    """The pip path's ROS 2 wheels of one distribution (one distribution per venv)."""
    return [f"ros-{distro}-{name}" for name in ROS_PACKAGES]


setup(
    name=PACKAGE,
    version="0.1.0",
    description="Robotic grinding: CAD pass planning, compliant-contact simulation, F/T comparison",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    package_data={PACKAGE: ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (SHARE, ["package.xml"]),
        (os.path.join(SHARE, "launch"), sorted(glob("launch/*.launch.py"))),
        (os.path.join(SHARE, "config"), sorted(glob("config/*.yaml") + glob("config/*.rviz"))),
        (os.path.join(SHARE, "config", "tools"), sorted(glob("config/tools/*.yaml"))),
        (os.path.join(SHARE, "config", "cells"), sorted(glob("config/cells/*.yaml"))),
        *tree("urdf"),
        *tree("parts"),
    ],
    install_requires=[
        "numpy>=1.26",
        "scipy>=1.11",
        "numba>=0.59",
        "pyyaml>=6",
        "click>=8.1",
        "rich>=13",
        "matplotlib>=3.8",
        "lxml>=4.9",
        "yourdfpy>=0.0.56",
        "trimesh>=4",
        "python-fcl>=0.7",
        "rosbags>=0.10",
        "mcap>=1.1",
        "cadquery-ocp-novtk>=7.7; python_version >= '3.10'",
    ],
    extras_require={
        # the pip path's ROS 2: Kilted (``ros``, the README's commands) or Jazzy (``ros-jazzy``)
        "ros": ros_wheels("kilted"),
        "ros-jazzy": ros_wheels("jazzy"),
        # grinding study (docs/study.md): Ray runs the jobs; the results table is Parquet (pyarrow) via pandas
        "study": STUDY,
        "test": [
            *STUDY,
            "pytest>=8",
            "pytest-xdist>=3",  # the tests without ROS run on both cores (README, docs/testing)
            "ruff>=0.6",
            "setuptools>=68",
            "wheel>=0.41",
            "pin>=3",
            "example-robot-data>=4",
            "mujoco>=3",
            "pybullet>=3.2",
            "coal>=3",
            "mr-sim>=1.0",
            "numpy-stl>=3",  # writes the STL parts of the mesh tests (not the library that reads them)
        ],
        # the peers of bench/bench_peers.py (MuJoCo and Drake on the grinding scene)
        "bench": ["mujoco>=3", "drake>=1.30"],
    },
    zip_safe=True,
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "grinding = robot_grinding_sim.cli:main",
            *[f"{n} = robot_grinding_sim.nodes.{n}:main" for n in NODES],
        ],
    },
)
