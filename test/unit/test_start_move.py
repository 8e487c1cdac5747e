"""The executive's move from the arm's joints to the plan's start (issue 24): checked against the part
before it is sent, made over the part when the straight joint move hits it, refused in one line
when neither is clear (core/planning/start_move.py, core/execution/executive.py).

The arm stands with its tool beside the flat plate, at the plate's height: the straight joint move
to the plan's start (above the plate's middle) sweeps the ball through the plate. Independent
reference: Pinocchio's forward kinematics of the same URDF along the commands, sampled every
millisecond, and the ball's (and the arm's links' origins') distance to the plate's box in closed form.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import trimesh

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import GrindingSimError
from robot_grinding_sim.core.planning import commands as cmds
from robot_grinding_sim.core.resources import default_urdf

PLATE = (np.array([0.6, -0.075, 0.0]), np.array([0.8, 0.075, 0.01]))  # the flat plate at (0.7, 0, 0), base_link, m


def _box_distance(p: np.ndarray, lo: np.ndarray = PLATE[0], hi: np.ndarray = PLATE[1]) -> np.ndarray:
    """Distance (K,) of points p (K, 3) from the box [lo, hi] (negative inside: minus the depth)."""
    d = np.maximum(lo - p, p - hi)
    out = np.linalg.norm(np.maximum(d, 0.0), axis=1)
    inside = np.all(d <= 0.0, axis=1)
    out[inside] = np.max(d[inside], axis=1)
    return out


@pytest.fixture(scope="module")
def job():
    from robot_grinding_sim.core.execution.executive import JobExecution
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.setup import cell_robot_model
    from robot_grinding_sim.core.planning.path_ik import first_configuration
    from robot_grinding_sim.core.planning.start_move import StartMoveCheck

    cell = CellConfig().replace(**{"workpiece.part": "flat_plate", "workpiece.faces": [5]})
    plan = plan_job(cell, optimise=False, max_passes=1, pass_length=0.02)
    model = cell_robot_model(cell)
    check = StartMoveCheck(model, plan.mesh, plan.workpiece_pose, plan.up, cell.tool, plan.tool.radius,
                           cell.process.clearance)
    # home: the ball beside the plate, 0.3 m to its side and 2 cm below its base, the tool pointing down
    q0 = plan.trajectory.positions[0]
    beside = model.fk(q0)
    beside[:3, 3] = (0.7, 0.375, -0.02)
    home = first_configuration(model, beside, q0, "home beside the plate")
    return cell, plan, model, check, home, JobExecution(model, plan, cell.execution, cell.process, check)


def _tcp_path(cmd: cmds.Command, frames=("tcp",)) -> dict[str, np.ndarray]:
    """Pinocchio's root-frame positions of ``frames`` along the command, every millisecond."""
    pm = pin.buildModelFromUrdf(str(default_urdf()))
    data = pm.createData()
    ids = {f: pm.getFrameId(f) for f in frames}
    out: dict[str, list] = {f: [] for f in frames}
    for t in np.arange(0.0, cmd.duration + 1e-9, 1e-3):
        pin.framesForwardKinematics(pm, data, cmds.sample(cmd, float(t))[0])
        for f, i in ids.items():
            out[f].append(data.oMf[i].translation.copy())
    return {f: np.array(v) for f, v in out.items()}


def test_the_straight_move_from_beside_the_part_sweeps_the_tool_through_it(job) -> None:
    """The premise, independently: the executive's straight joint move (as it sent it before) takes the
    ball into the plate."""
    from robot_grinding_sim.core.execution.executive import speed_limited_move

    cell, plan, model, _, home, ex = job
    r = plan.tool.radius
    still = cmds.hold(home)
    assert _box_distance(_tcp_path(still)["tcp"]).min() > r  # home itself is clear
    straight = speed_limited_move(model, home, plan.trajectory.positions[0], ex.vmax, ex.amax,
                                  cell.execution.move_velocity_scale, cell.process.max_tcp_speed)
    depth = r - _box_distance(_tcp_path(straight)["tcp"]).min()
    print(f"\nthe straight move takes the ball {depth * 1e3:.1f} mm into the plate")
    assert depth > 1e-3


def test_the_start_goes_over_the_part_and_the_job_follows(job) -> None:
    cell, plan, model, _, home, ex = job
    sent = ex.start(10.0, home)
    assert ex.start_report["move"] == "over the part" and "touches the part at the start move" in \
        ex.start_report["straight"]
    cmd = sent.command
    np.testing.assert_allclose(cmd.positions[0], home, atol=1e-12)
    # the job follows the move from the plan's first knot
    i0 = int(np.flatnonzero(cmd.job_times == 0.0)[0])
    np.testing.assert_allclose(cmd.positions[i0], plan.trajectory.positions[0], atol=1e-12)
    move = cmds.Command(cmd.times[: i0 + 1], cmd.positions[: i0 + 1], cmd.velocities[: i0 + 1],
                        cmd.job_times[: i0 + 1], "start")
    paths = _tcp_path(move, ("tcp", "spindle", "ft_sensor", "wrist_3_link", "forearm_link"))
    r = plan.tool.radius
    ball = _box_distance(paths["tcp"]).min()
    print(f"\nover the part: {move.duration:.2f} s, the ball at least {(ball - r) * 1e3:.1f} mm off the plate; "
          f"top at {ex.start_report['height_m']:.3f} m")
    assert ball > r + 1e-3
    for f in ("spindle", "ft_sensor", "wrist_3_link", "forearm_link"):
        assert _box_distance(paths[f]).min() > 0.0, f
    # rest to rest, within the joint velocity limits
    assert np.allclose(cmd.velocities[0], 0.0) and np.allclose(cmd.velocities[i0], 0.0, atol=1e-9)
    assert np.all(np.abs(move.velocities) <= model.velocity_limits * cell.execution.move_velocity_scale + 1e-9)
    ex.stop(11.0)


def test_a_clear_straight_move_is_sent_as_it_is(job) -> None:
    from robot_grinding_sim.core.execution.executive import JobExecution

    cell, plan, model, check, _, _ = job
    ex = JobExecution(model, plan, cell.execution, cell.process, check)
    above = plan.trajectory.positions[0] + np.array([0.0, -0.1, 0.1, 0.0, 0.0, 0.0])  # a little up and back
    ex.start(0.0, above)
    assert ex.start_report == {"move": "straight"}


def test_a_start_that_cannot_clear_the_part_is_refused_naming_the_move(job) -> None:
    from robot_grinding_sim.core.execution.executive import JobExecution, JobState
    from robot_grinding_sim.core.planning.start_move import StartMoveCheck

    cell, plan, model, _, home, _ = job
    # a lid over the plate (a fixture above it, clear of the arm at home): the way over the part comes
    # down through it onto the start however high it goes
    lid = trimesh.creation.box(extents=(0.3, 0.2, 0.02))
    lid.apply_translation((0.0, 0.0, 0.15))
    mesh = trimesh.util.concatenate([plan.mesh, lid])
    check = StartMoveCheck(model, mesh, plan.workpiece_pose, plan.up, cell.tool, plan.tool.radius,
                           cell.process.clearance)
    check.check(np.zeros(1), home[None])  # the arm at home is clear of the plate and the lid
    ex = JobExecution(model, plan, cell.execution, cell.process, check)
    with pytest.raises(GrindingSimError) as err:
        ex.start(0.0, home)
    text = str(err.value)
    print("\n" + text)
    assert "\n" not in text and text.startswith("the move from the arm's joints to the plan's start hits the part")
    assert "jog the arm clear of the part" in text and "touches the part at the start move" in text
    assert ex.state == JobState.FAILED and ex.reason == text and ex.sent is None  # nothing sent; no autostart again


def test_the_executive_of_a_plan_file_loads_the_part_when_a_start_needs_it(job, tmp_path) -> None:
    """A plan read from plan.json (as grinding_executive reads it) carries no mesh: the check loads the
    part it was planned on when the first start needs a move, and goes over the plate as above."""
    from robot_grinding_sim.core.execution.executive import JobExecution
    from robot_grinding_sim.core.planning import plan_io
    from robot_grinding_sim.core.planning.start_move import StartMoveCheck, start_check_for

    cell, plan, model, _, home, _ = job
    plan_io.write_plan(plan, tmp_path / "plan.json")
    read = plan_io.plan_from_dict(plan_io.read_plan(tmp_path / "plan.json"), "plan.json")
    made = []

    def lazy() -> StartMoveCheck:
        made.append(start_check_for(model, read, cell))
        return made[-1]

    ex = JobExecution(model, read, cell.execution, cell.process, lazy)
    assert not made  # nothing loaded with the plan
    ex.start(0.0, home)
    assert len(made) == 1 and made[0].top == pytest.approx(PLATE[1][2], abs=2e-4)  # the plate's top, root frame
    assert ex.start_report["move"] == "over the part"
    bad = plan_io.plan_from_dict(plan_io.read_plan(tmp_path / "plan.json"), "plan.json")
    bad.source = str(tmp_path / "gone.step")
    with pytest.raises(GrindingSimError, match="the move from the arm's joints to the plan's start cannot be "
                                               "checked against the part: .*gone.step"):
        JobExecution(model, bad, cell.execution, cell.process, lambda: start_check_for(model, bad, cell)).start(
            0.0, home)
