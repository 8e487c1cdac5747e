"""OpenCascade binding adapter: the one place that knows ``OCC.Core`` (pythonocc-core, conda) from
``OCP`` (``cadquery-ocp-novtk``, PyPI).

Uses ``OCC.Core`` when importable, else ``OCP``; the differences between the two bindings (module
prefix, the ``_s`` suffix of static methods, collection class names, TopoDS casts) are handled by
:func:`occ`, :func:`static`, :func:`occ_collection` and :func:`topods_cast` and nowhere else. No
other module of the package imports OpenCascade directly.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------------------------------------
# binding selection: the one place that knows OCC.Core from OCP
# --------------------------------------------------------------------------------------------


def _detect_backend() -> str:
    for name in ("OCC.Core", "OCP"):
        try:
            importlib.import_module(name)
            return name
        except ImportError:
            continue
    return ""


BACKEND: str = _detect_backend()


def occ(module: str) -> Any:
    """Return the OpenCascade module ``module`` (for example ``"BRepPrimAPI"``) of the binding in use.

    Raises:
        GeometryError: if neither pythonocc-core nor OCP is installed.
    """
    if not BACKEND:
        raise GeometryError(
            "OpenCascade is not installed: pip install cadquery-ocp-novtk (or conda install pythonocc-core)"
        )
    return importlib.import_module(f"{BACKEND}.{module}")


def static(owner: Any, name: str) -> Any:
    """A static method ``owner::name``: OCP spells it ``name_s`` (except on namespaces), OCC ``name``."""
    fn = getattr(owner, name + "_s", None) or getattr(owner, name, None)
    if fn is None and BACKEND == "OCC.Core":  # old pythonocc: module-level function owner_name
        fn = getattr(importlib.import_module(owner.__module__), f"{owner.__name__}_{name}", None)
    if fn is None:
        raise AttributeError(f"{owner!r} has no static method {name}")
    return fn


def silence_occ() -> None:
    """Drop OpenCascade's console printers: it otherwise prints statistics on stdout (breaks --json)."""
    try:
        msg = occ("Message").Message
        static(msg, "DefaultMessenger")().ChangePrinters().Clear()
    except Exception:
        pass


_UNIT_LOCK = threading.RLock()


@contextmanager
def session_unit_mm() -> Iterator[None]:
    """Run a STEP/IGES read or write with OpenCascade's session length unit at millimetres.

    ``xstep.cascade.unit`` is process-global: the readers convert a file's unit to it and the
    writers take the shape's numbers in it. Any other code in the process (a user's script, a test,
    another library) may have set it to metres; the readers and writers here assume millimetres, so
    they set it for the call and put the caller's value back after (under a lock: it is global).
    """
    with _UNIT_LOCK:
        owner = occ_class("Interface", "Interface_Static")
        static(occ_class("STEPControl", "STEPControl_Controller"), "Init")()  # declares the parameter
        before = static(owner, "CVal")("xstep.cascade.unit")
        static(owner, "SetCVal")("xstep.cascade.unit", "MM")
        try:
            yield
        finally:
            if before:
                static(owner, "SetCVal")("xstep.cascade.unit", before)


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send the C++ side's stdout (fd 1) to /dev/null: some OpenCascade readers print with std::cout,
    which would break one-line errors and ``--json`` output."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # no real fd 1 (embedded interpreters)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def occ_class(module: str, name: str) -> Any:
    return getattr(occ(module), name)


def topods_cast(shape: Any, kind: str) -> Any:
    mod = occ("TopoDS")
    owner = getattr(mod, "TopoDS", None)
    if owner is not None and (hasattr(owner, kind) or hasattr(owner, kind + "_s")):
        return static(owner, kind)(shape)
    return getattr(mod.topods, kind)(shape)  # pythonocc: topods.Face(shape)


def face_cast(shape: Any) -> Any:
    return topods_cast(shape, "Face")


def edge_cast(shape: Any) -> Any:
    return topods_cast(shape, "Edge")


def wire_cast(shape: Any) -> Any:
    return topods_cast(shape, "Wire")


COLLECTIONS = {
    # OCP >= 7.8 name -> pythonocc / older OCP (module, class)
    "Sequence_TCollection_AsciiString": ("TColStd", "TColStd_SequenceOfAsciiString"),
    "Array2_gp_Pnt": ("TColgp", "TColgp_Array2OfPnt"),
    "Array2_double": ("TColStd", "TColStd_Array2OfReal"),
    "Array1_double": ("TColStd", "TColStd_Array1OfReal"),
    "Array1_int": ("TColStd", "TColStd_Array1OfInteger"),
}


def occ_collection(name: str) -> Any:
    module, old = COLLECTIONS[name]
    try:
        return getattr(occ("collections"), name)
    except (ImportError, AttributeError):
        return getattr(occ(module), old)


def explore(shape: Any, kind: str) -> list[Any]:
    topabs = occ("TopAbs")
    explorer = occ_class("TopExp", "TopExp_Explorer")(shape, getattr(topabs, f"TopAbs_{kind}"))
    out = []
    while explorer.More():
        out.append(explorer.Current())
        explorer.Next()
    return out


def is_reversed(shape: Any) -> bool:
    return shape.Orientation() == occ("TopAbs").TopAbs_REVERSED



def pnt(p: Any) -> tuple[float, float, float]:
    return (p.X(), p.Y(), p.Z())


