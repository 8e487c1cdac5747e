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

from robot_grinding_sim.core.contact.preston import RemovalGrid, check_grid_size, face_grid, patch_radius
from robot_grinding_sim.core.record.cdr_batch import BLOCK

FloatArray = NDArray[np.float64]

#: margin of the grid around the passes, m (more than the patch radius at any sensible depth)
GRID_MARGIN = 0.004


def job_grid(setup: Any) -> RemovalGrid:
    """The removal grid of a job: over the passes' region of their face, in ``base_link``."""
    cfg = setup.cell.removal
    kw = {"preston_coefficient": cfg.preston_coefficient, "pressure": cfg.pressure}
    passes = setup.plan.passes
    tool = getattr(setup, "tool", None)
    margin = GRID_MARGIN  # a tool with a patch: its footprint beyond the passes
    if tool is not None and tool.distributed:
        margin = max(GRID_MARGIN, tool.footprint_radius(setup.penetration) + 2.0 * cfg.grid_spacing)
    uv = np.vstack([p.uv for p in passes])
    faces = np.concatenate([p.face for p in passes])
    part = setup.part
    if hasattr(part, "face") and np.isfinite(uv).all() and len(set(faces.tolist())) == 1:
        face = part.face(int(faces[0]))
        s = face.derivatives(uv[:, 0], uv[:, 1])
        lu = max(float(np.median(np.linalg.norm(s.du, axis=1))), 1e-12)
        lv = max(float(np.median(np.linalg.norm(s.dv, axis=1))), 1e-12)
        u0, u1, v0, v1 = face.uv_bounds
        box = (max(u0, uv[:, 0].min() - margin / lu), min(u1, uv[:, 0].max() + margin / lu),
               max(v0, uv[:, 1].min() - margin / lv), min(v1, uv[:, 1].max() + margin / lv))
        return face_grid(face, cfg.grid_spacing, setup.X_BP, box, **kw)
    return plane_grid(np.vstack([p.points for p in passes]), np.vstack([p.normals for p in passes]),
                      cfg.grid_spacing, setup.X_BP, **kw)


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
            nodes = grid.nodes_near(points[j], tool.footprint_radius(float(depth[i])) + grid.spacing)
            grid.accumulate_footprint(nodes, tool.penetration_at(grid.points[nodes], X[j]), points[j],
                                      record["normal"][i], float(record["fn_mean"][i]), X[j, :3, 3], w * X[j, :3, 2],
                                      v_centre[j], float(dts[i]))
        return
    radii = np.array([patch_radius(setup.tool_radius, float(depth[i])) for i in steps.tolist()])
    grid.accumulate_many(X[:, :3, 3] + record["lever"][steps], record["normal"][steps], record["fn_mean"][steps],
                         radii, X[:, :3, 3], setup.cell.tool.spindle_speed * X[:, :3, 2], v_centre, dts[steps])


def accumulate_state(grid: RemovalGrid, model: Any, tcp: str, spindle_speed: float, X_tcp: FloatArray,
                     q: FloatArray, qd: FloatArray, point: FloatArray, normal: FloatArray, force: float,
                     radius: float, dt: float, J_tcp: FloatArray | None = None) -> float:
    """One state's removal over ``dt`` s: the contact at ``point`` / ``normal`` (base_link) with normal
    ``force`` (N) and patch ``radius`` (m); the spindle turning at ``spindle_speed`` (rad/s) about the
    tcp's z axis (``X_tcp`` (4, 4)), the tool centre moving with the arm at (q, qd) (``J_tcp``: the
    tcp's (6, n) Jacobian at q if the caller has it). What the job's replay and contact_solver_node
    both call; returns the volume removed (m^3)."""
    v_centre = (model.jacobian(q, tcp) if J_tcp is None else J_tcp)[:3] @ qd
    return grid.accumulate(point, normal, force, radius, X_tcp[:3, 3], spindle_speed * X_tcp[:3, 2], v_centre, dt)


def removal_summary(grid: RemovalGrid, per_pass: list[dict[str, Any]], cfg: Any) -> dict[str, Any]:
    """summary.json's ``removal``."""
    inside = grid.inside
    return {"model": "preston", "preston_coefficient_m2_per_n": cfg.preston_coefficient, "pressure": cfg.pressure,
            "grid_spacing_m": cfg.grid_spacing, "nodes": int(inside.sum()), "volume_m3": grid.volume(),
            "work_n_m": grid.work, "max_depth_m": float(grid.depth[inside].max(initial=0.0)), "passes": per_pass}


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


def plot_removal(path: Path, grid: RemovalGrid, setup: Any) -> None:
    """removal.png: the depth map on the face (um) and the depth profile across the middle pass."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    depth_um = grid.depth * 1e6
    shown = np.where(grid.inside, depth_um, np.nan)
    if grid.shape is not None:
        rows, cols = grid.shape
        P = grid.points.reshape(rows, cols, 3)
        su = float(np.linalg.norm(P[0, -1] - P[0, 0])) * 1e3
        sv = float(np.linalg.norm(P[-1, 0] - P[0, 0])) * 1e3
        im = ax1.imshow(shown.reshape(rows, cols), origin="lower", extent=(0, su, 0, sv), cmap="inferno",
                        aspect="equal")
        ax1.set_xlabel("along u, mm")
        ax1.set_ylabel("along v, mm")
    else:
        im = ax1.scatter(grid.points[:, 0] * 1e3, grid.points[:, 1] * 1e3, c=shown, s=2, cmap="inferno")
        ax1.set_xlabel("x (base_link), mm")
        ax1.set_ylabel("y (base_link), mm")
    fig.colorbar(im, ax=ax1, label="depth removed, um")
    ax1.set_title("removal map (Preston)")
    passes = setup.paths.passes
    g = passes[len(passes) // 2]
    m = len(g.positions) // 2
    tangent = g.positions[min(m + 1, len(g.positions) - 1)] - g.positions[max(m - 1, 0)]
    point = g.positions[m] - (setup.plan.tool.standoff if setup.plan.tool.standoff is not None
                              else setup.tool_radius) * g.normals[m]
    s, d = cross_section(grid, point, tangent, g.normals[m])
    ax2.plot(s * 1e3, d * 1e6, ".-", ms=3)
    ax2.set_xlabel(f"across pass {g.index} at its middle, mm")
    ax2.set_ylabel("depth removed, um")
    ax2.set_title("cross-section")
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
