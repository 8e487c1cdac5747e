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
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError

SCHEMA = "robot_grinding_sim/plan"
VERSION = 1

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


def _pose(T: np.ndarray) -> dict[str, Any]:
    from scipy.spatial.transform import Rotation

    return {"position": _r(T[:3, 3]), "orientation": _r(Rotation.from_matrix(T[:3, :3]).as_quat())}


def plan_to_dict(plan: Any) -> dict[str, Any]:
    """The plan as plain JSON-ready data (schema ``robot_grinding_sim/plan`` version 1)."""
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
         "orientations": _r(m.quaternions)}
        for m in plan.moves
    ]
    traj = None
    if plan.trajectory is not None:
        t = plan.trajectory
        traj = {
            "frame": "base_link",
            "tip_link": t.tip_link,
            "joint_names": list(t.joint_names),
            "times": _r(t.times, 9),
            "positions": _r(t.positions),
            "velocities": _r(t.velocities),
            "accelerations": _r(t.accelerations),
            "segments": t.segments,
        }
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "frame": "workpiece",
        "units": {"length": "m", "angle": "rad", "time": "s", "force": "N", "quaternion": "xyzw"},
        "part": {
            "source": plan.source,
            "file_unit": plan.unit,
            "faces": list(plan.faces),
            "workpiece_pose": {"frame": "base_link", **_pose(plan.workpiece_pose)},
        },
        "parameters": plan.parameters(),
        "tool": {
            "radius": plan.tool.radius,
            "penetration": plan.tool.penetration,
            "tcp_rule": "tcp = p + (radius - penetration) * normal; z = -normal turned by lead (y) and tilt (x)",
        },
        "summary": plan.summary(),
        "passes": passes,
        "moves": moves,
        "trajectory": traj,
        "reachability": plan.reachability,
        "collision": plan.collision,
    }


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder and an atomic rename."""
    path = Path(path)
    if path.exists() and path.is_dir():
        raise InputError(f"{path}: is a directory")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise InputError(f"{path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a plan is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_plan(plan: Any, path: str | os.PathLike[str]) -> Path:
    """Write plan.json atomically; returns the path."""
    path = Path(path)
    atomic_write(path, json.dumps(plan_to_dict(plan), separators=(",", ":"), allow_nan=False))
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
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON plan ({exc})") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"{path}: not a {SCHEMA} file")
    if data.get("version") != VERSION:
        raise InputError(f"{path}: plan schema version {data.get('version')} (this reader: {VERSION})")
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
