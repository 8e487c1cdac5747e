"""Geodesic parallel passes: the ``geodesic`` generator, which covers curved, wrapped and trimmed faces.

Method:

1. The face set is meshed (:mod:`~robot_grinding_sim.core.planning.surface_mesh`, edges about a
   third of the stepover) over the part that looks up: outward normal ``n . z >= min_normal_z``
   (part frame; -0.05 by default, so that passes reach the rim where the normal turns horizontal).
2. A guide curve: the section of the surface by the plane that contains the guide direction
   (the part's x axis seen along the region's mean normal, or its y axis where the region is
   longer that way, turned by ``angle``) and the mean normal, through the region's centroid.
3. The geodesic distance from the guide (fast marching on the mesh,
   :mod:`~robot_grinding_sim.core.planning.fast_marching`), signed by the side of the plane.
4. The passes are level curves of that distance. Over the region that counts (inside the faces,
   farther than ``margin`` from the boundary of the face set, looking up), the distance spans
   [d_min, d_max]; the levels run from ``d_min + s'/2`` to ``d_max - s'/2`` with ``s'`` the
   stepover adjusted (by at most half a stepover over the whole width) so that both ends sit half
   a step in. Adjacent levels of a distance function are ``s'`` apart measured on the surface
   (geodesic), whatever the curvature; every point of the region is within ``s'/2`` of a level
   along its gradient line; no pass is iso-parametric.
5. Each level curve is cut where it leaves the faces, comes closer than ``margin`` to the
   boundary or turns down (ends refined to the crossing), joined across the edges shared by
   adjacent faces, resampled every ``spacing`` by arc length and projected exactly onto the CAD
   surface (Gauss-Newton on the exact evaluation, 1e-10 m).
6. Gaps: the planner's own coverage is measured on the mesh; where the region still has points
   farther than ``0.55 s`` from every pass (a boundary that runs along the levels at an
   intermediate distance, a cut behind a hole), a short pass is added on the level through them.

Seams and poles are no boundary: the mesh is welded there and passes run across (a whole cylinder,
a sphere, a face wrapped past 180 deg). Metres, part frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.planning import fast_marching as fm
from robot_grinding_sim.core.planning.surface_mesh import SurfaceMesh, area_above, build_mesh, build_triangle_mesh
from robot_grinding_sim.core.planning.waypoints import Pass, Piece, exact_waypoints, flip, length, project_exact

FloatArray = NDArray[np.float64]

#: outward normals with n . a below this (a: the approach direction) are out of reach (the tool would point
#: against the approach)
MIN_NORMAL_Z = -0.05
#: waypoints keep this much more than the margin from the boundary, m (chord error of its polylines)
MARGIN_SAFETY = 1e-5
#: the longest mesh edge, m (the grid follows curvature and trimming no coarser than this)
MAX_EDGE = 0.0025
#: pieces of a level curve shorter than this (stepovers) are left out (a level grazing the region's edge)
MIN_PIECE = 0.5
#: an end point at the margin nearer than this many spacings to the pass's end waypoint replaces it
END_MERGE = 0.5
#: uncovered clusters smaller than this (stepover^2) get no pass of their own (the sawtooth where
#: passes meet an oblique boundary at the margin: a sliver between pass ends)
MIN_GAP = 0.5
#: a point is covered when a pass is this close, in stepovers (the acceptance is 0.6)
COVER_RADIUS = 0.55


@dataclass
class CoverageReport:
    """The planner's own coverage figures on its mesh (see :func:`mesh_coverage`).

    coverage: share of the region's area within ``COVER_RADIUS`` stepovers of a pass (0..1);
    area, uncovered_area: m^2; worst_gap: largest distance from a region point to a pass, m;
    uncovered: (K, 3) m, the uncovered region points (for plots).
    """

    coverage: float
    area: float
    uncovered_area: float
    worst_gap: float
    uncovered: FloatArray
    unreachable_area: float = 0.0  # m^2 of the region the ball cannot touch without cutting in (gouge.py)
    tool_reach: dict[str, Any] | None = None  # the waypoints taken out for that (gouge.drop_gouging)
    # the whole selected faces and what is left out of the region measured above (m^2): ``face_area``
    # = ``area`` + ``unreachable_area`` (the tool cannot touch without cutting the part) +
    # ``away_area`` (faces away from the approach) + ``margin_area`` (within the margin of the
    # boundary); ``arm_unreachable_area``: the arm cannot reach (None: not checked, no robot)
    face_area: float | None = None
    away_area: float = 0.0
    margin_area: float = 0.0
    arm_unreachable_area: float | None = None
    arm_reach: dict[str, Any] | None = None  # the waypoints taken out for that (arm_reach.trim_unreachable)

    @property
    def covered_area(self) -> float:
        """m^2 of the region within the cover radius of a pass."""
        return self.area - self.uncovered_area

    @property
    def coverage_of_face(self) -> float | None:
        """The covered share of the whole selected faces (0..1), None when their area is not known."""
        return None if not self.face_area else self.covered_area / self.face_area

    def as_dict(self) -> dict[str, Any]:
        out = {"coverage": self.coverage, "area_m2": self.area, "uncovered_area_m2": self.uncovered_area,
               "worst_gap_m": self.worst_gap, "radius_stepovers": COVER_RADIUS,
               "unreachable_area_m2": self.unreachable_area, "face_area_m2": self.face_area,
               "coverage_of_face": self.coverage_of_face,
               "excluded_m2": {"faces_away_from_the_approach": self.away_area,
                               "within_the_margin": self.margin_area,
                               "tool_cannot_touch_without_cutting_the_part": self.unreachable_area,
                               "arm_cannot_reach": self.arm_unreachable_area}}
        if self.arm_reach is not None:
            out["arm_reach"] = self.arm_reach
        return out if self.tool_reach is None else {**out, "tool_reach": self.tool_reach}


class GeodesicPasses:
    """Level curves of the geodesic distance from a guide (see the module docstring).

    Args:
        gen: the :class:`~robot_grinding_sim.core.planning.passes.PassGenerator` (part, faces,
            parameters, boundary of the face set for the margin).
    """

    def __init__(self, gen: Any, distance: bool = True) -> None:
        self.gen = gen
        self.p = gen.params
        s = self.p.stepover
        h = min(s / 3.0, max(self.p.spacing, s / 6.0), MAX_EDGE)
        approach_of = getattr(gen, "approach_of", None) or {i: np.array([0.0, 0.0, 1.0]) for i in gen.indices}
        self.approach_of = approach_of
        build = build_triangle_mesh if gen.part.is_mesh else build_mesh
        self.mesh: SurfaceMesh = build(gen.part, gen.indices, h, MIN_NORMAL_Z, approach_of)
        # each vertex's approach direction: its face's (welded and shared vertices: one of them)
        self.vertex_approach = np.zeros((self.mesh.n, 3))
        T = self.mesh.triangles
        keys = np.array(sorted(approach_of), dtype=np.int64)
        tri_dir = np.array([approach_of[int(k)] for k in keys], dtype=float)[np.searchsorted(keys, self.mesh.face)]
        for k in range(3):
            self.vertex_approach[T[:, k]] = tri_dir
        self.region = self._region()
        if not self.region.any():
            raise PlanningError(f"faces {gen.indices}: no part of the faces is farther than the margin "
                                f"{self.p.margin} m from the boundary and faces the approach direction "
                                f"{_fmt_dirs(approach_of)}; give another with passes.approach_direction "
                                "(--approach-direction)")
        w = self.mesh.area[self.region]
        up = (self.mesh.normals[self.region] * w[:, None]).sum(axis=0)
        self.up = up / np.linalg.norm(up) if np.linalg.norm(up) > 0 else np.array([0.0, 0.0, 1.0])
        self.distance = self._distance() if distance else np.zeros(self.mesh.n)

    def measure(self, polylines: list[FloatArray], planned: list[FloatArray] | None = None) -> CoverageReport:
        """The planner's own coverage of the region by pass polylines (list of (N, 3) m), on the part
        of it the tool reaches when ``reach`` ((n,) bool, gouge.py) is set. ``planned``: the passes
        before the waypoints the arm cannot reach were taken out (arm_reach.py): what they alone
        would cover is the area the arm cannot reach (``arm_unreachable_area``), left out of the
        region measured."""
        reach = getattr(self, "reach", None)
        region = self.region if reach is None else self.region & reach
        arm = None
        if planned is not None:
            s, near = self.p.stepover, COVER_RADIUS * self.p.stepover
            gap_all = mesh_coverage(self.mesh, region, planned, s)[1]
            gap_kept = mesh_coverage(self.mesh, region, polylines, s)[1]
            arm = region & (gap_all <= near) & (gap_kept > near)
            region = region & ~arm
        report = mesh_coverage(self.mesh, region, polylines, self.p.stepover)[0]
        if reach is not None:
            report.unreachable_area = float(self.mesh.area[self.region & ~reach].sum())
        if arm is not None:
            report.arm_unreachable_area = float(self.mesh.area[arm].sum())
        return self.account(report)

    def account(self, report: CoverageReport) -> CoverageReport:
        """``report`` with the whole faces' area and the parts left out of its region (see
        :class:`CoverageReport`): the faces' own area (exact on CAD faces, the triangles' on a
        mesh), the mesh's area inside the faces facing the approach, the margin band within it."""
        m = self.mesh
        facing = np.einsum("ij,ij->i", np.nan_to_num(m.normals), self.vertex_approach)
        b = self.gen.boundary.distance_below(m.points, self.p.margin + 3.0 * m.h)
        inside = np.where(m.inside, b, -b)  # signed distance to the faces' boundary, m (> 0 inside)
        face_area = float(sum(self.gen.part.face(i).area for i in self.gen.indices))
        # areas where the linear interpolation of a vertex value is positive: no half-cell bias at
        # the edges as a sum of vertex areas has
        toward = area_above(m, np.minimum(inside, facing * self.p.stepover))
        report.face_area = face_area
        report.away_area = max(0.0, face_area - toward)
        report.margin_area = max(0.0, toward - area_above(m, self.value))
        return report

    # -- region and distance field ----------------------------------------------------------------
    def _region(self) -> NDArray[np.bool_]:
        """Vertices where the region value (see :meth:`region_value`) is positive."""
        self.value = self.region_value()
        return self.value > 0

    def region_value(self) -> FloatArray:
        """(n,) m: > 0 on the region that counts (inside, farther than the margin from the boundary,
        normal z >= 0), < 0 off it; continuous, so that the region's edge lies where it crosses 0."""
        m = self.mesh
        b = self.gen.boundary.distance_below(m.points, self.p.margin + 3.0 * m.h)
        signed = np.where(m.inside, b, -b) - self.p.margin
        facing = np.einsum("ij,ij->i", np.nan_to_num(m.normals), self.vertex_approach)
        return np.minimum(signed, facing * self.p.stepover)

    def direction(self) -> tuple[FloatArray, FloatArray]:
        """Guide direction d (3,) and the guide plane's normal ``side`` (3,), unit, part frame: the
        part's x axis seen along "up", or its y axis where the region is longer that way (by over
        5 %), turned by ``angle`` about "up"."""
        if "_direction" in self.__dict__:
            return self.__dict__["_direction"]
        up = self.up
        ref = np.array([1.0, 0.0, 0.0]) - up[0] * up
        if np.linalg.norm(ref) < 1e-6:
            ref = np.array([0.0, 1.0, 0.0]) - up[1] * up
        ref /= np.linalg.norm(ref)
        other = np.cross(up, ref)
        pts = self.mesh.points[self.region]
        if len(pts) and np.ptp(pts @ other) > 1.05 * np.ptp(pts @ ref):  # clearly longer along y
            ref = other
        a = float(self.p.angle)
        d = math.cos(a) * ref + math.sin(a) * np.cross(up, ref)
        self.__dict__["_direction"] = (d, np.cross(up, d))
        return self.__dict__["_direction"]

    def _distance(self) -> FloatArray:
        m = self.mesh
        _, side = self.direction()
        w = m.area * self.region
        centroid = (m.points * w[:, None]).sum(axis=0) / w.sum()
        g = (m.points - centroid) @ side
        if not ((g[self.region] > 0).any() and (g[self.region] <= 0).any()):  # the plane misses the region
            idx = np.flatnonzero(self.region)
            c = m.points[idx[np.argmin(np.linalg.norm(m.points[idx] - centroid, axis=1))]]
            g = (m.points - c) @ side
        T = m.triangles
        gt = g[T]
        cross = (gt.max(axis=1) > 0) & (gt.min(axis=1) <= 0)
        d0 = np.full(m.n, np.inf)
        tc = T[cross]  # (k, 3): the triangles the plane cuts; each has two edges that cross it
        gc = g[tc]
        ends = []
        for e in range(3):
            a, b = tc[:, e], tc[:, (e + 1) % 3]
            ga, gb = gc[:, e], gc[:, (e + 1) % 3]
            hit = (ga > 0) != (gb > 0)
            with np.errstate(all="ignore"):
                f = np.where(hit, ga / (ga - gb), 0.0)
            ends.append((hit, m.points[a] + f[:, None] * (m.points[b] - m.points[a])))
        # the two crossing points of each cut triangle
        hits = np.stack([h for h, _ in ends], axis=1)
        pts = np.stack([q for _, q in ends], axis=1)
        two = hits.sum(axis=1) == 2
        first = np.argmax(hits, axis=1)
        second = 2 - np.argmax(hits[:, ::-1], axis=1)
        rows = np.arange(len(tc))
        A, B = pts[rows, first][two], pts[rows, second][two]
        AB = B - A
        L2 = np.maximum(np.einsum("ij,ij->i", AB, AB), 1e-300)
        for j in range(3):
            v = tc[two, j]
            f = np.clip(np.einsum("ij,ij->i", m.points[v] - A, AB) / L2, 0.0, 1.0)
            dist = np.linalg.norm(m.points[v] - A - f[:, None] * AB, axis=1)
            np.minimum.at(d0, v, dist)
        if not np.isfinite(d0).any():
            raise PlanningError(f"faces {self.gen.indices}: the guide plane misses the faces")
        vt_ptr, vt_idx = fm.vertex_triangles(T, m.n)
        lk_ptr, lk_idx = fm.csr_links(m.links, m.n)
        dist = fm.fast_marching(np.ascontiguousarray(m.points), np.ascontiguousarray(T), vt_ptr, vt_idx, lk_ptr,
                                lk_idx, d0)
        return np.where(g > 0, dist, -dist)

    # -- passes -----------------------------------------------------------------------------------
    def extent(self) -> tuple[float, float]:
        """Range of the distance over the region, its edge found between vertices (linear), m."""
        m = self.mesh
        d, r = self.distance, self.value
        ok = self.region & np.isfinite(d)
        vals = [d[ok]]
        T = m.triangles
        e = np.vstack([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]])
        e = e[ok[e[:, 0]] != ok[e[:, 1]]]
        e = np.where(ok[e[:, 0]][:, None], e, e[:, ::-1])  # (in, out)
        e = e[np.isfinite(d[e]).all(axis=1)]
        if len(e):
            f = np.clip(r[e[:, 0]] / (r[e[:, 0]] - r[e[:, 1]]), 0.0, 1.0)
            vals.append(d[e[:, 0]] + f * (d[e[:, 1]] - d[e[:, 0]]))
        allv = np.concatenate(vals)
        return float(allv.min()), float(allv.max())

    def levels(self) -> FloatArray:
        """Distances of the passes, m (see the module docstring)."""
        s = self.p.stepover
        lo, hi = self.extent()
        width = hi - lo
        if width <= s:
            return np.array([0.5 * (lo + hi)])
        # n + 1 levels `step` apart, the ends `e` in from the region's edges: the step as near the
        # stepover as can be with 0.2 s <= e <= 0.55 s (the ends stay covered)
        best = None
        for n in range(max(1, int((width - 1.1 * s) / (1.1 * s))), int(width / (0.9 * s)) + 2):
            step = min(max((width - s) / n, 0.9 * s), 1.1 * s)
            e = 0.5 * (width - n * step)
            if not 0.2 * s <= e <= 0.55 * s:
                step = (width - 2.0 * min(max(e, 0.2 * s), 0.55 * s)) / n
                e = 0.5 * (width - n * step)
            key = abs(step / s - 1.0)
            if best is None or key < best[0] - 1e-12:
                best = (key, n, step, e)
        _, n, step, e = best
        return lo + e + step * np.arange(n + 1)

    def level_pieces(self, levels: FloatArray) -> list[Piece]:
        """The level curves as dense polylines (mesh resolution), cut to the region, joined across faces."""
        m = self.mesh
        lev, tri, ends, wt, keys = fm.level_segments(self.distance, m.triangles, np.ascontiguousarray(levels))
        if not len(lev):
            return []
        uniq, inv = np.unique(keys.ravel(), return_inverse=True)
        node = inv.reshape(-1, 2).astype(np.int64)
        order, starts, flip = fm.chain_segments(node, len(uniq))
        # a crossing's point and, from one triangle containing it, its (u, v) and face
        pa, pb = m.points[ends[..., 0]], m.points[ends[..., 1]]
        pts = pa + wt[..., None] * (pb - pa)  # (s, 2, 3)
        T = m.triangles
        uvs = np.empty((len(lev), 2, 2))
        for j in range(2):
            ca = np.argmax(T[tri] == ends[:, j, 0:1], axis=1)
            cb = np.argmax(T[tri] == ends[:, j, 1:2], axis=1)
            ua = m.corner_uv[tri, ca]
            ub = m.corner_uv[tri, cb]
            uvs[:, j] = ua + wt[:, j, None] * (ub - ua)
        faces = m.face[tri]
        va, vb = self.value[ends[..., 0]], self.value[ends[..., 1]]
        with np.errstate(invalid="ignore"):  # inf far from the boundary: nan, measured exactly in _cut
            vals = va + wt * (vb - va)  # (s, 2)
        pieces: list[Piece] = []
        for c in range(len(starts) - 1):
            seq = order[starts[c]:starts[c + 1]]
            fl = flip[starts[c]:starts[c + 1]]
            if len(seq) == 0:
                continue
            first = np.where(fl, 0, 1)  # the end each segment is walked to
            start_pt = pts[seq[0], 1 if fl[0] else 0]
            P = np.vstack([start_pt, pts[seq, first]])
            UV = np.vstack([uvs[seq[0], 1 if fl[0] else 0], uvs[seq, first]])
            F = np.r_[faces[seq[0]], faces[seq]]
            V = np.r_[vals[seq[0], 1 if fl[0] else 0], vals[seq, first]]
            pieces.append(Piece(int(lev[seq[0]]), P, UV, F, V))
        return self._cut(pieces)

    def fill_gaps(self, pieces: list[Piece], gap: FloatArray) -> list[Piece]:
        """Short passes on the levels through the region's uncovered clusters (see the module docstring).

        ``gap`` (n,): distance from each mesh vertex of the region to the nearest pass, m.
        """
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components
        from scipy.spatial import cKDTree

        s = self.p.stepover
        m = self.mesh
        bad = self.region & (gap > COVER_RADIUS * s)
        if not bad.any():
            return []
        T = m.triangles
        e = np.vstack([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]])
        e = e[bad[e[:, 0]] & bad[e[:, 1]]]
        ids = np.flatnonzero(bad)
        local = np.full(m.n, -1)
        local[ids] = np.arange(len(ids))
        g = coo_matrix((np.ones(len(e)), (local[e[:, 0]], local[e[:, 1]])), shape=(len(ids), len(ids)))
        n_c, label = connected_components(g, directed=False)
        clusters = [ids[label == c] for c in range(n_c)]
        clusters = [c for c in clusters if m.area[c].sum() >= MIN_GAP * s * s]
        if not clusters:
            return []
        levels = np.array([float(np.median(self.distance[c])) for c in clusters])
        order = np.argsort(levels)
        found = self.level_pieces(levels[order])
        base = 1 + max((pc.level for pc in pieces), default=0)
        out: list[Piece] = []
        for rank, c in enumerate(order):
            near = cKDTree(m.points[clusters[c]])
            for pc in found:
                if pc.level != rank:
                    continue
                close = near.query(pc.points, distance_upper_bound=s)[0] < s
                edges = np.diff(np.r_[0, close.astype(np.int8), 0])
                for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
                    if b - a >= 2:
                        out.append(Piece(base + int(c), pc.points[a:b], pc.uv[a:b], pc.face[a:b]))
        return out

    def edge_points(self, p_in: FloatArray, p_out: FloatArray, uv: FloatArray, face: NDArray[np.int64],
                    iterations: int = 24) -> tuple[FloatArray, FloatArray, FloatArray, NDArray[np.bool_]]:
        """Where the segments p_in (K, 3) (usable) -> p_out (K, 3) (not) leave the usable region, on
        the exact surface (bisection): points (K, 3), normals (K, 3), uv (K, 2), and whether each is
        worth adding (farther than 1e-3 stepover from p_in)."""
        K = len(p_in)
        lo, hi = np.zeros(K), np.ones(K)
        pts, nrm, uvs = p_in.copy(), np.full((K, 3), np.nan), uv.copy()
        found = np.zeros(K, dtype=bool)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            q = p_in + mid[:, None] * (p_out - p_in)
            for fi in np.unique(face):
                sel = face == fi
                guv, gp, gn = project_exact(self.gen.part.face(int(fi)), q[sel], uv[sel])
                ok = self.margin_value(gp, guv, face[sel]) >= 0.0
                idx = np.flatnonzero(sel)
                lo[idx[ok]] = mid[idx[ok]]
                hi[idx[~ok]] = mid[idx[~ok]]
                pts[idx[ok]], nrm[idx[ok]], uvs[idx[ok]] = gp[ok], gn[ok], guv[ok]
                found[idx[ok]] = True
        useful = found & (lo * np.linalg.norm(p_out - p_in, axis=1) >= 1e-3 * self.p.stepover)
        return pts, nrm, uvs, useful

    def margin_value(self, pts: FloatArray, uv: FloatArray, face: NDArray[np.int64]) -> FloatArray:
        """> 0 inside the region a pass may use, < 0 outside (m; -inf off the trimmed faces)."""
        val = np.full(len(pts), np.inf)
        if self.p.margin > 0:  # a hair more than the margin: the boundary polylines are chords of the edges
            val = self.gen.boundary.distance_below(pts, self.p.margin + self.mesh.h) - self.p.margin - MARGIN_SAFETY
        inside = np.zeros(len(pts), dtype=bool)
        nz = np.full(len(pts), -1.0)
        for fi in np.unique(face):
            sel = face == fi
            f = self.gen.part.face(int(fi))
            inside[sel] = f.contains(uv[sel])
            n = f.closest(pts[sel])[1] if f.is_mesh else f.derivatives(uv[sel, 0], uv[sel, 1]).normals
            nz[sel] = n @ self.approach_of[int(fi)]
        val = np.minimum(val, (np.nan_to_num(nz, nan=-1.0) - MIN_NORMAL_Z) * self.p.stepover)
        return np.where(inside, val, -np.inf)

    def _cut(self, pieces: list[Piece]) -> list[Piece]:
        if not pieces:
            return []
        sizes = np.array([len(pc.points) for pc in pieces])
        # the exact value where the mesh's says the point is near the region's edge (or does not say)
        allv = np.concatenate([pc.value if pc.value is not None else np.full(len(pc.points), -np.inf)
                               for pc in pieces])
        near = ~(allv >= 3.0 * self.mesh.h)
        if near.any():
            allv[near] = self.margin_value(np.vstack([pc.points for pc in pieces])[near],
                                           np.vstack([pc.uv for pc in pieces])[near],
                                           np.concatenate([pc.face for pc in pieces])[near])
        out: list[Piece] = []
        for pc, val in zip(pieces, np.split(allv, np.cumsum(sizes)[:-1]), strict=True):
            ok = val >= 0
            if ok.all():
                out.append(pc)
                continue
            edges = np.diff(np.r_[0, ok.astype(np.int8), 0])
            for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
                P, UV, F = pc.points[a:b], pc.uv[a:b], pc.face[a:b]
                # refine the ends to the crossing (linear in the margin value)
                if a > 0 and np.isfinite(val[a - 1]):
                    f = val[a] / (val[a] - val[a - 1])
                    P = np.vstack([P[0] + f * (pc.points[a - 1] - P[0]), P])
                    UV = np.vstack([UV[0] + f * (pc.uv[a - 1] - UV[0]), UV])
                    F = np.r_[F[0], F]
                if b < len(val) and np.isfinite(val[b]):
                    f = val[b - 1] / (val[b - 1] - val[b])
                    P = np.vstack([P, P[-1] + f * (pc.points[b] - P[-1])])
                    UV = np.vstack([UV, UV[-1] + f * (pc.uv[b] - UV[-1])])
                    F = np.r_[F, F[-1]]
                if len(P) >= 2:
                    out.append(Piece(pc.level, P, UV, F))
        return self._drop_short(self._join(out))

    def _drop_short(self, pieces: list[Piece]) -> list[Piece]:
        """Pieces shorter than ``MIN_PIECE`` stepovers (a level grazing the region's edge) are left
        out where the other pieces cover them anyway."""
        from scipy.spatial import cKDTree

        s = self.p.stepover
        short = [length(pc.points) < MIN_PIECE * s for pc in pieces]
        if not any(short):
            return pieces
        long_pts = [pc.points for pc, sh in zip(pieces, short, strict=True) if not sh]
        if not long_pts:
            return pieces
        tree = cKDTree(np.vstack([densify(q, 0.25 * s) for q in long_pts]))
        return [pc for pc, sh in zip(pieces, short, strict=True)
                if not sh or tree.query(pc.points)[0].max() > COVER_RADIUS * s]

    def _join(self, pieces: list[Piece]) -> list[Piece]:
        """Join the pieces of one level that meet across an edge shared by two faces."""
        if len(self.gen.indices) < 2:
            return pieces
        tol = 1.5 * self.mesh.h
        by_level: dict[int, list[Piece]] = {}
        for pc in pieces:
            by_level.setdefault(pc.level, []).append(pc)
        out: list[Piece] = []
        for group in by_level.values():
            changed = True
            while changed and len(group) > 1:
                changed = False
                for i in range(len(group)):
                    for j in range(len(group)):
                        if i == j:
                            continue
                        a, b = group[i], group[j]
                        for ra, rb in ((False, False), (True, False), (False, True), (True, True)):
                            pa = a.points[0] if ra else a.points[-1]
                            pb = b.points[-1] if rb else b.points[0]
                            if a.face[0 if ra else -1] != b.face[-1 if rb else 0] and np.linalg.norm(pa - pb) < tol:
                                A = flip(a) if ra else a
                                B = flip(b) if rb else b
                                group[i] = Piece(a.level, np.vstack([A.points, B.points]), np.vstack([A.uv, B.uv]),
                                                 np.r_[A.face, B.face])
                                del group[j]
                                changed = True
                                break
                        if changed:
                            break
                    if changed:
                        break
            out.extend(group)
        return out


def mesh_coverage(mesh: SurfaceMesh, region: NDArray[np.bool_], polylines: list[FloatArray], stepover: float,
                  radius: float = COVER_RADIUS, gap: FloatArray | None = None
                  ) -> tuple[CoverageReport, FloatArray]:
    """Coverage of the region's mesh vertices (area weighted) by pass polylines (list of (N, 3) m),
    and the distance (n,) m from every region vertex to the nearest pass (inf off the region).
    With ``gap`` (the distances to other passes), only the vertices it leaves uncovered are measured."""
    from scipy.spatial import cKDTree

    gap = np.full(mesh.n, np.inf) if gap is None else gap.copy()
    todo = region & (gap > radius * stepover)
    pts = mesh.points[todo]
    dense = [densify(p, stepover / 4.0) for p in polylines if len(p) >= 2]
    if dense and len(pts):
        tree = cKDTree(np.vstack(dense))
        d = tree.query(pts, distance_upper_bound=2.0 * stepover)[0]
        far = ~np.isfinite(d)
        if far.any():
            d[far] = tree.query(pts[far])[0]
        gap[todo] = np.minimum(gap[todo], d)
    d = gap[region]
    pts = mesh.points[region]
    w = mesh.area[region]
    bad = d > radius * stepover
    area = float(w.sum())
    return CoverageReport(float(w[~bad].sum() / area) if area > 0 else 0.0, area, float(w[bad].sum()),
                          float(d.max()) if len(d) else 0.0, pts[bad]), gap


def densify(points: FloatArray, step: float) -> FloatArray:
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    s = np.r_[0.0, np.cumsum(seg)]
    n = max(2, int(math.ceil(s[-1] / step)) + 1)
    t = np.linspace(0.0, s[-1], n)
    return np.column_stack([np.interp(t, s, points[:, k]) for k in range(3)])


def _fmt_dirs(approach_of: dict[int, FloatArray]) -> str:
    """The approach directions of faces, for messages: '(0, 0, 1)' or 'face 3 (1, 0, 0), face 4 ...'."""
    vals = {tuple(np.round(np.asarray(v, float), 3)) for v in approach_of.values()}
    if len(vals) == 1:
        return "(" + ", ".join(f"{x:g}" for x in next(iter(vals))) + ")"
    return ", ".join(f"face {i} (" + ", ".join(f"{x:g}" for x in np.round(v, 3)) + ")" for i, v in approach_of.items())


def coverage_model(gen: Any) -> GeodesicPasses | None:
    """The mesh and region of a generator's faces, to measure any passes' coverage (CAD or mesh faces)."""
    return GeodesicPasses(gen, distance=False)


def make_passes(gp: GeodesicPasses) -> tuple[list[Any], CoverageReport]:
    """The passes (unordered ``Pass`` objects, row = level) and the mesh coverage after gap filling."""


    p = gp.p
    levels = gp.levels()
    pieces = gp.level_pieces(levels)
    if not pieces:
        raise PlanningError(f"faces {gp.gen.indices}: no pass fits (stepover {p.stepover} m, margin {p.margin} m); "
                            "reduce the margin or check the faces")
    report, gap = mesh_coverage(gp.mesh, gp.region, [pc.points for pc in pieces], p.stepover)
    if report.coverage < 1.0:
        extra = gp.fill_gaps(pieces, gap)
        if extra:
            pieces = pieces + extra
            report, _ = mesh_coverage(gp.mesh, gp.region, [pc.points for pc in extra], p.stepover, gap=gap)
    d, _ = gp.direction()
    passes: list[Any] = []
    built: list[list[Any]] = []  # per pass: index, level, points, normals, uv, faces
    end_req: list[tuple[Any, ...]] = []  # ends to move to the margin: pass, which end, inside, outside, uv, face
    pieces = [flip(pc) if float((pc.points[-1] - pc.points[0]) @ d) < 0 else pc for pc in pieces]  # along +d
    samples = exact_waypoints(gp, pieces)
    # validity of every waypoint at once
    sizes = [len(x[0]) for x in samples]
    P = np.vstack([x[0] for x in samples])
    N = np.vstack([x[1] for x in samples])
    UV = np.vstack([x[2] for x in samples])
    F = np.concatenate([x[3] for x in samples])
    D = np.concatenate([x[4] for x in samples])  # distance moved by the projection
    good_all = np.isfinite(N).all(axis=1) & (D < gp.mesh.h)
    for fi in np.unique(F):
        sel = good_all & (F == fi)
        good_all[sel] = gp.gen.part.face(int(fi)).contains(UV[sel])
    good_all[good_all] = gp.margin_value(P[good_all], UV[good_all], F[good_all]) >= 0.0
    for k, (pc, idx) in enumerate(zip(pieces, np.split(np.arange(len(P)), np.cumsum(sizes)[:-1]), strict=True)):
        good = good_all[idx]
        if good.sum() < 2:
            continue
        ex_pts, ex_uv, face = P[idx], UV[idx], F[idx]
        q, n_, uv_, f_ = ex_pts[good], N[idx][good], ex_uv[good], face[good]
        a, b = int(np.argmax(good)), len(good) - 1 - int(np.argmax(good[::-1]))
        # an end dropped by the exact check is moved to the margin below (all passes at once)
        for where, i_in, i_out in ((0, a, a - 1), (-1, b, b + 1)):
            if 0 <= i_out < len(good):
                end_req.append((len(built), where, ex_pts[i_in], ex_pts[i_out], ex_uv[i_in], face[i_in]))
        built.append([k, pc.level, q, n_, uv_, f_.astype(np.int64)])
    if end_req:
        idx = np.array([r[0] for r in end_req])
        where = np.array([r[1] for r in end_req])
        pts_e, nrm_e, uv_e, useful = gp.edge_points(
            np.array([r[2] for r in end_req]), np.array([r[3] for r in end_req]), np.array([r[4] for r in end_req]),
            np.array([r[5] for r in end_req], dtype=np.int64))
        for j in np.flatnonzero(useful):
            rec = built[idx[j]]
            if len(rec[2]) > 2 and np.linalg.norm(pts_e[j] - rec[2][where[j]]) < END_MERGE * p.spacing:
                # the end at the margin takes the place of a waypoint next to it: two waypoints a hair
                # apart give the tool's orientation a jump in no distance (a joint velocity spike)
                sl = slice(1, None) if where[j] == 0 else slice(None, -1)
                rec[2], rec[3], rec[4], rec[5] = rec[2][sl], rec[3][sl], rec[4][sl], rec[5][sl]
            if where[j] == 0:
                rec[2], rec[3] = np.vstack([pts_e[j], rec[2]]), np.vstack([nrm_e[j], rec[3]])
                rec[4], rec[5] = np.vstack([uv_e[j], rec[4]]), np.r_[rec[5][0], rec[5]]
            else:
                rec[2], rec[3] = np.vstack([rec[2], pts_e[j]]), np.vstack([rec[3], nrm_e[j]])
                rec[4], rec[5] = np.vstack([rec[4], uv_e[j]]), np.r_[rec[5], rec[5][-1]]
    for k, level, q, n_, uv_, f_ in built:
        tan = np.gradient(q, axis=0)
        tan -= np.sum(tan * n_, axis=1, keepdims=True) * n_
        tan /= np.linalg.norm(tan, axis=1, keepdims=True)
        arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(q, axis=0), axis=1))]
        passes.append(Pass(0, level, k, q, n_, tan, arc, uv_, f_))
    if not passes:
        raise PlanningError(f"faces {gp.gen.indices}: no pass fits (stepover {p.stepover} m, margin {p.margin} m)")
    # within a row, pieces in the order of their start along d
    passes.sort(key=lambda q: (q.row, float(q.points[0] @ d)))
    return passes, report
