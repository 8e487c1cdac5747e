"""Waypoints of the geodesic generator on the exact CAD surface: the level curves' dense polylines
(:class:`Piece`) resampled every ``spacing`` by chord length on the exact surface and projected on
it (Gauss-Newton on the face's exact evaluation), with waypoints near an edge shared by two faces
of the set moved to the face that contains them.

Shapes: points (K, 3) m in the part frame, uv (K, 2) surface parameters, face (K,) face indices
of the part; normals outward, unit.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass
class Piece:
    """A run of a level curve: dense points (K, 3) m, their (u, v) guesses (K, 2), face (K,)."""

    level: int
    points: FloatArray
    uv: FloatArray
    face: NDArray[np.int64]
    value: FloatArray | None = None  # (K,) the region value interpolated from the mesh (m), if known


def length(points: FloatArray) -> float:
    return float(np.sum(np.linalg.norm(np.diff(points, axis=0), axis=1)))


def flip(pc: Piece) -> Piece:
    return Piece(pc.level, pc.points[::-1], pc.uv[::-1], pc.face[::-1])


# ------------------------------------------------------------------------------------------------
# exact waypoints
# ------------------------------------------------------------------------------------------------


PERIODS: weakref.WeakKeyDictionary[Any, tuple[float, float]] = weakref.WeakKeyDictionary()


def periods(face: Any) -> tuple[float, float]:
    """(u period, v period) of a face's surface, 0 where not periodic."""
    from robot_grinding_sim.core.geometry.occ_adapter import occ_class

    if face not in PERIODS:
        ad = occ_class("BRepAdaptor", "BRepAdaptor_Surface")(face.shape, True)
        PERIODS[face] = (ad.UPeriod() if ad.IsUPeriodic() else 0.0, ad.VPeriod() if ad.IsVPeriodic() else 0.0)
    return PERIODS[face]


def project_exact(face: Any, points: FloatArray, uv: FloatArray, iterations: int = 12
                  ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closest points of the face's surface to ``points`` (K, 3) m from (u, v) guesses (K, 2)
    (Gauss-Newton on the exact evaluation). Returns uv (K, 2), points (K, 3) m, outward normals (K, 3).
    A mesh face (no exact surface): its closest points and interpolated normals, uv NaN."""
    if getattr(face, "is_mesh", False):
        return face.project_exact(points, uv)
    uv = np.array(uv, dtype=float)
    u0, u1, v0, v1 = face.uv_bounds
    span = np.array([u1 - u0, v1 - v0])
    for _ in range(iterations):
        s = face.derivatives(uv[:, 0], uv[:, 1])
        r = points - s.points
        a11 = np.einsum("ij,ij->i", s.du, s.du)
        a12 = np.einsum("ij,ij->i", s.du, s.dv)
        a22 = np.einsum("ij,ij->i", s.dv, s.dv)
        b1 = np.einsum("ij,ij->i", s.du, r)
        b2 = np.einsum("ij,ij->i", s.dv, r)
        with np.errstate(all="ignore"):
            det = a11 * a22 - a12 * a12
            step = np.column_stack([(a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det])
        step = np.where(np.isfinite(step), step, 0.0)
        step = np.clip(step, -0.05 * span, 0.05 * span)
        uv += step
        moved = np.abs(step[:, 0]) * np.sqrt(a11) + np.abs(step[:, 1]) * np.sqrt(a22)
        if not np.any(moved > 1e-11):
            break
    pu, pv = periods(face)
    if pu > 0:
        uv[:, 0] = u0 + np.mod(uv[:, 0] - u0, pu)
    if pv > 0:
        uv[:, 1] = v0 + np.mod(uv[:, 1] - v0, pv)
    s = face.derivatives(uv[:, 0], uv[:, 1])
    return uv, s.points, s.normals


def resample(piece: Piece, t: FloatArray) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
    """Points (K, 3) at arc lengths ``t`` (K,) m along a piece's dense polyline, with (u, v)
    guesses (K, 2) and faces (K,) from the piece's nearest dense point."""
    P = piece.points
    s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(P, axis=0), axis=1))]
    pts = np.column_stack([np.interp(t, s, P[:, k]) for k in range(3)])
    j = np.clip(np.searchsorted(s, t, side="right") - 1, 0, len(s) - 2)
    f = np.clip((t - s[j]) / np.maximum(s[j + 1] - s[j], 1e-300), 0.0, 1.0)
    same = piece.face[j] == piece.face[j + 1]
    jump = np.abs(piece.uv[j + 1] - piece.uv[j])
    smooth = same & (jump.max(axis=1) < 0.25 * np.maximum(np.abs(piece.uv).max(), 1e-9))
    near = np.where(f < 0.5, j, j + 1)
    uv = np.where(smooth[:, None], piece.uv[j] + f[:, None] * (piece.uv[j + 1] - piece.uv[j]), piece.uv[near])
    return pts, uv, piece.face[near]


def stations(total: float, spacing: float) -> FloatArray:
    """Arc lengths 0, spacing, 2 spacing, ... and ``total`` (m): the end takes the place of the last
    station when nearer to it than half the spacing (a waypoint a hair from the end would turn the
    tool by the pass end's change of tangent in no distance: a joint velocity spike)."""
    t = np.arange(0.0, total, spacing)
    if total - t[-1] <= 1e-6 * spacing:
        return t
    if len(t) > 1 and total - t[-1] < 0.5 * spacing:
        return np.r_[t[:-1], total]
    return np.r_[t, total]


def exact_waypoints(gp: Any, pieces: list[Piece]) -> list[tuple[FloatArray, ...]]:
    """Waypoints every ``spacing`` (chord on the exact surface) along each piece: per piece points
    (K, 3), normals (K, 3), uv (K, 2), faces (K,) and the distance each moved when projected (K,).

    The positions along the dense polyline are corrected until the chords between the exact points
    are the spacing (all pieces at once, at most ten rounds)."""
    sp = gp.p.spacing
    t_of: list[FloatArray] = []
    for pc in pieces:
        t_of.append(stations(length(pc.points), sp))
    out: list[Any] = [None] * len(pieces)
    todo = list(range(len(pieces)))
    for round_ in range(10):
        res = [resample(pieces[i], t_of[i]) for i in todo]
        sizes = [len(r[0]) for r in res]
        pts = np.vstack([r[0] for r in res])
        uv = np.vstack([r[1] for r in res])
        face = np.concatenate([r[2] for r in res])
        ex_uv, ex_pts, ex_n = np.empty_like(uv), np.empty_like(pts), np.empty_like(pts)
        for fi in np.unique(face):
            sel = face == fi
            ex_uv[sel], ex_pts[sel], ex_n[sel] = project_exact(gp.gen.part.face(int(fi)), pts[sel], uv[sel])
        moved = np.linalg.norm(ex_pts - pts, axis=1)
        nxt = []
        for i, idx in zip(todo, np.split(np.arange(len(pts)), np.cumsum(sizes)[:-1]), strict=True):
            out[i] = (ex_pts[idx], ex_n[idx], ex_uv[idx], face[idx], moved[idx])
            chord = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(ex_pts[idx], axis=0), axis=1))]
            if len(idx) < 3 or not np.all(np.diff(chord) > 0) or round_ == 9:
                continue
            if not np.any(np.abs(np.diff(chord)[:-1] - sp) > 2e-3 * sp):
                continue
            t_of[i] = np.interp(stations(chord[-1], sp), chord, t_of[i])
            nxt.append(i)
        todo = nxt
        if not todo:
            break
    if len(gp.gen.indices) > 1:
        out = [other_face(gp, *x) for x in out]
    return out


def other_face(gp: Any, pts: FloatArray, nrm: FloatArray, uv: FloatArray, face: NDArray[np.int64],
                moved: FloatArray) -> tuple[FloatArray, ...]:
    """Waypoints projected on a face that does not contain them (next to an edge shared by two
    faces of the set): onto the neighbour that does (OpenCascade's projection)."""
    inside = np.ones(len(pts), dtype=bool)
    for fi in np.unique(face):
        sel = face == fi
        inside[sel] = gp.gen.part.face(int(fi)).contains(uv[sel])
    if inside.all():
        return pts, nrm, uv, face, moved
    pts, nrm, uv, face, moved = pts.copy(), nrm.copy(), uv.copy(), face.copy(), moved.copy()
    for k in np.flatnonzero(~inside):
        for fi in gp.gen.indices:
            if fi == face[k]:
                continue
            f = gp.gen.part.face(fi)
            guv, _, dist = f.project(pts[k:k + 1])
            if np.isfinite(dist[0]) and dist[0] < gp.mesh.h and f.contains(guv)[0]:
                guv, gpt, gn = project_exact(f, pts[k:k + 1], guv)
                pts[k], nrm[k], uv[k], face[k] = gpt[0], gn[0], guv[0], fi
                break
    return pts, nrm, uv, face, moved


@dataclass
class Pass:
    """One pass: a contiguous run of waypoints on the surface, in the order of travel.

    Arrays (N = number of waypoints), part frame, metres:
        points (N, 3): contact points on the exact surface.
        normals (N, 3): outward unit normals there.
        tangents (N, 3): unit travel directions (tangent to the surface and to the pass).
        arc (N,): arc length from the start of the pass, m.
        uv (N, 2): surface parameters (NaN for meshes).
        face (N,): index of the face each point lies on.
    """

    index: int
    row: int
    segment: int
    points: FloatArray
    normals: FloatArray
    tangents: FloatArray
    arc: FloatArray
    uv: FloatArray
    face: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.points)

    def reversed(self) -> Pass:
        total = self.arc[-1]
        return Pass(self.index, self.row, self.segment, self.points[::-1].copy(), self.normals[::-1].copy(),
                    -self.tangents[::-1], (total - self.arc[::-1]).copy(), self.uv[::-1].copy(),
                    self.face[::-1].copy())


def crop_pass(p: Pass, face_of: Any, length: float) -> Pass:
    """The middle ``length`` m of a pass (the whole pass if shorter): waypoints inside kept, new end
    points on the exact surface (``face_of(index)`` -> the face, for its ``evaluate``)."""
    total = float(p.arc[-1])
    if length >= total:
        return p
    a0, a1 = 0.5 * (total - length), 0.5 * (total + length)
    inner = np.flatnonzero((p.arc > a0) & (p.arc < a1))
    arc = np.r_[a0, p.arc[inner], a1]

    def at(values: FloatArray) -> FloatArray:
        return np.column_stack([np.interp(arc, p.arc, values[:, j]) for j in range(values.shape[1])])

    uv = at(p.uv)
    points, normals = at(p.points), at(p.normals)
    face = np.r_[p.face[max(inner[0] - 1, 0) if len(inner) else 0], p.face[inner],
                 p.face[min(inner[-1] + 1, len(p) - 1) if len(inner) else -1]]
    for k in (0, len(arc) - 1):
        if np.all(np.isfinite(uv[k])):  # an exact end point (CAD faces have uv)
            pt, nr = face_of(int(face[k])).evaluate(uv[k:k + 1, 0], uv[k:k + 1, 1])
            points[k], normals[k] = pt[0], nr[0]
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    tangents = at(p.tangents)
    tangents -= np.sum(tangents * normals, axis=1, keepdims=True) * normals
    tangents /= np.linalg.norm(tangents, axis=1, keepdims=True)
    return Pass(p.index, p.row, p.segment, points, normals, tangents, arc - a0, uv, face)
