"""Length units of part files: names as files and users write them, metres per unit; file suffixes."""

from __future__ import annotations

from pathlib import Path

from robot_grinding_sim.core.errors import GeometryError, InputError

#: length unit name (lower case, as written in files or given by users) -> metres per unit
UNIT_SCALE: dict[str, float] = {
    "m": 1.0,
    "metre": 1.0,
    "meter": 1.0,
    "mm": 1e-3,
    "millimetre": 1e-3,
    "millimeter": 1e-3,
    "cm": 1e-2,
    "centimetre": 1e-2,
    "centimeter": 1e-2,
    "um": 1e-6,
    "micrometre": 1e-6,
    "micron": 1e-6,
    "in": 0.0254,
    "inch": 0.0254,
    "ft": 0.3048,
    "foot": 0.3048,
    "km": 1e3,
    "kilometre": 1e3,
}

CAD_SUFFIXES = {
    ".step": "step", ".stp": "step", ".iges": "iges", ".igs": "iges", ".brep": "brep", ".brp": "brep"
}
MESH_SUFFIXES = {".stl", ".ply", ".obj"}


def step_unit(unit: str) -> str:
    return {"mm": "MM", "m": "M", "cm": "CM", "in": "INCH", "inch": "INCH", "um": "UM", "ft": "FT"}.get(
        unit.lower(), unit.upper()
    )


def unit_factor(unit: str, source: str) -> float:
    key = unit.strip().lower()
    if key not in UNIT_SCALE:
        raise InputError(f"{source}: unknown length unit {unit!r} (known: m, mm, cm, um, in, ft)")
    return UNIT_SCALE[key]



def check_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a CAD or mesh file")
    if path.stat().st_size == 0:
        raise GeometryError(f"{path}: the file is empty")


