"""The core and hardware layers must stay importable and testable without ROS."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "robot_grinding_sim"
FORBIDDEN_EXACT = {"rclpy", "launch", "launch_ros", "launch_testing", "ament_index_python", "rosbag2_py"}


def _forbidden(name: str) -> bool:
    top = name.split(".")[0]
    return (
        top in FORBIDDEN_EXACT
        or top.startswith("rosidl")
        or top.endswith("_msgs")
        or top.endswith("_srvs")
        or top.endswith("_interfaces")
    )


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module",
            "__import__",
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


#: Python source that makes rclpy, *_msgs, *_srvs and rosidl unimportable in a fresh interpreter
BLOCK_ROS = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split('.')[0]
        if top == 'rclpy' or top.endswith('_msgs') or top.endswith('_srvs') or top.startswith('rosidl'):
            raise ImportError('blocked ROS import: ' + name)
        return None
sys.meta_path.insert(0, Block())
"""

CORE_FILES = sorted((PKG / "core").rglob("*.py")) + sorted((PKG / "hardware").rglob("*.py"))


def test_detector_catches_ros_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import rclpy\nfrom geometry_msgs.msg import Wrench\nfrom std_srvs.srv import Trigger\n")
    assert [n for _, n in _imports(bad) if _forbidden(n)] == ["rclpy", "geometry_msgs.msg", "std_srvs.srv"]


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_ros_import_in_core(path: Path) -> None:
    bad = [f"{path.name}:{line} imports {name}" for line, name in _imports(path) if _forbidden(name)]
    assert not bad, "the core must not import ROS: " + "; ".join(bad)


def test_core_modules_import_without_ros_on_path() -> None:
    """Import every core module in a fresh interpreter where rclpy and *_msgs cannot be found."""
    modules = [
        "robot_grinding_sim." + str(p.relative_to(PKG.parent).with_suffix("")).replace("/", ".").split(".", 1)[1]
        for p in CORE_FILES
        if p.name != "__init__.py"
    ]
    code = BLOCK_ROS + f"""
for m in {modules!r}:
    importlib.import_module(m)
leaked = [m for m in sys.modules if m.split('.')[0] == 'rclpy' or m.split('.')[0].endswith('_msgs')]
assert not leaked, leaked
print('ok', len({modules!r}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


UNIT_TESTS = sorted(Path(__file__).resolve().parent.rglob("*.py"))


@pytest.mark.parametrize("path", UNIT_TESTS, ids=lambda p: p.name)
def test_unit_tests_import_no_ros(path: Path) -> None:
    """Tests that need ROS messages live in test/ros; test/unit runs where rclpy is not installed."""
    bad = [f"{path.name}:{line} imports {name}" for line, name in _imports(path) if _forbidden(name)]
    assert not bad, "move to test/ros: " + "; ".join(bad)


def test_unit_tests_collect_without_ros_on_path() -> None:
    """Collect test/unit in an interpreter where rclpy and *_msgs cannot be found (indirect imports)."""
    unit = Path(__file__).resolve().parent
    code = BLOCK_ROS + f"""
import pytest
sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', {str(unit)!r}]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=str(PKG.parent))
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
