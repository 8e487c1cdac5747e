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


def _executed_imports(path: Path) -> list[str]:
    """The modules a file imports when it is imported itself: its top-level ``import``/``from``
    statements, including those in top-level ``if``/``try``/``with`` blocks, but not in function
    bodies nor under ``if TYPE_CHECKING`` (never executed)."""
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append(node.module)
                found.extend(f"{node.module}.{a.name}" for a in node.names)  # submodules among the names
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                visit(node.body)

    visit(ast.parse(path.read_text(), filename=str(path)).body)
    return found


def _module_file(name: str, helpers: dict[str, Path]) -> list[Path]:
    """The files Python executes to import ``name`` (a module of the package, with its packages'
    ``__init__``, or a test helper module); [] for anything else."""
    if name in helpers:
        return [helpers[name]]
    parts = name.split(".")
    if parts[0] != PKG.name:
        return []
    files, here = [], PKG.parent
    for i, part in enumerate(parts):
        here = here / part
        if here.is_dir() and (here / "__init__.py").exists():
            files.append(here / "__init__.py")
        elif i == len(parts) - 1 and here.with_suffix(".py").exists():
            files.append(here.with_suffix(".py"))
        else:
            break
    return files


def test_unit_tests_collect_without_ros() -> None:
    """Collecting test/unit imports no ROS module, directly or through anything it imports: the
    closure of the imports executed at import time (the package's modules, the test helpers, the
    conftest files), read from the source. (Collecting test/unit in an interpreter where rclpy cannot
    be found says the same, for a minute of CPU.)"""
    unit = Path(__file__).resolve().parent
    helpers = {p.stem: p for p in [*unit.glob("*.py"), *unit.parent.glob("*.py")] if not p.stem.startswith("test_")}
    roots = [*sorted(unit.glob("test_*.py")), *[p for p in (unit / "conftest.py", unit.parent / "conftest.py")
                                                 if p.exists()]]
    bad = []
    for root in roots:
        seen: set[Path] = set()
        todo: list[tuple[Path, list[str]]] = [(root, [root.name])]
        while todo:
            path, chain = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            for name in _executed_imports(path):
                if _forbidden(name):
                    bad.append(" -> ".join([*chain, name]))
                for f in _module_file(name, helpers):
                    todo.append((f, [*chain, str(f.relative_to(PKG.parent)) if PKG in f.parents else f.name]))
    assert not bad, "unit tests that import ROS when collected (move them to test/ros):\n" + "\n".join(bad)


def test_the_import_closure_sees_an_indirect_ros_import(tmp_path: Path) -> None:
    """The check above follows imports through helper modules and packages."""
    helper = tmp_path / "helper.py"
    helper.write_text("import os\ntry:\n    from sensor_msgs.msg import JointState\nexcept ImportError:\n    pass\n")
    test = tmp_path / "test_x.py"
    test.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rclpy\nimport helper\n"
                    "def f():\n    import rclpy\n")
    assert [n for n in _executed_imports(test) if _forbidden(n)] == []
    assert "helper" in _executed_imports(test)
    assert [n for n in _executed_imports(helper) if _forbidden(n)] == ["sensor_msgs.msg", "sensor_msgs.msg.JointState"]
    assert _module_file("robot_grinding_sim.core.robot.dynamics", {})[-1] == PKG / "core" / "robot" / "dynamics.py"
    assert PKG / "core" / "__init__.py" in _module_file("robot_grinding_sim.core.robot.dynamics", {})
