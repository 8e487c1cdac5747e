"""StreamClock and FTReadings against streams written here with known send times and delays.

Each stream is synthetic: record n leaves the sensor at ``c + n / r_true`` on the host's clock
and is taken at that plus a delay chosen by the test, so the true age of every record is known
and the estimate is checked against the bound the module docstring states (no sockets, no clock).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.ft_stream import FTReadings, StreamClock

C = 1234.5  # the unknown offset: the host time of record 0, s


def feed(clock: StreamClock, ns: np.ndarray, delays: np.ndarray, rate: float) -> np.ndarray:
    """Observe records ``ns`` taken after ``delays``; returns their true send times."""
    sent = C + ns / rate
    for n, t in zip(ns, sent + delays, strict=True):
        clock.observe(int(n), float(t))
    return sent


def test_a_backlog_is_dated_by_the_sequence_not_by_its_arrival() -> None:
    """Records that arrive 0.3 s late (a backlog) are dated when they were sent, up to the smallest
    delay seen (the fixed latency): the age the driver reports is the 0.3 s, not 0."""
    rate, d_min = 1000.0, 80e-6
    clock = StreamClock(rate)
    rng = np.random.default_rng(0)
    ns = np.arange(1, 2001)
    delays = d_min + rng.exponential(200e-6, ns.size)
    delays[0] = d_min + 1e-3  # not the promptest: the estimate improves as prompter ones come
    delays[1000:1300] += 0.3  # a backlog of 300 records
    sent = feed(clock, ns, delays, rate)
    est = np.asarray(clock.sample_time(ns))
    smallest = delays.min()  # all 2 s of them are in the 5 s window
    np.testing.assert_allclose(est - sent, smallest, rtol=0, atol=1e-9)
    taken = sent + delays
    age = taken[1200] - clock.sample_time(int(ns[1200]))
    assert age == pytest.approx(delays[1200] - smallest, abs=1e-9) and age > 0.3


def test_the_first_record_is_dated_when_taken_until_a_prompter_one_comes() -> None:
    clock = StreamClock(500.0)
    assert not clock.ready and math.isnan(clock.offset())
    clock.observe(10, 100.0)
    assert clock.ready and clock.sample_time(10) == 100.0
    clock.observe(11, 100.0 + 1 / 500 - 0.001)  # 1 ms prompter than the first
    assert clock.sample_time(10) == pytest.approx(100.0 - 0.001, abs=1e-12)


def test_the_window_forgets_a_prompt_record_after_the_window() -> None:
    """The minimum is over the window: after it, the offset is re-learnt (a clock that drifted)."""
    rate, window = 1000.0, 2.0
    clock = StreamClock(rate, window=window)
    ns = np.arange(0, 5000)
    delays = np.full(ns.size, 0.002)
    delays[100] = 0.0  # one record with no delay at t = 0.1 s
    sent = feed(clock, ns, delays, rate)
    # 4.9 s later the prompt record is out of the window: the estimate is the 2 ms of the others
    assert float(clock.sample_time(int(ns[-1]))) - sent[-1] == pytest.approx(0.002, abs=1e-9)


@pytest.mark.parametrize("e", [1e-4, -1e-4, 5e-3])
def test_a_rate_error_makes_ages_larger_by_at_most_e_times_the_window(e: float) -> None:
    """A sensor at r (1 - e) is dated with the nominal r: ages too large by at most e * window, never
    too small (the bound in the module docstring)."""
    rate, window = 1000.0, 5.0
    true_rate = rate * (1 - e)
    clock = StreamClock(rate, window=window)
    ns = np.arange(0, 20000)
    sent = feed(clock, ns, np.full(ns.size, 1e-4), true_rate)
    err = float(clock.sample_time(int(ns[-1]))) - (sent[-1] + 1e-4)  # estimate - (send + fixed delay)
    assert -(abs(e) * window * 1.01) <= err <= 1e-9


def test_a_wrong_nominal_rate_is_reported() -> None:
    clock = StreamClock(1000.0)
    ns = np.arange(0, 3000)
    feed(clock, ns, np.full(ns.size, 1e-4), 500.0)  # the sensor sends at 500 Hz
    assert clock.measured_rate() == pytest.approx(500.0, rel=1e-9)
    assert "500 Hz, not the nominal 1000 Hz" in str(clock.rate_error)
    good = StreamClock(500.0)
    feed(good, ns, np.full(ns.size, 1e-4), 500.0)
    assert good.rate_error is None


def test_the_measured_rate_ignores_a_busy_reader() -> None:
    """The rate comes from the offset's lower envelope: records taken late (a reader starved for
    0.3 s at the end of the window) do not bias it (the first estimate, records over host time,
    read 971 Hz for a 1 kHz stream on a loaded machine and warned)."""
    clock = StreamClock(1000.0)
    ns = np.arange(0, 4000)
    delays = np.full(ns.size, 1e-4)
    delays[-300:] += np.linspace(0.3, 0.0, 300)  # a backlog drained at the end
    feed(clock, ns, delays, 1000.0)
    assert clock.measured_rate() == pytest.approx(1000.0, rel=1e-6) and clock.rate_error is None
    # a reader starved for 0.5 s (a whole bucket) at the end: still the nominal rate
    starved = StreamClock(1000.0)
    delays[-500:] = 0.5
    feed(starved, ns, delays, 1000.0)
    assert starved.measured_rate() == pytest.approx(1000.0, rel=1e-6)


def test_reset_forgets_the_stream() -> None:
    clock = StreamClock(1000.0)
    clock.observe(5000, 10.0)
    clock.reset()
    assert not clock.ready
    clock.observe(1, 20.0)  # a new stream: numbers restart
    assert clock.sample_time(1) == 20.0


def test_readings_newest_age_and_select() -> None:
    w = np.arange(18.0).reshape(3, 6)
    r = FTReadings(w, np.array([1.0, 1.001, 1.002]), 1.01, np.array([0, 1 << 31, 0]))
    assert len(r) == 3 and r.newest.tolist() == w[2].tolist() and r.newest_time == 1.002
    assert r.age(1.5) == pytest.approx(0.498)
    healthy = r.select(r.status == 0)
    assert healthy is not None and healthy.sample_times.tolist() == [1.0, 1.002]
    assert r.select(np.zeros(3, dtype=bool)) is None


@pytest.mark.parametrize(("kwargs", "named"), [({"rate_hz": 0.0}, "rate_hz"), ({"rate_hz": math.inf}, "rate_hz"),
                                               ({"rate_hz": 1.0, "window": -1.0}, "window")])
def test_bad_arguments(kwargs: dict, named: str) -> None:
    with pytest.raises(InputError, match=named):
        StreamClock(**kwargs)
    with pytest.raises(InputError, match="k >= 1"):
        FTReadings(np.zeros((0, 6)), np.zeros(0), 0.0, np.zeros(0, dtype=np.int64))
