"""Test helpers: faces of every surface type written with OpenCascade, and coverage / stepover of a set
of passes measured on those faces with OpenCascade alone (not with the planner's own sampling).

Coverage: the share (by area) of the faces' upward-facing interior (outward normal z >= 0, farther
than ``margin`` from the boundary of the face set, seam and shared edges not counting) that lies
within ``0.6 * stepover`` of a pass polyline. The faces are sampled on a fine grid of their surface
parameters (BRepAdaptor_Surface.D1, area weight |S_u x S_v| du dv), kept where
IntTools_FClass2d says the point is inside the trimmed face; the boundary is sampled along
each edge's 3D curve (BRepAdaptor_Curve) every 0.1 mm.

Stepover: for points every ``stepover / 10`` along each pass, the distance to the nearest point of
any other pass; the share of pass length where it is within 10 % of the stepover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from robot_grinding_sim.core.geometry import cad, shapes
from robot_grinding_sim.core.geometry.occ_adapter import (
    edge_cast,
    explore,
    face_cast,
    occ,
    occ_class,
    static,
)

# ------------------------------------------------------------------------------------------------
# faces
# ------------------------------------------------------------------------------------------------


def _gp(*xyz: float) -> Any:
    return occ("gp").gp_Pnt(*map(float, xyz))


def _dir(*xyz: float) -> Any:
    return occ("gp").gp_Dir(*map(float, xyz))


def _faces(shape: Any) -> list[Any]:
    return [face_cast(f) for f in explore(shape, "FACE")]


def _kind(face: Any) -> str:
    return cad.CadPart(face).faces[0].type


def _pick(shape: Any, kind: str) -> int:
    """Index of the first face of ``kind`` in ``shape``."""
    part = cad.CadPart(shape)
    return next(f.index for f in part.faces if f.type == kind)


def plane_with_holes() -> tuple[Any, list[int]]:
    """The top of a 100 x 80 x 10 mm plate with two through holes (r 10 and 8 mm)."""
    plate = shapes.make_box((0.1, 0.08, 0.01))
    for x, y, r in ((0.03, 0.04, 0.01), (0.07, 0.03, 0.008)):
        plate = shapes.cut(plate, shapes.make_cylinder(r, 0.03, (x, y, -0.01)))
    part = cad.CadPart(plate)
    top = next(f.index for f in part.faces if f.type == "plane" and f.evaluate(
        [sum(f.uv_bounds[:2]) / 2], [sum(f.uv_bounds[2:]) / 2])[1][0, 2] > 0.99 and f.bounds[0][2] > 0.009)
    return plate, [top]


def full_cylinder() -> tuple[Any, list[int]]:
    """A whole cylinder r 23 mm, 80 mm long, axis horizontal (x): wraps all the way round."""
    cyl = shapes.make_cylinder(0.023, 0.08, (0.0, 0.0, 0.03), axis=(1.0, 0.0, 0.0))
    return cyl, [_pick(cyl, "cylinder")]


def half_pipe() -> tuple[Any, list[int]]:
    """A concave half pipe: a 80 x 70 x 40 mm block with a r 30 mm channel along x."""
    block = shapes.make_box((0.08, 0.07, 0.04))
    cyl = shapes.make_cylinder(0.03, 0.12, (-0.02, 0.035, 0.04), axis=(1.0, 0.0, 0.0))
    shape = shapes.cut(block, cyl)
    return shape, [_pick(shape, "cylinder")]


def cone() -> tuple[Any, list[int]]:
    """A whole cone, axis horizontal (x), radii 30 -> 12 mm over 70 mm."""
    ax = occ("gp").gp_Ax2(_gp(0.0, 0.0, 0.04), _dir(1.0, 0.0, 0.0))
    shape = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeCone")(ax, 0.03, 0.012, 0.07).Shape()
    return shape, [_pick(shape, "cone")]


def sphere() -> tuple[Any, list[int]]:
    """A whole sphere r 35 mm (the upward half is a dome)."""
    shape = shapes.make_sphere(0.035, (0.0, 0.0, 0.04))
    return shape, [_pick(shape, "sphere")]


def torus() -> tuple[Any, list[int]]:
    """A whole torus, axis z, radii 45 / 15 mm."""
    ax = occ("gp").gp_Ax2(_gp(0.0, 0.0, 0.02), _dir(0.0, 0.0, 1.0))
    shape = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeTorus")(ax, 0.045, 0.015).Shape()
    return shape, [_pick(shape, "torus")]


def revolution() -> tuple[Any, list[int]]:
    """A surface of revolution: a B-spline profile swept 300 deg about an axis tilted 25 deg from horizontal."""
    arr = occ("collections").Array1_gp_Pnt(1, 5)
    for i, (x, r) in enumerate(((0.0, 0.02), (0.02, 0.03), (0.04, 0.026), (0.06, 0.034), (0.08, 0.022))):
        arr.SetValue(i + 1, _gp(x, 0.0, r))
    curve = occ_class("GeomAPI", "GeomAPI_PointsToBSpline")(arr).Curve()
    edge = occ_class("BRepBuilderAPI", "BRepBuilderAPI_MakeEdge")(curve).Edge()
    tilt = math.radians(25.0)
    axis = occ("gp").gp_Ax1(_gp(0.0, 0.0, 0.0), _dir(1.0, 0.0, 0.0))
    shape = occ_class("BRepPrimAPI", "BRepPrimAPI_MakeRevol")(edge, axis, math.radians(300.0)).Shape()
    shape = shapes.rotated(shape, (0.0, 1.0, 0.0), -tilt)  # the axis tilted 25 deg up from x
    shape = shapes.rotated(shape, (1.0, 0.0, 0.0), math.radians(-60.0))  # the open 60 deg off the top
    return shape, [0]


def freeform_wrap(wrap_deg: float = 270.0) -> tuple[Any, list[int]]:
    """A freeform B-spline sheet wrapped ``wrap_deg`` about the x axis, radius varying along and
    around (a bulging, twisted tube section): convex, the upward part's normals span 180 deg."""
    nu, nv = 9, 13
    x = np.linspace(0.0, 0.09, nu)
    phi = np.radians(np.linspace(-0.5 * wrap_deg, 0.5 * wrap_deg, nv))
    P = np.zeros((nu, nv, 3))
    for i, xi in enumerate(x):
        for j, pj in enumerate(phi):
            r = 0.03 + 0.006 * math.sin(2.0 * math.pi * xi / 0.09) * math.cos(pj) + 0.003 * math.sin(2 * pj)
            a = pj + 0.25 * xi / 0.09  # twist
            P[i, j] = (xi, r * math.sin(a), 0.05 + r * math.cos(a))
    face = shapes.make_bspline_face(P)
    return face, [0]


def freeform_panel(size: float = 0.2) -> tuple[Any, list[int]]:
    """A ``size`` x ``size`` m freeform B-spline height field (saddle and bumps)."""
    n = 8
    g = np.linspace(0.0, size, n)
    P = np.zeros((n, n, 3))
    for i in range(n):
        for j in range(n):
            x, y = g[i], g[j]
            P[i, j] = (x, y, 0.02 * math.sin(3 * x / size) * math.cos(4 * y / size) + 0.15 * (x - y) ** 2 / size)
    return shapes.make_bspline_face(P), [0]


def filleted_block() -> tuple[Any, list[int]]:
    """A 80 x 60 x 40 mm block with a r 15 mm fillet on one top edge: the top and the fillet, ground
    as one surface across their tangent edge."""
    box = shapes.make_box((0.08, 0.06, 0.04))
    fil = occ_class("BRepFilletAPI", "BRepFilletAPI_MakeFillet")(box)
    for e in explore(box, "EDGE"):
        c = occ_class("BRepAdaptor", "BRepAdaptor_Curve")(edge_cast(e))
        p0, p1 = c.Value(c.FirstParameter()), c.Value(c.LastParameter())
        if abs(p0.Z() - 0.04) < 1e-9 and abs(p1.Z() - 0.04) < 1e-9 and abs(p0.Y() - 0.06) < 1e-9 \
                and abs(p1.Y() - 0.06) < 1e-9:
            fil.Add(0.015, edge_cast(e))
    shape = fil.Shape()
    part = cad.CadPart(shape)
    top = next(f.index for f in part.faces if f.type == "plane" and f.bounds[0][2] > 0.0399)
    rnd = next(f.index for f in part.faces if f.type == "cylinder")
    return shape, [top, rnd]


def rounded_top() -> tuple[Any, list[int]]:
    """A 80 x 60 x 30 mm block with r 12 mm fillets on its four top edges: the top and the four
    fillets (mitred at the corners) ground as one surface, down to where the fillets turn vertical."""
    box = shapes.make_box((0.08, 0.06, 0.03))
    fil = occ_class("BRepFilletAPI", "BRepFilletAPI_MakeFillet")(box)
    for e in explore(box, "EDGE"):
        c = occ_class("BRepAdaptor", "BRepAdaptor_Curve")(edge_cast(e))
        p0, p1 = c.Value(c.FirstParameter()), c.Value(c.LastParameter())
        if abs(p0.Z() - 0.03) < 1e-9 and abs(p1.Z() - 0.03) < 1e-9:
            fil.Add(0.012, edge_cast(e))
    shape = fil.Shape()
    part = cad.CadPart(shape)
    faces = [f.index for f in part.faces if f.type == "cylinder" or (f.type == "plane" and f.bounds[0][2] > 0.0299)]
    return shape, faces


FACES = {
    "plane_holes": plane_with_holes,
    "cylinder": full_cylinder,
    "half_pipe": half_pipe,
    "cone": cone,
    "sphere": sphere,
    "torus": torus,
    "revolution": revolution,
    "freeform_wrap": freeform_wrap,
    "filleted": filleted_block,
    "rounded_top": rounded_top,
}

# ------------------------------------------------------------------------------------------------
# measurement
# ------------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Coverage figures (see the module docstring). Areas in m^2, lengths in m."""

    coverage: float
    area: float
    uncovered_area: float
    worst_gap: float
    stepover_ok: float  # share of pass length with the distance to the nearest other pass within 10 %
    pass_length: float
    uncovered: np.ndarray  # (K, 3) m, the uncovered sample points


def _edge_samples(face: Any, skip: list[Any], step: float) -> list[np.ndarray]:
    brep = occ_class("BRep", "BRep_Tool")
    out = []
    for e in explore(face, "EDGE"):
        e = edge_cast(e)
        if static(brep, "Degenerated")(e) or static(brep, "IsClosed")(e, face):
            continue  # pole or seam: not boundary
        if any(e.IsSame(s) for s in skip):
            continue
        c = occ_class("BRepAdaptor", "BRepAdaptor_Curve")(e)
        length = static(occ_class("GCPnts", "GCPnts_AbscissaPoint"), "Length")(c)
        t = np.linspace(c.FirstParameter(), c.LastParameter(), max(2, int(length / step) + 2))
        out.append(np.array([(p.X(), p.Y(), p.Z()) for p in (c.Value(float(x)) for x in t)]))
    return out


def _surface_samples(face: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points (K, 3), outward normals (K, 3), area weights (K,) inside the trimmed face."""
    ad = occ_class("BRepAdaptor", "BRepAdaptor_Surface")(face, True)
    u0, u1, v0, v1 = static(occ_class("BRepTools", "BRepTools"), "UVBounds")(face)
    clf = occ_class("IntTools", "IntTools_FClass2d")(face, 1e-9)
    gp = occ("gp")
    inside = occ("TopAbs").TopAbs_IN
    sign = -1.0 if face.Orientation() == occ("TopAbs").TopAbs_REVERSED else 1.0
    # a finer grid along the longer parameter direction (by 3D length)
    p, du, dv = gp.gp_Pnt(), gp.gp_Vec(), gp.gp_Vec()
    ad.D1(0.5 * (u0 + u1), 0.5 * (v0 + v1), p, du, dv)
    lu, lv = du.Magnitude() * (u1 - u0), dv.Magnitude() * (v1 - v0)
    nu = int(max(40, n * math.sqrt(max(lu, 1e-9) / max(lv, 1e-9))))
    nv = int(max(40, n * n / nu))
    us = u0 + (np.arange(nu) + 0.5) * (u1 - u0) / nu
    vs = v0 + (np.arange(nv) + 0.5) * (v1 - v0) / nv
    rows = []
    cell = (u1 - u0) / nu * (v1 - v0) / nv
    for u in us:
        for v in vs:
            if clf.Perform(gp.gp_Pnt2d(float(u), float(v))) != inside:
                continue
            ad.D1(float(u), float(v), p, du, dv)
            rows.append((p.X(), p.Y(), p.Z(), du.X(), du.Y(), du.Z(), dv.X(), dv.Y(), dv.Z()))
    a = np.array(rows).reshape(-1, 9)
    c = np.cross(a[:, 3:6], a[:, 6:9])
    m = np.linalg.norm(c, axis=1)
    keep = m > 0
    return a[keep, :3], sign * c[keep] / m[keep, None], m[keep] * cell


def _dense(points: np.ndarray, step: float) -> np.ndarray:
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    s = np.r_[0.0, np.cumsum(seg)]
    t = np.linspace(0.0, s[-1], max(2, int(math.ceil(s[-1] / step)) + 1))
    return np.column_stack([np.interp(t, s, points[:, k]) for k in range(3)])


def measure(shape: Any, faces: list[int], polylines: list[np.ndarray], stepover: float, margin: float,
            n: int = 220, approach: Any = (0.0, 0.0, 1.0)) -> Coverage:
    """Coverage and stepover of pass polylines (list of (N, 3) m) on faces ``faces`` of ``shape``: of
    the part of the faces whose outward normal faces ``approach`` (n . approach >= 0; default up)."""
    occ_faces = _faces(shape)
    sel = [occ_faces[i] for i in faces]
    shared = [e for i, f in enumerate(sel) for e in (edge_cast(x) for x in explore(f, "EDGE"))
              if any(e.IsSame(edge_cast(o)) for j, g in enumerate(sel) if j != i for o in explore(g, "EDGE"))]
    bnd = [b for f in sel for b in _edge_samples(f, shared, 1e-4)]
    samples = [_surface_samples(f, n) for f in sel]
    pts = np.vstack([s[0] for s in samples])
    nrm = np.vstack([s[1] for s in samples])
    w = np.concatenate([s[2] for s in samples])
    bdist = cKDTree(np.vstack(bnd)).query(pts)[0] if bnd else np.full(len(pts), np.inf)
    valid = (nrm @ np.asarray(approach, dtype=float) >= 0.0) & (bdist > margin)
    dense = [_dense(np.asarray(p, float), stepover / 20) for p in polylines if len(p) >= 2]
    if dense:
        d = cKDTree(np.vstack(dense)).query(pts[valid])[0]
    else:
        d = np.full(int(valid.sum()), np.inf)
    ok = d <= 0.6 * stepover
    area = float(w[valid].sum())
    cov = float(w[valid][ok].sum() / area) if area > 0 else 0.0
    # stepover: distance from each pass to the nearest other pass, per length
    within, total = 0.0, 0.0
    along = [_dense(np.asarray(p, float), stepover / 10) for p in polylines if len(p) >= 2]
    labels = np.concatenate([np.full(len(a), k) for k, a in enumerate(dense)]) if dense else np.zeros(0)
    allpts = np.vstack(dense) if dense else np.zeros((0, 3))
    for k, a in enumerate(along):
        others = allpts[labels != k]
        if not len(others):
            continue
        dd = cKDTree(others).query(a)[0]
        within += float(np.sum(np.abs(dd - stepover) <= 0.1 * stepover))
        total += len(a)
    length = float(sum(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1)) for p in polylines if len(p) >= 2))
    return Coverage(cov, area, float(w[valid][~ok].sum()), float(d.max()) if len(d) else 0.0,
                    within / total if total else 0.0, length, pts[valid][~ok])
