"""ATI Net F/T over UDP (RDT, "raw data transfer"): the wire format and a client.

Protocol (ATI Net F/T manual, RDT interface; every field big-endian):

- request, 8 bytes, to UDP port 49152: ``uint16 0x1234`` (header), ``uint16 command``,
  ``uint32 count``. Commands: 0 stop streaming, 2 start real-time streaming (``count`` records,
  0 = until stopped), 0x42 set software bias (the current reading becomes the zero).
- record, 36 bytes, from the sensor to the address and port the start request came from:
  ``uint32 rdt_sequence`` (records sent since the request, from 1), ``uint32 ft_sequence``
  (the sensor's internal sample number), ``uint32 status`` (0 = healthy), then ``int32`` counts
  Fx Fy Fz Tx Ty Tz. Force = counts / counts_per_force (N), torque = counts / counts_per_torque
  (N m) when the sensor is configured for N and N m.
- one RDT owner: the sensor streams to the last requester only, so one program owns the stream
  (the driver) and everything else reads the driver's topics.

Why not ``pynetft`` (PyPI, 2.1.3, read before writing this): it has the counters (lost,
out-of-order, malformed) and a timeout that raises TimeoutError, but it does not meet the
contract here as a drop-in: a different API (``Client(Config)`` with an iterator or callback
fed by a native thread through a queue of one sample by default, so samples the caller reads late
are dropped in the queue rather than counted as lost on the wire); HTTP calibration discovery on
port 80 unless a calibration override is given, and units as the sensor reports them (often
N mm); a reconnect policy by default; its packet checks live in a compiled core with a bundled
libcurl that cannot be read or patched here; and it is not a dependency of this package (neither
on the pip path nor in rosdep). The protocol is four fields and two struct layouts: this client is
those, in plain Python, with the counters the driver's diagnostics report.

Reading: newest first. A driver must act on the newest reading, not on the oldest one queued: a
reader that reads records one by one, oldest first, and falls behind the stream (a busy machine, a
slow callback) acts on readings that are older and older (2.3 MB, 2,800 records, 2.8 s of a 1 kHz
stream were once queued in a 4 MB socket buffer while the driver acted on them one by one; a 200 N
reading reached it 543 ms after the sensor sent it, and it reported 0.3 ms). So
:meth:`NetFTClient.read_batch` waits for the first datagram, then takes every datagram queued
(non-blocking), and returns all the valid records oldest first (:class:`NetFTBatch`; the consumer
acts on the newest and may still look at the others, e.g. to check every one against a limit);
:meth:`NetFTClient.read` returns the newest alone. Records taken behind a newer one in the same
read count as ``superseded``. The socket's receive buffer holds about ``buffer_seconds`` of records
(the kernel drops what arrives beyond it, counted as ``lost``), so no read ever finds seconds of
old data.

Sample times: with the nominal record rate ``rate_hz``, each record's host sample time is
estimated from its ``rdt_sequence`` (:class:`~robot_grinding_sim.hardware.ft_stream.StreamClock`:
the sensor's clock against the host's, what the age means and its bounds are in that module's
docstring); without it, a record's sample time is when it was taken off the socket. Why
``rdt_sequence`` and not ``ft_sequence``: the records leave the sensor at the RDT output rate, which
the driver is configured with; ``ft_sequence`` counts the sensor's internal samples, whose rate
(7 kHz on a Net F/T, other on other ATI boxes) relates to the output rate in a sensor-specific way.

Sequence accounting (``rdt_sequence`` is a uint32 that wraps; compared modulo 2**32):
- a record newer than the last accepted one by k > 1 adds k - 1 to ``lost``;
- a record not newer (older or repeated) adds 1 to ``out_of_order`` and is skipped; a swapped
  pair therefore shows as one lost record (the gap when the later record came first) and one
  out-of-order record (the earlier one arriving late, skipped);
- a datagram that is not 36 bytes adds 1 to ``bad_packets`` and is skipped.
- a valid record taken in the same read as a newer one adds 1 to ``superseded`` (it is returned in
  the batch, but it is not the reading to act on).
``start()`` restarts the accounting (the sensor restarts rdt_sequence at each request).
"""

from __future__ import annotations

import ipaddress
import math
import re
import socket
import struct
import time
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.ft_stream import FTReadings, StreamClock

__all__ = [
    "CMD_BIAS",
    "CMD_START",
    "CMD_STOP",
    "RDT_HEADER",
    "RDT_PORT",
    "RECORD",
    "RECORD_SIZE",
    "REQUEST",
    "REQUEST_SIZE",
    "NetFTBatch",
    "NetFTClient",
    "NetFTSample",
    "encode_request",
]

RDT_PORT = 49152
RDT_HEADER = 0x1234
CMD_STOP = 0x0000
CMD_START = 0x0002
CMD_BIAS = 0x0042
#: request: header, command, sample count
REQUEST = struct.Struct(">HHI")
#: record: rdt_sequence, ft_sequence, status, Fx Fy Fz Tx Ty Tz counts
RECORD = struct.Struct(">III6i")
REQUEST_SIZE = REQUEST.size  # 8
RECORD_SIZE = RECORD.size  # 36

_SEQ_MOD = 1 << 32
_SEQ_HALF = 1 << 31
# bigger than any datagram we accept, so an oversize one is seen whole and counted, not truncated
_RECV_BYTES = 2048
# bytes the kernel charges a 36-byte datagram against the receive buffer (832 measured on loopback,
# Linux 6; a NIC's skb can be larger, so the buffer holds at most about buffer_seconds)
_DATAGRAM_COST = 832
# smallest receive buffer asked for (bytes; the kernel doubles it): a few dozen records
_RCVBUF_MIN = 16 << 10
# buffer asked for without a nominal rate (bytes): ~150 records
_RCVBUF_DEFAULT = 64 << 10
# most datagrams one read takes (a bound on its work; the buffer holds far fewer)
_MAX_BATCH = 100_000
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?$")


def encode_request(command: int, count: int = 0) -> bytes:
    """The 8-byte RDT request for ``command`` (0 stop, 2 start, 0x42 bias) and ``count`` records."""
    if not 0 <= int(command) <= 0xFFFF:
        raise InputError(f"RDT command must be a uint16, got {command!r}")
    if not 0 <= int(count) < _SEQ_MOD:
        raise InputError(f"RDT count must be a uint32 (0 = stream until stopped), got {count!r}")
    return REQUEST.pack(RDT_HEADER, int(command), int(count))


@dataclass(frozen=True)
class NetFTSample:
    """One RDT record, decoded.

    Attributes:
        wrench: (6,) read-only [Fx Fy Fz Tx Ty Tz] in the sensor frame, N and N m.
        counts: the six raw int32 counts as received.
        rdt_sequence: record number in the current stream (uint32, from 1).
        ft_sequence: the sensor's internal sample number (uint32).
        status: the sensor's status word (0 = healthy; bit 31 set = an error).
        received_at: ``time.monotonic()`` when the datagram was taken off the socket, s.
        sample_time: ``time.monotonic()`` when the sensor sent it, s (estimated from the sequence
            with the client's ``rate_hz``, see the module docstring; ``received_at`` without one).
    """

    wrench: npt.NDArray[np.float64]
    counts: tuple[int, int, int, int, int, int]
    rdt_sequence: int
    ft_sequence: int
    status: int
    received_at: float
    sample_time: float


@dataclass(frozen=True)
class NetFTBatch(FTReadings):
    """Every valid record one :meth:`NetFTClient.read_batch` took, oldest first (an
    :class:`~robot_grinding_sim.hardware.ft_stream.FTReadings` with the RDT fields).

    Attributes:
        counts: (k, 6) int64, the raw counts.
        rdt_sequence: (k,) int64, each record's rdt_sequence (uint32 as received).
        ft_sequence: (k,) int64, each record's ft_sequence.
    """

    counts: npt.NDArray[np.int64]
    rdt_sequence: npt.NDArray[np.int64]
    ft_sequence: npt.NDArray[np.int64]

    def sample(self, i: int = -1) -> NetFTSample:
        """Record ``i`` (default the newest) as a :class:`NetFTSample`."""
        w = self.wrenches[i].copy()
        w.setflags(write=False)
        return NetFTSample(w, tuple(int(c) for c in self.counts[i]), int(self.rdt_sequence[i]),  # type: ignore[arg-type]
                           int(self.ft_sequence[i]), int(self.status[i]), self.taken_at, float(self.sample_times[i]))


def _check_host(host: object) -> str:
    """``host`` as an IPv4 address string; InputError if empty, malformed or unresolvable."""
    if not isinstance(host, str) or not host.strip():
        raise InputError(f"NetFTClient host must be an IP address or a host name, got {host!r}")
    host = host.strip()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        if ip.version != 4:
            raise InputError(f"NetFTClient host {host!r}: the Net F/T speaks IPv4 only")
        return str(ip)
    # malformed names are refused here, before any lookup leaves the machine
    if not _HOSTNAME.match(host) or re.fullmatch(r"[0-9.]+", host):
        raise InputError(f"NetFTClient host {host!r} is neither an IPv4 address nor a valid host name")
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"NetFTClient host {host!r} cannot be resolved: {exc}") from None
    return str(infos[0][4][0])


def _positive(value: object, name: str) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"NetFTClient {name} must be a number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise InputError(f"NetFTClient {name} must be finite and > 0, got {value!r}")
    return v


class NetFTClient:
    """Client of one Net F/T's RDT stream (protocol and counters in the module docstring).

    Example::

        with NetFTClient("192.168.1.1", counts_per_force=1e6, counts_per_torque=1e6, rate_hz=1000.0) as ft:
            ft.start()
            batch = ft.read_batch()     # every record queued, oldest first; act on batch.newest
            sample = ft.read()          # the newest only: NetFTSample, wrench (6,) in N, N m
            ft.bias()

    One thread reads (``read``, ``read_batch``); commands (``start``, ``stop``, ``bias``) may come
    from any thread. The socket is connected to (host, port), so datagrams from anyone else are
    dropped by the kernel.

    Args:
        host: the sensor's IPv4 address or a resolvable host name.
        port: its RDT port, 1..65535.
        counts_per_force: counts per N (> 0).
        counts_per_torque: counts per N m (> 0).
        timeout: how long a read waits for a valid record, s (> 0).
        rate_hz: the sensor's RDT output rate, Hz (> 0): the nominal rate the records' sample times
            are estimated with; None: no estimate (sample time = when taken off the socket).
        buffer_seconds: how many seconds of records (at ``rate_hz``) the socket's receive buffer
            holds, s (> 0; the kernel caps it at net.core.rmem_max).

    Raises:
        InputError: a bad argument (named in the message).
    """

    def __init__(
        self,
        host: str,
        port: int = RDT_PORT,
        counts_per_force: float = 1e6,
        counts_per_torque: float = 1e6,
        timeout: float = 0.1,
        rate_hz: float | None = None,
        buffer_seconds: float = 0.25,
    ) -> None:
        self.host = _check_host(host)
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 1 <= int(port) <= 65535:
            raise InputError(f"NetFTClient port must be an integer in 1..65535, got {port!r}")
        self.port = int(port)
        self.counts_per_force = _positive(counts_per_force, "counts_per_force")
        self.counts_per_torque = _positive(counts_per_torque, "counts_per_torque")
        self.timeout = _positive(timeout, "timeout")
        self.clock = None if rate_hz is None else StreamClock(_positive(rate_hz, "rate_hz"))
        buffer_seconds = _positive(buffer_seconds, "buffer_seconds")
        self._scale = np.array([1.0 / self.counts_per_force] * 3 + [1.0 / self.counts_per_torque] * 3)
        # the kernel doubles what is asked and charges each datagram ~_DATAGRAM_COST bytes
        rcvbuf = _RCVBUF_DEFAULT if self.clock is None else max(
            _RCVBUF_MIN, int(buffer_seconds * self.clock.rate_hz * _DATAGRAM_COST / 2))
        self._sock: socket.socket | None = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            except OSError:
                pass  # the kernel's default buffer (~200 kB) still works
            self._sock.connect((self.host, self.port))
        except OSError as exc:
            self._sock.close()
            self._sock = None
            raise InputError(f"NetFTClient cannot open a UDP socket to {self.host}:{self.port}: {exc}") from None
        self._streaming = False
        self._last_seq: int | None = None
        self._seq_unwrapped = 0  # the last accepted rdt_sequence, unwrapped (the clock's record number)
        self.lost = 0
        self.out_of_order = 0
        self.bad_packets = 0
        self.received = 0
        self.superseded = 0

    # ---------------------------------------------------------------------------------------
    @property
    def local_address(self) -> tuple[str, int]:
        """(ip, port) the records must be sent to (the client's end of the socket)."""
        return self._socket().getsockname()

    @property
    def receive_buffer(self) -> int:
        """The socket's receive buffer as the kernel set it, bytes."""
        return int(self._socket().getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))

    @property
    def streaming(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._streaming

    def _socket(self) -> socket.socket:
        if self._sock is None:
            raise RuntimeError("NetFTClient is closed")
        return self._sock

    def _send(self, command: int, count: int = 0) -> None:
        try:
            self._socket().send(encode_request(command, count))
        except ConnectionRefusedError:
            # a pending ICMP "port unreachable" from an earlier datagram is reported instead of
            # sending this one; the error is now cleared, so send again
            self._socket().send(encode_request(command, count))

    def _drain(self, into: list[bytes] | None = None) -> None:
        """Take every datagram queued now, without waiting (into ``into``, or discarded)."""
        sock = self._socket()
        sock.setblocking(False)
        try:
            while into is None or len(into) < _MAX_BATCH:
                data = sock.recv(_RECV_BYTES)
                if into is not None:
                    into.append(data)
        except (BlockingIOError, InterruptedError, ConnectionRefusedError):
            pass
        finally:
            sock.setblocking(True)

    def start(self, count: int = 0) -> None:
        """Ask for ``count`` records (0: stream until ``stop()``); restarts the sequence accounting
        and the sample clock (``lost``, ``out_of_order``, ``bad_packets``, ``received`` and
        ``superseded`` keep counting)."""
        self._drain()  # datagrams of an earlier stream: their sequence numbers are stale
        self._last_seq = None
        self._seq_unwrapped = 0
        if self.clock is not None:
            self.clock.reset()
        self._send(CMD_START, count)
        self._streaming = True

    def stop(self) -> None:
        """Ask the sensor to stop streaming (command 0)."""
        self._send(CMD_STOP, 0)
        self._streaming = False

    def bias(self) -> None:
        """Ask the sensor to take its current reading as the zero (command 0x42)."""
        self._send(CMD_BIAS, 0)

    def read(self, timeout: float | None = None) -> NetFTSample:
        """The newest valid record queued (see :meth:`read_batch`; the others count as superseded).

        Raises:
            TimeoutError: no valid record arrived within the timeout.
        """
        return self.read_batch(timeout).sample(-1)

    def read_batch(self, timeout: float | None = None) -> NetFTBatch:
        """Every valid, newer record queued, oldest first: waits for a datagram, then takes all
        that are queued without waiting.

        Args:
            timeout: wait at most this long for a valid record, s (default: the client's ``timeout``).

        Raises:
            TimeoutError: no valid record arrived within the timeout (bad packets and
                out-of-order records do not extend it).
        """
        limit = self.timeout if timeout is None else _positive(timeout, "read timeout")
        sock = self._socket()
        deadline = time.monotonic() + limit
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                raise TimeoutError(f"no valid Net F/T record from {self.host}:{self.port} within {limit:g} s")
            sock.settimeout(remaining)
            try:
                datas = [sock.recv(_RECV_BYTES)]
            except TimeoutError:
                continue
            except ConnectionRefusedError:
                continue  # ICMP port unreachable from the sensor's address: nothing is listening yet
            self._drain(datas)
            batch = self._accept(datas, time.monotonic())
            if batch is not None:
                return batch

    def _accept(self, datas: list[bytes], taken: float) -> NetFTBatch | None:
        """The valid, newer records among ``datas`` (in arrival order), counted; None if none."""
        kept: list[bytes] = []
        numbers: list[int] = []
        for data in datas:
            if len(data) != RECORD_SIZE:
                self.bad_packets += 1
                continue
            rdt_seq = int.from_bytes(data[:4], "big")
            if self._last_seq is None:
                self._seq_unwrapped = rdt_seq
            else:
                step = (rdt_seq - self._last_seq) % _SEQ_MOD
                if step == 0 or step >= _SEQ_HALF:
                    self.out_of_order += 1
                    continue
                self.lost += step - 1
                self._seq_unwrapped += step
            self._last_seq = rdt_seq
            kept.append(data)
            numbers.append(self._seq_unwrapped)
        if not kept:
            return None
        k = len(kept)
        self.received += k
        self.superseded += k - 1
        joined = b"".join(kept)
        words = np.frombuffer(joined, dtype=">u4").reshape(k, 9).astype(np.int64)
        counts = np.frombuffer(joined, dtype=">i4").reshape(k, 9)[:, 3:].astype(np.int64)
        wrenches = counts * self._scale
        wrenches.setflags(write=False)
        if self.clock is None:
            times = np.full(k, taken)
        else:
            self.clock.observe(numbers[-1], taken)
            times = np.asarray(self.clock.sample_time(numbers), dtype=np.float64)
        return NetFTBatch(wrenches, times, taken, words[:, 2], counts, words[:, 0], words[:, 1])

    def close(self) -> None:
        """Stop the stream (if started) and close the socket; closing twice is harmless."""
        if self._sock is None:
            return
        try:
            if self._streaming:
                self.stop()
        except OSError:
            pass  # the socket is going away; a lost stop is what the sensor's owner change covers
        finally:
            self._sock.close()
            self._sock = None
            self._streaming = False

    def __enter__(self) -> NetFTClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

    def __repr__(self) -> str:
        return (
            f"NetFTClient({self.host}:{self.port}, received={self.received}, lost={self.lost}, "
            f"out_of_order={self.out_of_order}, bad_packets={self.bad_packets}, superseded={self.superseded})"
        )
