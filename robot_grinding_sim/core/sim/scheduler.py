"""The simulated arm's step scheduler: wall-clock ticks, lockstep with a contact side, stamps.

dynamics_node (and anything else that runs an :class:`~robot_grinding_sim.core.robot.arm_sim.ArmSimulator`
against the wall clock with a contact side behind a transport) calls :meth:`StepScheduler.tick` from
a steady timer and hands it what the contact side sends (:meth:`StepScheduler.model_arrived`,
:meth:`StepScheduler.wrench_arrived`); the scheduler decides how many steps of ``dt`` to take and
when to publish, and calls the caller's :class:`SchedulerHooks` to take them and to publish.

Timing: each tick advances as many steps as ``real_time_factor`` x the wall time elapsed since the
last tick allows; the remainder carries over to the next tick; at most ``max_steps`` a tick (then
the carry is dropped and sim time runs slower than asked: a warning, at most every 10 s, once the
start-up backlog is past). The first tick only starts the wall clock. The clock is published after
a tick's steps, at most once per ``clock_period`` of wall time; the joint state every
``decimation``-th step; the pose every ``1 / pose_rate`` s of sim time. Sim time running slower
than ``real_time_factor`` over a 10 s window is warned about (in lockstep it shows there, not as a
backlog).

Lockstep (``lockstep`` and a contact side that answers, ``exchanges``): a step from sim time t
waits until the contact side has answered for a state no older than t - ``exchange_interval``
(with ``wait_for_contact``: until it has answered at all; the start state is republished every
:data:`START_STATE_PERIOD` s until then). While it waits the tick's budget is kept (at most one
tick's worth), and the answer it waited for resumes the stepping at once (not at the next tick).
Without lockstep a contact model or wrench not renewed for ``contact_timeout`` s of sim time is
dropped.

Stamps: a state at sim time t is stamped ``t_origin + t``. ``max_lag`` > 0 (wall-clock stamps)
keeps them with the wall clock: after a tick, time not simulated (waiting for the contact side, a
machine that cannot keep up) is skipped once sim time lags the wall clock by more than ``max_lag``:
``t_origin`` moves forward, the arm's commands keep their wall-clock times
(:meth:`~robot_grinding_sim.core.robot.arm_sim.ArmSimulator.shift_commands`), and each origin is
kept with the first stamp it made (:attr:`StepScheduler.anchors`), so a stamp made before a move
(echoed by the contact side) still maps to the sim time it was made at (:meth:`StepScheduler.to_sim`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

__all__ = ["ANCHORS_KEPT", "START_STATE_PERIOD", "SchedulerHooks", "SimulatedArm", "StepScheduler"]

_EPS = 1e-9
#: origins of the stamps kept with max_lag (older ones: stamps of states long answered)
ANCHORS_KEPT = 2000
#: while nothing has been heard from the contact side (wait_for_contact): the start state is
#: republished this often, s of wall time
START_STATE_PERIOD = 0.1
#: at most one "cannot keep up" / "waiting" warning per this many seconds of wall time
WARN_PERIOD = 10.0
#: the "waiting for the contact side" warning only after this long without a step, s
WAIT_WARN_AFTER = 5.0


class SimulatedArm(Protocol):
    """What the scheduler needs of the arm (an ArmSimulator has it)."""

    state: Any  # .t: sim time of the current state, s

    def shift_commands(self, delta: float) -> None: ...

    def set_wrench(self, wrench: Any, frame: str) -> None: ...

    def clear_wrench(self) -> None: ...


class SchedulerHooks(Protocol):
    """What the caller does when the scheduler says so."""

    def step(self) -> None:
        """Take one step of ``dt`` (the arm with its contact)."""

    def publish_state(self) -> None:
        """Publish the current state (joint state), stamped :meth:`StepScheduler.sim_now`."""

    def publish_pose(self) -> None:
        """Publish the tool pose and the reference's inverse dynamics."""

    def publish_clock(self) -> None:
        """Publish the clock (sim time on the stamp scale)."""

    def warn(self, text: str) -> None:
        """Log a warning."""


class StepScheduler:
    """When the simulated arm steps and publishes (see the module docstring).

    Args:
        arm: the simulated arm (its ``state.t`` is sim time, s).
        hooks: the caller's step and outputs.
        dt: the step, s of sim time (> 0).
        t_origin: stamp of sim time 0, s (0 when the caller owns the clock; the wall time at start
            for wall-clock stamps).
        lockstep: steps wait for the contact side (and wrenches apply from the step after the
            state they were computed at); without it, contact older than ``contact_timeout`` is dropped.
        exchanges: a contact side answers over a transport (coupling model or force): lockstep waits for it.
        exchange_interval: the oldest contact answer a step may use in lockstep, s of sim time (>= 0).
        wait_for_contact: in lockstep, sim time starts only once the contact side has answered.
        max_lag: keep the stamps within this much of the wall clock, s (0: off).
        clock_period: the clock is published at most once per this, s of wall time.
        monotonic: the steady clock of the ticks, s.
        wall: the wall clock of the stamps (max_lag), s.

    Settings the caller may change between ticks (a node's run-time parameters): :attr:`rtf`
    (real-time factor, sim s per wall s), :attr:`max_steps` (at most this many steps a tick),
    :attr:`decimation` (the state is published every this many steps), :attr:`pose_rate` (the pose
    this often, Hz of sim time; 0: never), :attr:`contact_timeout` (s of sim time; 0: never),
    :attr:`hold_at` (a breakpoint, s on the stamp scale; inf: never).
    """

    rtf: float = 1.0
    #: a breakpoint: no step takes sim time past this stamp (s, ``t_origin`` + sim time); inf: never.
    #: The budget is not kept while held (the hold is asked for: it is not a backlog to catch up)
    hold_at: float = math.inf
    max_steps: int = 100
    decimation: int = 1
    pose_rate: float = 0.0
    contact_timeout: float = 0.0

    def __init__(self, arm: SimulatedArm, hooks: SchedulerHooks, dt: float, *, t_origin: float = 0.0,
                 lockstep: bool = False, exchanges: bool = False, exchange_interval: float = 0.0,
                 wait_for_contact: bool = True, max_lag: float = 0.0, clock_period: float = 0.01,
                 monotonic: Callable[[], float], wall: Callable[[], float]) -> None:
        self.arm, self.hooks, self.dt = arm, hooks, float(dt)
        self.lockstep, self.exchanges = bool(lockstep), bool(exchanges)
        self.interval = float(exchange_interval)
        self.wait_for_contact = bool(wait_for_contact)
        self.max_lag = float(max_lag)
        self.clock_period = float(clock_period)
        self.monotonic, self.wall = monotonic, wall
        self.t_origin = float(t_origin)
        #: (first stamp, origin) of each origin the stamps had (max_lag moves it), oldest first
        self.anchors: list[tuple[float, float]] = [(-math.inf, self.t_origin)]
        self.step_count = 0
        self.carry = 0.0  # sim time owed to the next tick, s
        self.last_tick: float | None = None  # monotonic time of the last tick (None: not started)
        #: lockstep: the last tick stopped to wait for the contact side
        self.stalled = False
        #: sim time of the newest state the contact side has answered for
        self.heard = -math.inf
        self._models: list[tuple[float, Any]] = []  # (sim time of its state, model), by time
        self._pending: list[tuple[float, int, np.ndarray, str]] = []  # (apply time, n, wrench, frame)
        self._contact_t: float | None = None  # when the held wrench was last renewed, sim time
        self._next_pose_t = 0.0
        self._clock_at = -math.inf  # monotonic time the clock was last published
        self._first_state_at = -math.inf  # monotonic time the start state was last republished
        self._lag_warned = 0.0
        self._skip_warned = -math.inf
        self._skipped = (0, 0.0, 0.0)  # skips since the last warning: count, total s, largest s
        self._wait_warned = 0.0
        self._last_progress = monotonic()
        self._rate_window: tuple[float, float] | None = None  # (monotonic, sim time) where the rate check began

    # -- time ---------------------------------------------------------------------------------------
    def sim_now(self) -> float:
        """The current state's stamp, s (``t_origin`` + sim time)."""
        return self.t_origin + self.arm.state.t

    def to_sim(self, stamp: float) -> float:
        """Sim time of a stamp this scheduler made (a state's, echoed by the contact side), s."""
        i = bisect.bisect_right(self.anchors, stamp + _EPS, key=lambda a: a[0]) - 1
        return stamp - self.anchors[max(i, 0)][1]

    def publish_clock(self) -> None:
        """Publish the clock now (and count the clock period from now)."""
        self._clock_at = self.monotonic()
        self.hooks.publish_clock()

    # -- the contact side ---------------------------------------------------------------------------
    def waiting(self) -> bool:
        """Lockstep: the contact side has not answered for a recent enough state yet (or, with
        ``wait_for_contact``, not at all)."""
        if not (self.lockstep and self.exchanges):
            return False
        if self.heard == -math.inf:
            return self.wait_for_contact
        return self.heard < self.arm.state.t - self.interval - _EPS

    def model_arrived(self, stamp: float, model: Any) -> None:
        """A contact model computed at the state stamped ``stamp`` (s); steps on if it was waited for."""
        t = self.to_sim(stamp)
        bisect.insort(self._models, (t, model), key=lambda e: e[0])
        self.heard = max(self.heard, t)
        self.resume()

    def wrench_arrived(self, stamp: float, wrench: np.ndarray, frame: str) -> None:
        """A contact wrench (6,) in ``frame`` computed at the state stamped ``stamp`` (0: now), s:
        applied from that state on (lockstep: from the step after it)."""
        t_state = self.arm.state.t if stamp == 0.0 else self.to_sim(stamp)
        apply_t = max(t_state + (self.dt if self.lockstep else 0.0), self.arm.state.t)
        bisect.insort(self._pending, (apply_t, len(self._pending), wrench, frame), key=lambda e: e[0])
        self.heard = max(self.heard, t_state)
        self.resume()

    def contact_model(self) -> Any | None:
        """The newest model of a state at or before now (older ones are dropped); None if there is
        none or (without lockstep) it is older than ``contact_timeout`` > 0 s of sim time."""
        t, timeout = self.arm.state.t, self.contact_timeout
        k = bisect.bisect_right(self._models, t + _EPS, key=lambda e: e[0])
        if k == 0:
            return None
        t_m, model = self._models[k - 1]
        del self._models[: k - 1]
        if not self.lockstep and timeout > 0 and t - t_m > timeout:
            return None
        return model

    def apply_due_wrenches(self) -> None:
        """Set the wrenches due by now on the arm; without lockstep clear one not renewed for
        ``contact_timeout`` > 0 s of sim time."""
        t, timeout = self.arm.state.t, self.contact_timeout
        while self._pending and self._pending[0][0] <= t + 1e-12:
            _, _, w, frame = self._pending.pop(0)
            self.arm.set_wrench(w, frame)
            self._contact_t = t
        if not self.lockstep and self._contact_t is not None and timeout > 0 and t - self._contact_t > timeout:
            self.arm.clear_wrench()
            self._contact_t = None

    def forget_contact(self) -> None:
        """Drop every model and wrench received (a reset of the arm)."""
        self._models.clear()
        self._pending.clear()

    # -- stepping -----------------------------------------------------------------------------------
    def tick(self) -> None:
        """One timer tick: the steps due since the last (see the module docstring), then the catch-up."""
        try:
            self._advance()
        finally:
            self.catch_up()  # after the steps: only the time they could not simulate is skipped

    def resume(self) -> None:
        """Lockstep: step on at once when the answer the arm waited for arrives (not at the next
        tick: at 1 ms steps a 250 Hz timer alone would cap sim time at a few steps per tick)."""
        if self.stalled and not self.waiting():
            self.stalled = False
            self.tick()

    def _advance(self) -> None:
        rtf, max_steps, decimation, pose_rate = self.rtf, self.max_steps, self.decimation, self.pose_rate
        now = self.monotonic()
        if self.last_tick is None:
            self.last_tick = now
            if self.max_lag > 0.0 and self.step_count == 0:
                # wall-clock stamps: sim time starts now, not when the caller was built (its warm-up
                # and its executor's start would otherwise be a lag kept for good)
                self.t_origin = self.wall() - self.arm.state.t
                self.anchors = [(-math.inf, self.t_origin)]
            return
        budget = self.carry + (now - self.last_tick) * rtf
        self.last_tick = now
        steps = int(budget / self.dt + 1e-9)
        if steps > max_steps:
            # (the first ticks after start-up may find a backlog: executor start, discovery)
            if now - self._lag_warned > WARN_PERIOD and self.step_count > 10 * max_steps:
                self._lag_warned = now
                self.hooks.warn(f"cannot keep up: {steps} steps due, {max_steps} done per update; sim time runs "
                                f"slower than real_time_factor {rtf:g}")
            steps, self.carry = max_steps, 0.0
        else:
            self.carry = budget - steps * self.dt
        done = 0
        if self.heard == -math.inf and self.waiting() and now - self._first_state_at > START_STATE_PERIOD:
            # nothing computed yet: show the contact side the first state until it answers
            self._first_state_at = now
            self.hooks.publish_state()
            self.publish_clock()
        for k in range(steps):
            if self.sim_now() + self.dt > self.hold_at + _EPS:
                self.carry = 0.0
                break
            if self.waiting():
                # waiting for the contact side: keep the budget (its answer resumes the stepping at
                # once and a short wait is caught up), at most one tick's worth of steps
                self.carry = min((steps - k) * self.dt + self.carry, max_steps * self.dt)
                self.stalled = True
                if now - self._wait_warned > WARN_PERIOD and now - self._last_progress > WAIT_WARN_AFTER:
                    self._wait_warned = now
                    self.hooks.warn(
                        f"waiting for the contact side: sim time {self.sim_now():.3f} s, " + (
                            f"its newest answer is for {self.heard:.3f} s of sim time" if self.heard > -math.inf
                            else "no answer yet (collision_node and contact_solver_node running? "
                                 "wait_for_contact:=false runs the arm alone)"))
                break
            self.hooks.step()
            done += 1
            self.step_count += 1
            if self.step_count % decimation == 0:
                self.hooks.publish_state()
            t = self.arm.state.t
            if pose_rate > 0 and t >= self._next_pose_t - 1e-12:
                self._next_pose_t = t + 1.0 / pose_rate
                self.hooks.publish_pose()
        if done:
            self._last_progress = now
            self._check_rate(now, rtf)
        if now - self._clock_at >= self.clock_period:
            # the clock at most at clock_period: every node of a graph listens to it
            self.publish_clock()

    def _check_rate(self, now: float, rtf: float) -> None:
        """Warn (every ~10 s of wall time) when sim time ran slower than ``rtf`` asks: in lockstep
        the arm waits for the contact side, so falling behind shows here, not as a backlog of steps."""
        t = self.arm.state.t
        if self._rate_window is None or t < self._rate_window[1]:
            self._rate_window = (now, t)
            return
        wall = now - self._rate_window[0]
        if wall < WARN_PERIOD:
            return
        achieved = (t - self._rate_window[1]) / wall
        self._rate_window = (now, t)
        if achieved < 0.95 * rtf and self.step_count > 1000:
            why = " (lockstep: each step waits for the contact side's model)" if self.lockstep else ""
            self.hooks.warn(f"cannot keep up: sim time ran at {achieved:.2f}x real time over the last {wall:.0f} s, "
                            f"real_time_factor {rtf:g} asked{why}")

    def catch_up(self) -> None:
        """max_lag: skip the time not simulated once sim time lags the wall clock by more than max_lag."""
        if self.max_lag <= 0.0:
            return
        wall = self.wall()
        if wall - self.sim_now() <= self.max_lag:
            return
        delta = wall - self.arm.state.t - self.t_origin
        self.t_origin += delta
        # the commands keep their wall-clock times (as a controller's trajectory does): the one
        # being followed, and one pending, start delta earlier in sim time
        self.arm.shift_commands(delta)
        # skipped, so not simulated later: the next tick's budget starts now
        self.carry = 0.0
        if self.last_tick is not None:
            self.last_tick = self.monotonic()
        self.anchors.append((wall, self.t_origin))
        del self.anchors[:-ANCHORS_KEPT]
        # said (at most every WARN_PERIOD): a skip jolts the arm (its reference jumps along the
        # trajectory), which a supervisor downstream may take for the arm leaving its path
        n, total, largest = self._skipped
        self._skipped = n + 1, total + delta, max(largest, delta)
        now = self.monotonic()
        if now - self._skip_warned >= WARN_PERIOD:
            self._skip_warned = now
            n, total, largest = self._skipped
            self.hooks.warn(f"sim time lagged the wall clock by more than max_lag {self.max_lag:g} s: {n} skip(s) "
                            f"of {total:.3f} s (largest {largest:.3f} s) since the last warning; the reference "
                            "jumped as far along the trajectory being followed")
            self._skipped = (0, 0.0, 0.0)
