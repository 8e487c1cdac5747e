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
# pytest-xdist's workers (``-n N``) inherit the run's domain: each takes the next one of its own, so
# the graphs of two workers' tests never see each other (valid ids are 0..101)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and _WORKER[2:].isdigit():
    os.environ["ROS_DOMAIN_ID"] = str((int(os.environ["ROS_DOMAIN_ID"]) + int(_WORKER[2:])) % 102)
os.environ.setdefault("MPLBACKEND", "Agg")


#: test folders whose every test is ``slow``: real node processes, whole jobs
SLOW_DIRS = (REPO / "test" / "ros", REPO / "test" / "integration")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers (README): ``-m "not slow"`` is the quick tier for development (unit tests that take
    under a few seconds each); test/ros and test/integration are slow as a whole, and a unit test
    that runs the CLI in subprocesses or a whole job is marked ``slow`` where it is defined."""
    for item in items:
        if any(d in Path(str(item.fspath)).parents for d in SLOW_DIRS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


#: OpenCascade's process-global exchange settings some tests change to write files in a chosen unit
OCC_GLOBALS = ("xstep.cascade.unit", "write.step.unit")


@pytest.fixture(autouse=True)
def _occ_exchange_settings_restored():
    """A test that changes OpenCascade's global unit settings must not change the next test's files:
    the settings are put back after each test (a test writing in metres once made every later STEP
    written in the same process 1000 x too large)."""
    try:
        from OCP.Interface import Interface_Static
        from OCP.STEPControl import STEPControl_Controller
    except ImportError:
        yield
        return

    STEPControl_Controller.Init_s()  # declares the settings (unset, they read as "")
    before = {name: Interface_Static.CVal_s(name) for name in OCC_GLOBALS}
    yield
    for name, value in before.items():
        if value:
            Interface_Static.SetCVal_s(name, value)
