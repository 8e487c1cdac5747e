"""Workpiece placement: a pose of the part on the table in front of the robot from which the arm
reaches every waypoint and runs the whole job free of collision with margin.

Search (:func:`search_pose`): candidate poses keep the configured height, roll and pitch and vary
the position on the table (x 0.30 to 1.10 m, y -0.70 to 0.70 m, 5 cm steps) and the yaw (eight
turns of 45 deg); they are tried nearest first (|dx| + |dy| + 0.1 m/rad |dyaw| from the configured
pose), so the pose chosen is the nearest one that works. Each candidate goes through three checks,
cheapest first:

1. envelope: every key TCP pose (pass ends, four points per pass, approach starts) lies in the
   arm's reachable set, sampled once (20,000 random configurations within the joint limits, binned
   in radius from the base axis, height (2 cm bins, dilated by one) and direction of the tool axis
   (down, horizontal, up));
2. IK: damped least squares through the key poses in the order of the job (the same solver and
   tolerance as the trajectory);
3. the job: the whole job trajectory (approach, passes, retreats, links, time parameterisation) and
   its collision check against the part: no link may touch the part, and the robot must keep
   ``margin`` (default: the cell's link clearance ``process.clearance``) off it where the margin
   applies (:mod:`~robot_grinding_sim.core.planning.collision_check`: every link but the tool's on
   every move, the tool too on links; the tool working on the surface on approach, pass and
   retreat needs no margin, the abrasive head touches it by design).

Poses: (x, y, z, roll, pitch, yaw) of the part frame in ``base_link``, m and rad (fixed axes
x-y-z), as ``workpiece.pose``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GrindingSimError, PlanningError

FloatArray = NDArray[np.float64]

X_RANGE, Y_RANGE, STEP = (0.30, 1.10), (-0.70, 0.70), 0.05
YAWS = (0.0, math.pi / 2, -math.pi / 2, math.pi, math.pi / 4, -math.pi / 4, 3 * math.pi / 4, -3 * math.pi / 4)
BIN = 0.02


@dataclass
class Placement:
    """The result of :func:`search_pose` (see the module docstring)."""

    pose: tuple[float, ...]
    configured: tuple[float, ...]
    candidates: int
    ik_checked: int
    job_checked: int
    min_clearance_m: float | None
    margin_m: float = 0.0
    margin_clearance_m: float | None = None
    margin_nearest: dict[str, Any] | None = None
    tool_clearance_m: float | None = None
    tool_nearest: dict[str, Any] | None = None
    failures: list[str] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"pose": list(self.pose), "configured_pose": list(self.configured), "candidates": self.candidates,
                "ik_checked": self.ik_checked, "job_checked": self.job_checked,
                "min_clearance_m": self.min_clearance_m, "margin_m": self.margin_m,
                "margin_clearance_m": self.margin_clearance_m, "margin_nearest": self.margin_nearest,
                "tool_clearance_m": self.tool_clearance_m, "tool_nearest": self.tool_nearest,
                "rejected": self.failures,
                "rule": "nearest pose on the table (x, y, yaw; z, roll, pitch kept) where every key waypoint "
                        "is reachable and the whole job is collision-free, with the margin where it applies "
                        "(every link but the tool on every move, the tool too on links)"}


def key_poses(plan: Any, per_pass: int = 4) -> tuple[FloatArray, list[str]]:
    """Key TCP poses (K, 4, 4) in the part frame, in the order of the job, with what each is."""
    from scipy.spatial.transform import Rotation

    out, what = [], []
    approach = plan.tool.approach
    for p, pos, quat in zip(plan.passes, plan.tcp_positions, plan.tcp_quaternions, strict=True):
        R = Rotation.from_quat(quat).as_matrix()
        T0 = np.eye(4)
        T0[:3, :3], T0[:3, 3] = R[0], pos[0] + approach * p.normals[0]
        out.append(T0)
        what.append(f"pass {p.index} approach")
        for k in np.unique(np.linspace(0, len(pos) - 1, per_pass).astype(int)):
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = R[k], pos[k]
            out.append(T)
            what.append(f"pass {p.index} waypoint {k}")
    return np.array(out), what


_ENVELOPES: dict[int, tuple[NDArray[np.bool_], float]] = {}


def _tool_class(axis_z: FloatArray) -> NDArray[np.int64]:
    """0: tool axis pointing down (z component < -0.5), 1: about horizontal, 2: up."""
    return np.where(axis_z < -0.5, 0, np.where(axis_z > 0.5, 2, 1))


def envelope(model: Any, samples: int = 20000) -> tuple[NDArray[np.bool_], float]:
    """The arm's reachable TCP positions binned in (radius from the base z axis, height, direction of the
    tool axis: down / horizontal / up): a boolean grid (dilated by one bin in radius and height) and
    the height of its first bin, m; bins ``BIN`` m."""
    key = id(model)
    if key not in _ENVELOPES:
        rng = np.random.default_rng(1)
        lo = np.where(np.isfinite(model.lower), model.lower, -math.pi)
        hi = np.where(np.isfinite(model.upper), model.upper, math.pi)
        X = np.array([model.fk(rng.uniform(lo, hi)) for _ in range(samples)])
        pts = X[:, :3, 3]
        rho, z = np.hypot(pts[:, 0], pts[:, 1]), pts[:, 2]
        z0 = float(z.min()) - BIN
        grid = np.zeros((int(rho.max() / BIN) + 3, int((z.max() - z0) / BIN) + 3, 3), dtype=bool)
        grid[(rho / BIN).astype(int), ((z - z0) / BIN).astype(int), _tool_class(X[:, 2, 2])] = True
        dil = grid.copy()
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                dil |= np.roll(np.roll(grid, di, axis=0), dj, axis=1)
        _ENVELOPES[key] = (dil, z0)
    return _ENVELOPES[key]


def _inside(model: Any, poses: FloatArray) -> bool:
    """Every pose (K, 4, 4) in base_link falls in a bin of the envelope with its tool direction."""
    grid, z0 = envelope(model)
    pts = poses[:, :3, 3]
    i = (np.hypot(pts[:, 0], pts[:, 1]) / BIN).astype(int)
    j = ((pts[:, 2] - z0) / BIN).astype(int)
    ok = (i >= 0) & (i < grid.shape[0]) & (j >= 0) & (j < grid.shape[1])
    return bool(ok.all() and grid[i, j, _tool_class(poses[:, 2, 2])].all())


def candidates(configured: Any) -> list[tuple[float, ...]]:
    """Candidate poses, nearest to ``configured`` (x y z roll pitch yaw) first."""
    x0, y0, z0, r0, p0, w0 = (float(v) for v in configured)
    out = []
    for x in np.arange(X_RANGE[0], X_RANGE[1] + 1e-9, STEP):
        for y in np.arange(Y_RANGE[0], Y_RANGE[1] + 1e-9, STEP):
            for dw in YAWS:
                out.append((abs(x - x0) + abs(y - y0) + 0.1 * abs(dw), (float(x), float(y), z0, r0, p0, w0 + dw)))
    out.append((0.0, (x0, y0, z0, r0, p0, w0)))
    out.sort(key=lambda c: c[0])
    seen, poses = set(), []
    for _, pose in out:
        k = tuple(round(v, 6) for v in pose)
        if k not in seen:
            seen.add(k)
            poses.append(pose)
    return poses


def check_ik(model: Any, plan: Any, X_BP: FloatArray, q_home: FloatArray) -> str | None:
    """None when every key pose is reachable from the pose X_BP, else what fails."""
    from robot_grinding_sim.core.planning.path_ik import first_configuration, solve_ik

    T, what = key_poses(plan)
    TB = X_BP @ T
    try:
        q = first_configuration(model, TB[0], q_home, what[0])
        for k in range(1, len(TB)):
            q = solve_ik(model, TB[k:k + 1], q, what[k], tol=1e-6, max_iterations=60)[0]
    except PlanningError as exc:
        return str(exc)
    return None


def check_job(model: Any, plan: Any, X_BP: FloatArray, cell: Any, margin: float
              ) -> tuple[str | None, dict[str, Any] | None]:
    """(None or what fails, the collision report or None) of the whole job trajectory at the pose X_BP:
    fails on a collision and where the robot comes nearer than ``margin`` under the margin's rule."""
    from robot_grinding_sim.core.planning import planner, trajectory
    from robot_grinding_sim.core.planning.collision_check import tool_link_names

    trial = dataclasses.replace(plan, workpiece_pose=X_BP, trajectory=None)
    try:
        paths = trajectory.job_paths(trial)
        traj = trajectory.build_job_trajectory(model, paths, cell.process, [0.0] * len(paths.passes),
                                               plan.tool.penetration, np.asarray(cell.robot.home, dtype=float))
        if plan.mesh is None:
            return None, None
        contact, links = tool_link_names(cell.tool)
        report = planner.check_trajectory_collisions(model, traj, plan.mesh, X_BP, contact, margin=margin,
                                                     tool_links=links)
    except (PlanningError, GrindingSimError) as exc:
        return str(exc), None
    bad = report["margin_violation"]
    if bad is not None:
        return (f"robot link {bad['link']} {bad['clearance_m'] * 1e3:.2f} mm from the part at {bad['where']} "
                f"(< {bad['required_m'] * 1e3:.2f} mm: the margin {margin * 1e3:.1f} mm"
                + (", or the tool's clearance at the link's ends" if bad["required_m"] < margin else "") + ")"), report
    return None, report


def search_pose(plan: Any, model: Any, cell: Any, margin: float | None = None, max_ik: int = 400,
                max_jobs: int = 4) -> Placement:
    """The nearest workpiece pose from which the job works (see the module docstring).

    Args:
        plan: a :class:`~robot_grinding_sim.core.planning.planner.Plan` (passes, TCP poses, moves, mesh).
        model: the robot (tip link ``tcp``).
        cell: the cell configuration (its workpiece pose, robot home, process).
        margin: smallest clearance of the robot's links from the part, m (default ``process.clearance``).

    Raises:
        PlanningError: no candidate works (with the nearest failure).
    """
    from robot_grinding_sim.core.planning.planner import pose_matrix

    margin = cell.process.clearance if margin is None else margin
    configured = tuple(float(v) for v in cell.workpiece.pose)
    T, _ = key_poses(plan)
    q_home = np.asarray(cell.robot.home, dtype=float)
    cands = candidates(configured)
    n_ik = n_job = 0
    first_failure = None
    failures: list[str] = []
    for pose in cands:
        X = pose_matrix(pose)
        if not _inside(model, X @ T):
            continue
        if n_ik >= max_ik or n_job >= max_jobs:
            break
        n_ik += 1
        why = check_ik(model, plan, X, q_home)
        if why is not None:
            first_failure = first_failure or f"pose {np.round(pose, 3).tolist()}: {why}"
            continue
        n_job += 1
        why, rep = check_job(model, plan, X, cell, margin)
        if why is None:
            def finite(v: float) -> float | None:
                return float(v) if math.isfinite(v) else None

            rep = rep or {}
            return Placement(tuple(round(v, 6) for v in pose), configured, len(cands), n_ik, n_job,
                             finite(rep.get("min_clearance_m", math.inf)), margin,
                             finite(rep.get("margin_clearance_m", math.inf)), rep.get("margin_nearest"),
                             finite(rep.get("tool_clearance_m", math.inf)), rep.get("tool_nearest"), failures)
        failures.append(f"pose {np.round(pose, 3).tolist()}: {why}")
        first_failure = first_failure or failures[-1]
    raise PlanningError(f"no workpiece pose on the table works ({n_ik} reachable candidates checked by IK, "
                        f"{n_job} jobs built; first failure: {first_failure})")


def pose_text(pose: Any) -> str:
    """A pose as ``--workpiece-pose`` takes it: 'x y z roll pitch yaw' (m, rad)."""
    return " ".join(f"{float(v):.4g}" for v in pose)


def suggestion(exc: Exception, plan: Any, part: Any, faces: list[int] | None, cell: Any) -> str | None:
    """For an unreachable or untimeable plan: the nearest workpiece pose that works, as a hint."""
    text = str(exc)
    if not any(k in text for k in ("unreachable", "path speed", "joint", "feed")):
        return None
    from robot_grinding_sim.core.geometry.tools import cell_tool
    from robot_grinding_sim.core.planning import planner
    from robot_grinding_sim.core.robot.ik import load_robot

    try:
        model = load_robot(cell.robot.description_file or "default", cell.tool.tcp_link, cell.robot.package_dirs)
        if plan is None:
            t = cell.tool
            tool = cell_tool(model, t.tcp_link, t.link, t.shape, t.patch_spacing, t.face_angle)
            plan = planner.plan(part, faces, cell.passes, planner.tool_parameters(cell, tool), robot=None,
                                workpiece_pose=np.asarray(cell.workpiece.pose, dtype=float))
        found = search_pose(plan, model, cell, max_ik=150, max_jobs=2)
    except GrindingSimError as err:
        return f"no workpiece pose on the table in front of the robot works either ({err})"
    return (f"the nearest workpiece pose that works: --workpiece-pose '{pose_text(found.pose)}' "
            f"(x y z m, roll pitch yaw rad), or let grinding plan choose one with --place auto")
