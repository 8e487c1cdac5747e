"""plan.json (versioned schema, documented in docs/planner.md) and the CSV export.

Writers go through a temporary file in the target folder and an atomic rename, so a failure
never leaves a partial plan behind.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError

SCHEMA = "robot_grinding_sim/plan"
VERSION = 2
#: additions within version 2 (optional keys a version-2 reader may ignore): 1 = coverage, placement;
#: 2 = a straight link's "detour" over the part (taken where the arm changes configuration there);
#: 3 = "removal_plan" (the depth plan and its predicted removal map, docs/planner.md)
MINOR = 3
#: at most this many uncovered region points are written (for plots of the gaps)
MAX_UNCOVERED_POINTS = 2000
#: the longest job a plan.json may hold, s: a day (a last knot at 1e12 s is a broken file, and the
#: in-process job would size its record by it)
MAX_JOB_DURATION_S = 86400.0

CSV_COLUMNS = [
    "pass_index", "row", "segment", "waypoint", "arc_length",
    "x", "y", "z", "nx", "ny", "nz", "tx", "ty", "tz",
    "tcp_x", "tcp_y", "tcp_z", "tcp_qx", "tcp_qy", "tcp_qz", "tcp_qw", "face", "u", "v",
]


def _r(a: Any, nd: int = 12) -> Any:
    """Round arrays for JSON (12 decimals in metres: picometres; keeps files small, loses nothing)."""
    arr = np.round(np.asarray(a, dtype=float), nd)
    return [None if not math.isfinite(x) else x for x in arr.ravel().tolist()] if arr.ndim <= 1 else [
        _r(row, nd) for row in arr
    ]


def _finite(obj: Any) -> Any:
    """A report's values for JSON: non-finite floats (an infinite clearance: nothing measured) as null."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _pose(T: np.ndarray) -> dict[str, Any]:
    from scipy.spatial.transform import Rotation

    return {"position": _r(T[:3, 3]), "orientation": _r(Rotation.from_matrix(T[:3, :3]).as_quat())}


def plan_to_dict(plan: Any) -> dict[str, Any]:
    """The plan as plain JSON-ready data (schema ``robot_grinding_sim/plan`` version 2, docs/planner.md)."""
    passes = []
    for p, pos, quat in zip(plan.passes, plan.tcp_positions, plan.tcp_quaternions, strict=True):
        wps = []
        for k in range(len(p)):
            wps.append({
                "surface_point": _r(p.points[k]),
                "normal": _r(p.normals[k]),
                "travel": _r(p.tangents[k]),
                "pass_index": p.index,
                "arc_length": round(float(p.arc[k]), 12),
                "face": int(p.face[k]),
                "uv": _r(p.uv[k]),
                "tcp": {"position": _r(pos[k]), "orientation": _r(quat[k])},
            })
        passes.append({
            "index": p.index, "row": p.row, "segment": p.segment, "length": round(float(p.arc[-1]), 12),
            "waypoints": wps,
        })
    moves = [
        {"kind": m.kind, "pass_index": m.pass_index, "positions": _r(m.positions),
         "orientations": _r(m.quaternions),
         **({"detour": {"positions": _r(m.detour[0]), "orientations": _r(m.detour[1])}} if m.detour is not None
            else {})}
        for m in plan.moves
    ]
    traj = trajectory_to_dict(plan.trajectory) if plan.trajectory is not None else None
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "minor": MINOR,
        "frame": "workpiece",
        "units": {"length": "m", "angle": "rad", "time": "s", "force": "N", "quaternion": "xyzw"},
        "part": {
            "source": plan.source,
            "file_unit": plan.unit,
            "faces": list(plan.faces),
            "workpiece_pose": {"frame": base_frame(plan), **_pose(plan.workpiece_pose)},
            "up": _r(plan.up),
        },
        "parameters": plan.parameters(),
        "tool": {
            "shape": plan.tool.shape,
            "radius": plan.tool.radius,
            "penetration": plan.tool.penetration,
            "tcp_rule": ("tcp = p + (standoff - penetration) * normal - offset (pass frame x, y; standoff: the "
                         "radius unless given); z = -normal turned by lead (y) and tilt (x), then by the tool's rule; "
                         "x along the travel (a ball with no lead or tilt: the previous pass's roll)"),
        },
        "summary": plan.summary(),
        "passes": passes,
        "moves": moves,
        "trajectory": traj,
        "force_target": plan.force_target,
        "cell": plan.cell,
        "reachability": plan.reachability,
        "collision": _finite(plan.collision),
        "coverage": coverage_to_dict(getattr(plan, "coverage", None)),
        "placement": getattr(plan, "placement", None),
        "removal_plan": getattr(plan, "removal_plan", None),
    }


def coverage_to_dict(report: Any) -> dict[str, Any] | None:
    """plan.json's ``coverage`` object (docs/planner.md) of a geodesic.CoverageReport, or None."""
    if report is None:
        return None
    pts = np.asarray(report.uncovered).reshape(-1, 3)
    if len(pts) > MAX_UNCOVERED_POINTS:
        pts = pts[np.linspace(0, len(pts) - 1, MAX_UNCOVERED_POINTS).astype(int)]
    return {**report.as_dict(), "uncovered_points": _r(pts, 7) if len(pts) else []}


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder and an atomic rename
    (:func:`robot_grinding_sim.core.outfiles.atomic_write`)."""
    from robot_grinding_sim.core.outfiles import atomic_write as write

    write(path, text)


def plan_text(plan: Any) -> str:
    """plan.json's text (compact JSON) of a plan."""
    return json.dumps(plan_to_dict(plan), separators=(",", ":"), allow_nan=False)


def write_plan(plan: Any, path: str | os.PathLike[str]) -> Path:
    """Write plan.json atomically; returns the path."""
    path = Path(path)
    atomic_write(path, plan_text(plan))
    return path


def plan_csv(plan: Any) -> str:
    """One row per waypoint (columns :data:`CSV_COLUMNS`), part frame, metres."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p, pos, quat in zip(plan.passes, plan.tcp_positions, plan.tcp_quaternions, strict=True):
        for k in range(len(p)):
            w.writerow([
                p.index, p.row, p.segment, k, f"{p.arc[k]:.12g}",
                *(f"{x:.12g}" for x in p.points[k]), *(f"{x:.12g}" for x in p.normals[k]),
                *(f"{x:.12g}" for x in p.tangents[k]), *(f"{x:.12g}" for x in pos[k]),
                *(f"{x:.12g}" for x in quat[k]), int(p.face[k]), *(f"{x:.12g}" for x in p.uv[k]),
            ])
    return buf.getvalue()


def write_csv(plan: Any, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    atomic_write(path, plan_csv(plan))
    return path


def read_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read plan.json and check its schema and version; InputError naming the file otherwise."""
    return parse_plan(read_plan_text(path), str(path))


def read_plan_text(path: str | os.PathLike[str]) -> str:
    """plan.json's text as it is (for :func:`parse_plan`, and for a node that publishes it unchanged);
    InputError naming the file when it cannot be read."""
    path = Path(path)
    try:
        return path.read_text()
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a JSON plan ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from exc


def parse_plan(text: str, what: str = "plan") -> dict[str, Any]:
    """plan.json's text -> its dict, schema and version checked; InputError naming ``what`` otherwise."""
    path = what
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not a JSON plan ({exc})") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"{path}: not a {SCHEMA} file")
    if data.get("version") != VERSION:
        raise InputError(f"{path}: plan schema version {data.get('version')} (this reader: {VERSION}); "
                         "make the plan again with `grinding plan`")
    if not isinstance(data.get("passes"), list):
        raise InputError(f"{path}: no passes")
    return data


def plan_arrays(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """Flatten a read plan: surface points (N, 3), normals (N, 3), tcp positions (N, 3), pass index (N,)."""
    pts, nrm, tcp, idx = [], [], [], []
    for p in data["passes"]:
        for w in p["waypoints"]:
            pts.append(w["surface_point"])
            nrm.append(w["normal"])
            tcp.append(w["tcp"]["position"])
            idx.append(w["pass_index"])
    return {"points": np.array(pts, dtype=float).reshape(-1, 3), "normals": np.array(nrm, dtype=float).reshape(-1, 3),
            "tcp": np.array(tcp, dtype=float).reshape(-1, 3), "pass_index": np.array(idx, dtype=int)}


def base_frame(plan: Any) -> str:
    """The frame of the plan's workpiece pose and trajectory: the robot's root link the trajectory was
    made for (``base_link`` when the plan has no robot)."""
    return plan.trajectory.frame if plan.trajectory is not None else "base_link"


def trajectory_to_dict(traj: Any) -> dict[str, Any]:
    """The job trajectory as plan.json's ``trajectory`` object (docs/planner.md)."""
    return {
        "frame": traj.frame,
        "tip_link": traj.tip_link,
        "joint_names": list(traj.joint_names),
        "interpolation": "cubic_hermite",
        "times": _r(traj.times, 9),
        "positions": _r(traj.positions),
        "velocities": _r(traj.velocities),
        "arc_length": _r(traj.arc) if traj.arc is not None else None,
        "segments": traj.segments,
    }


def trajectory_from_dict(data: dict[str, Any], model: Any = None) -> Any:
    """plan.json's ``trajectory`` object -> :class:`~robot_grinding_sim.core.planning.trajectory.JointTrajectory`.

    With ``model`` the joint names must be the robot's (in its order). InputError names what is wrong.
    """
    from robot_grinding_sim.core.planning.trajectory import JointTrajectory

    try:
        names = [str(n) for n in data["joint_names"]]
        times = np.asarray(data["times"], dtype=float)
        pos = np.asarray(data["positions"], dtype=float).reshape(len(times), len(names))
        vel = np.asarray(data["velocities"], dtype=float).reshape(len(times), len(names))
        arc_raw = data.get("arc_length")
        arc = (np.array([np.nan if a is None else a for a in arc_raw], dtype=float) if arc_raw is not None
               else np.full(len(times), np.nan))
        segments = [{"kind": str(s["kind"]), "pass_index": int(s["pass_index"]), "start": int(s["start"]),
                     "stop": int(s["stop"])} for s in data["segments"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"plan trajectory: malformed ({type(exc).__name__}: {exc})") from None
    if data.get("interpolation", "cubic_hermite") != "cubic_hermite":
        raise InputError(f"plan trajectory: interpolation {data.get('interpolation')!r} (expected cubic_hermite)")
    if len(times) < 2 or not np.all(np.diff(times) > 0) or not (np.isfinite(pos).all() and np.isfinite(vel).all()):
        raise InputError("plan trajectory: times must increase and positions/velocities be finite")
    if times[0] < 0 or times[-1] > MAX_JOB_DURATION_S:
        raise InputError(f"plan trajectory: runs from {times[0]:.6g} s to {times[-1]:.6g} s; a job runs from 0 and "
                         f"lasts at most {MAX_JOB_DURATION_S:.0f} s (a day)")
    bad = [s for s in segments if not 0 <= s["start"] < s["stop"] <= len(times)]
    if bad:
        raise InputError(f"plan trajectory: segment {bad[0]} outside the {len(times)} knots")
    traj = JointTrajectory(names, str(data.get("tip_link", "tcp")), times, pos, vel, segments, arc,
                           str(data.get("frame") or "base_link"))
    if model is not None:
        check_trajectory(traj, model)
    return traj


def check_trajectory(traj: Any, model: Any) -> None:
    """A read job trajectory against the robot that will run it: its joints are the robot's (in its
    order), and its knots within the robot's limits as the arm's controller checks a command
    (positions, velocities at the knots and on average between them): a plan that would fail there
    fails here, first. InputError naming the problem."""
    if list(traj.joint_names) != list(model.joint_names):
        raise InputError(f"plan trajectory: joints {list(traj.joint_names)} are not the robot's "
                         f"{list(model.joint_names)}")
    traj.interpolator(model)


def plan_from_dict(data: dict[str, Any], path: str | os.PathLike[str] = "plan.json", model: Any = None) -> Any:
    """A read plan.json -> :class:`~robot_grinding_sim.core.planning.planner.Plan` (passes, TCP poses,
    moves, pose, tool, pass parameters; the trajectory, offsets and force target when present).

    The one parser of plan.json's content: with ``model`` (a RobotModel) the job trajectory is also
    checked against that robot (:func:`check_trajectory`), last. InputError naming ``path`` and the
    problem.
    """
    from scipy.spatial.transform import Rotation

    from robot_grinding_sim.core.config import PassParameters
    from robot_grinding_sim.core.planning.planner import Move, Plan, ToolParameters
    from robot_grinding_sim.core.planning.waypoints import Pass

    try:
        part = data["part"]
        wp = part["workpiece_pose"]
        X_BP = np.eye(4)
        X_BP[:3, :3] = Rotation.from_quat(wp["orientation"]).as_matrix()
        X_BP[:3, 3] = wp["position"]
        params = data["parameters"]
        passes, tcp_pos, tcp_quat = [], [], []
        for p in data["passes"]:
            w = p["waypoints"]
            def col(key: str, w: list = w) -> np.ndarray:
                return np.array([x[key] for x in w], dtype=float)
            uv = np.array([[np.nan if c is None else c for c in x["uv"]] for x in w], dtype=float).reshape(-1, 2)
            passes.append(Pass(int(p["index"]), int(p["row"]), int(p["segment"]), col("surface_point"), col("normal"),
                               col("travel"), col("arc_length"), uv, np.array([x["face"] for x in w], dtype=np.int64)))
            tcp_pos.append(np.array([x["tcp"]["position"] for x in w], dtype=float))
            tcp_quat.append(np.array([x["tcp"]["orientation"] for x in w], dtype=float))
        moves = [Move(str(m["kind"]), int(m["pass_index"]), np.asarray(m["positions"], dtype=float).reshape(-1, 3),
                      np.asarray(m["orientations"], dtype=float).reshape(-1, 4),
                      None if not m.get("detour") else
                      (np.asarray(m["detour"]["positions"], dtype=float).reshape(-1, 3),
                       np.asarray(m["detour"]["orientations"], dtype=float).reshape(-1, 4)))
                 for m in data["moves"]]
        plan = Plan(str(part["source"]), str(part.get("file_unit") or "m"), [int(f) for f in part["faces"]],
                    PassParameters(**params["passes"]), ToolParameters(**params["tool"]), passes, tcp_pos, tcp_quat,
                    moves, X_BP)
        if part.get("up") is not None:
            plan.up = np.asarray(part["up"], dtype=float)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(f"{path}: malformed plan ({type(exc).__name__}: {exc})") from None
    if data.get("trajectory"):
        try:
            plan.trajectory = trajectory_from_dict(data["trajectory"])
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
    plan.force_target = check_force_target(data.get("force_target"), len(passes), plan.tool.radius, str(path))
    plan.cell = data.get("cell")
    plan.reachability = data.get("reachability")
    plan.collision = data.get("collision")
    plan.placement = data.get("placement")
    rp = data.get("removal_plan")
    if rp is not None and not isinstance(rp, dict):
        raise InputError(f"{path}: removal_plan malformed (expected an object, got {type(rp).__name__})")
    plan.removal_plan = rp
    if model is not None and plan.trajectory is not None:
        try:
            check_trajectory(plan.trajectory, model)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
    return plan


def check_force_target(ft: Any, n_passes: int, radius: float, what: str = "plan.json") -> dict[str, Any] | None:
    """plan.json's ``force_target`` checked: a finite target force >= 0 N, and one finite offset per pass
    smaller than the tool's radius (m). Returns it unchanged (None when absent); InputError otherwise."""
    if ft is None:
        return None
    try:
        target = float(ft["target_force_n"])
        offsets = np.asarray(ft["offsets_m"], dtype=float).reshape(-1)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{what}: force_target malformed ({type(exc).__name__}: {exc})") from None
    if not (math.isfinite(target) and target >= 0.0):
        raise InputError(f"{what}: force_target target_force_n must be a finite force >= 0 N, got {target}")
    if len(offsets) != n_passes:
        raise InputError(f"{what}: force_target has {len(offsets)} offsets for {n_passes} passes")
    bad = np.flatnonzero(~np.isfinite(offsets) | (np.abs(offsets) >= radius))
    if len(bad):
        k = int(bad[0])
        raise InputError(f"{what}: force_target offset of pass {k} is {offsets[k]} m; it must be finite and "
                         f"smaller than the tool radius {radius} m")
    return ft


def check_plan(data: dict[str, Any], model: Any, what: str = "plan.json") -> Any:
    """Everything a run of the plan depends on, before it runs: the passes, moves and force target
    and the job trajectory against ``model``'s limits (:func:`plan_from_dict` with the model).
    Returns the Plan; InputError naming ``what`` and the problem."""
    return plan_from_dict(data, what, model)


def cell_of(data: dict[str, Any], path: str | os.PathLike[str] = "plan.json") -> Any:
    """The cell configuration a plan.json was made for (its ``cell`` values), or None."""
    from robot_grinding_sim.core.config import config_from_mapping

    values = data.get("cell")
    if not values:
        return None
    try:
        return config_from_mapping(dict(values))
    except InputError as exc:
        raise InputError(f"{path}: cell configuration: {exc}") from None
