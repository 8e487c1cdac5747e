"""Where the ball tool cannot touch the face without cutting into the part.

The planner places the ball's centre one radius out along the normal of the contact point. Where the
part curves back on itself more tightly than the ball (a concave corner, a wrapped face's inside,
another face near by), the ball placed there reaches into the part somewhere else: those waypoints
cannot be ground by this tool. :func:`drop_gouging` takes them out of the passes (splitting a pass
where they lie inside it), and :func:`reachable` marks the region's points the ball can touch,
so that coverage is measured on the area the tool can reach and the rest is reported as such.

The test is the distance from the ball's centre to the tessellated part (every face of it): below
``radius - tolerance`` the ball cuts in. ``tolerance`` (:data:`TOLERANCE`) exceeds the
tessellation's deflection (0.2 mm), by which a concave part's mesh comes nearer the centre than
the exact surface does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: the ball may come this much nearer the tessellated part than its radius, m (deflection 0.2 mm + margin)
TOLERANCE = 2.5e-4
#: pieces of a split pass shorter than this many waypoints are dropped
MIN_WAYPOINTS = 2


def clear_of_part(prepared: Any, centres: FloatArray, radius: float, tolerance: float = TOLERANCE
                  ) -> NDArray[np.bool_]:
    """(N,) True where a ball of ``radius`` (m) about each centre (N, 3) (part frame) stays out of
    the part (``prepared``: the part's :class:`~robot_grinding_sim.core.geometry.meshquery.PreparedMesh`)
    by more than ``-tolerance``."""
    limit = max(radius - tolerance, 0.0)
    ok = np.ones(len(centres), dtype=bool)
    warm = -1
    for k, c in enumerate(np.ascontiguousarray(centres, dtype=float)):
        # bounded query: only triangles nearer than the limit are searched
        d2, tri, _, _ = prepared.closest(c, warm, limit * limit)
        if tri >= 0:
            warm = tri
            ok[k] = d2 >= limit * limit
    return ok


def drop_gouging(passes: list[Any], prepared: Any, radius: float, tolerance: float = TOLERANCE
                 ) -> tuple[list[Any], dict[str, Any]]:
    """The passes without their waypoints where the ball (centre at point + radius * normal) cuts
    into the part; a pass split where such waypoints lie inside it; pieces of fewer than
    :data:`MIN_WAYPOINTS` dropped; passes renumbered in order. Returns (passes, figures: dropped
    waypoints, dropped pass length m, passes split, tolerance m)."""
    keep = [clear_of_part(prepared, p.points + radius * p.normals, radius, tolerance) for p in passes]
    out, figures = keep_waypoints(passes, keep)
    return out, {**figures, "tolerance_m": tolerance}


def keep_waypoints(passes: list[Any], keep: list[NDArray[np.bool_]]) -> tuple[list[Any], dict[str, Any]]:
    """The passes with only their waypoints where ``keep`` (one (N,) bool per pass) is true; a pass
    split where the others lie inside it; pieces of fewer than :data:`MIN_WAYPOINTS` dropped; passes
    renumbered in order. Returns (passes, figures: dropped waypoints, dropped pass length m, passes
    split). The one way waypoints leave a plan (the tool's reach here, the arm's in arm_reach.py)."""
    out: list[Any] = []
    dropped = split = 0
    length = 0.0
    for p, ok in zip(passes, keep, strict=True):
        if ok.all():
            out.append(p)
            continue
        dropped += int((~ok).sum())
        seg = np.linalg.norm(np.diff(p.points, axis=0), axis=1)
        length += float(seg[~(ok[:-1] & ok[1:])].sum())
        edges = np.flatnonzero(np.diff(np.r_[0, ok.astype(int), 0]))
        runs = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= MIN_WAYPOINTS]
        split += int(len(runs) > 1)
        for j, (a, b) in enumerate(runs):
            sl = slice(a, b)
            out.append(replace(p, segment=p.segment * 100 + j, points=p.points[sl], normals=p.normals[sl],
                               tangents=p.tangents[sl], arc=p.arc[sl] - p.arc[a], uv=p.uv[sl], face=p.face[sl]))
    for k, p in enumerate(out):
        p.index = k
    return out, {"dropped_waypoints": dropped, "dropped_length_m": length, "split_passes": split}


def reachable(prepared: Any, points: FloatArray, normals: FloatArray, radius: float,
              tolerance: float = TOLERANCE) -> NDArray[np.bool_]:
    """(N,) True where the ball touching the surface at points (N, 3) with outward normals (N, 3)
    stays out of the part elsewhere."""
    return clear_of_part(prepared, points + radius * normals, radius, tolerance)


def tool_coverage(gen: Any, passes: list[Any], prepared: Any, radius: float) -> tuple[list[Any], Any, Any]:
    """The generator's passes the ball of ``radius`` (m) can grind, the coverage model of the faces
    (geodesic.GeodesicPasses; None on meshes) and the coverage report, measured on the region the
    ball reaches (the rest as ``unreachable_area``). ``prepared``: the part's prepared mesh, or None
    to skip the tool's reach (every waypoint kept)."""
    from robot_grinding_sim.core.errors import PlanningError
    from robot_grinding_sim.core.planning.geodesic import coverage_model

    model = gen.coverage_model
    if model is None:
        try:
            model = coverage_model(gen)
        except PlanningError:
            model = None
    figures = None
    if prepared is not None:
        passes, figures = drop_gouging(passes, prepared, radius)
        if not passes:
            raise PlanningError(f"faces {gen.indices}: the ball of radius {radius * 1e3:.1f} mm cannot touch them "
                                "anywhere without cutting into the part; use a smaller tool")
        if model is not None:
            m, idx = model.mesh, np.flatnonzero(model.region)
            model.reach = np.ones(m.n, dtype=bool)
            model.reach[idx] = reachable(prepared, m.points[idx], m.normals[idx], radius)
    if model is None:
        return passes, None, None
    if gen.coverage is not None and figures is None:
        report = gen.coverage
    elif gen.coverage is not None and not figures["dropped_waypoints"] and model.reach.all():
        report = gen.coverage
    else:
        report = model.measure([p.points for p in passes])
    report.tool_reach = figures
    return passes, model, model.account(report)


__all__ = ["TOLERANCE", "clear_of_part", "drop_gouging", "keep_waypoints", "reachable", "tool_coverage"]
