"""One TCP speed limit (``process.max_tcp_speed``) for the planner, the executive and the driver's guard.

A plan the planner writes, the executive's move to its start and the calibration plan's wrist
sweep must never be refused by hardware_driver's CommandGuard for speed. The TCP speed here is
checked independently of the guard and of the planner: Pinocchio's frame velocity (its own forward
kinematics and Jacobian of the URDF) along the cubic Hermite the controller interpolates,
sampled finely between the knots. And the executive fails a running job when the arm's side says
it refused a command (:meth:`JobExecution.on_controller_fault`).
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.calibration.calibrate import with_orientation_sweep
from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.execution.executive import JobExecution, JobState
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.planning.trajectory import build_job_trajectory
from robot_grinding_sim.core.resources import default_urdf
from robot_grinding_sim.core.robot.command_guard import CommandGuard, GuardParams

LIMIT = CellConfig().process.max_tcp_speed


@pytest.fixture(scope="module")
def job():
    cell = CellConfig()
    setup = setup_job(JobConfig(cell=cell, optimise=False, max_passes=3, pass_length=0.03))
    plan = setup.plan
    plan.trajectory = build_job_trajectory(setup.model, setup.paths, cell.process, [0.0] * 3, setup.penetration,
                                           setup.q_home)
    return setup, plan, cell


def pinocchio_peak_speed(times: np.ndarray, q: np.ndarray, qd: np.ndarray, samples: int = 8) -> float:
    """Largest TCP speed (m/s) along the cubic Hermite between the knots, by Pinocchio."""
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(default_urdf()))
    data = model.createData()
    frame = model.getFrameId("tcp")
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    idx = [model.joints[model.getJointId(n)].idx_q for n in names]
    peak = 0.0
    for k in range(len(times) - 1):
        h = times[k + 1] - times[k]
        for x in np.linspace(0.0, 1.0, samples, endpoint=False):
            # derivative of the cubic Hermite basis at x
            d00, d10, d01, d11 = 6 * x**2 - 6 * x, 3 * x**2 - 4 * x + 1, -6 * x**2 + 6 * x, 3 * x**2 - 2 * x
            h00, h10, h01, h11 = 2 * x**3 - 3 * x**2 + 1, x**3 - 2 * x**2 + x, -2 * x**3 + 3 * x**2, x**3 - x**2
            qs = h00 * q[k] + h10 * h * qd[k] + h01 * q[k + 1] + h11 * h * qd[k + 1]
            vs = (d00 * q[k] + d01 * q[k + 1]) / h + d10 * qd[k] + d11 * qd[k + 1]
            qp, vp = pin.neutral(model), np.zeros(model.nv)
            qp[idx], vp[idx] = qs, vs
            pin.forwardKinematics(model, data, qp, vp)
            v = pin.getFrameVelocity(model, data, frame, pin.LOCAL_WORLD_ALIGNED).linear
            peak = max(peak, float(np.linalg.norm(v)))
    return peak


def guard(model, limit: float = LIMIT) -> CommandGuard:
    return CommandGuard(model, GuardParams(max_tcp_speed=limit))


@pytest.mark.parametrize("limit", [LIMIT, 0.02])
def test_the_planners_job_is_within_the_tcp_speed_limit_and_the_guard_accepts_it(job, limit: float) -> None:
    setup, _, cell = job
    tr = build_job_trajectory(setup.model, setup.paths, cell.replace(**{"process.max_tcp_speed": limit}).process,
                              [0.0] * 3, setup.penetration, setup.q_home)
    links = [s for s in tr.segments if s["kind"] == "link"]
    assert len(links) == 2
    result = guard(setup.model, limit).check(tr.joint_names, tr.times + 0.5, tr.positions, tr.velocities,
                                             tr.positions[0])
    assert result.ok, result.reasons
    for s in links:
        sl = slice(s["start"], s["stop"])
        peak = pinocchio_peak_speed(tr.times[sl], tr.positions[sl], tr.velocities[sl])
        duration = tr.times[s["stop"] - 1] - tr.times[s["start"]]
        print(f"limit {limit:g} m/s: link to pass {s['pass_index']}: {duration:.3f} s, peak TCP speed {peak:.4f} m/s")
        assert peak <= 1.02 * limit
        if limit < 0.1:  # the default's links between these passes are short: acceleration-limited
            assert peak > 0.8 * limit  # the cap binds: timed at the limit, not far below


def test_a_feed_over_the_limit_is_a_planning_error(job) -> None:
    from robot_grinding_sim.core.errors import PlanningError

    setup, _, cell = job
    fast = cell.replace(**{"process.feed": 0.3})
    with pytest.raises(PlanningError, match="process.max_tcp_speed"):
        build_job_trajectory(setup.model, setup.paths, fast.process, [0.0] * 3, setup.penetration, setup.q_home)


def test_the_executives_move_to_the_start_keeps_the_limit(job) -> None:
    setup, plan, cell = job
    ex = JobExecution(setup.model, plan, cell.execution, cell.process)
    home = np.asarray(cell.robot.home, dtype=float)
    sent = ex.start(0.0, home)
    c = sent.command
    result = guard(setup.model).check(setup.model.joint_names, c.times + 0.5, c.positions, c.velocities, home)
    assert result.ok, result.reasons
    move = slice(0, int(np.argmax(np.isfinite(c.job_times))) + 1)
    peak = pinocchio_peak_speed(c.times[move], c.positions[move], c.velocities[move])
    print(f"move to the start: {c.times[move][-1]:.2f} s, peak TCP speed {peak:.4f} m/s")
    assert peak <= 1.02 * LIMIT


def test_the_calibration_sweep_keeps_the_limit(job) -> None:
    setup, plan, _ = job
    tr = with_orientation_sweep(plan.trajectory, setup.model)
    result = guard(setup.model).check(tr.joint_names, tr.times + 0.5, tr.positions, tr.velocities, tr.positions[0])
    assert result.ok, result.reasons
    n = tr.segments[0]["stop"]
    assert pinocchio_peak_speed(tr.times[:n], tr.positions[:n], tr.velocities[:n]) <= 1.02 * LIMIT


def test_a_refusal_by_the_arms_side_fails_the_running_job(job) -> None:
    setup, plan, cell = job
    ex = JobExecution(setup.model, plan, cell.execution, cell.process)
    q0 = plan.trajectory.positions[0]
    assert ex.on_controller_fault(0.0, "hardware_driver refused the command: x") is None  # no job: nothing
    ex.start(0.0, q0)
    stop = ex.on_controller_fault(1.0, "hardware_driver refused the command: emergency stop")
    assert stop is not None and ex.state is JobState.STOPPING
    ex.on_controller_fault(1.1, "hardware_driver refused the command: stopped")  # the stop refused too
    ex.update(1.0 + ex.settings.command_lead + stop.command.duration + 1e-6)
    assert ex.state is JobState.FAILED
    assert ex.reason == ("hardware_driver refused the command: emergency stop; "
                         "hardware_driver refused the command: stopped")
