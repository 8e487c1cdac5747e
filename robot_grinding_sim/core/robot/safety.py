"""The hardware driver's safety state machine: what stops the arm, and what lets it go again.

ROS-free: times are seconds on one monotonic clock chosen by the caller; the caller publishes the
hold (one point at the measured position) whenever a method returns new :class:`Trip` s.

Causes (each latches: the arm holds and commands are refused until :meth:`SafetyMonitor.reset`):

- ``over-force``: ``|F|`` of a compensated wrench above ``max_force`` (N);
- ``over-torque``: ``|T|`` of a compensated wrench above ``max_torque`` (N m);
- ``F/T silent``: no F/T reading for longer than ``ft_timeout`` (s), counted from the last reading
  once the first has arrived; the cause starts when the timeout expires;
- ``joint states silent``: likewise for joint states and ``joint_states_timeout``;
- ``emergency stop``: requested (e.g. ``~/emergency_stop`` true); it is a request, not a
  condition, so it persists only until a reset.

Before the first F/T reading and the first joint state the monitor is *waiting*: nothing is latched
(nothing can be held without a measured position) but commands are refused (:meth:`refusal`).

:meth:`SafetyMonitor.reset` fails, naming them, while causes persist: a wrench still over a limit
(the newest reading), a stream still silent. A reset clears the latch and every latched cause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError

__all__ = ["EMERGENCY_STOP", "FT_SILENT", "JOINTS_SILENT", "OVER_FORCE", "OVER_TORQUE", "SafetyLimits",
           "SafetyMonitor", "Trip"]

OVER_FORCE = "over-force"
OVER_TORQUE = "over-torque"
FT_SILENT = "F/T silent"
JOINTS_SILENT = "joint states silent"
EMERGENCY_STOP = "emergency stop"


@dataclass(frozen=True)
class SafetyLimits:
    """Limits of :class:`SafetyMonitor` (SI).

    Attributes:
        max_force: largest ``|F|`` of the compensated wrench, N (> 0).
        max_torque: largest ``|T|`` of the compensated wrench, N m (> 0).
        ft_timeout: longest silence of the F/T sensor, s (> 0).
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
        since: when the cause began (the reading over the limit; the timeout's expiry), s.
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
        self.last_ft: float | None = None
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
        for cause, last, timeout in ((FT_SILENT, self.last_ft, lim.ft_timeout),
                                     (JOINTS_SILENT, self.last_joints, lim.joint_states_timeout)):
            if last is not None and t - last > timeout:
                out.append(f"{cause}: nothing for {t - last:.3f} s (timeout {timeout:g} s)")
        return out

    # -- events --------------------------------------------------------------------------------
    def _latch(self, cause: str, message: str, since: float, t: float) -> list[Trip]:
        if cause in self.causes:
            return []
        trip = Trip(cause, message, since, t)
        self.causes[cause] = trip
        self.trips += 1
        return [trip]

    def wrench(self, t: float, wrench: npt.ArrayLike) -> list[Trip]:
        """A compensated F/T reading (6,) [F T] received at ``t``; returns the new trips."""
        w = np.asarray(wrench, dtype=np.float64).reshape(-1)
        if w.shape != (6,) or not np.isfinite(w).all():
            raise InputError(f"safety: a wrench must be 6 finite numbers, got {wrench!r}")
        self.last_ft = t
        self.last_force = float(np.linalg.norm(w[:3]))
        self.last_torque = float(np.linalg.norm(w[3:]))
        lim, new = self.limits, []
        if self.last_force > lim.max_force:
            new += self._latch(OVER_FORCE, f"|F| {self.last_force:.4g} N above the limit {lim.max_force:g} N", t, t)
        if self.last_torque > lim.max_torque:
            new += self._latch(OVER_TORQUE, f"|T| {self.last_torque:.4g} N m above the limit {lim.max_torque:g} N m",
                               t, t)
        return new

    def ft_alive(self, t: float) -> None:
        """An F/T reading arrived at ``t`` that could not be checked (no orientation yet for the
        compensation): the sensor speaks, its value is not judged."""
        self.last_ft = t

    def joint_state(self, t: float) -> None:
        """A joint state received at ``t``."""
        self.last_joints = t

    def check(self, t: float) -> list[Trip]:
        """The timeouts at ``t``; returns the new trips."""
        lim, new = self.limits, []
        for cause, last, timeout, what in ((FT_SILENT, self.last_ft, lim.ft_timeout, "F/T reading"),
                                           (JOINTS_SILENT, self.last_joints, lim.joint_states_timeout,
                                            "joint state")):
            if last is not None and t - last > timeout:
                new += self._latch(cause, f"no {what} for {t - last:.3f} s (timeout {timeout:g} s)",
                                   last + timeout, t)
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
