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
from robot_grinding_sim.hardware.netft import NetFTBatch, NetFTClient, NetFTSample

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


def read_all(client: NetFTClient, n: int) -> list[NetFTBatch]:
    """Batches until ``n`` valid records have been read (loopback delivers a datagram within the
    send call, so the records sent before a read are normally one batch)."""
    batches: list[NetFTBatch] = []
    while sum(len(b) for b in batches) < n:
        batches.append(client.read_batch())
    return batches


def seqs(batches: list[NetFTBatch]) -> list[int]:
    return [int(s) for b in batches for s in b.rdt_sequence]


def test_gaps_count_as_lost(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (1, 2, 5, 6, 10):
        server.record(seq)
    got = read_all(client, 5)
    assert seqs(got) == [1, 2, 5, 6, 10]
    assert client.lost == (5 - 2 - 1) + (10 - 6 - 1)
    assert client.out_of_order == 0 and client.received == 5
    assert client.superseded == 5 - len(got)


def test_a_read_takes_the_whole_backlog_and_returns_the_newest(server: RawServer, client: NetFTClient) -> None:
    """A reader that fell behind gets the newest record, not the oldest queued (issue 22: it once
    acted on records 2.8 s old, oldest first); the older ones come with it, counted as superseded."""
    _started(server, client)
    n = 100  # within the socket's buffer (~150 records without a rate)
    for seq in range(1, n + 1):
        server.record(seq, counts=(seq, 0, 0, 0, 0, 0), ft_seq=7 * seq)
    newest = client.read()
    assert (newest.rdt_sequence, newest.ft_sequence, newest.counts[0]) == (n, 7 * n, n)
    assert (client.received, client.superseded, client.lost) == (n, n - 1, 0)
    server.record(n + 1)
    batch = client.read_batch()
    assert batch.rdt_sequence.tolist() == [n + 1] and client.superseded == n - 1


def test_the_buffer_holds_a_fraction_of_a_second_and_what_it_drops_is_lost(server: RawServer) -> None:
    """The socket holds about buffer_seconds of records at the rate: a reader starved for longer
    finds the oldest of them (the kernel drops later arrivals, seen as lost); its next read is fresh."""
    rate, held = 1000.0, 0.1
    with NetFTClient("127.0.0.1", server.port, timeout=WAIT, rate_hz=rate, buffer_seconds=held) as c:
        _started(server, c)
        assert c.receive_buffer < 4 * held * rate * 832  # not the megabytes that held 2.8 s
        n = int(10 * held * rate)
        for seq in range(1, n + 1):
            server.record(seq)
        first = c.read_batch()
        assert 0.5 * held * rate <= len(first) < n / 2
        server.record(n + 1)
        fresh = c.read_batch()
        assert fresh.rdt_sequence.tolist() == [n + 1]
        assert c.lost == n - len(first) and c.received == len(first) + 1


def test_a_batch_is_every_valid_record_in_order(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (1, 2, 3):
        server.record(seq, counts=(seq * 1_000_000, 0, 0, 0, -seq, 0), ft_seq=10 + seq, status=seq)
    got = read_all(client, 3)
    wrenches = np.concatenate([b.wrenches for b in got])
    np.testing.assert_allclose(wrenches, [[k, 0, 0, 0, -k * 1e-6, 0] for k in (1.0, 2.0, 3.0)], atol=1e-15)
    assert np.concatenate([b.ft_sequence for b in got]).tolist() == [11, 12, 13]
    assert np.concatenate([b.status for b in got]).tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        got[0].wrenches[0, 0] = 1.0  # read-only, as a sample's wrench


def test_sample_times_step_with_the_sequence_at_the_nominal_rate(server: RawServer) -> None:
    """With the nominal rate, record n of a read is dated (newest's - n) / rate before the newest;
    the newest of the first read is dated when it was taken (the clock's first observation)."""
    with NetFTClient("127.0.0.1", server.port, timeout=WAIT, rate_hz=500.0) as c:
        _started(server, c)
        for seq in (1, 2, 4):
            server.record(seq)
        got = read_all(c, 3)
        times = np.concatenate([b.sample_times for b in got])
        first = got[0]
        assert first.sample_times[-1] == first.taken_at
        np.testing.assert_allclose(np.diff(times), [1 / 500, 2 / 500], rtol=0, atol=1e-9)
        server.record(5)
        s5 = c.read()
        assert s5.sample_time <= times[-1] + 1 / 500 + 1e-9  # the offset is a minimum: it only moves back
        assert s5.sample_time <= s5.received_at


def test_out_of_order_and_repeated_records_are_counted_and_skipped(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (1, 3, 2, 3, 4):  # 2 late (after 3), 3 repeated
        server.record(seq, counts=(seq, 0, 0, 0, 0, 0))
    got = read_all(client, 3)
    assert seqs(got) == [1, 3, 4]
    assert [int(c) for b in got for c in b.counts[:, 0]] == [1, 3, 4]  # what was returned is the record itself
    assert client.out_of_order == 2
    assert client.lost == 1  # the gap 1 -> 3; record 2 never reached the caller


def test_sequence_wraps_at_2_32(server: RawServer, client: NetFTClient) -> None:
    _started(server, client)
    for seq in (2**32 - 2, 2**32 - 1, 0, 2):
        server.record(seq)
    assert seqs(read_all(client, 4)) == [2**32 - 2, 2**32 - 1, 0, 2]
    assert (client.lost, client.out_of_order) == (1, 0)


@pytest.mark.parametrize("size", [0, 8, 35, 37, 72])
def test_wrong_size_packets_are_counted_and_skipped(server: RawServer, client: NetFTClient, size: int) -> None:
    _started(server, client)
    server.raw(bytes(range(size)))
    server.record(1, (1_000_000, 0, 0, 0, 0, 0))
    server.raw(b"\x00" * size)
    server.record(2, (2_000_000, 0, 0, 0, 0, 0))
    assert [float(w) for b in read_all(client, 2) for w in b.wrenches[:, 0]] == [1.0, 2.0]
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
        ({"host": "127.0.0.1", "rate_hz": 0.0}, "rate_hz"),
        ({"host": "127.0.0.1", "buffer_seconds": -1.0}, "buffer_seconds"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict, named: str) -> None:
    with pytest.raises(InputError, match=named):
        NetFTClient(**kwargs)
