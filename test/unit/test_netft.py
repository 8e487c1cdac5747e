"""NetFTClient against a minimal RDT server written here with raw socket + struct.

The server side is independent of robot_grinding_sim.hardware (its own struct layouts from the
ATI RDT description) and runs in the test's own thread: the client sends its request, the test
reads it, then sends exactly the datagrams each case needs, so nothing depends on timing.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.netft import NetFTClient, NetFTSample

WAIT = 5.0  # generous: only ever reached when something is broken


class RawServer:
    """The sensor's end: a UDP socket on loopback that records requests and sends raw records."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(WAIT)
        self.port = self.sock.getsockname()[1]
        self.peer: tuple[str, int] | None = None

    def request(self) -> tuple[int, int, int]:
        data, self.peer = self.sock.recvfrom(64)
        assert len(data) == 8, f"an RDT request is 8 bytes, got {len(data)}: {data!r}"
        return struct.unpack("!HHI", data)

    def record(self, rdt_seq: int, counts: tuple[int, ...] = (0,) * 6, ft_seq: int = 0, status: int = 0) -> None:
        assert self.peer is not None
        self.sock.sendto(struct.pack("!3I6i", rdt_seq, ft_seq, status, *counts), self.peer)

    def raw(self, data: bytes) -> None:
        assert self.peer is not None
        self.sock.sendto(data, self.peer)


@pytest.fixture()
def server() -> Iterator[RawServer]:
    s = RawServer()
    yield s
    s.sock.close()


@pytest.fixture()
def client(server: RawServer) -> Iterator[NetFTClient]:
    c = NetFTClient("127.0.0.1", server.port, counts_per_force=1e6, counts_per_torque=1e6, timeout=WAIT)
    yield c
    c.close()


def _started(server: RawServer, client: NetFTClient, count: int = 0) -> None:
    client.start(count)
    assert server.request() == (0x1234, 2, count)


def test_request_bytes_start_stop_bias(server: RawServer, client: NetFTClient) -> None:
    client.start()
    raw, peer = server.sock.recvfrom(64)
    assert raw == bytes.fromhex("1234 0002 00000000")
    assert peer == client.local_address
    server.peer = peer
    client.bias()
    assert server.sock.recvfrom(64)[0] == bytes.fromhex("1234 0042 00000000")
    client.stop()
    assert server.sock.recvfrom(64)[0] == bytes.fromhex("1234 0000 00000000")
    client.start(1000)
    assert server.request() == (0x1234, 2, 1000)


def test_counts_decode_to_newton_and_newton_metre(server: RawServer) -> None:
    cpf, cpt = 1_000_000.0, 2_500.0
    with NetFTClient("127.0.0.1", server.port, counts_per_force=cpf, counts_per_torque=cpt, timeout=WAIT) as c:
        _started(server, c)
        counts = (1_500_000, -2_000_000, 2**31 - 1, 2_500, -1, -(2**31))
        server.record(7, counts, ft_seq=123456, status=0x80000001)
        s = c.read()
    assert isinstance(s, NetFTSample)
    expected = [1.5, -2.0, (2**31 - 1) / cpf, 1.0, -1 / cpt, -(2**31) / cpt]
    np.testing.assert_allclose(s.wrench, expected, rtol=0, atol=1e-12)
    assert s.counts == counts
    assert (s.rdt_sequence, s.ft_sequence, s.status) == (7, 123456, 0x80000001)
    with pytest.raises(ValueError):
        s.wrench[0] = 0.0  # a sample is frozen, its array read-only


def test_big_endian_layout_by_hand(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    # the same record spelled out byte by byte: seq 1, ft 2, status 0, Fx = 0x00000010 = 16 counts,
    # Fz = 0xFFFFFFFF = -1 count, torques 0
    server.raw(bytes.fromhex("00000001 00000002 00000000 00000010 00000000 FFFFFFFF" + "00000000" * 3))
    s = client.read()
    assert (s.rdt_sequence, s.ft_sequence) == (1, 2)
    np.testing.assert_array_equal(s.counts, (16, 0, -1, 0, 0, 0))
    np.testing.assert_allclose(s.wrench, [16e-6, 0, -1e-6, 0, 0, 0], atol=1e-18)


def test_gaps_count_as_lost(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (1, 2, 5, 6, 10):
        server.record(seq)
    got = [client.read().rdt_sequence for _ in range(5)]
    assert got == [1, 2, 5, 6, 10]
    assert client.lost == (5 - 2 - 1) + (10 - 6 - 1)
    assert client.out_of_order == 0 and client.received == 5


def test_out_of_order_and_repeated_records_are_counted_and_skipped(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (1, 3, 2, 3, 4):  # 2 late (after 3), 3 repeated
        server.record(seq, counts=(seq, 0, 0, 0, 0, 0))
    got = [client.read() for _ in range(3)]
    assert [s.rdt_sequence for s in got] == [1, 3, 4]
    assert [s.counts[0] for s in got] == [1, 3, 4]  # what was returned is the record itself
    assert client.out_of_order == 2
    assert client.lost == 1  # the gap 1 -> 3; record 2 never reached the caller


def test_sequence_wraps_at_2_32(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (2**32 - 2, 2**32 - 1, 0, 2):
        server.record(seq)
    assert [client.read().rdt_sequence for _ in range(4)] == [2**32 - 2, 2**32 - 1, 0, 2]
    assert (client.lost, client.out_of_order) == (1, 0)


@pytest.mark.parametrize("size", [0, 8, 35, 37, 72])
def test_wrong_size_packets_are_counted_and_skipped(server: RawServer, client: NetFTClient, size: int) -> None:
    _started(server, client)
    server.raw(bytes(range(size)))
    server.record(1, (1_000_000, 0, 0, 0, 0, 0))
    server.raw(b"\x00" * size)
    server.record(2, (2_000_000, 0, 0, 0, 0, 0))
    assert [client.read().wrench[0] for _ in range(2)] == [1.0, 2.0]
    assert client.bad_packets == 2
    assert (client.lost, client.out_of_order) == (0, 0)


def test_timeout_when_nothing_valid_arrives(server: RawServer) -> None:
    with NetFTClient("127.0.0.1", server.port, timeout=0.05) as c:
        _started(server, c)
        with pytest.raises(TimeoutError):
            c.read()
        server.raw(b"short")  # a bad packet is not a valid record: still a timeout
        server.record(1)
        server.record(1)  # a repeat is not one either
        assert c.read().rdt_sequence == 1
        with pytest.raises(TimeoutError):
            c.read()
        assert (c.bad_packets, c.out_of_order) == (1, 1)


def test_start_forgets_the_previous_stream(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    server.record(500)
    assert client.read().rdt_sequence == 500
    server.record(501)  # still queued when the new stream is asked for: stale
    client.stop()
    assert server.request()[1] == 0
    _started(server, client)
    server.record(1)  # the sensor restarts its rdt_sequence at each request
    assert client.read().rdt_sequence == 1
    assert (client.lost, client.out_of_order) == (0, 0)


def test_context_manager_stops_and_closes(server: RawServer) -> None:
    with NetFTClient("127.0.0.1", server.port, timeout=WAIT) as c:
        _started(server, c)
    assert server.request() == (0x1234, 0, 0)
    with pytest.raises(RuntimeError, match="closed"):
        c.read()
    c.close()  # twice is harmless


def test_datagrams_from_another_address_are_not_read(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        other.bind(("127.0.0.1", 0))
        other.sendto(struct.pack("!3I6i", 99, 0, 0, 9, 9, 9, 9, 9, 9), client.local_address)
    server.record(1)
    assert client.read().rdt_sequence == 1
    assert client.bad_packets == 0


def test_localhost_name_resolves() -> None:
    with NetFTClient("localhost", 49152) as c:
        assert c.host.startswith("127.")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"host": ""}, "host"),
        ({"host": "   "}, "host"),
        ({"host": None}, "host"),
        ({"host": "not a host!"}, "host"),
        ({"host": "999.1.1.1"}, "host"),
        ({"host": "::1"}, "host"),
        ({"host": "127.0.0.1", "port": 0}, "port"),
        ({"host": "127.0.0.1", "port": 65536}, "port"),
        ({"host": "127.0.0.1", "port": 49152.0}, "port"),
        ({"host": "127.0.0.1", "counts_per_force": 0}, "counts_per_force"),
        ({"host": "127.0.0.1", "counts_per_torque": -1e6}, "counts_per_torque"),
        ({"host": "127.0.0.1", "counts_per_torque": float("nan")}, "counts_per_torque"),
        ({"host": "127.0.0.1", "timeout": 0}, "timeout"),
        ({"host": "127.0.0.1", "timeout": "soon"}, "timeout"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict, named: str) -> None:
    with pytest.raises(InputError, match=named):
        NetFTClient(**kwargs)
