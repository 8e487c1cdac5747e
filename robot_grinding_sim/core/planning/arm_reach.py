"""Where the arm cannot reach: the waypoints it cannot put the tool on, taken out of the passes.

The planner lays passes wherever the tool can touch the faces; whether the arm can put the tool
there is the robot's: the inverse kinematics of the tool centre's pose at the waypoint, within the
joint limits. :func:`trim_unreachable` takes the waypoints the arm cannot reach out of a plan's
passes (a pass split where they lie inside it, through
:func:`~robot_grinding_sim.core.planning.gouge.keep_waypoints`, the way the tool's reach takes
waypoints out) and keeps taking the end waypoint of a pass whose approach start or retreat end is
out of reach, so that the job runs on the rest. The coverage then counts the area that only the
waypoints taken out would have ground as "the arm cannot reach" and measures the rest on the area
left (:meth:`~robot_grinding_sim.core.planning.geodesic.GeodesicPasses.measure`). A plan none of
whose waypoints the arm reaches is refused in one line.

The IK is the trajectory's, and so is the arm's configuration, which the trajectory can change
between passes but not inside one (:mod:`~robot_grinding_sim.core.planning.trajectory`): the
first pass from the home configuration
(:func:`~robot_grinding_sim.core.planning.path_ik.start_configuration`); every later pass from
the configuration the pass before ended in or, when that one does not reach its first waypoint,
from the arm's configuration there that reaches most of the pass
(:func:`~robot_grinding_sim.core.planning.links.ik_branches`, as the trajectory's reconfigured
link); inside a pass, each waypoint from the one before
(:func:`~robot_grinding_sim.core.planning.path_ik.follow`, as
:func:`~robot_grinding_sim.core.planning.path_ik.solve_ik` follows it). (Judged by any
configuration at every waypoint, a waypoint that only the other shoulder reached passed here and
the trajectory then refused the job: "pass 0, waypoint 5 ... is unreachable: IK error 0.0476 mm".)
Units: m, rad; poses in the robot's root frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.planning.path_ik import follow, path_solvers, start_configuration
from robot_grinding_sim.core.robot.ik import pose_matrices

FloatArray = NDArray[np.float64]

#: the trajectory's IK tolerance (path_ik.solve_ik): position m, rotation weight m/rad, iterations
TOL, ROT_WEIGHT, ITERATIONS = 1e-9, 0.2, 100
#: rounds of taking out pass ends whose approach or retreat is out of reach
MAX_ROUNDS = 50


def _follow_pass(model: Any, solvers: Any, T: FloatArray, q: FloatArray
                 ) -> tuple[NDArray[np.bool_], FloatArray | None, FloatArray]:
    """Follow the poses T (N, 4, 4) from the configuration q (n,): which are reached (each from the
    last one reached), the configuration at the first one reached (None if none) and at the last
    one reached (q if none)."""
    mask = np.zeros(len(T), dtype=bool)
    first = None
    for k, Tk in enumerate(T):
        q_new, ok, _, _ = follow(model, solvers, Tk, q)
        if ok:
            mask[k], q = True, q_new
            first = q if first is None else first
    return mask, first, q


#: per pass: the configurations (n,) at its first and last waypoint reached, or None
Ends = list[tuple[FloatArray, FloatArray] | None]


def _reach_passes(model: Any, plan: Any, q_home: Any) -> tuple[list[NDArray[np.bool_]], Ends]:
    """:func:`reachable_waypoints`, with the configurations at each pass's ends."""
    from robot_grinding_sim.core.planning.links import ik_branches

    solvers = path_solvers(model, ROT_WEIGHT, TOL, ITERATIONS)
    masks: list[NDArray[np.bool_]] = []
    ends: Ends = []
    q_prev: FloatArray | None = None
    for pos, quat in zip(plan.tcp_positions, plan.tcp_quaternions, strict=True):
        T = pose_matrices(np.asarray(pos), np.asarray(quat), plan.workpiece_pose)
        best, first, last = np.zeros(len(T), dtype=bool), None, None
        if q_prev is None:  # the job's first pass: from home (the first waypoint home reaches)
            for k, Tk in enumerate(T):
                q0, ok, _, _ = start_configuration(model, Tk, np.asarray(q_home, dtype=float))
                if ok:
                    tail, first, last = _follow_pass(model, solvers, T[k:], q0)
                    best[k:] = tail
                    break
        else:
            best, first, last = _follow_pass(model, solvers, T, q_prev)
            if not best[0]:  # another configuration at the pass's first waypoint, the one that reaches most
                for q0 in ik_branches(model, T[0], [q_prev]):
                    mask, f, la = _follow_pass(model, solvers, T, q0)
                    if mask.sum() > best.sum():
                        best, first, last = mask, f, la
                    if best.all():
                        break
        masks.append(best)
        ends.append(None if first is None else (first, last))  # (first is None: nothing reached)
        if first is not None:
            q_prev = last
    return masks, ends


def reachable_waypoints(model: Any, plan: Any, q_home: Any) -> list[NDArray[np.bool_]]:
    """(N,) bool per pass of ``plan``: the arm (``model``, tip the tcp) reaches the tool centre's pose
    at the waypoint, within its joint limits, in the configuration the trajectory can have there
    (module docstring). ``q_home`` (n,) rad: the first pass's start."""
    return _reach_passes(model, plan, q_home)[0]


def _end_poses(plan: Any) -> dict[tuple[str, int], FloatArray]:
    """The approach start and retreat end of every pass, (4, 4) root frame, by (kind, pass index)."""
    out = {}
    for m in plan.moves:
        if m.kind in ("approach", "retreat"):
            k = 0 if m.kind == "approach" else len(m.positions) - 1
            out[(m.kind, m.pass_index)] = pose_matrices(m.positions[k:k + 1], m.quaternions[k:k + 1],
                                                        plan.workpiece_pose)[0]
    return out


def trim_unreachable(plan: Any, part: Any, model: Any, q_home: Any,
                     remake: Callable[[Any], Any]) -> dict[str, Any] | None:
    """Take the waypoints the arm cannot reach out of ``plan`` (see the module docstring): its passes,
    tool poses and moves made again (``remake(plan)``: the planner's, which returns the part's
    clearance query it used, whose mesh becomes the plan's), its coverage measured again with the
    area left out for the arm (``coverage.arm_unreachable_area``, ``coverage.arm_reach``: the figures
    returned). None, and the plan unchanged, when the arm reaches every waypoint.

    Raises:
        PlanningError: the arm reaches none of the waypoints (or no piece of a pass long enough).
    """
    from robot_grinding_sim.core.planning.gouge import keep_waypoints

    keep = reachable_waypoints(model, plan, q_home)
    if all(k.all() for k in keep):
        return None
    planned = [p.points for p in plan.passes]
    total = sum(len(k) for k in keep)
    passes, clearance = list(plan.passes), None
    solvers = path_solvers(model, ROT_WEIGHT, TOL, ITERATIONS)
    for _ in range(MAX_ROUNDS):
        kept, figures = keep_waypoints(passes, keep)
        if not kept:
            break
        plan.passes = kept
        clearance = remake(plan)
        # the pieces left, judged again (a piece may start in another configuration), and their moves:
        # the approach starts from the pass's first waypoint's configuration, the retreat from its last's
        masks, confs = _reach_passes(model, plan, q_home)
        bad = []
        for (kind, i), T in sorted(_end_poses(plan).items(), key=lambda e: (e[0][1], e[0][0])):
            conf = confs[i]
            if conf is None or not follow(model, solvers, T, conf[0] if kind == "approach" else conf[1])[1]:
                bad.append((i, kind))
        if not bad and all(m.all() for m in masks):
            break
        # the end waypoint of a pass whose approach start or retreat end is out of reach goes too
        passes = kept
        keep = [m.copy() for m in masks]
        for i, kind in bad:
            keep[i][0 if kind == "approach" else -1] = False
    else:
        kept = []
    if not kept:
        X = plan.workpiece_pose
        raise PlanningError(f"all {total} waypoints of the passes are unreachable for the arm ({model.source}; "
                            f"the part at {np.round(X[:3, 3], 3).tolist()} m in {model.root_link}): move the "
                            "workpiece closer to the robot (workpiece.pose, or grinding plan --place auto)")
    dropped = total - sum(len(p) for p in plan.passes)
    figures = {"dropped_waypoints": int(dropped), "waypoints": int(total), "passes": len(plan.passes)}
    if plan.coverage_model is not None:
        tool_reach = plan.coverage.tool_reach if plan.coverage is not None else None
        plan.coverage = plan.coverage_model.measure([p.points for p in plan.passes], planned)
        plan.coverage.tool_reach = tool_reach
        plan.coverage.arm_reach = figures
    if clearance is not None:
        plan.mesh = clearance.mesh
    return figures


__all__ = ["reachable_waypoints", "trim_unreachable"]
