"""CAD parts: read STEP/IGES/BREP files (and meshes) into parts with exact faces.

The geometry package splits the work: :mod:`~robot_grinding_sim.core.geometry.occ_adapter` (the one
place that knows OCC.Core from OCP), :mod:`~robot_grinding_sim.core.geometry.bspline` (numba
B-spline kernels), :mod:`~robot_grinding_sim.core.geometry.cad_face` (one face evaluated exactly),
:mod:`~robot_grinding_sim.core.geometry.mesh_part` (STL/PLY/OBJ parts),
:mod:`~robot_grinding_sim.core.geometry.units` (length units) and
:mod:`~robot_grinding_sim.core.geometry.shapes` (solid builders); this module reads files into
:class:`CadPart` / :class:`~robot_grinding_sim.core.geometry.mesh_part.MeshPart`.

Units and frames:
    Every position is in metres in the part frame (``workpiece``). STEP and IGES files are read
    in the length unit they declare and scaled to metres; a STEP file that declares no length
    unit is an error unless the caller states the unit. BREP files and meshes (STL/PLY/OBJ)
    carry no unit, so the caller must state it (``unit="mm"``; the ``grinding`` CLI has
    ``--unit``). Built-in parts are STEP files in millimetres.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError, InputError
from robot_grinding_sim.core.geometry.cad_face import (
    CadFace,
    FaceInfo,
    shape_bounds,
    tessellate_faces,
)
from robot_grinding_sim.core.geometry.mesh_part import MeshPart, read_mesh
from robot_grinding_sim.core.geometry.occ_adapter import (
    explore,
    face_cast,
    occ,
    occ_class,
    occ_collection,
    quiet_stdout,
    session_unit_mm,
    silence_occ,
    static,
)
from robot_grinding_sim.core.geometry.units import (
    CAD_SUFFIXES,
    MESH_SUFFIXES,
    check_file,
    step_unit,
    unit_factor,
)

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------------------------------------
# parts
# --------------------------------------------------------------------------------------------


@dataclass
class CadPart:
    """A B-rep part in metres, in the part frame.

    Attributes:
        shape: the OpenCascade shape (metres).
        source: where it came from (file path or built-in name).
        unit: the length unit the file declared (or the caller stated).
    """

    shape: Any
    source: str = "<memory>"
    unit: str = "m"
    faces: list[CadFace] = field(default_factory=list)

    is_mesh = False

    def __post_init__(self) -> None:
        if not self.faces:
            self.faces = [CadFace(face_cast(f), i) for i, f in enumerate(explore(self.shape, "FACE"))]
        if not self.faces:
            raise GeometryError(f"{self.source}: the file holds no faces")

    def face(self, index: int) -> CadFace:
        """The face ``index``; InputError naming the valid range otherwise."""
        if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < len(self.faces):
            raise InputError(f"{self.source}: face index {index} out of range 0..{len(self.faces) - 1}")
        return self.faces[int(index)]

    def list_faces(self) -> list[FaceInfo]:
        return [f.info() for f in self.faces]

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        return shape_bounds(self.shape)

    def mass_properties(self, density: float) -> tuple[float, FloatArray, FloatArray]:
        """The part as a solid of uniform ``density`` (kg/m^3): mass (kg), centre of mass (3,) and
        inertia (3, 3) about it (kg m^2), part frame, from OpenCascade's volume integrals of the
        B-rep's solids (BRepGProp); a shape without a solid (a face, an open shell) gives mass 0."""
        props = occ_class("GProp", "GProp_GProps")()
        for solid in explore(self.shape, "SOLID"):  # a face's "volume" would be its cone to the origin
            static(occ_class("BRepGProp", "BRepGProp"), "VolumeProperties")(solid, props)
        volume = float(props.Mass())
        if not volume > 0.0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        c = props.CentreOfMass()
        M = props.MatrixOfInertia()  # about the centre of mass, per unit density
        inertia = np.array([[M.Value(i, j) for j in (1, 2, 3)] for i in (1, 2, 3)]) * density
        return volume * density, np.array([c.X(), c.Y(), c.Z()]), 0.5 * (inertia + inertia.T)

    def shared_edges(self, indices: list[int]) -> dict[int, list[Any]]:
        """For each face index, its edges that are shared with another face of ``indices``."""
        edges = {i: self.face(i).edges() for i in indices}
        shared: dict[int, list[Any]] = {i: [] for i in indices}
        for i in indices:
            for e in edges[i]:
                if any(e.IsSame(o) for j in indices if j != i for o in edges[j]):
                    shared[i].append(e)
        return shared

    def adjacent(self, i: int, j: int) -> bool:
        return bool(self.shared_edges([i, j])[i])

    def tessellate(self, deflection: float = 1e-4, angular: float = 0.3) -> Any:
        """The whole part as a trimesh mesh.

        Args:
            deflection: maximum chordal deviation from the exact surface, m.
            angular: maximum angle between adjacent facet normals, rad.
        """
        return tessellate_faces(self.shape, deflection, angular, [f.shape for f in self.faces])

    def write(self, path: str | os.PathLike[str], unit: str = "mm") -> Path:
        """Write STEP (.step/.stp), IGES (.iges/.igs) or BREP (.brep) in ``unit`` (BREP: no unit stored).

        The file is written to a temporary name and renamed, so a failure leaves no partial file.
        """
        path = Path(path)
        kind = CAD_SUFFIXES.get(path.suffix.lower())
        if kind is None:
            raise InputError(f"{path}: unknown CAD suffix (use .step, .iges or .brep)")
        factor = unit_factor(unit, str(path))
        shape = scaled_shape(self.shape, 1.0 / factor)  # the shape in the file's unit
        silence_occ()
        fd, tmp = tempfile.mkstemp(suffix=path.suffix, dir=path.parent if path.parent.exists() else None)
        os.close(fd)
        with quiet_stdout(), session_unit_mm():
            try:
                if kind == "step":
                    # the writer takes the shape in the session unit (mm) and converts to write.step.unit
                    shape_mm = scaled_shape(self.shape, 1e3)
                    static(occ_class("Interface", "Interface_Static"), "SetCVal")("write.step.unit", step_unit(unit))
                    writer = occ_class("STEPControl", "STEPControl_Writer")()
                    writer.Transfer(shape_mm, occ("STEPControl").STEPControl_AsIs)
                    ok = int(writer.Write(tmp)) == int(occ("IFSelect").IFSelect_RetDone)
                elif kind == "iges":
                    shape_mm = scaled_shape(self.shape, 1e3)
                    writer = occ_class("IGESControl", "IGESControl_Writer")(step_unit(unit), 1)
                    writer.AddShape(shape_mm)
                    writer.ComputeModel()
                    ok = bool(writer.Write(tmp))
                else:
                    ok = bool(static(occ_class("BRepTools", "BRepTools"), "Write")(shape, tmp))
                if not ok:
                    raise GeometryError(f"{path}: OpenCascade failed to write the file")
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return path



def scaled_shape(shape: Any, factor: float) -> Any:
    if factor == 1.0:
        return shape
    trsf = occ("gp").gp_Trsf()
    trsf.SetScale(occ("gp").gp_Pnt(0.0, 0.0, 0.0), float(factor))
    return occ_class("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()


def transformed(shape: Any, matrix: Any) -> Any:
    """A copy of ``shape`` moved by the rigid transform ``matrix`` (4, 4)."""
    m = np.asarray(matrix, dtype=float)
    trsf = occ("gp").gp_Trsf()
    trsf.SetValues(*m[0, :4], *m[1, :4], *m[2, :4])
    return occ_class("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()



def _read_step(path: Path, unit: str | None) -> tuple[Any, str]:
    reader = occ_class("STEPControl", "STEPControl_Reader")()
    status = reader.ReadFile(str(path))
    if int(status) != int(occ("IFSelect").IFSelect_RetDone):
        raise GeometryError(f"{path}: not a readable STEP file (OpenCascade status {status})")
    seq = occ_collection("Sequence_TCollection_AsciiString")
    lengths, angles, solids = seq(), seq(), seq()
    reader.FileUnits(lengths, angles, solids)
    names = {lengths.Value(i).ToCString().strip().lower() for i in range(1, lengths.Length() + 1)}
    names.discard("")
    if not names and unit is None:
        raise GeometryError(
            f"{path}: the STEP file declares no length unit; state it (unit='mm', CLI --unit mm)"
        )
    if len(names) > 1:
        raise GeometryError(f"{path}: the STEP file mixes length units {sorted(names)}")
    declared = bool(names)
    file_unit = names.pop() if declared else unit
    if reader.TransferRoots() == 0:
        raise GeometryError(f"{path}: the STEP file holds no shape")
    shape = reader.OneShape()
    if not declared:
        # no unit in the file: OpenCascade kept the numbers as they are; scale by the stated unit
        return scaled_shape(shape, unit_factor(unit, str(path))), unit
    # the reader converted the file's unit to the session unit (millimetres unless changed)
    session_mm = float(reader.SystemLengthUnit()) if hasattr(reader, "SystemLengthUnit") else 1.0
    return scaled_shape(shape, session_mm * 1e-3), str(file_unit)


def _read_iges(path: Path, unit: str | None) -> tuple[Any, str]:
    reader = occ_class("IGESControl", "IGESControl_Reader")()
    status = reader.ReadFile(str(path))
    if int(status) != int(occ("IFSelect").IFSelect_RetDone):
        raise GeometryError(f"{path}: not a readable IGES file (OpenCascade status {status})")
    reader.TransferRoots()
    if reader.NbShapes() == 0:
        raise GeometryError(f"{path}: the IGES file holds no shape")
    file_unit = "?"
    try:
        gs = reader.IGESModel().GlobalSection()
        file_unit = gs.UnitName().ToCString() if gs.UnitName() is not None else str(gs.UnitFlag())
    except Exception:
        pass
    # IGES always carries a unit flag (default inch); the reader converts it to millimetres
    return scaled_shape(reader.OneShape(), 1e-3), file_unit


def _read_brep(path: Path, unit: str | None) -> tuple[Any, str]:
    if unit is None:
        raise InputError(f"{path}: BREP files carry no length unit; state it (unit='mm', CLI --unit mm)")
    shape = occ_class("TopoDS", "TopoDS_Shape")()
    builder = occ_class("BRep", "BRep_Builder")()
    try:
        ok = static(occ_class("BRepTools", "BRepTools"), "Read")(shape, str(path), builder)
    except Exception as exc:
        raise GeometryError(f"{path}: not a readable BREP file ({exc})") from exc
    if not ok or shape.IsNull():
        raise GeometryError(f"{path}: not a readable BREP file")
    return scaled_shape(shape, unit_factor(unit, str(path))), unit


def read_cad(path: str | os.PathLike[str], unit: str | None = None) -> CadPart | MeshPart:
    """Read a STEP, IGES or BREP part (exact B-rep) or an STL/PLY/OBJ mesh, in metres.

    Args:
        path: the file.
        unit: the file's length unit when the file does not declare one (BREP, meshes, a STEP
            without units). Ignored for files that declare their unit.

    Raises:
        InputError: missing file, unknown suffix or unit, no unit where one is needed.
        GeometryError: malformed or empty file.
    """
    path = Path(path)
    check_file(path)
    suffix = path.suffix.lower()
    if suffix in MESH_SUFFIXES:
        return read_mesh(path, unit)
    kind = CAD_SUFFIXES.get(suffix)
    if kind is None:
        raise InputError(f"{path}: unknown file type {suffix!r} (STEP, IGES, BREP, STL, PLY or OBJ)")
    if unit is not None:
        unit_factor(unit, str(path))
    silence_occ()
    with quiet_stdout(), session_unit_mm():
        shape, file_unit = {"step": _read_step, "iges": _read_iges, "brep": _read_brep}[kind](path, unit)
    if shape is None or shape.IsNull():
        raise GeometryError(f"{path}: the file holds no shape")
    return CadPart(shape, source=str(path), unit=file_unit)
