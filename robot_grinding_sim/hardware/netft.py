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

Sequence accounting (``rdt_sequence`` is a uint32 that wraps; compared modulo 2**32):
- a record newer than the last accepted one by k > 1 adds k - 1 to ``lost``;
- a record not newer (older or repeated) adds 1 to ``out_of_order`` and is skipped; a swapped
  pair therefore shows as one lost record (the gap when the later record came first) and one
  out-of-order record (the earlier one arriving late, skipped);
- a datagram that is not 36 bytes adds 1 to ``bad_packets`` and is skipped.
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
# room for a few hundred ms of a 7 kHz stream while the reader is descheduled (kernel-capped)
_RCVBUF_BYTES = 4 << 20
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
        received_at: ``time.monotonic()`` when the datagram was read, s.
    """

    wrench: npt.NDArray[np.float64]
    counts: tuple[int, int, int, int, int, int]
    rdt_sequence: int
    ft_sequence: int
    status: int
    received_at: float


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

        with NetFTClient("192.168.1.1", counts_per_force=1e6, counts_per_torque=1e6) as ft:
            ft.start()
            sample = ft.read()          # NetFTSample, wrench (6,) in N, N m
            ft.bias()

    One thread reads (``read``); commands (``start``, ``stop``, ``bias``) may come from any
    thread. The socket is connected to (host, port), so datagrams from anyone else are dropped by
    the kernel.

    Args:
        host: the sensor's IPv4 address or a resolvable host name.
        port: its RDT port, 1..65535.
        counts_per_force: counts per N (> 0).
        counts_per_torque: counts per N m (> 0).
        timeout: how long ``read`` waits for a valid record, s (> 0).

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
    ) -> None:
        self.host = _check_host(host)
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 1 <= int(port) <= 65535:
            raise InputError(f"NetFTClient port must be an integer in 1..65535, got {port!r}")
        self.port = int(port)
        self.counts_per_force = _positive(counts_per_force, "counts_per_force")
        self.counts_per_torque = _positive(counts_per_torque, "counts_per_torque")
        self.timeout = _positive(timeout, "timeout")
        self._scale = np.array([1.0 / self.counts_per_force] * 3 + [1.0 / self.counts_per_torque] * 3)
        self._sock: socket.socket | None = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF_BYTES)
            except OSError:
                pass  # the kernel's default buffer still works, with less slack
            self._sock.connect((self.host, self.port))
        except OSError as exc:
            self._sock.close()
            self._sock = None
            raise InputError(f"NetFTClient cannot open a UDP socket to {self.host}:{self.port}: {exc}") from None
        self._streaming = False
        self._last_seq: int | None = None
        self.lost = 0
        self.out_of_order = 0
        self.bad_packets = 0
        self.received = 0

    # ---------------------------------------------------------------------------------------
    @property
    def local_address(self) -> tuple[str, int]:
        """(ip, port) the records must be sent to (the client's end of the socket)."""
        return self._socket().getsockname()

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

    def _drain(self) -> None:
        """Discard datagrams queued from an earlier stream (their sequence numbers are stale)."""
        sock = self._socket()
        sock.setblocking(False)
        try:
            while True:
                sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError, ConnectionRefusedError):
            pass
        finally:
            sock.setblocking(True)

    def start(self, count: int = 0) -> None:
        """Ask for ``count`` records (0: stream until ``stop()``); restarts the sequence accounting
        (``lost``, ``out_of_order``, ``bad_packets`` and ``received`` keep counting)."""
        self._drain()
        self._last_seq = None
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
        """The next valid, newer record.

        Args:
            timeout: wait at most this long, s (default: the client's ``timeout``).

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
                data = sock.recv(_RECV_BYTES)
            except TimeoutError:
                continue
            except ConnectionRefusedError:
                continue  # ICMP port unreachable from the sensor's address: nothing is listening yet
            now = time.monotonic()
            if len(data) != RECORD_SIZE:
                self.bad_packets += 1
                continue
            rdt_seq, ft_seq, status, *counts = RECORD.unpack(data)
            if self._last_seq is not None:
                step = (rdt_seq - self._last_seq) % _SEQ_MOD
                if step == 0 or step >= _SEQ_HALF:
                    self.out_of_order += 1
                    continue
                self.lost += step - 1
            self._last_seq = rdt_seq
            self.received += 1
            wrench = np.array(counts, dtype=np.float64) * self._scale
            wrench.setflags(write=False)
            return NetFTSample(wrench, tuple(counts), rdt_seq, ft_seq, status, now)  # type: ignore[arg-type]

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
            f"out_of_order={self.out_of_order}, bad_packets={self.bad_packets})"
        )
