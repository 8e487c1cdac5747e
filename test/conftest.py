"""Shared fixtures. Every test process keeps DDS on loopback with a domain of its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Before anything can import rclpy: loopback discovery and a domain id owned by this test run
# (derived from the pid so parallel runs on one machine do not see each other).
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable
