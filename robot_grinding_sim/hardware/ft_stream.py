"""F/T readings as a driver takes them off a sensor: the newest, how old it is, and the interface.

:class:`FTReadings` is what one read of any F/T source returns (the Net F/T client's
:meth:`~robot_grinding_sim.hardware.netft.NetFTClient.read_batch`; a topic backend builds one per
message): every reading queued since the previous read, oldest first, each with the host time at
which the sensor *sampled* it, so that a consumer acts on the newest and knows its age.

:class:`StreamClock` estimates those sample times for a sensor that numbers its records on its own
clock (the Net F/T's ``rdt_sequence``), which is not synchronised with the host's.

What the age measures. Record ``n`` of a stream sent at the nominal rate ``r`` leaves the sensor at
``c + n / r`` on the host's clock, for some unknown offset ``c``, and is taken off the socket at
``a_n = c + n / r + d_n``, where ``d_n >= d_min`` is its delay: the wire, the kernel's queue, and
the reader's wake-up and any time it spent descheduled. Each record bounds the offset,
``c + d_min <= a_n - n / r``, with equality for a record that came with the smallest delay. The
estimate is the smallest ``a_n - n / r`` over the last ``window`` seconds of host time, and the
sample time of record ``n`` is ``t_n = min(a - n'/r) + n / r``. So the age ``now - t_n`` is the
time since the sensor sent it, *less the smallest delay seen in the window* (the fixed latency
of the wire and of waking the reader: tens of microseconds on loopback); every delay beyond that
(a backlog in the socket, a reader that fell behind, a network hold-up) is in it.

Its limits. A constant extra latency from the very first record cannot be told from the clock
offset; a delay that starts later (as any backlog does) can, for as long as a prompt record is in
the window: a delay that lasts longer than ``window`` (10 s) becomes the new normal and the ages
shrink back (a stop it caused stays latched; a reset after that long succeeds). A sensor whose true
rate is ``r (1 - e)`` makes ages too large by up to ``e * window`` (50 ppm of crystal drift: 0.5 ms);
a nominal rate off by more than :data:`RATE_TOLERANCE` is reported (:attr:`StreamClock.rate_error`:
e.g. 1000 Hz set for a 500 Hz stream), so an unreported one inflates ages by at most 50 ms.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError

__all__ = ["RATE_TOLERANCE", "FTReadings", "StreamClock"]

FloatArray = npt.NDArray[np.float64]

#: relative difference between the measured and the nominal record rate beyond which
#: :attr:`StreamClock.rate_error` reports it (a rate set wrong, e.g. 1000 Hz for a 500 Hz stream)
RATE_TOLERANCE = 0.005
#: number of buckets the window is kept in (the window's minimum moves in steps of window / this)
_BUCKETS = 10


@dataclass(frozen=True)
class FTReadings:
    """The readings one read took off an F/T sensor, oldest first (k >= 1).

    Attributes:
        wrenches: (k, 6) [Fx Fy Fz Tx Ty Tz] in the sensor frame, N and N m (read-only).
        sample_times: (k,) host time at which the sensor sampled each one, s on the caller's
            monotonic clock (``time.monotonic()``): estimated, see the module docstring.
        taken_at: host time at which the read took them, s (same clock).
        status: (k,) the sensor's status word of each (uint32 as int64; 0 = healthy).
    """

    wrenches: FloatArray
    sample_times: FloatArray
    taken_at: float
    status: npt.NDArray[np.int64]

    def __post_init__(self) -> None:
        k = len(self.sample_times)
        if k == 0 or self.wrenches.shape != (k, 6) or self.status.shape != (k,):
            raise InputError(f"FTReadings: wrenches (k, 6), sample_times (k,) and status (k,) with k >= 1, got "
                             f"{self.wrenches.shape}, {self.sample_times.shape}, {self.status.shape}")

    def __len__(self) -> int:
        return len(self.sample_times)

    @property
    def newest(self) -> FloatArray:
        """(6,) the newest reading."""
        return self.wrenches[-1]

    @property
    def newest_time(self) -> float:
        """Sample time of the newest reading, s."""
        return float(self.sample_times[-1])

    def age(self, now: float) -> float:
        """How old the newest reading is at host time ``now``, s."""
        return now - self.newest_time

    def select(self, keep: npt.NDArray[np.bool_]) -> FTReadings | None:
        """The readings where ``keep`` (k,) is true, or None if none is."""
        if keep.all():
            return self
        if not keep.any():
            return None
        return FTReadings(self.wrenches[keep], self.sample_times[keep], self.taken_at, self.status[keep])


class StreamClock:
    """Host sample times of a periodic stream's numbered records (see the module docstring).

    Feed it the newest record of every read (:meth:`observe`), then ask :meth:`sample_time` for
    any record's number. Record numbers are unwrapped integers (the caller unwraps a uint32).

    Args:
        rate_hz: the stream's nominal record rate, Hz (> 0).
        window: how much host time the offset's minimum is taken over, s (> 0).
    """

    def __init__(self, rate_hz: float, window: float = 10.0) -> None:
        r, w = float(rate_hz), float(window)
        if not math.isfinite(r) or r <= 0.0:
            raise InputError(f"StreamClock rate_hz must be finite and > 0 Hz, got {rate_hz!r}")
        if not math.isfinite(w) or w <= 0.0:
            raise InputError(f"StreamClock window must be finite and > 0 s, got {window!r}")
        self.rate_hz, self.window = r, w
        self.period = 1.0 / r
        self._bucket = w / _BUCKETS
        # (bucket index, smallest a_n - n / r in it, the a_n of that smallest)
        self._mins: collections.deque[tuple[int, float, float]] = collections.deque()
        self._last: tuple[int, float] | None = None

    def reset(self) -> None:
        """Forget everything (a new stream: its numbers restart)."""
        self._mins.clear()
        self._last = None

    @property
    def ready(self) -> bool:
        """True once a record has been observed."""
        return self._last is not None

    def observe(self, n: int, taken_at: float) -> None:
        """Record number ``n`` (unwrapped) was taken off the transport at host time ``taken_at``, s."""
        offset = taken_at - n * self.period
        b = int(math.floor(taken_at / self._bucket))
        mins = self._mins
        if mins and mins[-1][0] == b:
            if offset < mins[-1][1]:
                mins[-1] = (b, offset, taken_at)
        else:
            mins.append((b, offset, taken_at))
        while mins and mins[0][0] <= b - _BUCKETS:
            mins.popleft()
        self._last = (n, taken_at)

    def offset(self) -> float:
        """The clock offset estimate ``min(a_n - n / r)`` over the window, s (NaN before any record)."""
        if not self._mins:
            return math.nan
        return min(m[1] for m in self._mins)

    def sample_time(self, n: int | npt.ArrayLike) -> float | FloatArray:
        """Host sample time(s) of record number(s) ``n`` (unwrapped), s (NaN before any record)."""
        if isinstance(n, (int, np.integer)):
            return self.offset() + int(n) * self.period
        return self.offset() + np.asarray(n, dtype=np.float64) * self.period

    def measured_rate(self) -> float:
        """The stream's record rate on the host's clock, Hz, from the drift of the offset's lower
        envelope: the promptest record of the window's older half against that of its newer half
        (a busy reader's delays do not bias it unless it was late for half a window); NaN until
        those are a second apart. A stream at ``r (1 - e)`` drifts by ``e`` s per s:
        ``rate = r (1 - drift)``."""
        mins = list(self._mins)
        if len(mins) < 2:
            return math.nan
        half = len(mins) // 2
        _, o0, a0 = min(mins[:half], key=lambda m: m[1])
        _, o1, a1 = min(mins[half:], key=lambda m: m[1])
        if a1 - a0 < 1.0:
            return math.nan
        return self.rate_hz * (1.0 - (o1 - o0) / (a1 - a0))

    @property
    def rate_error(self) -> str | None:
        """Why the nominal rate looks wrong (measured vs nominal beyond :data:`RATE_TOLERANCE`), or None."""
        measured = self.measured_rate()
        if not math.isfinite(measured) or abs(measured / self.rate_hz - 1.0) <= RATE_TOLERANCE:
            return None
        return (f"records arrive at {measured:.6g} Hz, not the nominal {self.rate_hz:g} Hz: the readings' ages "
                "are wrong (set the sensor's RDT output rate as ft_rate)")
