"""F/T sensors behind one interface: what a driver asks of a sensor, and the registry of brands.

A backend (:class:`FTBackend`) is one way of getting raw F/T readings: a device protocol (the ATI
Net F/T's RDT, :mod:`robot_grinding_sim.hardware.netft_backend`) or a ROS topic
(:mod:`robot_grinding_sim.ros.ft_topic`, on the ROS side). It delivers every reading as
:class:`~robot_grinding_sim.hardware.ft_stream.FTReadings` (oldest first, each dated by when the
sensor took it, on ``time.monotonic()``), so the driver acts on the newest and knows its age,
whatever the brand.

Its life follows the driver's (a lifecycle node): constructed from the driver's parameters (a bad
one: :class:`~robot_grinding_sim.core.parameters.ParameterError` naming it), :meth:`FTBackend.connect`
(configure: open the device, nothing streams), :meth:`FTBackend.start` (activate: stream, deliver
to the callbacks), :meth:`FTBackend.stop` (deactivate), :meth:`FTBackend.disconnect` (cleanup; a
later connect opens it again).

A device read by polling subclasses :class:`ThreadedFTBackend`: it implements one blocking read
(:meth:`ThreadedFTBackend.read`, at most about one control period) and the base runs the reader
thread, which delivers the readings and calls ``on_idle`` after every read or timeout (the driver
checks its timeouts there: a silent sensor is noticed by the thread that waits for it).

A new brand is one module with an :class:`FTBackend` subclass and one line in :data:`FT_BACKENDS`
(``"name": "module:Class"``, imported when selected, so a ROS-side backend costs the ROS-free
package nothing); :func:`register_ft_backend` adds one at run time.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.hardware.ft_stream import FTReadings

__all__ = ["FT_BACKENDS", "FTBackend", "FTContext", "ThreadedFTBackend", "ft_backend_class", "make_ft_backend",
           "register_ft_backend"]

#: name (the driver's ``ft_backend`` parameter) -> the backend class, or ``"module:Class"``
FT_BACKENDS: dict[str, str | type[FTBackend]] = {
    "netft": "robot_grinding_sim.hardware.netft_backend:NetFTBackend",
    "topic": "robot_grinding_sim.ros.ft_topic:TopicFTBackend",
    "ur_builtin": "robot_grinding_sim.ros.ft_topic:URBuiltinFTBackend",
    "ft_broadcaster": "robot_grinding_sim.ros.ft_topic:BroadcasterFTBackend",
}


@dataclass
class FTContext:
    """What a backend gets from the driver besides its parameters.

    Attributes:
        period: the driver's control period, s (a read waits at most about this long).
        log: ``log(level, text)``, level ``"info"``, ``"warning"`` or ``"error"``.
        stopping: true once the process is stopping (a reader thread ends then).
        node: the ROS node, for backends on the ROS side (None elsewhere).
        monotonic: the clock the readings are dated on, s.
        to_sensor_frame: ``to_sensor_frame(frame, wrench)``: a (6,) wrench given in ``frame`` (a
            message's header) in the sensor frame ``ft_sensor.frame``, through the robot's kinematics
            at the measured joint positions; raises InputError for a frame it cannot transform. None:
            readings in another frame than the sensor's are refused.
    """

    period: float
    log: Callable[[str, str], None] = lambda level, text: None
    stopping: Callable[[], bool] = lambda: False
    node: Any = None
    monotonic: Callable[[], float] = field(default=time.monotonic)
    to_sensor_frame: Callable[[str, Any], Any] | None = None


Deliver = Callable[[FTReadings], None]


class FTBackend:
    """One F/T source (see the module docstring). Subclasses set :attr:`name`.

    Args:
        params: the driver's parameter values (each backend reads its own).
        context: the driver's period, log and stop flag.
    """

    name = ""

    def __init__(self, params: Mapping[str, Any], context: FTContext) -> None:
        self.params, self.context = params, context
        self._on_readings: Deliver | None = None
        self._on_idle: Callable[[], None] | None = None

    def describe(self) -> str:
        """Where the readings come from (for the driver's ready line)."""
        return self.name

    def connect(self) -> None:
        """Open the device (nothing streams yet). Raises ParameterError naming the parameter."""

    def disconnect(self) -> None:
        """Close it (a later :meth:`connect` opens it again); harmless when not connected."""

    def start(self, on_readings: Deliver, on_idle: Callable[[], None] = lambda: None) -> None:
        """Stream: every read's readings go to ``on_readings``; ``on_idle`` after each read attempt."""
        self._on_readings, self._on_idle = on_readings, on_idle

    def stop(self) -> None:
        """Stop streaming (nothing is delivered after this returns)."""
        self._on_readings = self._on_idle = None

    def close(self) -> None:
        """Stop and disconnect (the driver's end)."""
        self.stop()
        self.disconnect()

    def diagnostics(self) -> dict[str, str]:
        """Key/values for the driver's /diagnostics (counters of the source)."""
        return {}


class ThreadedFTBackend(FTBackend):
    """A backend read by a thread of its own (see the module docstring): subclasses implement
    :meth:`read` and, if the device must be told, :meth:`start_device` / :meth:`stop_device`."""

    def __init__(self, params: Mapping[str, Any], context: FTContext) -> None:
        super().__init__(params, context)
        self._halt = threading.Event()
        self._reader: threading.Thread | None = None
        self._last_error = ""

    def read(self) -> FTReadings | None:
        """One read: the readings queued (oldest first), or None if none came within about one
        control period (or none was usable). OSError/RuntimeError: the device failed (logged, retried)."""
        raise NotImplementedError

    def start_device(self) -> None:
        """Ask the device to stream (before the reader starts)."""

    def stop_device(self) -> None:
        """Ask the device to stop streaming (after the reader ended)."""

    def start(self, on_readings: Deliver, on_idle: Callable[[], None] = lambda: None) -> None:
        if self._reader is not None:
            return
        super().start(on_readings, on_idle)
        self._halt.clear()
        self.start_device()
        self._reader = threading.Thread(target=self._run, name=f"{self.name}-reader", daemon=True)
        self._reader.start()

    def stop(self) -> None:
        self._halt.set()
        reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=2.0)
        super().stop()
        if reader is not None:
            try:
                self.stop_device()
            except OSError:
                pass  # the device is going away; its owner change covers a lost stop

    def _stopping(self) -> bool:
        return self._halt.is_set() or self.context.stopping()

    def _say_once(self, text: str) -> None:
        if text != self._last_error:
            self._last_error = text
            self.context.log("error", text)

    def _run(self) -> None:
        while not self._stopping():
            try:
                readings = self.read()
            except (OSError, RuntimeError) as exc:  # the socket closed under us, or a network error
                if self._stopping():
                    return
                self._say_once(f"{self.describe()}: {type(exc).__name__}: {exc}")
                self._idle()
                time.sleep(self.context.period)
                continue
            on_readings = self._on_readings
            if readings is not None and on_readings is not None:
                try:
                    on_readings(readings)
                except Exception as exc:  # keep reading; say what it was
                    self._say_once(f"F/T reading: {type(exc).__name__}: {exc}")
            self._idle()

    def _idle(self) -> None:
        on_idle = self._on_idle
        if on_idle is not None:
            on_idle()


def register_ft_backend(name: str, backend: str | type[FTBackend]) -> None:
    """Add (or replace) a backend: ``name`` selects it (``ft_backend``); a class or ``"module:Class"``."""
    FT_BACKENDS[name] = backend


def ft_backend_class(name: str) -> type[FTBackend]:
    """The backend class registered as ``name``; ParameterError naming ``ft_backend`` otherwise."""
    entry = FT_BACKENDS.get(name)
    if entry is None:
        raise ParameterError("ft_backend", f"{name!r} is not a known F/T backend (known: {', '.join(FT_BACKENDS)})")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    if not (isinstance(entry, type) and issubclass(entry, FTBackend)):
        raise ParameterError("ft_backend", f"{name!r} is registered as {entry!r}, not an FTBackend class")
    return entry


def make_ft_backend(name: str, params: Mapping[str, Any], context: FTContext) -> FTBackend:
    """The backend ``name`` built from the driver's parameters (not connected yet)."""
    return ft_backend_class(name)(params, context)
