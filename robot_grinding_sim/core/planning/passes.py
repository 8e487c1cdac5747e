"""Grinding passes on the exact surface of one face or a set of adjacent faces.

Two generators, both working on the exact surface through :mod:`robot_grinding_sim.core.geometry.cad`:

``iso``
    Iso-parametric passes on one face: curves ``v = const`` (passes along u, ``iso_direction
    = "u"``) or ``u = const``. Points come straight from the surface definition.
``raster``
    Plane-slicing raster: cutting planes that contain the raster direction and the mean normal
    ("up") of the faces, intersected exactly with the faces. Each pass point is the exact
    intersection of the surface with the cutting plane and a line along "up" (Newton iteration to
    1e-12 m); the raster direction is the part's x axis projected on the plane normal to "up",
    turned by ``angle`` (rad) about "up". The faces must be a height field seen from "up" (a dome, a
    panel, a cylinder sector up to about 150 deg); the raster passes across shared edges of the
    face set.

Spacing rules (all measured on the surface, metres):
    * along a pass, waypoints are ``spacing`` apart by arc length (the last step of a segment
      may be shorter, so the segment ends at the margin);
    * adjacent passes are ``stepover`` apart: rows are placed where the accumulated surface
      distance across the passes (sampled on a fine grid of rows, see ``_offsets``) grows by one
      stepover, so the mean distance between adjacent passes is the stepover to about 1e-4.
      Where the surface metric varies along a pass the pointwise distance varies with it (on
      planes and cylinders it is exact everywhere);
    * the first pass lies ``max(margin, stepover / 2)`` inside the boundary (measured across
      the raster, to first order);
    * no waypoint is closer than ``margin`` (3D distance) to the boundary of the face set
      (outer boundary and holes; edges shared by two faces of the set are not boundary) and
      no waypoint is outside the trimmed faces (holes).

Order: ``zigzag`` (alternate passes reversed) or ``oneway``; ``reverse`` flips the travel of the
first pass. A pass that a hole interrupts is split into segments; each segment is a pass of its
own in the result, with the row index of the cutting plane (or iso value) it belongs to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core import config
from robot_grinding_sim.core.config import PassParameters
from robot_grinding_sim.core.errors import GeometryError, InputError, PlanningError
from robot_grinding_sim.core.planning.waypoints import Pass
from robot_grinding_sim.core.robot.spatial import cross_rows

FloatArray = NDArray[np.float64]

GENERATORS, ORDERS = config.GENERATORS, config.ORDERS


@dataclass
class _Boundary:
    """Boundary polylines of the face set (shared edges removed), for margin distances."""

    a: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))  # (M, 3) segment starts
    b: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))  # (M, 3) segment ends
    tree: Any = None
    half: float = 0.0  # half the longest segment, m

    @classmethod
    def of(cls, part: Any, indices: list[int], step: float) -> _Boundary:
        from scipy.spatial import cKDTree

        shared = part.shared_edges(indices)
        a, b = [], []
        for i in indices:
            skip = list(shared.get(i) or []) + ([] if part.is_mesh else seam_edges(part.face(i)))
            for edge in part.face(i).boundary(step, skip=skip):
                a.append(edge.points[:-1])
                b.append(edge.points[1:])
        if not a:
            return cls()
        A, B = np.vstack(a), np.vstack(b)
        # split long segments (mesh edges) so that a midpoint tree finds the nearest one
        n = np.maximum(1, np.ceil(np.linalg.norm(B - A, axis=1) / step).astype(int))
        if n.max() > 1:
            frac = np.concatenate([np.arange(k) / k for k in n])
            nxt = np.concatenate([np.arange(1, k + 1) / k for k in n])
            rep_a, rep_b = np.repeat(A, n, axis=0), np.repeat(B, n, axis=0)
            A, B = rep_a + frac[:, None] * (rep_b - rep_a), rep_a + nxt[:, None] * (rep_b - rep_a)
        half = 0.5 * float(np.max(np.linalg.norm(B - A, axis=1)))
        return cls(A, B, cKDTree(0.5 * (A + B)), half)

    def distance(self, p: FloatArray) -> FloatArray:
        """Distance (K,) m from points p (K, 3) to the boundary polylines."""
        if self.tree is None or len(p) == 0:
            return np.full(len(p), np.inf)
        return self._exact(p)

    def distance_below(self, p: FloatArray, limit: float) -> FloatArray:
        """Distances (K,), exact where below ``limit`` + tolerance, a lower bound >= limit elsewhere."""
        if self.tree is None or len(p) == 0:
            return np.full(len(p), np.inf)
        # points farther than limit + half from every midpoint are clear: the bounded query prunes them
        d_mid, _ = self.tree.query(p, k=1, distance_upper_bound=limit + self.half + 1e-9)
        out = d_mid - self.half  # a lower bound of the true distance (inf where pruned)
        near = out < limit + 1e-12
        if near.any():
            out[near] = self._exact(p[near])
        return out

    def _exact(self, p: FloatArray) -> FloatArray:
        k = min(8, len(self.a))
        _, idx = self.tree.query(p, k=k)
        idx = np.atleast_2d(idx).reshape(len(p), k)
        A, B = self.a[idx], self.b[idx]  # (K, k, 3)
        AB = B - A
        L2 = np.maximum(np.sum(AB * AB, axis=2), 1e-300)
        t = np.clip(np.sum((p[:, None, :] - A) * AB, axis=2) / L2, 0.0, 1.0)
        d = np.linalg.norm(p[:, None, :] - (A + t[..., None] * AB), axis=2).min(axis=1)
        return d


def seam_edges(face: Any) -> list[Any]:
    """The face's seam edges (an edge the face meets on both sides: a closed cylinder's, a sphere's)."""
    from robot_grinding_sim.core.geometry.occ_adapter import occ_class, static

    closed = static(occ_class("BRep", "BRep_Tool"), "IsClosed")
    return [e for e in face.edges() if closed(e, face.shape)]


def validate_pass_parameters(params: PassParameters) -> PassParameters:
    """Check pass parameters (InputError naming the parameter)."""
    return params.validate()


def polyline_distance(points: FloatArray, polyline: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Distance (K,) from points (K, 3) to a polyline (M, 3), and whether the nearest point is interior.

    Interior means the nearest point is not one of the polyline's two end points.
    """
    from scipy.spatial import cKDTree

    if len(polyline) < 2:
        d = np.linalg.norm(points - polyline[:1], axis=1) if len(polyline) else np.full(len(points), np.inf)
        return d, np.zeros(len(points), dtype=bool)
    A, B = polyline[:-1], polyline[1:]
    tree = cKDTree(0.5 * (A + B))
    k = min(6, len(A))
    _, idx = tree.query(points, k=k)
    idx = np.asarray(idx).reshape(len(points), k)
    a, b = A[idx], B[idx]
    ab = b - a
    L2 = np.maximum(np.sum(ab * ab, axis=2), 1e-300)
    t = np.clip(np.sum((points[:, None, :] - a) * ab, axis=2) / L2, 0.0, 1.0)
    d = np.linalg.norm(points[:, None, :] - (a + t[..., None] * ab), axis=2)
    j = np.argmin(d, axis=1)
    best_seg = idx[np.arange(len(points)), j]
    best_t = t[np.arange(len(points)), j]
    interior = ~(((best_seg == 0) & (best_t <= 0.0)) | ((best_seg == len(A) - 1) & (best_t >= 1.0)))
    return d[np.arange(len(points)), j], interior


def toward_robot(X_BP: FloatArray) -> FloatArray:
    """(3,) unit: the horizontal direction (in base_link, z up) from the part's origin to the robot's
    base, expressed in the part frame (the approach ``auto`` takes for faces all round a vertical
    axis); the part frame's -x when the part sits over the base."""
    d = -np.asarray(X_BP, dtype=float)[:3, 3].copy()
    d[2] = 0.0
    if not np.linalg.norm(d) > 1e-9:
        d = X_BP[:3, :3] @ np.array([-1.0, 0.0, 0.0])
    d_P = X_BP[:3, :3].T @ d
    return d_P / np.linalg.norm(d_P)


#: the most waypoints a plan may have (estimated from the faces' area before any pass is made: a
#: square metre at 5 mm stepover and 2 mm spacing is 100,000)
MAX_WAYPOINTS = 2_000_000


class PassGenerator:
    """Generate passes on faces ``indices`` of ``part`` (a CadPart or MeshPart)."""

    def __init__(self, part: Any, indices: list[int], params: PassParameters,
                 toward_robot: Any = None) -> None:
        """``toward_robot``: (3,) the horizontal direction from the part to the robot, part frame (the
        approach of ``auto`` on faces all round a vertical axis); None: the part frame's -x."""
        self.part = part
        self.toward_robot = np.array([-1.0, 0.0, 0.0]) if toward_robot is None else \
            np.asarray(toward_robot, dtype=float) / np.linalg.norm(toward_robot)
        params = validate_pass_parameters(params)
        self.params = params
        if not indices:
            raise InputError("no face selected")
        self.faces = [part.face(i) for i in indices]
        self.indices = [int(i) for i in indices]
        if len(set(self.indices)) != len(self.indices):
            raise InputError(f"face indices repeat: {self.indices}")
        if len(self.indices) > 1 and not part.is_mesh:
            self._check_adjacent()
        # bound what grows with area / (stepover x spacing) before anything is allocated: the
        # waypoints, the level curves and the boundary samples
        area = float(sum(f.area for f in self.faces))
        estimate = area / (params.stepover * params.spacing)
        if not estimate <= MAX_WAYPOINTS:
            raise InputError(f"faces {self.indices} of {getattr(part, 'source', 'the part')}: {area:.4g} m^2 at "
                             f"passes.stepover {params.stepover:g} m and passes.spacing {params.spacing:g} m make "
                             f"about {estimate:.3g} waypoints, more than {MAX_WAYPOINTS:,}: select fewer faces or "
                             "raise the stepover or spacing (is the part's unit right?)")
        step = min(0.25 * max(params.margin, params.spacing), 5e-4)
        self.boundary = _Boundary.of(part, self.indices, step)
        self.coverage: Any = None  # the geodesic generator's own coverage report (geodesic.CoverageReport)
        self.coverage_model: Any = None  # its mesh and region (geodesic.GeodesicPasses), to measure others
        self.approach, self.approach_of = self._approach()
        # the geodesic generator takes "up" from the region it grinds (whole cylinders, spheres)
        self.up = self._mean_normal() if params.generator != "geodesic" else self.approach.copy()

    def _normal_samples(self, faces: list[Any], n: int = 21) -> tuple[FloatArray, FloatArray]:
        """Outward normals (K, 3) of the faces sampled on an (u, v) grid inside their trimming, and
        their area weights (K,), m^2 (relative)."""
        nrm, wts = [], []
        for f in faces:
            if f.is_mesh:
                fn, fw = f.normal_samples()
                nrm.append(fn)
                wts.append(fw)
                continue
            u0, u1, v0, v1 = f.uv_bounds
            uu, vv = np.meshgrid(np.linspace(u0, u1, n), np.linspace(v0, v1, n), indexing="ij")
            uv = np.column_stack([uu.ravel(), vv.ravel()])
            inside = f.contains(uv)
            if not inside.any():
                inside[:] = True
            s = f.derivatives(uv[inside, 0], uv[inside, 1])
            w = np.linalg.norm(np.cross(s.du, s.dv), axis=1)
            ok = np.isfinite(s.normals).all(axis=1) & np.isfinite(w)
            nrm.append(s.normals[ok])
            wts.append(w[ok])
        return np.vstack(nrm), np.concatenate(wts)

    def auto_approach(self, faces: list[Any]) -> FloatArray:
        """The approach ``auto`` gives faces (part frame, unit): up (+z) where a tenth or more of their
        area looks up (n . z > 0.05: today's parts, slopes, bowls); else their mean outward normal
        where the faces look one way (its length over 0.3: a wall, a face looking sideways or down);
        else (faces all round a vertical axis: an upright cylinder's outside) the horizontal
        direction towards the robot, so that the side the arm is on is planned."""
        n, w = self._normal_samples(faces)
        total = float(w.sum())
        if not total > 0:
            return np.array([0.0, 0.0, 1.0])
        if float(w[n[:, 2] > 0.05].sum()) >= 0.1 * total:
            return np.array([0.0, 0.0, 1.0])
        mean = (n * w[:, None]).sum(axis=0) / total
        if float(np.linalg.norm(mean)) >= 0.3:
            return mean / np.linalg.norm(mean)
        d = self.toward_robot - (self.toward_robot @ np.array([0.0, 0.0, 1.0])) * np.array([0.0, 0.0, 1.0])
        return d / np.linalg.norm(d) if np.linalg.norm(d) > 1e-9 else np.array([-1.0, 0.0, 0.0])

    def _approach(self) -> tuple[FloatArray, dict[int, FloatArray]]:
        """The job's approach direction (3,) and each selected face's (part frame, unit), from
        ``approach_direction`` (:func:`~robot_grinding_sim.core.config.parse_approach`)."""
        from robot_grinding_sim.core.config import parse_approach

        given = parse_approach(self.params.approach_direction)
        unknown = sorted(k for k in given if k is not None and k not in self.indices)
        if unknown:
            raise InputError(f"parameter 'passes.approach_direction': face {unknown[0]} is not one of the "
                             f"selected faces {self.indices}")
        job = given[None]
        rest = [f for f, i in zip(self.faces, self.indices, strict=True) if given.get(i, job) is None]
        auto = self.auto_approach(rest) if rest else None
        job_vec = np.asarray(job, dtype=float) if job is not None else auto
        per = {}
        for i in self.indices:
            v = given.get(i, job)
            per[i] = np.asarray(v, dtype=float) if v is not None else auto
        if job_vec is None:
            job_vec = np.mean([per[i] for i in self.indices], axis=0)
            job_vec = job_vec / np.linalg.norm(job_vec) if np.linalg.norm(job_vec) > 1e-9 else per[self.indices[0]]
        return job_vec, per

    def _check_adjacent(self) -> None:
        shared = self.part.shared_edges(self.indices)
        lonely = [i for i in self.indices if not shared[i]]
        if lonely:
            raise InputError(f"faces {lonely} share no edge with the other selected faces {self.indices}")

    def _mean_normal(self) -> FloatArray:
        acc = np.zeros(3)
        for f in self.faces:
            if f.is_mesh:
                acc += f.up() * f.area
                continue
            n, w = self._normal_samples([f])
            acc += (n * w[:, None]).sum(axis=0)
        norm = np.linalg.norm(acc)
        if not norm > 0:
            raise GeometryError(f"faces {self.indices}: no mean normal (a closed surface?); use the iso generator")
        return acc / norm

    # ------------------------------------------------------------------------------------------
    def generate(self) -> list[Pass]:
        """All passes, ordered and oriented for travel."""
        p = self.params
        if p.generator == "geodesic":
            from robot_grinding_sim.core.planning.geodesic import GeodesicPasses, make_passes

            geo = GeodesicPasses(self)
            self.up, self.coverage_model = geo.up, geo
            passes, self.coverage = make_passes(geo)
            return self.order_passes(passes)
        fam = _RasterFamily(self) if p.generator == "raster" else _IsoFamily(self)
        # validity (trimming, margin) is resolved on samples `spacing` apart; waypoints are then
        # placed exactly by arc length between them
        a_dense = np.linspace(fam.a0, fam.a1, int(min(max(math.ceil(fam.length / p.spacing) + 1, 16), 20000)))
        a_coarse = np.linspace(fam.a0, fam.a1, int(min(max(math.ceil(fam.length / (4 * p.stepover)), 24), 96)))
        offsets = self._offsets(fam, a_coarse)
        if not offsets:
            raise PlanningError(f"faces {self.indices}: the face set is narrower than the margin {p.margin} m")
        # all rows densely in one batch: validity (trimming, margin) and segments
        nb, na = len(offsets), len(a_dense)
        B, A = np.repeat(offsets, na), np.tile(a_dense, nb)
        pts, _, _, _, _, hit = fam.sample(B, A)
        valid = self._valid(pts, hit).reshape(nb, na)
        pts = pts.reshape(nb, na, 3)
        seg_rows, seg_b, seg_targets, seg_a = [], [], [], []
        for r in range(nb):
            for seg in _runs(valid[r]):
                chord = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pts[r, seg], axis=0), axis=1))]
                total = chord[-1]
                if total <= 1e-9:
                    continue
                targets = np.arange(0.0, total, p.spacing)
                if total - targets[-1] > 1e-9:
                    targets = np.r_[targets, total]
                seg_rows.append(r)
                seg_b.append(offsets[r])
                seg_targets.append(targets)
                seg_a.append(np.interp(targets, chord, a_dense[seg]))
        if not seg_rows:
            raise PlanningError(
                f"faces {self.indices}: no pass fits (stepover {p.stepover} m, margin {p.margin} m); "
                "reduce the margin or check the face"
            )
        sizes = [len(a) for a in seg_a]
        Bq = np.repeat(seg_b, sizes)
        Aq = np.concatenate(seg_a)
        pieces = np.cumsum(sizes)[:-1]
        points, normals, tangents, uv, face, hit = fam.sample(Bq, Aq)
        # the running parameter is interpolated from dense chords: where the exact points are not
        # `spacing` apart (iso parameters far from arc length, a kink between faces), correct it
        for _ in range(2):
            bad_idx, new_a = [], []
            for idx, targets in zip(np.split(np.arange(len(Aq)), pieces), seg_targets, strict=True):
                q = points[idx]
                chord = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(q, axis=0), axis=1))]
                err = np.abs(np.diff(chord)[:-1] - p.spacing) if len(q) > 2 else np.zeros(0)
                if not (np.isfinite(chord).all() and np.all(np.diff(chord) > 0)) or not np.any(err > 2e-4 * p.spacing):
                    continue
                bad_idx.append(idx)
                new_a.append(np.interp(targets * chord[-1] / max(targets[-1], 1e-300), chord, Aq[idx]))
            if not bad_idx:
                break
            sel = np.concatenate(bad_idx)
            Aq[sel] = np.concatenate(new_a)
            fix = fam.sample(Bq[sel], Aq[sel])
            for arr, val in zip((points, normals, tangents, uv, face, hit), fix, strict=True):
                arr[sel] = val
        ok_all = hit & self._valid(points, hit)
        passes: list[Pass] = []
        for k, (idx, r) in enumerate(zip(np.split(np.arange(len(Aq)), pieces), seg_rows, strict=True)):
            keep = idx[ok_all[idx]]  # defensive: a parameter interpolated into a sliver of margin
            if len(keep) < 2:
                continue
            q = points[keep]
            arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(q, axis=0), axis=1))]
            passes.append(Pass(0, r, k, q, normals[keep], tangents[keep], arc, uv[keep], face[keep]))
        return self.order_passes(passes)

    def order_passes(self, passes: list[Pass]) -> list[Pass]:
        """Rows renumbered, segments of a row in order, zigzag / oneway / reverse applied."""
        p = self.params
        row_ids = sorted({q.row for q in passes})
        ordered: list[Pass] = []
        for r_new, r in enumerate(row_ids):
            segs = [q for q in passes if q.row == r]
            for j, q in enumerate(segs):
                q.row, q.segment = r_new, j
            flip = (r_new % 2 == 1 and p.order == "zigzag") != p.reverse
            if flip:
                segs = [s.reversed() for s in segs[::-1]]
            ordered.extend(segs)
        for k, q in enumerate(ordered):
            q.index = k
        return ordered

    def _offsets(self, fam: Any, a_coarse: FloatArray) -> list[float]:
        """Row offsets: the first max(margin, stepover/2) in, then one stepover apart.

        All candidate rows are sampled at once on a grid of offsets about half a stepover apart;
        the surface distance between neighbouring grid rows (mean over the pass of the distance
        across the pass) is summed into D(offset), and the rows are placed where D grows by one
        stepover (monotone cubic inverse). Falls back to the row-by-row secant search where the
        grid gives no distances (rows that miss the face).
        """
        from scipy.interpolate import PchipInterpolator

        p = self.params
        b0 = fam.first_offset()
        if b0 >= fam.b1:
            return []
        first = fam.sample(np.full(len(a_coarse), b0), a_coarse)
        if first[5].sum() < 2:
            return self._offsets_secant(fam, a_coarse)
        h = 0.5 * fam.initial_delta(first, first[5])
        n_grid = int(math.ceil((fam.b1 - b0) / h)) + 2
        if n_grid > 200000:
            raise PlanningError("too many passes (stepover too small for the face?)")
        grid = b0 + h * np.arange(n_grid)
        na = len(a_coarse)
        pts, _, tan, _, _, on = fam.sample(np.repeat(grid, na), np.tile(a_coarse, n_grid))
        pts, tan, on = pts.reshape(n_grid, na, 3), tan.reshape(n_grid, na, 3), on.reshape(n_grid, na)
        both = on[:-1] & on[1:]
        known = both.sum(axis=1) >= 2
        if not known.any():
            return self._offsets_secant(fam, a_coarse)
        delta = pts[1:] - pts[:-1]
        T = 0.5 * (tan[1:] + tan[:-1])
        T /= np.linalg.norm(T, axis=2, keepdims=True)
        across = delta - np.sum(delta * T, axis=2, keepdims=True) * T
        dist = np.where(both, np.linalg.norm(np.nan_to_num(across), axis=2), 0.0)
        gaps = np.full(n_grid - 1, np.nan)
        gaps[known] = dist[known].sum(axis=1) / both[known].sum(axis=1)
        # grid rows off the face (beyond its end, or a gap in it): the nearest known distance
        idx = np.arange(n_grid - 1)
        gaps = np.interp(idx, idx[known], gaps[known])
        D = np.r_[0.0, np.cumsum(gaps)]
        inverse = PchipInterpolator(D, grid)
        last = D[-1] if grid[-1] <= fam.b1 else float(np.interp(fam.b1, grid, D))
        targets = np.arange(0.0, last + 1e-12 * p.stepover, p.stepover)
        return [float(b) for b in inverse(targets) if b < fam.b1]

    def _offsets_secant(self, fam: Any, a_coarse: FloatArray) -> list[float]:
        """Row offsets one at a time (secant on the measured distance to the previous row)."""
        p = self.params
        b = fam.first_offset()
        offsets: list[float] = []
        delta: float | None = None
        prev = None
        while b < fam.b1:
            if len(offsets) > 100000:
                raise PlanningError("too many passes (stepover too small for the face?)")
            if prev is None:
                prev = fam.sample(np.full(len(a_coarse), b), a_coarse)
            offsets.append(b)
            on = prev[5]
            if on.sum() < 2:
                b += fam.rate_guess() * p.stepover
                prev = None
                continue
            if delta is None:
                delta = fam.initial_delta(prev, on)
            b, delta, prev = self._secant(fam, b, delta, prev[0][on], a_coarse)
        return offsets

    def _secant(self, fam: Any, b: float, delta: float, P: FloatArray, a_coarse: FloatArray
                ) -> tuple[float, float, Any]:
        s = self.params.stepover
        nxt = None
        for _ in range(8):
            nxt = fam.sample(np.full(len(a_coarse), b + delta), a_coarse)
            on = nxt[5]
            if on.sum() < 2:
                break
            dist, interior = polyline_distance(P, nxt[0][on])
            use = interior & np.isfinite(dist)
            if not use.any():
                break
            gap = float(np.mean(dist[use]))
            if abs(gap - s) <= 2e-4 * s:
                break
            delta *= s / gap
        return b + delta, delta, nxt

    def _valid(self, points: FloatArray, hit: NDArray[np.bool_]) -> NDArray[np.bool_]:
        ok = hit.copy()
        if self.params.margin > 0 and ok.any():
            ok[ok] = self.boundary.distance_below(points[ok], self.params.margin) >= self.params.margin
        return ok

    def raster_frame(self) -> tuple[FloatArray, FloatArray]:
        """Raster direction d (3,) and the cutting planes' normal ``side`` (3,), both unit."""
        up = self.up
        ref = np.array([1.0, 0.0, 0.0]) - up[0] * up
        if np.linalg.norm(ref) < 1e-6:
            ref = np.array([0.0, 1.0, 0.0]) - up[1] * up
        ref /= np.linalg.norm(ref)
        a = float(self.params.angle)
        d = math.cos(a) * ref + math.sin(a) * np.cross(up, ref)
        return d, np.cross(up, d)

    def extent(self, axis: FloatArray) -> tuple[float, float]:
        """Range of the face set's boundary (or bounding box) projected on ``axis``."""
        lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
        for f in self.faces:
            flo, fhi = f.bounds
            lo, hi = np.minimum(lo, flo), np.maximum(hi, fhi)
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        # the boundary polylines bound the face set tighter than its box (closed meshes have none)
        pts = self.boundary.a if len(self.boundary.a) else corners
        proj = pts @ axis
        return float(proj.min()), float(proj.max())

    def cast(self, origins: FloatArray) -> tuple[FloatArray, ...]:
        """Exact hits of lines ``origins + h up`` with the trimmed faces; the highest face wins."""
        K = len(origins)
        best_h = np.full(K, -np.inf)
        points = np.full((K, 3), np.nan)
        normals = np.full((K, 3), np.nan)
        uv = np.full((K, 2), np.nan)
        face = np.full(K, -1, dtype=np.int64)
        hit = np.zeros(K, dtype=bool)
        for fi, f in zip(self.indices, self.faces, strict=True):
            fuv, fp, fn, ok = f.intersect_lines(origins, self.up)
            if ok.any() and not f.is_mesh:
                ok[ok] = f.contains(fuv[ok])
            h = np.where(ok, (fp - origins) @ self.up, -np.inf)
            better = ok & (h > best_h)
            best_h[better] = h[better]
            points[better], normals[better], uv[better], face[better] = fp[better], fn[better], fuv[better], fi
            hit |= ok
        return points, normals, uv, face, hit


def _runs(mask: NDArray[np.bool_]) -> list[NDArray[np.int64]]:
    """Index runs (length >= 2) where ``mask`` is true."""
    if not mask.any():
        return []
    edges = np.diff(np.r_[0, mask.astype(np.int8), 0])
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [np.arange(a, b) for a, b in zip(starts, stops, strict=True) if b - a >= 2]


class _RasterFamily:
    """Cutting-plane curves: row offset b = c along ``side``, position a = t along ``d``."""


    def __init__(self, gen: PassGenerator) -> None:
        self.gen = gen
        self.d, self.side = gen.raster_frame()
        self.b0, self.b1 = gen.extent(self.side)
        a0, a1 = gen.extent(self.d)
        pad = 1e-6
        self.a0, self.a1 = a0 + pad, a1 - pad
        self.length = a1 - a0
        self.b1 -= pad

    def first_offset(self) -> float:
        p = self.gen.params
        return self.b0 + max(p.margin, 0.5 * p.stepover)

    def rate_guess(self) -> float:
        return 1.0

    def initial_delta(self, row: Any, on: NDArray[np.bool_]) -> float:
        N = row[1][on]
        T = _unit(np.cross(N, self.side))
        rate = np.abs(_unit(np.cross(N, T)) @ self.side)  # d(side coordinate) / d(surface distance)
        rate = rate[np.isfinite(rate)]
        return self.gen.params.stepover * (max(float(np.median(rate)), 1e-3) if len(rate) else 1.0)

    def sample(self, b: FloatArray, a: FloatArray) -> tuple[FloatArray, ...]:
        origins = b[:, None] * self.side + a[:, None] * self.d
        points, normals, uv, face, hit = self.gen.cast(origins)
        tangents = _unit(cross_rows(normals, np.broadcast_to(self.side, normals.shape)))  # in both planes
        tangents *= np.sign(tangents @ self.d)[:, None]  # travel along +d before ordering
        return points, normals, tangents, uv, face, hit


class _IsoFamily:
    """Iso-parameter curves of one face: row offset b = the fixed parameter, a = the running one."""


    def __init__(self, gen: PassGenerator) -> None:
        if len(gen.faces) != 1 or gen.faces[0].is_mesh:
            what = "a mesh" if gen.faces[0].is_mesh else "several faces"
            raise InputError(f"the iso generator works on one CAD face, not {what}; use the raster generator")
        self.gen = gen
        self.face = gen.faces[0]
        self.fi = gen.indices[0]
        u0, u1, v0, v1 = self.face.uv_bounds
        self.along_u = gen.params.iso_direction == "u"
        self.a0, self.a1 = (u0, u1) if self.along_u else (v0, v1)
        self.b0, self.b1 = (v0, v1) if self.along_u else (u0, u1)
        mid = 0.5 * (self.b0 + self.b1)
        probe = self.sample(np.full(257, mid), np.linspace(self.a0, self.a1, 257))[0]
        self.length = float(np.sum(np.linalg.norm(np.diff(probe, axis=0), axis=1)))

    def _uv(self, b: FloatArray, a: FloatArray) -> FloatArray:
        return np.column_stack([a, b] if self.along_u else [b, a])

    def _rate(self, b: FloatArray, a: FloatArray) -> float:
        s = self.face.derivatives(*self._uv(b, a).T)
        rate = np.linalg.norm(s.dv if self.along_u else s.du, axis=1)
        rate = rate[np.isfinite(rate)]
        return max(float(np.median(rate)), 1e-12) if len(rate) else 1.0

    def rate_guess(self) -> float:
        a = np.linspace(self.a0, self.a1, 33)
        return 1.0 / self._rate(np.full(33, 0.5 * (self.b0 + self.b1)), a)

    def first_offset(self) -> float:
        p = self.gen.params
        a = np.linspace(self.a0, self.a1, 33)
        return self.b0 + max(p.margin, 0.5 * p.stepover) / self._rate(np.full(33, self.b0), a)

    def initial_delta(self, row: Any, on: NDArray[np.bool_]) -> float:
        uv = row[3][on]
        b, a = (uv[:, 1], uv[:, 0]) if self.along_u else (uv[:, 0], uv[:, 1])
        return self.gen.params.stepover / self._rate(b, a)

    def sample(self, b: FloatArray, a: FloatArray) -> tuple[FloatArray, ...]:
        uv = self._uv(b, a)
        s = self.face.derivatives(uv[:, 0], uv[:, 1])
        tangents = _unit(s.du if self.along_u else s.dv)
        hit = self.face.contains(uv) & np.isfinite(s.normals).all(axis=1)
        return s.points, s.normals, tangents, uv, np.full(len(a), self.fi), hit


def _unit(v: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return v / np.linalg.norm(v, axis=-1, keepdims=True)


def generate_passes(part: Any, faces: list[int], params: PassParameters) -> list[Pass]:
    """Passes on faces ``faces`` of ``part``; see the module docstring for the rules."""
    return PassGenerator(part, faces, params).generate()
