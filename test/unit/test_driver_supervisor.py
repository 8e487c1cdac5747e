"""The hardware driver's supervision without ROS (hardware/supervisor.py), on a fake clock.

Built from the driver's default parameters (ros/schemas.py, config/cell.yaml's values) and the
package's URDF, with outputs that record what the node would publish. Checked against what the
module promises: commands refused while inactive or waiting, forwarded within the limits and
refused beyond (the guard's reason), the measured position carried to now along the measured
velocity (at most MAX_CARRY_S) when a command is judged, a hold at the measured position at once on
an over-force reading with its latency counted from the reading's sample time, on stale F/T data
and on silent joint states, deactivate holds and activate waits for the F/T stream again, the
emergency stop latching until a reset, tare taking the recent readings as the bias.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_grinding_sim.core.config import config_from_mapping
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.hardware.supervisor import MAX_CARRY_S, NOT_ACTIVE, supervisor_from_parameters
from robot_grinding_sim.ros.schemas import node_specs

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
HOME = np.array(yaml.safe_load((REPO / "config" / "cell.yaml").read_text())["/**"]["ros__parameters"]["robot"]["home"])


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Outputs:
    def __init__(self) -> None:
        self.holds: list[np.ndarray] = []
        self.points: list[tuple] = []
        self.logs: list[tuple[str, str]] = []
        self.diagnostics_published = 0

    def hold(self, q: np.ndarray) -> None:
        self.holds.append(q.copy())

    def stream_point(self, names, positions, velocities, ahead) -> None:
        self.points.append((names, positions, velocities, ahead))

    def admittance(self, values) -> None:
        pass

    def diagnostics(self) -> None:
        self.diagnostics_published += 1

    def log(self, level: str, text: str) -> None:
        self.logs.append((level, text))


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_urdf(URDF, tip_link="tcp")


def params(**extra) -> dict:
    p = {s.name: s.default for s in node_specs("hardware_driver")}
    p.update({"robot.home": HOME.tolist(), "ft_sensor_ip": "127.0.0.1"}, **extra)
    return p


def make(model, **extra):
    p = params(**extra)
    mono, ros = Clock(), Clock()
    ros.t = 1.7e9
    out = Outputs()
    sup = supervisor_from_parameters(p, config_from_mapping(p, allow_unknown=True), model, out, monotonic=mono,
                                     ros_now=ros, node_name="hardware_driver")
    return sup, out, mono, ros


def calm(t: float, k: int = 1) -> FTReadings:
    return FTReadings(np.zeros((k, 6)), np.full(k, t), t, np.zeros(k, dtype=np.int64))


def running(model, **extra):
    """Active, with a joint state at HOME and a calm reading: commands are forwarded."""
    sup, out, mono, ros = make(model, **extra)
    sup.activate()
    sup.joint_state(HOME.copy(), np.zeros(6))
    sup.readings(calm(mono.t), mono.t)
    return sup, out, mono, ros


def trajectory(offset: np.ndarray, t: float = 1.0):
    names = list(JOINTS)
    return lambda: (names, np.array([t]), (HOME + offset)[None], np.zeros((1, 6)), 0.0)


JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]


def test_commands_are_refused_until_active_and_both_streams_spoke(model) -> None:
    sup, out, mono, _ = make(model)
    sent = []
    assert not sup.command(trajectory(np.full(6, 0.01)), lambda: sent.append(1))
    assert sup.last_refusal == NOT_ACTIVE and sup.refused == 1 and out.diagnostics_published == 1
    sup.activate()
    assert not sup.command(trajectory(np.full(6, 0.01)), lambda: sent.append(1))
    assert sup.last_refusal == "no F/T and no joint states received yet"
    sup.joint_state(HOME.copy(), None)
    sup.readings(calm(mono.t), mono.t)
    assert sup.command(trajectory(np.full(6, 0.01)), lambda: sent.append(1)) and sent == [1]
    assert sup.status()[0] == "ok" and sup.forwarded == 1


def test_a_command_beyond_a_joint_limit_is_refused_with_the_guards_reason(model) -> None:
    sup, out, *_ = running(model)
    upper = model.upper[2]
    offset = np.zeros(6)
    offset[2] = upper + 0.05 - HOME[2]
    sent = []
    assert not sup.command(trajectory(offset, 30.0), lambda: sent.append(1))
    assert sent == [] and "elbow_joint position" in sup.last_refusal
    assert out.logs[-1][0] == "warning" and out.logs[-1][1].startswith("command refused, not forwarded: knot 0")


def test_the_measured_position_is_carried_to_now_along_its_velocity(model) -> None:
    sup, _, mono, _ = running(model)
    qd = np.array([0.1, -0.2, 0.0, 0.0, 0.3, 0.0])
    sup.joint_state(HOME.copy(), qd)
    mono.t += 0.02
    with sup.lock:
        np.testing.assert_allclose(sup.q_now(), HOME + 0.02 * qd)
    mono.t += 1.0  # beyond MAX_CARRY_S: not further (a silent arm is the safety monitor's business)
    with sup.lock:
        np.testing.assert_allclose(sup.q_now(), HOME + MAX_CARRY_S * qd)


def test_an_over_force_reading_holds_at_once_counted_from_its_sample_time(model) -> None:
    sup, out, mono, _ = running(model)
    sampled = mono.t
    mono.t += 0.003  # taken off the socket 3 ms after the sensor took it
    w = np.zeros((2, 6))
    w[1, 2] = 80.0  # the newer of two readings: 80 N (the tool's weight is compensated: add it back)
    processed = sup.readings(FTReadings(w, np.array([sampled - 0.001, sampled]), mono.t,
                                        np.zeros(2, dtype=np.int64)), mono.t)
    assert processed is not None and processed.shape == (2, 6)
    assert len(out.holds) == 1 and np.array_equal(out.holds[0], HOME)
    assert sup.hold_after == pytest.approx(0.003)
    level, message, values = sup.status()
    assert level == "error" and values["causes"] == "over-force" and values["state"] == "stopped"
    assert not sup.command(trajectory(np.full(6, 0.01)), lambda: None)
    assert "latched until ~/reset" in sup.last_refusal
    ok, why = sup.reset()
    assert not ok and "over-force" in why  # the newest reading is still over the limit


def test_stale_ft_data_and_silent_joint_states_hold(model) -> None:
    sup, out, mono, _ = running(model, ft_timeout=0.1, joint_states_timeout=0.2)
    last = mono.t
    mono.t += 0.099
    sup.check()
    assert out.holds == []
    mono.t = last + 0.104
    sup.joint_state(HOME.copy(), None)
    sup.check()
    assert len(out.holds) == 1 and sup.hold_after == pytest.approx(0.004)
    assert sup.status()[2]["causes"] == "F/T stale"
    sup.readings(calm(mono.t), mono.t)
    mono.t += 0.25
    sup.readings(calm(mono.t), mono.t)
    sup.check()
    assert sup.status()[2]["causes"] == "F/T stale, joint states silent" and len(out.holds) == 2


def test_deactivate_holds_and_activate_waits_for_the_ft_stream_again(model) -> None:
    sup, out, mono, _ = running(model)
    sup.deactivate()
    assert len(out.holds) == 1 and np.array_equal(out.holds[0], HOME)
    assert sup.status()[2]["state"] == "inactive"
    assert not sup.command(trajectory(np.full(6, 0.01)), lambda: None) and sup.last_refusal == NOT_ACTIVE
    mono.t += 5.0  # paused: the F/T stream's age is not judged across the pause
    sup.activate()
    sup.joint_state(HOME.copy(), None)
    sup.check()
    assert len(out.holds) == 1 and sup.status()[2]["state"] == "waiting"
    sup.readings(calm(mono.t), mono.t)
    assert sup.status()[2]["state"] == "ok"


def test_emergency_stop_latches_until_reset_and_tare_takes_the_bias(model) -> None:
    sup, out, mono, _ = running(model)
    assert sup.emergency_stop(True)[0] and len(out.holds) == 1
    assert sup.emergency_stop(True)[0] and len(out.holds) == 2  # asked again: held again
    ok, message = sup.emergency_stop(False)
    assert not ok and "only by ~/reset" in message
    ok, message = sup.reset()
    assert ok and "emergency stop" in message
    # tare: the mean of the last 0.1 s of readings minus the tool's weight becomes the bias, so the
    # same reading afterwards is compensated to zero (once the low-pass filter has settled)
    offset = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])

    def read(w: np.ndarray) -> np.ndarray:
        mono.t += 0.01
        return sup.readings(FTReadings(w[None].copy(), np.array([mono.t]), mono.t, np.zeros(1, dtype=np.int64)),
                            mono.t)[0]

    mono.t += 1.0
    for _ in range(5):
        read(offset)
    ok, message = sup.tare()
    assert ok and message.startswith("tared on 5 readings"), message
    for _ in range(300):
        after = read(offset)
    np.testing.assert_allclose(after, 0.0, atol=1e-9)
    mono.t += 1.0
    assert sup.tare() == (False, "no F/T reading in the last 0.1 s")


def test_bad_parameters_are_named(model) -> None:
    with pytest.raises(ParameterError, match="parameter 'workspace_max'"):
        make(model, workspace_min=[0.0, 0.0, 0.0], workspace_max=[-1.0, 0.0, 0.0])


def test_a_commands_lateness_is_judged_on_the_arms_clock(model) -> None:
    """An arm whose joint states are stamped 1 s behind this node's clock (an emulated arm a busy
    machine left behind real time): a command stamped 0.5 s ahead of the arm's clock starts where
    the arm is and is forwarded; judged on this node's clock it was 0.5 s late, and the point due
    then (0.1 rad along the move) was a step from the measured position. Unstamped states keep this
    node's clock."""
    sup, out, mono, ros = running(model)
    offset = np.zeros(6)
    offset[2] = 0.2
    names = list(JOINTS)

    def move(stamp: float):
        return lambda: (names, np.array([0.0, 1.0]), np.stack([HOME, HOME + offset]), None, stamp)

    sup.joint_state(HOME.copy(), np.zeros(6), stamp=ros.t - 1.0)
    mono.t += 0.01
    sent = []
    assert sup.command(move(ros.t - 0.5), lambda: sent.append(1)), sup.last_refusal
    assert sent == [1]
    with sup.lock:
        assert sup.arm_now() == pytest.approx(ros.t - 0.99)
    sup.joint_state(HOME.copy(), np.zeros(6))  # unstamped: this node's clock, 0.5 s late
    assert not sup.command(move(ros.t - 0.5), lambda: sent.append(1))
    assert "elbow_joint start" in sup.last_refusal and "0.5000 s in the past" in sup.last_refusal


def test_force_control_streams_on_the_arms_clock(model) -> None:
    """Force control following a 4 s elbow move (0.3 rad) on an arm whose states are stamped 1 s behind this
    node's clock, the arm on its reference at its own clock: every corrected point is within the
    limits (on this node's clock the point due a horizon after its now was 1 s of motion ahead of
    the arm: refused as an implied velocity over the limit)."""
    sup, out, mono, ros = running(model, force_control=True)
    sup.joint_state(HOME.copy(), np.zeros(6), stamp=ros.t - 1.0)
    off = np.zeros(6)
    off[2] = 0.3
    names = list(JOINTS)
    parse = lambda: (names, np.array([0.0, 4.0]), np.stack([HOME, HOME + off]), np.zeros((2, 6)),  # noqa: E731
                     ros.t - 0.5)
    assert sup.command(parse, lambda: None), sup.last_refusal
    for _ in range(300):  # 3 s at 100 Hz
        mono.t += 0.01
        ros.t += 0.01
        ref = sup.fc.schedule.sample(ros.t - 1.0)
        q = HOME.copy() if ref is None else ref[0]
        sup.joint_state(q, np.zeros(6) if ref is None else ref[1], stamp=ros.t - 1.0)
        sup.readings(calm(mono.t), mono.t)
        sup.stream()
    assert sup.stream_refused == 0, sup.last_refusal
    assert len(out.points) > 250
