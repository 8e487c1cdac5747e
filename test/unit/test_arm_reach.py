"""Where the arm cannot reach (issue 24, honest reach and coverage): a flat plate placed partly beyond
the UR10e's reach. The waypoints the arm cannot reach are taken out of the passes and counted as
"the arm cannot reach"; the job runs on the rest; a part wholly out of reach is one clear error.

Independent reference: the arm's reach with the tool pointing down, from Pinocchio's forward
kinematics of the same URDF. With the tool vertical (q5 = -pi/2, q2 + q3 + q4 = -pi/2) the tool
centre is the wrist's point plus offsets fixed in the arm's vertical plane, so at a height z the arm
reaches a disc about the base's axis whose radius r_max(z) is that of the stretched elbow (q3 = 0)
at that height (the roll about the tool axis is the last joint's, free). Each pass end's approach
start, ``approach`` above it, must be reached too: the passes end inside r_b = r_max(z + approach).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.resources import default_urdf

X_PART = 1.25  # m: the plate (200 x 150 mm, centred on its frame) from x = 1.15 to 1.35 m


def _r_max(z: float) -> float:
    """Pinocchio: the horizontal distance from the base's axis of the tool centre with the tool pointing
    down and the elbow stretched, at tool centre height z (m)."""
    pm = pin.buildModelFromUrdf(str(default_urdf()))
    data, tcp = pm.createData(), pm.getFrameId("tcp")

    def p(q2: float) -> np.ndarray:
        pin.framesForwardKinematics(pm, data, np.array([0.0, q2, 0.0, -np.pi / 2 - q2, -np.pi / 2, 0.0]))
        assert data.oMf[tcp].rotation[2, 2] == pytest.approx(-1.0, abs=1e-12)  # the tool points down
        return data.oMf[tcp].translation

    q2 = brentq(lambda q: p(q)[2] - z, -1.5, 0.5, xtol=1e-14)
    return float(np.hypot(*p(q2)[:2]))


def _beyond(r: float, x1: float, y1: float) -> float:
    """Area (m^2) of the rectangle x <= x1, |y| <= y1 outside the circle of radius r about the origin."""
    return quad(lambda y: max(0.0, x1 - np.sqrt(max(r * r - y * y, 0.0))), -y1, y1, epsabs=1e-12)[0]


@pytest.fixture(scope="module")
def placed():
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.setup import cell_robot_model, job_tool
    from robot_grinding_sim.core.planning import planner

    cell = CellConfig().replace(**{"workpiece.part": "flat_plate", "workpiece.faces": [5],
                                   "workpiece.pose": [X_PART, 0, 0, 0, 0, 0]})
    plan = plan_job(cell, optimise=False)
    # the passes as planned before the arm's reach (the same planning, no robot)
    tool = job_tool(cell_robot_model(cell), cell)
    planned = planner.plan("flat_plate", [5], cell.passes.validate(), planner.tool_parameters(cell, tool),
                           workpiece_pose=np.asarray(cell.workpiece.pose, dtype=float))
    return cell, plan, planned


def _radii(plan) -> tuple[np.ndarray, float]:
    X = plan.workpiece_pose
    P = np.vstack([p @ X[:3, :3].T + X[:3, 3] for p in plan.tcp_positions])
    return np.hypot(P[:, 0], P[:, 1]), float(P[:, 2].mean())


def test_the_waypoints_out_of_reach_leave_the_passes_and_the_job_runs_on_the_rest(placed) -> None:
    cell, plan, planned = placed
    r_kept, z = _radii(plan)
    r_all, _ = _radii(planned)
    approach = cell.process.approach
    r_z, r_b = _r_max(z), _r_max(z + approach)
    print(f"\nr_max {r_z:.5f} m at the tool centre's height {z:.4f} m, {r_b:.5f} m {approach * 1e3:g} mm above; "
          f"kept waypoints out to {r_kept.max():.5f} m")
    assert r_all.max() > r_z + 0.04  # the plate does reach beyond the arm
    assert r_kept.max() <= r_b + 1e-9  # every pass end's approach start is within reach
    figures = plan.coverage.arm_reach
    dropped = figures["dropped_waypoints"]
    assert figures["waypoints"] == len(r_all) and dropped == len(r_all) - len(r_kept)
    # every waypoint beyond the arm's reach went, and none well inside what a pass end may reach
    spacing = cell.passes.spacing
    assert int((r_all > r_z).sum()) <= dropped <= int((r_all > r_b - 2 * spacing).sum())
    # the job runs on the rest: a trajectory through every pass left, checked against the part
    assert plan.trajectory is not None
    assert len([s for s in plan.trajectory.segments if s["kind"] == "pass"]) == len(plan.passes)
    assert plan.collision is not None and plan.collision.get("collision") is None


def test_the_area_the_arm_cannot_reach_is_the_plates_beyond_its_reach(placed) -> None:
    """The coverage's "the arm cannot reach" is the region (the plate inside its margin) beyond r_b,
    less the band the kept pass ends cover (between sqrt(0.55^2 - 0.5^2) and 0.55 stepovers past
    them), within the coverage mesh's resolution h along the area's outline; the coverage of the
    rest stays >= 98 %."""
    cell, plan, _ = placed
    c = plan.coverage
    _, z = _radii(plan)
    r_b = _r_max(z + cell.process.approach)
    s, margin = plan.pass_params.stepover, plan.pass_params.margin
    x1, y1 = X_PART + 0.1 - margin, 0.075 - margin
    most, least = _beyond(r_b, x1, y1), _beyond(r_b + 0.55 * s, x1, y1)
    least = min(least, _beyond(r_b + np.sqrt(0.55**2 - 0.25) * s, x1, y1))
    outline = 2 * y1 + 2 * (x1 - r_b) + 2 * y1  # the arc, the two sides, the far edge (m)
    slack = outline * (s / 3.0) / 2.0  # half a mesh cell (h = stepover / 3) along it
    got = c.arm_unreachable_area
    print(f"\nthe arm cannot reach {got * 1e6:.0f} mm^2; analytic {least * 1e6:.0f} .. {most * 1e6:.0f} mm^2 "
          f"(+- {slack * 1e6:.0f} mm^2 of the mesh)")
    assert least - slack <= got <= most + slack
    assert got > 0.2 * (c.area + got)  # a quarter of the plate: far from a rounding
    assert c.coverage >= 0.98
    assert c.coverage_of_face == pytest.approx(c.covered_area / c.face_area)
    d = c.as_dict()
    assert d["excluded_m2"]["arm_cannot_reach"] == got and d["arm_reach"]["dropped_waypoints"] > 0
    from robot_grinding_sim.cli.plan import _coverage_line

    assert f"the arm cannot reach: {got * 1e6:.0f} mm^2" in _coverage_line(c)


def test_a_part_wholly_out_of_reach_is_one_clear_error() -> None:
    from robot_grinding_sim.core.job.plan_job import plan_job

    cell = CellConfig().replace(**{"workpiece.part": "flat_plate", "workpiece.faces": [5],
                                   "workpiece.pose": [1.7, 0, 0, 0, 0, 0], "passes.stepover": 0.02})
    with pytest.raises(PlanningError) as err:
        plan_job(cell, optimise=False, check_collisions=False)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("all ") and "waypoints of the passes are unreachable for the arm" in text
    assert "move the workpiece closer" in text


def test_the_planners_own_robot_stage_takes_out_what_the_arm_cannot_reach_as_a_job_does(placed) -> None:
    """``planner.plan(robot=...)`` (the library's one-call plan) on the same placement gives the job's
    passes and figures, not a refusal of the first waypoint out of reach."""
    from robot_grinding_sim.core.job.setup import cell_robot_model, job_tool
    from robot_grinding_sim.core.planning import planner

    cell, plan, planned = placed
    tool = job_tool(cell_robot_model(cell), cell)
    own = planner.plan("flat_plate", [5], cell.passes.validate(), planner.tool_parameters(cell, tool),
                       robot="default", workpiece_pose=np.asarray(cell.workpiece.pose, dtype=float),
                       q_home=np.asarray(cell.robot.home, dtype=float))
    assert own.coverage.arm_reach == plan.coverage.arm_reach and own.coverage.arm_reach["dropped_waypoints"] > 0
    assert own.coverage.arm_unreachable_area == pytest.approx(plan.coverage.arm_unreachable_area, rel=1e-12)
    assert len(own.passes) == len(plan.passes)
    for a, b in zip(own.tcp_positions, plan.tcp_positions, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    r_own, z = _radii(own)
    assert r_own.max() <= _r_max(z + cell.process.approach) + 1e-9  # Pinocchio's reach
    assert own.trajectory is not None and own.collision.get("collision") is None


def test_a_waypoint_only_another_configuration_of_the_arm_reaches_is_out_of_reach() -> None:
    """The curved panel turned and placed near the edge of the reach: the arm's configuration from its
    home pose reaches a pass only part of the way; the rest only the other shoulder reaches. The job's
    trajectory cannot change configuration inside a pass, so those waypoints are the arm's
    "cannot reach" (before, the reach check took any configuration and the trajectory then refused
    the job: "pass 0, waypoint 5 ... is unreachable: IK error 0.0476 mm").

    Checked with Pinocchio's forward kinematics of the URDF: each pass of the job starts and ends with
    the tcp on its first and last waypoint's normal (the lead-in lifts it along the normal, nothing
    moves it across), and no joint turns more than 0.1 rad between two knots of a pass (the arm stays
    in one configuration through each pass)."""
    from robot_grinding_sim.core.job.plan_job import plan_job

    cell = CellConfig().replace(**{"workpiece.part": "cylinder_section", "workpiece.pose": [1.2, 0.3, 0.0, 0, 0, 0.5],
                                   "passes.stepover": 0.01, "passes.spacing": 0.004})
    plan = plan_job(cell, optimise=False)
    reach = plan.coverage.arm_reach
    assert 0 < reach["dropped_waypoints"] < reach["waypoints"] and plan.coverage.arm_unreachable_area > 0.0

    pm = pin.buildModelFromUrdf(str(default_urdf()))
    data, tcp = pm.createData(), pm.getFrameId("tcp")
    traj, X = plan.trajectory, plan.workpiece_pose
    passes = [s for s in traj.segments if s["kind"] == "pass"]
    assert len(passes) == len(plan.passes)
    for s in passes:
        k = s["pass_index"]
        q = traj.positions[s["start"]:s["stop"] + 1]
        want = np.asarray(plan.tcp_positions[k]) @ X[:3, :3].T + X[:3, 3]
        normals = plan.passes[k].normals @ X[:3, :3].T
        for qk, w, n in ((q[0], want[0], normals[0]), (q[-1], want[-1], normals[-1])):
            pin.framesForwardKinematics(pm, data, qk)
            r = data.oMf[tcp].translation - w
            assert np.linalg.norm(r - (r @ n) * n) < 1e-6 and -1e-9 < r @ n < cell.process.approach, (k, r)
        assert np.abs(np.diff(q, axis=0)).max() < 0.1, (k, np.abs(np.diff(q, axis=0)).max())


def test_a_pass_that_starts_in_another_configuration_is_reached() -> None:
    """The flap wheel's axis lies across the feed, so the tool turns half a turn about the normal
    between passes that run opposite ways. The arm reaches each pass in another configuration of its
    wrist, which the trajectory takes on the link between passes. The reach check must judge each
    pass from the configurations the trajectory can have at its start, not only from the one the pass
    before ended in. Judged from that one alone, it dropped 48 of these 144 waypoints, which the
    trajectory reaches. Checked with Pinocchio's FK: every pass knot's tcp is on its pass."""
    from robot_grinding_sim.core.config import load_cell_config
    from robot_grinding_sim.core.job.plan_job import plan_job

    cfg = Path(__file__).resolve().parents[2] / "config"
    cell = load_cell_config([str(cfg / "cell.yaml"), str(cfg / "tools" / "flap_wheel.yaml")], {})
    plan = plan_job(cell, optimise=False, max_passes=8, pass_length=0.045, check_collisions=False)
    assert plan.coverage.arm_reach is None  # nothing taken out: the arm reaches every waypoint
    pm = pin.buildModelFromUrdf(str(cfg.parent / "urdf" / "ur10e_flap_wheel.urdf"))
    data, tcp = pm.createData(), pm.getFrameId("tcp")
    X = plan.workpiece_pose
    for s in (s for s in plan.trajectory.segments if s["kind"] == "pass"):
        want = np.asarray(plan.tcp_positions[s["pass_index"]]) @ X[:3, :3].T + X[:3, 3]
        for qk in plan.trajectory.positions[s["start"]:s["stop"] + 1]:
            pin.framesForwardKinematics(pm, data, qk)
            assert np.linalg.norm(want - data.oMf[tcp].translation, axis=1).min() < 0.005
