"""The simulated arm's step scheduler (core.sim.scheduler) on a fake clock: no ROS, no sleeps.

The arm is a counter of steps (sim time = steps x dt); the clocks are numbers this test moves. What
is checked is the scheduling arithmetic the module docstring states, against counts computed here:
steps per tick from the real-time factor and the carry, the cap per tick, the lockstep wait and its
resumption by the contact side's answer, the start state republished while nothing is heard, the
max_lag catch-up (origin, anchors, the arm's commands shifted), the clock's rate, the contact timeout.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from robot_grinding_sim.core.sim.scheduler import StepScheduler

DT = 1e-3


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeArm:
    """Sim time advanced by the hooks' step; records what the scheduler asks of it."""

    def __init__(self) -> None:
        self.state = SimpleNamespace(t=0.0)
        self.shifts: list[float] = []
        self.wrenches: list[tuple[np.ndarray, str]] = []
        self.cleared = 0

    def shift_commands(self, delta: float) -> None:
        self.shifts.append(delta)

    def set_wrench(self, wrench: np.ndarray, frame: str) -> None:
        self.wrenches.append((wrench, frame))

    def clear_wrench(self) -> None:
        self.cleared += 1


class Hooks:
    def __init__(self, arm: FakeArm, mono: FakeClock, step_cost: float = 0.0) -> None:
        self.arm, self.mono, self.step_cost = arm, mono, step_cost
        self.steps = 0
        self.states: list[float] = []
        self.poses: list[float] = []
        self.clocks: list[float] = []
        self.warnings: list[str] = []
        self.sched: StepScheduler | None = None

    def step(self) -> None:
        self.steps += 1
        self.arm.state.t = self.steps * DT
        self.mono.t += self.step_cost  # a step takes wall time: a machine that cannot keep up

    def publish_state(self) -> None:
        self.states.append(self.arm.state.t)

    def publish_pose(self) -> None:
        self.poses.append(self.arm.state.t)

    def publish_clock(self) -> None:
        self.clocks.append(self.mono.t)

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def make(step_cost: float = 0.0, **kw):
    mono, wall = FakeClock(100.0), FakeClock(1.7e9)
    arm = FakeArm()
    hooks = Hooks(arm, mono, step_cost)
    settings = {k: kw.pop(k) for k in ("rtf", "max_steps", "decimation", "pose_rate", "contact_timeout") if k in kw}
    s = StepScheduler(arm, hooks, DT, monotonic=mono, wall=wall, **kw)
    for k, v in settings.items():
        setattr(s, k, v)
    s.tick()  # the first tick starts the wall clock
    return s, hooks, arm, mono, wall


@pytest.mark.parametrize("rtf", [1.0, 2.0, 0.5])
def test_real_time_factor_sets_the_steps_per_wall_second(rtf: float) -> None:
    s, hooks, _, mono, _ = make(rtf=rtf, max_steps=1000)
    for _ in range(100):
        mono.t += 0.004  # a 250 Hz timer
        s.tick()
    # 0.4 s of wall time: rtf x 400 steps (the carry keeps the fractions: none is lost)
    assert hooks.steps == pytest.approx(rtf * 400, abs=1)


def test_the_remainder_carries_over_to_the_next_tick() -> None:
    s, hooks, _, mono, _ = make(rtf=1.0, max_steps=100)
    per_tick = []
    for _ in range(6):
        mono.t += 0.0015  # 1.5 steps a tick
        before = hooks.steps
        s.tick()
        per_tick.append(hooks.steps - before)
    assert per_tick == [1, 2, 1, 2, 1, 2]
    assert s.carry == pytest.approx(0.0, abs=1e-9)


def test_at_most_max_steps_a_tick_then_sim_time_runs_slower_and_says_so() -> None:
    s, hooks, _, mono, _ = make(rtf=1.0, max_steps=10)
    for _ in range(200):
        mono.t += 0.02  # 20 steps due a tick
        s.tick()
    assert hooks.steps == 200 * 10  # the backlog beyond 10 a tick is dropped, not carried
    assert s.carry == 0.0
    assert len([w for w in hooks.warnings if "20 steps due, 10 done per update" in w]) == 1  # once per 10 s


def test_decimation_pose_rate_and_clock_rate() -> None:
    s, hooks, _, mono, _ = make(rtf=1.0, max_steps=1000, decimation=4, pose_rate=100.0, clock_period=0.01)
    for _ in range(250):
        mono.t += 0.004
        s.tick()
    assert hooks.steps == 1000
    np.testing.assert_allclose(hooks.states, DT * np.arange(4, 1001, 4))  # every 4th step
    np.testing.assert_allclose(hooks.poses, DT * np.arange(1, 1000, 10))  # every 10 ms of sim time
    gaps = np.diff(hooks.clocks)
    assert gaps.min() >= 0.01 - 1e-9 and len(hooks.clocks) == pytest.approx(1.0 / 0.012, abs=2)  # every 3rd tick


def test_lockstep_waits_for_the_contact_side_and_its_answer_resumes_at_once() -> None:
    s, hooks, arm, mono, _ = make(rtf=1.0, max_steps=100, lockstep=True, exchanges=True, exchange_interval=0.002,
                                  wait_for_contact=True)
    mono.t += 0.01
    s.tick()
    assert hooks.steps == 0 and s.stalled  # nothing heard: sim time does not start
    assert hooks.states == [0.0]  # the start state, shown to the contact side
    # the answer for the state at 0 steps on at once: the steps from 0, 1 and 2 ms may use it (no
    # older than exchange_interval), the one from 3 ms waits
    s.model_arrived(0.0, "m0")
    assert hooks.steps == 3 and s.stalled
    assert s.carry == pytest.approx(0.007)  # the rest of the tick's budget is kept for the answer
    s.model_arrived(0.002, "m2")
    assert hooks.steps == 5
    assert s.contact_model() == "m2"  # the newest of a state at or before now (t = 5 ms)
    # a late answer: nothing until it comes, then the budget kept is caught up
    mono.t += 0.2
    s.tick()
    assert hooks.steps == 5
    assert s.carry == pytest.approx(0.1)  # at most one tick's worth (max_steps)
    s.model_arrived(0.2, "m200")
    assert hooks.steps == 5 + 100 and not s.stalled


def test_wait_for_contact_republishes_the_start_state_every_0_1_s() -> None:
    s, hooks, _, mono, _ = make(rtf=1.0, max_steps=100, lockstep=True, exchanges=True, wait_for_contact=True)
    for _ in range(125):  # 0.5 s of 4 ms ticks with no answer
        mono.t += 0.004
        s.tick()
    assert hooks.steps == 0
    assert len(hooks.states) == 5  # at 0.004, 0.108, 0.212, 0.316, 0.420 s: every 0.1 s
    s2, hooks2, *_ = make(rtf=1.0, max_steps=100, lockstep=True, exchanges=True, wait_for_contact=False)
    for _ in range(10):
        s2.monotonic.t += 0.004
        s2.tick()
    assert hooks2.steps == 40  # without wait_for_contact sim time starts alone


def test_no_lockstep_never_waits_and_drops_a_stale_model() -> None:
    s, hooks, _, mono, _ = make(rtf=1.0, max_steps=100, lockstep=False, exchanges=True, contact_timeout=0.005)
    mono.t += 0.01
    s.tick()
    assert hooks.steps == 10 and not s.stalled
    s.model_arrived(0.008, "m8")
    assert s.contact_model() == "m8"  # 2 ms old
    mono.t += 0.004
    s.tick()
    assert s.contact_model() is None  # 14 - 8 = 6 ms old: over the 5 ms timeout


def test_catch_up_beyond_max_lag_moves_the_origin_and_keeps_old_stamps_mapped() -> None:
    s, hooks, arm, mono, wall = make(rtf=1.0, max_steps=100, lockstep=True, exchanges=True, exchange_interval=0.001,
                                     wait_for_contact=False, max_lag=0.05)
    origin0 = s.t_origin
    assert origin0 == wall.t  # sim time starts at the first tick, not when the scheduler was built
    s.model_arrived(origin0 + 0.0, "m0")
    mono.t += 0.001
    wall.t += 0.001
    s.tick()
    assert hooks.steps == 1
    stamp_before = s.sim_now()
    # the contact side is silent for 0.5 s of wall time: sim time stops at 2 ms, the lag grows
    for _ in range(125):
        mono.t += 0.004
        wall.t += 0.004
        s.tick()
    assert hooks.steps == 2 and s.stalled
    # caught up once the lag passed 0.05 s: the origin moved by the wall time not simulated, the
    # arm's commands with it
    assert len(s.anchors) >= 2 and arm.shifts
    assert s.t_origin - origin0 == pytest.approx(sum(arm.shifts), abs=1e-6)
    assert wall.t - s.sim_now() <= 0.05 + 1e-9
    # a stamp made before the move still maps to the sim time it was made at; a new one to now
    # (stamps near 1.7e9 s are 0.24 us apart)
    assert s.to_sim(stamp_before) == pytest.approx(0.001, abs=1e-6)
    assert s.to_sim(s.sim_now()) == pytest.approx(arm.state.t, abs=1e-6)
    # the answer to the state stamped (before the jump) at 2 ms lets the arm go on
    s.model_arrived(origin0 + 0.002, "m2")
    assert s.heard == pytest.approx(0.002, abs=1e-6)
    assert hooks.steps > 2


def test_catch_up_after_a_machine_that_cannot_keep_up() -> None:
    # each step costs 2 ms of wall time: sim time runs at 0.5x; max_lag keeps the stamps with the wall
    s, hooks, arm, mono, wall = make(step_cost=0.002, rtf=1.0, max_steps=5, max_lag=0.1)
    for _ in range(200):
        mono.t += 0.004
        wall.t = 1.7e9 + (mono.t - 100.0)
        s.tick()
    assert arm.shifts and all(d > 0.1 for d in arm.shifts)
    assert wall.t - s.sim_now() <= 0.1 + 1e-9
    assert s.carry == 0.0
    # the skips are said (the first at once; the arm's reference jumps with each)
    skips = [w for w in hooks.warnings if "max_lag 0.1 s: 1 skip(s)" in w]
    assert len(skips) == 1 and f"largest {arm.shifts[0]:.3f} s" in skips[0]


def test_wrenches_apply_from_the_step_after_their_state_in_lockstep_and_expire_without() -> None:
    s, hooks, arm, mono, _ = make(rtf=1.0, max_steps=100, lockstep=True, exchanges=True, exchange_interval=0.0,
                                  wait_for_contact=False)
    w = np.arange(6.0)
    s.wrench_arrived(0.0, w, "tcp")
    # stamp 0: now (t = 0), applied from the step after it
    s.apply_due_wrenches()
    assert arm.wrenches == []
    arm.state.t = 0.001
    s.apply_due_wrenches()
    assert len(arm.wrenches) == 1 and arm.wrenches[0][1] == "tcp"
    s2, _, arm2, *_ = make(rtf=1.0, max_steps=100, lockstep=False, exchanges=True, contact_timeout=0.005)
    s2.wrench_arrived(0.0, w, "tcp")
    s2.apply_due_wrenches()
    assert len(arm2.wrenches) == 1
    arm2.state.t = 0.004
    s2.apply_due_wrenches()
    assert arm2.cleared == 0
    arm2.state.t = 0.0061
    s2.apply_due_wrenches()
    assert arm2.cleared == 1


def test_forget_contact_drops_models_and_wrenches() -> None:
    s, _, arm, *_ = make(rtf=1.0, max_steps=100, lockstep=False, exchanges=True)
    s.model_arrived(0.0, "m0")
    s.wrench_arrived(0.0, np.zeros(6), "tcp")
    s.forget_contact()
    assert s.contact_model() is None
    s.apply_due_wrenches()
    assert arm.wrenches == []


def test_hold_at_is_a_breakpoint_that_keeps_no_backlog() -> None:
    """Sim time stops at hold_at (stamp scale; t_origin 0 here) however much wall time passes, the
    state there is the last stepped, and once cleared sim time runs on at the real-time factor from
    then (the time held is not a backlog to catch up)."""
    s, hooks, arm, mono, _ = make(rtf=1.0, max_steps=1000)
    s.hold_at = 0.0505
    for _ in range(100):
        mono.t += 0.004
        s.tick()
    assert hooks.steps == 50 and arm.state.t == pytest.approx(0.050)
    s.hold_at = float("inf")
    for _ in range(10):
        mono.t += 0.004
        s.tick()
    assert hooks.steps == 50 + 40
