"""Material removal by Preston's law, accumulated on a grid over the ground face.

Preston: the depth removed per unit time at a point of the surface is ``dh/dt = k_p p v``, with
``p`` the contact pressure there (Pa) and ``v`` the speed of the abrasive sliding over it (m/s);
``k_p`` (m^2/N) lumps material, abrasive and coolant.

For the ball tool (radius R) pressed to depth d the patch is a disc of radius a = sqrt(2 R d)
about the contact point, in the tangent plane (:func:`~robot_grinding_sim.core.contact.laws.spherical_patch`).
Over it the pressure is Hertz's ``p = p0 sqrt(1 - r^2 / a^2)``, ``p0 = 3 F / (2 pi a^2)`` (or
``uniform``: ``F / (pi a^2)``), so that its integral is the normal force F. The abrasive slides
with ``v = v_feed + w x (x - c)`` (the tool centre's velocity relative to the part plus the
spindle's rotation w about the tool centre c, tangential part), so at the contact point under a
spindle axis along the normal only the feed remains, and ``w r`` further out.

:class:`RemovalGrid` holds the depth removed (m) at nodes that sample the face (exact surface
points with their area): each step adds ``k_p p_i v_i dt`` at the nodes inside the patch, with the
discrete pressures scaled so that ``sum p_i A_i = F`` exactly: the removed volume
``sum h_i A_i`` is then ``k_p sum_steps F v_bar dt``, ``v_bar`` the pressure-weighted mean speed
over the patch (the feed speed when the spindle stands still). Frames: the nodes, points, normals
and velocities given to one grid are in one frame (the robot's ``base_link`` in the job and the
nodes); units m, s, N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray
from scipy.spatial import cKDTree

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

PRESSURE_DISTRIBUTIONS = ("hertz", "uniform")


@dataclass
class RemovalStats:
    """Removal of one span (a pass): largest and mean depth over the nodes it reached (m), the
    nodes reached, and the volume (m^3)."""

    max_depth: float
    mean_depth: float
    nodes: int
    volume: float

    def as_dict(self) -> dict[str, float]:
        return {"max_depth_m": self.max_depth, "mean_depth_m": self.mean_depth, "nodes": self.nodes,
                "volume_m3": self.volume}


class RemovalGrid:
    """Depth removed at nodes on a surface (see the module docstring).

    Args:
        points: (N, 3) node positions, m.
        areas: (N,) surface area each node stands for, m^2 (> 0).
        normals: (N, 3) outward unit normals (kept for displays), or None.
        shape: (rows, cols) when the nodes are a regular (u, v) layout in row-major order (for
            images and triangles), else None. A grid over several faces (:func:`join_grids`) has
            no shape but :attr:`blocks`: one such layout per face, one after the other.
        preston_coefficient: k_p, m^2/N.
        pressure: ``hertz`` or ``uniform`` over the patch.
    """

    def __init__(self, points: FloatArray, areas: FloatArray, normals: FloatArray | None = None,
                 shape: tuple[int, int] | None = None, preston_coefficient: float = 1e-12,
                 pressure: str = "hertz") -> None:
        self.points = np.ascontiguousarray(points, dtype=float).reshape(-1, 3)
        self.areas = np.asarray(areas, dtype=float).reshape(-1)
        if len(self.points) == 0 or self.areas.shape != (len(self.points),) or not np.all(self.areas > 0):
            raise InputError("removal grid: needs nodes with positive areas, one area per node")
        if not (np.isfinite(self.points).all() and np.isfinite(self.areas).all()):
            raise InputError("removal grid: NaN or inf in the nodes")
        if pressure not in PRESSURE_DISTRIBUTIONS:
            raise InputError(f"removal.pressure: {pressure!r} is not one of {PRESSURE_DISTRIBUTIONS}")
        if not preston_coefficient >= 0:
            raise InputError(f"removal.preston_coefficient: {preston_coefficient!r} must be >= 0")
        self.normals = None if normals is None else np.asarray(normals, dtype=float).reshape(-1, 3)
        if shape is not None and shape[0] * shape[1] != len(self.points):
            raise InputError(f"removal grid: shape {tuple(shape)} does not hold {len(self.points)} nodes")
        self.shape = shape
        #: the (u, v) layouts of the nodes: (face, first node, rows, cols) each, row-major; the face
        #: is -1 where the grid does not know it (a grid of one face made apart from a job)
        self.blocks: list[tuple[int, int, int, int]] = [] if shape is None else [(-1, 0, int(shape[0]),
                                                                                  int(shape[1]))]
        #: (N,) the face index of each node (a job's grid: :func:`join_grids`), or None
        self.node_face: NDArray[np.int64] | None = None
        self.kp = float(preston_coefficient)
        self.pressure = pressure
        self.depth = np.zeros(len(self.points))
        self.inside = np.ones(len(self.points), dtype=bool)  # nodes on the face (a face grid drops the others)
        self.spacing = float(np.sqrt(np.median(self.areas)))
        self._tree = cKDTree(self.points)
        self.work = 0.0  # sum of F v_bar dt, N m: the removed volume is k_p times it

    def accumulate(self, point: FloatArray, normal: FloatArray, force: float, patch_radius: float,
                   centre: FloatArray, spindle_rate: FloatArray, feed_velocity: FloatArray, dt: float) -> float:
        """Add one step's removal; returns the volume removed in it (m^3).

        Args:
            point: (3,) contact point on the surface. normal: (3,) outward unit normal there.
            force: normal force F >= 0, N. patch_radius: a, m (:func:`patch_radius`).
            centre: (3,) the tool centre. spindle_rate: (3,) the spindle's angular velocity, rad/s.
            feed_velocity: (3,) the tool centre's velocity relative to the part, m/s. dt: s.
        """
        if force <= 0.0 or dt <= 0.0 or self.kp == 0.0:
            return 0.0
        p = np.asarray(point, dtype=float)
        idx = self._tree.query_ball_point(p, patch_radius) if patch_radius > 0 else []
        return self._patch(idx, p, normal, force, patch_radius, centre, spindle_rate, feed_velocity, dt)

    def accumulate_many(self, points: FloatArray, normals: FloatArray, forces: FloatArray, patch_radii: FloatArray,
                        centres: FloatArray, spindle_rates: FloatArray, feed_velocities: FloatArray,
                        dts: FloatArray) -> FloatArray:
        """:meth:`accumulate` for M steps in order (each argument with a leading axis M): the same
        nodes in the same order (one k-d tree query for all), the same sums; returns the volumes (M,)."""
        P = np.asarray(points, dtype=float).reshape(-1, 3)
        f, a, dt = (np.asarray(x, dtype=float).reshape(-1) for x in (forces, patch_radii, dts))
        out = np.zeros(len(P))
        if self.kp == 0.0:
            return out
        rows = np.flatnonzero(~((f <= 0.0) | (dt <= 0.0)))
        query = rows[a[rows] > 0]
        found = dict(zip(query.tolist(), self._tree.query_ball_point(P[query], a[query], return_sorted=False),
                         strict=True)) if len(query) else {}
        for i in rows.tolist():
            out[i] = self._patch(found.get(i, []), P[i], normals[i], f[i], a[i], centres[i], spindle_rates[i],
                                 feed_velocities[i], dt[i])
        return out

    def _patch(self, nodes: Any, p: FloatArray, normal: FloatArray, force: float, patch_radius: float,
               centre: FloatArray, spindle_rate: FloatArray, feed_velocity: FloatArray, dt: float) -> float:
        idx = np.asarray(nodes, dtype=np.int64)
        if len(idx) == 0:  # patch smaller than the grid: all of it on the nearest node
            idx = np.array([int(self._tree.query(p)[1])], dtype=np.int64)
        volume, work = _patch_removal(self.points, self.areas, self.depth, idx, p, np.asarray(normal, dtype=float),
                                      float(force), float(patch_radius), np.asarray(centre, dtype=float),
                                      np.asarray(spindle_rate, dtype=float), np.asarray(feed_velocity, dtype=float),
                                      float(dt), self.kp, self.pressure == "hertz" and len(idx) > 1)
        self.work += work
        return volume

    def accumulate_footprint(self, nodes: Any, weights: FloatArray, point: FloatArray, normal: FloatArray,
                             force: float, centre: FloatArray, spindle_rate: FloatArray, feed_velocity: FloatArray,
                             dt: float) -> float:
        """Add one step's removal under a tool's footprint: the pressure at the ``nodes`` (indices)
        proportional to ``weights`` (k,) >= 0 (a Winkler tool: its penetration at each node,
        :meth:`~robot_grinding_sim.core.geometry.tools.Tool.penetration_at`), scaled so that
        sum p_i A_i = ``force``; all of it on the node nearest ``point`` (3,) when no node is under
        the tool (a footprint finer than the grid). Other arguments as :meth:`accumulate`; returns
        the volume removed (m^3)."""
        if force <= 0.0 or dt <= 0.0 or self.kp == 0.0:
            return 0.0
        idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
        w = np.asarray(weights, dtype=float).reshape(-1)
        keep = w > 0.0
        idx, w = idx[keep], w[keep]
        if len(idx) == 0:
            idx, w = np.array([int(self._tree.query(np.asarray(point, dtype=float))[1])], dtype=np.int64), np.ones(1)
        volume, work = _apply_pressure(self.points, self.areas, self.depth, idx, np.ascontiguousarray(w),
                                       np.asarray(normal, dtype=float), float(force), np.asarray(centre, dtype=float),
                                       np.asarray(spindle_rate, dtype=float), np.asarray(feed_velocity, dtype=float),
                                       float(dt), self.kp)
        self.work += work
        return volume

    def nodes_near(self, point: FloatArray, radius: float) -> NDArray[np.int64]:
        """Indices of the nodes within ``radius`` (m) of ``point`` (3,)."""
        return np.asarray(self._tree.query_ball_point(np.asarray(point, dtype=float), radius), dtype=np.int64)

    def volume(self) -> float:
        """Removed volume, m^3 (sum of depth x area)."""
        return float(self.depth @ self.areas)

    def stats(self, before: FloatArray | None = None, floor: float = 0.01) -> RemovalStats:
        """Statistics of the depth removed since ``before`` (a copy of :attr:`depth`; None: all),
        over the nodes with more than ``floor`` x the largest."""
        d = np.where(self.inside, self.depth - (0.0 if before is None else before), 0.0)
        top = float(d.max(initial=0.0))
        if top <= 0.0:
            return RemovalStats(0.0, 0.0, 0, 0.0)
        hit = d > floor * top
        return RemovalStats(top, float(d[hit].mean()), int(hit.sum()), float(d @ self.areas))

    def display_mesh(self, cell: float, max_blocks: int = 0) -> tuple[FloatArray, NDArray[np.int64], FloatArray]:
        """A coarse triangle mesh of the removed region for viewers: nodes every ``cell`` m of each
        (u, v) layout (:attr:`blocks`: one per face), the largest depth of each block, cut to the
        blocks around any removal. With ``max_blocks`` > 0 the blocks grow (by whole grid steps)
        until the region of each face holds at most that many over the number of faces: a whole
        face at 1 mm is 80,000 triangles, 10 MB as a marker.

        Returns (vertices (M, 3) m, triangles (T, 3) vertex indices, depth (M,) m); empty arrays
        when nothing is removed or the grid has no layout."""
        parts = [self._block_mesh(off, rows, cols, cell, max_blocks // max(1, len(self.blocks)) if max_blocks else 0)
                 for _, off, rows, cols in self.blocks]
        parts = [m for m in parts if m is not None]
        if not parts:
            return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), np.zeros(0)
        starts = np.cumsum([0] + [len(V) for V, _, _ in parts[:-1]])
        T = np.vstack([tri + s for (_, tri, _), s in zip(parts, starts, strict=True)])
        return np.vstack([V for V, _, _ in parts]), T, np.concatenate([d for _, _, d in parts])

    def _block_mesh(self, off: int, rows: int, cols: int, cell: float, max_blocks: int
                    ) -> tuple[FloatArray, NDArray[np.int64], FloatArray] | None:
        """:meth:`display_mesh` of the layout of ``rows`` x ``cols`` nodes from node ``off``; None: empty."""
        span = slice(off, off + rows * cols)
        depth_b, inside_b = self.depth[span], self.inside[span]
        hit = np.flatnonzero((depth_b > 0) & inside_b)
        if len(hit) == 0:
            return None
        k = max(1, int(round(cell / self.spacing)))
        P = self.points[span].reshape(rows, cols, 3)
        # the blocks around the removed nodes, one block of margin: the grid's other blocks hold
        # nothing to show (a face grid has a million nodes; pooling all of them took 20 ms a map)
        hr, hc = hit // cols, hit % cols
        lo_r, hi_r, lo_c, hi_c = int(hr.min()), int(hr.max()), int(hc.min()), int(hc.max())
        while max_blocks > 0 and (hi_r // k - lo_r // k + 3) * (hi_c // k - lo_c // k + 3) > max_blocks:
            k += 1
        ri, ci = np.arange(0, rows, k), np.arange(0, cols, k)
        r0, r1 = max(lo_r // k - 1, 0), min(hi_r // k + 2, len(ri))
        c0, c1 = max(lo_c // k - 1, 0), min(hi_c // k + 2, len(ci))
        row_end = ri[r1] if r1 < len(ri) else rows
        col_end = ci[c1] if c1 < len(ci) else cols
        inside = inside_b.reshape(rows, cols)
        window = (slice(ri[r0], row_end), slice(ci[c0], col_end))
        D = np.where(inside[window], depth_b.reshape(rows, cols)[window], 0.0)
        depth = np.maximum.reduceat(np.maximum.reduceat(D, ri[r0:r1] - ri[r0], axis=0), ci[c0:c1] - ci[c0], axis=1)
        V = P[ri[r0:r1]][:, ci[c0:c1]]
        m, n = depth.shape
        if m < 2 or n < 2:
            return None
        ids = np.arange(m * n).reshape(m, n)
        a, b, c, d = ids[:-1, :-1].ravel(), ids[:-1, 1:].ravel(), ids[1:, :-1].ravel(), ids[1:, 1:].ravel()
        tri = np.concatenate([np.column_stack([a, b, d]), np.column_stack([a, d, c])])
        keep = np.concatenate([inside[ri[r0:r1]][:, ci[c0:c1]][:-1, :-1].ravel()] * 2)
        return V.reshape(-1, 3), tri[keep], depth.ravel()

    def block_arrays(self, values: FloatArray) -> list[tuple[int, FloatArray]]:
        """``values`` (N, ...) per node as one (rows, cols, ...) array per layout: [(face, array)]."""
        v = np.asarray(values)
        return [(f, v[off:off + rows * cols].reshape(rows, cols, *v.shape[1:])) for f, off, rows, cols in self.blocks]


def join_grids(grids: list[RemovalGrid], faces: list[int]) -> RemovalGrid:
    """One grid of the nodes of ``grids`` (one per face, the same k_p and pressure law), each
    grid's (u, v) layout kept as a block of the result (:attr:`RemovalGrid.blocks`) with its face
    index from ``faces``; :attr:`RemovalGrid.node_face` says each node's face. One grid keeps its
    ``shape``; several have none (their layouts are the blocks)."""
    if not grids or len(grids) != len(faces):
        raise InputError("removal grid: join_grids needs one face index per grid, and a grid")
    first = grids[0]
    normals = None if any(g.normals is None for g in grids) else np.vstack([g.normals for g in grids])
    out = RemovalGrid(np.vstack([g.points for g in grids]), np.concatenate([g.areas for g in grids]), normals,
                      first.shape if len(grids) == 1 else None, preston_coefficient=first.kp, pressure=first.pressure)
    out.inside = np.concatenate([g.inside for g in grids])
    out.node_face = np.concatenate([np.full(len(g.points), int(f), dtype=np.int64)
                                    for g, f in zip(grids, faces, strict=True)])
    out.blocks, off = [], 0
    for g, f in zip(grids, faces, strict=True):
        if g.shape is None:
            raise InputError("removal grid: join_grids needs grids with a (u, v) layout")
        out.blocks.append((int(f), off, int(g.shape[0]), int(g.shape[1])))
        off += len(g.points)
    return out


def patch_radius(tool_radius: float, depth: float) -> float:
    """The ball's contact patch radius a = sqrt(2 R d) (m) at penetration ``depth`` d (m); 0 out of contact."""
    return math.sqrt(2.0 * tool_radius * depth) if depth > 0 else 0.0


#: the most nodes of a removal grid (checked before it is allocated)
MAX_GRID_NODES = 4_000_000


def check_grid_size(nu: float, nv: float, spacing: float) -> None:
    """InputError naming removal.grid_spacing if a grid of ``nu`` x ``nv`` nodes is over MAX_GRID_NODES."""
    if not nu * nv <= MAX_GRID_NODES:
        raise InputError(f"removal grid: {nu:.0f} x {nv:.0f} nodes at {spacing * 1e3:g} mm, more than "
                         f"{MAX_GRID_NODES:,}; raise removal.grid_spacing (or set removal.enabled false)")


def face_grid(face: object, spacing: float, X: FloatArray | None = None, uv_box: tuple[float, float, float, float]
              | None = None, **kwargs: object) -> RemovalGrid:
    """A :class:`RemovalGrid` over a CAD face: a regular (u, v) grid about ``spacing`` m apart on the
    exact surface, nodes outside the trimmed face dropped (their area set to a tiny value so the
    layout stays regular), in the frame ``X`` (4, 4) applied to the part frame.

    Args:
        face: a :class:`~robot_grinding_sim.core.geometry.cad_face.CadFace`.
        spacing: node spacing on the surface, m.
        uv_box: (u0, u1, v0, v1) to cover (default the face's parameter bounds).
        kwargs: passed to :class:`RemovalGrid`.
    """
    u0, u1, v0, v1 = uv_box if uv_box is not None else face.uv_bounds  # type: ignore[attr-defined]
    um, vm = 0.5 * (u0 + u1), 0.5 * (v0 + v1)
    s = face.derivatives(np.array([um]), np.array([vm]))  # type: ignore[attr-defined]
    lu, lv = float(np.linalg.norm(s.du[0])), float(np.linalg.norm(s.dv[0]))
    nu = max(2, int(math.ceil((u1 - u0) * lu / spacing)) + 1)
    nv = max(2, int(math.ceil((v1 - v0) * lv / spacing)) + 1)
    check_grid_size(nu, nv, spacing)
    us, vs = np.linspace(u0, u1, nu), np.linspace(v0, v1, nv)
    V, U = np.meshgrid(vs, us, indexing="ij")  # rows along v, columns along u
    smp = face.derivatives(U.ravel(), V.ravel())  # type: ignore[attr-defined]
    cross = np.cross(smp.du, smp.dv)
    areas = np.sqrt(np.einsum("ij,ij->i", cross, cross)) * (us[1] - us[0]) * (vs[1] - vs[0])
    inside = face.contains(np.column_stack([U.ravel(), V.ravel()]))  # type: ignore[attr-defined]
    areas = np.where(inside & (areas > 0), areas, 1e-30)
    pts, nrm = smp.points, smp.normals
    if X is not None:
        R, t = np.asarray(X)[:3, :3], np.asarray(X)[:3, 3]
        pts, nrm = pts @ R.T + t, nrm @ R.T
    grid = RemovalGrid(pts, areas, nrm, (nv, nu), **kwargs)  # type: ignore[arg-type]
    grid.inside = inside
    return grid


@njit(cache=True)
def _patch_removal(points, areas, depth, idx, p, normal, force, a, centre, w, v_feed, dt, kp, hertz):
    """Add k_p p_i v_i dt to ``depth`` at the nodes ``idx`` (compiled: one step's patch in a few
    microseconds, which contact_solver_node does at 1 kHz); returns (volume m^3, work F v_bar dt N m)."""
    k = idx.shape[0]
    nn = math.sqrt(normal[0] ** 2 + normal[1] ** 2 + normal[2] ** 2)
    n0, n1, n2 = normal[0] / nn, normal[1] / nn, normal[2] / nn
    shape_fn = np.ones(k)
    if hertz:
        aa = max(a, 1e-300)
        for j in range(k):
            i = idx[j]
            r0, r1, r2 = points[i, 0] - p[0], points[i, 1] - p[1], points[i, 2] - p[2]
            rn = r0 * n0 + r1 * n1 + r2 * n2
            r0, r1, r2 = r0 - rn * n0, r1 - rn * n1, r2 - rn * n2
            u = 1.0 - (r0 * r0 + r1 * r1 + r2 * r2) / (aa * aa)
            shape_fn[j] = math.sqrt(u) if u > 0.0 else 0.0
    return _apply_pressure(points, areas, depth, idx, shape_fn, normal, force, centre, w, v_feed, dt, kp)


@njit(cache=True)
def _apply_pressure(points, areas, depth, idx, shape_fn, normal, force, centre, w, v_feed, dt, kp):
    """Add k_p p_i v_i dt at the nodes ``idx`` with the pressure p_i proportional to shape_fn (k,)
    (sum p_i A_i = force; evenly when shape_fn sums to 0), v_i the abrasive's tangential speed
    there (the feed v_feed plus the spindle's w about ``centre``); returns (volume m^3, work N m)."""
    k = idx.shape[0]
    nn = math.sqrt(normal[0] ** 2 + normal[1] ** 2 + normal[2] ** 2)
    n0, n1, n2 = normal[0] / nn, normal[1] / nn, normal[2] / nn
    total = 0.0
    for j in range(k):
        total += shape_fn[j] * areas[idx[j]]
    if total <= 0.0:  # every node on the rim: spread evenly
        total = 0.0
        for j in range(k):
            shape_fn[j] = 1.0
            total += areas[idx[j]]
    volume = 0.0
    work = 0.0
    for j in range(k):
        i = idx[j]
        x0, x1, x2 = points[i, 0] - centre[0], points[i, 1] - centre[1], points[i, 2] - centre[2]
        v0 = v_feed[0] + w[1] * x2 - w[2] * x1
        v1 = v_feed[1] + w[2] * x0 - w[0] * x2
        v2 = v_feed[2] + w[0] * x1 - w[1] * x0
        vn = v0 * n0 + v1 * n1 + v2 * n2  # sliding: tangential part
        v0, v1, v2 = v0 - vn * n0, v1 - vn * n1, v2 - vn * n2
        speed = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
        pressure = force * shape_fn[j] / total  # sum p_i A_i = F
        dh = kp * pressure * speed * dt
        depth[i] += dh
        work += pressure * areas[i] * speed * dt
        volume += dh * areas[i]
    return volume, work
