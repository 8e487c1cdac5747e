"""SampleClock: sensor samples stamped from their counter, against the instants they were taken.

The reference is the simulated truth: sample k is taken at t0 + k / rate (the sensor's clock, drifting
50 ppm against the host's) and arrives after a network delay of 0.1-0.3 ms plus, at times, a stall of
the reading thread (up to 0.3 s, after which the queued samples arrive in a burst).
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.sample_clock import WRAP, SampleClock

RATE = 500.0


def arrivals(n: int, seed: int = 1, drift: float = 50e-6, t0: float = 1000.0) -> tuple[np.ndarray, np.ndarray]:
    """(true sample times (n,), arrival times (n,)) with delays and reader stalls."""
    rng = np.random.default_rng(seed)
    k = np.arange(n)
    taken = t0 + k / (RATE * (1 + drift))
    arrive = taken + rng.uniform(1e-4, 3e-4, n)
    # the reader stalls now and then: everything until it wakes arrives at once
    for start in rng.choice(n - 200, size=n // 400, replace=False):
        wake = taken[start] + rng.uniform(0.02, 0.3)
        stalled = (taken >= taken[start]) & (taken < wake)
        arrive[stalled] = np.maximum(arrive[stalled], wake)
    return taken, np.maximum.accumulate(arrive)


def test_stamps_follow_the_sensor_not_the_reader() -> None:
    taken, arrive = arrivals(30_000)  # 60 s at 500 Hz
    clock = SampleClock(RATE)
    stamps = np.array([clock.stamp(k, a) for k, a in enumerate(arrive)])
    err = stamps - taken
    late = arrive - taken
    settled = slice(int(2 * RATE), None)  # after the first window
    print(f"arrival stamps: up to {late.max() * 1e3:.1f} ms late; sample clock: {np.abs(err[settled]).max() * 1e3:.3f} "
          f"ms (mean {err[settled].mean() * 1e3:.3f} ms)")
    assert late.max() > 0.2  # the reader did stall
    assert np.abs(err[settled]).max() < 1e-3  # 50 ppm over a 2 s window and the minimum delay, 0.1-0.3 ms
    assert np.all(np.diff(stamps[settled]) > 0)
    # the counter's rate from the arrivals, stalls and all (the sensor's 50 ppm drift shows)
    assert clock.measured_rate(arrive[-1]) == pytest.approx(RATE * (1 + 50e-6), rel=2e-5)
    assert SampleClock(RATE).measured_rate(0.0) is None
    # a configured rate 10 % off is seen as such
    wrong = SampleClock(1.1 * RATE)
    for k, a in enumerate(arrive[:10_000]):
        wrong.stamp(k, a)
    assert wrong.measured_rate(arrive[9_999]) == pytest.approx(RATE, rel=1e-3)


def test_wraps_reorders_and_restarts() -> None:
    clock = SampleClock(RATE)
    start = WRAP - 3
    s = [clock.stamp((start + k) % WRAP, 10.0 + k / RATE) for k in range(6)]  # across the wrap
    np.testing.assert_allclose(np.diff(s), 1 / RATE, rtol=1e-9)
    # sample 7 arrives before 6: each gets its own instant
    s7 = clock.stamp((start + 7) % WRAP, 10.0 + 7 / RATE)
    s6 = clock.stamp((start + 6) % WRAP, 10.0 + 7 / RATE + 1e-4)
    assert s6 == pytest.approx(s[0] + 6 / RATE) and s7 == pytest.approx(s[0] + 7 / RATE)
    # a new stream (the counter jumps by hours): the clock starts again from the arrival
    t = clock.stamp(12345, 50.0)
    assert clock.restarts == 1 and t == pytest.approx(50.0)
    with pytest.raises(InputError, match="rate"):
        SampleClock(0.0)
