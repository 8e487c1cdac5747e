"""CommandGuard on the repository's UR10e URDF.

Independent references: joint limits read here from the URDF's XML with xml.etree; TCP positions
from yourdfpy's forward kinematics (not the package's kernels). Each limit is crossed by half a
margin (refused, with the reason) and approached to within 1.5 margins (passes), so the test
pins both the check and the margin.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yourdfpy

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.command_guard import CommandGuard, GuardParams
from robot_grinding_sim.core.robot.dynamics import RobotModel

URDF = Path(__file__).resolve().parents[2] / "urdf" / "ur10e_grinding.urdf"
HOME = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])
SLOW = 1000.0  # s for a 2-knot move: every speed far below its limit


def _xml_limits() -> dict[str, tuple[float, float, float]]:
    out = {}
    for j in ET.parse(URDF).getroot().iter("joint"):
        lim = j.find("limit")
        if j.get("type") in ("revolute", "prismatic") and lim is not None:
            out[j.get("name")] = (float(lim.get("lower")), float(lim.get("upper")), float(lim.get("velocity")))
    return out


LIMITS = _xml_limits()


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_urdf(URDF)


@pytest.fixture(scope="module")
def guard(model: RobotModel) -> CommandGuard:
    return CommandGuard(model)


@pytest.fixture(scope="module")
def ydf() -> yourdfpy.URDF:
    return yourdfpy.URDF.load(str(URDF), load_meshes=False, build_collision_scene_graph=False,
                              load_collision_meshes=False)


def tcp_position(ydf: yourdfpy.URDF, q: np.ndarray) -> np.ndarray:
    ydf.update_cfg(np.asarray(q, dtype=float))
    return ydf.get_transform("tcp", "base_link")[:3, 3].copy()


def test_limits_are_the_urdf_limits(model: RobotModel, guard: CommandGuard) -> None:
    assert set(LIMITS) == set(model.joint_names) and len(LIMITS) == 6
    for k, name in enumerate(model.joint_names):
        lo, hi, v = LIMITS[name]
        assert guard.lower[k] == pytest.approx(lo + 0.01) and guard.upper[k] == pytest.approx(hi - 0.01)
        assert guard.max_velocity[k] == pytest.approx(0.9 * v)


def test_defaults() -> None:
    p = GuardParams()
    assert (p.position_margin, p.velocity_factor, p.max_tcp_speed) == (0.01, 0.9, 0.25)
    np.testing.assert_array_equal(p.workspace_min, [-1.5, -1.5, -0.5])
    np.testing.assert_array_equal(p.workspace_max, [1.5, 1.5, 1.5])


def _move(model: RobotModel, joint: str, value: float) -> np.ndarray:
    q = HOME.copy()
    q[model.joint_names.index(joint)] = value
    return np.vstack([HOME, q])


@pytest.mark.parametrize("joint", list(LIMITS))
@pytest.mark.parametrize("side", ["lower", "upper"])
def test_each_position_limit_with_its_margin(model: RobotModel, joint: str, side: str) -> None:
    lo, hi, _ = LIMITS[joint]
    sign, edge = (1.0, lo) if side == "lower" else (-1.0, hi)
    guard = CommandGuard(model, GuardParams(max_tcp_speed=100.0, workspace_min=[-9, -9, -9],
                                            workspace_max=[9, 9, 9]))
    inside = guard.check(model.joint_names, [0.0, SLOW], _move(model, joint, edge + sign * 0.015))
    assert inside.ok, inside.reasons
    refused = guard.check(model.joint_names, [0.0, SLOW], _move(model, joint, edge + sign * 0.005))
    assert not refused.ok
    (v,) = refused.violations
    assert (v.check, v.subject, v.knot, v.time) == ("position", joint, 1, SLOW)
    assert v.value == pytest.approx(edge + sign * 0.005) and v.limit == pytest.approx(edge + sign * 0.01)
    assert joint in refused.reasons[0] and "knot 1" in refused.reasons[0]


@pytest.mark.parametrize("joint", list(LIMITS))
def test_each_velocity_limit_given_and_implied(model: RobotModel, joint: str) -> None:
    guard = CommandGuard(model, GuardParams(max_tcp_speed=1e3))
    j = model.joint_names.index(joint)
    vmax = 0.9 * LIMITS[joint][2]
    q = np.vstack([HOME, HOME, HOME])
    for factor, ok in ((0.99, True), (1.01, False)):
        qd = np.zeros((3, 6))
        qd[1, j] = -factor * vmax
        res = guard.check(model.joint_names, [0.0, 1.0, 2.0], q, qd)
        assert res.ok is ok, res.reasons
        if not ok:
            (v,) = res.violations
            assert (v.check, v.subject, v.knot) == ("velocity", joint, 1)
            assert v.value == pytest.approx(-1.01 * vmax) and v.limit == pytest.approx(-vmax)
    # the same speed implied by two knots 10 ms apart, no velocities given
    for factor, ok in ((0.99, True), (1.01, False)):
        q2 = np.vstack([HOME, HOME])
        q2[1, j] += factor * vmax * 0.01
        res = guard.check(model.joint_names, [0.0, 0.01], q2)
        assert res.ok is ok, res.reasons
        if not ok:
            assert [(v.check, v.subject, v.knot) for v in res.violations] == [("implied velocity", joint, 1)]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_workspace_box_on_each_axis(model: RobotModel, ydf: yourdfpy.URDF, axis: int) -> None:
    p = tcp_position(ydf, HOME)
    for above, ok in ((0.01, True), (-0.01, False)):
        hi = np.full(3, 5.0)
        hi[axis] = p[axis] + above
        res = CommandGuard(model, GuardParams(workspace_min=[-5, -5, -5], workspace_max=hi)).check(
            model.joint_names, [0.0], HOME[None])
        assert res.ok is ok, res.reasons
        if not ok:
            (v,) = res.violations
            assert (v.check, v.subject, v.knot) == ("workspace", "TCP " + "xyz"[axis], 0)
            assert v.value == pytest.approx(p[axis], abs=1e-9) and v.limit == pytest.approx(hi[axis])
    lo = np.full(3, -5.0)
    lo[axis] = p[axis] + 0.01
    res = CommandGuard(model, GuardParams(workspace_min=lo, workspace_max=[5, 5, 5])).check(
        model.joint_names, [0.0], HOME[None])
    assert [v.subject for v in res.violations] == ["TCP " + "xyz"[axis]]
    assert res.violations[0].limit == pytest.approx(lo[axis])


def test_default_box_refuses_a_tcp_below_half_a_metre(
    model: RobotModel, ydf: yourdfpy.URDF, guard: CommandGuard
) -> None:
    q = np.array([0.0, 0.8, 0.0, 0.0, 0.0, 0.0])  # upper arm pitched down: the arm points at the floor
    z = tcp_position(ydf, q)[2]
    assert z < -0.5
    res = guard.check(model.joint_names, [0.0, SLOW], np.vstack([HOME, q]))
    assert [(v.check, v.subject, v.knot) for v in res.violations] == [("workspace", "TCP z", 1)]
    assert res.violations[0].value == pytest.approx(z, abs=1e-9)


def test_tcp_speed_between_knots(model: RobotModel, ydf: yourdfpy.URDF, guard: CommandGuard) -> None:
    q1 = HOME + np.array([0.0, 0.01, -0.01, 0.0, 0.0, 0.0])
    dist = np.linalg.norm(tcp_position(ydf, q1) - tcp_position(ydf, HOME))
    for factor, ok in ((0.98, True), (1.02, False)):
        dt = dist / (factor * 0.25)
        res = guard.check(model.joint_names, [0.0, dt], np.vstack([HOME, q1]))
        assert res.ok is ok, res.reasons
        if not ok:
            (v,) = res.violations
            assert (v.check, v.subject, v.knot) == ("implied tcp speed", "TCP", 1)
            assert v.value == pytest.approx(1.02 * 0.25, rel=1e-9)


def test_tcp_speed_from_velocities(model: RobotModel, ydf: yourdfpy.URDF, guard: CommandGuard) -> None:
    direction = np.array([0.3, -0.5, 0.8, 0.1, -0.2, 0.4])
    h = 1e-6  # central difference of yourdfpy's FK: the TCP speed for a unit joint rate
    step = tcp_position(ydf, HOME + h * direction) - tcp_position(ydf, HOME - h * direction)
    unit_speed = np.linalg.norm(step) / (2 * h)
    for factor, ok in ((0.99, True), (1.01, False)):
        qd = direction * factor * 0.25 / unit_speed
        res = guard.check(model.joint_names, [0.0, SLOW], np.vstack([HOME, HOME]), np.vstack([qd, 0 * qd]))
        assert res.ok is ok, res.reasons
        if not ok:
            (v,) = res.violations
            assert (v.check, v.knot) == ("tcp speed", 0)
            assert v.value == pytest.approx(1.01 * 0.25, rel=1e-6)


def test_several_failures_are_all_reported_once_each(model: RobotModel, guard: CommandGuard) -> None:
    lo, hi, _ = LIMITS["elbow_joint"]
    q = np.vstack([HOME, HOME, HOME, HOME])
    q[1:, 2] = hi  # over the elbow's limit at three knots
    res = guard.check(model.joint_names, [0.0, 0.1, 200.0, 400.0], q)
    checks = {(v.check, v.subject): v for v in res.violations}
    assert checks[("position", "elbow_joint")].count == 3
    assert checks[("position", "elbow_joint")].knot == 1
    assert ("implied velocity", "elbow_joint") in checks  # 1.24 rad in 0.1 s
    assert ("implied tcp speed", "TCP") in checks


def test_column_order_does_not_matter(model: RobotModel, guard: CommandGuard) -> None:
    q = _move(model, "wrist_2_joint", LIMITS["wrist_2_joint"][1])
    perm = [3, 0, 5, 1, 4, 2]
    a = guard.check(model.joint_names, [0.0, SLOW], q)
    b = guard.check([model.joint_names[i] for i in perm], [0.0, SLOW], q[:, perm])
    assert a.reasons == b.reasons and not a.ok


def test_q_current_holds_other_joints_and_checks_the_first_move(model: RobotModel, guard: CommandGuard) -> None:
    # only the wrist 3 commanded; the rest held at home
    res = guard.check(["wrist_3_joint"], [1.0], [[0.5]], q_current=HOME)
    assert res.ok, res.reasons
    # from home to +0.5 rad in 0.1 s: 5 rad/s implied, over 0.9 * pi
    res = guard.check(["wrist_3_joint"], [0.1], [[0.5]], q_current=HOME)
    assert [(v.check, v.subject, v.knot) for v in res.violations][:1] == [("implied velocity", "wrist_3_joint", 0)]
    # a first knot at t = 0 away from where the arm is: a jump
    res = guard.check(model.joint_names, [0.0, 1.0], np.vstack([HOME + 0.01, HOME]), q_current=HOME)
    assert {v.check for v in res.violations} == {"start"}
    with pytest.raises(InputError, match="q_current"):
        guard.check(["wrist_3_joint"], [1.0], [[0.5]])


def test_a_trajectory_stamped_in_the_past_is_judged_from_now(model: RobotModel, guard: CommandGuard) -> None:
    """Issue 22: a point 0.2 rad away at t = 1 s, stamped 5 s in the past, was judged as 0.2 rad/s
    and forwarded; the controller samples it at now - stamp, past its end: a step. Refused, naming the
    joint, the step and the limit, and how late the stamp is."""
    pan = model.joint_names.index("shoulder_pan_joint")
    target = HOME.copy()
    target[pan] += 0.2
    assert guard.check(model.joint_names, [1.0], target[None], q_current=HOME).ok  # stamp 0: 0.2 rad/s
    res = guard.check(model.joint_names, [1.0], target[None], q_current=HOME, late=5.0)
    assert not res.ok
    (v,) = res.violations
    assert (v.check, v.subject, v.value, v.limit) == ("start", "shoulder_pan_joint", pytest.approx(0.2), 1e-3)
    assert "5.0000 s in the past" in str(v) and "ended 4.0000 s ago" in str(v)


def test_a_stamp_in_the_past_inside_the_trajectory_is_a_step_to_the_point_due_now(
        model: RobotModel, guard: CommandGuard) -> None:
    """Late by 1.5 s on knots at 1, 2, 3 s: the controller starts at the point due at 1.5 s, the
    midpoint of the linear segment (positions only) or the cubic Hermite one (with velocities)."""
    pan = model.joint_names.index("shoulder_pan_joint")
    q = np.tile(HOME, (3, 1))
    q[:, pan] += [0.1, 0.2, 0.3]
    res = guard.check(model.joint_names, [1.0, 2.0, 3.0], q, q_current=HOME, late=1.5)
    starts = [v for v in res.violations if v.check == "start"]
    assert [(v.subject, v.knot) for v in starts] == [("shoulder_pan_joint", 0)]
    assert starts[0].value == pytest.approx(0.15, abs=1e-12) and "knot 0 is the point due now" in str(starts[0])
    # with velocities 0.1 rad/s at every knot the Hermite midpoint is the linear one too (a straight line)
    qd = np.zeros((3, 6))
    qd[:, pan] = 0.1
    res = guard.check(model.joint_names, [1.0, 2.0, 3.0], q, qd, q_current=HOME, late=1.5)
    assert [v.value for v in res.violations if v.check == "start"] == [pytest.approx(0.15, abs=1e-12)]
    # from the point due now on, the rest is what it was: from the arm at that point, nothing to refuse
    here = HOME.copy()
    here[pan] += 0.15
    assert guard.check(model.joint_names, [1.0, 2.0, 3.0], q, qd, q_current=here, late=1.5).ok


@pytest.fixture(scope="module")
def joint_guard(model: RobotModel) -> CommandGuard:
    """Joint limits only (a TCP speed limit far away): the shoulder's moves here are fast at the TCP."""
    return CommandGuard(model, GuardParams(max_tcp_speed=100.0))


def test_a_stamp_in_the_past_before_the_first_knot_shortens_the_move(model: RobotModel,
                                                                     joint_guard: CommandGuard) -> None:
    """0.9 rad in 1 s is 0.9 rad/s (within 0.9 x 2.094); stamped 0.5 s in the past the controller has
    0.5 s left for it: 1.8 rad/s implied, still within; 0.6 s late: 2.25 rad/s, refused."""
    pan = model.joint_names.index("shoulder_pan_joint")
    target = HOME.copy()
    target[pan] += 0.9
    assert joint_guard.check(model.joint_names, [1.0], target[None], q_current=HOME, late=0.5).ok
    res = joint_guard.check(model.joint_names, [1.0], target[None], q_current=HOME, late=0.6)
    (v,) = [v for v in res.violations if v.subject == "shoulder_pan_joint"]
    assert v.check == "implied velocity" and v.value == pytest.approx(0.9 / 0.4)
    assert v.limit == pytest.approx(0.9 * LIMITS["shoulder_pan_joint"][2]) and "0.6000 s in the past" in str(v)
    with pytest.raises(InputError, match="q_current"):
        joint_guard.check(model.joint_names, [1.0], target[None], late=0.5)
    with pytest.raises(InputError, match="late"):
        joint_guard.check(model.joint_names, [1.0], target[None], q_current=HOME, late=-1.0)


def test_the_interpolated_velocity_peaks_inside_a_segment(model: RobotModel, joint_guard: CommandGuard) -> None:
    """A rest-to-rest cubic Hermite segment (JTC's interpolation with velocities) peaks at 1.5 x its
    chord velocity mid-segment: 1.5 rad/s of chord (within the limit 1.885) is 2.25 rad/s there. The
    knots (velocity 0) and the chord passed; the peak is refused. From a moving arm (qd_current), the
    move to the first knot starts at its velocity."""
    pan = model.joint_names.index("shoulder_pan_joint")
    limit = 0.9 * LIMITS["shoulder_pan_joint"][2]
    target = HOME.copy()
    target[pan] += 1.5
    res = joint_guard.check(model.joint_names, [1.0], target[None], np.zeros((1, 6)), q_current=HOME)
    (v,) = res.violations
    assert (v.check, v.subject) == ("interpolated velocity", "shoulder_pan_joint")
    assert v.value == pytest.approx(2.25, rel=1e-12) and v.limit == pytest.approx(limit)
    assert joint_guard.check(model.joint_names, [1.0], target[None], q_current=HOME).ok  # linear: 1.5 rad/s
    # 1.0 rad in 1 s from rest: peak 1.5 (passes); from -1 rad/s (moving away) it must turn round:
    # v(tau) = -1 + 10 tau - 9 tau^2 peaks at 16/9 rad/s (within); from -1.5 rad/s at 2.45 rad/s (refused)
    target[pan] = HOME[pan] + 1.0
    assert joint_guard.check(model.joint_names, [1.0], target[None], np.zeros((1, 6)), q_current=HOME).ok
    moving = np.zeros(6)
    moving[pan] = -1.0
    assert joint_guard.check(model.joint_names, [1.0], target[None], np.zeros((1, 6)), q_current=HOME,
                       qd_current=moving).ok
    moving[pan] = -1.5
    res = joint_guard.check(model.joint_names, [1.0], target[None], np.zeros((1, 6)), q_current=HOME, qd_current=moving)
    (v,) = res.violations
    # c2 = 3 + 3 = 6, c3 = -2 - 1.5 = -3.5: peak -1.5 + 36 / 10.5
    assert v.check == "interpolated velocity" and v.value == pytest.approx(-1.5 + 36 / 10.5, rel=1e-12)


def test_the_planned_job_trajectory_passes(guard: CommandGuard) -> None:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job

    tr = plan_job(CellConfig(), optimise=False, max_passes=1, pass_length=0.01, check_collisions=False).trajectory
    res = guard.check_trajectory(tr)
    assert res.ok, res.reasons
    assert len(tr.times) > 10


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ((["nope"] + [f"j{i}" for i in range(5)], [0.0], np.zeros((1, 6))), "joint_names"),
        ((None, [0.0, 0.0], np.zeros((2, 6))), "times"),
        ((None, [0.0, -1.0], np.zeros((2, 6))), "times"),
        ((None, [], np.zeros((0, 6))), "times"),
        ((None, [0.0, 1.0], np.zeros((2, 5))), "positions"),
        ((None, [0.0, 1.0], np.full((2, 6), np.nan)), "positions"),
        ((None, [0.0, 1.0], np.zeros((2, 6)), np.zeros((3, 6))), "velocities"),
    ],
)
def test_bad_input(model: RobotModel, guard: CommandGuard, args: tuple, named: str) -> None:
    names = args[0] if args[0] is not None else model.joint_names
    with pytest.raises(InputError, match=named):
        guard.check(names, *args[1:])


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"position_margin": -0.1}, "position_margin"),
        ({"velocity_factor": 1.5}, "velocity_factor"),
        ({"velocity_factor": 0.0}, "velocity_factor"),
        ({"max_tcp_speed": 0.0}, "max_tcp_speed"),
        ({"workspace_min": [0, 0, 2.0]}, "workspace_max"),
        ({"workspace_max": [1, 1]}, "workspace_max"),
        ({"tcp_link": ""}, "tcp_link"),
    ],
)
def test_bad_params(kwargs: dict, named: str) -> None:
    with pytest.raises(InputError, match=named):
        GuardParams(**kwargs)


def test_unknown_tcp_link_and_too_wide_margin(model: RobotModel) -> None:
    with pytest.raises(InputError, match="tcp_link"):
        CommandGuard(model, GuardParams(tcp_link="nowhere"))
    with pytest.raises(InputError, match="position_margin"):
        CommandGuard(model, GuardParams(position_margin=4.0))
