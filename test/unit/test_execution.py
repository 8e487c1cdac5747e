"""The executive's decisions (core.execution.executive), checked against the plan they come from.

The reference a command gives is compared with the job trajectory evaluated by scipy's
CubicHermiteSpline (the commands and the simulated arm share one cubic Hermite,
core/robot/arm_kernels.cubic_hermite); the retreat against the plan's surface normals and the
robot's forward kinematics; progress against the progress samples the in-process bag carries.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline
from scipy.optimize import minimize_scalar

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import GrindingSimError, InputError
from robot_grinding_sim.core.execution.executive import JobExecution, JobState
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
    assert ex.state is JobState.RUNNING  # the clock is there; the arm has not said so yet
    ex.on_joint_state(lag + traj.duration + 1e-3, traj.positions[-1])
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
    ex = make(job, tracking_error_limit=0.01, joint_states_timeout=0.0, path_tolerance=10.0)
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


def _ends_by_ticks(ex, t_first: float, t_last: float, period: float) -> list[tuple[int, float, float]]:
    ticks = np.arange(t_first, t_last + period, period)
    return [e for a, b in zip(ticks[:-1], ticks[1:], strict=True) for e in ex.pass_ends(float(a), float(b))]


def test_late_progress_ticks_still_give_every_pass_its_end(job) -> None:
    """Ticks far apart (0.37 s, longer than a pass) lose no pass end: each end comes once, at the
    in-process progress samples' end row (its time, pass, arc)."""
    ex = make(job)
    traj = job[1].trajectory
    sent = ex.start(0.0, traj.positions[0])
    rows = progress_samples(traj)
    expected = [(int(i), a, sent.stamp + t) for t, i, a in rows[:-1]
                if i >= 0 and any(i == w[0] and t == w[2] for w in traj.pass_windows())]
    expected = list(dict.fromkeys(expected))
    assert len(expected) == len(traj.pass_windows()) == 2
    got = _ends_by_ticks(ex, sent.stamp - 0.05, sent.stamp + traj.duration + 0.5, 0.37)
    assert [g[0] for g in got] == [e[0] for e in expected]
    for (gi, ga, gt), (_, ea, et) in zip(got, expected, strict=True):
        assert ga == pytest.approx(ea, abs=1e-12) and gt == pytest.approx(et, abs=1e-9)
        assert ex.progress(gt) == (gi, pytest.approx(ea, abs=1e-9))  # where progress itself says so


def test_a_paused_pass_ends_later_on_the_clock(job) -> None:
    """Paused inside pass 0 and resumed 1 s later, ticks every 0.37 s asked live (each command in
    force when it is asked): pass 0's end comes once, later on the clock than planned, and at that
    clock time progress is at the pass's end."""
    ex = make(job)
    traj = job[1].trajectory
    sent = ex.start(0.0, traj.positions[0])
    idx, w0, w1 = pass_window(job, 0)
    t_pause, t_resume = sent.stamp + w0 + 0.2 * (w1 - w0), None
    got, last_tick, t = [], sent.stamp, sent.stamp
    while t < sent.stamp + traj.duration + 3.0:
        t += 0.01
        if t >= t_pause and ex.state is JobState.RUNNING and t_resume is None:
            ex.pause(t)
        if ex.state is JobState.PAUSED and t_resume is None:
            t_resume = t + 1.0
        if t_resume is not None and t >= t_resume and ex.state is JobState.PAUSED:
            ex.resume(t)
        ex.on_joint_state(t, ex.reference(t)[0])
        ex.update(t)
        if t - last_tick >= 0.37:
            got += [(*e, ex.progress(e[2])) for e in ex.pass_ends(last_tick, t)]
            last_tick = t
    assert t_resume is not None and ex.state is JobState.DONE
    assert [g[0] for g in got] == [0, 1]
    _, arc, t_end, there = got[0]
    end = next(s["stop"] for s in traj.segments if s["kind"] == "pass" and s["pass_index"] == 0) - 1
    assert arc == pytest.approx(traj.arc[end], abs=1e-12)
    assert t_end > sent.stamp + w1 + 0.5
    assert there == (idx, pytest.approx(arc, abs=1e-9))  # progress itself, asked then, says the same


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


# -- what "done" means: the arm got there (issue 22, item 2) -------------------------------------------
# The arm is driven from the outside: joint states made here, stamped on the arm's clock and received
# on the executive's, the way grinding_executive hands them over.


def drive(ex, t_from, t_to, arm, dt=0.004, behind=0.0):
    """Joint states of ``arm(t)`` every ``dt`` s of the executive's clock from ``t_from`` to ``t_to``,
    stamped ``behind`` s behind it, with :meth:`update` after each; returns the commands sent."""
    sent = []
    for t in np.arange(t_from, t_to, dt):
        for out in (ex.on_joint_state(t - behind, arm(t), received=t), ex.update(t)):
            if out is not None:
                sent.append(out)
    return sent


def frozen(sent, t_stop=math.inf):
    """An arm that follows the command ``sent`` exactly until ``t_stop`` and stays there (the
    controller's "stop here"), whatever the executive sends after."""
    c, t0 = sent.command, sent.stamp
    return lambda t: cmds.sample(c, min(t, t_stop) - t0)[0]


def tool(job, q):
    return job[0].fk(q)[:3, 3]


def test_an_arm_stopped_in_the_last_pass_fails_the_job_and_the_tool_retreats(job) -> None:
    """The arm stops 4 mm into the last 10 mm pass: the joint error left to the plan's end stays under
    the 0.05 rad tracking limit, so the clock alone ended this job "done", the tool still on the part.
    Now it is not done: once settle_time has passed without the arm at the plan's end, the job
    fails saying how far the tool is from it, and retreats from where the arm is along the pass's
    normal (the arm being at the part)."""
    model, plan, cell, query = job
    ex = make(job)
    traj = plan.trajectory
    start = ex.start(0.0, traj.positions[0])
    _, t0, t1 = pass_window(job, 1)
    t_stop = start.stamp + t0 + 0.4 * (t1 - t0)
    arm = frozen(start, t_stop)
    end = start.stamp + traj.duration
    # the joint error it leaves at the plan's end is under the joint tracking limit
    assert np.max(np.abs(arm(end) - traj.positions[-1])) < ex.settings.tracking_error_limit
    sent = drive(ex, 0.0, end + ex.settings.settle_time + 2.0, arm)
    assert len(sent) == 1 and sent[0].command.kind == "retreat"
    assert sent[0].stamp - ex.settings.command_lead == pytest.approx(end + ex.settings.settle_time, abs=0.005)
    assert ex.state is JobState.FAILED
    assert "did not reach the plan's end" in ex.reason and "retreating from pass 1" in ex.reason
    # the retreat: from where the arm stopped, approach along the CAD surface's normal there
    c = sent[0].command
    np.testing.assert_allclose(c.positions[0], arm(end), atol=1e-12)
    p0, p1 = tool(job, c.positions[0]), tool(job, c.positions[-1])
    out = p1 - p0
    assert np.linalg.norm(out) == pytest.approx(cell.process.approach, abs=1e-8)
    assert math.degrees(math.acos(min(1.0, float(out @ query.query(p0).normal) / np.linalg.norm(out)))) < 0.05


def test_a_tool_pushed_across_its_path_stops_the_job_a_lag_along_it_does_not(job) -> None:
    """Across the path (sideways on the part) the tool may be off by the path tolerance (half a
    stepover) at most: beyond, the job stops and retreats. Along the path (a lag) or along the
    normal (the force controller's correction) the same distance is not off the path."""
    model, plan, cell, *_ = job
    traj = plan.trajectory
    _, t0, t1 = pass_window(job, 0)

    def shifted(ex, start, direction, by):
        """The arm where the command puts it, its TCP moved by ``by`` m along ``direction(k)`` from
        the middle of pass 0 on (joint-space shift through the Jacobian's pseudo-inverse)."""
        def arm(t):
            q = frozen(start)(t)
            tau = t - start.stamp
            if not t0 + 0.5 * (t1 - t0) <= tau <= t1:
                return q
            p = tool(job, q)
            k = ex._nearest(0, p)
            return q + np.linalg.pinv(model.jacobian(q)[:3]) @ (by * direction(k))
        return arm

    tol = 0.5 * plan.pass_params.stepover
    across = {}
    for name, direction in (("across", lambda ex, k: np.cross(ex._normals[0][1][k], ex._tangents[0][k])),
                            ("along", lambda ex, k: ex._tangents[0][k]),
                            ("normal", lambda ex, k: ex._normals[0][1][k])):
        ex = make(job)
        start = ex.start(0.0, traj.positions[0])
        sent = drive(ex, 0.0, start.stamp + t1 + 0.2, shifted(ex, start, lambda k, d=direction, ex=ex: d(ex, k),
                                                               1.5 * tol))
        across[name] = (ex.state, sent, ex.reason)
    state, sent, reason = across["across"]
    assert state is JobState.STOPPING and len(sent) == 1 and sent[0].command.kind == "retreat"
    assert "off its path on pass 0" in reason and f"path tolerance {tol * 1e3:.3g} mm" in reason
    assert float(re.search(r"the tool is ([0-9.]+) mm off", reason).group(1)) == pytest.approx(1.5 * tol * 1e3,
                                                                                              rel=0.02)
    for name in ("along", "normal"):
        assert across[name][0] is JobState.RUNNING and not across[name][1], (name, across[name][2])


def test_done_only_once_a_joint_state_shows_the_arm_at_the_plans_end(job) -> None:
    model, plan, *_ = job
    ex = make(job)
    traj = plan.trajectory
    start = ex.start(0.0, traj.positions[0])
    end = start.stamp + traj.duration
    arm = frozen(start)
    drive(ex, 0.0, end, arm)
    # the clock is past the end, but no joint state says where the arm is then
    assert ex.update(end + 0.01) is None and ex.state is JobState.RUNNING
    assert ex.on_joint_state(end + 0.012, arm(end + 0.012), received=end + 0.013) is None
    assert ex.state is JobState.DONE and ex.reason == ""


def test_an_arm_short_of_the_plans_end_fails_the_job(job) -> None:
    """The arm stops in the last retreat (along the normal, where the tool's path on the part stays
    within its tolerance) 5 mm short of the plan's end: not done; failed once settle_time has passed,
    saying how far the tool is from the plan's end."""
    model, plan, *_ = job
    ex = make(job)
    traj = plan.trajectory
    start = ex.start(0.0, traj.positions[0])
    end = start.stamp + traj.duration
    p_end = tool(job, traj.positions[-1])
    ts = np.linspace(end - 1.0, end, 2001)
    t_stop = next(t for t in ts if np.linalg.norm(tool(job, frozen(start)(t)) - p_end) < 5e-3)
    arm = frozen(start, t_stop)
    sent = drive(ex, 0.0, end + ex.settings.settle_time + ex.settings.command_lead + 1.0, arm)
    assert ex.state is JobState.FAILED
    assert "did not reach the plan's end" in ex.reason
    # 5 mm above the part is within the approach distance: the tool retreats from there
    assert [s.command.kind for s in sent] == ["retreat"] and "retreating from pass 1" in ex.reason
    assert float(re.search(r"the tool is ([0-9.]+) mm from it", ex.reason).group(1)) == pytest.approx(5.0, abs=0.05)


def test_joint_states_stamped_an_hour_behind_fail_the_job_naming_the_clock_skew(job) -> None:
    """An arm that never moves, its states stamped 1 h behind the executive's clock: they are all
    before the command's stamp, so none was checked, yet each kept the silence watchdog happy and the
    job ended "done" by the clock. Now they do not count: the job fails within joint_states_timeout
    naming the offset; a new start is refused while the states are skewed."""
    ex = make(job)
    traj = job[1].trajectory
    q0 = traj.positions[0]
    start = ex.start(0.0, q0)
    drive(ex, 0.0, start.stamp + traj.duration + 2.0, lambda t: q0, behind=3600.0)
    assert ex.state is JobState.FAILED
    assert "3600 s behind this node's clock" in ex.reason and "clock skew" in ex.reason
    assert "execution.max_clock_skew" in ex.reason
    t_fail = float(re.search(r"no usable joint states for ([0-9.]+) s", ex.reason).group(1))
    assert t_fail <= ex.settings.joint_states_timeout + 0.01
    with pytest.raises(GrindingSimError, match="cannot start: .*3600 s behind"):
        ex.start(start.stamp + 10.0, q0)


def test_joint_states_stamped_ahead_of_the_clock_do_not_count(job) -> None:
    ex = make(job)
    traj = job[1].trajectory
    start = ex.start(0.0, traj.positions[0])
    drive(ex, 0.0, start.stamp + traj.duration + 2.0, frozen(start), behind=-5.0)
    assert ex.state is JobState.FAILED and "5 s ahead of this node's clock" in ex.reason


def test_a_driver_repeating_its_last_state_is_not_alive(job) -> None:
    """A driver that goes on publishing its last sample (the same stamp) after the arm's side hung:
    the states are consistent with the reference at their stamp and fresh by the receive clock,
    but out of order (not after the last one): the job fails on the silence, naming them."""
    ex = make(job)
    traj = job[1].trajectory
    start = ex.start(0.0, traj.positions[0])
    t_hang = start.stamp + 1.0
    arm = frozen(start)
    drive(ex, 0.0, t_hang, arm)
    for t in np.arange(t_hang, start.stamp + traj.duration + 2.0, 0.004):
        ex.on_joint_state(t_hang, arm(t_hang), received=t)
        ex.update(t)
    assert ex.state is JobState.FAILED
    assert "no usable joint states" in ex.reason and "out of order" in ex.reason


def test_a_sim_clock_that_holds_or_restarts_is_followed(job) -> None:
    """Sim time held (both clocks stand) or restarting (a new dynamics_node: the stamps and the
    receive clock go back together): the states count (not out of order)."""
    ex = make(job)
    q0 = job[1].trajectory.positions[0]
    for _ in range(3):  # sim time held (a lockstep arm waiting for its contact side): repeats are fine
        ex.on_joint_state(0.0, q0, received=0.0)
    assert ex.joint_state_problem == ""
    ex.on_joint_state(500.0, q0, received=500.001)
    ex.on_joint_state(0.5, q0, received=0.501)
    assert ex.joint_state_problem == ""
    ex.start(0.6, q0)
    assert ex.on_joint_state(0.61, q0, received=0.611) is None
    assert ex.update(0.62) is None and ex.state is JobState.RUNNING


def test_a_stop_on_a_late_joint_state_is_stamped_from_this_nodes_clock(job) -> None:
    """A state stamped t that arrives 0.8 s later (an arm lagging behind real time) and is off the
    plan: the stop goes out command_lead ahead of the receive time, not of t (then 0.3 s in the
    past: the arm would have started it part-way, a step)."""
    ex = make(job, tracking_error_limit=0.01, joint_states_timeout=0.0, path_tolerance=10.0)
    traj = job[1].trajectory
    sent = ex.start(0.0, traj.positions[0])
    t = sent.stamp + 1.0
    stop = ex.on_joint_state(t, ex.reference(t)[0] + np.r_[0, 0, 0.02, 0, 0, 0], received=t + 0.8)
    assert stop is not None and ex.state is JobState.STOPPING
    assert stop.stamp == pytest.approx(t + 0.8 + ex.settings.command_lead)
