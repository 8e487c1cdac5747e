"""Grinding plan: passes on the exact CAD surface, tool poses, approach/retreat/linking moves,
and (with a robot) the joint trajectory, its reachability report and its collision check.

Pipeline (:func:`plan`): part (:mod:`~robot_grinding_sim.core.geometry.cad`) -> passes
(:mod:`~robot_grinding_sim.core.planning.passes`) -> TCP poses (:func:`tcp_frames`) -> TCP moves
(approach, pass, retreat, link) -> joint trajectory (core.robot.ik, core.planning.timing) -> collision check.
Any failure raises before anything is written; :mod:`~robot_grinding_sim.core.planning.plan_io` writes it.

Frames: everything in the part frame (``workpiece``) except the joint trajectory and the robot
checks, which use ``workpiece_pose`` (X_BP, the part in the robot's ``base_link``).

TCP rule (pass frame F0: x along the travel, z the inward normal -n, y = z x x): the tcp's axes
    are R0 Ry(lead) Rx(tilt) R_rule, R_rule the tool shape's rule (:mod:`~robot_grinding_sim.core.geometry.tools`:
    ball and pad as F0; the wheel's axis across the feed; the disc leaning toward the feed). The
    TCP sits at p + (h - d) n - o: h the tool's standoff (the support of the tool along -n), o the
    F0 offset of the point that touches first (a disc's rim), d the penetration for the target
    force F on a plane (Kelvin-Voigt F / K; Winkler: the tool's patch, a pad's F / (k_w A)).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

from robot_grinding_sim.core import config
from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.errors import InputError, PlanningError
from robot_grinding_sim.core.geometry import cad, mesh_part, parts
from robot_grinding_sim.core.planning.collision_check import (
    CONTACT_LINKS,
    check_trajectory_collisions,
    tool_link_names,
)
from robot_grinding_sim.core.planning.links import detour, escape_leg, line_points, search_links
from robot_grinding_sim.core.planning.part_size import MAX_PART_SIZE, REACH_FACTOR, check_part_size, robot_reach
from robot_grinding_sim.core.planning.passes import Pass, PassParameters, toward_robot, validate_pass_parameters
from robot_grinding_sim.core.planning.waypoints import crop_pass

FloatArray = NDArray[np.float64]

_PROCESS, _CONTACT = config.ProcessConfig(), config.ContactConfig()


@dataclass(frozen=True)
class ToolParameters:
    """What the planner needs of the tool and the process (SI units, angles in rad).

    The defaults are the cell's (:mod:`robot_grinding_sim.core.config`); build one from a
    configuration with :func:`tool_parameters`.

    Attributes:
        radius: ball radius R, m (> 0).
        target_force: normal force F wanted on the passes, N (>= 0).
        stiffness: contact stiffness K, N/m^exponent (> 0).
        exponent: force law exponent at rest, F = K d^exponent (1: Kelvin-Voigt, 1.5: Hertz).
        lead: tool lead angle about the tool y axis, rad.
        tilt: tool tilt angle about the tool x axis (travel), rad.
        feed: TCP speed along the passes, m/s (> 0).
        approach: approach and retreat distance along the normal, m (> 0).
        clearance: minimum gap between tool and part on linking moves, m (> 0).
        shape, standoff, offset, rule, static_penetration, edge_margin: the tool's
            (``Tool.plan_parameters``; None: ``radius``, (F / K)^(1/exponent)).
    """

    radius: float = 0.02
    target_force: float = _PROCESS.target_force
    stiffness: float = _CONTACT.stiffness
    exponent: float = 1.0
    lead: float = _PROCESS.lead
    tilt: float = _PROCESS.tilt
    feed: float = _PROCESS.feed
    approach: float = _PROCESS.approach
    clearance: float = _PROCESS.clearance
    shape: str = "ball"
    standoff: float | None = None
    offset: tuple[float, ...] = (0.0, 0.0)
    rule: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0)
    static_penetration: float | None = None
    edge_margin: float = 0.0

    @property
    def penetration(self) -> float:
        """d with K d^exponent = F (the static penetration for the target force; a patch's own), m."""
        if self.static_penetration is not None:
            return float(self.static_penetration)
        return (self.target_force / self.stiffness) ** (1.0 / self.exponent)

    def validate(self) -> ToolParameters:
        for name in ("radius", "stiffness", "exponent", "feed", "approach", "clearance"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"{name.replace('_', '-')} must be a positive number, got {v!r}")
        if not (math.isfinite(self.target_force) and self.target_force >= 0):
            raise InputError(f"target-force must be >= 0 N, got {self.target_force!r}")
        for name in ("lead", "tilt"):
            v = getattr(self, name)
            if not (math.isfinite(v) and abs(v) < 0.5 * math.pi):
                raise InputError(f"{name} must be within (-pi/2, pi/2) rad, got {v!r}")
        if self.penetration >= self.radius:
            raise InputError(
                f"target-force {self.target_force} N / stiffness {self.stiffness} gives a penetration "
                f"{self.penetration} m not below the tool radius {self.radius} m"
            )
        if self.radius > 1.0:
            raise InputError(f"tool-radius {self.radius} m: over 1 m; metres are expected")
        return self


def tool_parameters(cell: config.CellConfig, tool: Any) -> ToolParameters:
    """The planner's tool parameters for a cell configuration and its tool (a
    :class:`~robot_grinding_sim.core.geometry.tools.Tool`, or a ball's radius, m)."""
    p, c = cell.process, cell.contact
    patch = tool.plan_parameters(p.lead, p.tilt, p.target_force, c.stiffness) if getattr(tool, "distributed", 0) else {}
    return ToolParameters(radius=float(getattr(tool, "radius", tool)), target_force=p.target_force,
                          stiffness=c.stiffness, exponent=registry.get(c.model).static_exponent(c), lead=p.lead,
                          tilt=p.tilt, feed=p.feed, approach=p.approach, clearance=p.clearance, **patch)


@dataclass
class Move:
    """A piece of TCP motion in the part frame.

    Attributes:
        kind: ``approach``, ``pass``, ``retreat`` or ``link``.
        pass_index: the pass it belongs to (approach/pass/retreat) or leads to (link).
        positions: (M, 3) TCP positions, m.
        quaternions: (M, 4) TCP orientations (x, y, z, w).
        detour: a straight link's way over the part (positions, quaternions), for a change of the
            arm's configuration there (:func:`~robot_grinding_sim.core.planning.links.detour`).
    """

    kind: str
    pass_index: int
    positions: FloatArray
    quaternions: FloatArray
    detour: tuple[FloatArray, FloatArray] | None = None


@dataclass
class Plan:
    """A complete plan. Arrays in the part frame unless stated otherwise."""

    source: str
    unit: str
    faces: list[int]
    pass_params: PassParameters
    tool: ToolParameters
    passes: list[Pass]
    tcp_positions: list[FloatArray]  # per pass (N, 3), m
    tcp_quaternions: list[FloatArray]  # per pass (N, 4), xyzw
    moves: list[Move]
    workpiece_pose: FloatArray = field(default_factory=lambda: np.eye(4))  # X_BP (4, 4)
    trajectory: Any = None  # trajectory.JointTrajectory of the whole job, or None
    offsets: list[float] | None = None  # per-pass commanded offsets of the trajectory, m
    force_target: dict[str, Any] | None = None  # the force-target optimisation's result, if run
    cell: dict[str, Any] | None = None  # the cell configuration the trajectory was made for
    up: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))  # the faces' mean normal
    symmetric_tool: bool = True  # see plan()
    reachability: dict[str, Any] | None = None
    collision: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    mesh: Any = None  # the tessellated part (trimesh, part frame) when one was made
    coverage: Any = None  # geodesic.CoverageReport of the passes (None on mesh parts)
    coverage_model: Any = None  # what measures it (the faces' mesh and region), for cropped plans
    placement: dict[str, Any] | None = None  # the workpiece pose search's result (--place auto)
    removal_plan: dict[str, Any] | None = None  # the depth plan and its predicted map (core.planning.depth)

    @property
    def n_waypoints(self) -> int:
        return int(sum(len(p) for p in self.passes))

    def summary(self) -> dict[str, Any]:
        lengths = [float(p.arc[-1]) for p in self.passes]
        out = {
            "source": self.source,
            "faces": self.faces,
            "passes": len(self.passes),
            "rows": len({p.row for p in self.passes}),
            "waypoints": self.n_waypoints,
            "pass_length_m": float(sum(lengths)),
            "grinding_time_s": float(sum(lengths) / self.tool.feed),
            "penetration_m": self.tool.penetration,
        }
        if self.trajectory is not None:
            out["trajectory_points"] = len(self.trajectory.times)
            out["trajectory_duration_s"] = float(self.trajectory.times[-1])
        return out

    def parameters(self) -> dict[str, Any]:
        return {"passes": asdict(self.pass_params), "tool": asdict(self.tool)}


def pose_matrix(pose: Any) -> FloatArray:
    """4x4 transform from (x, y, z, roll, pitch, yaw) (m, rad; fixed-axis XYZ) or a (4, 4) matrix."""
    a = np.asarray(pose, dtype=float)
    if a.shape == (4, 4):
        if not np.all(np.isfinite(a)) or not np.allclose(a[3], [0, 0, 0, 1]):
            raise InputError("workpiece pose: not a homogeneous transform")
        R = a[:3, :3]
        if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
            raise InputError("workpiece pose: the rotation block is not a rotation")
        return a.copy()
    if a.shape != (6,) or not np.all(np.isfinite(a)):
        raise InputError(f"workpiece pose: expected x y z roll pitch yaw (6 numbers), got {a.tolist()}")
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", a[3:]).as_matrix()
    T[:3, 3] = a[:3]
    return T


def pose_vector(X: Any) -> list[float]:
    """Inverse of :func:`pose_matrix`: (4, 4) -> [x, y, z, roll, pitch, yaw] (m, rad; fixed-axis XYZ)."""
    a = np.asarray(X, dtype=float)
    return [*a[:3, 3].tolist(), *Rotation.from_matrix(a[:3, :3]).as_euler("xyz").tolist()]


def tcp_frames(points: FloatArray, normals: FloatArray, tangents: FloatArray, tool: ToolParameters
               ) -> tuple[FloatArray, FloatArray]:
    """TCP positions (N, 3) m and rotation matrices (N, 3, 3) (columns: tool x, y, z in the part frame).

    See the module docstring for the rule.
    """
    n = normals / np.linalg.norm(normals, axis=1, keepdims=True)
    x = tangents - np.sum(tangents * n, axis=1, keepdims=True) * n
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    z = -n
    y = np.cross(z, x)
    R0 = np.stack([x, y, z], axis=2)
    R = R0 @ Rotation.from_euler("YX", [tool.lead, tool.tilt]).as_matrix() @ Rotation.from_quat(tool.rule).as_matrix()
    positions = (points + ((tool.radius if tool.standoff is None else tool.standoff) - tool.penetration) * n
                 - tool.offset[0] * x - tool.offset[1] * y)
    return positions, R


def _slerp(q0: FloatArray, q1: FloatArray, n: int) -> FloatArray:
    rots = Rotation.from_quat(np.vstack([q0, q1]))
    return Slerp([0.0, 1.0], rots)(np.linspace(0.0, 1.0, n)).as_quat()


class _Clearance:
    """Distance from TCP positions to the part (tessellated), for linking moves."""

    def __init__(self, part: Any) -> None:
        from robot_grinding_sim.core.geometry.meshquery import prepare_mesh

        mesh = part.tessellate(deflection=2e-4)
        self.mesh = mesh
        self.prepared = prepare_mesh("workpiece", mesh.vertices, mesh.faces)
        self.vertices = np.asarray(mesh.vertices)

    def distance(self, pts: FloatArray) -> FloatArray:
        out = np.empty(len(pts))
        warm = -1
        for k, p in enumerate(np.ascontiguousarray(pts, dtype=float)):
            d2, warm, _, _ = self.prepared.closest(p, warm)
            out[k] = math.sqrt(d2)
        return out


def clearance_of(part: Any) -> _Clearance:
    """The part's distance query for linking moves (its tessellation at 0.2 mm)."""
    return _Clearance(part)


def clear_length(p: FloatArray, n: FloatArray, tool: ToolParameters, clearance: Any,
                 most: float = 10.0) -> float:
    """Length, m, of the approach or retreat from TCP p (3,) along the normal n (3,): ``tool.approach``,
    lengthened in steps of a quarter of the clearance until the ball there is ``tool.clearance`` off
    the part (a retreat along the normal of a face that wraps round can pass close to another part
    of it), to at most ``most`` x ``tool.approach`` (then the length that gets furthest). clearance:
    the part's distance (``distance(points (k, 3)) -> (k,)`` m), None: no part."""
    if clearance is None:
        return tool.approach
    need = tool.radius + tool.clearance
    step = max(0.25 * tool.clearance, 1e-4)
    lengths = np.arange(tool.approach, most * tool.approach + 0.5 * step, step)
    best, best_d = tool.approach, -np.inf
    for chunk in np.array_split(lengths, max(1, len(lengths) // 16)):
        d = clearance.distance(p + chunk[:, None] * n)
        ok = np.flatnonzero(d >= need - 1e-9)
        if len(ok):
            return float(chunk[ok[0]])
        if d.max() > best_d:
            best, best_d = float(chunk[int(np.argmax(d))]), float(d.max())
    return best


def build_moves(passes: list[Pass], tcp_pos: list[FloatArray], tcp_quat: list[FloatArray], tool: ToolParameters,
                up: FloatArray, clearance: _Clearance | None, over: dict[int, float] | None = None) -> list[Move]:
    """Approach, pass, retreat and linking moves (part frame) for ``passes`` in order.

    Approach and retreat run along the normal at the pass ends over ``tool.approach``, or further
    where the tool would end nearer the part than ``clearance`` (:func:`clear_length`). A link
    joins a retreat to the next approach in a straight line when the tool stays ``clearance``
    off the part along it and its axis turns by less than :data:`DIRECT_LINK_TILT`; otherwise it
    rises along ``up`` to a safe height above the whole part, turns there (first to the tool
    pointing down, then to the next pass's orientation: never through an upward-pointing tool the
    arm cannot reach), and comes down with the next pass's orientation (a tool axis swinging round
    near a wrapped part sweeps the tool's head through it even where the ball stays clear).

    ``over``: {pass index: extra height, m}: the link to that pass goes over the part whatever the
    rule above says, its top that much above the safe height (:func:`search_links`: where the
    robot's collision check found the link hitting the part).
    """
    moves: list[Move] = []
    step = max(0.25 * tool.clearance, 1e-3)
    safe_h = None
    if clearance is not None:
        safe_h = float(np.max(clearance.vertices @ up)) + tool.radius + tool.clearance + tool.approach
    prev_end: tuple[FloatArray, FloatArray, FloatArray] | None = None
    turn = 1.0  # direction of the last half-turn about the tool axis (zig-zag): alternate, never wind up
    for k, p in enumerate(passes):
        pos, quat = tcp_pos[k], tcp_quat[k]
        a_start = pos[0] + clear_length(pos[0], p.normals[0], tool, clearance) * p.normals[0]
        r_end = pos[-1] + clear_length(pos[-1], p.normals[-1], tool, clearance) * p.normals[-1]
        if prev_end is not None:
            tilt = _axis_angle(prev_end[1], quat[0])
            out = np.vstack([prev_end[2], p.normals[0]])
            extra = (over or {}).get(p.index)
            if extra is None or safe_h is None:
                link, top = _link(prev_end[0], a_start, step, tool, up, clearance, safe_h, tilt, out)
            else:
                link, top = _link(prev_end[0], a_start, step, tool, up, clearance, safe_h + extra, math.pi, out)
            alt = None
            if top is None and clearance is not None and safe_h is not None:
                alt = detour(prev_end[0], a_start, prev_end[1], quat[0], out, up, safe_h, clearance.distance,
                             tool.radius + tool.clearance, step)
            if top is None:
                quats, turn = _turn(prev_end[1], quat[0], turn)
                link = _resample_polyline(link, max(len(link), len(quats)))
                if len(quats) != len(link):
                    quats = _turn(prev_end[1], quat[0], -turn, n=len(link))[0]
            else:  # rise, turn at the safe height through the tool pointing down, come down
                up_leg, top_leg, down_leg = top
                q_down = _pointing(prev_end[1], -up)
                n_a = max(2, int(math.ceil(_axis_angle(prev_end[1], q_down) / 0.05)) + 1)
                q_b, turn = _turn(q_down, quat[0], turn)
                n_top = max(len(top_leg), n_a + len(q_b) - 1)
                top_leg = _resample_polyline(top_leg, n_top)
                n_a = max(2, min(n_top - 1, round(n_top * n_a / (n_a + len(q_b)))))
                q_top = np.vstack([_slerp(prev_end[1], q_down, n_a)[:-1],
                                   _turn(q_down, quat[0], -turn, n=n_top - n_a + 1)[0]])
                link = np.vstack([up_leg[:-1], top_leg, down_leg[1:]])
                quats = np.vstack([np.repeat(prev_end[1][None], len(up_leg) - 1, axis=0), q_top,
                                   np.repeat(quat[0][None], len(down_leg) - 1, axis=0)])
            moves.append(Move("link", p.index, link, quats, alt))
        moves.append(Move("approach", p.index, np.vstack([a_start, pos[0]]), np.vstack([quat[0], quat[0]])))
        moves.append(Move("pass", p.index, pos, quat))
        moves.append(Move("retreat", p.index, np.vstack([pos[-1], r_end]), np.vstack([quat[-1], quat[-1]])))
        prev_end = (r_end, quat[-1], p.normals[-1])
    return moves


def _turn(q0: FloatArray, q1: FloatArray, last: float, n: int | None = None, max_angle: float = 0.05
          ) -> tuple[FloatArray, float]:
    """Orientations from q0 to q1 (xyzw); a near half-turn goes opposite to the ``last`` one.

    Returns the (n, 4) quaternions and the direction used (+1 / -1 about the rotation axis's
    component along the tool z axis), so that successive zig-zag turns alternate instead of
    winding the wrist up to its limit.
    """
    R0 = Rotation.from_quat(q0)
    r = (R0.inv() * Rotation.from_quat(q1)).as_rotvec()  # in the tool frame
    ang = float(np.linalg.norm(r))
    sign = float(np.sign(r[2])) if abs(r[2]) > 1e-9 else 1.0
    if ang > math.pi - 0.3 and sign == last:
        r = r - 2.0 * math.pi * r / ang  # the same end orientation reached the other way round
        ang = 2.0 * math.pi - ang
        sign = -sign
    if n is None:
        n = max(2, int(math.ceil(ang / max_angle)) + 1)
    s = np.linspace(0.0, 1.0, n)[:, None]
    quats = (R0 * Rotation.from_rotvec(s * r)).as_quat()
    return quats, (sign if ang > math.pi - 0.3 else last)


def _resample_polyline(pts: FloatArray, n: int) -> FloatArray:
    """n points evenly spaced by arc length along the polyline pts (M, 3)."""
    if len(pts) == n:
        return pts
    L = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))]
    t = np.linspace(0.0, L[-1], n)
    return np.column_stack([np.interp(t, L, pts[:, k]) for k in range(3)])


#: a link whose tool axis turns by this much or more goes over the part, rad (30 deg)
DIRECT_LINK_TILT = math.radians(30.0)


def _pointing(q: FloatArray, z: FloatArray) -> FloatArray:
    """The orientation (xyzw) nearest to ``q`` whose tool z axis is ``z`` (unit): ``q`` turned by
    the smallest rotation that takes its z axis there."""
    R = Rotation.from_quat(q)
    z0 = R.as_matrix()[:, 2]
    axis = np.cross(z0, z)
    s, c = float(np.linalg.norm(axis)), float(z0 @ z)
    if s < 1e-12:  # already there, or exactly opposite: about the tool x axis
        return q if c > 0 else (R * Rotation.from_rotvec([math.pi, 0.0, 0.0])).as_quat()
    return (Rotation.from_rotvec(axis / s * math.atan2(s, c)) * R).as_quat()


def _axis_angle(q0: FloatArray, q1: FloatArray) -> float:
    """Angle between the tool z axes of two orientations (xyzw), rad."""
    z0, z1 = Rotation.from_quat(np.vstack([q0, q1])).as_matrix()[:, :, 2]
    return float(math.acos(min(1.0, max(-1.0, float(z0 @ z1)))))


def _link(a: FloatArray, b: FloatArray, step: float, tool: ToolParameters, up: FloatArray,
          clearance: _Clearance | None, safe_h: float | None, tilt: float = 0.0, out: Any = None
          ) -> tuple[FloatArray, tuple[FloatArray, FloatArray, FloatArray] | None]:
    """The link's TCP path (k, 3), and (rise, top, descent) legs when it goes over the part (None:
    the direct line); ``out``: the normals at a and b, (2, 3), the way out if straight up is not clear."""
    direct = line_points(a, b, step)
    if clearance is None or safe_h is None:
        return direct, None
    need = tool.radius + tool.clearance
    if tilt < DIRECT_LINK_TILT and np.all(clearance.distance(direct) >= need - 1e-9):
        return direct, None
    rise = escape_leg(a, out[0], up, safe_h, clearance.distance, need, step)
    down = escape_leg(b, out[1], up, safe_h, clearance.distance, need, step)[::-1]
    legs = (rise, line_points(rise[-1], down[0], step), down)
    return np.vstack([legs[0][:-1], legs[1][:-1], legs[2]]), legs


def default_face(part: Any) -> int:
    """The face to grind when none is named: the largest face looking up (+z of the part frame)."""
    if part.is_mesh:  # the mesh's regions of smooth normal: area x mean normal z of the triangles
        scores = [float(np.sum(f.normal_samples()[1] * f.normal_samples()[0][:, 2])) for f in part.faces]
        return int(np.argmax(scores))
    best, score = 0, -np.inf
    for f in part.faces:
        u0, u1, v0, v1 = f.uv_bounds
        uu, vv = np.meshgrid(np.linspace(u0, u1, 7), np.linspace(v0, v1, 7), indexing="ij")
        uv = np.column_stack([uu.ravel(), vv.ravel()])
        inside = f.contains(uv)
        if not inside.any():
            continue
        _, n = f.evaluate(uv[inside, 0], uv[inside, 1])
        s = f.area * float(np.nanmean(n[:, 2]))
        if s > score:
            best, score = f.index, s
    return best


def plan(
    source: Any = "curved_panel",
    faces: list[int] | int | None = None,
    pass_params: PassParameters | None = None,
    tool: ToolParameters | None = None,
    unit: str | None = None,
    robot: Any = None,
    workpiece_pose: Any = config.WorkpieceConfig.pose,
    check_collisions: bool = True,
    link_clearance_check: bool = True,
    process: config.ProcessConfig | None = None,
    q_home: Any = config.RobotConfig.home,
    symmetric_tool: bool = True,
    on_stage: Any = None,
) -> Plan:
    """Plan grinding passes on a part and, with a robot, the job's joint trajectory.

    Args:
        source: a built-in part name, a CAD/mesh file path, or a loaded part.
        faces: face index or indices (adjacent faces for the raster generator); None: the
            largest face looking up.
        pass_params, tool: parameters (defaults if None).
        unit: length unit of files that carry none (BREP, meshes).
        robot: None (no trajectory), a URDF path or a RobotModel (tip ``tcp``); as in a job, what it cannot reach goes.
        workpiece_pose: X_BP as (x, y, z, roll, pitch, yaw) or (4, 4), m / rad.
        check_collisions: check the trajectory of the robot against the part (with a robot).
        link_clearance_check: check linking moves against the tessellated part.
        process: approach, engagement, dwell and feed profile of the job trajectory (the cell's
            defaults if None; its feed is the tool's).
        q_home: (n,) IK seed of the first pose, rad.
        symmetric_tool: the tool is symmetric about its axis (a ball): with no lead or tilt, a
            pass keeps the tool roll of the one before (x along or against the travel), so
            zigzag passes do not turn the wrist by half a turn on every link.
        on_stage: called with a line on each stage's progress (``grinding plan`` prints them: a
            large part takes minutes here).

    Raises:
        InputError: bad parameters, file, face index.
        PlanningError: no pass fits, no waypoint in the arm's reach, a colliding waypoint.
    """
    import time

    from robot_grinding_sim.core.planning.gouge import tool_coverage

    t0 = time.perf_counter()
    tool = (tool or ToolParameters()).validate()
    pass_params = validate_pass_parameters(pass_params or PassParameters())
    if pass_params.margin < tool.edge_margin:  # the whole patch on the face
        pass_params = dataclasses.replace(pass_params, margin=tool.edge_margin)
    X_BP = pose_matrix(workpiece_pose)
    part = source if isinstance(source, (cad.CadPart, mesh_part.MeshPart)) else parts.load_part(source, unit)
    check_part_size(part, tool.radius, robot_reach(robot) if hasattr(robot, "chain") else None)
    if faces is None:
        face_list = [default_face(part)]
    else:
        face_list = [int(faces)] if np.ndim(faces) == 0 else [int(f) for f in faces]
    for f in face_list:
        part.face(f)  # InputError when out of range
    t1 = time.perf_counter()
    from robot_grinding_sim.core.planning.passes import PassGenerator

    say = on_stage or (lambda msg: None)
    gen = PassGenerator(part, face_list, pass_params, toward_robot(X_BP))
    a = np.round(gen.approach, 3)
    say(f"passes on faces {face_list} ({sum(part.face(f).area for f in face_list) * 1e6:.0f} mm^2), approach "
        f"direction ({a[0]:g}, {a[1]:g}, {a[2]:g})")
    clearance = _Clearance(part) if link_clearance_check else None
    generated = gen.generate()
    say(f"{len(generated)} passes; where the tool can touch without cutting the part")
    passes, model, report = tool_coverage(gen, generated, clearance.prepared if clearance else None, tool.radius)
    t2 = time.perf_counter()
    say(f"tool poses and the links between {len(passes)} passes")
    result = Plan(str(getattr(part, "source", source)), getattr(part, "unit", "m"), face_list, gen.params, tool,
                  passes, [], [], [], X_BP)
    result.up = gen.up
    result.symmetric_tool = symmetric_tool
    result.coverage, result.coverage_model = report, model
    poses_and_moves(result, clearance)
    t3 = time.perf_counter()
    result.timings = {"load_s": t1 - t0, "passes_s": t2 - t1, "moves_s": t3 - t2}
    result.mesh = clearance.mesh if clearance is not None else None
    if robot is not None:
        from robot_grinding_sim.core.planning.arm_reach import trim_unreachable
        from robot_grinding_sim.core.robot.ik import load_robot
        model = load_robot(robot, config.ToolConfig().tcp_link)
        say("where the arm reaches")  # as every job's set-up does
        trim_unreachable(result, part, model, q_home, lambda p: poses_and_moves(p, clearance) or clearance)
        say("job trajectory and collision check")
        robot_stage(result, part, model, process, q_home, check_collisions, clearance)
        result.timings["robot_s"] = time.perf_counter() - t3
    return result


def poses_and_moves(result: Plan, clearance: Any, over: dict[int, float] | None = None) -> None:
    """TCP poses of every pass (with the roll rule of a symmetric tool) and the moves between them."""
    tool = result.tool
    tcp_pos, tcp_quat = [], []
    keep_roll = result.symmetric_tool and tool.lead == 0.0 and tool.tilt == 0.0
    flip = np.diag([-1.0, -1.0, 1.0])
    prev_x = None
    for p in result.passes:
        pos, R = tcp_frames(p.points, p.normals, p.tangents, tool)
        if keep_roll and prev_x is not None and float(prev_x @ R[0, :, 0]) < 0.0:
            R = R @ flip  # the same tool axis, turned half a turn about it
        prev_x = R[-1, :, 0]
        tcp_pos.append(pos)
        tcp_quat.append(Rotation.from_matrix(R).as_quat())
    result.tcp_positions, result.tcp_quaternions = tcp_pos, tcp_quat
    result.moves = build_moves(result.passes, tcp_pos, tcp_quat, tool, result.up, clearance, over)


def crop_plan(result: Plan, part: Any, max_passes: int | None = None, pass_length: float | None = None) -> Plan:
    """A plan of the first ``max_passes`` passes, each cut to its middle ``pass_length`` m (a quick
    job on the same part: ``grinding demo``); poses and moves made again. No robot stage."""
    passes = result.passes[: max_passes] if max_passes is not None else list(result.passes)
    if pass_length is not None:
        passes = [crop_pass(p, part.face, pass_length) for p in passes]
    out = Plan(result.source, result.unit, list(result.faces), result.pass_params, result.tool, passes, [], [], [],
               result.workpiece_pose)
    out.up, out.symmetric_tool = result.up, result.symmetric_tool
    out.coverage_model = result.coverage_model
    if result.coverage_model is not None:
        out.coverage = result.coverage_model.measure([p.points for p in passes])
        if result.coverage is not None and out.coverage.tool_reach is None:
            # where the ball cannot reach is a property of the part, not of the passes kept
            out.coverage.tool_reach = result.coverage.tool_reach
    clearance = _Clearance(part)
    poses_and_moves(out, clearance)
    out.mesh = clearance.mesh
    out.timings = dict(result.timings)
    return out


def remake_links(result: Plan, clearance: Any) -> Any:
    """``remake(over)`` for :func:`~robot_grinding_sim.core.planning.links.search_links`: the plan's
    moves made again with those links over the part (None without the part's clearance)."""
    return None if clearance is None else (lambda over: poses_and_moves(result, clearance, over))


def arm_reaches_every_waypoint(result: Plan) -> None:
    """Record in the plan's coverage that the arm reaches all of it: a job trajectory was made
    through every waypoint left (those it cannot reach were taken out before, with their area:
    arm_reach.trim_unreachable), so no more area is left out for the arm."""
    if result.coverage is not None and result.trajectory is not None and result.coverage.arm_unreachable_area is None:
        result.coverage.arm_unreachable_area = 0.0


def robot_stage(result: Plan, part: Any, robot: Any, process: config.ProcessConfig | None = None,
                q_home: Any = config.RobotConfig.home, check_collisions: bool = True, clearance: Any = None,
                offsets: Any = None, tool: config.ToolConfig | None = None) -> None:
    """The job trajectory of the plan for ``robot`` (with per-pass ``offsets``, m; default 0), its
    reachability figures and (``check_collisions``) its collision check against the part (the tool's
    links from ``tool``, the cell's tool configuration; default the package's)."""
    from robot_grinding_sim.core.planning import trajectory as tr
    from robot_grinding_sim.core.robot import ik

    tool = tool or config.ToolConfig()
    model = ik.load_robot(robot, tool.tcp_link)
    process = process or config.ProcessConfig(feed=result.tool.feed, approach=result.tool.approach)
    if process.feed != result.tool.feed or process.approach != result.tool.approach:
        process = dataclasses.replace(process, feed=result.tool.feed, approach=result.tool.approach)
    paths = tr.job_paths(result)
    offsets = [0.0] * len(paths.passes) if offsets is None else list(offsets)
    traj = tr.build_job_trajectory(model, paths, process, offsets, result.tool.penetration,
                                   np.asarray(q_home, dtype=float))
    result.trajectory = traj
    result.offsets = offsets
    result.reachability = tr.reachability(model, traj)
    arm_reaches_every_waypoint(result)
    if check_collisions:
        mesh = clearance.mesh if clearance is not None else part.tessellate(deflection=2e-4)
        contact, links = tool_link_names(tool or config.ToolConfig())

        def rebuild() -> Any:
            return tr.build_job_trajectory(model, tr.job_paths(result), process, offsets,
                                           result.tool.penetration, np.asarray(q_home, dtype=float))

        result.collision = search_links(result, model, mesh, remake_links(result, clearance), rebuild,
                                        contact_links=contact, tool_links=links)


__all__ = [
    "CONTACT_LINKS",
    "MAX_PART_SIZE",
    "REACH_FACTOR",
    "Move",
    "Plan",
    "PassParameters",
    "PlanningError",
    "ToolParameters",
    "build_moves",
    "check_part_size",
    "check_trajectory_collisions",
    "default_face",
    "plan",
    "pose_matrix",
    "poses_and_moves",
    "robot_reach",
    "tcp_frames",
]
