"""One face of a CAD part evaluated exactly: points, derivatives, outward normals, projection,
trimming, boundary, iso curves and plane sections.

Normals: :meth:`CadFace.evaluate` returns the outward normal of the face: the normal of the
underlying surface, ``S_u x S_v / |S_u x S_v|``, flipped when the face is REVERSED in its shell
(:attr:`CadFace.orientation_sign`). For the faces of a closed solid this points out of the
material. Evaluation is vectorised: plane, cylinder, cone, sphere, torus, Bezier and
(non-periodic) B-spline faces are evaluated in NumPy/numba from the exact surface definition
OpenCascade holds (same formulas, to rounding); other surface types fall back to OpenCascade
point by point. Metres, part frame.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GeometryError
from robot_grinding_sim.core.geometry.analytic import AnalyticEval
from robot_grinding_sim.core.geometry.bspline import BSplineEval, bspline_lines_kernel
from robot_grinding_sim.core.geometry.occ_adapter import (
    edge_cast,
    explore,
    face_cast,
    is_reversed,
    occ,
    occ_class,
    pnt,
    static,
    wire_cast,
)
from robot_grinding_sim.core.robot.spatial import cross_rows

log = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]

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
        self.reversed = is_reversed(shape)
        self._adaptor = occ_class("BRepAdaptor", "BRepAdaptor_Surface")(shape, True)
        self.type = _enum_label(self._adaptor.GetType(), _SURFACE_KINDS, "other")
        self.orientation_sign = -1.0 if self.reversed else 1.0
        self.surface_eval = self._make_numpy_eval()

    # -- basic properties ----------------------------------------------------------------------
    @cached_property
    def uv_bounds(self) -> tuple[float, float, float, float]:
        """(u_min, u_max, v_min, v_max) of the face's trimmed parameter domain."""
        return tuple(float(x) for x in static(occ_class("BRepTools", "BRepTools"), "UVBounds")(self.shape))

    @cached_property
    def area(self) -> float:
        """Area in m^2."""
        props = occ_class("GProp", "GProp_GProps")()
        static(occ_class("BRepGProp", "BRepGProp"), "SurfaceProperties")(self.shape, props)
        return float(props.Mass())

    @cached_property
    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """Axis-aligned bounds (min (3,), max (3,)) in m, from the exact geometry (optimal box)."""
        return shape_bounds(self.shape)

    def info(self) -> FaceInfo:
        lo, hi = self.bounds
        return FaceInfo(self.index, self.type, self.area, tuple(lo), tuple(hi), self.uv_bounds)

    # -- evaluation ----------------------------------------------------------------------------
    def _make_numpy_eval(self) -> Any:
        a = self._adaptor
        try:
            if self.type == "plane":
                ax = a.Plane().Position()
                o, x, y, z = (np.array(pnt(v)) for v in (ax.Location(), ax.XDirection(), ax.YDirection(),
                                                         ax.Direction()))
                return AnalyticEval("plane", o, x, y, z)
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
            np.array(pnt(v)) for v in (ax.Location(), ax.XDirection(), ax.YDirection(), ax.Direction())
        )
        kind = self.type
        if kind in ("cylinder", "sphere"):
            params: tuple[float, ...] = (geom.Radius(),)
        elif kind == "cone":
            params = (geom.RefRadius(), geom.SemiAngle())
        else:
            params = (geom.MajorRadius(), geom.MinorRadius())
        return AnalyticEval(kind, o, X, Y, Z, params)

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
        poles = np.array([[pnt(s.Pole(i, j)) for j in range(1, nv + 1)] for i in range(1, nu + 1)])
        rational = s.IsURational() or s.IsVRational()
        weights = (
            np.array([[s.Weight(i, j) for j in range(1, nv + 1)] for i in range(1, nu + 1)])
            if rational
            else None
        )
        return BSplineEval(poles, weights, tu, tv, pu, pv)

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
        if self.surface_eval is not None:
            S, Su, Sv = self.surface_eval(u, v)
        else:
            S, Su, Sv = self._occ_d1(u, v)
        n = cross_rows(Su, Sv)
        norm = np.sqrt(np.einsum("ij,ij->i", n, n))[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            n = self.orientation_sign * n / norm
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
        props = occ_class("BRepLProp", "BRepLProp_SLProps")(self._adaptor, float(u), float(v), 1, 1e-9)
        if not props.IsNormalDefined():
            raise GeometryError(f"face {self.index}: normal undefined at (u, v) = ({u}, {v})")
        return np.array(pnt(props.Value())), self.orientation_sign * np.array(pnt(props.Normal()))

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
        surf = static(occ_class("BRep", "BRep_Tool"), "Surface")(self.shape)
        u0, u1, v0, v1 = self.uv_bounds
        proj = occ_class("GeomAPI", "GeomAPI_ProjectPointOnSurf")()
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
            out[k] = pnt(proj.NearestPoint())
            dist[k] = proj.LowerDistance()
        return uv, out, dist

    # -- trimming --------------------------------------------------------------------------------
    @cached_property
    def _uv_loops(self) -> list[Any]:
        """Each wire of the face as a closed matplotlib Path in (u, v)."""
        from matplotlib.path import Path as MplPath

        loops = []
        for wire in explore(self.shape, "WIRE"):
            pts: list[FloatArray] = []
            wexp = occ_class("BRepTools", "BRepTools_WireExplorer")(wire_cast(wire), self.shape)
            while wexp.More():
                edge = wexp.Current()
                c2d = occ_class("BRepAdaptor", "BRepAdaptor_Curve2d")(edge, self.shape)
                straight = c2d.GetType() == occ("GeomAbs").GeomAbs_Line
                t = np.linspace(c2d.FirstParameter(), c2d.LastParameter(), 2 if straight else 400)
                if is_reversed(edge):
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

    def trims_its_box(self, rel_tol: float = 1e-7) -> bool:
        """True if the face is less than its parameter box: a wire leaves the box's edges (a hole,
        a trimmed edge) by more than ``rel_tol`` of the box's larger side, or there is more than one wire."""
        u0, u1, v0, v1 = self.uv_bounds
        tol = rel_tol * max(u1 - u0, v1 - v0)
        loops = self._uv_loops
        for loop in loops:
            V = loop.vertices
            d = np.minimum.reduce([np.abs(V[:, 0] - u0), np.abs(V[:, 0] - u1), np.abs(V[:, 1] - v0),
                                   np.abs(V[:, 1] - v1)])
            if (d > tol).any():
                return True
        return len(loops) > 1

    def occ_classify(self, uv: tuple[float, float], tol: float = 1e-9) -> str:
        """OpenCascade's own classification of (u, v): ``"in"``, ``"out"`` or ``"on"`` (for checks)."""
        clf = occ_class("BRepClass", "BRepClass_FaceClassifier")(self.shape, occ("gp").gp_Pnt2d(*uv), tol)
        state = clf.State()
        topabs = occ("TopAbs")
        return {topabs.TopAbs_IN: "in", topabs.TopAbs_OUT: "out", topabs.TopAbs_ON: "on"}.get(state, "out")

    def edges(self) -> list[Any]:
        return [edge_cast(e) for e in explore(self.shape, "EDGE")]

    def boundary(self, step: float, skip: list[Any] | None = None) -> list[BoundaryEdge]:
        """Boundary edges sampled as 3D polylines with at most ``step`` m between samples.

        Args:
            step: sampling step along each edge, m.
            skip: edges (OpenCascade shapes) to leave out, e.g. edges shared with a neighbour face.
        """
        out = []
        for k, edge in enumerate(self.edges()):
            if static(occ_class("BRep", "BRep_Tool"), "Degenerated")(edge):
                continue
            if skip and any(edge.IsSame(s) for s in skip):
                continue
            curve = occ_class("BRepAdaptor", "BRepAdaptor_Curve")(edge)
            length = static(occ_class("GCPnts", "GCPnts_AbscissaPoint"), "Length")(curve)
            n = max(2, int(math.ceil(length / step)) + 1)
            t = np.linspace(curve.FirstParameter(), curve.LastParameter(), n)
            out.append(BoundaryEdge(k, np.array([pnt(curve.Value(float(x))) for x in t])))
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
        if isinstance(self.surface_eval, BSplineEval):
            ev = self.surface_eval
            uv = np.ascontiguousarray(uv)
            step = np.linalg.norm(np.diff(origins, axis=0), axis=1)
            chain = np.r_[False, step < 3.0 * np.median(step)] if len(step) else np.zeros(len(origins), bool)
            bspline_lines_kernel(ev.tu, ev.tv, ev.pu, ev.pv, ev.hom, np.ascontiguousarray(origins), e1, e2, uv,
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
        return tessellate_faces(self.shape, deflection, angular, [self.shape])


def shape_bounds(shape: Any) -> tuple[FloatArray, FloatArray]:
    box = occ_class("Bnd", "Bnd_Box")()
    bnd = occ_class("BRepBndLib", "BRepBndLib")
    try:
        static(bnd, "AddOptimal")(shape, box, False, False)
    except Exception:
        static(bnd, "Add")(shape, box)
    lo, hi = box.CornerMin(), box.CornerMax()
    return np.array(pnt(lo)), np.array(pnt(hi))


def tessellate_faces(shape: Any, deflection: float, angular: float, faces: list[Any]) -> Any:
    import trimesh

    occ_class("BRepMesh", "BRepMesh_IncrementalMesh")(shape, float(deflection), False, float(angular), True)
    verts: list[FloatArray] = []
    tris: list[NDArray[np.int64]] = []
    offset = 0
    brep_tool = occ_class("BRep", "BRep_Tool")
    for f in faces:
        face = face_cast(f)
        loc = occ_class("TopLoc", "TopLoc_Location")()
        tri = static(brep_tool, "Triangulation")(face, loc)
        if tri is None or (hasattr(tri, "IsNull") and tri.IsNull()):
            continue
        trsf = loc.Transformation()
        nodes = np.array([pnt(tri.Node(i).Transformed(trsf)) for i in range(1, tri.NbNodes() + 1)])
        tt = np.array([tri.Triangle(i).Get() for i in range(1, tri.NbTriangles() + 1)], dtype=np.int64) - 1
        if is_reversed(face):
            tt = tt[:, ::-1]
        verts.append(nodes)
        tris.append(tt + offset)
        offset += len(nodes)
    if not verts:
        raise GeometryError("tessellation produced no triangles")
    mesh = trimesh.Trimesh(np.vstack(verts), np.vstack(tris), process=True)
    return mesh


