"""Built-in parts: made by this module (through the OpenCascade adapter) and shipped as STEP files.

Every built-in part is usable by name wherever a CAD file is accepted (``grinding plan
curved_panel``). The shipped files live in ``parts/<name>.step`` (installed into
``share/robot_grinding_sim/parts``); ``python -m robot_grinding_sim.core.geometry.parts parts/`` writes
them again from the definitions below. If no shipped file is found, the part is built into a
cache folder on first use.

Part frame (``workpiece``): metres, z up, the part centred on the z axis; the face meant for
grinding faces +z (it is the part's default face).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry import cad, shapes
from robot_grinding_sim.core.geometry.mesh_part import MeshPart


@dataclass(frozen=True)
class BuiltinPart:
    """A built-in part: its name, a one-line description, and the function that builds its shape."""

    name: str
    description: str
    build: Callable[[], Any]
    size_mm: tuple[float, float, float]


def curved_panel_poles() -> np.ndarray:
    """Control net (8, 6, 3) m of the curved panel's top B-spline surface.

    A 200 x 150 mm aluminium sheet bent into a dome along x (12 mm rise), a slight bend along y
    (3 mm) and a twist (2 mm): a freeform surface like the paper's workpiece. Poles sit on the
    height function, so the B-spline approximates (not interpolates) it: the B-spline is the
    definition.
    """
    x = np.linspace(-0.1, 0.1, 8)
    y = np.linspace(-0.075, 0.075, 6)
    X, Y = np.meshgrid(x, y, indexing="ij")
    xs, ys = X / 0.1, Y / 0.075
    Z = 0.006 + 0.012 * (1.0 - xs**2) + 0.003 * ys**2 + 0.002 * xs * ys
    return np.stack([X, Y, Z], axis=-1)


def freeform_face(size: float = 0.2) -> cad.CadPart:
    """A square freeform B-spline face (size x size m, 9 x 9 bicubic control net, 15 mm crown and a
    4 mm diagonal wave), the benchmark surface of ``bench/bench_planner.py``."""
    x = np.linspace(-0.5 * size, 0.5 * size, 9)
    X, Y = np.meshgrid(x, x, indexing="ij")
    Z = 0.015 * np.cos(np.pi * X / size) * np.cos(np.pi * Y / (1.25 * size)) + 0.004 * np.sin(
        2 * np.pi * (X + Y) / size)
    return cad.CadPart(shapes.make_bspline_face(np.stack([X, Y, Z], axis=-1)), source=f"freeform_{size:g}m")


def _curved_panel() -> Any:
    face = shapes.make_bspline_face(curved_panel_poles(), (3, 3))
    return shapes.make_prism(face, (0.0, 0.0, -0.003))


def _flat_plate() -> Any:
    return shapes.make_box((0.2, 0.15, 0.01), (-0.1, -0.075, 0.0))


def _cylinder_section() -> Any:
    # a 90 deg sector of a tube, axis along x at z = 0, outer radius 100 mm, wall 5 mm, length 200 mm,
    # the sector centred on +z so its outer (grinding) face looks up
    c = math.cos(math.pi / 4)
    outer = shapes.make_cylinder(0.1, 0.2, origin=(-0.1, 0.0, 0.0), axis=(1.0, 0.0, 0.0), xdir=(0.0, c, c),
                              angle=math.pi / 2)
    inner = shapes.make_cylinder(0.095, 0.3, origin=(-0.15, 0.0, 0.0), axis=(1.0, 0.0, 0.0))
    return shapes.cut(outer, inner)


def _plate_with_hole() -> Any:
    plate = shapes.make_box((0.2, 0.15, 0.01), (-0.1, -0.075, 0.0))
    hole = shapes.make_cylinder(0.02, 0.03, origin=(0.0, 0.0, -0.01))
    return shapes.cut(plate, hole)


BUILTIN_PARTS: dict[str, BuiltinPart] = {
    p.name: p
    for p in (
        BuiltinPart("curved_panel", "aluminium panel 200 x 150 x 3 mm, freeform B-spline top",
                    _curved_panel, (200.0, 150.0, 17.9)),
        BuiltinPart("flat_plate", "plate 200 x 150 x 10 mm, planar top", _flat_plate, (200.0, 150.0, 10.0)),
        BuiltinPart("cylinder_section", "90 deg tube sector, outer radius 100 mm, wall 5 mm, 200 mm long",
                    _cylinder_section, (200.0, 141.4, 32.8)),
        BuiltinPart("plate_with_hole", "plate 200 x 150 x 10 mm with a 40 mm through hole at its centre",
                    _plate_with_hole, (200.0, 150.0, 10.0)),
    )
}

DEFAULT_PART = "curved_panel"


def _search_dirs() -> list[Path]:
    dirs = [Path(__file__).resolve().parents[3] / "parts"]  # source tree / editable install: <repo>/parts
    prefixes = [sys.prefix, *os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)]
    dirs += [Path(p) / "share" / "robot_grinding_sim" / "parts" for p in prefixes if p]
    return dirs


def part_path(name: str) -> Path:
    """Path of the STEP file of built-in part ``name`` (built into a cache folder if not shipped)."""
    if name not in BUILTIN_PARTS:
        raise InputError(f"unknown built-in part {name!r} (known: {', '.join(BUILTIN_PARTS)})")
    for d in _search_dirs():
        candidate = d / f"{name}.step"
        if candidate.is_file():
            return candidate
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "robot_grinding_sim" / "parts"
    cache.mkdir(parents=True, exist_ok=True)
    return write_part(name, cache)


def build_part(name: str) -> cad.CadPart:
    """Build the part in memory (metres), without reading the shipped file."""
    if name not in BUILTIN_PARTS:
        raise InputError(f"unknown built-in part {name!r} (known: {', '.join(BUILTIN_PARTS)})")
    return cad.CadPart(BUILTIN_PARTS[name].build(), source=name, unit="m")


def write_part(name: str, folder: str | os.PathLike[str]) -> Path:
    """Write built-in part ``name`` as ``folder/<name>.step`` in millimetres."""
    return build_part(name).write(Path(folder) / f"{name}.step", unit="mm")


def list_parts() -> list[dict[str, Any]]:
    """Name, description, size (mm) and default flag of every built-in part."""
    return [
        {"name": p.name, "description": p.description, "size_mm": list(p.size_mm),
         "default": p.name == DEFAULT_PART}
        for p in BUILTIN_PARTS.values()
    ]


def main(argv: list[str] | None = None) -> int:
    """Write every built-in part into the folder given (default ``parts``)."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "parts")
    folder.mkdir(parents=True, exist_ok=True)
    for name in BUILTIN_PARTS:
        print(write_part(name, folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def load_part(source: str | os.PathLike[str], unit: str | None = None) -> cad.CadPart | MeshPart:
    """A built-in part by name (:data:`BUILTIN_PARTS`) or a CAD/mesh file path (:func:`cad.read_cad
    <robot_grinding_sim.core.geometry.cad.read_cad>`)."""
    name = str(source)
    if name in BUILTIN_PARTS:
        part = cad.read_cad(part_path(name))
        part.source = name
        return part
    if not Path(name).exists() and Path(name).suffix == "":
        raise InputError(
            f"{name}: neither a file nor a built-in part (built-in: {', '.join(BUILTIN_PARTS)})"
        )
    return cad.read_cad(name, unit)
