"""hardware_driver as a real process, against an emulated Net F/T and a fake arm, over DDS.

The F/T sensor is an :class:`~robot_grinding_sim.hardware.rdt_emulator.RDTEmulator` in this test
process on 127.0.0.1 (ephemeral port); the arm is this process too: a thread publishes
/joint_states at 100 Hz at the cell's home pose, and the probe subscribes to the driver's output
topic (the UR's ``/scaled_joint_trajectory_controller/joint_trajectory``).

Checked: a trajectory on the executive's topic comes out unchanged; one beyond a joint limit is
refused (not forwarded, the reason in the log and /diagnostics); the compensated /ft_sensor/wrench
is the emulator's wrench minus the tool's weight at the arm's orientation, computed here with
numpy from the ft_sensor parameters and pinocchio's forward kinematics of the URDF; corrupt records
are counted on /diagnostics and change nothing; ~/tare zeroes it; a silent emulator and an
over-force stop the arm with a hold, and ~/reset refuses while the cause persists; the emergency
stop latches until ~/reset; the joint states' silence holds the arm; a bad ft_sensor_ip stops the
node at start-up naming it; SIGINT ends the driver with 0 and no traceback.

Timing. The requirement (DESIGN.md, issue 10): a stop command within 2 control periods of the
cause. The driver runs at control_rate 100 Hz here (10 ms periods; its default is 500 Hz). Two
figures are printed for every stop, in control periods: the driver's own (``hold_after_s`` on
/diagnostics: from the cause, i.e. the over-limit reading's arrival or the timeout's expiry, to
the hold's publication) and the one seen here (from the cause, the last reading's stamp + the
timeout or the over-limit reading's stamp, to the hold's arrival at the probe, so it includes a DDS
hop and this process's scheduling). The assertion is the requirement with a generous allowance,
ALLOWANCE = 0.1 s, for 2 cores shared with other jobs (a descheduled process, not the driver's
logic); it is not a timing benchmark.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator, RDTFaults
from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
CELL = REPO / "config" / "cell.yaml"
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
IN_TOPIC = "/joint_trajectory_controller/joint_trajectory"
OUT_TOPIC = "/scaled_joint_trajectory_controller/joint_trajectory"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
HOME = np.array(yaml.safe_load(CELL.read_text())["/**"]["ros__parameters"]["robot"]["home"], dtype=float)
CONTROL_RATE = 100.0
PERIOD = 1.0 / CONTROL_RATE
FT_RATE = 500.0
FT_TIMEOUT = 0.5
MAX_FORCE = 50.0
ALLOWANCE = 0.1  # s, scheduling on 2 busy cores (see the module docstring)
TOOL_MASS = 2.0
TOOL_COM = np.array([0.01, -0.02, 0.08])
W0 = np.array([3.0, -1.5, 12.0, 0.2, -0.1, 0.05])  # the emulator's wrench, N and N m


def driver_params(port: int, **extra):
    return {"use_sim_time": False, "ft_backend": "netft", "ft_sensor_ip": "127.0.0.1", "ft_port": port,
            "control_rate": CONTROL_RATE, "ft_rate": FT_RATE, "ft_timeout": FT_TIMEOUT, "max_force": MAX_FORCE,
            "joint_states_timeout": 1.0, "diagnostics_rate": 5.0, "ft_sensor.tool_mass": TOOL_MASS,
            "ft_sensor.tool_com": TOOL_COM.tolist(), **extra}


def start_driver(launch_node, port: int, **extra):
    return launch_node("hardware_driver", params_file=[CELL, REPO / "config" / "hardware_driver.yaml"],
                       params=driver_params(port, **extra))


@pytest.fixture
def emulator():
    """The Net F/T on loopback; ``emu.wrench[:]`` sets what it reads; ``emu.step = (t, wrench)``
    makes it read ``wrench`` from emulator time ``t`` on (a sensor event at a known instant)."""
    wrench = W0.copy()

    def source(t: float) -> np.ndarray:
        at, after = emu.step
        return after if t >= at else wrench

    # its thread at niceness -10 (where allowed): a sensor keeps its own time; at this process's
    # priority, beside two CPU-bound processes, records left over 50 ms late and the 50 ms margins of
    # the growing delay below tripped "F/T stale" (0.505 s old with the delay at 0.45 s)
    emu = RDTEmulator(source, rate_hz=FT_RATE, counts_per_force=1e6, counts_per_torque=1e6, nice=-10)
    emu.wrench = wrench
    emu.step = (np.inf, W0)
    with emu:
        yield emu


def first_sample_at(emu: RDTEmulator, t: float) -> float:
    """time.monotonic() of the first sample the emulator takes at or after its time ``t``."""
    return emu.epoch + math.ceil(t * emu.rate_hz - 1e-9) / emu.rate_hz


class FakeArm:
    """/joint_states at 100 Hz at HOME from a thread of this process (``silent`` pauses it)."""

    def __init__(self, context) -> None:
        import rclpy

        self.node = rclpy.create_node("fake_arm", context=context)
        self.pub = self.node.create_publisher(JointState, "/joint_states", 50)
        self.silent = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            if not self.silent.is_set():
                msg = cv.arrays_to_joint_state(JOINTS, HOME, np.zeros(6), np.zeros(6))
                msg.header.stamp = self.node.get_clock().now().to_msg()
                self.pub.publish(msg)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)
        self.node.destroy_node()


@pytest.fixture
def arm(rclpy_context):
    a = FakeArm(rclpy_context)
    yield a
    a.close()


class Timed:
    """Messages with their arrival time here (wall clock, the ROS clock of every process here; and
    ``mono``: time.monotonic(), the emulator's clock)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, object]] = []
        self.mono: list[float] = []

    def __call__(self, msg) -> None:
        self.mono.append(time.monotonic())
        self.items.append((time.time(), msg))

    @property
    def messages(self):
        return [m for _, m in self.items]


def diag_values(diag) -> dict[str, str]:
    """The newest driver status's key/values (with 'level' and 'message')."""
    for m in reversed(diag.messages):
        for s in m.status:
            if s.name.endswith("hardware_driver: safety"):
                return {**{k.key: k.value for k in s.values}, "level": int.from_bytes(s.level, "little")
                        if isinstance(s.level, bytes) else int(s.level), "message": s.message}
    return {}


def wait_state(probe, diag, drv, state: str, what: str = "") -> dict[str, str]:
    probe.wait_for(lambda: diag_values(diag).get("state") == state, what=what or f"driver state {state}",
                   procs=[drv])
    return diag_values(diag)


def is_hold(msg) -> bool:
    return (len(msg.points) == 1 and list(msg.joint_names) == JOINTS
            and np.allclose(msg.points[0].positions, HOME, atol=1e-12)
            and np.allclose(msg.points[0].velocities, 0.0)
            and abs(cv.time_to_sec(msg.points[0].time_from_start) - PERIOD) < 1e-9)


def trajectory(offsets, times=(1.0, 2.0), lead: float = 0.5) -> JointTrajectory:
    """Knots at HOME + each offset (rad), stamped ``lead`` s ahead like the executive's commands."""
    msg = JointTrajectory(joint_names=JOINTS)
    msg.header.frame_id = "base_link"
    msg.header.stamp = cv.sec_to_time(time.time() + lead)
    for t, off in zip(times, offsets, strict=True):
        msg.points.append(JointTrajectoryPoint(positions=(HOME + np.asarray(off)).tolist(),
                                               velocities=[0.0] * 6, time_from_start=cv.sec_to_duration(t)))
    return msg


def expected_compensated(raw: np.ndarray) -> np.ndarray:
    """``raw`` minus the tool's weight at HOME, in the sensor frame: pinocchio FK of the URDF and numpy."""
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(URDF))
    data = model.createData()
    q = pin.neutral(model)
    for name, v in zip(JOINTS, HOME, strict=True):
        q[model.joints[model.getJointId(name)].idx_q] = v
    pin.framesForwardKinematics(model, data, q)
    R_WS = data.oMf[model.getFrameId("ft_sensor")].rotation
    F = TOOL_MASS * R_WS.T @ np.array([0.0, 0.0, -9.81])
    return raw - np.r_[F, np.cross(TOOL_COM, F)]


def wrench_of(msg: WrenchStamped) -> np.ndarray:
    return cv.wrench_to_array(msg)


def periods(s: float) -> str:
    return f"{s * 1e3:.1f} ms = {s / PERIOD:.2f} control periods"


def stopped_clean(drv) -> None:
    assert drv.stop() == 0, drv.log()[-3000:]
    log = drv.log()
    assert "Traceback" not in log, log[-3000:]


# --------------------------------------------------------------------------------------------------


def test_commands_are_forwarded_refused_and_stopped(launch_node, probe, emulator, arm) -> None:
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    out = Timed()
    probe.node.create_subscription(JointTrajectory, OUT_TOPIC, out, 10)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    drv = start_driver(launch_node, emulator.address[1])
    wait_state(probe, diag, drv, "ok", "the driver has joint states and F/T readings")
    pub = probe.publisher(JointTrajectory, IN_TOPIC, procs=[drv])
    probe.wait_for(lambda: drv_subscribes(probe), what="the driver's output matched", procs=[drv])

    # forwarded as it is
    good = trajectory([[0.02, -0.02, 0.02, 0.0, 0.0, 0.05], [0.04, -0.04, 0.04, 0.0, 0.0, 0.1]])
    pub.publish(good)
    probe.wait_for(lambda: out.items, what="the forwarded trajectory", procs=[drv])
    assert out.messages == [good]

    # beyond the elbow's limit: refused, named, not forwarded
    upper = RobotModel.from_urdf(str(URDF)).upper[JOINTS.index("elbow_joint")]
    beyond = trajectory([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, upper + 0.05 - HOME[2], 0.0, 0.0, 0.0]],
                        times=(1.0, 30.0))
    pub.publish(beyond)
    probe.wait_for(lambda: diag_values(diag).get("commands_refused") == "1", what="the refusal on /diagnostics",
                   procs=[drv])
    reason = diag_values(diag)["last_refusal"]
    assert "elbow_joint position" in reason and f"{upper - 0.01:.6g} rad" in reason, reason
    probe.wait_for_log(drv, "command refused, not forwarded: knot 1")
    pub.publish(good)  # the next one goes through, and nothing came before it
    probe.wait_for(lambda: len(out.items) == 2, what="the second forwarded trajectory", procs=[drv])
    assert out.messages == [good, good]

    # stamped 5 s in the past (issue 22): a point 0.2 rad away at 1 s is, for the controller, a step of
    # 0.2 rad now (it samples the trajectory at now - stamp, past its end): refused, named, not forwarded
    past = trajectory([[0.2, 0.0, 0.0, 0.0, 0.0, 0.0]], times=(1.0,), lead=-5.0)
    pub.publish(past)
    probe.wait_for(lambda: diag_values(diag).get("commands_refused") == "2", what="the late trajectory refused",
                   procs=[drv])
    reason = diag_values(diag)["last_refusal"]
    assert "shoulder_pan_joint start 0.2 rad" in reason and "s in the past" in reason, reason
    assert len(out.items) == 2

    # the emergency stop: a hold at once, commands refused until ~/reset; SetBool false does not release
    r = probe.call(SetBool, "/hardware_driver/emergency_stop", SetBool.Request(data=True), procs=[drv])
    assert r.success, r.message
    probe.wait_for(lambda: len(out.items) == 3, what="the hold after the emergency stop", procs=[drv])
    assert is_hold(out.messages[2]), out.messages[2]
    d = wait_state(probe, diag, drv, "stopped")
    assert d["causes"] == "emergency stop"
    pub.publish(good)
    probe.wait_for(lambda: diag_values(diag).get("commands_refused") == "3", what="refused while stopped",
                   procs=[drv])
    assert "emergency stop" in diag_values(diag)["last_refusal"]
    r = probe.call(SetBool, "/hardware_driver/emergency_stop", SetBool.Request(data=False), procs=[drv])
    assert not r.success and "only by ~/reset" in r.message
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert r.success and "emergency stop" in r.message, r.message
    wait_state(probe, diag, drv, "ok")
    pub.publish(good)
    probe.wait_for(lambda: len(out.items) == 4, what="forwarded after the reset", procs=[drv])
    assert out.messages[3] == good

    # the arm's joint states fall silent: hold (at the last measured position)
    arm.silent.set()
    t_silent = time.time()
    probe.wait_for(lambda: len(out.items) == 5, what="the hold after the joint states' silence", procs=[drv])
    assert is_hold(out.messages[4])
    d = wait_state(probe, diag, drv, "stopped")
    assert d["causes"] == "joint states silent"
    print(f"\njoint states silent -> hold {out.items[4][0] - t_silent:.3f} s after the arm fell silent "
          f"(timeout 1 s); driver: {periods(float(d['hold_after_s']))}")
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert not r.success and "joint states silent" in r.message
    arm.silent.clear()
    probe.wait_for(lambda: probe.call(Trigger, "/hardware_driver/reset", procs=[drv]).success,
                   what="a reset once the joint states are back", procs=[drv])
    stopped_clean(drv)


def drv_subscribes(probe) -> bool:
    return probe.node.count_subscribers(IN_TOPIC) >= 1 and probe.node.count_publishers(OUT_TOPIC) >= 1


def test_wrench_tare_and_stops_on_silence_and_over_force(launch_node, probe, emulator, arm) -> None:
    out = Timed()
    probe.node.create_subscription(JointTrajectory, OUT_TOPIC, out, 10)
    wrench = Timed()
    probe.node.create_subscription(WrenchStamped, "/ft_sensor/wrench", wrench, 1000)
    raw = probe.subscribe(WrenchStamped, "/hardware_driver/wrench_raw", keep=1000)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    drv = start_driver(launch_node, emulator.address[1])
    wait_state(probe, diag, drv, "ok", "the driver has joint states and F/T readings")

    # compensated: the emulator's wrench minus the tool's weight at HOME, in the sensor frame
    want = expected_compensated(W0)
    probe.wait_for(lambda: len(wrench.items) >= 50, what="50 compensated wrenches", procs=[drv])
    got = np.array([wrench_of(m) for m in wrench.messages[-40:]])
    assert {m.header.frame_id for m in wrench.messages} == {"ft_sensor"}
    np.testing.assert_allclose(got, np.tile(want, (40, 1)), atol=2e-6)  # counts of 1e-6 N, N m
    np.testing.assert_allclose(wrench_of(raw.last), W0, atol=1e-6)
    weight = W0 - want
    assert abs(np.linalg.norm(weight[:3]) - TOOL_MASS * 9.81) < 1e-9
    print(f"\ncompensated {np.round(got[-1], 6).tolist()}; tool weight {np.round(weight, 6).tolist()}")

    # corrupt records: counted on /diagnostics, skipped
    emulator.faults = RDTFaults(corrupt_fraction=0.3)
    n0 = len(wrench.items)
    probe.wait_for(lambda: int(diag_values(diag).get("ft_bad_packets", "0")) >= 30,
                   what="30 corrupt records counted", procs=[drv])
    emulator.faults = RDTFaults()
    during = np.array([wrench_of(m) for m in wrench.messages[n0:]])
    assert len(during) > 30
    np.testing.assert_allclose(during, np.tile(want, (len(during), 1)), atol=2e-6)
    d = diag_values(diag)
    assert d["state"] == "ok" and emulator.corrupted >= int(d["ft_bad_packets"]) >= 30, d
    print(f"corrupt records: {d['ft_bad_packets']} counted by the driver ({emulator.corrupted} sent)")

    # tare: the reading minus the weight becomes the bias
    r = probe.call(Trigger, "/hardware_driver/tare", procs=[drv])
    assert r.success, r.message
    n0 = len(wrench.items)
    probe.wait_for(lambda: len(wrench.items) >= n0 + 30, what="wrenches after the tare", procs=[drv])
    np.testing.assert_allclose(np.array([wrench_of(m) for m in wrench.messages[-10:]]), 0.0, atol=2e-6)

    # the sensor falls silent: hold within 2 control periods of the moment its newest record (the
    # emulator's own sample instant) passed the age limit
    emulator.silence(True)
    probe.wait_for(lambda: out.items, what="the hold after the F/T silence", procs=[drv])
    t_hold, hold = out.mono[0], out.items[0][1]
    assert is_hold(hold), hold
    seen = t_hold - (emulator.epoch + emulator.last_sample + FT_TIMEOUT)
    d = wait_state(probe, diag, drv, "stopped")
    assert d["causes"] == "F/T stale", d
    own = float(d["hold_after_s"])
    print(f"F/T silent -> hold: driver {periods(own)}, seen here {periods(seen)}")
    assert -PERIOD <= seen and own <= 2 * PERIOD + ALLOWANCE and seen <= 2 * PERIOD + ALLOWANCE
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert not r.success and "F/T stale" in r.message, r.message
    emulator.silence(False)
    n0 = len(wrench.items)
    probe.wait_for(lambda: len(wrench.items) > n0, what="readings again", procs=[drv])
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert r.success, r.message
    wait_state(probe, diag, drv, "ok")

    # over-force: hold within 2 control periods of the first reading over the limit (the emulator's
    # sample instant: the sensor's event)
    n_out = len(out.items)
    t_event = emulator.clock() + 0.05
    emulator.step = (t_event, np.array([0.0, 0.0, 80.0, 0.0, 0.0, 0.0]))
    probe.wait_for(lambda: len(out.items) > n_out, what="the hold after the over-force", procs=[drv])
    t_hold, hold = out.mono[n_out], out.items[n_out][1]
    assert is_hold(hold), hold
    seen = t_hold - first_sample_at(emulator, t_event)
    d = wait_state(probe, diag, drv, "stopped")
    assert d["causes"] == "over-force", d
    own = float(d["hold_after_s"])
    print(f"over-force ({float(d['force_n']):.1f} N > {MAX_FORCE:g} N) -> hold: driver {periods(own)}, "
          f"seen here {periods(seen)}")
    assert own <= 2 * PERIOD + ALLOWANCE and seen <= 2 * PERIOD + ALLOWANCE
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert not r.success and "over-force" in r.message, r.message
    emulator.step = (np.inf, W0)
    n0 = len(wrench.items)
    probe.wait_for(lambda: len(wrench.items) > n0 + 5, what="calm readings again", procs=[drv])
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert r.success, r.message
    stopped_clean(drv)


def test_the_driver_acts_on_the_newest_reading_and_knows_how_old_it_is(launch_node, probe, emulator, arm) -> None:
    """Issue 22: the driver took records oldest first and dated them on arrival, so it acted on
    readings seconds old and reported them fresh. The emulated Net F/T (delay fault: every record
    leaves ``delay`` after the sensor took it, a backlog at the protocol level) shows, from outside:

    1. data 0.3 s late: /diagnostics says so (``ft_age_s``), and an over-force in it holds the arm
       with ``hold_after_s`` counted from the sensor's event, which agrees with what this process
       sees from the emulator's sample instant (it was 0.3 ms: counted from the arrival);
    2. the held records released at once (a burst): one read takes them, the newest is acted on
       (``ft_superseded``) and the data is fresh again (``ft_age_s``);
    3. data falling further and further behind while records keep arriving (the delay grows in
       steps of 50 ms: no gap between records is near ft_timeout): "F/T stale" holds the arm within
       2 control periods of the newest delivered reading's passing the age limit, and ~/reset refuses
       until the data is fresh again (the old driver never stopped: records kept coming).
    """
    out = Timed()
    probe.node.create_subscription(JointTrajectory, OUT_TOPIC, out, 10)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    drv = start_driver(launch_node, emulator.address[1])
    wait_state(probe, diag, drv, "ok", "the driver has joint states and F/T readings")
    probe.wait_for(lambda: int(diag_values(diag).get("ft_received", "0")) > 2 * FT_RATE, procs=[drv],
                   what="2 s of prompt readings (the driver's clock learns the offset)")
    fresh = float(diag_values(diag)["ft_age_s"])

    # 1. late data; an over-force in it
    delay = 0.3
    emulator.faults = RDTFaults(delay=delay)
    n_diag = len(diag.messages)
    probe.wait_for(lambda: len(diag.messages) > n_diag + 10, what="2 s of diagnostics with the delay", procs=[drv])
    ages = [float(v["ft_age_s"]) for v in (diag_values_of(m) for m in diag.messages[n_diag + 5:]) if v]
    assert min(ages) >= delay - ALLOWANCE and diag_values(diag)["state"] == "ok", (ages, diag_values(diag))
    n_out = len(out.items)
    t_event = emulator.clock() + 0.05
    emulator.step = (t_event, np.array([0.0, 0.0, 80.0, 0.0, 0.0, 0.0]))
    probe.wait_for(lambda: len(out.items) > n_out, what="the hold after the late over-force", procs=[drv])
    assert is_hold(out.items[n_out][1])
    seen = out.mono[n_out] - first_sample_at(emulator, t_event)
    d = wait_state(probe, diag, drv, "stopped")
    own = float(d["hold_after_s"])
    print(f"\nF/T data {delay:g} s late: ft_age_s {np.median(ages):.3f} s (fresh: {fresh:.6f} s); over-force -> hold: "
          f"driver {own * 1e3:.1f} ms, seen here {seen * 1e3:.1f} ms from the sensor's event")
    assert d["causes"] == "over-force" and "s old" in d["message"], d
    assert own >= delay - ALLOWANCE and abs(own - seen) <= ALLOWANCE, (own, seen)

    # 2. the backlog released: a burst; the newest is acted on
    emulator.step = (np.inf, W0)
    sup0 = int(d["ft_superseded"])
    held = emulator.held
    emulator.faults = RDTFaults()
    probe.wait_for(lambda: float(diag_values(diag).get("ft_age_s", "1")) < ALLOWANCE, what="fresh data again",
                   procs=[drv])
    d = diag_values(diag)
    print(f"burst of {held} held records: {int(d['ft_superseded']) - sup0} superseded; ft_age_s {d['ft_age_s']}")
    assert int(d["ft_superseded"]) - sup0 >= held // 2, (held, d)
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert r.success, r.message
    wait_state(probe, diag, drv, "ok")

    # 3. data falling behind while records keep arriving: the delay grows to 0.45 s in steps of 50 ms
    # (the driver stays ok: the data is younger than ft_timeout), then jumps to 0.65 s: the newest
    # reading delivered passes the limit 0.05 s after the jump, while the gap in arrivals is 0.2 s
    n_out = len(out.items)
    for d_ms in range(50, 500, 50):
        sent = emulator.sent
        emulator.faults = RDTFaults(delay=d_ms / 1e3)  # nothing leaves for 50 ms, then records flow again
        probe.wait_for(lambda s0=sent: emulator.sent >= s0 + 10, what="records at the new delay", procs=[drv])
    assert len(out.items) == n_out and diag_values(diag)["state"] == "ok", diag_values(diag)
    emulator.faults = RDTFaults(delay=0.65)
    newest = emulator.last_sample  # nothing leaves for 0.2 s now
    probe.wait_for(lambda: len(out.items) > n_out, what="the hold on stale data", procs=[drv])
    assert is_hold(out.items[n_out][1])
    seen = out.mono[n_out] - (emulator.epoch + newest + FT_TIMEOUT)
    d = wait_state(probe, diag, drv, "stopped")
    assert d["causes"] == "F/T stale", d
    own = float(d["hold_after_s"])
    print(f"F/T data falling behind -> hold: driver {periods(own)}, seen here {periods(seen)} after the newest "
          "reading's age passed ft_timeout")
    assert -PERIOD <= seen <= 2 * PERIOD + ALLOWANCE and own <= 2 * PERIOD + ALLOWANCE
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert not r.success and "F/T stale" in r.message and "s old" in r.message, r.message
    emulator.faults = RDTFaults()
    probe.wait_for(lambda: probe.call(Trigger, "/hardware_driver/reset", procs=[drv]).success,
                   what="a reset once the data is fresh", procs=[drv])
    stopped_clean(drv)


def diag_values_of(m) -> dict[str, str]:
    for s in m.status:
        if s.name.endswith("hardware_driver: safety"):
            return {k.key: k.value for k in s.values}
    return {}


@pytest.mark.parametrize("bad", ["10.0.0.256", "ft-sensor.local", ""])
def test_a_bad_ft_sensor_ip_stops_the_node_naming_it(launch_node, bad: str) -> None:
    drv = launch_node("hardware_driver", params_file=[CELL, REPO / "config" / "hardware_driver.yaml"],
                      params={"ft_sensor_ip": bad})
    assert drv.wait_exit() == 1
    log = drv.log()
    said = "empty: set the Net F/T's address" if not bad else f"'{bad}' is not an IP address"
    assert f"parameter 'ft_sensor_ip': {said}" in log, log[-2000:]
    assert "Traceback" not in log


# -- lifecycle -------------------------------------------------------------------------------------


def transition(probe, drv, label: str):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    ids = {"configure": Transition.TRANSITION_CONFIGURE, "activate": Transition.TRANSITION_ACTIVATE,
           "deactivate": Transition.TRANSITION_DEACTIVATE, "cleanup": Transition.TRANSITION_CLEANUP}
    req = ChangeState.Request()
    req.transition.id = ids[label]
    return probe.call(ChangeState, "/hardware_driver/change_state", req, procs=[drv]).success


def lifecycle_state(probe, drv) -> str:
    from lifecycle_msgs.srv import GetState

    return probe.call(GetState, "/hardware_driver/get_state", procs=[drv]).current_state.label


def test_configure_fails_cleanly_naming_a_bad_ft_sensor_ip(launch_node, probe) -> None:
    """Without autostart the node waits unconfigured; a configure with a bad address fails with one
    line naming the parameter, and the node stays up, unconfigured, answering."""
    drv = launch_node("hardware_driver", params_file=[CELL, REPO / "config" / "hardware_driver.yaml"],
                      params={"ft_sensor_ip": "10.0.0.256", "autostart": False})
    assert lifecycle_state(probe, drv) == "unconfigured"
    assert not transition(probe, drv, "configure")
    log = drv.log()
    assert log.count("parameter 'ft_sensor_ip': '10.0.0.256' is not an IP address") == 1, log[-2000:]
    assert lifecycle_state(probe, drv) == "unconfigured" and drv.alive
    r = probe.call(Trigger, "/hardware_driver/reset", procs=[drv])
    assert not r.success and "not configured" in r.message
    stopped_clean(drv)


def test_activate_streams_and_deactivate_holds(launch_node, probe, emulator, arm) -> None:
    """configure connects (nothing streams), activate starts the F/T stream and the forwarding,
    deactivate holds at the measured position, refuses commands and stops the stream; activate again
    waits for fresh readings; cleanup disconnects."""
    out = Timed()
    probe.node.create_subscription(JointTrajectory, OUT_TOPIC, out, 10)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    drv = start_driver(launch_node, emulator.address[1], autostart=False)
    probe.wait_for(lambda: diag_values(diag).get("state") == "unconfigured", what="diagnostics while unconfigured",
                   procs=[drv])
    assert transition(probe, drv, "configure") and lifecycle_state(probe, drv) == "inactive"
    wait_state(probe, diag, drv, "inactive")
    assert emulator.sent == 0  # connected, not streaming
    assert transition(probe, drv, "activate") and lifecycle_state(probe, drv) == "active"
    wait_state(probe, diag, drv, "ok", "joint states and F/T readings after activate")
    assert emulator.sent > 0
    pub = probe.publisher(JointTrajectory, IN_TOPIC, procs=[drv])
    good = trajectory([[0.02, -0.02, 0.02, 0.0, 0.0, 0.05], [0.04, -0.04, 0.04, 0.0, 0.0, 0.1]])
    pub.publish(good)
    probe.wait_for(lambda: out.items, what="the forwarded trajectory", procs=[drv])
    assert out.messages == [good]

    assert transition(probe, drv, "deactivate") and lifecycle_state(probe, drv) == "inactive"
    probe.wait_for(lambda: len(out.items) == 2, what="the hold at deactivate", procs=[drv])
    assert is_hold(out.messages[1]), out.messages[1]
    d = wait_state(probe, diag, drv, "inactive")
    sent = emulator.sent
    pub.publish(trajectory([[0.02, -0.02, 0.02, 0.0, 0.0, 0.05]], times=(1.0,)))
    probe.wait_for(lambda: int(diag_values(diag).get("commands_refused", "0")) > int(d["commands_refused"]),
                   what="a command refused while inactive", procs=[drv])
    assert "not active" in diag_values(diag)["last_refusal"] and len(out.items) == 2
    assert emulator.sent - sent <= FT_RATE * 0.05  # the stream stopped (what was on its way at most)

    assert transition(probe, drv, "activate")
    wait_state(probe, diag, drv, "ok", "fresh readings after the second activate")
    assert transition(probe, drv, "deactivate") and transition(probe, drv, "cleanup")
    assert lifecycle_state(probe, drv) == "unconfigured"
    wait_state(probe, diag, drv, "unconfigured")
    stopped_clean(drv)
