"""The filter of the force comparisons (``grinding compare/report --lowpass --notch --decimate``).

ROS-free; :class:`ForceFilter` acts on a :class:`~robot_grinding_sim.core.record.bag.WrenchSeries`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import WrenchSeries


def median_period(t: np.ndarray) -> float:
    """Median of the positive sample intervals of times ``t`` (s); ``inf`` with fewer than two distinct times."""
    d = np.diff(t)
    d = d[d > 0]
    return float(np.median(d)) if d.size else math.inf


@dataclass(frozen=True)
class ForceFilter:
    """The filter applied to each run's wrench before comparing (``--lowpass/--notch/--decimate``).

    Each series is first put on a uniform grid of its median sample period (linear), then filtered
    forward and backward (zero phase: the filter shifts neither run, so the lag stays the runs'):
    notches at ``notch`` Hz (second order, quality factor :attr:`NOTCH_Q`: a belt's or a spindle's
    vibration), a second-order Butterworth low-pass at ``lowpass`` Hz, then every ``decimate``-th
    sample kept (with no ``lowpass``, an anti-aliasing low-pass at 0.4 of the decimated rate first).

    Attributes:
        lowpass: cut-off, Hz (None: none). notch: centre frequencies, Hz. decimate: keep 1 of N (1: all).
    """

    lowpass: float | None = None
    notch: tuple[float, ...] = ()
    decimate: int = 1

    NOTCH_Q = 10.0

    def check(self) -> ForceFilter:
        if self.lowpass is not None and not (math.isfinite(self.lowpass) and self.lowpass > 0.0):
            raise InputError(f"--lowpass {self.lowpass!r}: a cut-off in Hz > 0")
        for f in self.notch:
            if not (math.isfinite(f) and f > 0.0):
                raise InputError(f"--notch {f!r}: a frequency in Hz > 0")
        if int(self.decimate) != self.decimate or self.decimate < 1:
            raise InputError(f"--decimate {self.decimate!r}: an integer >= 1")
        return self

    @property
    def active(self) -> bool:
        return self.lowpass is not None or bool(self.notch) or self.decimate > 1

    def describe(self) -> str:
        """The filter in words (the figures and the JSON state it)."""
        if not self.active:
            return "none"
        parts = [f"notch {', '.join(f'{f:g}' for f in self.notch)} Hz (Q {self.NOTCH_Q:g})"] if self.notch else []
        if self.lowpass is not None:
            parts.append(f"low-pass {self.lowpass:g} Hz (Butterworth 2nd order)")
        if self.decimate > 1:
            parts.append(f"decimated 1:{self.decimate}" + ("" if self.lowpass is not None else " (anti-alias low-pass "
                                                           "0.4 of the new rate)"))
        return ", ".join(parts) + "; zero phase"

    def apply(self, series: WrenchSeries) -> WrenchSeries:
        """The series filtered (a new WrenchSeries on a uniform grid); unchanged when inactive.

        Raises:
            InputError: a frequency at or above the series' Nyquist frequency, too few samples.
        """
        from dataclasses import replace

        from scipy.signal import butter, filtfilt, iirnotch

        if not self.active:
            return series
        dt = median_period(series.t)
        if not math.isfinite(dt) or len(series) < 16:
            raise InputError(f"topic {series.topic} in bag {series.bag}: too few samples to filter ({len(series)})")
        fs = 1.0 / dt
        n = int(math.floor((series.t[-1] - series.t[0]) / dt)) + 1
        t = series.t[0] + dt * np.arange(n)
        y = np.stack([np.interp(t, series.t, c) for c in np.hstack([series.force, series.torque]).T])
        what = f"topic {series.topic} in bag {series.bag} ({fs:.6g} Hz)"
        for f0 in self.notch:
            if f0 >= 0.5 * fs:
                raise InputError(f"--notch {f0:g} Hz: at or above the Nyquist frequency of {what}")
            b, a = iirnotch(f0, self.NOTCH_Q, fs)
            y = filtfilt(b, a, y, axis=1)
        cut = self.lowpass if self.lowpass is not None else (0.4 * fs / self.decimate if self.decimate > 1 else None)
        if cut is not None:
            if cut >= 0.5 * fs:
                raise InputError(f"--lowpass {cut:g} Hz: at or above the Nyquist frequency of {what}")
            b, a = butter(2, cut / (0.5 * fs))
            y = filtfilt(b, a, y, axis=1)
        k = int(self.decimate)
        t, y = t[::k], y[:, ::k]
        return replace(series, t=t, force=y[:3].T.copy(), torque=y[3:].T.copy(),
                       t_log=np.interp(t, series.t, series.t_log))
