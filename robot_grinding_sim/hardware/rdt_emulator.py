"""An ATI Net F/T RDT server on loopback, for tests and ``grinding emulate``.

It speaks the protocol of :mod:`robot_grinding_sim.hardware.netft` (requests of 8 bytes,
records of 36, big-endian) from a thread with a UDP socket bound to a loopback address:

- start (command 2, ``count`` records, 0 = until stopped): the requester becomes the owner
  (the last requester wins, as on the sensor) and records stream to it at ``rate_hz``;
  rdt_sequence restarts at 1 for each request;
- stop (command 0): streaming stops;
- bias (command 0x42): the current raw reading (counts) is subtracted from every later record.

Time: the emulator's clock ``t`` runs from ``start()`` (s, monotonic; ``epoch`` is its zero on
``time.monotonic()``). Samples lie on the grid ``t_k = k / rate_hz``; a record sent for sample k
carries ``ft_sequence = k mod 2**32`` and the wrench ``source(t_k)`` (N, N m, sensor frame), so a
receiver can tell which instant it got; ``last_sample`` is the newest sample instant sent.
When the thread falls behind by more than ``max_lag`` (the process was descheduled), the skipped
samples are not sent late in a burst: the grid jumps forward and ``late_skips`` counts it. Their
rdt_sequence numbers are used (as silence uses them), so rdt_sequence stays the sensor's clock, as
on a real sensor that never skips: a receiver sees them as lost records.

A source on another clock (``until``: an emulated sensor whose readings come from a simulation
that may lag real time): ``until()`` is the newest emulator time the source can give a reading
for (s; inf: any). Sample k is sent only once ``k / rate_hz <= min(t, max(until(), t - max_hold))``,
so a source running late holds the stream back instead of having its newest reading served for
instants it has not reached (each record stays the reading of its own sample instant, on the
source's clock), by at most ``max_hold`` s: a source further behind has its newest reading served
``max_hold`` behind the wall clock (a sensor's data may not grow older than a receiver's timeout
because a simulation is starved). ``max_lag`` is judged against that horizon, so a source that
jumps ahead (a simulation skipping a stall) skips the grid with it. Without ``until`` the horizon
is the wall clock ``t``.

Faults (:class:`RDTFaults`, each record drawn from a seeded generator, applied in this order):
- silence (``silence(True)`` or ``t >= silent_after``): the record is not sent; its
  rdt_sequence is used (the sensor kept sampling), so a receiver sees a gap when it speaks again;
- drop (``drop_fraction``): the record is not sent, its rdt_sequence is used;
- corrupt (``corrupt_fraction``): a datagram of the wrong size goes out in its place;
- reorder (``reorder_fraction``): the record is held and sent right after the next one sent
  (a swapped pair). A record held when the stream ends is discarded;
- delay (``delay``, s): every datagram leaves ``delay`` after its sample instant, in order (a
  sensor whose data reaches the host late, or a receiver's backlog made on purpose): switched on
  at run time, the receiver's newest reading grows ``delay`` old; switched off (0), everything held
  leaves at once, a burst of old records. Stop and start discard what is held.
"""

from __future__ import annotations

import collections
import ipaddress
import math
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.netft import (
    CMD_BIAS,
    CMD_START,
    CMD_STOP,
    RDT_HEADER,
    RECORD,
    REQUEST,
    REQUEST_SIZE,
)

__all__ = ["RDTEmulator", "RDTFaults", "StampedReadings", "WrenchSource"]

#: t (s, emulator clock) -> (6,) wrench [Fx Fy Fz Tx Ty Tz], N and N m, sensor frame
WrenchSource = Callable[[float], npt.ArrayLike]

_INT32 = (-(1 << 31), (1 << 31) - 1)
# sizes of the wrong-size datagrams sent for a corrupted record (never 36)
_BAD_SIZES = (12, 35, 37, 48)
# longest wait in the thread's loop: how quickly close() is noticed when idle
_IDLE_POLL_S = 0.05


def _fraction(value: float, name: str) -> float:
    v = float(value)
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise InputError(f"RDTFaults {name} must be in [0, 1], got {value!r}")
    return v


@dataclass(frozen=True)
class RDTFaults:
    """Faults the emulator injects (see the module docstring).

    Attributes:
        drop_fraction: probability that a record is not sent, [0, 1].
        reorder_fraction: probability that a record is swapped with the next one, [0, 1].
        corrupt_fraction: probability that a wrong-size datagram replaces a record, [0, 1].
        silent_after: emulator time after which nothing is sent, s (>= 0), or None.
        delay: how long after its sample instant each datagram leaves, s (>= 0).
    """

    drop_fraction: float = 0.0
    reorder_fraction: float = 0.0
    corrupt_fraction: float = 0.0
    silent_after: float | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        for name in ("drop_fraction", "reorder_fraction", "corrupt_fraction"):
            object.__setattr__(self, name, _fraction(getattr(self, name), name))
        if self.silent_after is not None:
            s = float(self.silent_after)
            if not math.isfinite(s) or s < 0.0:
                raise InputError(f"RDTFaults silent_after must be >= 0 s (or None), got {self.silent_after!r}")
            object.__setattr__(self, "silent_after", s)
        d = float(self.delay)
        if not math.isfinite(d) or d < 0.0:
            raise InputError(f"RDTFaults delay must be >= 0 s, got {self.delay!r}")
        object.__setattr__(self, "delay", d)


def _zero_source(t: float) -> npt.ArrayLike:
    return np.zeros(6)


class StampedReadings:
    """Readings stamped on a simulation's clock, as an :class:`RDTEmulator`'s ``source`` and ``until``.

    An emulated sensor (netft_emulator) is handed the readings of a simulated arm's sensor model,
    stamped on the arm's clock, which lags the wall clock while the arm's process is starved. Served
    as "the newest reading" on the wall-clock grid, a record would carry a reading from up to the
    arm's lag earlier than its sample instant: the sensor and the arm's joint states drift apart.
    Here the readings are kept by stamp: ``source(t)`` is the reading stamped at or before
    ``origin + t`` (the sensor samples the arm's state at that instant), and ``until()`` is the newest
    stamp - ``origin``, so the emulator sends sample k only once the arm has reached it.

    Topic silence (no reading added for ``silence_timeout`` s of host time, e.g. the arm stopped):
    ``until()`` is inf and the emulator streams the last reading on its own clock, as a real sensor
    keeps sampling; readings that come later and are stamped before instants already sent are
    skipped over (the grid does not go back). Before the first reading (or before ``origin`` is
    set) ``until()`` is inf and ``source`` gives zeros.

    Thread use: :meth:`add` from one thread (a subscriber), :meth:`source` / :meth:`until` from the
    emulator's thread.

    Args:
        silence_timeout: host time without a new reading after which the last one streams on the
            emulator's clock, s (> 0).
        keep: readings older than this behind the newest are dropped, s of stamp time (> 0).
        monotonic: the host's steady clock, s.

    Attributes: ``origin``: stamp of emulator time 0 (s; the caller sets it once the emulator has
    started: the stamp clock's now minus ``RDTEmulator.clock()``); ``added``, ``out_of_order`` (readings
    stamped before the newest, ignored).
    """

    def __init__(self, silence_timeout: float = 0.5, keep: float = 10.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        for name, v in (("silence_timeout", silence_timeout), ("keep", keep)):
            if not math.isfinite(float(v)) or float(v) <= 0.0:
                raise InputError(f"StampedReadings {name} must be finite and > 0 s, got {v!r}")
        self.silence_timeout, self.keep = float(silence_timeout), float(keep)
        self.monotonic = monotonic
        self.origin: float | None = None
        self._lock = threading.Lock()
        # (stamp s, (6,) wrench), oldest first; the first is the one served last (or older)
        self._readings: collections.deque[tuple[float, npt.NDArray[np.float64]]] = collections.deque()
        self._newest = -math.inf
        self._added_at = -math.inf  # host time of the last add
        self.added = self.out_of_order = 0

    def add(self, stamp: float, wrench: npt.ArrayLike) -> None:
        """A reading (6,) N and N m, stamped ``stamp`` s (the arm's clock)."""
        w = np.asarray(wrench, dtype=np.float64).reshape(6)
        stamp = float(stamp)
        with self._lock:
            self._added_at = self.monotonic()
            if stamp < self._newest:
                self.out_of_order += 1
                return
            self._readings.append((stamp, w))
            self._newest = stamp
            while len(self._readings) > 1 and self._readings[0][0] < stamp - self.keep:
                self._readings.popleft()
            self.added += 1

    def until(self) -> float:
        """The newest emulator time a reading is stamped for, s; inf when there is none yet, no
        ``origin``, or the readings have stopped for ``silence_timeout``."""
        with self._lock:
            if self.origin is None or not self._readings or \
                    self.monotonic() - self._added_at > self.silence_timeout:
                return math.inf
            return self._newest - self.origin

    def source(self, t: float) -> npt.NDArray[np.float64]:
        """(6,) the reading stamped at or before ``origin + t`` (the oldest kept if all are later;
        zeros before any); older ones are dropped."""
        with self._lock:
            r = self._readings
            if not r:
                return np.zeros(6)
            if self.origin is not None:
                at = self.origin + t
                while len(r) > 1 and r[1][0] <= at:
                    r.popleft()
            return r[0][1]


class RDTEmulator:
    """A Net F/T RDT server thread on loopback (see the module docstring).

    Example::

        with RDTEmulator(lambda t: [0, 0, 5.0, 0, 0, 0], rate_hz=1000.0) as emu:
            client = NetFTClient(*emu.address)

    Args:
        source: wrench source ``f(t) -> (6,)`` in N and N m (default: zero).
        rate_hz: record rate while streaming, Hz (0 < rate <= 20000).
        port: UDP port to bind, 0 for an ephemeral one (see ``address``).
        counts_per_force: counts per N (> 0).
        counts_per_torque: counts per N m (> 0).
        status: the status word sent in every record (uint32; settable later).
        faults: injected faults (default none; settable later with ``faults = ...``).
        seed: seed of the fault generator.
        host: loopback address to bind (the emulator never listens beyond the machine).
        max_lag: how far behind the grid the thread may fall before skipping ahead, s (> 0).
        until: ``until() -> float``, the newest emulator time the source can give, s (module
            docstring; default: the wall clock, no hold). Called from the server thread.
        max_hold: the longest the source's clock holds the stream behind the wall clock, s (> 0).
        nice: the server thread's niceness (Linux sets it per thread; negative needs the privilege),
            or None: the caller's. A sensor is a device with its own processor: in a test process
            beside CPU-bound work its thread at the process's priority sent records tens of ms late.

    Attributes (counters, read any time): sent (valid records sent), dropped, corrupted,
    reordered (records held and sent late), silenced, late_skips (and the samples they skipped:
    skipped; a finite request still sends its count of records), bad_requests (datagrams that
    are not 8-byte requests with header 0x1234), send_errors; ``error``: the exception the source
    raised (streaming stops), else None.
    """

    def __init__(
        self,
        source: WrenchSource | None = None,
        rate_hz: float = 1000.0,
        port: int = 0,
        counts_per_force: float = 1e6,
        counts_per_torque: float = 1e6,
        status: int = 0,
        faults: RDTFaults | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
        max_lag: float = 0.05,
        until: Callable[[], float] | None = None,
        max_hold: float = math.inf,
        nice: int | None = None,
    ) -> None:
        if source is not None and not callable(source):
            raise InputError(f"RDTEmulator source must be a callable f(t) -> (6,), got {source!r}")
        self.source: WrenchSource = source if source is not None else _zero_source
        if until is not None and not callable(until):
            raise InputError(f"RDTEmulator until must be a callable () -> float (s, emulator time), got {until!r}")
        self.until = until
        self.max_hold = float(max_hold)
        self.nice = nice
        #: why the thread could not take ``nice`` (no privilege), else None
        self.nice_error: str | None = None
        if math.isnan(self.max_hold) or self.max_hold <= 0.0:
            raise InputError(f"RDTEmulator max_hold must be > 0 s, got {max_hold!r}")
        self.rate_hz = float(rate_hz)
        if not math.isfinite(self.rate_hz) or not 0.0 < self.rate_hz <= 20000.0:
            raise InputError(f"RDTEmulator rate_hz must be in (0, 20000] Hz, got {rate_hz!r}")
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 0 <= int(port) <= 65535:
            raise InputError(f"RDTEmulator port must be an integer in 0..65535 (0: ephemeral), got {port!r}")
        cpf, cpt = float(counts_per_force), float(counts_per_torque)
        for name, v in (("counts_per_force", cpf), ("counts_per_torque", cpt)):
            if not math.isfinite(v) or v <= 0.0:
                raise InputError(f"RDTEmulator {name} must be finite and > 0, got {v!r}")
        self._scale = np.array([cpf] * 3 + [cpt] * 3)
        self.counts_per_force, self.counts_per_torque = cpf, cpt
        self.status = status
        self.faults = faults if faults is not None else RDTFaults()
        if not isinstance(self.faults, RDTFaults):
            raise InputError(f"RDTEmulator faults must be an RDTFaults, got {faults!r}")
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise InputError(f"RDTEmulator host must be a loopback IPv4 address, got {host!r}")
        self.max_lag = float(max_lag)
        if not math.isfinite(self.max_lag) or self.max_lag <= 0.0:
            raise InputError(f"RDTEmulator max_lag must be > 0 s, got {max_lag!r}")
        self._rng = np.random.default_rng(seed)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, int(port)))
        except OSError as exc:
            self._sock.close()
            raise InputError(f"RDTEmulator cannot bind {host}:{port}: {exc}") from None
        self._sock.setblocking(False)
        self.address: tuple[str, int] = self._sock.getsockname()
        self._lock = threading.Lock()
        self._requests: list[tuple[int, int, tuple[str, int]]] = []
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._silent = False
        # stream state, touched only by the thread once it runs
        self._owner: tuple[str, int] | None = None
        self._streaming = False
        self._remaining: int | None = None
        self._seq = 0
        self._k_next = 0
        self._held: bytes | None = None
        # datagrams waiting for the delay fault: (sample instant, bytes, is a record)
        self._delayed: collections.deque[tuple[float, bytes, bool]] = collections.deque()
        self.last_sample: float | None = None
        self._bias = np.zeros(6, dtype=np.int64)
        self.sent = self.dropped = self.corrupted = self.reordered = self.silenced = 0
        self.late_skips = self.skipped = self.bad_requests = self.send_errors = 0
        self.error: BaseException | None = None

    # ---------------------------------------------------------------------------------------
    @property
    def status(self) -> int:
        """Status word sent in every record (uint32)."""
        return self._status

    @status.setter
    def status(self, word: int) -> None:
        if isinstance(word, bool) or not isinstance(word, (int, np.integer)) or not 0 <= int(word) < (1 << 32):
            raise InputError(f"RDTEmulator status must be a uint32, got {word!r}")
        self._status = int(word)

    @property
    def owner(self) -> tuple[str, int] | None:
        """(ip, port) records go to: the last start requester, or None before any."""
        return self._owner

    @property
    def streaming(self) -> bool:
        """True while a start request is being served."""
        return self._streaming

    @property
    def requests(self) -> list[tuple[int, int, tuple[str, int]]]:
        """Valid requests received so far, oldest first: (command, count, sender address)."""
        with self._lock:
            return list(self._requests)

    @property
    def bias_counts(self) -> npt.NDArray[np.int64]:
        """(6,) counts the last bias command took as the zero."""
        return self._bias.copy()

    def clock(self) -> float:
        """Emulator time, s since ``start()``."""
        return time.monotonic() - self._t0

    def horizon(self) -> float:
        """The newest sample instant that may be sent now, s of emulator time: ``min(clock(),
        max(until(), clock() - max_hold))`` (module docstring); ``clock()`` without ``until``. An
        ``until`` that raises is a failing source: ``error``, streaming stops."""
        now = self.clock()
        if self.until is None:
            return now
        try:
            u = float(self.until())
        except Exception as exc:  # as a failing source: streaming stops
            self.error = exc
            self._streaming = False
            return now
        return now if math.isnan(u) else min(now, max(u, now - self.max_hold))

    @property
    def epoch(self) -> float:
        """``time.monotonic()`` at emulator time 0 (sample k left the sensor at epoch + k / rate_hz)."""
        return self._t0

    @property
    def held(self) -> int:
        """Datagrams held by the delay fault now."""
        return len(self._delayed)

    def silence(self, on: bool = True) -> None:
        """Fall silent (nothing sent) until ``silence(False)``."""
        self._silent = bool(on)

    # ---------------------------------------------------------------------------------------
    def start(self) -> RDTEmulator:
        """Start the server thread (once); returns self."""
        if self._thread is not None:
            raise RuntimeError("RDTEmulator already started")
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"rdt-emulator:{self.address[1]}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread and close the socket; closing twice is harmless."""
        self._closing.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._sock.close()

    def __enter__(self) -> RDTEmulator:
        return self.start() if self._thread is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------
    # the thread

    def _run(self) -> None:
        if self.nice is not None:
            import os

            try:  # this thread only (Linux: a thread's id is a PRIO_PROCESS target)
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), int(self.nice))
            except OSError as exc:
                self.nice_error = f"{type(exc).__name__}: {exc.strerror or exc}"
        period = 1.0 / self.rate_hz
        while not self._closing.is_set():
            wait = _IDLE_POLL_S
            if self._streaming:
                due = self._k_next * period
                now = self.clock()
                # held by the source's clock (until): poll it every period, as the records would go
                wait = min(wait, max(0.0, due - now) if self.until is None or due > now else period)
            if self._delayed:
                wait = min(wait, max(0.0, self._delayed[0][0] + self.faults.delay - self.clock()))
            readable, _, _ = select.select([self._sock], [], [], wait)
            if readable:
                self._serve_requests()
            if self._streaming:
                self._emit_due(period)
            if self._delayed:
                self._flush(self.clock())

    def _serve_requests(self) -> None:
        while True:
            try:
                data, addr = self._sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. an ICMP error from an owner that went away: nothing to serve
            if len(data) != REQUEST_SIZE:
                self.bad_requests += 1
                continue
            header, command, count = REQUEST.unpack(data)
            if header != RDT_HEADER or command not in (CMD_START, CMD_STOP, CMD_BIAS):
                self.bad_requests += 1
                continue
            if command == CMD_START:
                self._owner = addr
                self._seq = 0
                self._held = None
                self._delayed.clear()
                self._remaining = count if count > 0 else None
                self._k_next = math.ceil(self.horizon() * self.rate_hz)
                self._streaming = True
            elif command == CMD_STOP:
                self._streaming = False
                self._held = None
                self._delayed.clear()
            else:
                raw = self._raw_counts(self.horizon())
                if raw is not None:
                    self._bias = raw
            # logged once served, so whoever sees it in ``requests`` sees its effect
            with self._lock:
                self._requests.append((command, count, addr))

    def _raw_counts(self, t: float) -> npt.NDArray[np.int64] | None:
        """The unbiased counts of the source at t, or None (streaming stops) if it fails."""
        try:
            w = np.asarray(self.source(t), dtype=np.float64).reshape(6)
            if not np.isfinite(w).all():
                raise InputError(f"RDTEmulator source returned non-finite values at t = {t}: {w.tolist()}")
        except Exception as exc:
            self.error = exc
            self._streaming = False
            return None
        return np.rint(w * self._scale).astype(np.int64)

    def _emit_due(self, period: float) -> None:
        now = self.horizon()
        if now - self._k_next * period > self.max_lag:
            k_new = math.ceil(now * self.rate_hz)
            skipped = k_new - self._k_next
            self._k_next = k_new
            self._seq = (self._seq + skipped) & 0xFFFFFFFF  # the sensor's clock ran on: lost records
            self.late_skips += 1
            self.skipped += skipped
        while self._streaming and self._k_next * period <= now:
            k = self._k_next
            self._k_next += 1
            self._emit(k, k * period)
            if self._remaining is not None:
                self._remaining -= 1
                if self._remaining <= 0:
                    self._streaming = False
                    self._held = None

    def _emit(self, k: int, t: float) -> None:
        raw = self._raw_counts(t)
        if raw is None:
            return
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        f = self.faults
        if self._silent or (f.silent_after is not None and t >= f.silent_after):
            self.silenced += 1
            return
        rng = self._rng
        if f.drop_fraction > 0.0 and rng.random() < f.drop_fraction:
            self.dropped += 1
            return
        if f.corrupt_fraction > 0.0 and rng.random() < f.corrupt_fraction:
            size = int(_BAD_SIZES[rng.integers(len(_BAD_SIZES))])
            self.corrupted += 1
            self._out(bytes(rng.integers(0, 256, size, dtype=np.uint8)), t, False)
            return
        counts = np.clip(raw - self._bias, *_INT32)
        packet = RECORD.pack(self._seq, k & 0xFFFFFFFF, self._status, *(int(c) for c in counts))
        if self._held is None and f.reorder_fraction > 0.0 and rng.random() < f.reorder_fraction:
            self._held = packet
            return
        self._out(packet, t, True)
        if self._held is not None:
            held, self._held = self._held, None
            if self._out(held, t, True):
                self.reordered += 1

    def _out(self, packet: bytes, t: float, record: bool) -> bool:
        """Send a datagram of sample instant ``t`` now, or hold it for the delay fault (then True)."""
        if self.faults.delay > 0.0 or self._delayed:
            self._delayed.append((t, packet, record))
            if self.faults.delay <= 0.0:
                self._flush(self.clock())
            return True
        return self._sent(packet, t, record)

    def _flush(self, now: float) -> None:
        """Send the held datagrams whose delay is over (all of them once the delay is 0), in order."""
        delay = self.faults.delay
        while self._delayed and self._delayed[0][0] + delay <= now:
            t, packet, record = self._delayed.popleft()
            self._sent(packet, t, record)

    def _sent(self, packet: bytes, t: float, record: bool) -> bool:
        ok = self._send(packet)
        if ok and record:
            self.sent += 1
            self.last_sample = t if self.last_sample is None else max(self.last_sample, t)
        return ok

    def _send(self, packet: bytes) -> bool:
        if self._owner is None:
            return False
        try:
            self._sock.sendto(packet, self._owner)
        except BlockingIOError:
            self.send_errors += 1  # the kernel's send buffer is full: the datagram is lost
            return False
        except OSError:
            self.send_errors += 1
            return False
        return True
