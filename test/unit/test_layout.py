"""The package's layout rules, checked on the source (ast): a test that fails when one is broken.

- core/ imports nothing from the package outside core (nor ROS: test_core_is_ros_free.py);
- no module uses another module's private (leading-underscore) name: not by import, not as an
  attribute of an imported module, not through ``getattr(x, "_name")``;
- every package under core/ opens with a docstring saying what it owns;
- a module over 650 lines is listed below with the reason it stays whole.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "robot_grinding_sim"
MAX_LINES = 650
#: modules allowed above MAX_LINES, with the reason (path relative to the package)
LONG_MODULES: dict[str, str] = {}
#: getattr(obj, "_name") allowed, with the reason: (module path, name) -> reason
FOREIGN_PRIVATE: dict[tuple[str, str], str] = {
    ("ros/parameters.py", "_parameter_overrides"): "rclpy's Node keeps the --ros-args overrides there and "
    "has no public accessor (Kilted); read-only, with a default",
}
FILES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imported(tree: ast.AST, here: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import; ``name`` None for ``import module``."""
    out = []
    package = here if here.endswith("__init__") else here.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            out += [(node.lineno, module, a.name) for a in node.names]
    return out


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module_name(path)
    bad = []
    own_modules: dict[str, str] = {}  # local name -> package module it refers to
    for line, module, name in _imported(tree, here):
        if not module.startswith("robot_grinding_sim"):
            continue
        if here.startswith("robot_grinding_sim.core") and not module.startswith("robot_grinding_sim.core"):
            bad.append(f"line {line}: core imports {module} (outside core)")
        if name is not None and name.startswith("_") and not name.startswith("__"):
            bad.append(f"line {line}: imports the private name {name} from {module}")
        if name is not None:
            own_modules[name] = f"{module}.{name}"
        else:
            own_modules[module.split(".")[-1]] = module
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in own_modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"line {node.lineno}: uses the private name {node.value.id}.{node.attr}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and node.args[1].value.startswith("_")
                and not node.args[1].value.startswith("__")
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
                and (str(path.relative_to(PKG)), node.args[1].value) not in FOREIGN_PRIVATE):
            bad.append(f"line {node.lineno}: reaches a private name through {node.func.id}(..., "
                       f"{node.args[1].value!r})")
    return bad


def test_the_checker_finds_violations(tmp_path: Path) -> None:
    fake = PKG / "core" / "geometry" / "_layout_probe.py"
    src = ("from robot_grinding_sim.core.geometry import cad\n"
           "from robot_grinding_sim.core.geometry.cad import _private\n"
           "from robot_grinding_sim.ros import conversions\n"
           "x = cad._hidden\n"
           "y = getattr(cad, '_kernel', None)\n")
    fake.write_text(src)
    try:
        found = _violations(fake)
    finally:
        fake.unlink()
    assert len(found) == 4, found
    assert any("outside core" in f for f in found) and any("_private" in f for f in found)
    assert any("cad._hidden" in f for f in found) and any("'_kernel'" in f for f in found)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_names_across_modules_and_core_stays_in_core(path: Path) -> None:
    bad = _violations(path)
    assert not bad, f"{path.relative_to(PKG)}: " + "; ".join(bad)


def test_core_packages_say_what_they_own() -> None:
    inits = sorted((PKG / "core").rglob("__init__.py"))
    assert len(inits) >= 7  # core and its domain packages
    missing = [str(p.relative_to(PKG)) for p in inits
               if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not missing, f"package docstring missing: {missing}"
    for domain in ("robot", "contact", "geometry", "planning", "job", "record"):
        assert (PKG / "core" / domain / "__init__.py").is_file(), domain


def test_long_modules_have_a_reason() -> None:
    long = {str(p.relative_to(PKG)): len(p.read_text().splitlines()) for p in FILES}
    over = {k: n for k, n in long.items() if n > MAX_LINES and k not in LONG_MODULES}
    assert not over, f"modules over {MAX_LINES} lines without a reason in LONG_MODULES: {over}"
    stale = [k for k in LONG_MODULES if long.get(k, 0) <= MAX_LINES]
    assert not stale, f"LONG_MODULES lists modules that are short now (or gone): {stale}"
