"""The driver's safety state machine (core/robot/safety.py): latching stops, persisting causes, reset."""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.safety import (
    EMERGENCY_STOP,
    FT_STALE,
    JOINTS_SILENT,
    OVER_FORCE,
    OVER_TORQUE,
    SafetyLimits,
    SafetyMonitor,
)

LIMITS = SafetyLimits(max_force=50.0, max_torque=10.0, ft_timeout=0.1, joint_states_timeout=0.2)
CALM = np.array([1.0, -2.0, 5.0, 0.1, 0.2, -0.3])


def ready(t: float = 0.0) -> SafetyMonitor:
    s = SafetyMonitor(LIMITS)
    s.joint_state(t)
    assert s.wrench(t, CALM) == []
    return s


def test_waiting_until_both_streams_speak_refuses_commands_without_latching() -> None:
    s = SafetyMonitor(LIMITS)
    assert not s.latched and s.refusal() == "no F/T and no joint states received yet"
    assert s.check(100.0) == []  # silence counts only once a stream has spoken
    s.joint_state(0.0)
    assert s.refusal() == "no F/T received yet"
    s.ft_alive(0.0)  # a reading not judged (no orientation yet) still shows the sensor speaks
    assert s.refusal() is None and s.waiting() == []


def test_nothing_latches_while_a_stream_has_not_spoken() -> None:
    """F/T readings without joint states yet (a driver starting): old F/T data does not latch a stop
    that nothing could hold (there is no measured position); commands are refused meanwhile."""
    s = SafetyMonitor(LIMITS)
    s.ft_alive(0.0)
    assert s.check(1.0) == [] and not s.latched and s.refusal() == "no joint states received yet"
    s.joint_state(1.0)
    assert [t.cause for t in s.check(1.0)] == [FT_STALE]


def test_over_force_latches_at_the_reading_and_reset_waits_until_it_is_gone() -> None:
    s = ready()
    (trip,) = s.wrench(1.0, [30.0, 0.0, 45.0, 0.0, 0.0, 0.0])  # |F| = 54.08 N
    assert trip.cause == OVER_FORCE and trip.since == trip.detected == 1.0 and "54.08 N" in trip.message
    assert s.latched and s.refusal().startswith("stopped (latched until ~/reset): over-force: |F| 54.08 N")
    assert s.wrench(1.001, [0.0, 0.0, 60.0, 0, 0, 0]) == []  # latched once
    ok, why = s.reset(1.002)
    assert not ok and "over-force: the newest |F| 60 N is above 50 N" in why and s.latched
    s.wrench(1.003, CALM)
    assert not s.reset(1.004)[0]  # and the joint states have been silent since 0 s
    s.joint_state(1.004)
    assert s.reset(1.004) == (True, "reset: cleared over-force") and not s.latched and s.refusal() is None
    assert s.trips == 1


def test_over_torque_is_its_own_cause() -> None:
    s = ready()
    trips = s.wrench(0.5, [60.0, 0.0, 0.0, 0.0, 11.0, 0.0])
    assert [t.cause for t in trips] == [OVER_FORCE, OVER_TORQUE]
    s.wrench(0.6, [0.0, 0.0, 0.0, 0.0, 10.5, 0.0])
    s.joint_state(0.6)
    ok, why = s.reset(0.6)
    assert not ok and OVER_TORQUE in why and OVER_FORCE not in why


def test_silent_streams_trip_from_the_timeout_expiry() -> None:
    s = ready(0.0)
    s.joint_state(0.05)
    assert s.check(0.1) == []
    (trip,) = s.check(0.1005)  # the F/T's last reading was at 0 s
    assert trip.cause == FT_STALE and trip.since == pytest.approx(0.1) and trip.detected == 0.1005
    assert s.check(0.2) == []  # still silent: latched once
    (trip,) = s.check(0.2505)
    assert trip.cause == JOINTS_SILENT and trip.since == pytest.approx(0.25)
    ok, why = s.reset(0.3)
    assert not ok and FT_STALE in why and JOINTS_SILENT in why
    s.wrench(0.31, CALM)
    s.joint_state(0.31)
    ok, why = s.reset(0.32)
    assert ok and FT_STALE in why and JOINTS_SILENT in why
    assert s.check(0.4) == []  # talking again: no trip
    assert s.check(0.42)[0].cause == FT_STALE  # and silent again: a new trip


def test_readings_are_judged_by_their_sample_time_not_their_arrival() -> None:
    """Issue 22: a reading that waited in a backlog is as old as its sample time says. The driver
    used to stamp readings when it took them, so a stream 0.3 s behind never looked stale, a reset
    0.7 s after the sensor fell silent succeeded, and an over-force's latency counted from its
    arrival (0.3 ms reported for 543 ms)."""
    s = ready(0.0)
    s.joint_state(0.5)
    # a backlog: readings sampled 0.2 s before they are seen, at 0.5 s; within the limit 0.1 s? no
    trips = s.wrenches([0.29, 0.30], np.tile(CALM, (2, 1)), now=0.5)
    assert trips == [] and s.ft_age(0.5) == pytest.approx(0.2)
    (trip,) = s.check(0.5)
    assert trip.cause == FT_STALE and trip.since == pytest.approx(0.4) and trip.detected == 0.5
    assert "0.200 s old (limit ft_timeout 0.1 s)" in trip.message
    ok, why = s.reset(0.5)
    assert not ok and FT_STALE in why  # still stale: the newest reading is 0.2 s old
    s.wrench(0.52, CALM, now=0.525)
    s.joint_state(0.525)
    assert s.reset(0.525)[0]
    # an over-force in the middle of a backlog: judged, latched from its own sample time
    (over,) = s.wrenches([0.60, 0.61, 0.62], [CALM, [0, 0, 80.0, 0, 0, 0], CALM], now=0.65)
    assert over.cause == OVER_FORCE and over.since == 0.61 and over.detected == 0.65
    assert "a reading 0.040 s old" in over.message
    assert s.last_force == pytest.approx(np.linalg.norm(CALM[:3]))  # the state is the newest reading


def test_a_backlog_is_stale_even_while_readings_keep_coming() -> None:
    """Readings arriving every millisecond but sampled 0.15 s earlier: stale (the old driver: never)."""
    s = ready(0.0)
    tripped = []
    for k in range(1, 400):
        now = k * 1e-3
        s.joint_state(now)
        tripped += s.wrenches([max(0.0, now - 0.15)], CALM[None], now=now) + s.check(now)
    assert [t.cause for t in tripped] == [FT_STALE]
    assert tripped[0].detected == pytest.approx(0.101, abs=1e-9)


def test_emergency_stop_latches_until_reset_and_does_not_persist() -> None:
    s = ready()
    (trip,) = s.emergency_stop(2.0)
    assert trip.cause == EMERGENCY_STOP and s.latched
    assert s.emergency_stop(2.1) == []
    s.wrench(2.2, CALM)
    s.joint_state(2.2)
    assert s.check(2.25) == [] and s.latched  # nothing clears it but a reset
    assert s.reset(2.3) == (True, "reset: cleared emergency stop")
    assert s.reset(2.4) == (True, "nothing to reset (not stopped)")


def test_bad_limits_and_wrenches_are_named() -> None:
    with pytest.raises(InputError, match="max_force must be finite and > 0"):
        SafetyLimits(max_force=0.0)
    with pytest.raises(InputError, match="ft_timeout"):
        SafetyLimits(ft_timeout=float("nan"))
    with pytest.raises(InputError, match="6 finite numbers"):
        ready().wrench(0.0, [1.0, 2.0, float("nan"), 0, 0, 0])
