"""The removal map of a job: Preston's law over the ground face, from the job's own record.

After the final run, every contact step of the record (its mean normal force, contact point,
normal, depth, the arm's state) is replayed onto a :class:`~robot_grinding_sim.core.contact.preston.RemovalGrid`
over the ground face (the exact CAD surface in ``base_link``; a plane fitted to the passes for mesh
parts), with the spindle's rotation about the tool axis and the tool centre's velocity from the
arm's state. Each pass's episode (approach, dwell, pass, retreat) is summarised apart: largest and
mean depth over the nodes it reached, and its volume. :func:`plot_removal` draws the heat map on the
face and the depth profile across the middle pass.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.contact.preston import (
    RemovalGrid,
    check_grid_size,
    face_grid,
    join_grids,
    patch_radius,
)
from robot_grinding_sim.core.record.cdr_batch import BLOCK

FloatArray = NDArray[np.float64]

#: margin of the grid around the passes, m (more than the patch radius at any sensible depth)
GRID_MARGIN = 0.004
#: samples per side of a node's cell in a patch tool's weights (:func:`cell_depths`)
CELL_SAMPLES = 9


def job_grid(setup: Any) -> RemovalGrid:
    """The removal grid of a job: over the passes' region of their faces, in ``base_link``
    (:func:`pass_grid` of the job's cell, passes, part, pose, tool and planned penetration)."""
    return pass_grid(setup.cell, setup.plan.passes, setup.part, setup.X_BP, getattr(setup, "tool", None),
                     setup.penetration)


def pass_grid(cell: Any, passes: list[Any], part: Any, X_BP: FloatArray, tool: Any, penetration: float) -> RemovalGrid:
    """The removal grid over the region of ``passes`` (a plan's, in the part frame) on each face of
    ``part`` they touch: per face a (u, v) grid over their (u, v) box plus a margin (the tool's
    footprint beyond the passes), ``removal.grid_spacing`` apart, joined into one grid of blocks
    (:func:`~robot_grinding_sim.core.contact.preston.join_grids`), in the frame ``X_BP`` (4, 4)
    applied to the part frame. A part without an exact surface: a plane fitted to the passes.
    What the job's map, the plan's prediction and contact_solver_node (given the plan) use."""
    cfg = cell.removal
    kw = {"preston_coefficient": cfg.kp, "pressure": cfg.pressure}
    margin = GRID_MARGIN  # a tool with a patch: its footprint beyond the passes
    if tool is not None and tool.distributed:
        margin = max(GRID_MARGIN, tool.footprint_radius(penetration) + 2.0 * cfg.grid_spacing)
    uv = np.vstack([p.uv for p in passes])
    faces = np.concatenate([p.face for p in passes])
    if hasattr(part, "face") and np.isfinite(uv).all():
        grids, ids = [], sorted(set(faces.tolist()))
        for f in ids:  # each face the passes touch, over their (u, v) box on it
            face, on = part.face(int(f)), faces == f
            s = face.derivatives(uv[on, 0], uv[on, 1])
            lu = max(float(np.median(np.linalg.norm(s.du, axis=1))), 1e-12)
            lv = max(float(np.median(np.linalg.norm(s.dv, axis=1))), 1e-12)
            u0, u1, v0, v1 = face.uv_bounds
            box = (max(u0, uv[on, 0].min() - margin / lu), min(u1, uv[on, 0].max() + margin / lu),
                   max(v0, uv[on, 1].min() - margin / lv), min(v1, uv[on, 1].max() + margin / lv))
            grids.append(face_grid(face, cfg.grid_spacing, X_BP, box, **kw))
        return join_grids(grids, [int(f) for f in ids])
    return plane_grid(np.vstack([p.points for p in passes]), np.vstack([p.normals for p in passes]),
                      cfg.grid_spacing, X_BP, **kw)


def plane_grid(points: FloatArray, normals: FloatArray, spacing: float, X: FloatArray, **kw: Any) -> RemovalGrid:
    """A grid on the plane fitted to the pass points (part frame, (N, 3)), over their extent plus the
    margin, in the frame ``X`` (4, 4): for parts without an exact surface."""
    c = points.mean(axis=0)
    n = normals.mean(axis=0)
    n /= np.linalg.norm(n)
    e1 = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    a, b = (points - c) @ e1, (points - c) @ e2
    check_grid_size((np.ptp(a) + 2 * GRID_MARGIN) / spacing + 2, (np.ptp(b) + 2 * GRID_MARGIN) / spacing + 2, spacing)
    xs = np.arange(a.min() - GRID_MARGIN, a.max() + GRID_MARGIN + spacing, spacing)
    ys = np.arange(b.min() - GRID_MARGIN, b.max() + GRID_MARGIN + spacing, spacing)
    Y, Xg = np.meshgrid(ys, xs, indexing="ij")
    P = c + Xg.ravel()[:, None] * e1 + Y.ravel()[:, None] * e2
    R, t = X[:3, :3], X[:3, 3]
    return RemovalGrid(P @ R.T + t, np.full(len(P), spacing * spacing), np.tile(R @ n, (len(P), 1)),
                       (len(ys), len(xs)), **kw)


def episode_windows(traj: Any) -> list[tuple[int, float, float]]:
    """(pass index, start, end) s of each pass's episode (approach to retreat) of a job trajectory."""
    out: dict[int, list[float]] = {}
    for s in traj.segments:
        if s["kind"] == "link":
            continue
        t0, t1 = float(traj.times[s["start"]]), float(traj.times[s["stop"] - 1])
        lo, hi = out.get(s["pass_index"], [math.inf, -math.inf])
        out[s["pass_index"]] = [min(lo, t0), max(hi, t1)]
    return [(k, v[0], v[1]) for k, v in sorted(out.items(), key=lambda kv: kv[1][0])]


def job_removal(setup: Any, record: dict[str, FloatArray], traj: Any) -> tuple[RemovalGrid, list[dict[str, Any]]]:
    """Replay the record's contact steps onto the job's grid; (grid, per-pass statistics)."""
    grid = job_grid(setup)
    ts, fn = record["ts"], record["fn_mean"]
    # the deepest penetration of each step's output samples: the patch of that step
    depth = np.zeros(len(ts))
    if len(record["step_index"]):
        np.maximum.at(depth, record["step_index"], record["depth"])
    windows = episode_windows(traj)
    before: dict[int, FloatArray] = {}
    stats: dict[int, Any] = {}
    # each episode's depth is taken at the first step past its start, its statistics at the first
    # step past its end (before that step's removal)
    events: dict[int, list[tuple[int, bool]]] = {}
    for k, t0, t1 in windows:
        for t_w, end in ((t0, False), (t1, True)):
            events.setdefault(int(np.searchsorted(ts, t_w, side="right")), []).append((k, end))
    dts = np.diff(np.asarray(ts, dtype=float), prepend=0.0)
    hit = np.flatnonzero(~((fn <= 0.0) | (depth <= 0.0)))
    done = 0
    for i in sorted(events) + [len(ts)]:
        upto = int(np.searchsorted(hit, i))
        for s in range(done, upto, BLOCK):
            accumulate_steps(grid, setup, record, hit[s:min(upto, s + BLOCK)], depth, dts)
        done = upto
        for k, end in events.get(i, []) if i < len(ts) else []:
            if not end:
                before[k] = grid.depth.copy()
            elif k in before and k not in stats:
                stats[k] = grid.stats(before[k])
    for k, _, _ in windows:
        if k not in stats:
            stats[k] = grid.stats(before.get(k))
    return grid, [{"pass": k, **stats[k].as_dict()} for k, _, _ in windows]


def accumulate_steps(grid: RemovalGrid, setup: Any, record: dict[str, FloatArray], steps: NDArray[np.int64],
                     depth: FloatArray, dts: FloatArray) -> None:
    """:func:`accumulate_state` for the record's contact ``steps`` (indices, in order) at once: the
    tcp poses by batched FK and one k-d tree query (RemovalGrid.accumulate_many), the same sums."""
    if len(steps) == 0:
        return
    model, tcp = setup.model, setup.cell.tool.tcp_link
    X = model.fk(record["q"][steps], tcp)
    q, qd = record["q"], record["qd"]
    v_centre = np.array([model.jacobian(q[i], tcp)[:3] @ qd[i] for i in steps.tolist()])
    tool = setup.tool
    if tool is not None and tool.distributed:  # the pressure under the tool's own footprint
        points = X[:, :3, 3] + record["lever"][steps]
        w = setup.cell.tool.spindle_speed
        for j, i in enumerate(steps.tolist()):
            accumulate_tool(grid, tool, X[j], points[j], record["normal"][i], float(record["fn_mean"][i]),
                            float(depth[i]), w, v_centre[j], float(dts[i]))
        return
    radii = np.array([patch_radius(setup.tool_radius, float(depth[i])) for i in steps.tolist()])
    grid.accumulate_many(X[:, :3, 3] + record["lever"][steps], record["normal"][steps], record["fn_mean"][steps],
                         radii, X[:, :3, 3], setup.cell.tool.spindle_speed * X[:, :3, 2], v_centre, dts[steps])


def accumulate_tool(grid: RemovalGrid, tool: Any, X_tcp: FloatArray, point: FloatArray, normal: FloatArray,
                    force: float, depth: float, spindle_speed: float, v_centre: FloatArray, dt: float) -> float:
    """One step's removal under a tool with a patch (wheel, pad, disc) at tcp pose ``X_tcp`` (4, 4):
    the pressure at the nodes within its footprint proportional to their depth inside the tool
    (:meth:`~robot_grinding_sim.core.geometry.tools.Tool.penetration_at`, the Winkler law), summing
    to ``force`` N, the abrasive turning at ``spindle_speed`` rad/s about the tcp z through the tcp,
    the tcp moving at ``v_centre`` (3,) m/s; ``point``, ``normal`` (3,) the contact, ``depth`` its
    penetration (m, the footprint's reach). What the job's map, the graph's replay and the plan's
    prediction all call; returns the volume removed (m^3)."""
    nodes = grid.nodes_near(point, tool.footprint_radius(depth) + grid.spacing)
    return grid.accumulate_footprint(nodes, cell_depths(tool, grid.points[nodes], X_tcp, normal, grid.spacing),
                                     point, normal, force, X_tcp[:3, 3], spindle_speed * X_tcp[:3, 2], v_centre, dt)


def cell_depths(tool: Any, points: FloatArray, X_tcp: FloatArray, normal: FloatArray, spacing: float) -> FloatArray:
    """(k,) the nodes' Winkler weights (m): the depth of the tool (at tcp pose ``X_tcp`` (4, 4)) at
    each of ``points`` (k, 3) (base frame; ``normal`` (3,) the surface's outward normal), or where
    the patch touches none of them, its depth averaged over each node's cell (the square ``spacing``
    m wide about the node in the plane normal to ``normal``, CELL_SAMPLES x CELL_SAMPLES samples,
    4 times finer where none of them touches the patch either).

    Why: a patch thinner than the grid (the disc's segment along the travel where a pass engages:
    0.12 mm at 0.05 N against 0.3 mm nodes) falls between the nodes for most steps, and
    :meth:`RemovalGrid.accumulate_footprint` then put the whole force on the one node nearest the
    contact: 3.5 x the pass depth at each pass start. A patch that touches nodes lies within their
    cells (those nodes hold its force, as before); one between them lies in the cells the average
    finds. Only the nodes whose cell's corners or middle the tool reaches half a cell deeper are
    sampled (the others' cells are out of reach for faces under 45 degrees)."""
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    d = tool.penetration_at(points, X_tcp, n)
    if d.any() or len(d) == 0:
        return d
    e1 = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    deeper = np.array(X_tcp, dtype=float)
    deeper[:3, 3] -= 0.5 * spacing * n  # the outward normal: the tool half a cell further into the part
    corners = 0.5 * spacing * np.array([e1 + e2, e1 - e2, -e1 + e2, -e1 - e2, np.zeros(3)])
    reach = tool.penetration_at((points[:, None, :] + corners[None]).reshape(-1, 3), deeper, n)
    near = np.flatnonzero(reach.reshape(len(points), -1).max(axis=1) > 0.0)
    for m in (CELL_SAMPLES, 4 * CELL_SAMPLES):  # finer where the patch fell between the samples
        u = spacing * ((np.arange(m) + 0.5) / m - 0.5)  # the cell's midpoint rule
        offsets = (u[:, None, None] * e1 + u[None, :, None] * e2).reshape(-1, 3)
        sub = (points[near][:, None, :] + offsets[None, :, :]).reshape(-1, 3)
        d[near] = tool.penetration_at(sub, X_tcp, n).reshape(len(near), -1).mean(axis=1)
        if d[near].any():
            break
    return d


def accumulate_state(grid: RemovalGrid, model: Any, tcp: str, spindle_speed: float, X_tcp: FloatArray,
                     q: FloatArray, qd: FloatArray, point: FloatArray, normal: FloatArray, force: float,
                     depth: float, dt: float, tool: Any, J_tcp: FloatArray | None = None) -> float:
    """One state's removal over ``dt`` s: the contact at ``point`` / ``normal`` (base_link) with normal
    ``force`` (N) at penetration ``depth`` (m; a tool with a patch: its equivalent penetration);
    the spindle turning at ``spindle_speed`` (rad/s) about the tcp's z axis (``X_tcp`` (4, 4)), the
    tool centre moving with the arm at (q, qd) (``J_tcp``: the tcp's (6, n) Jacobian at q if the
    caller has it). ``tool``: the :class:`~robot_grinding_sim.core.geometry.tools.Tool` (a patch's
    pressure under its own footprint, the ball's spherical patch), or a float, the ball's radius (m).
    What the job's replay and contact_solver_node both call; returns the volume removed (m^3)."""
    v_centre = (model.jacobian(q, tcp) if J_tcp is None else J_tcp)[:3] @ qd
    if not isinstance(tool, float | int) and tool.distributed:
        return accumulate_tool(grid, tool, X_tcp, point, normal, force, depth, spindle_speed, v_centre, dt)
    radius = float(tool) if isinstance(tool, float | int) else tool.radius
    return grid.accumulate(point, normal, force, patch_radius(radius, depth), X_tcp[:3, 3],
                           spindle_speed * X_tcp[:3, 2], v_centre, dt)


def removal_summary(grid: RemovalGrid, per_pass: list[dict[str, Any]], cfg: Any,
                    figures: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary.json's ``removal`` (with ``uniformity``: :func:`depth_figures`' when a depth was planned)."""
    from robot_grinding_sim.core.planning.depth import public

    inside = grid.inside
    out = {"model": "preston", "preston_coefficient_m2_per_n": cfg.kp, "material": cfg.material,
           "pressure": cfg.pressure, "grid_spacing_m": cfg.grid_spacing, "nodes": int(inside.sum()),
           "volume_m3": grid.volume(), "work_n_m": grid.work, "max_depth_m": float(grid.depth[inside].max(initial=0.0)),
           "passes": per_pass}
    if figures is not None:
        out["uniformity"] = public(figures)
    return out


def pass_lines(plan: Any, X: FloatArray) -> list[Any]:
    """The plan's passes as :class:`~robot_grinding_sim.core.planning.depth.PassLine` in the frame
    ``X`` (4, 4) applied to the part frame (the job grid's ``base_link``)."""
    from robot_grinding_sim.core.planning.depth import PassLine

    R, t = np.asarray(X)[:3, :3], np.asarray(X)[:3, 3]
    return [PassLine(p.index, p.row, p.points @ R.T + t, np.asarray(p.arc, dtype=float)) for p in plan.passes]


def depth_figures(setup: Any, grid: RemovalGrid) -> dict[str, Any] | None:
    """The uniformity figures (:func:`~robot_grinding_sim.core.planning.depth.uniformity`) of a map of
    the job against ``removal.target_depth``; None when no depth was planned. The passes' spacing is
    the cell's ``passes.stepover`` (the depth plan's stepover over its layers); the groove's half-width
    and the patch's reach along the travel are the plan's (plan.json ``removal_plan``), else the
    tool's patch radius at the planned penetration. With per face target depths (``removal_plan.faces``
    and a grid over several faces) each node is held to its own face's D, the nodes within the
    transition (the patch's reach along the travel, one waypoint spacing and one grid spacing) of a
    face of another D are left out, and ``faces`` holds each face's figures against its D."""
    from robot_grinding_sim.core.planning.depth import public, uniformity

    cell = setup.cell
    D = cell.removal.target_depth
    if not D > 0:
        return None
    rp = getattr(setup.plan, "removal_plan", None) or {}
    tool = getattr(setup, "tool", None)
    patch = (tool.footprint_radius(setup.penetration) if tool is not None and tool.distributed
             else patch_radius(setup.tool_radius, setup.penetration))
    half_width = float(rp.get("half_width", patch))
    lines = pass_lines(setup.plan, setup.X_BP)
    args = (cell.removal.depth_band, cell.passes.stepover, half_width, cell.process.lead_in,
            float(rp.get("half_length", half_width)))
    per_face = {int(k): float(v["target_depth"]) for k, v in (rp.get("faces") or {}).items()}
    node_face = getattr(grid, "node_face", None)
    if not per_face or node_face is None:
        return uniformity(grid.points, grid.depth, grid.inside, lines, D, *args)
    # each node against its own face's D, and each face's figures apart; the depth cannot step at an
    # edge between faces of different D faster than the patch passes over it and the feed changes (one
    # waypoint spacing): nodes nearer than that to another face's are the transition, not the region
    from scipy.spatial import cKDTree

    target = np.array([per_face.get(int(f), D) for f in node_face])
    band = float(rp.get("half_length", half_width)) + cell.passes.spacing + grid.spacing
    settled = grid.inside.copy()
    for f in sorted(set(node_face.tolist())):
        mine, other = node_face == f, (node_face != f) & grid.inside
        if other.any() and np.any(target[other] != target[mine][0]):
            near = cKDTree(grid.points[other]).query(grid.points[mine], distance_upper_bound=band)[0] < band
            settled[np.flatnonzero(mine)[near]] = False
    out = uniformity(grid.points, grid.depth, settled, lines, target, *args)
    out["target_depth_m"] = D
    out["face_transition_m"] = band
    out["faces"] = {}
    for f in sorted(set(node_face.tolist())):
        fig = uniformity(grid.points, grid.depth, settled & (node_face == f), lines, per_face.get(int(f), D), *args)
        out["faces"][str(f)] = public(fig)
    return out


def replay_removal(setup: Any, t: FloatArray, q: FloatArray, qd: FloatArray, force_tcp: FloatArray) -> RemovalGrid:
    """The removal map of recorded states (a graph run's bag, a cell's log) on the job's grid: at each
    state (times ``t`` (M,) s, joint positions ``q`` and velocities ``qd`` (M, n) rad, rad/s, the
    contact force on the tool ``force_tcp`` (M, 3) N in tcp axes, as /contact/wrench carries it) the
    ball's contact is found anew (``setup.query`` at the tcp), its normal force is the force along
    the part's outward normal, and Preston's law removes over the interval since the state before
    (:func:`accumulate_state`, the code contact_solver_node runs). Where samples are missing (a
    recorder that lost some under load: more than 1.5 x the usual interval between two states) the
    states between are interpolated (q, qd and the force linear in time), so the lost interval's
    removal spreads along the motion instead of piling up at the state after the gap."""
    grid = job_grid(setup)
    model, tcp = setup.model, setup.cell.tool.tcp_link
    t = np.asarray(t, dtype=float)
    q, qd, force_tcp = (np.asarray(a, dtype=float) for a in (q, qd, force_tcp))
    if len(t) < 2:
        return grid
    step = np.diff(t)
    h = float(np.median(step[step > 0])) if np.any(step > 0) else 0.0
    gaps = np.flatnonzero(step > 1.5 * h) if h > 0 else np.zeros(0, dtype=int)
    if len(gaps):
        fill = [np.linspace(t[i], t[i + 1], int(round(step[i] / h)) + 1)[1:-1] for i in gaps.tolist()]
        t_all = np.sort(np.concatenate([t, *fill]))

        def at(a: FloatArray) -> FloatArray:
            return np.column_stack([np.interp(t_all, t, a[:, j]) for j in range(a.shape[1])])

        t, q, qd, force_tcp = t_all, at(q), at(qd), at(force_tcp)
    X = model.fk(q, tcp)
    dts = np.diff(t, prepend=t[0])
    for i in np.flatnonzero((dts > 0) & (np.linalg.norm(force_tcp, axis=1) > 0)).tolist():
        geom = setup.query.query(X[i])
        if geom.gap >= 0.0:
            continue
        fn = float(force_tcp[i] @ (X[i, :3, :3].T @ geom.normal))
        if fn > 0.0:  # under the tool's own footprint (the ball's patch)
            accumulate_state(grid, model, tcp, setup.cell.tool.spindle_speed, X[i], q[i], qd[i], geom.point,
                             geom.normal, fn, -geom.gap, float(dts[i]), getattr(setup, "tool", None) or
                             float(setup.tool_radius))
    return grid


def predicted_map(setup: Any) -> dict[str, Any]:
    """plan.json's ``removal_plan.predicted``: the predicted map's uniformity figures and the map
    itself, ``map.faces``: per face (u, v) layout of the grid (:attr:`RemovalGrid.blocks`) its face
    index, shape (rows, cols), depth per node in um rounded to 1 nm (row-major, NaN-free: 0 off
    the face) and three corners (base_link, m): first node, end of the first row, start of the
    last. A grid of one face also has that face's ``shape``, ``corners_m`` and ``depth_um`` at the
    top of ``map`` (as before faces were added)."""
    from robot_grinding_sim.core.planning.depth import public

    grid = predict_removal(setup)
    figures = depth_figures(setup, grid)
    out: dict[str, Any] = {"uniformity": public(figures) if figures is not None else None,
                           "max_depth_m": float(grid.depth[grid.inside].max(initial=0.0)), "volume_m3": grid.volume()}
    if grid.blocks:
        out["map"] = map_entry(grid)
    return out


def map_entry(grid: RemovalGrid) -> dict[str, Any]:
    """plan.json's ``removal_plan.predicted.map`` of a grid with (u, v) layouts (:func:`predicted_map`)."""
    depth = np.round(np.where(grid.inside, grid.depth, 0.0) * 1e6, 3)
    faces = [{"face": f, "shape": [int(P.shape[0]), int(P.shape[1])],
              "corners_m": [P[0, 0].tolist(), P[0, -1].tolist(), P[-1, 0].tolist()], "depth_um": D.ravel().tolist()}
             for (f, P), (_, D) in zip(grid.block_arrays(grid.points), grid.block_arrays(depth), strict=True)]
    out: dict[str, Any] = {"faces": faces}
    if len(faces) == 1:
        out.update({k: faces[0][k] for k in ("shape", "corners_m", "depth_um")})
    return out


def predict_removal(setup: Any, step: float | None = None) -> RemovalGrid:
    """The removal the plan predicts, on the job's grid: each pass at the cell's feed on the surface
    and target force (the lead-in and lead-out ramping the penetration as the trajectory does,
    :func:`~robot_grinding_sim.core.planning.trajectory.lead_lift`), the spindle about -n; Preston's
    law step by step (``step`` m along the pass, default half the grid spacing; a patch tool's: at
    most the simulation's step at the feed) on the same
    :class:`RemovalGrid` the simulated job's map uses."""
    from robot_grinding_sim.core.planning.trajectory import lead_lift

    cell = setup.cell
    grid = job_grid(setup)
    pr = cell.process
    ds = step or 0.5 * cell.removal.grid_spacing
    law = setup.law
    R, t = setup.X_BP[:3, :3], setup.X_BP[:3, 3]
    pen = setup.penetration
    tool = getattr(setup, "tool", None)
    if tool is not None and tool.distributed:
        # no longer than the simulation's step at the feed: a patch whose length along the travel is a
        # grid cell or two (the disc's, 0.6 mm at 2.7 N) weighs its nodes by where it stops, and at
        # half-cell steps the nodes under it alias into stripes (the disc's prediction: 60 % within
        # +-10 % of 5 um where the simulation's 1 ms steps, 0.05 mm, gave 95 %)
        _predict_patch(setup, grid, step or min(ds, pr.feed * cell.sim.dt))
        return grid
    for p in setup.plan.passes:
        L = float(p.arc[-1] - p.arc[0])
        s = np.linspace(float(p.arc[0]), float(p.arc[-1]), max(2, int(math.ceil(L / ds)) + 1))
        pts = np.column_stack([np.interp(s, p.arc, p.points[:, j]) for j in range(3)]) @ R.T + t
        nrm = np.column_stack([np.interp(s, p.arc, p.normals[:, j]) for j in range(3)]) @ R.T
        nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
        tan = np.gradient(pts, s, axis=0)
        tan /= np.maximum(np.linalg.norm(tan, axis=1, keepdims=True), 1e-12)
        d = np.full(len(s), pen)
        if pr.lead_in > 0:
            d = np.maximum(pen - lead_lift(s, pr.lead_in, pen, pr.engage_gap), 0.0)
        force = np.array([law.static_force(float(x)) if x > 0 else 0.0 for x in d])
        radii = np.array([patch_radius(setup.tool_radius, float(x)) for x in d])
        feed = pr.feed * _feed_scale(setup, p, s)
        dt = (s[1] - s[0]) / feed
        centres = pts + (setup.tool_radius - d)[:, None] * nrm
        grid.accumulate_many(pts, nrm, force, radii, centres, -cell.tool.spindle_speed * nrm, feed[:, None] * tan, dt)
    return grid


def _feed_scale(setup: Any, p: Any, s: FloatArray) -> FloatArray:
    """(len(s),) the feed over process.feed at arc lengths ``s`` of pass ``p``: its faces' (per face
    target depths, :func:`~robot_grinding_sim.core.planning.depth.face_feed_scales`; the
    trajectory interpolates the same between waypoints), else 1."""
    from robot_grinding_sim.core.planning.depth import face_feed_scales

    scales = face_feed_scales(getattr(setup.plan, "removal_plan", None))
    if not scales:
        return np.ones(len(s))
    return np.interp(s, np.asarray(p.arc, dtype=float), np.array([scales.get(int(f), 1.0) for f in p.face]))


def _predict_patch(setup: Any, grid: RemovalGrid, ds: float) -> None:
    """:func:`predict_removal` for a tool with a patch: the tool at the plan's tcp poses (interpolated
    along the pass every ``ds`` m: positions linearly, rotations by slerp), lifted along the normal
    over the lead-in and lead-out as the trajectory lifts it, pressing with the Winkler force of its
    penetration on a plane (the target force along the pass), the pressure under its own footprint
    (:func:`accumulate_tool`); the tcp moves at the feed on the surface times the tcp path's stretch."""
    from scipy.spatial.transform import Rotation, Slerp

    from robot_grinding_sim.core.planning.trajectory import lead_lift

    cell, tool = setup.cell, setup.tool
    pr, k_w = cell.process, cell.contact.stiffness
    R, t = setup.X_BP[:3, :3], setup.X_BP[:3, 3]
    pen = setup.penetration
    for p, pos, quat in zip(setup.plan.passes, setup.plan.tcp_positions, setup.plan.tcp_quaternions, strict=True):
        arc = np.asarray(p.arc, dtype=float)
        L = float(arc[-1] - arc[0])
        s = np.linspace(float(arc[0]), float(arc[-1]), max(2, int(math.ceil(L / ds)) + 1))

        def along(a: FloatArray, s: FloatArray = s, arc: FloatArray = arc) -> FloatArray:
            return np.column_stack([np.interp(s, arc, a[:, j]) for j in range(a.shape[1])])

        pts, nrm, tcp = along(p.points) @ R.T + t, along(p.normals) @ R.T, along(np.asarray(pos)) @ R.T + t
        nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
        keep = np.r_[True, np.diff(arc) > 0]
        rot = Slerp(arc[keep], Rotation.from_quat(np.asarray(quat)[keep]))(np.clip(s, arc[keep][0], arc[keep][-1]))
        Rt = R @ rot.as_matrix()
        d = np.full(len(s), pen)
        lift = np.zeros(len(s))
        if pr.lead_in > 0:
            lift = lead_lift(s, pr.lead_in, pen, pr.engage_gap)
            d = np.maximum(pen - lift, 0.0)
        tcp = tcp + lift[:, None] * nrm
        feed = pr.feed * _feed_scale(setup, p, s)
        v_tcp = feed[:, None] * np.gradient(tcp, s, axis=0)
        dts = (s[1] - s[0]) / feed
        for i in range(len(s)):
            if d[i] <= 0.0:
                continue
            X = np.eye(4)
            X[:3, :3], X[:3, 3] = Rt[i], tcp[i]
            accumulate_tool(grid, tool, X, pts[i], nrm[i], tool.plane_force(float(d[i]), k_w), float(d[i]),
                            cell.tool.spindle_speed, v_tcp[i], float(dts[i]))


def cross_section(grid: RemovalGrid, point: FloatArray, tangent: FloatArray, normal: FloatArray
                  ) -> tuple[FloatArray, FloatArray]:
    """(offset across the pass (m), depth (m)) of the nodes within half a spacing of the plane through
    ``point`` normal to ``tangent`` (base_link), sorted by offset along ``normal x tangent``."""
    t = tangent / np.linalg.norm(tangent)
    b = np.cross(normal, t)
    b /= np.linalg.norm(b)
    d = grid.points - point
    near = (np.abs(d @ t) <= 0.5 * grid.spacing) & grid.inside
    s = d[near] @ b
    order = np.argsort(s)
    return s[order], grid.depth[near][order]


def middle_cross_section(grid: RemovalGrid, setup: Any) -> tuple[Any, FloatArray, tuple[FloatArray, FloatArray]]:
    """(the middle pass (a :class:`~robot_grinding_sim.core.planning.depth.PassLine` in base_link), its
    middle waypoint's surface point (3,), :func:`cross_section` there): the profile removal.png draws.
    At the surface point, not the tcp: a disc's tcp is about its radius away along the travel."""
    k = len(setup.plan.passes) // 2
    g = pass_lines(setup.plan, setup.X_BP)[k]
    m = len(g.points) // 2
    tangent = g.points[min(m + 1, len(g.points) - 1)] - g.points[max(m - 1, 0)]
    normal = np.asarray(setup.plan.passes[k].normals[m]) @ np.asarray(setup.X_BP)[:3, :3].T
    return g, g.points[m], cross_section(grid, g.points[m], tangent, normal)


def plot_removal(path: Path, grid: RemovalGrid, setup: Any, figures: dict[str, Any] | None = None) -> None:
    """removal.png: the depth map on each face (um; a face's (u, v) layout as an image) and the
    depth profile across the middle pass.
    With a target depth (``figures``: :func:`depth_figures`) the map is coloured against it (blue
    shallower, red deeper, white at D; the colour range D +- 2 x the band), the region's outline drawn
    and the nodes of the region out of the band marked; the profile shows D and its band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_maps = max(1, len(grid.blocks))
    fig, axes = plt.subplots(1, n_maps + 1, figsize=(6 * (n_maps + 1), 4.8), squeeze=False)
    maps, ax2 = axes[0, :n_maps], axes[0, n_maps]
    depth_um = grid.depth * 1e6
    shown = np.where(grid.inside, depth_um, np.nan)
    D = figures["target_depth_m"] * 1e6 if figures else None
    band = figures["band"] if figures else 0.0
    style = ({"cmap": "inferno"} if D is None else
             {"cmap": "RdBu_r", "vmin": D * (1 - 2 * band), "vmax": D * (1 + 2 * band)})
    if D is None:  # one colour scale for every face
        style.update(vmin=0.0, vmax=float(np.nanmax(shown, initial=0.0)) or 1.0)
    region = figures is not None and bool(figures.get("region_nodes"))
    per_face = (figures or {}).get("faces") or {}  # per face target depths: each face against its own D
    if grid.blocks:  # each face's (u, v) layout as an image, the face's own axes
        for ax, (f, P), (_, S) in zip(maps, grid.block_arrays(grid.points), grid.block_arrays(shown), strict=True):
            rows, cols = S.shape
            su = float(np.linalg.norm(P[0, -1] - P[0, 0])) * 1e3
            sv = float(np.linalg.norm(P[-1, 0] - P[0, 0])) * 1e3
            own = per_face.get(str(f))
            if own is not None:
                Df = own["target_depth_m"] * 1e6
                style = {**style, "vmin": Df * (1 - 2 * band), "vmax": Df * (1 + 2 * band)}
                if own.get("region_nodes"):
                    ax.set_title(f"face {f}: {own['within_band']:.1%} within +-{band:.0%} of {Df:g} um", fontsize=9)
            im = ax.imshow(S, origin="lower", extent=(0, su, 0, sv), aspect="equal", **style)
            if region:
                (_, inr), (_, bad) = (grid.block_arrays(figures[k])[[b[0] for b in grid.blocks].index(f)]
                                      for k in ("in_region", "out_of_band"))
                uu, vv = np.meshgrid(np.linspace(0, su, cols), np.linspace(0, sv, rows))
                if inr.any():
                    ax.contour(uu, vv, inr.astype(float), levels=[0.5], colors="k", linewidths=0.8)
                if bad.any():
                    ax.scatter(uu[bad], vv[bad], s=1, c="lime", marker=".", label=f"out of +-{band:.0%}")
                    ax.legend(loc="upper right", fontsize=7)
            ax.set_xlabel("along u, mm")
            ax.set_ylabel("along v, mm")
            if n_maps > 1 and not ax.get_title():
                ax.set_title(f"face {f}", fontsize=9)
            fig.colorbar(im, ax=ax, label="depth removed, um")
    else:
        ax = maps[0]
        im = ax.scatter(grid.points[:, 0] * 1e3, grid.points[:, 1] * 1e3, c=shown, s=2, **style)
        ax.set_xlabel("x (base_link), mm")
        ax.set_ylabel("y (base_link), mm")
        fig.colorbar(im, ax=ax, label="depth removed, um")
    ax1 = maps[0]
    first = f"face {grid.blocks[0][0]}: " if n_maps > 1 else ""
    if region and not (per_face and n_maps > 1):  # (per face Ds: each face's title has its own)
        ax1.set_title(f"{first}removal map: {figures['within_band']:.1%} of the region (outlined) within "
                      f"+-{band:.0%} of {D:g} um\nend of pass {figures.get('end_of_pass_ratio') or 0:.2f} x the pass "
                      f"depth", fontsize=9)
    elif not ax1.get_title():
        ax1.set_title(f"{first}removal map (Preston)")
    g, point, (s, d) = middle_cross_section(grid, setup)
    ax2.plot(s * 1e3, d * 1e6, ".-", ms=3)
    if D is not None and per_face and grid.node_face is not None:  # the D of the face there
        here = int(grid.node_face[int(np.argmin(np.linalg.norm(grid.points - point, axis=1)))])
        D = per_face.get(str(here), {}).get("target_depth_m", D * 1e-6) * 1e6
    if D is not None:
        ax2.axhline(D, color="k", lw=0.8, label=f"target {D:g} um")
        ax2.axhspan(D * (1 - band), D * (1 + band), color="tab:green", alpha=0.15, label=f"+-{band:.0%}")
        ax2.legend(loc="lower center", fontsize=8)
    ax2.set_xlabel(f"across pass {g.index} at its middle, mm")
    ax2.set_ylabel("depth removed, um")
    ax2.set_title("cross-section")
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
