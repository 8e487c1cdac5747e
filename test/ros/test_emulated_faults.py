"""Faults of the whole cell in real mode (issue 10): ``grinding emulate`` + ``grinding bringup real``.

test_hardware_driver checks each fault on the driver alone (an RDTEmulator in the test process, a
fake arm that never moves). Here the whole cell runs a plan: the emulated arm follows the
executive's trajectory through hardware_driver, its contact side computes the true force, the
emulated Net F/T (netft_emulator) serves it over UDP, and the faults are switched at run time on
netft_emulator (``corrupt_fraction`` by ``ros2 param set``, ``~/silence``) and on the driver
(``~/emergency_stop``). In one session, in order:

1. corrupt records (30 %) at rest: counted on the driver's /diagnostics (``ft_bad_packets``) and
   ignored: the compensated force stays what the resting tool reads (the emulated cell's bias, which
   the driver does not know; under 1.5 N) and nothing stops;
2. ``~/emergency_stop``: a hold at once; the executive's ``~/start`` then sends the job, the driver
   refuses it, and the executive fails the job naming the refusal (it used to report ``job done``
   for a job the arm never ran); the stop latches until ``~/reset``;
3. the F/T falls silent mid-pass (``~/silence`` once /grinding/progress shows the pass): the hold
   leaves the driver within 2 control periods of the timeout's expiry (``hold_after_s``, the
   driver's own figure) and reaches this process within 2 periods + ALLOWANCE of (the last record's
   arrival + ft_timeout); the executive fails the job; ``~/reset`` refuses while the sensor is silent;
4. over-force: a plan planned for 25 N with the prediction's stiffness (the emulated contact is 3x
   stiffer) against max_force 25 N: a hold within 2 periods of the first
   reading over the limit, the job failed, and the force stays under 1.2 x max_force from 0.5 s after
   the hold (the hold is where the force crossed the limit; the arm presses no further).

And (no emulated cell needed) a host name for ``--ft-sensor-ip``, which bringup passes on, stops
hardware_driver at start-up with a message naming ft_sensor_ip, and ``--stop-on-exit`` ends the
graph with exit code 1.

The driver runs at control_rate 100 Hz (10 ms periods) as in test_hardware_driver, with ft_timeout
at 2 s (two Python graphs on two busy cores: the test_emulate settings, test/emulated_session.py).
Timing figures are printed in control periods; ALLOWANCE (0.1 s) is for a descheduled process on
2 busy cores, not the driver's logic.
"""

from __future__ import annotations

import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulated_session import EmulatedSession, grinding, real_params

pytestmark = pytest.mark.ros

CONTROLLER = "/scaled_joint_trajectory_controller/joint_trajectory"
CONTROL_RATE = 100.0
PERIOD = 1.0 / CONTROL_RATE
FT_TIMEOUT = 2.0
MAX_FORCE = 25.0
ALLOWANCE = 0.1


class Timed:
    """Messages with their arrival time here (wall clock: every process's ROS clock here).

    ``msg_type``: the subscription takes bytes (``raw=True``), decoded (rclpy's deserializer) only
    when :attr:`items` is read and counted without decoding (``len``): the F/T streams come at 500 Hz
    each, and a busy machine left this process too slow to take them as rclpy message objects (the
    driver's writer keeps 2 s of them: the over-force reading was dropped unseen under load 11)."""

    def __init__(self, msg_type: Any = None) -> None:
        self.msg_type = msg_type
        self._taken: list[tuple[float, Any]] = []
        self._items: list[tuple[float, Any]] = []

    def __call__(self, msg: Any) -> None:
        (self._taken if self.msg_type is not None else self._items).append((time.time(), msg))

    def __len__(self) -> int:
        return len(self._taken if self.msg_type is not None else self._items)

    @property
    def items(self) -> list[tuple[float, Any]]:
        return self.since(0)

    def since(self, n: int) -> list[tuple[float, Any]]:
        """The messages from the ``n``-th taken on, decoded (once each)."""
        if self.msg_type is None:
            return self._items[n:]
        from rclpy.serialization import deserialize_message

        self._items.extend([None] * (len(self._taken) - len(self._items)))
        for i in range(n, len(self._taken)):
            if self._items[i] is None:
                t, b = self._taken[i]
                self._items[i] = (t, deserialize_message(b, self.msg_type))
        return self._items[n:len(self._taken)]

    def newest_stamp(self) -> float:
        """The largest header.stamp taken, s (from the bytes: little-endian CDR, the stamp first)."""
        if self.msg_type is None:
            return max(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for _, m in self._items)
        return max(sec + 1e-9 * nsec for sec, nsec in (struct.unpack_from("<iI", b, 4) for _, b in self._taken))


def driver_status(diag: Any) -> dict[str, str]:
    """The newest hardware_driver status's values (with 'message')."""
    for m in reversed(diag.messages):
        for s in m.status:
            if s.name.startswith("hardware_driver"):
                return {**{k.key: k.value for k in s.values}, "message": s.message}
    return {}


def is_hold(msg: Any) -> bool:
    from robot_grinding_sim.ros import conversions as cv

    return (len(msg.points) == 1 and np.allclose(msg.points[0].velocities, 0.0)
            and abs(cv.time_to_sec(msg.points[0].time_from_start) - PERIOD) < 1e-9)


def holds_after(out: Timed, n: int) -> list[tuple[float, Any]]:
    """The holds since ``out.items[n]``, each with the time the driver gave it (its header.stamp: on a
    busy machine this process may take the message seconds after it was sent)."""
    from robot_grinding_sim.ros import conversions as cv

    return [(cv.time_to_sec(m.header.stamp) or t, m) for t, m in out.items[n:] if is_hold(m)]


def set_param(probe: Any, node: str, name: str, value: Any) -> None:
    probe.set_param(node, name, value)


def executive_state(state: Any) -> str:
    return state.last.data if state.messages else ""


def periods(s: float) -> str:
    return f"{s * 1e3:.1f} ms = {s / PERIOD:.2f} control periods"


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    tmp = tmp_path_factory.mktemp("emulated_faults")
    out = {}
    for name, force in (("job", 5.0), ("press", 25.0)):
        cell = CellConfig().replace(**{"process.dwell": 3.0, "process.target_force": force})
        out[name] = plan_io.write_plan(plan_job(cell, optimise=False, max_passes=1, pass_length=0.02,
                                                check_collisions=False), tmp / f"{name}.json")
    return out


def test_faults_of_the_whole_cell_stop_the_arm_and_the_job(plans: dict[str, Path], tmp_path: Path,
                                                           probe: Any) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Float64MultiArray, String
    from std_srvs.srv import SetBool, Trigger
    from trajectory_msgs.msg import JointTrajectory

    from robot_grinding_sim.ros import conversions as cv

    out = Timed()
    probe.node.create_subscription(JointTrajectory, CONTROLLER, out, 100)
    # 10 s of the 1 kHz readings queued: on a loaded CI machine this process fell more than the 1 s
    # of a depth of 1000 behind, and the readings around the over-force trip were dropped unseen
    raw = Timed(WrenchStamped)
    probe.node.create_subscription(WrenchStamped, "/hardware_driver/wrench_raw", raw, 10_000, raw=True)
    wrench = Timed(WrenchStamped)
    probe.node.create_subscription(WrenchStamped, "/ft_sensor/wrench", wrench, 10_000, raw=True)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    progress = probe.subscribe(Float64MultiArray, "/grinding/progress")
    state = probe.subscribe(String, "/grinding_executive/state",
                            QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    figures: list[str] = []

    def say(line: str) -> None:
        figures.append(line)
        print(line, flush=True)

    def status() -> dict[str, str]:
        return driver_status(diag)

    with EmulatedSession(tmp_path) as s:
        s.start_cell()
        params = real_params(tmp_path / "real.yaml", s.port, driver=(
            f"    control_rate: {CONTROL_RATE}\n    max_force: {MAX_FORCE}\n    diagnostics_rate: 5.0\n"))
        s.start_real(plans["job"], [params])
        probe.wait_for(lambda: status().get("state") == "ok", timeout=300, what="the driver ok")

        # 1. corrupt records at rest: counted, ignored
        n0, bad0 = len(wrench), int(status()["ft_bad_packets"])
        set_param(probe, "/emulated/netft_emulator", "corrupt_fraction", 0.3)
        probe.wait_for(lambda: int(status().get("ft_bad_packets", "0")) >= bad0 + 200, timeout=120,
                       what="200 corrupt records counted")
        set_param(probe, "/emulated/netft_emulator", "corrupt_fraction", 0.0)
        during = np.array([np.linalg.norm(cv.wrench_to_array(m)[:3]) for _, m in wrench.since(n0)])
        d = status()
        assert d["state"] == "ok" and len(during) > 200, d
        assert during.max() < 1.5, during.max()
        say(f"corrupt records: {int(d['ft_bad_packets']) - bad0} counted and skipped; |F| at rest "
                       f"{during.mean():.3f} N (max {during.max():.3f} N) over {len(during)} readings meanwhile")

        # 2. the emergency stop latches; a job started meanwhile is refused and fails
        n_out = len(out.items)
        r = probe.call(SetBool, "/hardware_driver/emergency_stop", SetBool.Request(data=True))
        assert r.success, r.message
        probe.wait_for(lambda: holds_after(out, n_out), timeout=60, what="the hold after the emergency stop")
        probe.wait_for(lambda: status().get("state") == "stopped", timeout=60, what="driver stopped")
        s.start_job(probe)
        probe.wait_for(lambda: executive_state(state).startswith("failed"), timeout=120,
                       what="the executive fails the refused job")
        assert "hardware_driver refused the command" in executive_state(state), executive_state(state)
        assert "emergency stop" in executive_state(state)
        assert not [m for _, m in out.items[n_out:] if len(m.points) > 1], "a command was forwarded while stopped"
        r = probe.call(SetBool, "/hardware_driver/emergency_stop", SetBool.Request(data=False))
        assert not r.success and "only by ~/reset" in r.message
        r = probe.call(Trigger, "/hardware_driver/reset")
        assert r.success, r.message
        say(f"emergency stop: latched until ~/reset; the executive: {executive_state(state)}")

        # 3. the F/T falls silent mid-pass
        progress.clear()
        s.start_job(probe)
        probe.wait_for(lambda: any(m.data[0] == 0 for m in progress.messages), timeout=300, what="the pass")
        n_out = len(out.items)
        r = probe.call(SetBool, "/emulated/netft_emulator/silence", SetBool.Request(data=True))
        assert r.success, r.message
        probe.wait_for(lambda: holds_after(out, n_out), timeout=60, what="the hold after the silence")
        t_hold = holds_after(out, n_out)[0][0]
        probe.wait_for(lambda: "F/T stale" in status().get("causes", ""), timeout=30, what="cause F/T stale")
        # every reading sent before the silence taken here (a busy machine: this process may be behind)
        quiet = [len(raw), time.monotonic()]

        def drained() -> bool:
            if len(raw) != quiet[0]:
                quiet[:] = [len(raw), time.monotonic()]
            return time.monotonic() - quiet[1] > 1.0

        probe.wait_for(drained, timeout=60, what="the readings sent before the silence")
        last = raw.newest_stamp()
        seen = t_hold - (last + FT_TIMEOUT)
        own = float(status()["hold_after_s"])
        say(f"F/T silent mid-pass -> hold: driver {periods(own)}, seen here {periods(seen)} after the "
                       f"last record's arrival + ft_timeout {FT_TIMEOUT:g} s")
        assert -PERIOD <= seen <= 2 * PERIOD + ALLOWANCE and own <= 2 * PERIOD + ALLOWANCE
        probe.wait_for(lambda: executive_state(state).startswith("failed"), timeout=60, what="the job failed")
        assert "hardware_driver reports an error" in executive_state(state), executive_state(state)
        r = probe.call(Trigger, "/hardware_driver/reset")
        assert not r.success and "F/T stale" in r.message, r.message
        n_raw = len(raw)
        r = probe.call(SetBool, "/emulated/netft_emulator/silence", SetBool.Request(data=False))
        assert r.success, r.message
        probe.wait_for(lambda: len(raw) > n_raw + 10, timeout=60, what="readings again")
        probe.wait_for(lambda: probe.call(Trigger, "/hardware_driver/reset").success, timeout=60,
                       what="a reset once the sensor speaks")
        say(f"F/T silence: the executive: {executive_state(state)}")

        # 4. over-force on a pass that presses harder than max_force. The silence left the arm held
        # where it stopped, on the part: it is put back at its home pose first (the emulated arm's
        # ~/reset), so that the force rises on the pass, not while the move to the start drags the
        # tool off the part
        r = probe.call(Trigger, "/emulated/dynamics_node/reset")
        assert r.success, r.message
        set_param(probe, "/grinding_executive", "plan_file", str(plans["press"]))
        n_out, n_w = len(out.items), len(wrench)
        s.start_job(probe)
        probe.wait_for(lambda: "over-force" in status().get("causes", ""), timeout=300, what="the over-force stop")
        probe.wait_for(lambda: holds_after(out, n_out), timeout=60, what="the hold after the over-force")
        t_hold = holds_after(out, n_out)[0][0]
        found: list[Any] = []
        scanned = [n_w]

        def over() -> list[Any]:  # the driver trips on the reading before it publishes it
            # only the readings taken since the last call: each wait step takes one message, and a scan
            # of every reading since the job's start at each step left this process ever further behind
            # the 500 Hz streams until the driver's 2 s of history dropped the readings over the limit
            new = wrench.since(scanned[0])
            scanned[0] += len(new)
            found.extend(m for _, m in new if np.linalg.norm(cv.wrench_to_array(m)[:3]) > MAX_FORCE)
            return found

        got = wrench.since(n_w)
        peak = max((float(np.linalg.norm(cv.wrench_to_array(m)[:3])) for _, m in got), default=float("nan"))
        first = probe.wait_for(over, timeout=30, what=f"the reading over the limit ({len(got)} readings since the "
                               f"job's start, largest |F| {peak:.2f} N; the driver: {status().get('message')})")[0]
        seen = t_hold - cv.time_to_sec(first.header.stamp)
        own = float(status()["hold_after_s"])
        say(f"over-force ({float(status()['force_n']):.1f} N > {MAX_FORCE:g} N) -> hold: driver "
                       f"{periods(own)}, seen here {periods(seen)} after the first reading over the limit")
        assert 0.0 <= seen <= 2 * PERIOD + ALLOWANCE and own <= 2 * PERIOD + ALLOWANCE
        probe.wait_for(lambda: executive_state(state).startswith("failed"), timeout=60, what="the job failed")
        assert "over-force" in executive_state(state), executive_state(state)
        # held where the force crossed the limit: the arm presses no further (the plan would go on into the
        # 3x stiffer contact: 25 N planned at the prediction's stiffness)
        t_end = time.time() + 2.0
        probe.wait_for(lambda: time.time() > t_end, timeout=10, what="2 s of holding")
        # by the readings' own stamps (the driver's clock): on a loaded machine this process takes the
        # 1 kHz readings late, and by the time it took them, readings of the trip's overshoot (33.8 N
        # once on CI) came after the hold it had already taken
        t_first = cv.time_to_sec(first.header.stamp)
        after = [np.linalg.norm(cv.wrench_to_array(m)[:3]) for _, m in wrench.since(n_w)
                 if cv.time_to_sec(m.header.stamp) > t_first + 0.5]
        assert len(after) > 100 and max(after) < 1.2 * MAX_FORCE, (len(after), max(after, default=0.0))
        say(f"over-force: held at {np.median(after):.1f} N (max {max(after):.1f} N) from 0.5 s after the hold; the "
            f"executive: {executive_state(state)}")
    s.assert_clean()
    print("\nfaults of the whole cell:\n" + "\n".join(figures))


def test_a_host_name_for_the_ft_sensor_stops_the_driver_naming_it(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [*grinding(), "bringup", "real", "--domain-id", os.environ["ROS_DOMAIN_ID"], "--robot-ip", "127.0.0.1",
           "--ft-sensor-ip", "ft-sensor.local", "--stop-on-exit"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    log = r.stdout + r.stderr
    assert r.returncode == 1, log[-3000:]
    assert "parameter 'ft_sensor_ip': 'ft-sensor.local' is not an IP address" in log, log[-3000:]
    assert "Traceback" not in log
