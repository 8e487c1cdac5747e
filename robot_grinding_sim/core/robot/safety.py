"""The hardware driver's safety state machine: what stops the arm, and what lets it go again.

ROS-free: times are seconds on one monotonic clock chosen by the caller; the caller publishes the
hold (one point at the measured position) whenever a method returns new :class:`Trip` s.

F/T readings are judged by their *sample* time (when the sensor took them; for a Net F/T the
estimate of :class:`~robot_grinding_sim.hardware.ft_stream.StreamClock`), not by when the driver
got them: a reading that waited 0.5 s in a socket is 0.5 s old, and an event's latency (a trip's
``detected - since``) counts from the sensor's event.

Causes (each latches: the arm holds and commands are refused until :meth:`SafetyMonitor.reset`):

- ``over-force``: ``|F|`` of a compensated wrench above ``max_force`` (N), any reading of a read;
- ``over-torque``: ``|T|`` of a compensated wrench above ``max_torque`` (N m);
- ``F/T stale``: the newest F/T reading is older than ``ft_timeout`` (s): the sensor fell silent,
  or its data comes late (a backlog); armed by the first reading; the cause starts when the newest
  reading's age passes the limit (its sample time + ``ft_timeout``);
- ``joint states silent``: no joint state received for longer than ``joint_states_timeout`` (s);
- ``emergency stop``: requested (e.g. ``~/emergency_stop`` true); it is a request, not a
  condition, so it persists only until a reset.

Before the first F/T reading and the first joint state the monitor is *waiting*: nothing is latched
(nothing can be held without a measured position) but commands are refused (:meth:`refusal`).

:meth:`SafetyMonitor.reset` fails, naming them, while causes persist: a wrench still over a limit
(the newest reading), the F/T data still stale, joint states still silent. A reset clears the latch
and every latched cause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError

__all__ = ["EMERGENCY_STOP", "FT_STALE", "JOINTS_SILENT", "OVER_FORCE", "OVER_TORQUE", "SafetyLimits",
           "SafetyMonitor", "Trip"]

OVER_FORCE = "over-force"
OVER_TORQUE = "over-torque"
FT_STALE = "F/T stale"
JOINTS_SILENT = "joint states silent"
EMERGENCY_STOP = "emergency stop"


@dataclass(frozen=True)
class SafetyLimits:
    """Limits of :class:`SafetyMonitor` (SI).

    Attributes:
        max_force: largest ``|F|`` of the compensated wrench, N (> 0).
        max_torque: largest ``|T|`` of the compensated wrench, N m (> 0).
        ft_timeout: largest age of the newest F/T reading, s (> 0).
        joint_states_timeout: longest silence of the joint states, s (> 0).
    """

    max_force: float = 50.0
    max_torque: float = 10.0
    ft_timeout: float = 0.1
    joint_states_timeout: float = 0.1

    def __post_init__(self) -> None:
        for name in ("max_force", "max_torque", "ft_timeout", "joint_states_timeout"):
            raw = getattr(self, name)
            try:
                v = float(raw)
            except (TypeError, ValueError):
                v = math.nan
            if not math.isfinite(v) or v <= 0.0:
                raise InputError(f"SafetyLimits {name} must be finite and > 0, got {raw!r}")
            object.__setattr__(self, name, v)


@dataclass(frozen=True)
class Trip:
    """One cause that latched the stop.

    Attributes:
        cause: one of the module's cause names.
        message: what happened, with the value and the limit.
        since: when the cause began (the sample time of the reading over the limit; when the
            newest reading passed the age limit; the timeout's expiry), s.
        detected: when the monitor saw it, s (the hold goes out then).
    """

    cause: str
    message: str
    since: float
    detected: float

    def __str__(self) -> str:
        return f"{self.cause}: {self.message}"


class SafetyMonitor:
    """Latching stop on over-force/torque, silent streams and emergency stops (module docstring)."""

    def __init__(self, limits: SafetyLimits | None = None) -> None:
        self.limits = limits if limits is not None else SafetyLimits()
        self.causes: dict[str, Trip] = {}
        self.last_ft: float | None = None  # sample time of the newest F/T reading
        self.last_joints: float | None = None
        self.last_force = 0.0
        self.last_torque = 0.0
        self.trips = 0  # causes latched so far

    # -- state ---------------------------------------------------------------------------------
    @property
    def latched(self) -> bool:
        """True while the arm must hold (some cause latched and not reset)."""
        return bool(self.causes)

    def waiting(self) -> list[str]:
        """The streams that have not spoken yet ("F/T", "joint states")."""
        return [name for name, t in (("F/T", self.last_ft), ("joint states", self.last_joints)) if t is None]

    def refusal(self) -> str | None:
        """Why a command must be refused now, or None."""
        if self.causes:
            return "stopped (latched until ~/reset): " + "; ".join(str(c) for c in self.causes.values())
        waiting = self.waiting()
        if waiting:
            return f"no {' and no '.join(waiting)} received yet"
        return None

    def persisting(self, t: float) -> list[str]:
        """Conditions that hold now (a reset fails while any does), one line each."""
        lim = self.limits
        out = []
        if self.last_force > lim.max_force:
            out.append(f"{OVER_FORCE}: the newest |F| {self.last_force:.4g} N is above {lim.max_force:g} N")
        if self.last_torque > lim.max_torque:
            out.append(f"{OVER_TORQUE}: the newest |T| {self.last_torque:.4g} N m is above {lim.max_torque:g} N m")
        if self.last_ft is not None and t - self.last_ft > lim.ft_timeout:
            out.append(f"{FT_STALE}: {self._stale(t)}")
        if self.last_joints is not None and t - self.last_joints > lim.joint_states_timeout:
            out.append(f"{JOINTS_SILENT}: nothing for {t - self.last_joints:.3f} s (timeout "
                       f"{lim.joint_states_timeout:g} s)")
        return out

    def ft_age(self, t: float) -> float | None:
        """Age of the newest F/T reading at ``t`` (from its sample time), s; None before any."""
        return None if self.last_ft is None else t - self.last_ft

    def _stale(self, t: float) -> str:
        return (f"the newest F/T reading is {t - self.last_ft:.3f} s old (limit ft_timeout "  # type: ignore[operator]
                f"{self.limits.ft_timeout:g} s): the sensor is silent or its data late")

    # -- events --------------------------------------------------------------------------------
    def _latch(self, cause: str, message: str, since: float, t: float) -> list[Trip]:
        if cause in self.causes:
            return []
        trip = Trip(cause, message, since, t)
        self.causes[cause] = trip
        self.trips += 1
        return [trip]

    def wrench(self, t: float, wrench: npt.ArrayLike, now: float | None = None) -> list[Trip]:
        """A compensated F/T reading (6,) [F T] sampled at ``t``, seen at ``now`` (default ``t``);
        returns the new trips."""
        w = np.asarray(wrench, dtype=np.float64)
        if w.shape != (6,) or not np.isfinite(w).all():
            raise InputError(f"safety: a wrench must be 6 finite numbers, got {wrench!r}")
        return self.wrenches([t], w[None], t if now is None else now)

    def wrenches(self, times: npt.ArrayLike, wrenches: npt.ArrayLike, now: float) -> list[Trip]:
        """Compensated F/T readings (k, 6) sampled at ``times`` (k,), oldest first, seen at ``now``
        (one read's backlog): each is judged; the newest is the state. Returns the new trips (since:
        the first offending reading's sample time)."""
        w = np.asarray(wrenches, dtype=np.float64)
        ts = np.asarray(times, dtype=np.float64).reshape(-1)
        if w.ndim != 2 or w.shape[1:] != (6,) or w.shape[0] != ts.size or ts.size == 0 or not np.isfinite(w).all():
            raise InputError(f"safety: wrenches must be (k, 6) finite numbers with k sample times, got {w.shape} "
                             f"and {ts.size} times" + ("" if np.isfinite(w).all() else " (NaN or infinite values)"))
        newest = float(ts[-1])
        self.last_ft = newest if self.last_ft is None else max(self.last_ft, newest)
        forces, torques = np.linalg.norm(w[:, :3], axis=1), np.linalg.norm(w[:, 3:], axis=1)
        self.last_force, self.last_torque = float(forces[-1]), float(torques[-1])
        lim, new = self.limits, []
        for cause, values, limit, unit in ((OVER_FORCE, forces, lim.max_force, "N"),
                                           (OVER_TORQUE, torques, lim.max_torque, "N m")):
            over = np.flatnonzero(values > limit)
            if over.size:
                i = int(over[0])
                symbol = "|F|" if cause == OVER_FORCE else "|T|"
                age = now - float(ts[i])
                new += self._latch(cause, f"{symbol} {values[i]:.4g} {unit} above the limit {limit:g} {unit}"
                                   + (f" (a reading {age:.3f} s old)" if age >= 0.0005 else ""), float(ts[i]), now)
        return new

    def ft_alive(self, t: float) -> None:
        """An F/T reading sampled at ``t`` that could not be checked (no orientation yet for the
        compensation): the sensor speaks, its value is not judged."""
        self.last_ft = t if self.last_ft is None else max(self.last_ft, t)

    def joint_state(self, t: float) -> None:
        """A joint state received at ``t``."""
        self.last_joints = t

    def check(self, t: float) -> list[Trip]:
        """The F/T data's age and the joint states' silence at ``t``; returns the new trips (none
        while waiting for a stream's first message: commands are refused then, and there is no
        measured position to hold)."""
        lim, new = self.limits, []
        if self.waiting():
            return new
        if self.last_ft is not None and t - self.last_ft > lim.ft_timeout:
            new += self._latch(FT_STALE, self._stale(t), self.last_ft + lim.ft_timeout, t)
        last = self.last_joints
        if last is not None and t - last > lim.joint_states_timeout:
            new += self._latch(JOINTS_SILENT, f"no joint state for {t - last:.3f} s (timeout "
                               f"{lim.joint_states_timeout:g} s)", last + lim.joint_states_timeout, t)
        return new

    def emergency_stop(self, t: float) -> list[Trip]:
        """An emergency stop requested at ``t``; returns the new trip (none if already latched by one)."""
        return self._latch(EMERGENCY_STOP, "requested", t, t)

    def reset(self, t: float) -> tuple[bool, str]:
        """Clear the latch unless a cause persists; returns (done, what happened or why not)."""
        if not self.causes:
            return True, "nothing to reset (not stopped)"
        persisting = self.persisting(t)
        if persisting:
            return False, "cannot reset while " + "; ".join(persisting)
        cleared = ", ".join(self.causes)
        self.causes.clear()
        return True, f"reset: cleared {cleared}"
