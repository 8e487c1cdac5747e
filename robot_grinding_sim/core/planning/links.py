"""Changing the arm's configuration between passes, where following the link's TCP path cannot work.

A 6-axis arm reaches most TCP poses in several configurations (shoulder, elbow and wrist
branches). Seeding each IK knot from the one before keeps the arm in the configuration it started
in, and that fails where the path comes to one of the arm's singular poses: on a face that wraps
all the way round, some tool axes lie horizontal and parallel to a UR's shoulder axis (the wrist
singularity, wrist 2 at 0 or pi), where the damped-least-squares IK stops short of the pose, or a
pass through the neighbourhood needs many times a wrist's velocity limit.

:func:`reconfigured_episode` is the way out the planner takes then: it lists the arm's
configurations at the next pass's first pose (:func:`ik_branches`, best conditioned first), keeps
the first one from which the pass episode (approach, pass at the feed, retreat) works, and joins
it to the previous pass by a link that rises along the planned path with the last orientation,
moves in joint space at the top (:func:`bridged_path`), and comes down along the planned path with
the next pass's orientation. Where the planned link is a straight line next to the part, the
planner's :func:`detour` over the part (the link's ``detour`` in the plan) is taken instead: the
joint-space part then lies above the part, not beside it. The job's collision check then covers
the joint-space part like any other sample of the trajectory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.planning.path_ik import solve_ik, targets

FloatArray = NDArray[np.float64]

#: largest joint step between knots of the joint-space part of a link, rad
JOINT_STEP = 0.05
#: two IK solutions closer than this in every joint (after wrapping) are one configuration, rad
SAME_BRANCH = 0.1


def ik_branches(model: Any, pose: FloatArray, seeds: list[FloatArray], random_seeds: int = 24) -> list[FloatArray]:
    """Distinct IK solutions (each (n,) rad, within the joint limits) of the TCP pose (4, 4) in the
    root frame, from ``seeds``, the solver's seeds for a UR and random ones; best conditioned first
    (solutions at least 0.3 rad from every limit before the others, then by manipulability)."""
    from robot_grinding_sim.core.robot.ik import UR_SEEDS, IKSolver

    solver = IKSolver(model)
    rng = np.random.default_rng(0)
    trial = [np.asarray(s, dtype=float) for s in seeds]
    if model.nq == 6:
        trial += [np.array(s) for s in UR_SEEDS]
    trial += [rng.uniform(np.maximum(solver.lower, -math.pi), np.minimum(solver.upper, math.pi))
              for _ in range(random_seeds)]
    found: list[tuple[tuple[bool, float], FloatArray]] = []
    for s in trial:
        q, ok, _, _ = solver.solve(pose, s)
        if not ok:
            continue
        # the same pose with every joint nearest its range's middle: farthest from +-2 pi limits
        mid = 0.5 * (solver.lower + solver.upper)
        wrapped = q - 2.0 * math.pi * np.round((q - mid) / (2.0 * math.pi))
        q = np.where((wrapped >= solver.lower) & (wrapped <= solver.upper), wrapped, q)
        if any(np.max(np.abs(q - other)) < SAME_BRANCH for _, other in found):
            continue
        margin = float(np.min(np.minimum(q - solver.lower, solver.upper - q)))
        found.append(((margin >= 0.3, solver.manipulability(q)), q))
    found.sort(key=lambda item: item[0], reverse=True)
    return [q for _, q in found]


def _same_rotation(R: FloatArray, R0: FloatArray) -> NDArray[np.bool_]:
    """(M,) True where the rotations R (M, 3, 3) equal R0 (3, 3) within 1e-6 rad."""
    c = 0.5 * (np.einsum("kij,ij->k", R, R0) - 1.0)
    return np.arccos(np.clip(c, -1.0, 1.0)) < 1e-6


def bridged_path(model: Any, positions: FloatArray, rotations: FloatArray, q_from: FloatArray, q_to: FloatArray,
                 what: str) -> tuple[FloatArray, FloatArray]:
    """A link's joint path (K, n) and its TCP positions (K, 3) from ``q_from`` to ``q_to`` through
    the planned TCP poses (positions (M, 3), rotations (M, 3, 3), root frame): IK forward along the
    leading poses that keep the first orientation (the rise), backward from ``q_to`` along the
    trailing poses that keep the last one (the descent), and joint-space interpolation between them
    in steps of at most :data:`JOINT_STEP` (where the planned link turns the tool at its top)."""

    lead = _same_rotation(rotations, rotations[0])
    trail = _same_rotation(rotations, rotations[-1])
    i_rise = int(np.argmin(lead)) - 1 if not lead.all() else len(rotations) - 1
    i_down = len(rotations) - int(np.argmin(trail[::-1])) if not trail.all() else 0
    if i_down <= i_rise:  # one orientation all along: split at the highest pose (z of the root frame)
        i_rise = i_down = int(np.argmax(positions[:, 2]))
    T = targets(positions, rotations)
    q_rise = solve_ik(model, T[: i_rise + 1], q_from, what=f"{what} (rising)")
    q_rise[0] = q_from
    q_down = solve_ik(model, T[i_down:][::-1], q_to, what=f"{what} (descending)")[::-1]
    q_down[-1] = q_to
    dq = q_down[0] - q_rise[-1]
    n = max(1, int(math.ceil(float(np.max(np.abs(dq))) / JOINT_STEP)))
    s = np.linspace(0.0, 1.0, n + 1)[1:-1, None]
    q = np.vstack([q_rise, q_rise[-1] + s * dq, q_down])
    return q, np.array([model.fk(qk)[:3, 3] for qk in q])


def line_points(a: FloatArray, b: FloatArray, step: float) -> FloatArray:
    """Points (k, 3) from a to b (3,) inclusive, at most ``step`` m apart (at least 2)."""
    n = max(2, int(math.ceil(np.linalg.norm(b - a) / step)) + 1)
    s = np.linspace(0.0, 1.0, n)[:, None]
    return a + s * (b - a)


def escape_leg(a: FloatArray, out: FloatArray, up: FloatArray, height: float, distance: Any, need: float,
               step: float, reach: float = 0.2) -> FloatArray:
    """The TCP path (k, 3) from ``a`` up to ``height`` along ``up`` (part frame, m) that keeps the
    ball ``need`` m off the part (``distance``: points (k, 3) -> (k,) m), or at least no nearer than
    at ``a``: straight up where that is clear, else first out along ``out`` (the pass end's normal)
    in 5 mm steps (up to ``reach`` m) until the way up from there is clear; straight up if none is."""
    floor = min(need, float(distance(a[None])[0])) - 1e-9
    for d in np.arange(0.0, reach + 1e-9, 0.005):
        b = a + d * out
        top = b + max(0.0, height - float(b @ up)) * up
        path = line_points(a, top, step)
        if d > 0:
            path = np.vstack([line_points(a, b, step)[:-1], line_points(b, top, step)])
        if np.all(distance(path[1:]) >= floor):
            return path
    return line_points(a, a + max(0.0, height - float(a @ up)) * up, step)


def detour(a: FloatArray, b: FloatArray, q_a: FloatArray, q_b: FloatArray, out: FloatArray, up: FloatArray,
           height: float, distance: Any, need: float, step: float) -> tuple[FloatArray, FloatArray]:
    """A link's way over the part (part frame), for a change of configuration where the planned link
    is a straight line: from ``a`` up to ``height`` along ``up`` (:func:`escape_leg`, out along
    ``out[0]`` first where straight up is not clear), across, and down to ``b`` (out along
    ``out[1]``). TCP positions (k, 3) and orientations (k, 4) xyzw: ``q_a`` on the rise, ``q_b`` on
    the descent, interpolated across the top (where :func:`bridged_path` moves in joint space
    instead). A change of configuration swings the wrist and the tool round: done next to the
    part, on the straight link, it sweeps the tool through it."""
    from scipy.spatial.transform import Rotation, Slerp

    rise = escape_leg(a, out[0], up, height, distance, need, step)
    down = escape_leg(b, out[1], up, height, distance, need, step)[::-1]
    top = line_points(rise[-1], down[0], step)
    positions = np.vstack([rise[:-1], top, down[1:]])
    turn = Slerp([0.0, 1.0], Rotation.from_quat(np.vstack([q_a, q_b])))(np.linspace(0.0, 1.0, len(top))).as_quat()
    quats = np.vstack([np.repeat(np.asarray(q_a, dtype=float)[None], len(rise) - 1, axis=0), turn,
                       np.repeat(np.asarray(q_b, dtype=float)[None], len(down) - 1, axis=0)])
    return positions, quats

#: a link that still hits the part when it goes over it is lifted this much higher each time, m
LINK_LIFT = 0.05
#: the most times one link is made again, over the part and higher, before the job is refused
MAX_LINK_TRIES = 8


def search_links(result: Any, model: Any, mesh: Any, remake: Any, rebuild: Any,
                 tries: int = MAX_LINK_TRIES, on_stage: Any = None, contact_links: tuple[str, ...] | None = None,
                 tool_links: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The job's collision check (:func:`~robot_grinding_sim.core.planning.collision_check.
    check_trajectory_collisions`) of a plan (``result``: a planner.Plan), searching a collision-free
    way for each link between passes that hits the part: the link is made again over the part (lift
    along "up", go over at the safe height, come down), then higher by :data:`LINK_LIFT` each time
    it still hits, until the trajectory is clear, at most ``tries`` remakes of each link.
    ``remake(over)`` makes the plan's moves again with the links to the passes in ``over`` ({pass
    index: extra height, m}) over the part (None: the links cannot be made again), ``rebuild()`` the
    job trajectory from them (stored in ``result.trajectory``); ``on_stage(line)`` hears of each remake;
    ``contact_links`` and ``tool_links``: the cell's tool (:func:`~robot_grinding_sim.core.planning.
    collision_check.tool_link_names`; default the package's).

    Returns the collision report of the trajectory kept (``links_over_the_part``: {pass index: extra
    height m} of the links made again). Raises PlanningError, one line naming the move, the robot
    link and what would fix it, when a contact move (approach, dwell, pass, retreat) hits the part
    or no link is found.
    """
    from robot_grinding_sim.core.errors import PlanningError
    from robot_grinding_sim.core.planning.collision_check import (
        CONTACT_LINKS,
        TOOL_LINKS,
        check_trajectory_collisions,
    )

    links = {"contact_links": contact_links or CONTACT_LINKS, "tool_links": tool_links or TOOL_LINKS}

    over: dict[int, float] = {}
    hits: dict[int, int] = {}
    while True:  # each round remakes a link at most `tries` times: it ends
        try:
            report = check_trajectory_collisions(model, result.trajectory, mesh, result.workpiece_pose, **links)
        except PlanningError as exc:
            where = getattr(exc, "where", None)
            if where is None:
                raise
            if where["move"] != "link":
                raise PlanningError(
                    f"{exc}: the {where['link']} reaches into the part while the tool works on pass "
                    f"{where['pass_index']}; turn the part (workpiece.pose, --place auto), tilt the tool "
                    "(--lead, --tilt) or give another approach direction (--approach-direction)") from None
            k = int(where["pass_index"])
            hits[k] = hits.get(k, 0) + 1
            if remake is None or hits[k] > tries:
                tried = "" if k not in over else \
                    f" (tried over the part up to {over[k] * 1e3:.0f} mm above its safe height)"
                raise PlanningError(
                    f"{exc}: no collision-free link to pass {k} found{tried}; move the part (workpiece.pose, "
                    "--place auto), raise process.clearance, or grind the passes on either side as separate "
                    "jobs (--max-passes, --face)") from None
            over[k] = (hits[k] - 1) * LINK_LIFT
            if on_stage:
                on_stage(f"the link to pass {k} hits the part ({where['link']}): made again over the part, "
                         f"{over[k] * 1e3:.0f} mm above its safe height")
            remake(over)
            result.trajectory = rebuild()
            continue
        if over:
            report["links_over_the_part"] = {str(k): v for k, v in sorted(over.items())}
        return report


__all__ = ["LINK_LIFT", "MAX_LINK_TRIES", "bridged_path", "detour", "escape_leg", "ik_branches", "line_points",
           "search_links"]
