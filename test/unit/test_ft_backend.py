"""F/T backends behind one interface (hardware/ft_backend.py) and the Net F/T's (hardware/netft_backend.py).

The registry: a backend registered with one line is selected by its name, an unknown name is a
ParameterError naming ``ft_backend``. The reader thread of a threaded backend delivers every read
and calls ``on_idle`` after each, and nothing after :meth:`stop`. The Net F/T backend against the
protocol-level emulator (RDTEmulator on loopback): readings delivered in the emulator's units, a
sensor that reports an error (status bit 31) counted and not delivered, a bad address refused
naming ``ft_sensor_ip`` before anything is sent.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.hardware import ft_backend as fb
from robot_grinding_sim.hardware.ft_backend import FTBackend, FTContext, ThreadedFTBackend, make_ft_backend
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.hardware.netft_backend import STATUS_ERROR, NetFTBackend
from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator

W = np.array([3.0, -1.5, 12.0, 0.2, -0.1, 0.05])


def one_reading(t: float) -> FTReadings:
    return FTReadings(W[None].copy(), np.array([t]), t, np.zeros(1, dtype=np.int64))


class CountingBackend(ThreadedFTBackend):
    """A made-up brand: every read returns one reading, numbered."""

    name = "counting"

    def __init__(self, params, context) -> None:
        super().__init__(params, context)
        self.reads = 0
        self.started = self.stopped = 0

    def start_device(self) -> None:
        self.started += 1

    def stop_device(self) -> None:
        self.stopped += 1

    def read(self) -> FTReadings | None:
        self.reads += 1
        time.sleep(0.001)
        return one_reading(float(self.reads)) if self.reads % 3 else None  # every third read: a timeout


@pytest.fixture
def registry():
    saved = dict(fb.FT_BACKENDS)
    yield fb.FT_BACKENDS
    fb.FT_BACKENDS.clear()
    fb.FT_BACKENDS.update(saved)


def test_a_new_backend_is_one_registry_line_and_selected_by_its_name(registry) -> None:
    fb.register_ft_backend("counting", CountingBackend)  # the one line
    backend = make_ft_backend("counting", {}, FTContext(period=0.002))
    assert type(backend) is CountingBackend
    # the shipped ones are imported by name when selected
    assert fb.ft_backend_class("netft") is NetFTBackend
    assert "topic" in registry and isinstance(registry["topic"], str)


def test_an_unknown_backend_names_the_parameter(registry) -> None:
    with pytest.raises(ParameterError, match="parameter 'ft_backend': 'ati-axia' is not a known F/T backend"):
        make_ft_backend("ati-axia", {}, FTContext(period=0.002))
    fb.register_ft_backend("broken", "robot_grinding_sim.hardware.ft_stream:StreamClock")
    with pytest.raises(ParameterError, match="not an FTBackend class"):
        make_ft_backend("broken", {}, FTContext(period=0.002))


def test_the_reader_thread_delivers_every_read_and_stops() -> None:
    got: list[float] = []
    idle = threading.Semaphore(0)
    backend = CountingBackend({}, FTContext(period=0.002))
    backend.start(lambda r: got.append(r.newest_time), idle.release)
    for _ in range(30):
        assert idle.acquire(timeout=10)
    backend.stop()
    assert backend.started == 1 and backend.stopped == 1
    n_reads, n_got = backend.reads, len(got)
    # every read with readings delivered, in order; timeouts delivered nothing
    assert got == [float(k) for k in range(1, n_reads + 1) if k % 3][:n_got]
    assert n_got >= n_reads * 2 // 3 - 1
    time.sleep(0.02)
    assert backend.reads == n_reads  # no read after stop()


def test_a_failing_read_is_logged_once_and_retried() -> None:
    said: list[tuple[str, str]] = []

    class Flaky(ThreadedFTBackend):
        name = "flaky"
        n = 0

        def read(self) -> FTReadings | None:
            self.n += 1
            if self.n < 5:
                raise OSError("network is unreachable")
            return one_reading(float(self.n))

    got = threading.Event()
    b = Flaky({}, FTContext(period=0.001, log=lambda level, text: said.append((level, text))))
    b.start(lambda r: got.set())
    assert got.wait(10)
    b.stop()
    assert said == [("error", "flaky: OSError: network is unreachable")]


def netft_params(port: int, **extra) -> dict:
    return {"ft_sensor_ip": "127.0.0.1", "ft_port": port, "counts_per_force": 1e6, "counts_per_torque": 1e6,
            "ft_rate": 500.0, **extra}


def test_the_netft_backend_streams_the_emulators_readings() -> None:
    with RDTEmulator(lambda t: W, rate_hz=500.0) as emu:
        backend = make_ft_backend("netft", netft_params(emu.address[1]), FTContext(period=0.01))
        backend.connect()
        got: list[FTReadings] = []
        enough = threading.Event()

        def take(r: FTReadings) -> None:
            got.append(r)
            if sum(len(x) for x in got) >= 50:
                enough.set()

        backend.start(take)
        assert enough.wait(20)
        backend.stop()
        backend.disconnect()
    w = np.concatenate([r.wrenches for r in got])
    np.testing.assert_allclose(w, np.tile(W, (len(w), 1)), atol=1e-6)  # counts of 1e-6 N
    times = np.concatenate([r.sample_times for r in got])
    assert np.all(np.diff(times) > 0)  # dated by the sensor's clock, oldest first
    d = backend.diagnostics()
    assert d["ft_sensor_ip"] == "127.0.0.1"


def test_records_the_sensor_flags_as_errors_are_counted_not_delivered() -> None:
    with RDTEmulator(lambda t: W, rate_hz=500.0, status=STATUS_ERROR) as emu:
        backend = NetFTBackend(netft_params(emu.address[1]), FTContext(period=0.01))
        backend.connect()
        got: list[FTReadings] = []
        backend.start(got.append)
        deadline = time.monotonic() + 20
        while backend.status_errors < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        backend.close()
    assert backend.status_errors >= 20 and got == []


@pytest.mark.parametrize(("ip", "said"), [
    ("", "empty: set the Net F/T's address"), ("10.0.0.256", "'10.0.0.256' is not an IP address"),
    ("ft-sensor.local", "is not an IP address"), ("::1", "IPv4 only"), ("224.0.0.1", "not the address of one device"),
])
def test_a_bad_address_names_ft_sensor_ip(ip: str, said: str) -> None:
    with pytest.raises(ParameterError, match="parameter 'ft_sensor_ip'") as info:
        NetFTBackend(netft_params(49152, ft_sensor_ip=ip), FTContext(period=0.01))
    assert said in str(info.value)


def test_the_base_interface_needs_nothing_of_a_push_backend() -> None:
    b = FTBackend({}, FTContext(period=0.01))
    b.connect()
    b.start(lambda r: None)
    b.close()
    assert b.diagnostics() == {}
