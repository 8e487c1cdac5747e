"""OpenCascade adapter: read CAD parts, list faces, evaluate exact points and normals, tessellate.

This is the only module of the package that imports OpenCascade. It uses ``OCC.Core``
(pythonocc-core, conda) when importable, else ``OCP`` (``cadquery-ocp-novtk``, PyPI); the
differences between the two bindings (module prefix, the ``_s`` suffix of static methods) are
handled by :func:`occ` and :func:`static` and nowhere else.

Units and frames:
    Every position is in metres in the part frame (``workpiece``). STEP and IGES files are read
    in the length unit they declare and scaled to metres; a STEP file that declares no length
    unit is an error unless the caller states the unit. BREP files and meshes (STL/PLY/OBJ)
    carry no unit, so the caller must state it (``unit="mm"``; the ``grinding`` CLI has
    ``--unit``). Built-in parts are STEP files in millimetres.

Normals:
    :meth:`CadFace.evaluate` returns the outward normal of the face: the normal of the
    underlying surface, ``S_u x S_v / |S_u x S_v|``, flipped when the face is REVERSED in its
    shell. For the faces of a closed solid this points out of the material.

Evaluation is vectorised: plane, cylinder, cone, sphere, torus, Bezier and (non-periodic)
B-spline faces are evaluated in NumPy from the exact surface definition OpenCascade holds (same
formulas, to rounding); other surface types fall back to OpenCascade point by point.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError, InputError

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

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


def _silence_occ() -> None:
    """Drop OpenCascade's console printers: it otherwise prints statistics on stdout (breaks --json)."""
    try:
        msg = occ("Message").Message
        static(msg, "DefaultMessenger")().ChangePrinters().Clear()
    except Exception:
        pass


@contextmanager
def _quiet_stdout() -> Iterator[None]:
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


def _cls(module: str, name: str) -> Any:
    return getattr(occ(module), name)


def _topods_cast(shape: Any, kind: str) -> Any:
    mod = occ("TopoDS")
    owner = getattr(mod, "TopoDS", None)
    if owner is not None and (hasattr(owner, kind) or hasattr(owner, kind + "_s")):
        return static(owner, kind)(shape)
    return getattr(mod.topods, kind)(shape)  # pythonocc: topods.Face(shape)


def _face_cast(shape: Any) -> Any:
    return _topods_cast(shape, "Face")


def _edge_cast(shape: Any) -> Any:
    return _topods_cast(shape, "Edge")


def _wire_cast(shape: Any) -> Any:
    return _topods_cast(shape, "Wire")


_COLLECTIONS = {
    # OCP >= 7.8 name -> pythonocc / older OCP (module, class)
    "Sequence_TCollection_AsciiString": ("TColStd", "TColStd_SequenceOfAsciiString"),
    "Array2_gp_Pnt": ("TColgp", "TColgp_Array2OfPnt"),
    "Array2_double": ("TColStd", "TColStd_Array2OfReal"),
    "Array1_double": ("TColStd", "TColStd_Array1OfReal"),
    "Array1_int": ("TColStd", "TColStd_Array1OfInteger"),
}


def _collection(name: str) -> Any:
    module, old = _COLLECTIONS[name]
    try:
        return getattr(occ("collections"), name)
    except (ImportError, AttributeError):
        return getattr(occ(module), old)


def _explore(shape: Any, kind: str) -> list[Any]:
    topabs = occ("TopAbs")
    explorer = _cls("TopExp", "TopExp_Explorer")(shape, getattr(topabs, f"TopAbs_{kind}"))
    out = []
    while explorer.More():
        out.append(explorer.Current())
        explorer.Next()
    return out


def _is_reversed(shape: Any) -> bool:
    return shape.Orientation() == occ("TopAbs").TopAbs_REVERSED


def _cross(a: FloatArray, b: FloatArray) -> FloatArray:
    """Row-wise cross product of (N, 3) arrays (np.cross costs ~30 us of overhead per call)."""
    out = np.empty_like(a)
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


def _pnt(p: Any) -> tuple[float, float, float]:
    return (p.X(), p.Y(), p.Z())


# --------------------------------------------------------------------------------------------
# faces
# --------------------------------------------------------------------------------------------

_SURFACE_KINDS = {
    "GeomAbs_Plane": "plane",
    "GeomAbs_Cylinder": "cylinder",
    "GeomAbs_Cone": "cone",
    "GeomAbs_Sphere": "sphere",
    "GeomAbs_Torus": "torus",
    "GeomAbs_BezierSurface": "bezier",
    "GeomAbs_BSplineSurface": "bspline",
    "GeomAbs_SurfaceOfRevolution": "revolution",
    "GeomAbs_SurfaceOfExtrusion": "extrusion",
    "GeomAbs_OffsetSurface": "offset",
    "GeomAbs_OtherSurface": "other",
}


def _enum_label(value: Any, labels: dict[str, str], default: str) -> str:
    """Label of a GeomAbs enum value by comparison (OCP enums are objects, pythonocc's are ints)."""
    geomabs = occ("GeomAbs")
    for name, label in labels.items():
        if value == getattr(geomabs, name, None):
            return label
    return default


@dataclass(frozen=True)
class FaceInfo:
    """Summary of one face: index in the part, surface type, area (m^2), bounds (m, part frame)."""

    index: int
    type: str
    area: float
    bounds_min: tuple[float, float, float]
    bounds_max: tuple[float, float, float]
    uv_bounds: tuple[float, float, float, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "type": self.type,
            "area": self.area,
            "bounds": [list(self.bounds_min), list(self.bounds_max)],
            "uv_bounds": list(self.uv_bounds),
        }


@dataclass
class SurfaceSample:
    """Exact surface samples. Shapes: points/du/dv/normals (N, 3) in m, m per unit u or v, unit."""

    points: FloatArray
    du: FloatArray
    dv: FloatArray
    normals: FloatArray


@dataclass
class BoundaryEdge:
    """A boundary edge of a face sampled as a 3D polyline (M, 3) m; ``key`` identifies the edge."""

    key: int
    points: FloatArray


@numba.njit(cache=True, nogil=True)
def _basis_one(t, p, n, x, N, dN, tmp, left, right):  # pragma: no cover - numba
    """Non-zero basis values N[0..p] and derivatives dN[0..p] at x; returns the knot span.

    The NURBS Book, algorithms A2.1 (span) and A2.2 (basis); the derivative from the degree p-1
    values: N'_{i,p} = p N_{i,p-1} / (t_{i+p} - t_i) - p N_{i+1,p-1} / (t_{i+p+1} - t_{i+1}).
    """
    if x >= t[n]:
        span = n - 1
    elif x <= t[p]:
        span = p
    else:
        lo, hi = p, n
        span = (lo + hi) // 2
        while x < t[span] or x >= t[span + 1]:
            if x < t[span]:
                hi = span
            else:
                lo = span
            span = (lo + hi) // 2
    N[0] = 1.0
    for j in range(1, p + 1):
        if j == p:
            for r in range(p):
                tmp[r] = N[r]
        left[j] = x - t[span + 1 - j]
        right[j] = t[span + j] - x
        saved = 0.0
        for r in range(j):
            den = right[r + 1] + left[j - r]
            temp = N[r] / den if den != 0.0 else 0.0
            N[r] = saved + right[r + 1] * temp
            saved = left[j - r] * temp
        N[j] = saved
    for r in range(p + 1):
        dN[r] = 0.0
    if p > 0:
        for r in range(p + 1):
            i = span - p + r
            if r >= 1:
                den = t[i + p] - t[i]
                if den != 0.0:
                    dN[r] += p * tmp[r - 1] / den
            if r <= p - 1:
                den = t[i + p + 1] - t[i + 1]
                if den != 0.0:
                    dN[r] -= p * tmp[r] / den
    return span


@numba.njit(cache=True, nogil=True)
def _bspline_point(tu, tv, pu, pv, hom, u, v, work, out):  # pragma: no cover - numba
    """S, S_u, S_v at one (u, v) into out[0], out[1], out[2]; ``work`` (12, max degree + 1) scratch."""
    nu, nv = hom.shape[0], hom.shape[1]
    Nu, dNu, tmpu = work[0, : pu + 1], work[1, : pu + 1], work[2, : pu + 1]
    lu, ru = work[3, : pu + 1], work[4, : pu + 1]
    Nv, dNv, tmpv = work[5, : pv + 1], work[6, : pv + 1], work[7, : pv + 1]
    lv, rv = work[8, : pv + 1], work[9, : pv + 1]
    A, D = work[10], work[11]
    su = _basis_one(tu, pu, nu, u, Nu, dNu, tmpu, lu, ru)
    sv = _basis_one(tv, pv, nv, v, Nv, dNv, tmpv, lv, rv)
    for c in range(4):
        A[c] = 0.0
        D[c] = 0.0
        D[4 + c] = 0.0
    for i in range(pu + 1):
        for j in range(pv + 1):
            a, au, av = Nu[i] * Nv[j], dNu[i] * Nv[j], Nu[i] * dNv[j]
            for c in range(4):
                h = hom[su - pu + i, sv - pv + j, c]
                A[c] += a * h
                D[c] += au * h
                D[4 + c] += av * h
    w = A[3]
    for c in range(3):
        s = A[c] / w
        out[0, c] = s
        out[1, c] = (D[c] - D[3] * s) / w
        out[2, c] = (D[4 + c] - D[7] * s) / w


@numba.njit(cache=True, nogil=True)
def _bspline_kernel(tu, tv, pu, pv, hom, u, v, S, Su, Sv):  # pragma: no cover - numba
    work = np.zeros((12, max(pu, pv, 7) + 1))
    out = np.zeros((3, 3))
    for k in range(u.shape[0]):
        _bspline_point(tu, tv, pu, pv, hom, u[k], v[k], work, out)
        for c in range(3):
            S[k, c] = out[0, c]
            Su[k, c] = out[1, c]
            Sv[k, c] = out[2, c]


@numba.njit(cache=True, nogil=True)
def _bspline_lines_kernel(tu, tv, pu, pv, hom, origins, e1, e2, uv, lo, hi, iters, tol, chain):  # pragma: no cover
    """Newton iteration per line: find (u, v) with (S(u, v) - o) . e1 = (S(u, v) - o) . e2 = 0.

    Where ``chain[k]`` is set (line k is a neighbour of line k - 1) and line k - 1 converged, its
    solution is the start point (closer than the grid guess in ``uv``).
    """
    work = np.zeros((12, max(pu, pv, 7) + 1))
    out = np.zeros((3, 3))
    span_u, span_v = hi[0] - lo[0], hi[1] - lo[1]
    prev_ok = False
    for k in range(origins.shape[0]):
        if chain[k] and prev_ok and k > 0:
            uv[k, 0], uv[k, 1] = uv[k - 1, 0], uv[k - 1, 1]
        prev_ok = False
        for _ in range(iters):
            _bspline_point(tu, tv, pu, pv, hom, uv[k, 0], uv[k, 1], work, out)
            r1 = r2 = a11 = a12 = a21 = a22 = 0.0
            for c in range(3):
                rel = out[0, c] - origins[k, c]
                r1 += rel * e1[c]
                r2 += rel * e2[c]
                a11 += out[1, c] * e1[c]
                a12 += out[2, c] * e1[c]
                a21 += out[1, c] * e2[c]
                a22 += out[2, c] * e2[c]
            if abs(r1) < tol and abs(r2) < tol:
                prev_ok = lo[0] <= uv[k, 0] <= hi[0] and lo[1] <= uv[k, 1] <= hi[1]
                break
            det = a11 * a22 - a12 * a21
            if det == 0.0 or not np.isfinite(det):
                break
            du = (-r1 * a22 + r2 * a12) / det
            dv = (-r2 * a11 + r1 * a21) / det
            du = min(max(du, -0.25 * span_u), 0.25 * span_u)
            dv = min(max(dv, -0.25 * span_v), 0.25 * span_v)
            uv[k, 0] = min(max(uv[k, 0] + du, lo[0] - 0.01 * span_u), hi[0] + 0.01 * span_u)
            uv[k, 1] = min(max(uv[k, 1] + dv, lo[1] - 0.01 * span_v), hi[1] + 0.01 * span_v)


class _BSplineEval:
    """Evaluation of a (rational) B-spline surface S(u, v) and its first derivatives (numba kernel)."""

    def __init__(self, poles: FloatArray, weights: FloatArray | None, tu: FloatArray, tv: FloatArray,
                 pu: int, pv: int) -> None:
        nu, nv = poles.shape[:2]
        w = np.ones((nu, nv)) if weights is None else weights
        # homogeneous control net (nu, nv, 4): [w P, w]
        self.hom = np.ascontiguousarray(np.concatenate([poles * w[..., None], w[..., None]], axis=-1))
        self.tu, self.tv = np.ascontiguousarray(tu, dtype=float), np.ascontiguousarray(tv, dtype=float)
        self.pu, self.pv = int(pu), int(pv)

    def __call__(self, u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        K = len(u)
        S, Su, Sv = np.empty((K, 3)), np.empty((K, 3)), np.empty((K, 3))
        _bspline_kernel(self.tu, self.tv, self.pu, self.pv, self.hom, np.ascontiguousarray(u, dtype=float),
                        np.ascontiguousarray(v, dtype=float), S, Su, Sv)
        return S, Su, Sv


class CadFace:
    """One face of a CAD part, evaluated exactly.

    Attributes:
        index: position in :attr:`CadPart.faces` (the order of TopExp_Explorer over the shape).
        type: ``plane``, ``cylinder``, ``cone``, ``sphere``, ``torus``, ``bezier``, ``bspline``,
            ``revolution``, ``extrusion``, ``offset`` or ``other``.
        reversed: the face is REVERSED in its shell (the outward normal is -S_u x S_v).
    """

    is_mesh = False

    def __init__(self, shape: Any, index: int) -> None:
        self.shape = shape
        self.index = index
        self.reversed = _is_reversed(shape)
        self._adaptor = _cls("BRepAdaptor", "BRepAdaptor_Surface")(shape, True)
        self.type = _enum_label(self._adaptor.GetType(), _SURFACE_KINDS, "other")
        self._sign = -1.0 if self.reversed else 1.0
        self._numpy_eval = self._make_numpy_eval()

    # -- basic properties ----------------------------------------------------------------------
    @cached_property
    def uv_bounds(self) -> tuple[float, float, float, float]:
        """(u_min, u_max, v_min, v_max) of the face's trimmed parameter domain."""
        return tuple(float(x) for x in static(_cls("BRepTools", "BRepTools"), "UVBounds")(self.shape))

    @cached_property
    def area(self) -> float:
        """Area in m^2."""
        props = _cls("GProp", "GProp_GProps")()
        static(_cls("BRepGProp", "BRepGProp"), "SurfaceProperties")(self.shape, props)
        return float(props.Mass())

    @cached_property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """Axis-aligned bounds (min (3,), max (3,)) in m, from the exact geometry (optimal box)."""
        return _bounds(self.shape)

    def info(self) -> FaceInfo:
        lo, hi = self.bounds
        return FaceInfo(self.index, self.type, self.area, tuple(lo), tuple(hi), self.uv_bounds)

    # -- evaluation ----------------------------------------------------------------------------
    def _make_numpy_eval(self) -> Any:
        a = self._adaptor
        try:
            if self.type == "plane":
                ax = a.Plane().Position()
                o, x, y = (np.array(_pnt(v)) for v in (ax.Location(), ax.XDirection(), ax.YDirection()))

                def plane(u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
                    S = o + u[:, None] * x + v[:, None] * y
                    return S, np.broadcast_to(x, S.shape).copy(), np.broadcast_to(y, S.shape).copy()

                return plane
            if self.type in ("cylinder", "cone", "sphere", "torus"):
                return self._make_quadric_eval()
            if self.type in ("bspline", "bezier"):
                return self._make_bspline_eval()
        except Exception as exc:
            log.debug("numpy evaluation unavailable for face %d (%s): %s", self.index, self.type, exc)
        return None

    def _make_quadric_eval(self) -> Any:
        a = self._adaptor
        geom = {"cylinder": a.Cylinder, "cone": a.Cone, "sphere": a.Sphere, "torus": a.Torus}[self.type]()
        ax = geom.Position()
        o, X, Y, Z = (
            np.array(_pnt(v)) for v in (ax.Location(), ax.XDirection(), ax.YDirection(), ax.Direction())
        )
        kind = self.type
        if kind == "cylinder":
            R = geom.Radius()
        elif kind == "cone":
            R, ang = geom.RefRadius(), geom.SemiAngle()
        elif kind == "sphere":
            R = geom.Radius()
        else:
            R, r = geom.MajorRadius(), geom.MinorRadius()

        def quadric(u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
            cu, su = np.cos(u)[:, None], np.sin(u)[:, None]
            radial, dradial = cu * X + su * Y, -su * X + cu * Y
            if kind == "cylinder":
                return o + R * radial + v[:, None] * Z, R * dradial, np.broadcast_to(Z, radial.shape).copy()
            if kind == "cone":
                rho = (R + v * math.sin(ang))[:, None]
                S = o + rho * radial + v[:, None] * math.cos(ang) * Z
                return S, rho * dradial, math.sin(ang) * radial + math.cos(ang) * Z
            if kind == "sphere":
                cv, sv = np.cos(v)[:, None], np.sin(v)[:, None]
                return o + R * cv * radial + R * sv * Z, R * cv * dradial, -R * sv * radial + R * cv * Z
            cv, sv = np.cos(v)[:, None], np.sin(v)[:, None]
            rho = R + r * cv
            return o + rho * radial + r * sv * Z, rho * dradial, -r * sv * radial + r * cv * Z

        return quadric

    def _make_bspline_eval(self) -> Any:
        a = self._adaptor
        if self.type == "bspline":
            s = a.BSpline()
            if s.IsUPeriodic() or s.IsVPeriodic():
                return None
            nu, nv = s.NbUPoles(), s.NbVPoles()
            pu, pv = s.UDegree(), s.VDegree()

            def knots(nk: int, knot: Any, mult: Any) -> FloatArray:
                return np.repeat([knot(i) for i in range(1, nk + 1)], [mult(i) for i in range(1, nk + 1)])

            tu = knots(s.NbUKnots(), s.UKnot, s.UMultiplicity)
            tv = knots(s.NbVKnots(), s.VKnot, s.VMultiplicity)
        else:
            s = a.Bezier()
            nu, nv = s.NbUPoles(), s.NbVPoles()
            pu, pv = nu - 1, nv - 1
            tu = np.r_[np.zeros(nu), np.ones(nu)]
            tv = np.r_[np.zeros(nv), np.ones(nv)]
        poles = np.array([[_pnt(s.Pole(i, j)) for j in range(1, nv + 1)] for i in range(1, nu + 1)])
        rational = s.IsURational() or s.IsVRational()
        weights = (
            np.array([[s.Weight(i, j) for j in range(1, nv + 1)] for i in range(1, nu + 1)])
            if rational
            else None
        )
        return _BSplineEval(poles, weights, tu, tv, pu, pv)

    def derivatives(self, u: Any, v: Any) -> SurfaceSample:
        """Exact point, first derivatives and outward unit normal at parameters (u, v).

        Args:
            u, v: parameters, scalars or arrays of one shape (N,).

        Returns:
            :class:`SurfaceSample` with (N, 3) arrays, part frame, metres.
        """
        u = np.atleast_1d(np.asarray(u, dtype=float)).ravel()
        v = np.atleast_1d(np.asarray(v, dtype=float)).ravel()
        u, v = np.broadcast_arrays(u, v)
        if self._numpy_eval is not None:
            S, Su, Sv = self._numpy_eval(u, v)
        else:
            S, Su, Sv = self._occ_d1(u, v)
        n = _cross(Su, Sv)
        norm = np.sqrt(np.einsum("ij,ij->i", n, n))[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            n = self._sign * n / norm
        return SurfaceSample(S, Su, Sv, n)

    def _occ_d1(self, u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        gp = occ("gp")
        p, du, dv = gp.gp_Pnt(), gp.gp_Vec(), gp.gp_Vec()
        out = np.empty((len(u), 9))
        for k, (uk, vk) in enumerate(zip(u, v, strict=True)):
            self._adaptor.D1(float(uk), float(vk), p, du, dv)
            out[k] = (p.X(), p.Y(), p.Z(), du.X(), du.Y(), du.Z(), dv.X(), dv.Y(), dv.Z())
        return out[:, :3], out[:, 3:6], out[:, 6:]

    def occ_point_normal(self, u: float, v: float) -> tuple[FloatArray, FloatArray]:
        """Point and outward normal from OpenCascade itself (BRepLProp_SLProps), for cross-checks."""
        props = _cls("BRepLProp", "BRepLProp_SLProps")(self._adaptor, float(u), float(v), 1, 1e-9)
        if not props.IsNormalDefined():
            raise GeometryError(f"face {self.index}: normal undefined at (u, v) = ({u}, {v})")
        return np.array(_pnt(props.Value())), self._sign * np.array(_pnt(props.Normal()))

    def evaluate(self, u: Any, v: Any) -> tuple[FloatArray, FloatArray]:
        """Exact points (N, 3) m and outward unit normals (N, 3) at parameters (u, v)."""
        s = self.derivatives(u, v)
        return s.points, s.normals

    # -- projection ----------------------------------------------------------------------------
    def project(self, points: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Project points (N, 3) m onto the face's surface with OpenCascade (GeomAPI_ProjectPointOnSurf).

        Returns:
            uv (N, 2), projected points (N, 3) m, distances (N,) m. NaN where projection fails.
        """
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        surf = static(_cls("BRep", "BRep_Tool"), "Surface")(self.shape)
        u0, u1, v0, v1 = self.uv_bounds
        proj = _cls("GeomAPI", "GeomAPI_ProjectPointOnSurf")()
        gp_Pnt = occ("gp").gp_Pnt
        uv = np.full((len(pts), 2), np.nan)
        out = np.full((len(pts), 3), np.nan)
        dist = np.full(len(pts), np.nan)
        du, dv = 0.1 * (u1 - u0), 0.1 * (v1 - v0)
        for k, p in enumerate(pts):
            proj.Init(gp_Pnt(*p), surf, u0 - du, u1 + du, v0 - dv, v1 + dv)
            if proj.NbPoints() == 0:
                continue
            params = proj.LowerDistanceParameters()
            uv[k] = params if isinstance(params, tuple) else (params[0], params[1])
            out[k] = _pnt(proj.NearestPoint())
            dist[k] = proj.LowerDistance()
        return uv, out, dist

    # -- trimming --------------------------------------------------------------------------------
    @cached_property
    def _uv_loops(self) -> list[Any]:
        """Each wire of the face as a closed matplotlib Path in (u, v)."""
        from matplotlib.path import Path as MplPath

        loops = []
        for wire in _explore(self.shape, "WIRE"):
            pts: list[FloatArray] = []
            wexp = _cls("BRepTools", "BRepTools_WireExplorer")(_wire_cast(wire), self.shape)
            while wexp.More():
                edge = wexp.Current()
                c2d = _cls("BRepAdaptor", "BRepAdaptor_Curve2d")(edge, self.shape)
                straight = c2d.GetType() == occ("GeomAbs").GeomAbs_Line
                t = np.linspace(c2d.FirstParameter(), c2d.LastParameter(), 2 if straight else 400)
                if _is_reversed(edge):
                    t = t[::-1]
                pts.append(np.array([(c2d.Value(x).X(), c2d.Value(x).Y()) for x in t]))
                wexp.Next()
            if pts:
                loop = np.vstack(pts)
                loops.append(MplPath(np.vstack([loop, loop[:1]]), closed=True))
        if not loops:
            raise GeometryError(f"face {self.index} has no boundary wire")
        return loops

    def contains(self, uv: Any) -> NDArray[np.bool_]:
        """True where (u, v) (N, 2) lies inside the trimmed face (even-odd over its wires: holes are out)."""
        uv = np.atleast_2d(np.asarray(uv, dtype=float))
        ok = np.isfinite(uv).all(axis=1)
        res = np.zeros(len(uv), dtype=bool)
        if ok.any():
            parity = np.zeros(int(ok.sum()), dtype=bool)
            for loop in self._uv_loops:
                parity ^= loop.contains_points(uv[ok])
            res[ok] = parity
        return res

    def occ_classify(self, uv: tuple[float, float], tol: float = 1e-9) -> str:
        """OpenCascade's own classification of (u, v): ``"in"``, ``"out"`` or ``"on"`` (for checks)."""
        clf = _cls("BRepClass", "BRepClass_FaceClassifier")(self.shape, occ("gp").gp_Pnt2d(*uv), tol)
        state = clf.State()
        topabs = occ("TopAbs")
        return {topabs.TopAbs_IN: "in", topabs.TopAbs_OUT: "out", topabs.TopAbs_ON: "on"}.get(state, "out")

    def edges(self) -> list[Any]:
        return [_edge_cast(e) for e in _explore(self.shape, "EDGE")]

    def boundary(self, step: float, skip: list[Any] | None = None) -> list[BoundaryEdge]:
        """Boundary edges sampled as 3D polylines with at most ``step`` m between samples.

        Args:
            step: sampling step along each edge, m.
            skip: edges (OpenCascade shapes) to leave out, e.g. edges shared with a neighbour face.
        """
        out = []
        for k, edge in enumerate(self.edges()):
            if static(_cls("BRep", "BRep_Tool"), "Degenerated")(edge):
                continue
            if skip and any(edge.IsSame(s) for s in skip):
                continue
            curve = _cls("BRepAdaptor", "BRepAdaptor_Curve")(edge)
            length = static(_cls("GCPnts", "GCPnts_AbscissaPoint"), "Length")(curve)
            n = max(2, int(math.ceil(length / step)) + 1)
            t = np.linspace(curve.FirstParameter(), curve.LastParameter(), n)
            out.append(BoundaryEdge(k, np.array([_pnt(curve.Value(float(x))) for x in t])))
        return out

    # -- line intersection -----------------------------------------------------------------------
    @cached_property
    def _grid(self) -> tuple[FloatArray, FloatArray]:
        u0, u1, v0, v1 = self.uv_bounds
        uu, vv = np.meshgrid(np.linspace(u0, u1, 65), np.linspace(v0, v1, 65), indexing="ij")
        uv = np.column_stack([uu.ravel(), vv.ravel()])
        return uv, self.derivatives(uv[:, 0], uv[:, 1]).points

    def intersect_lines(self, origins: Any, direction: Any, iterations: int = 30, tol: float = 1e-12
                        ) -> tuple[FloatArray, FloatArray, FloatArray, NDArray[np.bool_]]:
        """Intersect lines ``origins + h * direction`` with the face's surface by Newton iteration.

        Args:
            origins: (K, 3) points on the lines, m.
            direction: (3,) unit direction shared by all lines.

        Returns:
            uv (K, 2), points (K, 3) m, outward normals (K, 3), and a mask (K,) of lines that met
            the surface inside the face's parameter bounds (trimming not applied: see contains()).
        """
        from scipy.spatial import cKDTree

        origins = np.atleast_2d(np.asarray(origins, dtype=float))
        d = np.asarray(direction, dtype=float)
        d = d / np.linalg.norm(d)
        # 2D coordinates across the lines: an orthonormal pair perpendicular to d
        e1 = np.cross(d, [1.0, 0, 0] if abs(d[0]) < 0.9 else [0, 1.0, 0])
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(d, e1)
        guv, gpts = self._grid
        key = tuple(np.round(d, 12))
        cache = self.__dict__.setdefault("_line_trees", {})
        if key not in cache:  # a 2D tree of the grid seen along d gives the Newton start points
            if len(cache) > 8:
                cache.clear()
            cache[key] = cKDTree(np.column_stack([gpts @ e1, gpts @ e2]))
        _, idx = cache[key].query(np.column_stack([origins @ e1, origins @ e2]))
        uv = guv[idx].copy()
        u0, u1, v0, v1 = self.uv_bounds
        lo, hi = np.array([u0, v0]), np.array([u1, v1])
        span = hi - lo
        if isinstance(self._numpy_eval, _BSplineEval):
            ev = self._numpy_eval
            uv = np.ascontiguousarray(uv)
            step = np.linalg.norm(np.diff(origins, axis=0), axis=1)
            chain = np.r_[False, step < 3.0 * np.median(step)] if len(step) else np.zeros(len(origins), bool)
            _bspline_lines_kernel(ev.tu, ev.tv, ev.pu, ev.pv, ev.hom, np.ascontiguousarray(origins), e1, e2, uv,
                                  lo, hi, iterations, tol, chain)
            iterations = 0
        for _ in range(iterations):
            s = self.derivatives(uv[:, 0], uv[:, 1])
            rel = s.points - origins
            # residual: the component of rel perpendicular to d must vanish
            r1, r2 = rel @ e1, rel @ e2
            a11, a12, a21, a22 = s.du @ e1, s.dv @ e1, s.du @ e2, s.dv @ e2
            with np.errstate(all="ignore"):  # 2x2 Newton step by Cramer's rule
                det = a11 * a22 - a12 * a21
                step = np.column_stack([(-r1 * a22 + r2 * a12) / det, (-r2 * a11 + r1 * a21) / det])
            step = np.where(np.isfinite(step), step, 0.0)
            r = np.column_stack([r1, r2])
            # limit the step to a quarter of the domain to keep Newton in the face's patch
            lim = 0.25 * span
            step = np.clip(step, -lim, lim)
            uv = np.clip(uv + step, lo - 0.01 * span, hi + 0.01 * span)
            if np.all(np.abs(r) < tol) and _ > 0:
                break
        s = self.derivatives(uv[:, 0], uv[:, 1])
        rel = s.points - origins
        resid = np.hypot(rel @ e1, rel @ e2)
        inb = np.all((uv >= lo - 1e-9 * span) & (uv <= hi + 1e-9 * span), axis=1)
        converged = (resid < 1e-9) & inb & np.isfinite(s.normals).all(axis=1)
        return uv, s.points, s.normals, converged

    def tessellate(self, deflection: float = 1e-4, angular: float = 0.3) -> Any:
        """This face alone as a trimesh mesh (see :meth:`CadPart.tessellate`)."""
        return _tessellate(self.shape, deflection, angular, [self.shape])


def _bounds(shape: Any) -> tuple[FloatArray, FloatArray]:
    box = _cls("Bnd", "Bnd_Box")()
    bnd = _cls("BRepBndLib", "BRepBndLib")
    try:
        static(bnd, "AddOptimal")(shape, box, False, False)
    except Exception:
        static(bnd, "Add")(shape, box)
    lo, hi = box.CornerMin(), box.CornerMax()
    return np.array(_pnt(lo)), np.array(_pnt(hi))


def _tessellate(shape: Any, deflection: float, angular: float, faces: list[Any]) -> Any:
    import trimesh

    _cls("BRepMesh", "BRepMesh_IncrementalMesh")(shape, float(deflection), False, float(angular), True)
    verts: list[FloatArray] = []
    tris: list[NDArray[np.int64]] = []
    offset = 0
    brep_tool = _cls("BRep", "BRep_Tool")
    for f in faces:
        face = _face_cast(f)
        loc = _cls("TopLoc", "TopLoc_Location")()
        tri = static(brep_tool, "Triangulation")(face, loc)
        if tri is None or (hasattr(tri, "IsNull") and tri.IsNull()):
            continue
        trsf = loc.Transformation()
        nodes = np.array([_pnt(tri.Node(i).Transformed(trsf)) for i in range(1, tri.NbNodes() + 1)])
        tt = np.array([tri.Triangle(i).Get() for i in range(1, tri.NbTriangles() + 1)], dtype=np.int64) - 1
        if _is_reversed(face):
            tt = tt[:, ::-1]
        verts.append(nodes)
        tris.append(tt + offset)
        offset += len(nodes)
    if not verts:
        raise GeometryError("tessellation produced no triangles")
    mesh = trimesh.Trimesh(np.vstack(verts), np.vstack(tris), process=True)
    return mesh


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
            self.faces = [CadFace(_face_cast(f), i) for i, f in enumerate(_explore(self.shape, "FACE"))]
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
        return _bounds(self.shape)

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
        return _tessellate(self.shape, deflection, angular, [f.shape for f in self.faces])

    def write(self, path: str | os.PathLike[str], unit: str = "mm") -> Path:
        """Write STEP (.step/.stp), IGES (.iges/.igs) or BREP (.brep) in ``unit`` (BREP: no unit stored).

        The file is written to a temporary name and renamed, so a failure leaves no partial file.
        """
        path = Path(path)
        kind = CAD_SUFFIXES.get(path.suffix.lower())
        if kind is None:
            raise InputError(f"{path}: unknown CAD suffix (use .step, .iges or .brep)")
        factor = _unit_factor(unit, str(path))
        shape = _scaled(self.shape, 1.0 / factor)  # the shape in the file's unit
        _silence_occ()
        fd, tmp = tempfile.mkstemp(suffix=path.suffix, dir=path.parent if path.parent.exists() else None)
        os.close(fd)
        with _quiet_stdout():
            try:
                if kind == "step":
                    # the writer takes the shape in the session unit (mm) and converts to write.step.unit
                    shape_mm = _scaled(self.shape, 1e3)
                    static(_cls("Interface", "Interface_Static"), "SetCVal")("write.step.unit", _step_unit(unit))
                    writer = _cls("STEPControl", "STEPControl_Writer")()
                    writer.Transfer(shape_mm, occ("STEPControl").STEPControl_AsIs)
                    ok = int(writer.Write(tmp)) == int(occ("IFSelect").IFSelect_RetDone)
                elif kind == "iges":
                    shape_mm = _scaled(self.shape, 1e3)
                    writer = _cls("IGESControl", "IGESControl_Writer")(_step_unit(unit), 1)
                    writer.AddShape(shape_mm)
                    writer.ComputeModel()
                    ok = bool(writer.Write(tmp))
                else:
                    ok = bool(static(_cls("BRepTools", "BRepTools"), "Write")(shape, tmp))
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


def _step_unit(unit: str) -> str:
    return {"mm": "MM", "m": "M", "cm": "CM", "in": "INCH", "inch": "INCH", "um": "UM", "ft": "FT"}.get(
        unit.lower(), unit.upper()
    )


def _unit_factor(unit: str, source: str) -> float:
    key = unit.strip().lower()
    if key not in UNIT_SCALE:
        raise InputError(f"{source}: unknown length unit {unit!r} (known: m, mm, cm, um, in, ft)")
    return UNIT_SCALE[key]


def _scaled(shape: Any, factor: float) -> Any:
    if factor == 1.0:
        return shape
    trsf = occ("gp").gp_Trsf()
    trsf.SetScale(occ("gp").gp_Pnt(0.0, 0.0, 0.0), float(factor))
    return _cls("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()


def transformed(shape: Any, matrix: Any) -> Any:
    """A copy of ``shape`` moved by the rigid transform ``matrix`` (4, 4)."""
    m = np.asarray(matrix, dtype=float)
    trsf = occ("gp").gp_Trsf()
    trsf.SetValues(*m[0, :4], *m[1, :4], *m[2, :4])
    return _cls("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a CAD or mesh file")
    if path.stat().st_size == 0:
        raise GeometryError(f"{path}: the file is empty")


def _read_step(path: Path, unit: str | None) -> tuple[Any, str]:
    reader = _cls("STEPControl", "STEPControl_Reader")()
    status = reader.ReadFile(str(path))
    if int(status) != int(occ("IFSelect").IFSelect_RetDone):
        raise GeometryError(f"{path}: not a readable STEP file (OpenCascade status {status})")
    seq = _collection("Sequence_TCollection_AsciiString")
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
        return _scaled(shape, _unit_factor(unit, str(path))), unit
    # the reader converted the file's unit to the session unit (millimetres unless changed)
    session_mm = float(reader.SystemLengthUnit()) if hasattr(reader, "SystemLengthUnit") else 1.0
    return _scaled(shape, session_mm * 1e-3), str(file_unit)


def _read_iges(path: Path, unit: str | None) -> tuple[Any, str]:
    reader = _cls("IGESControl", "IGESControl_Reader")()
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
    return _scaled(reader.OneShape(), 1e-3), file_unit


def _read_brep(path: Path, unit: str | None) -> tuple[Any, str]:
    if unit is None:
        raise InputError(f"{path}: BREP files carry no length unit; state it (unit='mm', CLI --unit mm)")
    shape = _cls("TopoDS", "TopoDS_Shape")()
    builder = _cls("BRep", "BRep_Builder")()
    try:
        ok = static(_cls("BRepTools", "BRepTools"), "Read")(shape, str(path), builder)
    except Exception as exc:
        raise GeometryError(f"{path}: not a readable BREP file ({exc})") from exc
    if not ok or shape.IsNull():
        raise GeometryError(f"{path}: not a readable BREP file")
    return _scaled(shape, _unit_factor(unit, str(path))), unit


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
    _check_file(path)
    suffix = path.suffix.lower()
    if suffix in MESH_SUFFIXES:
        return read_mesh(path, unit)
    kind = CAD_SUFFIXES.get(suffix)
    if kind is None:
        raise InputError(f"{path}: unknown file type {suffix!r} (STEP, IGES, BREP, STL, PLY or OBJ)")
    if unit is not None:
        _unit_factor(unit, str(path))
    _silence_occ()
    with _quiet_stdout():
        shape, file_unit = {"step": _read_step, "iges": _read_iges, "brep": _read_brep}[kind](path, unit)
    if shape is None or shape.IsNull():
        raise GeometryError(f"{path}: the file holds no shape")
    return CadPart(shape, source=str(path), unit=file_unit)


# --------------------------------------------------------------------------------------------
# meshes
# --------------------------------------------------------------------------------------------


class MeshFace:
    """A whole triangle mesh treated as one face. Normals are interpolated vertex normals:
    approximate (the exact surface is unknown)."""

    is_mesh = True
    type = "mesh"
    reversed = False

    def __init__(self, mesh: Any, index: int = 0) -> None:
        self.mesh = mesh
        self.index = index

    @property
    def area(self) -> float:
        return float(self.mesh.area)

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        b = np.asarray(self.mesh.bounds, dtype=float)
        return b[0], b[1]

    def info(self) -> FaceInfo:
        lo, hi = self.bounds
        return FaceInfo(self.index, "mesh", self.area, tuple(lo), tuple(hi), (0.0, 0.0, 0.0, 0.0))

    #: dihedral angle above which a mesh edge counts as a boundary (a sharp edge of a solid), rad
    SHARP = math.radians(45.0)

    def boundary(self, step: float, skip: list[Any] | None = None) -> list[BoundaryEdge]:
        """Open edges (used by one triangle) and sharp edges (dihedral > 45 deg) as 2-point polylines."""
        import trimesh

        groups = trimesh.grouping.group_rows(self.mesh.edges_sorted, require_count=1)
        edges = [self.mesh.edges_sorted[groups]]
        sharp = self.mesh.face_adjacency_angles > self.SHARP
        edges.append(self.mesh.face_adjacency_edges[sharp])
        all_edges = np.vstack(edges)
        return [BoundaryEdge(k, self.mesh.vertices[e]) for k, e in enumerate(all_edges)]

    def up(self) -> FloatArray:
        """Viewing direction of a mesh: its area-weighted mean normal if open, +z for a closed solid."""
        if self.mesh.is_watertight:
            return np.array([0.0, 0.0, 1.0])
        n = np.sum(self.mesh.face_normals * self.mesh.area_faces[:, None], axis=0)
        norm = np.linalg.norm(n)
        return n / norm if norm > 0 else np.array([0.0, 0.0, 1.0])

    def intersect_lines(self, origins: Any, direction: Any) -> tuple[FloatArray, FloatArray, FloatArray,
                                                                       NDArray[np.bool_]]:
        """First hits of lines along -direction from far above; normals from barycentric vertex normals."""
        origins = np.atleast_2d(np.asarray(origins, dtype=float))
        d = np.asarray(direction, dtype=float)
        d = d / np.linalg.norm(d)
        lo, hi = self.bounds
        reach = float(np.linalg.norm(hi - lo)) + 1.0
        start = origins - ((origins - lo) @ d)[:, None] * d + reach * d
        locs, ray_idx, tri_idx = self.mesh.ray.intersects_location(
            start, np.broadcast_to(-d, start.shape), multiple_hits=False
        )
        pts = np.full((len(origins), 3), np.nan)
        nrm = np.full((len(origins), 3), np.nan)
        hit = np.zeros(len(origins), dtype=bool)
        if len(ray_idx):
            import trimesh

            pts[ray_idx] = locs
            bary = trimesh.triangles.points_to_barycentric(self.mesh.triangles[tri_idx], locs)
            vn = self.mesh.vertex_normals[self.mesh.faces[tri_idx]]
            n = np.einsum("kj,kjc->kc", bary, vn)
            nrm[ray_idx] = n / np.linalg.norm(n, axis=1, keepdims=True)
            hit[ray_idx] = True
        return np.full((len(origins), 2), np.nan), pts, nrm, hit

    def contains(self, uv: Any) -> NDArray[np.bool_]:
        return np.ones(len(np.atleast_2d(uv)), dtype=bool)

    def edges(self) -> list[Any]:
        return []


@dataclass
class MeshPart:
    """A triangle mesh part (metres) with one face: the whole mesh."""

    mesh: Any
    source: str = "<memory>"
    unit: str = "m"

    is_mesh = True

    def __post_init__(self) -> None:
        self.faces = [MeshFace(self.mesh, 0)]

    def face(self, index: int) -> MeshFace:
        if index != 0:
            raise InputError(f"{self.source}: face index {index} out of range 0..0 (a mesh is one face)")
        return self.faces[0]

    def list_faces(self) -> list[FaceInfo]:
        return [self.faces[0].info()]

    @property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        return self.faces[0].bounds

    def shared_edges(self, indices: list[int]) -> dict[int, list[Any]]:
        return {i: [] for i in indices}

    def tessellate(self, deflection: float = 1e-4, angular: float = 0.3) -> Any:
        return self.mesh


def read_mesh(path: str | os.PathLike[str], unit: str | None) -> MeshPart:
    """Read an STL/PLY/OBJ mesh with trimesh, scaled to metres; warns that normals are approximate."""
    import trimesh

    path = Path(path)
    _check_file(path)
    if unit is None:
        raise InputError(f"{path}: mesh files carry no length unit; state it (unit='mm', CLI --unit mm)")
    factor = _unit_factor(unit, str(path))
    try:
        mesh = trimesh.load(str(path), force="mesh", process=True)
    except Exception as exc:
        raise GeometryError(f"{path}: not a readable mesh ({exc})") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise GeometryError(f"{path}: the mesh has no triangles")
    if not np.isfinite(mesh.vertices).all():
        raise GeometryError(f"{path}: the mesh has NaN or infinite vertices")
    mesh.apply_scale(factor)
    warnings.warn(
        f"{path}: planning on a mesh; normals come from the triangles and are approximate", stacklevel=2
    )
    return MeshPart(mesh, source=str(path), unit=unit)


def load_part(source: str | os.PathLike[str], unit: str | None = None) -> CadPart | MeshPart:
    """A built-in part by name (see robot_grinding_sim.core.geometry.parts) or a CAD/mesh file path."""
    from robot_grinding_sim.core.geometry import parts

    name = str(source)
    if name in parts.BUILTIN_PARTS:
        part = read_cad(parts.part_path(name))
        part.source = name
        return part
    if not Path(name).exists() and Path(name).suffix == "":
        raise InputError(
            f"{name}: neither a file nor a built-in part (built-in: {', '.join(parts.BUILTIN_PARTS)})"
        )
    return read_cad(name, unit)


# --------------------------------------------------------------------------------------------
# construction (used by robot_grinding_sim.core.geometry.parts and the tests)
# --------------------------------------------------------------------------------------------


def make_box(size: Any, origin: Any = (0.0, 0.0, 0.0)) -> Any:
    """A box solid of ``size`` (3,) m with its min corner at ``origin`` (3,) m."""
    gp = occ("gp")
    make = _cls("BRepPrimAPI", "BRepPrimAPI_MakeBox")
    return make(gp.gp_Pnt(*map(float, origin)), *map(float, size)).Shape()


def make_sphere(radius: float, center: Any = (0.0, 0.0, 0.0)) -> Any:
    """A sphere solid, m."""
    make = _cls("BRepPrimAPI", "BRepPrimAPI_MakeSphere")
    return make(occ("gp").gp_Pnt(*map(float, center)), float(radius)).Shape()


def make_cylinder(radius: float, height: float, origin: Any = (0.0, 0.0, 0.0), axis: Any = (0.0, 0.0, 1.0),
                  xdir: Any | None = None, angle: float = 2 * math.pi) -> Any:
    """A cylinder (or cylindrical sector of ``angle`` rad, starting at ``xdir``) solid, m."""
    gp = occ("gp")
    o, z = gp.gp_Pnt(*map(float, origin)), gp.gp_Dir(*map(float, axis))
    ax = gp.gp_Ax2(o, z) if xdir is None else gp.gp_Ax2(o, z, gp.gp_Dir(*map(float, xdir)))
    make = _cls("BRepPrimAPI", "BRepPrimAPI_MakeCylinder")
    return make(ax, float(radius), float(height), float(angle)).Shape()


def cut(a: Any, b: Any) -> Any:
    """Boolean difference a - b."""
    op = _cls("BRepAlgoAPI", "BRepAlgoAPI_Cut")(a, b)
    if not op.IsDone():
        raise GeometryError("boolean cut failed")
    return op.Shape()


def make_bspline_face(poles: Any, degree: tuple[int, int] = (3, 3)) -> Any:
    """A face on a clamped, uniform B-spline surface with control net ``poles`` (nu, nv, 3) m."""
    P = np.asarray(poles, dtype=float)
    nu, nv = P.shape[:2]
    pu, pv = degree
    arr = _collection("Array2_gp_Pnt")(1, nu, 1, nv)
    gp = occ("gp")
    for i in range(nu):
        for j in range(nv):
            arr.SetValue(i + 1, j + 1, gp.gp_Pnt(*P[i, j]))

    def knots(n: int, p: int) -> tuple[Any, Any]:
        inner = n - p - 1
        vals = np.linspace(0.0, 1.0, inner + 2)
        mults = [p + 1] + [1] * inner + [p + 1]
        k = _collection("Array1_double")(1, len(vals))
        m = _collection("Array1_int")(1, len(vals))
        for i, (x, mu) in enumerate(zip(vals, mults, strict=True)):
            k.SetValue(i + 1, float(x))
            m.SetValue(i + 1, int(mu))
        return k, m

    ku, mu = knots(nu, pu)
    kv, mv = knots(nv, pv)
    surf = _cls("Geom", "Geom_BSplineSurface")(arr, ku, kv, mu, mv, pu, pv, False, False)
    face = _cls("BRepBuilderAPI", "BRepBuilderAPI_MakeFace")(surf, 1e-9)
    if not face.IsDone():
        raise GeometryError("could not make a face on the B-spline surface")
    return face.Face()


def make_prism(face: Any, vector: Any) -> Any:
    """Sweep a face along ``vector`` (3,) m into a solid."""
    return _cls("BRepPrimAPI", "BRepPrimAPI_MakePrism")(face, occ("gp").gp_Vec(*map(float, vector))).Shape()


def rotated(shape: Any, axis: Any, angle: float, point: Any = (0.0, 0.0, 0.0)) -> Any:
    """A copy of ``shape`` rotated by ``angle`` rad about the line through ``point`` along ``axis``."""
    gp = occ("gp")
    trsf = gp.gp_Trsf()
    trsf.SetRotation(gp.gp_Ax1(gp.gp_Pnt(*map(float, point)), gp.gp_Dir(*map(float, axis))), float(angle))
    return _cls("BRepBuilderAPI", "BRepBuilderAPI_Transform")(shape, trsf, True).Shape()
