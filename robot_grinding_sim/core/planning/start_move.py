"""The move from where the arm is to the plan's start, checked against the part before it is sent.

On a real arm the executive's job begins with a move from the arm's measured joints to the plan's
first knot (the first pass's approach start). Straight in joint space that move is not the
planner's: nothing checked it, and from a home pose beside or below the part it can sweep the tool
through it. :func:`start_move` makes it the way the planner makes its links: the straight joint
move if the job's collision check
(:func:`~robot_grinding_sim.core.planning.collision_check.check_trajectory_collisions`, every link
of the arm and the tool against the tessellated part, the tool included: it is not at the part yet)
finds it clear; else a move over the part, as the link search does
(:func:`~robot_grinding_sim.core.planning.links.search_links`): the tool centre lifted straight up
(the faces' mean normal, "up") with its orientation to a safe height above the whole part, the
arm's joints moved there to the configuration above the start (in joint space, as
:func:`~robot_grinding_sim.core.planning.links.bridged_path` does at a link's top), and down onto
the start with the plan's orientation; :data:`~robot_grinding_sim.core.planning.links.LINK_LIFT`
higher each time it still hits, at most
:data:`~robot_grinding_sim.core.planning.links.MAX_LINK_TRIES` times; then the start is refused in
one line naming the move and what hit. Units: m, rad, s; poses in the robot's root frame (a held
part's model: the part's nominal frame, core/sim/held_part.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import GrindingSimError, InputError, PlanningError
from robot_grinding_sim.core.planning import commands as cmds

FloatArray = NDArray[np.float64]

#: what the move is called in messages and in the collision check's report (its segment kind)
MOVE = "start"
#: largest joint step between the samples the collision check visits on a straight joint move, rad
CHECK_STEP = 0.01
#: spacing of the tool centre's positions on the rise and the descent, m
LINE_STEP = 0.002


def _as_trajectory(model: Any, t: FloatArray, q: FloatArray) -> Any:
    """The joint path q (K, n) at times t (K,) s from the move's start as a one-segment trajectory of
    kind :data:`MOVE` (pass 0), for the check (which names the sample and its time)."""
    from robot_grinding_sim.core.planning.trajectory import JointTrajectory

    return JointTrajectory(list(model.joint_names), model.tip_link, t, q, np.zeros_like(q),
                           [{"kind": MOVE, "pass_index": 0, "start": 0, "stop": len(q)}], np.full(len(q), np.nan),
                           str(getattr(model, "root_link", "base_link")))


def dense_samples(move: cmds.Command, step: float = CHECK_STEP) -> tuple[FloatArray, FloatArray]:
    """The command's times (K,) s and joint positions (K, n) sampled so that no joint moves more than
    about ``step`` rad between samples (its cubic Hermite between knots)."""
    times, out = [float(move.times[0])], [move.positions[:1]]
    for k in range(len(move.times) - 1):
        n = max(1, int(math.ceil(float(np.max(np.abs(move.positions[k + 1] - move.positions[k]))) / step)) * 2)
        for t in np.linspace(move.times[k], move.times[k + 1], n + 1)[1:]:
            times.append(float(t))
            out.append(cmds.sample(move, float(t))[0][None])
    return np.array(times), np.vstack(out)


class StartMoveCheck:
    """What the start move is checked against: the part and the tool's links.

    Args:
        model: the robot (tip link: the tcp), as the executive's.
        mesh: the part's tessellation (``vertices``, ``faces``; part frame, m).
        X_BP: (4, 4) the part's pose (the plan's ``workpiece_pose``).
        up: (3,) part frame: the way up off the part (the plan's ``up``).
        tool: the cell's ``tool.*`` (ToolConfig): its contact and tool links.
        tool_radius: how far the tool reaches from the tool centre, m (the plan's ``tool.radius``).
        clearance: the gap the tool keeps above the part at the top, m (``process.clearance``).
    """

    def __init__(self, model: Any, mesh: Any, X_BP: FloatArray, up: FloatArray, tool: Any, tool_radius: float,
                 clearance: float) -> None:
        from robot_grinding_sim.core.planning.collision_check import tool_link_names

        self.model, self.mesh = model, mesh
        self.X_BP = np.asarray(X_BP, dtype=float)
        u = self.X_BP[:3, :3] @ np.asarray(up, dtype=float)
        self.up = u / np.linalg.norm(u)
        self.contact_links, self.tool_links = tool_link_names(tool)
        V = np.asarray(mesh.vertices, dtype=float) @ self.X_BP[:3, :3].T + self.X_BP[:3, 3]
        self.top = float(np.max(V @ self.up))  # the part's highest point along up, root frame
        #: the tool centre's height (m along up, root frame) where the tool clears the whole part
        self.safe_height = self.top + float(tool_radius) + float(clearance)

    def check(self, t: FloatArray, q: FloatArray) -> None:
        """Raise PlanningError naming the link, the sample and its time where the move's joint path
        q (K, n) at times t (K,) s hits the part."""
        from robot_grinding_sim.core.planning.collision_check import check_trajectory_collisions

        check_trajectory_collisions(self.model, _as_trajectory(self.model, t, q), self.mesh, self.X_BP,
                                    self.contact_links, tool_links=self.tool_links)


def start_check_for(model: Any, plan: Any, cell: Any) -> StartMoveCheck:
    """The :class:`StartMoveCheck` of a plan (a planner.Plan, e.g. read from plan.json) on the cell's
    robot ``model``: the part it was planned on (``plan.source``, its unit; the cell's
    ``workpiece.unit`` for files without one) tessellated at 0.2 mm as the planner's check does,
    the cell's tool links and ``process.clearance``.

    Raises:
        InputError: the part cannot be loaded (the message names it).
    """
    from robot_grinding_sim.core.geometry import parts

    mesh = getattr(plan, "mesh", None)
    if mesh is None:
        try:
            part = parts.load_part(plan.source, plan.unit if plan.unit != "m" else (cell.workpiece.unit or None))
        except InputError as exc:
            raise InputError(f"the move from the arm's joints to the plan's start cannot be checked against the "
                             f"part: {exc}") from None
        mesh = part.tessellate(deflection=2e-4)
    return StartMoveCheck(model, mesh, plan.workpiece_pose, plan.up, cell.tool, plan.tool.radius,
                          cell.process.clearance)


def over_the_part(check: StartMoveCheck, q_from: FloatArray, q_to: FloatArray, height: float, vmax: FloatArray,
                  amax: FloatArray, max_tcp_speed: float) -> Any:
    """The move from q_from to q_to (n,) over the part: the tool centre straight up to ``height``
    (m along up, root frame) keeping its orientation, the joints moved at the top, down onto q_to's
    tool pose with its orientation (:func:`~robot_grinding_sim.core.planning.links.bridged_path`),
    timed within the joint limits and the TCP speed
    (:func:`~robot_grinding_sim.core.planning.trajectory.link_segment`). A Segment from t = 0."""
    from robot_grinding_sim.core.planning.links import bridged_path, line_points
    from robot_grinding_sim.core.planning.trajectory import link_segment

    model, up = check.model, check.up
    A, B = model.fk(q_from), model.fk(q_to)
    a, b = A[:3, 3], B[:3, 3]
    rise = line_points(a, a + max(0.0, height - float(a @ up)) * up, LINE_STEP)
    down = line_points(b + max(0.0, height - float(b @ up)) * up, b, LINE_STEP)
    P = np.vstack([rise, down])
    R = np.concatenate([np.repeat(A[None, :3, :3], len(rise), axis=0), np.repeat(B[None, :3, :3], len(down), axis=0)])
    q, tcp = bridged_path(model, P, R, q_from, q_to, "the move to the plan's start")
    seg = link_segment(model, tcp, np.repeat(R[:1], len(tcp), axis=0), q_from, 0.0, 0, vmax, amax,
                       joint_path=q, max_tcp_speed=max_tcp_speed)
    seg.kind = MOVE
    return seg


def start_move(check: StartMoveCheck, straight: cmds.Command, vmax: FloatArray, amax: FloatArray,
               max_tcp_speed: float) -> tuple[cmds.Command, dict[str, Any]]:
    """The move to the plan's start (module docstring): ``straight`` (the executive's joint move, a
    Command from the arm's joints to the plan's first knot) if the part is clear of it, else the move
    over the part. Returns the command (knots off the job: job time NaN, the last 0) and what was
    done ({"move": "straight" | "over the part", "height_m": ..., "straight": the collision}).

    Raises:
        GrindingSimError: one line naming the move, when neither is clear of the part.
    """
    from robot_grinding_sim.core.planning.links import LINK_LIFT, MAX_LINK_TRIES

    q_from, q_to = straight.positions[0], straight.positions[-1]
    try:
        check.check(*dense_samples(straight))
        return straight, {"move": "straight"}
    except PlanningError as exc:
        first = str(exc)
    safe = check.safe_height
    last = first
    for k in range(MAX_LINK_TRIES):
        height = safe + k * LINK_LIFT
        try:
            seg = over_the_part(check, q_from, q_to, height, vmax, amax, max_tcp_speed)
            check.check(seg.t - seg.t[0], seg.q)
        except PlanningError as exc:
            last = str(exc)
            continue
        jt = np.full(len(seg.t), math.nan)
        jt[-1] = 0.0
        return (cmds.Command(seg.t - seg.t[0], seg.q, seg.qd, jt, MOVE),
                {"move": "over the part", "height_m": height, "straight": first})
    most = (MAX_LINK_TRIES - 1) * LINK_LIFT * 1e3
    raise GrindingSimError(f"the move from the arm's joints to the plan's start hits the part ({first}), and so does "
                           f"the move over it, the tool centre up to {most:.0f} mm above its safe height over the "
                           f"part ({last}): jog the arm clear of the part and start again")


__all__ = ["MOVE", "StartMoveCheck", "dense_samples", "over_the_part", "start_check_for", "start_move"]
