"""The package's layout rules, checked on the source (ast, no import of the package nor of ROS):
a test that fails when one is broken.

- core/ imports nothing from the package outside core, nor rclpy, launch, rosidl or a ROS
  interface package (``*_msgs``, ``*_srvs``, ``*_interfaces``); test_core_is_ros_free.py also
  imports core with ROS blocked;
- no module uses another module's private (leading-underscore) name: not by import, not as an
  attribute of an imported name of the package (``mod._name``), not through
  ``getattr(x, "_name")`` / ``hasattr`` (on anything but ``self``/``cls``; the exceptions below);
- every package under core/ opens with a docstring saying what it owns;
- a module over 650 lines is listed below with the reason it stays whole.
"""

from __future__ import annotations

import ast
import importlib.util
import math
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
#: top-level modules core must not import (besides the suffix rules in _is_ros)
ROS_MODULES = {"rclpy", "launch", "launch_ros", "launch_testing", "ament_index_python", "rosbag2_py"}
DOMAINS = ("robot", "contact", "geometry", "planning", "sim", "execution", "job", "calibration", "record", "study")
FILES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _is_ros(module: str) -> bool:
    top = module.split(".")[0]
    return (top in ROS_MODULES or top.startswith("rosidl")
            or top.endswith(("_msgs", "_srvs", "_interfaces", "_actions")))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(rel: str) -> str:
    """Dotted module name of a path relative to the package (``core/geometry/cad.py``)."""
    parts = ["robot_grinding_sim", *Path(rel).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, rel: str) -> list[tuple[int, str, str | None, str]]:
    """(line, absolute module, name, local name bound) of every import; ``name`` None for
    ``import module`` (which binds the module's top package unless aliased)."""
    out: list[tuple[int, str, str | None, str]] = []
    here = _module_name(rel)
    package = here if rel.endswith("__init__.py") else here.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None, a.asname or a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            out += [(node.lineno, module, a.name, a.asname or a.name) for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value, None, ""))
    return out


def _violations(source: str, rel: str) -> list[str]:
    """Every broken layout rule of one module: its source and its path relative to the package."""
    tree = ast.parse(source, filename=rel)
    in_core = rel.startswith("core/")
    bad = []
    own: set[str] = set()  # local names bound to a module, class or function of the package
    for line, module, name, bound in _imported(tree, rel):
        if in_core and _is_ros(module):
            bad.append(f"line {line}: core imports {module} (ROS)")
        top = module.split(".")[0]
        if top != "robot_grinding_sim":
            continue
        if in_core and not (module == "robot_grinding_sim.core" or module.startswith("robot_grinding_sim.core.")):
            bad.append(f"line {line}: core imports {module} (outside core)")
        private_parts = [p for p in module.split(".") if _private(p)]
        if private_parts:
            bad.append(f"line {line}: imports the private module {module}")
        if name is not None and _private(name):
            bad.append(f"line {line}: imports the private name {name} from {module}")
        own.add(bound)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in own:
                bad.append(f"line {node.lineno}: uses the private name {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and _private(node.args[1].value)
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
                and (rel, node.args[1].value) not in FOREIGN_PRIVATE):
            bad.append(f"line {node.lineno}: reaches a private name through {node.func.id}(..., "
                       f"{node.args[1].value!r})")
    return bad


def _rel(path: Path) -> str:
    return path.relative_to(PKG).as_posix()


def test_the_checker_finds_violations() -> None:
    src = ("import rclpy\n"
           "from std_msgs.msg import Float64\n"
           "from robot_grinding_sim.core.geometry import cad\n"
           "from robot_grinding_sim.core.geometry.cad import _private\n"
           "from ..robot.dynamics import _kernel as k\n"
           "from robot_grinding_sim.ros import conversions\n"
           "import robot_grinding_sim.core.robot.kernels\n"
           "x = cad._hidden\n"
           "y = robot_grinding_sim.core.robot.kernels._finite\n"
           "z = getattr(cad, '_kernel', None)\n"
           "w = hasattr(cad.CadFace, '_numpy_eval')\n"
           "ok = (cad.CadFace, self._mine, getattr(self, '_own'), other_object._its_own)\n")
    found = _violations(src, "core/geometry/probe.py")
    expected = ["core imports rclpy", "core imports std_msgs.msg", "private name _private",
                "private name _kernel from robot_grinding_sim.core.robot.dynamics",
                "robot_grinding_sim.ros (outside core)", "cad._hidden", "kernels._finite", "'_kernel'",
                "'_numpy_eval'"]
    for e in expected:
        assert sum(e in f for f in found) == 1, (e, found)
    assert len(found) == len(expected), found
    # outside core, ROS and the rest of the package are fine; private names are not
    found = _violations(src, "nodes/probe.py")
    assert not any("ROS" in f or "outside core" in f for f in found), found
    assert len(found) == len(expected) - 3, found


def test_the_checker_passes_clean_code() -> None:
    src = ("from robot_grinding_sim.core.geometry.cad import load_part\n"
           "from . import units\n"
           "import numpy as np\n"
           "x = units.unit_factor('mm')\n"
           "def f(self):\n    return self._cache, getattr(self, '_x', None)\n")
    assert _violations(src, "core/geometry/probe.py") == []


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_no_private_names_across_modules_and_core_stays_in_core(path: Path) -> None:
    bad = _violations(path.read_text(), _rel(path))
    assert not bad, f"{_rel(path)}: " + "; ".join(bad)


def test_core_packages_say_what_they_own() -> None:
    inits = sorted((PKG / "core").rglob("__init__.py"))
    for domain in DOMAINS:
        assert (PKG / "core" / domain / "__init__.py") in inits, domain
    missing = [_rel(p) for p in inits if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not missing, f"package docstring missing: {missing}"


def test_long_modules_have_a_reason() -> None:
    lines = {_rel(p): len(p.read_text().splitlines()) for p in FILES}
    over = {k: n for k, n in lines.items() if n > MAX_LINES and k not in LONG_MODULES}
    assert not over, f"modules over {MAX_LINES} lines without a reason in LONG_MODULES: {over}"
    stale = [k for k in LONG_MODULES if lines.get(k, 0) <= MAX_LINES]
    assert not stale, f"LONG_MODULES lists modules that are short now (or gone): {stale}"
    assert all(reason.strip() for reason in LONG_MODULES.values())


# --------------------------------------------------------------------------------------------------
# the import graph: no cycles, arrows down


#: core's domains, lowest first: a domain imports only the ones before it (and core's own modules)
DOMAIN_ORDER = ("robot", "geometry", "contact", "planning", "record", "sim", "execution", "job", "calibration", "study")
#: core modules above every domain (they import what they compile or run); the rest of core's own
#: modules (config, errors, parameters, ...) are below every domain
CORE_TOP = {"warmup"}
#: the one import allowed to point up: core.config asks the contact laws' registry for the names
#: contact.model accepts (the registry is a table of names and module paths; it loads a law only
#: when one is asked for, inside its functions)
ALLOWED_UP = {("robot_grinding_sim.core.config", "robot_grinding_sim.core.contact.registry")}
#: the package's layers, lowest first: a layer imports only itself and the ones before it
LAYERS = (("core", "hardware"), ("environment", "bringup", "emulated_cell"), ("ros",), ("nodes",), ("cli",))


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or in functions, any form)."""
    names = {_module_name(_rel(p)): p for p in FILES}

    def resolve(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        out = set()
        for _, module, imported, _ in _imported(ast.parse(path.read_text(), filename=str(path)), _rel(path)):
            if not module.startswith("robot_grinding_sim"):
                continue
            target = resolve(f"{module}.{imported}" if imported else module)
            if target:
                out.add(target)
        # a module's own packages (their __init__) come with it: not an import of them
        graph[name] = {t for t in out if t != name and not name.startswith(t + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return next((i for i, layer in enumerate(LAYERS) if part in layer), len(LAYERS))


def _core_rank(module: str) -> float:
    """Where a core module stands: -1 core's own low modules, the domain's place, inf core's top."""
    parts = module.split(".")
    if len(parts) > 3:
        return DOMAIN_ORDER.index(parts[2]) if parts[2] in DOMAIN_ORDER else math.inf
    if len(parts) == 3 and parts[2] in DOMAIN_ORDER:  # a domain's package __init__
        return DOMAIN_ORDER.index(parts[2])
    return math.inf if parts[-1] in CORE_TOP else -1


def _broken_arrows(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in graph.items():
        for b in targets:
            if _layer(b) > _layer(a):
                bad.append(f"{a} -> {b} (a lower layer imports a higher one)")
            if a.startswith("robot_grinding_sim.core.") and b.startswith("robot_grinding_sim.core."):
                ra, rb = _core_rank(a), _core_rank(b)
                same_domain = a.split(".")[2] == b.split(".")[2] and ra >= 0
                if rb > ra and not same_domain and (a, b) not in ALLOWED_UP:
                    bad.append(f"{a} -> {b} (core's domains: {' < '.join(DOMAIN_ORDER)})")
    return bad


def test_the_package_has_no_import_cycles() -> None:
    cycles = _cycles(_import_graph())
    assert not cycles, "modules that import each other (directly or around a loop): " + "; ".join(
        " <-> ".join(m.replace("robot_grinding_sim.", "") for m in c) for c in cycles)


def test_imports_point_down() -> None:
    graph = _import_graph()
    bad = _broken_arrows(graph)
    assert not bad, "\n".join(bad)
    registry = importlib.util.find_spec("robot_grinding_sim.core.contact.registry").origin
    top = [n for n in ast.parse(open(registry).read()).body if isinstance(n, ast.ImportFrom)]
    # the allowed edge stays cheap: at module level the registry imports nothing of the package but errors
    assert {n.module for n in top} <= {"__future__", "typing", "robot_grinding_sim.core.errors"}


def test_the_graph_checks_find_a_cycle_and_an_upward_import() -> None:
    pkg = "robot_grinding_sim"
    graph = {f"{pkg}.core.planning.a": {f"{pkg}.core.planning.b"}, f"{pkg}.core.planning.b": {f"{pkg}.core.planning.a"},
             f"{pkg}.core.robot.x": {f"{pkg}.core.job.run"}, f"{pkg}.ros.schemas": {f"{pkg}.bringup"},
             f"{pkg}.bringup": {f"{pkg}.ros.environment"}, f"{pkg}.core.job.run": {f"{pkg}.core.config"}}
    assert _cycles(graph) == [[f"{pkg}.core.planning.a", f"{pkg}.core.planning.b"]]
    bad = _broken_arrows(graph)
    assert any("core.robot.x -> robot_grinding_sim.core.job.run" in b for b in bad)
    assert any("bringup -> robot_grinding_sim.ros.environment" in b for b in bad)
    assert len(bad) == 2, bad


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (in if/try blocks too): defs, classes, assignments, imports."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(tree.body)
    return names


def _missing_imports(sources: dict[str, str], importers: dict[str, str] | None = None) -> list[str]:
    """``from <module of the package> import name`` (at the top or in a function) where the module
    binds no such name and has no such submodule: ``sources`` maps a path relative to the package to
    its text; ``importers`` (tests, benchmarks: path -> text) are checked as importers only."""
    trees = {rel: ast.parse(src, filename=rel) for rel, src in sources.items()}
    modules = {_module_name(rel): rel for rel in trees}
    bound = {_module_name(rel): _top_level_names(tree) for rel, tree in trees.items()}
    bad = []
    others = {rel: ast.parse(src, filename=rel) for rel, src in (importers or {}).items()}
    for rel, tree in {**trees, **others}.items():
        for line, module, name, _ in _imported(tree, rel):
            if name is None or name == "*" or module not in modules:
                continue
            if name not in bound[module] and f"{module}.{name}" not in modules:
                bad.append(f"{rel}:{line}: {module} has no {name}")
    return bad


def test_every_import_of_the_package_names_something_it_has() -> None:
    """A name moved to another module must not leave an import behind, least of all one in a function
    that only the slow tests reach (core/job/replay.py imported coupled_step from core.job.run after
    the split)."""
    root = PKG.parent
    others = {p.relative_to(root).as_posix(): p.read_text() for d in ("test", "bench")
              for p in sorted((root / d).rglob("*.py"))}
    bad = _missing_imports({_rel(p): p.read_text() for p in FILES}, others)
    assert not bad, "\n".join(bad)


def test_the_import_check_finds_a_moved_name() -> None:
    sources = {"core/a.py": "def here():\n    pass\n",
               "core/b.py": "def f():\n    from robot_grinding_sim.core.a import gone\n    return gone\n",
               "core/c.py": "from robot_grinding_sim.core.a import here\n"}
    assert _missing_imports(sources) == ["core/b.py:2: robot_grinding_sim.core.a has no gone"]
