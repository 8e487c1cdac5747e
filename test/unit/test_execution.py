"""The executive's decisions (core.job.execution), checked against the plan they come from.

The reference a command gives is compared with the job trajectory evaluated by scipy's
CubicHermiteSpline (the commands and the simulated arm share one cubic Hermite,
core/robot/arm_kernels.cubic_hermite); the retreat against the plan's surface normals and the
robot's forward kinematics; progress against the progress samples the in-process bag carries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline
from scipy.optimize import minimize_scalar

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import GrindingSimError, InputError
from robot_grinding_sim.core.job.execution import JobExecution, JobState
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.planning import commands as cmds
from robot_grinding_sim.core.planning.trajectory import build_job_trajectory, progress_samples


@pytest.fixture(scope="module")
def job():
    cell = CellConfig()
    setup = setup_job(JobConfig(cell=cell, optimise=False, max_passes=2, pass_length=0.01))
    plan = setup.plan
    plan.trajectory = build_job_trajectory(setup.model, setup.paths, cell.process, [0.0, 0.0], setup.penetration,
                                           setup.q_home)
    return setup.model, plan, cell, setup.query


def make(job, **settings):
    model, plan, cell, *_ = job
    ex = cell.execution.__class__(**{**vars(cell.execution), **settings}) if settings else cell.execution
    return JobExecution(model, plan, ex, cell.process)


class _Planned:
    """The plan's job trajectory as scipy's cubic Hermite through its knots, ``sample(t)`` -> (q, qd)
    at job time t s (clamped to the job)."""

    def __init__(self, traj) -> None:
        self.spline, self.duration = CubicHermiteSpline(traj.times, traj.positions, traj.velocities), traj.duration

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        t = min(max(float(t), 0.0), self.duration)
        return self.spline(t), self.spline(t, 1)


def planned(job):
    return _Planned(job[1].trajectory)


def pass_window(job, index=0):
    return next(w for w in job[1].trajectory.pass_windows() if w[0] == index)


def test_start_at_the_plans_first_knot_sends_the_job_unchanged(job) -> None:
    ex = make(job)
    traj = job[1].trajectory
    sent = ex.start(10.0, traj.positions[0])
    assert sent.stamp == pytest.approx(10.0 + ex.settings.command_lead)
    ref = planned(job)
    for t in np.linspace(0.0, traj.duration, 97):
        q, qd, tau = ex.reference(sent.stamp + t)
        q_ref, qd_ref = ref.sample(t)
        np.testing.assert_allclose(q, q_ref, atol=1e-12)
        np.testing.assert_allclose(qd, qd_ref, atol=1e-9)
        assert tau == pytest.approx(t, abs=1e-9)


def test_start_from_elsewhere_moves_there_first_within_the_limits(job) -> None:
    model = job[0]
    ex = make(job)
    traj = job[1].trajectory
    q0 = traj.positions[0] + np.array([0.2, -0.1, 0.05, 0.0, 0.1, -0.3])
    sent = ex.start(0.0, q0)
    c = sent.command
    np.testing.assert_allclose(c.positions[0], q0)
    move_end = c.times[np.flatnonzero(np.isfinite(c.job_times))[0]]
    ts = np.linspace(0.0, move_end, 400)
    qd = np.array([cmds.sample(c, t)[1] for t in ts])
    assert np.all(np.abs(qd) <= ex.settings.move_velocity_scale * model.velocity_limits * (1 + 1e-9))
    q_end, qd_end, tau = ex.reference(sent.stamp + move_end)
    np.testing.assert_allclose(q_end, traj.positions[0], atol=1e-12)
    assert np.allclose(qd_end, 0.0) and tau == 0.0
    assert math.isnan(ex.reference(sent.stamp + 0.5 * move_end)[2])  # not on the job yet
    # then the job, shifted by the move
    ref = planned(job)
    for t in np.linspace(0.0, traj.duration, 31):
        np.testing.assert_allclose(ex.reference(sent.stamp + move_end + t)[0], ref.sample(t)[0], atol=1e-12)


def test_a_deferred_start_is_stamped_when_released(job) -> None:
    """Building the move and the message of a long job takes time (seconds on a busy core) while a
    node's sim clock stands still: a deferred start is stamped command_lead ahead of the clock read
    when the command goes out, and nothing is checked against its provisional stamp before that."""
    ex = make(job)
    traj = job[1].trajectory
    lead = ex.settings.command_lead
    sent = ex.start(100.0, traj.positions[0] + 0.2, defer=True)
    assert ex.pending and ex.state is JobState.RUNNING
    # joint states far from the command and no joint states for long: no stop while pending
    assert ex.on_joint_state(100.0 + lead + 1.0, traj.positions[0] - 0.5) is None
    assert ex.update(100.0 + lead + 1e4) is None and ex.state is JobState.RUNNING
    released = ex.release(107.5)  # the clock when the command goes out, 7.5 s after the request
    assert released is sent and not ex.pending
    assert sent.stamp == pytest.approx(107.5 + lead)
    with pytest.raises(GrindingSimError, match="no deferred start"):
        ex.release(108.0)
    # tracking is checked from the new stamp on: the arm where the command starts passes
    assert ex.on_joint_state(sent.stamp + 0.01, ex.reference(sent.stamp + 0.01)[0]) is None
    assert ex.on_joint_state(sent.stamp + 0.02, ex.reference(sent.stamp + 0.02)[0] + 0.5) is not None
    # a clock behind the request's time (another source) never stamps earlier than the request
    ex2 = make(job)
    ex2.start(100.0, traj.positions[0], defer=True)
    assert ex2.release(50.0).stamp == pytest.approx(100.0 + lead)
    # a stop before the release replaces the start: nothing left to release
    ex3 = make(job)
    ex3.start(100.0, traj.positions[0] + 0.2, defer=True)
    ex3.stop(101.0, "stop requested")
    assert not ex3.pending
    with pytest.raises(GrindingSimError):
        ex3.release(102.0)


def test_pause_stays_on_the_path_never_faster_and_resume_joins_the_plan(job) -> None:
    ex = make(job, ramp_time=0.3, joint_states_timeout=0.0)
    traj = job[1].trajectory
    ref = planned(job)
    _, t0, t1 = pass_window(job)
    sent = ex.start(0.0, traj.positions[0])
    t_pause = sent.stamp + 0.5 * (t0 + t1) - ex.settings.command_lead
    p = ex.pause(t_pause)
    tau0 = p.command.job_times[0]
    assert tau0 == pytest.approx(0.5 * (t0 + t1), abs=1e-9)
    # the velocity where the pause starts is the plan's (no jump), it ends at rest
    np.testing.assert_allclose(p.command.velocities[0], ref.sample(tau0)[1], atol=1e-9)
    np.testing.assert_allclose(p.command.velocities[-1], 0.0)
    assert p.command.job_times[-1] - tau0 == pytest.approx(0.15, abs=1e-9)
    for t in np.linspace(0.0, p.command.duration, 61):
        q, qd, tau = cmds.sample(p.command, t)
        # on the path: the nearest planned configuration around the knots' job time
        best = minimize_scalar(lambda x, q=q: float(np.linalg.norm(ref.sample(x)[0] - q)),
                               bounds=(tau - 2e-3, tau + 2e-3), method="bounded", options={"xatol": 1e-10})
        assert best.fun < 5e-8  # 0.05 um at 1 m reach
        qd_plan = ref.sample(tau)[1]
        assert np.linalg.norm(qd) <= np.linalg.norm(qd_plan) * (1 + 1e-3) + 1e-9
    ex.update(p.stamp + p.command.duration + 1e-6)
    assert ex.state is JobState.PAUSED
    pass_i, arc = ex.progress(p.stamp + p.command.duration + 1.0)
    assert pass_i == 0 and arc > 0
    r = ex.resume(p.stamp + p.command.duration + 5.0)
    np.testing.assert_allclose(r.command.positions[0], p.command.positions[-1], atol=1e-12)
    np.testing.assert_allclose(r.command.velocities[0], 0.0)
    # after the ramp: the plan, shifted
    lag = r.stamp + 0.3 - (tau0 + 0.3)
    for t in np.linspace(tau0 + 0.3, traj.duration, 41):
        np.testing.assert_allclose(ex.reference(lag + t)[0], ref.sample(t)[0], atol=1e-9)
    ex.update(lag + traj.duration + 1e-6)
    assert ex.state is JobState.DONE


def test_stop_in_a_pass_brakes_on_the_path_then_retreats_along_the_normal(job) -> None:
    model, plan, cell, *_ = job
    ex = make(job, joint_states_timeout=0.0)
    traj = plan.trajectory
    _, t0, t1 = pass_window(job)
    sent = ex.start(0.0, traj.positions[0])
    s = ex.stop(sent.stamp + 0.5 * (t0 + t1) - ex.settings.command_lead, "operator")
    c = s.command
    assert ex.state is JobState.STOPPING and c.kind == "retreat"
    np.testing.assert_allclose(c.velocities[-1], 0.0)
    # where the braking ends: on the path; the retreat: that point + approach x the plan's normal there
    p_end = model.fk(c.positions[-1])[:3, 3]
    k_brake = np.flatnonzero(c.times <= ex.settings.ramp_time + 1e-12)[-1]
    p_brake = model.fk(c.positions[k_brake])[:3, 3]
    n = job[3].query(p_brake).normal  # the exact CAD surface's normal under the ball's centre
    out = p_end - p_brake
    assert np.linalg.norm(out) == pytest.approx(cell.process.approach, abs=1e-8)
    assert math.degrees(math.acos(min(1.0, float(out @ n) / np.linalg.norm(out)))) < 0.05
    np.testing.assert_allclose(model.fk(c.positions[-1])[:3, :3], model.fk(c.positions[k_brake])[:3, :3], atol=1e-8)
    assert ex.progress(s.stamp + 0.01) == (-1, 0.0)
    ex.update(s.stamp + c.duration + 1e-6)
    assert ex.state is JobState.STOPPED and ex.reason == "operator"


def test_a_tracking_error_over_the_limit_stops_the_job_as_failed(job) -> None:
    ex = make(job, tracking_error_limit=0.01, joint_states_timeout=0.0)
    traj = job[1].trajectory
    sent = ex.start(0.0, traj.positions[0])
    t = sent.stamp + 1.0
    q_ref = ex.reference(t)[0]
    assert ex.on_joint_state(t, q_ref + 0.009) is None and ex.state is JobState.RUNNING
    stop = ex.on_joint_state(t + 0.01, ex.reference(t + 0.01)[0] + np.r_[0, 0, 0.02, 0, 0, 0])
    assert stop is not None and ex.state is JobState.STOPPING
    assert "tracking error 0.02" in ex.reason and "wrist" not in ex.reason and "elbow_joint" in ex.reason
    ex.update(stop.stamp + stop.command.duration + 1e-6)
    assert ex.state is JobState.FAILED


def test_silent_joint_states_stop_the_job(job) -> None:
    ex = make(job, joint_states_timeout=0.5)
    sent = ex.start(0.0, job[1].trajectory.positions[0])
    ex.on_joint_state(sent.stamp + 0.1, ex.reference(sent.stamp + 0.1)[0])
    assert ex.update(sent.stamp + 0.55) is None
    stop = ex.update(sent.stamp + 0.65)
    assert stop is not None and "no joint states for 0.55" in ex.reason


def test_progress_matches_the_in_process_progress_samples(job) -> None:
    ex = make(job)
    traj = job[1].trajectory
    sent = ex.start(0.0, traj.positions[0])
    rows = progress_samples(traj)
    on = rows[rows[:, 1] >= 0]
    for t, idx, arc in on[:: max(1, len(on) // 50)]:
        got = ex.progress(sent.stamp + t)
        assert got[0] == idx and got[1] == pytest.approx(arc, abs=1e-9)
    off = rows[rows[:, 1] < 0]
    for t, _, _ in off[:: max(1, len(off) // 20)]:
        if not any(t0 <= t <= t1 for _, t0, t1 in traj.pass_windows()):
            assert ex.progress(sent.stamp + t) == (-1, 0.0)


def test_requests_in_the_wrong_state_are_refused_by_name(job) -> None:
    ex = make(job)
    with pytest.raises(Exception, match="cannot pause: the job is ready"):
        ex.pause(0.0)
    with pytest.raises(Exception, match="cannot resume: the job is ready"):
        ex.resume(0.0)
    ex.start(0.0, job[1].trajectory.positions[0])
    with pytest.raises(Exception, match="cannot start: the job is running"):
        ex.start(1.0, job[1].trajectory.positions[0])


def test_a_plan_without_a_job_trajectory_is_refused(job) -> None:
    model, plan, cell, *_ = job
    bare = type(plan).__new__(type(plan))
    bare.__dict__.update(plan.__dict__)
    bare.trajectory = None
    with pytest.raises(InputError, match="no job trajectory"):
        JobExecution(model, bare, cell.execution, cell.process)
