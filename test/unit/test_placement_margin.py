"""The collision check's clearance margin and the workpiece pose search (issue 12).

The margin (process.clearance) applies to every link but the tool's on every move and to the tool on
links; the tool working on the surface (approach, dwell, pass, retreat) needs only be clear of the
part, and on a link that starts or ends nearer than the margin it must come no nearer than there.
A real collision is refused on every move.

The part here is a box wall set beside one robot body at a gap computed from yourdfpy's forward
kinematics of the URDF and the URDF's collision cylinders (not the planner's kinematics or the
collision scene's distances)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.planning.collision_check import END_SLACK, check_trajectory_collisions
from robot_grinding_sim.core.planning.trajectory import JointTrajectory
from robot_grinding_sim.core.robot.ik import IKSolver, load_robot

MARGIN = 0.005
#: tool pointing down in front of the robot
Q = np.array([0.0, -0.5 * math.pi, 0.5 * math.pi, -0.5 * math.pi, -0.5 * math.pi, 0.0])


@pytest.fixture(scope="module")
def arm():
    import yourdfpy

    from robot_grinding_sim.core.resources import default_urdf

    model = load_robot("default")
    urdf = yourdfpy.URDF.load(str(default_urdf()), load_meshes=False)

    def frame(q: np.ndarray, link: str) -> np.ndarray:
        urdf.update_cfg(dict(zip(model.joint_names, q, strict=True)))
        return urdf.get_transform(link, "base_link")

    return model, frame


def _axes(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spindle's axis a, a direction e across it (horizontal) and b = a x e."""
    a = X[:3, 2]
    e = np.cross(a, [0.0, 0.0, 1.0])
    e = X[:3, 0] if np.linalg.norm(e) < 1e-9 else e / np.linalg.norm(e)
    return a, e, np.cross(a, e)


def _wall(X: np.ndarray, radius: float, gap: float, along: tuple[float, float]):
    """A box wall 20 mm thick beside a body of ``radius`` on the z axis of frame X (the spindle and the
    F/T sensor share it), ``gap`` m from its side, spanning ``along`` (m along the axis from X's origin)."""
    import trimesh

    a, e, b = _axes(X)
    o = X[:3, 3]
    T = np.eye(4)
    T[:3, :3] = np.column_stack([e, b, a])
    T[:3, 3] = o + (radius + gap + 0.01) * e + 0.5 * (along[0] + along[1]) * a
    return trimesh.creation.box(extents=(0.02, 0.2, along[1] - along[0]), transform=T)


def _traj(model, qs: list[np.ndarray], kind: str) -> JointTrajectory:
    n = len(qs)
    return JointTrajectory(list(model.joint_names), "tcp", np.arange(n, dtype=float), np.array(qs),
                           np.zeros((n, model.nq)), [{"kind": kind, "pass_index": 0, "start": 0, "stop": n}])


def _moved(model, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The configuration with the tcp moved by d (m), same orientation."""
    X = model.fk(q)
    X[:3, 3] += d
    q2, ok, _, _ = IKSolver(model).solve(X, q)
    assert ok
    return q2


def test_spindle_beside_the_part(arm) -> None:
    model, frame = arm
    X = frame(Q, "spindle")
    a, e, _ = _axes(X)
    assert abs(a[2]) > 0.999  # the tool axis vertical: the wall's gap is the spindle's
    gap = 0.002
    wall = _wall(X, 0.03, gap, (0.03, 0.13))  # the spindle's middle: ball, shank, F/T sensor far off
    # on a pass: no margin for the tool, the clearance is measured and reported
    rep = check_trajectory_collisions(model, _traj(model, [Q, Q, Q], "pass"), wall, np.eye(4), margin=MARGIN)
    assert rep["margin_violation"] is None
    assert rep["tool_nearest"]["link"] == "spindle" and rep["tool_clearance_m"] == pytest.approx(gap, abs=2e-5)
    assert rep["min_clearance_m"] == pytest.approx(gap, abs=2e-5)
    assert rep["margin_clearance_m"] > MARGIN  # every other link
    # a link from clear of the wall to beside it and back: the tool keeps the margin on links
    q_far = _moved(model, Q, -0.05 * e)
    far = frame(q_far, "spindle")[:3, 3] @ e + 0.03
    assert X[:3, 3] @ e + 0.03 - far == pytest.approx(0.05, abs=1e-9)
    rep = check_trajectory_collisions(model, _traj(model, [q_far, Q, q_far], "link"), wall, np.eye(4),
                                      margin=MARGIN)
    bad = rep["margin_violation"]
    assert bad is not None and (bad["link"], bad["move"], bad["point"]) == ("spindle", "link", 1)
    assert bad["clearance_m"] == pytest.approx(gap, abs=2e-5) and bad["required_m"] == MARGIN
    # a link that starts beside the wall (a retreat left the tool there) and leaves: no nearer than there
    rep = check_trajectory_collisions(model, _traj(model, [Q, q_far, q_far], "link"), wall, np.eye(4),
                                      margin=MARGIN)
    assert rep["margin_violation"] is None and rep["margin_clearance_m"] == pytest.approx(gap, abs=2e-5)
    # ... but one that comes nearer still on the way is too close
    q_near = _moved(model, Q, 0.001 * e)
    near_gap = gap - (frame(q_near, "spindle")[:3, 3] - X[:3, 3]) @ e
    assert near_gap == pytest.approx(0.001, abs=1e-6)
    rep = check_trajectory_collisions(model, _traj(model, [Q, q_near, Q], "link"), wall, np.eye(4), margin=MARGIN)
    bad = rep["margin_violation"]
    assert bad is not None and bad["link"] == "spindle" and bad["point"] == 1
    assert bad["clearance_m"] == pytest.approx(near_gap, abs=2e-5)
    assert bad["required_m"] == pytest.approx(gap - END_SLACK, abs=2e-5)
    # without a margin (grinding plan's own check) only collisions count
    rep = check_trajectory_collisions(model, _traj(model, [q_far, Q, q_far], "link"), wall, np.eye(4))
    assert rep["margin_violation"] is None


def test_a_spindle_in_the_part_is_a_collision_on_a_pass(arm) -> None:
    model, frame = arm
    wall = _wall(frame(Q, "spindle"), 0.03, -0.002, (0.03, 0.13))  # 2 mm into the spindle
    with pytest.raises(PlanningError, match=r"collision: robot link spindle touches the part at pass 0 waypoint 0"):
        check_trajectory_collisions(model, _traj(model, [Q, Q], "pass"), wall, np.eye(4), margin=MARGIN)


def test_a_link_of_the_arm_keeps_the_margin_on_a_pass(arm) -> None:
    """The F/T sensor (r 40 mm, 30 mm long, between the flange and the spindle) is not the tool."""
    model, frame = arm
    X = frame(Q, "ft_sensor")
    gap = 0.002
    wall = _wall(X, 0.04, gap, (-0.03, 0.0))
    rep = check_trajectory_collisions(model, _traj(model, [Q, Q, Q], "pass"), wall, np.eye(4), margin=MARGIN)
    bad = rep["margin_violation"]
    assert bad is not None and (bad["link"], bad["move"], bad["where"]) == ("ft_sensor", "pass", "pass 0 waypoint 0")
    assert bad["clearance_m"] == pytest.approx(gap, abs=2e-5) and bad["required_m"] == MARGIN
    assert rep["tool_clearance_m"] > gap  # the spindle, 10 mm thinner, farther
