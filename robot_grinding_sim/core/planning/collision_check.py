"""The job trajectory's collision check against the part, and its clearance margin.

:func:`check_trajectory_collisions` visits every sample of the joint trajectory and raises at the
first robot link that touches the part. With ``margin`` > 0 it also measures where the robot comes
nearer than the margin, by these rules:

- the abrasive head (``tool.link``; :func:`tool_link_names`) touches the part on approach, dwell, pass and retreat
  moves by design: it is left out there (gouge.py keeps the ball out of the rest of the part);
- the rest of the tool (``tool.links``: the spindle) works next to the surface on those moves
  (on a concave or wrapped face, a few millimetres off it): it must not touch the part, but no
  margin is asked of it there;
- every other link on every move keeps the margin; so does the whole tool on links (the moves
  between passes), or where the retreat before a link leaves the tool nearer than the margin (or
  the approach after it takes it there: a retreat along the normal of a wrapped face ends close
  to another part of it), at least the clearance it has at the link's ends, less
  :data:`END_SLACK` (the planner's rule for the ball on links:
  :func:`~robot_grinding_sim.core.planning.links.escape_leg`).

The report gives the smallest clearance overall, the smallest clearance under the margin's rule
and that of the tool on contact moves, each with where it is (link, move, pass, point), and the
sample farthest inside the margin that applies to it (``margin_violation``, None when there is none).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.config import ToolConfig
from robot_grinding_sim.core.errors import PlanningError

FloatArray = NDArray[np.float64]


def tool_link_names(tool: ToolConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(contact links, tool links) of a cell's tool: ``tool.link`` touches the part by design on
    contact moves; ``tool.links`` (with ``tool.link``) may work next to it there."""
    links = tuple(tool.links)
    return (tool.link,), links if tool.link in links else (*links, tool.link)


#: the default cell's: links of the tool whose contact with the part is intended on approach, pass and
#: retreat; links of the tool (the contact links included) that may work close to the part on those moves
CONTACT_LINKS, TOOL_LINKS = tool_link_names(ToolConfig())
#: the moves in which the tool works on the part
CONTACT_MOVES = ("approach", "dwell", "pass", "retreat")
#: on a link starting or ending nearer than the margin, the tool may come this much nearer than at its ends, m
END_SLACK = 1e-4


def bounding_radius(kind: str, params: FloatArray, scene: Any, name: str) -> float:
    """Radius of a ball about the object's origin that contains it, m."""
    if kind == "sphere":
        return float(params[0])
    if kind == "cylinder":
        return float(math.hypot(params[0], 0.5 * params[1]))
    if kind == "box":
        return float(0.5 * np.linalg.norm(params[:3]))
    return float(np.max(np.linalg.norm(scene.mesh(name).vertices, axis=1)))


def where_text(seg: dict[str, Any], point: int) -> str:
    """'pass k waypoint i' or 'the <kind> move of pass k, point i'."""
    if seg["kind"] == "pass":
        return f"pass {seg['pass_index']} waypoint {point}"
    return f"the {seg['kind']} move of pass {seg['pass_index']}, point {point}"


def check_trajectory_collisions(model: Any, traj: Any, mesh: Any, X_BP: FloatArray,
                                contact_links: tuple[str, ...] = CONTACT_LINKS, safety: float = 0.9,
                                margin: float = 0.0, tool_links: tuple[str, ...] = TOOL_LINKS) -> dict[str, Any]:
    """Check every trajectory sample of the robot against the part (python-fcl scene).

    Every sample is visited. A robot object's signed distance to the part is recomputed only when
    the object may have moved by ``safety`` times its last distance above the threshold that applies
    to it (0, or ``margin`` under the module docstring's rules): the motion bound is |change of its
    origin| + (rotation angle) x (its bounding radius), which bounds the motion of every point of
    it, so a sample skipped this way can neither be in collision nor nearer than the margin. The
    links in ``contact_links`` are left out on approach, dwell, pass and retreat moves (the intended
    contact) and checked on links. Raises PlanningError naming the link, move, pass and waypoint at
    the first collision; nearness within the margin is reported (``margin_nearest``), not raised.
    """
    from robot_grinding_sim.core.geometry.collision import CollisionScene

    scene = CollisionScene()
    names = scene.add_robot(model, traj.positions[0])
    scene.add_mesh("workpiece", np.asarray(mesh.vertices), np.asarray(mesh.faces), X_BP)
    contact = [n for n in names if n.split("#")[0] in contact_links]
    tool = {n for n in names if n.split("#")[0] in tool_links}
    radius = {n: bounding_radius(*scene.shape(n), scene, n) for n in names}
    last = {n: scene.pose(n).copy() for n in names}
    moved = dict.fromkeys(names, np.inf)
    allowance = dict.fromkeys(names, 0.0)
    threshold = dict.fromkeys(names, -1.0)
    visited = queries = 0
    nearest: dict[str, dict[str, Any] | None] = {"all": None, "margin": None, "tool": None, "violation": None}

    def note(rule: str, d: float, n: str, seg: dict[str, Any], i: int, required: float, key: float) -> None:
        if nearest[rule] is None or key < nearest[rule]["key"]:
            nearest[rule] = {"key": key, "clearance_m": float(d), "required_m": float(required),
                             "link": n.split("#")[0], "move": seg["kind"], "pass_index": int(seg["pass_index"]),
                             "point": i - seg["start"], "sample": i, "where": where_text(seg, i - seg["start"])}

    for seg in traj.segments:
        contact_move = seg["kind"] in CONTACT_MOVES
        group = [n for n in names if not (contact_move and n in contact)]
        rule = dict.fromkeys(names, margin)
        if contact_move:
            rule.update(dict.fromkeys(tool, 0.0))
        elif margin > 0.0:  # a link: the tool no nearer than at its ends where those are within the margin
            for i in (seg["start"], seg["stop"] - 1):
                scene.set_robot_configuration(traj.positions[i])
                for n in tool:
                    rule[n] = max(0.0, min(rule[n], scene.distance(n, "workpiece")[0] - END_SLACK))
                    queries += 1
        for i in range(seg["start"], seg["stop"]):
            scene.set_robot_configuration(traj.positions[i])
            visited = max(visited, i + 1)  # neighbouring moves share their boundary sample
            for n in group:
                thr = rule[n]
                free_tool = n in tool and contact_move
                if thr != threshold[n]:  # another rule from here: measure again
                    moved[n], threshold[n] = np.inf, thr
                T = scene.pose(n)
                L = last[n]
                c = max(-1.0, min(1.0, 0.5 * (float(np.trace(L[:3, :3].T @ T[:3, :3])) - 1.0)))
                moved[n] += float(np.linalg.norm(T[:3, 3] - L[:3, 3])) + math.acos(c) * radius[n]
                last[n] = T.copy()
                if moved[n] < allowance[n]:
                    continue
                d = scene.distance(n, "workpiece")[0]
                queries += 1
                note("all", d, n, seg, i, thr, d)
                note("tool" if free_tool else "margin", d, n, seg, i, thr, d)
                if d < thr:  # the largest shortfall
                    note("violation", d, n, seg, i, thr, d - thr)
                if d <= 0.0:
                    at = where_text(seg, i - seg["start"])
                    err = PlanningError(f"collision: robot link {n.split('#')[0]} touches the part at {at} "
                                        f"(trajectory sample {i}, t = {traj.times[i]:.3f} s)")
                    # where, for a caller that can make the move again (links.search_links)
                    err.where = {"move": seg["kind"], "pass_index": int(seg["pass_index"]),  # type: ignore[attr-defined]
                                 "link": n.split("#")[0], "sample": i}
                    raise err
                moved[n], allowance[n] = 0.0, safety * max(d - thr, 0.0)
    for v in nearest.values():
        if v is not None:
            v.pop("key")
    clear = {k: (v["clearance_m"] if v is not None else math.inf) for k, v in nearest.items()}
    return {"checked_samples": visited, "distance_queries": queries, "min_clearance_m": float(clear["all"]),
            "excluded_on_contact": contact, "nearest": nearest["all"], "margin_m": float(margin),
            "margin_clearance_m": float(clear["margin"]), "margin_nearest": nearest["margin"],
            "margin_violation": nearest["violation"], "tool_clearance_m": float(clear["tool"]),
            "tool_nearest": nearest["tool"]}


__all__ = ["CONTACT_LINKS", "CONTACT_MOVES", "TOOL_LINKS", "bounding_radius", "check_trajectory_collisions",
           "tool_link_names"]
