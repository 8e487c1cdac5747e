"""Solid and face builders on OpenCascade (boxes, spheres, cylinders, B-spline faces, prisms,
booleans, rotations): for the built-in parts and for tests that write their own CAD. Metres."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError
from robot_grinding_sim.core.geometry.occ_adapter import (
    occ,
    occ_class,
    occ_collection,
)

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------------------------------------
# construction (used by robot_grinding_sim.core.geometry.parts and the tests)
# --------------------------------------------------------------------------------------------


def make_box(size: Any, origin: Any = (0.0, 0.0, 0.0)) -> Any:
    """A box solid of ``size`` (3,) m with its min corner at ``origin`` (3,) m."""
    gp = occ("gp")
    make = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeBox")
    return make(gp.gp_Pnt(*map(float, origin)), *map(float, size)).Shape()


def make_sphere(radius: float, center: Any = (0.0, 0.0, 0.0)) -> Any:
    """A sphere solid, m."""
    make = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeSphere")
    return make(occ("gp").gp_Pnt(*map(float, center)), float(radius)).Shape()


def make_cylinder(radius: float, height: float, origin: Any = (0.0, 0.0, 0.0), axis: Any = (0.0, 0.0, 1.0),
                  xdir: Any | None = None, angle: float = 2 * math.pi) -> Any:
    """A cylinder (or cylindrical sector of ``angle`` rad, starting at ``xdir``) solid, m."""
    gp = occ("gp")
    o, z = gp.gp_Pnt(*map(float, origin)), gp.gp_Dir(*map(float, axis))
    ax = gp.gp_Ax2(o, z) if xdir is None else gp.gp_Ax2(o, z, gp.gp_Dir(*map(float, xdir)))
    make = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeCylinder")
    return make(ax, float(radius), float(height), float(angle)).Shape()


def cut(a: Any, b: Any) -> Any:
    """Boolean difference a - b."""
    op = occ_class("BRepAlgoAPI", "BRepAlgoAPI_Cut")(a, b)
    if not op.IsDone():
        raise GeometryError("boolean cut failed")
    return op.Shape()


def make_bspline_face(poles: Any, degree: tuple[int, int] = (3, 3)) -> Any:
    """A face on a clamped, uniform B-spline surface with control net ``poles`` (nu, nv, 3) m."""
    P = np.asarray(poles, dtype=float)
    nu, nv = P.shape[:2]
    pu, pv = degree
    arr = occ_collection("Array2_gp_Pnt")(1, nu, 1, nv)
    gp = occ("gp")
    for i in range(nu):
        for j in range(nv):
            arr.SetValue(i + 1, j + 1, gp.gp_Pnt(*P[i, j]))

    def knots(n: int, p: int) -> tuple[Any, Any]:
        inner = n - p - 1
        vals = np.linspace(0.0, 1.0, inner + 2)
        mults = [p + 1] + [1] * inner + [p + 1]
        k = occ_collection("Array1_double")(1, len(vals))
        m = occ_collection("Array1_int")(1, len(vals))
        for i, (x, mu) in enumerate(zip(vals, mults, strict=True)):
            k.SetValue(i + 1, float(x))
            m.SetValue(i + 1, int(mu))
        return k, m

    ku, mu = knots(nu, pu)
    kv, mv = knots(nv, pv)
    surf = occ_class("Geom", "Geom_BSplineSurface")(arr, ku, kv, mu, mv, pu, pv, False, False)
    face = occ_class("BRepBuilderAPI", "BRepBuilderAPI_MakeFace")(surf, 1e-9)
    if not face.IsDone():
        raise GeometryError("could not make a face on the B-spline surface")
    return face.Face()


def make_prism(face: Any, vector: Any) -> Any:
    """Sweep a face along ``vector`` (3,) m into a solid."""
    return occ_class("BRepPrimAPI", "BRepPrimAPI_MakePrism")(face, occ("gp").gp_Vec(*map(float, vector))).Shape()


def rotated(shape: Any, axis: Any, angle: float, point: Any = (0.0, 0.0, 0.0)) -> Any:
    """A copy of ``shape`` rotated by ``angle`` rad about the line through ``point`` along ``axis``."""
    gp = occ("gp")
    trsf = gp.gp_Trsf()
    trsf.SetRotation(gp.gp_Ax1(gp.gp_Pnt(*map(float, point)), gp.gp_Dir(*map(float, axis))), float(angle))
    return occ_class("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()

