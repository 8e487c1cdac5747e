"""Time stamps of a sensor's samples from its own sample counter (no ROS).

A Net F/T's RDT record carries no time, only ``ft_sequence``, the sensor's internal sample number,
which counts at a fixed rate. A driver that stamps a reading when it reads the datagram stamps the
delay too: on a busy host the reader thread sleeps, datagrams wait in the socket buffer and then
arrive in a burst, all stamped late (tens to hundreds of ms), so a measured force lines up with the
wrong joint state or plan time. :class:`SampleClock` stamps sample ``k`` at ``offset + k / rate``,
``offset`` being the smallest ``arrival - k / rate`` over the last ``window`` seconds: delays only
add, so the earliest-arriving sample of the window fixes the sensor clock against the host's (the
minimum-delay filter of network time synchronisation); the window lets it follow the two clocks'
drift. The counter is a uint32 that wraps; a jump of more than ``max_jump`` s (the sensor
restarted, a new stream) starts afresh.
"""

from __future__ import annotations

import math
from collections import deque

from robot_grinding_sim.core.errors import InputError

#: the counter's modulus (uint32)
WRAP = 2**32


class SampleClock:
    """Stamps (s, the host's clock) of samples numbered by a counter that runs at ``rate`` Hz.

    Args:
        rate: the counter's rate, Hz (> 0).
        window: seconds of arrivals the offset is the minimum over.
        max_jump: a counter step longer than this (s), forwards or backwards, restarts the clock.
    """

    def __init__(self, rate: float, window: float = 2.0, max_jump: float = 1.0) -> None:
        if not (math.isfinite(rate) and rate > 0.0):
            raise InputError(f"SampleClock rate must be a positive number of Hz, got {rate!r}")
        if not (math.isfinite(window) and window > 0.0):
            raise InputError(f"SampleClock window must be a positive number of seconds, got {window!r}")
        self.rate = float(rate)
        self.window = float(window)
        self.max_jump = float(max_jump)
        self.restarts = 0
        self._last: int | None = None  # the counter's last value
        self._k = 0  # samples since the first, unwrapped
        # (arrival, arrival - k / rate) with increasing second values: the window's minimum first
        self._mins: deque[tuple[float, float]] = deque()
        self._start: float | None = None  # arrival of the first sample since a restart
        self._ref: tuple[float, int, float] | None = None  # (arrival, k, offset) once a window has passed

    def stamp(self, sequence: int, arrival: float) -> float:
        """The time of sample ``sequence`` (uint32) that arrived at ``arrival`` (s, host clock)."""
        seq = int(sequence) % WRAP
        if self._last is None:
            k = self._restart(seq)
        else:
            step = (seq - self._last) % WRAP
            if step >= WRAP // 2:
                step -= WRAP  # an older sample arriving after a newer one (reordered)
            if abs(step) > self.max_jump * self.rate:
                self.restarts += 1
                k = self._restart(seq)
            else:
                k = self._k + step
                if step > 0:
                    self._k, self._last = k, seq
        if self._start is None:
            self._start = arrival
        x = arrival - k / self.rate
        mins = self._mins
        while mins and mins[-1][1] >= x:
            mins.pop()
        mins.append((arrival, x))
        offset = self._offset(arrival)
        if self._ref is None and arrival - self._start >= self.window:
            self._ref = (arrival, self._k, offset)
        return offset + k / self.rate

    def _restart(self, seq: int) -> int:
        self._mins.clear()
        self._last, self._k = seq, 0
        self._start = self._ref = None
        return 0

    def measured_rate(self, arrival: float, min_span: float = 5.0) -> float | None:
        """The counter's rate as the arrivals show it (Hz), from the drift of the offset (the window's
        minimum delay, so the reader's stalls do not count) over ``min_span`` s after the first window
        (else None): a configured ``rate`` far from it stamps nonsense (the host's and the sensor's
        clocks agree to well under 1 %)."""
        if self._ref is None:
            return None
        t_ref, k_ref, off_ref = self._ref
        if arrival - t_ref < min_span or self._k == k_ref:
            return None
        slope = (self._offset(arrival) - off_ref) / (self._k - k_ref)  # 1 / true rate - 1 / rate
        return 1.0 / (slope + 1.0 / self.rate)

    def _offset(self, now: float) -> float:
        mins = self._mins
        while len(mins) > 1 and mins[0][0] < now - self.window:
            mins.popleft()
        return mins[0][1]
