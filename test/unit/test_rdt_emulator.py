"""RDTEmulator against a raw socket client written here, then NetFTClient + RDTEmulator together.

The raw client packs requests and unpacks records with its own struct formats (the ATI RDT
layout), independent of robot_grinding_sim.hardware.netft. Waits poll a condition with a
generous deadline; nothing asserts on timing.
"""

from __future__ import annotations

import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.netft import NetFTClient
from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator, RDTFaults, StampedReadings

WAIT = 10.0
REQ = struct.Struct("!HHI")
REC = struct.Struct("!3I6i")


def wait_for(cond: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class RawClient:
    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(WAIT)

    def send(self, command: int, count: int = 0) -> None:
        self.sock.sendto(REQ.pack(0x1234, command, count), self.address)

    def datagram(self, timeout: float = WAIT) -> bytes:
        self.sock.settimeout(timeout)
        return self.sock.recv(4096)

    def record(self) -> tuple[int, ...]:
        data = self.datagram()
        assert len(data) == 36
        return REC.unpack(data)

    def drain(self) -> list[bytes]:
        out = []
        self.sock.setblocking(False)
        try:
            while True:
                out.append(self.sock.recv(4096))
        except BlockingIOError:
            pass
        finally:
            self.sock.setblocking(True)
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture()
def make() -> Iterator[Callable[..., tuple[RDTEmulator, RawClient]]]:
    made: list[tuple[RDTEmulator, RawClient]] = []

    def _make(*args: object, **kwargs: object) -> tuple[RDTEmulator, RawClient]:
        emu = RDTEmulator(*args, **kwargs).start()  # type: ignore[arg-type]
        raw = RawClient(emu.address)
        made.append((emu, raw))
        return emu, raw

    yield _make
    for emu, raw in made:
        emu.close()
        raw.close()


#: these tests count records: an emulator descheduled on a loaded machine sends the samples it is
#: late for in a burst instead of skipping them (late_skips, tested on its own below)
LATE_OK = 100.0


def _finite_stream(emu: RDTEmulator, raw: RawClient, n: int) -> list[bytes]:
    """Ask for n records and collect every datagram once the emulator has finished them."""
    raw.send(2, n)
    wait_for(lambda: emu.requests and not emu.streaming, "the finite stream to end")
    return raw.drain()


def test_record_layout_is_big_endian(make: Callable) -> None:
    wrench = [1.5, -2.0, 0.0, 0.25, -0.001, 3.0]
    emu, raw = make(lambda t: wrench, rate_hz=500.0, counts_per_force=1e6, counts_per_torque=1e3, status=0x80000002)
    raw.send(2, 3)
    data = raw.datagram()
    assert len(data) == 36
    assert data[0:4] == b"\x00\x00\x00\x01"  # rdt_sequence 1
    assert data[8:12] == b"\x80\x00\x00\x02"  # status
    assert data[12:16] == (1_500_000).to_bytes(4, "big")
    assert data[16:20] == b"\xff\xe1\x7b\x80"  # -2,000,000 in two's complement
    assert data[24:28] == (250).to_bytes(4, "big")
    assert data[28:32] == b"\xff\xff\xff\xff"  # -1 count = -0.001 N m at 1000 counts/N m
    assert int.from_bytes(data[32:36], "big", signed=True) == 3000


def test_sequences_count_and_wrench_on_the_sample_grid(make: Callable) -> None:
    rate = 2000.0

    def src(t: float) -> list[float]:
        return [math.sin(t), t, -t, 0.5 * t, 0.0, 1.0]

    emu, raw = make(src, rate_hz=rate, max_lag=LATE_OK)
    recs = [REC.unpack(d) for d in _finite_stream(emu, raw, 200)]
    assert [r[0] for r in recs] == list(range(1, 201))
    ft = [r[1] for r in recs]
    assert all(b > a for a, b in zip(ft, ft[1:], strict=False))
    for r in recs:  # counts = round(source(ft_sequence / rate) * counts_per_unit)
        expected = np.rint(np.asarray(src(r[1] / rate)) * 1e6)
        np.testing.assert_array_equal(r[3:], expected)
    assert emu.sent == 200
    assert emu.owner == raw.sock.getsockname()


def test_stop_ends_the_stream_and_a_new_start_restarts_the_sequence(make: Callable) -> None:
    emu, raw = make(rate_hz=1000.0)
    raw.send(2, 0)
    first = [raw.record()[0] for _ in range(5)]
    assert first == [1, 2, 3, 4, 5]
    raw.send(0)
    wait_for(lambda: not emu.streaming, "stop")
    raw.drain()
    sent = emu.sent
    raw.send(0x42)  # a request the emulator answers without streaming: proves it read the stop first
    wait_for(lambda: len(emu.requests) == 3, "the bias request")
    assert emu.sent == sent and raw.drain() == []
    raw.send(2, 0)
    assert raw.record()[0] == 1
    assert [c for c, _, _ in emu.requests] == [2, 0, 0x42, 2]


def test_bias_subtracts_the_reading_at_the_bias(make: Callable) -> None:
    value = np.array([10.0, -5.0, 2.0, 0.3, -0.2, 0.1])
    emu, raw = make(lambda t: value, rate_hz=1000.0)
    raw.send(2, 0)
    assert raw.record()[3:] == (10_000_000, -5_000_000, 2_000_000, 300_000, -200_000, 100_000)
    raw.send(0x42)
    wait_for(lambda: len(emu.requests) == 2, "the bias request")
    np.testing.assert_array_equal(emu.bias_counts, np.rint(value * 1e6))
    value[:] = [11.0, -5.0, 2.5, 0.3, -0.2, 0.0]  # the load changes after the bias
    raw.drain()
    wait_for(lambda: emu.sent > 0 and raw.record()[3:] == (1_000_000, 0, 500_000, 0, 0, -100_000),
             "records showing the change since the bias")


def test_last_requester_owns_the_stream(make: Callable) -> None:
    emu, a = make(rate_hz=1000.0)
    b = RawClient(emu.address)
    try:
        a.send(2, 0)
        a.record()
        b.send(2, 0)
        assert b.record()[0] == 1
        wait_for(lambda: emu.owner == b.sock.getsockname(), "the owner to change")
        a.drain()  # what was in flight before the switch
        n0 = emu.sent
        wait_for(lambda: emu.sent >= n0 + 20, "more records")
        assert a.drain() == []
    finally:
        b.close()


def test_drop_leaves_gaps_of_exactly_the_dropped_records(make: Callable) -> None:
    emu, raw = make(rate_hz=4000.0, faults=RDTFaults(drop_fraction=0.3), seed=3, max_lag=LATE_OK)
    n = 1000
    seqs = [REC.unpack(d)[0] for d in _finite_stream(emu, raw, n)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and set(seqs) <= set(range(1, n + 1))
    assert n - len(seqs) == emu.dropped
    assert abs(emu.dropped - 0.3 * n) < 5 * math.sqrt(n * 0.3 * 0.7)  # binomial, 5 sigma


def test_reorder_swaps_adjacent_pairs_only(make: Callable) -> None:
    emu, raw = make(rate_hz=4000.0, faults=RDTFaults(reorder_fraction=0.2), seed=5, max_lag=LATE_OK)
    n = 1000
    seqs = [REC.unpack(d)[0] for d in _finite_stream(emu, raw, n)]
    swaps = [i for i in range(len(seqs) - 1) if seqs[i + 1] < seqs[i]]
    assert len(swaps) == emu.reordered > 0
    for i in swaps:
        assert seqs[i] == seqs[i + 1] + 1  # the held record came right after its successor
    # everything arrived except possibly a record still held when the count ran out
    assert set(range(1, n)) <= set(seqs) and len(seqs) == emu.sent


def test_corrupt_sends_wrong_size_datagrams_in_place_of_records(make: Callable) -> None:
    emu, raw = make(rate_hz=4000.0, faults=RDTFaults(corrupt_fraction=0.2), seed=7, max_lag=LATE_OK)
    n = 1000
    data = _finite_stream(emu, raw, n)
    bad = [d for d in data if len(d) != 36]
    good = [REC.unpack(d)[0] for d in data if len(d) == 36]
    assert len(bad) == emu.corrupted > 0
    assert len(good) + len(bad) == n
    assert good == sorted(good) and set(good) <= set(range(1, n + 1))


def test_silence_on_demand_and_the_gap_after_it(make: Callable) -> None:
    emu, raw = make(rate_hz=2000.0)
    raw.send(2, 0)
    raw.record()
    emu.silence(True)
    wait_for(lambda: emu.silenced >= 5, "records to be withheld")
    before = [REC.unpack(d)[0] for d in raw.drain()]
    wait_for(lambda: emu.silenced >= 15, "more records to be withheld")
    assert raw.drain() == []
    last = before[-1] if before else 1
    emu.silence(False)
    nxt = raw.record()[0]
    assert nxt - last - 1 >= 15  # the sensor kept counting while silent


def test_silent_after_a_time(make: Callable) -> None:
    rate, after = 2000.0, 0.2
    emu, raw = make(rate_hz=rate, faults=RDTFaults(silent_after=after))
    raw.send(2, 0)
    wait_for(lambda: emu.silenced >= 10, "the emulator to fall silent")
    recs = [REC.unpack(d) for d in raw.drain()]
    assert all(r[1] / rate < after for r in recs)
    assert raw.drain() == []


def test_delay_holds_every_datagram_then_releases_a_burst_in_order(make: Callable) -> None:
    """The delay fault (a backlog made on purpose): nothing leaves before its sample instant + delay
    (arrival times here are lower bounds of the send times: the assertion holds on any load); set
    back to 0, what was held leaves at once, in order, and the stream goes on."""
    rate, delay = 1000.0, 0.2
    emu, raw = make(rate_hz=rate)
    raw.send(2, 0)
    raw.record()
    emu.faults = RDTFaults(delay=delay)
    wait_for(lambda: emu.held >= 100, "records to be held")
    late: list[tuple[float, tuple[int, ...]]] = []
    deadline = time.monotonic() + WAIT
    while len(late) < 50 and time.monotonic() < deadline:  # records that left under the delay
        data = raw.datagram()
        late.append((time.monotonic(), REC.unpack(data)))
    held_at = [r[1] for _, r in late]  # ft_sequence: the sample instants, in order
    for arrived, r in late[5:]:  # (the first few may have left before the fault was set)
        assert arrived >= emu.epoch + r[1] / rate + delay - 1e-6, (arrived - emu.epoch, r[1] / rate)
    n_held = emu.held
    emu.faults = RDTFaults()
    wait_for(lambda: emu.held == 0, "the burst")
    burst = [REC.unpack(d) for d in raw.drain()]
    assert len(burst) >= n_held
    seqs = [r[0] for _, r in late] + [r[0] for r in burst]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert held_at == sorted(held_at)
    nxt = raw.record()
    assert nxt[0] > seqs[-1]


def test_late_skips_use_the_sequence_numbers_they_skip(make: Callable) -> None:
    """A starved emulator skips samples (max_lag), and their rdt_sequence numbers go with them, so
    rdt_sequence keeps the sensor's clock: rdt_sequence - ft_sequence is the same for every record."""
    calls = [0]

    def stalling(t: float) -> list[float]:  # the emulator's thread stalls 80 ms every 100 samples
        calls[0] += 1
        if calls[0] % 100 == 50:
            time.sleep(0.08)
        return [0.0] * 6

    emu, raw = make(stalling, rate_hz=2000.0, max_lag=0.05)
    raw.send(2, 0)
    wait_for(lambda: emu.late_skips >= 3, "late skips")
    raw.send(0, 0)
    wait_for(lambda: not emu.streaming, "the stream to stop")
    recs = [REC.unpack(d) for d in raw.drain()]
    assert len(recs) > 10 and emu.skipped > 0
    assert len({r[0] - r[1] for r in recs}) == 1, recs[:5]


def test_bad_requests_are_ignored(make: Callable) -> None:
    emu, raw = make(rate_hz=1000.0)
    raw.sock.sendto(b"\x12\x34\x00\x02", emu.address)  # too short
    raw.sock.sendto(REQ.pack(0x4321, 2, 0), emu.address)  # wrong header
    raw.sock.sendto(REQ.pack(0x1234, 7, 0), emu.address)  # unknown command
    wait_for(lambda: emu.bad_requests == 3, "bad requests to be counted")
    assert emu.requests == [] and not emu.streaming


def test_a_failing_source_stops_the_stream(make: Callable) -> None:
    def src(t: float) -> list[float]:
        raise RuntimeError("model blew up")

    emu, raw = make(src, rate_hz=1000.0)
    raw.send(2, 0)
    wait_for(lambda: emu.error is not None, "the error")
    assert isinstance(emu.error, RuntimeError) and not emu.streaming


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"rate_hz": 0}, "rate_hz"),
        ({"rate_hz": float("inf")}, "rate_hz"),
        ({"port": -1}, "port"),
        ({"counts_per_force": 0}, "counts_per_force"),
        ({"status": -1}, "status"),
        ({"status": 1 << 32}, "status"),
        ({"host": "8.8.8.8"}, "host"),
        ({"source": 5}, "source"),
        ({"faults": "none"}, "faults"),
    ],
)
def test_bad_arguments(kwargs: dict, named: str) -> None:
    with pytest.raises(InputError, match=named):
        RDTEmulator(**kwargs)


@pytest.mark.parametrize("kwargs", [{"drop_fraction": 1.5}, {"reorder_fraction": -0.1}, {"silent_after": -1.0}])
def test_bad_faults(kwargs: dict) -> None:
    with pytest.raises(InputError, match=next(iter(kwargs))):
        RDTFaults(**kwargs)


# ------------------------------------------------------------------------------------------
# client + emulator


def test_client_and_emulator_at_3_khz_lose_nothing() -> None:
    rate, n = 3000.0, 1500  # ~0.5 s of stream

    def src(t: float) -> list[float]:
        return [math.cos(5 * t), 2.0, -t, 0.01 * t, 0.0, -0.5]

    # max_lag: a starved emulator catches up in a burst rather than skipping samples (a loaded machine);
    # buffer_seconds: the socket holds what arrives while this reader is starved
    with RDTEmulator(src, rate_hz=rate, counts_per_force=1e6, counts_per_torque=1e6, max_lag=100.0) as emu, \
            NetFTClient(*emu.address, counts_per_force=1e6, counts_per_torque=1e6, timeout=WAIT, rate_hz=rate,
                        buffer_seconds=2.0) as client:
        client.start(n)
        batches = []
        while sum(len(b) for b in batches) < n:
            batches.append(client.read_batch())
        with pytest.raises(TimeoutError):
            client.read(timeout=0.2)
    seqs = np.concatenate([b.rdt_sequence for b in batches])
    assert seqs.tolist() == list(range(1, n + 1))
    assert (client.lost, client.out_of_order, client.bad_packets, client.received) == (0, 0, 0, n)
    assert client.superseded == n - len(batches)
    assert emu.sent == n
    wrenches = np.concatenate([b.wrenches for b in batches])
    ft = np.concatenate([b.ft_sequence for b in batches])
    err = max(np.abs(w - np.asarray(src(k / rate))).max() for w, k in zip(wrenches, ft, strict=True))
    assert err <= 0.5e-6 + 1e-12  # rounding to a count


def test_client_dates_a_backlog_by_the_sensor_clock() -> None:
    """Issue 22: the client dated each record when it took it off the socket, so a reading that had
    waited 0.3 s looked fresh. With the nominal rate it dates records by their rdt_sequence: while
    the emulator's delay fault holds every record 0.3 s, the newest reading of each read is 0.3 s
    old by the client's estimate, which matches the true send instant (the emulator's sample grid,
    ``epoch + ft_sequence / rate``) to within the smallest delay the client has seen; with the
    delay off, the burst of held records comes in one read (or a few), dated right, all but the
    newest of each read superseded.

    The tolerance (TOL) is for a reader starved on a loaded machine during the first, prompt
    0.2 s (the estimate learns from the promptest read): far below the 0.3 s the old client missed."""
    rate, delay, TOL = 1000.0, 0.3, 0.05
    with RDTEmulator(rate_hz=rate) as emu, NetFTClient(*emu.address, timeout=WAIT, rate_hz=rate) as c:
        c.start()
        t_end = time.monotonic() + 0.2
        while time.monotonic() < t_end:  # prompt: the clock learns the offset
            c.read_batch()
        emu.faults = RDTFaults(delay=delay)
        worst = 0.0
        ages = []
        t_end = time.monotonic() + 2 * delay
        while time.monotonic() < t_end:
            b = c.read_batch()
            true = emu.epoch + b.ft_sequence / rate
            worst = max(worst, float(np.abs(b.sample_times - true).max()))
            ages.append(b.taken_at - b.newest_time)
        assert worst <= TOL, worst
        assert max(ages) >= delay - TOL, max(ages)  # the old client: ~0
        held, sup0, seen0 = emu.held, c.superseded, c.received + c.lost
        emu.faults = RDTFaults()
        # the held records leave at once; the client reads once they are all in its socket (on a
        # loaded machine the emulator's thread may be descheduled half-way through sending them)
        wait_for(lambda: emu.held == 0, "the emulator to send what it held")
        burst = []  # in one read, or a few (the socket holds 0.25 s: the rest are counted lost)
        while c.received + c.lost - seen0 < held:
            burst.append(c.read_batch())
        for b in burst:
            true = emu.epoch + b.ft_sequence / rate
            assert float(np.abs(b.sample_times - true).max()) <= TOL
        assert len(burst) < held / 5  # a few reads (one record a read: the old client's way)
        assert c.superseded - sup0 == sum(len(b) for b in burst) - len(burst)


def test_client_counts_what_the_emulator_injected() -> None:
    n = 2000
    faults = RDTFaults(drop_fraction=0.05, corrupt_fraction=0.05)
    with RDTEmulator(rate_hz=4000.0, faults=faults, seed=11, max_lag=100.0) as emu, \
            NetFTClient(*emu.address, timeout=WAIT, rate_hz=4000.0, buffer_seconds=2.0) as c:
        c.start(n)
        seqs: list[int] = []
        while True:  # read along (the socket holds a fraction of a second), until the stream has ended
            try:
                seqs += c.read_batch(timeout=0.2).rdt_sequence.tolist()
            except TimeoutError:
                if emu.requests and not emu.streaming:
                    break
    missing = n - emu.sent
    assert missing == emu.dropped + emu.corrupted > 0
    assert c.bad_packets == emu.corrupted
    assert c.received == len(seqs) == emu.sent and c.out_of_order == 0
    # a gap is what the client can see: missing records between its first and last
    assert c.lost == missing - (seqs[0] - 1) - (n - seqs[-1])


# ------------------------------------------------------------------------------------------
# a source on another clock (until): an emulated sensor on a lagging emulated arm's clock

#: the readings' stamp of emulator time 0 (any clock: the arm's stamps are wall-clock seconds)
ORIGIN = 1000.0
#: readings come at this rate (the emulated arm's), each Fx = its index j in mN (counts j * 1000)
READING_RATE = 500.0


class LaggingArm:
    """A thread adding readings j stamped ``ORIGIN + j / READING_RATE`` to a StampedReadings no
    earlier than ``lag(j)`` s after that instant on the emulator's clock (an arm lagging real time),
    until ``stop_after`` readings; Fx of reading j is j mN."""

    def __init__(self, emu: RDTEmulator, readings: StampedReadings, lag: Callable[[int], float],
                 stop_after: int = 10**9, skip: Callable[[int], int] = lambda j: j) -> None:
        self.emu, self.readings, self.lag, self.stop_after, self.skip = emu, readings, lag, stop_after, skip
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.added = 0

    def _run(self) -> None:
        j = 0
        while not self.stopped.is_set() and self.added < self.stop_after:
            j = self.skip(j)
            due = j / READING_RATE + self.lag(j)
            while self.emu.clock() < due and not self.stopped.is_set():
                time.sleep(0.0005)
            self.readings.add(ORIGIN + j / READING_RATE, [j * 1e-3, 0, 0, 0, 0, 0])
            self.added += 1
            j += 1

    def __enter__(self) -> LaggingArm:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def _lockstep(make: Callable, rate: float, readings: StampedReadings, **kwargs: object) -> tuple[RDTEmulator,
                                                                                                 RawClient]:
    emu, raw = make(readings.source, rate_hz=rate, until=readings.until, **kwargs)
    readings.origin = ORIGIN  # the stamp clock reads ORIGIN at emulator time 0
    return emu, raw


def _records_for(raw: RawClient, n: int) -> list[tuple[float, tuple[int, ...]]]:
    out = []
    while len(out) < n:
        data = raw.datagram()
        out.append((time.monotonic(), REC.unpack(data)))
    return out


def test_a_source_on_a_lagging_clock_holds_the_stream_to_its_own_instants(make: Callable) -> None:
    """Issue 21: netft_emulator served the newest reading on the wall-clock grid, so while the
    emulated arm lagged real time each record carried a reading from up to the lag earlier than its
    sample instant. With ``until`` each record k carries the reading of its own instant (stamped at
    or before ORIGIN + k / rate: reading k // 2 here), leaves no earlier than that reading existed
    (arrival >= epoch + k / rate + lag: a lower bound of the send, true on any load), and the stream
    is held, not skipped: rdt_sequence and ft_sequence both count up by one."""
    rate, lag = 1000.0, 0.3
    readings = StampedReadings(silence_timeout=5.0)
    emu, raw = _lockstep(make, rate, readings, counts_per_force=1e6, max_lag=LATE_OK)
    with LaggingArm(emu, readings, lambda j: lag):
        wait_for(lambda: readings.added > 0, "the first reading")
        raw.send(2, 0)
        recs = _records_for(raw, 600)
    rdt = [r[0] for _, r in recs]
    ft = [r[1] for _, r in recs]
    assert rdt == list(range(1, len(recs) + 1))
    assert ft == list(range(ft[0], ft[0] + len(recs)))
    for arrived, r in recs:
        assert r[3] == (r[1] // 2) * 1000, (r[1], r[3])  # Fx counts: reading k // 2, in mN
        assert arrived >= emu.epoch + r[1] / rate + lag - 1e-6, (arrived - emu.epoch, r[1] / rate)


def test_a_source_that_jumps_ahead_skips_the_grid_with_it(make: Callable) -> None:
    """An arm that skips a stall (its stamps jump forward 0.4 s): the emulator, judging max_lag
    against the source's horizon, skips the samples too (late_skips) and their rdt_sequence numbers
    with them (rdt_sequence - ft_sequence stays the same), and every record is still the reading of
    its own instant."""
    rate, jump_at, jump = 1000.0, 200, int(0.4 * READING_RATE)
    readings = StampedReadings(silence_timeout=5.0)
    emu, raw = _lockstep(make, rate, readings, counts_per_force=1e6, max_lag=0.1)
    # lags 0.45 s until reading jump_at, then jumps forward 0.4 s of readings (0.05 s behind after)
    with LaggingArm(emu, readings, lambda j: 0.45 if j < jump_at else 0.05,
                    skip=lambda j: j + jump if j == jump_at else j):
        wait_for(lambda: readings.added > 0, "the first reading")
        raw.send(2, 0)
        recs = [r for _, r in _records_for(raw, 800)]
    assert emu.late_skips >= 1
    assert len({r[0] - r[1] for r in recs}) == 1
    assert max(b[1] - a[1] for a, b in zip(recs, recs[1:], strict=False)) >= 0.3 * rate
    for r in recs:
        assert r[3] == (r[1] // 2) * 1000, (r[1], r[3])


def test_a_silent_source_streams_its_last_reading_on_the_wall_clock(make: Callable) -> None:
    """The readings stop (the arm's node died): after silence_timeout the emulator streams the last
    reading on its own clock, as a real sensor keeps sampling; a reading that comes later, stamped
    before instants already sent, holds the stream until the source passes the grid."""
    rate, lag, n = 1000.0, 0.2, 100
    readings = StampedReadings(silence_timeout=0.3)
    emu, raw = _lockstep(make, rate, readings, counts_per_force=1e6, max_lag=0.1)
    with LaggingArm(emu, readings, lambda j: lag, stop_after=n) as arm:
        wait_for(lambda: readings.added > 0, "the first reading")
        raw.send(2, 0)
        wait_for(lambda: arm.added == n, "the readings to stop")
        last = (n - 1) / READING_RATE  # emulator time of the last reading
        recs = [r for _, r in _records_for(raw, 400)]
    beyond = [r for r in recs if r[1] / rate > last + 0.1]
    assert beyond, recs[-1]
    assert all(r[3] == (n - 1) * 1000 for r in beyond)  # the last reading, streamed on
    assert len({r[0] - r[1] for r in recs}) == 1  # (a skip to the wall clock uses its rdt_sequence numbers)
    readings.silence_timeout = 5.0  # (this process may be starved of CPU longer than 0.3 s below)
    readings.add(ORIGIN + last + 0.001, [0.5, 0, 0, 0, 0, 0])  # late, and behind the grid sent
    assert emu.last_sample is not None and readings.until() < emu.last_sample
    # the stream goes quiet (held) once what was on its way has come (before the fix: the wall clock's)
    deadline = time.monotonic() + WAIT
    tail = []
    while True:
        try:
            tail.append(REC.unpack(raw.datagram(timeout=0.2)))
        except TimeoutError:
            break
        assert time.monotonic() < deadline, "the stream was not held"


def test_stamped_readings_serve_by_stamp() -> None:
    t = [0.0]
    readings = StampedReadings(silence_timeout=1.0, keep=0.5, monotonic=lambda: t[0])
    assert readings.until() == math.inf and readings.source(0.0).tolist() == [0.0] * 6
    readings.origin = 10.0
    for j in range(5):
        readings.add(10.0 + 0.1 * j, [j, 0, 0, 0, 0, 0])
    readings.add(10.05, [9, 0, 0, 0, 0, 0])  # out of order: ignored
    assert readings.out_of_order == 1 and readings.added == 5
    assert readings.until() == pytest.approx(0.4)
    assert readings.source(0.25)[0] == 2 and readings.source(0.3)[0] == 3 and readings.source(9.0)[0] == 4
    t[0] = 1.5
    assert readings.until() == math.inf  # silent for more than silence_timeout
    with pytest.raises(InputError, match="silence_timeout"):
        StampedReadings(silence_timeout=0.0)


def test_a_source_far_behind_is_held_at_most_max_hold(make: Callable) -> None:
    """An arm 0.5 s behind with max_hold 0.1 s: the stream is held max_hold behind the wall clock
    (each record arrives at least max_hold after its instant: a lower bound of the send, true on any
    load), not held to the arm: its records carry the newest reading the source had, about
    lag - max_hold older than their instants (checked: at least 0.3 s older, for most records)."""
    rate, lag, hold = 1000.0, 0.5, 0.1
    readings = StampedReadings(silence_timeout=5.0)
    emu, raw = _lockstep(make, rate, readings, counts_per_force=1e6, max_lag=LATE_OK, max_hold=hold)
    with LaggingArm(emu, readings, lambda j: lag):
        wait_for(lambda: readings.added > 0, "the first reading")
        raw.send(2, 0)
        recs = _records_for(raw, 400)
    for arrived, r in recs:
        assert arrived >= emu.epoch + r[1] / rate + hold - 1e-6
    # the stream is not held to the arm: its newest instants are ahead of the readings they carry
    late = [r for _, r in recs[100:] if r[3] // 1000 <= r[1] // 2 - int((lag - hold - 0.1) * READING_RATE)]
    assert len(late) >= 250, [(r[1], r[3] // 1000) for _, r in recs[100:110]]
    with pytest.raises(InputError, match="max_hold"):
        RDTEmulator(max_hold=0.0)


def test_the_server_thread_takes_its_niceness(make: Callable) -> None:
    """``nice``: the server thread's own niceness (5 above this process's own: raising it needs no
    privilege, and a test run under ``nice`` still tells the two apart), not the process's."""
    import os

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    want = min(base + 5, 19)
    if want == base:
        pytest.skip("this process already runs at the largest niceness")
    emu, raw = make(rate_hz=1000.0, nice=want)
    raw.send(2, 0)
    raw.record()
    assert emu.nice_error is None and emu._thread is not None
    tid = emu._thread.native_id
    assert tid is not None and os.getpriority(os.PRIO_PROCESS, tid) == want
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
